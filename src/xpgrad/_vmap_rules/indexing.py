"""Batching rules of indexing: ``getitem``/``setitem`` keys, ``take``, ``take_along_axis``,
and the internal ``gather``/``scatter_add``/``embed`` that their gradients use.

A key of ints, slices, None and ``...`` gets ``K`` leading full slices. A key with
index arrays (advanced indexing) gets, for each batch axis, an ``arange`` index array
that broadcasts with the key's own index arrays (batched ones keep their batch axes
in front, padded to the rank of the broadcast index shape), so each example gathers
from its own slot; the result's axes are then put in the example's order: the
backends place the broadcast index axes first when the key's advanced indices are not
adjacent (NumPy's rule; PyTorch and Dask do not count Python ints as advanced indices). A
lone boolean mask moves the batch axes to the end instead (array-api-strict allows a
mask only as the sole index). A batched boolean mask would select a different number
of elements per example: an error, as in JAX (``xg.where`` is the batchable form).
"""



from __future__ import annotations

import math
from typing import Any

import array_api_compat

from .._dispatch import backend_namespace
from .._dtypes import dtype_name
from .._exceptions import XpgradIndexError, XpgradTypeError, XpgradValueError
from ..autograd._alias import may_alias
from ..autograd._batched import RULES, STACK, Batched, _check_levels, from_phys, lift, set_indexing, shift_axis
from ..autograd._core import PRIMITIVES, Primitive, apply, raw_dtype
from ..autograd._tensor import Tensor, _wrap
from ._util import full, op, pad

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
    return t if axes is None else op("permute_dims", t, axes=axes)


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


def _single_mask(parts: tuple[Any, ...]) -> Any:
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
    return not may_alias(PRIMITIVES["getitem"].fwd(backend_namespace(ex), ex, key=parts), ex)


def batched_getitem(x: Any, key: Any) -> Tensor:
    """``x[key]`` where ``x`` or an index array in ``key`` is batched."""
    parts = _normalize(key, x._inner.data if isinstance(x, Batched) else x.data)
    _check_masks(parts, "getitem")
    K = _levels_of(x, *parts)
    st = STACK.get()[:K]
    phys = lift(x, st)
    n = len(phys.shape) - K
    if all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in parts):
        out = op("getitem", phys, key=(slice(None),) * K + parts)
        if len(out.shape) == K and _copied_eagerly(phys.data, out.data, parts, K):
            out = op("astype", out, dtype=out.data.dtype, copy=True)
        return from_phys(out, st)  # type: ignore[no-any-return]
    mask = _single_mask(parts)
    if mask is not None:  # x[m] of an unbatched mask: the mask over the leading axes, batch axes last
        out = op("getitem", _batch_last(phys, K), key=mask)
        return from_phys(_batch_first(out, K), st)  # type: ignore[no-any-return]
    raw = phys.data
    lay = _Layout(parts, n, _ints_basic(raw), "getitem")
    batched = any(isinstance(k, Batched) for k in lay.items)
    if _is_dask(raw):
        # Dask indexes with one integer array at most: batch axes as full slices, or one
        # example at a time when the index arrays are batched
        if batched:
            return from_phys(_dask_loop(phys, lay, st, K), st)  # type: ignore[no-any-return]
        out = op("getitem", phys, key=(slice(None),) * K + tuple(lay.items))
        if not lay.adjacent:  # (index axes, batch axes, rest): batch axes to the front
            nd = len(out.shape)
            out = _permute(out, _perm(nd, [*range(lay.A, lay.A + K), *range(lay.A), *range(lay.A + K, nd)]))
        return from_phys(out, st)  # type: ignore[no-any-return]
    pkey = _arange_key(raw, lay, st, K)
    out = op("getitem", phys, key=pkey)
    out = _permute(out, _to_example_order(K, lay, len(out.shape)))
    return from_phys(out, st)  # type: ignore[no-any-return]


def _arange_key(raw: Any, lay: _Layout, st: tuple[Any, ...], K: int) -> tuple[Any, ...]:
    items = [_raw_phys(k, st, K, lay.A) if isinstance(k, Batched) else k for k in lay.items]
    return (*_aranges(raw, tuple(raw.shape[:K]), lay.A), *items)


def _dask_loop(phys: Any, lay: _Layout, st: tuple[Any, ...], K: int) -> Any:
    """One example at a time (Dask has no indexing by several integer arrays)."""
    import itertools

    sizes = tuple(lv.size for lv in st)
    raws = [lift(k, st).data if isinstance(k, Batched) else None for k in lay.items]
    outs = []
    for b in itertools.product(*(range(s) for s in sizes)):
        xb = op("getitem", phys, key=tuple(i if phys.shape[j] != 1 else 0 for j, i in enumerate(b)))
        kb = tuple(k if r is None else r[tuple(i if r.shape[j] != 1 else 0 for j, i in enumerate(b))]
                   for k, r in zip(lay.items, raws))
        outs.append(op("getitem", xb, key=kb))
    out = op("stack", *outs, axis=0)
    return op("reshape", out, shape=sizes + tuple(out.shape[1:]))


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
    return op("broadcast_to", phys, shape=tuple(sizes) + tuple(phys.shape[K:]))


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
    mask = _single_mask(parts)
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
        vphys = op("reshape", _as_tensor(vphys), shape=(1,) * K + (1,) * (lay.ndim - len(s)) + s)
        vb = True
    if basic:
        return from_phys(op("setitem", phys, vphys, key=(slice(None),) * K + parts), st)  # type: ignore[no-any-return]
    if vb:
        vphys = _permute(vphys, _from_example_order(K, lay, len(vphys.shape)))
    pkey = _arange_key(phys.data, lay, st, K)
    return from_phys(op("setitem", phys, vphys, key=pkey), st)  # type: ignore[no-any-return]


def _set_mask(phys: Any, vphys: Any, vb: bool, mask: Any, st: tuple[Any, ...], K: int, n: int) -> Any:
    """``x[m] = v`` for a lone mask: a ``where`` when ``v`` does not depend on how many elements
    ``m`` selects, else (unbatched ``m``) the assignment with the batch axes last."""
    r = len(mask.shape)
    vnd = (len(vphys.shape) - K if vb else len(vphys.shape)) if _is_arr(vphys) else 0
    if vnd <= n - r:
        if isinstance(mask, Batched):
            m = lift(mask, st)
            s = tuple(m.shape)
            cond: Any = op("reshape", m, shape=s + (1,) * (n - r))
        else:
            cond = backend_namespace(mask).reshape(mask, tuple(mask.shape) + (1,) * (n - r))
        v = pad(vphys, K, n) if vb else vphys
        want = raw_dtype(phys)
        if isinstance(v, Tensor):
            if raw_dtype(v) != want:
                v = op("astype", v, dtype=want)
        elif _is_arr(v):
            if v.dtype != want:
                v = backend_namespace(v).astype(v, want)
        else:  # a Python scalar: an array of x's dtype
            v = backend_namespace(phys.data).asarray(v, dtype=want, device=array_api_compat.device(phys.data))
        return op("where", cond, v, phys)
    if isinstance(mask, Batched):
        raise XpgradValueError(_MASK_MSG.format(name="setitem"))
    if vb:
        phys = _widen(phys, K, [vphys], [])
        v = _batch_last(pad(vphys, K, n - r + 1), K)
    else:
        v = vphys
    out = op("setitem", _batch_last(phys, K), v, key=mask)
    return _batch_first(out, K)


# ---------------------------------------------------------------- take, take_along_axis
def _take(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
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
    ii = op("reshape", idx, shape=tuple(idx.shape[:K]) + (1,) * (ax - K) + (m,) + (1,) * (len(s) - ax - 1))
    ii = op("broadcast_to", ii, shape=(*s[:ax], m, *s[ax + 1:]))
    return op("take_along_axis", xf, ii, axis=ax)


def _take_along_axis(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
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


def _getitem_rule(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """``getitem`` applied as a primitive to a batched value (a gradient rule's, under vmap of a vjp)."""
    st = STACK.get()[:K]
    return lift(batched_getitem(from_phys(xs[0], st), kw["key"]), st)


def _setitem_rule(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    st = STACK.get()[:K]
    x, v = (from_phys(a, st) if b else a for a, b in zip(xs, bs))
    if not isinstance(x, Tensor):
        x = _wrap(x)
    return lift(batched_setitem(x, v, kw["key"]), st)


RULES["getitem"] = _getitem_rule
RULES["setitem"] = _setitem_rule
RULES["take"] = _take
RULES["take_along_axis"] = _take_along_axis


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


def _gather(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x, ids = xs
    if bs[1]:
        msg = "gather: batched positions are not supported inside vmap"
        raise XpgradTypeError(msg)
    xf = full([x], [True], K)[0]
    s = tuple(xf.shape)
    sizes = s[:K]
    size = math.prod(s[K:])
    return apply(prim, (xf, _ids_batched(ids, sizes, size, xf.data)), kw)


def _scatter_add(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    v, ids = xs
    if bs[1]:
        msg = "scatter_add: batched positions are not supported inside vmap"
        raise XpgradTypeError(msg)
    shape = tuple(kw["shape"])
    ids_raw = ids.data if isinstance(ids, Tensor) else ids
    v = pad(v, K, len(ids_raw.shape))
    sizes = tuple(lv.size for lv in STACK.get()[:K])
    v = op("broadcast_to", v, shape=sizes + tuple(ids_raw.shape))
    size = math.prod(shape)
    return apply(prim, (v, _ids_batched(ids_raw, sizes, size, ids_raw)), {**kw, "shape": sizes + shape})


def _embed(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    (v,) = xs
    key = kw["key"]
    shape = tuple(kw["shape"])
    parts = key if type(key) is tuple else (key,)
    sizes = tuple(v.shape[:K])
    if any(_is_arr(k) for k in parts):
        # index arrays (masks too): the batch axes go last, after every axis the key leaves
        # alone, where numpy's placement of the indexed axes cannot reach them; the example's
        # key then indexes the physical array as it indexed the example
        mask = _single_mask(parts)  # (alone: as it is, which every backend's setitem takes)
        key = mask if mask is not None else tuple(_Layout(parts, len(shape), False, "embed").items)  # (... spelled out)
        out = apply(prim, (_batch_last(v, K),), {"key": key, "shape": shape + sizes})
        return _batch_first(out, K)
    return apply(prim, (v,), {"key": (slice(None),) * K + parts, "shape": sizes + shape})


RULES["gather"] = _gather
RULES["scatter_add"] = _scatter_add
RULES["embed"] = _embed
set_indexing(batched_getitem, batched_setitem)  # (Batched indexing, in the autograd layer, calls them)
