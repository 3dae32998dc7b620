"""Transforms' options as JAX has them: allow_int, linearize(has_aux), donate_argnames,
custom_vjp(nondiff_argnames), checkpoint(policy); compared with JAX where it has the option."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def _mul_sum(x: Any, n: Any) -> Any:
    xp = xg.array_namespace(x)
    return xp.sum(x * xp.astype(n, x.dtype))


# ---------------------------------------------------------------------- 1. allow_int


def test_grad_allow_int_gives_float0_zeros_as_jax(backend: Any) -> None:
    x_np, n_np = np.array([1.0, 2.0, 3.0]), np.array([0, 1, 2])
    x, n = backend.asarray(x_np), backend.asarray(n_np)
    want = jax.grad(lambda a, b: jnp.sum(a * b), argnums=(0, 1), allow_int=True)(jnp.asarray(x_np), jnp.asarray(n_np))
    for _ in range(2):
        gx, gn = xg.grad(_mul_sum, argnums=(0, 1), allow_int=True)(x, n)
        np.testing.assert_allclose(backend.to_numpy(gx), np.asarray(want[0]))
        assert gn.dtype == jax.dtypes.float0 == xg.functional.float0
        assert gn.shape == want[1].shape == (3,)
    (v, (_, gn2)) = xg.value_and_grad(_mul_sum, argnums=(0, 1), allow_int=True)(x, n)
    np.testing.assert_allclose(float(backend.to_numpy(v)), 8.0)
    assert gn2.dtype == jax.dtypes.float0


def test_grad_allow_int_python_int_bool_and_pytree(backend: Any) -> None:
    x = backend.asarray(np.array([1.0, 2.0]))
    g = xg.grad(lambda t: xg.sum(t["x"]) * t["k"], allow_int=True)({"x": x, "k": 3})
    want = jax.grad(lambda t: jnp.sum(t["x"]) * t["k"], allow_int=True)({"x": jnp.ones(2), "k": 3})
    np.testing.assert_allclose(backend.to_numpy(g["x"]), [3.0, 3.0])
    assert g["k"].dtype == want["k"].dtype == jax.dtypes.float0
    assert g["k"].shape == want["k"].shape == ()
    b = backend.asarray(np.array([True, False]))
    gb = xg.grad(lambda a, m: xg.sum(a * xg.astype(m, a.dtype)), argnums=1, allow_int=True)(x, b)
    assert gb.dtype == jax.dtypes.float0
    assert gb.shape == (2,)


def test_grad_int_argument_without_allow_int_raises(backend: Any) -> None:
    x, n = backend.asarray(np.array([1.0])), backend.asarray(np.array([2]))
    with pytest.raises(TypeError):
        jax.grad(lambda a, b: jnp.sum(a * b), argnums=1)(jnp.ones(1), jnp.asarray([2]))
    with pytest.raises(xg.XpgradTypeError, match=r"grad: argument 1 has dtype int"):
        xg.grad(_mul_sum, argnums=1)(x, n)
    with pytest.raises(xg.XpgradTypeError, match=r"jacrev: argument 1 has dtype int"):
        xg.jacrev(lambda a, b: a * xg.astype(b, a.dtype), argnums=1)(x, n)


def test_jacobians_name_the_integer_argument_and_take_python_floats(backend: Any) -> None:
    """The error names the argument by its position in the call (it said "argument 0": its position
    among argnums); a Python float argument is differentiated as a 0-d array, as JAX does."""
    x = backend.asarray(np.array([1.0, 2.0]))
    n = backend.asarray(np.array([2, 3]))
    for name, transform in (("jacrev", xg.jacrev), ("jacfwd", xg.jacfwd), ("hessian", xg.hessian)):
        for argnums in (1, (0, 1), (1, 0)):
            with pytest.raises(xg.XpgradTypeError, match=rf"{name}: argument 1 has dtype int64; only floating-point"):
                transform(lambda a, b: a * b, argnums=argnums)(x, n)
            with pytest.raises(xg.XpgradTypeError, match=rf"{name}: argument 1 is a Python int; only floating-point"):
                transform(lambda a, b: a * b, argnums=argnums)(x, 3)
    for s in (0.5, 3.0):
        want = (np.diag([s * s, s * s]), 2.0 * s * np.array([1.0, 2.0]))  # d(a b^2)/da, d(a b^2)/db
        got = xg.jacrev(lambda a, b: a * b * b, argnums=(0, 1))(x, s)
        got_fwd = xg.jacfwd(lambda a, b: a * b * b, argnums=(0, 1))(x, s)
        for g, w in zip((*got, *got_fwd), (*want, *want)):
            np.testing.assert_allclose(backend.to_numpy(g), w, rtol=1e-12)


def test_jacrev_allow_int_gives_integer_zeros_as_jax(backend: Any) -> None:
    x_np, n_np = np.array([1.0, 2.0, 3.0]), np.array([0, 1, 2])
    x, n = backend.asarray(x_np), backend.asarray(n_np)

    def f(a: Any, b: Any) -> Any:
        return a * xg.astype(b, a.dtype)

    want = jax.jacrev(lambda a, b: a * b, argnums=(0, 1), allow_int=True)(jnp.asarray(x_np), jnp.asarray(n_np))
    for _ in range(2):
        jx, jn = xg.jacrev(f, argnums=(0, 1), allow_int=True)(x, n)
        np.testing.assert_allclose(backend.to_numpy(jx), np.asarray(want[0]))
        jn_np = backend.to_numpy(jn)
        assert jn_np.shape == want[1].shape == (3, 3)
        assert np.issubdtype(jn_np.dtype, np.integer)
        assert not jn_np.any()


# ---------------------------------------------------------------------- 2. linearize(has_aux=True)


def test_linearize_has_aux_as_jax(backend: Any) -> None:
    x_np, t_np = np.array([1.0, 2.0]), np.array([0.5, -1.0])

    def f(x: Any) -> Any:
        return x**3, {"sum": xg.sum(x)}

    def fj(x: Any) -> Any:
        return x**3, {"sum": jnp.sum(x)}

    y_j, jvp_j, aux_j = jax.linearize(fj, jnp.asarray(x_np), has_aux=True)
    y, f_jvp, aux = xg.linearize(f, backend.asarray(x_np), has_aux=True)
    np.testing.assert_allclose(backend.to_numpy(y), np.asarray(y_j))
    np.testing.assert_allclose(float(backend.to_numpy(aux["sum"])), float(aux_j["sum"]))
    for k in range(3):
        t = t_np * (k + 1)
        np.testing.assert_allclose(backend.to_numpy(f_jvp(backend.asarray(t))), np.asarray(jvp_j(jnp.asarray(t))))
    _, f_jvp2 = xg.linearize(lambda x: x**3, backend.asarray(x_np))
    np.testing.assert_allclose(backend.to_numpy(f_jvp2(backend.asarray(t_np))), 3 * x_np**2 * t_np)


# ---------------------------------------------------------------------- 3. jit(donate_argnames=)


def _h(x: Any, y: Any) -> Any:
    return xg.cos(x) * y + xg.sin(y)


def test_jit_donate_argnames_keyword_and_positional(backend: Any) -> None:
    x0 = np.linspace(-1.0, 1.0, 6)
    want = backend.to_numpy(_h(backend.asarray(x0), backend.asarray(2.0 * x0)))
    f = xg.jit(_h, donate_argnames="x")
    assert f.donate_argnums == (0,)  # implied through the signature, as jax.jit infers it
    for k in range(3):
        x, y = backend.asarray(x0), backend.asarray(2.0 * x0)
        out = f(x=x, y=y) if k % 2 else f(x, y=y)
        np.testing.assert_allclose(backend.to_numpy(out), want)
        np.testing.assert_array_equal(backend.to_numpy(y), 2.0 * x0)  # (not donated: never written)
    g = xg.jit(_h, donate_argnums=1)
    assert g.donate_argnames == ("y",)
    np.testing.assert_allclose(backend.to_numpy(g(backend.asarray(x0), y=backend.asarray(2.0 * x0))), want)


def test_jit_donate_argnames_writes_the_donated_buffer_on_numpy() -> None:
    x0 = np.linspace(-1.0, 1.0, 6)
    want = _h(x0, 2.0 * x0).data
    f = xg.jit(_h, donate_argnames="x")
    f(x=x0.copy(), y=2.0 * x0)
    x = x0.copy()
    np.testing.assert_array_equal(f(x=x, y=2.0 * x0).data, want)
    assert not np.array_equal(x, x0)  # the donated buffer held an intermediate
    y = 2.0 * x0
    for _ in range(2):
        f(x=x0.copy(), y=y)
    np.testing.assert_array_equal(y, 2.0 * x0)


def test_jit_donate_argnames_unknown_name_raises_as_jax() -> None:
    with pytest.raises(ValueError, match="donate_argnames"):
        jax.jit(lambda x, y: x + y, donate_argnames="z")
    with pytest.raises(xg.XpgradValueError, match=r"jit: donate_argnames names \['z'\]"):
        xg.jit(_h, donate_argnames="z")
    with pytest.raises(xg.XpgradTypeError, match="donate_argnames must be a str"):
        xg.jit(_h, donate_argnames=3)  # type: ignore[arg-type]
    with pytest.raises(xg.XpgradValueError, match="both static and donated"):
        xg.jit(_h, static_argnames="y", donate_argnames="y")
    xg.jit(lambda x, **kw: x, donate_argnames="z")  # (**kwargs takes any name, as in JAX)


def test_jit_static_argnums_out_of_range_raises_at_the_call(backend: Any) -> None:
    f = xg.jit(_h, static_argnums=5)
    x = backend.asarray(np.ones(2))
    for _ in range(2):
        with pytest.raises(xg.XpgradValueError, match=r"static_argnums \(5,\) names argument 5, but the call has 2"):
            f(x, x)


# ---------------------------------------------------------------------- 4. custom_vjp(nondiff_argnames=)


def _make_scaled_clip(lib: Any, custom_vjp: Any) -> Any:
    """``scale * x`` whose gradient is clipped to [-bound, bound]; ``bound`` named nondiff."""

    def f(x: Any, bound: float, scale: Any) -> Any:
        return x * scale

    g = custom_vjp(f, nondiff_argnames=("bound",))

    def fwd(x: Any, bound: float, scale: Any) -> Any:
        return x * scale, (x, scale)

    def bwd(bound: float, res: Any, ct: Any) -> Any:
        x, scale = res
        return lib.clip(ct * scale, -bound, bound), lib.sum(ct * x)

    g.defvjp(fwd, bwd)
    return g


def test_custom_vjp_nondiff_argnames_as_jax(backend: Any) -> None:
    x_np, s_np = np.array([0.5, -1.0, 2.0]), np.array(3.0)
    gj = _make_scaled_clip(jnp, jax.custom_vjp)
    assert gj.nondiff_argnums == (1,)
    want = jax.grad(lambda x, s: jnp.sum(gj(x, 2.0, s) * jnp.asarray([1.0, 1.0, 0.1])), argnums=(0, 1))(
        jnp.asarray(x_np), jnp.asarray(s_np))
    x, s = backend.asarray(x_np), backend.asarray(s_np)
    w = backend.asarray(np.array([1.0, 1.0, 0.1]))
    g = _make_scaled_clip(xg, xg.custom_vjp)
    assert g.nondiff_argnums == (1,)
    for bound_kw in (False, True):  # (the name may come positionally or by keyword)
        def loss(x: Any, s: Any, bound_kw: bool = bound_kw) -> Any:
            y = g(x, bound=2.0, scale=s) if bound_kw else g(x, 2.0, s)
            return xg.sum(y * w)

        gx, gs = xg.grad(loss, argnums=(0, 1))(x, s)
        np.testing.assert_allclose(backend.to_numpy(gx), np.asarray(want[0]))
        np.testing.assert_allclose(float(backend.to_numpy(gs)), float(want[1]))


def test_custom_vjp_nondiff_argnames_join_argnums_and_bad_names() -> None:
    def f(a: Any, b: Any, c: Any) -> Any:
        return a

    assert xg.custom_vjp(f, nondiff_argnums=(0,), nondiff_argnames=("c",)).nondiff_argnums == (0, 2)
    assert jax.custom_vjp(f, nondiff_argnums=(0,), nondiff_argnames=("c",)).nondiff_argnums == (0, 2)
    assert xg.custom_jvp(f, nondiff_argnames=("b",)).nondiff_argnums == (1,)
    with pytest.raises(xg.XpgradValueError, match=r"custom_vjp f: nondiff_argnames names \['z'\]"):
        xg.custom_vjp(f, nondiff_argnames=("z",))
    with pytest.raises(xg.XpgradTypeError, match="nondiff_argnames must be a sequence of str"):
        xg.custom_vjp(f, nondiff_argnames=(1,))  # type: ignore[arg-type]


# ---------------------------------------------------------------------- 5. checkpoint(policy=)

_POLICIES = ["nothing_saveable", "everything_saveable", "dots_saveable", "checkpoint_dots"]
# (primitive runs in forward + backward for the block below: matmul x2, sin x1 in the forward)
_RUNS = {"nothing_saveable": {"matmul": 4, "sin": 2}, "everything_saveable": {"matmul": 2, "sin": 1},
         "dots_saveable": {"matmul": 2, "sin": 2}, "checkpoint_dots": {"matmul": 2, "sin": 2}}


def _count_runs(monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]) -> dict[str, int]:
    from xpgrad.autograd._core import PRIMITIVES

    counts = dict.fromkeys(names, 0)
    for n in names:
        prim, fwd = PRIMITIVES[n], PRIMITIVES[n].fwd

        def counted(xp: Any, *a: Any, _fwd: Any = fwd, _n: str = n, **k: Any) -> Any:
            counts[_n] += 1
            return _fwd(xp, *a, **k)

        monkeypatch.setattr(prim, "fwd", counted)
    return counts


def _block_and_data(backend: Any) -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(0)
    w_np, x_np = rng.standard_normal((3, 3)), rng.standard_normal((2, 3))
    w = backend.asarray(w_np)

    def block(x: Any) -> Any:
        return xg.sin(x @ w) @ w

    return block, backend.asarray(x_np), (w_np, x_np)


@pytest.mark.parametrize("name", _POLICIES)
def test_checkpoint_policy_changes_what_backward_recomputes(backend: Any, name: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    block, x, (w_np, x_np) = _block_and_data(backend)
    policy = getattr(xg.checkpoint_policies, name)
    want = jax.grad(lambda x: jnp.sum(jax.checkpoint(lambda h: jnp.sin(h @ w_np) @ w_np,
                                                     policy=getattr(jax.checkpoint_policies, name))(x)))(x_np)
    counts = _count_runs(monkeypatch, ("matmul", "sin"))
    for _ in range(2):
        for k in counts:
            counts[k] = 0
        g = xg.grad(lambda x: xg.sum(xg.checkpoint(block, policy=policy)(x)))(x)
        assert counts == _RUNS[name]
        np.testing.assert_allclose(backend.to_numpy(g), np.asarray(want), rtol=1e-6)
        plain = xg.grad(lambda x: xg.sum(block(x)))(x)
        np.testing.assert_allclose(backend.to_numpy(g), backend.to_numpy(plain), rtol=1e-12)


def test_checkpoint_custom_policy_and_second_order(backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    block, x, _ = _block_and_data(backend)
    counts = _count_runs(monkeypatch, ("matmul", "sin"))
    keep_sin = xg.checkpoint(block, policy=lambda prim, *a, **k: prim.name == "sin")
    g = xg.grad(lambda x: xg.sum(keep_sin(x)))(x)
    assert counts == {"matmul": 4, "sin": 1}  # (sin kept: not run again; matmul recomputed)
    np.testing.assert_allclose(backend.to_numpy(g), backend.to_numpy(xg.grad(lambda x: xg.sum(block(x)))(x)))

    def gnorm(f: Any) -> Any:
        return xg.grad(lambda x: xg.sum(xg.grad(lambda y: xg.sum(f(y) ** 2))(x) ** 2))(x)

    want = backend.to_numpy(gnorm(block))
    for name in _POLICIES:
        got = gnorm(xg.checkpoint(block, policy=getattr(xg.checkpoint_policies, name)))
        np.testing.assert_allclose(backend.to_numpy(got), want, rtol=1e-10)


def test_checkpoint_policy_must_be_callable() -> None:
    with pytest.raises(xg.XpgradTypeError, match="checkpoint: policy must be a callable"):
        xg.checkpoint(lambda x: x, policy="dots_saveable")  # type: ignore[arg-type]


def test_jacobians_at_top_level_do_not_require_grad_as_grad(backend: Any) -> None:
    """``hessian(f)(w)`` of a Tensor that requires grad (a Parameter) gives a constant, as ``grad(f)(w)`` does
    (it gave a Tensor on w's graph); inside an outer transform it is still differentiated."""
    w0 = np.array([1.0, 2.0, -0.5])
    w = xg.nn.Parameter(xg.asarray(backend.asarray(w0)))

    def f(t: Any) -> Any:
        return xg.sum(t * t * t)

    want = {"hessian": np.diag(6.0 * w0), "jacrev": np.diag(3.0 * w0 * w0), "jacfwd": np.diag(3.0 * w0 * w0)}
    for name, res in (("hessian", xg.hessian(f)(w)), ("jacrev", xg.jacrev(lambda t: t * t * t)(w)),
                      ("jacfwd", xg.jacfwd(lambda t: t * t * t)(w)), ("grad", xg.grad(f)(w))):
        assert isinstance(res, xg.Tensor) and not res.requires_grad and res.grad_fn is None, name
        np.testing.assert_allclose(backend.to_numpy(res), want.get(name, 3.0 * w0 * w0), rtol=1e-12)
    third = xg.grad(lambda t: xg.sum(xg.hessian(f)(t)))(backend.asarray(w0))  # d/dt sum(diag(6 t)) = 6
    np.testing.assert_allclose(backend.to_numpy(third), np.full(3, 6.0), rtol=1e-12)
