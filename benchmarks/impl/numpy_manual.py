"""numpy-manual: a hand-written NumPy forward and backward for every workload.

This is the floor for a NumPy-backed tape: the same NumPy calls a tape would make,
with no recording. The CNN's convolution is written with
``sliding_window_view`` and ``einsum``, its max-pool backward with a mask.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..workloads import CHAIN_OPS, LR


def version() -> str:
    return np.__version__


def make(workload: str, inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    inp = {k: v.copy() for k, v in inp.items()}
    return {"chain": _chain, "mlp": _mlp, "large": _large, "matchain": _matchain, "cnn": _cnn,
            "hessian": _hessian, "jacobian": _jacobian, "per_example": _per_example}[workload](inp)


def _chain(inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    x, w = inp["x"], inp["w"]

    def run() -> Any:
        h = x
        tape = []
        for i in range(CHAIN_OPS):
            k = i % 4
            if k == 0:
                tape.append((0, None))
                h = h * w
            elif k == 1:
                tape.append((1, None))
                h = h + w
            elif k == 2:
                h = np.tanh(h)
                tape.append((2, h))
            else:
                tape.append((3, h))
                h = np.sin(h)
        h.sum()
        g = np.ones_like(h)
        for kind, saved in reversed(tape):
            if kind == 0:
                g = g * w
            elif kind == 2:
                g = g * (1 - saved * saved)
            elif kind == 3:
                g = g * np.cos(saved)
        return [g]

    return run


def _softmax_xent_grad(z: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of logits ``z`` and its gradient w.r.t. ``z``."""
    n = z.shape[0]
    zmax = z.max(axis=1, keepdims=True)
    e = np.exp(z - zmax)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(s[:, 0]) + zmax[:, 0] - z[np.arange(n), y]))
    gz = e / s
    gz[np.arange(n), y] -= 1
    gz /= n
    return loss, gz


def _mlp(inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    x, y = inp["x"], inp["y"]
    ps = [inp[k] for k in ("W1", "b1", "W2", "b2", "W3", "b3")]

    def run() -> Any:
        w1, b1, w2, b2, w3, b3 = ps
        h1 = x @ w1 + b1
        a1 = np.maximum(h1, 0)
        h2 = a1 @ w2 + b2
        a2 = np.maximum(h2, 0)
        z = a2 @ w3 + b3
        _, gz = _softmax_xent_grad(z, y)
        gw3, gb3 = a2.T @ gz, gz.sum(axis=0)
        ga2 = gz @ w3.T
        ga2 *= h2 > 0
        gw2, gb2 = a1.T @ ga2, ga2.sum(axis=0)
        ga1 = ga2 @ w2.T
        ga1 *= h1 > 0
        gw1, gb1 = x.T @ ga1, ga1.sum(axis=0)
        grads = [gw1, gb1, gw2, gb2, gw3, gb3]
        for p, g in zip(ps, grads, strict=True):
            p -= np.float32(LR) * g
        return grads

    return run


def _large(inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    x = inp["x"]

    def run() -> Any:
        e = np.sin(x)
        np.exp(e, out=e)
        float(np.dot(e, x))  # the loss, without a temporary
        # d/dx exp(sin x) * x = e * (x * cos(x) + 1): one more array besides e
        g = np.cos(x)
        g *= x
        g += 1.0
        g *= e
        return [g]

    return run


def _matchain(inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    a, b, c = inp["A"], inp["B"], inp["C"]

    def run() -> Any:
        p = a @ b
        t = np.tanh(p @ c)
        float(t.sum())
        gq = 1 - t * t
        gc = p.T @ gq
        gp = gq @ c.T
        return [gp @ b.T, a.T @ gp, gc]

    return run


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """3x3 convolution with padding 1; returns the output and the input's windows (for backward)."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = sliding_window_view(xp, (3, 3), axis=(2, 3))  # (n, c, h, w, 3, 3)
    out = np.einsum("nchwij,ocij->nohw", win, w, optimize=True)
    out += b[None, :, None, None]
    return out, win


def _conv_backward(g: np.ndarray, win: np.ndarray, w: np.ndarray, need_x: bool) -> tuple[Any, Any, Any]:
    gw = np.einsum("nchwij,nohw->ocij", win, g, optimize=True)
    gb = g.sum(axis=(0, 2, 3))
    if not need_x:
        return None, gw, gb
    n, _, h, wd = g.shape
    gxp = np.zeros((n, w.shape[1], h + 2, wd + 2), dtype=g.dtype)
    for i in range(3):
        for j in range(3):
            gxp[:, :, i:i + h, j:j + wd] += np.einsum("nohw,oc->nchw", g, w[:, :, i, j], optimize=True)
    return gxp[:, :, 1:-1, 1:-1], gw, gb


def _cnn(inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    x = inp["x"].reshape(-1, 1, 8, 8)
    y = inp["y"]
    ps = [inp[k] for k in ("w1", "b1", "w2", "b2", "w3", "b3")]

    def run() -> Any:
        w1, b1, w2, b2, w3, b3 = ps
        n = x.shape[0]
        h1, win1 = _conv(x, w1, b1)
        a1 = np.maximum(h1, 0)
        # 2x2 windows as the last axis, in row-major order within the window
        r = a1.reshape(n, 16, 4, 2, 4, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, 16, 4, 4, 4)
        arg = r.argmax(axis=-1)  # the first maximum, as PyTorch picks it
        m = np.take_along_axis(r, arg[..., None], axis=-1)[..., 0]  # (n, 16, 4, 4)
        h2, win2 = _conv(m, w2, b2)
        a2 = np.maximum(h2, 0)
        f = a2.reshape(n, 512)
        z = f @ w3.T + b3
        _, gz = _softmax_xent_grad(z, y)
        gw3, gb3 = gz.T @ f, gz.sum(axis=0)
        ga2 = (gz @ w3).reshape(n, 32, 4, 4)
        ga2 *= h2 > 0
        gm, gw2, gb2 = _conv_backward(ga2, win2, w2, need_x=True)
        # max-pool backward: the gradient goes to the window's first maximum. Ties are common:
        # on the blank border of a digit every pixel of a window equals the bias.
        gr = (np.arange(4) == arg[..., None]) * gm[..., None]  # (n, 16, 4, 4, 4)
        ga1 = gr.reshape(n, 16, 4, 4, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, 16, 8, 8)
        ga1 *= h1 > 0
        _, gw1, gb1 = _conv_backward(ga1, win1, w1, need_x=False)
        grads = [gw1, gb1, gw2, gb2, gw3, gb3]
        for p, g in zip(ps, grads, strict=True):
            p -= np.float32(LR) * g.astype(np.float32, copy=False)
        return grads

    return run


def _hessian(inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    a, x = inp["A"], inp["x"]

    def run() -> Any:
        t = np.tanh(a @ x)
        # d2/du2 tanh(u)^2 = 2 (1 - t^2)(1 - 3 t^2): A^T diag(d2) A
        d2 = 2 * (1 - t * t) * (1 - 3 * t * t)
        h = a.T @ (d2[:, None] * a)
        e = np.exp(x - x.max())
        p = e / e.sum()  # logsumexp's Hessian: diag(p) - p p^T
        h -= np.outer(p, p)
        h[np.diag_indices_from(h)] += p
        return [h]

    return run


def _jacobian(inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    a, x = inp["A"], inp["x"]

    def run() -> Any:
        t = np.tanh(a @ x)
        return [(1 - t * t)[:, None] * a]

    return run


def _per_example(inp: dict[str, np.ndarray]) -> Callable[[], Any]:
    w, b, xs, y = inp["w"], inp["b"], inp["X"], inp["y"]

    def run() -> Any:
        z = xs @ w + b
        r = 0.5 * (1 + np.tanh(0.5 * z)) - y  # sigmoid(z) - y, stable for any z
        return [r[:, None] * xs, r]

    return run
