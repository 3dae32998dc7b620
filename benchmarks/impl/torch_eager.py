"""torch: PyTorch eager mode on the CPU, its autograd and torch.optim.SGD; torch.func for hessian, jacobian, per_example."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from ..workloads import CHAIN_OPS, LR


def version() -> str:
    return torch.__version__


def make(workload: str, inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    t = {k: torch.from_numpy(v.copy()) for k, v in inp.items()}
    return {"chain": _chain, "mlp": _mlp, "large": _large, "matchain": _matchain, "cnn": _cnn,
            "hessian": _hessian, "jacobian": _jacobian, "per_example": _per_example}[workload](t)


def _chain(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    x, w = t["x"].requires_grad_(), t["w"]

    def run() -> Any:
        h = x
        for i in range(CHAIN_OPS):
            k = i % 4
            if k == 0:
                h = h * w
            elif k == 1:
                h = h + w
            elif k == 2:
                h = torch.tanh(h)
            else:
                h = torch.sin(h)
        (g,) = torch.autograd.grad(h.sum(), [x])
        return [g]

    return run


def _train(params: list[torch.Tensor], loss_fn: Callable[[], torch.Tensor]) -> Callable[[], Any]:
    for p in params:
        p.requires_grad_()
    opt = torch.optim.SGD(params, lr=LR)

    def run() -> Any:
        opt.zero_grad()
        loss_fn().backward()
        grads = [p.grad for p in params]
        opt.step()
        return grads

    return run


def _mlp(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    x, y = t["x"], t["y"]
    ps = [t[k] for k in ("W1", "b1", "W2", "b2", "W3", "b3")]

    def loss() -> torch.Tensor:
        w1, b1, w2, b2, w3, b3 = ps
        h = torch.relu(x @ w1 + b1)
        h = torch.relu(h @ w2 + b2)
        return F.cross_entropy(h @ w3 + b3, y)

    return _train(ps, loss)


def _large(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    x = t["x"].requires_grad_()

    def run() -> Any:
        (g,) = torch.autograd.grad(torch.sum(torch.exp(torch.sin(x)) * x), [x])
        return [g]

    return run


def _matchain(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    ms = [t[k].requires_grad_() for k in "ABC"]

    def run() -> Any:
        a, b, c = ms
        return list(torch.autograd.grad(torch.tanh(a @ b @ c).sum(), ms))

    return run


def _cnn(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    x, y = t["x"].reshape(-1, 1, 8, 8), t["y"]
    ps = [t[k] for k in ("w1", "b1", "w2", "b2", "w3", "b3")]

    def loss() -> torch.Tensor:
        w1, b1, w2, b2, w3, b3 = ps
        h = F.max_pool2d(torch.relu(F.conv2d(x, w1, b1, padding=1)), 2)
        h = torch.relu(F.conv2d(h, w2, b2, padding=1))
        return F.cross_entropy(F.linear(h.flatten(1), w3, b3), y)

    return _train(ps, loss)


def _hessian(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    a, x = t["A"], t["x"]
    h = torch.func.hessian(lambda v: torch.sum(torch.tanh(a @ v) ** 2) + torch.logsumexp(v, 0))
    return lambda: [h(x)]


def _jacobian(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    a, x = t["A"], t["x"]
    j = torch.func.jacrev(lambda v: torch.tanh(a @ v))
    return lambda: [j(x)]


def _per_example(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    params, xs, y = (t["w"], t["b"]), t["X"], t["y"]

    def loss(p: tuple[torch.Tensor, torch.Tensor], x: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        z = x @ p[0] + p[1]
        return torch.logaddexp(torch.zeros_like(z), z) - yi * z

    g = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))  # JAX's in_axes
    return lambda: list(g(params, xs, y))
