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


# ---------------------------------------------------------------------- det at singular matrices
def _no_det(backend: Any) -> None:
    if backend.name == "dask":
        pytest.skip("array_api_compat.dask.array.linalg has no det (the forward; tests/cases/linalg.py's xfail)")


def _cofactors(a: np.ndarray) -> np.ndarray:
    """The cofactor matrix ``adj(a)^T`` by its definition: signed minors (any stack of matrices)."""
    n = a.shape[-1]
    out = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, axis=-2), j, axis=-1)
            out[..., i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
    return out


# rank n - 1 (two proportional rows), rank n - 2 (all cofactors 0), zero, a singular diagonal,
# and an invertible one in the same stack
_SINGULAR = np.array([
    [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],
    [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0]],
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
    [[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 0.0]],
    [[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]],
])


def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix(backend: Any) -> None:
    """A stack holding singular matrices: the gradient of det is each matrix's cofactor matrix
    (it raised NumPy's LinAlgError, or gave inf/nan), the invertible one's as before; forward
    mode gives tr(adj(A) T)."""
    _no_det(backend)
    a = backend.asarray(_SINGULAR)
    want = _cofactors(_SINGULAR)
    for _ in range(2):
        g = xg.grad(lambda m: xg.sum(xg.linalg.det(m)))(a)
        np.testing.assert_allclose(to_numpy(g), want, rtol=1e-12, atol=1e-13)
    tangent = np.random.default_rng(0).normal(size=_SINGULAR.shape)
    _, t = xg.jvp(xg.linalg.det, (a,), (backend.asarray(tangent),))
    np.testing.assert_allclose(to_numpy(t), np.sum(want * tangent, axis=(-2, -1)), rtol=1e-12, atol=1e-13)
    if HAS_TORCH:
        import torch

        ta = torch.tensor(_SINGULAR, requires_grad=True)
        # (create_graph: PyTorch's first-order rule without it solves with the LU, 0 here)
        (tg,) = torch.autograd.grad(torch.linalg.det(ta).sum(), ta, create_graph=True)
        np.testing.assert_allclose(to_numpy(g), tg.detach().numpy(), rtol=1e-12, atol=1e-13)


def test_det_complex_singular_matrix(backend: Any) -> None:
    """Complex: the gradient of ``real(det)`` at a singular matrix is the conjugate of its cofactors
    (PyTorch's convention)."""
    _no_det(backend)
    a0 = np.array([[1.0 + 1.0j, 2.0 - 1.0j], [2.0 + 2.0j, 4.0 - 2.0j]])  # second row = 2 * first
    g = xg.grad(lambda m: xg.real(xg.linalg.det(m)))(backend.asarray(a0))
    np.testing.assert_allclose(to_numpy(g), np.conj(_cofactors(a0)), rtol=1e-12, atol=1e-13)


def test_det_second_order_at_singular_and_invertible_matrices(backend: Any) -> None:
    """The Hessian of det through the adjugate rule, against PyTorch's (rank n - 1 and n - 2, the
    identity: no NaN from the branch not taken); without PyTorch, its symmetry and the
    identity's: d2 det / dA_ii dA_jj = 1 for i != j."""
    _no_det(backend)
    for a0 in (_SINGULAR[0], _SINGULAR[1], np.eye(3), _SINGULAR[4]):
        h = to_numpy(xg.hessian(xg.linalg.det)(backend.asarray(a0))).reshape(9, 9)
        assert np.isfinite(h).all()
        np.testing.assert_allclose(h, h.T, atol=1e-12)
        if HAS_TORCH:
            import torch

            th = torch.autograd.functional.hessian(torch.linalg.det, torch.tensor(a0)).reshape(9, 9).numpy()
            np.testing.assert_allclose(h, th, rtol=1e-10, atol=1e-12)
    h = to_numpy(xg.hessian(xg.linalg.det)(backend.asarray(np.eye(3)))).reshape(3, 3, 3, 3)
    np.testing.assert_array_equal(np.einsum("iijj->ij", h), np.ones((3, 3)) - np.eye(3))


def test_det_gradient_at_singular_matrices_under_jit_and_vmap(backend: Any) -> None:
    """The rule branches on no value: a jitted gradient replays on singular and invertible input
    alike, and vmap maps it over the stack."""
    _no_det(backend)
    want = _cofactors(_SINGULAR)
    f = xg.jit(xg.grad(xg.linalg.det))
    for i in (4, 0, 2, 4, 1):  # (traced at the invertible one)
        np.testing.assert_allclose(to_numpy(f(backend.asarray(_SINGULAR[i]))), want[i], rtol=1e-12, atol=1e-13)
    g = xg.vmap(xg.grad(xg.linalg.det))(backend.asarray(_SINGULAR))
    np.testing.assert_allclose(to_numpy(g), want, rtol=1e-12, atol=1e-13)


# ---------------------------------------------------------------------- x ** p, twice at 0
@pytest.mark.parametrize("p", [0.5, 0.3, 1.5])
@pytest.mark.parametrize("exponent", ["scalar", "array"])
def test_pow_second_derivative_at_zero(backend: Any, p: float, exponent: str) -> None:
    """d2/dx2 x ** p = p (p - 1) x ** (p - 2): at 0 it is -inf for 0 < p < 1 (it was 0: the
    first derivative's pole was a where whose masked branch has no derivative) and +inf for
    1 < p < 2; finite elsewhere; the third derivative too."""
    x0 = np.array([0.0, 2.0, 0.5])
    x = backend.asarray(x0)

    def power(a: Any) -> Any:
        return a ** (p if exponent == "scalar" else xg.asarray(backend.asarray(np.full(3, p))))

    def d(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return xg.grad(lambda a: xg.sum(f(a)))

    with np.errstate(divide="ignore", invalid="ignore"):  # (NumPy's reference values at 0, not xpgrad's)
        want2 = p * (p - 1) * x0 ** (p - 2)
        want3 = p * (p - 1) * (p - 2) * x0 ** (p - 3)
    _close(d(d(power))(x), want2, f"x ** {p}: second derivative")
    _close(d(d(d(power)))(x), want3, f"x ** {p}: third derivative")
    h = to_numpy(xg.hessian(lambda a: xg.sum(power(a)))(x))
    _close(np.diagonal(h), want2, f"x ** {p}: Hessian's diagonal (forward over reverse)")
    if HAS_TORCH:
        (t2,) = _torch_grads(lambda a: a ** p, x0, order=2)
        _close(d(d(power))(x), t2, f"x ** {p}: against torch")


def test_pow_second_derivative_at_zero_under_vmap_and_jit(backend: Any) -> None:
    """The pole rule batches and traces: per-example and replayed second derivatives of sqrt-like powers."""
    x0 = np.array([0.0, 4.0, 0.25])
    want = -0.25 * np.array([np.inf, 4.0**-1.5, 0.25**-1.5])
    g2 = xg.grad(xg.grad(lambda a: a**0.5))
    _close(xg.vmap(g2)(backend.asarray(x0)), want, "vmap")
    f = xg.jit(g2)
    for i in (1, 0, 2, 0):
        _close(f(backend.asarray(np.asarray(x0[i]))), want[i], "jit")


def test_det_gradient_of_a_large_matrix_under_jit(backend: Any) -> None:
    """Traced, both formulas run on every matrix: the SVD's stand-in for an invertible 180 x 180
    matrix overflows nothing (its singular values' products stay below e; 180! would) and the
    gradient is still det * inv(A)^T; a singular one gets its cofactors (rank n - 1: u v^T scaled)."""
    _no_det(backend)
    rng = np.random.default_rng(0)
    a0 = rng.normal(size=(180, 180)) / np.sqrt(180) + np.eye(180)
    f = xg.jit(xg.grad(xg.linalg.det))
    want = np.linalg.det(a0) * np.linalg.inv(a0).T
    np.testing.assert_allclose(to_numpy(f(backend.asarray(a0))), want, rtol=1e-8, atol=1e-10 * np.abs(want).max())
    s0 = a0.copy()
    s0[0] = s0[1]  # singular, rank n - 1: the cofactors of row i are those of the first two rows' difference
    got = to_numpy(f(backend.asarray(s0)))
    assert np.isfinite(got).all()
    # adj(A)^T A = det(A) I = 0: each column of the cofactor matrix is orthogonal to A's columns
    np.testing.assert_allclose(s0.T @ got, np.zeros((180, 180)), atol=1e-8 * np.abs(got).max())
    assert np.abs(got).max() > 0
