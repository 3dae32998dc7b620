"""Every public transform, on every backend, over the ways array-API code finds its namespace.

Issue 27: what runs under ``xg.grad`` must run under every transform, on every backend,
with no ``default_device`` block. Each case below computes the same kind of function,

    F(w, x) = M @ tanh(x @ (A @ w)) + beta        (w: shape (4,), x: shape (3, 4))

written with one idiom that third-party code uses: the namespace from
``array_api_compat.array_namespace``, from ``xg.array_namespace``, from the data
argument ``x`` (not the differentiated ``w``), a write into a fresh copy, methods on
the value (``.sum()``, ``.mean()``, ``.reshape()``, ``.mT``), NumPy scalars, and a NumPy
constant moved to the value's device. The
expected values are analytic, in float64 NumPy: the Jacobian is
``M diag(1 - t**2) x A`` with ``t = tanh(x @ A w)``, and the scalar function
``s = c . F`` has gradient ``A^T x^T ((1 - t**2) * (M^T c))`` and Hessian
``A^T x^T diag((M^T c) * -2 t (1 - t**2)) x A``.

What fails is listed in ``XFAIL``, one entry per (case, transform, backend fixture
name), each a strict xfail with its reason: when a fix lands, the cell it fixes turns
into an XPASS failure and its entry is deleted. Of the 255 cells that failed on main
2cb5f2f (issue 27), 252 pass; what is left is a limit of the raw library under plain
jit (3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np
import pytest

import xpgrad as xg

from ._util import to_numpy

RNG = np.random.default_rng(27)
W0 = RNG.normal(size=(4,)) * 0.5
X0 = RNG.normal(size=(3, 4)) * 0.5
T0 = RNG.normal(size=(4,))  # a tangent
C = np.array([1.0, 0.5, -0.25])  # the scalar function is s = C . F
ONES3 = np.ones((3, 3))
LOG2PI = float(np.log(2 * np.pi))


def _combine(v: Any) -> Any:
    """``C . v`` with indexing and Python-float operators only (no namespace)."""
    return v[0] + 0.5 * v[1] - 0.25 * v[2]


# ---------------------------------------------------------------------- the cases
def f_compat(w: Any, x: Any) -> Any:
    """The namespace as SciPy, scikit-learn and array-api-extra find it."""
    xp = array_api_compat.array_namespace(w)
    return xp.tanh(xp.matmul(x, w))


def f_xg_namespace(w: Any, x: Any) -> Any:
    """The namespace from xpgrad."""
    xp = xg.array_namespace(w)
    return xp.tanh(x @ w)


def f_data_namespace(w: Any, x: Any) -> Any:
    """The namespace from the data argument, which is not differentiated."""
    xp = array_api_compat.array_namespace(x)
    return xp.tanh(x @ w)


def f_fresh_copy(w: Any, x: Any) -> Any:
    """Writes into fresh copies (``asarray(copy=True)``, ``astype(copy=True)``), never into ``w``."""
    xp = xg.array_namespace(w)
    y = xp.asarray(w, copy=True)
    y[0] = 2.0 * w[1]
    z = xp.astype(w, w.dtype, copy=True)
    z[3] = z[3] * 3.0
    return xp.tanh(x @ (y + z))


def f_methods(w: Any, x: Any) -> Any:
    """Methods and attributes of the value: reshape, mT, sum, mean."""
    xp = xg.array_namespace(w)
    u1 = (x @ w.reshape((4, 1))).reshape((3,))
    u2 = (x * w).mT.sum(axis=0)
    t = xp.tanh(0.5 * (u1 + u2))
    return t - t.mean() + 0.1 * t.sum()


def f_numpy_scalars(w: Any, x: Any) -> Any:
    """NumPy scalars, as libraries produce them (``np.float64``, ``np.log(2 * np.pi)``, and
    ``xp.log(2 * xp.pi)``, which SciPy writes and which gives a NumPy scalar on some backends)."""
    xp = xg.array_namespace(w)
    t = xp.tanh(x @ w)
    s = xp.sum(t)
    return np.float64(2.0) * t - s * np.log(2 * np.pi) * 0.05 - 0.05 * xp.log(2 * xp.pi) * s + np.float64(1.5)


SCALE = np.array([1.5, -0.5, 2.0, 0.25])


def f_numpy_constant(w: Any, x: Any) -> Any:
    """A NumPy constant moved to the value's device, as scikit-learn does (``xp.asarray(a, device=w.device)``)."""
    xp = xg.array_namespace(w)
    c = xp.asarray(SCALE, device=w.device)
    return xp.tanh(x @ (w * c))


@dataclass(frozen=True)
class Case:
    """A case's function and the constants of its analytic reference."""

    f: Callable[[Any, Any], Any]
    A: np.ndarray
    M: np.ndarray
    beta: float = 0.0

    def value(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        return self.M @ np.tanh(x @ (self.A @ w)) + self.beta

    def jacobian(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        t = np.tanh(x @ (self.A @ w))
        return self.M @ ((1 - t**2)[:, None] * x) @ self.A

    def grad(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        return C @ self.jacobian(w, x)

    def hessian(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        t = np.tanh(x @ (self.A @ w))
        d = (self.M.T @ C) * (-2.0 * t * (1 - t**2))
        xa = x @ self.A
        return xa.T @ (d[:, None] * xa)


_I4, _I3 = np.eye(4), np.eye(3)
CASES: dict[str, Case] = {
    "compat_namespace": Case(f_compat, _I4, _I3),
    "xg_namespace": Case(f_xg_namespace, _I4, _I3),
    "data_namespace": Case(f_data_namespace, _I4, _I3),
    "fresh_copy": Case(f_fresh_copy, np.array([[1.0, 2, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0], [0, 0, 0, 4]]), _I3),
    "methods": Case(f_methods, _I4, _I3 + (0.1 - 1 / 3) * ONES3),
    "numpy_scalars": Case(f_numpy_scalars, _I4, 2.0 * _I3 - 0.1 * LOG2PI * ONES3, 1.5),
    "numpy_constant": Case(f_numpy_constant, np.diag(SCALE), _I3),
}


# ---------------------------------------------------------------------- the transforms
def _inputs(backend: Any, k: int) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """The k-th (w, x) pair, on the backend and in NumPy (jit sees a new one each call)."""
    w, x = W0 + 0.3 * k, X0 * (1.0 + 0.2 * k)
    return backend.asarray(w), backend.asarray(x), w, x


def _scalar(case: Case) -> Callable[[Any, Any], Any]:
    return lambda w, x: _combine(case.f(w, x))


def _t_grad(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    w, x, wn, xn = _inputs(backend, 0)
    return [(xg.grad(_scalar(case))(w, x), case.grad(wn, xn))]


def _t_value_and_grad(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    w, x, wn, xn = _inputs(backend, 0)
    v, g = xg.value_and_grad(_scalar(case))(w, x)
    return [(v, C @ case.value(wn, xn)), (g, case.grad(wn, xn))]


# vjp, jvp, linearize and hvp take the data x as a second primal (with a zero tangent)
# rather than in a closure, as jacrev does: a raw array captured by a closure stays raw,
# and neither a raw library's functions (np.tanh, torch.tanh) nor array-api-strict's
# operators (raw @ Tensor raises TypeError) accept a Tensor, under any transform
def _t_vjp(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    w, x, wn, xn = _inputs(backend, 0)
    out, pull = xg.vjp(case.f, w, x)
    g, _ = pull(backend.asarray(C))
    return [(out, case.value(wn, xn)), (g, C @ case.jacobian(wn, xn))]


def _t_jvp(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    w, x, wn, xn = _inputs(backend, 0)
    out, tan = xg.jvp(case.f, (w, x), (backend.asarray(T0), backend.asarray(np.zeros_like(X0))))
    return [(out, case.value(wn, xn)), (tan, case.jacobian(wn, xn) @ T0)]


def _t_linearize(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    w, x, wn, xn = _inputs(backend, 0)
    out, lin = xg.linearize(case.f, w, x)
    j, zero = case.jacobian(wn, xn), backend.asarray(np.zeros_like(X0))
    return [(out, case.value(wn, xn)), (lin(backend.asarray(T0), zero), j @ T0),
            (lin(backend.asarray(2.0 - T0), zero), j @ (2.0 - T0))]


def _jac(transform: Callable[..., Any]) -> Callable[[Case, Any], list[tuple[Any, np.ndarray]]]:
    def run(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
        w, x, wn, xn = _inputs(backend, 0)
        return [(transform(case.f)(w, x), case.jacobian(wn, xn))]

    return run


def _t_hessian(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    w, x, wn, xn = _inputs(backend, 0)
    return [(xg.hessian(_scalar(case))(w, x), case.hessian(wn, xn))]


def _t_hvp(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    w, x, wn, xn = _inputs(backend, 0)
    hw, _ = xg.hvp(_scalar(case), (w, x), (backend.asarray(T0), backend.asarray(np.zeros_like(X0))))
    return [(hw, case.hessian(wn, xn) @ T0)]


def _batch(backend: Any) -> tuple[Any, Any, list[np.ndarray], list[np.ndarray]]:
    """Two examples, stacked along a new leading axis."""
    ws = [W0, W0 * -0.7 + 0.2]
    xs = [X0, X0[::-1] * 1.3]
    return backend.asarray(np.stack(ws)), backend.asarray(np.stack(xs)), ws, xs


def _t_vmap(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    """vmap over the differentiated argument w."""
    ws, _, wn, _ = _batch(backend)
    x = backend.asarray(X0)
    return [(xg.vmap(case.f, in_axes=(0, None))(ws, x), np.stack([case.value(a, X0) for a in wn]))]


def _t_vmap_data(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    """vmap over the data argument x (and w), as over a batch of examples."""
    ws, xs, wn, xn = _batch(backend)
    return [(xg.vmap(case.f)(ws, xs), np.stack([case.value(a, b) for a, b in zip(wn, xn, strict=True)]))]


def _t_vmap_grad(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    """Per-example gradients: vmap(grad) over a batch of data, w shared."""
    _, xs, _, xn = _batch(backend)
    w = backend.asarray(W0)
    return [(xg.vmap(xg.grad(_scalar(case)), in_axes=(None, 0))(w, xs), np.stack([case.grad(W0, b) for b in xn]))]


def _t_jit(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    jf = xg.jit(case.f)
    out = []
    for k in range(3):
        w, x, wn, xn = _inputs(backend, k)
        out.append((jf(w, x), case.value(wn, xn)))
    return out


def _t_jit_grad(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    jg = xg.jit(xg.grad(_scalar(case)))
    out = []
    for k in range(3):
        w, x, wn, xn = _inputs(backend, k)
        out.append((jg(w, x), case.grad(wn, xn)))
    return out


def _t_grad_jit(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    gj = xg.grad(xg.jit(_scalar(case)))
    out = []
    for k in range(3):
        w, x, wn, xn = _inputs(backend, k)
        out.append((gj(w, x), case.grad(wn, xn)))
    return out


def _t_checkpoint(case: Case, backend: Any) -> list[tuple[Any, np.ndarray]]:
    """checkpoint inside a gradient (outside one it calls f on the raw arrays, as f itself)."""
    w, x, wn, xn = _inputs(backend, 0)
    v, g = xg.value_and_grad(xg.checkpoint(_scalar(case)))(w, x)
    return [(v, C @ case.value(wn, xn)), (g, case.grad(wn, xn))]


TRANSFORMS: dict[str, Callable[[Case, Any], list[tuple[Any, np.ndarray]]]] = {
    "grad": _t_grad,
    "value_and_grad": _t_value_and_grad,
    "vjp": _t_vjp,
    "jvp": _t_jvp,
    "linearize": _t_linearize,
    "jacrev": _jac(xg.jacrev),
    "jacfwd": _jac(xg.jacfwd),
    "jacobian_rev": _jac(lambda f: xg.jacobian(f, mode="rev")),
    "jacobian_fwd": _jac(lambda f: xg.jacobian(f, mode="fwd")),
    "hessian": _t_hessian,
    "hvp": _t_hvp,
    "vmap": _t_vmap,
    "vmap_data": _t_vmap_data,
    "vmap_grad": _t_vmap_grad,
    "jit": _t_jit,
    "jit_grad": _t_jit_grad,
    "grad_jit": _t_grad_jit,
    "checkpoint": _t_checkpoint,
}

# what still fails after issue 27, with the reason
_RAW_SCALARS = ("plain jit of raw arrays runs the library's own namespace, as eager code on raw arrays does: "
                "array-api-strict's operators refuse a NumPy scalar ('Expected Array or Python scalar') and "
                "torch's log refuses a Python float (xp.log(2 * xp.pi)), without jit too; under jit(grad) the "
                "values are Tensors and both work")


# ---------------------------------------------------------------------- what still fails
# Every cell that failed on main 2cb5f2f (255: the issue-27 classes vmap-ns, args, jit-inplace,
# jit-methods, scalars, device) passes now; what is left is a limit with its reason.
XFAIL: dict[tuple[str, str, str], str] = {
    ("numpy_scalars", "jit", "array_api_strict"): _RAW_SCALARS,
    ("numpy_scalars", "jit", "strict_device1"): _RAW_SCALARS,
    ("numpy_scalars", "jit", "torch"): _RAW_SCALARS,
}



def _check(got: Any, want: np.ndarray, backend: Any, where: str) -> None:
    """``got`` is an array of the backend's library, on its test device, equal to ``want``."""
    assert not isinstance(got, xg.Tensor), f"{where}: a Tensor came back, not a {backend.name} array"
    like = backend.asarray(np.zeros(1))
    assert array_api_compat.array_namespace(got) is array_api_compat.array_namespace(like), (
        f"{where}: got a {type(got).__module__}.{type(got).__name__}, not a {backend.name} array")
    if backend.name != "dask":
        assert array_api_compat.device(got) == array_api_compat.device(like), (
            f"{where}: on {array_api_compat.device(got)}, not on the input's {array_api_compat.device(like)}")
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-10, atol=1e-12, err_msg=where)


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("case", list(CASES))
def test_transform_matrix(case: str, transform: str, backend: Any, request: pytest.FixtureRequest) -> None:
    name = request.node.callspec.params["backend"]
    reason = XFAIL.get((case, transform, name))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    for i, (got, want) in enumerate(TRANSFORMS[transform](CASES[case], backend)):
        _check(got, want, backend, f"{transform} of {case} on {name}, output {i}")


def test_matrix_covers_every_public_transform() -> None:
    """Every public function of xpgrad that transforms a function ``f`` has a column here.

    custom_vjp and custom_jvp define a function's derivative rather than transform it.
    """
    import inspect

    public = set()
    for n in dir(xg):
        obj = getattr(xg, n)
        if n.startswith("_") or not inspect.isfunction(obj):
            continue
        params = list(inspect.signature(obj).parameters)
        if params and params[0] in ("f", "fun"):
            public.add(n)
    covered = {t.split("_")[0] if t.startswith(("jacobian_", "vmap_")) else t for t in TRANSFORMS}
    covered |= {"remat"} if xg.remat is xg.checkpoint else set()
    assert public - {"custom_vjp", "custom_jvp"} <= covered, sorted(public - covered)
    assert "grad" in public and "vmap" in public and "jit" in public


def test_reference_is_the_derivative() -> None:
    """The analytic references agree with central differences (float64 NumPy)."""
    eps = 1e-6
    for name, case in CASES.items():
        j = np.stack([(case.value(W0 + eps * e, X0) - case.value(W0 - eps * e, X0)) / (2 * eps) for e in np.eye(4)], axis=1)
        np.testing.assert_allclose(case.jacobian(W0, X0), j, rtol=1e-7, atol=1e-9, err_msg=name)
        h = np.stack([(case.grad(W0 + eps * e, X0) - case.grad(W0 - eps * e, X0)) / (2 * eps) for e in np.eye(4)], axis=1)
        np.testing.assert_allclose(case.hessian(W0, X0), h, rtol=1e-6, atol=1e-8, err_msg=name)
        # the case's own code on plain NumPy computes the reference's value
        np.testing.assert_allclose(np.asarray(case.f(W0, X0)), case.value(W0, X0), rtol=1e-12, err_msg=name)


def test_a_function_of_scalars_only_under_jit_is_the_eager_constant(backend: Any) -> None:
    """``xp.log(2 * xp.pi)`` (and NumPy scalars combined with it) inside ``xg.jit`` is computed as
    eager code computes it, a constant: next to another library's array it is a Python scalar,
    next to NumPy's it keeps NumPy's meaning (its dtype), so jit(grad), grad(jit) and jit give
    eager's values and dtypes on every backend, float32 included."""

    def f(w: Any) -> Any:
        xp = xg.array_namespace(w)
        c = 0.5 * xp.log(2 * xp.pi) + np.float64(0.25) * xp.exp(xp.asarray(1.0).item())
        return xp.sum(xp.sin(w) * c) - c * xp.sum(w * w)

    def value(v: Any) -> Any:
        return xg.value_and_grad(f)(v)[0]

    for dt in ("float64", "float32"):
        fns = {"jit(grad)": xg.jit(xg.grad(f)), "grad(jit)": xg.grad(xg.jit(f)), "jit": xg.jit(value)}
        for k in range(3):  # (the traces' first call, then their replays on other values)
            wk = backend.asarray((W0 + k).astype(dt))
            want_v, want_g = xg.value_and_grad(f)(wk)
            for name, fn in fns.items():
                got, want = fn(wk), (want_v if name == "jit" else want_g)
                assert got.dtype == want.dtype, (name, dt, got.dtype, want.dtype)
                np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=1e-5, err_msg=f"{name} {dt}")
