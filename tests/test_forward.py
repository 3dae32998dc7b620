"""Forward mode and the JAX-style transforms: jvp, vjp, jacobian (rev/fwd), hessian, hvp,
linearize, stop_gradient, custom_vjp/custom_jvp; nesting without perturbation confusion,
composition to third order, raw and Tensor inputs, error paths, on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.autograd._core import FWD_LEVELS, PRIMITIVES


def f_sin_x(x: Any) -> Any:
    xp = xg.array_namespace(x)
    return xp.sin(x) * x


def loss(x: Any) -> Any:
    xp = xg.array_namespace(x)
    return xp.sum(xp.sin(x) * x + x**3)


def d1(x: np.ndarray) -> np.ndarray:  # derivatives of sin(x) * x
    return np.cos(x) * x + np.sin(x)


def d2(x: np.ndarray) -> np.ndarray:
    return 2 * np.cos(x) - x * np.sin(x)


def d3(x: np.ndarray) -> np.ndarray:
    return -3 * np.sin(x) - x * np.cos(x)


def hess_loss(x: np.ndarray) -> np.ndarray:
    return np.diag(d2(x) + 6 * x)


X = np.array([0.3, -1.2, 0.7])
V = np.array([1.0, 0.5, -2.0])


def dfwd(f: Any) -> Any:
    """The forward-mode derivative of a scalar-to-scalar (elementwise) function."""

    def df(x: Any) -> Any:
        one = xg.ones_like(x) if isinstance(x, xg.Tensor) else 1.0 + 0.0 * x
        return xg.jvp(f, (x,), (one,))[1]

    return df


def drev(f: Any) -> Any:
    """The reverse-mode derivative of an elementwise function."""
    return xg.grad(lambda x: xg.sum(f(x)))


# ---------------------------------------------------------------------- jvp
def test_jvp_values_and_types(backend: Any) -> None:
    x, v = backend.asarray(X), backend.asarray(V)
    y, t = xg.jvp(f_sin_x, (x,), (v,))
    assert type(y) is type(x) and type(t) is type(x)
    np.testing.assert_allclose(backend.to_numpy(y), np.sin(X) * X)
    np.testing.assert_allclose(backend.to_numpy(t), d1(X) * V)


def test_jvp_tensor_inputs_give_tensors(backend: Any) -> None:
    x = xg.asarray(backend.asarray(X))
    y, t = xg.jvp(f_sin_x, (x,), (xg.asarray(backend.asarray(V)),))
    assert isinstance(y, xg.Tensor) and isinstance(t, xg.Tensor)
    np.testing.assert_allclose(backend.to_numpy(t), d1(X) * V)
    assert not y._fw  # the level's tangent does not leak out


def test_jvp_pytrees_and_aux() -> None:
    def f(p: Any, s: Any) -> Any:
        return {"u": p["a"] * p["b"][0], "w": [p["a"] * s]}, "aux"

    p = {"a": np.array([1.0, 2.0]), "b": [np.array([3.0, 4.0])]}
    tp = {"a": np.array([1.0, 0.0]), "b": [np.array([0.0, 1.0])]}
    out, tan, aux = xg.jvp(f, (p, np.array(2.0)), (tp, np.array(1.0)), has_aux=True)
    assert aux == "aux"
    np.testing.assert_allclose(out["u"], [3.0, 8.0])
    np.testing.assert_allclose(tan["u"], [3.0, 2.0])
    np.testing.assert_allclose(tan["w"][0], [3.0, 2.0])


def test_jvp_constant_output_and_python_scalars() -> None:
    _, t = xg.jvp(lambda x: xg.asarray([5.0]), (np.array([1.0]),), (np.array([1.0]),))
    np.testing.assert_array_equal(t, [0.0])
    _y, t = xg.jvp(lambda x: x * 3.0, (2.0,), (1.0,))
    assert float(t) == 3.0


def test_jvp_complex_is_the_holomorphic_derivative() -> None:
    z = np.array([0.3 + 0.4j, -1.0 + 2.0j])
    v = np.array([1.0 + 0.0j, 0.5 - 1.0j])
    _, t = xg.jvp(lambda z: xg.exp(z) * z, (z,), (v,))
    np.testing.assert_allclose(t, (np.exp(z) * z + np.exp(z)) * v)
    _, t = xg.jvp(xg.abs, (z,), (v,))  # real-valued: the real directional derivative
    np.testing.assert_allclose(t, np.real(np.conj(z) * v) / np.abs(z))


def test_jvp_errors() -> None:
    x = np.array([1.0, 2.0])
    with pytest.raises(xg.XpgradTypeError, match="tuples"):
        xg.jvp(f_sin_x, x, x)
    with pytest.raises(xg.XpgradValueError, match="2 primals but 1 tangents"):
        xg.jvp(lambda a, b: a * b, (x, x), (x,))
    with pytest.raises(xg.XpgradValueError, match=r"tangent 0 has shape \(3,\)"):
        xg.jvp(f_sin_x, (x,), (np.ones(3),))
    with pytest.raises(xg.XpgradTypeError, match="tangent 0 has dtype float32"):
        xg.jvp(f_sin_x, (x,), (np.ones(2, dtype=np.float32),))
    with pytest.raises(xg.XpgradTypeError, match="int64"):
        xg.jvp(f_sin_x, (np.array([1, 2]),), (np.array([1, 2]),))
    with pytest.raises(xg.XpgradValueError, match="same structure"):
        xg.jvp(lambda p: p[0], ([x, x],), ([x],))
    with pytest.raises(xg.XpgradTypeError, match="must return arrays"):
        xg.jvp(lambda a: "nope", (x,), (x,))
    assert FWD_LEVELS.get() == ()  # the level is closed after an error


def test_forward_mode_through_no_grad_and_inplace() -> None:
    def f(x: Any) -> Any:
        with xg.no_grad():
            y = x * 2.0  # forward mode is not switched off by no_grad (as in PyTorch)
        y += x
        y[0] = x[1] * 10.0
        return y

    _, t = xg.jvp(f, (np.array([1.0, 2.0]),), (np.array([1.0, 1.0]),))
    np.testing.assert_allclose(t, [10.0, 3.0])


def test_detach_drops_tangents() -> None:
    _, t = xg.jvp(lambda x: x * x.detach(), (np.array([3.0]),), (np.array([1.0]),))
    np.testing.assert_allclose(t, [3.0])


def test_missing_jvp_rule_fails_loudly() -> None:
    from xpgrad.autograd import primitive

    p = PRIMITIVES.get("fwd_test_no_jvp") or primitive("fwd_test_no_jvp", lambda xp, x: x * 2, chapter="internal")
    p.defvjp(lambda xp, g, ans, x: 2 * g)
    with pytest.raises(xg.NonDifferentiableError, match="fwd_test_no_jvp: no forward-mode"):
        xg.jvp(p, (np.array([1.0]),), (np.array([1.0]),))


def test_every_differentiable_primitive_has_jvp_rules() -> None:
    import importlib

    for mod in ("xpgrad.linalg", "xpgrad.fft", "xpgrad.special", "xpgrad.nn.functional"):
        importlib.import_module(mod)  # register their primitives
    missing = sorted(
        name for name, p in PRIMITIVES.items()
        if not p.const and getattr(p.fwd, "__module__", "").startswith("xpgrad.")  # not the tests' own
        and any(p.vjp_rule(i) is not None and p.jvp_rule(i) is None for i in range(4))
    )
    assert not missing, f"primitives with a VJP rule but no JVP rule: {missing}"


# ---------------------------------------------------------------------- vjp
def test_vjp(backend: Any) -> None:
    x, y = backend.asarray(X), backend.asarray(V)
    out, pull = xg.vjp(lambda a, b: a * b, x, y)
    np.testing.assert_allclose(backend.to_numpy(out), X * V)
    g = backend.asarray(np.array([1.0, 2.0, 3.0]))
    gx, gy = pull(g)
    assert type(gx) is type(x)
    np.testing.assert_allclose(backend.to_numpy(gx), V * [1, 2, 3])
    np.testing.assert_allclose(backend.to_numpy(gy), X * [1, 2, 3])
    gx2, _ = pull(g)  # callable again
    np.testing.assert_allclose(backend.to_numpy(gx2), backend.to_numpy(gx))


def test_vjp_pytrees_aux_unused_and_errors() -> None:
    x = np.array([1.0, 2.0])
    _out, pull, aux = xg.vjp(lambda p, c: ({"s": p[0] * 2.0}, 7), [x, x], np.array(1.0), has_aux=True)
    assert aux == 7
    (gp, gc) = pull({"s": np.ones(2)})
    np.testing.assert_allclose(gp[0], [2.0, 2.0])
    np.testing.assert_array_equal(gp[1], [0.0, 0.0])  # unused: zeros
    np.testing.assert_array_equal(gc, 0.0)
    with pytest.raises(xg.XpgradValueError, match="shape"):
        pull({"s": np.ones(3)})
    with pytest.raises(xg.XpgradTypeError, match="dtype"):
        pull({"s": np.ones(2, dtype=np.float32)})
    with pytest.raises(xg.XpgradValueError, match="same structure"):
        pull([np.ones(2)])
    with pytest.raises(xg.XpgradTypeError, match="pair"):
        xg.vjp(lambda a: a, x, has_aux=True)


# ---------------------------------------------------------------------- jacobians
@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_jacobian(backend: Any, mode: str) -> None:
    x = backend.asarray(X)
    jac = xg.jacobian(lambda a: a[:2] * a[1:], mode=mode)(x)
    want = np.array([[X[1], X[0], 0.0], [0.0, X[2], X[1]]])
    np.testing.assert_allclose(backend.to_numpy(jac), want)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_jacobian_argnums_pytrees_aux(mode: str) -> None:
    a, b = np.array([[1.0, 2.0]]), np.array(3.0)

    def f(a: Any, b: Any) -> Any:
        return {"p": a * b, "q": xg.sum(a) + b}, "aux"

    jac, aux = xg.jacobian(f, argnums=(0, 1), mode=mode, has_aux=True)(a, b)
    assert aux == "aux"
    assert jac["p"][0].shape == (1, 2, 1, 2) and jac["p"][1].shape == (1, 2)
    np.testing.assert_allclose(jac["p"][0].reshape(2, 2), 3.0 * np.eye(2))
    np.testing.assert_allclose(jac["p"][1], [[1.0, 2.0]])
    np.testing.assert_allclose(jac["q"][0], [[1.0, 1.0]])
    np.testing.assert_allclose(jac["q"][1], 1.0)


def test_jacobian_complex_needs_holomorphic() -> None:
    z = np.array([0.3 + 0.4j, 1.0 - 1.0j])
    with pytest.raises(xg.XpgradTypeError, match="holomorphic"):
        xg.jacfwd(xg.exp)(z)
    with pytest.raises(xg.XpgradTypeError, match="holomorphic"):
        xg.jacrev(xg.exp)(z)
    for mode in ("rev", "fwd"):
        jac = xg.jacobian(lambda z: z * z, mode=mode, holomorphic=True)(z)
        np.testing.assert_allclose(jac, np.diag(2 * z))
    with pytest.raises(xg.XpgradValueError, match="mode"):
        xg.jacobian(xg.exp, mode="both")


def test_hessian_and_hvp(backend: Any) -> None:
    x, v = backend.asarray(X), backend.asarray(V)
    np.testing.assert_allclose(backend.to_numpy(xg.hessian(loss)(x)), hess_loss(X), atol=1e-12)
    np.testing.assert_allclose(backend.to_numpy(xg.hvp(loss, (x,), (v,))), hess_loss(X) @ V, atol=1e-12)
    for outer in (xg.jacfwd, xg.jacrev):
        for inner in (xg.jacfwd, xg.jacrev):
            np.testing.assert_allclose(backend.to_numpy(outer(inner(loss))(x)), hess_loss(X), atol=1e-12)


def test_hvp_several_primals_and_linearize() -> None:
    def f(a: Any, b: Any) -> Any:
        return xg.sum(a * a * b)

    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    ha, hb = xg.hvp(f, (a, b), (np.array([1.0, 0.0]), np.array([0.0, 1.0])))
    np.testing.assert_allclose(ha, [6.0, 4.0])  # d2f/da2 @ va + d2f/dadb @ vb
    np.testing.assert_allclose(hb, [2.0, 0.0])
    y, f_jvp = xg.linearize(f_sin_x, X)
    np.testing.assert_allclose(y, np.sin(X) * X)
    np.testing.assert_allclose(f_jvp(V), d1(X) * V)


# ---------------------------------------------------------------------- nesting and composition
def test_no_perturbation_confusion() -> None:
    # d/dx [x * d/dy (x + y)] = 1 (Siskind & Pearlmutter); confusion would give 2
    one = np.array(1.0)
    got = dfwd(lambda x: x * dfwd(lambda y: x + y)(one))(one)
    assert float(got) == 1.0
    got = dfwd(lambda x: x * drev(lambda y: x * y)(one))(np.array(2.0))
    assert float(got) == 4.0  # d/dx [x * x] at 2
    got = drev(lambda x: x * dfwd(lambda y: x * y)(one))(np.array(2.0))
    assert float(got) == 4.0


@pytest.mark.parametrize("combo", ["fff", "rrr", "frf", "rfr", "ffr", "rrf", "frr", "rff"])
def test_third_order_compositions(backend: Any, combo: str) -> None:
    x = backend.asarray(X)
    f = f_sin_x
    for c in combo:
        f = dfwd(f) if c == "f" else drev(f)
    np.testing.assert_allclose(backend.to_numpy(f(x)), d3(X), rtol=1e-12, atol=1e-12)


def test_jvp_of_grad_and_grad_of_jvp(backend: Any) -> None:
    x, v = backend.asarray(X), backend.asarray(V)
    _, t = xg.jvp(xg.grad(loss), (x,), (v,))
    np.testing.assert_allclose(backend.to_numpy(t), hess_loss(X) @ V, atol=1e-12)
    g = xg.grad(lambda a: xg.sum(xg.jvp(f_sin_x, (a,), (v,))[1]))(x)
    np.testing.assert_allclose(backend.to_numpy(g), d2(X) * V, atol=1e-12)


def test_tensor_api_create_graph_inside_jvp() -> None:
    def gradient(x: Any) -> Any:
        x.requires_grad_()  # the leaf jvp made for the primal; its tangent stays on it
        (gx,) = xg.autograd.grad(xg.sum(x**3), x, create_graph=True)
        return gx

    _, t = xg.jvp(gradient, (np.array([2.0, 1.0]),), (np.array([1.0, 3.0]),))
    np.testing.assert_allclose(t, [12.0, 18.0])
    x = xg.asarray([2.0], requires_grad=True)
    (gx,) = xg.autograd.grad(xg.sum(x**3), x, create_graph=True)
    gx.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [12.0])


def test_stop_gradient(backend: Any) -> None:
    x = backend.asarray(X)
    g = xg.grad(lambda a: xg.sum(a * xg.stop_gradient(a)))(x)
    np.testing.assert_allclose(backend.to_numpy(g), X)
    _, t = xg.jvp(lambda a: a * xg.stop_gradient([a])[0], (x,), (backend.asarray(V),))
    np.testing.assert_allclose(backend.to_numpy(t), X * V)
    assert xg.stop_gradient(x) is x  # raw arrays are constants already


# ---------------------------------------------------------------------- custom rules
@xg.custom_vjp
def clipped_cube(x: Any) -> Any:
    return x * x * x


def _cube_fwd(x: Any) -> Any:
    return x * x * x, x


def _cube_bwd(x: Any, g: Any) -> Any:
    return (3.0 * x * x * g,)


clipped_cube.defvjp(_cube_fwd, _cube_bwd)


@xg.custom_jvp
def softplus(x: Any) -> Any:
    xp = xg.array_namespace(x)
    return xp.log(1.0 + xp.exp(x))


@softplus.defjvp
def _softplus_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    xp = xg.array_namespace(x)
    return softplus(x), t / (1.0 + xp.exp(-x))


def test_custom_vjp_all_orders(backend: Any) -> None:
    x = backend.asarray(np.array([2.0, -1.0]))
    xx = np.array([2.0, -1.0])
    g = xg.grad(lambda a: xg.sum(clipped_cube(a)))(x)
    np.testing.assert_allclose(backend.to_numpy(g), 3 * xx**2)
    h = xg.hessian(lambda a: xg.sum(clipped_cube(a)))(x)
    np.testing.assert_allclose(backend.to_numpy(h), np.diag(6 * xx))
    g2 = drev(drev(clipped_cube))(x)
    np.testing.assert_allclose(backend.to_numpy(g2), 6 * xx)
    _, t = xg.jvp(clipped_cube, (x,), (backend.asarray(np.ones(2)),))
    np.testing.assert_allclose(backend.to_numpy(t), 3 * xx**2)
    np.testing.assert_allclose(backend.to_numpy(clipped_cube(x)), xx**3)


def test_custom_vjp_is_used() -> None:
    @xg.custom_vjp
    def f(x: Any, scale: float) -> Any:
        return x * scale

    f.defvjp(lambda x, s: (x * s, None), lambda r, g: (g * 100.0, None))
    g = xg.grad(lambda x: xg.sum(f(x, 2.0)))(np.array([1.0]))
    np.testing.assert_allclose(g, [100.0])


def test_custom_jvp_all_orders(backend: Any) -> None:
    xx = np.array([0.5, 3.0])
    x = backend.asarray(xx)
    sig = 1 / (1 + np.exp(-xx))
    _, t = xg.jvp(softplus, (x,), (backend.asarray(np.ones(2)),))
    np.testing.assert_allclose(backend.to_numpy(t), sig)
    g = xg.grad(lambda a: xg.sum(softplus(a)))(x)  # the transposed rule
    np.testing.assert_allclose(backend.to_numpy(g), sig)
    for f in (dfwd(dfwd(softplus)), drev(drev(softplus)), dfwd(drev(softplus)), drev(dfwd(softplus))):
        np.testing.assert_allclose(backend.to_numpy(f(x)), sig * (1 - sig), atol=1e-12)


def test_custom_rule_errors_name_the_rule() -> None:
    x = np.array([1.0, 2.0])

    @xg.custom_vjp
    def f(x: Any) -> Any:
        return x * 2.0

    with pytest.raises(xg.XpgradRuntimeError, match="no rule defined"):
        xg.grad(lambda a: xg.sum(f(a)))(x)

    def bad_count(r: Any, g: Any) -> Any:
        return (g, g)

    f.defvjp(lambda x: (x * 2.0, None), bad_count)
    with pytest.raises(xg.XpgradTypeError, match="bad_count must return a tuple with one cotangent per argument"):
        xg.grad(lambda a: xg.sum(f(a)))(x)

    def bad_shape(r: Any, g: Any) -> Any:
        return (g[:1],)

    f.defvjp(lambda x: (x * 2.0, None), bad_shape)
    with pytest.raises(xg.XpgradValueError, match=r"bad_shape returned shape \(1,\)"):
        xg.grad(lambda a: xg.sum(f(a)))(x)

    def bad_dtype(r: Any, g: Any) -> Any:
        return (xg.astype(g, xg.float32),)

    f.defvjp(lambda x: (x * 2.0, None), bad_dtype)
    with pytest.raises(xg.XpgradTypeError, match="bad_dtype returned dtype float32"):
        xg.grad(lambda a: xg.sum(f(a)))(x)

    def bad_fwd(x: Any) -> Any:
        return x

    f.defvjp(bad_fwd, bad_dtype)
    with pytest.raises(xg.XpgradTypeError, match="bad_fwd must return an"):
        xg.grad(lambda a: xg.sum(f(a)))(x)

    @xg.custom_jvp
    def h(x: Any) -> Any:
        return x * 2.0

    with pytest.raises(xg.XpgradRuntimeError, match="no rule defined"):
        xg.jvp(h, (x,), (x,))

    @h.defjvp
    def bad_jvp(p: Any, t: Any) -> Any:
        return p[0] * 2.0, t[0][:1]

    with pytest.raises(xg.XpgradValueError, match=r"bad_jvp returned shape \(1,\) for the tangent of output 0"):
        xg.jvp(h, (x,), (x,))
    with pytest.raises(xg.XpgradValueError, match="bad_jvp"):
        xg.grad(lambda a: xg.sum(h(a)))(x)
    np.testing.assert_allclose(h(x), x * 2.0)  # not differentiated: the function itself


def test_check_grads_forward_mode_detects_a_wrong_rule() -> None:
    from xpgrad.autograd import primitive
    from xpgrad.testing import check_grads

    p = PRIMITIVES.get("fwd_test_wrong") or primitive("fwd_test_wrong", lambda xp, x: xp.sin(x), chapter="internal")
    p.defvjp(lambda xp, g, ans, x: g * xp.cos(x))
    p.defjvp(lambda xp, t, ans, x: t * xp.sin(x))  # wrong
    check_grads(p, np.array([0.4, 1.0]), modes=("rev",))
    with pytest.raises(AssertionError, match="forward-mode"):
        check_grads(p, np.array([0.4, 1.0]), modes=("fwd",))
    with pytest.raises(xg.XpgradValueError, match="modes"):
        check_grads(p, np.array([0.4]), modes=("sideways",))


def test_check_grads_reverse_mode_detects_a_wrong_rule() -> None:
    from xpgrad.autograd import primitive
    from xpgrad.testing import check_grads

    p = PRIMITIVES.get("rev_test_wrong") or primitive("rev_test_wrong", lambda xp, x: xp.sin(x), chapter="internal")
    p.defvjp(lambda xp, g, ans, x: g * xp.sin(x))  # wrong
    p.defjvp(lambda xp, t, ans, x: t * xp.cos(x))
    check_grads(p, np.array([0.4, 1.0]), modes=("fwd",))
    with pytest.raises(AssertionError, match="order-1 gradient mismatch"):
        check_grads(p, np.array([0.4, 1.0]), modes=("rev",))


def test_forward_level_is_context_local() -> None:
    import threading

    seen: list[Any] = []

    def f(x: Any) -> Any:
        t = threading.Thread(target=lambda: seen.append(FWD_LEVELS.get()))
        t.start()
        t.join()
        seen.append(FWD_LEVELS.get())
        return x

    xg.jvp(f, (np.array([1.0]),), (np.array([1.0]),))
    assert seen[0] == () and len(seen[1]) == 1
