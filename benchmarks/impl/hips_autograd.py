"""autograd: HIPS autograd (functional: grad of a Python function of NumPy arrays).

It has no convolution or pooling primitive, so the cnn workload writes them with
autograd.numpy: padding, the nine shifted slices stacked, einsum, and a max over
the 2x2 windows (autograd splits the gradient among tied maxima, PyTorch gives it to the first).
hessian and jacobian use autograd.hessian and autograd.jacobian; per_example has no vmap,
so it is a Python loop of autograd.grad over the examples (as xpgrad's).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version as _dist_version
from typing import Any

import autograd.numpy as anp
import numpy as np
from autograd import grad, hessian, jacobian
from autograd.scipy.special import logsumexp

from ..workloads import CHAIN_OPS, LR


def version() -> str:
    return _dist_version("autograd")


def make(workload: str, inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    inp = {k: v.copy() for k, v in inp.items()}
    if workload in _TRANSFORMS:
        return _TRANSFORMS[workload](inp)
    loss, args, n_diff, train = _LOSSES[workload](inp)
    g = grad(loss, argnum=list(range(n_diff)) if n_diff > 1 else 0)
    state = list(args)

    def run() -> Any:
        grads = g(*state)
        grads = list(grads) if n_diff > 1 else [grads]
        if train:  # a functional SGD update, as autograd code writes it
            state[:n_diff] = [p - np.float32(LR) * gp for p, gp in zip(state[:n_diff], grads, strict=True)]
        return grads

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
                h = anp.tanh(h)
            else:
                h = anp.sin(h)
        return anp.sum(h)

    return loss, (t["x"], t["w"]), 1, False


def _xent(z: Any, y: Any) -> Any:
    zmax = anp.max(z, axis=1, keepdims=True)
    logp = z - zmax - anp.log(anp.sum(anp.exp(z - zmax), axis=1, keepdims=True))
    return -anp.mean(logp[np.arange(z.shape[0]), y])


def _mlp(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...], int, bool]:
    def loss(w1: Any, b1: Any, w2: Any, b2: Any, w3: Any, b3: Any, x: Any, y: Any) -> Any:
        h = anp.maximum(anp.dot(x, w1) + b1, 0.0)
        h = anp.maximum(anp.dot(h, w2) + b2, 0.0)
        return _xent(anp.dot(h, w3) + b3, y)

    return loss, (*(t[k] for k in ("W1", "b1", "W2", "b2", "W3", "b3")), t["x"], t["y"]), 6, True


def _large(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...], int, bool]:
    return (lambda x: anp.sum(anp.exp(anp.sin(x)) * x)), (t["x"],), 1, False


def _matchain(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...], int, bool]:
    return (lambda a, b, c: anp.sum(anp.tanh(anp.dot(anp.dot(a, b), c)))), (t["A"], t["B"], t["C"]), 3, False


def _conv(x: Any, w: Any, b: Any) -> Any:
    _, c, h, wd = x.shape
    xp = anp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), "constant")
    win = anp.stack([xp[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], axis=-1)
    return anp.einsum("nchwk,ock->nohw", win, anp.reshape(w, (w.shape[0], c, 9))) + b[None, :, None, None]


def _cnn(t: dict[str, Any]) -> tuple[Any, tuple[Any, ...], int, bool]:
    def loss(w1: Any, b1: Any, w2: Any, b2: Any, w3: Any, b3: Any, x: Any, y: Any) -> Any:
        n = x.shape[0]
        h = anp.maximum(_conv(anp.reshape(x, (n, 1, 8, 8)), w1, b1), 0.0)
        h = anp.max(anp.reshape(h, (n, 16, 4, 2, 4, 2)), axis=(3, 5))
        h = anp.maximum(_conv(h, w2, b2), 0.0)
        return _xent(anp.dot(anp.reshape(h, (n, 512)), w3.T) + b3, y)

    return loss, (*(t[k] for k in ("w1", "b1", "w2", "b2", "w3", "b3")), t["x"], t["y"]), 6, True


_LOSSES = {"chain": _chain, "mlp": _mlp, "large": _large, "matchain": _matchain, "cnn": _cnn}


def _hessian(t: dict[str, Any]) -> Callable[[], Any]:
    a, x = t["A"], t["x"]
    h = hessian(lambda v: anp.sum(anp.tanh(anp.dot(a, v)) ** 2) + logsumexp(v))
    return lambda: [h(x)]


def _jacobian(t: dict[str, Any]) -> Callable[[], Any]:
    a, x = t["A"], t["x"]
    j = jacobian(lambda v: anp.tanh(anp.dot(a, v)))
    return lambda: [j(x)]


def _per_example(t: dict[str, Any]) -> Callable[[], Any]:
    params, xs, y = (t["w"], t["b"]), t["X"], t["y"]

    def loss(p: tuple[Any, Any], x: Any, yi: Any) -> Any:
        z = anp.dot(x, p[0]) + p[1]
        return anp.logaddexp(0.0, z) - yi * z

    g = grad(loss)

    def run() -> Any:  # no vmap: one autograd.grad per example
        rows = [g(params, xs[i], y[i]) for i in range(xs.shape[0])]
        return [np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])]

    return run


_TRANSFORMS = {"hessian": _hessian, "jacobian": _jacobian, "per_example": _per_example}
