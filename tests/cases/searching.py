"""OpCases for the differentiable functions of the searching, sorting and utility
chapters: ``sort`` and ``diff``. (``where`` is with the elementwise cases; the rest
of these chapters is non-differentiable, checked in tests/test_reductions_extra.py.)

``sort`` gets distinct values: at a tie the sorted output has a kink, where central
differences mean nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests._cases import OpCase

Draw = Any


def _distinct(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    """The same order as drawn, ties broken, values 0.25 apart."""
    x = arrays[0]
    rank = np.argsort(np.argsort(x.ravel(), kind="stable"), kind="stable").reshape(x.shape)
    return [(rank - rank.size / 2) * 0.25]


def _chosen(draw: Draw, shapes: list[Any]) -> dict[str, Any]:
    """The parameters the shapes draw chose (its trailing dict; the harness zips it away)."""
    return dict(shapes[-1])


def _sort_shapes(draw: Draw) -> list[Any]:
    s = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    nd = len(s)
    return [s, {"axis": draw(st.integers(-nd, nd - 1)), "descending": draw(st.booleans()),
                "stable": draw(st.booleans())}]


def _diff_shapes(ends: bool) -> Any:
    """x (and prepend, append: x's shape but along ``axis``), axis and n."""

    def draw_shapes(draw: Draw) -> list[Any]:
        s = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
        nd = len(s)
        axis = draw(st.integers(-nd, nd - 1))
        out: list[Any] = [s]
        total = s[axis]
        if ends:
            for _ in range(2):
                e = list(s)
                e[axis] = draw(st.integers(1, 2))
                total += e[axis]
                out.append(tuple(e))
        n = draw(st.integers(1, max(1, min(3, total - 1))))
        return [*out, {"axis": axis, "n": n}]

    return draw_shapes


CASES = [
    OpCase("sort", lambda xp, x, **p: xp.sort(x, **p), shapes=_sort_shapes, params=_chosen, prepare=_distinct,
           torch_fn=lambda t, x, axis, descending, stable: t.sort(x, dim=axis, descending=descending,
                                                                  stable=True).values),
    OpCase("diff", lambda xp, x, **p: xp.diff(x, **p), shapes=_diff_shapes(False), params=_chosen, complex=True,
           torch_fn=lambda t, x, axis, n: t.diff(x, n=n, dim=axis)),
    OpCase("diff_prepend_append", lambda xp, x, a, b, **p: xp.diff(x, prepend=a, append=b, **p), nargs=3,
           shapes=_diff_shapes(True), params=_chosen, complex=True, covers=("diff",),
           torch_fn=lambda t, x, a, b, axis, n: t.diff(x, n=n, dim=axis, prepend=a, append=b)),
]
