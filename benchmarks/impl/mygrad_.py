"""mygrad: MyGrad's tape (Tensor.backward), with its own conv_nd, max_pool and softmax_crossentropy.

MyGrad has no functional transforms: jacobian is one backward pass per output row (a
one-hot seed) and per_example one backward pass per example; it has no higher-order
derivatives, so hessian is declared unsupported (benchmarks._worker.UNSUPPORTED).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mygrad as mg
import numpy as np
from mygrad.nnet.layers import conv_nd, max_pool
from mygrad.nnet.losses import softmax_crossentropy

from ..workloads import CHAIN_OPS, LR


def version() -> str:
    return mg.__version__


def make(workload: str, inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    inp = {k: v.copy() for k, v in inp.items()}
    return {"chain": _chain, "mlp": _mlp, "large": _large, "matchain": _matchain, "cnn": _cnn,
            "jacobian": _jacobian, "per_example": _per_example}[workload](inp)


def _grads(loss: Any, ts: list[Any]) -> list[Any]:
    loss.backward()
    return [t.grad for t in ts]


def _chain(t: dict[str, Any]) -> Callable[[], Any]:
    x, w = mg.Tensor(t["x"]), mg.Tensor(t["w"], constant=True)

    def run() -> Any:
        h = x
        for i in range(CHAIN_OPS):
            k = i % 4
            if k == 0:
                h = h * w
            elif k == 1:
                h = h + w
            elif k == 2:
                h = mg.tanh(h)
            else:
                h = mg.sin(h)
        return _grads(mg.sum(h), [x])

    return run


def _train(ps: list[Any], loss_fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        grads = _grads(loss_fn(), ps)
        for p, g in zip(ps, grads, strict=True):
            p.data -= np.float32(LR) * g  # the graph is cleared after backward, so the data may change
        return grads

    return run


def _mlp(t: dict[str, Any]) -> Callable[[], Any]:
    x, y = t["x"], t["y"]
    ps = [mg.Tensor(t[k]) for k in ("W1", "b1", "W2", "b2", "W3", "b3")]

    def loss() -> Any:
        w1, b1, w2, b2, w3, b3 = ps
        h = mg.maximum(mg.matmul(x, w1) + b1, 0.0)
        h = mg.maximum(mg.matmul(h, w2) + b2, 0.0)
        return softmax_crossentropy(mg.matmul(h, w3) + b3, y)

    return _train(ps, loss)


def _large(t: dict[str, Any]) -> Callable[[], Any]:
    x = mg.Tensor(t["x"])

    def run() -> Any:
        return _grads(mg.sum(mg.exp(mg.sin(x)) * x), [x])

    return run


def _matchain(t: dict[str, Any]) -> Callable[[], Any]:
    ms = [mg.Tensor(t[k]) for k in "ABC"]

    def run() -> Any:
        a, b, c = ms
        return _grads(mg.sum(mg.tanh(mg.matmul(mg.matmul(a, b), c))), ms)

    return run


def _cnn(t: dict[str, Any]) -> Callable[[], Any]:
    x, y = t["x"].reshape(-1, 1, 8, 8), t["y"]
    ps = [mg.Tensor(t[k]) for k in ("w1", "b1", "w2", "b2", "w3", "b3")]

    def loss() -> Any:
        w1, b1, w2, b2, w3, b3 = ps
        h = mg.maximum(conv_nd(x, w1, stride=1, padding=1) + b1[None, :, None, None], 0.0)
        h = max_pool(h, (2, 2), (2, 2))
        h = mg.maximum(conv_nd(h, w2, stride=1, padding=1) + b2[None, :, None, None], 0.0)
        return softmax_crossentropy(mg.matmul(mg.reshape(h, (h.shape[0], 512)), mg.transpose(w3)) + b3, y)

    return _train(ps, loss)


def _jacobian(t: dict[str, Any]) -> Callable[[], Any]:
    a, x = t["A"], mg.Tensor(t["x"])

    def run() -> Any:  # one forward and backward per row (backward clears the graph)
        n = a.shape[0]
        rows = []
        for i in range(n):
            seed = np.zeros(n)
            seed[i] = 1.0
            mg.tanh(mg.matmul(a, x)).backward(seed)
            rows.append(x.grad)
        return [np.stack(rows)]

    return run


def _per_example(t: dict[str, Any]) -> Callable[[], Any]:
    w, b, xs, y = mg.Tensor(t["w"]), mg.Tensor(t["b"]), t["X"], t["y"]

    def run() -> Any:  # one forward and backward per example
        gw, gb = [], []
        for i in range(xs.shape[0]):
            z = mg.matmul(xs[i], w) + b
            (mg.logaddexp(0.0, z) - y[i] * z).backward()
            gw.append(w.grad)
            gb.append(b.grad)
        return [np.stack(gw), np.stack(gb)]

    return run
