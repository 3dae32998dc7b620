"""vmap's semantics next to torch.func's and JAX's: the graph of closed-over parameters,
custom derivative rules under vmap (and jacfwd, jacrev, hessian), random numbers
(``randomness=``), refusals that change no state, and chunking that changes nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import nn

from .conftest import Backend

_rng = np.random.default_rng(28)


def tn(a: Any) -> np.ndarray:
    from ._util import to_numpy

    return to_numpy(a)


def _mlp(backend: Backend, seed: int = 1) -> Any:
    with xg.default_device(seed=seed):
        model = nn.Sequential(nn.Linear(3, 4, dtype=xg.float64), nn.Tanh(), nn.Linear(4, 2, dtype=xg.float64))
    return backend.to(model)


# ====================================================================== item 7: the parameters' graph
@pytest.mark.parametrize("chunk", [None, 2])
def test_vmap_of_model_keeps_the_parameters_graph(backend: Backend, chunk: int | None) -> None:
    """``loss(vmap(model)(batch)).backward()`` fills ``p.grad`` as the unbatched model does, step after step."""
    batched, plain = _mlp(backend), _mlp(backend)
    opt_b = xg.optim.SGD(batched.parameters(), lr=0.1)
    opt_p = xg.optim.SGD(plain.parameters(), lr=0.1)
    for step in range(3):
        X = backend.asarray(_rng.normal(size=(5, 3)))
        out = xg.vmap(batched, chunk_size=chunk)(X)
        assert isinstance(out, xg.Tensor) and out.requires_grad, step
        opt_b.zero_grad()
        xg.sum(out ** 2).backward()
        opt_p.zero_grad()
        xg.sum(plain(X) ** 2).backward()
        for (name, pb), pp in zip(batched.named_parameters(), plain.parameters()):
            assert pb.grad is not None, name
            np.testing.assert_allclose(tn(pb.grad), tn(pp.grad), rtol=1e-12, atol=1e-14, err_msg=f"{name} {step}")
        opt_b.step()
        opt_p.step()


def test_vmap_of_raw_arrays_without_parameters_stays_raw(backend: Backend) -> None:
    """No Tensor that requires grad around: the caller's arrays come back, also from
    transforms inside that record on their own copies (hessian), and under no_grad."""
    X = backend.asarray(_rng.normal(size=(3, 2)))
    raw_type = type(X)
    assert type(xg.vmap(lambda v: xg.sin(v) * 2.0)(X)) is raw_type
    assert type(xg.vmap(xg.hessian(lambda v: xg.sum(xg.sin(v) ** 3)))(X)) is raw_type
    assert type(xg.vmap(xg.jacfwd(xg.grad(lambda v: xg.sum(v ** 3))))(X)) is raw_type
    model = _mlp(backend)
    with xg.no_grad():
        assert type(xg.vmap(model)(backend.asarray(_rng.normal(size=(3, 3))))) is raw_type


# ====================================================================== item 9: custom rules under vmap
def _custom_jvp_functions(lib: str) -> dict[str, Any]:
    """JAX's custom_jvp documentation examples, and rules that differ from the true derivative
    (so that a rule ignored shows), for xpgrad (``lib="xg"``) or JAX."""
    if lib == "xg":
        ns, cj = xg, xg.custom_jvp
    else:
        import jax
        import jax.numpy as ns

        cj = jax.custom_jvp

    @cj
    def log1pexp(x: Any) -> Any:
        return ns.log(1.0 + ns.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (x_dot,) = primals, tangents
        return log1pexp(x), x_dot * (1.0 - 1.0 / (1.0 + ns.exp(x)))

    @cj
    def f(x: Any, y: Any) -> Any:
        return ns.sin(x) * y

    f.defjvps(lambda x_dot, primal_out, x, y: ns.cos(x) * x_dot * y,
              lambda y_dot, primal_out, x, y: ns.sin(x) * y_dot)

    @cj
    def scaled(x: Any) -> Any:  # the rule is not sin's derivative
        return ns.sin(x)

    @scaled.defjvp
    def scaled_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (x_dot,) = primals, tangents
        return scaled(x), 2.0 * x * ns.cos(x) * x_dot

    @cj
    def g(x: Any, y: Any) -> Any:
        return ns.sin(x) * y

    g.defjvps(lambda x_dot, primal_out, x, y: 3.0 * ns.cos(x) * x_dot * y,
              lambda y_dot, primal_out, x, y: ns.exp(x) * y_dot)

    return {
        "log1pexp": log1pexp,
        "sin_times_y": lambda x: f(x, 0.5 * x + 1.0),
        "scaled_rule": scaled,
        "defjvps_other_rules": lambda x: g(x, x * x),
    }


def _custom_vjp_functions(lib: str) -> dict[str, Any]:
    if lib == "xg":
        ns, cv = xg, xg.custom_vjp
    else:
        import jax
        import jax.numpy as ns

        cv = jax.custom_vjp

    @cv
    def h(x: Any) -> Any:
        return ns.sin(x)

    def h_fwd(x: Any) -> Any:
        return h(x), x

    def h_bwd(x: Any, g: Any) -> Any:
        return (3.0 * x * g,)  # not sin's derivative

    h.defvjp(h_fwd, h_bwd)
    return {"custom_vjp": h}


_X = np.array([0.3, 2.0, -1.5])
_XB = np.array([[0.3, 2.0, -1.5], [1.0, -0.2, 0.7]])


def _transforms(lib: str) -> dict[str, Any]:
    """Each composition as ``fn -> (function of (x, xb))``, for xpgrad or JAX."""
    if lib == "xg":
        tr, ns = xg, xg
    else:
        import jax as tr
        import jax.numpy as ns

    def sq(fn: Any) -> Any:
        return lambda x: ns.sum(fn(x) ** 2)

    one = ns.ones_like if lib != "xg" else xg.ones_like
    return {
        "vmap": lambda fn: lambda x, xb: tr.vmap(fn)(xb),
        "vmap(jvp)": lambda fn: lambda x, xb: tr.vmap(lambda a, b: tr.jvp(fn, (a,), (b,))[1])(xb, one(xb)),
        "jvp(vmap)": lambda fn: lambda x, xb: tr.jvp(tr.vmap(fn), (xb,), (one(xb),))[1],
        "jacfwd": lambda fn: lambda x, xb: tr.jacfwd(fn)(x),
        "jacrev": lambda fn: lambda x, xb: tr.jacrev(fn)(x),
        "hessian": lambda fn: lambda x, xb: tr.hessian(sq(fn))(x),
        "vmap(grad)": lambda fn: lambda x, xb: tr.vmap(tr.grad(sq(fn)))(xb),
        "grad(vmap)": lambda fn: lambda x, xb: tr.grad(lambda z: ns.sum(tr.vmap(sq(fn))(z)))(xb),
        "vmap(jacrev)": lambda fn: lambda x, xb: tr.vmap(tr.jacrev(fn))(xb),
        "vmap(jacfwd)": lambda fn: lambda x, xb: tr.vmap(tr.jacfwd(fn))(xb),
        "vmap(hessian)": lambda fn: lambda x, xb: tr.vmap(tr.hessian(sq(fn)))(xb),
        "jacrev(vmap)": lambda fn: lambda x, xb: tr.jacrev(tr.vmap(fn))(xb),
    }


@pytest.fixture(scope="module")
def jax_reference() -> dict[tuple[str, str], np.ndarray]:
    """Every composition of every function, computed by JAX in float64."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    out = {}
    fns = {**_custom_jvp_functions("jax"), **_custom_vjp_functions("jax")}
    for tname, t in _transforms("jax").items():
        for fname, fn in fns.items():
            if fname == "custom_vjp" and tname in ("vmap(jvp)", "jvp(vmap)", "jacfwd", "hessian", "vmap(jacfwd)",
                                                  "vmap(hessian)"):
                continue  # (JAX has no forward mode for custom_vjp)
            out[tname, fname] = np.asarray(t(fn)(_X, _XB))
    return out


@pytest.mark.parametrize("tname", list(_transforms("xg")))
def test_custom_jvp_rule_is_used_under_vmap_like_jax(backend: Backend, tname: str,
                                                      jax_reference: dict[tuple[str, str], np.ndarray]) -> None:
    """vmap, jacfwd, jacrev, hessian and their compositions use the custom_jvp rule, as JAX does."""
    t = _transforms("xg")[tname]
    x, xb = backend.asarray(_X), backend.asarray(_XB)
    for fname, fn in _custom_jvp_functions("xg").items():
        got = tn(t(fn)(x, xb))
        want = jax_reference[tname, fname]
        assert got.shape == want.shape, (fname, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{tname} of {fname}")


@pytest.mark.parametrize("tname", ["vmap", "jacrev", "vmap(grad)", "grad(vmap)", "vmap(jacrev)", "jacrev(vmap)"])
def test_custom_vjp_rule_is_used_under_vmap_like_jax(backend: Backend, tname: str,
                                                      jax_reference: dict[tuple[str, str], np.ndarray]) -> None:
    t = _transforms("xg")[tname]
    fn = _custom_vjp_functions("xg")["custom_vjp"]
    got = tn(t(fn)(backend.asarray(_X), backend.asarray(_XB)))
    np.testing.assert_allclose(got, jax_reference[tname, "custom_vjp"], rtol=1e-12, atol=1e-12)


def test_custom_jvp_rule_chunked_jacobians(backend: Backend) -> None:
    """chunk_size does not change which derivative comes back."""
    fn = _custom_jvp_functions("xg")["scaled_rule"]
    x = backend.asarray(_X)
    want = np.diag(2.0 * _X * np.cos(_X))
    for chunk in (1, 2):
        np.testing.assert_allclose(tn(xg.jacfwd(fn, chunk_size=chunk)(x)), want, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(tn(xg.jacrev(fn, chunk_size=chunk)(x)), want, rtol=1e-12, atol=1e-15)


def test_custom_jvp_rule_with_dependent_arguments_twice() -> None:
    """A defjvps rule whose arguments share history (``f(x, g(x))``): the transposed rule does not
    free the caller's graph (vmap(grad) raised GraphFreedError), call after call."""
    fn = _custom_jvp_functions("xg")["defjvps_other_rules"]  # g(x, x * x), g's rules 3 cos(x) y and exp(x)
    per_example = xg.vmap(xg.grad(lambda v: xg.sum(fn(v) ** 2)))
    for k in range(3):
        xb = _XB + k
        y = xb * xb
        want = 2.0 * np.sin(xb) * y * (3.0 * np.cos(xb) * y + np.exp(xb) * 2.0 * xb)
        np.testing.assert_allclose(per_example(xb), want, rtol=1e-12)
        np.testing.assert_allclose(xg.grad(lambda v: xg.sum(fn(v) ** 2))(xb[0]), want[0], rtol=1e-12)


# ====================================================================== item 12: BatchNorm refused before any change
def test_vmap_refuses_training_batchnorm_before_any_state_change(backend: Backend) -> None:
    bn = backend.to(nn.BatchNorm1d(3, dtype=xg.float64))
    X = backend.asarray(_rng.normal(size=(4, 5, 3)))
    for _ in range(2):
        with pytest.raises(xg.XpgradValueError, match="BatchNorm1d: inside vmap, training mode"):
            xg.vmap(bn)(X)
        assert int(tn(bn.num_batches_tracked)) == 0
        np.testing.assert_array_equal(tn(bn.running_mean), np.zeros(3))
        np.testing.assert_array_equal(tn(bn.running_var), np.ones(3))
    bn.eval()
    got = tn(xg.vmap(bn)(X))
    np.testing.assert_allclose(got, tn(X) / np.sqrt(1.0 + 1e-5), rtol=1e-12)
    assert int(tn(bn.num_batches_tracked)) == 0


# ====================================================================== item 14: out_axes=None with chunks
@pytest.mark.parametrize("chunk", [None, 1, 2, 3])
def test_chunked_out_axes_none_keeps_the_type(backend: Backend, chunk: int | None) -> None:
    X = backend.asarray(_rng.normal(size=(5, 2)))
    w = backend.asarray(np.array([1.0, -2.0]))
    m, s = xg.vmap(lambda v, w: (v * w, w * 2.0), in_axes=(0, None), out_axes=(0, None), chunk_size=chunk)(X, w)
    assert type(m) is type(X) and type(s) is type(X)
    np.testing.assert_allclose(tn(m), tn(X) * np.array([1.0, -2.0]))
    np.testing.assert_allclose(tn(s), [2.0, -4.0])
    wt = xg.asarray(w)
    m, s = xg.vmap(lambda v: (v * wt, wt * 2.0), out_axes=(0, None), chunk_size=chunk)(X)
    assert type(m) is type(X) and type(s) is type(X)
