"""grad / value_and_grad on raw arrays of every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg


def loss(w: Any, x: Any, y: Any) -> Any:
    xp = xg.array_namespace(w, x, y)
    r = x * w - y
    return xp.sum(r * r)


def test_grad_returns_the_inputs_array_type(backend: Any) -> None:
    w = backend.asarray(np.array([1.0, 2.0]))
    x = backend.asarray(np.array([3.0, 4.0]))
    y = backend.asarray(np.array([0.5, 0.5]))
    g = xg.grad(loss)(w, x, y)
    assert type(g) is type(w)
    np.testing.assert_allclose(backend.to_numpy(g), 2 * (np.array([3.0, 8.0]) - 0.5) * np.array([3.0, 4.0]))


def test_value_and_grad_argnums_and_aux(backend: Any) -> None:
    w = backend.asarray(np.array([1.0, 2.0]))
    x = backend.asarray(np.array([3.0, 4.0]))
    y = backend.asarray(np.array([0.0, 0.0]))

    def with_aux(w: Any, x: Any, y: Any) -> Any:
        value = loss(w, x, y)
        return value, {"w": w}

    (v, aux), (gw, gx) = xg.value_and_grad(with_aux, argnums=(0, 1), has_aux=True)(w, x, y)
    assert float(backend.to_numpy(v)) == pytest.approx(9 + 64)
    assert type(aux["w"]) is type(w)
    np.testing.assert_allclose(backend.to_numpy(gw), [18.0, 64.0])
    np.testing.assert_allclose(backend.to_numpy(gx), [6.0, 32.0])
    g, _aux = xg.grad(with_aux, has_aux=True)(w, x, y)
    np.testing.assert_allclose(backend.to_numpy(g), [18.0, 64.0])


def test_output_independent_of_input_gives_zeros() -> None:
    g = xg.grad(lambda w, x: xg.sum(x * 2.0))(np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0])
    g = xg.grad(lambda w: np.asarray(3.0))(np.array([1.0]))  # a constant array: zeros, as in JAX
    np.testing.assert_array_equal(g, [0.0])
    with pytest.raises(xg.CutGraphError, match="returned a Python float, not an array"):
        xg.grad(lambda w: 3.0)(np.array([1.0]))  # a Python number is never an output (tests/test_cut_graph.py)


def test_errors() -> None:
    with pytest.raises(xg.XpgradValueError, match="scalar"):
        xg.grad(lambda w: w * 2)(np.array([1.0, 2.0]))
    with pytest.raises(xg.XpgradTypeError, match="int64"):
        xg.grad(lambda w: xg.sum(w))(np.array([1, 2]))
    with pytest.raises(xg.XpgradTypeError, match="must return a scalar array"):
        xg.grad(lambda w: "nope")(np.array([1.0]))
    with pytest.raises(xg.XpgradValueError, match="argnums"):
        xg.grad(lambda w: xg.sum(w), argnums=3)(np.array([1.0]))
    with pytest.raises(xg.XpgradTypeError, match="has_aux"):
        xg.grad(lambda w: xg.sum(w), has_aux=True)(np.array([1.0]))
    with pytest.raises(xg.XpgradTypeError, match="argument 0"):
        xg.grad(lambda w: 1.0)("text")


def test_one_element_output_is_accepted() -> None:
    g = xg.grad(lambda w: w * 3.0)(np.array([2.0]))
    np.testing.assert_allclose(g, [3.0])


def test_python_scalar_argument() -> None:
    g = xg.grad(lambda x: x * x)(3.0)
    assert float(g) == 6.0


def test_pytree_arguments() -> None:
    params = {"w": np.array([1.0, 2.0]), "b": [np.array(0.5)]}

    def f(p: Any, x: Any) -> Any:
        xp = xg.array_namespace(p["w"], x)
        return xp.sum(p["w"] * x + p["b"][0])

    g = xg.grad(f)(params, np.array([3.0, 4.0]))
    np.testing.assert_allclose(g["w"], [3.0, 4.0])
    np.testing.assert_allclose(g["b"][0], 2.0)
    assert isinstance(g["b"], list)


def test_nested_grad(backend: Any) -> None:
    x = backend.asarray(np.array(0.7))

    def f(x: Any) -> Any:
        xp = xg.array_namespace(x)
        return xp.sum(xp.sin(x) * x * x)

    d1 = xg.grad(f)
    d2 = xg.grad(d1)
    x0 = 0.7
    want1 = np.cos(x0) * x0**2 + 2 * x0 * np.sin(x0)
    want2 = -np.sin(x0) * x0**2 + 4 * x0 * np.cos(x0) + 2 * np.sin(x0)
    np.testing.assert_allclose(float(backend.to_numpy(d1(x))), want1)
    np.testing.assert_allclose(float(backend.to_numpy(d2(x))), want2)


def test_nested_grad_through_closure() -> None:
    # d/dx [ d/dy (x*y*y) at y=2 ] = d/dx [4x] = 4
    def outer(x: Any) -> Any:
        inner = xg.grad(lambda y: xg.sum(x * y * y))
        return xg.sum(inner(np.array(2.0)))

    assert float(xg.grad(outer)(np.array(5.0))) == pytest.approx(4.0)


def test_tensor_inputs_give_tensor_outputs() -> None:
    t = xg.asarray([1.0, 2.0])
    g = xg.grad(lambda w: xg.sum(w * w))(t)
    assert isinstance(g, xg.Tensor)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])


def test_grad_restores_grad_mode() -> None:
    with xg.no_grad():
        g = xg.grad(lambda w: xg.sum(w * w))(np.array([3.0]))
        assert not xg.is_grad_enabled()
    np.testing.assert_allclose(g, [6.0])


def test_grad_refuses_a_complex_output_unless_holomorphic() -> None:
    z = np.array([1 + 2j, 3 - 1j])

    def f(z: Any) -> Any:
        return xg.sum(z * z * z)

    with pytest.raises(xg.XpgradTypeError, match=r"grad: f returned a complex output.*holomorphic=True"):
        xg.grad(f)(z)
    with pytest.raises(TypeError, match="value_and_grad: f returned a complex output"):
        xg.value_and_grad(f)(z)
    np.testing.assert_allclose(xg.grad(f, holomorphic=True)(z), 3 * z**2, rtol=1e-12)  # f'(z), as JAX
    v, g = xg.value_and_grad(f, holomorphic=True)(z)
    np.testing.assert_allclose(v, np.sum(z**3)) and np.testing.assert_allclose(g, 3 * z**2, rtol=1e-12)
    with pytest.raises(xg.XpgradTypeError, match=r"grad: holomorphic=True needs complex inputs, got xpgrad\.float64"):
        xg.grad(lambda x: xg.sum(x * 1j), holomorphic=True)(np.array([1.0]))
    # the real part of a complex computation: a real gradient, PyTorch's convention
    g = xg.grad(lambda z: xg.real(f(z)))(z)
    np.testing.assert_allclose(np.conj(g), 3 * z**2, rtol=1e-12)
