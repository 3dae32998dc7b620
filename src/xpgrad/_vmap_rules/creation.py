"""Batching rules of the creation functions that take arrays: ``meshgrid``.

(``tril``/``triu`` act on the last two axes: their rule is with the matrix functions in
`elementwise`. The ``*_like`` functions build their result from the physical value
directly, in [`xpgrad.ops.creation`][xpgrad.ops.creation].)
"""

from __future__ import annotations

from typing import Any

from .._exceptions import XpgradValueError
from ..autograd._batched import RULES
from ..autograd._core import Primitive
from ..ops.creation import _grid_axis
from ._util import op


def _meshgrid(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> tuple[Any, ...]:
    """Each 1-D example put along its output axis (after the batch axes) and broadcast to the grid:
    a reshape and a broadcast per output, as the grid of one example is."""
    indexing = kw.get("indexing", "xy")
    n = len(xs)
    lengths = []
    for i, (x, b) in enumerate(zip(xs, bs)):
        r = len(x.shape) - (K if b else 0)
        if r != 1:
            msg = f"{prim.name}: every array must be 1-D, got {r} dimensions for array {i} (inside vmap)"
            raise XpgradValueError(msg)
        lengths.append(int(x.shape[-1]))
    grid = [0] * n
    for i in range(n):
        grid[_grid_axis(i, n, indexing)] = lengths[i]
    outs = []
    for i, (x, b) in enumerate(zip(xs, bs)):
        batch = tuple(x.shape[:K]) if b else (1,) * K
        ax = _grid_axis(i, n, indexing)
        y = op("reshape", x, shape=batch + tuple(lengths[i] if a == ax else 1 for a in range(n)))
        outs.append(op("broadcast_to", y, shape=batch + tuple(grid)))
    return tuple(outs)


RULES["meshgrid"] = _meshgrid
