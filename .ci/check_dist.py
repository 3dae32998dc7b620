"""Check the built sdist and wheel: what they hold and what their metadata says.

    python .ci/check_dist.py DIST_DIR

DIST_DIR holds one ``.tar.gz`` and one ``.whl`` of the same version (``python -m build``
makes them; ``nox -s build`` and ``nox -s ci`` run this after ``twine check``). Checks:

- the wheel holds the package and its metadata only: ``xpgrad/py.typed`` is there, and
  no tests, conformance suite, byte code or repository folders are;
- the sdist holds what a rebuild needs (pyproject.toml, README.md, LICENSE, the
  sources with ``py.typed``) and no build outputs or virtualenvs;
- the metadata: ``Requires-Python``, one ``Programming Language :: Python :: 3.N``
  classifier for each minor version from that floor up (no gaps), ``Typing :: Typed``,
  requirements with lower bounds and no exact pins (those are CI's, in
  .ci/constraints.txt), and https project URLs (none declared is reported, not failed).

Exit status 1 with every problem listed, else 0.
"""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

PACKAGE = "xpgrad"
# sdist paths (below its top folder) a rebuild needs
SDIST_NEEDS = ["pyproject.toml", "README.md", "LICENSE", "PKG-INFO", f"src/{PACKAGE}/__init__.py", f"src/{PACKAGE}/py.typed"]
# no sdist path may start with these: build outputs, virtualenvs, caches
SDIST_NEVER = (".nox/", ".venv/", "dist/", "build/", "site/", ".git/", ".mypy_cache/", ".ruff_cache/", ".hypothesis/")


def check_wheel(path: Path, problems: list[str]) -> Message:
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        dist_info = [n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")]
        if not dist_info:
            problems.append(f"{path.name}: no .dist-info folder")
            return Message()
        meta = Parser().parsestr(zf.read(f"{dist_info[0]}/METADATA").decode("utf-8"))
    for n in names:
        top = n.split("/", 1)[0]
        if top not in (PACKAGE, dist_info[0]):
            problems.append(f"{path.name}: {n} is outside the package and its metadata")
        if "/tests/" in f"/{n}" or "/conformance/" in f"/{n}" or re.search(r"(^|/)(test_[^/]*|conftest)\.py$", n):
            problems.append(f"{path.name}: {n} is a test file (tests stay in the repository and the sdist)")
        if "__pycache__" in n or n.endswith((".pyc", ".pyo")):
            problems.append(f"{path.name}: {n} is byte code")
    for needed in (f"{PACKAGE}/__init__.py", f"{PACKAGE}/py.typed"):
        if needed not in names:
            problems.append(f"{path.name}: {needed} is missing (py.typed tells type checkers the package is typed)")
    return meta


def check_sdist(path: Path, problems: list[str]) -> None:
    with tarfile.open(path) as tf:
        names = tf.getnames()
    top = path.name.removesuffix(".tar.gz")
    inner = {n.removeprefix(f"{top}/") for n in names}
    for n in names:
        if n != top and not n.startswith(f"{top}/"):
            problems.append(f"{path.name}: {n} is outside its top folder {top}/")
    for needed in SDIST_NEEDS:
        if needed not in inner:
            problems.append(f"{path.name}: {needed} is missing")
    for n in sorted(inner):
        if n.startswith(SDIST_NEVER) or "__pycache__" in n:
            problems.append(f"{path.name}: {n} does not belong in an sdist")


def check_metadata(meta: Message, problems: list[str]) -> list[str]:
    """Problems go to ``problems``; returns notes for the log."""
    notes = []
    requires_python = meta.get("Requires-Python", "")
    floor = re.fullmatch(r">=\s*3\.(\d+)", requires_python.strip())
    if floor is None:
        problems.append(f"metadata: Requires-Python is {requires_python!r}, not '>=3.N'")
        return notes
    classifiers = meta.get_all("Classifier") or []
    minors = sorted(int(m.group(1)) for c in classifiers if (m := re.fullmatch(r"Programming Language :: Python :: 3\.(\d+)", c)))
    if not minors:
        problems.append("metadata: no 'Programming Language :: Python :: 3.N' classifier")
    elif minors != list(range(int(floor.group(1)), minors[-1] + 1)):
        problems.append(f"metadata: the Python classifiers 3.{minors} should run from 3.{floor.group(1)} up with no gap")
    else:
        notes.append(f"Python 3.{minors[0]} to 3.{minors[-1]} (Requires-Python {requires_python})")
    if "Typing :: Typed" not in classifiers:
        problems.append("metadata: no 'Typing :: Typed' classifier")
    for req in meta.get_all("Requires-Dist") or []:
        if re.search(r"(^|[^=!<>~])==", req.split(";", 1)[0]):  # (not the marker's extra == 'x')
            problems.append(f"metadata: Requires-Dist {req!r} pins an exact version (pins belong in .ci/constraints.txt)")
    urls = meta.get_all("Project-URL") or []
    for url in urls:
        if not re.fullmatch(r"[^,]+,\s*https://\S+", url):
            problems.append(f"metadata: Project-URL {url!r} is not 'label, https://...'")
    notes.append(f"{len(urls)} project URL(s)" + ("" if urls else ": none declared ([project.urls] in pyproject.toml)"))
    return notes


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    dist = Path(argv[0])
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    problems: list[str] = []
    if len(wheels) != 1 or len(sdists) != 1:
        print(f"check_dist: expected one wheel and one sdist in {dist}, found {[p.name for p in [*wheels, *sdists]]}")
        return 1
    wheel, sdist = wheels[0], sdists[0]
    meta = check_wheel(wheel, problems)
    check_sdist(sdist, problems)
    notes = check_metadata(meta, problems)
    version = meta.get("Version")
    if not wheel.name.startswith(f"{PACKAGE}-{version}-") or sdist.name != f"{PACKAGE}-{version}.tar.gz":
        problems.append(f"{wheel.name} and {sdist.name} are not both version {version}")
    for p in problems:
        print(f"check_dist: {p}")
    status = "FAILED" if problems else "ok"
    print(f"check_dist: {status}: {wheel.name}, {sdist.name}; " + "; ".join(notes))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
