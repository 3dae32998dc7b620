"""``python -m benchmarks.ab BASE HEAD``: an interleaved A/B of two checkouts of xpgrad.

A refactor must keep every workload within 5% of where it started; on a shared machine
one run of each side says little, so this runs ``python -m benchmarks`` in BASE and in
HEAD (two source trees: a ``git worktree`` at the base commit and this one, say)
alternately, ``--rounds`` times, swapping which side goes first every round, and reports
per workload the HEAD/BASE ratio of each round's medians and their median. Writes
``ab.json`` (every ratio, the command, the machine) and prints a Markdown table::

    git worktree add ../base <commit>
    python -m benchmarks.ab ../base . --workloads chain,mlp,jacobian --rounds 3

``--steady-malloc`` (on by default) keeps glibc from returning freed memory to the system
between calls (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``). Without it a
workload whose arrays are a few hundred KB (``jacobian``: 0.46 or 0.79 ms) lands in a
fast or a slow mode per process, whichever tree runs, from page faults alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._worker import machine
from .workloads import WORKLOADS

#: glibc: serve large allocations from the heap and keep freed memory (no page faults per call)
STEADY_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "4194304", "MALLOC_TRIM_THRESHOLD_": "268435456"}


def _run(tree: Path, workloads: list[str], framework: str, repeats: int, out: Path, steady: bool,
         quick: bool = False) -> dict[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "src"), str(tree)])
    if steady:
        env.update(STEADY_MALLOC)
    cmd = [sys.executable, "-m", "benchmarks", "--workloads", ",".join(workloads), "--frameworks", framework,
           "--repeats", str(repeats), "--threads", "1", "--out", str(out), *(["--quick"] if quick else [])]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        msg = f"benchmarks.ab: the run in {tree} failed:\n{proc.stderr[-2000:]}"
        raise RuntimeError(msg)
    medians = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("status") == "ok":
            medians[rec["workload"]] = float(rec["median"])
    return medians


def ratios(base: list[dict[str, float]], head: list[dict[str, float]]) -> dict[str, list[float]]:
    """Per workload, HEAD/BASE of each round's medians (rounds where both sides ran it).

    Examples:
        >>> ratios([{"chain": 2.0}, {"chain": 4.0}], [{"chain": 2.2}, {"chain": 4.0}])
        {'chain': [1.1, 1.0]}
    """
    out: dict[str, list[float]] = {}
    for b, h in zip(base, head):
        for w in b:
            if w in h and b[w] > 0:
                out.setdefault(w, []).append(round(h[w] / b[w], 4))
    return out


def table(r: dict[str, list[float]], limit: float = 0.05) -> str:
    """A Markdown table: the rounds, their median, and whether it is within ``limit``.

    Examples:
        >>> print(table({"chain": [1.01, 0.99, 1.07]}))
        | workload | rounds (head/base) | median | within 5% |
        |---|---|---|---|
        | chain | 1.010 0.990 1.070 | 1.010 | yes |
    """
    lines = [f"| workload | rounds (head/base) | median | within {limit:.0%} |", "|---|---|---|---|"]
    for w, xs in r.items():
        m = statistics.median(xs)
        lines.append(f"| {w} | {' '.join(f'{x:.3f}' for x in xs)} | {m:.3f} | {'yes' if m <= 1 + limit else 'NO'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__.split("\n\n")[0])
    ap.add_argument("base", type=Path, help="the base source tree (a git worktree at the base commit)")
    ap.add_argument("head", type=Path, help="the tree under test")
    ap.add_argument("--workloads", default="chain,mlp,matchain,large,cnn,hessian,jacobian,per_example")
    ap.add_argument("--framework", default="xpgrad-numpy")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="smoke run (small sizes): the ratios mean nothing")
    ap.add_argument("--out", type=Path, default=None, help="folder for ab.json (default: a temporary one)")
    ap.add_argument("--no-steady-malloc", dest="steady", action="store_false",
                    help="leave glibc's malloc as it is (see the module docstring)")
    a = ap.parse_args(argv)
    workloads = [w.strip() for w in a.workloads.split(",") if w.strip()]
    bad = [w for w in workloads if w not in WORKLOADS]
    if bad:
        ap.error(f"unknown workloads: {', '.join(bad)}; choose from {', '.join(WORKLOADS)}")
    out = a.out or Path(tempfile.mkdtemp(prefix="xpgrad-ab-"))
    out.mkdir(parents=True, exist_ok=True)
    base_runs: list[dict[str, float]] = []
    head_runs: list[dict[str, float]] = []
    for r in range(a.rounds):
        order = [("base", a.base, base_runs), ("head", a.head, head_runs)]
        for side, tree, runs in order if r % 2 == 0 else order[::-1]:
            runs.append(_run(tree.resolve(), workloads, a.framework, a.repeats, out / f"{side}-{r + 1}", a.steady,
                             a.quick))
            print(f"round {r + 1}/{a.rounds}: {side} done", file=sys.stderr, flush=True)
    res = ratios(base_runs, head_runs)
    record: dict[str, Any] = {"command": "python -m benchmarks.ab " + " ".join(argv if argv is not None else sys.argv[1:]),
                              "ratios": res, "medians": {w: statistics.median(x) for w, x in res.items()},
                              "steady_malloc": a.steady, "machine": machine()}
    (out / "ab.json").write_text(json.dumps(record, indent=1) + "\n")
    print(table(res))
    print(f"results in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
