"""The workloads: their sizes, units and seeded inputs (the same numbers for every framework).

Five gradient workloads (chain, mlp, large, matchain, cnn) and three beyond the gradient
(hessian, jacobian, per_example: issue #18's baseline for vmap and the transforms).

``inputs(name, quick)`` returns a dict of NumPy arrays drawn from
``numpy.random.default_rng(SEED)``; each framework converts them to its own arrays.
``quick`` shrinks the sizes for a smoke run (the test suite's), never for a reported run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SEED = 20240611
GRADIENT_WORKLOADS = ("chain", "mlp", "large", "matchain", "cnn")
TRANSFORM_WORKLOADS = ("hessian", "jacobian", "per_example")
WORKLOADS = GRADIENT_WORKLOADS + TRANSFORM_WORKLOADS
# the docs page has one results section per group, each from its own run
GROUPS = {"gradients": GRADIENT_WORKLOADS, "transforms": TRANSFORM_WORKLOADS}
CHAIN_OPS = 200
LR = 0.01  # the SGD step of mlp and cnn


@dataclass(frozen=True)
class Workload:
    name: str
    unit: str  # what `median` is measured in
    per: int  # one timed call is divided by this (chain: per op)
    description: str


SPECS = {
    "chain": Workload("chain", "us/op", CHAIN_OPS,
                      f"{CHAIN_OPS} ops cycling h*w, h+w, tanh(h), sin(h) on float64[16], then sum and backward "
                      "(gradient w.r.t. the input)"),
    "mlp": Workload("mlp", "ms/step", 1,
                    "784-256-256-10 MLP, ReLU, softmax cross-entropy, batch 128, float32: forward, backward "
                    "and a plain SGD update"),
    "large": Workload("large", "ms", 1,
                      "sum(exp(sin(x)) * x) over 4,000,000 float64, gradient w.r.t. x"),
    "matchain": Workload("matchain", "ms", 1,
                         "sum(tanh(A @ B @ C)) for 64x64 float64 matrices, gradients for all three"),
    "cnn": Workload("cnn", "ms/step", 1,
                    "the demo's CNN (Conv2d(1,16,3,p=1), ReLU, MaxPool2d(2), Conv2d(16,32,3,p=1), ReLU, "
                    "Linear(512,10)) on a batch of 64 digits, float32: forward, cross-entropy, backward and "
                    "a plain SGD update"),
    "hessian": Workload("hessian", "ms", 1,
                        "the 200x200 Hessian of f(x) = sum(tanh(A @ x)**2) + logsumexp(x), x float64[200], "
                        "A 200x200 (torch.func.hessian, jax.hessian, autograd.hessian, xg.hessian)"),
    "jacobian": Workload("jacobian", "ms", 1,
                         "the 200x200 Jacobian of tanh(A @ x), x float64[200] (torch.func.jacrev, jax.jacrev, "
                         "autograd.jacobian, xg.jacrev)"),
    "per_example": Workload("per_example", "ms", 1,
                            "per-example gradients (w.r.t. w and b) of the logistic loss "
                            "logaddexp(0, x.w + b) - y (x.w + b), 256 examples x 50 features, float64: "
                            "vmap(grad(loss), in_axes=(None, 0, 0)) in torch.func, JAX and xpgrad; a Python loop "
                            "over the examples elsewhere (autograd, mygrad)"),
}


def sizes(quick: bool) -> dict[str, Any]:
    """The shapes of the workloads (``quick``: a smoke run)."""
    return {
        "chain_n": 16,
        "mlp": (16, 784, 32, 32, 10) if quick else (128, 784, 256, 256, 10),
        "large_n": 100_000 if quick else 4_000_000,
        "matchain_n": 16 if quick else 64,
        "cnn_batch": 8 if quick else 64,
        "hessian_n": 12 if quick else 200,
        "jacobian_n": 12 if quick else 200,
        "per_example": (8, 5) if quick else (256, 50),
    }


def _uniform_init(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    bound = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def inputs(name: str, quick: bool = False) -> dict[str, np.ndarray]:
    """The workload's inputs and initial parameters, from the seeded generator."""
    rng = np.random.default_rng(SEED)
    s = sizes(quick)
    if name == "chain":
        return {"x": rng.standard_normal(s["chain_n"]), "w": 0.5 * rng.standard_normal(s["chain_n"])}
    if name == "mlp":
        batch, d_in, h1, h2, d_out = s["mlp"]
        out = {"x": rng.random((batch, d_in), dtype=np.float32), "y": rng.integers(0, d_out, batch)}
        for i, (a, b) in enumerate([(d_in, h1), (h1, h2), (h2, d_out)], start=1):
            out[f"W{i}"] = _uniform_init(rng, (a, b), a)  # y = x @ W + b
            out[f"b{i}"] = _uniform_init(rng, (b,), a)
        return out
    if name == "large":
        return {"x": rng.standard_normal(s["large_n"])}
    if name == "matchain":
        n = s["matchain_n"]  # entries of A @ B @ C have variance about 1: tanh is not saturated
        scale = n ** (-1 / 3)
        return {k: scale * rng.standard_normal((n, n)) for k in "ABC"}
    if name == "cnn":
        x, y = _digits(s["cnn_batch"])
        return {
            "x": x, "y": y,
            "w1": _uniform_init(rng, (16, 1, 3, 3), 9), "b1": _uniform_init(rng, (16,), 9),
            "w2": _uniform_init(rng, (32, 16, 3, 3), 144), "b2": _uniform_init(rng, (32,), 144),
            "w3": _uniform_init(rng, (10, 512), 512), "b3": _uniform_init(rng, (10,), 512),
        }
    if name in ("hessian", "jacobian"):
        n = s[f"{name}_n"]  # entries of A @ x have variance about 1: tanh is not saturated
        return {"A": rng.standard_normal((n, n)) / np.sqrt(n), "x": rng.standard_normal(n)}
    if name == "per_example":
        m, d = s["per_example"]
        return {"w": rng.standard_normal(d) / np.sqrt(d), "b": np.asarray(0.1), "X": rng.standard_normal((m, d)),
                "y": rng.integers(0, 2, m).astype(np.float64)}
    msg = f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}"
    raise ValueError(msg)


def _digits(batch: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``batch`` training images of the demo's digits split (flat float32, labels int64)."""
    from xpgrad._demo import load_digits_split

    x_tr, y_tr, _, _ = load_digits_split(0)
    return np.ascontiguousarray(x_tr[:batch]), np.ascontiguousarray(y_tr[:batch])


# the order in which every framework returns its gradients
GRAD_NAMES = {
    "chain": ("x",),
    "mlp": ("W1", "b1", "W2", "b2", "W3", "b3"),
    "large": ("x",),
    "matchain": ("A", "B", "C"),
    "cnn": ("w1", "b1", "w2", "b2", "w3", "b3"),
    "hessian": ("H",),  # d2f/dx2, (n, n)
    "jacobian": ("J",),  # d tanh(A @ x) / dx, (n, n)
    "per_example": ("w", "b"),  # one row per example: (m, d) and (m,)
}
