"""Statistical functions (reductions) and their VJP rules."""

from __future__ import annotations

from typing import Any

from ._common import Array, apply, primitive

__all__ = ["sum"]

_C = "statistical"


def _norm_axes(axis: int | tuple[int, ...] | None, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(a % ndim if ndim else a for a in axis)


def _expand_reduced(xp: Any, g: Any, shape: tuple[int, ...], axis: Any, keepdims: bool) -> Any:
    """Reshape a reduced gradient so that it broadcasts against the input shape."""
    if keepdims or not shape:
        return g
    axes = _norm_axes(axis, len(shape))
    kept = tuple(1 if i in axes else s for i, s in enumerate(shape))
    return xp.reshape(g, kept)


def _sum_fwd(xp: Any, x: Any, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    return xp.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)


def _sum_vjp(xp: Any, g: Any, ans: Any, x: Any, *, axis: Any = None, dtype: Any = None,
             keepdims: bool = False) -> Any:
    return _expand_reduced(xp, g, tuple(x.shape), axis, keepdims)


_sum = primitive("sum", _sum_fwd, save=(), chapter=_C)
_sum.defvjp(_sum_vjp)


def sum(  # noqa: A001 - the standard's name
    x: Array, /, *, axis: int | tuple[int, ...] | None = None, dtype: Any = None, keepdims: bool = False
) -> Array:
    """Sum over ``axis`` (all axes by default).

    Examples:
        >>> import xpgrad as xg
        >>> xg.sum(xg.asarray([[1.0, 2.0], [3.0, 4.0]]), axis=0)
        Tensor([4., 6.], dtype=float64, device=cpu)
    """
    return apply(_sum, (x,), {"axis": axis, "dtype": dtype, "keepdims": keepdims})
