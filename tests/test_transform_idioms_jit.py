"""Issue 27, classes 2 and 3: under ``xg.jit`` traced values and the traced program accept
what eager code accepts.

Each idiom runs under ``xg.jit(f)`` and ``xg.jit(xg.grad(f))`` on every fixture backend, ten
calls with fresh inputs, each compared with the eager value: a write into a fresh copy (no
view under jit either), a write on an immutable library (a functional update in the
program), dtype queries of a traced value, NumPy scalars and NumPy's (and torch's)
functions on traced values, and the methods and attributes a Tensor has. SciPy's code runs
in a subprocess of its own, because ``SCIPY_ARRAY_API=1`` must be set before SciPy's first
import (as tests/test_third_party.py does).
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
from xpgrad._tracing import Tracer

from ._util import to_numpy

ROOT = Path(__file__).resolve().parents[1]
CALLS = 10  # calls of each jitted function, each with fresh inputs


def _inputs(backend: Any, seed: int, *shape: int) -> Any:
    return backend.asarray(np.random.default_rng(seed).normal(size=shape))


def _same(got: Any, want: Any, what: str) -> None:
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=1e-10, atol=1e-12, err_msg=what)


def _as_tensor_eager(f: Callable[..., Any], *args: Any) -> Any:
    """``f`` eagerly on Tensors of the arrays: the reference of a jitted raw call where the raw
    library itself refuses an idiom that xpgrad's Tensors accept (a write on JAX)."""
    return f(*(xg.asarray(a) for a in args))


def _loop(backend: Any, f: Callable[..., Any], *shapes: tuple[int, ...], raw_reference: bool = True) -> None:
    """``jit(f)`` and ``jit(grad(f))`` (f returns a scalar), CALLS calls with fresh inputs, each equal to eager."""
    jf = xg.jit(f)
    jg = xg.jit(xg.grad(f))
    for k in range(CALLS):
        args = [_inputs(backend, 100 * k + i, *s) for i, s in enumerate(shapes)]
        want = f(*args) if raw_reference else _as_tensor_eager(f, *args)
        _same(jf(*args), want, f"jit({f.__name__}), call {k}")
        _same(jg(*args), xg.grad(f)(*args), f"jit(grad({f.__name__})), call {k}")
    assert jf.cache_info().traces == 1 and jg.cache_info().traces == 1


# ---------------------------------------------------------------------- class 2: writes into fresh copies
def _write_into_asarray_copy(w: Any) -> Any:
    xp = array_api_compat.array_namespace(w)
    y = xp.asarray(w, copy=True)
    y[0] = 0.0
    return xp.sum(y * w)


def _write_into_astype_copy(w: Any) -> Any:
    xp = array_api_compat.array_namespace(w)
    y = xp.astype(w, w.dtype, copy=True)
    y[1:3] = 2.0
    return xp.sum(y * w)


def _write_into_converted(w: Any) -> Any:
    xp = array_api_compat.array_namespace(w)
    y = xp.astype(xp.astype(w, xp.float32), xp.float64)  # (astype that had to convert: a new array)
    y[0] = w[1]
    return xp.sum(y * w)


def _write_twice_then_read(w: Any) -> Any:
    xp = array_api_compat.array_namespace(w)
    y = xp.asarray(w, copy=True)
    y[0] = 5.0
    z = y * 2.0  # (reads the first write only)
    y[1] = w[2]
    return xp.sum(y * z) + xp.sum(w)


@pytest.mark.parametrize("f", [_write_into_asarray_copy, _write_into_astype_copy, _write_into_converted,
                               _write_twice_then_read], ids=lambda f: f.__name__)
def test_write_into_a_fresh_copy(backend: Any, f: Callable[..., Any]) -> None:
    # (JAX's raw arrays refuse writes eagerly; xpgrad's Tensors route them through a functional
    # update, which the program records: the reference is f on Tensors)
    _loop(backend, f, (5,), raw_reference=False)


def test_a_functional_update_on_jax_is_in_the_program(backend: Any) -> None:
    if backend.name != "jax":
        # (the in-place kind of the same program: one update in place, no rebinding)
        prog = xg.jit(_write_into_asarray_copy).trace(_inputs(backend, 0, 5))
        assert "functional update" not in str(prog), str(prog)
        assert "updates" in str(prog) or backend.name == "dask", str(prog)
        return
    prog = xg.jit(_write_twice_then_read).trace(_inputs(backend, 0, 5))
    listing = str(prog)
    assert listing.count("a functional update of") == 2, listing


# ---------------------------------------------------------------------- class 2: dtype queries
def _dtype_queries(w: Any) -> Any:
    xp = array_api_compat.array_namespace(w)
    dt = xp.result_type(w, xp.float32)
    assert dt == xp.result_type(w, 1.0) == xp.result_type(w, w) == w.dtype
    # (can_cast of an array: a dtype where the eager call warns about an array (Dask, JAX), and for a
    # Tensor, whose bound namespace is not this test's subject)
    src = w.dtype if isinstance(w, xg.Tensor) or array_api_compat.is_dask_namespace(xp) \
        or array_api_compat.is_jax_namespace(xp) else w
    assert xp.can_cast(src, xp.float64)
    assert xp.isdtype(w.dtype, "real floating")
    eps = xp.finfo(w).eps
    big = xp.iinfo(xp.astype(w, xp.int32)).max
    return xp.sum(xp.astype(w, dt) * w) * (1.0 + eps) + big * 0.0


def test_dtype_queries_of_a_traced_value(backend: Any) -> None:
    _loop(backend, _dtype_queries, (4,))


# ---------------------------------------------------------------------- class 3: a Tensor's attributes and methods
def _tensor_names() -> list[str]:
    """Every name a Tensor has that a plain object lacks: public ones, properties, protocols."""
    # (__jax_array__: a Tensor's refusal of JAX's functions, jnp.sin(t), with xpgrad's message; it
    # accepts nothing, and a traced value given to a JAX function is refused by JAX itself)
    skip = {"__annotations__", "__module__", "__slots__", "__dict__", "__jax_array__"}
    return sorted(n for n in set(dir(xg.Tensor)) - set(dir(object)) - skip if not n.startswith("_") or n.startswith("__"))


def test_a_traced_value_has_every_name_a_tensor_has() -> None:
    missing = [n for n in _tensor_names() if not hasattr(Tracer, n)]
    assert not missing, f"Tensor has, traced values lack: {missing}"


def test_each_tensor_attribute_of_a_traced_value(backend: Any) -> None:
    seen: dict[str, Any] = {}

    def f(x: Any) -> Any:
        for n in _tensor_names():
            if n in ("T", "mT") or not n.startswith("_"):
                seen[n] = getattr(x, n)  # (attributes and bound methods: none raises)
        assert x.data is x and x.grad is None and x.grad_fn is None and x.is_leaf and not x.requires_grad
        assert x.detach() is x and x.requires_grad_(False) is x and x.retain_grad() is None
        assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6
        # (what array-api-compat asks of an array: SciPy's and scikit-learn's way in)
        assert array_api_compat.is_array_api_obj(x) and array_api_compat.size(x) == 6
        xp = array_api_compat.array_namespace(x)
        assert xp.ones(x.shape, dtype=x.dtype, device=array_api_compat.device(x)).shape == x.shape
        return x.sum() + x.mean() + x.reshape((-1,))[0] + x.reshape(6)[4] + x.T[0, 1] + x.mT[1, 0] \
            + xg.sum(x.sum(axis=0))

    def ref(x: Any) -> Any:
        t = xg.asarray(x)
        return to_numpy(t.sum() + t.mean() + t.reshape((-1,))[0] + t.reshape(6)[4] + t.T[0, 1] + t.mT[1, 0]
                        + xg.sum(t.sum(axis=0)))

    jf = xg.jit(f)
    for k in range(CALLS):
        x = _inputs(backend, k, 2, 3)
        _same(jf(x), ref(x), f"call {k}")
    assert set(seen) >= {"sum", "mean", "reshape", "data", "grad", "detach", "T", "mT", "numpy", "item"}
    # under jit(grad) the same lines run on Tensors
    g = xg.jit(xg.grad(lambda x: x.sum() * x.mean() + xg.sum(x.reshape((-1,)) ** 2) + xg.sum(x.T * 2.0)))
    for k in range(CALLS):
        x = _inputs(backend, k, 2, 3)
        _same(g(x), xg.grad(lambda x: x.sum() * x.mean() + xg.sum(x.reshape((-1,)) ** 2) + xg.sum(x.T * 2.0))(x),
              f"jit(grad), call {k}")


def test_the_arrays_own_methods_are_recorded(backend: Any) -> None:
    x0 = _inputs(backend, 0, 2, 3)
    if not hasattr(x0, "max"):  # (array-api-strict's arrays have no such methods, eagerly either)
        with pytest.raises(AttributeError, match="has no attribute 'max'"):
            xg.jit(lambda x: x.max())(x0)
        return

    def f(x: Any) -> Any:
        y = x.max() + x.flatten()[1] + x.sum(axis=1)[0]
        return y + x.astype(x.dtype)[1, 2] if hasattr(x, "astype") else y  # (torch's tensors have no astype)

    jf = xg.jit(f)
    for k in range(CALLS):
        x = _inputs(backend, k, 2, 3)
        _same(jf(x), f(x), f"call {k}")


def _value_reads() -> list[tuple[str, Callable[[Any], Any]]]:
    return [("item()", lambda x: x.item()), ("tolist()", lambda x: x.tolist()), ("numpy()", lambda x: x.numpy()),
            ("float()", lambda x: float(x[0])), ("bool()", lambda x: bool(x[0] > 0))]


@pytest.mark.parametrize("what", [w for w, _ in _value_reads()])
def test_a_python_value_of_a_traced_value_is_refused_naming_the_line(backend: Any, what: str) -> None:
    read = dict(_value_reads())[what]

    def f(x: Any) -> Any:
        return read(x)

    with pytest.raises(xg.ConcretizationError, match=r"test_transform_idioms_jit\.py:\d+") as ei:
        xg.jit(f)(_inputs(backend, 0, 3))
    assert what.split("(")[0] in str(ei.value), str(ei.value)


# ---------------------------------------------------------------------- constants of the program
def _reads_constants(x: Any) -> Any:
    xp = array_api_compat.array_namespace(x)
    dev = array_api_compat.device(x)
    order = xp.asarray(3.0, dtype=x.dtype, device=dev)
    if xp.any(order != xp.round(order)):  # (SciPy's moment: a constant, the same at every call)
        raise ValueError(order)
    n = int(xp.sum(xp.ones(3, dtype=x.dtype, device=dev)))
    return xp.sum(x) * n + float(order) * xp.sum(x * x)


def _constant_mask(x: Any) -> Any:
    xp = array_api_compat.array_namespace(x)
    mask = xp.asarray([True, False, True], device=array_api_compat.device(x))
    return xp.sum(x[mask] * 2.0)  # (a constant mask: the result's shape is fixed)


def test_constants_of_the_program_may_be_read_as_python_values(backend: Any) -> None:
    _loop(backend, _reads_constants, (3,))
    if backend.name == "jax":  # (its program runs under jax.jit, where every value is traced, as in JAX)
        with pytest.raises(xg.ConcretizationError, match="boolean mask"):
            xg.jit(_constant_mask)(_inputs(backend, 0, 3))
    elif backend.name != "dask":  # (Dask's mask selections have unknown sizes, eagerly too)
        _loop(backend, _constant_mask, (3,))
    _check_written_constants(backend)


def _constant_then_written(x: Any) -> Any:
    xp = array_api_compat.array_namespace(x)
    c = xp.zeros(3, dtype=x.dtype, device=array_api_compat.device(x))
    v = c[1:]  # (a view on NumPy and torch: the write below reaches it)
    c[1] = x[0]
    return x * 2.0 if bool(v[0] == 0.0) else x * 3.0


def _check_written_constants(backend: Any) -> None:
    """A constant written with a traced value varies (its reads are refused), and so does a view of it."""

    def written(x: Any) -> Any:
        xp = array_api_compat.array_namespace(x)
        c = xp.zeros(3, dtype=x.dtype, device=array_api_compat.device(x))
        c[0] = x[0]
        return x if bool(c[0] > 0) else -x

    with pytest.raises(xg.ConcretizationError, match=r"bool\(\).*test_transform_idioms_jit\.py:\d+"):
        xg.jit(written)(_inputs(backend, 0, 3))
    # through a view: refused where the write reaches the view, else the view's value is the constant's
    jf = xg.jit(_constant_then_written)
    x = _inputs(backend, 1, 3)
    try:
        got = jf(x)
    except xg.ConcretizationError as e:
        assert "bool()" in str(e), str(e)
    else:
        _same(got, _as_tensor_eager(_constant_then_written, x), "a view that the write does not reach")


# ---------------------------------------------------------------------- class 2/3: NumPy scalars, NumPy's and torch's functions
def _numpy_scalars(x: Any) -> Any:
    xp = array_api_compat.array_namespace(x)
    return xg.sum(np.float64(2.0) * x + x * np.log(2 * np.pi) - np.float64(0.5) ** 2 * x) + xp.sum(x) * 0.0


def _check_numpy_scalars(backend: Any) -> None:
    """NumPy scalars next to traced arrays are what they are eagerly next to the arrays."""
    x0 = _inputs(backend, 0, 3)
    try:
        _numpy_scalars(x0)
    except (TypeError, RuntimeError) as e:
        # array-api-strict refuses NumPy scalars next to its arrays (or NumPy converts them, only
        # from its CPU device), eagerly and under jit alike
        with pytest.raises(type(e), match=str(e)[:30]):
            xg.jit(_numpy_scalars)(x0)
        return
    jf = xg.jit(_numpy_scalars)
    for k in range(CALLS):
        x = _inputs(backend, k, 3)
        _same(jf(x), _numpy_scalars(x), f"call {k}")


def _numpy_functions(x: Any) -> Any:
    y = np.exp(x) + np.swapaxes(x, 0, 1).T + np.sum(x, axis=0) * np.float64(2.0)
    z = np.array(0.0) + x  # (an ndarray on the left: NumPy's ufunc, recorded)
    return np.sum(np.tanh(y) * z) + np.add.reduce(x, axis=None)


def test_numpy_functions_on_traced_numpy_arrays(np_backend: Any) -> None:
    jf = xg.jit(_numpy_functions)
    for k in range(CALLS):
        x = _inputs(np_backend, k, 2, 3)
        _same(jf(x), _numpy_functions(x), f"call {k}")

    def value(x: Any) -> Any:
        return x * 2.0 if np.allclose(x, 0.0) else x

    with pytest.raises(xg.ConcretizationError, match=r"numpy\.allclose.*test_transform_idioms_jit\.py:\d+"):
        xg.jit(value)(_inputs(np_backend, 0, 3))

    def shaped(x: Any) -> Any:
        return np.nonzero(x > 0)[0]

    with pytest.raises(xg.ConcretizationError, match="depends on the values"):
        xg.jit(shaped)(_inputs(np_backend, 0, 3))


def test_numpy_scalars_and_functions_on_traced_arrays(backend: Any) -> None:
    _check_numpy_scalars(backend)
    x0 = _inputs(backend, 0, 3)
    if isinstance(to_numpy(x0), np.ndarray) and backend.name in ("numpy", "dask"):
        # (NumPy takes these as they are: the call is recorded)
        jf = xg.jit(lambda x: np.exp(x) * 2.0)
        for k in range(CALLS):
            x = _inputs(backend, k, 3)
            _same(jf(x), np.exp(x) * 2.0, f"call {k}")
        return
    # NumPy would convert the array to NumPy: the traced value's values, refused with the line
    with pytest.raises(xg.ConcretizationError, match=r"numpy\.exp.*test_transform_idioms_jit\.py:\d+"):
        xg.jit(lambda x: np.exp(x))(x0)


def test_torch_functions_on_traced_torch_tensors(backend: Any) -> None:
    if backend.name != "torch":
        pytest.skip("torch's functions take torch tensors")
    import torch

    def f(x: Any) -> Any:
        return torch.sum(torch.exp(x) * x) + x.exp().sum() + torch.ones(3, dtype=x.dtype) @ x

    jf = xg.jit(f)
    for k in range(CALLS):
        x = _inputs(backend, k, 3)
        _same(jf(x), f(x), f"call {k}")
    with pytest.raises(xg.ConcretizationError, match=r"torch\..*equal.*test_transform_idioms_jit\.py:\d+"):
        xg.jit(lambda x: x if torch.equal(x, x) else -x)(_inputs(backend, 0, 3))


# ---------------------------------------------------------------------- SciPy, in a process of its own
_SCIPY_SCRIPT = r'''
import json, sys
import numpy as np
import scipy.special as sps
import xpgrad as xg
from tests.conftest import _load
from tests._util import to_numpy

b = _load(sys.argv[1])
import scipy.stats as sst
CASES = {
    "logsumexp": lambda w, x: sps.logsumexp(x * w),
    "logsumexp_b": lambda w, x: sps.logsumexp(x * w, b=x * x),
    "softmax": lambda w, x: xg.sum(sps.softmax(x * w) * x),
    "log_softmax": lambda w, x: xg.sum(sps.log_softmax(x * w) * x),
    # (apply_where: the where-based path, as the program has no boolean indexing)
    "rel_entr": lambda w, x: xg.sum(sps.rel_entr(x * x + 0.5, w * w + 0.5)),
    # (`if xp.any(order != xp.round(order))`: a constant of the program, read by Python)
    "moment": lambda w, x: sst.moment(x * w, 3),
}
# SciPy hands JAX arrays to jax.scipy, which takes no traced array of xg.jit (jit(grad) is fine)
NATIVE_ON_JAX = {"rel_entr"}
out = {}
for name, f in CASES.items():
    try:
        jf, jg = xg.jit(f), xg.jit(xg.grad(f))
        plain = not (b.name == "jax" and name in NATIVE_ON_JAX)
        for k in range(10):
            rng = np.random.default_rng(k)
            w, x = b.asarray(rng.normal(size=5)), b.asarray(rng.normal(size=5))
            checks = [("jit(grad)", jg(w, x), xg.grad(f)(w, x))]
            if plain:
                checks.append(("jit", jf(w, x), f(w, x)))
            for what, got, want in checks:
                if not np.allclose(to_numpy(got), to_numpy(want), rtol=1e-10, atol=1e-12):
                    raise AssertionError(f"{what}, call {k}: {to_numpy(got)} != {to_numpy(want)}")
        if (plain and jf.cache_info().traces != 1) or jg.cache_info().traces != 1:
            raise AssertionError(f"traced again: {jf.cache_info()}, {jg.cache_info()}")
        out[name] = "ok"
    except Exception as e:
        out[name] = f"{type(e).__name__}: {str(e)[:300]}"
print(json.dumps(out))
'''


def test_scipy_under_jit_and_jit_of_grad(backend: Any, request: pytest.FixtureRequest) -> None:
    pytest.importorskip("scipy")
    name = request.node.callspec.params["backend"]
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    # (the subprocess imports the same xpgrad as this process, and the tests package)
    src = str(Path(xg.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src, str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", _SCIPY_SCRIPT, name], capture_output=True, text=True, timeout=600,
                          check=False, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    bad = {k: v for k, v in res.items() if v != "ok"}
    assert not bad, bad


def test_array_api_extra_at_min_and_max_under_jit(backend: Any) -> None:
    """array-api-extra's at().min/max ask meta_namespace, which reads a Dask array's ``_meta``
    (the empty array of its chunks' type): a traced Dask array answers with its array's."""
    xpx = pytest.importorskip("array_api_extra")
    rng = np.random.default_rng(5)

    def f(x: Any) -> Any:
        return xpx.at(x * 1.0)[:4].min(x[5] * 0.5)

    def g(x: Any) -> Any:
        return xpx.at(x, (slice(None), 0)).max(x[:, 1], copy=True)

    jf, jg = xg.jit(f), xg.jit(g)
    for _ in range(3):
        v, m = rng.normal(size=6), rng.normal(size=(3, 2))
        np.testing.assert_array_equal(to_numpy(jf(backend.asarray(v))), to_numpy(f(backend.asarray(v))))
        np.testing.assert_array_equal(to_numpy(jg(backend.asarray(m))), to_numpy(g(backend.asarray(m))))
