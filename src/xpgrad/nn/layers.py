"""Layers with parameters or shape logic: linear, convolution, pooling, normalization, embedding, reshaping.

Same constructor arguments, attribute names, parameter shapes, defaults and
initialization distributions as ``torch.nn``, so a PyTorch ``state_dict`` loads
as it is.
"""

from __future__ import annotations

import math
from typing import Any

from .. import _namespace as xg
from .._backends import resolve_device
from .._dtypes import dtype_name, to_backend
from .._exceptions import XpgradTypeError, XpgradValueError
from .._lazy import note_update
from .._policy import current_policy
from ..autograd._batched import Batched
from ..autograd._grad_mode import RECOMPUTING, no_grad
from ..autograd._tensor import Tensor
from . import functional as F  # noqa: N812 - PyTorch's conventional alias
from . import init
from ._checks import check_dtype, check_float, check_indices
from .conv import PADDING_MODES, _pad_spatial, _same_padding, ntuple
from .module import Module
from .parameter import Parameter

__all__ = [
    "AdaptiveAvgPool2d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Bilinear", "Conv1d", "Conv2d", "ConvTranspose2d",
    "Dropout", "Embedding", "Flatten", "GroupNorm", "Identity", "LayerNorm", "Linear", "MaxPool2d", "Unflatten",
]


def _empty(shape: tuple[int, ...], dtype: Any = None, device: Any = None, func: str = "nn") -> Parameter:
    """A zero Parameter on the policy's namespace and device; float32 unless a dtype is set (as PyTorch).

    ``func``, the layer's name, is the one errors name (a dtype the library lacks: bfloat16 on NumPy)."""
    p = current_policy()
    name = dtype_name(dtype, func=func) if dtype is not None else (p.dtype or "float32")
    dev = resolve_device(p.xp, device) if device is not None else p.device
    return Parameter(p.xp.zeros(shape, dtype=to_backend(name, p.xp, func=func), device=dev))


def _buffer(shape: tuple[int, ...], value: float, dtype: Any = None, device: Any = None, *,
            integer: bool = False, func: str = "nn") -> Tensor:
    """A constant Tensor (a buffer) on the policy's namespace and device, like `_empty`'s parameters."""
    p = current_policy()
    name = "int64" if integer else (dtype_name(dtype, func=func) if dtype is not None else (p.dtype or "float32"))
    dev = resolve_device(p.xp, device) if device is not None else p.device
    return Tensor(p.xp.full(shape, value, dtype=to_backend(name, p.xp, func=func), device=dev))


def _positive(value: Any, what: str, func: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        msg = f"{func}: {what} must be a non-negative int, got {value!r}"
        raise XpgradValueError(msg)
    return value


class Identity(Module):
    """Returns its input unchanged (a placeholder in a Sequential).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Identity()(xg.asarray([1.0]))
        Tensor([1.], dtype=float64, device=cpu)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape ``(out_features, in_features)``.

    Initialized as PyTorch does: ``U(-1/sqrt(in_features), 1/sqrt(in_features))`` for both,
    from [`xpgrad.random`][xpgrad.random] (reproducible under a policy seed). Parameters are
    created on the policy's namespace and device, in float32 unless the policy or
    ``dtype=`` names another dtype.

    Examples:
        >>> import xpgrad as xg
        >>> layer = xg.nn.Linear(3, 2)
        >>> layer.weight.shape, layer.bias.dtype
        ((2, 3), xpgrad.float32)
        >>> layer(xg.ones((5, 3), dtype=xg.float32)).shape
        (5, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 dtype: Any = None, device: Any = None) -> None:
        super().__init__()
        self.in_features = _positive(in_features, "in_features", "Linear")
        self.out_features = _positive(out_features, "out_features", "Linear")
        self.weight = _empty((out_features, in_features), dtype, device, type(self).__name__)
        if bias:
            self.bias = _empty((out_features,), dtype, device, type(self).__name__)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw the weights (kaiming uniform with a=sqrt(5), PyTorch's default)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Any) -> Tensor:
        try:
            return F.linear(input, self.weight, self.bias)  # (checks the dtypes: nothing promotes)
        except Exception:  # say it as the layer: Linear(in_features=..., out_features=...)
            check_dtype(input, self, self.weight, self.bias)
            F._check_linear(input, self.weight, f"Linear(in_features={self.in_features}, out_features={self.out_features})")
            raise

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Flatten(Module):
    """Flatten axes ``start_dim`` .. ``end_dim`` into one.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Flatten()(xg.zeros((2, 3, 4))).shape
        (2, 12)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Any) -> Tensor:
        shape = tuple(input.shape)
        nd = len(shape)
        if nd == 0:
            return xg.reshape(input, (1,))
        s, e = self.start_dim % nd, self.end_dim % nd
        if s > e:
            msg = f"Flatten: start_dim {self.start_dim} comes after end_dim {self.end_dim} for a {nd}-D input"
            raise XpgradValueError(msg)
        return xg.reshape(input, (*shape[:s], math.prod(shape[s:e + 1]), *shape[e + 1:]))

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split axis ``dim`` into ``unflattened_size``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Unflatten(1, (3, 4))(xg.zeros((2, 12))).shape
        (2, 3, 4)
    """

    def __init__(self, dim: int, unflattened_size: tuple[int, ...]) -> None:
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input: Any) -> Tensor:
        shape = tuple(input.shape)
        d = self.dim % len(shape)
        size = self.unflattened_size
        known = math.prod(s for s in size if s != -1)
        if (-1 not in size and known != shape[d]) or (-1 in size and (known == 0 or shape[d] % known)):
            msg = f"Unflatten: cannot split axis {self.dim} of size {shape[d]} into {size}"
            raise XpgradValueError(msg)
        return xg.reshape(input, (*shape[:d], *size, *shape[d + 1:]))

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Dropout(Module):
    """Zero elements with probability ``p`` while training (scaling the rest by ``1/(1-p)``); identity in eval.

    Examples:
        >>> import xpgrad as xg
        >>> drop = xg.nn.Dropout(0.5).eval()
        >>> drop(xg.ones(3))
        Tensor([1., 1., 1.], dtype=float64, device=cpu)
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            msg = f"Dropout: p must be in [0, 1], got {p!r}"
            raise XpgradValueError(msg)
        self.p = p

    def forward(self, input: Any) -> Tensor:
        return F.dropout(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim``, initialized ``N(0, 1)``.

    The row ``padding_idx`` starts at zero and gets no gradient.

    Examples:
        >>> import xpgrad as xg
        >>> emb = xg.nn.Embedding(10, 4, padding_idx=0)
        >>> emb(xg.asarray([[0, 3]])).shape
        (1, 2, 4)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None, *,
                 dtype: Any = None, device: Any = None) -> None:
        super().__init__()
        self.num_embeddings = _positive(num_embeddings, "num_embeddings", "Embedding")
        self.embedding_dim = _positive(embedding_dim, "embedding_dim", "Embedding")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                msg = f"Embedding: padding_idx must be within num_embeddings ({num_embeddings}), got {padding_idx}"
                raise XpgradValueError(msg)
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        self.weight = _empty((num_embeddings, embedding_dim), dtype, device, type(self).__name__)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input: Any) -> Tensor:
        check_indices(input, self)
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else s + f", padding_idx={self.padding_idx}"


class LayerNorm(Module):
    """Layer normalization over the trailing ``normalized_shape`` axes, with a learned scale and shift.

    Examples:
        >>> import xpgrad as xg
        >>> ln = xg.nn.LayerNorm(4)
        >>> ln
        LayerNorm((4,), eps=1e-05, elementwise_affine=True)
        >>> ln(xg.ones((2, 4), dtype=xg.float32)).shape
        (2, 4)
    """

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, *, dtype: Any = None, device: Any = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = _empty(shape, dtype, device, type(self).__name__)
            init.ones_(self.weight)
            if bias:
                self.bias = _empty(shape, dtype, device, type(self).__name__)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Any) -> Tensor:
        check_dtype(input, self, self.weight, self.bias)
        check_float(input, self)
        shape, k = tuple(input.shape), len(self.normalized_shape)
        if shape[len(shape) - k:] != self.normalized_shape:
            msg = (f"LayerNorm({self.normalized_shape}): expected an input whose trailing axes are "
                   f"{self.normalized_shape} (normalized_shape), got shape {shape}")
            raise XpgradValueError(msg)
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Bilinear(Module):
    """``y = x1^T A x2 + b`` with ``weight`` of shape ``(out_features, in1_features, in2_features)``.

    Both parameters start ``U(-1/sqrt(in1_features), 1/sqrt(in1_features))``, as PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> layer = xg.nn.Bilinear(3, 4, 2)
        >>> layer(xg.ones((5, 3), dtype=xg.float32), xg.ones((5, 4), dtype=xg.float32)).shape
        (5, 2)
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, *,
                 dtype: Any = None, device: Any = None) -> None:
        super().__init__()
        self.in1_features = _positive(in1_features, "in1_features", "Bilinear")
        self.in2_features = _positive(in2_features, "in2_features", "Bilinear")
        self.out_features = _positive(out_features, "out_features", "Bilinear")
        self.weight = _empty((out_features, in1_features, in2_features), dtype, device, type(self).__name__)
        if bias:
            self.bias = _empty((out_features,), dtype, device, type(self).__name__)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw the parameters from ``U(-1/sqrt(in1_features), 1/sqrt(in1_features))``."""
        bound = 1.0 / math.sqrt(self.in1_features) if self.in1_features > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Any, input2: Any) -> Tensor:
        check_dtype(input1, self, self.weight, self.bias, what="input1")
        check_dtype(input2, self, self.weight, self.bias, what="input2")
        s1, s2 = tuple(input1.shape), tuple(input2.shape)
        if not s1 or not s2 or s1[-1] != self.in1_features or s2[-1] != self.in2_features or s1[:-1] != s2[:-1]:
            msg = (f"Bilinear(in1_features={self.in1_features}, in2_features={self.in2_features}): expected inputs "
                   f"of shapes (..., {self.in1_features}) and (..., {self.in2_features}) with the same leading axes, "
                   f"got {s1} and {s2}")
            raise XpgradValueError(msg)
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


# ---------------------------------------------------------------------- convolution
class _ConvNd(Module):
    """Shared constructor, initialization, repr and (for Conv1d/Conv2d) forward of the convolution layers."""

    _n = 2
    _transposed = False

    def forward(self, input: Any) -> Tensor:
        check_dtype(input, self, self.weight, self.bias)
        conv = F.conv1d if self._n == 1 else F.conv2d
        if self.padding_mode == "zeros":
            return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        x = _pad_spatial(input, self._pads(), self.padding_mode)
        return conv(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any, padding: Any,
                 dilation: Any, groups: int, bias: bool, padding_mode: str, output_padding: Any,
                 dtype: Any, device: Any) -> None:
        super().__init__()
        func, n = type(self).__name__, self._n
        self.in_channels = _positive(in_channels, "in_channels", func)
        self.out_channels = _positive(out_channels, "out_channels", func)
        if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
            msg = f"{func}: groups must be a positive int, got {groups!r}"
            raise XpgradValueError(msg)
        if in_channels % groups or out_channels % groups:
            msg = (f"{func}: in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible "
                   f"by groups ({groups})")
            raise XpgradValueError(msg)
        allowed = ("zeros",) if self._transposed else PADDING_MODES
        if padding_mode not in allowed:
            msg = f"{func}: padding_mode must be one of {list(allowed)}, got {padding_mode!r}"
            raise XpgradValueError(msg)
        self.kernel_size = ntuple(kernel_size, n, "kernel_size", func, 1)
        self.stride = ntuple(stride, n, "stride", func, 1)
        self.dilation = ntuple(dilation, n, "dilation", func, 1)
        if isinstance(padding, str) and not self._transposed:
            if padding not in ("same", "valid"):
                msg = f"{func}: padding must be 'valid', 'same', an int or a tuple of {n} ints, got {padding!r}"
                raise XpgradValueError(msg)
            if padding == "same" and any(s != 1 for s in self.stride):
                msg = f"{func}: padding='same' needs stride 1, got stride={self.stride}"
                raise XpgradValueError(msg)
            self.padding: Any = padding
        else:
            self.padding = ntuple(padding, n, "padding", func)
        self.output_padding = ntuple(output_padding, n, "output_padding", func)
        self.groups = groups
        self.padding_mode = padding_mode
        self.transposed = self._transposed
        shape = ((in_channels, out_channels // groups) if self._transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = _empty(shape, dtype, device, type(self).__name__)
        if bias:
            self.bias = _empty((out_channels,), dtype, device, type(self).__name__)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw the parameters as PyTorch: kaiming uniform (a=sqrt(5)), bias ``U(-1/sqrt(fan_in), ...)``."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            per_group = (self.out_channels if self._transposed else self.in_channels) // self.groups
            fan_in = per_group * math.prod(self.kernel_size)
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def _pads(self) -> list[tuple[int, int]]:
        """The (lo, hi) padding of each spatial axis for an explicit (non-zeros mode) pad."""
        if self.padding == "valid":
            return [(0, 0)] * self._n
        if self.padding == "same":
            return _same_padding(self.kernel_size, self.dilation)
        return [(p, p) for p in self.padding]

    def extra_repr(self) -> str:
        n = self._n
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_ConvNd):
    """2-D convolution (cross-correlation) over ``(N, C_in, H, W)`` or ``(C_in, H, W)`` inputs.

    ``weight``: ``(out_channels, in_channels / groups, kh, kw)``; ``padding``: an
    int, a pair, ``"valid"`` or ``"same"``; ``padding_mode``: ``"zeros"``,
    ``"reflect"``, ``"replicate"`` or ``"circular"``. See
    [`xpgrad.nn.functional.conv2d`][xpgrad.nn.functional.conv2d].

    Examples:
        >>> import xpgrad as xg
        >>> conv = xg.nn.Conv2d(1, 16, 3, padding=1)
        >>> conv
        Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
        >>> conv(xg.ones((64, 1, 8, 8), dtype=xg.float32)).shape
        (64, 16, 8, 8)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int],
                 stride: int | tuple[int, int] = 1, padding: str | int | tuple[int, int] = 0,
                 dilation: int | tuple[int, int] = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", *, dtype: Any = None, device: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, dtype, device)


class Conv1d(_ConvNd):
    """1-D convolution over ``(N, C_in, L)`` or ``(C_in, L)`` inputs; the arguments of [`Conv2d`][xpgrad.nn.Conv2d].

    Examples:
        >>> import xpgrad as xg
        >>> conv = xg.nn.Conv1d(4, 8, 3, padding="same", bias=False)
        >>> conv.weight.shape, conv(xg.ones((2, 4, 10), dtype=xg.float32)).shape
        ((8, 4, 3), (2, 8, 10))
    """

    _n = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int],
                 stride: int | tuple[int] = 1, padding: str | int | tuple[int] = 0,
                 dilation: int | tuple[int] = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", *, dtype: Any = None, device: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, dtype, device)


class ConvTranspose2d(_ConvNd):
    """2-D transposed convolution; ``weight``: ``(in_channels, out_channels / groups, kh, kw)``.

    ``forward(input, output_size=None)``: ``output_size`` picks the output
    padding that gives that size, as PyTorch. See
    [`xpgrad.nn.functional.conv_transpose2d`][xpgrad.nn.functional.conv_transpose2d].

    Examples:
        >>> import xpgrad as xg
        >>> up = xg.nn.ConvTranspose2d(16, 8, 2, stride=2)
        >>> up.weight.shape, up(xg.ones((1, 16, 4, 4), dtype=xg.float32)).shape
        ((16, 8, 2, 2), (1, 8, 8, 8))
    """

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int],
                 stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0,
                 output_padding: int | tuple[int, int] = 0, groups: int = 1, bias: bool = True,
                 dilation: int | tuple[int, int] = 1, padding_mode: str = "zeros", *,
                 dtype: Any = None, device: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, dtype, device)

    def _output_padding(self, input: Any, output_size: Any) -> tuple[int, ...]:
        if output_size is None:
            return self.output_padding
        size = tuple(output_size)[-2:]
        in_size = tuple(input.shape)[-2:]
        pads = []
        for k in range(2):
            least = ((in_size[k] - 1) * self.stride[k] - 2 * self.padding[k]
                     + self.dilation[k] * (self.kernel_size[k] - 1) + 1)
            if len(size) != 2 or not least <= size[k] < least + self.stride[k]:
                msg = (f"ConvTranspose2d: output_size {tuple(output_size)} is not reachable from an input of "
                       f"size {in_size}; each size must lie in [{least}, {least + self.stride[k] - 1}]")
                raise XpgradValueError(msg)
            pads.append(size[k] - least)
        return tuple(pads)

    def forward(self, input: Any, output_size: Any = None) -> Tensor:
        check_dtype(input, self, self.weight, self.bias)
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


# ---------------------------------------------------------------------- pooling
class MaxPool2d(Module):
    """Max pooling over ``kernel_size`` windows (``stride`` defaults to ``kernel_size``).

    The gradient goes to the first maximum of each window; see
    [`xpgrad.nn.functional.max_pool2d`][xpgrad.nn.functional.max_pool2d].

    Examples:
        >>> import xpgrad as xg
        >>> pool = xg.nn.MaxPool2d(2)
        >>> pool
        MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
        >>> pool(xg.ones((1, 3, 8, 8))).shape
        (1, 3, 4, 4)
    """

    def __init__(self, kernel_size: int | tuple[int, int], stride: int | tuple[int, int] | None = None,
                 padding: int | tuple[int, int] = 0, dilation: int | tuple[int, int] = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        ntuple(kernel_size, 2, "kernel_size", "MaxPool2d", 1)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Any) -> Any:
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Average pooling over ``kernel_size`` windows; see [`xpgrad.nn.functional.avg_pool2d`][xpgrad.nn.functional.avg_pool2d].

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.AvgPool2d(2, padding=1, count_include_pad=False)(xg.ones((1, 1, 4, 4)))[0, 0, 0]
        Tensor([1., 1., 1.], dtype=float64, device=cpu)
    """

    def __init__(self, kernel_size: int | tuple[int, int], stride: int | tuple[int, int] | None = None,
                 padding: int | tuple[int, int] = 0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        ntuple(kernel_size, 2, "kernel_size", "AvgPool2d", 1)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Any) -> Tensor:
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed ``output_size`` (an int, or a pair whose ``None`` keeps the input size).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.AdaptiveAvgPool2d((1, 1))(xg.ones((2, 5, 7, 7))).shape
        (2, 5, 1, 1)
    """

    def __init__(self, output_size: int | tuple[int | None, int | None]) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Any) -> Tensor:
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


# ---------------------------------------------------------------------- normalization
class _BatchNorm(Module):
    """Batch normalization over axis 1, with PyTorch's buffers and train/eval behaviour."""

    _dims: tuple[int, ...] = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, *, bias: bool = True, dtype: Any = None,
                 device: Any = None) -> None:
        super().__init__()
        func = type(self).__name__
        self.num_features = _positive(num_features, "num_features", func)
        if momentum is not None and not isinstance(momentum, (int, float)):
            msg = f"{func}: momentum must be a float or None (cumulative average), got {momentum!r}"
            raise XpgradTypeError(msg)
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = _empty((num_features,), dtype, device, type(self).__name__)
            if bias:
                self.bias = _empty((num_features,), dtype, device, type(self).__name__)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _buffer((num_features,), 0.0, dtype, device, func=type(self).__name__))
            self.register_buffer("running_var", _buffer((num_features,), 1.0, dtype, device, func=type(self).__name__))
            self.register_buffer("num_batches_tracked", _buffer((), 0, device=device, integer=True))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batch tracked."""
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            with no_grad():
                self.num_batches_tracked[...] = 0

    def reset_parameters(self) -> None:
        """Reset the running statistics, and the scale to 1 and the shift to 0."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Any) -> Tensor:
        nd = len(tuple(input.shape))
        if nd not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            msg = f"{type(self).__name__}: expected {want} input, got {nd}D input of shape {tuple(input.shape)}"
            raise XpgradValueError(msg)
        if input.shape[1] != self.num_features:
            msg = (f"{type(self).__name__}({self.num_features}): expected {self.num_features} channels "
                   f"(num_features, axis 1), got input of shape {tuple(input.shape)}")
            raise XpgradValueError(msg)
        check_dtype(input, self, self.weight, self.bias, self.running_mean, self.running_var)
        check_float(input, self)
        if self.training and self.track_running_stats and isinstance(input, Batched):
            # (refused before any buffer changes: num_batches_tracked is not counted either)
            msg = (f"{type(self).__name__}: inside vmap, training mode cannot update running_mean/running_var "
                   "(each example would update them differently); use eval mode, or track_running_stats=False "
                   "(per-example batch statistics)")
            raise XpgradValueError(msg)
        factor = 0.0 if self.momentum is None else self.momentum
        # (not in checkpoint's recomputation in backward: the forward counted this batch already)
        if self.training and self.track_running_stats and self.num_batches_tracked is not None and not RECOMPUTING.get():
            tracked = self.num_batches_tracked
            with no_grad():
                tracked += 1
            note_update(tracked)  # on Dask: persisted by the next optimizer step
            factor = 1.0 / int(tracked) if self.momentum is None else self.momentum
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                            self.weight, self.bias, use_batch, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization of ``(N, C)`` or ``(N, C, L)`` inputs over every axis but the channels.

    Training normalizes with the batch statistics and updates ``running_mean``
    and ``running_var`` (exponential average with ``momentum``, or the cumulative
    average when ``momentum=None``) and ``num_batches_tracked``; ``eval()`` uses
    the running statistics. See [`xpgrad.nn.functional.batch_norm`][xpgrad.nn.functional.batch_norm].

    Examples:
        >>> import xpgrad as xg
        >>> bn = xg.nn.BatchNorm1d(2)
        >>> bn
        BatchNorm1d(2, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
        >>> y = bn(xg.asarray([[1.0, 10.0], [3.0, 30.0]], dtype=xg.float32))
        >>> bn.running_mean, int(bn.num_batches_tracked)
        (Tensor([0.2, 2. ], dtype=float32, device=cpu), 1)
    """

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of ``(N, C, H, W)`` inputs per channel; see [`BatchNorm1d`][xpgrad.nn.BatchNorm1d].

    Examples:
        >>> import xpgrad as xg
        >>> bn = xg.nn.BatchNorm2d(3, momentum=None).eval()
        >>> bn(xg.ones((2, 3, 4, 4), dtype=xg.float32)).shape
        (2, 3, 4, 4)
    """

    _dims = (4,)


class GroupNorm(Module):
    """Group normalization: ``num_channels`` split into ``num_groups`` groups, each normalized on its own.

    Examples:
        >>> import xpgrad as xg
        >>> gn = xg.nn.GroupNorm(2, 4)
        >>> gn
        GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)
        >>> gn(xg.ones((3, 4, 5), dtype=xg.float32)).shape
        (3, 4, 5)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, *,
                 bias: bool = True, dtype: Any = None, device: Any = None) -> None:
        super().__init__()
        self.num_groups = _positive(num_groups, "num_groups", "GroupNorm")
        self.num_channels = _positive(num_channels, "num_channels", "GroupNorm")
        if num_groups == 0 or num_channels % num_groups:
            msg = f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"
            raise XpgradValueError(msg)
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = _empty((num_channels,), dtype, device, type(self).__name__)
            init.ones_(self.weight)
            if bias:
                self.bias = _empty((num_channels,), dtype, device, type(self).__name__)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Any) -> Tensor:
        check_dtype(input, self, self.weight, self.bias)
        check_float(input, self)
        shape = tuple(input.shape)
        if len(shape) < 2 or shape[1] != self.num_channels:
            msg = (f"GroupNorm({self.num_groups}, {self.num_channels}): expected an input of shape "
                   f"(N, {self.num_channels}, ...), got {shape}")
            raise XpgradValueError(msg)
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, bias={self.bias is not None}"
