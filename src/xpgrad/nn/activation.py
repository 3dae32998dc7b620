"""Activation modules: thin wrappers over [`xpgrad.nn.functional`][xpgrad.nn.functional]."""

from __future__ import annotations

from typing import Any

from .._exceptions import XpgradValueError
from ..autograd._tensor import Tensor
from . import functional as F  # noqa: N812 - PyTorch's conventional alias
from .module import Module

__all__ = ["ELU", "GELU", "LeakyReLU", "LogSoftmax", "ReLU", "SiLU", "Sigmoid", "Softmax", "Softplus", "Tanh"]


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
