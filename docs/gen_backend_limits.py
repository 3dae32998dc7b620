"""Regenerate the table of backend limitations in docs/backends.md from the tests.

Every ``OpCase`` in tests/cases/*.py that a backend cannot run carries
``xfail={"backend": "reason"}`` (a strict xfail); this script collects those
reasons into the table between the ``xfail-table`` markers of docs/backends.md.
tests/test_backends.py::test_docs_list_every_xfail_reason fails when the page is
out of date.

    python docs/gen_backend_limits.py          # print the table
    python docs/gen_backend_limits.py --write  # rewrite it in docs/backends.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "backends.md"
START, END = "<!-- xfail-table:start -->", "<!-- xfail-table:end -->"
ORDER = ["numpy", "array_api_strict", "torch", "jax", "dask", "cupy"]


def xfails() -> list[tuple[str, str, str, str]]:
    """(backend, case, functions covered, reason) for every xfail of every OpCase."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests import cases

    rows = []
    for c in cases.all_cases():
        for backend, why in c.xfail.items():
            rows.append((backend, c.name, ", ".join(c.covered()), " ".join(why.split())))
    rank = {b: i for i, b in enumerate(ORDER)}
    return sorted(rows, key=lambda r: (rank.get(r[0], len(ORDER)), r[0], r[1]))


def table() -> str:
    """One row per backend and reason, listing the test cases (and functions) it covers."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for backend, case, funcs, why in xfails():
        groups.setdefault((backend, why), []).append((case, funcs))
    lines = ["| backend | limitation (the xfail reason) | test cases (functions) |", "|---|---|---|"]
    for (backend, why), items in groups.items():
        funcs = sorted({f for _, fs in items for f in fs.split(", ")})
        cases = ", ".join(f"`{c}`" for c, _ in items)
        why = re.sub(r"(__\w+__)", r"`\1`", why.replace("|", "\\|"))  # no bold from dunders
        lines.append(f"| {backend} | {why} | {cases} ({', '.join(funcs)}) |")
    return "\n".join(lines)


def rewrite(text: str) -> str:
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{table()}\n{END}{tail}"


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        PAGE.write_text(rewrite(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        sys.stdout.write(table() + "\n")
