"""SciPy and scikit-learn gradient checks, run in a process of their own.

``python -m tests._third_party_scipy numpy,torch`` prints one JSON line:
backend -> case name -> "ok", "skip: why" or the failure (the gradient check), and
backend -> ``"case|transform"`` -> the same for each case under each of
``TRANSFORMS`` (issue 27: vmap(grad), jacfwd, hessian, jit, jit(grad)), and on JAX
for each of ``JAX_TRANSFORMS`` (JAX's own transform of the same SciPy code). By default
the transforms run on ``TRANSFORM_CASES`` only (CI time); ``--all`` runs them on every
case (scripts/third_party_table.py, for the table in docs/third-party.md). Backends
are the test fixture's names (tests/conftest.py), ``strict_device1`` included. SciPy reads
``SCIPY_ARRAY_API`` once, when ``scipy`` is first imported (``scipy._lib._array_api``
copies it into a module constant, and ``scipy.special`` builds its dispatching
wrappers at import), so the variable is set here before any import of scipy;
scikit-learn's ``array_api_dispatch`` refuses to run without it.

``CASES`` is importable without importing SciPy: tests/test_third_party.py builds
its parameters from the names.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

_RNG = np.random.default_rng(11)
X = _RNG.normal(size=(3, 5))
V = _RNG.normal(size=(6,))
P = _RNG.uniform(0.1, 1.0, size=(6,))
YT = _RNG.normal(size=(8, 2))
YP = YT + _RNG.normal(size=(8, 2))
F = _RNG.normal(size=(5, 3))
Y1 = _RNG.normal(size=(5,))
S = _RNG.normal(size=(12,))
H = np.array([0.2, 0.5, 0.3])


#: the backend the cases run on now (main and _check set it): the constants of a case are
#: made there, so that they need nothing from the value (a batched value has no .data)
_CURRENT: list[Any] = []


@contextlib.contextmanager
def on_backend(backend: Any) -> Iterator[None]:
    """Run the cases on ``backend`` (its library and test device) inside the block."""
    _CURRENT.append(backend)
    try:
        yield
    finally:
        _CURRENT.pop()


def constant_like(x: Any, a: np.ndarray) -> Any:
    """``a`` made as third-party code makes its constants: in the namespace of ``x`` and on its
    device (``array_api_compat.array_namespace(x).asarray(a, device=device(x))``), whatever
    ``x`` is: a raw array, a Tensor, a value batched by vmap or traced by jit. (The backend
    block of :func:`on_backend` only names the backend the references run on.)"""
    import array_api_compat

    xp = array_api_compat.array_namespace(x)
    return xp.asarray(np.array(a, copy=True), device=array_api_compat.device(x))  # (a copy: no aliasing of X, V, ...)


def _quiet_0_by_0(f: Callable[[Any], Any], x: Any) -> Any:
    """``f(x)`` with NumPy's 0/0 warning ignored: scikit-learn's incremental variance divides
    0/0 for its first batch and discards it, under ``np.errstate`` for NumPy inputs only
    ("There is no errstate equivalent ... in array API", sklearn/utils/extmath.py)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "invalid value encountered in divide", RuntimeWarning)
        return f(x)


def _sp(mod: str) -> Any:
    import importlib

    return importlib.import_module(mod)


# name -> (function of one array, input, order of the check)
CASES: dict[str, tuple[Callable[[Any], Any], np.ndarray, int]] = {
    # scipy.special: array-API code inside SciPy, or dispatched to xpgrad.special
    "special.logsumexp": (lambda x: _sp("scipy.special").logsumexp(x, axis=1), X, 2),
    "special.logsumexp_b": (lambda x: _sp("scipy.special").logsumexp(x, axis=0, b=constant_like(x, np.abs(X) + 0.1)), X, 2),
    "special.softmax": (lambda x: _sp("scipy.special").softmax(x, axis=0), X, 2),
    "special.log_softmax": (lambda x: _sp("scipy.special").log_softmax(x, axis=1), X, 2),
    "special.erf": (lambda x: _sp("scipy.special").erf(x), V, 2),
    "special.gammaln": (lambda x: _sp("scipy.special").gammaln(x), P, 2),
    "special.xlogy": (lambda x: _sp("scipy.special").xlogy(x, constant_like(x, P)), V, 2),
    "special.rel_entr": (lambda x: _sp("scipy.special").rel_entr(x, constant_like(x, P[::-1])), P, 2),
    # scipy.stats
    "stats.zscore": (lambda x: _sp("scipy.stats").zscore(x, axis=1), X, 2),
    "stats.moment": (lambda x: _sp("scipy.stats").moment(x, 3, axis=1), X, 2),
    "stats.moment_centered_2": (lambda x: _sp("scipy.stats").moment(x, order=2), V, 2),
    "stats.skew": (lambda x: _sp("scipy.stats").skew(x), V, 2),
    "stats.kurtosis": (lambda x: _sp("scipy.stats").kurtosis(x), V, 2),
    "stats.variation": (lambda x: _sp("scipy.stats").variation(x), V, 1),
    "stats.entropy": (lambda x: _sp("scipy.stats").entropy(x), P, 2),
    "stats.entropy_qk": (lambda x: _sp("scipy.stats").entropy(x, constant_like(x, P[::-1])), P, 2),
    "stats.gmean": (lambda x: _sp("scipy.stats").gmean(x), P, 2),
    "stats.hmean": (lambda x: _sp("scipy.stats").hmean(x), P, 2),
    "stats.pmean": (lambda x: _sp("scipy.stats").pmean(x, 2.5), P, 2),
    "stats.sem": (lambda x: _sp("scipy.stats").sem(x), V, 2),
    # scikit-learn, under config_context(array_api_dispatch=True); metrics that return a
    # Python float (the default multioutput="uniform_average") cut the graph by design
    "sklearn.r2_score": (lambda x: _sp("sklearn.metrics").r2_score(constant_like(x, YT), x, multioutput="raw_values"), YP, 1),
    "sklearn.mean_squared_error": (
        lambda x: _sp("sklearn.metrics").mean_squared_error(constant_like(x, YT), x, multioutput="raw_values"), YP, 1),
    "sklearn.rbf_kernel": (lambda x: _sp("sklearn.metrics.pairwise").rbf_kernel(x, gamma=0.3), F, 1),
    "sklearn.euclidean_distances": (lambda x: _sp("sklearn.metrics.pairwise").euclidean_distances(x, x[:2, :] + 1.0), F, 1),
    "sklearn.cosine_similarity": (lambda x: _sp("sklearn.metrics.pairwise").cosine_similarity(x), F, 1),
    "sklearn.polynomial_kernel": (lambda x: _sp("sklearn.metrics.pairwise").polynomial_kernel(x, degree=2), F, 1),
    "sklearn.row_norms": (lambda x: _sp("sklearn.utils.extmath").row_norms(x, squared=True), F, 1),
    "sklearn.extmath_softmax": (lambda x: _sp("sklearn.utils.extmath").softmax(x * 1.0), F, 1),
    "sklearn.StandardScaler": (lambda x: _quiet_0_by_0(_sp("sklearn.preprocessing").StandardScaler().fit_transform, x), F, 1),
    "sklearn.MinMaxScaler": (lambda x: _sp("sklearn.preprocessing").MinMaxScaler().fit_transform(x), F, 1),
    "sklearn.Ridge": (
        lambda x: _sp("sklearn.linear_model").Ridge(alpha=1.0, solver="svd").fit(x, constant_like(x, Y1)).predict(x), F, 1),
    "sklearn.PCA": (lambda x: _sp("sklearn.decomposition").PCA(n_components=2, svd_solver="full").fit_transform(x), F, 1),
    # scipy.signal and scipy.fft
    "signal.fftconvolve": (lambda x: _sp("scipy.signal").fftconvolve(x, constant_like(x, H)), S, 2),
    "signal.convolve": (lambda x: _sp("scipy.signal").convolve(x, constant_like(x, H)), S, 2),
    "fft.fft": (lambda x: _sp("scipy.fft").fft(x), S, 2),
    "fft.rfft": (lambda x: _sp("scipy.fft").rfft(x), S, 2),
    "fft.irfft": (lambda x: _sp("scipy.fft").irfft(x), S, 2),
}

# What the third-party library (or the backend under it) does not support: a strict xfail
# in tests/test_third_party.py, naming the limit. Checked to fail on the raw backend array too.
_SKLEARN_JAX = ("scikit-learn does not support JAX arrays (its array API support covers NumPy, "
                "array-api-strict, CuPy and PyTorch): it assigns in place (x[idx] = y), which JAX refuses")
_SKLEARN_DASK_MASK = ("scikit-learn on Dask: it assigns through a boolean mask, whose result sizes Dask "
                      "does not know (cannot broadcast shape (nan,)); the raw Dask array fails alike")
_DASK_SVD = ("Dask's svd needs an array chunked along one dimension only (the test arrays are chunked "
             "along both); the raw Dask array fails alike")
_DASK_FFT = ("on the raw Dask array (the central differences) SciPy calls Dask's fft, which needs a single "
             "chunk along the transformed axis (the test arrays have two); xpgrad's gradient on such arrays "
             "is checked against NumPy's in tests/test_transform_idioms_bound.py")
_SCIPY_NUMPY = ("scipy.signal.convolve is computed in NumPy (np.asarray of the input), not in the "
                "input's namespace, so nothing can differentiate through it; use fftconvolve")
XFAIL: dict[tuple[str, str], str] = {
    **{(name, "jax"): _SKLEARN_JAX for name in (
        "sklearn.r2_score", "sklearn.rbf_kernel", "sklearn.cosine_similarity", "sklearn.StandardScaler",
        "sklearn.MinMaxScaler", "sklearn.Ridge")},
    ("sklearn.r2_score", "dask"): _SKLEARN_DASK_MASK,
    ("sklearn.StandardScaler", "dask"): _SKLEARN_DASK_MASK,
    ("sklearn.Ridge", "dask"): _DASK_SVD,
    ("sklearn.PCA", "dask"): _DASK_SVD,
    **{(name, "dask"): _DASK_FFT for name in ("fft.fft", "fft.rfft", "fft.irfft", "signal.fftconvolve")},
    **{("signal.convolve", b): _SCIPY_NUMPY for b in (
        "numpy", "array_api_strict", "strict_device1", "torch", "torch_cuda", "jax", "dask", "cupy")},
}

# what still fails under the transforms after issue 27, with the reason (none is an issue-27 class)
T_SCIPY_NUMPY_FALLBACK = ("SciPy computes scipy.special functions of a namespace it does not know through NumPy "
                          "(np.asarray, scipy/special/_support_alternative_backends.py), which a value traced "
                          "by jit refuses (ConcretizationError); on JAX arrays SciPy hands them to jax.scipy, which "
                          "takes only JAX arrays. Under jit(grad) the values are Tensors and xpgrad.special runs")
T_SKLEARN_CHECKS = ("scikit-learn branches in Python on the data (its finiteness and zero-variance checks: "
                    "if xp.any(...)), which a value batched by vmap (vmap(grad)) cannot answer (jacfwd batches only the tangents, so it can); "
                    "jax.vmap fails on the same line")


# What fails under the transforms, per (case, transform, backend fixture name): a strict
# xfail in tests/test_third_party.py each, with its reason. The cells of issue 27's classes
# pass; each reason left names a limit checked to fail the same way under JAX's own
# transform, on the raw array, or in the library's own code.
T_DATA_BRANCH = ("limit of tracing: the library branches in Python on a value it computed (scipy.stats.moment: "
                 "if xp.any(order != ...); scikit-learn's check_array: if not xp.all(xp.isfinite(X))), which no "
                 "tracing jit can follow: jax.jit of the same SciPy code raises TracerBoolConversionError alike")
XFAIL_TRANSFORMS: dict[tuple[str, str, str], str] = {
    ("special.erf", "jit", "numpy"): T_SCIPY_NUMPY_FALLBACK,
    ("special.erf", "jit", "array_api_strict"): T_SCIPY_NUMPY_FALLBACK,
    ("special.erf", "jit", "strict_device1"): T_SCIPY_NUMPY_FALLBACK,
    ("special.erf", "jit", "jax"): T_SCIPY_NUMPY_FALLBACK,
    ("special.erf", "jit", "dask"): T_SCIPY_NUMPY_FALLBACK,
    ("special.xlogy", "jit", "jax"): T_SCIPY_NUMPY_FALLBACK,
    ("stats.moment", "jax.jit", "jax"): T_DATA_BRANCH,
    ("stats.entropy_qk", "jit", "jax"): T_SCIPY_NUMPY_FALLBACK,
    ("sklearn.r2_score", "vmap_grad", "numpy"): T_SKLEARN_CHECKS,
    ("sklearn.r2_score", "vmap_grad", "array_api_strict"): T_SKLEARN_CHECKS,
    ("sklearn.r2_score", "vmap_grad", "strict_device1"): T_SKLEARN_CHECKS,
    ("sklearn.r2_score", "vmap_grad", "torch"): T_SKLEARN_CHECKS,
    ("sklearn.r2_score", "vmap_grad", "jax"): _SKLEARN_JAX,
    ("sklearn.r2_score", "vmap_grad", "dask"): _SKLEARN_DASK_MASK,
    ("sklearn.r2_score", "jacfwd", "dask"): _SKLEARN_DASK_MASK,
    ("sklearn.r2_score", "jit", "numpy"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jit", "array_api_strict"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jit", "strict_device1"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jit", "torch"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jit", "jax"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jit", "dask"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jit_grad", "numpy"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jit_grad", "array_api_strict"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jit_grad", "strict_device1"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jit_grad", "torch"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jit_grad", "jax"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jit_grad", "dask"): T_DATA_BRANCH,
    ("sklearn.r2_score", "jax.vmap_grad", "jax"): _SKLEARN_JAX,
    ("sklearn.r2_score", "jax.jacfwd", "jax"): _SKLEARN_JAX,
    ("sklearn.r2_score", "jax.jit", "jax"): _SKLEARN_JAX,
    ("sklearn.rbf_kernel", "vmap_grad", "numpy"): T_SKLEARN_CHECKS,
    ("sklearn.rbf_kernel", "vmap_grad", "array_api_strict"): T_SKLEARN_CHECKS,
    ("sklearn.rbf_kernel", "vmap_grad", "strict_device1"): T_SKLEARN_CHECKS,
    ("sklearn.rbf_kernel", "vmap_grad", "torch"): T_SKLEARN_CHECKS,
    ("sklearn.rbf_kernel", "vmap_grad", "jax"): _SKLEARN_JAX,
    ("sklearn.rbf_kernel", "vmap_grad", "dask"): T_SKLEARN_CHECKS,
    ("sklearn.rbf_kernel", "jit", "numpy"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jit", "array_api_strict"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jit", "strict_device1"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jit", "torch"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jit", "jax"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jit", "dask"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jit_grad", "numpy"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jit_grad", "array_api_strict"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jit_grad", "strict_device1"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jit_grad", "torch"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jit_grad", "jax"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jit_grad", "dask"): T_DATA_BRANCH,
    ("sklearn.rbf_kernel", "jax.vmap_grad", "jax"): _SKLEARN_JAX,
    ("sklearn.rbf_kernel", "jax.jacfwd", "jax"): _SKLEARN_JAX,
    ("sklearn.rbf_kernel", "jax.jit", "jax"): _SKLEARN_JAX,
    ("sklearn.StandardScaler", "vmap_grad", "numpy"): T_SKLEARN_CHECKS,
    ("sklearn.StandardScaler", "vmap_grad", "array_api_strict"): T_SKLEARN_CHECKS,
    ("sklearn.StandardScaler", "vmap_grad", "strict_device1"): T_SKLEARN_CHECKS,
    ("sklearn.StandardScaler", "vmap_grad", "torch"): T_SKLEARN_CHECKS,
    ("sklearn.StandardScaler", "vmap_grad", "jax"): _SKLEARN_JAX,
    ("sklearn.StandardScaler", "vmap_grad", "dask"): _SKLEARN_DASK_MASK,
    ("sklearn.StandardScaler", "jacfwd", "numpy"): T_SKLEARN_CHECKS,
    ("sklearn.StandardScaler", "jacfwd", "array_api_strict"): T_SKLEARN_CHECKS,
    ("sklearn.StandardScaler", "jacfwd", "strict_device1"): T_SKLEARN_CHECKS,
    ("sklearn.StandardScaler", "jacfwd", "torch"): T_SKLEARN_CHECKS,
    ("sklearn.StandardScaler", "jacfwd", "jax"): _SKLEARN_JAX,
    ("sklearn.StandardScaler", "jacfwd", "dask"): _SKLEARN_DASK_MASK,
    ("sklearn.StandardScaler", "jit", "numpy"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jit", "array_api_strict"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jit", "strict_device1"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jit", "torch"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jit", "jax"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jit", "dask"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jit_grad", "numpy"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jit_grad", "array_api_strict"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jit_grad", "strict_device1"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jit_grad", "torch"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jit_grad", "jax"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jit_grad", "dask"): T_DATA_BRANCH,
    ("sklearn.StandardScaler", "jax.vmap_grad", "jax"): _SKLEARN_JAX,
    ("sklearn.StandardScaler", "jax.jacfwd", "jax"): _SKLEARN_JAX,
    ("sklearn.StandardScaler", "jax.jit", "jax"): _SKLEARN_JAX,
    ("signal.fftconvolve", "jit", "jax"): T_SCIPY_NUMPY_FALLBACK,
    ("signal.fftconvolve", "jit", "dask"): _DASK_FFT,
    ("fft.rfft", "jit", "dask"): _DASK_FFT,
}

# Where SciPy computes a raw array of a non-default device through NumPy (scipy.special's
# fallback: np.asarray, which array-api-strict refuses for its device1), the central
# differences cannot be taken on the raw array; the xpgrad gradient (which runs through
# xpgrad.special, in the array's own namespace) is compared with NumPy's instead.
NUMPY_REFERENCE: dict[tuple[str, str], str] = {
    (name, "strict_device1"): "SciPy computes raw device1 arrays through NumPy, which refuses them"
    for name in ("special.erf", "special.gammaln", "stats.entropy", "stats.entropy_qk")
}


@contextlib.contextmanager
def _library_context(name: str) -> Iterator[None]:
    """scikit-learn's array API dispatch for its cases (SkipCase where it is not installed)."""
    if not name.startswith("sklearn."):
        yield
        return
    try:
        import sklearn
    except ImportError as e:
        raise SkipCase(f"scikit-learn is not installed ({e})") from e
    with sklearn.config_context(array_api_dispatch=True):
        yield


class SkipCase(Exception):  # noqa: N818 - reported as "skip: ..."
    """A case that cannot run here (a library not installed)."""


def _run_one(name: str, backend: Any, backend_name: str) -> str:
    f, a, order = CASES[name]
    with _library_context(name):
        _check(f, a, order, backend, backend_name, name)
    return "ok"


def _check(f: Callable[[Any], Any], a: np.ndarray, order: int, backend: Any, backend_name: str, name: str) -> None:
    """check_grads on the backend; where the raw call is SciPy's limit, NumPy's gradient instead."""
    from xpgrad.testing import check_grads

    if (name, backend_name) not in NUMPY_REFERENCE:
        check_grads(f, backend.asarray(a), order=order)
        return
    import xpgrad as xg
    from tests._util import to_numpy
    from tests.conftest import _load

    def pullback(b: Any) -> np.ndarray:
        out, pull = xg.vjp(f, b.asarray(a))
        ct = np.linspace(0.5, 1.5, int(np.prod(out.shape))).reshape(out.shape)
        (g,) = pull(b.asarray(ct))
        return to_numpy(g)

    np_backend = _load("numpy")
    got = pullback(backend)
    with on_backend(np_backend):
        want = pullback(np_backend)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------- issue 27: the transforms
#: what each case also runs under, against references computed on NumPy: vmap(grad) over a
#: batch of two inputs against the per-input eager gradient; jacfwd against central
#: differences; hessian (order-2 cases) against central differences of the eager gradient;
#: jit and jit(grad), each called on two inputs, against the eager value and gradient. The
#: scalar differentiated is ``sum(sin(out))`` (real and imaginary parts of a complex out).
TRANSFORMS = ("vmap_grad", "jacfwd", "hessian", "jit", "jit_grad")
#: JAX's own transforms of the same code on JAX arrays (jax_enable_x64), run in the jax
#: backend's process against the same references; where JAX runs a case, xpgrad's result
#: on JAX arrays is also compared with JAX's (tightly: no finite differences)
JAX_TRANSFORMS = ("jax.vmap_grad", "jax.jacfwd", "jax.hessian", "jax.jit")
#: the cases the transforms run on in CI, one or more per module and idiom (CI time);
#: ``--all`` (scripts/third_party_table.py) runs every case
TRANSFORM_CASES = (
    "special.logsumexp", "special.logsumexp_b", "special.erf", "special.xlogy", "stats.zscore", "stats.moment",
    "stats.entropy_qk", "sklearn.r2_score", "sklearn.rbf_kernel", "sklearn.StandardScaler", "signal.fftconvolve",
    "fft.rfft",
)


def transform_cells(name: str, order: int | None = None) -> tuple[str, ...]:
    """The transforms that apply to case ``name`` (hessian: second-order cases only)."""
    order = CASES[name][2] if order is None else order
    return tuple(t for t in TRANSFORMS if t != "hessian" or order >= 2)


def _realify(xp: Any, o: Any) -> Any:
    """A complex output as its real and imaginary parts stacked; a real one as it is."""
    if xp.isdtype(o.dtype, "complex floating"):
        return xp.stack([xp.real(o), xp.imag(o)])
    return o


def _scalar_of(xp: Any, o: Any) -> Any:
    """``sum(sin(o))``: a scalar whose Hessian involves every entry of the output."""
    return xp.sum(xp.sin(_realify(xp, o)))


def _ns_of(x: Any) -> Any:
    import xpgrad as xg

    return xg.array_namespace(x)


def second_input(a: np.ndarray) -> np.ndarray:
    """Another input in the same domain (positive stays positive)."""
    return a * 0.9 + 0.05


def _fd(fun: Callable[[np.ndarray], np.ndarray], a: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """The Jacobian of ``fun`` at ``a`` by central differences: shape ``out.shape + a.shape``."""
    cols = []
    for i in range(a.size):
        flat = np.zeros(a.size)
        flat[i] = eps
        e = flat.reshape(a.shape)
        cols.append((np.asarray(fun(a + e)) - np.asarray(fun(a - e))) / (2 * eps))
    return np.stack(cols, axis=-1).reshape(cols[0].shape + a.shape)


class Reference:
    """A case's values and derivatives on NumPy: eager value and gradient, and central differences."""

    def __init__(self, name: str, case: tuple[Callable[[Any], Any], np.ndarray, int] | None = None) -> None:
        from tests._util import to_numpy
        from tests.conftest import _load

        self.f, self.a, self.order = CASES[name] if case is None else case
        self.name = name
        self._np = _load("numpy")
        self._to_numpy = to_numpy
        self._memo: dict[tuple[str, int], np.ndarray] = {}

    def _run(self, what: str, k: int, fun: Callable[[], Any]) -> np.ndarray:
        if (what, k) not in self._memo:
            with on_backend(self._np), _library_context(self.name), _quiet():
                self._memo[what, k] = np.asarray(fun())
        return self._memo[what, k]

    def input(self, k: int) -> np.ndarray:
        return self.a if k == 0 else second_input(self.a)

    def value(self, k: int) -> np.ndarray:
        return self._run("value", k, lambda: self._to_numpy(self.f(self.input(k))))

    def grad(self, k: int) -> np.ndarray:
        import xpgrad as xg

        return self._run("grad", k, lambda: self._to_numpy(xg.grad(self.scalar)(self.input(k))))

    def jacobian(self) -> np.ndarray:
        return self._run("jac", 0, lambda: _fd(lambda v: self._to_numpy(_realify(_ns_of(v), self.f(v))), self.a))

    def hessian(self) -> np.ndarray:
        import xpgrad as xg

        return self._run("hess", 0, lambda: _fd(lambda v: self._to_numpy(xg.grad(self.scalar)(v)), self.a))

    def scalar(self, x: Any) -> Any:
        return _scalar_of(_ns_of(x), self.f(x))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """NumPy's 0/0 warning ignored (scikit-learn's incremental variance, see _quiet_0_by_0)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "invalid value encountered in divide", RuntimeWarning)
        yield


def _same(got: Any, want: np.ndarray, backend: Any, what: str, fd: bool = False) -> None:
    """``got`` is an array of the backend's library equal to ``want`` (to finite-difference accuracy if ``fd``)."""
    import array_api_compat

    import xpgrad as xg
    from tests._util import to_numpy

    if isinstance(got, xg.Tensor):
        msg = f"{what}: a Tensor came back, not a {backend.name} array"
        raise AssertionError(msg)
    like = backend.asarray(np.zeros(1))
    if array_api_compat.array_namespace(got) is not array_api_compat.array_namespace(like):
        msg = f"{what}: a {type(got).__module__}.{type(got).__name__} came back, not a {backend.name} array"
        raise AssertionError(msg)
    g = to_numpy(got)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    rtol, atol = (1e-5, 1e-6 * scale) if fd else (1e-9, 1e-11 * scale)
    np.testing.assert_allclose(g, want, rtol=rtol, atol=atol, err_msg=what)


def run_transform(name: str, transform: str, backend: Any, ref: Reference, jax_results: dict[str, Any]) -> str:
    """One case under one transform on ``backend``: "ok", or raises (``jax_results``: JAX's own
    results for the same case, by transform name, to compare with on JAX arrays)."""
    import xpgrad as xg

    f = ref.f
    x0, x1 = backend.asarray(ref.input(0)), backend.asarray(ref.input(1))
    theirs = jax_results.get(transform)
    with _library_context(name), _quiet():
        if transform == "vmap_grad":
            got = xg.vmap(xg.grad(ref.scalar))(backend.asarray(np.stack([ref.input(0), ref.input(1)])))
            _same(got, np.stack([ref.grad(0), ref.grad(1)]), backend, "vmap(grad)")
        elif transform == "jacfwd":
            got = xg.jacfwd(lambda x: _realify(_ns_of(x), f(x)))(x0)
            _same(got, ref.jacobian(), backend, "jacfwd", fd=True)
        elif transform == "hessian":
            got = xg.hessian(ref.scalar)(x0)
            _same(got, ref.hessian(), backend, "hessian", fd=True)
        elif transform == "jit":
            jf = xg.jit(f)
            got = [jf(x0), jf(x1)]
            for k in (0, 1):
                _same(got[k], ref.value(k), backend, f"jit, input {k}")
        elif transform == "jit_grad":
            jg = xg.jit(xg.grad(ref.scalar))
            got = [jg(x0), jg(x1)]
            for k in (0, 1):
                _same(got[k], ref.grad(k), backend, f"jit(grad), input {k}")
        else:
            msg = f"_run_transform: unknown transform {transform!r}"
            raise ValueError(msg)
    if theirs is not None:  # on JAX arrays, where JAX's own transform ran: the same numbers
        _same(got[0] if isinstance(got, list) else got, theirs, backend, f"{transform} against JAX's")
    return "ok"


def run_jax(name: str, transform: str, backend: Any, ref: Reference) -> tuple[str, Any]:
    """JAX's own transform of case ``name`` on JAX arrays: ("ok", its first result), or raises."""
    import jax
    import jax.numpy as jnp

    from tests._util import to_numpy

    f = ref.f

    def scalar(x: Any) -> Any:
        return _scalar_of(jnp, f(x))

    x0 = jnp.asarray(ref.input(0))
    with _library_context(name), _quiet():
        if transform == "jax.vmap_grad":
            got = jax.vmap(jax.grad(scalar))(jnp.asarray(np.stack([ref.input(0), ref.input(1)])))
            _same(got, np.stack([ref.grad(0), ref.grad(1)]), backend, "jax.vmap(jax.grad)")
            return "ok", to_numpy(got)
        if transform == "jax.jacfwd":
            got = jax.jacfwd(lambda x: _realify(jnp, f(x)))(x0)
            _same(got, ref.jacobian(), backend, "jax.jacfwd", fd=True)
            return "ok", to_numpy(got)
        if transform == "jax.hessian":
            got = jax.hessian(scalar)(x0)
            _same(got, ref.hessian(), backend, "jax.hessian", fd=True)
            return "ok", to_numpy(got)
        if transform == "jax.jit":
            jf = jax.jit(f)
            for k in (0, 1):
                _same(jf(jnp.asarray(ref.input(k))), ref.value(k), backend, f"jax.jit, input {k}")
            return "ok", ref.value(0)
    msg = f"_run_jax: unknown transform {transform!r}"
    raise ValueError(msg)


def failure(e: BaseException) -> str:
    """How a cell's exception is reported."""
    if isinstance(e, SkipCase):
        return f"skip: {e}"
    return f"{type(e).__name__}: {e}"


def run_transforms(backend: Any, backend_name: str, names: Any) -> dict[str, str]:
    """Every case in ``names`` under every transform that applies: "case|transform" -> result."""
    res: dict[str, str] = {}
    for name in names:
        try:
            ref = Reference(name)
        except Exception as e:  # noqa: BLE001 - reported per case to the test
            res.update({f"{name}|{t}": f"reference: {failure(e)}" for t in transform_cells(name)})
            continue
        theirs: dict[str, Any] = {}
        if backend_name == "jax":
            for t in JAX_TRANSFORMS:
                if t == "jax.hessian" and ref.order < 2:
                    continue
                try:
                    res[f"{name}|{t}"], theirs[t[4:]] = run_jax(name, t, backend, ref)
                except Exception as e:  # noqa: BLE001 - reported per case to the test
                    res[f"{name}|{t}"] = failure(e)
        for t in transform_cells(name):
            try:
                res[f"{name}|{t}"] = run_transform(name, t, backend, ref, theirs)
            except Exception as e:  # noqa: BLE001 - reported per case to the test
                res[f"{name}|{t}"] = failure(e)
    return res


def main(backends: list[str], all_cases: bool = False) -> dict[str, dict[str, str]]:
    if "scipy" in sys.modules and os.environ.get("SCIPY_ARRAY_API") != "1":
        msg = "scipy was imported before SCIPY_ARRAY_API=1 was set"
        raise RuntimeError(msg)
    os.environ["SCIPY_ARRAY_API"] = "1"
    import warnings

    from tests.conftest import _load

    warnings.simplefilter("error")  # as the test suite
    out: dict[str, dict[str, str]] = {}
    for b in backends:
        res = out[b] = {}
        try:
            backend = _load(b)
        except BaseException as e:  # noqa: BLE001 - pytest.skip (no GPU, not installed) is a BaseException
            # a GPU the library cannot use is pytest.fail in the fixture: a failure of every case, not a skip
            kind = "skip" if type(e).__name__ == "Skipped" else type(e).__name__
            res.update(dict.fromkeys(CASES, f"{kind}: {e}"))
            continue
        with on_backend(backend):
            for name in CASES:
                try:
                    res[name] = _run_one(name, backend, b)
                except Exception as e:  # noqa: BLE001 - reported per case to the test
                    res[name] = failure(e)
            res.update(run_transforms(backend, b, CASES if all_cases else TRANSFORM_CASES))
    return out


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--all"]
    print(json.dumps(main(args[0].split(","), all_cases="--all" in sys.argv[1:])))
