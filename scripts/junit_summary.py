"""Summarize a pytest JUnit XML file per backend: ``python scripts/junit_summary.py FILE``.

Prints a Markdown table (backend, passed, failed, errors, xfailed, skipped) and then every
failure and error, one line each (test id and the first line of its message). The backend
of a test is the fixture name among its parameters (``test_x[cupy-sin]`` is ``cupy``); tests
with none count as ``(none)``. Used by scripts/gpu_check.sh, and for docs/backends.md's
table of the last GPU run. Exit status 1 when anything failed or errored.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict

BACKENDS = ("torch_cuda", "strict_device1", "array_api_strict", "cupy", "torch", "jax", "dask", "numpy")


def backend_of(name: str) -> str:
    """The backend fixture parameter in a test id (``test_x[cupy-sin]``), or "(none)"."""
    m = re.search(r"\[(.*)\]$", name)
    if m:
        parts = re.split(r"[-,]", m.group(1))
        for b in BACKENDS:
            if b in parts:
                return b
    return "(none)"


def outcome(case: ET.Element) -> tuple[str, str]:
    """("passed" | "failed" | "error" | "xfailed" | "skipped", the message's first line)."""
    for tag in ("failure", "error"):
        el = case.find(tag)
        if el is not None:
            msg = (el.get("message") or el.text or "").strip().splitlines()
            return ("failed" if tag == "failure" else "error"), (msg[0] if msg else "")
    el = case.find("skipped")
    if el is not None:
        kind = "xfailed" if (el.get("type") or "") == "pytest.xfail" else "skipped"
        return kind, (el.get("message") or "").strip()
    return "passed", ""


def summarize(path: str) -> tuple[str, list[str]]:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    problems = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        kind, msg = outcome(case)
        counts[backend_of(name)][kind] += 1
        if kind in ("failed", "error"):
            problems.append(f"{kind.upper()} {case.get('classname', '')}::{name}: {msg[:300]}")
    cols = ("passed", "failed", "error", "xfailed", "skipped")
    lines = ["| backend | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for b in sorted(counts):
        lines.append(f"| {b} | " + " | ".join(str(counts[b][c]) for c in cols) + " |")
    return "\n".join(lines), problems


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python scripts/junit_summary.py FILE.xml\n")
        return 2
    table, problems = summarize(argv[0])
    sys.stdout.write(table + "\n\n")
    sys.stdout.write("\n".join(problems) + ("\n" if problems else "no failures\n"))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
