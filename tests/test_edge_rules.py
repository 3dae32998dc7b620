"""Derivative rules at their edge points (issue 28, item 15), on every backend.

Each rule is evaluated where its formula is not finite or sits on a branch of a ``where``:
``xlogy``/``xlog1py`` at ``y`` on the log's pole, below it and at NaN, ``entr`` at 0 and
NaN, ``x ** p`` twice at 0, ``logaddexp`` at a tie far from 0, ``det`` at singular
matrices. The expected values are written down by reasoning from the formula (PyTorch's
conventions) and, where PyTorch is installed, also compared with ``torch.autograd.grad``.
The suite's ``filterwarnings = error`` makes a rule that leaks NumPy's divide-by-zero or
invalid-value warning fail too.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg

from ._util import to_numpy

INF, NAN = math.inf, math.nan
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _close(got: Any, want: Any, what: str) -> None:
    np.testing.assert_allclose(to_numpy(got) if not isinstance(got, np.ndarray) else got, np.asarray(want, dtype=np.float64),
                               rtol=1e-12, atol=1e-15, equal_nan=True, err_msg=what)


def _torch_grads(f: Callable[..., Any], *args: np.ndarray, order: int = 1) -> list[np.ndarray]:
    """PyTorch's gradients of ``sum(f(*args))`` (``order=2``: of the sum of the gradients)."""
    import torch

    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in args]
    gs = torch.autograd.grad(f(*ts).sum(), ts, create_graph=order == 2)
    if order == 2:
        gs = torch.autograd.grad(sum(g.sum() for g in gs), ts)
    return [g.detach().numpy() for g in gs]


# ---------------------------------------------------------------------- xlogy, xlog1py
# the grid: x in {0, 2, NaN} against y on the pole, below it, at NaN, inside, at +inf
_X = np.array([0.0, 2.0, NAN] * 5)
_Y = np.repeat([0.0, -1.0, NAN, 1.0, INF], 3)
# d/dx: 0 where x == 0 and y <= 0, else log(y); d/dy: x / y
_WANT_DX = [0.0, -INF, -INF, 0.0, NAN, NAN, NAN, NAN, NAN, 0.0, 0.0, 0.0, INF, INF, INF]
_WANT_DY = [NAN, INF, NAN, -0.0, -2.0, NAN, NAN, NAN, NAN, 0.0, 2.0, NAN, 0.0, 0.0, NAN]


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_gradients_on_the_pole_below_it_and_at_nan(backend: Any, name: str) -> None:
    """d/dx is log(y) where the log is -inf or NaN (it was 0), except where x == 0 and y is on or
    below the pole; d/dy is x / y there (+-inf, NaN for 0 / 0), without a warning."""
    shift = 0.0 if name == "xlogy" else -1.0  # (xlog1py(x, y - 1) has xlogy's derivatives)
    y_arg = _Y + shift
    f = getattr(xg.special, name)
    x, y = backend.asarray(_X), backend.asarray(y_arg)
    for _ in range(2):  # (the same rule twice: nothing is cached wrong)
        gx, gy = xg.grad(lambda a, b: xg.sum(f(a, b)), argnums=(0, 1))(x, y)
        _close(gx, _WANT_DX, f"{name}: d/dx")
        _close(gy, _WANT_DY, f"{name}: d/dy")
    if HAS_TORCH:
        import torch

        tx, ty = _torch_grads(getattr(torch.special, name), _X, y_arg)
        _close(gx, tx, f"{name}: d/dx against torch")
        _close(gy, ty, f"{name}: d/dy against torch")


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_forward_mode_on_the_pole(backend: Any, name: str) -> None:
    """The JVP reads the same derivatives: a unit tangent in x gives d/dx, in y gives d/dy."""
    shift = 0.0 if name == "xlogy" else -1.0
    f = getattr(xg.special, name)
    x, y = backend.asarray(_X), backend.asarray(_Y + shift)
    _, tx = xg.jvp(lambda a: f(a, y), (x,), (backend.xp.ones_like(x),))
    _, ty = xg.jvp(lambda b: f(x, b), (y,), (backend.xp.ones_like(y),))
    _close(tx, _WANT_DX, f"{name}: JVP in x")
    _close(ty, _WANT_DY, f"{name}: JVP in y")


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_second_order_inside_the_domain(backend: Any, name: str) -> None:
    """Second order through the edge-aware rules: d2/dx2 = 0, d2/dy2 = -x / y**2, and the mixed
    d2/dxdy = 1 / y counted once from each first derivative."""
    shift = 0.0 if name == "xlogy" else -1.0
    x0, y0 = np.array([0.0, 2.0, -1.5]), np.array([1.0, 0.5, 3.0])
    f = getattr(xg.special, name)
    x, y = backend.asarray(x0), backend.asarray(y0 + shift)

    def gsum(a: Any, b: Any) -> Any:
        ga, gb = xg.grad(lambda u, v: xg.sum(f(u, v)), argnums=(0, 1))(a, b)
        return xg.sum(ga) + xg.sum(gb)

    hx, hy = xg.grad(gsum, argnums=(0, 1))(x, y)
    _close(hx, 1.0 / y0, f"{name}: d/dx of the gradients")
    _close(hy, 1.0 / y0 - x0 / y0**2, f"{name}: d/dy of the gradients")
    if HAS_TORCH:
        import torch

        tx, ty = _torch_grads(getattr(torch.special, name), x0, y0 + shift, order=2)
        _close(hx, tx, f"{name}: second order against torch")
        _close(hy, ty, f"{name}: second order against torch")


# ---------------------------------------------------------------------- entr
def test_entr_gradient_at_zero_nan_and_outside(backend: Any) -> None:
    """entr' = -(log(x) + 1): +inf at 0 and NaN at NaN and below 0 (it was -1 at all three)."""
    x0 = np.array([0.0, NAN, -1.0, 1.0, INF, math.e])
    want = [INF, NAN, NAN, -1.0, -INF, -2.0]
    x = backend.asarray(x0)
    g = xg.grad(lambda a: xg.sum(xg.special.entr(a)))(x)
    _close(g, want, "entr: gradient")
    _, t = xg.jvp(xg.special.entr, (x,), (backend.xp.ones_like(x),))
    _close(t, want, "entr: JVP")
    if HAS_TORCH:
        import torch

        (tg,) = _torch_grads(torch.special.entr, x0)
        _close(g, tg, "entr: gradient against torch")


def test_entr_second_order(backend: Any) -> None:
    """entr'' = -1 / x inside the domain."""
    x0 = np.array([0.5, 2.0, 1e-3])
    d2 = xg.grad(lambda a: xg.sum(xg.grad(lambda b: xg.sum(xg.special.entr(b)))(a)))(backend.asarray(x0))
    _close(d2, -1.0 / x0, "entr: second derivative")


# ---------------------------------------------------------------------- logaddexp
@pytest.mark.parametrize("at", [1e15, -1e15, 0.0, 1e300])
def test_logaddexp_of_a_tie_splits_the_gradient_evenly(backend: Any, at: float) -> None:
    """logaddexp(x, x): 0.5 from each side, whatever the magnitude (0.47 each at 1e15: exp(x - ans)
    read the rounded ans); the total is 1."""
    x = backend.asarray(np.array([at]))
    g1, g2 = xg.grad(lambda a, b: xg.sum(xg.logaddexp(a, b)), argnums=(0, 1))(x, x)
    _close(g1, [0.5], "logaddexp: d/dx1")
    _close(g2, [0.5], "logaddexp: d/dx2")
    _close(xg.grad(lambda a: xg.sum(xg.logaddexp(a, a)))(x), [1.0], "logaddexp(x, x)")
    if HAS_TORCH:
        import torch

        t1, t2 = _torch_grads(torch.logaddexp, np.array([at]), np.array([at]))
        _close(g1, t1, "logaddexp: against torch")
        _close(g2, t2, "logaddexp: against torch")


def test_logaddexp_far_apart_and_second_order(backend: Any) -> None:
    """The rule is sigmoid(x1 - x2) without overflow (no warning at a difference of 1000), and its
    second derivative is s (1 - s) (1/4 at a tie, with the opposite sign across)."""
    a0, b0 = np.array([1000.0, -1000.0, 1e15, 0.3]), np.array([0.0, 0.0, 1e15, -0.2])
    a, b = backend.asarray(a0), backend.asarray(b0)
    s = 1.0 / (1.0 + np.exp(np.clip(b0 - a0, -700, 700)))
    g1, g2 = xg.grad(lambda u, v: xg.sum(xg.logaddexp(u, v)), argnums=(0, 1))(a, b)
    _close(g1, s, "logaddexp: d/dx1")
    _close(g2, 1.0 - s, "logaddexp: d/dx2")
    h1, h2 = xg.grad(lambda u, v: xg.sum(xg.grad(lambda p: xg.sum(xg.logaddexp(p, v)))(u)), argnums=(0, 1))(a, b)
    _close(h1, s * (1.0 - s), "logaddexp: d2/dx1^2")
    _close(h2, -s * (1.0 - s), "logaddexp: d2/dx1dx2")
    if HAS_TORCH:
        import torch

        t1, t2 = _torch_grads(torch.logaddexp, a0, b0)
        _close(g1, t1, "logaddexp: against torch")
        _close(g2, t2, "logaddexp: against torch")
