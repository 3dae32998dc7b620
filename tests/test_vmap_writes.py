"""In-place writes under vmap, checked against a Python loop of the same function on each backend.

A batched value written into an array made inside the mapped function (``xp.zeros``, a
copy, a result) makes that array batched, as ``jax.vmap`` gives a batched
``out.at[...].set(v)``; the views of it that are alive become the same views of the batched
array. Integer indexing that gives a copy on one example (NumPy's, array-api-strict's)
gives a copy under vmap too, so a later write does not show through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg

RNG = np.random.default_rng(28)
Y = RNG.normal(size=(4, 5))
Z = RNG.normal(size=(4, 3, 5))


def _np(backend: Any, a: Any) -> np.ndarray:
    return np.asarray(backend.to_numpy(a.data if isinstance(a, xg.Tensor) else a))


def _loop(backend: Any, f: Callable[..., Any], *batches: np.ndarray) -> Any:
    """``f`` example by example, on Tensors of the backend; the results stacked (a tuple per output)."""
    outs = [f(*(xg.asarray(backend.asarray(b[i])) for b in batches)) for i in range(batches[0].shape[0])]
    if isinstance(outs[0], tuple):
        return tuple(np.stack([_np(backend, o[j]) for o in outs]) for j in range(len(outs[0])))
    return np.stack([_np(backend, o) for o in outs])


def _same(backend: Any, got: Any, want: Any) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(backend, g, w)
        return
    np.testing.assert_allclose(_np(backend, got), want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------- integer indexing: copy or view
def swap(y: Any) -> Any:
    y = y * 1.0
    y[0], y[1] = y[1], y[0]
    return y


def read_then_write(y: Any) -> Any:
    a = y * 1.0
    first = a[0]
    a[0] = 5.0
    last = a[-1]
    a[-1] = first
    return a, first + last


def read_then_write_2d(z: Any) -> Any:
    a = z * 1.0
    r = a[1, 2]
    a[1, 2] = -1.0
    row = a[0, :]  # (a view on every backend, eagerly and under vmap)
    a[0, 0] = r
    return a, r, row


def read_0d_then_write(y: Any) -> Any:
    s = y[2] * 1.0  # (0-d)
    copy = s[()]
    s[...] = 7.0
    return copy, s


@pytest.mark.parametrize("f", [swap, read_then_write, read_0d_then_write], ids=lambda f: f.__name__)
def test_integer_index_reads_then_writes_equal_the_loop(backend: Any, f: Callable[[Any], Any]) -> None:
    want = _loop(backend, f, Y)
    _same(backend, xg.vmap(f)(backend.asarray(Y)), want)


def test_integer_index_reads_then_writes_2d_equal_the_loop(backend: Any) -> None:
    _same(backend, xg.vmap(read_then_write_2d)(backend.asarray(Z)), _loop(backend, read_then_write_2d, Z))


def test_swap_under_grad_equals_the_loop(backend: Any) -> None:
    def loss(y: Any) -> Any:
        s = swap(y)
        return (s * xg.array_namespace(s).arange(5.0, dtype=s.dtype) ** 2).sum()

    want = np.stack([_np(backend, xg.grad(loss)(backend.asarray(Y[i]))) for i in range(4)])
    _same(backend, xg.vmap(xg.grad(loss))(backend.asarray(Y)), want)
    _same(backend, xg.vmap(loss)(backend.asarray(Y)), _loop(backend, loss, Y))


# ---------------------------------------------------------------------- a batched write into a fresh array
def fill(y: Any) -> Any:
    xp = xg.array_namespace(y)
    out = xp.zeros((7,), dtype=y.dtype)
    out[1:-1] = y
    return out


def fill_through_views(y: Any) -> Any:
    xp = xg.array_namespace(y)
    out = xp.zeros((7,), dtype=y.dtype)
    tail = out[2:]
    inner = tail[:3]
    out[:3] = y[:3]  # (tail and inner see it)
    inner += y[3]  # (out sees it)
    return out, tail, inner


def fill_by_ops(y: Any) -> Any:
    xp = xg.array_namespace(y)
    acc = xp.ones((5,), dtype=y.dtype)
    for k in range(3):  # (batched from the first write on)
        acc *= y
        acc[k] = -acc[k]
    total = xp.zeros((), dtype=y.dtype)
    total += xp.sum(acc)
    return acc, total


@pytest.mark.parametrize("f", [fill, fill_through_views, fill_by_ops], ids=lambda f: f.__name__)
def test_batched_write_into_a_fresh_array_equals_the_loop(backend: Any, f: Callable[[Any], Any]) -> None:
    _same(backend, xg.vmap(f)(backend.asarray(Y)), _loop(backend, f, Y))


def test_batched_write_into_a_fresh_array_under_the_transforms(backend: Any) -> None:
    def loss(y: Any) -> Any:
        out, total = fill_by_ops(y)
        return (fill(y) ** 2).sum() + (out * y).sum() + total * y[0]

    ys = backend.asarray(Y)
    grads = np.stack([_np(backend, xg.grad(loss)(backend.asarray(Y[i]))) for i in range(4)])
    _same(backend, xg.vmap(xg.grad(loss))(ys), grads)
    y0 = backend.asarray(Y[0])
    _same(backend, xg.jacfwd(loss)(y0), grads[0])
    _same(backend, xg.jacrev(loss)(y0), grads[0])
    # the Hessian, row by row as gradients of gradients (no vmap)
    rows = np.stack([_np(backend, xg.grad(lambda v, i=i: xg.grad(loss)(v)[i])(y0)) for i in range(5)])
    np.testing.assert_allclose(_np(backend, xg.hessian(loss)(y0)), rows, rtol=1e-10, atol=1e-10)


def test_nested_vmap_write_along_the_inner_level(backend: Any) -> None:
    """Made inside the outer level, written inside the inner one with a value batched there."""
    def outer(z: Any) -> Any:
        def inner(y: Any) -> Any:
            a = z * 1.0  # (made inside both levels: batched along the outer one only)
            a += y
            a[0, :] = y * 2.0
            return a
        return xg.vmap(inner)(backend.asarray(Y[:2]))

    def one(z: Any, y: Any) -> Any:
        a = z * 1.0
        a += y
        a[0, :] = y * 2.0
        return a

    want = np.stack([np.stack([_np(backend, one(xg.asarray(backend.asarray(Z[i])), xg.asarray(backend.asarray(Y[j]))))
                               for j in range(2)]) for i in range(4)])
    _same(backend, xg.vmap(outer)(backend.asarray(Z)), want)


def test_batched_write_into_a_value_from_outside_is_refused(backend: Any) -> None:
    """One array for every example (closed over): the loop would write it once per example, which
    vmap cannot; it refuses, as torch.func.vmap does, and the array is left as it was."""
    buf = xg.asarray(backend.asarray(np.zeros(5)))

    def f(y: Any) -> Any:
        buf[1:] = y[1:]
        return buf

    with pytest.raises(xg.XpgradError, match="made inside the vmapped function"):
        xg.vmap(f)(backend.asarray(Y))
    assert type(buf) is xg.Tensor
    np.testing.assert_array_equal(_np(backend, buf), np.zeros(5))
