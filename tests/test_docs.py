"""Every ```python block of README.md and docs/**/*.md runs.

Each Markdown file's blocks run in sequence, in one namespace, in a fresh Python
process (a doc page may define primitives or change the process-default policy
without leaking into the other tests). Lines outside the blocks are blanked, so a
traceback's line numbers are the Markdown file's own. Warnings are errors, as in
the test suite. A page that imports an optional backend which is not installed is
skipped with the backend named.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[^\s`]*)[^\n]*$")
# a backend a page needs: imported, or named as a string (`default_device("torch")`)
_IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_][A-Za-z0-9_]*)|[\"']([a-z_]+)[\"']", re.MULTILINE)
# (sklearn, tqdm, matplotlib: the `demo` extra, which the tutorial needs)
_OPTIONAL = {"torch", "jax", "dask", "cupy", "array_api_strict", "scipy", "sklearn", "tqdm", "matplotlib"}
# the same warning filters as pyproject.toml's [tool.pytest.ini_options]; later -W wins
_WARNINGS = ["-W", "error", "-W", "ignore:'mkldnn' is no longer used:UserWarning"]


def _doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [f for f in files if f.is_file()]


def python_blocks(text: str) -> tuple[str, int]:
    """The file's ```python blocks as one script with the Markdown line numbers, and their count.

    Lines outside python blocks become empty lines; a block indented under a list
    item is dedented by its fence's indentation.
    """
    out: list[str] = []
    count = 0
    fence: tuple[str, str] | None = None  # (indent, lang) of the open fence
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None:
            if m is not None:
                fence = (m["indent"], m["lang"])
                count += m["lang"] == "python"
            out.append("")
        elif m is not None and m["lang"] == "" and m["indent"] == fence[0]:
            fence = None
            out.append("")
        elif fence[1] == "python":
            indent = fence[0]
            out.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
        else:
            out.append("")
    if fence is not None:
        msg = f"unclosed ``` fence (opened as {fence[1] or 'plain'!r})"
        raise ValueError(msg)
    return "\n".join(out) + "\n", count


def test_python_blocks_parser() -> None:
    text = "# t\n\n```python\nx = 1\n```\n\n1. item\n\n   ```python\n   y = x + 1\n   ```\n```bash\nls\n```\n"
    script, n = python_blocks(text)
    assert n == 2
    lines = script.splitlines()
    assert lines[3] == "x = 1" and lines[9] == "y = x + 1" and lines[13] == ""
    ns: dict[str, object] = {}
    exec(compile(script, "t.md", "exec"), ns)
    assert ns["y"] == 2


DOC_FILES = _doc_files()


@pytest.mark.skipif(not DOC_FILES, reason="README.md and docs/ are not next to the tests (not a source checkout)")
@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_doc_examples_run(path: Path, tmp_path: Path) -> None:
    script, n = python_blocks(path.read_text(encoding="utf-8"))
    if n == 0:
        pytest.skip(f"{path.name} has no python blocks")
    named = {name for pair in _IMPORT.findall(script) for name in pair}
    missing = sorted(name for name in named & _OPTIONAL if importlib.util.find_spec(name) is None)
    if missing:
        pytest.skip(f"{path.name} needs {', '.join(missing)}, which is not installed")
    rel = path.relative_to(ROOT).as_posix()
    runner = (
        "import pathlib, sys\n"
        "src = pathlib.Path(sys.argv[1]).read_text(encoding='utf-8')\n"
        f"exec(compile(src, {rel!r}, 'exec'), {{'__name__': '__main__'}})\n"
    )
    code_file = tmp_path / "blocks.py"
    code_file.write_text(script, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, *_WARNINGS, "-c", runner, str(code_file)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"a python block of {rel} failed (line numbers are {rel}'s):\n{proc.stderr}{proc.stdout}")
