"""SciPy and scikit-learn gradient checks, run in a process of their own.

``python -m tests._third_party_scipy numpy,array_api_strict`` prints one JSON line:
backend -> case name -> "ok", "skip: why" or the failure. SciPy reads
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


def _ns(x: Any) -> Any:
    import xpgrad as xg

    return xg.array_namespace(x)


def _const(x: Any, a: np.ndarray) -> Any:
    """``a`` in the namespace and on the device of ``x`` (a constant Tensor for a Tensor)."""
    import array_api_compat

    import xpgrad as xg

    data = x.data if isinstance(x, xg.Tensor) else x
    c = _ns(data).asarray(a, device=array_api_compat.device(data))
    return xg.asarray(c) if isinstance(x, xg.Tensor) else c


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
}


def _run_one(name: str, backend: Any) -> str:
    from xpgrad.testing import check_grads

    f, a, order = CASES[name]
    if name.startswith("sklearn."):
        try:
            import sklearn
        except ImportError as e:
            return f"skip: scikit-learn is not installed ({e})"
        with sklearn.config_context(array_api_dispatch=True):
            check_grads(f, backend.asarray(a), order=order)
    else:
        check_grads(f, backend.asarray(a), order=order)
    return "ok"


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
        backend = _load(b)
        res = out[b] = {}
        for name in CASES:
            try:
                res[name] = _run_one(name, backend)
            except Exception as e:  # noqa: BLE001 - reported per case to the test
                res[name] = f"{type(e).__name__}: {e}"
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1].split(","))))
