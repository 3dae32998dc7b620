"""The official data-apis array-api-tests suite, on xpgrad over each backend.

Needs a local checkout of https://github.com/data-apis/array-api-tests (with its
requirements installed) whose path is in ``ARRAY_API_TESTS_DIR``; skipped with that
message otherwise. For each backend the suite runs twice, on the backend itself and
on xpgrad over it (``xpgrad_over.py``); the test fails when xpgrad fails a test that
the backend passes. ``ARRAY_API_TESTS_ARGS`` replaces the suite arguments (default:
``--max-examples=5 --disable-extension fft linalg``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# the namespace each backend is tested through (array-api-compat wraps numpy, torch, dask)
MODULES = {
    "numpy": "array_api_compat.numpy",
    "array_api_strict": "array_api_strict",
    "torch": "array_api_compat.torch",
    "jax": "jax.numpy",
    "dask": "array_api_compat.dask.array",
}
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


def _suite_dir() -> Path:
    path = os.environ.get("ARRAY_API_TESTS_DIR")
    if not path:
        pytest.skip("official array-api-tests not run: set ARRAY_API_TESTS_DIR to a local checkout of "
                    "https://github.com/data-apis/array-api-tests (see conformance/README.md)")
    p = Path(path)
    if not (p / "array_api_tests").is_dir():
        pytest.fail(f"ARRAY_API_TESTS_DIR={path} is not a checkout of array-api-tests (no array_api_tests/ in it)")
    return p


def _failures(suite: Path, module: str, env_extra: dict[str, str]) -> set[str]:
    args = shlex.split(os.environ.get("ARRAY_API_TESTS_ARGS", "--max-examples=5 --disable-extension fft linalg"))
    env = {**os.environ, **env_extra, "ARRAY_API_TESTS_MODULE": module,
           "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "array_api_tests", "-q", "-rfE", "--tb=no",
                           "-p", "no:cacheprovider", "-o", "addopts=", "-W", "ignore", *args],
                          cwd=suite, env=env, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1):
        pytest.fail(f"array-api-tests on {module} did not run (exit {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return set(_FAILED.findall(proc.stdout))


def test_xpgrad_fails_nothing_its_backend_passes(backend: object) -> None:
    suite = _suite_dir()
    name = backend.name  # type: ignore[attr-defined]
    base = _failures(suite, MODULES[name], {})
    ours = _failures(suite, "xpgrad_over", {"XPGRAD_CONFORMANCE_BACKEND": name})
    extra = sorted(ours - base)
    assert not extra, f"xpgrad over {name} fails {len(extra)} array-api-tests that {name} passes: {extra[:50]}"
