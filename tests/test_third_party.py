"""Gradients through array-API code that nobody here wrote.

array-api-extra, SciPy (``SCIPY_ARRAY_API=1``) and scikit-learn
(``array_api_dispatch=True``) call whatever ``__array_namespace__`` returns; on a
Tensor that is xpgrad, so their functions become differentiable. Each gradient is
checked against central differences with :func:`xpgrad.testing.check_grads`.

The functions are written as third-party code is: the namespace comes from the
argument (``check_grads`` calls them with Tensors for the gradient and with raw
backend arrays for the finite differences). SciPy reads ``SCIPY_ARRAY_API`` once,
when it is first imported, so the SciPy and scikit-learn checks run in a fresh
process (tests/_third_party_scipy.py) and report back as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.testing import check_grads

xpx = pytest.importorskip("array_api_extra")

from ._third_party_scipy import CASES as SCIPY_CASES  # noqa: E402 - after the importorskip
from ._third_party_scipy import (  # noqa: E402
    JAX_TRANSFORMS,
    TRANSFORM_CASES,
    Reference,
    constant_like,
    on_backend,
    run_jax,
    run_transform,
    transform_cells,
)
from ._third_party_scipy import XFAIL as SCIPY_XFAIL  # noqa: E402
from ._third_party_scipy import XFAIL_TRANSFORMS as SCIPY_XFAIL_TRANSFORMS  # noqa: E402
from .conftest import _selected  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(7)
X = RNG.normal(size=(3, 5))
V = np.array([0.0, -1.3, 0.4, 2.2, -0.7, 1.1])
# NaN where True; every column keeps a finite entry
NAN_MASK = np.array([[True, False, False, True, False], [False, True, False, False, False], [False, False, True, False, True]])


def _ns(x: Any) -> Any:
    return xg.array_namespace(x)


def _const(x: Any, a: np.ndarray) -> Any:
    """``a`` on the test's backend and device (a constant Tensor beside a Tensor, batched or
    not, or a value traced by jit; the raw array beside a raw array)."""
    return constant_like(x, a)


def _with_nans(x: Any) -> Any:
    xp = _ns(x)
    return xp.where(_const(x, NAN_MASK), xp.nan, x)


# name -> (function, input, order of the check)
XPX: dict[str, tuple[Callable[[Any], Any], np.ndarray, int]] = {
    "cov": (lambda x: xpx.cov(x), X, 2),
    "cov_1d": (lambda x: xpx.cov(x[0, :]), X, 2),
    "sinc": (lambda x: xpx.sinc(x), V[1:], 2),
    # at exactly 0 the generic sinc substitutes a constant (where(x, x, eps)), so its second
    # derivative there is 0 instead of -pi**2/3 (on every backend): first order only
    "sinc_at_zero": (lambda x: xpx.sinc(x), V, 1),
    "pad": (lambda x: xpx.pad(x, 2), X, 2),
    "pad_widths": (lambda x: xpx.pad(x, ((1, 0), (2, 3)), constant_values=1.5), X, 2),
    "nanmean": (lambda x: xpx.nanmean(_with_nans(x), axis=0), X, 2),
    "nanmean_all": (lambda x: xpx.nanmean(_with_nans(x)), X, 2),
    "nansum": (lambda x: xpx.nansum(_with_nans(x), axis=1), X, 2),
    "atleast_nd": (lambda x: xpx.atleast_nd(x, ndim=3) * x[0], V, 2),
    "one_hot_weights": (lambda x: x[:, :3] @ xpx.one_hot(_const(x, np.array([0, 2, 1])), 3, dtype=_ns(x).float64), X, 2),
    "isclose_mask": (lambda x: _ns(x).where(xpx.isclose(x, _const(x, V), atol=0.5), x, -x), V + 0.2, 2),
    "kron": (lambda x: xpx.kron(x[:, :2], x[:2, :]), X, 2),
    "create_diagonal": (lambda x: xpx.create_diagonal(x), V, 2),
    "nan_to_num": (lambda x: xpx.nan_to_num(_ns(x).where(_const(x, V == 0), _ns(x).nan, x) * 2.0, fill_value=-1.0), V, 2),
    "apply_where": (lambda x: xpx.apply_where(x > 0, x, lambda a: _ns(a).sqrt(a), fill_value=0.0), V[1:], 2),
    # at(): on a leaf that requires grad, the default (copy=None) writes in place, which
    # xpgrad refuses as PyTorch does (tested below); copy=True, or an intermediate, works
    "at_set_copy": (lambda x: xpx.at(x)[1:3].set(x[0] * 2.0, copy=True), V, 2),
    "at_set": (lambda x: xpx.at(x * 1.0)[1:3].set(x[0] * 2.0), V, 2),
    "at_add": (lambda x: xpx.at(x + 0.0)[1:4].add(x[0] * x[5]), V, 2),
    "at_multiply": (lambda x: xpx.at(x * 1.0)[::2].multiply(x[1]), V, 2),
    "at_multiply_copy": (lambda x: xpx.at(x, (slice(None), 1)).multiply(x[:, 0], copy=True), X, 2),
    "at_mask_multiply": (lambda x: xpx.at(x * 1.0)[x > 0].multiply(3.0), V[1:], 2),
    "at_int_index_add": (lambda x: xpx.at(x * 1.0)[_const(x, np.array([0, 2, 5]))].add(x[1]), V, 2),
    "at_subtract": (lambda x: xpx.at(x * 1.0)[1:3].subtract(x[0] * x[4]), V, 2),
    "at_power": (lambda x: xpx.at(x + 3.0)[::2].power(x[1] + 2.0), V, 2),
    "at_min": (lambda x: xpx.at(x * 1.0)[:4].min(x[5] * 0.5), V, 2),
    "at_max": (lambda x: xpx.at(x * 1.0)[2:].max(x[0] + 0.3), V, 2),
    "at_max_copy": (lambda x: xpx.at(x, (slice(None), 0)).max(x[:, 1], copy=True), X, 2),
    "at_2d_divide": (lambda x: xpx.at(_ns(x).exp(x))[:, 1].divide(x[:, 0] ** 2 + 1.0), X, 2),
}


# the backends' own limitations (the same call fails on the raw backend array), and the Dask
# cases: xpgrad's capabilities() reports no boolean indexing over Dask (its masks give unknown
# sizes, which xpgrad never computes), so array-api-extra takes its mask-free `where` paths,
# which stay lazy (isclose, one_hot pass). Two cases remain:
# - apply_where then evaluates f1 on every element (as it does under jax.jit): sqrt sees the
#   masked-out negatives, giving NaN there and a NaN gradient through `where` (the trap JAX
#   documents), so the case is not differentiable as written on such backends;
# - at()[mask] recognises a lazy index by type (is_dask_array(idx)), which a Tensor over Dask is
#   not, and assigns through the mask, whose result sizes Dask does not know.
_WHERE_TRAP = ("array-api-extra's apply_where on a backend without boolean indexing evaluates f1 "
               "on every element (as under jax.jit): sqrt of the masked-out negatives gives NaN, "
               "and a NaN gradient through where")
_LAZY = ("xpgrad gap: array-api-extra's at() recognises a lazy Dask index by type, not a Tensor "
         "over Dask, and assigns through the boolean mask, whose result sizes Dask does not know")
XFAIL = {
    ("at_int_index_add", "array_api_strict"): "array-api-strict has no integer-array __setitem__ (the standard does not require it)",
    ("apply_where", "dask"): _WHERE_TRAP,
    ("at_mask_multiply", "dask"): _LAZY,
}

# what still fails under the transforms after issue 27, with the reason (none is an issue-27 class)
T_USER_MASK = ("the function itself indexes by a boolean mask of its input (x[x > 0]): a data-dependent shape, "
               "which vmap and jit refuse by name, as jax.vmap and jax.jit do")


# today's failures under the transforms, per (case, transform, backend fixture name); the
# reasons start with the failure class of issue 27 or name a genuine limit
XPX_XFAIL_TRANSFORMS: dict[tuple[str, str, str], str] = {
    ("apply_where", "vmap_grad", "numpy"): _WHERE_TRAP,
    ("apply_where", "vmap_grad", "array_api_strict"): _WHERE_TRAP,
    ("apply_where", "vmap_grad", "strict_device1"): _WHERE_TRAP,
    ("apply_where", "vmap_grad", "torch"): _WHERE_TRAP,
    ("apply_where", "vmap_grad", "jax"): _WHERE_TRAP,
    ("apply_where", "vmap_grad", "dask"): _WHERE_TRAP,
    ("apply_where", "jacfwd", "numpy"): _WHERE_TRAP,
    ("apply_where", "jacfwd", "array_api_strict"): _WHERE_TRAP,
    ("apply_where", "jacfwd", "strict_device1"): _WHERE_TRAP,
    ("apply_where", "jacfwd", "dask"): _WHERE_TRAP,
    ("apply_where", "hessian", "numpy"): _WHERE_TRAP,
    ("apply_where", "hessian", "array_api_strict"): _WHERE_TRAP,
    ("apply_where", "hessian", "strict_device1"): _WHERE_TRAP,
    ("apply_where", "hessian", "torch"): _WHERE_TRAP,
    ("apply_where", "hessian", "jax"): _WHERE_TRAP,
    ("apply_where", "hessian", "dask"): _WHERE_TRAP,
    ("apply_where", "jit", "numpy"): _WHERE_TRAP,
    ("apply_where", "jit", "array_api_strict"): _WHERE_TRAP,
    ("apply_where", "jit", "strict_device1"): _WHERE_TRAP,
    ("apply_where", "jit_grad", "numpy"): _WHERE_TRAP,
    ("apply_where", "jit_grad", "array_api_strict"): _WHERE_TRAP,
    ("apply_where", "jit_grad", "strict_device1"): _WHERE_TRAP,
    ("apply_where", "jit_grad", "torch"): _WHERE_TRAP,
    ("apply_where", "jit_grad", "jax"): _WHERE_TRAP,
    ("apply_where", "jit_grad", "dask"): _WHERE_TRAP,
    ("apply_where", "jax.vmap_grad", "jax"): _WHERE_TRAP,
    ("apply_where", "jax.hessian", "jax"): _WHERE_TRAP,
    ("at_mask_multiply", "vmap_grad", "numpy"): T_USER_MASK,
    ("at_mask_multiply", "vmap_grad", "array_api_strict"): T_USER_MASK,
    ("at_mask_multiply", "vmap_grad", "strict_device1"): T_USER_MASK,
    ("at_mask_multiply", "vmap_grad", "torch"): T_USER_MASK,
    ("at_mask_multiply", "vmap_grad", "jax"): T_USER_MASK,
    ("at_mask_multiply", "vmap_grad", "dask"): _LAZY,
    ("at_mask_multiply", "jacfwd", "numpy"): T_USER_MASK,
    ("at_mask_multiply", "jacfwd", "array_api_strict"): T_USER_MASK,
    ("at_mask_multiply", "jacfwd", "strict_device1"): T_USER_MASK,
    ("at_mask_multiply", "jacfwd", "torch"): T_USER_MASK,
    ("at_mask_multiply", "jacfwd", "jax"): T_USER_MASK,
    ("at_mask_multiply", "jacfwd", "dask"): _LAZY,
    ("at_mask_multiply", "hessian", "numpy"): T_USER_MASK,
    ("at_mask_multiply", "hessian", "array_api_strict"): T_USER_MASK,
    ("at_mask_multiply", "hessian", "strict_device1"): T_USER_MASK,
    ("at_mask_multiply", "hessian", "torch"): T_USER_MASK,
    ("at_mask_multiply", "hessian", "jax"): T_USER_MASK,
    ("at_mask_multiply", "hessian", "dask"): _LAZY,
    ("at_mask_multiply", "jit", "numpy"): T_USER_MASK,
    ("at_mask_multiply", "jit", "array_api_strict"): T_USER_MASK,
    ("at_mask_multiply", "jit", "strict_device1"): T_USER_MASK,
    ("at_mask_multiply", "jit", "torch"): T_USER_MASK,
    ("at_mask_multiply", "jit", "jax"): T_USER_MASK,
    ("at_mask_multiply", "jit", "dask"): _LAZY,
    ("at_mask_multiply", "jit_grad", "numpy"): T_USER_MASK,
    ("at_mask_multiply", "jit_grad", "array_api_strict"): T_USER_MASK,
    ("at_mask_multiply", "jit_grad", "strict_device1"): T_USER_MASK,
    ("at_mask_multiply", "jit_grad", "torch"): T_USER_MASK,
    ("at_mask_multiply", "jit_grad", "jax"): T_USER_MASK,
    ("at_mask_multiply", "jit_grad", "dask"): _LAZY,
}


@pytest.mark.parametrize("name", list(XPX))
def test_array_api_extra_gradient(name: str, backend: Any, request: pytest.FixtureRequest) -> None:
    f, a, order = XPX[name]
    reason = XFAIL.get((name, backend.name))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    x = backend.asarray(a)
    before = backend.to_numpy(x).copy()
    # no default_device block: the arrays these functions create from scratch
    # (xp.asarray(0.0), xp.zeros(..., device=device(x))) follow the bound namespace of x
    with on_backend(backend):
        check_grads(f, x, order=order)
    np.testing.assert_array_equal(backend.to_numpy(x), before, err_msg=f"{name}: input mutated")


# ---------------------------------------------------------------------- issue 27: under every transform
# Each case under vmap(grad), jacfwd, hessian (second-order cases), jit and jit(grad), against
# NumPy references (tests/_third_party_scipy.py's Reference: the eager value and gradient,
# central differences), and on JAX arrays against JAX's own transform of the same code.
_XPX_REFS: dict[str, Reference] = {}
_XPX_JAX: dict[tuple[str, str], Any] = {}


def _xpx_ref(name: str) -> Reference:
    if name not in _XPX_REFS:
        _XPX_REFS[name] = Reference(name, XPX[name])
    return _XPX_REFS[name]


def _xpx_jax(name: str, transform: str, backend: Any) -> Any:
    """JAX's own ``transform`` of case ``name`` (None where JAX fails it)."""
    if (name, transform) not in _XPX_JAX:
        try:
            with on_backend(backend):
                _XPX_JAX[name, transform] = run_jax(name, transform, backend, _xpx_ref(name))[1]
        except Exception:  # noqa: BLE001 - test_array_api_extra_under_jax_transforms reports it
            _XPX_JAX[name, transform] = None
    return _XPX_JAX[name, transform]


#: the cases the transforms run on in CI (CI time: every idiom once); scripts/third_party_table.py
#: runs every case for the table in docs/third-party.md
XPX_TRANSFORM_CASES = (
    "cov", "pad_widths", "nanmean", "one_hot_weights", "isclose_mask", "apply_where", "at_set_copy",
    "at_mask_multiply", "at_2d_divide",
)
#: JAX's own transforms checked in-process: those issue 27 names (CI time; the table has all)
_XPX_JAX_TRANSFORMS = tuple(t for t in JAX_TRANSFORMS if t != "jax.jacfwd")
_XPX_CELLS = [(n, t) for n in XPX_TRANSFORM_CASES for t in transform_cells(n, XPX[n][2])]
_XPX_JAX_CELLS = [
    (n, t) for n in XPX_TRANSFORM_CASES for t in _XPX_JAX_TRANSFORMS if t != "jax.hessian" or XPX[n][2] >= 2
]


@pytest.mark.parametrize(("name", "transform"), _XPX_CELLS)
def test_array_api_extra_transforms(name: str, transform: str, backend: Any, request: pytest.FixtureRequest) -> None:
    bname = request.node.callspec.params["backend"]
    reason = XPX_XFAIL_TRANSFORMS.get((name, transform, bname))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    theirs = {}
    if bname == "jax" and "jax." + transform in _XPX_JAX_TRANSFORMS and (
        got := _xpx_jax(name, "jax." + transform, backend)
    ) is not None:
        theirs[transform] = got
    with on_backend(backend):
        assert run_transform(name, transform, backend, _xpx_ref(name), theirs) == "ok"


@pytest.mark.parametrize(("name", "transform"), _XPX_JAX_CELLS)
def test_array_api_extra_under_jax_transforms(name: str, transform: str, request: pytest.FixtureRequest) -> None:
    """JAX's own transforms of the same array-api-extra code, against the same references."""
    if "jax" not in _selected():
        pytest.skip("jax is not among XPGRAD_BACKENDS")
    from .conftest import _load

    backend = _load("jax")
    reason = XPX_XFAIL_TRANSFORMS.get((name, transform, "jax"))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    with on_backend(backend):
        assert run_jax(name, transform, backend, _xpx_ref(name))[0] == "ok"


def test_one_hot_and_isclose_are_constants(backend: Any) -> None:
    idx = xg.asarray(backend.asarray(np.array([0, 2, 1])))
    oh = xpx.one_hot(idx, 3)
    assert isinstance(oh, xg.Tensor) and not oh.requires_grad
    x = xg.asarray(backend.asarray(V)).requires_grad_()
    close = xpx.isclose(x, x + 1e-12)
    assert isinstance(close, xg.Tensor) and not close.requires_grad
    assert bool(xg.all(close))


def test_at_in_place_on_a_leaf_is_refused_as_in_pytorch() -> None:
    x = xg.asarray(V).requires_grad_()
    with pytest.raises(xg.InPlaceModificationError, match="__setitem__"):
        xpx.at(x)[0].set(1.0)
    with xg.no_grad():  # outside recording, in place is fine
        y = xg.asarray(V.copy())  # (xg.asarray shares NumPy's memory: the write would change V)
        assert xpx.at(y)[0].set(5.0) is y
        assert float(y[0]) == 5.0


def test_at_set_cuts_the_gradient_of_the_overwritten_entries() -> None:
    g = xg.grad(lambda x: xg.sum(xpx.at(x * 1.0)[1:3].set(0.0) * 2.0))(V)
    np.testing.assert_array_equal(g, [2.0, 0.0, 0.0, 2.0, 2.0, 2.0])


# ---------------------------------------------------------------------- SciPy, scikit-learn
def _scipy_results(backend_name: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every SciPy / scikit-learn case on one backend, run once in a fresh process.

    The result is kept in a JSON file shared by the pytest-xdist workers (a lock file
    makes the first worker that needs a backend run it and the others wait for it).
    """
    import fcntl
    import os

    base = tmp_path_factory.getbasetemp()
    # under pytest-xdist each worker has its own basetemp inside the run's; share the run's
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = shared / f"third_party_scipy_{backend_name}.json"
    with open(shared / f"third_party_scipy_{backend_name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            proc = subprocess.run(
                [sys.executable, "-m", "tests._third_party_scipy", backend_name],
                capture_output=True, text=True, timeout=900, check=False, cwd=ROOT,
            )
            assert proc.returncode == 0, proc.stderr[-4000:]
            out.write_text(proc.stdout.strip().splitlines()[-1])
    return json.loads(out.read_text())[backend_name]


@pytest.mark.parametrize("backend_name", _selected())
@pytest.mark.parametrize("name", list(SCIPY_CASES))
def test_scipy_and_sklearn_gradient(
    name: str, backend_name: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    pytest.importorskip("scipy")
    reason = SCIPY_XFAIL.get((name, backend_name))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    res = _scipy_results(backend_name, tmp_path_factory)[name]
    if res.startswith("skip:"):
        pytest.skip(res[5:].strip())
    assert res == "ok", f"{name} on {backend_name}: {res}"


def _scipy_transform_cells() -> list[tuple[str, str, str]]:
    cells = []
    for b in _selected():
        for name in TRANSFORM_CASES:
            cells += [(name, t, b) for t in transform_cells(name)]
            if b == "jax":
                cells += [(name, t, b) for t in JAX_TRANSFORMS if t != "jax.hessian" or SCIPY_CASES[name][2] >= 2]
    return cells


@pytest.mark.parametrize(("name", "transform", "backend_name"), _scipy_transform_cells())
def test_scipy_and_sklearn_transforms(
    name: str, transform: str, backend_name: str, tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> None:
    """The SciPy / scikit-learn cases under vmap(grad), jacfwd, hessian, jit and jit(grad), and on
    JAX under JAX's own transforms (the same subprocess run as the gradient checks)."""
    pytest.importorskip("scipy")
    reason = SCIPY_XFAIL_TRANSFORMS.get((name, transform, backend_name))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    results = _scipy_results(backend_name, tmp_path_factory)
    res = results.get(f"{name}|{transform}")
    if res is None:  # (a backend this machine lacks reports its functions skipped, not their transforms)
        res = results.get(name, "")
        if not res.startswith("skip:"):
            pytest.fail(f"{name} under {transform} on {backend_name}: no result from tests._third_party_scipy")
    if res.startswith("skip:"):
        pytest.skip(res[5:].strip())
    assert res == "ok", f"{name} under {transform} on {backend_name}: {res}"


def test_docs_table_lists_every_case_under_every_transform() -> None:
    """docs/third-party.md carries the generated table: a row per case, a column per transform."""
    from ._util import load_script

    script = load_script("scripts/third_party_table.py")
    text = (ROOT / "docs" / "third-party.md").read_text()
    assert script.START in text and script.END in text, "docs/third-party.md lacks the table's markers"
    table = text.split(script.START, 1)[1].split(script.END, 1)[0]
    headers = [line for line in table.splitlines() if line.startswith("| function |")]
    assert len(headers) == 1, "the table is not generated: run scripts/third_party_table.py"
    assert [h.strip() for h in headers[0].strip("|").split("|")][1:-1] == [h for _, h in script.COLUMNS]
    rows = {line.split("|")[1].strip().strip("`") for line in table.splitlines() if line.startswith("| `")}
    assert rows == set(SCIPY_CASES) | {f"xpx.{n}" for n in XPX}


def test_docs_table_labels_the_failure_classes() -> None:
    """The table's script names a failing cell's class from its message (and 'other' when it cannot)."""
    from ._util import load_script

    label = load_script("scripts/third_party_table.py").label
    assert label("sklearn.r2_score", "numpy", "ConcretizationError: bool: this value is batched by vmap") == "data-branch"
    assert label("pad_widths", "torch", "XpgradValueError: __setitem__: an in-place update of a value that does not "
                 "vary along a vmap level, by one that does, ...") == "vmap-write"
    assert label("special.erf", "numpy", "ConcretizationError: jit(f): conversion to a NumPy array (__array__) "
                 "of the traced array") == "scipy-numpy"
    assert label("sklearn.Ridge", "jax", "TypeError: JAX arrays are immutable") == "sklearn-jax"
    assert label("stats.moment", "torch", "ConcretizationError: jit(f): bool() (an if, while, ...") == "data-branch"
    assert label("fft.rfft", "dask", "ValueError: Dask array only supports taking an FFT along ...") == "dask-fft"
    assert label("cov", "numpy", "AssertionError: numbers differ") == "other"
