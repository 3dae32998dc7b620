"""xg.jit's semantics on every CPU backend: when it traces again, what it refuses to trace,
training loops against eager, donation, memory, threads, programs, errors and nesting.

Values are compared with the eager call of the same function: bit for bit on NumPy and
array-api-strict (the replay makes the same backend calls), to tolerance elsewhere (JAX
runs the program under ``jax.jit``, where XLA may fuse and reorder).
"""

from __future__ import annotations

import copy
import gc
import threading
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import nn, optim

from ._util import to_numpy

RNG = np.random.default_rng(19)


def _exact(backend: Any) -> bool:
    return backend.name in ("numpy", "array_api_strict")


def _check(backend: Any, got: Any, want: Any, rtol: float = 1e-6, atol: float = 1e-9) -> None:
    g, w = to_numpy(got), to_numpy(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
    if _exact(backend):
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _arr(backend: Any, *shape: int, dtype: Any = np.float64) -> Any:
    return backend.asarray(RNG.standard_normal(shape).astype(dtype))


def _traces(f: Any) -> int:
    return f.cache_info().traces  # type: ignore[no-any-return]


# ====================================================================== retraces
def _chain(x: Any) -> Any:
    return xg.sum(xg.exp(xg.sin(x)) * x)


def test_equal_signatures_trace_once(backend: Any) -> None:
    f = xg.jit(_chain)
    x = _arr(backend, 5)
    want = _chain(x)
    for _ in range(10):
        _check(backend, f(x), want)
    # another array of the same signature: replayed on its own values, no trace
    y = _arr(backend, 5)
    _check(backend, f(y), _chain(y))
    info = f.cache_info()
    assert (info.traces, info.hits, info.currsize) == (1, 10, 1)


def test_new_shape_and_dtype_trace_again(backend: Any) -> None:
    f = xg.jit(_chain)
    x3, x4, x3f = _arr(backend, 3), _arr(backend, 4), _arr(backend, 3, dtype=np.float32)
    _check(backend, f(x3), _chain(x3))
    _check(backend, f(x4), _chain(x4))
    assert _traces(f) == 2
    _check(backend, f(x3f), _chain(x3f), rtol=1e-5)
    assert _traces(f) == 3
    for x in (x3, x4, x3f):  # all three kept
        f(x)
    assert _traces(f) == 3
    assert f.cache_info().hits == 3


def _scaled(x: Any, n: Any, *, k: Any = 1) -> Any:
    return xg.sum(x ** n) * k


def test_static_argnums_and_argnames_trace_per_value(backend: Any) -> None:
    f = xg.jit(_scaled, static_argnums=1, static_argnames="k")
    x = _arr(backend, 4)
    for n, k in [(2, 1), (2, 1), (3, 1), (2, 3), (3, 1), (2, 3)]:
        _check(backend, f(x, n, k=k), _scaled(x, n, k=k))
    assert _traces(f) == 3
    # a static value that is a list is frozen by value: equal lists hit
    g = xg.jit(lambda x, axes: xg.sum(x, axis=tuple(axes)), static_argnums=1)
    m = _arr(backend, 2, 3)
    _check(backend, g(m, [0]), xg.sum(m, axis=0))
    _check(backend, g(m, [0]), xg.sum(m, axis=0))
    _check(backend, g(m, [1]), xg.sum(m, axis=1))
    assert _traces(g) == 2


def test_python_scalars_are_static(backend: Any) -> None:
    f = xg.jit(lambda x, c: xg.sum(x * c))
    x = _arr(backend, 4)
    for c in (2.0, 2.0, 3.0, 3.0, 2.0):
        _check(backend, f(x, c), xg.sum(x * c))
    assert _traces(f) == 2
    f(x, 2)  # an int is another signature than the equal float
    assert _traces(f) == 3


def test_policy_is_part_of_the_signature(backend: Any) -> None:
    # (the policy is the subject here, not a way to pick the backend: dtype only)
    f = xg.jit(lambda x: xg.sum(x * 2.0))
    x = _arr(backend, 4)
    f(x)
    f(x)
    with xg.default_device(dtype=xg.float32):
        f(x)
        f(x)
    assert _traces(f) == 2
    f(x)
    assert _traces(f) == 2


def test_grad_mode_is_part_of_the_signature(backend: Any) -> None:
    w = xg.Tensor(_arr(backend, 3), requires_grad=True)
    f = xg.jit(lambda w: xg.sum(w * w))
    assert f(w).requires_grad
    with xg.no_grad():
        out = f(w)
        assert not out.requires_grad
        out = f(w)
        assert not out.requires_grad
    assert f(w).requires_grad
    assert _traces(f) == 2
    _check(backend, out, xg.sum(w.detach() * w.detach()))


def _bn_model(backend: Any, dtype: Any = xg.float64) -> Any:
    m = nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    backend.to(m, dtype=dtype)
    return m


def test_train_and_eval_trace_separately(backend: Any) -> None:
    m = _bn_model(backend)
    ref = copy.deepcopy(m)
    f = xg.jit(lambda model, x: model(x))
    x = _arr(backend, 8, 3)
    for mode in (True, True, False, False, True, False):
        m.train(mode)
        ref.train(mode)
        with xg.no_grad():
            _check(backend, f(m, x), ref(x))
    assert _traces(f) == 2
    for b, rb in zip(m.buffers(), ref.buffers(), strict=True):
        _check(backend, b, rb)


def test_cache_size_evicts_least_recently_used(np_backend: Any) -> None:
    f = xg.jit(_chain, cache_size=2)
    a, b, c = (_arr(np_backend, n) for n in (2, 3, 4))
    f(a)
    f(b)
    f(a)  # a is now the most recently used
    assert f.cache_info() == (1, 2, 2, 2)
    f(c)  # evicts b
    assert f.cache_info().currsize == 2
    f(a)
    assert _traces(f) == 3
    f(b)
    assert _traces(f) == 4
    f.clear_cache()
    assert f.cache_info().currsize == 0
    f(a)
    assert _traces(f) == 5 and f.cache_info().currsize == 1
