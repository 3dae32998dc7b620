"""OpCases for the statistical chapter (reductions and cumulative reductions).

``prod`` and ``cumulative_prod`` are fed inputs with zeros on purpose (their rules
must not divide by an element): :func:`_zeros` sets the small entries to exactly
0, so slices with none, one, two and more zeros occur. ``max``, ``min`` and
``std`` get distinct values (:func:`_distinct`): at ties ``max`` has a kink, and a
constant slice makes ``std`` singular. Ties themselves are pinned down in
tests/test_reductions_extra.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from tests._cases import OpCase, axis_params, same_shape

Draw = Any


def _zeros(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    """Entries whose real part is below 0.6 in size become exactly 0."""
    x = arrays[0]
    return [np.where(np.abs(np.real(x)) < 0.6, 0.0, x).astype(x.dtype)]


def _distinct(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    """The same order as drawn, ties broken, values 0.25 apart."""
    x = arrays[0]
    rank = np.argsort(np.argsort(x.ravel(), kind="stable"), kind="stable").reshape(x.shape)
    return [(rank - rank.size / 2) * 0.25]


def _dims(axis: Any, ndim: int) -> Any:
    """``axis`` for torch reductions that take a dim tuple (() means all)."""
    return tuple(range(ndim)) if axis is None else axis


def _torch_prod(t: Any, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """torch.prod reduces one dim at a time."""
    axes = sorted((a % x.ndim for a in _dims(axis if not isinstance(axis, int) else (axis,), x.ndim)),
                  reverse=True)
    for a in axes:
        x = t.prod(x, dim=a, keepdim=True)
    if not keepdims:
        x = x.reshape(tuple(s for i, s in enumerate(x.shape) if i not in axes))
    return x


def _var_params(corrections: tuple[float, ...]) -> Any:
    def draw_params(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
        p = axis_params()(draw, shapes)
        p["correction"] = draw(st.sampled_from(corrections))
        return p

    return draw_params


def _cumulative_params(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    nd = len(shapes[0])
    choices: list[Any] = list(range(-nd, nd)) + ([None] if nd == 1 else [])
    return {"axis": draw(st.sampled_from(choices)), "include_initial": draw(st.booleans())}


def _torch_cumulative(t: Any, x: Any, name: str, axis: Any, include_initial: bool) -> Any:
    dim = 0 if axis is None else axis
    y = getattr(t, name)(x, dim=dim)
    if include_initial:
        shape = list(x.shape)
        shape[dim] = 1
        init = t.zeros if name == "cumsum" else t.ones
        y = t.cat([init(shape, dtype=x.dtype), y], dim=dim)
    return y


# the shapes of reductions whose every axis choice reduces at least 2 elements
_AT_LEAST_2 = same_shape(1, min_dims=1, min_side=2, max_side=3)
_CUMULATIVE = same_shape(1, min_dims=1)

CASES = [
    # (sum and mean: their entries' Inputs, src/xpgrad/ops/statistical.py)
    # |x| <= sqrt(2): a product of up to 64 elements stays small enough for the central
    # differences (their error grows with the third derivative, about the product itself)
    OpCase("prod", lambda xp, x, **p: xp.prod(x, **p), params=axis_params(), complex=True, prepare=_zeros,
           domain=(-1.0, 1.0),
           torch_fn=lambda t, x, axis, keepdims: _torch_prod(t, x, axis, keepdims)),
    OpCase("prod_dense", lambda xp, x, **p: xp.prod(x, **p), params=axis_params(), domain=(0.5, 1.5),
           torch_fn=lambda t, x, axis, keepdims: _torch_prod(t, x, axis, keepdims), covers=("prod",)),
    OpCase("var", lambda xp, x, **p: xp.var(x, **p), shapes=_AT_LEAST_2, params=_var_params((0.0, 0.5, 1.0)),
           torch_fn=lambda t, x, axis, keepdims, correction: t.var(x, dim=_dims(axis, x.ndim),
                                                                   correction=correction, keepdim=keepdims)),
    # integral corrections: the forward is compared with the backend's std, and array-api-compat's
    # torch std refuses a fractional one (xpgrad's, sqrt(var), does not: tests/test_reductions_extra.py)
    OpCase("std", lambda xp, x, **p: xp.std(x, **p), shapes=_AT_LEAST_2, params=_var_params((0.0, 1.0)),
           prepare=_distinct, covers=("std", "std_sqrt"),
           torch_fn=lambda t, x, axis, keepdims, correction: t.std(x, dim=_dims(axis, x.ndim),
                                                                   correction=correction, keepdim=keepdims)),
    OpCase("max", lambda xp, x, **p: xp.max(x, **p), params=axis_params(), prepare=_distinct,
           torch_fn=lambda t, x, axis, keepdims: t.amax(x, dim=_dims(axis, x.ndim), keepdim=keepdims)),
    OpCase("min", lambda xp, x, **p: xp.min(x, **p), params=axis_params(), prepare=_distinct,
           torch_fn=lambda t, x, axis, keepdims: t.amin(x, dim=_dims(axis, x.ndim), keepdim=keepdims)),
    OpCase("cumulative_sum", lambda xp, x, **p: xp.cumulative_sum(x, **p), shapes=_CUMULATIVE,
           params=_cumulative_params, complex=True,
           torch_fn=lambda t, x, axis, include_initial: _torch_cumulative(t, x, "cumsum", axis, include_initial)),
    OpCase("cumulative_prod", lambda xp, x, **p: xp.cumulative_prod(x, **p), shapes=_CUMULATIVE,
           params=_cumulative_params, complex=True, prepare=_zeros,
           torch_fn=lambda t, x, axis, include_initial: _torch_cumulative(t, x, "cumprod", axis, include_initial)),
    OpCase("cumulative_prod_dense", lambda xp, x, **p: xp.cumulative_prod(x, **p), shapes=_CUMULATIVE,
           params=_cumulative_params, domain=(0.5, 1.5), covers=("cumulative_prod",),
           torch_fn=lambda t, x, axis, include_initial: _torch_cumulative(t, x, "cumprod", axis, include_initial)),
]
