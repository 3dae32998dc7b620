"""Searching functions: integer outputs, so declared non-differentiable.

``where`` belongs to this chapter of the standard but is differentiable; it lives
with the elementwise functions ([`xpgrad.ops.elementwise`][xpgrad.ops.elementwise]).

Batching: ``argmax``/``argmin`` and ``count_nonzero`` act along logical axes, shifted
past the batch axes. ``searchsorted`` of a batched ``x2`` in one sorted ``x1`` is the
function itself: ``x2`` may have any shape. A batched ``x1`` (or ``sorter``) is one sorted
array per example: the insertion index is then a count, of the elements below ``v``
(``side="left"``) or at most ``v`` (``"right"``). NaN sorts last, as in ``searchsorted``: no
NaN in ``x1`` is below a finite ``v``, and a NaN ``v`` goes after every number (left) or
every element (right). ``nonzero`` cannot be batched (its shape depends on the data).
"""

from __future__ import annotations

from typing import Any, Literal

from .._dispatch import _raw, backend_namespace
from .._dtypes import kind
from .._exceptions import XpgradValueError
from ..autograd._batched import shift_axis
from ..autograd._batching_util import along_axes, full, is_array, pad, with_new_last_axis
from ..autograd._core import Primitive
from ._common import Array, apply
from ._registry import Chapter, prim_of
from .data_type import _astype
from .elementwise import isnan, less, less_equal, logical_and, logical_not, logical_or
from .indexing import _take_along_axis
from .manipulation import reshape
from .statistical import sum as _sum

__all__ = ["argmax", "argmin", "count_nonzero", "nonzero", "searchsorted"]

_C = "searching"
# every function is an entry; searchsorted's body passes sorter, when given, as a third
# array argument
op = Chapter(_C, module=__name__)


def _searchsorted_fwd(xp: Any, x1: Any, x2: Any, *sorter: Any, side: str) -> Any:
    return xp.searchsorted(x1, x2, side=side, sorter=sorter[0] if sorter else None)


_reshape_p, _isnan_p, _less_p, _less_equal_p = prim_of(reshape), prim_of(isnan), prim_of(less), prim_of(less_equal)
_and_p, _or_p, _not_p, _sum_p = prim_of(logical_and), prim_of(logical_or), prim_of(logical_not), prim_of(_sum)


def _searchsorted_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x1, x2 = xs[0], xs[1]
    sorter = xs[2] if len(xs) > 2 else None
    n1 = len(x1.shape) - K if bs[0] else len(x1.shape)
    if n1 != 1:
        msg = f"searchsorted: x1 must be one-dimensional, got {n1} dimensions (inside vmap)"
        raise XpgradValueError(msg)
    if not bs[0] and not (sorter is not None and bs[2]):  # one sorted x1: x2 of any shape
        return apply(prim, tuple(xs), kw)
    if sorter is not None:
        x1, sorter = full([x1, sorter], [bs[0], bs[2]], K)
        x1 = _take_along_axis(x1, sorter, axis=K)
    elif not bs[0]:
        x1 = _reshape_p(x1, shape=(1,) * K + tuple(x1.shape))
    # x1: (batch, n); x2: (batch, shape) or unbatched; compare along a new last axis
    v, r = with_new_last_axis(x2, bs[1], K)
    s = tuple(x1.shape)
    a = _reshape_p(x1, shape=s[:K] + (1,) * r + s[K:])
    side = kw.get("side", "left")
    floating = kind(x1.dtype) == "real floating"
    if side == "left":
        hit = _less_p(a, v)
        if floating:  # a NaN v goes after every number
            hit = _or_p(hit, _and_p(_isnan_p(v), _not_p(_isnan_p(a))))
    else:
        hit = _less_equal_p(a, v)
        if floating:  # ... and after every element
            hit = _or_p(hit, _isnan_p(v) if is_array(v) else _isnan_p(a))
    # the dtype searchsorted gives on this backend (JAX: int32 even with 64-bit types enabled)
    raw = _raw(x1)
    bxp = backend_namespace(raw)
    one = bxp.reshape(raw, (-1,))[:1]
    dt = bxp.searchsorted(one, one).dtype
    out = _sum_p(_astype(hit, dtype=dt), axis=-1, dtype=dt)
    if not bs[1] and not is_array(x2):
        return out
    return pad(out, K, r)


_searchsorted = op.primitive("searchsorted", fwd=_searchsorted_fwd, nondiff=True, batch=_searchsorted_batch)


def _arg_extremum(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """``argmax``/``argmin``; ``axis=None`` indexes the flattened example."""
    x = xs[0]
    s = tuple(x.shape)
    n = len(s) - K
    axis = kw.get("axis")
    if axis is not None:
        return apply(prim, xs, {**kw, "axis": shift_axis(prim.name, axis, n, K)})
    flat = _reshape_p(x, shape=(*s[:K], -1))
    out = apply(prim, (flat,), {**kw, "axis": K, "keepdims": False})
    if kw.get("keepdims"):
        out = _reshape_p(out, shape=tuple(out.shape) + (1,) * n)
    return out


@op.function(fwd=lambda xp, x, **kw: xp.argmax(x, **kw), nondiff=True, batch=_arg_extremum)
def argmax(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """Index of the largest element along ``axis`` (of the flattened array by default).

    The first occurrence wins on ties. Not differentiable (integer output).

    Examples:
        >>> import xpgrad as xg
        >>> xg.argmax(xg.asarray([[1.0, 5.0], [7.0, 2.0]]), axis=1)
        Tensor([1, 0], dtype=int64, device=cpu)
    """


@op.function(fwd=lambda xp, x, **kw: xp.argmin(x, **kw), nondiff=True, batch=_arg_extremum)
def argmin(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """Index of the smallest element along ``axis`` (of the flattened array by default).

    The first occurrence wins on ties. Not differentiable (integer output).

    Examples:
        >>> import xpgrad as xg
        >>> xg.argmin(xg.asarray([3.0, 1.0, 1.0]))
        Tensor(1, dtype=int64, device=cpu)
    """


@op.function(fwd=lambda xp, x, **kw: xp.count_nonzero(x, **kw), nondiff=True, batch=along_axes)
def count_nonzero(x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:
    """Number of nonzero elements over ``axis`` (all axes by default). Not differentiable.

    Examples:
        >>> import xpgrad as xg
        >>> xg.count_nonzero(xg.asarray([[0.0, 1.0], [2.0, 3.0]]), axis=1)
        Tensor([1, 2], dtype=int64, device=cpu)
    """


@op.function(fwd=lambda xp, x: tuple(xp.nonzero(x)), nondiff=True, multi=True, data_dependent_shape=True, unbatchable=(
    "the number of nonzero elements differs from example to example, so the result's shape would depend on the "
    "data; use xg.where (or a mask multiplied in) instead, or call nonzero outside the vmapped function"
))
def nonzero(x: Array, /) -> tuple[Array, ...]:
    """Indices of the nonzero elements: one integer array per dimension. Not differentiable.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nonzero(xg.asarray([0.0, 2.0, 0.0, 3.0]))
        (Tensor([1, 3], dtype=int64, device=cpu),)
    """


@op.entry(_searchsorted, nargs=2)
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
    return _searchsorted.bind(*args, side=side)


op.check_all(__all__)
