"""Utility functions: ``all`` and ``any`` (boolean, non-differentiable) and ``diff``.

``diff`` is a primitive: its forward is the backend's; its VJP applies the adjoint
of one difference, ``a[k] -> g[k-1] - g[k]``, ``n`` times (with concatenations,
so it is differentiable again) and hands each of ``prepend``, ``x`` and
``append`` its part.
"""

from __future__ import annotations

from typing import Any

from ..autograd._batched import shift_axis
from ..autograd._batching_util import along_axes, full
from ..autograd._core import Primitive
from ._common import Array, apply, zeros_like_shape
from ._registry import Chapter

__all__ = ["all", "any", "diff"]

_C = "utility"
# every function is an entry; diff's body passes prepend and append as array arguments
# when given
op = Chapter(_C, module=__name__)


def _diff_fwd(xp: Any, x: Any, *ends: Any, axis: int, n: int, pre: bool, app: bool) -> Any:
    if ends and n and {getattr(e, "ndim", -1) for e in ends} == {x.ndim}:  # (all is shadowed here)
        # attach the ends ourselves: Dask's diff turns array ends into NumPy (a compute)
        return xp.diff(xp.concat([*ends[:pre], x, *ends[pre:]], axis=axis), axis=axis, n=n)
    kw = {}
    if pre:
        kw["prepend"] = ends[0]
    if app:
        kw["append"] = ends[-1]
    return xp.diff(x, axis=axis, n=n, **kw)


def _diff_adjoint(xp: Any, g: Any, axis: int, n: int) -> Any:
    """The VJP of ``n`` differences along ``axis`` on the concatenated input."""
    ax = axis % g.ndim
    for _ in range(n):
        shape = tuple(1 if i == ax else s for i, s in enumerate(g.shape))
        z = zeros_like_shape(xp, g, shape)
        g = xp.concat([z, g], axis=ax) - xp.concat([g, z], axis=ax)
    return g


def _length(end: Any, axis: int) -> int:
    """Length of ``prepend``/``append`` along ``axis``; a Python scalar (None here) counts 1."""
    shape = getattr(end, "shape", None)
    return 1 if shape is None or len(shape) == 0 else int(shape[axis])


def _diff_part(xp: Any, g: Any, i: int, x: Any, *ends: Any, axis: int, n: int, pre: bool, app: bool) -> Any:
    """Argument ``i``'s share (0: x, then prepend and/or append) of the gradient."""
    if n == 0:
        return g if i == 0 else None
    ax = axis % x.ndim
    full = _diff_adjoint(xp, g, ax, n)
    lp = _length(ends[0], ax) if pre else 0
    lx = int(x.shape[ax])
    if i == 0:
        lo, hi = lp, lp + lx
    elif i == 1 and pre:
        lo, hi = 0, lp
    else:
        lo, hi = lp + lx, int(full.shape[ax])
    return full[(slice(None),) * ax + (slice(lo, hi), ...)]


def _diff_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """``prepend``/``append`` are joined to ``x`` along ``axis``, so all need every batch axis."""
    ys = full(xs, bs, K) if len(xs) > 1 else xs
    n = len(ys[0].shape) - K
    return apply(prim, ys, {**kw, "axis": shift_axis(prim.name, kw["axis"], n, K)})


# (jvp: linear in x, prepend and append together)
_diff = op.primitive("diff", fwd=_diff_fwd, batch=_diff_batch, vjp=(lambda xp, g, ans, *args, **kw: _diff_part(xp, g, 0, *args, **kw),),
                     vjp_rest=lambda xp, g, ans, i, *args, **kw: _diff_part(xp, g, i, *args, **kw), jvp="joint_linear", save=())


@op.function(fwd=lambda xp, x, **kw: xp.all(x, **kw), nondiff=True, batch=along_axes)
def all(x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Whether every element over ``axis`` is true (nonzero). Not differentiable.

    Examples:
        >>> import xpgrad as xg
        >>> xg.all(xg.asarray([[True, False], [True, True]]), axis=1)
        Tensor([False,  True], dtype=bool, device=cpu)
    """


@op.function(fwd=lambda xp, x, **kw: xp.any(x, **kw), nondiff=True, batch=along_axes)
def any(x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Whether some element over ``axis`` is true (nonzero). Not differentiable.

    Examples:
        >>> import xpgrad as xg
        >>> xg.any(xg.asarray([0.0, 0.0, 2.0]))
        Tensor(True, dtype=bool, device=cpu)
    """


@op.entry(_diff)
def diff(
    x: Array, /, *, axis: int = -1, n: int = 1, prepend: Array | None = None, append: Array | None = None
) -> Array:
    """The ``n``-th forward difference along ``axis``, of ``x`` with ``prepend``/``append`` attached.

    Differentiable with respect to ``x``, ``prepend`` and ``append``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.diff(xg.asarray([1.0, 4.0, 9.0, 16.0]))
        Tensor([3., 5., 7.], dtype=float64, device=cpu)
        >>> xg.diff(xg.asarray([1.0, 4.0, 9.0]), n=2, prepend=xg.asarray([0.0]))
        Tensor([2., 2.], dtype=float64, device=cpu)
    """
    args = (x,) + ((prepend,) if prepend is not None else ()) + ((append,) if append is not None else ())
    return _diff.bind(*args, axis=axis, n=n, pre=prepend is not None, app=append is not None)


op.check_all(__all__)
