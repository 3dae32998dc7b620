"""cross_entropy's primitive on torch runs torch's own log_softmax (issue 30); its values, first-order
gradients and a second-order product equal the portable composition's (NumPy, the reference)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg
import xpgrad.nn.functional as F  # noqa: N812 - PyTorch's conventional alias

from ._util import to_numpy

torch = pytest.importorskip("torch")


def _loss_grad_hvp(xn: np.ndarray, yn: np.ndarray, vn: np.ndarray, mk: Any, **kw: Any) -> list[np.ndarray]:
    x, y, v = xg.asarray(mk(xn)), xg.asarray(mk(yn)), xg.asarray(mk(vn))

    def loss(z: Any) -> Any:
        return F.cross_entropy(z, y, **kw).sum()  # (reduction="none": the sum of the per-row losses)

    def gv(z: Any) -> Any:
        return (xg.grad(loss)(z) * v).sum()

    return [to_numpy(F.cross_entropy(x, y, **kw)), to_numpy(xg.grad(loss)(x)), to_numpy(xg.grad(gv)(x))]


@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"reduction": "none", "label_smoothing": 0.1},
                                {"ignore_index": 2, "weight": np.array([1.0, 2.0, 0.5, 1.0, 3.0])}])
def test_cross_entropy_torch_native_equals_portable(kw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = torch.log_softmax

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(torch, "log_softmax", counted)
    rng = np.random.default_rng(0)
    for n in (6, 9):  # several shapes, the same kernel each time
        xn = rng.standard_normal((n, 5)) * 3
        yn = rng.integers(0, 5, n)
        vn = rng.standard_normal((n, 5))
        tkw = {k: (xg.asarray(torch.asarray(w)) if k == "weight" else w) for k, w in kw.items()}
        nkw = {k: (xg.asarray(w) if k == "weight" else w) for k, w in kw.items()}
        before = len(calls)
        got = _loss_grad_hvp(xn, yn, vn, lambda a: torch.asarray(a.copy()), **tkw)
        assert len(calls) > before, "torch's log_softmax was not used"
        want = _loss_grad_hvp(xn, yn, vn, np.asarray, **nkw)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
