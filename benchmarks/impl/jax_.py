"""jax: eager (jax.grad op by op, no jit) and jax.jit (the whole gradient, and the update, compiled).

hessian, jacobian and per_example use jax.hessian, jax.jacrev and jax.vmap(jax.grad(loss)),
op by op or compiled as a whole.

jax.jit is a reference, not a peer: it compiles the whole step, which a tape does not.
Float64 is enabled (the chain, large and matchain workloads are float64).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from ..workloads import CHAIN_OPS, LR  # noqa: E402


def version() -> str:
    return jax.__version__


def make(workload: str, inp: dict[str, np.ndarray], jit: bool) -> Callable[[], Any]:
    t = {k: jnp.asarray(v) for k, v in inp.items()}
    if workload in _TRANSFORMS:
        fn, targs = _TRANSFORMS[workload](t)
        if jit:
            fn = jax.jit(fn).lower(*targs).compile()

        def run_transform() -> Any:
            out = fn(*targs)
            jax.block_until_ready(out)
            return list(out) if isinstance(out, tuple) else [out]

        return run_transform
    loss, args, n_diff, train = _LOSSES[workload](t)
    g = jax.grad(loss, argnums=tuple(range(n_diff)))
    if train:
        def step(*a: Any) -> Any:
            grads = g(*a)
            new = tuple(p - LR * gp for p, gp in zip(a[:n_diff], grads, strict=True))
            return grads, new
    else:
        def step(*a: Any) -> Any:
            return g(*a), None
    if jit:
        step = jax.jit(step).lower(*args).compile()  # compiled once, ahead of the timing
    state = list(args)

    def run() -> Any:
        grads, new = step(*state)
        if new is not None:
            state[:n_diff] = new
        jax.block_until_ready(grads)
        return list(grads)

    return run


def _chain(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...], int, bool]:
    def loss(x: Any, w: Any) -> Any:
        h = x
        for i in range(CHAIN_OPS):
            k = i % 4
            if k == 0:
                h = h * w
            elif k == 1:
                h = h + w
            elif k == 2:
                h = jnp.tanh(h)
            else:
                h = jnp.sin(h)
        return jnp.sum(h)

    return loss, (t["x"], t["w"]), 1, False


def _xent(z: Any, y: Any) -> Any:
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(z, axis=1), y[:, None], axis=1))


def _mlp(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...], int, bool]:
    def loss(w1: Any, b1: Any, w2: Any, b2: Any, w3: Any, b3: Any, x: Any, y: Any) -> Any:
        h = jax.nn.relu(x @ w1 + b1)
        h = jax.nn.relu(h @ w2 + b2)
        return _xent(h @ w3 + b3, y)

    return loss, (*(t[k] for k in ("W1", "b1", "W2", "b2", "W3", "b3")), t["x"], t["y"]), 6, True


def _large(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...], int, bool]:
    return (lambda x: jnp.sum(jnp.exp(jnp.sin(x)) * x)), (t["x"],), 1, False


def _matchain(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...], int, bool]:
    return (lambda a, b, c: jnp.sum(jnp.tanh(a @ b @ c))), (t["A"], t["B"], t["C"]), 3, False


def _conv(x: Any, w: Any, b: Any) -> Any:
    out = lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return out + b[None, :, None, None]


def _cnn(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...], int, bool]:
    def loss(w1: Any, b1: Any, w2: Any, b2: Any, w3: Any, b3: Any, x: Any, y: Any) -> Any:
        h = jax.nn.relu(_conv(x.reshape(-1, 1, 8, 8), w1, b1))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        h = jax.nn.relu(_conv(h, w2, b2))
        return _xent(h.reshape(h.shape[0], -1) @ w3.T + b3, y)

    return loss, (*(t[k] for k in ("w1", "b1", "w2", "b2", "w3", "b3")), t["x"], t["y"]), 6, True


_LOSSES = {"chain": _chain, "mlp": _mlp, "large": _large, "matchain": _matchain, "cnn": _cnn}


def _hessian(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    # A is an argument, not a closure constant: jit compiles it as an input
    return jax.hessian(lambda a, v: jnp.sum(jnp.tanh(a @ v) ** 2) + jax.nn.logsumexp(v), argnums=1), (t["A"], t["x"])


def _jacobian(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    return jax.jacrev(lambda a, v: jnp.tanh(a @ v), argnums=1), (t["A"], t["x"])


def _per_example(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    def loss(p: tuple[Any, Any], x: Any, yi: Any) -> Any:
        z = x @ p[0] + p[1]
        return jnp.logaddexp(0.0, z) - yi * z

    return jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)), ((t["w"], t["b"]), t["X"], t["y"])


_TRANSFORMS = {"hessian": _hessian, "jacobian": _jacobian, "per_example": _per_example}
