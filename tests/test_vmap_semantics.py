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
    _, pull = xg.vjp(lambda v: xg.tanh(v) * v, backend.asarray(_X))  # (its leaf made outside the vmap)
    (rows,) = xg.vmap(pull)(backend.asarray(np.eye(3)))
    assert type(rows) is raw_type
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


# ====================================================================== items 10, 13: randomness=
def _draws(v: Any) -> tuple[Any, ...]:
    """Every kind of draw, and Dropout, of one example ``v`` (a vector of 6)."""
    return (
        nn.functional.dropout(v, 0.5),
        xg.random.normal((3,)) + v[0],
        xg.random.uniform((2,)),
        xg.random.integers(0, 1000, (3,)),
        xg.random.bernoulli(0.5, (4,)),
        xg.random.permutation(v),
        xg.random.choice(v, (2,)),
        xg.random.permutation(5),
    )


def test_randomness_is_checked() -> None:
    with pytest.raises(xg.XpgradValueError, match="vmap: randomness must be 'same', 'different' or 'error', got 'diff'"):
        xg.vmap(lambda v: v, randomness="diff")


@pytest.mark.parametrize("func", ["normal", "permutation", "dropout"])
def test_randomness_error_names_the_function(backend: Backend, func: str) -> None:
    X = backend.asarray(_rng.normal(size=(3, 4)))
    f = {"normal": lambda v: v + xg.random.normal((4,)), "permutation": xg.random.permutation,
         "dropout": lambda v: nn.Dropout(0.5)(v)}[func]
    name = "bernoulli" if func == "dropout" else func
    with backend.policy(seed=0):
        before = tn(xg.random.normal((2,)))
    with backend.policy(seed=0):
        for chunk in (None, 2):
            with pytest.raises(xg.XpgradValueError, match=rf"random\.{name}: called inside vmap\(randomness='error'\)"):
                xg.vmap(f, randomness="error", chunk_size=chunk)(X)
        np.testing.assert_array_equal(tn(xg.random.normal((2,))), before)  # (nothing was drawn)


@pytest.mark.parametrize("randomness", ["same", "different"])
def test_chunks_draw_what_one_call_draws(backend: Backend, randomness: str) -> None:
    """Every chunk size gives the unchunked numbers, and leaves the generator where one call does."""
    X = backend.asarray(_rng.normal(size=(5, 6)))
    results = []
    for chunk in (None, 1, 2, 3, 5, 7):
        with backend.policy(seed=4):
            out = xg.vmap(_draws, randomness=randomness, chunk_size=chunk)(X)
            after = xg.random.normal((3,))
        results.append(([tn(o) for o in out], tn(after)))
    for (got, after), chunk in zip(results[1:], (1, 2, 3, 5, 7)):
        for k, (g, w) in enumerate(zip(got, results[0][0])):
            np.testing.assert_array_equal(g, w, err_msg=f"draw {k}, chunk_size={chunk}")
        np.testing.assert_array_equal(after, results[0][1])
    first = results[0][0]
    same = [all(np.array_equal(first[k][i], first[k][0]) for i in range(5)) for k in (2, 3, 4, 7)]  # (data-free)
    assert all(same) if randomness == "same" else not any(same)


def test_randomness_different_is_a_loop_under_the_examples_generators(backend: Backend) -> None:
    """Example ``i`` draws from ``Generator(s * 2**32 + i)``, ``s`` one integer drawn from the
    generator at the call's first draw, as docs/concepts/vmap.md says: a loop reproduces it."""
    for seed in (0, 1):
        X = backend.asarray(_rng.normal(size=(4, 6)))
        with backend.policy(seed=seed):
            got = xg.vmap(_draws, randomness="different")(X)
            after = tn(xg.random.normal((2,)))
        with backend.policy(seed=seed):
            s = int(tn(xg.random.integers(2**63, dtype=xg.int64)))
            want_after = tn(xg.random.normal((2,)))
        np.testing.assert_array_equal(after, want_after)
        loop = []
        for i in range(4):
            with backend.policy(seed=s * 2**32 + i):
                loop.append([tn(o) for o in _draws(xg.asarray(X[i, ...]))])
        for k, g in enumerate(got):
            np.testing.assert_array_equal(tn(g), np.stack([row[k] for row in loop]), err_msg=f"draw {k}")


def test_randomness_same_is_one_draw_shared(backend: Backend) -> None:
    X = backend.asarray(_rng.normal(size=(4, 6)))
    with backend.policy(seed=2):
        got = xg.vmap(_draws)(X)  # (the default)
    with backend.policy(seed=2):
        one = _draws(xg.asarray(X[0, ...]))
    for k in (2, 3, 4, 7):  # (draws that do not depend on the example)
        for i in range(4):
            np.testing.assert_array_equal(tn(got[k])[i], tn(one[k]), err_msg=f"draw {k}")


def test_permutation_under_vmap(backend: Backend) -> None:
    """random.permutation of a batched array permutes each example (it raised a ConcretizationError
    naming '.data'): one permutation for all under "same", one each under "different"."""
    X = backend.asarray(np.arange(24.0).reshape(4, 6) * 10.0 + np.arange(6.0))
    for randomness in ("same", "different"):
        with backend.policy(seed=5):
            P = tn(xg.vmap(xg.random.permutation, randomness=randomness)(X))
        idx = (P % 10.0).astype(int)  # (each value says which element it was)
        for i in range(4):
            assert sorted(idx[i]) == list(range(6))
            np.testing.assert_array_equal(P[i], tn(X)[i][idx[i]])
        assert all(np.array_equal(idx[i], idx[0]) for i in range(4)) == (randomness == "same")
    g = xg.vmap(xg.grad(lambda v: xg.sum(xg.random.permutation(v) * xg.arange(6.0))), randomness="different")
    with backend.policy(seed=5):
        G = tn(g(X))
    for i in range(4):  # the gradient puts each position's weight back where the element came from
        np.testing.assert_array_equal(G[i][idx[i]], np.arange(6.0))


@pytest.mark.parametrize("randomness", ["same", "different"])
def test_dropout_module_follows_randomness(backend: Backend, randomness: str) -> None:
    drop = nn.Dropout(0.5)
    X = backend.asarray(np.ones((4, 40)))
    for seed in range(2):
        with backend.policy(seed=seed):
            out = tn(xg.vmap(drop, randomness=randomness)(X))
        assert set(np.unique(out)) <= {0.0, 2.0} and 0 < np.count_nonzero(out[0]) < 40
        assert all(np.array_equal(out[i], out[0]) for i in range(4)) == (randomness == "same")
    drop.eval()
    np.testing.assert_array_equal(tn(xg.vmap(drop, randomness="error")(X)), np.ones((4, 40)))


def test_nested_randomness(backend: Backend) -> None:
    """Each level applies its own mode: different outside and same inside vary along the outer
    axis only, and the reverse along the inner one."""
    Z = backend.asarray(np.zeros((3, 2)))
    noise = lambda v: v + xg.random.normal()
    with backend.policy(seed=6):
        a = tn(xg.vmap(xg.vmap(noise, randomness="same"), randomness="different")(Z))
        b = tn(xg.vmap(xg.vmap(noise, randomness="different"), randomness="same")(Z))
        c = tn(xg.vmap(xg.vmap(noise, randomness="different"), randomness="different", chunk_size=2)(Z))
    assert np.all(a == a[:, :1]) and len(set(a[:, 0])) == 3
    assert np.all(b == b[:1, :]) and len(set(b[0])) == 2
    assert len(set(c.ravel())) == 6


# ====================================================================== item 15: vmap against a loop
class _Scale(nn.Module):
    """An elementwise layer with parameters (elementwise, so that the batched program rounds as the
    loop's does: bit for bit on NumPy)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.w = nn.Parameter(xg.asarray(np.linspace(0.5, 1.5, n)))
        self.b = nn.Parameter(xg.asarray(np.linspace(-0.2, 0.3, n)))

    def forward(self, x: Any) -> Any:
        return x * self.w + self.b


_STEPS = ["scale", "hooked_scale", "tanh", "sin", "relu", "dropout", "dropout_module", "noise", "iadd", "imul",
          "setitem", "mix"]


def _program(steps: list[str], n: int, backend: Backend) -> Any:
    """The function of one example that ``steps`` describe (its modules made once, closed over)."""
    scale = backend.to(_Scale(n))
    hooked = backend.to(_Scale(n))
    hooked.register_forward_pre_hook(lambda mod, args: (args[0] * 2.0,))
    hooked.register_forward_hook(lambda mod, args, out: out * 0.5 - 0.125)
    drop = nn.Dropout(0.25)

    def f(v: Any) -> Any:
        y = v * 1.0
        for s in steps:
            if s == "scale":
                y = scale(y)
            elif s == "hooked_scale":
                y = hooked(y)
            elif s == "tanh":
                y = xg.tanh(y)
            elif s == "sin":
                y = xg.sin(y)
            elif s == "relu":
                y = nn.functional.relu(y)
            elif s == "dropout":
                y = nn.functional.dropout(y, 0.5)
            elif s == "dropout_module":
                y = drop(y)
            elif s == "noise":
                y = y + xg.random.normal((n,)) * 0.125
            elif s == "iadd":
                y += 0.25 * v
            elif s == "imul":
                y *= xg.cos(v)
            elif s == "setitem":
                y[:1] = y[1:2] * 3.0 + v[:1]
            else:
                y = y + xg.sum(y) * 0.125
        return y

    return f


def _loop(f: Any, xs: Any, size: int, backend: Backend, seed: int, randomness: str) -> list[np.ndarray]:
    """``f`` of each example in turn, under the generator ``randomness`` gives it."""
    out = []
    if randomness == "different":
        with backend.policy(seed=seed):
            s = int(tn(xg.random.integers(2**63, dtype=xg.int64)))
    for i in range(size):
        with backend.policy(seed=s * 2**32 + i if randomness == "different" else seed):
            out.append(tn(f(xg.asarray(xs[i, ...]))))
    return out


def test_vmap_against_a_loop_of_random_programs(backend: Backend) -> None:
    """Random small programs (Dropout, normal draws, in-place updates, module hooks, closed-over
    parameters): vmap, chunked vmap and vmap of grad equal a loop over the examples, bit for bit
    on NumPy, within 1e-12 elsewhere."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from .conftest import examples_for

    @settings(settings(), max_examples=examples_for(backend.name))
    @given(steps=st.lists(st.sampled_from(_STEPS), min_size=1, max_size=6), n=st.integers(2, 4),
           size=st.integers(1, 4), chunk=st.integers(1, 4), seed=st.integers(0, 2**32 - 1),
           randomness=st.sampled_from(["same", "different"]))
    def run(steps: list[str], n: int, size: int, chunk: int, seed: int, randomness: str) -> None:
        f = _program(steps, n, backend)
        g = xg.grad(lambda v: xg.sum(f(v) ** 2))
        X = backend.asarray(np.random.default_rng(seed).normal(size=(size, n)))
        for fn, what in ((f, "f"), (g, "grad")):
            want = np.stack(_loop(fn, X, size, backend, seed, randomness))
            for c in (None, chunk):
                with backend.policy(seed=seed):
                    got = tn(xg.vmap(fn, randomness=randomness, chunk_size=c)(X))
                msg = f"{what} of {steps}, {randomness}, chunk_size={c}"
                if backend.name == "numpy":
                    np.testing.assert_array_equal(got, want, err_msg=msg)
                else:
                    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=msg)

    run()
