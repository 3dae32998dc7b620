"""Batching rules of the pointwise primitives: they broadcast, so they batch for free.

A batched argument is padded with size-1 axes after its batch axes up to the largest
logical rank, so that it broadcasts against the unbatched ones as its example would.
The same holds for the matrix functions that act on the last two axes (a stack of
matrices is a batch already): there the rule only checks the example's rank.
"""

from __future__ import annotations

from typing import Any

from ..autograd._batched import RULES
from ..autograd._core import Primitive, apply
from ..ops._registry import Op, subscribe
from ._util import check_ndim, pad_all


def pointwise(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    ys, _ = pad_all(xs, bs, K)
    return apply(prim, ys, kw)


def _added(op: Op) -> None:
    if op.batch == "pointwise":
        RULES[op.prim.name] = pointwise


def _removed(op: Op) -> None:
    RULES.pop(op.prim.name, None)


# the registry's entries declare their batching rule; the primitives not yet declared
# there are listed by name
subscribe(_added, _removed)
_POINTWISE = (
    "identity", "stop_gradient", "astype", "to_device", "std_sqrt", "nn.relu", "nn.binary_cross_entropy",
    "special.polygamma", "pow.pole_power",
)
for _name in _POINTWISE:
    RULES[_name] = pointwise


def _matrices(least: int) -> Any:
    def rule(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
        check_ndim(prim, xs[0], K, least)
        return apply(prim, xs, kw)

    return rule


# functions of the last two axes, with every axis before them a stack: the batch axes
# lead, so they are more stack axes
for _name in ("matrix_transpose", "tril", "triu", "diagonal", "trace", "inv", "det", "slogdet", "cholesky", "eigh",
              "eigvalsh", "eig", "eigvals", "svd", "svdvals", "qr", "matrix_power"):
    RULES[_name] = _matrices(2)
