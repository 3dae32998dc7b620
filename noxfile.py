"""Nox sessions: the CI entry point, one test session per backend, and the checks.

``nox -s ci`` is what ``bash .ci/run`` (the README's test command) runs, in one
virtualenv: build the sdist and the wheel and check them (``twine check``, the
wheel's files, the metadata: ``.ci/check_dist.py``), install that wheel with every
CPU backend and the tools, then ``ruff check``, ``mypy``, the whole test suite over
all CPU backends, the ``conformance/`` suite over all CPU backends and
``mkdocs build --strict``. Each check runs even when an earlier one failed, and the
session fails if any did. The per-backend ``tests`` sessions install only their own
extra, which catches an import of an optional backend that the package does not
declare.

Every install goes through ``.ci/constraints.txt`` (pip's ``-c``): the exact version
of everything CI installs, torch 2.13.0 (the CPU build) included, while the extras of
pyproject.toml state only lower bounds, for users. ``nox -s constraints`` writes the
file anew from a fresh resolution. ``nox -s oldest`` runs the suite on the lowest
versions those lower bounds allow.

Virtualenvs are plain pip ones (``virtualenv`` backend): pip honours the
machine's pip configuration (``find-links`` with the CPU build of torch), which
a uv-based venv would not. The package is installed from a built wheel (not
editable), so the tests run against what users install.
"""

from __future__ import annotations

import contextlib
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import nox
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

nox.options.default_venv_backend = "virtualenv"
# reuse a session's venv between local runs; a clean CI clone has none to reuse
nox.options.reuse_venv = "yes"
nox.options.sessions = ["ci"]
nox.options.error_on_external_run = True

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
# the exact versions of everything CI installs; every install below passes it to pip
CONSTRAINTS = ROOT / ".ci" / "constraints.txt"
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
# what `ci` installs with the wheel: every CPU backend and the test tools, ruff and mypy, mkdocs
CI_EXTRAS = "all-cpu,lint,docs"
# what CI installs that no extra names: the sdist/wheel builder and checker
DIST_TOOLS = ["build", "twine"]
# one pytest worker per core (pytest-xdist; `-- -n 0` turns it off), idle workers
# steal queued tests (a few slow tests would otherwise leave one core idle at the end);
# the 20 slowest tests are listed in every run. 'No tests collected' (pytest exit 5)
# fails the session like any other nonzero exit.
PYTEST = ["pytest", "-p", "no:cacheprovider", "-n", "auto", "--dist", "worksteal", "--durations=20"]
# pytest collects the docstring examples of src/xpgrad (--doctest-modules), while the
# sessions import xpgrad from the installed wheel; this tells pytest to run them on the
# installed modules (the same code) instead of refusing with "import file mismatch"
PYTEST_ENV = {"PY_IGNORE_IMPORTMISMATCH": "1"}
LINT_TOOLS = PYPROJECT["project"]["optional-dependencies"]["lint"]
# `oldest`: the libraries it installs at the lowest version pyproject.toml allows, the
# extras it installs, and the backends it tests (torch, jax and dask are left out: an
# older torch pulls several GB of CUDA packages here)
OLDEST = ["numpy", "array-api-compat", "array-api-extra", "scipy", "scikit-learn", "array-api-strict"]
OLDEST_EXTRAS = ["test", "strict", "demo", "viz"]
OLDEST_BACKENDS = ["numpy", "array_api_strict"]


def _install(session: nox.Session, *args: str) -> None:
    """pip install, every version (build backends included) held to .ci/constraints.txt."""
    session.install("-c", str(CONSTRAINTS), "--build-constraint", str(CONSTRAINTS), *args)


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


def _cupy_extra() -> str:
    """The CuPy extra for this machine's driver: ``cupy13`` (cupy-cuda13x) where nvidia-smi
    reports CUDA 13 or newer, ``cupy`` (cupy-cuda12x) otherwise."""
    smi = shutil.which("nvidia-smi")
    out = subprocess.run([smi], capture_output=True, text=True, timeout=60, check=False).stdout if smi else ""
    m = re.search(r"CUDA Version:\s*(\d+)", out)
    return "cupy13" if m and int(m.group(1)) >= 13 else "cupy"


def _check_imports(session: nox.Session, backends: list[str]) -> None:
    """Fail early, and clearly, when an installed backend does not import.

    The test fixture skips a backend that is not installed; without this check a
    broken install would turn into skipped tests instead of a failure.
    """
    names = ", ".join(IMPORT[b] for b in backends)
    session.run("python", "-c", f"import {names}", silent=True)


class _Steps:
    """Runs a session's checks one after another, timing each and collecting failures."""

    def __init__(self, session: nox.Session) -> None:
        self.session = session
        self.start = time.monotonic()
        self.times: list[tuple[str, float]] = []
        self.failed: list[str] = []

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.times.append((name, time.monotonic() - t0))

    def run(self, name: str, *args: str, env: dict[str, str] | None = None) -> bool:
        """Run one check; a nonzero exit is recorded (not raised) so the next check still runs."""
        with self.timed(name):
            ok = _run_ok(self.session, *args, env=env)
        if not ok:
            self.failed.append(name)
        return ok

    def finish(self) -> None:
        parts = ", ".join(f"{name} {t:.0f} s" for name, t in self.times)
        self.session.log(f"{self.session.name} took {time.monotonic() - self.start:.0f} s ({parts})")
        if self.failed:
            self.session.error(f"failed: {', '.join(self.failed)} (see above)")


@nox.session
def ci(session: nox.Session) -> None:
    """The README's test command: artifacts, lint, types, tests, conformance, docs, in one venv.

    Arguments after ``--`` go to the test suite's pytest run (not to conformance's).
    """
    steps = _Steps(session)
    with steps.timed("build and check"):
        wheel = _build_and_check(session, steps)
    with steps.timed("install"):
        _install(session, f"{wheel}[{CI_EXTRAS}]")
        # a reused venv may hold an earlier build of the same version: this one replaces it
        session.install("--no-deps", "--force-reinstall", "--quiet", str(wheel))
        _check_imports(session, CPU_BACKENDS)
    session.run("python", "-m", "xpgrad", "info")
    steps.run("ruff", "ruff", "check", "--output-format=concise", ".")
    steps.run("mypy", "mypy")
    env = {**PYTEST_ENV, "HYPOTHESIS_PROFILE": "ci"}
    steps.run("tests", *PYTEST, *session.posargs, env={**env, "XPGRAD_BACKENDS": _fixture(CPU_BACKENDS)})
    steps.run("conformance", *PYTEST, "conformance", env={**env, "XPGRAD_BACKENDS": ",".join(CPU_BACKENDS)})
    steps.run("docs", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(Path(session.create_tmp()) / "site"),
              env={"NO_MKDOCS_2_WARNING": "1"})
    steps.finish()


def _build_and_check(session: nox.Session, steps: _Steps, outdir: Path | None = None) -> Path:
    """Build the sdist and, from it, the wheel; check both. Returns the wheel's path.

    The build backend (hatchling) is installed in the build's isolated environment at
    the version of .ci/constraints.txt (PIP_CONSTRAINT reaches the pip that installs it).
    """
    _install(session, *DIST_TOOLS)
    dist = outdir or Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.run("python", "-m", "build", "--outdir", str(dist), str(ROOT), env={"PIP_CONSTRAINT": str(CONSTRAINTS)})
    files = sorted(str(f) for f in dist.iterdir())
    steps.run("twine check", "twine", "check", "--strict", *files)
    steps.run("check_dist", "python", str(ROOT / ".ci" / "check_dist.py"), str(dist))
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        session.error(f"expected one wheel in {dist}, found {[w.name for w in wheels]}")
    return wheels[0]


@nox.session
def build(session: nox.Session) -> None:
    """Build the sdist and the wheel into dist/ and check them (what `ci` does first)."""
    steps = _Steps(session)
    _build_and_check(session, steps, outdir=ROOT / "dist")
    steps.finish()


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
    extra = _cupy_extra() if backend == "cupy" else EXTRA[backend]
    _install(session, f".[test,{extra}]")
    _check_imports(session, [backend])
    session.run(*PYTEST, *session.posargs, env={**PYTEST_ENV, "XPGRAD_BACKENDS": _fixture([backend])})


@nox.session
def thorough(session: nox.Session) -> None:
    """The full suite on every CPU backend with many more hypothesis examples (slow)."""
    _install(session, ".[all-cpu]")
    _check_imports(session, CPU_BACKENDS)
    session.run(
        *PYTEST,
        *session.posargs,
        env={**PYTEST_ENV, "XPGRAD_BACKENDS": _fixture(CPU_BACKENDS), "HYPOTHESIS_PROFILE": "thorough"},
    )


@nox.session
def oldest(session: nox.Session) -> None:
    """The suite on NumPy and array-api-strict with the oldest versions pyproject.toml allows.

    numpy, array-api-compat, array-api-extra, scipy, scikit-learn and array-api-strict
    are installed at their lower bounds (the highest one where several extras bound a
    library); everything else at CI's pins. Torch, JAX and Dask are left out: an older
    torch pulls several GB of CUDA packages. Runs on the Python that runs nox; NumPy
    1.26 has wheels for Python 3.9 to 3.12 (``nox -s oldest --force-python 3.10``).
    """
    floors = _floors(OLDEST, ["dependencies", *OLDEST_EXTRAS])
    session.log("oldest versions: " + ", ".join(f"{n}=={v}" for n, v in floors.items()))
    pins = Path(session.create_tmp()) / "oldest-constraints.txt"
    keep = [line for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#") and canonicalize_name(Requirement(line).name) not in floors]
    pins.write_text("\n".join([*keep, *(f"{n}=={v}" for n, v in floors.items())]) + "\n", encoding="utf-8")
    session.install("-c", str(pins), "--build-constraint", str(CONSTRAINTS), f".[{','.join(OLDEST_EXTRAS)}]")
    # what pip installed is the floor itself (1.26 and 1.26.0 are one version)
    check = "; ".join(f"assert v({n!r}) == {str(f)!r}, ({n!r}, v({n!r}))" for n, f in floors.items())
    session.run("python", "-c", "import importlib.metadata as m, re; "
                r"v = lambda n: re.sub(r'(\.0)+$', '', m.version(n)); " + check, silent=True)
    _check_imports(session, OLDEST_BACKENDS)
    steps = _Steps(session)
    env = {**PYTEST_ENV, "HYPOTHESIS_PROFILE": "ci"}
    steps.run("tests", *PYTEST, *session.posargs, env={**env, "XPGRAD_BACKENDS": _fixture(OLDEST_BACKENDS)})
    steps.run("conformance", *PYTEST, "conformance", env={**env, "XPGRAD_BACKENDS": ",".join(OLDEST_BACKENDS)})
    steps.finish()


def _floors(names: list[str], groups: list[str]) -> dict[str, Version]:
    """The lowest version of each library that every requirement in these groups allows.

    ``groups``: "dependencies" or extras of pyproject.toml (an extra's ``xpgrad[...]``
    is followed). Each library must have a lower bound (``>=``, ``~=`` or ``==``).
    """
    project = PYPROJECT["project"]
    reqs: list[Requirement] = []
    todo, seen = list(groups), set()
    while todo:
        group = todo.pop()
        if group in seen:
            continue
        seen.add(group)
        for text in project["dependencies"] if group == "dependencies" else project["optional-dependencies"][group]:
            req = Requirement(text)
            if canonicalize_name(req.name) == canonicalize_name(project["name"]):
                todo.extend(req.extras)
            else:
                reqs.append(req)
    floors: dict[str, Version] = {}
    for name in map(canonicalize_name, names):
        bounds = [Version(s.version) for r in reqs if canonicalize_name(r.name) == name
                  for s in r.specifier if s.operator in (">=", "~=", "==")]
        if not bounds:
            msg = f"oldest: pyproject.toml states no lower bound for {name} in {groups}"
            raise ValueError(msg)
        floors[name] = Version(re.sub(r"(\.0)+$", "", str(max(bounds))))
    return floors


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check (`nox -s lint -- format` also runs ruff format --check)."""
    _install(session, *(req for req in LINT_TOOLS if req.startswith("ruff")))
    session.run("ruff", "check", ".")
    # the code base is not ruff-formatted (rule tables are aligned by hand), so the
    # format check runs only on request; make it unconditional once `ruff format` ran
    if "format" in session.posargs:
        session.run("ruff", "format", "--check", "--diff", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over src/xpgrad (settings in pyproject.toml) with every CPU backend's stubs."""
    _install(session, ".[all-cpu,lint]")
    session.run("mypy")


def _has_tests(folder: Path) -> bool:
    return any(folder.rglob("test_*.py")) or any(folder.rglob("*_test.py"))


@nox.session
@nox.parametrize("backend", CPU_BACKENDS)
def conformance(session: nox.Session, backend: str) -> None:
    """The xpgrad namespace checked against the array API standard, per backend."""
    if not _has_tests(ROOT / "conformance"):
        session.skip("conformance suite not written yet (issue: namespace conformance)")
    _install(session, f".[test,{EXTRA[backend]}]")
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
    _install(session, f".[test,{EXTRA[backend]}]")
    _install(session, "-r", str(Path(path) / "requirements.txt"))
    _check_imports(session, [backend])
    session.run(*PYTEST, "conformance/test_official_suite.py", *session.posargs,
                env={**PYTEST_ENV, "XPGRAD_BACKENDS": backend, "ARRAY_API_TESTS_DIR": path})


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site with mkdocs; warnings are errors."""
    _install(session, ".[docs]")
    session.run("mkdocs", "build", "--strict", "--site-dir", str(ROOT / "site"), env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmarks, side by side with the other libraries (python -m benchmarks).

    Every workload for every framework, each pair in its own process; results, table
    and chart go to benchmarks/results (``nox -s bench -- --out DIR --repeats N``;
    ``-- --quick`` for a smoke run). Regenerate the docs page from a results folder with
    ``python -m benchmarks.report DIR --docs``.
    """
    _install(session, ".[bench]")
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session(reuse_venv=False)
def constraints(session: nox.Session) -> None:
    """Write .ci/constraints.txt anew: the newest versions that install today, torch kept.

    A fresh venv gets everything CI and the other sessions install (every extra but
    the cupy ones, the build tools, hatchling, nox) with no constraints but the torch pin read
    from the current file (edit that line to move torch), and the file becomes its
    ``pip freeze``. Run it on a machine like CI's: elsewhere ``torch==2.13.0`` comes from
    PyPI with its CUDA packages, and they would be pinned too.
    """
    torch = _pinned("torch")
    extras = ",".join(name for name in PYPROJECT["project"]["optional-dependencies"] if not name.startswith("cupy"))
    session.install(f".[{extras}]", *DIST_TOOLS, *PYPROJECT["build-system"]["requires"], "nox", f"torch=={torch}")
    freeze = session.run("python", "-m", "pip", "freeze", "--exclude-editable", silent=True)
    name = canonicalize_name(PYPROJECT["project"]["name"])
    pins = []
    for line in str(freeze).splitlines():
        req = Requirement(line)  # pip freeze prints name==version (a local build: name==1.0+cpu)
        if canonicalize_name(req.name) != name:
            (spec,) = req.specifier
            pins.append(f"{canonicalize_name(req.name)}=={Version(spec.version).public}")
    header = [
        "# The exact version of everything CI installs: nox passes this file to every pip",
        "# install (-c), and .ci/run installs nox with it. Users get pyproject.toml's lower",
        "# bounds instead. torch==X matches the CPU build (X+cpu) where pip finds one.",
        "# Regenerate: nox -s constraints   (it keeps the torch pin below; edit it to move torch)",
        f"# Written {datetime.now(timezone.utc):%Y-%m-%d} by Python {platform.python_version()} on"
        f" {platform.system()} {platform.machine()}.",
    ]
    pins.sort(key=lambda pin: pin.split("==")[0])
    CONSTRAINTS.write_text("\n".join([*header, *pins]) + "\n", encoding="utf-8")
    session.log(f"wrote {len(pins)} pins to {CONSTRAINTS.relative_to(ROOT)}")


def _pinned(name: str) -> str:
    """The version .ci/constraints.txt pins for a library."""
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            if canonicalize_name(req.name) == canonicalize_name(name):
                (spec,) = req.specifier
                return spec.version
    sys.exit(f"{CONSTRAINTS} pins no {name}")
