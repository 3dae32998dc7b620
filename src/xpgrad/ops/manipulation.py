"""Manipulation functions (shapes, axes, joining and splitting) and their VJP rules.

Every one of them is linear, so each rule applies the adjoint rearrangement to
the upstream gradient: reshape back, permute back, slice out the pieces of a
join, sum the copies of a repetition. Variadic functions (``concat``, ``stack``,
``broadcast_arrays``) pass their arrays as positional arguments of the primitive
and share one ``rest`` rule; multi-output ones (``unstack``, ``broadcast_arrays``)
get a tuple of upstream gradients with None for outputs that received none.
Each function is a registry entry (``@op.function``, see `xpgrad.ops._registry`)
but ``broadcast_arrays`` (a boolean or integer array among them is broadcast alone)
and ``broadcast_shapes`` (on shape tuples).

Batching rules, beside each function: shapes and axes gain the batch axes in front.
Functions of the flattened example (``roll``, ``concat`` and ``repeat`` with ``axis=None``)
flatten each example instead: the physical value becomes ``(batch..., -1)`` and the
function acts along axis ``K``. Joins (``concat``, ``stack``) need every argument with
full-size batch axes (``_batching_util.full``); functions that broadcast (``tile``,
``broadcast_arrays``) pad the example's axes as their unbatched call would.

Also here: the ``to_device`` primitive behind [`xpgrad.Tensor.to_device`][xpgrad.autograd.Tensor.to_device].
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import array_api_compat

from .._dispatch import _raw
from .._dtypes import is_float
from .._exceptions import XpgradIndexError, XpgradTypeError, XpgradValueError
from ..autograd._batched import shift_axes, shift_axis
from ..autograd._batching_util import along_axes, full, lndim, pad, pad_all, pointwise
from ..autograd._core import Primitive
from ._common import Array, Tensor, apply, is_xpgrad, linear_jvp, primitive, zeros_like_shape
from ._registry import Chapter, Inputs, prim_of
from .indexing import scatter_add, source_index

__all__ = [
    "broadcast_arrays",
    "broadcast_shapes",
    "broadcast_to",
    "concat",
    "expand_dims",
    "flip",
    "moveaxis",
    "permute_dims",
    "repeat",
    "reshape",
    "roll",
    "squeeze",
    "stack",
    "tile",
    "unstack",
]

_C = "manipulation"
#: broadcast_arrays is an entry whose body dispatches on the dtypes; broadcast_shapes (on shape
#: tuples, no array) a query entry
op = Chapter(_C, module=__name__)


def _ax(axis: int, ndim: int) -> int:
    """A possibly negative axis as a non-negative one."""
    return axis + ndim if axis < 0 else axis


def _outputs(g: Any) -> tuple[Any, ...]:
    """The upstream gradients of a multi-output primitive (one output: not a tuple)."""
    return g if type(g) is tuple else (g,)


def _reshape_back(xp: Any, g: Any, ans: Any, x: Any, **kw: Any) -> Any:
    return _reshaped(xp, g, tuple(x.shape))


def _reshaped(xp: Any, x: Any, shape: tuple[int, ...], copy: bool | None = None) -> Any:
    """``xp.reshape``, and where Dask refuses one (its reshape only merges or splits whole
    chunks: ``NotImplementedError``), the same after rechunking: first every axis but the
    leading one into one chunk, then, if need be, the whole array."""
    try:
        return xp.reshape(x, shape) if copy is None else xp.reshape(x, shape, copy=copy)
    except NotImplementedError:
        rechunk = getattr(x, "rechunk", None)
        if rechunk is None:
            raise
    try:
        return xp.reshape(rechunk({i: -1 for i in range(1, x.ndim)}), shape)
    except NotImplementedError:
        return xp.reshape(rechunk(-1), shape)


# ---------------------------------------------------------------- broadcasting
# (the VJP: the engine sums the broadcast axes)
def _broadcast_to_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    shape = tuple(kw["shape"])
    x = pad(xs[0], K, len(shape))
    return apply(prim, (x,), {**kw, "shape": tuple(x.shape)[:K] + shape})


@op.function(batch=_broadcast_to_batch, fwd=lambda xp, x, *, shape: xp.broadcast_to(x, shape), vjp=(lambda xp, g, ans, x, **kw: g,), jvp="linear",
             params={"shape": tuple}, save=(), view=True)
def broadcast_to(x: Array, /, shape: tuple[int, ...]) -> Array:
    """Broadcast ``x`` to ``shape``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.broadcast_to(xg.asarray([1.0, 2.0]), (2, 2))
        Tensor([[1., 2.],
                [1., 2.]], dtype=float64, device=cpu)
    """


def _broadcast_arrays_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """Batched arguments padded to the largest rank: the batch axes then broadcast among themselves
    and the example's axes as the unbatched call would."""
    ys, _ = pad_all(xs, bs, K)
    return apply(prim, tuple(ys), kw)


# (the VJP: None stays a symbolic zero)
_broadcast_arrays = op.primitive(
    "broadcast_arrays", fwd=lambda xp, *xs: tuple(xp.broadcast_arrays(*xs)), batch=_broadcast_arrays_batch,
    vjp_rest=lambda xp, g, ans, i, *xs: _outputs(g)[i], jvp="joint_linear", save=(), multi=True, view=True,
)


@op.entry(_broadcast_arrays, nargs=-1)
def broadcast_arrays(*arrays: Array) -> tuple[Array, ...]:
    """Broadcast the arrays against each other.

    Examples:
        >>> import xpgrad as xg
        >>> a, b = xg.broadcast_arrays(xg.asarray([1.0, 2.0]), xg.asarray([[3.0], [4.0]]))
        >>> a.shape, b.shape
        ((2, 2), (2, 2))
    """
    if not all(is_float((_raw(a) if isinstance(a, Tensor) else a).dtype) for a in arrays):
        # one joint node would make a boolean or integer output require grad along with the
        # floating ones (array-api-extra broadcasts a mask with the values it selects)
        shape = broadcast_shapes(*(tuple(a.shape) for a in arrays))
        return tuple(broadcast_to(a, shape) for a in arrays)  # type: ignore[arg-type]  # (None sizes stay unknown)
    return _broadcast_arrays.bind(*arrays)


@op.query(reason="operates on shape tuples, not on arrays")
def broadcast_shapes(*shapes: tuple[int | None, ...]) -> tuple[int | None, ...]:
    """The shape that arrays of ``shapes`` broadcast to (None: an unknown size).

    Raises:
        XpgradValueError: the shapes do not broadcast together.

    Examples:
        >>> import xpgrad as xg
        >>> xg.broadcast_shapes((2, 1), (3,), ())
        (2, 3)
    """
    nd = max((len(s) for s in shapes), default=0)
    out: list[int | None] = []
    for i in range(-nd, 0):
        size: int | None = 1
        for s in shapes:
            d = s[i] if -i <= len(s) else 1
            if d == 1:
                continue
            if size == 1:
                size = d
            elif d is None or size is None:
                size = None
            elif d != size:
                msg = f"broadcast_shapes: shapes {tuple(tuple(s) for s in shapes)} do not broadcast together"
                raise XpgradValueError(msg)
        out.append(size)
    return tuple(out)



# ---------------------------------------------------------------- reshaping
def _reshape_fwd(xp: Any, x: Any, *, shape: tuple[int, ...], copy: bool | None = None) -> Any:
    try:
        return _reshaped(xp, x, shape, copy)
    except Exception:
        _check_reshape(tuple(x.shape), shape)
        raise


def _shape(shape: Any) -> tuple[int, ...]:
    """``reshape``'s shape: a tuple as is, anything else checked (a list, ints of another type)."""
    return shape if type(shape) is tuple else _check_reshape((None,), shape)


def _reshape_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x = xs[0]
    shape = kw["shape"]
    if isinstance(shape, int):
        shape = (shape,)
    return apply(prim, xs, {**kw, "shape": tuple(x.shape)[:K] + tuple(shape)})


@op.function(batch=_reshape_batch, fwd=_reshape_fwd, vjp=(_reshape_back,), jvp="linear", params={"shape": _shape}, save=(), view=True)
def reshape(x: Array, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Array:
    """Give ``x`` a new shape (one size may be -1) without changing its data.

    Examples:
        >>> import xpgrad as xg
        >>> xg.reshape(xg.asarray([1.0, 2.0, 3.0, 4.0]), (2, -1))
        Tensor([[1., 2.],
                [3., 4.]], dtype=float64, device=cpu)
    """


_reshape_p = prim_of(reshape)


def _check_reshape(xshape: tuple[Any, ...], shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of ints, or xpgrad's error if ``xshape`` cannot take it (every library agrees).

    Run where the library refused a reshape (to name reshape and the sizes), and on a
    shape that is not a tuple; never on the way of a reshape that works.
    """
    try:
        new = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else tuple(operator.index(s) for s in shape)
    except TypeError:
        msg = f"reshape: shape must be a tuple of ints, got {shape!r}"
        raise XpgradTypeError(msg) from None
    negative = [s for s in new if s < 0]
    if len(negative) > 1 or any(s != -1 for s in negative):
        msg = f"reshape: shape {new} may hold one -1 (a size to infer) and no other negative size"
        raise XpgradValueError(msg)
    if any(not isinstance(s, int) or s != s for s in xshape):  # a size Dask does not know yet (nan, None)
        return new
    n = math.prod(xshape)
    known = math.prod(s for s in new if s != -1)
    if (known != n) if not negative else (known == 0 or n % known):
        msg = f"reshape: cannot reshape a tensor of shape {xshape} ({n} elements) into shape {new}"
        if negative and known:
            msg += f" ({n} is not a multiple of {known})"
        elif not negative:
            msg += f" ({known} elements)"
        raise XpgradValueError(msg)
    return new


def _expand_dims_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x = xs[0]
    axis = kw["axis"]
    n = len(x.shape) - K
    new: Any
    if isinstance(axis, (tuple, list)):
        m = n + len(axis)
        new = tuple(shift_axis(prim.name, a, m, K) for a in axis)
    else:
        new = shift_axis(prim.name, axis, n + 1, K)
    return apply(prim, xs, {**kw, "axis": new})


@op.function(batch=_expand_dims_batch, fwd=lambda xp, x, *, axis: xp.expand_dims(x, axis=axis), vjp=(_reshape_back,),
             jvp="linear", save=(), view=True)
def expand_dims(x: Array, /, axis: int) -> Array:
    """Insert an axis of size one at position ``axis``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.expand_dims(xg.asarray([1.0, 2.0]), axis=0).shape
        (1, 2)
    """


def _squeeze_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    n = len(xs[0].shape) - K
    return apply(prim, xs, {**kw, "axis": shift_axes(prim.name, kw["axis"], n, K)})


@op.function(batch=_squeeze_batch, fwd=lambda xp, x, *, axis: xp.squeeze(x, axis=axis), vjp=(_reshape_back,), jvp="linear", save=(), view=True)
def squeeze(x: Array, /, axis: int | tuple[int, ...]) -> Array:
    """Remove the axes ``axis``, each of size one.

    Examples:
        >>> import xpgrad as xg
        >>> xg.squeeze(xg.asarray([[1.0, 2.0]]), axis=0)
        Tensor([1., 2.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- axes
def _inverse_perm(axes: Sequence[int]) -> tuple[int, ...]:
    n = len(axes)
    inv = [0] * n
    for i, a in enumerate(axes):
        inv[_ax(a, n)] = i
    return tuple(inv)


def _permute_dims_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    n = len(xs[0].shape) - K
    axes = tuple(kw["axes"])
    if len(axes) != n:
        msg = f"{prim.name}: axes {axes} do not match an array of dimension {n}"
        raise XpgradIndexError(msg)
    return apply(prim, xs, {**kw, "axes": tuple(range(K)) + tuple(shift_axis(prim.name, a, n, K) for a in axes)})


@op.function(batch=_permute_dims_batch, fwd=lambda xp, x, *, axes: xp.permute_dims(x, axes),
             vjp=(lambda xp, g, ans, x, *, axes: xp.permute_dims(g, _inverse_perm(axes)),), jvp="linear",
             params={"axes": tuple}, save=(), view=True)
def permute_dims(x: Array, /, axes: tuple[int, ...]) -> Array:
    """Permute the axes of ``x``: output axis i is input axis ``axes[i]``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.permute_dims(xg.asarray([[1.0, 2.0]]), (1, 0))
        Tensor([[1.],
                [2.]], dtype=float64, device=cpu)
    """


def _moveaxis_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    n = len(xs[0].shape) - K
    src, dst = kw["source"], kw["destination"]
    return apply(prim, xs, {**kw, "source": shift_axes(prim.name, src, n, K),
                            "destination": shift_axes(prim.name, dst, n, K)})


@op.function(batch=_moveaxis_batch, fwd=lambda xp, x, *, source, destination: xp.moveaxis(x, source, destination),
             vjp=(lambda xp, g, ans, x, *, source, destination: xp.moveaxis(g, destination, source),), jvp="linear",
             save=(), view=True)
def moveaxis(x: Array, source: int | tuple[int, ...], destination: int | tuple[int, ...], /) -> Array:
    """Move the axes ``source`` to the positions ``destination``; the others keep their order.

    Examples:
        >>> import xpgrad as xg
        >>> xg.moveaxis(xg.reshape(xg.asarray([1.0] * 6), (1, 2, 3)), 0, -1).shape
        (2, 3, 1)
    """


def _torch_flip(t: Any, x: Any, *, axis: Any) -> Any:
    """PyTorch's flip (its tests' counterpart): ``dims`` always a tuple."""
    return t.flip(x, dims=tuple(range(x.ndim)) if axis is None else (axis,) if isinstance(axis, int) else axis)


@op.function(batch=along_axes, fwd=lambda xp, x, *, axis=None: xp.flip(x, axis=axis),
             vjp=(lambda xp, g, ans, x, *, axis=None: xp.flip(g, axis=axis),),
             jvp="linear", save=(), view=True, test=Inputs(params={"axis": "axes?"}, torch=_torch_flip))
def flip(x: Array, /, *, axis: int | tuple[int, ...] | None = None) -> Array:
    """Reverse the order of the elements along ``axis`` (all axes by default).

    Examples:
        >>> import xpgrad as xg
        >>> xg.flip(xg.asarray([1.0, 2.0, 3.0]))
        Tensor([3., 2., 1.], dtype=float64, device=cpu)
    """


def _neg_shift(shift: int | Sequence[int]) -> int | tuple[int, ...]:
    return -shift if isinstance(shift, int) else tuple(-s for s in shift)


def _shift(shift: int | Sequence[int]) -> int | tuple[int, ...]:
    """``roll``'s shift: an int, or a tuple of them."""
    return shift if isinstance(shift, int) else tuple(shift)


def _flat(x: Any, K: int) -> Any:
    """Physical ``x`` with each example flattened: shape ``(batch..., -1)``."""
    s = tuple(x.shape)
    if len(s) == K + 1:
        return x
    return _reshape_p(x, shape=(*s[:K], -1))


def _roll_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x = xs[0]
    s = tuple(x.shape)
    axis = kw.get("axis")
    if axis is None:  # the flattened example rolls, then takes its shape back
        out = apply(prim, (_flat(x, K),), {**kw, "axis": K})
        return _reshape_p(out, shape=s) if len(s) != K + 1 else out
    return apply(prim, tuple(xs), {**kw, "axis": shift_axes(prim.name, axis, len(s) - K, K)})


@op.function(batch=_roll_batch, fwd=lambda xp, x, *, shift, axis=None: xp.roll(x, shift, axis=axis),
             vjp=(lambda xp, g, ans, x, *, shift, axis=None: xp.roll(g, _neg_shift(shift), axis=axis),), jvp="linear",
             params={"shift": _shift}, save=())
def roll(x: Array, /, shift: int | tuple[int, ...], *, axis: int | tuple[int, ...] | None = None) -> Array:
    """Shift the elements along ``axis`` (of the flattened array by default), wrapping around.

    Examples:
        >>> import xpgrad as xg
        >>> xg.roll(xg.asarray([1.0, 2.0, 3.0]), 1)
        Tensor([3., 1., 2.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- joining and splitting
def _along(ax: int, idx: Any) -> tuple[Any, ...]:
    """A basic index selecting ``idx`` (an int or a slice) along axis ``ax``.

    The trailing ``...`` is required by the standard for an index of fewer axes.
    """
    return (slice(None),) * ax + (idx, Ellipsis)


def _concat_vjp(xp: Any, g: Any, ans: Any, i: int, *xs: Any, axis: int | None = 0) -> Any:
    if axis is None:  # the arrays were flattened
        start = sum(math.prod(x.shape) for x in xs[:i])
        return xp.reshape(g[start : start + math.prod(xs[i].shape)], tuple(xs[i].shape))
    ax = _ax(axis, g.ndim)
    start = sum(x.shape[ax] for x in xs[:i])
    return g[_along(ax, slice(start, start + xs[i].shape[ax]))]


# (view: Dask's concat of one non-empty array and empty ones is that array itself)
def _concat_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    ys = full(xs, bs, K)
    axis = kw.get("axis", 0)
    if axis is None:  # each example's arrays flattened, then joined
        return apply(prim, tuple(_flat(y, K) for y in ys), {**kw, "axis": K})
    n = lndim(xs[bs.index(True)], True, K)
    return apply(prim, tuple(ys), {**kw, "axis": shift_axis(prim.name, axis, n, K)})


@op.function(batch=_concat_batch, fwd=lambda xp, *xs, axis=0: xp.concat(xs, axis=axis), vjp_rest=_concat_vjp, jvp="joint_linear", arrays="seq",
             save=(), view=True)
def concat(arrays: tuple[Array, ...] | list[Array], /, *, axis: int | None = 0) -> Array:
    """Join the arrays along an existing axis (after flattening them when ``axis`` is None).

    Examples:
        >>> import xpgrad as xg
        >>> xg.concat([xg.asarray([1.0]), xg.asarray([2.0, 3.0])])
        Tensor([1., 2., 3.], dtype=float64, device=cpu)
    """


def _stack_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    ys = full(xs, bs, K)
    n = lndim(xs[bs.index(True)], True, K)
    return apply(prim, tuple(ys), {**kw, "axis": shift_axis(prim.name, kw.get("axis", 0), n + 1, K)})


@op.function(batch=_stack_batch, fwd=lambda xp, *xs, axis=0: xp.stack(xs, axis=axis),
             vjp_rest=lambda xp, g, ans, i, *xs, axis=0: g[_along(_ax(axis, g.ndim), i)], jvp="joint_linear", arrays="seq",
             save=())
def stack(arrays: tuple[Array, ...] | list[Array], /, *, axis: int = 0) -> Array:
    """Join arrays of one shape along a new axis.

    Examples:
        >>> import xpgrad as xg
        >>> xg.stack([xg.asarray([1.0, 2.0]), xg.asarray([3.0, 4.0])], axis=1)
        Tensor([[1., 3.],
                [2., 4.]], dtype=float64, device=cpu)
    """


def _unstack_vjp(xp: Any, g: Any, ans: Any, x: Any, *, axis: int = 0) -> Any:
    gs = _outputs(g)
    like = next(gi for gi in gs if gi is not None)
    if any(gi is None for gi in gs):
        zero = zeros_like_shape(xp, like, tuple(like.shape))
        gs = tuple(zero if gi is None else gi for gi in gs)
    return xp.stack(gs, axis=axis)


def _unstack_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    n = len(xs[0].shape) - K
    return apply(prim, tuple(xs), {**kw, "axis": shift_axis(prim.name, kw.get("axis", 0), n, K)})


@op.function(batch=_unstack_batch, fwd=lambda xp, x, *, axis=0: tuple(xp.unstack(x, axis=axis)), vjp=(_unstack_vjp,), jvp="linear", save=(),
             multi=True, view=True)
def unstack(x: Array, /, *, axis: int = 0) -> tuple[Array, ...]:
    """Split ``x`` along ``axis`` into a tuple of arrays with that axis removed.

    Examples:
        >>> import xpgrad as xg
        >>> xg.unstack(xg.asarray([[1.0, 2.0], [3.0, 4.0]]), axis=1)
        (Tensor([1., 3.], dtype=float64, device=cpu), Tensor([2., 4.], dtype=float64, device=cpu))
    """


# ---------------------------------------------------------------- repetition
def _repeat_vjp(xp: Any, g: Any, ans: Any, x: Any, repeats: Any, *, axis: int | None = None) -> Any:
    shape = tuple(x.shape)
    if math.prod(tuple(g.shape)) == 0:  # (no copy at all: Dask cannot reshape an empty array into the split below)
        return zeros_like_shape(xp, g, shape)
    if not hasattr(repeats, "shape") or tuple(repeats.shape) == (1,):
        # every element repeated r times: sum the r copies, which lie next to each other
        if axis is None:
            n, ax, shape_in = math.prod(shape), 0, (math.prod(shape),)
        else:
            ax = _ax(axis, len(shape))
            n, shape_in = shape[ax], shape
        r = g.shape[ax] // n if n else 0
        gx = xp.sum(xp.reshape(g, (*shape_in[:ax], n, r, *shape_in[ax + 1 :])), axis=ax + 1)
        return gx if axis is not None else xp.reshape(gx, shape)
    # one count per element: a segment sum over the source position of each output element
    counts = repeats.data if isinstance(repeats, Tensor) else repeats
    ids = source_index(g, shape, lambda bxp, pos: _repeat_fwd(bxp, pos, counts, axis=axis))
    return scatter_add(xp, g, ids, shape)


def _repeat_fwd(xp: Any, x: Any, repeats: Any, *, axis: int | None = None) -> Any:
    if axis is None:  # flatten here: Dask's repeat needs an integer axis
        x, axis = xp.reshape(x, (-1,)), 0
    return xp.repeat(x, repeats, axis=axis)


# (view: one repetition is the input itself on Dask, as a tile by ones is; the integer counts: no gradient)
def _repeat_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x, repeats = xs
    if bs[1]:
        msg = (
            f"{prim.name}: cannot be used with repeats batched by vmap: the output's length would depend on "
            "each example's counts (a data-dependent shape); pass the counts unbatched (in_axes=None) or as an int"
        )
        raise XpgradValueError(msg)
    axis = kw.get("axis")
    if axis is None:
        return apply(prim, (_flat(x, K), repeats), {**kw, "axis": K})
    return apply(prim, tuple(xs), {**kw, "axis": shift_axis(prim.name, axis, len(x.shape) - K, K)})


@op.function(batch=_repeat_batch, fwd=_repeat_fwd, vjp=(_repeat_vjp, None), jvp="linear", arrays=2, save=(1,), view=True)
def repeat(x: Array, repeats: int | Array, /, *, axis: int | None = None) -> Array:
    """Repeat each element ``repeats`` times (an int, or one count per element) along ``axis``.

    With ``axis=None`` the array is flattened first.

    Examples:
        >>> import xpgrad as xg
        >>> xg.repeat(xg.asarray([1.0, 2.0]), 2)
        Tensor([1., 1., 2., 2.], dtype=float64, device=cpu)
        >>> xg.repeat(xg.asarray([1.0, 2.0]), xg.asarray([1, 3]), axis=0)
        Tensor([1., 2., 2., 2.], dtype=float64, device=cpu)
    """


def _tile_vjp(xp: Any, g: Any, ans: Any, x: Any, *, repetitions: tuple[int, ...]) -> Any:
    shape = tuple(x.shape)
    if math.prod(tuple(g.shape)) == 0:  # (no copy at all: Dask cannot reshape an empty array into the split below)
        return zeros_like_shape(xp, g, shape)
    d = max(len(shape), len(repetitions))
    xs = (1,) * (d - len(shape)) + shape
    rs = (1,) * (d - len(repetitions)) + tuple(repetitions)
    # output axis i holds rs[i] copies of xs[i]: split it into (copy, element) and sum the copies
    split = tuple(v for pair in zip(rs, xs, strict=True) for v in pair)
    total = xp.sum(xp.reshape(g, split), axis=tuple(range(0, 2 * d, 2)))
    return xp.reshape(total, shape)


def _tile_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """The example padded to ``max(rank, len(repetitions))`` axes (as tile does), batch axes tiled once."""
    reps = tuple(kw["repetitions"])
    d = max(len(xs[0].shape) - K, len(reps))
    x = pad(xs[0], K, d)
    return apply(prim, (x,), {**kw, "repetitions": (1,) * (K + d - len(reps)) + reps})


@op.function(batch=_tile_batch, fwd=lambda xp, x, *, repetitions: xp.tile(x, repetitions), vjp=(_tile_vjp,), jvp="linear",
             params={"repetitions": tuple}, save=(), view=True)
def tile(x: Array, repetitions: tuple[int, ...], /) -> Array:
    """Repeat the whole array ``repetitions[i]`` times along each axis i.

    Examples:
        >>> import xpgrad as xg
        >>> xg.tile(xg.asarray([1.0, 2.0]), (2,))
        Tensor([1., 2., 1., 2.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- devices
def _to_device_vjp(xp: Any, g: Any, ans: Any, x: Any, *, device: Any, stream: Any = None, source: Any = None) -> Any:
    # the gradient goes back to where the input lives
    if is_xpgrad(xp):
        return g.to_device(source)
    return array_api_compat.to_device(g, source)


_to_device = primitive(
    "to_device",
    lambda xp, x, *, device, stream=None, source=None: array_api_compat.to_device(x, device, stream=stream),
    save=(),
    chapter="array_object",
    batch=pointwise,
)
_to_device.defvjp(_to_device_vjp)
_to_device.defjvp(linear_jvp(_to_device))

op.check_all(__all__)
