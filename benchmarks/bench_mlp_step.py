"""MLP training step: the demo's model (64-128-10, ReLU, cross-entropy, Adam) on a batch
of 32 float32 rows. Reports milliseconds per step (forward, backward, optimizer step)
for xpgrad on NumPy, xpgrad on torch tensors (torch's autograd off), and torch's own
autograd with torch.optim, all in one process, with the ratios to torch.

Run: python -m benchmarks.bench_mlp_step  (JSON line on stdout; torch optional)
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

BATCH, D_IN, D_HID, D_OUT = 32, 64, 128, 10
REPEATS, STEPS = 7, 50


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.random((BATCH, D_IN), dtype=np.float32), rng.integers(0, D_OUT, BATCH)


def xpgrad_step(backend: str) -> Callable[[], None]:
    """One training step of xpgrad's MLP on ``backend``, as a closure."""
    import xpgrad as xg

    x_np, y_np = _data()
    with xg.default_device(backend, seed=0, dtype="float32"):
        model = xg.nn.Sequential(xg.nn.Linear(D_IN, D_HID), xg.nn.ReLU(), xg.nn.Linear(D_HID, D_OUT))
        x, y = xg.asarray(x_np.tolist()), xg.asarray(y_np.tolist())  # built on the policy's backend
    opt = xg.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = xg.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def torch_step() -> Callable[[], None]:
    """The same step with torch.nn, torch's autograd and torch.optim."""
    import torch

    x_np, y_np = _data()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(D_IN, D_HID), torch.nn.ReLU(), torch.nn.Linear(D_HID, D_OUT))
    x, y = torch.asarray(x_np), torch.asarray(y_np)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def _ms_per_step(step: Callable[[], None]) -> float:
    step()  # warm up (lazy imports, caches)
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(STEPS):
            step()
        times.append((time.perf_counter() - t0) / STEPS * 1e3)
    return statistics.median(times)


def main() -> dict[str, Any]:
    result: dict[str, Any] = {"bench": "mlp_step", "shape": [BATCH, D_IN, D_HID, D_OUT]}
    result["xpgrad_numpy_ms"] = _ms_per_step(xpgrad_step("numpy"))
    try:
        import torch
    except ImportError:
        return result
    torch.set_num_threads(1)  # the tiny matrices of this model do not gain from threads
    result["torch_ms"] = _ms_per_step(torch_step())
    result["xpgrad_torch_ms"] = _ms_per_step(xpgrad_step("torch"))
    result["ratio_xpgrad_numpy_vs_torch"] = result["xpgrad_numpy_ms"] / result["torch_ms"]
    result["ratio_xpgrad_torch_vs_torch"] = result["xpgrad_torch_ms"] / result["torch_ms"]
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
