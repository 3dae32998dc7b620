"""Activation modules: thin wrappers over [`xpgrad.nn.functional`][xpgrad.nn.functional]."""

from __future__ import annotations

from typing import Any

from .._backends import resolve_device
from .._dtypes import dtype_name, to_backend
from .._exceptions import XpgradValueError
from .._policy import current_policy
from ..autograd._tensor import Tensor
from . import functional as F  # noqa: N812 - PyTorch's conventional alias
from .module import Module
from .parameter import Parameter

__all__ = ["CELU", "ELU", "GELU", "GLU", "PReLU", "RReLU", "SELU", "Hardshrink", "Hardsigmoid", "Hardswish",
           "Hardtanh", "LeakyReLU", "LogSigmoid", "LogSoftmax", "Mish", "ReLU", "ReLU6", "SiLU", "Sigmoid",
           "Softmax", "Softplus", "Softshrink", "Softsign", "Tanh", "Tanhshrink", "Threshold"]


class ReLU(Module):
    """``max(x, 0)`` (see [`xpgrad.nn.functional.relu`][xpgrad.nn.functional.relu])."""

    def forward(self, input: Any) -> Tensor:
        return F.relu(input)


class LeakyReLU(Module):
    """``x`` where positive, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, input: Any) -> Tensor:
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class GELU(Module):
    """``x * Phi(x)``; ``approximate="tanh"`` for the tanh approximation.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.GELU(approximate="tanh")
        GELU(approximate='tanh')
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            msg = f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}"
            raise XpgradValueError(msg)
        self.approximate = approximate

    def forward(self, input: Any) -> Tensor:
        return F.gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """``x * sigmoid(x)``."""

    def forward(self, input: Any) -> Tensor:
        return F.silu(input)


class Tanh(Module):
    """The hyperbolic tangent."""

    def forward(self, input: Any) -> Tensor:
        return F.tanh(input)


class Sigmoid(Module):
    """The logistic function."""

    def forward(self, input: Any) -> Tensor:
        return F.sigmoid(input)


class Softplus(Module):
    """``log(1 + exp(beta x)) / beta``, linear above ``threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Any) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class ELU(Module):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, input: Any) -> Tensor:
        return F.elu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softmax(Module):
    """Softmax along ``axis`` (PyTorch's ``dim=`` is accepted too)."""

    def __init__(self, axis: int | None = None, *, dim: int | None = None) -> None:
        super().__init__()
        self.axis = F._axis(axis, dim, "Softmax")

    def forward(self, input: Any) -> Tensor:
        return F.softmax(input, self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class LogSoftmax(Module):
    """Log-softmax along ``axis`` (PyTorch's ``dim=`` is accepted too)."""

    def __init__(self, axis: int | None = None, *, dim: int | None = None) -> None:
        super().__init__()
        self.axis = F._axis(axis, dim, "LogSoftmax")

    def forward(self, input: Any) -> Tensor:
        return F.log_softmax(input, self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class _Plain(Module):
    """An activation without arguments: ``forward`` is ``_fn``."""

    _fn: Any

    def forward(self, input: Any) -> Tensor:
        return type(self)._fn(input)


class SELU(_Plain):
    """The self-normalizing ELU (see `xpgrad.nn.functional.selu`).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.SELU()(xg.asarray([1.0]))
        Tensor([1.05070099], dtype=float64, device=cpu)
    """

    _fn = F.selu


class ReLU6(_Plain):
    """``min(max(x, 0), 6)`` (see `xpgrad.nn.functional.relu6`).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.ReLU6()(xg.asarray([-1.0, 7.0]))
        Tensor([0., 6.], dtype=float64, device=cpu)
    """

    _fn = F.relu6


class Hardswish(_Plain):
    """``x * relu6(x + 3) / 6`` (see `xpgrad.nn.functional.hardswish`).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Hardswish()(xg.asarray([4.0]))
        Tensor([4.], dtype=float64, device=cpu)
    """

    _fn = F.hardswish


class Hardsigmoid(_Plain):
    """``relu6(x + 3) / 6`` (see `xpgrad.nn.functional.hardsigmoid`).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Hardsigmoid()(xg.asarray([0.0]))
        Tensor([0.5], dtype=float64, device=cpu)
    """

    _fn = F.hardsigmoid


class Tanhshrink(_Plain):
    """``x - tanh(x)`` (see `xpgrad.nn.functional.tanhshrink`).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Tanhshrink()(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """

    _fn = F.tanhshrink


class Mish(_Plain):
    """``x * tanh(softplus(x))`` (see `xpgrad.nn.functional.mish`).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Mish()(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """

    _fn = F.mish


class LogSigmoid(_Plain):
    """``log(sigmoid(x))`` (see `xpgrad.nn.functional.logsigmoid`).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.LogSigmoid()(xg.asarray([-1000.0]))
        Tensor([-1000.], dtype=float64, device=cpu)
    """

    _fn = F.logsigmoid


class Softsign(_Plain):
    """``x / (1 + |x|)`` (see `xpgrad.nn.functional.softsign`).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Softsign()(xg.asarray([1.0]))
        Tensor([0.5], dtype=float64, device=cpu)
    """

    _fn = F.softsign


class CELU(Module):
    """``x`` where positive, else ``alpha * (exp(x / alpha) - 1)``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.CELU(alpha=2.0)
        CELU(alpha=2.0)
    """

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, input: Any) -> Tensor:
        return F.celu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Hardtanh(Module):
    """``x`` clipped to ``[min_val, max_val]``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Hardtanh(-2.0, 2.0)(xg.asarray([3.0]))
        Tensor([2.], dtype=float64, device=cpu)
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0) -> None:
        super().__init__()
        if min_val > max_val:
            msg = f"Hardtanh: min_val must not exceed max_val, got {min_val!r} and {max_val!r}"
            raise XpgradValueError(msg)
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, input: Any) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class Softshrink(Module):
    """Shrink toward 0 by ``lambd``, 0 inside ``[-lambd, lambd]``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Softshrink(0.5)(xg.asarray([1.0]))
        Tensor([0.5], dtype=float64, device=cpu)
    """

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Any) -> Tensor:
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"lambd={self.lambd}"


class Hardshrink(Module):
    """``x`` where ``|x| > lambd``, else 0.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Hardshrink(0.5)(xg.asarray([0.4, 1.0]))
        Tensor([0., 1.], dtype=float64, device=cpu)
    """

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Any) -> Tensor:
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"lambd={self.lambd}"


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Threshold(1.0, -1.0)(xg.asarray([0.5, 2.0]))
        Tensor([-1.,  2.], dtype=float64, device=cpu)
    """

    def __init__(self, threshold: float, value: float) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value

    def forward(self, input: Any) -> Tensor:
        return F.threshold(input, self.threshold, self.value)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}"


class GLU(Module):
    """The gated linear unit along ``dim`` (see `xpgrad.nn.functional.glu`).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.GLU()(xg.asarray([2.0, 0.0]))
        Tensor([1.], dtype=float64, device=cpu)
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """Leaky ReLU with a learnable slope: one shared (``num_parameters=1``) or one per channel (axis 1).

    The weight is made on the current policy (namespace, device, dtype; float32 by default).

    Examples:
        >>> import xpgrad as xg
        >>> m = xg.nn.PReLU()
        >>> m
        PReLU(num_parameters=1)
        >>> m(xg.asarray([-1.0, 2.0], dtype="float32")).detach()
        Tensor([-0.25,  2.  ], dtype=float32, device=cpu)
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if not isinstance(num_parameters, int) or num_parameters < 1:
            msg = f"PReLU: num_parameters must be a positive int, got {num_parameters!r}"
            raise XpgradValueError(msg)
        self.num_parameters = num_parameters
        p = current_policy()
        name = dtype_name(dtype, func="PReLU") if dtype is not None else (p.dtype or "float32")
        dev = resolve_device(p.xp, device) if device is not None else p.device
        self.weight = Parameter(p.xp.full((num_parameters,), init, dtype=to_backend(name, p.xp, func="PReLU"), device=dev))

    def forward(self, input: Any) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """Randomized leaky ReLU: random slopes in ``[lower, upper)`` when training, their mean in eval mode.

    Examples:
        >>> import xpgrad as xg
        >>> m = xg.nn.RReLU(0.1, 0.3).eval()
        >>> m(xg.asarray([-1.0, 2.0]))
        Tensor([-0.2,  2. ], dtype=float64, device=cpu)
    """

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3) -> None:
        super().__init__()
        if not 0 <= lower <= upper:
            msg = f"RReLU: need 0 <= lower <= upper, got lower={lower!r} and upper={upper!r}"
            raise XpgradValueError(msg)
        self.lower = lower
        self.upper = upper

    def forward(self, input: Any) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}"
