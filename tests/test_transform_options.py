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
    with pytest.raises(xg.XpgradTypeError, match=r"jacrev: argument \d has dtype int"):
        xg.jacrev(lambda a, b: a * xg.astype(b, a.dtype), argnums=1)(x, n)


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
