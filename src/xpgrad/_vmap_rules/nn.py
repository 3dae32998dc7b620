"""Batching rules of the nn primitives.

``nn.relu`` and ``nn.binary_cross_entropy`` are pointwise (see
`xpgrad._vmap_rules.elementwise`). ``nn.softmax_cross_entropy`` (the fused
``cross_entropy`` of class indices) reduces: its ``"sum"`` and ``"mean"`` run over the
example's axes only, never the batch axes, so the rule computes the per-position loss
(``reduction="none"``) on the whole batch and reduces each example on its own.
"""

from __future__ import annotations

import math
from typing import Any

from ..autograd._batched import RULES
from ..autograd._core import Primitive, apply
from ..ops.creation import zeros_like
from ..ops.elementwise import where
from ._util import full, op


def _softmax_cross_entropy(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    ys = full(xs, bs, K)  # (the logits and the constants q, qsum, den: each example its own)
    x, q, qsum = ys[:3]
    reduction = kw["reduction"]
    loss, logp = apply(prim, (x, q, qsum), {**kw, "axis": kw["axis"] + K, "reduction": "none"})
    if reduction == "none":
        return loss, logp
    n = len(loss.shape) - K
    total = op("sum", loss, axis=tuple(range(K, K + n))) if n else loss
    if reduction == "sum":
        return total, logp
    # "mean": as the unbatched rule, an example whose every position is ignored (den = 0)
    # gets the value 0 / 0 = nan but a zero gradient (a constant nan is added)
    den = ys[3]
    zero = den == 0
    nought = zeros_like(den)
    mean = total / where(zero, nought + 1.0, den)
    return mean + where(zero, nought + math.nan, nought), logp


RULES["nn.softmax_cross_entropy"] = _softmax_cross_entropy
