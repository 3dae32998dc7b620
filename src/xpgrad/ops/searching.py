"""Searching functions: integer outputs, so declared non-differentiable.

``where`` belongs to this chapter of the standard but is differentiable; it lives
with the elementwise functions ([`xpgrad.ops.elementwise`][xpgrad.ops.elementwise]).
"""

from __future__ import annotations

from typing import Any, Literal

from ._common import Array, apply, primitive
from ._registry import Chapter

__all__ = ["argmax", "argmin", "count_nonzero", "nonzero", "searchsorted"]

_C = "searching"
# searchsorted passes sorter, when given, as a third array argument: written by hand
op = Chapter(_C, module=__name__, extra=("searchsorted",))


def _searchsorted_fwd(xp: Any, x1: Any, x2: Any, *sorter: Any, side: str) -> Any:
    return xp.searchsorted(x1, x2, side=side, sorter=sorter[0] if sorter else None)


_searchsorted = primitive("searchsorted", _searchsorted_fwd, nondiff=True, chapter=_C)


@op.function(fwd=lambda xp, x, **kw: xp.argmax(x, **kw), nondiff=True)
def argmax(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """Index of the largest element along ``axis`` (of the flattened array by default).

    The first occurrence wins on ties. Not differentiable (integer output).

    Examples:
        >>> import xpgrad as xg
        >>> xg.argmax(xg.asarray([[1.0, 5.0], [7.0, 2.0]]), axis=1)
        Tensor([1, 0], dtype=int64, device=cpu)
    """


@op.function(fwd=lambda xp, x, **kw: xp.argmin(x, **kw), nondiff=True)
def argmin(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """Index of the smallest element along ``axis`` (of the flattened array by default).

    The first occurrence wins on ties. Not differentiable (integer output).

    Examples:
        >>> import xpgrad as xg
        >>> xg.argmin(xg.asarray([3.0, 1.0, 1.0]))
        Tensor(1, dtype=int64, device=cpu)
    """


@op.function(fwd=lambda xp, x, **kw: xp.count_nonzero(x, **kw), nondiff=True)
def count_nonzero(x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:
    """Number of nonzero elements over ``axis`` (all axes by default). Not differentiable.

    Examples:
        >>> import xpgrad as xg
        >>> xg.count_nonzero(xg.asarray([[0.0, 1.0], [2.0, 3.0]]), axis=1)
        Tensor([1, 2], dtype=int64, device=cpu)
    """


@op.function(fwd=lambda xp, x: tuple(xp.nonzero(x)), nondiff=True, multi=True)
def nonzero(x: Array, /) -> tuple[Array, ...]:
    """Indices of the nonzero elements: one integer array per dimension. Not differentiable.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nonzero(xg.asarray([0.0, 2.0, 0.0, 3.0]))
        (Tensor([1, 3], dtype=int64, device=cpu),)
    """


def searchsorted(
    x1: Array, x2: Array | int | float, /, *, side: Literal["left", "right"] = "left", sorter: Array | None = None
) -> Array:
    """Indices at which inserting ``x2`` keeps the one-dimensional ``x1`` sorted.

    ``sorter`` (indices that sort ``x1``) is for an unsorted ``x1``. Not differentiable.

    Examples:
        >>> import xpgrad as xg
        >>> xg.searchsorted(xg.asarray([1.0, 2.0, 3.0]), xg.asarray([2.0, 0.5]), side="right")
        Tensor([2, 0], dtype=int64, device=cpu)
    """
    args = (x1, x2) if sorter is None else (x1, x2, sorter)
    return apply(_searchsorted, args, {"side": side})


op.check_all(__all__)
