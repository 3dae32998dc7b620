"""Regenerate docs/assets/mlp-graph.dot and .svg, the graph picture of docs/concepts/tape.md.

The picture is drawn from the page's own code: the ```python block of the tape page
that contains ``MARKER`` is executed, and its variable ``dot`` (the output of
``xpgrad.viz.to_dot``) is written next to the SVG that Graphviz's ``dot`` program
makes from it. tests/test_docs.py fails when the stored DOT is not what the page's
block makes today.

    python docs/gen_graph.py          # print the DOT text
    python docs/gen_graph.py --write  # rewrite the .dot and (with Graphviz installed) the .svg
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "concepts" / "tape.md"
DOT = ROOT / "docs" / "assets" / "mlp-graph.dot"
SVG = ROOT / "docs" / "assets" / "mlp-graph.svg"
MARKER = "# the MLP graph"
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def page_block() -> str:
    """The tape page's python block that builds the MLP graph."""
    blocks = [b for b in _BLOCK.findall(PAGE.read_text(encoding="utf-8")) if MARKER in b]
    if len(blocks) != 1:
        msg = f"gen_graph: expected one python block containing {MARKER!r} in {PAGE}, found {len(blocks)}"
        raise ValueError(msg)
    return blocks[0]


def make_dot() -> str:
    """The DOT text the page's block makes."""
    ns: dict[str, object] = {"__name__": "gen_graph"}
    exec(compile(page_block(), str(PAGE), "exec"), ns)
    dot = ns["dot"]
    if not isinstance(dot, str):
        msg = f"gen_graph: the block's `dot` is a {type(dot).__name__}, not DOT text"
        raise TypeError(msg)
    return dot


def main(argv: list[str]) -> int:
    dot = make_dot()
    if "--write" not in argv:
        sys.stdout.write(dot)
        return 0
    DOT.write_text(dot, encoding="utf-8")
    exe = shutil.which("dot")
    if exe is None:
        sys.stderr.write(f"wrote {DOT}; the Graphviz 'dot' program is not installed, so {SVG} was not redrawn\n")
        return 1
    svg = subprocess.run([exe, "-Tsvg"], input=dot.encode(), capture_output=True, check=True).stdout
    SVG.write_bytes(svg)
    sys.stderr.write(f"wrote {DOT} and {SVG}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
