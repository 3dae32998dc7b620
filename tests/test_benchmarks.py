"""The benchmark suite runs end to end: a quick run of a few pairs, its JSON records,
the gradient check and the report (no timing assertions: speed lives in benchmarks/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("matplotlib")

QUICK_WORKLOADS = ("chain", "large", "hessian", "jacobian", "per_example")
FIELDS = {
    "framework": str, "workload": str, "unit": str, "status": str, "median": float, "q1": float, "q3": float,
    "samples": list, "grad_max_abs_diff": float, "grad_max_rel_diff": float, "versions": dict,
    "machine": dict, "date": str,
}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--frameworks", "numpy-manual,xpgrad-numpy",
         "--workloads", "chain,large,hessian,jacobian,per_example", "--repeats", "2", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_one_record_per_pair_with_the_schema(quick_run: Path) -> None:
    recs = _records(quick_run)
    assert sorted((r["framework"], r["workload"]) for r in recs) == sorted(
        (fw, wl) for fw in ("numpy-manual", "xpgrad-numpy") for wl in QUICK_WORKLOADS)
    for r in recs:
        assert r["status"] == "ok", r.get("reason")
        for key, typ in FIELDS.items():
            assert isinstance(r[key], typ), (key, r[key])
        assert len(r["samples"]) == 2 and r["q1"] <= r["median"] <= r["q3"]
        assert r["unit"] == {"chain": "us/op"}.get(r["workload"], "ms")
        assert r["quick"] is True and r["versions"]["numpy"]
        if r["workload"] == "large":
            # the returned gradient alone is 1 x |x|; a real measurement, not a placeholder
            assert r["peak_mem_ratio"] >= 0.9 and r["mem_method"]
        else:
            assert r["peak_mem_ratio"] is None


def test_gradients_agree_with_numpy_manual(quick_run: Path) -> None:
    for r in _records(quick_run):
        assert r["grad_max_rel_diff"] < 1e-12, r
        if r["framework"] == "numpy-manual":
            assert r["grad_max_abs_diff"] == 0.0


def test_derivatives_have_the_workloads_shapes(quick_run: Path) -> None:
    """The hessian, jacobian and per-example results are whole matrices, not a gradient."""
    from benchmarks.impl import numpy_manual
    from benchmarks.workloads import inputs, sizes

    n, (m, d) = sizes(True)["hessian_n"], sizes(True)["per_example"]
    shapes = {"hessian": [(n, n)], "jacobian": [(n, n)], "per_example": [(m, d), (m,)]}
    for wl, want in shapes.items():
        got = numpy_manual.make(wl, inputs(wl, quick=True))()
        assert [g.shape for g in got] == want, wl
        assert all(np.all(np.isfinite(g)) and np.any(g != 0) for g in got), wl
    h = numpy_manual.make("hessian", inputs("hessian", quick=True))()[0]
    assert np.allclose(h, h.T, rtol=0, atol=1e-14)  # a Hessian is symmetric
    # the reference Hessian against central differences of the hand-written gradient
    inp = inputs("hessian", quick=True)
    a, x = inp["A"], inp["x"]

    def grad_f(v: np.ndarray) -> np.ndarray:
        t = np.tanh(a @ v)
        p = np.exp(v - v.max())
        return a.T @ (2 * t * (1 - t * t)) + p / p.sum()

    eps = 1e-6
    fd = np.stack([(grad_f(x + eps * e) - grad_f(x - eps * e)) / (2 * eps) for e in np.eye(n)])
    assert np.allclose(h, fd, rtol=0, atol=1e-7)
    rec = {r["workload"]: r for r in _records(quick_run) if r["framework"] == "xpgrad-numpy"}
    assert all(rec[wl]["status"] == "ok" and rec[wl]["grad_max_rel_diff"] < 1e-12 for wl in shapes)


def test_a_declared_unsupported_pair_is_reported_with_its_reason() -> None:
    from benchmarks import _worker, report

    rec = _worker.run_pair("mygrad", "hessian", 1, quick=True)  # declared: needs no mygrad installed
    assert rec["status"] == "unsupported" and "higher-order" in rec["reason"] and rec["median"] is None
    table = report.table_md([rec])
    assert "unsupported [1]" in table and "mygrad / hessian: unsupported: MyGrad has no higher-order" in table


def test_report_renders(quick_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import report

    table = (quick_run / "table.md").read_text()
    assert "| xpgrad-numpy |" in table and "| numpy-manual | 1.00x | 1.00x |" in table
    assert (quick_run / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((quick_run / "run.json").read_text())["command"].startswith("python -m benchmarks")
    # the docs page, written to a temporary place
    monkeypatch.setattr(report, "DOCS_PAGE", tmp_path / "benchmarks.md")
    monkeypatch.setattr(report, "DOCS_CHART", tmp_path / "assets" / "bench_chart.png")
    report.docs(quick_run)
    page = (tmp_path / "benchmarks.md").read_text()
    assert page.startswith("# Benchmarks") and "assets/bench_chart.png" in page and "| xpgrad-numpy |" in page
    assert (tmp_path / "assets" / "bench_chart.png").exists()
    assert (tmp_path / "assets" / "bench_chart_transforms.png").exists()
    assert "<!-- results:gradients -->" in page and "<!-- results:transforms -->" in page
    # a run of the transform workloads alone replaces their section and keeps the gradients' as it was
    gradients = page[page.index("<!-- results:gradients -->"):page.index("<!-- /results:gradients -->")]
    only = tmp_path / "only_transforms"
    only.mkdir()
    recs = [r for r in _records(quick_run) if r["workload"] in ("hessian", "jacobian", "per_example")]
    for r in recs:
        if r["framework"] == "xpgrad-numpy":
            r["median"] *= 1000.0  # a recognisably different run
    (only / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    report.docs(only)
    page2 = (tmp_path / "benchmarks.md").read_text()
    assert gradients in page2 and page2 != page and page2.count("### ") == 2


def test_chart_gives_each_framework_its_own_look_and_keeps_the_legend_whole(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt
    from benchmarks import report

    fws = [f"framework-{i}" for i in range(23)]
    wls = ["chain", "mlp", "large"]
    rat = {(fw, wl): 1.0 + i / 10 for i, fw in enumerate(fws) for wl in wls}
    fig = report.chart_figure(rat, fws, wls)
    try:
        ax = fig.axes[0]
        handles, labels = ax.get_legend_handles_labels()
        assert labels == fws
        looks = {(tuple(h.patches[0].get_facecolor()), h.patches[0].get_hatch()) for h in handles}
        assert len(looks) == len(fws)  # no two series share a colour and a hatch
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legend, whole = ax.get_legend().get_window_extent(renderer), fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)
        # the saved figure (bbox_inches="tight") holds the whole legend, which sits below the axes
        assert whole.x0 - 1 <= legend.x0 and legend.x1 <= whole.x1 + 1 and whole.y0 - 1 <= legend.y0  # (pixels)
        assert legend.y1 <= ax.get_window_extent(renderer).y0
    finally:
        plt.close(fig)
    report.chart_ratios(rat, fws, wls, tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_compares_xpgrad_with_the_anchors() -> None:
    from benchmarks import report

    def rec(fw: str, median: float) -> dict[str, Any]:
        return {"framework": fw, "workload": "hessian", "unit": "ms", "status": "ok", "median": median, "q1": median,
                "q3": median, "grad_max_abs_diff": 0.0, "grad_max_rel_diff": 0.0}

    table = report.table_md([rec("numpy-manual", 1.0), rec("torch", 4.0), rec("jax-jit", 0.5), rec("xpgrad-numpy", 120.0)])
    assert "| workload | xpgrad-numpy / torch | xpgrad-numpy / jax-jit |" in table
    assert "| hessian | 30x | 240x |" in table


def test_a_missing_framework_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import _worker

    monkeypatch.setitem(_worker.FRAMEWORKS, "missing", ("no_such_module", {}))
    rec = _worker.run_pair("missing", "chain", 1, quick=True)
    assert rec["status"] == "unavailable" and "no_such_module" in rec["reason"]
    assert rec["median"] is None


def test_every_framework_has_every_workload() -> None:
    """Each pair is implemented, or declared unsupported with a reason (never silently missing)."""
    from benchmarks import _worker
    from benchmarks.workloads import WORKLOADS

    assert all(fw in _worker.FRAMEWORKS and wl in WORKLOADS and isinstance(why, str) and len(why) > 20
               for (fw, wl), why in _worker.UNSUPPORTED.items())
    for fw, (mod_name, _) in _worker.FRAMEWORKS.items():
        src = (ROOT / "benchmarks" / "impl" / f"{mod_name}.py").read_text()
        for wl in WORKLOADS:
            implemented = f"def _{wl}(" in src
            assert implemented != ((fw, wl) in _worker.UNSUPPORTED), (fw, wl, "implemented" if implemented
                                                                      else "neither implemented nor declared")


def test_ab_runs_both_trees_interleaved_and_reports_ratios(tmp_path: Path) -> None:
    """``python -m benchmarks.ab BASE HEAD``: both sides per round, ratios and their median
    in ab.json and a table (here the same tree on both sides, a smoke run)."""
    from benchmarks import ab

    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.ab", str(ROOT), str(ROOT), "--workloads", "chain", "--rounds", "2",
         "--repeats", "2", "--quick", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec = json.loads((tmp_path / "ab.json").read_text())
    assert list(rec["ratios"]) == ["chain"] and len(rec["ratios"]["chain"]) == 2
    assert rec["steady_malloc"] is True and rec["medians"]["chain"] > 0
    assert "| chain |" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["base-1", "base-2", "head-1", "head-2"]
    assert ab.ratios([{"w": 2.0}], [{"w": 3.0}]) == {"w": [1.5]}
    assert "| w | 1.500 | 1.500 | NO |" in ab.table({"w": [1.5]})
    bad = subprocess.run([sys.executable, "-m", "benchmarks.ab", str(ROOT), str(ROOT), "--workloads", "nope"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "unknown workloads: nope" in bad.stderr


def test_a_jitted_framework_times_its_trace_apart_and_replays() -> None:
    """xpgrad-numpy-jit: the first call (the trace) is timed apart and against an eager call; the
    gradient check and large's memory are on replays; the report has the jit tables."""
    from benchmarks import _worker, report

    recs = [_worker.run_pair(fw, wl, 2, quick=True) for wl in ("chain", "large")
            for fw in ("numpy-manual", "xpgrad-numpy-jit")]
    for r in recs:
        assert r["status"] == "ok", r.get("reason")
        assert r["best"] == min(r["samples"])
    chain, large = recs[1], recs[3]
    for r in (chain, large):
        assert r["trace_ms"] > 0 and r["eager_ms"] > 0 and len(r["trace_samples_ms"]) == 3
        assert r["trace_ratio"] == pytest.approx(r["trace_ms"] / r["eager_ms"])
        assert r["grad_max_rel_diff"] < 1e-12
    # the replay of large holds the gradient and a few chunks (numpy-manual: e and the gradient)
    assert 0.9 <= large["peak_traced_ratio"] < 1.5 and recs[2]["peak_traced_ratio"] == pytest.approx(2.0, abs=0.05)
    table = report.table_md(recs)
    assert "**xg.jit's targets on NumPy**" in table and "| chain <= 1.5x |" in table
    assert "large peak memory <= 2.0" in table and "| xpgrad-numpy-jit | " in table
