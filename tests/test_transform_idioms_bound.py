"""Idioms of array-API code under ``xg.grad`` and ``xg.vjp``, on every backend (issue 27).

Three idioms that third-party code (SciPy, scikit-learn, a user's loss) uses and that
failed on Tensors of some libraries:

- the bound namespace's ``asarray`` of another library's data with ``device=x.device``
  (scikit-learn's ``label_binarize`` and ``log_loss``), and the creation functions with
  ``device=x.device``: the result is an array of ``x``'s library on ``x``'s device;
- NumPy scalars (``numpy.float64(2.0)``, ``numpy.int64``, ``np.log(2 * np.pi)``) next to
  arrays: Python scalars for every operator and function, with a Python scalar's
  promotion, so the value, dtype and gradient equal those of the Python-scalar version;
- the FFT transforms on Dask arrays chunked along the transformed axis (the fixture's
  Dask arrays have two chunks per axis): forward, gradient and JVP equal NumPy's.

No ``default_device`` wrapper anywhere: each test must pass on every fixture backend
as it is (strict_device1 included).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import array_api_compat
import numpy as np
import pytest

import xpgrad as xg

from ._util import to_numpy
from .conftest import _selected

ROOT = Path(__file__).resolve().parents[1]
C = np.array([0.5, -1.0, 2.0, 1.5, -0.25])
W = np.array([0.3, -1.2, 0.7, 2.1, -0.4])


def _ns(x: Any) -> Any:
    return array_api_compat.array_namespace(x)


def _where_of(r: Any, like: Any) -> None:
    """``r`` is a Tensor of ``like``'s library on ``like``'s device."""
    assert isinstance(r, xg.Tensor), type(r)
    # (the bound namespaces are equal when library and device are; NumPy's 0-d results are NumPy scalars)
    assert xg.array_namespace(r) == xg.array_namespace(like), (xg.array_namespace(r), xg.array_namespace(like))
    assert array_api_compat.device(r.data) == array_api_compat.device(like.data)


def _grad_and_vjp(f: Callable[[Any], Any], w: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value, grad, vjp pullback of 1) of a scalar function ``f`` at ``w``, as NumPy."""
    g = xg.grad(f)(w)
    out, pull = xg.vjp(f, w)
    (gv,) = pull(_ns(out).ones_like(out))
    return to_numpy(out), to_numpy(g), to_numpy(gv)


# ---------------------------------------------------------------- asarray and devices
def _checked(x: Any, r: Any) -> Any:
    """``r`` after checking that it lands next to ``x`` (a Tensor inside grad and vjp)."""
    _where_of(r, x)
    return r


# name -> (f(w) using a constant made by the bound namespace, d f / d w at W)
ASARRAY: dict[str, tuple[Callable[[Any], Any], np.ndarray]] = {
    "asarray_numpy_device": (lambda w: _ns(w).sum(w * _checked(w, _ns(w).asarray(C, device=w.device))), C),
    "asarray_numpy": (lambda w: _ns(w).sum(w * _checked(w, _ns(w).asarray(C))), C),
    "asarray_numpy_dtype_device": (
        lambda w: _ns(w).sum(w * _checked(w, _ns(w).asarray(C, dtype=w.dtype, device=w.device))), C),
    "asarray_numpy_copy": (lambda w: _ns(w).sum(w * _checked(w, _ns(w).asarray(C, copy=True, device=w.device))), C),
    "asarray_numpy_scalar_device": (
        lambda w: _ns(w).sum(w * _checked(w, _ns(w).asarray(np.float64(2.0), device=w.device))), np.full(5, 2.0)),
    "asarray_numpy_scalar": (lambda w: _ns(w).sum(w * _checked(w, _ns(w).asarray(np.float64(2.0)))), np.full(5, 2.0)),
    "asarray_list_device": (
        lambda w: _ns(w).sum(w * _checked(w, _ns(w).asarray(C.tolist(), dtype=w.dtype, device=w.device))), C),
    "asarray_same_tensor": (lambda w: _ns(w).sum(_ns(w).asarray(w) * w), 2 * W),
    "asarray_same_tensor_copy": (lambda w: _ns(w).sum(_ns(w).asarray(w, copy=True) * w), 2 * W),
    "zeros_device": (lambda w: _ns(w).sum(w + _checked(w, _ns(w).zeros(5, dtype=w.dtype, device=w.device))),
                     np.ones(5)),
    "full_device": (lambda w: _ns(w).sum(w * _checked(w, _ns(w).full(5, 1.5, dtype=w.dtype, device=w.device))),
                    np.full(5, 1.5)),
    "arange_device": (
        lambda w: _ns(w).sum(w * _checked(w, _ns(w).astype(_ns(w).arange(5, device=w.device), w.dtype))),
        np.arange(5.0)),
    "linspace_device": (
        lambda w: _ns(w).sum(w * _checked(w, _ns(w).linspace(0.0, 1.0, 5, dtype=w.dtype, device=w.device))),
        np.linspace(0.0, 1.0, 5)),
}


@pytest.mark.parametrize("name", sorted(ASARRAY))
def test_bound_creation_next_to_the_input(name: str, backend: Any) -> None:
    f, want = ASARRAY[name]
    w = backend.asarray(W)
    value, g, gv = _grad_and_vjp(f, w)
    np.testing.assert_allclose(g, want, rtol=1e-12)
    np.testing.assert_allclose(gv, want, rtol=1e-12)
    np.testing.assert_allclose(value, float(f(xg.asarray(np.asarray(W))).data), rtol=1e-12)


def test_asarray_of_numpy_with_the_device_of_a_tensor(backend: Any) -> None:
    """The idiom itself, outside any transform: an array of the Tensor's library, on its device."""
    t = xg.asarray(backend.asarray(W))
    xp = _ns(t)
    for obj in (C, np.float64(2.0), np.float32(2.0), np.int64(3), np.asarray(C, dtype=np.float32)):
        r = xp.asarray(obj, device=t.device)
        _where_of(r, t)
        assert xg.dtype_name(r.dtype) == str(np.asarray(obj).dtype)
        np.testing.assert_array_equal(to_numpy(r), np.asarray(obj))


def test_asarray_copy_false_across_libraries(backend: Any) -> None:
    """copy=False may share memory (torch and array-api-strict on NumPy's); where a copy is
    needed (JAX and Dask arrays own their memory) it raises, naming asarray and the libraries."""
    t = xg.asarray(backend.asarray(W))
    xp = _ns(t)
    src = np.array(C)
    if backend.name in ("jax", "dask"):
        with pytest.raises(xg.XpgradValueError, match=rf"asarray: copy=False, but making a {backend.name} array"):
            xp.asarray(src, copy=False)
        return
    r = xp.asarray(src, copy=False)
    _where_of(r, t)
    np.testing.assert_array_equal(to_numpy(r), C)


def test_asarray_of_a_tensor_to_another_device(backend: Any) -> None:
    """``xp.asarray(t, device=other)`` moves the Tensor (array-api-strict's devices); the gradient
    comes back to the input's device."""
    if backend.name != "array_api_strict":
        pytest.skip(f"{backend.name} has one CPU device here")
    import array_api_strict

    w = backend.asarray(W)
    home = array_api_compat.device(w)
    other = array_api_strict.Device("device1") if home != array_api_strict.Device("device1") else (
        array_api_strict.Device("CPU_DEVICE"))

    def f(v: Any) -> Any:
        moved = _ns(v).asarray(v, device=other)
        assert array_api_compat.device(moved.data) == other
        back = _ns(moved).asarray(C, device=moved.device) * moved
        return _ns(back).sum(back)

    value, g, gv = _grad_and_vjp(f, w)
    assert array_api_compat.device(xg.grad(f)(w)) == home
    np.testing.assert_allclose(g, C, rtol=1e-12)
    np.testing.assert_allclose(gv, C, rtol=1e-12)
    np.testing.assert_allclose(value, np.sum(C * W), rtol=1e-12)


# ---------------------------------------------------------------- NumPy scalars
# name -> f(w, c) with c a scalar; the NumPy-scalar call must equal the Python-scalar one
SCALAR_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "mul": lambda w, c: w * c,
    "rmul": lambda w, c: c * w,
    "radd": lambda w, c: c + w,
    "rsub": lambda w, c: c - w,
    "rtruediv": lambda w, c: c / (w * w + 1.0),
    "rpow": lambda w, c: c ** w,
    "multiply": lambda w, c: _ns(w).multiply(w, c),
    "where": lambda w, c: _ns(w).where(w > c, w, c),
    "clip": lambda w, c: _ns(w).clip(w, c, None),
    "maximum": lambda w, c: _ns(w).maximum(w, c),
    "full": lambda w, c: w * _ns(w).full(w.shape, c, dtype=w.dtype, device=w.device),
    "f7": lambda w, c: _ns(w).sum(w) * c + np.log(2 * np.pi),
}
SCALARS = {"float64": (np.float64(1.5), 1.5), "float32": (np.float32(1.5), 1.5), "int64": (np.int64(2), 2)}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kind", sorted(SCALARS))
@pytest.mark.parametrize("op", sorted(SCALAR_OPS))
def test_numpy_scalar_is_a_python_scalar(op: str, kind: str, dtype: str, backend: Any) -> None:
    f = SCALAR_OPS[op]
    np_c, py_c = SCALARS[kind]
    w = backend.asarray(W.astype(dtype))

    def with_np(v: Any) -> Any:
        return _ns(v).sum(f(v, np_c))

    def with_py(v: Any) -> Any:
        return _ns(v).sum(f(v, py_c))

    y_np, y_py = f(xg.asarray(w), np_c), f(xg.asarray(w), py_c)
    _where_of(y_np, xg.asarray(w))
    assert y_np.dtype == y_py.dtype, (y_np.dtype, y_py.dtype)
    v_np, g_np, gv_np = _grad_and_vjp(with_np, w)
    v_py, g_py, gv_py = _grad_and_vjp(with_py, w)
    np.testing.assert_array_equal(v_np, v_py)
    np.testing.assert_array_equal(g_np, g_py)
    np.testing.assert_array_equal(gv_np, gv_py)
    assert np.all(np.isfinite(g_np))


def test_numpy_scalars_keep_a_python_scalars_promotion(backend: Any) -> None:
    """float32 next to numpy.float64 stays float32, on NumPy too (NumPy itself would give float64);
    NumPy scalars with no array beside them keep NumPy's meaning."""
    t = xg.asarray(backend.asarray(W.astype(np.float32)))
    xp = _ns(t)
    for r in (t * np.float64(2), np.float64(2) * t, t ** np.int64(2), xp.add(t, np.float64(1)),
              xp.where(t > np.float64(0), t, np.float64(0)), xp.clip(t, np.float64(-1), np.float64(1))):
        assert r.dtype == xg.float32
        _where_of(r, t)
    m = xp.logical_and(t > 0, np.bool_(True))
    assert m.dtype == xg.bool
    np.testing.assert_array_equal(to_numpy(m), W > 0)
    assert xg.multiply(np.float32(2), np.float64(3)).dtype == xg.float64  # (no array: NumPy's rules)
    assert xg.array_namespace(t, np.float32(1)) == xp


def test_numpy_scalar_in_creation_functions(backend: Any) -> None:
    t = xg.asarray(backend.asarray(W))
    xp = _ns(t)
    _where_of(xp.full(3, np.float64(1.5)), t)
    assert xp.full(3, np.float32(1.5)).dtype == xp.full(3, 1.5).dtype
    assert xp.full(3, np.int64(2)).dtype == xp.full(3, 2).dtype
    np.testing.assert_array_equal(to_numpy(xp.arange(np.int64(4))), np.arange(4))
    np.testing.assert_allclose(to_numpy(xp.linspace(np.float64(0), np.float64(1), 3)), [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(to_numpy(xp.full_like(t, np.float64(2.0))), np.full(5, 2.0))


# ---------------------------------------------------------------- FFT on chunked Dask arrays
RNG = np.random.default_rng(3)
XR = RNG.normal(size=(4, 6))
XC = XR + 1j * RNG.normal(size=(4, 6))
FFTS: dict[str, tuple[Callable[[Any], Any], np.ndarray, tuple[int, ...]]] = {
    # name -> (function, input, the transformed axes)
    "fft": (lambda x: xg.fft.fft(x), XC, (1,)),
    "fft_n_axis0": (lambda x: xg.fft.fft(x, n=6, axis=0), XC, (0,)),
    "ifft": (lambda x: xg.fft.ifft(x, n=4, norm="ortho"), XC, (1,)),
    "fftn": (lambda x: xg.fft.fftn(x), XC, (0, 1)),
    "ifftn": (lambda x: xg.fft.ifftn(x, axes=(0,)), XC, (0,)),
    "rfft": (lambda x: xg.fft.rfft(x), XR, (1,)),
    "irfft": (lambda x: xg.fft.irfft(x, norm="forward"), XC, (1,)),
    "rfftn": (lambda x: xg.fft.rfftn(x), XR, (0, 1)),
    "irfftn": (lambda x: xg.fft.irfftn(x, s=(4, 7), axes=(0, 1)), XC, (0, 1)),
    "hfft": (lambda x: xg.fft.hfft(x, axis=0), XC, (0,)),
    "ihfft": (lambda x: xg.fft.ihfft(x), XR, (1,)),
    "fftshift": (lambda x: xg.fft.fftshift(x), XC, (0, 1)),
    "ifftshift": (lambda x: xg.fft.ifftshift(x, axes=1), XC, (1,)),
}


def _fft_loss(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def loss(x: Any) -> Any:
        y = f(x)
        xp = _ns(y)
        if xg.isdtype(y.dtype, "complex floating"):
            return xp.sum(xp.real(y) ** 2) + xp.sum(xp.imag(y) * 0.5)
        return xp.sum(y ** 2)

    return loss


@pytest.mark.parametrize("name", sorted(FFTS))
def test_fft_on_arrays_chunked_along_the_transform(name: str, backend: Any) -> None:
    f, a, axes = FFTS[name]
    x = backend.asarray(a)
    if backend.name == "dask":
        assert all(len(x.chunks[ax]) == 2 for ax in axes), x.chunks  # the case of the issue
    np.testing.assert_allclose(to_numpy(f(xg.asarray(x))), to_numpy(f(xg.asarray(a))), rtol=1e-12, atol=1e-12)
    loss = _fft_loss(f)
    want = to_numpy(xg.grad(loss)(a))
    value, g, gv = _grad_and_vjp(loss, x)
    np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gv, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(value, to_numpy(loss(xg.asarray(a))), rtol=1e-12)
    # forward mode: the JVP rules transform a tangent chunked as the input
    v = RNG.normal(size=a.shape) * (1 + 0.5j if np.iscomplexobj(a) else 1.0)
    _, t = xg.jvp(f, (x,), (backend.asarray(v),))
    _, t_np = xg.jvp(f, (a,), (v,))
    np.testing.assert_allclose(to_numpy(t), to_numpy(t_np), rtol=1e-10, atol=1e-12)


def test_fft_gradient_on_chunked_dask_inside_jit(backend: Any) -> None:
    """Inside xg.jit the rechunk is part of the recorded program: a replay on new values is right."""
    f = xg.jit(xg.grad(_fft_loss(lambda x: xg.fft.rfft(x))))
    for a in (XR, XR + 1.0):
        np.testing.assert_allclose(to_numpy(f(backend.asarray(a))),
                                   to_numpy(xg.grad(_fft_loss(lambda x: xg.fft.rfft(x)))(a)), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- SciPy and scikit-learn
# (SCIPY_ARRAY_API is read once, at SciPy's import: the checks run in a process of their own)
_SCRIPT = r'''
import json, os, sys
os.environ["SCIPY_ARRAY_API"] = "1"
import numpy as np
import scipy.fft, scipy.signal
import sklearn
from sklearn.metrics import log_loss
from sklearn.preprocessing import label_binarize
import xpgrad as xg
from tests.conftest import _load
from tests._util import to_numpy

y = np.array([0, 1, 2, 1]); P = np.array([[.7, .2, .1], [.1, .8, .1], [.2, .2, .6], [.3, .4, .3]])
S = np.random.default_rng(5).normal(size=12); H = np.array([0.2, 0.5, 0.3])

def sq(z):
    xp = z.__array_namespace__()
    return xp.sum(xp.real(z) ** 2) if xg.isdtype(z.dtype, "complex floating") else xp.sum(z ** 2)

scipy_cases = {
    "scipy.fft.rfft": lambda x: sq(scipy.fft.rfft(x)),
    "scipy.fft.irfft": lambda x: sq(scipy.fft.irfft(x * (1 + 0.5j))),
    "scipy.fft.fft": lambda x: sq(scipy.fft.fft(x)),
    "scipy.signal.fftconvolve": lambda x: sq(scipy.signal.fftconvolve(
        x, x.__array_namespace__().asarray(H, device=x.device))),
}
out = {}
for name in sys.argv[1].split(","):
    b = _load(name)
    res = out[name] = {}
    def run(case, fn):
        try:
            res[case] = fn()
        except Exception as e:
            res[case] = f"{type(e).__name__}: {e}"
    def lb():
        with sklearn.config_context(array_api_dispatch=True):
            t = xg.asarray(b.asarray(y))
            r = label_binarize(t, classes=[0, 1, 2])
        assert type(r.data) is type(t.data), type(r.data)
        np.testing.assert_array_equal(to_numpy(r), label_binarize(y, classes=[0, 1, 2]))
        return "ok"
    def ll():
        if b.name == "dask":  # (scikit-learn's label handling on Dask needs unique's sizes: raw Dask fails alike)
            return "ok"
        with sklearn.config_context(array_api_dispatch=True):
            v = log_loss(xg.asarray(b.asarray(y)), xg.asarray(b.asarray(P)))
        np.testing.assert_allclose(float(v), log_loss(y, P), rtol=1e-12)
        return "ok"
    run("label_binarize", lb)
    run("log_loss", ll)
    for case, f in scipy_cases.items():
        def g(f=f):
            np.testing.assert_allclose(to_numpy(xg.grad(f)(b.asarray(S))), to_numpy(xg.grad(f)(S)),
                                       rtol=1e-10, atol=1e-12)
            return "ok"
        run(case, g)
print("RESULT " + json.dumps(out))
'''


@pytest.fixture(scope="session")
def third_party_results() -> dict[str, dict[str, str]]:
    # (session scope: the session-scoped ``backend`` parameter regroups the tests by backend across
    # modules, so a module-scoped fixture was set up again, a subprocess for every backend, per backend)
    pytest.importorskip("scipy")
    pytest.importorskip("sklearn")
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")) if p)
    names = [b for b in _selected() if b not in ("cupy", "torch_cuda")] or ["numpy"]
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, ",".join(names)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"the check process failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])  # type: ignore[no-any-return]


@pytest.mark.parametrize("case", ["label_binarize", "log_loss", "scipy.fft.rfft", "scipy.fft.irfft", "scipy.fft.fft",
                                  "scipy.signal.fftconvolve"])
def test_scipy_and_sklearn_idioms(case: str, backend: Any, third_party_results: dict[str, dict[str, str]],
                                  request: pytest.FixtureRequest) -> None:
    name = request.node.callspec.params["backend"]
    if name not in third_party_results:
        pytest.skip(f"{name} is not checked in the subprocess")
    assert third_party_results[name][case] == "ok", third_party_results[name][case]
