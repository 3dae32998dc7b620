"""OpCases for the linear algebra functions of the main namespace.

The shapes draws pick the parameters that must agree with the shapes (the
contracted axes of ``tensordot``, the axis of ``vecdot``) and hand them on as a
trailing dict (see tests/cases/manipulation.py).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xpgrad as xg
from tests._cases import OpCase
from tests.cases.manipulation import _chosen

Draw = Any


def _sizes(draw: Draw, n: int) -> list[int]:
    return [draw(st.integers(1, 3)) for _ in range(n)]


def _matmul_shapes(draw: Draw) -> list[Any]:
    """Every case of the standard: N-D @ N-D with batch broadcasting, 1-D on either side or both."""
    m, k, n = _sizes(draw, 3)
    kind = draw(st.sampled_from(["nd", "vec_mat", "mat_vec", "vec_vec"]))
    if kind == "vec_vec":
        return [(k,), (k,)]
    b1, b2 = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3)).input_shapes
    if kind == "vec_mat":
        return [(k,), (*b2, k, n)]
    if kind == "mat_vec":
        return [(*b1, m, k), (k,)]
    return [(*b1, m, k), (*b2, k, n)]


def _tensordot_shapes(draw: Draw) -> list[Any]:
    nc = draw(st.integers(0, 2))
    common = _sizes(draw, nc)
    free1 = _sizes(draw, draw(st.integers(0, 2)))
    free2 = _sizes(draw, draw(st.integers(0, 2)))
    if draw(st.booleans()):  # axes=N: the last N of x1 with the first N of x2
        return [(*free1, *common), (*common, *free2), {"axes": nc}]
    # explicit pairs: the contracted axes anywhere, in any order, some written negative
    nd1, nd2 = len(free1) + nc, len(free2) + nc
    pos1 = draw(st.permutations(range(nd1)))[:nc]
    pos2 = draw(st.permutations(range(nd2)))[:nc]
    free_it1, free_it2 = iter(free1), iter(free2)
    s1 = [common[pos1.index(i)] if i in pos1 else next(free_it1) for i in range(nd1)]
    s2 = [common[pos2.index(i)] if i in pos2 else next(free_it2) for i in range(nd2)]
    a1 = [p - nd1 if draw(st.booleans()) else p for p in pos1]
    a2 = [p - nd2 if draw(st.booleans()) else p for p in pos2]
    return [tuple(s1), tuple(s2), {"axes": (a1, a2)}]


def _vecdot_shapes(draw: Draw) -> list[Any]:
    b1, b2 = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3)).input_shapes
    k = draw(st.integers(1, 3))
    axis = draw(st.integers(-min(len(b1), len(b2)) - 1, -1))

    def insert(b: tuple[int, ...]) -> tuple[int, ...]:
        pos = len(b) + 1 + axis
        return (*b[:pos], k, *b[pos:])

    return [insert(b1), insert(b2), {"axis": axis}]


def _tensordot(xp: Any, a: Any, b: Any, *, axes: Any) -> Any:
    """xpgrad gets the drawn axes (some negative); a backend called directly gets them
    non-negative, because Dask's tensordot miscomputes negative pairs over chunks."""
    if xp is not xg and not isinstance(axes, int):
        axes = ([i % a.ndim for i in axes[0]], [i % b.ndim for i in axes[1]])
    return xp.tensordot(a, b, axes=axes)


def _torch_tensordot(t: Any, a: Any, b: Any, *, axes: Any) -> Any:
    return t.tensordot(a, b, dims=axes if isinstance(axes, int) else (list(axes[0]), list(axes[1])))


CASES = [
    OpCase(
        "matmul",
        lambda xp, a, b: xp.matmul(a, b),
        nargs=2,
        shapes=_matmul_shapes,
        torch_fn=lambda t, a, b: t.matmul(a, b),
        complex=True,
    ),
    OpCase(
        "matmul_operator",
        lambda xp, a, b: a @ b,
        nargs=2,
        shapes=_matmul_shapes,
        torch_fn=lambda t, a, b: a @ b,
        covers=("matmul",),
    ),
    # (matrix_transpose: its entry's Inputs, src/xpgrad/ops/linear_algebra.py)
    OpCase(
        "tensordot",
        _tensordot,
        nargs=2,
        shapes=_tensordot_shapes,
        params=_chosen,
        torch_fn=_torch_tensordot,
        complex=True,
    ),
    OpCase(
        "vecdot",
        lambda xp, a, b, axis: xp.vecdot(a, b, axis=axis),
        nargs=2,
        shapes=_vecdot_shapes,
        params=_chosen,
        torch_fn=lambda t, a, b, axis: t.linalg.vecdot(a, b, dim=axis),
        complex=True,
    ),
]
