"""``Parameter``: a leaf Tensor that a [`Module`][xpgrad.nn.Module] registers as a weight."""

from __future__ import annotations

from typing import Any

from .._policy import current_policy
from ..autograd._tensor import Tensor

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A Tensor that is a module's weight: a leaf with ``requires_grad=True`` by default.

    Assigning a Parameter to a Module attribute registers it, so it appears in
    ``parameters()`` and ``state_dict()``. Operations on a Parameter return plain
    Tensors; in-place updates under ``no_grad`` (what optimizers do) keep the object.

    Args:
        data: a Tensor or a backend array (shared, not copied).
        requires_grad: whether the parameter is trained.

    Examples:
        >>> import xpgrad as xg
        >>> w = xg.nn.Parameter(xg.zeros(2))
        >>> w.requires_grad, w.is_leaf
        (True, True)
        >>> type(w * 2).__name__
        'Tensor'
    """

    __slots__ = ()

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        if data is None:
            p = current_policy()
            data = p.xp.zeros((0,), dtype=p.float_dtype(), device=p.device)
        if isinstance(data, Tensor):
            data = data.data
        super().__init__(data, requires_grad=requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (Parameter, (self.data, self.requires_grad))
