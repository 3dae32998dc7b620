"""Random per-example programs: ``xg.vmap(f)(xs)`` against ``xg.stack([f(x) for x in xs])``.

A program is drawn from a vocabulary: array-API functions, nn layers in eval mode (closed
over: their parameters are shared by the examples), indexing idioms (the swap
``y[0, ...], y[1, ...] = y[1, ...], y[0, ...]``, integer and sliced reads), updates in place, and
``xg.random`` under ``randomness="same"`` (one draw shared by the examples: the loop
draws it again for each example from a generator reset to the same seed). The values
must agree, and so must the gradients: ``xg.grad`` through ``vmap`` against ``xg.grad``
through the loop, and ``vmap`` of ``xg.grad`` against the loop of ``xg.grad``. Bit for
bit on NumPy (a batched op is the same NumPy call on a bigger array: reductions along an
axis may sum in another order, so to 1e-12 where a program reduces); to 1e-12 elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgrad as xg
from xpgrad import nn

from ._util import to_numpy

RNG = np.random.default_rng(2029)
W = RNG.standard_normal((4, 4))  # a shared (closed-over) array
N, S, D = 3, 3, 4  # examples, rows per example, features

#: op name -> (reduces across elements: not bit for bit guaranteed)
OPS = {"sin": False, "tanh": False, "square": False, "scale": False, "matmul": True, "linear": True,
       "layernorm": True, "batchnorm_eval": False, "dropout_eval": False, "leaky": False,
       "swap": False, "int_index": False, "slice_roll": False, "flip": False, "setitem": False,
       "iadd": False, "center": True, "cumsum": True, "where": False, "random": False, "uniform": False,
       "dropout_train": False, "softmax": True, "mask_set": False, "col_set": False, "int_set": False,
       "swap_cols": False, "view_write": False, "take": False, "sort": False, "clip": False, "max": True}


def _layers(backend: Any) -> dict[str, Any]:
    with backend.policy(seed=5):
        layers = {"linear": nn.Linear(D, D), "layernorm": nn.LayerNorm(D), "batchnorm_eval": nn.BatchNorm1d(D),
                  "dropout_eval": nn.Dropout(0.5), "leaky": nn.LeakyReLU(0.2)}
        layers = {k: backend.to(m, dtype=xg.float64) for k, m in layers.items()}
    bn = layers["batchnorm_eval"]
    with xg.no_grad():  # (running statistics that are not 0 and 1)
        bn.running_mean += backend.asarray(np.linspace(-0.5, 0.5, D))
        bn.running_var *= 1.5
    for m in layers.values():
        m.eval()
    return layers


def _indices(backend: Any) -> dict[str, Any]:
    idx = {"cols": backend.asarray(np.asarray([3, 0, 0, 1]))}
    # y[perm, ...]; array-api-strict takes integer arrays only with integers or arrays on every axis
    idx["rows"] = ((backend.asarray(np.array([[2], [0], [1]])), backend.asarray(np.arange(D)[None, :]))
                   if backend.name == "array_api_strict" else (backend.asarray(np.array([2, 0, 1])), Ellipsis))
    return idx


def _program(ops: list[str], layers: dict[str, Any], w: Any, idx: dict[str, Any]) -> Callable[[Any], Any]:
    """``f(x)`` for one example ``x`` of shape (S, D): the ops in order (``idx``: index arrays)."""

    def f(x: Any) -> Any:
        y = xg.asarray(x) * 1.0
        for op in ops:
            if op == "sin":
                y = xg.sin(y)
            elif op == "tanh":
                y = xg.tanh(y)
            elif op == "square":
                y = y * y - 0.5
            elif op == "scale":
                y = y * 0.75 + 0.25
            elif op == "matmul":
                y = xg.matmul(y, w)
            elif op in layers:
                y = layers[op](y)
            elif op == "swap":
                y[0, ...], y[1, ...] = y[1, ...], y[0, ...]  # (array-api-strict wants the ellipsis)
            elif op == "int_index":
                y = y[idx["rows"]] * 1.0
            elif op == "slice_roll":
                y = xg.concat([y[:, 2:], y[:, :2]], axis=1)
            elif op == "flip":
                y = xg.flip(y, axis=0)
            elif op == "setitem":
                y[1, :] = y[0, :] * 2.0
            elif op == "iadd":
                y += y[2, :]
            elif op == "center":
                y = y - xg.mean(y, axis=0, keepdims=True)
            elif op == "cumsum":
                y = xg.cumulative_sum(y, axis=1)
            elif op == "where":
                y = xg.where(y > 0.1, y, y * 0.5)
            elif op == "random":
                y = y + xg.random.normal((S, D), dtype=xg.float64)
            elif op == "uniform":
                y = y * xg.random.uniform(shape=(S, D), dtype=xg.float64)
            elif op == "dropout_train":  # (in training mode: the mask is a draw, shared under "same")
                y = xg.nn.functional.dropout(y, 0.5, training=True)
            elif op == "softmax":
                y = xg.nn.functional.softmax(y, dim=-1)
            elif op == "mask_set":
                y[y > 0.5] = 0.5
            elif op == "col_set":
                y[:, 0] = 0.25
            elif op == "int_set":
                y[::2, :] = y[1, :]
            elif op == "swap_cols":
                y[:, 0], y[:, 1] = y[:, 1], y[:, 0]
            elif op == "view_write":
                v = y[1:, :]
                v *= 2.0
            elif op == "take":
                y = xg.take(y, idx["cols"], axis=1)
            elif op == "sort":
                y = xg.sort(y, axis=1)
            elif op == "clip":
                y = xg.clip(y, -0.5, 0.5)
            elif op == "max":
                y = y - xg.max(y, axis=1, keepdims=True)
        return y

    return f


def _check(backend: Any, got: Any, want: Any, what: str, exact: bool) -> None:
    g, w = to_numpy(got), to_numpy(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (what, g.shape, g.dtype, w.shape, w.dtype)
    if exact:
        np.testing.assert_array_equal(g, w, err_msg=what)
    else:
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=what)


def _examples(backend: Any) -> int:
    if os.environ.get("HYPOTHESIS_PROFILE", "ci") not in ("ci", "debug"):
        return settings().max_examples
    return {"numpy": 6, "dask": 1, "jax": 1}.get(backend.name, 3)  # (JAX: eager dispatch, ~8 s an example)


def test_vmap_agrees_with_a_python_loop(backend: Any) -> None:
    layers = _layers(backend)
    w = backend.asarray(W)
    idx = _indices(backend)

    @settings(max_examples=_examples(backend))
    @given(ops=st.lists(st.sampled_from(sorted(OPS)), min_size=1, max_size=6), seed=st.integers(0, 2**16))
    def run(ops: list[str], seed: int) -> None:
        xs_np = np.random.default_rng(seed).standard_normal((N, S, D))
        xs = backend.asarray(xs_np)
        f = _program(ops, layers, w, idx)
        exact = backend.name == "numpy" and not any(OPS[o] for o in ops)

        def loop(xs: Any, g: Callable[[Any], Any] = f) -> Any:
            outs = []
            for i in range(N):
                with backend.policy(seed=seed):  # ("same": each example draws what the batch drew)
                    outs.append(g(xs[i, ...]))
            return xg.stack(outs)

        def batched(xs: Any, g: Callable[[Any], Any] = f) -> Any:
            with backend.policy(seed=seed):
                return xg.vmap(g, randomness="same")(xs)

        _check(backend, batched(xs), loop(xs), f"values of {ops}", exact)

        def loss(y: Any) -> Any:
            return xg.sum(xg.sin(y) * y)

        # grad of vmap against grad of the loop
        _check(backend, xg.grad(lambda xs: loss(batched(xs)))(xs), xg.grad(lambda xs: loss(loop(xs)))(xs),
               f"grad of {ops}", exact)
        # vmap of grad against the loop of grad
        per = xg.grad(lambda x: loss(f(x)))
        _check(backend, batched(xs, per), loop(xs, per), f"per-example grads of {ops}", exact)
        # the gradient of the closed-over layer's parameters, through vmap and through the loop
        if "linear" in ops:
            lin = layers["linear"]
            grads = []
            for run_ in (batched, loop):
                lin.zero_grad()
                loss(run_(xs)).backward()
                grads.append((lin.weight.grad, lin.bias.grad))
            lin.zero_grad()
            for (a, b), name in zip(zip(*grads, strict=True), ("weight", "bias"), strict=True):
                _check(backend, a, b, f"linear.{name}.grad of {ops}", False)
        # the input is not changed (a program that writes in place writes into its own copy)
        _check(backend, xs, xs_np, "the input", True)

    run()


def test_vmap_randomness_different_draws_per_example_and_error_refuses(backend: Any) -> None:
    # "different" cannot be compared to a loop: its draws differ per example and are the same
    # for a batch drawn again under the same seed; "error" refuses a draw with its documented error
    f = _program(["tanh", "random"], {}, None, {})
    xs = backend.asarray(np.zeros((N, S, D)))
    outs = []
    for _ in range(2):
        with backend.policy(seed=3):
            outs.append(to_numpy(xg.vmap(f, randomness="different")(xs)))
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0][0], outs[0][1])
    try:
        with backend.policy(seed=3):
            xg.vmap(f, randomness="error")(xs)
    except xg.XpgradValueError as e:
        assert "randomness" in str(e) and "normal" in str(e), e
    else:
        raise AssertionError("randomness='error' did not refuse xg.random.normal")


def test_an_update_by_an_overlapping_view_is_numpys(backend: Any) -> None:
    # ``y += y[2]`` (the "iadd" op above, eagerly) and ``y[idx] = y[1]``: torch refuses an in-place
    # update by a view of the array it writes, or computes it element by element; the result is
    # NumPy's, the update by a copy of the view (eagerly and under jit)
    a = np.arange(12.0).reshape(3, 4)

    def f(x: Any, k: int) -> Any:
        y = xg.asarray(x) * 1.0
        y += y[k, :]
        y -= y[:, 1:2]
        y *= y[(k + 1) % 3, :]
        y[k::2, :] = y[(k + 1) % 3, :]
        return y

    jf = xg.jit(f, static_argnums=1)
    for k in range(3):
        want = a.copy()
        want += want[k]
        want -= want[:, 1:2]
        want *= want[(k + 1) % 3]
        want[k::2, :] = want[(k + 1) % 3]
        for _ in range(2):  # (traced, then replayed)
            _check(backend, f(backend.asarray(a), k), want, f"row {k}", True)
            _check(backend, jf(backend.asarray(a), k), want, f"row {k}, jit", True)
