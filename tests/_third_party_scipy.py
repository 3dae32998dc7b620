"""SciPy and scikit-learn gradient checks, run in a process of their own.

``python -m tests._third_party_scipy numpy,torch`` prints one JSON line:
backend -> case name -> "ok", "skip: why" or the failure. Backends are the test
fixture's names (tests/conftest.py), ``strict_device1`` included. SciPy reads
``SCIPY_ARRAY_API`` once, when ``scipy`` is first imported (``scipy._lib._array_api``
copies it into a module constant, and ``scipy.special`` builds its dispatching
wrappers at import), so the variable is set here before any import of scipy;
scikit-learn's ``array_api_dispatch`` refuses to run without it.

``CASES`` is importable without importing SciPy: tests/test_third_party.py builds
its parameters from the names.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
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


def _ns(x: Any) -> Any:
    import xpgrad as xg

    return xg.array_namespace(x)


def _const(x: Any, a: np.ndarray) -> Any:
    """``a`` in the namespace and on the device of ``x`` (a constant Tensor for a Tensor)."""
    import array_api_compat

    import xpgrad as xg

    data = x.data if isinstance(x, xg.Tensor) else x
    c = _ns(data).asarray(np.ascontiguousarray(a), device=array_api_compat.device(data))
    return xg.asarray(c) if isinstance(x, xg.Tensor) else c


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
    "special.logsumexp_b": (lambda x: _sp("scipy.special").logsumexp(x, axis=0, b=_const(x, np.abs(X) + 0.1)), X, 2),
    "special.softmax": (lambda x: _sp("scipy.special").softmax(x, axis=0), X, 2),
    "special.log_softmax": (lambda x: _sp("scipy.special").log_softmax(x, axis=1), X, 2),
    "special.erf": (lambda x: _sp("scipy.special").erf(x), V, 2),
    "special.gammaln": (lambda x: _sp("scipy.special").gammaln(x), P, 2),
    "special.xlogy": (lambda x: _sp("scipy.special").xlogy(x, _const(x, P)), V, 2),
    "special.rel_entr": (lambda x: _sp("scipy.special").rel_entr(x, _const(x, P[::-1])), P, 2),
    # scipy.stats
    "stats.zscore": (lambda x: _sp("scipy.stats").zscore(x, axis=1), X, 2),
    "stats.moment": (lambda x: _sp("scipy.stats").moment(x, 3, axis=1), X, 2),
    "stats.moment_centered_2": (lambda x: _sp("scipy.stats").moment(x, order=2), V, 2),
    "stats.skew": (lambda x: _sp("scipy.stats").skew(x), V, 2),
    "stats.kurtosis": (lambda x: _sp("scipy.stats").kurtosis(x), V, 2),
    "stats.variation": (lambda x: _sp("scipy.stats").variation(x), V, 1),
    "stats.entropy": (lambda x: _sp("scipy.stats").entropy(x), P, 2),
    "stats.entropy_qk": (lambda x: _sp("scipy.stats").entropy(x, _const(x, P[::-1])), P, 2),
    "stats.gmean": (lambda x: _sp("scipy.stats").gmean(x), P, 2),
    "stats.hmean": (lambda x: _sp("scipy.stats").hmean(x), P, 2),
    "stats.pmean": (lambda x: _sp("scipy.stats").pmean(x, 2.5), P, 2),
    "stats.sem": (lambda x: _sp("scipy.stats").sem(x), V, 2),
    # scikit-learn, under config_context(array_api_dispatch=True); metrics that return a
    # Python float (the default multioutput="uniform_average") cut the graph by design
    "sklearn.r2_score": (lambda x: _sp("sklearn.metrics").r2_score(_const(x, YT), x, multioutput="raw_values"), YP, 1),
    "sklearn.mean_squared_error": (
        lambda x: _sp("sklearn.metrics").mean_squared_error(_const(x, YT), x, multioutput="raw_values"), YP, 1),
    "sklearn.rbf_kernel": (lambda x: _sp("sklearn.metrics.pairwise").rbf_kernel(x, gamma=0.3), F, 1),
    "sklearn.euclidean_distances": (lambda x: _sp("sklearn.metrics.pairwise").euclidean_distances(x, x[:2, :] + 1.0), F, 1),
    "sklearn.cosine_similarity": (lambda x: _sp("sklearn.metrics.pairwise").cosine_similarity(x), F, 1),
    "sklearn.polynomial_kernel": (lambda x: _sp("sklearn.metrics.pairwise").polynomial_kernel(x, degree=2), F, 1),
    "sklearn.row_norms": (lambda x: _sp("sklearn.utils.extmath").row_norms(x, squared=True), F, 1),
    "sklearn.extmath_softmax": (lambda x: _sp("sklearn.utils.extmath").softmax(x * 1.0), F, 1),
    "sklearn.StandardScaler": (lambda x: _quiet_0_by_0(_sp("sklearn.preprocessing").StandardScaler().fit_transform, x), F, 1),
    "sklearn.MinMaxScaler": (lambda x: _sp("sklearn.preprocessing").MinMaxScaler().fit_transform(x), F, 1),
    "sklearn.Ridge": (
        lambda x: _sp("sklearn.linear_model").Ridge(alpha=1.0, solver="svd").fit(x, _const(x, Y1)).predict(x), F, 1),
    "sklearn.PCA": (lambda x: _sp("sklearn.decomposition").PCA(n_components=2, svd_solver="full").fit_transform(x), F, 1),
    # scipy.signal and scipy.fft
    "signal.fftconvolve": (lambda x: _sp("scipy.signal").fftconvolve(x, _const(x, H)), S, 2),
    "signal.convolve": (lambda x: _sp("scipy.signal").convolve(x, _const(x, H)), S, 2),
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

# Where SciPy computes a raw array of a non-default device through NumPy (scipy.special's
# fallback: np.asarray, which array-api-strict refuses for its device1), the central
# differences cannot be taken on the raw array; the xpgrad gradient (which runs through
# xpgrad.special, in the array's own namespace) is compared with NumPy's instead.
NUMPY_REFERENCE: dict[tuple[str, str], str] = {
    (name, "strict_device1"): "SciPy computes raw device1 arrays through NumPy, which refuses them"
    for name in ("special.erf", "special.gammaln", "stats.entropy", "stats.entropy_qk")
}


def _run_one(name: str, backend: Any, backend_name: str) -> str:
    f, a, order = CASES[name]
    if name.startswith("sklearn."):
        try:
            import sklearn
        except ImportError as e:
            return f"skip: scikit-learn is not installed ({e})"
        with sklearn.config_context(array_api_dispatch=True):
            _check(f, a, order, backend, backend_name, name)
    else:
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

    got, want = pullback(backend), pullback(_load("numpy"))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def main(backends: list[str]) -> dict[str, dict[str, str]]:
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
            res.update(dict.fromkeys(CASES, f"skip: {e}"))
            continue
        for name in CASES:
            try:
                res[name] = _run_one(name, backend, b)
            except Exception as e:  # noqa: BLE001 - reported per case to the test
                res[name] = f"{type(e).__name__}: {e}"
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1].split(","))))
