"""xpgrad on NumPy arrays and on torch tensors (torch's autograd unused), with xpgrad.optim.SGD.

hessian and jacobian use xg.hessian and xg.jacrev (one batched pass over the basis);
per_example is `xg.vmap(xg.grad(loss), in_axes=(None, 0, 0))`, as torch.func's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import xpgrad as xg
from xpgrad import nn
from xpgrad.nn import functional as F  # noqa: N812

from ..workloads import CHAIN_OPS, LR


def version() -> str:
    return xg.__version__


def make(workload: str, inp: dict[str, np.ndarray], backend: str) -> Callable[[], Any]:
    if backend == "torch":
        import torch

        t = {k: xg.asarray(torch.from_numpy(v.copy())) for k, v in inp.items()}
    else:
        t = {k: xg.asarray(v.copy()) for k, v in inp.items()}
    return {"chain": _chain, "mlp": _mlp, "large": _large, "matchain": _matchain, "cnn": _cnn,
            "hessian": _hessian, "jacobian": _jacobian, "per_example": _per_example}[workload](t)


def _chain(t: dict[str, xg.Tensor]) -> Callable[[], Any]:
    x, w = t["x"], t["w"]
    x.requires_grad = True

    def run() -> Any:
        h = x
        for i in range(CHAIN_OPS):
            k = i % 4
            if k == 0:
                h = h * w
            elif k == 1:
                h = h + w
            elif k == 2:
                h = xg.tanh(h)
            else:
                h = xg.sin(h)
        return list(xg.autograd.grad(xg.sum(h), [x]))

    return run


def _train(params: list[Any], loss_fn: Callable[[], xg.Tensor]) -> Callable[[], Any]:
    opt = xg.optim.SGD(params, lr=LR)

    def run() -> Any:
        opt.zero_grad()
        loss_fn().backward()
        grads = [p.grad for p in params]
        opt.step()
        return grads

    return run


def _mlp(t: dict[str, xg.Tensor]) -> Callable[[], Any]:
    x, y = t["x"], t["y"]
    ps = [nn.Parameter(t[k]) for k in ("W1", "b1", "W2", "b2", "W3", "b3")]

    def loss() -> xg.Tensor:
        w1, b1, w2, b2, w3, b3 = ps
        h = F.relu(x @ w1 + b1)
        h = F.relu(h @ w2 + b2)
        return F.cross_entropy(h @ w3 + b3, y)

    return _train(ps, loss)


def _large(t: dict[str, xg.Tensor]) -> Callable[[], Any]:
    x = t["x"]
    x.requires_grad = True

    def run() -> Any:
        return list(xg.autograd.grad(xg.sum(xg.exp(xg.sin(x)) * x), [x]))

    return run


def _matchain(t: dict[str, xg.Tensor]) -> Callable[[], Any]:
    ms = [t[k] for k in "ABC"]
    for m in ms:
        m.requires_grad = True

    def run() -> Any:
        a, b, c = ms
        return list(xg.autograd.grad(xg.sum(xg.tanh(a @ b @ c)), ms))

    return run


def _cnn(t: dict[str, xg.Tensor]) -> Callable[[], Any]:
    """The demo's model itself (xpgrad._demo.build_model), with the workload's initial weights."""
    from xpgrad._demo import build_model

    x, y = t["x"], t["y"]
    model = build_model("cnn")
    ps = list(model.parameters())
    for p, k in zip(ps, ("w1", "b1", "w2", "b2", "w3", "b3"), strict=True):
        if tuple(p.shape) != tuple(t[k].shape):
            msg = f"cnn: the demo's parameter {k} has shape {tuple(p.shape)}, the workload {tuple(t[k].shape)}"
            raise ValueError(msg)
        p.data = t[k].data
    loss_fn = nn.CrossEntropyLoss()
    return _train(ps, lambda: loss_fn(model(x), y))


# the functional transforms take and return the backend's arrays (the Tensors' .data)
def _hessian(t: dict[str, xg.Tensor]) -> Callable[[], Any]:
    a, x = t["A"].data, t["x"].data
    h = xg.hessian(lambda v: xg.sum(xg.tanh(a @ v) ** 2) + xg.special.logsumexp(v))
    return lambda: [h(x)]


def _jacobian(t: dict[str, xg.Tensor]) -> Callable[[], Any]:
    a, x = t["A"].data, t["x"].data
    j = xg.jacrev(lambda v: xg.tanh(a @ v))
    return lambda: [j(x)]


def _per_example(t: dict[str, xg.Tensor]) -> Callable[[], Any]:
    params, xs, y = (t["w"].data, t["b"].data), t["X"].data, t["y"].data

    def loss(p: tuple[Any, Any], x: Any, yi: Any) -> Any:
        z = x @ p[0] + p[1]
        return xg.logaddexp(xg.zeros_like(z), z) - yi * z

    g = xg.vmap(xg.grad(loss), in_axes=(None, 0, 0))
    return lambda: list(g(params, xs, y))
