"""``python -m xpgrad info``: text and JSON reports, in a subprocess and in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import xpgrad as xg
from xpgrad.__main__ import build_parser, main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xpgrad", *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_info_text() -> None:
    proc = run_cli("info")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"xpgrad {xg.__version__} (array API standard 2025.12)" in out
    for lib in ("numpy", "array_api_strict", "torch", "jax", "dask", "cupy"):
        assert f"  {lib} " in out
    assert 'cupy              not installed (pip install "xpgrad[cupy]")' in out
    assert "device1, device2, no_float64" in out  # array-api-strict's devices
    assert "current policy:" in out and "array_api_compat.numpy (numpy)" in out
    assert proc.stderr == ""


def test_info_json() -> None:
    proc = run_cli("info", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["xpgrad"] == xg.__version__
    assert report["array_api_version"] == "2025.12" == xg.__array_api_version__
    libs = {b["library"]: b for b in report["backends"]}
    assert list(libs) == ["numpy", "array_api_strict", "torch", "jax", "dask", "cupy"]
    assert libs["numpy"]["installed"] and libs["numpy"]["version"] == __import__("numpy").__version__
    assert libs["numpy"]["devices"] == ["cpu"]
    assert libs["cupy"] == {"library": "cupy", "installed": False, "version": None, "extra": "cupy", "devices": []}
    assert "None" not in libs["jax"]["devices"]
    assert report["policy"] == {"library": "numpy", "namespace": "array_api_compat.numpy", "device": None,
                                "dtype": None, "seed": None}


def test_info_in_process_reports_current_policy(capsys: pytest.CaptureFixture[str]) -> None:
    with xg.default_device("array_api_strict", device="device1", dtype="float32", seed=4):
        assert main(["info", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["policy"] == {"library": "array_api_strict", "namespace": "array_api_strict",
                                "device": "array_api_strict.Device('device1')", "dtype": "float32", "seed": 4}


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out = capsys.readouterr().out
    assert "info" in out and "demo" in out


def test_unknown_command_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(["nope"])
    assert ei.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_parser_uses_subcommands() -> None:
    args: Any = build_parser().parse_args(["info"])
    assert args.command == "info" and args.json is False and callable(args.func)
