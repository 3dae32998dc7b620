"""Chain workload: 200 ops cycling h*w, h+w, tanh(h), sin(h) on float64[16], then sum and
backward. Reports microseconds per op for xpgrad (NumPy backend) and for a hand-written
NumPy forward+backward in the same process (the floor for a NumPy-backed tape).

Run: python -m benchmarks.bench_chain  (JSON line on stdout)
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

import numpy as np

N_OPS = 200


def numpy_manual(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    h = x
    tape = []
    for i in range(N_OPS):
        k = i % 4
        if k == 0:
            tape.append((0, h))
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
    g = np.ones_like(h)
    for kind, saved in reversed(tape):
        if kind == 0:
            g = g * w
        elif kind == 2:
            g = g * (1 - saved * saved)
        elif kind == 3:
            g = g * np.cos(saved)
    return g


def xpgrad_chain(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    import xpgrad as xg

    xt = xg.asarray(x, requires_grad=True)
    wt = xg.asarray(w)
    h = xt
    for i in range(N_OPS):
        k = i % 4
        if k == 0:
            h = h * wt
        elif k == 1:
            h = h + wt
        elif k == 2:
            h = xg.tanh(h)
        else:
            h = xg.sin(h)
    xg.sum(h).backward()
    return xt.grad.data


def timeit(fn: Callable[[], object], repeat: int = 30, number: int = 10) -> list[float]:
    for _ in range(3):
        fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t0) / number)
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(16)
    w = rng.standard_normal(16) * 0.5
    np.testing.assert_allclose(xpgrad_chain(x, w), numpy_manual(x, w), rtol=1e-12)
    rows = {}
    for name, fn in [("numpy-manual", numpy_manual), ("xpgrad-numpy", xpgrad_chain)]:
        ts = timeit(lambda fn=fn: fn(x, w))
        q = statistics.quantiles(ts, n=4)
        rows[name] = {"median_us_per_op": statistics.median(ts) / N_OPS * 1e6,
                      "q1": q[0] / N_OPS * 1e6, "q3": q[2] / N_OPS * 1e6}
    rows["ratio"] = rows["xpgrad-numpy"]["median_us_per_op"] / rows["numpy-manual"]["median_us_per_op"]
    print(json.dumps({"workload": "chain", **rows}))


if __name__ == "__main__":
    main()
