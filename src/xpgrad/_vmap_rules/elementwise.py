"""Batching rules of the pointwise primitives: they broadcast, so they batch for free.

A batched argument is padded with size-1 axes after its batch axes up to the largest
logical rank, so that it broadcasts against the unbatched ones as its example would.
The same holds for the matrix functions that act on the last two axes (a stack of
matrices is a batch already): there the rule only checks the example's rank.
"""

from __future__ import annotations

from typing import Any

from ..autograd._batched import RULES
from ..autograd._core import PRIMITIVES, Primitive, apply
from ..ops import elementwise as _elementwise  # noqa: F401 - registers the chapter's primitives read below
from ._util import check_ndim, pad_all


def pointwise(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    ys, _ = pad_all(xs, bs, K)
    return apply(prim, ys, kw)


_POINTWISE_CHAPTERS = ("elementwise",)
_POINTWISE = (
    "identity", "stop_gradient", "astype", "where", "to_device", "std_sqrt", "nn.relu", "nn.binary_cross_entropy",
    "special.erf", "special.erfc", "special.ndtr", "special.log_ndtr", "special.expit", "special.logit",
    "special.gammaln", "special.digamma", "special.polygamma", "special.xlogy", "special.xlog1py", "special.entr",
    "special.rel_entr",
)
# (by name: the primitives of nn and special, modules above or beside this one, may be
# registered after it; the elementwise chapter's are registered by ops.elementwise above)
for _name in _POINTWISE:
    RULES[_name] = pointwise
for _name, _p in PRIMITIVES.items():
    if _p.chapter in _POINTWISE_CHAPTERS:
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
