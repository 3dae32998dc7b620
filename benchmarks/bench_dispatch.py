"""Dispatch overhead: the cached cost, in ns per call, of

* ``xpgrad._dispatch.backend_namespace(x, y)`` (the per-op hot path),
* the public ``xg.array_namespace(x, y)`` (adds the device check),
* ``xg.current_policy()`` (outside and inside a ``with`` block),

on NumPy arrays, Tensors and array-api-strict arrays, plus
``array_api_compat.array_namespace(x, y)`` as the uncached reference. Each figure is
the median over repeats of ``timeit`` loops (after a warm-up call fills the cache).

Run from the repository root: ``python -m benchmarks.bench_dispatch``. Prints one
line per measurement and writes them as JSON lines to benchmarks/results/dispatch.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import array_api_compat
import array_api_strict as xps
import numpy as np

import xpgrad as xg
from xpgrad._dispatch import backend_namespace

RESULTS = Path(__file__).resolve().parent / "results" / "dispatch.json"


def ns_per_call(fn: Callable[[], object], number: int, repeat: int) -> tuple[float, float, float]:
    """(median, min, max) over ``repeat`` loops of ``number`` calls, in ns per call."""
    fn()  # warm-up: fills the dispatch cache
    times = [t / number * 1e9 for t in timeit.repeat(fn, number=number, repeat=repeat)]
    return statistics.median(times), min(times), max(times)


def cases() -> list[tuple[str, str, Callable[[], object]]]:
    x, y = np.ones(4), np.ones(4)
    tx, ty = xg.asarray(x), xg.asarray(y)
    sx, sy = xps.asarray([1.0]), xps.asarray([2.0])
    out: list[tuple[str, str, Callable[[], object]]] = [
        ("backend_namespace", "numpy,numpy", lambda: backend_namespace(x, y)),
        ("backend_namespace", "Tensor,Tensor", lambda: backend_namespace(tx, ty)),
        ("backend_namespace", "strict,strict", lambda: backend_namespace(sx, sy)),
        ("array_namespace", "numpy,numpy", lambda: xg.array_namespace(x, y)),
        ("array_namespace", "Tensor,Tensor", lambda: xg.array_namespace(tx, ty)),
        ("array_namespace", "strict,strict", lambda: xg.array_namespace(sx, sy)),
        ("array_api_compat.array_namespace", "numpy,numpy", lambda: array_api_compat.array_namespace(x, y)),
        ("current_policy", "process default", xg.current_policy),
    ]
    return out


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=20_000, help="calls per timing loop")
    ap.add_argument("--repeat", type=int, default=15, help="timing loops; the median is reported")
    ap.add_argument("--output", type=Path, default=RESULTS, help="JSON lines file")
    args = ap.parse_args(argv)

    rows = []
    for func, args_kind, fn in cases():
        med, lo, hi = ns_per_call(fn, args.number, args.repeat)
        rows.append({"func": func, "args": args_kind, "median_ns": round(med, 1), "min_ns": round(lo, 1),
                     "max_ns": round(hi, 1)})
    with xg.default_device("array_api_strict", dtype="float32"):
        med, lo, hi = ns_per_call(xg.current_policy, args.number, args.repeat)
    rows.append({"func": "current_policy", "args": "inside a with block", "median_ns": round(med, 1),
                 "min_ns": round(lo, 1), "max_ns": round(hi, 1)})

    meta = {"python": platform.python_version(), "numpy": np.__version__, "xpgrad": xg.__version__,
            "machine": platform.machine(), "number": args.number, "repeat": args.repeat}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w") as f:
        for r in rows:
            f.write(json.dumps({**r, **meta}) + "\n")
    width = max(len(f"{r['func']}({r['args']})") for r in rows)
    for r in rows:
        label = f"{r['func']}({r['args']})"
        print(f"{label:<{width}}  {r['median_ns']:9.1f} ns/call  (min {r['min_ns']:.1f}, max {r['max_ns']:.1f})")
    print(f"written to {args.output}")
    return rows


if __name__ == "__main__":
    main()
