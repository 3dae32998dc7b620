"""Batching rules of the set functions: ``isin``; the ``unique_*`` family cannot be batched.

``isin`` with a batched ``x2`` compares each element of ``x1`` with every element of
its example's ``x2`` (one more axis, reduced with ``any``); with an unbatched ``x2``
it is pointwise in ``x1``.
"""

from __future__ import annotations

from typing import Any

from ..autograd._batched import RULES, UNBATCHABLE
from ..autograd._core import Primitive, apply
from ._util import op, with_new_last_axis

for _name in ("unique_all", "unique_counts", "unique_inverse", "unique_values"):
    UNBATCHABLE[_name] = (
        "the number of unique values differs from example to example, so the result's shape would depend on "
        "the data; call it outside the vmapped function, or compare with xg.isin or == instead"
    )


def _isin(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x1, x2 = xs
    if not bs[1]:
        return apply(prim, tuple(xs), kw)
    s2 = tuple(x2.shape)
    a, r = with_new_last_axis(x1, bs[0], K)
    b = op("reshape", x2, shape=s2[:K] + (1,) * r + (-1,))
    out = op("any", op("equal", a, b), axis=-1)
    return op("logical_not", out) if kw.get("invert") else out


RULES["isin"] = _isin
