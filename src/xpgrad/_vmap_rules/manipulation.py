"""Batching rules of the manipulation functions: shapes and axes gain the batch axes in front."""

from __future__ import annotations

from typing import Any

from .._exceptions import XpgradIndexError, XpgradTypeError
from ..autograd._batched import RULES, shift_axes, shift_axis
from ..autograd._core import Primitive, apply
from ._util import pad
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
_ = XpgradTypeError
