"""``python -m benchmarks``: every workload for every framework, each pair in its own process.

Writes into ``--out`` (default benchmarks/results): ``results.jsonl`` (one record per
pair), ``table.md`` (ratios to numpy-manual from this run, medians, gradient check)
and ``chart.png``; prints the table. ``nox -s bench -- ARGS`` runs the same in a fresh
virtualenv with the ``bench`` extra. ``--quick`` is a smoke run (small sizes, few
samples) whose numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import report
from ._worker import FRAMEWORKS, machine
from .workloads import SPECS, WORKLOADS

ROOT = Path(__file__).resolve().parent.parent


def _names(value: str, known: tuple[str, ...] | list[str], what: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [n for n in names if n not in known]
    if bad:
        msg = f"unknown {what}: {', '.join(bad)}; choose from {', '.join(known)}"
        raise argparse.ArgumentTypeError(msg)
    return names


def thread_env(threads: int) -> dict[str, str]:
    """The environment that limits every library's thread pool to ``threads`` (0: leave them alone)."""
    env = dict(os.environ)
    if threads > 0:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(threads)
        if threads == 1:
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                                " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    return env


def run_one(framework: str, workload: str, repeats: int, quick: bool, timeout: float,
            threads: int = 1) -> dict[str, Any]:
    """One pair in a fresh interpreter; a crash or a timeout becomes an error record."""
    cmd = [sys.executable, "-m", "benchmarks._worker", framework, workload, "--repeats", str(repeats)]
    if quick:
        cmd.append("--quick")
    base = {"framework": framework, "workload": workload, "unit": SPECS[workload].unit, "status": "error",
            "median": None, "q1": None, "q3": None, "samples": [], "grad_max_abs_diff": None,
            "grad_max_rel_diff": None, "peak_mem_ratio": None, "quick": quick, "repeats": repeats,
            "versions": {"python": platform.python_version()}, "machine": machine(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"), "threads": threads or None}
    try:
        out = subprocess.run(cmd, cwd=ROOT, env=thread_env(threads), capture_output=True, text=True,
                             timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {**base, "reason": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        return {**base, "reason": f"exit {out.returncode}: {' | '.join(tail)}"}
    rec = json.loads(lines[-1])
    rec["threads"] = threads or None
    return rec


def _summary(rec: dict[str, Any]) -> str:
    if rec["status"] != "ok":
        return f"{rec['status']}: {rec.get('reason', '')}"[:160]
    s = f"{rec['median']:.4g} {rec['unit']} (q1 {rec['q1']:.4g}, q3 {rec['q3']:.4g}), grad diff {rec['grad_max_abs_diff']:.2g}"
    if rec.get("peak_mem_ratio") is not None:
        s += f", peak memory {rec['peak_mem_ratio']:.2f} x |x|"
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    type=lambda v: _names(v, WORKLOADS, "workload"), help="comma-separated (default: all)")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                    type=lambda v: _names(v, list(FRAMEWORKS), "framework"), help="comma-separated (default: all)")
    ap.add_argument("--repeats", type=int, default=None, help="timing samples per pair (default 11; --quick: 3)")
    ap.add_argument("--quick", action="store_true", help="smoke run: small sizes, few samples")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results", help="output folder")
    ap.add_argument("--threads", type=int, default=1,
                    help="thread pools of NumPy's BLAS, torch and XLA (default 1: the machine may be shared and "
                         "the comparison is about the tapes; 0 leaves the libraries' defaults)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per pair")
    a = ap.parse_args(argv)
    repeats = a.repeats if a.repeats is not None else (3 if a.quick else 11)
    a.out.mkdir(parents=True, exist_ok=True)
    pairs = [(f, w) for w in a.workloads for f in a.frameworks]
    start = time.monotonic()
    records = []
    with open(a.out / "results.jsonl", "w") as f:
        for i, (fw, wl) in enumerate(pairs, 1):
            t0 = time.monotonic()
            rec = run_one(fw, wl, repeats, a.quick, a.timeout, a.threads)
            records.append(rec)
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(f"[{i}/{len(pairs)}] {wl:8s} {fw:13s} {_summary(rec)}  ({time.monotonic() - t0:.1f} s)",
                  file=sys.stderr, flush=True)
    elapsed = time.monotonic() - start
    meta = {"command": "python -m benchmarks " + " ".join(argv if argv is not None else sys.argv[1:]),
            "seconds": round(elapsed, 1), "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(), "threads": a.threads or None}
    (a.out / "run.json").write_text(json.dumps(meta, indent=1) + "\n")
    table = report.write(a.out)
    print(table)
    print(f"{len(pairs)} pairs in {elapsed:.0f} s; results in {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
