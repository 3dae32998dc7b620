"""Batching rules of the functions along axes: reductions, scans, sorts, softmax, diff.

The example's axes follow the ``K`` batch axes, so a logical ``axis`` is shifted by
``K`` (``None``, every logical axis, becomes the tuple of them): the batch axes are
never reduced over.
"""

from __future__ import annotations

from typing import Any

from ..autograd._batched import RULES, shift_axes, shift_axis
from ..autograd._core import Primitive, apply
from ._util import full, op


def along_axes(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """``axis`` None, an int or a tuple (reductions, ``flip``, ``fftshift``...)."""
    n = len(xs[0].shape) - K
    return apply(prim, xs, {**kw, "axis": shift_axes(prim.name, kw.get("axis"), n, K)})


def along_axis(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """``axis`` an int (scans, sorts)."""
    n = len(xs[0].shape) - K
    return apply(prim, xs, {**kw, "axis": shift_axis(prim.name, kw["axis"], n, K)})


for _name in ("sum", "mean", "prod", "var", "max", "min", "all", "any", "count_nonzero", "special.logsumexp",
              "special.softmax", "special.log_softmax", "vector_norm"):
    RULES[_name] = along_axes
for _name in ("cumulative_sum", "cumulative_prod", "sort", "argsort", "sort.values"):
    RULES[_name] = along_axis


def _arg_extremum(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """``argmax``/``argmin``; ``axis=None`` indexes the flattened example."""
    x = xs[0]
    s = tuple(x.shape)
    n = len(s) - K
    axis = kw.get("axis")
    if axis is not None:
        return apply(prim, xs, {**kw, "axis": shift_axis(prim.name, axis, n, K)})
    flat = op("reshape", x, shape=(*s[:K], -1))
    out = apply(prim, (flat,), {**kw, "axis": K, "keepdims": False})
    if kw.get("keepdims"):
        out = op("reshape", out, shape=tuple(out.shape) + (1,) * n)
    return out


RULES["argmax"] = RULES["argmin"] = _arg_extremum


def _diff(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """``diff``: ``prepend``/``append`` are joined to ``x`` along ``axis``, so all need every batch axis."""
    ys = full(xs, bs, K) if len(xs) > 1 else xs
    n = len(ys[0].shape) - K
    return apply(prim, ys, {**kw, "axis": shift_axis(prim.name, kw["axis"], n, K)})


RULES["diff"] = _diff
