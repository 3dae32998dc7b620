"""The first, tracing call of a jitted function holds no more than the eager call would: the
trace drops a value once the traced code drops it (xpgrad._tracing.Trace.release), and its
result is still the eager one, bit for bit on NumPy."""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import _jit_passes as passes
from xpgrad._tracing import _Meta, is_tracer

from ._util import to_numpy

RNG = np.random.default_rng(28)


def _arr(backend: Any, *shape: int) -> Any:
    return backend.asarray(RNG.standard_normal(shape))


def _check(backend: Any, got: Any, want: Any) -> None:
    g, w = to_numpy(got), to_numpy(want)
    assert g.shape == w.shape and g.dtype == w.dtype
    if backend.name in ("numpy", "array_api_strict"):
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def _held(a: Any) -> Callable[[], bool]:
    """Whether the first call's value of the traced value ``a`` is still held. (On JAX the first call
    traces inside one jax.jit, on abstract values that hold no array and that JAX's own trace keeps:
    there, whether the trace still holds it rather than the metadata it keeps of a dropped value.)"""
    import jax

    d = a.data if isinstance(a, xg.Tensor) else a
    trace, i, w = d._t, d._i, d._w
    if isinstance(w, jax.core.Tracer):
        return lambda: type(trace.witness[i]) is not _Meta
    r = weakref.ref(w)
    return lambda: r() is not None


def test_the_trace_drops_each_intermediate_once_the_code_drops_it(backend: Any) -> None:
    def steps(x: Any, refs: list[Any] | None) -> Any:
        h = x
        for _ in range(6):
            h = xg.sin(h) * 2.0
            if refs is not None:
                refs.append(_held(h))
        return h

    alive: list[list[bool]] = []

    def f(x: Any) -> Any:
        refs: list[Any] = []
        h = steps(x, refs)
        alive.append([r() for r in refs])  # (h, the last, is held by the code)
        return xg.sum(h)

    j = xg.jit(f)
    for n in (5, 6, 7):  # (f changes what it reads, alive: each call traces, as each runs f eagerly)
        x = _arr(backend, n, 3)
        _check(backend, j(x), xg.sum(steps(x, None)))
        assert alive[-1] == [False] * 5 + [True], alive
    assert len(alive) == j.cache_info().traces == 3


def test_the_forward_values_go_with_the_graph_of_a_traced_grad(backend: Any) -> None:
    refs: list[Any] = []
    gone: list[bool] = []

    def loss(w: Any, x: Any) -> Any:
        h = x
        for _ in range(4):
            h = xg.tanh(h @ w)
            if is_tracer(h.data):  # (the eager call too runs loss)
                refs.append(_held(h))
        return xg.sum(h * h)

    def f(w: Any, x: Any) -> Any:
        refs.clear()
        g = xg.grad(loss)(w, x)
        gone.append(not any(r() for r in refs))  # (the backward is done: its graph, and the values it saved, are gone)
        return g

    j = xg.jit(f)
    w = _arr(backend, 3, 3)
    for n in (2, 4, 5):
        x = _arr(backend, n, 3)
        want = xg.grad(loss)(w, x)
        _check(backend, j(w, x), want)
        assert gone[-1] and len(refs) == 4
    assert len(gone) == j.cache_info().traces == 3


def _mlp_loss(ps: list[tuple[Any, Any]], x: Any, y: Any) -> Any:
    h = x
    for w, b in ps:
        h = xg.tanh(h @ w + b)
    return xg.mean((h - y) ** 2)


def _peak(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        return tracemalloc.get_traced_memory()[1] - base, out
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("layers", [4, 8])
def test_first_call_of_a_jitted_mlp_grad_peaks_near_the_eager_call(np_backend: Any, layers: int) -> None:
    # issue 28: the first call held every value of the trace to its end (4x the eager call's peak at 8 layers)
    width, batch = 256, 256  # (an activation of 65536 elements: the chunked runs of fuse_elementwise take it)
    ps = [(RNG.standard_normal((width, width)) / 16, np.zeros(width)) for _ in range(layers)]
    x, y = RNG.standard_normal((batch, width)), RNG.standard_normal((batch, width))
    g = xg.grad(_mlp_loss)
    eager, want = _peak(lambda: g(ps, x, y))
    j = xg.jit(g)
    first, got = _peak(lambda: j(ps, x, y))
    for a, b in zip(xg.tree_util.tree_leaves(got), xg.tree_util.tree_leaves(want), strict=True):
        np.testing.assert_array_equal(a, b)
    assert first <= 1.5 * eager, (first / eager, first, eager)
    prog = j.trace(ps, x, y)
    assert any(ins.name.startswith("fused[") for ins in prog.instructions)  # (checked on the ends the trace kept)
    for a, b in zip(xg.tree_util.tree_leaves(j(ps, x, y)), xg.tree_util.tree_leaves(want), strict=True):  # (the replay)
        np.testing.assert_array_equal(a, b)


def test_a_run_that_the_kept_ends_refute_is_not_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    # the fused run is checked on the first and last elements the trace kept of each value it
    # dropped: a run made with a wrong ufunc (add for multiply) gives other values there, and stays unfused
    real = passes._elementwise_ufunc

    def wrong(x: Any, w: Any) -> Any:
        uf = real(x, w)
        return np.add if uf is np.multiply else uf

    monkeypatch.setattr(passes, "_elementwise_ufunc", wrong)
    x = RNG.standard_normal(70_000)

    def f(v: Any) -> Any:
        return xg.grad(lambda u: xg.sum(xg.exp(xg.sin(u)) * u))(v)

    j = xg.jit(f)
    want = f(x)
    np.testing.assert_array_equal(j(x), want)
    assert not any(ins.name.startswith("fused[") for ins in j.trace(x).instructions)
    np.testing.assert_array_equal(j(x * 0.5), f(x * 0.5))
