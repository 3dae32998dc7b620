"""The benchmark suite runs end to end: a quick run of a few pairs, its JSON records,
the gradient check and the report (no timing assertions: speed lives in benchmarks/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("matplotlib")

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
         "--workloads", "chain,large", "--repeats", "2", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_one_record_per_pair_with_the_schema(quick_run: Path) -> None:
    recs = _records(quick_run)
    assert sorted((r["framework"], r["workload"]) for r in recs) == [
        ("numpy-manual", "chain"), ("numpy-manual", "large"), ("xpgrad-numpy", "chain"), ("xpgrad-numpy", "large")]
    for r in recs:
        assert r["status"] == "ok", r.get("reason")
        for key, typ in FIELDS.items():
            assert isinstance(r[key], typ), (key, r[key])
        assert len(r["samples"]) == 2 and r["q1"] <= r["median"] <= r["q3"]
        assert r["unit"] == {"chain": "us/op", "large": "ms"}[r["workload"]]
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


def test_a_missing_framework_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import _worker

    monkeypatch.setitem(_worker.FRAMEWORKS, "missing", ("no_such_module", {}))
    rec = _worker.run_pair("missing", "chain", 1, quick=True)
    assert rec["status"] == "unavailable" and "no_such_module" in rec["reason"]
    assert rec["median"] is None


def test_every_framework_has_every_workload() -> None:
    from benchmarks import _worker
    from benchmarks.workloads import WORKLOADS

    for mod_name in {m for m, _ in _worker.FRAMEWORKS.values()}:
        src = (ROOT / "benchmarks" / "impl" / f"{mod_name}.py").read_text()
        assert all(f"def _{wl}(" in src for wl in WORKLOADS), mod_name
