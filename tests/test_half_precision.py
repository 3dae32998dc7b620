"""float16 and bfloat16, the extension dtypes, on every backend whose library has them.

torch and JAX have both, NumPy, Dask and CuPy float16 only, array-api-strict neither
(the standard names no half dtype): a test skips only where the library lacks the dtype.
Gradients are compared with float64 central differences (and with torch.autograd where
torch is installed) at half precision's tolerance; reductions and softmaxes must
accumulate in float32, as torch's do; training loops compare step by step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad._dtypes import promote_names
from xpgrad.testing import check_grads

from ._util import to_numpy
from .conftest import Backend

HALF = ["float16", "bfloat16"]
#: the spacing of each dtype at 1 (2**-(mantissa bits))
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}


def _dtype(backend: Backend, name: str) -> Any:
    """The backend's dtype object, or a skip where the library has no such dtype."""
    try:
        return xg.dtype(name, backend.xp)
    except xg.DTypeUnavailableError as e:
        pytest.skip(f"{backend.name} has no {name}: {e}")


def _arr(backend: Backend, a: np.ndarray, name: str) -> Any:
    """``a`` on the backend in dtype ``name`` (made from float32: NumPy has no bfloat16)."""
    dt = _dtype(backend, name)
    return backend.xp.astype(backend.asarray(np.asarray(a, dtype=np.float32)), dt)


def _f64(a: Any) -> np.ndarray:
    """A backend array or Tensor as float64 NumPy (through float32: NumPy cannot read bfloat16)."""
    return to_numpy(xg.astype(a, xg.float32)).astype(np.float64)


def _name(a: Any) -> str:
    return xg.dtype_name(a.data.dtype if isinstance(a, xg.Tensor) else a.dtype)


def _fd_grad(f: Callable[[Any], Any], x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """The float64 central-difference gradient of scalar ``f`` at ``x`` (NumPy)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (float(to_numpy(f(xg.asarray(x + e)))) - float(to_numpy(f(xg.asarray(x - e))))) / (2 * h)
    return g


def _close(got: np.ndarray, ref: np.ndarray, name: str, k: float = 8.0) -> None:
    """``got`` within ``k`` units of half precision of ``ref``: relative to each entry, or to the
    largest entry for those near zero."""
    tol = k * EPS[name] * float(np.max(np.abs(ref)))
    np.testing.assert_allclose(got, ref, rtol=k * EPS[name], atol=tol)


# ---------------------------------------------------------------- dtypes and queries
@pytest.mark.parametrize("name", HALF)
def test_dtype_names_and_queries(backend: Backend, name: str) -> None:
    x = _arr(backend, np.linspace(-1.0, 1.0, 5), name)
    d = getattr(xg, name)
    assert xg.dtype_name(x.dtype) == name and xg.dtype_name(d) == name and xg.dtype(name, xg) is d
    assert str(d) == f"xpgrad.{name}" and d.kind == "real floating"
    t = xg.asarray(x)
    assert t.dtype is d
    for dt in (x.dtype, d, name):
        assert xg.isdtype(dt, "real floating") and xg.isdtype(dt, "numeric") and xg.isdtype(dt, d)
        assert not xg.isdtype(dt, ("complex floating", "integral", "bool"))
        assert not xg.isdtype(dt, xg.float32)
    fi = xg.finfo(x.dtype)  # (under NumPy's policy: the format's limits, whatever library holds it)
    assert (fi.bits, fi.eps, fi.dtype) == (16, EPS[name], d)
    assert xg.finfo(t) == xg.finfo(d) == xg.finfo(name) == fi
    if backend.name in ("torch", "jax"):  # as the library's own finfo says
        lib = backend.xp.finfo(x.dtype)
        assert (fi.max, fi.min, fi.smallest_normal) == (float(lib.max), float(lib.min), float(lib.smallest_normal))
    with backend.policy():
        assert xg.zeros(3, dtype=d).dtype is d
        assert xg.random.normal((3,), dtype=name).dtype is d  # (nn.init draws so)
        assert xg.result_type(d, xg.float32) is xg.float32
    assert xg.complex_dtype(name) == "complex64" and xg.real_dtype(name) == name


def test_promotion_table() -> None:
    assert promote_names("float16", "bfloat16") == "float32"
    assert promote_names("bfloat16", "float16") == "float32"
    for h in HALF:
        assert promote_names(h, h) == h
        assert promote_names(h, "float32") == promote_names("float32", h) == "float32"
        assert promote_names(h, "float64") == "float64"
        assert promote_names(h, "complex64") == "complex64"
        assert promote_names(h, "complex128") == "complex128"
        assert promote_names(h, "int8") is None  # (integer with floating: the library's rule)


@pytest.mark.parametrize(("a", "b", "want"), [
    ("float16", "bfloat16", "float32"), ("float16", "float32", "float32"), ("bfloat16", "float32", "float32"),
    ("float16", "float64", "float64"), ("bfloat16", "float64", "float64"),
])
def test_promotion_follows_the_library(backend: Backend, a: str, b: str, want: str) -> None:
    for n in (a, b, want):
        _dtype(backend, n)
    xs = np.linspace(0.5, 2.0, 4)
    x, y = xg.asarray(_arr(backend, xs, a)), xg.asarray(_arr(backend, xs, b))
    for r in (x + y, y * x, xg.maximum(x, y), xg.where(x > 1, x, y)):
        assert _name(r) == want
    assert xg.result_type(x, y) is getattr(xg, want)
    # what the library itself gives, where it has a rule for the pair
    native = backend.xp.result_type(x.data.dtype, y.data.dtype)
    assert xg.dtype_name(native) == want
    # the gradients come back in each argument's own dtype
    ga, gb = xg.grad(lambda u, v: xg.sum(u * v * v), argnums=(0, 1))(x.data, y.data)
    assert (_name(ga), _name(gb)) == (a, b)
    _close(_f64(ga), xs * xs, a)
    _close(_f64(gb), 2 * xs * xs, a)  # (a: a half dtype, the coarser)


# ---------------------------------------------------------------- gradients
def _torch_cases() -> dict[str, Callable[[Any], Any]]:
    import torch

    return {
        "poly": lambda x: (torch.sin(x) * x * x).sum(),
        "mean_var": lambda x: 2.0 * x.mean() + x.var(correction=1),
        "std": lambda x: x.std(dim=1, correction=0).sum(),
        "norm": lambda x: torch.linalg.vector_norm(x),
        "logsumexp": lambda x: torch.logsumexp(x, 1).sum(),
        "softmax": lambda x: (torch.softmax(x, 1) ** 2).sum(),
        "log_softmax": lambda x: torch.log_softmax(x, 1)[:, 0].sum(),
        "special_softmax": lambda x: (torch.softmax(x, 0) * torch.cos(x)).sum(),
        "cumsum": lambda x: (torch.cumsum(x, 1) ** 2).sum(),
        "matmul": lambda x: torch.tanh(x @ x.T).sum(),
        "cross_entropy": lambda x: torch.nn.functional.cross_entropy(x, torch.tensor([0, 5, 2, 3])),
    }


CASES: dict[str, Callable[[Any], Any]] = {
    "poly": lambda x: xg.sum(xg.sin(x) * x * x),
    "mean_var": lambda x: 2.0 * xg.mean(x) + xg.var(x, correction=1),
    "std": lambda x: xg.sum(xg.std(x, axis=1)),
    "norm": lambda x: xg.linalg.vector_norm(x),
    "logsumexp": lambda x: xg.sum(xg.special.logsumexp(x, axis=1)),
    "softmax": lambda x: xg.sum(xg.nn.functional.softmax(x, axis=1) ** 2),
    "log_softmax": lambda x: xg.sum(xg.nn.functional.log_softmax(x, axis=1)[:, 0]),
    "special_softmax": lambda x: xg.sum(xg.special.softmax(x, axis=0) * xg.cos(x)),
    "cumsum": lambda x: xg.sum(xg.cumulative_sum(x, axis=1) ** 2),
    "matmul": lambda x: xg.sum(xg.tanh(x @ xg.matrix_transpose(x))),
    "cross_entropy": lambda x: xg.nn.functional.cross_entropy(
        x, xg.asarray(xg.array_namespace(x).asarray([0, 5, 2, 3]))),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", HALF)
def test_grad_matches_float64_differences(backend: Backend, name: str, case: str) -> None:
    x64 = np.random.default_rng(7).uniform(-1.0, 1.0, (4, 6))
    x = _arr(backend, x64, name)
    xr = _f64(x)  # the half-rounded point, at which both are taken
    f = CASES[case]
    g = xg.grad(f)(x)
    assert _name(g) == name and type(g) is type(x) and tuple(g.shape) == x64.shape
    ref = _fd_grad(f, xr)
    _close(_f64(g), ref, name)
    if backend.name == "torch":  # and as torch.autograd gives it, on the same half input
        tx = x.detach().clone().requires_grad_(True)
        _torch_cases()[case](tx).backward()
        assert tx.grad is not None and tx.grad.dtype == x.dtype
        _close(_f64(g), _f64(tx.grad), name)


@pytest.mark.parametrize("name", HALF)
def test_check_grads_takes_half_inputs(backend: Backend, name: str) -> None:
    # check_grads promotes half inputs to float64, as it does float32 ones: the rules' math
    x = _arr(backend, np.linspace(-1.0, 1.0, 6).reshape(2, 3), name)
    check_grads(lambda v: xg.special.logsumexp(v * v, axis=1), x, modes=("rev", "fwd"))


@pytest.mark.parametrize("name", HALF)
def test_transforms_keep_the_dtype(backend: Backend, name: str) -> None:
    rng = np.random.default_rng(3)
    x64 = rng.uniform(-1.0, 1.0, (4, 6))
    v64 = rng.uniform(-1.0, 1.0, (4, 6))
    x, v = _arr(backend, x64, name), _arr(backend, v64, name)
    xr, vr = _f64(x), _f64(v)

    def f(u: Any) -> Any:
        return xg.sum(xg.sin(u) * u) + xg.special.logsumexp(u) + xg.std(u)

    ref = _fd_grad(f, xr)
    out, pull = xg.vjp(f, x)
    assert _name(out) == name
    (gv,) = pull(backend.xp.ones_like(out))
    assert _name(gv) == name
    _close(_f64(gv), ref, name)
    out2, tan = xg.jvp(f, (x,), (v,))
    assert _name(out2) == name and _name(tan) == name
    _close(_f64(tan), np.sum(ref * vr), name, k=16.0)
    # vmap: each row's gradient
    rows = xg.vmap(xg.grad(f))(x)
    assert _name(rows) == name
    _close(_f64(rows), np.stack([_fd_grad(f, r) for r in xr]), name)
    # jit, called in a loop on new values: the eager gradient each time, in the input's dtype
    jg = xg.jit(xg.grad(f))
    for k in range(3):
        xk = _arr(backend, x64 * (1.0 + 0.25 * k), name)
        got, want = jg(xk), xg.grad(f)(xk)
        assert _name(got) == name
        _close(_f64(got), _f64(want), name, k=2.0)


# ---------------------------------------------------------------- float32 accumulation
_REDUCTIONS: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray]]] = {
    "sum": (lambda t: xg.sum(t, axis=0), lambda a: a.sum(0)),
    "mean": (lambda t: xg.mean(t, axis=0), lambda a: a.mean(0)),
    "var": (lambda t: xg.var(t, axis=0), lambda a: a.var(0)),
    "std": (lambda t: xg.std(t, axis=0, correction=1), lambda a: a.std(0, ddof=1)),
    "vector_norm": (lambda t: xg.linalg.vector_norm(t, axis=0), lambda a: np.sqrt((a * a).sum(0))),
    "matrix_norm": (lambda t: xg.linalg.matrix_norm(xg.matrix_transpose(t)[:, :, None]),
                    lambda a: np.sqrt((a * a).sum(0))),
    "cumulative_sum": (lambda t: xg.cumulative_sum(t, axis=0)[-1], lambda a: a.sum(0)),
    "logsumexp": (lambda t: xg.special.logsumexp(t, axis=0), lambda a: np.log(np.exp(a).sum(0))),
    "special.softmax": (lambda t: xg.special.softmax(t, axis=0)[:4], lambda a: (np.exp(a) / np.exp(a).sum(0))[:4]),
    "softmax": (lambda t: xg.nn.functional.softmax(t, axis=0)[:4],
                lambda a: (np.exp(a) / np.exp(a).sum(0))[:4]),
    "log_softmax": (lambda t: xg.nn.functional.log_softmax(t, axis=0)[:4],
                    lambda a: (a - np.log(np.exp(a).sum(0)))[:4]),
    "cross_entropy": (lambda t: xg.nn.functional.cross_entropy(xg.matrix_transpose(t), _targets(t), reduction="none"),
                      lambda a: np.log(np.exp(a).sum(0)) - a[[3, 7], [0, 1]]),
}


def _targets(t: Any) -> Any:
    return xg.asarray(xg.array_namespace(t).asarray([3, 7]))


@pytest.mark.parametrize("func", list(_REDUCTIONS))
@pytest.mark.parametrize("name", HALF)
def test_reductions_accumulate_in_float32(backend: Backend, name: str, func: str) -> None:
    # 8192 values along the first (strided) axis: added one by one in float16, a sum
    # stops growing near 2048 (NumPy reduces so along any axis but the contiguous one);
    # accumulated in float32 and rounded once, the result is within an ulp or so
    x64 = np.random.default_rng(1).uniform(0.0, 1.0, (8192, 2))
    x = _arr(backend, x64, name)
    fn, ref_fn = _REDUCTIONS[func]
    r = fn(xg.asarray(x))
    assert _name(r) == name
    # (rounding the float32 result costs half an ulp, EPS / 2 relative at most)
    np.testing.assert_allclose(_f64(r), ref_fn(_f64(x)), rtol=EPS[name], atol=0)


@pytest.mark.parametrize("name", HALF)
def test_reduction_rules_accumulate_in_float32(backend: Backend, name: str) -> None:
    # the rules that reduce (var's mean, logsumexp's and softmax's sums) run in float32 too
    x64 = np.random.default_rng(2).uniform(0.0, 1.0, (4096, 2))
    x = _arr(backend, x64, name)
    a = _f64(x)
    n = a.shape[0]
    g = xg.grad(lambda u: xg.sum(xg.var(u, axis=0)))(x)
    assert _name(g) == name
    _close(_f64(g), 2.0 / n * (a - a.mean(0)), name, k=1.0)
    g = xg.grad(lambda u: xg.sum(xg.special.logsumexp(u, axis=0)))(x)
    # (exp(x - lse): the rule reads the rounded output, up to half an ulp of ~9 off, as torch's)
    _close(_f64(g), np.exp(a) / np.exp(a).sum(0), name, k=8.0)
    w = np.cos(np.arange(n, dtype=np.float64))[:, None] * np.ones((1, 2))
    wt = _arr(backend, w, name)
    wr = _f64(wt)
    g = xg.grad(lambda u: xg.sum(xg.nn.functional.softmax(u, axis=0) * wt))(x)
    p = np.exp(a) / np.exp(a).sum(0)
    _close(_f64(g), p * (wr - (p * wr).sum(0)), name, k=2.0)
    _, t = xg.jvp(lambda u: xg.var(u, axis=0), (x,), (x,))
    _close(_f64(t), 2.0 * a.var(0), name, k=1.0)


def test_explicit_dtype_is_the_callers() -> None:
    # sum(x, dtype=float32) of float16 is float32 (no rounding to float16 in between)
    x = np.full(4096, 1.0 + 2.0**-10, dtype=np.float16)
    r = xg.sum(xg.asarray(x), dtype=xg.float32)
    assert r.dtype == xg.float32 and float(r.data) == pytest.approx(4096 * (1 + 2.0**-10), rel=1e-7)
    assert xg.sum(xg.asarray(x)).dtype == xg.float16


# ---------------------------------------------------------------- layers
@pytest.mark.parametrize("name", HALF)
def test_layer_dtype_checks(backend: Backend, name: str) -> None:
    d = getattr(xg, name)
    x64 = np.random.default_rng(4).uniform(-1.0, 1.0, (5, 3))
    x = _arr(backend, x64, name)
    with backend.policy(seed=0):
        lin = xg.nn.Linear(3, 2, dtype=name)
        ln = xg.nn.LayerNorm(3, dtype=d)
        bn = xg.nn.BatchNorm1d(3, dtype=name)
    assert all(p.dtype is d for p in [*lin.parameters(), *ln.parameters(), *bn.parameters()])
    for layer in (lin, ln, bn):
        out = layer(x)
        assert out.dtype is d
        xg.sum(out * out).backward()
        assert all(p.grad is not None and p.grad.dtype is d for p in layer.parameters())
    ref = _f64(x) @ _f64(lin.weight).T + _f64(lin.bias)
    _close(_f64(lin(x)), ref, name)
    x32 = backend.asarray(np.asarray(x64, dtype=np.float32))
    with pytest.raises(xg.XpgradTypeError, match=rf"Linear\(in_features=3, out_features=2, bias=True\): input dtype "
                       rf"float32 does not match the layer's {name} parameters"):
        lin(x32)
    with pytest.raises(xg.XpgradTypeError, match=rf"linear: input dtype float32 does not match the weight's {name}"):
        xg.nn.functional.linear(x32, lin.weight)
    other = "bfloat16" if name == "float16" else "float16"
    try:
        xo = _arr(backend, x64, other)
    except pytest.skip.Exception:
        return  # (the library has one half dtype only)
    for layer in (lin, ln):
        with pytest.raises(xg.XpgradTypeError, match=rf"input dtype {other} does not match the layer's {name}"):
            layer(xo)


def test_missing_dtype_errors_name_the_users_function() -> None:
    import array_api_strict

    calls: dict[str, Callable[[str], Any]] = {
        "asarray": lambda d: xg.asarray([1.0], dtype=d),
        "zeros": lambda d: xg.zeros(2, dtype=d),
        "astype": lambda d: xg.astype(xg.ones(2), d),
        "sum": lambda d: xg.sum(xg.ones(2), dtype=d),
        "default_device": lambda d: xg.default_device(dtype=d),
        "Linear": lambda d: xg.nn.Linear(2, 2, dtype=d),
        "LayerNorm": lambda d: xg.nn.LayerNorm(2, dtype=d),
        "BatchNorm1d": lambda d: xg.nn.BatchNorm1d(2, dtype=d),
        "to": lambda d: xg.nn.Linear(2, 2).to(dtype=d),
        "random.normal": lambda d: xg.random.normal((2,), dtype=d),
    }
    for lib, names in [(np, ["bfloat16"]), (array_api_strict, ["float16", "bfloat16"])]:
        for name in names:
            for func, call in calls.items():
                for d in (name, getattr(xg, name)):
                    with xg.default_device(lib), pytest.raises(xg.DTypeUnavailableError) as ei:
                        call(d)
                    msg = str(ei.value)
                    assert msg.startswith(f"{func}: "), msg
                    assert f"has no dtype {name!r}" in msg and "dtype_name" not in msg, msg


# ---------------------------------------------------------------- training loops
def _mlp(d: Any) -> Any:
    return xg.nn.Sequential(xg.nn.Linear(8, 16, dtype=d), xg.nn.Tanh(), xg.nn.Linear(16, 3, dtype=d))


@pytest.mark.parametrize("name", HALF)
def test_mlp_trains_in_half_as_in_float32(backend: Backend, name: str) -> None:
    # the same MLP, from the same float32 weights, trained 30 SGD steps in float32 and in
    # the half dtype: the half losses follow the float32 ones within half precision
    hd = _dtype(backend, name)
    rng = np.random.default_rng(0)
    xn, yn = rng.normal(size=(64, 8)), rng.integers(0, 3, 64)
    with backend.policy(seed=0):
        m32 = _mlp("float32")
    with backend.policy(seed=0):
        mh = _mlp("float32")
    backend.to(mh, dtype=name)
    for p, q in zip(m32.parameters(), mh.parameters()):
        np.testing.assert_array_equal(_f64(q), _f64(xg.astype(p, name)))
    assert all(p.dtype is getattr(xg, name) for p in mh.parameters())
    y = backend.asarray(yn)
    losses: dict[str, list[float]] = {"float32": [], name: []}
    for d, model in (("float32", m32), (name, mh)):
        opt = xg.optim.SGD(model.parameters(), lr=0.2, momentum=0.5)
        x = _arr(backend, xn, d) if d == name else backend.asarray(xn.astype(np.float32))
        for _ in range(30):
            loss = xg.nn.functional.cross_entropy(model(x), y)
            assert _name(loss) == d
            opt.zero_grad()
            loss.backward()
            opt.step()
            assert all(p.dtype is getattr(xg, d) and p.grad.dtype is getattr(xg, d) for p in model.parameters())
            losses[d].append(float(_f64(loss)))
    assert xg.dtype_name(hd) == name
    lh, l32 = np.array(losses[name]), np.array(losses["float32"])
    assert lh[-1] < 0.9 * lh[0]
    np.testing.assert_allclose(lh, l32, atol=4 * EPS[name], rtol=0)


@pytest.mark.parametrize(("name", "opt", "kw"), [
    ("bfloat16", "SGD", {"lr": 0.1}),
    ("bfloat16", "SGD", {"lr": 0.1, "momentum": 0.9}),
    ("bfloat16", "Adam", {"lr": 1e-2}),
    ("float16", "SGD", {"lr": 0.1, "momentum": 0.9}),
])
def test_half_mlp_trains_as_torch(name: str, opt: str, kw: dict[str, float]) -> None:
    # torch.autograd and xpgrad from the same half weights and data, step by step: the
    # losses agree within half precision (xpgrad's cross entropy rounds once, from float32;
    # torch's rounds its log-softmax first, so they may differ by an ulp)
    torch = pytest.importorskip("torch")
    dt = getattr(torch, name)
    torch.manual_seed(0)
    x = torch.randn(64, 8, dtype=dt)
    y = torch.randint(0, 3, (64,))
    tm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(dt)
    # (built as a torch user builds one: on the default library, then moved, `model.to(...)`)
    xm = xg.nn.Sequential(xg.nn.Linear(8, 16), xg.nn.ReLU(), xg.nn.Linear(16, 3)).to(xp="torch", dtype=dt)
    for p, q in zip(tm.parameters(), xm.parameters()):
        q.data = p.detach().clone()
    topt = getattr(torch.optim, opt)(tm.parameters(), **kw)
    xopt = getattr(xg.optim, opt)(xm.parameters(), **kw)
    tl: list[float] = []
    xl: list[float] = []
    for _ in range(40):
        lt = torch.nn.functional.cross_entropy(tm(x), y)
        topt.zero_grad()
        lt.backward()
        topt.step()
        lx = xg.nn.functional.cross_entropy(xm(x), y)
        assert lx.data.dtype == dt
        xopt.zero_grad()
        lx.backward()
        xopt.step()
        assert all(p.data.dtype == dt and p.grad.data.dtype == dt for p in xm.parameters())
        tl.append(lt.item())
        xl.append(float(lx.data.float()))
    assert tl[-1] < 0.95 * tl[0]
    np.testing.assert_allclose(xl, tl, rtol=2 * EPS[name], atol=2 * EPS[name])


def test_bfloat16_linear_matches_torch() -> None:
    # one bfloat16 Linear and an MSE loss: the forward, the gradients and 30 SGD steps
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    x = torch.randn(32, 5, dtype=torch.bfloat16)
    y = torch.randn(32, 2, dtype=torch.bfloat16)
    tl = torch.nn.Linear(5, 2).to(torch.bfloat16)
    xl = xg.nn.Linear(5, 2).to(xp="torch", dtype=xg.bfloat16)
    xl.weight.data, xl.bias.data = tl.weight.detach().clone(), tl.bias.detach().clone()
    topt, xopt = torch.optim.SGD(tl.parameters(), lr=0.05), xg.optim.SGD(xl.parameters(), lr=0.05)
    for step in range(30):
        lt = torch.nn.functional.mse_loss(tl(x), y)
        topt.zero_grad()
        lt.backward()
        lx = xg.nn.functional.mse_loss(xl(x), y)
        xopt.zero_grad()
        lx.backward()
        assert lx.data.dtype == torch.bfloat16
        np.testing.assert_allclose(float(lx.data.float()), lt.item(), rtol=2 * EPS["bfloat16"])
        if step == 0:  # same weights: same gradients, to bfloat16's precision
            for p, q in ((tl.weight, xl.weight), (tl.bias, xl.bias)):
                assert q.grad.data.dtype == torch.bfloat16
                _close(_f64(q.grad.data), _f64(p.grad), "bfloat16", k=2.0)
        topt.step()
        xopt.step()


@pytest.mark.parametrize("name", HALF)
def test_policy_dtype_and_moves(backend: Backend, name: str) -> None:
    # a policy dtype of float16/bfloat16 makes new floating arrays, draws and layers so;
    # moving a half model or array (to_device, Module.to) keeps it
    d = getattr(xg, name)
    _dtype(backend, name)
    with backend.policy(dtype=name, seed=0):
        assert xg.zeros(2).dtype is d and xg.asarray([1.0, 2.0]).dtype is d
        assert xg.random.normal((3,)).dtype is d
        info = xg.__array_namespace_info__().default_dtypes()
        assert info["real floating"] is d and info["complex floating"] is xg.complex64
        model = xg.nn.Linear(3, 2)
    assert model.weight.dtype is d and model.bias.dtype is d
    backend.to(model)
    assert model.weight.dtype is d
    t = xg.asarray(_arr(backend, np.ones(3), name))
    assert t.to_device(t.device).dtype is d
    xg.sum(model(_arr(backend, np.ones((4, 3)), name))).backward()
    assert model.weight.grad is not None and model.weight.grad.dtype is d


def test_torch_bfloat16_on_the_host(tmp_path: Any) -> None:
    # NumPy has no bfloat16: repr, item, tolist and float read torch's through float32
    # (exact); a move to another library comes back to bfloat16; save refuses, naming it,
    # rather than write float32
    torch = pytest.importorskip("torch")
    t = xg.asarray(torch.tensor([0.0, 0.5, 1.0], dtype=torch.bfloat16), requires_grad=True)
    assert "dtype=bfloat16" in repr(t) and t.tolist() == [0.0, 0.5, 1.0]
    s = xg.sum(t * t)
    assert float(s) == 1.25 and s.item() == 1.25
    assert "dtype=bfloat16" in repr(s)
    m = xg.nn.Linear(2, 2).to(xp="torch", dtype=xg.bfloat16)
    w = m.weight.data.clone()
    for xp in ("numpy", "torch"):  # (NumPy has no bfloat16: refused there, naming the call)
        if xp == "numpy":
            with pytest.raises(xg.DTypeUnavailableError, match=r"^to: .*has no dtype 'bfloat16'"):
                m.to(xp=xp)
        else:
            m.to(xp=xp)
            assert m.weight.dtype is xg.bfloat16 and torch.equal(m.weight.data, w)
    with pytest.raises(xg.XpgradTypeError, match=r"save: the array at 'weight' is bfloat16.*cast it first"):
        xg.save(m.state_dict(), tmp_path / "m.safetensors")
    assert not (tmp_path / "m.safetensors").exists()
    m.to(dtype=xg.float32)
    xg.save(m.state_dict(), tmp_path / "m.safetensors")
    assert xg.load(tmp_path / "m.safetensors")["weight"].dtype is xg.float32
