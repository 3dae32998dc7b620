"""Backward through a jitted call: one trace, split into a forward and a backward program.

A result of ``xg.jit(f)`` that requires grad hangs from one node whose VJP is the backward
program, run on the residuals the forward program returned: ``f`` never runs again, so
its random draws (Dropout) are those of the value, its state updates (BatchNorm's running
statistics and ``num_batches_tracked``, a write in place) happen once per call. Checked
against eager ``backward()`` of the same function on the same random draws (a seeded
policy), over loops of steps: bit for bit on NumPy and array-api-strict, 1e-12 elsewhere.
Also ``checkpoint`` inside ``jit`` (the recomputation reuses the forward's draws) and the
in-place check of ``checkpoint`` on closed-over constants.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import nn

from ._util import to_numpy

RNG = np.random.default_rng(28)
STEPS = 100


def _exact(backend: Any) -> bool:
    return backend.name in ("numpy", "array_api_strict")


def _same(backend: Any, got: Any, want: Any) -> None:
    g, w = to_numpy(got), to_numpy(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
    if _exact(backend):
        np.testing.assert_array_equal(g, w)
    else:  # (relative to the array's scale: a gradient that cancels to rounding noise, a bias before BatchNorm)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12 * float(np.max(np.abs(w), initial=1.0)))


def _steps(backend: Any) -> int:
    return STEPS if backend.name != "dask" else 10  # (Dask: each step builds and computes a graph)


def _arr(backend: Any, *shape: int) -> Any:
    return backend.asarray(RNG.standard_normal(shape))


# ====================================================================== Dropout: one mask per call
def _dropped(m: Any, w: Any) -> Any:
    return xg.sum(m(w) * w)


def _dropout_run(backend: Any, f: Any, x: Any, n: int) -> list[tuple[Any, Any]]:
    drop = nn.Dropout(0.5)
    out = []
    with xg.default_device(seed=11):
        for _ in range(n):
            w = xg.Tensor(x, requires_grad=True)
            y = f(drop, w)
            y.backward()
            out.append((y.detach(), w.grad))
    return out


def test_dropout_gradient_uses_the_value_mask(backend: Any) -> None:
    x = _arr(backend, 16)
    n = _steps(backend)
    jf = xg.jit(_dropped)
    got = _dropout_run(backend, jf, x, n)
    want = _dropout_run(backend, _dropped, x, n)
    for (gy, gg), (wy, wg) in zip(got, want, strict=True):
        _same(backend, gy, wy)
        _same(backend, gg, wg)
        # (the gradient's mask is the value's: 2 w mask / (1 - p), zero exactly where the value dropped w)
    assert jf.cache_info().traces == 1
    # the random stream advanced once per call: the next draw is the eager loop's next draw
    drop = nn.Dropout(0.5)
    with xg.default_device(seed=11):
        for _ in range(n):
            jf(drop, xg.Tensor(x, requires_grad=True)).backward()
        a = xg.random.normal((4,), dtype=xg.float64)
    with xg.default_device(seed=11):
        for _ in range(n):
            _dropped(drop, xg.Tensor(x, requires_grad=True)).backward()
        b = xg.random.normal((4,), dtype=xg.float64)
    np.testing.assert_array_equal(to_numpy(a), to_numpy(b))


def test_dropout_second_order_replays_the_draws(backend: Any) -> None:
    # create_graph: the backward is recorded by running f again, eagerly, on the forward's draws
    x = _arr(backend, 6)
    jf = xg.jit(lambda m, w: xg.sum(m(w) ** 3))

    def run(f: Any) -> list[Any]:
        drop = nn.Dropout(0.5)
        out = []
        with xg.default_device(seed=5):
            for _ in range(10):
                w = xg.Tensor(x, requires_grad=True)
                (g,) = xg.autograd.grad(f(drop, w), [w], create_graph=True)
                xg.sum(g * g).backward()
                out.append(w.grad)
        return out

    for a, b in zip(run(jf), run(lambda m, w: xg.sum(m(w) ** 3)), strict=True):
        _same(backend, a, b)


# ====================================================================== BatchNorm: state written once
def _bn_loss(m: Any, x: Any) -> Any:
    return xg.sum(m(x) ** 2)


def test_batchnorm_state_advances_once_per_step(backend: Any) -> None:
    m1 = nn.BatchNorm1d(3)
    backend.to(m1, dtype=xg.float64)
    m1.train()
    m2 = copy.deepcopy(m1)
    x = _arr(backend, 5, 3)
    jf = xg.jit(_bn_loss)
    n = _steps(backend)
    for k in range(n):
        for m in (m1, m2):
            for p in m.parameters():
                p.grad = None
        jf(m1, xg.asarray(x) * (1.0 + k / n)).backward()
        _bn_loss(m2, xg.asarray(x) * (1.0 + k / n)).backward()
        assert int(to_numpy(m1.num_batches_tracked)) == k + 1
        _same(backend, m1.weight.grad, m2.weight.grad)
        _same(backend, m1.bias.grad, m2.bias.grad)
        _same(backend, m1.running_mean, m2.running_mean)
        _same(backend, m1.running_var, m2.running_var)
    assert jf.cache_info().traces == 1


def test_second_order_through_a_state_update_is_refused(backend: Any) -> None:
    m = nn.BatchNorm1d(3)
    backend.to(m, dtype=xg.float64)
    jf = xg.jit(_bn_loss)
    x = _arr(backend, 5, 3)
    for _ in range(2):
        out = jf(m, x)
        with pytest.raises(xg.XpgradRuntimeError, match=r"jit\(_bn_loss\): a gradient of a gradient \(create_graph\)"):
            xg.autograd.grad(out, [m.weight], create_graph=True)


# ====================================================================== writes in place inside f
def _bump(w: Any, c: Any) -> Any:
    c += 1.0  # (a Tensor that requires no grad, updated in place: a counter)
    return xg.sum(xg.sin(w) * c)


def _bump_raw(w: Any, x: Any) -> Any:
    x += 1.0  # (a raw array argument; on JAX a new array that the name takes, as eagerly)
    return xg.sum(xg.cos(w) * x)


def test_writes_in_place_happen_once_per_step(backend: Any) -> None:
    x = _arr(backend, 4)
    c0 = _arr(backend, 4)
    c1, c2 = xg.Tensor(backend.asarray(to_numpy(c0))), xg.Tensor(backend.asarray(to_numpy(c0)))
    r1, r2 = backend.asarray(to_numpy(c0)), backend.asarray(to_numpy(c0))
    jf, jr = xg.jit(_bump), xg.jit(_bump_raw)
    n = _steps(backend)
    for _ in range(n):
        w1, w2 = xg.Tensor(x, requires_grad=True), xg.Tensor(x, requires_grad=True)
        jf(w1, c1).backward()
        _bump(w2, c2).backward()
        _same(backend, w1.grad, w2.grad)
        _same(backend, c1, c2)
        w1, w2 = xg.Tensor(x, requires_grad=True), xg.Tensor(x, requires_grad=True)
        jr(w1, r1).backward()
        _bump_raw(w2, r2).backward()
        _same(backend, w1.grad, w2.grad)
        _same(backend, r1, r2)
    np.testing.assert_allclose(to_numpy(c1), to_numpy(c0) + n)
    assert jf.cache_info().traces == 1 and jr.cache_info().traces == 1


def test_residual_modified_before_backward_is_refused(backend: Any) -> None:
    # a Tensor whose array the backward program reads (a residual) changed in place after the call
    c = xg.Tensor(_arr(backend, 3))
    jf = xg.jit(lambda w, c: xg.sum(xg.sin(w) * c))
    for _ in range(3):
        w = xg.Tensor(_arr(backend, 3), requires_grad=True)
        out = jf(w, c)
        with xg.no_grad():
            c += 1.0
        with pytest.raises(xg.InPlaceModificationError):
            out.backward()


def test_backward_program_runs_no_forward(backend: Any) -> None:
    # the forward program returns the residuals; the backward program (of residuals and cotangents) has no draw
    jf = xg.jit(_dropped)
    drop = nn.Dropout(0.5)
    x = _arr(backend, 5)
    with xg.default_device(seed=2):
        for _ in range(3):
            jf(drop, xg.Tensor(x, requires_grad=True)).backward()
    (entry,) = jf._cache.values()
    lin = entry.linear
    assert lin is not None and lin.program is not None
    assert not any("random" in x.name for x in lin.program.instructions)
    assert sum("random" in x.name for x in entry.program.instructions) == 1


# ====================================================================== checkpoint inside jit
def _ck_loss(w: Any, m: Any) -> Any:
    return xg.sum(xg.checkpoint(lambda v: xg.sin(m(v)) * v)(w))


def test_checkpoint_inside_jit_replays_the_draws(backend: Any) -> None:
    x = _arr(backend, 12)
    n = _steps(backend)
    vg = xg.value_and_grad(_ck_loss)
    jvg = xg.jit(vg)

    def run(f: Any) -> tuple[list[Any], Any]:
        drop = nn.Dropout(0.5)
        out = []
        with xg.default_device(seed=9):
            for _ in range(n):
                out.append(f(x, drop))
            nxt = xg.random.normal((3,), dtype=xg.float64)
        return out, nxt

    got, g_next = run(jvg)
    want, w_next = run(vg)
    for (gv, gg), (wv, wg) in zip(got, want, strict=True):
        _same(backend, gv, wv)
        _same(backend, gg, wg)
    np.testing.assert_array_equal(to_numpy(g_next), to_numpy(w_next))  # (one draw per call, as eagerly)
    assert jvg.cache_info().traces == 1


# ====================================================================== checkpoint: closed-over constants
def test_checkpoint_refuses_a_closed_over_constant_modified_in_place(backend: Any) -> None:
    # a constant Tensor read by an op that saves nothing of it (x + c): the recomputation would see the change
    c = xg.Tensor(_arr(backend, 3))
    f = xg.checkpoint(lambda x: xg.sum(xg.sin(x + c)))
    for _ in range(3):
        x = xg.Tensor(_arr(backend, 3), requires_grad=True)
        y = f(x)
        c += 1.0
        with pytest.raises(xg.InPlaceModificationError, match=r"checkpoint\(<lambda>\): a Tensor that <lambda> reads"):
            y.backward()
    # unchanged, it recomputes as before
    x = xg.Tensor(_arr(backend, 3), requires_grad=True)
    f(x).backward()
    _same(backend, x.grad, xg.cos(x.detach() + c))


def _ck_bn_loss(m: Any, x: Any) -> Any:
    return xg.sum(xg.checkpoint(m)(x) ** 2)


@pytest.mark.parametrize("jitted", [False, True])
def test_checkpoint_recomputation_updates_no_state(jitted: bool, backend: Any) -> None:
    # BatchNorm in a checkpoint: its recomputation in backward neither counts the batch again nor
    # blends the running statistics again (eagerly, and in a backward program traced by jit)
    m1 = nn.BatchNorm1d(3)
    backend.to(m1, dtype=xg.float64)
    m2 = copy.deepcopy(m1)
    x = _arr(backend, 6, 3)
    f = xg.jit(_ck_bn_loss) if jitted else _ck_bn_loss
    n = _steps(backend)
    for k in range(n):
        for m in (m1, m2):
            for p in m.parameters():
                p.grad = None
        f(m1, xg.asarray(x) * (1.0 + k / n)).backward()
        _bn_loss(m2, xg.asarray(x) * (1.0 + k / n)).backward()
        assert int(to_numpy(m1.num_batches_tracked)) == k + 1
        _same(backend, m1.running_mean, m2.running_mean)
        _same(backend, m1.running_var, m2.running_var)
        np.testing.assert_allclose(to_numpy(m1.weight.grad), to_numpy(m2.weight.grad), rtol=1e-12, atol=1e-12)


def _two(w: Any, x: Any) -> Any:
    return xg.sin(w) * x, xg.sum(xg.exp(w))


def test_one_of_two_results_and_a_retained_graph(backend: Any) -> None:
    # backward from one result of two (the other's cotangent is zero), twice on a retained graph:
    # the backward program never writes into its residuals
    jf = xg.jit(_two)
    x = _arr(backend, 4)
    for k in range(3):
        w1, w2 = xg.Tensor(x * (k + 1.0), requires_grad=True), xg.Tensor(x * (k + 1.0), requires_grad=True)
        l1, l2 = xg.sum(jf(w1, x)[0] ** 2), xg.sum(_two(w2, x)[0] ** 2)
        for _ in range(2):
            l1.backward(retain_graph=True)
            l2.backward(retain_graph=True)
        _same(backend, w1.grad, w2.grad)
        w1, w2 = xg.Tensor(x, requires_grad=True), xg.Tensor(x, requires_grad=True)
        (jf(w1, x)[1] * 2.0).backward()
        (_two(w2, x)[1] * 2.0).backward()
        _same(backend, w1.grad, w2.grad)
    assert jf.cache_info().traces == 1
