"""The batching rule of ``matmul``, the one the transforms lean on most.

A batch of matrix-vector products is one matrix-matrix product: when only one operand
is batched and the other is a single matrix (or vector), the batch axes are folded into
the batched operand's rows or columns, so the backend does one large product (BLAS
``gemm``) rather than a stack of small ones. Two batched vectors are a ``vecdot``.
Otherwise the batch axes are stack axes, which ``matmul`` broadcasts.
"""

from __future__ import annotations

import math
from typing import Any

from .._exceptions import XpgradValueError
from ..autograd._batched import RULES
from ..autograd._core import Primitive, apply
from ._util import lndim, op, pad


def _fold_right(prim: Primitive, a: Any, x: Any) -> Any:
    """``a @ x`` for one matrix ``a`` (m, n) and a batched stack ``x`` (*lead, n, k): one product."""
    s = tuple(x.shape)
    lead, n, k = s[:-2], s[-2], s[-1]
    cols = op("reshape", op("moveaxis", x, source=-2, destination=0), shape=(n, math.prod(lead) * k))
    y = apply(prim, (a, cols), {})
    m = next(iter(y.shape))
    return op("moveaxis", op("reshape", y, shape=(m, *lead, k)), source=0, destination=-2)


def _fold_left(prim: Primitive, x: Any, b: Any) -> Any:
    """``x @ b`` for a batched stack ``x`` (*lead, m, n) and one matrix or vector ``b``: one product."""
    s = tuple(x.shape)
    lead, m, n = s[:-2], s[-2], s[-1]
    y = apply(prim, (op("reshape", x, shape=(math.prod(lead) * m, n)), b), {})
    return op("reshape", y, shape=(*lead, m, *tuple(y.shape)[1:]))


def matmul_rule(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x1, x2 = xs
    b1, b2 = bs
    n1, n2 = lndim(x1, b1, K), lndim(x2, b2, K)
    if n1 == 0 or n2 == 0:  # (the physical array of a batched 0-D example is 1-D: refuse it here)
        msg = f"{prim.name}: operands must be at least 1-D, got {n1}-D and {n2}-D arrays (inside vmap)"
        raise XpgradValueError(msg)
    if b1 and b2 and n1 == 1 and n2 == 1:  # a batch of dot products
        return op("sum", op("multiply", x1, x2), axis=-1)
    if b2 and not b1 and n1 <= 2 and n2 >= 2:
        a = x1 if n1 == 2 else op("reshape", x1, shape=(1, *tuple(x1.shape)))
        y = _fold_right(prim, a, x2)
        return y if n1 == 2 else op("squeeze", y, axis=-2)
    if b1 and not b2 and n2 <= 2 and n1 >= 2:
        return _fold_left(prim, x1, x2)
    # batched 1-D operands become a row (x1) or a column (x2), dropped after
    sq1 = sq2 = False
    if b1 and n1 == 1:
        s = tuple(x1.shape)
        x1 = op("reshape", x1, shape=(*s[:K], 1, *s[K:]))
        sq1 = True
    if b2 and n2 == 1:
        x2 = op("reshape", x2, shape=(*tuple(x2.shape), 1))
        sq2 = True
    if b2 and not b1 and n1 <= 2:  # (a vector x2 made a column: still one product)
        a = x1 if n1 == 2 else op("reshape", x1, shape=(1, *tuple(x1.shape)))
        y = _fold_right(prim, a, x2)
        s = tuple(y.shape)
        return op("reshape", y, shape=s[:-2] + ((s[-2],) if n1 == 2 else ()))
    if b1 and not b2 and n2 <= 2:  # (a vector x1 made a row)
        y = _fold_left(prim, x1, x2)
        s = tuple(y.shape)
        return op("reshape", y, shape=s[:-2] + s[-1:] if n2 == 2 else s[:-1])
    r = max(max(lndim(x1, b1, K), 2), max(lndim(x2, b2, K), 2))
    if b1:
        x1 = pad(x1, K, r)
    if b2:
        x2 = pad(x2, K, r)
    out = apply(prim, (x1, x2), kw)
    if sq1 or sq2:
        s = tuple(out.shape)
        s = s[:-2] if sq1 and sq2 else (s[:-2] + s[-1:] if sq1 else s[:-1])
        out = op("reshape", out, shape=s)
    return out


RULES["matmul"] = matmul_rule
