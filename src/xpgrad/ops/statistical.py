"""Statistical functions (reductions and cumulative reductions) and their VJP rules.

A reduction's rule returns a gradient shaped like the input with the reduced axes
kept (size 1), and the engine broadcasts it up. ``prod`` and ``cumulative_prod``
never divide by an element that may be zero: their rules count the zeros of each
slice, so the gradient is exact with zeros in the input, to second order. ``max``
and ``min`` split the gradient evenly among tied elements, as ``torch.amax``.
"""

from __future__ import annotations

import math
from typing import Any

from .._dtypes import to_backend
from .._exceptions import XpgradValueError
from ..autograd._batching_util import along_axes, along_axis, pointwise
from ._common import (
    Array,
    broadcast_like,
    composite,
    conj,
    in_float32,
    is_complex,
    is_xpgrad,
    jvp_from_vjp,
    reduction_jvp,
    times_inf,
    unit_from,
)
from ._registry import Chapter, Inputs

__all__ = ["cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var"]

_C = "statistical"
# every function is an entry; std (var, then its square root, the entry's primitive) and the
# cumulative ones (which check and normalise axis first) have a body
op = Chapter(_C, module=__name__)


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


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= int(shape[a])
    return n


# ---------------------------------------------------------------- sum, mean
# The reductions of float16 and bfloat16 arrays accumulate in float32, as torch's do
# (`in_float32`): their forwards and the rules that reduce (var's, prod's, the
# cumulative ones') run in float32 and round the result to the input's dtype.
@in_float32
def _sum_fwd(xp: Any, x: Any, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    return xp.sum(x, axis=axis, dtype=to_backend(dtype, xp, func="sum"), keepdims=keepdims)


def _sum_vjp(xp: Any, g: Any, ans: Any, x: Any, *, axis: Any = None, dtype: Any = None,
             keepdims: bool = False) -> Any:
    # broadcast here (a view), so the engine finds the argument's shape and has nothing to fit
    r = g
    if axis is not None or keepdims:
        r = _expand_reduced(xp, g, tuple(x.shape), axis, keepdims)
    return unit_from(g, broadcast_like(xp, r, x))  # (ones when g is: see _common.scale)


# (check_dtype: sum, prod and the cumulative ones take dtype=, and an integer one is a constant)
def _torch_dims(axis: Any, ndim: int) -> Any:
    """``axis`` as PyTorch's reductions take it (its tests' counterpart): a tuple for all axes."""
    return tuple(range(ndim)) if axis is None else axis


@op.function(batch=along_axes, fwd=_sum_fwd, vjp=(_sum_vjp,), jvp="linear", save=(), check_dtype=True,
             test=Inputs(params={"axis": "axes?", "keepdims": "bool"},
                         torch=lambda t, x, *, axis, keepdims: t.sum(x, dim=_torch_dims(axis, x.ndim), keepdim=keepdims)))
def sum(  # noqa: A001 - the standard's name
    x: Array, /, *, axis: int | tuple[int, ...] | None = None, dtype: Any = None, keepdims: bool = False
) -> Array:
    """Sum over ``axis`` (all axes by default).

    Examples:
        >>> import xpgrad as xg
        >>> xg.sum(xg.asarray([[1.0, 2.0], [3.0, 4.0]]), axis=0)
        Tensor([4., 6.], dtype=float64, device=cpu)
    """


def _mean_vjp(xp: Any, g: Any, ans: Any, x: Any, *, axis: Any = None, keepdims: bool = False) -> Any:
    shape = tuple(x.shape)  # (the reduced gradient: the engine broadcasts it, chunked like x)
    return _expand_reduced(xp, g, shape, axis, keepdims) / _count(shape, _norm_axes(axis, len(shape)))


@op.function(batch=along_axes, fwd=in_float32(lambda xp, x, **kw: xp.mean(x, **kw)), vjp=(_mean_vjp,), jvp="linear", save=(),
             test=Inputs(params={"axis": "axes?", "keepdims": "bool"},
                         torch=lambda t, x, *, axis, keepdims: t.mean(x, dim=_torch_dims(axis, x.ndim), keepdim=keepdims)))
def mean(x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:
    """Arithmetic mean over ``axis`` (all axes by default).

    Examples:
        >>> import xpgrad as xg
        >>> xg.mean(xg.asarray([[1.0, 2.0], [3.0, 5.0]]), axis=1)
        Tensor([1.5, 4. ], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- prod
@in_float32
def _prod_fwd(xp: Any, x: Any, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    return xp.prod(x, axis=axis, dtype=to_backend(dtype, xp, func="prod"), keepdims=keepdims)


@in_float32
def _prod_vjp(xp: Any, g: Any, ans: Any, x: Any, *, axis: Any = None, dtype: Any = None,
              keepdims: bool = False) -> Any:
    # d prod / d x_i is the product of the other elements. With p the product of the
    # nonzero elements of the slice and n0 its number of zeros: p / x_i without zeros;
    # with one zero, p at the zero and x_zero * p / x_i elsewhere (0, but with the right
    # derivative in x_zero); with two zeros, the other zero times p at each zero; 0 beyond.
    # Written so, every branch is finite and the rule is exact to second order.
    shape = tuple(x.shape)
    axes = _norm_axes(axis, len(shape))
    g = _expand_reduced(xp, g, shape, axis, keepdims)
    if not axes:
        return g
    zero = x == 0
    xs = xp.where(zero, 1.0, x)
    p = xp.prod(xs, axis=axes, keepdims=True)
    n0 = xp.count_nonzero(zero, axis=axes, keepdims=True)
    zsum = xp.sum(xp.where(zero, x, 0.0), axis=axes, keepdims=True)  # the zeros: value 0
    d = xp.where(
        n0 == 0,
        p / xs,
        xp.where(
            n0 == 1,
            xp.where(zero, p, zsum * p / xs),
            xp.where(xp.logical_and(n0 == 2, zero), (zsum - x) * p, 0.0),
        ),
    )
    return g * conj(xp, d)


@op.function(batch=along_axes, fwd=_prod_fwd, vjp=(_prod_vjp,), jvp=(in_float32(reduction_jvp(_prod_vjp)),), save=(0,),
             check_dtype=True)
def prod(
    x: Array, /, *, axis: int | tuple[int, ...] | None = None, dtype: Any = None, keepdims: bool = False
) -> Array:
    """Product over ``axis`` (all axes by default).

    The gradient is exact when the input holds zeros: it never divides by an element.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([2.0, 0.0, 3.0], requires_grad=True)
        >>> y = xg.prod(x)
        >>> y.backward()
        >>> x.grad
        Tensor([0., 6., 0.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- var, std
# With ``N - correction <= 0`` the variance is ``sum(d**2) / 0``, as PyTorch: inf, or NaN
# where every deviation is 0 (or the slice holds NaN). The forward never divides (no
# ZeroDivisionError, no RuntimeWarning) and the gradient is PyTorch's (whole-reduction)
# one: ``g * inf`` (NaN where ``x`` equals the mean), never the finite, sign-flipped
# ``2 / (N - correction) * d``.
def _dof(shape: tuple[int, ...], axis: Any, correction: float) -> float:
    return _count(shape, _norm_axes(axis, len(shape))) - correction


@in_float32
def _var_fwd(xp: Any, x: Any, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False) -> Any:
    if _dof(tuple(x.shape), axis, correction) > 0:
        return xp.var(x, axis=axis, correction=correction, keepdims=keepdims)
    d = x - xp.mean(x, axis=axis, keepdims=True)
    ss = xp.sum(xp.real(d * xp.conj(d)) if is_complex(d) else d * d, axis=axis, keepdims=keepdims)
    return xp.where(ss > 0, xp.full_like(ss, math.inf), xp.full_like(ss, math.nan))


@in_float32
def _var_vjp(xp: Any, g: Any, ans: Any, x: Any, *, axis: Any = None, correction: float = 0.0,
             keepdims: bool = False) -> Any:
    shape = tuple(x.shape)
    axes = _norm_axes(axis, len(shape))
    g = _expand_reduced(xp, g, shape, axis, keepdims)
    centered = x - xp.mean(x, axis=axes, keepdims=True)
    dof = _count(shape, axes) - correction
    if dof > 0:
        return g * (2.0 / dof) * centered
    # g * inf without 0 * inf (a RuntimeWarning on NumPy): NaN where g is 0 or x is the mean
    return xp.where(centered == 0, math.nan, times_inf(xp, g))


@op.function(batch=along_axes, fwd=_var_fwd, vjp=(_var_vjp,), jvp=(in_float32(reduction_jvp(_var_vjp)),), save=(0,))
def var(
    x: Array, /, *, axis: int | tuple[int, ...] | None = None, correction: float = 0.0, keepdims: bool = False
) -> Array:
    """Variance over ``axis``, dividing by ``N - correction`` (1 for the unbiased sample variance).

    With ``correction >= N`` it is inf (NaN for a constant slice), as in PyTorch, and
    so is its gradient: ``g * inf``, NaN where an element equals the mean.

    Examples:
        >>> import xpgrad as xg
        >>> xg.var(xg.asarray([1.0, 2.0, 3.0, 4.0]), correction=1)
        Tensor(1.66666667, dtype=float64, device=cpu)
    """


# std's square root: its gradient is 0 where the standard deviation is 0 (a constant
# slice), as PyTorch's std_backward, not sqrt's inf * 0 = NaN; where it is inf
# (correction >= N) it is g / inf (0, NaN for an infinite g), computed without NumPy's
# inf / inf warning.
def _std_root_vjp(xp: Any, g: Any, ans: Any, v: Any) -> Any:
    ok = xp.logical_and(ans > 0, ans < math.inf)  # (False for NaN)
    d = g / (2 * xp.where(ok, ans, 1.0))
    zero = xp.logical_or(ans == 0, xp.logical_and(xp.isinf(ans), xp.isfinite(g)))
    # (a constant NaN, not d * nan: one order up, where's unselected branch would get 0 * nan)
    return xp.where(ok, d, xp.where(zero, 0.0, xp.full_like(d, math.nan)))


_std_root = op.primitive("std_sqrt", fwd=lambda xp, v: xp.sqrt(v), vjp=(_std_root_vjp,), jvp=(jvp_from_vjp(_std_root_vjp),),
                         save=(), save_ans=True, batch=pointwise)

composite("std", of="sqrt(var)")


# ---------------------------------------------------------------- max, min
def _extremum_vjp(xp: Any, g: Any, ans: Any, x: Any, *, axis: Any = None, keepdims: bool = False) -> Any:
    # the elements equal to the extremum share the gradient evenly (torch.amax's convention,
    # not torch.max(dim)'s, which gives all of it to one of them)
    shape = tuple(x.shape)
    axes = _norm_axes(axis, len(shape))
    g = _expand_reduced(xp, g, shape, axis, keepdims)
    if not axes:
        return g
    m = _expand_reduced(xp, ans, shape, axis, keepdims)
    hit = x == m
    count = xp.sum(xp.astype(hit, x.dtype), axis=axes, keepdims=True)
    # a slice holding NaN has a NaN extremum and a NaN gradient throughout, as torch.amax
    # (which divides by its count of 0); its count is made 1 here so that nothing warns
    nan = xp.isnan(m)
    return xp.where(nan, math.nan, xp.where(hit, g / xp.where(nan, 1.0, count), 0.0))


@op.function(batch=along_axes, fwd=lambda xp, x, **kw: xp.max(x, **kw), vjp=(_extremum_vjp,), jvp=(reduction_jvp(_extremum_vjp),), save=(0,),
             save_ans=True)
def max(x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Largest element over ``axis`` (all axes by default).

    Tied maximal elements share the gradient evenly, as ``torch.amax``: each of
    ``k`` tied elements gets ``g / k``.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([1.0, 3.0, 3.0], requires_grad=True)
        >>> xg.max(x).backward()
        >>> x.grad
        Tensor([0. , 0.5, 0.5], dtype=float64, device=cpu)
    """


@op.function(batch=along_axes, fwd=lambda xp, x, **kw: xp.min(x, **kw), vjp=(_extremum_vjp,), jvp=(reduction_jvp(_extremum_vjp),), save=(0,),
             save_ans=True)
def min(x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Array:  # noqa: A001
    """Smallest element over ``axis`` (all axes by default).

    Tied minimal elements share the gradient evenly, as ``torch.amin``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.min(xg.asarray([[4.0, 2.0], [1.0, 5.0]]), axis=0)
        Tensor([1., 2.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- cumulative_sum, cumulative_prod
def _drop_first(v: Any, axis: int) -> Any:
    """``v`` without its first element along ``axis`` (the ``include_initial`` slot)."""
    return v[(slice(None),) * axis + (slice(1, None), ...)]


def _revcumsum(xp: Any, v: Any, axis: int) -> Any:
    """Sums from each position to the end along ``axis``."""
    return xp.flip(xp.cumulative_sum(xp.flip(v, axis=axis), axis=axis), axis=axis)


@in_float32
def _cumsum_fwd(xp: Any, x: Any, *, axis: int, dtype: Any = None, include_initial: bool = False) -> Any:
    return xp.cumulative_sum(x, axis=axis, dtype=to_backend(dtype, xp, func="cumulative_sum"), include_initial=include_initial)


@in_float32
def _cumsum_vjp(xp: Any, g: Any, ans: Any, x: Any, *, axis: int, dtype: Any = None,
                include_initial: bool = False) -> Any:
    if include_initial:
        g = _drop_first(g, axis)
    return _revcumsum(xp, g, axis)


_cumsum = op.primitive("cumulative_sum", fwd=_cumsum_fwd, vjp=(_cumsum_vjp,), jvp="linear", save=(), check_dtype=True,
                       batch=along_axis)


@in_float32
def _cumprod_fwd(xp: Any, x: Any, *, axis: int, dtype: Any = None, include_initial: bool = False) -> Any:
    return xp.cumulative_prod(x, axis=axis, dtype=to_backend(dtype, xp, func="cumulative_prod"),
                              include_initial=include_initial)


def _cumprod_grad(xp: Any, g: Any, y: Any, x: Any, axis: int) -> tuple[Any, ...]:
    """The VJP of ``y = cumulative_prod(x)``, exact with zeros (first order), and its pieces.

    Before the first zero of a slice: ``revcumsum(g * y) / x``. At the first zero:
    ``revcumsum(g * y1)`` with ``y1`` the cumulative product of ``x`` with that zero
    made 1. After it: 0 (every product there holds the zero).
    """
    zero = x == 0
    seen = xp.cumulative_sum(xp.astype(zero, x.dtype), axis=axis)  # zeros up to here
    before = seen == 0
    first = xp.logical_and(zero, seen == 1)
    a = _revcumsum(xp, g * conj(xp, y), axis) / conj(xp, xp.where(zero, 1.0, x))
    x1 = xp.where(first, 1.0, x)
    y1 = xp.cumulative_prod(x1, axis=axis)
    b = _revcumsum(xp, g * conj(xp, y1), axis)
    return xp.where(before, a, xp.where(first, b, 0.0)), before, first, x1, y1


@in_float32
def _cumprod_vjp(xp: Any, g: Any, ans: Any, x: Any, *, axis: int, dtype: Any = None,
                 include_initial: bool = False) -> Any:
    if include_initial:
        g = _drop_first(g, axis)
        ans = _drop_first(ans, axis)
    grad, before, first, x1, y1 = _cumprod_grad(xp, g, ans, x, axis)
    if not is_xpgrad(xp):
        return grad
    # Recorded for higher order: after the first zero z the gradient is x_z * G1, with G1
    # the same VJP at x1 (x with x_z made 1). Its value is 0, but its derivative in x_z
    # is G1, which the second derivative needs.
    xz = xp.sum(xp.where(first, x, 0.0), axis=axis, keepdims=True)
    rest = conj(xp, xz) * _cumprod_grad(xp, g, y1, x1, axis)[0]
    return xp.where(xp.logical_or(before, first), grad, rest)


def _cumprod_jvp(xp: Any, t: Any, ans: Any, x: Any, *, axis: int, dtype: Any = None,
                 include_initial: bool = False) -> Any:
    # y[k] = y[k-1] * x[k], so dy[k] = dy[k-1] * x[k] + y[k-1] * t[k]: exact with zeros in x
    n = int(x.shape[axis])
    lead = (slice(None),) * axis
    off = 1 if include_initial else 0
    dys: list[Any] = []
    def at(k: int, j: int) -> tuple[Any, ...]:  # the index of elements k..j-1 along the axis
        return (*lead, slice(k, j), ...)

    for k in range(n):
        tk = t[at(k, k + 1)]
        if k == 0:
            dys.append(tk)
        else:
            prev = ans[at(k - 1 + off, k + off)]
            dys.append(dys[-1] * x[at(k, k + 1)] + prev * tk)
    if include_initial:
        dys.insert(0, xp.zeros_like(ans[at(0, 1)]))
    return xp.concat(dys, axis=axis) if dys else xp.zeros_like(ans)


_cumprod = op.primitive("cumulative_prod", fwd=_cumprod_fwd, vjp=(_cumprod_vjp,), jvp=(in_float32(_cumprod_jvp),), save=(0,),
                        save_ans=True, check_dtype=True, batch=along_axis)


def _cumulative_axis(func: str, x: Array, axis: int | None) -> int:
    nd = x.ndim
    if axis is None:
        if nd != 1:
            msg = f"{func}: axis is required when x is not one-dimensional, got x with {nd} dimensions"
            raise XpgradValueError(msg)
        return 0
    if not -nd <= axis < nd:
        msg = f"{func}: axis {axis} is out of range for x with {nd} dimensions"
        raise XpgradValueError(msg)
    return axis % nd


# ---------------------------------------------------------------- entries with a body
@op.entry(_std_root)
def std(
    x: Array, /, *, axis: int | tuple[int, ...] | None = None, correction: float = 0.0, keepdims: bool = False
) -> Array:
    """Standard deviation over ``axis``: ``sqrt(var(x, ...))``.

    As in PyTorch, its gradient is 0 where the standard deviation is 0 (a constant
    slice), and with ``correction >= N`` the result is inf (NaN for a constant
    slice) with a NaN gradient.

    Examples:
        >>> import xpgrad as xg
        >>> xg.std(xg.asarray([1.0, 3.0, 5.0, 7.0]))
        Tensor(2.23606798, dtype=float64, device=cpu)
    """
    return _std_root.bind(var(x, axis=axis, correction=correction, keepdims=keepdims))


@op.entry(_cumsum)
def cumulative_sum(
    x: Array, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False
) -> Array:
    """Running sums along ``axis`` (may be omitted for a one-dimensional ``x``).

    With ``include_initial`` the result starts with the sum of no elements, 0.

    Examples:
        >>> import xpgrad as xg
        >>> xg.cumulative_sum(xg.asarray([1.0, 2.0, 3.0]), include_initial=True)
        Tensor([0., 1., 3., 6.], dtype=float64, device=cpu)
    """
    ax = _cumulative_axis("cumulative_sum", x, axis)
    return _cumsum.bind(x, axis=ax, dtype=dtype, include_initial=include_initial)


@op.entry(_cumprod)
def cumulative_prod(
    x: Array, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False
) -> Array:
    """Running products along ``axis`` (may be omitted for a one-dimensional ``x``).

    With ``include_initial`` the result starts with the product of no elements, 1.
    The gradient is exact with zeros in the input (it never divides by a zero), to
    second order.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([2.0, 0.0, 3.0], requires_grad=True)
        >>> y = xg.cumulative_prod(x)
        >>> y
        Tensor([2., 0., 0.], dtype=float64, device=cpu, grad_fn=<cumulative_prod>)
        >>> xg.sum(y).backward()
        >>> x.grad
        Tensor([1., 8., 0.], dtype=float64, device=cpu)
    """
    ax = _cumulative_axis("cumulative_prod", x, axis)
    return _cumprod.bind(x, axis=ax, dtype=dtype, include_initial=include_initial)


op.check_all(__all__)
