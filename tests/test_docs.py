"""Every ```python block of README.md and docs/**/*.md runs.

Each Markdown file's blocks run in sequence, in one namespace, in a fresh Python
process (a doc page may define primitives or change the process-default policy
without leaking into the other tests). Lines outside the blocks are blanked, so a
traceback's line numbers are the Markdown file's own. Warnings are errors, as in
the test suite. A block that imports (or names, as in `default_device("torch")`) an
optional backend which is not installed is left out, with every later block that
reads a name it defines; a page with no block left is skipped with the reason.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import subprocess
import sys
import tokenize
import types
from pathlib import Path
from typing import Any

import pytest

from ._util import load_script

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[^\s`]*)[^\n]*$")
# a backend a page needs: imported, or named as a string (`default_device("torch")`)
_IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_][A-Za-z0-9_]*)|[\"']([a-z_]+)[\"']", re.MULTILINE)
# (sklearn, tqdm, matplotlib: the `demo` extra, which the tutorial needs)
_OPTIONAL = {"torch", "jax", "dask", "cupy", "array_api_strict", "scipy", "sklearn", "tqdm", "matplotlib", "autograd"}
# the same warning filters as pyproject.toml's [tool.pytest.ini_options]; later -W wins
_WARNINGS = ["-W", "error", "-W", "ignore:'mkldnn' is no longer used:UserWarning"]


def _doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [f for f in files if f.is_file()]


def _without_comments(code: str) -> str:
    """``code`` with its comments blanked (a comment may spell another library's call)."""
    try:
        comments = [t for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return code
    lines = code.splitlines(keepends=True)
    for t in comments:
        row, col = t.start
        line = lines[row - 1]
        lines[row - 1] = line[:col] + line[col + len(t.string) :]
    return "".join(lines)


def _needs(code: str) -> set[str]:
    """The optional backends a piece of code imports or names (outside comments)."""
    return {name for pair in _IMPORT.findall(_without_comments(code)) for name in pair} & _OPTIONAL


def _names(code: str) -> tuple[set[str], set[str], set[str]]:
    """The names a block binds, of those the ones it imports, and the names it reads
    (anywhere in it: an over-estimate)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set(), set(), set()
    bound: set[str] = set()
    imported: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):  # a parameter of a def or lambda
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update((a.asname or a.name).split(".")[0] for a in node.names)
    return bound | imported, imported, read


def python_blocks(text: str, missing: frozenset[str] = frozenset()) -> tuple[str, int, list[str]]:
    """The file's ```python blocks as one script with the Markdown line numbers.

    Lines outside python blocks become empty lines; a block indented under a list
    item is dedented by its fence's indentation. A block that imports or names a
    module of ``missing`` is blanked too, and so is every later block that reads a
    name such a block binds; the page's other blocks still run.
    Returns the script, the number of blocks kept, and a note per blanked block.
    """
    out: list[str] = []
    kept = 0
    notes: list[str] = []
    unbound: set[str] = set()  # names whose last binding was in a blanked block
    available: set[str] = set()  # names bound by kept blocks
    fence: tuple[str, str, int] | None = None  # (indent, lang, line number) of the open fence
    block: list[str] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None:
            if m is not None:
                fence = (m["indent"], m["lang"], lineno)
                block = []
            out.append("")
        elif m is not None and m["lang"] == "" and m["indent"] == fence[0]:
            if fence[1] == "python":
                code = "\n".join(block)
                need = sorted(_needs(code) & missing)
                bound, imported, read = _names(code)
                stale = sorted((read - bound) & unbound)
                if need or stale:
                    why = f"needs {', '.join(need)}" if need else f"reads {', '.join(stale)} of a blanked block"
                    notes.append(f"line {fence[2]}: {why}")
                    block = [""] * len(block)
                    # a module imported again is still there; anything else it binds is not
                    unbound |= bound - (imported & available)
                else:
                    kept += 1
                    unbound -= bound
                    available |= bound
                out.extend(block)
            else:
                out.extend([""] * len(block))
            fence = None
            out.append("")
        elif fence[1] == "python":
            indent = fence[0]
            block.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
        else:
            block.append("")
    if fence is not None:
        msg = f"unclosed ``` fence (opened as {fence[1] or 'plain'!r} on line {fence[2]})"
        raise ValueError(msg)
    return "\n".join(out) + "\n", kept, notes


def test_python_blocks_parser() -> None:
    text = "# t\n\n```python\nx = 1\n```\n\n1. item\n\n   ```python\n   y = x + 1\n   ```\n```bash\nls\n```\n"
    script, n, notes = python_blocks(text)
    assert n == 2 and notes == []
    lines = script.splitlines()
    assert lines[3] == "x = 1" and lines[9] == "y = x + 1" and lines[13] == ""
    ns: dict[str, object] = {}
    exec(compile(script, "t.md", "exec"), ns)
    assert ns["y"] == 2


def test_python_blocks_blank_a_block_that_needs_a_missing_backend() -> None:
    text = (
        "```python\nx = 1\n```\n\n```python\nimport torch as tt\nm = tt.ones(2)\n```\n"
        "```python\nwith d('jax'):\n    y = 2\n```\n```python\nz = m * 2\n```\n```python\nw = x + 1\n```\n"
    )
    script, n, notes = python_blocks(text, frozenset({"torch", "jax"}))
    assert notes == ["line 5: needs torch", "line 9: needs jax", "line 13: reads m of a blanked block"]
    assert n == 2
    lines = script.splitlines()
    assert lines[1] == "x = 1" and lines[16] == "w = x + 1" and len(lines) == len(text.splitlines())
    assert "torch" not in script and "jax" not in script and "m * 2" not in script
    assert python_blocks(text)[1] == 5
    # a comment may name another library without needing it
    assert _needs("x = 1  # on a GPU: default_device('cupy')\nimport torch\n") == {"torch"}


DOC_FILES = _doc_files()


@pytest.mark.skipif(not DOC_FILES, reason="README.md and docs/ are not next to the tests (not a source checkout)")
@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_doc_examples_run(path: Path, tmp_path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    missing = frozenset(name for name in _OPTIONAL if importlib.util.find_spec(name) is None)
    script, n, notes = python_blocks(text, missing)
    if n == 0:
        why = f"every python block is left out ({'; '.join(notes)}: not installed)" if notes else "no python blocks"
        pytest.skip(f"{path.name}: {why}")
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
        left_out = f" (left out, not installed: {'; '.join(notes)})" if notes else ""
        pytest.fail(f"a python block of {rel} failed (line numbers are {rel}'s){left_out}:\n{proc.stderr}{proc.stdout}")


def _gen_graph() -> Any:
    return load_script("docs/gen_graph.py")


@pytest.mark.skipif(not (ROOT / "docs" / "gen_graph.py").is_file(), reason="docs/ is not next to the tests (not a source checkout)")
def test_graph_picture_is_current() -> None:
    """docs/assets/mlp-graph.dot is what the tape page's block makes today, and the SVG shows it."""
    gen = _gen_graph()
    dot = gen.make_dot()
    assert gen.DOT.read_text(encoding="utf-8") == dot, (
        "docs/assets/mlp-graph.dot is out of date with docs/concepts/tape.md and xpgrad.viz; "
        "regenerate it (and the SVG): python docs/gen_graph.py --write"
    )
    svg = gen.SVG.read_text(encoding="utf-8")
    # the SVG was drawn from this DOT: same node ids, each with its label's first line
    ids = re.findall(r"^  (\w+) \[label=\"([^\"\\]*)", dot, re.MULTILINE)
    assert ids and svg.count('class="node"') == len(ids)
    for node_id, first_line in ids:
        assert f"<title>{node_id}</title>" in svg and f">{first_line}</text>" in svg


# ---------------------------------------------------------------- the API reference covers every public name
_DIRECTIVE = re.compile(r"^::: (?P<ident>[\w.]+)\n(?P<opts>(?:[ \t]+.*\n|\n(?=[ \t]))*)", re.MULTILINE)
_CONSTANTS = ("e", "inf", "nan", "pi", "newaxis")


def _resolve(ident: str) -> Any:
    parts = ident.split(".")
    obj: Any = importlib.import_module(parts[0])
    for k, part in enumerate(parts[1:], 1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: k + 1]))
    return obj


def _exported(mod: Any) -> list[str]:
    """The public names a module directive renders: its ``__all__``, or what it defines."""
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n, v in vars(mod).items() if getattr(v, "__module__", None) == mod.__name__]
    return [n for n in names if not n.startswith("_")]


def _documented(api_md: str) -> set[int]:
    """ids of the objects the ``:::`` directives of api.md render (modules: their exports; not submodules)."""
    seen: set[int] = set()
    for m in _DIRECTIVE.finditer(api_md):
        obj = _resolve(m["ident"])
        members = re.findall(r"^\s+- (\w+)\s*$", m["opts"], re.MULTILINE)
        if members:
            seen.update(id(getattr(obj, n)) for n in members)
        elif isinstance(obj, types.ModuleType):
            seen.update(id(v) for n in _exported(obj) if not isinstance(v := getattr(obj, n), types.ModuleType))
        else:
            seen.add(id(obj))
    return seen


def _public_objects() -> dict[str, Any]:
    """Every public function and class of xpgrad, by the name a user reaches it under."""
    import xpgrad

    out: dict[str, Any] = {}
    todo: list[tuple[str, Any]] = [("xpgrad", xpgrad)]
    done: set[str] = set()
    while todo:
        prefix, mod = todo.pop()
        if mod.__name__ in done:
            continue
        done.add(mod.__name__)
        names = _exported(mod) if prefix != "xpgrad" else [n for n in dir(mod) if not n.startswith("_")]
        for n in names:
            v = getattr(mod, n)
            if isinstance(v, types.ModuleType):
                if v.__name__.startswith("xpgrad.") and v.__name__ != "xpgrad.ops":
                    todo.append((f"{prefix}.{n}", v))
            elif callable(v) and not isinstance(v, xpgrad.DType) and getattr(v, "__module__", "").startswith("xpgrad"):
                out.setdefault(f"{prefix}.{n}", v)
    return out


@pytest.mark.skipif(not (ROOT / "docs" / "api.md").is_file(), reason="docs/ is not next to the tests (not a source checkout)")
def test_api_reference_covers_every_public_name() -> None:
    import xpgrad

    api_md = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    seen = _documented(api_md)
    missing = sorted(name for name, obj in _public_objects().items() if id(obj) not in seen)
    assert not missing, f"docs/api.md renders no entry for: {', '.join(missing)}"
    # the dtypes and the standard's constants have no docstrings: the page names them
    dtypes = [n for n in dir(xpgrad) if isinstance(getattr(xpgrad, n), xpgrad.DType)]
    assert len(dtypes) == 13
    unnamed = [n for n in (*dtypes, *_CONSTANTS) if f"`xpgrad.{n}`" not in api_md]
    assert not unnamed, f"docs/api.md does not name: {', '.join(unnamed)}"
