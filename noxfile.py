"""Nox sessions: the CI entry point, one test session per backend, and the checks.

``nox -s ci`` is what ``bash .ci/run`` (the README's test command) runs: one
virtualenv with every CPU backend and the lint tools, ``ruff check``, then the
whole test suite over all CPU backends in a single pytest run. The per-backend
``tests`` sessions install only their own extra, which catches an import of an
optional backend that the package does not declare.

Virtualenvs are plain pip ones (``virtualenv`` backend): pip honours the
machine's pip configuration (``find-links`` with the CPU build of torch), which
a uv-based venv would not. The package is installed from a built wheel (not
editable), so the tests run against what users install.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import nox

nox.options.default_venv_backend = "virtualenv"
# reuse a session's venv between local runs; a clean CI clone has none to reuse
nox.options.reuse_venv = "yes"
nox.options.sessions = ["ci"]
nox.options.error_on_external_run = True

ROOT = Path(__file__).parent
CPU_BACKENDS = ["numpy", "array_api_strict", "torch", "jax", "dask"]
BACKENDS = [*CPU_BACKENDS, "cupy"]
# the extra that brings each backend (numpy is a core dependency; its extra is empty)
EXTRA = {
    "numpy": "numpy",
    "array_api_strict": "strict",
    "torch": "torch",
    "jax": "jax",
    "dask": "dask",
    "cupy": "cupy",
}
# the test fixture's backends that each backend's tests run on (XPGRAD_BACKENDS):
# array-api-strict also runs with every test array on its fake "device1", the CPU
# stand-in for a GPU run (an array made on the default device meets them and raises)
FIXTURE = {"array_api_strict": ["array_api_strict", "strict_device1"]}
# import names, to check that an installed backend really imports before its tests run
IMPORT = {
    "numpy": "numpy",
    "array_api_strict": "array_api_strict",
    "torch": "torch",
    "jax": "jax",
    "dask": "dask.array",
    "cupy": "cupy",
}
# one pytest worker per core (pytest-xdist; `-- -n 0` turns it off), idle workers
# steal queued tests (a few slow tests would otherwise leave one core idle at the end);
# the 20 slowest tests are listed in every run. 'No tests collected' (pytest exit 5)
# fails the session like any other nonzero exit.
PYTEST = ["pytest", "-p", "no:cacheprovider", "-n", "auto", "--dist", "worksteal", "--durations=20"]
# pytest collects the docstring examples of src/xpgrad (--doctest-modules), while the
# sessions import xpgrad from the installed wheel; this tells pytest to run them on the
# installed modules (the same code) instead of refusing with "import file mismatch"
PYTEST_ENV = {"PY_IGNORE_IMPORTMISMATCH": "1"}
# the lint extra pins ruff and mypy; the sessions read the pins from pyproject.toml
LINT_TOOLS = nox.project.load_toml(ROOT / "pyproject.toml")["project"]["optional-dependencies"]["lint"]


def _nvidia_gpu() -> str | None:
    """Why there is no usable NVIDIA GPU here, or None when there is one."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "nvidia-smi not found"
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed ({type(e).__name__}: {e})"
    if out.returncode != 0 or "GPU" not in out.stdout:
        return f"nvidia-smi lists no GPU (exit {out.returncode}: {(out.stdout + out.stderr).strip()[:200]})"
    return None


def _check_imports(session: nox.Session, backends: list[str]) -> None:
    """Fail early, and clearly, when an installed backend does not import.

    The test fixture skips a backend that is not installed; without this check a
    broken install would turn into skipped tests instead of a failure.
    """
    names = ", ".join(IMPORT[b] for b in backends)
    session.run("python", "-c", f"import {names}", silent=True)


@nox.session
def ci(session: nox.Session) -> None:
    """The README's test command: lint, then every CPU backend's tests, in one venv."""
    start = time.monotonic()
    session.install(".[all-cpu,lint]")
    _check_imports(session, CPU_BACKENDS)
    session.run("python", "-m", "xpgrad", "info")
    # lint first, but run the tests even when it fails: one CI run reports both
    failed = []
    if not _run_ok(session, "ruff", "check", "--output-format=concise", "."):
        failed.append("ruff check")
    env = {**PYTEST_ENV, "XPGRAD_BACKENDS": _fixture(CPU_BACKENDS), "HYPOTHESIS_PROFILE": "ci"}
    if not _run_ok(session, *PYTEST, *session.posargs, env=env):
        failed.append("pytest")
    session.log(f"ci session took {time.monotonic() - start:.0f} s")
    if failed:
        session.error(f"failed: {' and '.join(failed)} (see above)")


def _fixture(backends: list[str]) -> str:
    """XPGRAD_BACKENDS for these backends' tests (see FIXTURE)."""
    return ",".join(name for b in backends for name in FIXTURE.get(b, [b]))


def _run_ok(session: nox.Session, *args: str, env: dict[str, str] | None = None) -> bool:
    """Run a command; False (not an exception) when it exits nonzero."""
    try:
        session.run(*args, env=env)
    except nox.command.CommandFailed:
        return False
    return True


@nox.session
@nox.parametrize("backend", BACKENDS)
def tests(session: nox.Session, backend: str) -> None:
    """The test suite on one backend, installed with only its own extra."""
    if backend == "cupy":
        reason = _nvidia_gpu()
        if reason is not None:
            session.skip(f"cupy needs an NVIDIA GPU with CUDA: {reason}")
    session.install(f".[test,{EXTRA[backend]}]")
    _check_imports(session, [backend])
    session.run(*PYTEST, *session.posargs, env={**PYTEST_ENV, "XPGRAD_BACKENDS": _fixture([backend])})


@nox.session
def thorough(session: nox.Session) -> None:
    """The full suite on every CPU backend with many more hypothesis examples (slow)."""
    session.install(".[all-cpu]")
    _check_imports(session, CPU_BACKENDS)
    session.run(
        *PYTEST,
        *session.posargs,
        env={**PYTEST_ENV, "XPGRAD_BACKENDS": _fixture(CPU_BACKENDS), "HYPOTHESIS_PROFILE": "thorough"},
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check (`nox -s lint -- format` also runs ruff format --check)."""
    session.install(*(req for req in LINT_TOOLS if req.startswith("ruff")))
    session.run("ruff", "check", ".")
    # the code base is not ruff-formatted (rule tables are aligned by hand), so the
    # format check runs only on request; make it unconditional once `ruff format` ran
    if "format" in session.posargs:
        session.run("ruff", "format", "--check", "--diff", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over src/xpgrad (settings in pyproject.toml)."""
    session.install(".[lint]")
    session.run("mypy")


def _has_tests(folder: Path) -> bool:
    return any(folder.rglob("test_*.py")) or any(folder.rglob("*_test.py"))


@nox.session
@nox.parametrize("backend", CPU_BACKENDS)
def conformance(session: nox.Session, backend: str) -> None:
    """The xpgrad namespace checked against the array API standard, per backend."""
    if not _has_tests(ROOT / "conformance"):
        session.skip("conformance suite not written yet (issue: namespace conformance)")
    session.install(f".[test,{EXTRA[backend]}]")
    _check_imports(session, [backend])
    session.run(*PYTEST, "conformance", *session.posargs, env={**PYTEST_ENV, "XPGRAD_BACKENDS": backend})


@nox.session
@nox.parametrize("backend", CPU_BACKENDS)
def official(session: nox.Session, backend: str) -> None:
    """The data-apis array-api-tests suite, on a backend and on xpgrad over it.

    Needs a local checkout: ``ARRAY_API_TESTS_DIR=~/array-api-tests nox -s official``
    (see conformance/README.md). xpgrad must fail nothing the backend passes.
    """
    import os

    path = os.environ.get("ARRAY_API_TESTS_DIR")
    if not path:
        session.skip("set ARRAY_API_TESTS_DIR to a checkout of https://github.com/data-apis/array-api-tests")
    session.install(f".[test,{EXTRA[backend]}]")
    session.install("-r", str(Path(path) / "requirements.txt"))
    _check_imports(session, [backend])
    session.run(*PYTEST, "conformance/test_official_suite.py", *session.posargs,
                env={**PYTEST_ENV, "XPGRAD_BACKENDS": backend, "ARRAY_API_TESTS_DIR": path})


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site with mkdocs; warnings are errors."""
    session.install(".[docs]")
    session.run("mkdocs", "build", "--strict", "--site-dir", str(ROOT / "site"), env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmarks, side by side with the other libraries (python -m benchmarks).

    Every workload for every framework, each pair in its own process; results, table
    and chart go to benchmarks/results (``nox -s bench -- --out DIR --repeats N``;
    ``-- --quick`` for a smoke run). Regenerate the docs page from a results folder with
    ``python -m benchmarks.report DIR --docs``.
    """
    session.install(".[bench]")
    session.run("python", "-m", "benchmarks", *session.posargs)
