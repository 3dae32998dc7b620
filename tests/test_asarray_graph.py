"""``xg.asarray`` of a nested sequence holding Tensors with a graph (issue 28, item 14).

``xg.asarray([t, 2 * t])`` used to read the Tensors' data: a constant, so the gradient was
0 with no ``CutGraphError``. It now stacks them, as ``jnp.asarray([x, 2 * x])`` is
differentiable in JAX: under ``grad``, ``backward``, ``jvp``, ``vmap`` and ``jit``, nested
lists and Python numbers beside the Tensors included, on every backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg

from ._util import to_numpy


def _np(a: Any) -> np.ndarray:
    return to_numpy(a)


def test_grad_through_a_list_of_tensors(backend: Any) -> None:
    """d/dt sum([t, 2 t]) = 3, per element of a vector t; and the value is the stack."""
    for t0 in (np.asarray(1.5), np.array([1.0, -2.0, 0.5])):
        t = backend.asarray(t0)
        y = xg.asarray([xg.asarray(t), 2 * xg.asarray(t)])
        np.testing.assert_array_equal(_np(y), np.stack([t0, 2 * t0]))
        g = xg.grad(lambda a: xg.sum(xg.asarray([a, 2 * a])))(t)
        np.testing.assert_array_equal(_np(g), np.full_like(t0, 3.0))


def test_nested_lists_with_python_numbers(backend: Any) -> None:
    """[[t, 1.0], [2, t * t]]: the numbers are constants of t's library, the gradient is 1 + 2 t,
    and the dtype is t's (float32 stays float32 beside Python numbers, as JAX's weak types)."""
    for dt in (np.float64, np.float32):
        t0 = np.asarray(1.5, dtype=dt)
        t = backend.asarray(t0)

        def f(a: Any) -> Any:
            m = xg.asarray([[a, 1.0], [2, a * a]])
            assert m.shape == (2, 2) and m.dtype == xg.asarray(t).dtype
            w = xg.asarray(backend.asarray(np.array([[1.0, 10.0], [100.0, 1.0]], dtype=dt)))
            return xg.sum(m * w)

        v, g = xg.value_and_grad(f)(t)
        np.testing.assert_allclose(float(_np(v)), 1.5 + 10 + 200 + 2.25, rtol=1e-6)
        np.testing.assert_allclose(float(_np(g)), 1 + 2 * 1.5, rtol=1e-6)


def test_backward_on_a_leaf_and_a_loop(backend: Any) -> None:
    """Outside the transforms: ``backward()`` reaches the leaf through the list, step after step."""
    t = xg.asarray(backend.asarray(np.array([1.0, 2.0])), requires_grad=True)
    for k in range(1, 4):
        t.grad = None
        y = xg.asarray([t, k * t, [3.0, 4.0]])
        assert y.requires_grad
        xg.sum(y * y).backward()
        np.testing.assert_allclose(_np(t.grad), 2 * (1 + k * k) * np.array([1.0, 2.0]))


def test_forward_mode_and_second_order(backend: Any) -> None:
    """``jvp`` carries the tangent through the stack; the Hessian of sum([t^2, t^3]) is 2 + 6 t."""
    t0 = np.array([0.5, -1.0])
    t = backend.asarray(t0)
    _, tan = xg.jvp(lambda a: xg.asarray([a, 2 * a, 0.0 * a + 1.0]), (t,), (backend.xp.ones_like(t),))
    np.testing.assert_array_equal(_np(tan), np.array([[1.0, 1.0], [2.0, 2.0], [0.0, 0.0]]))
    h = xg.grad(lambda a: xg.sum(xg.grad(lambda b: xg.sum(xg.asarray([b * b, b * b * b])))(a)))(t)
    np.testing.assert_allclose(_np(h), 2 + 6 * t0)


def test_under_vmap(backend: Any) -> None:
    """Each example's list is stacked (it raised before): [t, 2 t, 5] per example, and its
    per-example gradient."""
    t0 = np.array([0.0, 1.0, 2.5])
    t = backend.asarray(t0)
    y = xg.vmap(lambda a: xg.asarray([a, 2 * a, 5]))(t)
    np.testing.assert_array_equal(_np(y), np.stack([t0, 2 * t0, np.full(3, 5.0)], axis=1))
    g = xg.vmap(xg.grad(lambda a: xg.sum(xg.asarray([[a, a * a], [1.0, 3 * a]]))))(t)
    np.testing.assert_allclose(_np(g), 4 + 2 * t0)


def test_under_jit(backend: Any) -> None:
    """Traced once, replayed with new values (the items were baked in as constants otherwise), and
    ``jit(grad(...))`` through the list."""
    f = xg.jit(lambda a: xg.asarray([a, 2 * a, [1.0, 1.0]]))
    for v in (np.array([1.0, 2.0]), np.array([-3.0, 0.5]), np.array([7.0, 8.0])):
        np.testing.assert_array_equal(_np(f(backend.asarray(v))), np.stack([v, 2 * v, np.ones(2)]))
    df = xg.jit(xg.grad(lambda a: xg.sum(xg.asarray([a, a * a]))))
    for v in (np.array([1.0, 2.0]), np.array([-3.0, 0.5])):
        np.testing.assert_allclose(_np(df(backend.asarray(v))), 1 + 2 * v)


def test_dtype_and_errors(backend: Any) -> None:
    """``dtype=`` casts (differentiably), a ragged sequence and ``copy=False`` are refused by name,
    and a list of constant Tensors stays a constant."""
    t = backend.asarray(np.array([1.0, 2.0]))
    g = xg.grad(lambda a: xg.sum(xg.asarray([a, a], dtype=xg.float32)))(t)
    np.testing.assert_array_equal(_np(g), [2.0, 2.0])
    with pytest.raises(xg.XpgradValueError, match="asarray: the nested sequence is ragged"):
        xg.grad(lambda a: xg.sum(xg.asarray([a, 1.0])))(t)
    with pytest.raises(xg.XpgradValueError, match="asarray: copy=False"):
        xg.grad(lambda a: xg.sum(xg.asarray([a, a], copy=False)))(t)
    c = xg.asarray([xg.asarray(t), xg.asarray(t)])
    assert not c.requires_grad and c.shape == (2, 2)
