"""xg.checkpoint (alias xg.remat): the tape keeps only f's inputs; backward recomputes f.

The reference everywhere is the same computation without checkpoint: checkpointing
changes what is kept, never a value or a gradient.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import InPlaceModificationError, XpgradRuntimeError, XpgradTypeError

from ._util import to_numpy


def _block(x: Any, y: Any) -> Any:
    return xg.sin(x * y) * xg.exp(-x) + y * y


def _both(fn: Any) -> tuple[Any, Any]:
    """fn(wrap) with wrap = xg.checkpoint and with wrap = identity."""
    return fn(xg.checkpoint), fn(lambda f: f)


def test_remat_is_checkpoint() -> None:
    assert xg.remat is xg.checkpoint


def test_first_order_two_inputs(backend: Any) -> None:
    x = backend.asarray(np.array([0.3, -1.2, 2.0]))
    y = backend.asarray(np.array([1.5, 0.4, -0.7]))
    got, want = _both(lambda w: xg.grad(lambda a, b: xg.sum(w(_block)(a, b)), (0, 1))(x, y))
    for g, e in zip(got, want):
        np.testing.assert_allclose(to_numpy(g), to_numpy(e), rtol=1e-12)


def test_second_order(backend: Any) -> None:
    """grad of grad: the recomputation's backward is recorded, so the outer derivative sees it."""
    x = backend.asarray(np.array([0.3, -1.2, 2.0]))
    y = backend.asarray(np.array([1.5, 0.4, -0.7]))

    def hvp_like(w: Any) -> Any:
        inner = xg.grad(lambda a, b: xg.sum(w(_block)(a, b)), (0, 1))
        return xg.grad(lambda a, b: xg.sum(inner(a, b)[0] * inner(a, b)[1]), (0, 1))(x, y)

    got, want = _both(hvp_like)
    for g, e in zip(got, want):
        np.testing.assert_allclose(to_numpy(g), to_numpy(e), rtol=1e-10)
    # and third order through the same path, on a scalar
    f3 = [xg.grad(xg.grad(xg.grad(lambda a, w=w: xg.sum(w(xg.sin)(a) * a)))) for w in (xg.checkpoint, lambda f: f)]
    a0 = backend.asarray(np.array(0.7))
    np.testing.assert_allclose(to_numpy(f3[0](a0)), to_numpy(f3[1](a0)), rtol=1e-12)


def test_second_order_through_a_closed_over_value() -> None:
    """f closes over grad's own input (a non-leaf of the outer graph): grad of grad is still exact."""
    x = np.array([0.5, 1.0])
    m = np.array([[1.0, 2.0], [3.0, 0.5]])

    def loss(m: Any, w: Any) -> Any:
        return xg.sum(w(lambda h: xg.tanh(h @ m))(xg.asarray(x)) ** 2)

    got, want = _both(lambda w: xg.grad(lambda m: xg.sum(xg.grad(loss)(m, w) ** 3))(m))
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert np.abs(want).max() > 1e-8  # a real second derivative, not zeros on both sides


def test_pytree_inputs_outputs_and_static_values(backend: Any) -> None:
    def g(d: Any, n: int, scale: float = 2.0) -> Any:
        return {"a": d["u"] * d["v"][0] * scale, "b": [xg.exp(d["v"][1]), n]}

    def loss(w: Any, u: Any, v0: Any, v1: Any) -> Any:
        r = w(g)({"u": u, "v": (v0, v1)}, 3, scale=1.5)
        assert r["b"][1] == 3  # a static output comes back as it is
        return xg.sum(r["a"]) + xg.sum(r["b"][0]) * r["b"][1]

    args = [backend.asarray(np.array([0.5, 1.0]) * k) for k in (1, 2, 3)]
    got, want = _both(lambda w: xg.grad(lambda *a: loss(w, *a), (0, 1, 2))(*args))
    for a, b in zip(got, want):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-12)


def test_closed_over_module_parameters_get_grads(backend: Any) -> None:
    """``loss.backward()`` fills the .grad of Module parameters f reads without receiving them,
    and of a value computed outside f that f closes over."""
    grads = []
    for wrap in (xg.checkpoint, lambda f: f):
        lin = backend.to(xg.nn.Linear(3, 2, dtype="float64"))
        lin.weight.data = backend.asarray(np.array([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]))
        lin.bias.data = backend.asarray(np.array([0.05, -0.05]))
        s = xg.asarray(backend.asarray(np.array(1.3)), requires_grad=True)
        scale = s * 2.0  # a non-leaf computed outside f
        x = xg.asarray(backend.asarray(np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]])), requires_grad=True)
        y = wrap(lambda h: xg.tanh(lin(h)) * scale)(x)
        xg.sum(y * y).backward()
        grads.append([to_numpy(t.grad) for t in (lin.weight, lin.bias, s, x)])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_only_parameters_require_grad() -> None:
    """The first layer's input needs no grad: the parameters still get theirs (PyTorch's
    reentrant checkpoint gives them none there)."""
    lin = xg.nn.Linear(3, 2, dtype="float64")
    x = xg.asarray(np.array([[1.0, 2.0, 3.0]]))
    xg.sum(xg.checkpoint(lin)(x) ** 2).backward()
    w = lin.weight.grad.data
    lin.zero_grad()
    xg.sum(lin(x) ** 2).backward()
    np.testing.assert_allclose(w, lin.weight.grad.data, rtol=1e-12)


def test_grad_does_not_touch_closed_over_parameter_grads() -> None:
    """grad w.r.t. x through checkpoint: the closed-over parameter's .grad stays None."""
    lin = xg.nn.Linear(2, 2, dtype="float64")
    g = xg.grad(lambda x: xg.sum(xg.checkpoint(lin)(x)))(np.array([[1.0, 2.0]]))
    np.testing.assert_allclose(g, np.sum(lin.weight.data, axis=0, keepdims=True), rtol=1e-12)
    assert lin.weight.grad is None


def test_dropout_inside_f_sees_the_same_mask() -> None:
    """The recomputation draws the forward's random numbers (the generator state is restored),
    and backward leaves the stream where it was."""
    drop = xg.nn.Dropout(0.5)
    x0 = np.linspace(0.1, 1.0, 40)
    grads, after = [], []
    for wrap in (xg.checkpoint, lambda f: f):
        xg.random.seed(3)
        x = xg.asarray(x0, requires_grad=True)
        xg.sum(wrap(lambda h: drop(xg.sin(h)) * h)(x) ** 2).backward()
        grads.append(to_numpy(x.grad))
        after.append(float(xg.random.uniform()))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)
    assert (grads[1] == 0).any() and (grads[1] != 0).any()  # a real mask
    assert after[0] == after[1]


def test_rng_under_a_seeded_policy(backend: Any) -> None:
    """A policy's own generator is restored too, even when backward runs outside its block."""
    x0 = np.linspace(0.1, 1.0, 20)
    grads = []
    for wrap in (xg.checkpoint, lambda f: f):
        with backend.policy(seed=5):
            x = xg.asarray(backend.asarray(x0), requires_grad=True)
            y = wrap(lambda h: h * h * xg.random.normal(h.shape, dtype="float64"))(x)
        xg.sum(y).backward()
        grads.append(to_numpy(x.grad))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)


def test_jvp_and_hessian_run_f(backend: Any) -> None:
    x = backend.asarray(np.array([0.3, -1.2]))
    y = backend.asarray(np.array([1.5, 0.4]))
    t = backend.asarray(np.array([1.0, 2.0]))
    got, want = _both(lambda w: xg.jvp(w(_block), (x, y), (t, t)))
    for a, b in zip(got, want):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-12)
    got, want = _both(lambda w: xg.hessian(lambda a: xg.sum(w(_block)(a, y)))(x))
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=1e-12)


def test_no_grad_just_calls_f() -> None:
    calls = []

    def f(x: Any) -> Any:
        calls.append(1)
        return x * 2.0

    x = xg.asarray(np.array([1.0]), requires_grad=True)
    with xg.no_grad():
        y = xg.checkpoint(f)(x)
    assert not y.requires_grad and len(calls) == 1
    y = xg.checkpoint(f)(xg.asarray(np.array([1.0])))  # nothing requires grad
    assert not y.requires_grad and len(calls) == 2


def test_backward_recomputes_once() -> None:
    calls = []

    def f(x: Any, y: Any) -> Any:
        calls.append(1)
        return x * y

    x = xg.asarray(np.array([1.0, 2.0]), requires_grad=True)
    y = xg.asarray(np.array([3.0, 4.0]), requires_grad=True)
    out = xg.checkpoint(f)(x, y)
    assert len(calls) == 1
    xg.sum(out).backward()
    assert len(calls) == 2  # one recomputation serves both inputs
    np.testing.assert_allclose(x.grad.data, [3.0, 4.0])
    np.testing.assert_allclose(y.grad.data, [1.0, 2.0])


def test_errors() -> None:
    with pytest.raises(XpgradTypeError, match="checkpoint"):
        xg.checkpoint(3)  # type: ignore[arg-type]
    x = xg.asarray(np.array([1.0, 2.0]), requires_grad=True)
    c = xg.asarray(np.array([1.0, 1.0]))
    out = xg.checkpoint(lambda h: xg.sin(h) * c)(x)
    c[0] = 5.0  # an input of f modified between forward and backward
    with pytest.raises(InPlaceModificationError, match="checkpoint"):
        xg.sum(out).backward()
    state = {"n": 0}

    def changing(h: Any) -> Any:
        state["n"] += 1
        return h * 2.0 if state["n"] == 1 else [h, h]

    out = xg.checkpoint(changing)(x)
    with pytest.raises(XpgradRuntimeError, match="same thing"):
        xg.sum(out).backward()


def _mlp_tape_bytes(wrap: Any) -> tuple[int, Any]:
    rng = np.random.default_rng(0)
    w1 = [xg.asarray(rng.standard_normal((256, 1024)) / 16, requires_grad=True) for _ in range(20)]
    w2 = [xg.asarray(rng.standard_normal((1024, 256)) / 64, requires_grad=True) for _ in range(20)]
    x = xg.asarray(rng.standard_normal((64, 256)))

    def layer(a: Any, b: Any) -> Any:
        def f(h: Any) -> Any:
            u = h @ a
            return (xg.tanh(u) * u) @ b + h

        return f

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        h = x
        for a, b in zip(w1, w2):
            h = wrap(layer(a, b))(h)
        loss = xg.sum(h * h)
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    loss.backward()
    return held, to_numpy(w1[0].grad)


def test_memory_20_layer_mlp() -> None:
    """What the tape holds after the forward of 20 MLP blocks (width 256, hidden 1024,
    batch 64, float64 NumPy), each block ``(tanh(h @ W1) * (h @ W1)) @ W2 + h``.

    Without checkpoint each block's nodes keep ``u = h @ W1``, ``tanh(u)`` and their
    product (64x1024 float64: 512 KiB each) plus the block input (128 KiB): measured
    34 MB for 20 blocks. With checkpoint only the block inputs (128 KiB each) and a
    few hundred bytes of node per block remain: measured 2.7 MB, 12.7x less. The
    assertion asks for 8x, a margin for allocator and Python-object noise, well above
    what keeping any one 512 KiB intermediate per block would give (about 5x).
    Gradients are checked equal as well.
    """
    plain, g_plain = _mlp_tape_bytes(lambda f: f)
    ckpt, g_ckpt = _mlp_tape_bytes(xg.checkpoint)
    np.testing.assert_allclose(g_ckpt, g_plain, rtol=1e-10)
    assert plain > 8 * ckpt, f"tape after forward: {plain} bytes without checkpoint, {ckpt} with"
