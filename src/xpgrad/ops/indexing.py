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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import array_api_compat
import array_api_extra as xpx

from .. import _tracing
from .._dispatch import backend_namespace
from .._dispatch import raw_array as _raw
from .._dtypes import dtype_name, fast_name
from .._exceptions import XpgradValueError
from ..autograd._core import Primitive
from ._common import NOKW, Array, Tensor, apply, is_xpgrad, joint_linear_jvp, linear_jvp, primitive

__all__ = ["take", "take_along_axis"]

_C = "indexing"
_I = "internal"


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


_take: Primitive = primitive("take", _take_fwd, save=(1,), chapter=_C)
_take.defvjp(_take_vjp, None)
_take.defjvp(linear_jvp(_take), None)


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


_take_along_axis: Primitive = primitive("take_along_axis", _take_along_axis_fwd, save=(1,), chapter=_C)
_take_along_axis.defvjp(_take_along_axis_vjp, None)
_take_along_axis.defjvp(linear_jvp(_take_along_axis), None)


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
    return apply(_take, (x, indices), {"axis": axis})


def take_along_axis(x: Array, indices: Array, /, *, axis: int = -1) -> Array:
    """Elements of ``x`` at ``indices`` along ``axis``; ``indices`` has ``x``'s rank.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([[10.0, 30.0, 20.0], [60.0, 40.0, 50.0]])
        >>> xg.take_along_axis(x, xg.asarray([[1], [0]]), axis=1)
        Tensor([[30.],
                [60.]], dtype=float64, device=cpu)
    """
    return apply(_take_along_axis, (x, indices), {"axis": axis})
