"""Batching rules of the searching functions: ``searchsorted``; ``nonzero`` cannot be batched.

(``where`` is pointwise, with the elementwise rules; ``argmax``, ``argmin`` and
``count_nonzero`` are reductions, with theirs.)

``searchsorted`` of a batched ``x2`` in one sorted ``x1`` is the function itself: ``x2``
may have any shape. A batched ``x1`` (or ``sorter``) is one sorted array per example:
the insertion index is then a count, of the elements below ``v`` (``side="left"``) or
at most ``v`` (``"right"``). NaN sorts last, as in ``searchsorted``: no NaN in ``x1`` is
below a finite ``v``, and a NaN ``v`` goes after every number (left) or every element
(right).
"""

from __future__ import annotations

from typing import Any

from .._dispatch import _raw, backend_namespace
from .._dtypes import kind
from .._exceptions import XpgradValueError
from ..autograd._batched import RULES, UNBATCHABLE
from ..autograd._core import Primitive, apply
from ._util import full, is_array, op, pad, with_new_last_axis

UNBATCHABLE["nonzero"] = (
    "the number of nonzero elements differs from example to example, so the result's shape would depend on the "
    "data; use xg.where (or a mask multiplied in) instead, or call nonzero outside the vmapped function"
)


def _searchsorted(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x1, x2 = xs[0], xs[1]
    sorter = xs[2] if len(xs) > 2 else None
    n1 = len(x1.shape) - K if bs[0] else len(x1.shape)
    if n1 != 1:
        msg = f"searchsorted: x1 must be one-dimensional, got {n1} dimensions (inside vmap)"
        raise XpgradValueError(msg)
    if not bs[0] and not (sorter is not None and bs[2]):  # one sorted x1: x2 of any shape
        return apply(prim, tuple(xs), kw)
    if sorter is not None:
        x1, sorter = full([x1, sorter], [bs[0], bs[2]], K)
        x1 = op("take_along_axis", x1, sorter, axis=K)
    elif not bs[0]:
        x1 = op("reshape", x1, shape=(1,) * K + tuple(x1.shape))
    # x1: (batch, n); x2: (batch, shape) or unbatched; compare along a new last axis
    v, r = with_new_last_axis(x2, bs[1], K)
    s = tuple(x1.shape)
    a = op("reshape", x1, shape=s[:K] + (1,) * r + s[K:])
    side = kw.get("side", "left")
    floating = kind(x1.dtype) == "real floating"
    if side == "left":
        hit = op("less", a, v)
        if floating:  # a NaN v goes after every number
            hit = op("logical_or", hit, op("logical_and", op("isnan", v), op("logical_not", op("isnan", a))))
    else:
        hit = op("less_equal", a, v)
        if floating:  # ... and after every element
            hit = op("logical_or", hit, op("isnan", v) if is_array(v) else op("isnan", a))
    # the dtype searchsorted gives on this backend (JAX: int32 even with 64-bit types enabled)
    raw = _raw(x1)
    bxp = backend_namespace(raw)
    one = bxp.reshape(raw, (-1,))[:1]
    dt = bxp.searchsorted(one, one).dtype
    out = op("sum", op("astype", hit, dtype=dt), axis=-1, dtype=dt)
    if not bs[1] and not is_array(x2):
        return out
    return pad(out, K, r)


RULES["searchsorted"] = _searchsorted
