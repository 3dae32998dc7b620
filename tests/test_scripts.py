"""The GPU scripts, run as far as a machine without a GPU allows.

``scripts/gpu_smoke.py`` has a dry run on torch's CPU device that goes through the same
code as its torch-CUDA checks; ``scripts/gpu_check.sh`` is at least valid bash and reads
the torch pin it installs from .ci/constraints.txt (CI's versions).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import pytest

from ._util import ROOT as _ROOT
from ._util import load_script


def _smoke() -> Any:
    return load_script("scripts/gpu_smoke.py")


def test_gpu_smoke_dry_run_on_torch_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    smoke = _smoke()
    assert smoke.main(["--torch-device", "cpu", "--skip-cupy", "--skip-demo"]) == 0
    out = capsys.readouterr().out
    assert "3 passed, 0 failed" in out, out
    assert out.count("PASS torch on cpu") == 3, out


def test_gpu_smoke_reports_a_failing_check(capsys: pytest.CaptureFixture[str]) -> None:
    smoke = _smoke()

    @smoke.check("a check that fails")
    def bad() -> str:
        raise ValueError("wrong gradient")

    smoke.run(bad)
    assert smoke.RESULTS == [("a check that fails", False, "ValueError: wrong gradient")]
    assert "FAIL a check that fails: ValueError: wrong gradient" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_gpu_check_script_is_valid_bash_and_reads_the_torch_pin() -> None:
    script = _ROOT / "scripts" / "gpu_check.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    sed = re.search(r"TORCH_VERSION=\$\(sed -n '([^']*)' \.ci/constraints\.txt\)", script.read_text(encoding="utf-8"))
    assert sed is not None
    constraints = _ROOT / ".ci" / "constraints.txt"
    pin = subprocess.run(["sed", "-n", sed.group(1), str(constraints)], check=True,
                         capture_output=True, text=True).stdout.strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", pin), pin
    assert f"torch=={pin}" in constraints.read_text(encoding="utf-8").splitlines()


def test_junit_summary_counts_per_backend(tmp_path: Any) -> None:
    """scripts/junit_summary.py: the per-backend table and one line per failure, from the
    JUnit file of a real pytest run (gpu_check.sh's summary of a GPU run)."""
    import sys

    test = tmp_path / "test_fake.py"
    test.write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('backend', ['cupy', 'torch_cuda'])\n"
        "@pytest.mark.parametrize('case', ['sin', 'cos'])\n"
        "def test_op(backend, case):\n"
        "    assert not (backend == 'cupy' and case == 'cos'), 'cupy cos differs'\n"
        "@pytest.mark.xfail(strict=True, reason='a known limit')\n"
        "@pytest.mark.parametrize('backend', ['torch_cuda'])\n"
        "def test_known(backend):\n"
        "    raise ValueError\n"
    )
    xml = tmp_path / "out.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                    f"--junitxml={xml}", str(test)], capture_output=True, text=True, check=False, cwd=tmp_path)
    summary = load_script("scripts/junit_summary.py")
    table, problems = summary.summarize(str(xml))
    assert "| cupy | 1 | 1 | 0 | 0 | 0 |" in table, table
    assert "| torch_cuda | 2 | 0 | 0 | 1 | 0 |" in table, table
    assert len(problems) == 1 and "test_op[cos-cupy]" in problems[0] and "cupy cos differs" in problems[0], problems
    assert summary.main([str(xml)]) == 1
