"""OpCases for the primitives of ``xpgrad.nn.functional`` (``nn.relu``, ``nn.softmax_cross_entropy``,
``nn.binary_cross_entropy``, the convolutions and the poolings).

The rest of ``nn.functional`` is composed of namespace functions and is tested in
tests/test_nn.py; a primitive of its own gets its rules checked here like any other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

import xpgrad as xg
from tests._cases import Draw, OpCase, same_shape
from xpgrad.nn import functional as F  # noqa: N812

#: added to layer_norm's input (`_ramped`): entries 5 apart, a row variance of at least 1 whatever is drawn in (-2, 2)
_RAMP = [0.0, 5.0, 10.0, 15.0]


def _ramped(xp: Any, x: Any) -> Any:
    # (made from x itself, on its library and device: 0, 5, 10, 15 along the last axis)
    return (xg.cumulative_sum(xg.ones_like(x), axis=-1) - 1.0) * 5.0 + x  # (the Tensor on the left: strict's + refuses one)


def _xent_shapes(draw: Draw) -> list[tuple[int, ...]]:
    """Logits (C,), (N, C) or (N, C, d) and the matching targets (no class axis)."""
    x = draw(st.sampled_from([(4,), (3, 4), (2, 3, 2)]))
    return [x, x[:1] + x[2:] if len(x) > 1 else ()]


def _xent_params(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    n_cls = shapes[0][0 if len(shapes[0]) == 1 else 1]
    out: dict[str, Any] = {"reduction": draw(st.sampled_from(["none", "sum", "mean"])),
                           "label_smoothing": draw(st.sampled_from([0.0, 0.2])),
                           "ignore_index": draw(st.sampled_from([-100, 1]))}  # 1 is a class: some are ignored
    if draw(st.booleans()):
        out["weight"] = np.linspace(0.5, 2.0, n_cls)
    return out


def _xent_prepare(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    x, y = arrays
    if params["reduction"] == "mean" and np.all(y == params["ignore_index"]):  # (0 / 0)
        y = np.where(np.arange(y.size).reshape(y.shape) == 0, 0, y)
    return [x, y]


def _xent_torch(t: Any, x: Any, y: Any, **kw: Any) -> Any:
    if "weight" in kw:
        kw = {**kw, "weight": t.asarray(kw["weight"])}
    return t.nn.functional.cross_entropy(x, y, **kw)


def _conv_shapes(draw: Draw) -> list[tuple[int, ...]]:
    """An (N, C, H, W) input and a (C_out, C, kH, kW) weight."""
    return [(draw(st.sampled_from([1, 2])), 2, 4, 5), (3, 2, 2, 3)]


def _conv_t_shapes(draw: Draw) -> list[tuple[int, ...]]:
    """An (N, C, H, W) input and a transposed convolution's (C, C_out, kH, kW) weight."""
    return [(draw(st.sampled_from([1, 2])), 3, 3, 4), (3, 2, 2, 3)]


def _conv_params(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    return {"stride": draw(st.sampled_from([1, 2])), "padding": draw(st.sampled_from([0, 1]))}


def _pool_shapes(draw: Draw) -> list[tuple[int, ...]]:
    return [draw(st.sampled_from([(1, 2, 4, 4), (2, 1, 5, 4)]))]


def _pool_params(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    return {"kernel_size": draw(st.sampled_from([2, (2, 3)])), "stride": draw(st.sampled_from([1, 2]))}


def _distinct(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    """Values at least 0.05 apart (no ties inside a pooling window: finite differences at a tie average)."""
    (x,) = arrays
    ranks = np.argsort(np.argsort(x, axis=None)).reshape(x.shape)
    return [(x + 0.05 * ranks).astype(x.dtype)]


CASES = [
    # values away from the kink at 0 (finite differences straddling it would average the slopes)
    OpCase("nn.relu", lambda xp, x: F.relu(x), domain=(-2.0, 2.0),
           prepare=lambda arrs, p: [np.where(a >= 0, a + 0.05, a - 0.05).astype(a.dtype) for a in arrs],
           torch_fn=lambda t, x: t.relu(x)),
    # class-index targets: cross_entropy's fused primitive, every option and class-axis layout
    OpCase("nn.softmax_cross_entropy", lambda xp, x, y, **kw: F.cross_entropy(x, y, **kw), nargs=2,
           shapes=_xent_shapes, params=_xent_params, dtypes=["float", "int"],
           int_range=lambda shapes, params: (0, shapes[0][0 if len(shapes[0]) == 1 else 1] - 1),
           prepare=_xent_prepare, torch_fn=_xent_torch),
    # probabilities inside (0, 1) here (finite differences); p = 0 and 1 are in tests/test_kinks.py
    OpCase("nn.binary_cross_entropy", lambda xp, p, y: F.binary_cross_entropy(p, y, reduction="none"), nargs=2,
           shapes=same_shape(2), domain=[(0.05, 0.95), (0.0, 1.0)],
           torch_fn=lambda t, p, y: t.nn.functional.binary_cross_entropy(p, y, reduction="none")),
    # the convolution and pooling primitives (native kernels on torch and JAX, the composition elsewhere)
    OpCase("nn.conv2d", lambda xp, x, w, **kw: F.conv2d(x, w, **kw), nargs=2, shapes=_conv_shapes,
           params=_conv_params, complex=False, torch_fn=lambda t, x, w, **kw: t.nn.functional.conv2d(x, w, **kw)),
    OpCase("nn.conv_transpose2d", lambda xp, x, w, **kw: F.conv_transpose2d(x, w, **kw), nargs=2,
           shapes=_conv_t_shapes, params=_conv_params, complex=False,
           torch_fn=lambda t, x, w, **kw: t.nn.functional.conv_transpose2d(x, w, **kw)),
    OpCase("nn.max_pool2d", lambda xp, x, **kw: F.max_pool2d(x, **kw), shapes=_pool_shapes, params=_pool_params,
           prepare=_distinct, complex=False, torch_fn=lambda t, x, **kw: t.nn.functional.max_pool2d(x, **kw)),
    OpCase("nn.avg_pool2d", lambda xp, x, **kw: F.avg_pool2d(x, **kw), shapes=_pool_shapes, params=_pool_params,
           complex=False, torch_fn=lambda t, x, **kw: t.nn.functional.avg_pool2d(x, **kw)),
    # the fused primitives with native kernels on torch (the composition elsewhere)
    OpCase("nn.scaled_dot_product_attention", lambda xp, q, k, v, **kw: F.scaled_dot_product_attention(q, k, v, **kw),
           nargs=3, shapes=lambda draw: [(2, 3, 4), (2, 5, 4), (2, 5, 4)],
           params=lambda draw, shapes: {"is_causal": draw(st.sampled_from([False, True]))}, complex=False,
           torch_fn=lambda t, q, k, v, **kw: t.nn.functional.scaled_dot_product_attention(q, k, v, **kw)),
    # (a ramp added to x keeps every row's variance >= 1: at a near-constant row, as hypothesis
    # likes to draw, the eps-regularised curvature defeats the central differences of order 2)
    OpCase("nn.layer_norm", lambda xp, x, w, b: F.layer_norm(_ramped(xp, x), (4,), w, b), nargs=3,
           shapes=lambda draw: [(2, 3, 4), (4,), (4,)], complex=False,
           torch_fn=lambda t, x, w, b: t.nn.functional.layer_norm(x + t.tensor(_RAMP, dtype=x.dtype), (4,), w, b)),
    OpCase("nn.embedding", lambda xp, w, i: F.embedding(i, w), nargs=2, shapes=lambda draw: [(6, 3), (2, 4)],
           dtypes=["float", "int"], int_range=lambda shapes, params: (0, 5), complex=False,
           torch_fn=lambda t, w, i: t.nn.functional.embedding(i, w)),
]
