"""Loss modules: each holds its options and calls [`xpgrad.nn.functional`][xpgrad.nn.functional]."""

from __future__ import annotations

from typing import Any

from .._exceptions import XpgradValueError
from ..autograd._tensor import Tensor
from . import functional as F  # noqa: N812 - PyTorch's conventional alias
from .module import Module

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss", "MSELoss", "NLLLoss",
    "SmoothL1Loss",
]


class _Loss(Module):
    _reductions: tuple[str, ...] = ("mean", "sum", "none")

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in self._reductions:
            msg = f"{type(self).__name__}: reduction must be one of {list(self._reductions)}, got {reduction!r}"
            raise XpgradValueError(msg)
        self.reduction = reduction

    def extra_repr(self) -> str:
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


class _WeightedLoss(_Loss):
    def __init__(self, weight: Any = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error (see [`xpgrad.nn.functional.mse_loss`][xpgrad.nn.functional.mse_loss]).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.MSELoss()(xg.asarray([1.0, 3.0]), xg.asarray([1.0, 1.0]))
        Tensor(2., dtype=float64, device=cpu)
    """

    def forward(self, input: Any, target: Any) -> Tensor:
        return F.mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    """Mean absolute error."""

    def forward(self, input: Any, target: Any) -> Tensor:
        return F.l1_loss(input, target, self.reduction)


class HuberLoss(_Loss):
    """Huber loss: quadratic within ``delta``, linear outside."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Any, target: Any) -> Tensor:
        return F.huber_loss(input, target, self.reduction, self.delta)


class SmoothL1Loss(_Loss):
    """Smooth L1 loss: the Huber loss divided by ``beta``."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input: Any, target: Any) -> Tensor:
        return F.smooth_l1_loss(input, target, self.reduction, self.beta)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of class indices given log-probabilities."""

    def __init__(self, weight: Any = None, ignore_index: int = -100, reduction: str = "mean") -> None:
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Any, target: Any) -> Tensor:
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of logits against class indices or class probabilities.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.CrossEntropyLoss(label_smoothing=0.1)
        CrossEntropyLoss(label_smoothing=0.1)
    """

    def __init__(self, weight: Any = None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(weight, reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            msg = f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing!r}"
            raise XpgradValueError(msg)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Any, target: Any) -> Tensor:
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing)

    def extra_repr(self) -> str:
        parts = [super().extra_repr()] if self.reduction != "mean" else []
        if self.label_smoothing:
            parts.append(f"label_smoothing={self.label_smoothing}")
        return ", ".join(parts)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities."""

    def forward(self, input: Any, target: Any) -> Tensor:
        return F.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """Binary cross entropy of logits, stable for logits of any size."""

    def __init__(self, weight: Any = None, reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__(weight, reduction)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Any, target: Any) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction, self.pos_weight)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of log-probabilities ``input`` from ``target``."""

    _reductions = ("mean", "batchmean", "sum", "none")

    def __init__(self, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input: Any, target: Any) -> Tensor:
        return F.kl_div(input, target, self.reduction, self.log_target)
