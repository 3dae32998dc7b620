"""The status of README.md and docs/index.md: the same items, and true of the code.

Each status is a "Working today:" list and a "Not there yet:" list of bullets that
start with a bold name. Both files must have the same names in the same lists and
order. Every `xg.name` a bullet cites must exist when the item is working and must
not when it is not there yet; every repository path it cites (`benchmarks/`,
`scripts/gpu_check.sh`) must exist.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

import xpgrad as xg

ROOT = Path(__file__).resolve().parents[1]
FILES = ("README.md", "docs/index.md")
_BULLET = re.compile(r"^- \*\*(?P<name>.+?)\*\*(?P<rest>.*)$")
_XG = re.compile(r"`xg\.([A-Za-z_][\w.]*)(?:\(\))?`")
_PATH = re.compile(r"`((?:benchmarks|conformance|scripts|docs|tests|src)/[\w./-]*)`")


@functools.cache
def status(file: str) -> dict[str, list[tuple[str, str]]]:
    """``{"working": [(name, text), ...], "not yet": [...]}`` of a file's ``## Status``."""
    text = (ROOT / file).read_text(encoding="utf-8")
    m = re.search(r"^## Status\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert m, f"{file} has no '## Status' section"
    section = m.group(1)
    assert section.count("Working today:") == 1 and section.count("Not there yet:") == 1, file
    parts = {"working": section.split("Working today:")[1].split("Not there yet:")[0],
             "not yet": section.split("Not there yet:")[1]}
    out: dict[str, list[tuple[str, str]]] = {}
    for key, part in parts.items():
        items: list[tuple[str, str]] = []
        for line in part.splitlines():
            b = _BULLET.match(line)
            if b:
                items.append((b["name"], b["rest"]))
            elif items and line.startswith("  "):  # a bullet's continuation line
                items[-1] = (items[-1][0], items[-1][1] + " " + line.strip())
        out[key] = items
    return out


def _resolves(dotted: str) -> bool:
    obj: object = xg
    for part in dotted.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def test_readme_and_index_list_the_same_items() -> None:
    readme, index = status("README.md"), status("docs/index.md")
    for key in ("working", "not yet"):
        names = [n for n, _ in readme[key]]
        assert names, f"README.md's status lists nothing under {key!r}"
        assert [n for n, _ in index[key]] == names, f"docs/index.md's {key!r} items differ from README.md's"


@pytest.mark.parametrize("file", FILES)
def test_cited_names_exist_exactly_when_working(file: str) -> None:
    st = status(file)
    for name, text in st["working"]:
        for dotted in _XG.findall(name + text):
            assert _resolves(dotted), f"{file}: working item {name!r} cites xg.{dotted}, which does not exist"
    for name, text in st["not yet"]:
        for dotted in _XG.findall(name + text):
            assert not _resolves(dotted), f"{file}: {name!r} is not there yet, but xg.{dotted} exists: move it"


@pytest.mark.parametrize("file", FILES)
def test_cited_paths_exist(file: str) -> None:
    for items in status(file).values():
        for name, text in items:
            for path in _PATH.findall(text):
                assert (ROOT / path).exists(), f"{file}: {name!r} cites {path}, which is not in the repository"


def test_the_open_work_is_not_there_yet() -> None:
    """What is left of the op registry (#18) is listed as not there yet; the benchmark runner,
    `xg.vmap` (#18) and `xg.jit` (#19), which exist, as working."""
    for file in FILES:
        st = status(file)
        not_yet = " ".join(n + t for n, t in st["not yet"])
        assert "The op registry" in not_yet and "`xg.jit`" not in not_yet, file
        assert any(n == "The benchmark runner" for n, _ in st["working"]), file
        assert any(n == "`xg.jit`" for n, _ in st["working"]), file
        transforms = " ".join(t for n, t in st["working"] if n == "Transforms")
        assert "`xg.vmap`" in transforms and "`xg.checkpoint`" in transforms, file
    assert (ROOT / "benchmarks" / "__main__.py").is_file()
