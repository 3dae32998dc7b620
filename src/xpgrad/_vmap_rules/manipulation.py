"""Batching rules of the manipulation functions: shapes and axes gain the batch axes in front.

Functions of the flattened example (``roll``, ``concat`` and ``repeat`` with ``axis=None``)
flatten each example instead: the physical value becomes ``(batch..., -1)`` and the
function acts along axis ``K``. Joins (``concat``, ``stack``) need every argument with
full-size batch axes (`_util.full`); functions that broadcast (``tile``,
``broadcast_arrays``, ``meshgrid``) pad the example's axes as their unbatched call would.
"""

from __future__ import annotations

from typing import Any

from .._exceptions import XpgradIndexError, XpgradValueError
from ..autograd._batched import RULES, shift_axes, shift_axis
from ..autograd._core import Primitive, apply
from ._util import full, lndim, op, pad, pad_all
from .reductions import along_axes


def _reshape(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x = xs[0]
    shape = kw["shape"]
    if isinstance(shape, int):
        shape = (shape,)
    return apply(prim, xs, {**kw, "shape": tuple(x.shape)[:K] + tuple(shape)})


def _broadcast_to(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    shape = tuple(kw["shape"])
    x = pad(xs[0], K, len(shape))
    return apply(prim, (x,), {**kw, "shape": tuple(x.shape)[:K] + shape})


def _expand_dims(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
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


def _squeeze(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    n = len(xs[0].shape) - K
    return apply(prim, xs, {**kw, "axis": shift_axes(prim.name, kw["axis"], n, K)})


def _permute_dims(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    n = len(xs[0].shape) - K
    axes = tuple(kw["axes"])
    if len(axes) != n:
        msg = f"{prim.name}: axes {axes} do not match an array of dimension {n}"
        raise XpgradIndexError(msg)
    return apply(prim, xs, {**kw, "axes": tuple(range(K)) + tuple(shift_axis(prim.name, a, n, K) for a in axes)})


def _moveaxis(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    n = len(xs[0].shape) - K
    src, dst = kw["source"], kw["destination"]
    return apply(prim, xs, {**kw, "source": shift_axes(prim.name, src, n, K),
                            "destination": shift_axes(prim.name, dst, n, K)})


RULES["reshape"] = _reshape
RULES["broadcast_to"] = _broadcast_to
RULES["expand_dims"] = _expand_dims
RULES["squeeze"] = _squeeze
RULES["permute_dims"] = _permute_dims
RULES["moveaxis"] = _moveaxis
RULES["flip"] = along_axes


def _flat(x: Any, K: int) -> Any:
    """Physical ``x`` with each example flattened: shape ``(batch..., -1)``."""
    s = tuple(x.shape)
    if len(s) == K + 1:
        return x
    return op("reshape", x, shape=(*s[:K], -1))


def _roll(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x = xs[0]
    s = tuple(x.shape)
    axis = kw.get("axis")
    if axis is None:  # the flattened example rolls, then takes its shape back
        out = apply(prim, (_flat(x, K),), {**kw, "axis": K})
        return op("reshape", out, shape=s) if len(s) != K + 1 else out
    return apply(prim, tuple(xs), {**kw, "axis": shift_axes(prim.name, axis, len(s) - K, K)})


def _concat(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    ys = full(xs, bs, K)
    axis = kw.get("axis", 0)
    if axis is None:  # each example's arrays flattened, then joined
        return apply(prim, tuple(_flat(y, K) for y in ys), {**kw, "axis": K})
    n = lndim(xs[bs.index(True)], True, K)
    return apply(prim, tuple(ys), {**kw, "axis": shift_axis(prim.name, axis, n, K)})


def _stack(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    ys = full(xs, bs, K)
    n = lndim(xs[bs.index(True)], True, K)
    return apply(prim, tuple(ys), {**kw, "axis": shift_axis(prim.name, kw.get("axis", 0), n + 1, K)})


def _unstack(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    n = len(xs[0].shape) - K
    return apply(prim, tuple(xs), {**kw, "axis": shift_axis(prim.name, kw.get("axis", 0), n, K)})


def _repeat(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
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


def _tile(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """The example padded to ``max(rank, len(repetitions))`` axes (as tile does), batch axes tiled once."""
    reps = tuple(kw["repetitions"])
    d = max(len(xs[0].shape) - K, len(reps))
    x = pad(xs[0], K, d)
    return apply(prim, (x,), {**kw, "repetitions": (1,) * (K + d - len(reps)) + reps})


def _broadcast_arrays(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """Batched arguments padded to the largest rank: the batch axes then broadcast among themselves
    and the example's axes as the unbatched call would."""
    ys, _ = pad_all(xs, bs, K)
    return apply(prim, tuple(ys), kw)


RULES["roll"] = _roll
RULES["concat"] = _concat
RULES["stack"] = _stack
RULES["unstack"] = _unstack
RULES["repeat"] = _repeat
RULES["tile"] = _tile
RULES["broadcast_arrays"] = _broadcast_arrays
