"""Layers and nn functions given a raw backend array (not a Tensor) compute what they compute given a Tensor.

array-api-strict's operators raise on a Tensor on their right ("Expected Array or Python
scalar") instead of deferring to its reflected operator: LayerNorm, BatchNorm, GELU, the
regression losses... failed at ``input - mu`` on a raw array-api-strict batch (issue #31).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
import xpgrad.nn.functional as F  # noqa: N812 - PyTorch's conventional alias
from xpgrad import nn

from ._util import to_numpy

RNG = np.random.default_rng(31)

_MODULES: list[tuple[str, Callable[[], Any], tuple[int, ...]]] = [
    ("LayerNorm", lambda: nn.LayerNorm(3), (4, 3)),
    ("LayerNorm_plain", lambda: nn.LayerNorm(3, elementwise_affine=False), (4, 3)),
    ("BatchNorm1d", lambda: nn.BatchNorm1d(3), (4, 3)),
    ("BatchNorm2d", lambda: nn.BatchNorm2d(3), (2, 3, 4, 4)),
    ("GELU", lambda: nn.GELU(), (4, 3)),
    ("SiLU", lambda: nn.SiLU(), (4, 3)),
    ("Mish", lambda: nn.Mish(), (4, 3)),
    ("Softsign", lambda: nn.Softsign(), (4, 3)),
    ("Tanhshrink", lambda: nn.Tanhshrink(), (4, 3)),
    ("PReLU", lambda: nn.PReLU(), (4, 3)),
    ("LogSoftmax", lambda: nn.LogSoftmax(dim=-1), (4, 3)),
    ("Softmax", lambda: nn.Softmax(dim=-1), (4, 3)),
]


@pytest.mark.parametrize(("name", "make", "shape"), _MODULES, ids=[m[0] for m in _MODULES])
def test_module_takes_a_raw_array(name: str, make: Callable[[], Any], shape: tuple[int, ...], backend: Any) -> None:
    a, b = backend.to(make(), dtype=xg.float64), backend.to(make(), dtype=xg.float64)
    b.load_state_dict(a.state_dict())
    for step in range(3):  # (BatchNorm's running statistics move at each step: the two stay equal)
        a.train(step < 2)
        b.train(step < 2)
        x = backend.asarray(RNG.standard_normal(shape))
        got, want = a(x), b(xg.asarray(x))
        np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=1e-12, atol=1e-12)
        for (k, v), (_, w) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
            np.testing.assert_allclose(to_numpy(v), to_numpy(w), rtol=1e-12, atol=1e-12, err_msg=k)


_LOSSES = [F.mse_loss, F.l1_loss, F.huber_loss, F.smooth_l1_loss]


@pytest.mark.parametrize("loss", _LOSSES, ids=[f.__name__ for f in _LOSSES])
def test_loss_takes_a_raw_input_with_a_tensor_target(loss: Callable[..., Any], backend: Any) -> None:
    for _ in range(3):
        x, t = (backend.asarray(RNG.standard_normal((4, 3))) for _ in range(2))
        w = xg.asarray(t, requires_grad=True)  # (the target is the Tensor: its gradient is asked for)
        got = loss(x, w)
        np.testing.assert_allclose(to_numpy(got), to_numpy(loss(xg.asarray(x), xg.asarray(t))), rtol=1e-12)
        got.backward()
        assert w.grad is not None and tuple(w.grad.shape) == (4, 3)
