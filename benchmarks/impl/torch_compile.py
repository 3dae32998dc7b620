"""torch.compile: each workload's forward (and loss) compiled, its backward compiled by AOTAutograd.

As torch.compile is used: the loss is ``torch.compile``-d and ``torch.autograd.grad`` (or
``backward()`` and ``torch.optim.SGD``'s step, eager) runs through the compiled backward;
hessian, jacobian and per_example compile the ``torch.func`` transform as a whole. The
backend is inductor (it needs a C++ compiler on the CPU); where inductor cannot run,
``make`` falls back to ``backend="aot_eager"`` and says so in ``version()``.
The first call compiles (the worker times it as the trace).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from ..workloads import CHAIN_OPS, LR

_BACKEND: list[str] = []


def _backend() -> str:
    """inductor where it compiles a tiny function here, else aot_eager."""
    if not _BACKEND:
        try:
            f = torch.compile(lambda v: torch.sin(v) * 2.0, backend="inductor")
            f(torch.ones(3))
            _BACKEND.append("inductor")
        except Exception:  # noqa: BLE001 - no C++ compiler, or inductor broken here: the fallback is reported in version()
            _BACKEND.append("aot_eager")
    return _BACKEND[0]


def version() -> str:
    return f"{torch.__version__} ({_backend()})"


def _compile(f: Callable[..., Any]) -> Callable[..., Any]:
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    return torch.compile(f, backend=_backend(), dynamic=False)  # type: ignore[no-any-return]


def make_eager(workload: str, inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    """The same workload in PyTorch eager (what the compilation time is compared with)."""
    from . import torch_eager

    return torch_eager.make(workload, inp)


def make(workload: str, inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    t = {k: torch.from_numpy(v.copy()) for k, v in inp.items()}
    return {"chain": _chain, "mlp": _mlp, "large": _large, "matchain": _matchain, "cnn": _cnn,
            "hessian": _hessian, "jacobian": _jacobian, "per_example": _per_example}[workload](t)


def _chain(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    x, w = t["x"].requires_grad_(), t["w"]

    def loss(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
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
        return h.sum()

    c = _compile(loss)
    return lambda: list(torch.autograd.grad(c(x, w), [x]))


def _train(params: list[torch.Tensor], loss_fn: Callable[[], torch.Tensor]) -> Callable[[], Any]:
    for p in params:
        p.requires_grad_()
    opt = torch.optim.SGD(params, lr=LR)
    c = _compile(loss_fn)

    def run() -> Any:
        opt.zero_grad()
        c().backward()
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
    c = _compile(lambda v: torch.sum(torch.exp(torch.sin(v)) * v))
    return lambda: list(torch.autograd.grad(c(x), [x]))


def _matchain(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    ms = [t[k].requires_grad_() for k in "ABC"]
    c = _compile(lambda a, b, cc: torch.tanh(a @ b @ cc).sum())
    return lambda: list(torch.autograd.grad(c(*ms), ms))


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
    h = _compile(torch.func.hessian(lambda v, m: torch.sum(torch.tanh(m @ v) ** 2) + torch.logsumexp(v, 0)))
    return lambda: [h(x, a)]


def _jacobian(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    a, x = t["A"], t["x"]
    j = _compile(torch.func.jacrev(lambda v, m: torch.tanh(m @ v)))
    return lambda: [j(x, a)]


def _per_example(t: dict[str, torch.Tensor]) -> Callable[[], Any]:
    params, xs, y = (t["w"], t["b"]), t["X"], t["y"]

    def loss(p: tuple[torch.Tensor, torch.Tensor], x: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        z = x @ p[0] + p[1]
        return torch.logaddexp(torch.zeros_like(z), z) - yi * z

    g = _compile(torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0)))
    return lambda: list(g(params, xs, y))
