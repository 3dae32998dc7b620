"""OpCases for the primitives of ``xpgrad.nn.functional`` (``nn.relu``, ``nn.softmax_cross_entropy``,
``nn.binary_cross_entropy``).

The rest of ``nn.functional`` is composed of namespace functions and is tested in
tests/test_nn.py; a primitive of its own gets its rules checked here like any other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from tests._cases import Draw, OpCase, same_shape
from xpgrad.nn import functional as F  # noqa: N812


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
]
