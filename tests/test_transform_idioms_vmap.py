"""Array-API idioms under vmap and the transforms built on it (issue 27, classes 1 and 4).

What runs under ``xg.grad`` must run under ``vmap``, ``vmap(grad)``, ``jacrev``,
``jacfwd``, ``hessian``, ``jacobian(mode="fwd")``, ``vjp`` and ``jvp``: a function that
finds its namespace with ``array_api_compat.array_namespace`` (as SciPy, scikit-learn and
array-api-extra do), one that uses ``xg.array_namespace``, one whose namespace comes from
a data argument that is not differentiated, and one that writes into a fresh copy. Each
result is compared with the eager value or gradient computed example by example (a loop
of ``xg.grad``), on the same backend.

SciPy reads ``SCIPY_ARRAY_API`` once, when it is first imported, so its functions run in
a fresh process (this module run as a script, ``python -m tests.test_transform_idioms_vmap
BACKEND``), which reports back as JSON.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import array_api_compat
import numpy as np
import pytest

import xpgrad as xg

from ._util import ROOT, to_numpy

RNG = np.random.default_rng(27)
#: the parameter (differentiated, not mapped)
W = RNG.normal(size=5)
#: a batch of 4 parameters (mapped)
WS = RNG.normal(size=(4, 5))
#: a batch of 4 data matrices, 3 x 5 each (mapped, never differentiated)
XS = RNG.normal(size=(4, 3, 5))


# ---------------------------------------------------------------------- the idioms
def f_compat(w: Any) -> Any:
    """The namespace from array_api_compat, as third-party code finds it."""
    xp = array_api_compat.array_namespace(w)
    return xp.sum(xp.sin(w) * w) + xp.sum(w**2)


def f_xg(w: Any) -> Any:
    """The namespace from xg.array_namespace."""
    xp = xg.array_namespace(w)
    return xp.sum(xp.exp(w / 4.0) * w)


def f_data(w: Any, x: Any) -> Any:
    """The namespace from the data argument ``x``, which is never differentiated."""
    xp = array_api_compat.array_namespace(x)
    return xp.sum(xp.tanh(x @ w))


def f_copy(w: Any) -> Any:
    """A write into a fresh copy of the argument."""
    xp = array_api_compat.array_namespace(w)
    y = xp.asarray(w, copy=True)
    y[0] = 0.0
    return xp.sum(y * w)


def f_fresh(w: Any) -> Any:
    """Writes into fresh arrays (``xp.zeros``): under vmap each becomes batched, as ``jax.vmap``
    gives a batched ``out.at[1:-1].set(w)``."""
    xp = array_api_compat.array_namespace(w)
    out = xp.zeros((w.shape[0] + 2,), dtype=w.dtype)
    out[1:-1] = w
    out[0] = w[1] * 2.0
    acc = xp.zeros((), dtype=w.dtype)
    acc += xp.sum(w)
    return xp.sum(out * out) + acc * w[2]


ONE_ARG: dict[str, Callable[[Any], Any]] = {"compat": f_compat, "xg": f_xg, "copy": f_copy, "fresh": f_fresh}


def _ex(a: Any, i: int) -> Any:
    """Example ``i`` of a batch (a raw backend array)."""
    return a[i, ...]


def _np(a: Any) -> np.ndarray:
    return np.asarray(to_numpy(a))


def _close(got: Any, want: Any, what: str = "") -> None:
    assert not isinstance(got, xg.Tensor), f"{what}: got an xpgrad Tensor, not the caller's array"
    np.testing.assert_allclose(_np(got), want, rtol=1e-10, atol=1e-12, err_msg=what)


def _grad_ref(f: Callable[..., Any], *args: Any) -> np.ndarray:
    return _np(xg.grad(f)(*args))


def _hessian_ref(f: Callable[[Any], Any], w: Any) -> np.ndarray:
    """The Hessian, row by row, as gradients of gradients (no vmap anywhere)."""
    n = int(w.shape[0])
    return np.stack([_np(xg.grad(lambda v, i=i: xg.grad(f)(v)[i])(w)) for i in range(n)])


def _value_ref(f: Callable[..., Any], *args: Any) -> np.ndarray:
    return _np(f(*(xg.asarray(a) for a in args)))


# ---------------------------------------------------------------------- a batched value is an array
def test_a_batched_value_answers_what_a_tensor_answers(backend: Any) -> None:
    xs = backend.asarray(XS)
    t = xg.asarray(_ex(xs, 0))
    seen: dict[str, Any] = {}

    def g(b: Any) -> Any:
        seen["ns"] = array_api_compat.array_namespace(b)
        seen["ns2"] = b.__array_namespace__()
        seen["ns_xg"] = xg.array_namespace(b)
        seen["device"] = (b.device, array_api_compat.device(b))
        seen["is_array"] = array_api_compat.is_array_api_obj(b)
        seen["attrs"] = (b.dtype, tuple(b.shape), b.ndim, b.size, array_api_compat.size(b), len(b),
                         tuple(b.mT.shape), tuple(b.T.shape))
        seen["str"] = (str(b), repr(b))
        seen["dtypes"] = (xg.result_type(b, 1.0), xg.result_type(b, b), xg.can_cast(b, xg.complex128),
                          seen["ns"].result_type(b, xg.float32))
        return (b.sum() + b.mean() + b.reshape((-1,)).sum() + b.reshape(15).sum() + (b.mT @ b).sum()
                + b.T.sum() + b.to_device(b.device).sum() + seen["ns"].sum(seen["ns"].abs(b), axis=0)[1])

    got = xg.vmap(g)(xs)
    bound = t.__array_namespace__()
    assert seen["ns"] is bound and seen["ns2"] is bound and seen["ns_xg"] is bound
    assert seen["device"] == (t.device, t.device)
    assert seen["is_array"] is True
    assert seen["attrs"] == (t.dtype, (3, 5), 2, 15, 15, 3, (5, 3), (5, 3))
    assert all("Batched(shape=(3, 5)" in s for s in seen["str"])
    assert seen["dtypes"] == (xg.float64, xg.float64, True, xg.float64)
    want = [_np(g(xg.asarray(_ex(xs, i)))) for i in range(4)]
    _close(got, np.stack(want))


@pytest.mark.parametrize(
    ("what", "convert"),
    [
        ("float", lambda b: float(b[0])),
        ("int", lambda b: int(b[0])),
        ("bool", lambda b: bool(b[0] > 0)),
        ("item", lambda b: b[0].item()),
        ("tolist", lambda b: b.tolist()),
        ("__array__", lambda b: np.asarray(b)),
        (".data", lambda b: b.data),
        ("__dlpack__", lambda b: b.__dlpack__()),
    ],
)
def test_a_conversion_of_a_batched_value_names_the_line(backend: Any, what: str, convert: Any) -> None:
    def g(b: Any) -> Any:
        convert(b)  # the line the message names
        return b

    with pytest.raises(xg.ConcretizationError, match=f"{what}.*batched by vmap.*at .*test_transform_idioms_vmap.py"):
        xg.vmap(g)(backend.asarray(WS))


# ---------------------------------------------------------------------- the idioms under each transform
# (each test runs every idiom: one that fails names it)
def test_vmap_and_vmap_of_grad(backend: Any) -> None:
    ws = backend.asarray(WS)
    for name, f in ONE_ARG.items():
        want_v = np.stack([_value_ref(f, _ex(ws, i)) for i in range(4)])
        want_g = np.stack([_grad_ref(f, _ex(ws, i)) for i in range(4)])
        _close(xg.vmap(f)(ws), want_v, f"vmap({name})")
        _close(xg.vmap(xg.grad(f))(ws), want_g, f"vmap(grad({name}))")


def test_vmap_of_a_function_taking_xp_from_unmapped_and_mapped_data(backend: Any) -> None:
    w, xs = backend.asarray(W), backend.asarray(XS)
    want_v = np.stack([_value_ref(f_data, w, _ex(xs, i)) for i in range(4)])
    want_g = np.stack([_grad_ref(f_data, w, _ex(xs, i)) for i in range(4)])
    _close(xg.vmap(f_data, in_axes=(None, 0))(w, xs), want_v)
    _close(xg.vmap(xg.grad(f_data), in_axes=(None, 0))(w, xs), want_g)
    # the data unmapped and the parameter mapped: xp comes from an argument given in_axes=None
    ws, x0 = backend.asarray(WS), _ex(xs, 0)
    _close(xg.vmap(xg.grad(f_data), in_axes=(0, None))(ws, x0),
           np.stack([_grad_ref(f_data, _ex(ws, i), x0) for i in range(4)]))


def _cases(backend: Any, k: int) -> list[tuple[str, Callable[..., Any], tuple[Any, ...]]]:
    """(name, function, arguments) of every idiom, the data argument being example ``k`` of XS."""
    w, x = backend.asarray(W), _ex(backend.asarray(XS), k)
    return [*((n, f, (w,)) for n, f in ONE_ARG.items()), ("data", f_data, (w, x))]


@pytest.mark.parametrize("transform", ["jacrev", "jacfwd", "jacobian_fwd"])
def test_jacobians_equal_the_gradient(backend: Any, transform: str) -> None:
    jac = {"jacrev": xg.jacrev, "jacfwd": xg.jacfwd,
           "jacobian_fwd": functools.partial(xg.jacobian, mode="fwd")}[transform]
    for name, f, args in _cases(backend, 1):
        _close(jac(f)(*args), _grad_ref(f, *args), f"{transform}({name})")


def test_hessian(backend: Any) -> None:
    for name, f, args in _cases(backend, 2):
        x = xg.asarray(args[1]) if name == "data" else None
        one = (lambda v: f_data(v, x)) if name == "data" else f
        _close(xg.hessian(f)(*args), _hessian_ref(one, args[0]), f"hessian({name})")


def test_jacobians_return_the_type_of_their_arguments_as_grad_does(backend: Any) -> None:
    """A Tensor argument gets Tensor blocks, a raw array the backend's arrays, leaf by leaf."""
    w, x = backend.asarray(W), _ex(backend.asarray(XS), 1)
    tw = xg.asarray(w)

    def h(w: Any, x: Any) -> Any:
        return array_api_compat.array_namespace(w, x).tanh(x @ w)

    want = _np(xg.jacrev(h)(w, x))
    for name, jac in [("jacrev", xg.jacrev), ("jacfwd", xg.jacfwd)]:
        got = jac(h)(tw, x)
        assert isinstance(got, xg.Tensor), f"{name} of a Tensor gave {type(got).__name__}"
        np.testing.assert_allclose(_np(got), want, rtol=1e-12, err_msg=name)
        both = jac(h, argnums=(0, 1))(tw, x)
        assert isinstance(both[0], xg.Tensor) and not isinstance(both[1], xg.Tensor), name
    g = xg.grad(lambda v, x: xg.sum(h(v, x)))(tw, x)
    hs = xg.hessian(lambda v, x: xg.sum(h(v, x)))(tw, x)
    assert isinstance(g, xg.Tensor) and isinstance(hs, xg.Tensor)
    _close(xg.hessian(lambda v, x: xg.sum(h(v, x)))(w, x), _np(hs))


def test_jacobian_of_a_vector_function_with_xp_from_data(backend: Any) -> None:
    """A non-scalar output: jacrev (a batched backward pass) and jacfwd, row by row against grad."""
    w, x = backend.asarray(W), _ex(backend.asarray(XS), 3)

    def h(w: Any, x: Any) -> Any:
        xp = array_api_compat.array_namespace(x)
        return xp.tanh(x @ w)

    want = np.stack([_np(xg.grad(lambda v, x, i=i: h(v, x)[i])(w, x)) for i in range(3)])
    _close(xg.jacrev(h)(w, x), want)
    _close(xg.jacfwd(h)(w, x), want)
    _close(xg.jacobian(h, argnums=(0,), mode="fwd")(w, x)[0], want)


def test_vjp_jvp_and_linearize_alone_and_under_vmap(backend: Any) -> None:
    """At top level, and per example inside vmap (vjp and jvp differentiate every argument:
    the data argument is a primal too)."""
    ws, xs = backend.asarray(WS), backend.asarray(XS)
    t = np.random.default_rng(1).normal(size=5)
    tb = backend.asarray(t)
    one = backend.asarray(np.asarray(1.0))
    for name, f, args in _cases(backend, 0):
        gs = [_np(xg.grad(f, argnums=k)(*args)) for k in range(len(args))]
        out, pull = xg.vjp(f, *args)
        _close(out, _value_ref(f, *args), f"vjp({name})")
        for k, c in enumerate(pull(one)):
            _close(c, gs[k], f"vjp({name}) cotangent {k}")
        zeros = tuple(backend.asarray(np.zeros(tuple(a.shape))) for a in args[1:])
        _, dy = xg.jvp(f, args, (tb, *zeros))
        _close(dy, gs[0] @ t, f"jvp({name})")
        _, lin = xg.linearize(f, *args)
        _close(lin(tb, *zeros), gs[0] @ t, f"linearize({name})")
        # per example: the parameter mapped (and the data, for the data idiom)
        axes = (0, 0) if name == "data" else (0,)
        batch = (ws, xs) if name == "data" else (ws,)
        want = np.stack([_grad_ref(f, *(_ex(b, i) for b in batch)) for i in range(4)])
        def pulled(*a: Any, f: Callable[..., Any] = f) -> Any:
            out, pull = xg.vjp(f, *a)
            return pull(xg.ones_like(out))[0]

        _close(xg.vmap(pulled, in_axes=axes)(*batch), want, f"vmap(vjp({name}))")
        _close(xg.vmap(lambda *a, f=f: xg.jvp(f, a, (tb, *(0.0 * b for b in a[1:])))[1], in_axes=axes)(*batch),
               want @ t, f"vmap(jvp({name}))")


def test_checkpoint_under_vmap_and_jacobians(backend: Any) -> None:
    w, xs = backend.asarray(W), backend.asarray(XS)
    x = _ex(xs, 1)
    ck = xg.checkpoint(f_data)
    _close(xg.vmap(xg.grad(ck), in_axes=(None, 0))(w, xs),
           np.stack([_grad_ref(f_data, w, _ex(xs, i)) for i in range(4)]))
    _close(xg.jacrev(ck)(w, x), _grad_ref(f_data, w, x))
    _close(xg.hessian(ck)(w, x), _hessian_ref(lambda v: f_data(v, xg.asarray(x)), w))


def test_numpy_scalars_under_vmap_fail_only_where_eager_code_fails(backend: Any) -> None:
    """NumPy scalars (``np.float64``, ``np.log``'s result) next to a batched value: vmap adds no
    failure of its own (eager dispatch of NumPy scalars on torch and array-api-strict is
    another part of issue 27)."""

    def f7(w: Any) -> Any:
        xp = array_api_compat.array_namespace(w)
        return xp.sum(w) * np.float64(2.0) + np.log(2 * np.pi)

    ws = backend.asarray(WS)
    try:
        want = np.stack([_value_ref(f7, _ex(ws, i)) for i in range(4)])
    except Exception as e:  # noqa: BLE001 - whatever eager code raises, vmap must raise too
        with pytest.raises(type(e)):
            xg.vmap(f7)(ws)
        return
    _close(xg.vmap(f7)(ws), want)
    np.testing.assert_allclose(want, 2.0 * WS.sum(axis=1) + np.log(2 * np.pi), rtol=1e-12)


# ---------------------------------------------------------------------- array-api-extra
XPX_CASES: dict[str, Callable[[Any], Any]] = {
    "cov": lambda x: __import__("array_api_extra").cov(x),
    "sinc": lambda x: __import__("array_api_extra").sinc(x),
    "nanmean": lambda x: __import__("array_api_extra").nanmean(x, axis=0),
    # (these write the input into a fresh array: xp.full, xp.zeros)
    "pad": lambda x: __import__("array_api_extra").pad(x, 1, constant_values=0.5),
    "create_diagonal": lambda x: __import__("array_api_extra").create_diagonal(x[1, :], offset=1),
}


@pytest.mark.parametrize("name", list(XPX_CASES))
def test_array_api_extra_under_vmap_jacfwd_and_hessian(backend: Any, name: str) -> None:
    pytest.importorskip("array_api_extra")
    f = XPX_CASES[name]
    xs = backend.asarray(XS)
    _close(xg.vmap(f)(xs), np.stack([_value_ref(f, _ex(xs, i)) for i in range(4)]))
    x = _ex(xs, 0)
    out = _value_ref(f, x)

    def comp(v: Any, k: int) -> Any:
        xp = array_api_compat.array_namespace(v)
        return xp.reshape(f(v), (-1,))[k]

    jac_ref = np.stack([_np(xg.grad(lambda v, k=k: comp(v, k))(x)) for k in range(out.size)])
    _close(xg.jacfwd(f)(x), jac_ref.reshape((*out.shape, 3, 5)))

    def s(v: Any) -> Any:
        xp = array_api_compat.array_namespace(v)
        return xp.sum(f(v) ** 2)

    flat = backend.asarray(XS[0].reshape(-1))

    def s_flat(v: Any) -> Any:
        return s(array_api_compat.array_namespace(v).reshape(v, (3, 5)))

    _close(xg.hessian(s_flat)(flat), _hessian_ref(s_flat, flat))


@pytest.mark.parametrize("name", ["compat", "data"])
def test_against_jax(name: str) -> None:
    """jax.vmap(jax.grad(f)) and jax.hessian(f) of the same code on jax.numpy arrays."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    w, xs = jnp.asarray(W), jnp.asarray(XS)
    if name == "compat":
        ws = jnp.asarray(WS)
        _close(xg.vmap(xg.grad(f_compat))(ws), np.asarray(jax.vmap(jax.grad(f_compat))(ws)))
        _close(xg.hessian(f_compat)(w), np.asarray(jax.hessian(f_compat)(w)))
    else:
        _close(xg.vmap(xg.grad(f_data), in_axes=(None, 0))(w, xs),
               np.asarray(jax.vmap(jax.grad(f_data), in_axes=(None, 0))(w, xs)))
        _close(xg.hessian(f_data)(w, xs[0]), np.asarray(jax.hessian(f_data)(w, xs[0])))


# ---------------------------------------------------------------------- SciPy (in a fresh process)
SCIPY_CASES = ("vmap_grad_logsumexp", "vmap_logsumexp", "hessian_logsumexp", "jacfwd_softmax", "jacrev_softmax",
               "jacobian_fwd_softmax", "vmap_softmax")


def _scipy_main(backend_name: str) -> dict[str, str]:
    """Every SciPy case on one backend: ``"ok"`` or what went wrong (run with SCIPY_ARRAY_API=1)."""
    import scipy.special as sps

    from .conftest import _load

    b = _load(backend_name)
    w, xs, v = b.asarray(W), b.asarray(XS[:, 0, :]), b.asarray(WS[0])
    p = np.exp(WS[0] - WS[0].max())
    p /= p.sum()
    jac_softmax = np.diag(p) - np.outer(p, p)

    def lse(w: Any, x: Any) -> Any:
        return sps.logsumexp(x * w)

    def lse_ref(w: np.ndarray, x: np.ndarray) -> float:
        z = x * w
        return float(np.log(np.exp(z - z.max()).sum()) + z.max())

    def grad_lse_ref(w: np.ndarray, x: np.ndarray) -> np.ndarray:
        z = x * w
        q = np.exp(z - z.max())
        return (q / q.sum()) * x

    def softmax_ref(x: np.ndarray) -> np.ndarray:
        q = np.exp(x - x.max())
        return q / q.sum()

    XS0 = XS[:, 0, :]
    checks: dict[str, Callable[[], None]] = {
        "vmap_grad_logsumexp": lambda: _close(xg.vmap(xg.grad(lse), in_axes=(None, 0))(w, xs),
                                              np.stack([grad_lse_ref(W, XS0[i]) for i in range(4)])),
        "vmap_logsumexp": lambda: _close(xg.vmap(lambda x: sps.logsumexp(x))(xs),
                                         np.array([lse_ref(np.ones(5), XS0[i]) for i in range(4)])),
        "hessian_logsumexp": lambda: _close(xg.hessian(lambda v: sps.logsumexp(v))(v), jac_softmax),
        "jacfwd_softmax": lambda: _close(xg.jacfwd(sps.softmax)(v), jac_softmax),
        "jacrev_softmax": lambda: _close(xg.jacrev(sps.softmax)(v), jac_softmax),
        "jacobian_fwd_softmax": lambda: _close(xg.jacobian(sps.softmax, mode="fwd")(v), jac_softmax),
        "vmap_softmax": lambda: _close(xg.vmap(sps.softmax)(xs), np.stack([softmax_ref(XS0[i]) for i in range(4)])),
    }
    # more of SciPy's array-API code, on positive examples: vmap, vmap(grad) and jacfwd against
    # the same function called example by example (its value, and its gradient under grad)
    import scipy.stats as st

    pos = b.asarray(np.abs(XS0) + 0.5)
    more: dict[str, Callable[[Any], Any]] = {
        "log_softmax": sps.log_softmax, "erf": sps.erf, "gammaln": sps.gammaln,
        "zscore": st.zscore, "skew": st.skew, "entropy": st.entropy,
    }

    def per_example(f: Callable[[Any], Any]) -> None:
        rows = [xg.asarray(pos[i, ...]) for i in range(4)]  # (SciPy on raw device1 arrays goes through NumPy)
        _close(xg.vmap(f)(pos), np.stack([_np(f(r)) for r in rows]), "vmap")

        def s(v: Any) -> Any:
            return array_api_compat.array_namespace(v).sum(f(v) ** 2)

        _close(xg.vmap(xg.grad(s))(pos), np.stack([_np(xg.grad(s)(r)) for r in rows]), "vmap(grad)")
        out = _np(f(rows[0]))
        want = (np.stack([_np(xg.grad(lambda v, k=k: array_api_compat.array_namespace(v).reshape(f(v), (-1,))[k])(rows[0]))
                          for k in range(out.size)]).reshape((*out.shape, 5)))
        _close(xg.jacfwd(f)(pos[0, ...]), want, "jacfwd")

    for fname, f in more.items():
        checks[f"more_{fname}"] = functools.partial(per_example, f)
    if backend_name == "jax":  # the same SciPy code under JAX's own transforms
        import jax

        def against_jax() -> None:
            _close(xg.vmap(xg.grad(lse), in_axes=(None, 0))(w, xs),
                   np.asarray(jax.vmap(jax.grad(lse), in_axes=(None, 0))(w, xs)))
            _close(xg.hessian(lambda v: sps.logsumexp(v))(v), np.asarray(jax.hessian(lambda v: sps.logsumexp(v))(v)))

        checks["against_jax"] = against_jax
    out = {}
    for name, check in checks.items():
        try:
            check()
            out[name] = "ok"
        except Exception as e:  # noqa: BLE001 - reported to the test, which fails with it
            out[name] = f"{type(e).__name__}: {e}"[:2000]
    return out


@functools.cache
def _scipy_results(backend_name: str) -> dict[str, str]:
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.test_transform_idioms_vmap", backend_name],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_scipy_under_vmap_and_jacobians(backend: Any) -> None:
    pytest.importorskip("scipy")
    which = {"array_api_strict": "strict_device1" if backend.device is not None else "array_api_strict"}
    backend_name = which.get(backend.name, backend.name)
    res = _scipy_results(backend_name)
    assert set(SCIPY_CASES) <= set(res), f"missing cases: {set(SCIPY_CASES) - set(res)}"
    bad = {k: v for k, v in res.items() if v != "ok"}
    assert not bad, f"on {backend_name}: {bad}"


if __name__ == "__main__":
    print(json.dumps(_scipy_main(sys.argv[1])))
