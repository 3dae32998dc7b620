"""Every ```python block of README.md and docs/**/*.md runs, and prints what the page shows.

Each Markdown file's blocks run in sequence, in one namespace, in a fresh Python
process (a doc page may define primitives or change the process-default policy
without leaking into the other tests). Lines outside the blocks are blanked, so a
traceback's line numbers are the Markdown file's own. Warnings are errors, as in
the test suite. A block that imports (or names, as in `default_device("torch")`) an
optional backend which is not installed is left out, with every later block that
reads a name it defines; a page with no block left is skipped with the reason.

A ```text block that follows a ```python block with nothing but blank lines between
them is that block's output: what the block prints must be the text, compared line by
line with trailing whitespace stripped, where a ``...`` matches any text (as doctest's
ELLIPSIS: part of a line, or whole lines). Output that cannot be checked (timings,
addresses, another machine's numbers) is marked with a line
``<!-- output: not checked (REASON) -->`` between the two blocks.
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
from typing import Any, NamedTuple

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


# ---------------------------------------------------------------- the printed outputs a page shows
_UNCHECKED = re.compile(r"^<!-- output: not checked \((?P<why>[^)]+)\) -->$")
_SENTINEL = "\x1expgrad-doc-block "  # printed before and after a block whose output the page shows


class Output(NamedTuple):
    """The output a page shows for the python block that opens on line ``block``."""

    block: int  # line of the python block's opening fence
    end: int  # line of its closing fence
    line: int  # line of the ```text block's opening fence
    text: str
    unchecked: str | None  # the reason, when the page marks it not checked


def shown_outputs(text: str) -> list[Output]:
    """The ```text blocks of a page that show a ```python block's output (see the module docstring)."""
    lines = text.splitlines()
    out: list[Output] = []
    fence: tuple[str, str, int] | None = None
    last_python: tuple[int, int] | None = None  # (open, close) of a python block with only blank lines since
    why: str | None = None
    for lineno, line in enumerate(lines, 1):
        m = _FENCE.match(line)
        if fence is None:
            if m is not None:
                fence = (m["indent"], m["lang"], lineno)
            elif (u := _UNCHECKED.match(line.strip())) is not None and last_python is not None:
                why = u["why"]
            elif line.strip():
                last_python, why = None, None
            continue
        if m is None or m["lang"] != "" or m["indent"] != fence[0]:
            continue
        indent, lang, start = fence
        fence = None
        if lang == "text" and last_python is not None:
            body = [ln[len(indent) :] if ln.startswith(indent) else ln.lstrip() for ln in lines[start : lineno - 1]]
            out.append(Output(last_python[0], last_python[1], start, "\n".join(body), why))
        last_python = (start, lineno) if lang == "python" else None
        why = None
    return out


def _normalized(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip("\n")


def output_matches(shown: str, printed: str) -> bool:
    """Whether ``printed`` is the ``shown`` output: trailing whitespace aside, with ``...`` matching any text."""
    shown, printed = _normalized(shown), _normalized(printed)
    if "..." not in shown:
        return shown == printed
    pattern = ".*?".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, printed, re.DOTALL) is not None


def with_sentinels(script: str, outputs: list[Output], blanked: set[int]) -> str:
    """``script`` printing a sentinel before and after each block whose output is checked (on its fence lines)."""
    lines = script.splitlines()
    for o in outputs:
        if o.unchecked is None and o.block not in blanked:
            lines[o.block - 1] = f"print({_SENTINEL + str(o.block)!r}, flush=True)"
            lines[o.end - 1] = f"print({_SENTINEL + str(o.block)!r}, flush=True)"
    return "\n".join(lines) + "\n"


def output_problems(outputs: list[Output], stdout: str, blanked: set[int]) -> list[str]:
    """A line per checked output that is not what its block printed (``stdout`` has the sentinels)."""
    parts = stdout.split(_SENTINEL)
    printed: dict[int, str] = {}
    # the sentinels come in pairs: "<line>\n<what the block printed>", then "<line>\n<what follows>"
    for k in range(1, len(parts) - 1, 2):
        head, _, body = parts[k].partition("\n")
        printed[int(head)] = body
    problems = []
    for o in outputs:
        if o.unchecked is not None or o.block in blanked:
            continue
        got = printed.get(o.block)
        if got is None:
            problems.append(f"line {o.line}: the block of line {o.block} did not run to its end")
        elif not output_matches(o.text, got):
            problems.append(f"line {o.line}: the block of line {o.block} prints\n{got.rstrip()}\nnot what the page shows:\n{o.text}")
    return problems


def run_page(
    text: str, rel: str, tmp_path: Path, missing: frozenset[str] = frozenset()
) -> tuple[subprocess.CompletedProcess[str], list[str], int, list[str]]:
    """Run a page's blocks in a fresh process: the process, the output problems, the blocks kept, the notes."""
    script, n, notes = python_blocks(text, missing)
    blanked = {int(note.split()[1].rstrip(":")) for note in notes}
    outputs = shown_outputs(text)
    runner = (
        "import pathlib, sys\n"
        "src = pathlib.Path(sys.argv[1]).read_text(encoding='utf-8')\n"
        f"exec(compile(src, {rel!r}, 'exec'), {{'__name__': '__main__'}})\n"
    )
    code_file = tmp_path / "blocks.py"
    code_file.write_text(with_sentinels(script, outputs, blanked), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, *_WARNINGS, "-c", runner, str(code_file)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    problems = output_problems(outputs, proc.stdout, blanked) if proc.returncode == 0 else []
    return proc, problems, n, notes


_PAGE = (
    "# t\n\n```python\nx = 6 * 7\nprint(x)\n```\n\n```text\n{shown}\n```\n\n"
    "```python\nimport time\nprint(time.perf_counter())\n```\n\n"
    "<!-- output: not checked (a timing) -->\n\n```text\n0.25\n```\n\n"
    "```python\nprint(x + 1, 'and', [x] * 20)\n```\n\n```text\n{shown2}\n```\n\n"
    "Prose between: this is no output.\n\n```text\nnot an output\n```\n"
)


def test_shown_outputs_and_matching() -> None:
    outputs = shown_outputs(_PAGE.format(shown="42", shown2="43 and ..."))
    assert [(o.block, o.line, o.text, o.unchecked) for o in outputs] == [
        (3, 8, "42", None),
        (12, 19, "0.25", "a timing"),
        (23, 27, "43 and ...", None),
    ]
    assert output_matches("a\n...\nd  ", "a\nb\nc\nd\n") and output_matches("x = ...!", "x = 0.125!")
    assert not output_matches("a\n...\nd", "a\nb\nc") and not output_matches("2 0.0125", "2 0.00625")


def test_a_stale_output_fails(tmp_path: Path) -> None:
    proc, problems, n, _ = run_page(_PAGE.format(shown="42", shown2="43 and [42, ...]"), "t.md", tmp_path)
    assert proc.returncode == 0 and n == 3 and problems == []
    proc, problems, _, _ = run_page(_PAGE.format(shown="41", shown2="43 and [42, 42]"), "t.md", tmp_path)
    assert proc.returncode == 0 and len(problems) == 2
    assert problems[0].startswith("line 8: the block of line 3 prints\n42\nnot what") and problems[1].startswith("line 27:")


DOC_FILES = _doc_files()


@pytest.mark.skipif(not DOC_FILES, reason="README.md and docs/ are not next to the tests (not a source checkout)")
@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_doc_examples_run(path: Path, tmp_path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    missing = frozenset(name for name in _OPTIONAL if importlib.util.find_spec(name) is None)
    rel = path.relative_to(ROOT).as_posix()
    if python_blocks(text, missing)[1] == 0:
        notes = python_blocks(text, missing)[2]
        why = f"every python block is left out ({'; '.join(notes)}: not installed)" if notes else "no python blocks"
        pytest.skip(f"{path.name}: {why}")
    proc, problems, _, notes = run_page(text, rel, tmp_path, missing)
    left_out = f" (left out, not installed: {'; '.join(notes)})" if notes else ""
    if proc.returncode != 0:
        pytest.fail(f"a python block of {rel} failed (line numbers are {rel}'s){left_out}:\n{proc.stderr}{proc.stdout}")
    assert not problems, f"{rel} shows outputs its blocks do not print{left_out}:\n" + "\n\n".join(problems)


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
    assert len(dtypes) == 15  # the standard's 13, float16 and bfloat16
    unnamed = [n for n in (*dtypes, *_CONSTANTS) if f"`xpgrad.{n}`" not in api_md]
    assert not unnamed, f"docs/api.md does not name: {', '.join(unnamed)}"


def _private(ident: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in ident.split("."))


@pytest.mark.skipif(not (ROOT / "docs" / "api.md").is_file(), reason="docs/ is not next to the tests (not a source checkout)")
def test_api_reference_names_public_paths() -> None:
    """The reference documents each object under the name a user imports it by: no ``xpgrad._x`` path
    where a public one reaches the same object (the anchors, and the links to them, are that path)."""
    api_md = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    public = {id(obj): name for name, obj in _public_objects().items()}
    named = [m["ident"] for m in _DIRECTIVE.finditer(api_md)] + re.findall(r"\(#(xpgrad\.[\w.]+)\)", api_md)
    wrong = [f"{ident} (public: {public[id(_resolve(ident))]})" for ident in named if _private(ident) and id(_resolve(ident)) in public]
    assert not wrong, f"docs/api.md names private paths of public objects: {', '.join(wrong)}"
    # an object documented only under a private path (xg.jit's Jitted, Program, CacheInfo were) gets a
    # public name first: its anchor, and every link to it, would be the private path
    hidden = [ident for ident in named if _private(ident) and id(_resolve(ident)) not in public]
    assert not hidden, f"docs/api.md documents objects that have no public name: {', '.join(hidden)}"
    # a module directive of a private module would render its members under the private path
    modules = [ident for ident in named if _private(ident) and isinstance(_resolve(ident), types.ModuleType)]
    assert not modules, f"docs/api.md renders private modules: {', '.join(modules)}"


_AUTOREF = re.compile(r"\]\[(xpgrad\.[\w.]+)\]")


def test_cross_references_name_public_paths() -> None:
    """A cross-reference (``[`Program`][xpgrad.Program]``) in a docstring or a page links to the
    anchor of the object's public name: an ``xpgrad._x`` path is an anchor the reference does not render."""
    import xpgrad

    files = [*sorted((ROOT / "src" / "xpgrad").rglob("*.py")), *sorted((ROOT / "docs").rglob("*.md"))]
    wrong = [f"{f.relative_to(ROOT)}: {ident}" for f in files if f.is_file()
             for ident in _AUTOREF.findall(f.read_text(encoding="utf-8")) if _private(ident)]
    assert not wrong, f"cross-references to private paths: {', '.join(wrong)}"
    f = xpgrad.jit(lambda x: x * 2.0)
    prog = f.trace(xpgrad.asarray([1.0]))
    assert type(f) is xpgrad.Jitted and type(prog) is xpgrad.Program and type(f.cache_info()) is xpgrad.CacheInfo


_SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|exc|obj|const|ref|term):`")


def test_public_docstrings_have_no_sphinx_roles() -> None:
    """No docstring of a public function, class (or member) or module has a Sphinx role:
    mkdocstrings renders ``:func:`x``` as literal text. Cross-references are ``[`x`][xpgrad.x]``
    (autorefs) or plain backticks."""
    import inspect

    found = []
    modules = {m.__name__: m for m in map(_resolve, ["xpgrad", *sorted(_public_modules())])}
    for name, obj in [*_public_objects().items(), *modules.items()]:
        docs = [inspect.getdoc(obj) or ""]
        if isinstance(obj, type):
            docs += [inspect.getdoc(v) or "" for k, v in vars(obj).items() if not k.startswith("_") or k == "__init__"]
        if any(_SPHINX_ROLE.search(d) for d in docs):
            found.append(name)
    assert not found, f"docstrings with Sphinx roles: {', '.join(sorted(found))}"


def _public_modules() -> set[str]:
    """The public modules of xpgrad (xpgrad.nn, xpgrad.random, ...), by their public names."""
    import xpgrad

    return {
        v.__name__
        for n in dir(xpgrad)
        if isinstance(v := getattr(xpgrad, n), types.ModuleType)
        and v.__name__.startswith("xpgrad.")
        and not any(p.startswith("_") for p in v.__name__.split("."))
    } | {
        f"xpgrad.{p}.{s}"
        for p in ("nn", "optim")
        for s in ("functional", "init", "utils", "lr_scheduler")
        if importlib.util.find_spec(f"xpgrad.{p}.{s}") is not None
    }
