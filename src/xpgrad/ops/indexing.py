"""Indexing: ``x[key]``, the functional ``x[key] = value``, ``take`` and ``take_along_axis``.

The gradient of a selection scatters into zeros. Keys made of ints, slices,
``...``, None and boolean masks select each element at most once, so their
gradient is embedded with ``array_api_extra.at(...).set``. Integer-array keys may
select an element several times, and ``array_api_extra.at(...).add`` drops
repeated indices on NumPy while array-api-strict has no integer-array
``__setitem__``; so their gradient is a segment sum over flat source indices
(the key applied to ``reshape(arange(size), shape)``), written with standard
functions only. Each scatter is a primitive whose VJP is the matching gather
(and the reverse), so gradients of any order never update a Tensor in place.

Other rule tables reuse the pair through [`scatter_add`][xpgrad.ops.indexing.scatter_add], [`gather`][xpgrad.ops.indexing.gather] and
[`source_index`][xpgrad.ops.indexing.source_index], which work in both rule modes (raw backend arrays in first
order, Tensors under ``create_graph``).

``take`` and ``take_along_axis`` are registry entries, their batching rules beside them;
the batching rules of the other primitives, and vmap's indexing of batched values
(``batched_getitem``, ``batched_setitem``), are at the end of the module.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import array_api_compat
import array_api_extra as xpx

from .. import _tracing
from .._dispatch import backend_namespace
from .._dispatch import raw_array as _raw
from .._dtypes import dtype_name, fast_name
from .._exceptions import XpgradIndexError, XpgradTypeError, XpgradValueError
from ..autograd._alias import may_alias
from ..autograd._batched import STACK, Batched, _check_levels, from_phys, lift, set_indexing, shift_axis
from ..autograd._batching_util import full, pad
from ..autograd._batching_util import op as _named
from ..autograd._core import Primitive, raw_dtype
from ..autograd._tensor import _wrap
from ._common import NOKW, Array, Tensor, apply, is_xpgrad, joint_linear_jvp, linear_jvp, primitive
from ._registry import Chapter, prim_of
from .data_type import _astype
from .elementwise import where

__all__ = ["take", "take_along_axis"]

_C = "indexing"
_I = "internal"
op = Chapter(_C, module=__name__)


# ---------------------------------------------------------------- keys
def _parts(key: Any) -> tuple[Any, ...]:
    return key if type(key) is tuple else (key,)


def _is_bool_array(k: Any) -> bool:
    dt = k.dtype
    return (fast_name(dt) or dtype_name(dt)) == "bool"


def _key_kind(key: Any) -> str:
    """'basic' (ints, slices, ..., None), 'bool' (plus boolean masks) or 'int' (integer arrays).

    Only 'int' keys can select an element twice.
    """
    kind = "basic"
    for k in _parts(key):
        if k is None or k is Ellipsis or type(k) is slice or type(k) is int:
            continue
        if isinstance(k, bool) or (hasattr(k, "dtype") and _is_bool_array(k)):
            kind = "bool"
        elif hasattr(k, "shape") or isinstance(k, (list, tuple)):
            return "int"  # integer arrays, including 0-D ones such as NumPy integer scalars
        # anything else is a Python int or an object with __index__
    return kind


def _axes_used(k: Any) -> int:
    if k is None or isinstance(k, bool):
        return 0
    if hasattr(k, "dtype") and _is_bool_array(k):
        return k.ndim
    return 1


def _positive_steps(key: Any, shape: tuple[int, ...]) -> tuple[Any, tuple[int, ...]] | None:
    """``(key2, axes)`` with ``flip(x, axis=axes)[key2] == x[key]`` and no negative step.

    For backends whose slices refuse negative steps (PyTorch); None when ``key``
    has none. ``key2`` picks, in increasing order on the flipped axis, the same
    elements in the same order, so values assigned through it need no flipping.
    """
    parts = _parts(key)
    if not any(type(k) is slice and k.step is not None and k.step < 0 for k in parts):
        return None
    rest = len(shape) - sum(_axes_used(k) for k in parts if k is not Ellipsis)
    new: list[Any] = []
    flips: list[int] = []
    axis = 0
    for k in parts:
        if k is Ellipsis:
            new.append(k)
            axis += rest
            continue
        if type(k) is slice and k.step is not None and k.step < 0:
            n_ax = int(shape[axis])
            start, stop, step = k.indices(n_ax)
            count = len(range(start, stop, step))
            first = n_ax - 1 - start
            new.append(slice(first, first + (count - 1) * -step + 1, -step) if count else slice(0, 0, 1))
            flips.append(axis)
        else:
            new.append(k)
        axis += _axes_used(k)
    return (tuple(new) if type(key) is tuple else new[0]), tuple(flips)


def _one_element_index(xp: Any, x: Any, key: Any) -> tuple[Any, int] | None:
    """``(key2, axis)``: ``key`` with its one-element integer index array doubled, and
    the result axis to cut back to length 1; None when ``key`` has no such array.

    Dask sizes a selection by a one-element index array like the source axis (see
    ``_take1``); two elements are sized right. Only for keys with one array index.
    """
    parts = _parts(key)
    arrays = [j for j, k in enumerate(parts) if hasattr(k, "shape") and not isinstance(k, (int, bool))]
    if len(arrays) != 1:
        return None
    j = arrays[0]
    k = parts[j]
    if k.ndim != 1 or k.shape[0] != 1 or _is_bool_array(k):
        return None
    rest = x.ndim - sum(_axes_used(p) for p in parts if p is not Ellipsis)
    out_axis = 0
    for p in parts[:j]:
        if p is Ellipsis:
            out_axis += rest
        elif p is None or type(p) is slice:
            out_axis += 1
    doubled = (*parts[:j], xp.concat([k, k]), *parts[j + 1:])
    return doubled, out_axis


def _get(xp: Any, x: Any, key: Any) -> Any:
    """``x[key]`` on a raw array; negative steps also where the backend's slices refuse them."""
    one = _one_element_index(xp, x, key)
    if one is not None:
        doubled, axis = one
        return _get(xp, x, doubled)[(slice(None),) * axis + (slice(0, 1),)]
    try:
        return x[key]
    except (ValueError, IndexError, TypeError, NotImplementedError):
        fixed = _positive_steps(key, tuple(x.shape))
        if fixed is None:
            raise
        return xp.flip(x, axis=fixed[1])[fixed[0]]


def _drop_none(xp: Any, key: Any, value: Any, ndim: int) -> tuple[Any, Any]:
    """The key without None, and the value without the axes None would add.

    Some backends refuse None in ``__setitem__`` (array-api-strict) or mishandle
    it (Dask); None only inserts axes of size 1, so the same elements are set.
    """
    parts = _parts(key)
    if not any(k is None for k in parts):
        return key, value
    if sum(hasattr(k, "shape") or isinstance(k, (bool, list)) for k in parts) > 1:
        return key, value  # several advanced indices: their axes may move; leave it to the backend
    rest = ndim - sum(_axes_used(k) for k in parts if k is not Ellipsis)
    nones = []
    pos = 0
    for k in parts:
        if k is None:
            nones.append(pos)
            pos += 1
        elif k is Ellipsis:
            pos += rest
        elif type(k) is slice or hasattr(k, "shape") or isinstance(k, bool):
            pos += 1
    if hasattr(value, "shape"):
        lead = pos - value.ndim  # value aligns with the target shape from the right
        drop = {a - lead for a in nones if a - lead >= 0}
        if drop:
            value = xp.reshape(value, tuple(s for i, s in enumerate(value.shape) if i not in drop))
    return tuple(k for k in parts if k is not None), value


_AT_SET: dict[int, Any] = {}


def _at_set(xp: Any, x: Any, key: Any, value: Any, copy: bool | None) -> Any:
    """``array_api_extra.at(x, key).set(value)``; under xg.jit one recorded call on the
    witnesses (array-api-extra picks JAX's ``.at[]`` or ``__setitem__`` by the array's type)."""
    base = _tracing.base_namespace(xp)
    if base is None:
        return xpx.at(x, key).set(value, copy=copy, xp=xp)
    f = _AT_SET.get(id(xp))
    if f is None:
        def at_set(x: Any, key: Any, value: Any, copy: bool | None) -> Any:
            return xpx.at(x, key).set(value, copy=copy, xp=base)

        _AT_SET[id(xp)] = f = _tracing.recorded(at_set, "array_api_extra.at.set", xp)
    return f(x, key, value, copy)


def _set(xp: Any, x: Any, key: Any, value: Any, copy: bool | None) -> Any:
    """``x`` with ``x[key] = value`` for keys without repeated elements (basic or boolean)."""
    key, value = _drop_none(xp, key, value, x.ndim)
    if math.prod(tuple(_get(xp, x, key).shape)) == 0:  # Dask refuses empty selections
        return xp.asarray(x, copy=True) if copy else x
    try:
        return _at_set(xp, x, key, value, copy)
    except (ValueError, IndexError, TypeError, NotImplementedError):
        fixed = _positive_steps(key, tuple(x.shape))
        if fixed is None:
            raise
        key2, axes = fixed
        return xp.flip(_at_set(xp, xp.flip(x, axis=axes), key2, value, copy), axis=axes)


def _single_mask(key: Any) -> Any:
    """The boolean array when ``key`` is one (alone or followed by ``...``), else None."""
    parts = _parts(key)
    if len(parts) == 1 or (len(parts) == 2 and parts[1] is Ellipsis):
        k = parts[0]
        if hasattr(k, "dtype") and _is_bool_array(k):
            return k
    return None


# ---------------------------------------------------------------- helpers for rules (both modes)
def _call(prim: Any, xp: Any, *args: Any, **kw: Any) -> Any:
    """Run a primitive from inside a rule: recorded under create_graph, raw otherwise."""
    if is_xpgrad(xp):
        return apply(prim, args, kw or NOKW)
    return prim.fwd(xp, *args, **kw)


def source_index(like: Any, shape: tuple[int, ...], select: Callable[[Any, Any], Any] | None = None) -> Any:
    """Flat source positions ``reshape(arange(prod(shape)), shape)``, optionally selected.

    ``select(bxp, positions)`` applies the forward's own selection to the position
    array with the backend namespace ``bxp`` (arguments it closes over must be raw
    arrays); the result tells, for each output element, which element of an array
    of ``shape`` it came from. Always a raw backend array on ``like``'s backend and
    device, in both rule modes.
    """
    data = _raw(like)
    bxp = backend_namespace(data)
    pos = bxp.reshape(bxp.arange(math.prod(shape), device=array_api_compat.device(data)), tuple(shape))
    return pos if select is None else select(bxp, pos)


def scatter_add(xp: Any, values: Any, ids: Any, shape: tuple[int, ...]) -> Any:
    """Zeros of ``shape`` with ``values`` added at flat positions ``ids`` (repeats add up).

    ``values`` broadcasts to ``ids``' shape. Works in both rule modes; its VJP is
    [`gather`][xpgrad.ops.indexing.gather], so gradients of any order need no in-place update.
    """
    return _call(_scatter_add, xp, values, ids, shape=tuple(shape))


def gather(xp: Any, x: Any, ids: Any) -> Any:
    """``reshape(x, (-1,))[ids]``, shaped like ``ids``; its VJP is [`scatter_add`][xpgrad.ops.indexing.scatter_add]."""
    return _call(_gather, xp, x, ids)


# ---------------------------------------------------------------- gather / segment sum
def _segment_sum(xp: Any, v: Any, ids: Any, n: int) -> Any:
    """``out[j] = sum(v[ids == j])`` for 1-D ``v`` and ``ids``, ``out`` of length ``n``.

    Sort by bin (stable), then a segmented inclusive scan by doubling: after the
    step of width d each element holds the sum of up to 2d predecessors of its own
    bin. Unlike differences of a cumulative sum there is no cancellation, the
    dtype is kept (no float64 needed), and a NaN or inf stays in its own bin.
    ``ceil(log2(len(v)))`` steps of O(len(v)) work.
    """
    dev = array_api_compat.device(v)
    m = int(v.shape[0])
    if m == 0 or n == 0:
        return xp.zeros((n,), dtype=v.dtype, device=dev)
    order = xp.argsort(ids, stable=True)
    sids = xp.take(ids, order)
    s = xp.take(v, order)
    d = 1
    while d < m:
        s = xp.concat([s[:d], s[d:] + xp.where(sids[d:] == sids[:-d], s[:-d], 0.0)])
        d *= 2
    bins = xp.arange(n, dtype=sids.dtype, device=dev)
    hi = xp.searchsorted(sids, bins, side="right")
    lo = xp.searchsorted(sids, bins, side="left")
    return xp.where(hi > lo, xp.take(s, xp.clip(hi - 1, 0)), 0.0)


def _scatter_add_fwd(xp: Any, v: Any, ids: Any, *, shape: tuple[int, ...]) -> Any:
    if math.prod(tuple(ids.shape)) == 0:  # nothing selected (Dask cannot reshape empty multi-chunk arrays)
        return xp.zeros(shape, dtype=v.dtype, device=array_api_compat.device(v))
    if tuple(v.shape) != tuple(ids.shape):
        v = xp.broadcast_to(v, tuple(ids.shape))
    out = _segment_sum(xp, xp.reshape(v, (-1,)), xp.reshape(ids, (-1,)), math.prod(shape))
    return xp.reshape(out, shape)


def _gather_fwd(xp: Any, x: Any, ids: Any) -> Any:
    return xp.reshape(_take1(xp, xp.reshape(x, (-1,)), xp.reshape(ids, (-1,)), 0), tuple(ids.shape))


_scatter_add: Primitive = primitive("scatter_add", _scatter_add_fwd, save=(1,), chapter=_I)
_scatter_add.defvjp(lambda xp, g, ans, v, ids, *, shape: gather(xp, g, ids), None)
_scatter_add.defjvp(linear_jvp(_scatter_add), None)

_gather: Primitive = primitive("gather", _gather_fwd, save=(1,), chapter=_I)
_gather.defvjp(lambda xp, g, ans, x, ids: scatter_add(xp, g, ids, tuple(x.shape)), None)
_gather.defjvp(linear_jvp(_gather), None)


def _embed_fwd(xp: Any, v: Any, *, key: Any, shape: tuple[int, ...]) -> Any:
    z = xp.zeros(shape, dtype=v.dtype, device=array_api_compat.device(v))
    return _set(xp, z, key, v, None)


# zeros of ``shape`` with ``v`` at ``key``, for keys that select no element twice
_embed: Primitive = primitive("embed", _embed_fwd, save=(), chapter=_I)
_embed.defvjp(lambda xp, g, ans, v, *, key, shape: _call(_getitem, xp, g, key=key))
_embed.defjvp(linear_jvp(_embed))


# ---------------------------------------------------------------- getitem
def _getitem_fwd(xp: Any, x: Any, *, key: Any) -> Any:
    return _get(xp, x, key)


def _getitem_vjp(xp: Any, g: Any, ans: Any, x: Any, *, key: Any) -> Any:
    shape = tuple(x.shape)
    if _key_kind(key) == "int":
        ids = source_index(g, shape, lambda bxp, pos: _get(bxp, pos, key))
        return scatter_add(xp, g, ids, shape)
    return _call(_embed, xp, g, key=key, shape=shape)


_getitem: Primitive = primitive("getitem", _getitem_fwd, save=(), view=True, chapter=_C)
_getitem.defvjp(_getitem_vjp)
_getitem.defjvp(linear_jvp(_getitem))


# ---------------------------------------------------------------- setitem (functional)
def _last_writes(xp: Any, x: Any, shape: tuple[int, ...], key: Any) -> tuple[Any, Any, Any]:
    """For an integer-array key: ``(ids, written, last)``, raw arrays.

    ``ids``: flat target of each selected element (shape of ``x[key]``);
    ``written``: flat boolean, the positions the key writes; ``last``: flat, for
    each position, the index in ``ids`` of the last write there (the one that
    wins, as in NumPy's sequential assignment).
    """
    ids = source_index(x, shape, lambda bxp, pos: _get(bxp, pos, key))
    fids = xp.reshape(ids, (-1,))
    order = xp.argsort(fids, stable=True)
    sids = xp.take(fids, order)
    bins = xp.arange(math.prod(shape), dtype=sids.dtype, device=array_api_compat.device(sids))
    hi = xp.searchsorted(sids, bins, side="right")
    written = hi > xp.searchsorted(sids, bins, side="left")
    last = xp.take(order, xp.clip(hi - 1, 0)) if fids.shape[0] else hi
    return ids, written, last


def _mask_where(key: Any, x: Any, value: Any) -> Any:
    """For a single boolean mask and a value that does not depend on how many elements it
    selects (``value.ndim <= x.ndim - mask.ndim``): the mask shaped to broadcast against
    ``x``, so that the update is a ``where``; else None.

    A ``where`` also works where masked assignment does not (lazy Dask, ``jax.jit``).
    """
    mask = _single_mask(key)
    if mask is None or (value is not None and value.ndim > x.ndim - mask.ndim):
        return None
    return mask, (*tuple(mask.shape), *(1,) * (x.ndim - mask.ndim))


def _setitem_fwd(xp: Any, x: Any, value: Any, *, key: Any) -> Any:
    kind = _key_kind(key)
    if kind == "bool":
        mw = _mask_where(key, x, value if hasattr(value, "shape") else None)
        if mw is not None:
            if not hasattr(value, "shape"):
                value = xp.asarray(value, dtype=x.dtype, device=array_api_compat.device(x))
            elif value.dtype != x.dtype:
                value = xp.astype(value, x.dtype)
            return xp.where(xp.reshape(mw[0], mw[1]), value, x)
    if kind != "int":
        return _set(xp, x, key, value, True)
    shape = tuple(x.shape)
    dev = array_api_compat.device(x)
    ids, written, last = _last_writes(xp, x, shape, key)
    if not hasattr(value, "shape"):
        value = xp.asarray(value, dtype=x.dtype, device=dev)
    elif value.dtype != x.dtype:
        value = xp.astype(value, x.dtype)
    if math.prod(tuple(ids.shape)) == 0:
        return xp.asarray(x, copy=True)
    vals = xp.reshape(xp.broadcast_to(value, tuple(ids.shape)), (-1,))
    new = xp.where(written, xp.take(vals, last), xp.reshape(x, (-1,)))
    return xp.reshape(new, shape)


def _setitem_vjp_x(xp: Any, g: Any, ans: Any, x: Any, value: Any, *, key: Any) -> Any:
    # the written positions no longer depend on x (setting zeros there is linear in g)
    return _call(_setitem, xp, g, 0.0, key=key)


def _setitem_vjp_value(xp: Any, g: Any, ans: Any, x: Any, value: Any, *, key: Any) -> Any:
    kind = _key_kind(key)
    if kind == "bool":
        mw = _mask_where(key, x, value)
        if mw is not None:  # the forward was a where: sum g over the selected elements
            bxp = backend_namespace(_raw(g))
            cond = bxp.reshape(mw[0], mw[1])
            return xp.where(Tensor(cond) if is_xpgrad(xp) else cond, g, 0.0)
    if kind != "int":
        return _call(_getitem, xp, g, key=key)
    # with repeated indices only the last write of each position reaches the output
    bxp = backend_namespace(_raw(g))
    ids, _, last = _last_writes(bxp, _raw(g), tuple(x.shape), key)
    fids = bxp.reshape(ids, (-1,))
    m = int(fids.shape[0])
    won = bxp.take(last, fids) == bxp.arange(m, dtype=last.dtype, device=array_api_compat.device(last))
    won = bxp.reshape(won, tuple(ids.shape))
    return xp.where(Tensor(won) if is_xpgrad(xp) else won, gather(xp, g, ids), 0.0)


_setitem: Primitive = primitive("setitem", _setitem_fwd, save=(), chapter=_C)
_setitem.defvjp(_setitem_vjp_x, _setitem_vjp_value)
_setitem.defjvp(rest=joint_linear_jvp(_setitem))


# ---------------------------------------------------------------- take, take_along_axis
def _take1(xp: Any, x: Any, indices: Any, axis: int) -> Any:
    """``take`` along ``axis``; a one-element index array is taken twice and sliced.

    Dask sizes the result of a take by a one-element index array like the source
    axis (its blockwise broadcasts the length-1 index axis), which later breaks
    reshapes; two elements are sized right. Other backends pay one tiny concat.
    """
    if indices.ndim == 1 and indices.shape[0] == 1:
        out = xp.take(x, xp.concat([indices, indices]), axis=axis)
        return out[(slice(None),) * (axis % x.ndim) + (slice(0, 1), ...)]  # `...`: array-api-strict wants every axis
    return xp.take(x, indices, axis=axis)


def _take_fwd(xp: Any, x: Any, indices: Any, *, axis: int | None) -> Any:
    return _take1(xp, x, indices, 0 if axis is None else axis)


def _take_vjp(xp: Any, g: Any, ans: Any, x: Any, indices: Any, *, axis: int | None) -> Any:
    shape = tuple(int(s) for s in x.shape)
    idx = _raw(indices)
    bxp = backend_namespace(idx)
    # the source positions by arithmetic rather than by taking from a position array:
    # Dask's integer-array take reports wrong chunks for some layouts, which breaks
    # the reshapes of the scatter (and arithmetic is cheaper anyway)
    nd = len(shape)
    ax = 0 if axis is None else axis % nd
    along = bxp.reshape(idx, (1,) * ax + (-1,) + (1,) * (nd - ax - 1))
    dev = array_api_compat.device(idx)
    ids: Any = 0
    stride = 1
    for d in range(nd - 1, -1, -1):
        if d == ax:
            coord = bxp.where(along < 0, along + shape[d], along)
        else:
            coord = bxp.reshape(bxp.arange(shape[d], device=dev), (1,) * d + (shape[d],) + (1,) * (nd - d - 1))
        ids = coord * stride + ids
        stride *= shape[d]
    return scatter_add(xp, g, ids, shape)


def _take_along_axis_fwd(xp: Any, x: Any, indices: Any, *, axis: int) -> Any:
    native = getattr(xp, "take_along_axis", None)
    if native is not None:
        return native(x, indices, axis=axis)
    # a backend without it (Dask): one flat take of the broadcast flat positions
    nd = x.ndim
    ax = axis % nd
    dev = array_api_compat.device(x)
    shape = tuple(int(s) for s in x.shape)
    flat: Any = 0
    stride = 1
    for d in range(nd - 1, -1, -1):
        if d == ax:
            coord = xp.where(indices < 0, indices + shape[d], indices)
        else:
            coord = xp.reshape(xp.arange(shape[d], device=dev), (1,) * d + (shape[d],) + (1,) * (nd - d - 1))
        flat = coord * stride + flat
        stride *= shape[d]
    return _gather_fwd(xp, x, flat)


def _take_along_axis_vjp(xp: Any, g: Any, ans: Any, x: Any, indices: Any, *, axis: int) -> Any:
    shape = tuple(x.shape)
    idx = _raw(indices)
    ids = source_index(g, shape, lambda bxp, pos: _take_along_axis_fwd(bxp, pos, idx, axis=axis))
    return scatter_add(xp, g, ids, shape)


def _take_along_axis_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x, idx = xs
    bx, bi = bs
    n = len(x.shape) - K if bx else len(x.shape)
    ni = len(idx.shape) - K if bi else len(idx.shape)
    if ni != n:
        msg = f"take_along_axis: indices must have the rank of x ({n}), got {ni} (inside vmap)"
        raise XpgradValueError(msg)
    ax = shift_axis("take_along_axis", kw.get("axis", -1), n, K)
    # take_along_axis does not broadcast: both with full batch axes
    xf, ii = full([x, idx], [bx, bi], K)
    return apply(prim, (xf, ii), {**kw, "axis": ax})


@op.function(batch=_take_along_axis_batch, fwd=_take_along_axis_fwd, vjp=(_take_along_axis_vjp, None), jvp="linear",
             arrays=2, save=(1,))
def take_along_axis(x: Array, indices: Array, /, *, axis: int = -1) -> Array:
    """Elements of ``x`` at ``indices`` along ``axis``; ``indices`` has ``x``'s rank.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([[10.0, 30.0, 20.0], [60.0, 40.0, 50.0]])
        >>> xg.take_along_axis(x, xg.asarray([[1], [0]]), axis=1)
        Tensor([[30.],
                [60.]], dtype=float64, device=cpu)
    """


_take_along_axis = prim_of(take_along_axis)


def _take_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x, idx = xs
    bx, bi = bs
    n = len(x.shape) - K if bx else len(x.shape)
    axis = kw.get("axis")
    if axis is None:
        if n != 1:
            msg = f"take: axis is required when x is not one-dimensional, got x with {n} dimensions"
            raise XpgradValueError(msg)
        axis = 0
    if not bi:  # one index array for every example: a take along the shifted axis
        return apply(prim, (x, idx), {**kw, "axis": shift_axis("take", axis, n, K)})
    ni = len(idx.shape) - K
    if ni != 1:
        msg = f"take: indices must be a one-dimensional integer array, got {ni} dimensions (inside vmap)"
        raise XpgradValueError(msg)
    # per-example indices: take_along_axis with the indices spread over the other axes
    ax = shift_axis("take", axis, n, K)
    xf = full([x], [bx], K)[0]
    s = tuple(xf.shape)
    m = int(idx.shape[-1])
    ii = _named("reshape", idx, shape=tuple(idx.shape[:K]) + (1,) * (ax - K) + (m,) + (1,) * (len(s) - ax - 1))
    ii = _named("broadcast_to", ii, shape=(*s[:ax], m, *s[ax + 1:]))
    return _take_along_axis(xf, ii, axis=ax)


_take = op.primitive("take", fwd=_take_fwd, batch=_take_batch, vjp=(_take_vjp, None), jvp="linear", save=(1,))


@op.entry(_take, nargs=2)
def take(x: Array, indices: Array, /, *, axis: int | None = None) -> Array:
    """Elements of ``x`` at ``indices`` (a 1-D integer array) along ``axis``.

    ``axis`` may be omitted only for a one-dimensional ``x``. The gradient adds
    up over repeated indices.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        >>> xg.take(x, xg.asarray([2, 0, 2]), axis=1)
        Tensor([[3., 1., 3.],
                [6., 4., 6.]], dtype=float64, device=cpu)
    """
    if axis is None and x.ndim != 1:
        msg = f"take: axis is required when x is not one-dimensional, got x with {x.ndim} dimensions"
        raise XpgradValueError(msg)
    return _take.bind(x, indices, axis=axis)


# ================================================================ vmap
# Batching rules of indexing: ``getitem``/``setitem`` keys, and the internal ``gather``/``scatter_add``/``embed`` that their gradients use.
#
# A key of ints, slices, None and ``...`` gets ``K`` leading full slices. A key with index
# arrays (advanced indexing) gets, for each batch axis, an ``arange`` index array that
# broadcasts with the key's own index arrays (batched ones keep their batch axes in front,
# padded to the rank of the broadcast index shape), so each example gathers from its own
# slot; the result's axes are then put in the example's order: the backends place the
# broadcast index axes first when the key's advanced indices are not adjacent (NumPy's rule;
# PyTorch and Dask do not count Python ints as advanced indices). A lone boolean mask moves
# the batch axes to the end instead (array-api-strict allows a mask only as the sole index).
# A batched boolean mask would select a different number of elements per example: an
# error, as in JAX (``xg.where`` is the batchable form).
#
# (``reshape``, ``broadcast_to``, ``permute_dims`` and ``stack`` are applied by name, ``_named``:
# ``ops.manipulation`` imports this module, so their primitives are not importable here.)
_where_p = prim_of(where)


_MASK_MSG = (
    "{name}: cannot be used on a value batched by vmap: a batched boolean mask selects a different number of "
    "elements in each example, so the result's shape would depend on the data; use xg.where(mask, x, 0) (or "
    "xg.where(mask, value, x) for an assignment) instead, or pass the mask with in_axes=None"
)


# ---------------------------------------------------------------- keys
def _is_arr(k: Any) -> bool:
    return hasattr(k, "shape") and hasattr(k, "dtype")


def _is_mask(k: Any) -> bool:
    if not _is_arr(k):
        return False
    return dtype_name(k.dtype) == "bool"


def _ints_basic(x: Any) -> bool:
    """Whether the backend of ``x`` applies Python ints in a key before its index arrays
    (PyTorch, Dask), so that they never separate the index arrays (NumPy counts them)."""
    return bool(array_api_compat.is_torch_array(x) or array_api_compat.is_dask_array(x))


def _is_dask(x: Any) -> bool:
    return bool(array_api_compat.is_dask_array(x))


def _normalize(key: Any, like: Any) -> tuple[Any, ...]:
    """The key's parts: plain Tensors as their arrays, lists as arrays of ``like``'s backend;
    Batched parts stay."""
    parts = key if type(key) is tuple else (key,)
    out: list[Any] = []
    for k in parts:
        if isinstance(k, Batched):
            out.append(k)
        elif isinstance(k, Tensor):
            out.append(k.data)
        elif isinstance(k, list):
            bxp = backend_namespace(like)
            out.append(bxp.asarray(k, device=array_api_compat.device(like)))
        else:
            out.append(k)
    return tuple(out)


def _levels_of(*vals: Any) -> int:
    K = 0
    for v in vals:
        if isinstance(v, Batched):
            _check_levels(v, "getitem")
            K = max(K, len(v._levels))
    return K


class _Layout:
    """Where an example's ``x[key]`` puts its axes (see the module docstring).

    ``items``: the key with ``...`` expanded into full slices; ``adv``: positions of the
    advanced indices; ``A``: rank of their broadcast shape; ``adjacent``: whether they are
    adjacent (their axes then replace them in place); ``nb``: result axes before them
    (when adjacent); ``ndim``: the result's rank.
    """

    __slots__ = ("A", "adjacent", "adv", "items", "nb", "ndim")

    def __init__(self, parts: tuple[Any, ...], ndim: int, torch_sem: bool, func: str) -> None:
        used = 0
        for k in parts:
            if k is None or k is Ellipsis:
                continue
            used += k.ndim if _is_mask(k) else 1
        if sum(k is Ellipsis for k in parts) > 1:
            msg = f"{func}: an index can only have a single ellipsis ('...')"
            raise XpgradIndexError(msg)
        if used > ndim:
            msg = f"{func}: too many indices for an array of dimension {ndim} (inside vmap)"
            raise XpgradIndexError(msg)
        items: list[Any] = []
        for k in parts:
            if k is Ellipsis:
                items.extend([slice(None)] * (ndim - used))
            else:
                items.append(k)
        if not any(k is Ellipsis for k in parts):
            items.extend([slice(None)] * (ndim - used))
        self.items = items
        has_arr = any(_is_arr(k) for k in items)
        adv: list[int] = []
        seq: list[int] = []  # positions that count for adjacency (torch: ints are transparent)
        for j, k in enumerate(items):
            if _is_arr(k):
                adv.append(j)
                seq.append(j)
            elif k is None or type(k) is slice:
                seq.append(j)
            elif has_arr and not torch_sem:  # a Python int: advanced next to index arrays (NumPy's rule)
                adv.append(j)
                seq.append(j)
        self.adv = adv
        self.A = max((1 if _is_mask(k) else k.ndim for k in items if _is_arr(k)), default=0)
        if adv:
            lo, hi = seq.index(adv[0]), seq.index(adv[-1])
            self.adjacent = hi - lo + 1 == len(adv)
        else:
            self.adjacent = True
        first = adv[0] if adv else len(items)
        self.nb = sum(1 for k in items[:first] if k is None or type(k) is slice)
        basic = sum(1 for k in items if k is None or type(k) is slice)
        self.ndim = basic + (self.A if adv else 0)


def _raw_phys(k: Any, st: tuple[Any, ...], K: int, A: int) -> Any:
    """The physical array of a batched index array: ``K`` batch axes, then padded to rank ``A``."""
    t = lift(k, st)
    raw = t.data
    s = tuple(raw.shape)
    n = len(s) - K
    if n < A:
        raw = backend_namespace(raw).reshape(raw, s[:K] + (1,) * (A - n) + s[K:])
    return raw


def _aranges(like: Any, sizes: tuple[int, ...], A: int) -> list[Any]:
    """One index array per batch axis, ``arange(size)`` along its own axis, broadcasting with
    index arrays of rank ``A`` behind the batch axes."""
    bxp = backend_namespace(like)
    dev = array_api_compat.device(like)
    K = len(sizes)
    return [bxp.reshape(bxp.arange(n, device=dev), (1,) * lv + (n,) + (1,) * (K - lv - 1 + A))
            for lv, n in enumerate(sizes)]


def _perm(ndim: int, order: list[int]) -> Any:
    return None if order == list(range(ndim)) else tuple(order)


def _permute(t: Any, axes: Any) -> Any:
    return t if axes is None else _named("permute_dims", t, axes=axes)


def _to_example_order(K: int, lay: _Layout, ndim: int) -> Any:
    """From (batch, broadcast index axes, other axes) to (batch, the example's order)."""
    if not lay.adjacent or lay.nb == 0:
        return None
    A, nb = lay.A, lay.nb
    order = [*range(K), *range(K + A, K + A + nb), *range(K, K + A), *range(K + A + nb, ndim)]
    return _perm(ndim, order)


def _from_example_order(K: int, lay: _Layout, ndim: int) -> Any:
    """The inverse of `_to_example_order` (for a value assigned through the key)."""
    if not lay.adjacent or lay.nb == 0:
        return None
    A, nb = lay.A, lay.nb
    order = [*range(K), *range(K + nb, K + nb + A), *range(K, K + nb), *range(K + nb + A, ndim)]
    return _perm(ndim, order)


def _lone_mask(parts: tuple[Any, ...]) -> Any:
    if len(parts) == 1 or (len(parts) == 2 and parts[1] is Ellipsis):
        if _is_mask(parts[0]):
            return parts[0]
    return None


def _batch_last(t: Any, K: int) -> Any:
    n = len(t.shape)
    return _permute(t, _perm(n, [*range(K, n), *range(K)]))


def _batch_first(t: Any, K: int) -> Any:
    n = len(t.shape)
    return _permute(t, _perm(n, [*range(n - K, n), *range(n - K)]))


def _check_masks(parts: tuple[Any, ...], name: str) -> None:
    for k in parts:
        if isinstance(k, Batched) and _is_mask(k):
            raise XpgradValueError(_MASK_MSG.format(name=name))


# ---------------------------------------------------------------- getitem
def _copied_eagerly(raw: Any, out: Any, parts: tuple[Any, ...], K: int) -> bool:
    """Whether ``out`` (the physical result of a basic key whose example is 0-d) is a view of
    ``raw`` where the key on one example gives a copy (NumPy's and array-api-strict's integer
    indexing gives a scalar; torch's a view): the batched result must then be a copy too, or a
    later write into ``raw`` would show through it (``y[0], y[1] = y[1], y[0]``)."""
    if not may_alias(out, raw):
        return False
    ex = raw[(0,) * K + (Ellipsis,)]
    return not may_alias(_getitem.fwd(backend_namespace(ex), ex, key=parts), ex)


def batched_getitem(x: Any, key: Any) -> Tensor:
    """``x[key]`` where ``x`` or an index array in ``key`` is batched."""
    parts = _normalize(key, x._inner.data if isinstance(x, Batched) else x.data)
    _check_masks(parts, "getitem")
    K = _levels_of(x, *parts)
    st = STACK.get()[:K]
    phys = lift(x, st)
    n = len(phys.shape) - K
    if all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in parts):
        out = _getitem(phys, key=(slice(None),) * K + parts)
        if len(out.shape) == K and _copied_eagerly(phys.data, out.data, parts, K):
            out = _astype(out, dtype=out.data.dtype, copy=True)
        return from_phys(out, st)  # type: ignore[no-any-return]
    mask = _lone_mask(parts)
    if mask is not None:  # x[m] of an unbatched mask: the mask over the leading axes, batch axes last
        out = _getitem(_batch_last(phys, K), key=mask)
        return from_phys(_batch_first(out, K), st)  # type: ignore[no-any-return]
    raw = phys.data
    lay = _Layout(parts, n, _ints_basic(raw), "getitem")
    batched = any(isinstance(k, Batched) for k in lay.items)
    if _is_dask(raw):
        # Dask indexes with one integer array at most: batch axes as full slices, or one
        # example at a time when the index arrays are batched
        if batched:
            return from_phys(_dask_loop(phys, lay, st, K), st)  # type: ignore[no-any-return]
        out = _getitem(phys, key=(slice(None),) * K + tuple(lay.items))
        if not lay.adjacent:  # (index axes, batch axes, rest): batch axes to the front
            nd = len(out.shape)
            out = _permute(out, _perm(nd, [*range(lay.A, lay.A + K), *range(lay.A), *range(lay.A + K, nd)]))
        return from_phys(out, st)  # type: ignore[no-any-return]
    pkey = _arange_key(raw, lay, st, K)
    out = _getitem(phys, key=pkey)
    out = _permute(out, _to_example_order(K, lay, len(out.shape)))
    return from_phys(out, st)  # type: ignore[no-any-return]


def _arange_key(raw: Any, lay: _Layout, st: tuple[Any, ...], K: int) -> tuple[Any, ...]:
    items = [_raw_phys(k, st, K, lay.A) if isinstance(k, Batched) else k for k in lay.items]
    return (*_aranges(raw, tuple(raw.shape[:K]), lay.A), *items)


def _dask_loop(phys: Any, lay: _Layout, st: tuple[Any, ...], K: int) -> Any:
    """One example at a time (Dask has no indexing by several integer arrays)."""
    sizes = tuple(lv.size for lv in st)
    raws = [lift(k, st).data if isinstance(k, Batched) else None for k in lay.items]
    outs = []
    for b in itertools.product(*(range(s) for s in sizes)):
        xb = _getitem(phys, key=tuple(i if phys.shape[j] != 1 else 0 for j, i in enumerate(b)))
        kb = tuple(k if r is None else r[tuple(i if r.shape[j] != 1 else 0 for j, i in enumerate(b))]
                   for k, r in zip(lay.items, raws))
        outs.append(_getitem(xb, key=kb))
    out = _named("stack", *outs, axis=0)
    return _named("reshape", out, shape=sizes + tuple(out.shape[1:]))


# ---------------------------------------------------------------- setitem (out of place)
def _widen(phys: Any, K: int, *groups: list[Any]) -> Any:
    """``phys`` broadcast along the batch axes on which an array of ``groups`` is larger."""
    sizes = list(phys.shape[:K])
    for g in groups:
        for a in g:
            for lv in range(K):
                if a.shape[lv] != 1:
                    sizes[lv] = a.shape[lv]
    if tuple(sizes) == tuple(phys.shape[:K]):
        return phys
    return _named("broadcast_to", phys, shape=tuple(sizes) + tuple(phys.shape[K:]))


def _as_tensor(v: Any) -> Any:
    if isinstance(v, Tensor) or not _is_arr(v):
        return v
    return _wrap(v)


def batched_setitem(x: Any, value: Any, key: Any) -> Tensor:
    """The out-of-place ``x[key] = value`` where ``x``, ``value`` or an index array in ``key`` is batched."""
    like = x._inner.data if isinstance(x, Batched) else x.data
    parts = _normalize(key, like)
    K = _levels_of(x, value, *parts)
    st = STACK.get()[:K]
    phys = lift(x, st)
    n = len(phys.shape) - K
    vb = isinstance(value, Batched)
    vphys = lift(value, st) if vb else value
    mask = _lone_mask(parts)
    if mask is not None:
        return from_phys(_set_mask(phys, vphys, vb, mask, st, K, n), st)  # type: ignore[no-any-return]
    _check_masks(parts, "setitem")
    # every example that writes something of its own writes into its own copy of x (only the
    # levels along which the value or the key varies: x keeps a size-1 axis elsewhere)
    phys = _widen(phys, K, [vphys] if vb else [], [lift(k, st) for k in parts if isinstance(k, Batched)])
    basic = all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in parts)
    lay = _Layout(parts, n, _ints_basic(phys.data), "setitem")
    if vb:
        vphys = pad(vphys, K, lay.ndim)
    elif _is_arr(vphys) and len(vphys.shape) > 0 and not basic:
        # an unbatched value: rank of the target, so that it can be put in the physical order
        s = tuple(vphys.shape)
        vphys = _named("reshape", _as_tensor(vphys), shape=(1,) * K + (1,) * (lay.ndim - len(s)) + s)
        vb = True
    if basic:
        return from_phys(_setitem(phys, vphys, key=(slice(None),) * K + parts), st)  # type: ignore[no-any-return]
    if vb:
        vphys = _permute(vphys, _from_example_order(K, lay, len(vphys.shape)))
    pkey = _arange_key(phys.data, lay, st, K)
    return from_phys(_setitem(phys, vphys, key=pkey), st)  # type: ignore[no-any-return]


def _set_mask(phys: Any, vphys: Any, vb: bool, mask: Any, st: tuple[Any, ...], K: int, n: int) -> Any:
    """``x[m] = v`` for a lone mask: a ``where`` when ``v`` does not depend on how many elements
    ``m`` selects, else (unbatched ``m``) the assignment with the batch axes last."""
    r = len(mask.shape)
    vnd = (len(vphys.shape) - K if vb else len(vphys.shape)) if _is_arr(vphys) else 0
    if vnd <= n - r:
        if isinstance(mask, Batched):
            m = lift(mask, st)
            s = tuple(m.shape)
            cond: Any = _named("reshape", m, shape=s + (1,) * (n - r))
        else:
            cond = backend_namespace(mask).reshape(mask, tuple(mask.shape) + (1,) * (n - r))
        v = pad(vphys, K, n) if vb else vphys
        want = raw_dtype(phys)
        if isinstance(v, Tensor):
            if raw_dtype(v) != want:
                v = _astype(v, dtype=want)
        elif _is_arr(v):
            if v.dtype != want:
                v = backend_namespace(v).astype(v, want)
        else:  # a Python scalar: an array of x's dtype
            v = backend_namespace(phys.data).asarray(v, dtype=want, device=array_api_compat.device(phys.data))
        return _where_p(cond, v, phys)
    if isinstance(mask, Batched):
        raise XpgradValueError(_MASK_MSG.format(name="setitem"))
    if vb:
        phys = _widen(phys, K, [vphys], [])
        v = _batch_last(pad(vphys, K, n - r + 1), K)
    else:
        v = vphys
    out = _setitem(_batch_last(phys, K), v, key=mask)
    return _batch_first(out, K)


# ---------------------------------------------------------------- getitem, setitem, gather, scatter
@_getitem.batching
def _getitem_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """``getitem`` applied as a primitive to a batched value (a gradient rule's, under vmap of a vjp)."""
    st = STACK.get()[:K]
    return lift(batched_getitem(from_phys(xs[0], st), kw["key"]), st)


@_setitem.batching
def _setitem_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    st = STACK.get()[:K]
    x, v = (from_phys(a, st) if b else a for a, b in zip(xs, bs))
    if not isinstance(x, Tensor):
        x = _wrap(x)
    return lift(batched_setitem(x, v, kw["key"]), st)


# ---------------------------------------------------------------- gather, scatter_add, embed
# (the gradients of getitem/take/take_along_axis: they run batched when vmap of a vjp pulls
# batched cotangents back through them; the positions are always unbatched there)
def _flat_offsets(like: Any, sizes: tuple[int, ...], size: int) -> Any:
    """Per batch position, the offset of its example in the flattened physical array."""
    bxp = backend_namespace(like)
    dev = array_api_compat.device(like)
    total = math.prod(sizes)
    return bxp.reshape(bxp.arange(total, device=dev) * size, sizes)


def _ids_batched(ids: Any, sizes: tuple[int, ...], size: int, like: Any) -> Any:
    """Flat positions ``ids`` of one example, for every example of the batch (offsets added)."""
    bxp = backend_namespace(like)
    ids = ids.data if isinstance(ids, Tensor) else ids
    off = _flat_offsets(ids, sizes, size)
    nd = len(ids.shape)
    return bxp.reshape(off, sizes + (1,) * nd) + ids


@_gather.batching
def _gather_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x, ids = xs
    if bs[1]:
        msg = "gather: batched positions are not supported inside vmap"
        raise XpgradTypeError(msg)
    xf = full([x], [True], K)[0]
    s = tuple(xf.shape)
    sizes = s[:K]
    size = math.prod(s[K:])
    return apply(prim, (xf, _ids_batched(ids, sizes, size, xf.data)), kw)


@_scatter_add.batching
def _scatter_add_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    v, ids = xs
    if bs[1]:
        msg = "scatter_add: batched positions are not supported inside vmap"
        raise XpgradTypeError(msg)
    shape = tuple(kw["shape"])
    ids_raw = ids.data if isinstance(ids, Tensor) else ids
    v = pad(v, K, len(ids_raw.shape))
    sizes = tuple(lv.size for lv in STACK.get()[:K])
    v = _named("broadcast_to", v, shape=sizes + tuple(ids_raw.shape))
    size = math.prod(shape)
    return apply(prim, (v, _ids_batched(ids_raw, sizes, size, ids_raw)), {**kw, "shape": sizes + shape})


@_embed.batching
def _embed_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    (v,) = xs
    key = kw["key"]
    shape = tuple(kw["shape"])
    parts = key if type(key) is tuple else (key,)
    sizes = tuple(v.shape[:K])
    if any(_is_arr(k) for k in parts):
        # index arrays (masks too): the batch axes go last, after every axis the key leaves
        # alone, where numpy's placement of the indexed axes cannot reach them; the example's
        # key then indexes the physical array as it indexed the example
        mask = _lone_mask(parts)  # (alone: as it is, which every backend's setitem takes)
        key = mask if mask is not None else tuple(_Layout(parts, len(shape), False, "embed").items)  # (... spelled out)
        out = apply(prim, (_batch_last(v, K),), {"key": key, "shape": shape + sizes})
        return _batch_first(out, K)
    return apply(prim, (v,), {"key": (slice(None),) * K + parts, "shape": sizes + shape})


set_indexing(batched_getitem, batched_setitem)  # (Batched indexing, in the autograd layer, calls them)


op.check_all(__all__)
