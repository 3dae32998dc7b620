"""Batching rules of the linear algebra primitives (``matmul``, ``vecdot``, ``xg.linalg``) and ``xg.fft``.

The matrix functions of one stack argument (``inv``, ``det``, ``svd``...) batch as
stacks: see :mod:`xpgrad._vmap_rules.elementwise`.
"""

from __future__ import annotations

from typing import Any

from .._exceptions import XpgradIndexError
from ..autograd._batched import RULES
from ..autograd._core import Primitive, apply
from ._util import lndim, op, pad, pad_all


def _matmul(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """A batched 1-D operand is made a row (x1) or a column (x2), and its axis dropped after."""
    x1, x2 = xs
    b1, b2 = bs
    sq1 = sq2 = False
    if b1 and lndim(x1, b1, K) == 1:
        s = tuple(x1.shape)
        x1 = op("reshape", x1, shape=(*s[:K], 1, *s[K:]))
        sq1 = True
    if b2 and lndim(x2, b2, K) == 1:
        s = tuple(x2.shape)
        x2 = op("reshape", x2, shape=(*s, 1))
        sq2 = True
    r = max(max(lndim(x1, b1, K), 2), max(lndim(x2, b2, K), 2))
    if b1:
        x1 = pad(x1, K, r)
    if b2:
        x2 = pad(x2, K, r)
    out = apply(prim, (x1, x2), kw)
    if sq1 or sq2:
        s = tuple(out.shape)
        if sq1 and sq2:
            s = s[:-2]
        elif sq1:
            s = s[:-2] + s[-1:]
        else:
            s = s[:-1]
        out = op("reshape", out, shape=s)
    return out


RULES["matmul"] = _matmul


def _negative_axis(prim: Primitive, axis: int, r: int) -> int:
    """A logical axis of the broadcast example (rank ``r``) counted from the end."""
    if not -r <= axis < r:
        msg = f"{prim.name}: axis {axis} is out of bounds for arrays of dimension {r}"
        raise XpgradIndexError(msg)
    return axis - r if axis >= 0 else axis


def _vecdot(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    ys, r = pad_all(xs, bs, K)
    return apply(prim, ys, {**kw, "axis": _negative_axis(prim, kw.get("axis", -1), r)})


RULES["vecdot"] = _vecdot
