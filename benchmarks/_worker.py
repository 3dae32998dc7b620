"""Run one (framework, workload) pair in this process and print its JSON record (one line).

``python -m benchmarks._worker FRAMEWORK WORKLOAD [--repeats N] [--quick]``; the runner
(``python -m benchmarks``) starts one such process per pair, so every pair starts fresh
(no caches, allocator state or imports left by another framework).

Order: import, inputs, (large: the memory measurement on the first full-size call),
the gradient check of the first call's gradients against numpy-manual, warm-up, timing.
A staged framework (``STAGED``: xg.jit, torch.compile) first times one eager call of
the same workload (the fastest of 5), then its first call (the trace or compilation,
``trace_ms``: for xg.jit the fastest first call of 3 fresh jitted functions); its
memory measurement and, except for a training step, its gradient check are on the
second call, a replay of the program.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import math
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from .workloads import SPECS, inputs

# framework -> (module in benchmarks.impl, keyword arguments of its make())
FRAMEWORKS: dict[str, tuple[str, dict[str, Any]]] = {
    "numpy-manual": ("numpy_manual", {}),
    "torch": ("torch_eager", {}),
    "autograd": ("hips_autograd", {}),
    "mygrad": ("mygrad_", {}),
    "jax": ("jax_", {"jit": False}),
    "jax-jit": ("jax_", {"jit": True}),
    "xpgrad-numpy": ("xpgrad_", {"backend": "numpy"}),
    "xpgrad-torch": ("xpgrad_", {"backend": "torch"}),
    # staged: the first call traces (or compiles), the timed calls replay
    "torch-compile": ("torch_compile", {}),
    "xpgrad-numpy-jit": ("xpgrad_jit", {"backend": "numpy"}),
    "xpgrad-jax-jit": ("xpgrad_jit", {"backend": "jax"}),
    "xpgrad-torch-jit": ("xpgrad_jit", {"backend": "torch"}),
    "xpgrad-torch-compile": ("xpgrad_jit", {"backend": "torch", "compile": "torch"}),
}
# frameworks whose first call traces or compiles: it is timed apart (``trace_ms``) and, where the
# module has ``make_eager``, compared with one eager call of the same workload (``trace_ratio``)
# (jax-jit compiles in make(), ahead of the timing, as before: not staged here)
STAGED = ("torch-compile", "xpgrad-numpy-jit", "xpgrad-jax-jit", "xpgrad-torch-jit", "xpgrad-torch-compile")
# frameworks whose arrays are NumPy's: tracemalloc sees their buffers (not torch's or XLA's allocators)
NUMPY_BACKED = ("numpy-manual", "autograd", "mygrad", "xpgrad-numpy", "xpgrad-numpy-jit")
# first calls timed per staged framework (each of a fresh jitted function; torch.compile's are slow)
TRACE_SAMPLES = {"xpgrad-numpy-jit": 3, "xpgrad-jax-jit": 3, "xpgrad-torch-jit": 3}
# workloads whose call is a training step (each call changes the parameters)
TRAINING = ("mlp", "cnn")
# (framework, workload) pairs a framework cannot compute, each with the reason; the worker
# reports them as status "unsupported" without importing the framework, and
# tests/test_benchmarks.py accepts a missing workload function only where it is declared here
UNSUPPORTED: dict[tuple[str, str], str] = {
    ("mygrad", "hessian"): "MyGrad has no higher-order derivatives (its backward pass is not itself recorded)",
}
SAMPLE_SECONDS = 0.1  # each timing sample repeats the call until it lasts about this long
QUICK_SAMPLE_SECONDS = 0.005


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    info: dict[str, Any] = {"platform": platform.platform(), "python": platform.python_version(), "cpu": cpu,
                            "cpu_count": os.cpu_count()}
    if hasattr(os, "sched_getaffinity"):
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    if hasattr(os, "getloadavg"):
        info["loadavg_1min"] = round(os.getloadavg()[0], 2)
    return info


def to_numpy(a: Any) -> np.ndarray:
    """A gradient of any of the frameworks as a NumPy array."""
    if type(a).__module__.startswith("xpgrad"):
        return to_numpy(a.data)
    if type(a).__module__.startswith("torch"):
        return a.detach().cpu().numpy()
    if type(a).__module__.startswith("mygrad"):
        return np.asarray(a.data)
    return np.asarray(a)


# ------------------------------------------------------------------ memory
def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    msg = f"/proc/self/status has no {field}"
    raise OSError(msg)


def peak_rss_above(fn: Callable[[], Any]) -> tuple[Any, int, str]:
    """Call ``fn``; return its result, the peak RSS above the RSS before the call (bytes) and the method.

    Linux: the kernel's high-water mark (VmHWM) is reset to the current RSS by writing
    "5" to /proc/self/clear_refs, so VmHWM after the call is the exact peak, however
    short. Where that is refused, a thread samples VmRSS every 0.5 ms (can miss a
    peak shorter than that).
    """
    gc.collect()
    base = _status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        if _status_kib("VmHWM") > base + 64:  # the reset did not take
            raise OSError("VmHWM not reset")
    except OSError:
        peak = [base]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _status_kib("VmRSS"))
                time.sleep(0.0005)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        out = fn()
        done.set()
        th.join()
        peak[0] = max(peak[0], _status_kib("VmRSS"))
        return out, (peak[0] - base) * 1024, "VmRSS sampled every 0.5 ms"
    out = fn()
    return out, (_status_kib("VmHWM") - base) * 1024, "VmHWM after reset via /proc/self/clear_refs"


def peak_traced_above(fn: Callable[[], Any]) -> tuple[Any, int]:
    """Call ``fn``; return its result and the peak of the memory allocated during the call (bytes), by tracemalloc.

    tracemalloc sees NumPy's array buffers (and Python's objects), not torch's or XLA's
    allocators: a measure for the NumPy-backed frameworks. Unlike the RSS it does not
    depend on what the allocator kept from earlier calls (a jitted function's trace frees
    large arrays that the replay's allocations then reuse without growing the RSS).
    """
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return out, peak


# ------------------------------------------------------------------ one pair
def run_pair(framework: str, workload: str, repeats: int, quick: bool) -> dict[str, Any]:
    spec = SPECS[workload]
    rec: dict[str, Any] = {
        "framework": framework, "workload": workload, "unit": spec.unit, "status": "ok",
        "median": None, "q1": None, "q3": None, "samples": [], "calls_per_sample": None,
        "grad_max_abs_diff": None, "grad_max_rel_diff": None, "peak_mem_ratio": None, "mem_method": None,
        "best": None, "trace_ms": None, "eager_ms": None, "trace_ratio": None, "peak_traced_ratio": None,
        "quick": quick, "repeats": repeats,
        "versions": {"numpy": np.__version__, "python": platform.python_version()},
        "machine": machine(), "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if (framework, workload) in UNSUPPORTED:
        rec.update(status="unsupported", reason=UNSUPPORTED[framework, workload])
        return rec
    mod_name, kw = FRAMEWORKS[framework]
    try:
        mod = importlib.import_module(f".impl.{mod_name}", __package__)
        if framework.startswith("xpgrad-torch"):
            import torch

            rec["versions"]["torch"] = torch.__version__
        rec["versions"][framework] = mod.version()
    except Exception as e:  # noqa: BLE001 - any failure to import is reported, not raised
        rec.update(status="unavailable", reason=f"{type(e).__name__}: {e}")
        return rec
    inp = inputs(workload, quick)
    staged = framework in STAGED
    try:
        if staged:
            make_eager = getattr(mod, "make_eager", None)
            if make_eager is not None:
                eager = make_eager(workload, inputs(workload, quick), **kw)
                eager()  # (loads every lazy code path)
                times = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    eager()
                    times.append(time.perf_counter() - t0)
                rec["eager_ms"] = min(times) * 1e3
                del eager
            # the first call of a fresh jitted function (xg.jit: the trace), the fastest of a few fresh
            # ones where tracing is cheap (one first call is one sample, on a shared machine a noisy one)
            traces = []
            for _ in range(TRACE_SAMPLES.get(framework, 1) - 1):
                again = mod.make(workload, inputs(workload, quick), **kw)
                t0 = time.perf_counter()
                again()
                traces.append(time.perf_counter() - t0)
                del again
            run = mod.make(workload, inp, **kw)
            t0 = time.perf_counter()
            first = run()
            traces.append(time.perf_counter() - t0)
            rec["trace_ms"] = min(traces) * 1e3
            rec["trace_samples_ms"] = [t * 1e3 for t in traces]
            if rec["eager_ms"]:
                rec["trace_ratio"] = rec["trace_ms"] / rec["eager_ms"]
            if workload == "large":
                del first
                first, peak, method = peak_rss_above(run)  # a replay
                rec["peak_mem_ratio"] = peak / inp["x"].nbytes
                rec["mem_method"] = method
                if framework in NUMPY_BACKED:
                    del first
                    first, peak = peak_traced_above(run)
                    rec["peak_traced_ratio"] = peak / inp["x"].nbytes
            elif workload not in TRAINING:
                first = run()  # the gradient check is on a replay (a training step's is on the first step)
        elif workload == "large":
            # setup: a small call loads every lazy code path; then the full-size inputs
            small = {"x": inp["x"][:1000].copy()}
            mod.make(workload, small, **kw)()
            run = mod.make(workload, inp, **kw)
            first, peak, method = peak_rss_above(run)
            rec["peak_mem_ratio"] = peak / inp["x"].nbytes
            rec["mem_method"] = method
            if framework in NUMPY_BACKED:
                del first
                first, peak = peak_traced_above(run)
                rec["peak_traced_ratio"] = peak / inp["x"].nbytes
        else:
            run = mod.make(workload, inp, **kw)
            first = run()
        got = [to_numpy(g) for g in first]
        del first
    except Exception as e:  # noqa: BLE001 - a framework that cannot run the workload is reported
        rec.update(status="error", reason=f"{type(e).__name__}: {e}")
        return rec
    # gradient check against the hand-written NumPy gradients
    from .impl import numpy_manual

    ref = numpy_manual.make(workload, inputs(workload, quick))()
    if len(got) != len(ref) or any(g.shape != r.shape for g, r in zip(got, ref, strict=False)):
        rec.update(status="error", reason="gradient shapes differ from numpy-manual's: "
                   f"{[g.shape for g in got]} vs {[r.shape for r in ref]}")
        return rec
    diff = max(float(np.max(np.abs(g.astype(np.float64) - r))) for g, r in zip(got, ref, strict=True))
    scale = max(float(np.max(np.abs(r))) for r in ref)
    rec["grad_max_abs_diff"] = diff
    rec["grad_max_rel_diff"] = diff / scale if scale else diff
    del got, ref
    # timing
    target = QUICK_SAMPLE_SECONDS if quick else SAMPLE_SECONDS
    for _ in range(2):
        run()
    t0 = time.perf_counter()
    run()
    once = time.perf_counter() - t0
    number = max(1, math.ceil(target / max(once, 1e-9)))
    scale_unit = (1e6 if spec.unit.startswith("us") else 1e3) / spec.per
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            run()
        samples.append((time.perf_counter() - t0) / number * scale_unit)
    q = statistics.quantiles(samples, n=4, method="inclusive") if len(samples) > 1 else [samples[0]] * 3
    rec.update(median=statistics.median(samples), q1=q[0], q3=q[2], samples=samples, calls_per_sample=number,
               best=min(samples))
    return rec


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks._worker")
    ap.add_argument("framework", choices=sorted(FRAMEWORKS))
    ap.add_argument("workload", choices=sorted(SPECS))
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    rec = run_pair(a.framework, a.workload, a.repeats, a.quick)
    sys.stdout.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
