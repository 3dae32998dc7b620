"""Tables and a chart from a results folder; ``--docs`` regenerates docs/benchmarks.md.

``python -m benchmarks.report RESULTS_DIR [--docs]`` reads ``RESULTS_DIR/results.jsonl``
(and ``run.json``), writes ``table.md`` and ``chart.png`` next to it and prints the
table; ``--docs`` also writes docs/benchmarks.md and docs/assets/bench_chart.png.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

from ._worker import FRAMEWORKS, NUMPY_BACKED
from .workloads import GROUPS, SPECS, WORKLOADS

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "numpy-manual"
DOCS_PAGE = ROOT / "docs" / "benchmarks.md"
DOCS_CHART = ROOT / "docs" / "assets" / "bench_chart.png"  # the gradients' chart; the others sit beside it
SECTIONS = {
    "gradients": ("Gradients", "bench_chart.png"),
    "transforms": ("Hessian, Jacobian and per-example gradients (one batched pass each: xg.vmap)", "bench_chart_transforms.png"),
}
# the transform workloads compare xpgrad with these (torch: torch.func)
ANCHORS = ("torch", "jax", "jax-jit")


def load(folder: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The records of ``results.jsonl`` and the run's metadata (``run.json``, may be empty)."""
    records = [json.loads(ln) for ln in (folder / "results.jsonl").read_text().splitlines() if ln.strip()]
    meta_path = folder / "run.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return records, meta


def _index(records: list[dict[str, Any]]) -> tuple[dict[tuple[str, str], dict[str, Any]], list[str], list[str]]:
    by = {(r["framework"], r["workload"]): r for r in records}
    fws = [f for f in FRAMEWORKS if any(k[0] == f for k in by)]
    wls = [w for w in WORKLOADS if any(k[1] == w for k in by)]
    return by, fws, wls


def ratios(records: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """median / numpy-manual's median of the same workload, for every pair that ran."""
    by, _, _ = _index(records)
    out = {}
    for (fw, wl), r in by.items():
        ref = by.get((REFERENCE, wl))
        if r["status"] == "ok" and ref is not None and ref["status"] == "ok" and ref["median"]:
            out[fw, wl] = r["median"] / ref["median"]
    return out


def best_ratios(records: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
    """fastest sample / numpy-manual's fastest sample of the same workload (the issue's measure for jit)."""
    by, _, _ = _index(records)
    out = {}
    for (fw, wl), r in by.items():
        ref = by.get((REFERENCE, wl))
        if r["status"] == "ok" and ref is not None and ref["status"] == "ok" and _best(ref):
            out[fw, wl] = _best(r) / _best(ref)
    return out


def _best(r: dict[str, Any]) -> float:
    return float(r.get("best") or min(r.get("samples") or [math.nan]))


# xg.jit's targets on NumPy (issue #19): workload -> the largest ratio to numpy-manual (fastest samples)
JIT_TARGETS = {"chain": 1.5, "matchain": 1.05, "mlp": 0.95, "large": 1.0}
JIT_PEAK_TARGET = 2.0  # large: peak memory, x |x|
JIT_TRACE_TARGET = 20.0  # a first call (the trace) against one eager call
JAX_TARGET = 1.2  # xg.jit(xg.grad(f)) on JAX arrays against jax.jit(jax.grad(f))


def _staged_md(records: list[dict[str, Any]]) -> list[str]:
    """The jit tables: fastest-sample ratios, first-call (trace) times, and the targets."""
    from ._worker import STAGED

    by, fws, wls = _index(records)
    staged = [f for f in fws if f in STAGED or f == "jax-jit"]
    if not any(f in STAGED for f in fws):
        return []
    best = best_ratios(records)
    lines = ["", "**Staged: time as a ratio to numpy-manual by the fastest samples** (first call excluded; "
             "xpgrad-*-jit: `xg.jit`, replays of the traced program; torch-compile: `torch.compile`)", ""]
    lines.append("| framework | " + " | ".join(wls) + " |")
    lines.append("|---" * (len(wls) + 1) + "|")
    for fw in [REFERENCE, *(f for f in fws if f.startswith("xpgrad-") and f not in STAGED), *staged]:
        if fw not in fws:
            continue
        cells = [f"{best[fw, wl]:.3f}x" if (fw, wl) in best else (by[fw, wl]["status"] if (fw, wl) in by else "—")
                 for wl in wls]
        lines.append(f"| {fw} | " + " | ".join(cells) + " |")
    lines += ["", "**First call** (the trace, or torch.compile's compilation): ms, and in parentheses as a "
              f"multiple of one eager call of the same workload (target for xg.jit: <= {JIT_TRACE_TARGET:.0f}x). "
              "On JAX arrays XLA compiles at the second call (the first replay), not counted here.", ""]
    lines.append("| framework | " + " | ".join(wls) + " |")
    lines.append("|---" * (len(wls) + 1) + "|")
    for fw in (f for f in fws if f in STAGED):
        cells = []
        for wl in wls:
            r = by.get((fw, wl)) or {}
            t, q = r.get("trace_ms"), r.get("trace_ratio")
            cells.append("—" if t is None else f"{t:.3g} ms" + ("" if q is None else f" ({q:.3g}x)"))
        lines.append(f"| {fw} | " + " | ".join(cells) + " |")
    jit = "xpgrad-numpy-jit"
    if jit in fws:
        lines += ["", f"**xg.jit's targets on NumPy** ({jit}, fastest samples)", "",
                  "| target | measured | met |", "|---|---|---|"]
        for wl, tgt in JIT_TARGETS.items():
            if wl in wls:
                v = best.get((jit, wl))
                lines.append(f"| {wl} <= {tgt}x | " + ("—" if v is None else f"{v:.3f}x") + " | "
                             + ("—" if v is None else "yes" if v <= tgt else "**no**") + " |")
        r = by.get((jit, "large"))
        if r and r.get("peak_traced_ratio") is not None:
            v, ref = r["peak_traced_ratio"], (by.get((REFERENCE, "large")) or {}).get("peak_traced_ratio")
            lines.append(f"| large peak memory <= {JIT_PEAK_TARGET} x \\|x\\| (tracemalloc"
                         + ("" if ref is None else f"; numpy-manual {ref:.2f}") + f") | {v:.2f} | "
                         + ("yes" if v <= JIT_PEAK_TARGET else "**no**") + " |")
        for wl in wls:
            q = (by.get((jit, wl)) or {}).get("trace_ratio")
            if q is not None:
                lines.append(f"| {wl}: first call <= {JIT_TRACE_TARGET:.0f}x eager | {q:.3g}x | "
                             + ("yes" if q <= JIT_TRACE_TARGET else "**no**") + " |")
    if "xpgrad-jax-jit" in fws and "jax-jit" in fws:
        lines += ["", f"**xg.jit on JAX arrays against jax.jit** (xpgrad-jax-jit / jax-jit, fastest samples; "
                  f"target <= {JAX_TARGET}x)", "", "| workload | ratio | met |", "|---|---|---|"]
        for wl in wls:
            a, b = by.get(("xpgrad-jax-jit", wl)), by.get(("jax-jit", wl))
            if a and b and a["status"] == b["status"] == "ok":
                v = _best(a) / _best(b)
                lines.append(f"| {wl} | {v:.3f}x | " + ("yes" if v <= JAX_TARGET else "**no**") + " |")
            else:
                lines.append(f"| {wl} | " + ("—" if not a else a["status"]) + " | — |")
    return lines


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def _na(r: dict[str, Any] | None, notes: list[str]) -> str:
    if r is None:
        return "—"
    reason = f"{r['framework']} / {r['workload']}: {r['status']}: {r.get('reason', '')}"
    if reason not in notes:
        notes.append(reason)
    return f"{r['status']} [{notes.index(reason) + 1}]"


def table_md(records: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> str:
    """The markdown tables: ratios to numpy-manual, medians with quartiles, gradient check."""
    meta = meta or {}
    by, fws, wls = _index(records)
    rat = ratios(records)
    notes: list[str] = []
    first = records[0] if records else {}
    m = meta.get("machine") or first.get("machine", {})
    lines = []
    date = meta.get("date") or first.get("date", "?")
    lines.append(f"Run: {date}; machine: {m.get('cpu', '?')}, {m.get('cpus_usable', m.get('cpu_count', '?'))} "
                 f"usable cores, {m.get('platform', '?')}, Python {m.get('python', '?')}"
                 + (f"; load average at the end {m['loadavg_1min']}" if "loadavg_1min" in m else ""))
    if meta.get("command"):
        threads = meta.get("threads")
        lines.append(f"Command: `{meta['command']}` ({meta.get('seconds', '?')} s; "
                     + (f"{threads} thread(s) per library)" if threads else "the libraries' default threads)"))
    cores = m.get("cpus_usable", m.get("cpu_count"))
    if cores and m.get("loadavg_1min", 0) > cores:
        lines.append(f"**The machine was shared (load average {m['loadavg_1min']} on {cores} cores): "
                     "the timings are noisy.**")
    if any(r.get("quick") for r in records):
        lines.append("**Quick (smoke) run: small sizes and few samples; the numbers mean nothing.**")
    vers = {}
    for r in records:
        vers.update(r.get("versions", {}))
    lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(vers.items())))
    lines.append("")
    mem = "large" in wls
    head = [f"{w} ({SPECS[w].unit})" for w in wls] + (["large: peak memory (x \\|x\\|)", "large: peak, tracemalloc (NumPy)"] if mem else [])
    lines.append("**Time as a ratio to numpy-manual in the same run** (median; lower is faster)")
    lines.append("")
    lines.append("| framework | " + " | ".join(head) + " |")
    lines.append("|---" * (len(head) + 1) + "|")
    for fw in fws:
        cells = []
        for wl in wls:
            r = by.get((fw, wl))
            cells.append(f"{rat[fw, wl]:.2f}x" if (fw, wl) in rat else _na(r, notes))
        if mem:
            r = by.get((fw, "large"))
            cells.append(f"{r['peak_mem_ratio']:.2f}" if r and r.get("peak_mem_ratio") is not None else _na(r, notes))
            cells.append(f"{r['peak_traced_ratio']:.2f}" if r and r.get("peak_traced_ratio") is not None
                         and fw in NUMPY_BACKED else "—")
        lines.append(f"| {fw} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("**Median [q1, q3]** of the timing samples")
    lines.append("")
    lines.append("| framework | " + " | ".join(f"{w} ({SPECS[w].unit})" for w in wls) + " |")
    lines.append("|---" * (len(wls) + 1) + "|")
    for fw in fws:
        cells = []
        for wl in wls:
            r = by.get((fw, wl))
            cells.append(f"{_fmt(r['median'])} [{_fmt(r['q1'])}, {_fmt(r['q3'])}]" if r and r["status"] == "ok"
                         else _na(r, notes))
        lines.append(f"| {fw} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("**Gradient check**: max abs difference from numpy-manual's gradients (in parentheses: "
                 "divided by the largest reference gradient"
                 + ("; the chain's gradients are tiny, about 1e-15 at most); " if "chain" in wls else "); ")
                 + ("float64 for chain, large, matchain, float32 for mlp, cnn" if set(wls) <= set(GROUPS["gradients"])
                    else "float32 for mlp and cnn, float64 for the others; the hessian's and jacobian's "
                         "\"gradients\" are the whole matrices, per_example's the per-example rows"))
    lines.append("")
    lines.append("| framework | " + " | ".join(wls) + " |")
    lines.append("|---" * (len(wls) + 1) + "|")
    for fw in fws:
        cells = []
        for wl in wls:
            r = by.get((fw, wl))
            cells.append(f"{r['grad_max_abs_diff']:.1e} ({r['grad_max_rel_diff']:.0e})"
                         if r and r.get("grad_max_abs_diff") is not None else _na(r, notes))
        lines.append(f"| {fw} | " + " | ".join(cells) + " |")
    lines.extend(_staged_md(records))
    anchors = [a for a in ANCHORS if a in fws]
    xps = [f for f in fws if f.startswith("xpgrad")]
    if set(wls) & set(GROUPS["transforms"]) and anchors and xps:
        lines.append("")
        lines.append("**xpgrad's time as a ratio to the anchors'** (median / median; torch is torch.func; "
                     "higher is slower)")
        lines.append("")
        cols = [(x, a) for x in xps for a in anchors]
        lines.append("| workload | " + " | ".join(f"{x} / {a}" for x, a in cols) + " |")
        lines.append("|---" * (len(cols) + 1) + "|")
        for wl in (w for w in wls if w in GROUPS["transforms"]):
            cells = []
            for x, a in cols:
                rx, ra = by.get((x, wl)) or {}, by.get((a, wl)) or {}
                ok = rx.get("status") == ra.get("status") == "ok" and ra["median"]
                cells.append(f"{rx['median'] / ra['median']:.3g}x" if ok else "—")
            lines.append(f"| {wl} | " + " | ".join(cells) + " |")
    if notes:
        lines.append("")
        lines.extend(f"[{i}] {n}" for i, n in enumerate(notes, 1))
    return "\n".join(lines) + "\n"


def chart(records: list[dict[str, Any]], path: Path) -> None:
    """A grouped bar chart (log scale) of the time ratios to numpy-manual."""
    _, fws, wls = _index(records)
    chart_ratios(ratios(records), fws, wls, path)


def chart_ratios(rat: dict[tuple[str, str], float], fws: list[str], wls: list[str], path: Path) -> None:
    """The chart of :func:`chart` from the ratios themselves (framework, workload) -> ratio.

    The figure is cut to what it draws (``bbox_inches="tight"``), so no legend entry is clipped.
    """
    import matplotlib.pyplot as plt

    fig = chart_figure(rat, fws, wls)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def chart_figure(rat: dict[tuple[str, str], float], fws: list[str], wls: list[str]) -> Any:
    """The matplotlib figure of :func:`chart_ratios`.

    Each framework has a colour of its own (20 of them), and a hatch of the three that
    repeat every 20 colours; the legend sits below the axes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = plt.get_cmap("tab20").colors
    hatches = ["", "//", ".."]
    fig, ax = plt.subplots(figsize=(11, 4.5), dpi=110)
    width = 0.8 / max(len(fws), 1)
    for i, fw in enumerate(fws):
        xs = [j + (i - (len(fws) - 1) / 2) * width for j in range(len(wls))]
        vals = [rat.get((fw, wl), math.nan) for wl in wls]
        ax.bar(
            xs,
            vals,
            width,
            label=fw,
            color=colours[i % len(colours)],
            hatch=hatches[i // len(colours) % len(hatches)],
            edgecolor="white",
            linewidth=0.3,
        )
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yscale("log")
    ax.set_xticks(range(len(wls)), [f"{w}\n({SPECS[w].unit})" if w in SPECS else w for w in wls])
    ax.set_ylabel("time / numpy-manual (log scale)")
    ax.set_title("Time relative to hand-written NumPy (lower is faster)")
    ax.legend(ncol=min(len(fws), 5), fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.set_axisbelow(True)
    return fig


def write(folder: Path) -> str:
    """Write ``table.md`` and ``chart.png`` into ``folder``; return the table."""
    records, meta = load(folder)
    table = table_md(records, meta)
    (folder / "table.md").write_text(table)
    chart(records, folder / "chart.png")
    return table


_PAGE_HEAD = """# Benchmarks

<!-- generated by `python -m benchmarks.report RESULTS_DIR --docs`; do not edit by hand -->

xpgrad's speed and memory, side by side with the reference libraries, on five
gradient workloads and three beyond the gradient (a Hessian, a Jacobian, per-example
gradients). Every framework computes the same gradients from the same inputs (drawn
from a seeded NumPy generator); each (framework, workload) pair runs in its own
Python process.

Run them with `nox -s bench` (a fresh virtualenv with the `bench` extra) or
`python -m benchmarks` (options: `--workloads`, `--frameworks`, `--repeats`,
`--quick`, `--out DIR`); regenerate this page from a results folder with
`python -m benchmarks.report RESULTS_DIR --docs`.

## Workloads

{workloads}

## Frameworks

- **numpy-manual**: a hand-written NumPy forward and backward (the floor for a NumPy-backed tape;
  the reference of every ratio and of the gradient check).
- **torch**: PyTorch eager on the CPU, its autograd, `torch.optim.SGD`.
- **autograd**: HIPS autograd (`autograd.grad` of a NumPy function). It has no convolution,
  so its cnn is written with `autograd.numpy` (padding, shifted slices, `einsum`).
- **mygrad**: MyGrad's tape, with its own `conv_nd`, `max_pool` and `softmax_crossentropy`.
- **jax**: `jax.grad` without `jit` (op by op). **jax-jit**: the whole step compiled
  ahead of the timing; a reference for what compilation buys, not a peer of a tape.
- **xpgrad-numpy**, **xpgrad-torch**: xpgrad on NumPy arrays and on torch tensors
  (torch's own autograd unused), with `xpgrad.optim.SGD`; the cnn is the demo's model
  (`xpgrad._demo.build_model("cnn")`).
- **torch-compile**: `torch.compile` of the loss (inductor on the CPU, which needs a C++
  compiler; `aot_eager` where inductor cannot run, which the version string says), its
  backward compiled by AOTAutograd, `torch.optim.SGD` eager; the `torch.func` transforms
  compiled whole.
- **xpgrad-numpy-jit**, **xpgrad-jax-jit**, **xpgrad-torch-jit**, **xpgrad-torch-compile**:
  the same xpgrad code under `xg.jit` (benchmarks/impl/xpgrad_jit.py): chain, large and
  matchain are `xg.jit(xg.grad(loss))`; mlp and cnn jit the whole training step
  (`zero_grad`, `backward`, `SGD.step`, with the parameters and the optimizer as the jitted
  function's state); hessian, jacobian and per_example jit `xg.hessian`, `xg.jacrev` and
  `xg.vmap(xg.grad(loss))`. On NumPy and torch the traced program is replayed (on NumPy
  after the passes of `xpgrad._jit_passes`), on JAX arrays it runs under `jax.jit`, and
  xpgrad-torch-compile hands it to `torch.compile`.

For hessian, jacobian and per_example: torch is `torch.func` (`hessian`, `jacrev`,
`vmap(grad(loss), in_dims=(None, 0, 0))`), jax and jax-jit `jax.hessian`, `jax.jacrev` and
`jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))` (jax-jit compiles the whole transform),
autograd `autograd.hessian` and `autograd.jacobian`, xpgrad `xg.hessian`, `xg.jacrev` and
`xg.vmap(xg.grad(loss), in_axes=(None, 0, 0))` (one batched pass each, as torch.func's).
Without a vmap, per_example is a Python loop of one gradient per example (autograd,
mygrad); mygrad's jacobian is one backward pass per output row, and it has no
higher-order derivatives (its hessian is reported unsupported).

## Method

- Threads: by default every library runs single-threaded (`OMP_NUM_THREADS=1` and the like, and
  XLA's single-thread flags; `--threads N` changes it): the comparison is about the tapes, and a
  shared machine makes thread pools thrash.
- Timing: `time.perf_counter`; two warm-up calls; then each sample repeats the call until it
  lasts about 0.1 s, and the tables give the median and the quartiles of the samples.
- Memory (large): in the pair's fresh process, after a small warm-up call and the creation
  of the full-size inputs, the kernel's peak-RSS counter (`VmHWM`) is reset (writing `5` to
  `/proc/self/clear_refs`) and read after one gradient computation: the peak RSS above the
  post-setup RSS, divided by the size of x (32 MB). It counts everything the call keeps alive
  at its peak, the returned gradient included (so 1.0 is the floor, and numpy-manual, which
  holds `exp(sin(x))` and the gradient, needs 2.0). Where the reset is refused, a thread
  samples `VmRSS` every 0.5 ms instead (the record says which).
- Gradient check: the gradients of the first call (at the initial parameters) against
  numpy-manual's; a framework that computes a wrong gradient is not fast, it is wrong.
- Staged frameworks (torch-compile and xpgrad-*-jit): the first call traces (or compiles)
  and is timed apart: the **first call** table gives it in ms and as a multiple of one eager
  call of the same workload on the same arrays (the fastest of five; for xg.jit the first
  call is the fastest of three fresh jitted functions, since one call on a shared machine is
  one noisy sample). The timing samples are replays; the gradient check is on a replay
  (mlp and cnn: on the first step, at the initial parameters). On JAX arrays XLA compiles
  at the first replay, inside the warm-up. The issue's measure for jit is the ratio of the
  **fastest** samples (the staged table), given beside the medians.
- Peak memory of large by tracemalloc as well (NumPy's buffers only, so a measure for the
  NumPy-backed frameworks): the peak of what one call allocates, independent of what the
  allocator kept resident from earlier calls. A jitted function's trace frees large
  arrays that its replays then reuse without growing the RSS, so for xg.jit only the
  tracemalloc figure says what a call needs (numpy-manual: 2.00 by both measures).
- Comparing two versions of xpgrad: `python -m benchmarks.ab BASE HEAD` runs both source
  trees alternately (`--rounds`, the first side swapped every round) and reports the median
  of the per-round HEAD/BASE ratios (`ab.json`). It keeps glibc's malloc from returning
  freed memory between calls (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`):
  otherwise a workload with arrays of a few hundred KB (jacobian: 0.46 or 0.79 ms) lands
  in a fast or a slow mode per process, from page faults alone.
  In the cnn, max-pool ties (a window on a digit's blank border, where every pixel equals
  the bias) send the gradient to the window's first maximum, as PyTorch does.

## xg.jit: the passes, the targets, and what is left

The jit rows of the tables below time replays of a traced program. On NumPy the program
goes through the passes of `xpgrad._jit_passes` first; each keeps every value bit for bit
(tests/test_jit_passes.py checks each against the program without it):

- **dead code**: what a gradient program computes but does not return is not computed (the
  loss of chain, large and matchain; the cross-entropy value of mlp and cnn).
- **constant folding**: calls with no traced input (`arange`, `zeros` of a shape, `asarray`
  of numbers) and `ones_like`/`zeros_like`/`full_like` of a traced array run once, at the
  trace, where no returned or updated array shares their memory and they are at most 1 MiB
  (a larger constant is made by each call, not held between calls; mlp: the one-hot's
  `arange`, the seed gradient `ones_like(loss)` and, through dead code, the loss itself).
- **copy elision**: `asarray(v, copy=True)` of a fresh value nothing else reads is `v`.
- **mask-cast fusion**: `g * astype(h > 0, float32)` is `g * (h > 0)` (a ReLU's backward:
  one pass over memory and one array less).
- **direct calls**: xpgrad's fast-adapter wrappers (`matmul`, `matrix_transpose`, `sum`,
  `max`, `astype`, `reshape`) become the NumPy call they make: no Python frame per call.
- **chunked elementwise runs**: a run of elementwise calls over one large shape runs in
  chunks of 8192 elements, only the values read later kept whole (checked bit for bit on
  the trace's values before it is used). large's whole gradient is one such run: it holds
  the gradient and a few chunks (1.01 x |x| by tracemalloc; 3.00 unfused; numpy-manual,
  which rewrites the algebra, 2.00).
- **buffer reuse** (`reuse_plan`): an elementwise result is written into a dead buffer of its
  shape (never a matmul into its own operand: NumPy would copy it first).
- the generated function gives a result the variable of a value its call reads last, with
  no `del` line: a 500-call program compiles in half the time (the trace's largest part).

The targets (issue #19; NumPy, fastest samples, ratio to numpy-manual): chain <= 1.5x,
matchain <= 1.05x, mlp <= 0.95x, large <= 1.0x and peak <= 2.0 |x|, a first call <= 20x an
eager call; on JAX arrays `xg.jit(xg.grad(f))` within 1.2x of `jax.jit(jax.grad(f))`. The
results section below is one run on a quiet machine (load about 1); on a shared one (load 4
to 6) one pair's fastest sample against another's, minutes apart, moves by 5-10%: an
earlier run gave chain 0.73-1.52x, matchain 0.93-1.04x, mlp 0.94-1.03x, large 0.91-0.98x,
chain's first call 18-26x; numpy-manual and the jitted function alternated in one process
(31 rounds, the fastest of each) gave mlp 1.02x, matchain 1.04x, chain 0.90x, large 0.99x.
Read together:

- **chain** (0.85x), **matchain** (0.98x), large's **peak** (1.01 |x| against
  numpy-manual's 2.00) and the **first calls** (2.5-13x an eager call): met. matchain's
  program alone runs at numpy-manual's speed (the same five matmuls); the rest is the
  call (flattening the arguments and finding the signature, a few us of 70). chain's first
  call is one eager run on recording arrays (about 500 recorded calls), the passes (1-2 ms)
  and Python compiling the generated function (3-4 ms).
- **large** time: at numpy-manual's (1.03x here, 1.01x in the run before, 0.91-0.99x on
  the shared machine), so the <= 1.0x target is met only within noise. Its gradient is one
  chunked elementwise run: the same exp, sin, cos and products as numpy-manual's, over
  8192-element chunks. Beating it needs fewer passes over memory than numpy-manual's
  rewritten algebra, which the bit-identical replay does not allow.
- **mlp**: not met (1.04x here; 0.94-1.03x in other runs). Timing each call of the replayed
  program: the eight matmuls are 1238 of 1364 us (91%), the same BLAS calls on the same
  layouts as numpy-manual's (another layout or order would round the float32 sums
  differently); the other 49 calls take 126 us against numpy-manual's 170 us, so the
  program alone runs at about 0.99x; the jit call with the parameters and the optimizer
  as state (flattening, the signature, writing back six parameters and six gradients)
  adds about 40 us (3%). 0.95x needs the matmuls faster than NumPy's own, which a
  bit-identical replay cannot have; what is left to take is the state's 40 us.
- **JAX**, the target's `xg.jit(xg.grad(f))`: chain 1.04x, large 0.79x, matchain 0.94x of
  `jax.jit(jax.grad(f))`: met (an `xg.jit` call on raw JAX arrays takes a fast path: a key
  of type, shape, dtype and sharding per argument). Beyond the target: mlp 1.40x and cnn
  1.6x (training steps with a Module and an optimizer as state: the arguments are
  flattened, the state read and written back around the XLA call); hessian 2.2x,
  jacobian 1.8x and per_example 1.9x (xpgrad's vmap and double backward record more
  calls than JAX's own transforms: XLA receives a longer program).
- torch: `xg.jit` replays the program eagerly (xpgrad-torch-jit: the tape's cost is gone,
  torch's own per-op cost stays); `compile="torch"` (xpgrad-torch-compile) hands it to
  inductor, about 1.5 s of compilation for these programs.

Reproduce: `python -m benchmarks --out benchmarks/results/jit` (all pairs, about 7
minutes), or only the jit comparison: `python -m benchmarks --frameworks
numpy-manual,jax-jit,xpgrad-numpy,xpgrad-numpy-jit,xpgrad-jax-jit --out DIR`; then
`python -m benchmarks.report DIR --docs`.

## Results

Each section is one run's numbers (`python -m benchmarks.report RESULTS_DIR --docs`
replaces the sections of the workloads that RESULTS_DIR holds and keeps the others).

"""


def _marker(group: str, end: bool = False) -> str:
    return f"<!-- {'/' if end else ''}results:{group} -->"


def docs(folder: Path) -> None:
    """Regenerate docs/benchmarks.md and its charts from ``folder``.

    A results section per workload group (``workloads.GROUPS``): the groups ``folder``
    has records for are rewritten from them, the others are kept as the page has them.
    """
    records, meta = load(folder)
    write(folder)
    DOCS_CHART.parent.mkdir(parents=True, exist_ok=True)
    old = DOCS_PAGE.read_text() if DOCS_PAGE.exists() else ""
    sections = []
    for group, wls in GROUPS.items():
        title, chart_name = SECTIONS[group]
        recs = [r for r in records if r["workload"] in wls]
        if recs:
            chart(recs, DOCS_CHART.with_name(chart_name))
            body = (table_md(recs, meta)
                    + f"\n![Time relative to numpy-manual, log scale](assets/{chart_name})\n")
        else:
            found = re.search(re.escape(_marker(group)) + r"\n(.*?)" + re.escape(_marker(group, end=True)), old,
                              re.DOTALL)
            if found is None:
                continue
            body = found.group(1)
        sections.append(f"### {title}\n\n{_marker(group)}\n{body}{_marker(group, end=True)}\n")
    wl = "\n".join(f"- **{w}** ({SPECS[w].unit}): {SPECS[w].description}." for w in WORKLOADS)
    DOCS_PAGE.write_text(_PAGE_HEAD.format(workloads=wl) + "\n".join(sections))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="a folder written by python -m benchmarks")
    ap.add_argument("--docs", action="store_true", help="also regenerate docs/benchmarks.md and its chart")
    a = ap.parse_args(argv)
    if a.docs:
        docs(a.results)
    print(write(a.results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
