"""``xpgrad.special``: values against SciPy on every backend (native and pure array-API
paths), JVP rules against central differences, gradients against torch.special, and
SciPy's array-API dispatch (``scipy.special.<name>(tensor)``) made differentiable.

The OpCases (tests/cases/special.py) check the VJP rules to second order on every
backend through tests/test_rules.py.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import warnings
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import special as xsp

sc = pytest.importorskip("scipy.special")

RNG = np.random.default_rng(1234)
_SPECIAL = np.array([0.0, -0.0, 0.5, -0.5, 1.0, 2.0, -1.5, 10.0, -10.0, 26.0, -26.0, math.inf, -math.inf, math.nan])
# a wide spread of values: around 0, the working range, the tails, huge magnitudes
GRID = np.concatenate([
    RNG.uniform(-0.6, 0.6, 300), RNG.uniform(-10, 10, 600), RNG.uniform(-40, 40, 300),
    10 ** RNG.uniform(-12, 300, 200), -(10 ** RNG.uniform(-12, 2, 200)), _SPECIAL,
])
UNIT = np.concatenate([RNG.uniform(0, 1, 500), [0.0, 1.0, 0.5, -0.5, 2.0, 1e-300, 1 - 1e-16, math.nan]])
PAIRS_X = np.concatenate([RNG.uniform(-2, 2, 400), [0.0, 0.0, 0.0, 1.0, -1.0, math.nan, 0.0, 2.0, 1.0, 1.0, 0.0]])
PAIRS_Y = np.concatenate([RNG.uniform(-2, 2, 400), [0.0, -1.0, math.nan, 0.0, 0.0, 1.0, math.inf, -1.0, math.inf, -math.inf, -math.inf]])

# name -> (pure forward, SciPy reference, inputs); the pure forwards are what
# array-api-strict and Dask run, tested here on NumPy arrays against SciPy
UNARY = {
    "erf": (xsp._erf_pure, sc.erf, GRID),
    "erfc": (xsp._erfc_pure, sc.erfc, GRID),
    "ndtr": (xsp._ndtr_pure, sc.ndtr, GRID),
    "log_ndtr": (xsp._log_ndtr_pure, sc.log_ndtr, GRID),
    "expit": (xsp._expit_pure, sc.expit, GRID),
    "logit": (xsp._logit_pure, sc.logit, UNIT),
    "gammaln": (xsp._gammaln_pure, sc.gammaln, GRID[np.isfinite(GRID)]),  # SciPy: gammaln(-inf) = -inf
    "digamma": (xsp._psi_pure, sc.psi, GRID),
    "entr": (xsp._entr_pure, sc.entr, GRID),
}
BINARY = {
    "xlogy": (xsp._xlogy_pure, sc.xlogy),
    "xlog1py": (xsp._xlog1py_pure, sc.xlog1py),
    "rel_entr": (xsp._rel_entr_pure, sc.rel_entr),
}


def assert_close(got: Any, want: Any, rtol: float = 1e-12, atol: float = 1e-300, what: str = "") -> None:
    """Equal NaN/inf pattern, then relative error (absolute near 0 for functions with zeros)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, what
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN pattern")
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"{what}: infinities")
    fin = np.isfinite(want)
    # relative error, measured against max(|want|, 1) for functions with zeros (gammaln, digamma)
    np.testing.assert_allclose(got[fin], want[fin], rtol=rtol, atol=atol, err_msg=what)


def _np_ns() -> Any:
    import array_api_compat.numpy as xp

    return xp


def _strict(a: np.ndarray) -> Any:
    return pytest.importorskip("array_api_strict").asarray(a)


# ---------------------------------------------------------------------- pure forwards
@pytest.mark.parametrize("name", sorted(UNARY))
def test_pure_forward_matches_scipy(name: str) -> None:
    pure, ref, x = UNARY[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow / divide-by-zero warnings from the pure path
        got = pure(_np_ns(), x)
    with np.errstate(all="ignore"):
        want = ref(x)
    # digamma: absolute error near its zero (x ~ 1.46) and close to the poles, where it
    # is the difference of two O(1/eps) terms
    atol = {"digamma": 1e-12, "gammaln": 1e-13, "log_ndtr": 1e-300}.get(name, 1e-300)
    # ndtr, log_ndtr: the rounding of x / sqrt(2), squared in exp(-x**2 / 2), costs ~3e-13 at x ~ -37
    rtol = {"digamma": 1e-11, "ndtr": 1e-12, "log_ndtr": 1e-12}.get(name, 2e-13)
    fin = np.isfinite(want)
    scale = np.maximum(np.abs(want[fin]), 1.0) if name in ("gammaln", "digamma") else np.abs(want[fin])
    # values in the subnormal range keep fewer digits
    normal = scale > 1e-290
    assert_close(got[~fin], want[~fin], what=f"{name}: non-finite")
    err = np.abs(got[fin] - want[fin])[normal] / scale[normal]
    assert err.max(initial=0.0) <= max(rtol, atol), f"{name}: max relative error {err.max()}"


@pytest.mark.parametrize("n", [1, 2, 3])
def test_pure_polygamma_matches_scipy(n: int) -> None:
    x = GRID[np.isfinite(GRID) & (np.abs(GRID) < 1e6)]
    x = x[np.abs(x - np.round(x)) > 1e-3]  # SciPy's sign at the poles is a convention
    got = xsp._psi_pure(_np_ns(), x, n)
    want = sc.polygamma(n, x)
    # absolute near the zeros of polygamma(2, x) for x < 0 (a difference of two large terms)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_pure_binary_matches_scipy(name: str) -> None:
    pure, ref = BINARY[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = pure(_np_ns(), PAIRS_X, PAIRS_Y)
    with np.errstate(all="ignore"):
        want = ref(PAIRS_X, PAIRS_Y)
    assert_close(got, want, rtol=1e-14, what=name)


def test_pure_float32_keeps_float32() -> None:
    x = np.linspace(0.1, 3.0, 7, dtype=np.float32)
    for name, (pure, _, _) in UNARY.items():
        assert pure(_np_ns(), x).dtype == np.float32, name
    assert xsp._psi_pure(_np_ns(), x, 2).dtype == np.float32


# ---------------------------------------------------------------------- every backend
def _call(name: str, *args: Any) -> Any:
    if name == "polygamma":
        return xsp.polygamma(1, *args)
    return getattr(xsp, name)(*args)


def _ref(name: str, *args: Any) -> Any:
    if name == "polygamma":
        return sc.polygamma(1, *args)
    return getattr(sc, name)(*args)


@pytest.mark.parametrize("name", [*sorted(UNARY), "polygamma", *sorted(BINARY)])
def test_public_function_on_each_backend(name: str, backend: Any) -> None:
    """Native where the backend has the function, pure otherwise: the same values."""
    x = np.concatenate([RNG.uniform(-4, 4, 40), [0.3, 2.5, 7.0]])
    if name == "logit":
        x = RNG.uniform(0.01, 0.99, 40)
    if name in ("gammaln", "digamma", "polygamma"):
        x = x[np.abs(x - np.round(x)) > 1e-2]
    args = [x] if name not in BINARY else [x, np.abs(x[::-1]) + 0.1]
    got = _call(name, *[backend.asarray(a) for a in args])
    assert isinstance(got, xg.Tensor)
    rtol = 1e-9 if backend.name == "torch" and name in ("polygamma",) else 1e-12
    np.testing.assert_allclose(backend.to_numpy(got), _ref(name, *args), rtol=rtol, atol=1e-13, err_msg=name)


@pytest.mark.parametrize("name", ["logsumexp", "softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
def test_reductions_match_scipy(name: str, axis: Any, backend: Any) -> None:
    x = RNG.normal(size=(3, 4)) * 5
    x[0, 0] = 800.0  # no overflow
    got = getattr(xsp, name)(backend.asarray(x), axis=axis)
    want = getattr(sc, name)(x, axis=axis)
    np.testing.assert_allclose(backend.to_numpy(got), want, rtol=1e-12, atol=1e-12)


def test_logsumexp_keepdims_and_infinities() -> None:
    x = np.array([[-math.inf, -math.inf], [0.0, math.inf], [1.0, 2.0]])
    got = xsp.logsumexp(xg.asarray(x), axis=1, keepdims=True)
    assert got.shape == (3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(got.data[:, 0], [-math.inf, math.inf, np.logaddexp(1.0, 2.0)])


def test_binary_accepts_python_scalars() -> None:
    x = xg.asarray([0.0, 2.0])
    np.testing.assert_allclose(xsp.xlogy(x, 3.0).data, sc.xlogy([0.0, 2.0], 3.0))
    np.testing.assert_allclose(xsp.xlogy(2.0, x).data, sc.xlogy(2.0, [0.0, 2.0]))


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("side", [0, 1])
def test_binary_python_scalar_is_an_array_like_the_other(name: str, side: int, backend: Any) -> None:
    """A Python scalar on either side of a binary function is made an array of the other
    argument's floating dtype and device (float32 stays float32), on the native and the
    pure forwards; gradients (first and second order, reverse and forward) and vmap with
    respect to the array argument see it as that array."""
    fn = getattr(xsp, name)
    s = 0.75
    a = np.array([0.0, 0.3, 1.5, 2.0])
    call = (lambda v: fn(s, v)) if side == 0 else (lambda v: fn(v, s))
    ref = (lambda v: getattr(sc, name)(s, v)) if side == 0 else (lambda v: getattr(sc, name)(v, s))
    for dt in (np.float64, np.float32):
        out = call(backend.asarray(a.astype(dt)))
        assert isinstance(out, xg.Tensor)
        assert backend.to_numpy(out).dtype == dt, (name, side, dt)
        np.testing.assert_allclose(backend.to_numpy(out), ref(a.astype(dt)), rtol=1e-6 if dt is np.float32 else 1e-12)
    x = backend.asarray(np.array([0.4, 1.3, 2.2]))
    other = backend.asarray(np.full(3, s))
    full = (lambda v: fn(other, v)) if side == 0 else (lambda v: fn(v, other))
    for order in (1, 2):
        g = lambda f: (lambda v: xg.sum(f(v)))
        want = xg.grad(g(full))(x) if order == 1 else xg.grad(lambda v: xg.sum(xg.grad(g(full))(v)))(x)
        got = xg.grad(g(call))(x) if order == 1 else xg.grad(lambda v: xg.sum(xg.grad(g(call))(v)))(x)
        np.testing.assert_allclose(backend.to_numpy(got), backend.to_numpy(want), rtol=1e-12, err_msg=f"order {order}")
    t = backend.asarray(np.array([1.0, -0.5, 2.0]))
    _, jt = xg.jvp(call, (x,), (t,))
    _, jw = xg.jvp(full, (x,), (t,))
    np.testing.assert_allclose(backend.to_numpy(jt), backend.to_numpy(jw), rtol=1e-12)
    xs = backend.asarray(np.array([[0.4, 1.3], [2.2, 0.9]]))
    np.testing.assert_allclose(backend.to_numpy(xg.vmap(call)(xs)), ref(np.array([[0.4, 1.3], [2.2, 0.9]])), rtol=1e-12)


def test_nn_functional_erf_is_special_erf() -> None:
    assert xg.nn.functional.erf is xsp.erf


def test_import_does_not_import_scipy_or_backends() -> None:
    code = ("import sys, xpgrad, xpgrad.special; "
            "print([m for m in ('scipy', 'torch', 'jax', 'cupy') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


# ---------------------------------------------------------------------- gradients
_GRAD_DOMAIN = {
    "erf": (-3, 3), "erfc": (-3, 3), "ndtr": (-3, 3), "log_ndtr": (-8, 3), "expit": (-5, 5), "logit": (0.05, 0.95),
    "gammaln": (0.2, 6), "digamma": (0.3, 6), "entr": (0.1, 3),
}


@pytest.mark.parametrize("name", sorted(_GRAD_DOMAIN))
def test_gradient_matches_torch_special(name: str) -> None:
    torch = pytest.importorskip("torch")
    x = RNG.uniform(*_GRAD_DOMAIN[name], size=20)
    ours = xg.grad(lambda a: xg.sum(getattr(xsp, name)(a)))(x)
    t = torch.asarray(x.copy(), requires_grad=True)
    getattr(torch.special, name)(t).sum().backward()
    # digamma's derivative: torch's trigamma is accurate to ~5e-10 only
    np.testing.assert_allclose(ours, t.grad.numpy(), rtol=1e-9 if name == "digamma" else 1e-10, atol=1e-12)


def test_log_ndtr_gradient_far_in_the_tail() -> None:
    x = np.array([-40.0, -20.0, -5.0])
    g = xg.grad(lambda a: xg.sum(xsp.log_ndtr(a)))(x)
    # d/dx log Phi(x) ~ -x for x -> -inf (Mills ratio)
    np.testing.assert_allclose(g, [40.02496, 20.04975, 5.18650], rtol=1e-5)


def test_third_order_through_gammaln() -> None:
    # d^3/dx^3 gammaln = polygamma(2, x): the rules run on xpgrad's namespace at every order
    x = np.array([0.7, 2.5])
    f = lambda a: xg.sum(xsp.gammaln(a))
    g3 = xg.grad(lambda a: xg.sum(xg.grad(lambda b: xg.sum(xg.grad(f)(b)))(a)))(x)
    np.testing.assert_allclose(g3, sc.polygamma(2, x), rtol=1e-10)


# the JVP rules: t * f'(x) against central differences of the forward
_JVP_CASES = [
    ("erf", (-3, 3)), ("erfc", (-3, 3)), ("ndtr", (-3, 3)), ("log_ndtr", (-8, 3)), ("expit", (-5, 5)),
    ("logit", (0.05, 0.95)), ("gammaln", (0.2, 6)), ("digamma", (0.3, 6)), ("entr", (0.1, 3)),
    ("xlogy", (0.2, 3)), ("xlog1py", (0.2, 3)), ("rel_entr", (0.2, 3)),
    ("logsumexp", (-3, 3)), ("softmax", (-3, 3)), ("log_softmax", (-3, 3)), ("polygamma", (0.5, 4)),
]


@pytest.mark.parametrize(("name", "domain"), _JVP_CASES)
def test_jvp_rules_match_central_differences(name: str, domain: tuple[float, float], backend: Any) -> None:
    from xpgrad.autograd._core import PRIMITIVES

    prim = PRIMITIVES[f"special.{name}"]
    xp = xg.array_namespace(backend.asarray(np.zeros(1)))
    nargs = 2 if name in BINARY else 1
    shape = (3, 4) if name in ("logsumexp", "softmax", "log_softmax") else (5,)
    kw: dict[str, Any] = {}
    if name == "logsumexp":
        kw = {"axis": 1, "keepdims": False}
    elif name in ("softmax", "log_softmax"):
        kw = {"axis": 0}
    elif name == "polygamma":
        kw = {"n": 1}
    xs = [RNG.uniform(*domain, size=shape) for _ in range(nargs)]
    ts = [RNG.normal(size=shape) for _ in range(nargs)]
    f = lambda *a: backend.to_numpy(prim.fwd(xp, *[backend.asarray(v) for v in a], **kw))
    ans = prim.fwd(xp, *[backend.asarray(v) for v in xs], **kw)
    eps = 1e-6
    for i in range(nargs):
        rule = prim.jvp_rule(i)
        got = backend.to_numpy(rule(xp, backend.asarray(ts[i]), ans, *[backend.asarray(v) for v in xs], **kw))
        up = [v + eps * ts[i] if j == i else v for j, v in enumerate(xs)]
        dn = [v - eps * ts[i] if j == i else v for j, v in enumerate(xs)]
        want = (f(*up) - f(*dn)) / (2 * eps)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=f"{name}: argument {i}")


# ---------------------------------------------------------------------- SciPy's dispatch
# SCIPY_ARRAY_API is read once, when scipy is first imported: a fresh process sets it.
_DISPATCH_SCRIPT = textwrap.dedent("""
    import json, os, sys
    os.environ["SCIPY_ARRAY_API"] = "1"
    import numpy as np
    import scipy.special as sc
    import xpgrad as xg
    from xpgrad import special as xsp

    names = json.loads(sys.argv[1])
    out = {}
    x = np.array([0.3, 0.6, 0.9])
    y = np.array([0.5, 1.5, 2.5])
    for name in names:
        two = name in ("xlogy", "xlog1py", "rel_entr")
        called = []
        ours = getattr(xsp, name)
        def spy(*a, _f=ours, **k):
            called.append(1)
            return _f(*a, **k)
        setattr(xsp, name, spy)
        try:
            f = (lambda a: xg.sum(getattr(sc, name)(a, xg.asarray(y)))) if two else (lambda a: xg.sum(getattr(sc, name)(a)))
            g = xg.grad(f)(x)
            t = xg.asarray(x)
            want = xg.grad(lambda a: xg.sum(ours(a, xg.asarray(y)) if two else ours(a)))(x)
            out[name] = {"dispatched": bool(called), "grad_ok": bool(np.allclose(g, want, rtol=1e-12))}
        except Exception as e:  # reported, not raised: one name's failure must not hide the others
            out[name] = {"error": f"{type(e).__name__}: {e}"}
        finally:
            setattr(xsp, name, ours)
    print(json.dumps(out))
""")
# the names SciPy (1.14+) looks up as xp.special.<name>; digamma as psi
DISPATCHED = ["erf", "erfc", "expit", "logit", "gammaln", "psi", "digamma", "xlogy", "xlog1py", "entr", "rel_entr",
              "ndtr", "log_ndtr"]
# written in array-API code inside SciPy: they run on xpgrad's namespace instead
COMPOSED = ["logsumexp", "softmax", "log_softmax"]


@pytest.fixture(scope="module")
def scipy_dispatch() -> dict[str, Any]:
    names = DISPATCHED + COMPOSED
    proc = subprocess.run([sys.executable, "-c", _DISPATCH_SCRIPT, json.dumps(names)], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", DISPATCHED)
def test_scipy_special_dispatches_to_xpgrad_special(name: str, scipy_dispatch: dict[str, Any]) -> None:
    res = scipy_dispatch[name]
    assert "error" not in res, res
    if name != "digamma":  # scipy.special.digamma is psi itself: its lookup was made (and cached) for psi
        assert res["dispatched"], f"scipy.special.{name} did not call xpgrad.special.{name}"
    assert res["grad_ok"], res


@pytest.mark.parametrize("name", COMPOSED)
def test_scipy_special_reductions_are_differentiable(name: str, scipy_dispatch: dict[str, Any]) -> None:
    res = scipy_dispatch[name]
    assert "error" not in res, res
    assert res["grad_ok"], res
