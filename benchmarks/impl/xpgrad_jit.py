"""xpgrad under ``xg.jit``: each workload's whole step traced once, then replayed.

The same functions as :mod:`.xpgrad_` (the eager benchmark), wrapped in ``xg.jit``:
chain, large and matchain are ``xg.jit(xg.grad(loss))`` of the arrays; mlp and cnn jit
the whole training step (``zero_grad``, ``backward``, ``SGD.step``) with the parameters
and the optimizer as the jitted function's state; hessian, jacobian and per_example jit
``xg.hessian``, ``xg.jacrev`` and ``xg.vmap(xg.grad(loss))``.

``backend``: "numpy" replays the program; "jax" runs it under ``jax.jit`` (XLA);
"torch" replays it on torch tensors, and ``compile="torch"`` hands it to ``torch.compile``.
The first call of ``run`` is the trace (the worker times it separately); ``make_eager``
is the eager benchmark's ``run``, which the trace time is compared with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import xpgrad as xg
from xpgrad import nn
from xpgrad.nn import functional as F  # noqa: N812

from ..workloads import CHAIN_OPS, LR
from . import xpgrad_

TRAINING = ("mlp", "cnn")  # the workloads whose step changes the state: each replay is a new step


def version() -> str:
    return xg.__version__


def make_eager(workload: str, inp: dict[str, np.ndarray], backend: str, compile: str | None = None) -> Callable[[], Any]:  # noqa: A002
    """The eager benchmark of the same workload on the same arrays' library."""
    if backend == "jax":
        return _make(workload, inp, backend, jit=None)
    return xpgrad_.make(workload, inp, backend=backend)


def make(workload: str, inp: dict[str, np.ndarray], backend: str, compile: str | None = None) -> Callable[[], Any]:  # noqa: A002
    return _make(workload, inp, backend, jit=lambda f: xg.jit(f, compile=compile))


def _convert(inp: dict[str, np.ndarray], backend: str) -> dict[str, Any]:
    if backend == "torch":
        import torch

        return {k: torch.from_numpy(v.copy()) for k, v in inp.items()}
    if backend == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        return {k: jnp.asarray(v) for k, v in inp.items()}
    return {k: v.copy() for k, v in inp.items()}


def _make(workload: str, inp: dict[str, np.ndarray], backend: str, jit: Callable[[Any], Any] | None) -> Callable[[], Any]:
    a = _convert(inp, backend)
    fn = {"chain": _chain, "mlp": _mlp, "large": _large, "matchain": _matchain, "cnn": _cnn,
          "hessian": _hessian, "jacobian": _jacobian, "per_example": _per_example}[workload]
    run = fn(a, jit or (lambda f: f))
    if backend != "jax":
        return run

    import jax

    def run_blocked() -> Any:
        out = run()
        jax.block_until_ready([g.data if isinstance(g, xg.Tensor) else g for g in out])
        return out

    run_blocked.program = run.program  # type: ignore[attr-defined]
    return run_blocked


def _bind(fn: Callable[..., Any], args: tuple[Any, ...], post: Callable[[Any], Any]) -> Callable[[], Any]:
    """``run``: one call of ``fn`` (jitted or not) on ``args``; ``run.program()`` prints what it replays."""

    def run() -> Any:
        return post(fn(*args))

    run.program = lambda: fn.trace(*args)  # type: ignore[attr-defined]
    return run


def _chain(a: dict[str, Any], jit: Callable[[Any], Any]) -> Callable[[], Any]:
    def loss(x: Any, w: Any) -> Any:
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
        return xg.sum(h)

    g = jit(xg.grad(loss))
    x, w = a["x"], a["w"]
    return _bind(g, (x, w), lambda r: [r])


def _large(a: dict[str, Any], jit: Callable[[Any], Any]) -> Callable[[], Any]:
    g = jit(xg.grad(lambda x: xg.sum(xg.exp(xg.sin(x)) * x)))
    x = a["x"]
    return _bind(g, (x,), lambda r: [r])


def _matchain(a: dict[str, Any], jit: Callable[[Any], Any]) -> Callable[[], Any]:
    g = jit(xg.grad(lambda p, q, r: xg.sum(xg.tanh(p @ q @ r)), argnums=(0, 1, 2)))
    ms = a["A"], a["B"], a["C"]
    return _bind(g, ms, list)


def _train(params: list[Any], model: Any, loss_fn: Callable[..., xg.Tensor], jit: Callable[[Any], Any],
           x: Any, y: Any) -> Callable[[], Any]:
    """The whole step jitted: the parameters (or the model) and the optimizer are its state."""
    opt = xg.optim.SGD(params, lr=LR)

    def step(state: Any, opt: Any, x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss_fn(state, xg.asarray(x), xg.asarray(y)).backward()
        grads = [p.grad for p in params]
        opt.step()
        return grads

    step_j = jit(step)
    return _bind(step_j, (model, opt, x, y), lambda r: r)


def _mlp(a: dict[str, Any], jit: Callable[[Any], Any]) -> Callable[[], Any]:
    ps = [nn.Parameter(xg.asarray(a[k])) for k in ("W1", "b1", "W2", "b2", "W3", "b3")]

    def loss(state: Any, x: Any, y: Any) -> xg.Tensor:
        w1, b1, w2, b2, w3, b3 = state
        h = F.relu(x @ w1 + b1)
        h = F.relu(h @ w2 + b2)
        return F.cross_entropy(h @ w3 + b3, y)

    return _train(ps, ps, loss, jit, a["x"], a["y"])


def _cnn(a: dict[str, Any], jit: Callable[[Any], Any]) -> Callable[[], Any]:
    """The demo's model itself (xpgrad._demo.build_model), with the workload's initial weights."""
    from xpgrad._demo import build_model

    model = build_model("cnn")
    ps = list(model.parameters())
    for p, k in zip(ps, ("w1", "b1", "w2", "b2", "w3", "b3"), strict=True):
        if tuple(p.shape) != tuple(a[k].shape):
            msg = f"cnn: the demo's parameter {k} has shape {tuple(p.shape)}, the workload {tuple(a[k].shape)}"
            raise ValueError(msg)
        p.data = a[k]
    loss_fn = nn.CrossEntropyLoss()
    return _train(ps, model, lambda m, x, y: loss_fn(m(x), y), jit, a["x"], a["y"])


def _hessian(a: dict[str, Any], jit: Callable[[Any], Any]) -> Callable[[], Any]:
    # A is an argument, not a closure constant (as in jax-jit's): the program reads it as an input;
    # xg.asarray: a raw traced array's operators do not hand over to a Tensor operand (v)
    h = jit(xg.hessian(lambda v, m: xg.sum(xg.tanh(xg.asarray(m) @ v) ** 2) + xg.special.logsumexp(v)))
    m, x = a["A"], a["x"]
    return _bind(h, (x, m), lambda r: [r])


def _jacobian(a: dict[str, Any], jit: Callable[[Any], Any]) -> Callable[[], Any]:
    j = jit(xg.jacrev(lambda v, m: xg.tanh(xg.asarray(m) @ v)))
    m, x = a["A"], a["x"]
    return _bind(j, (x, m), lambda r: [r])


def _per_example(a: dict[str, Any], jit: Callable[[Any], Any]) -> Callable[[], Any]:
    def loss(p: tuple[Any, Any], x: Any, yi: Any) -> Any:
        z = x @ p[0] + p[1]
        return xg.logaddexp(xg.zeros_like(z), z) - yi * z

    # (the raw arrays a traced call receives are wrapped in Tensors: a raw traced array's
    # operators do not hand over to a Tensor operand the way a NumPy array's do)
    g = jit(xg.vmap(xg.grad(loss), in_axes=(None, 0, 0)))
    params, xs, y = (a["w"], a["b"]), a["X"], a["y"]
    return _bind(g, (params, xs, y), list)
