"""Regenerate docs/coverage.md, the table of every function of the array API standard.

For each name of src/xpgrad/_spec.py (the 2025.12 chapters, the ``linalg`` and the
``fft`` extensions) the table says how xpgrad differentiates it, read from the
registries of ``xpgrad.autograd._core`` (``PRIMITIVES``, ``COMPOSITES``, ``DECLARED``),
how ``xg.vmap`` batches it, read from ``xpgrad.autograd._batched`` (``RULES``,
``UNBATCHABLE``), and on which backends its gradients are verified, read from the ``OpCase`` tables of
tests/cases/*.py: the backends of the test matrix that a case covering the function
runs on (not listed in its ``xfail``). tests/test_coverage_page.py fails when the page
is out of date.

    python docs/gen_coverage.py          # print the page
    python docs/gen_coverage.py --write  # rewrite docs/coverage.md
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "coverage.md"
#: the backends every OpCase runs on in CI (cupy needs a GPU: not part of the matrix)
BACKENDS = ["numpy", "array_api_strict", "torch", "jax", "dask"]
NONDIFF = "a `nondiff` primitive: its outputs carry no gradient"
VMAP_RULE = "rule"
VMAP_ERROR = "error (data-dependent)"
VMAP_PARTS = "via parts"


def _cases() -> list[Any]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests import cases

    return cases.all_cases()


def _names() -> list[tuple[str, str, str, bool]]:
    """(shown name, chapter, primitive name, of the standard) for every function of the
    standard, then every entry of the operation registry beyond it (``special.erf``)."""
    from xpgrad._spec import CHAPTERS, FFT, LINALG
    from xpgrad.ops._registry import REGISTRY

    rows = [(n, chapter, n, True) for chapter, names in CHAPTERS.items() for n in names]
    rows += [(f"linalg.{n}", "linalg", n, True) for n in LINALG]
    rows += [(f"fft.{n}", "fft", n, True) for n in FFT]
    # (an entry of the standard is its row above, under the standard's name: inv is linalg.inv's row;
    # an alias is its entry's row; a query, creation or composite, without a primitive, is found by its name)
    rows += [(op.name, op.chapter, op.name if op.prim is None else op.prim.name, False) for op in REGISTRY.values()
             if op.kind != "alias" and op.standard_name is None]
    return rows


def rows() -> list[dict[str, Any]]:
    """One row per function of the standard, then per registry entry beyond it
    (``standard`` False); ``kind`` is the class the summary counts."""
    import xpgrad  # noqa: F401 - imports the batching rules
    from xpgrad.autograd._batched import RULES, UNBATCHABLE
    from xpgrad.autograd._core import COMPOSITES, DECLARED, PRIMITIVES

    covering: dict[str, list[Any]] = {}
    for c in _cases():
        for n in c.covered():
            covering.setdefault(n, []).append(c)
    out = []
    for shown, chapter, name, standard in _names():
        p = PRIMITIVES.get(name)
        rev = fwd = "—"
        if p is not None and p.nondiff:
            kind, status = "declared", f"non-differentiable: {NONDIFF}"
        elif p is not None and p.zero_grad:
            kind, status = "zero", "zero gradient"
        elif p is not None:
            kind, status = "diff", "differentiable"
            rev = "yes" if any(r is not None for r in p.vjps) or p.vjp_rest is not None else "no"
            fwd = "yes" if any(r is not None for r in p.jvps) or p.jvp_rest is not None else "no"
        elif name in COMPOSITES:
            kind, status = "diff", f"composite of {COMPOSITES[name]}"
            rev = fwd = "by its parts"
        elif name in DECLARED:
            kind, status = "declared", f"non-differentiable: {DECLARED[name]}"
        else:
            kind, status = "missing", "**missing**"
        vmap = _vmap_status(name, p is not None, RULES, UNBATCHABLE, COMPOSITES)
        runs = {b for c in covering.get(name, ()) for b in BACKENDS if b not in c.xfail}
        order2 = any(c.order2 and any(b not in c.xfail for b in BACKENDS) for c in covering.get(name, ()))
        out.append({
            "name": shown, "chapter": chapter, "standard": standard, "kind": kind, "status": status, "reverse": rev,
            "forward": fwd, "vmap": vmap, "order2": ("yes" if order2 else "no") if kind == "diff" else "—",
            "verified": ", ".join(b for b in BACKENDS if b in runs) or "—",
        })
    return out


def _vmap_status(name: str, is_primitive: bool, rules: Any, unbatchable: Any, composites: Any) -> str:
    """How ``xg.vmap`` handles the function: its primitive's batching rule, a refusal (the
    output shape depends on the data), or, for a composite, the rules of the primitives it
    calls."""
    if is_primitive:
        if name in rules:
            return VMAP_RULE
        if name in unbatchable:
            return VMAP_ERROR
        return "—"
    if name in composites:
        return VMAP_PARTS
    return "—"


def summary(table: list[dict[str, Any]]) -> str:
    table = [r for r in table if r["standard"]]
    count = {k: sum(r["kind"] == k for r in table) for k in ("diff", "zero", "declared", "missing")}
    vm = {k: sum(r["vmap"] == k for r in table) for k in (VMAP_RULE, VMAP_ERROR)}
    return (f"**{len(table)} functions** of the standard: {count['diff']} differentiable, "
            f"{count['zero']} with a zero gradient, {count['declared']} non-differentiable "
            f"(declared), {count['missing']} missing. Under `xg.vmap`: {vm[VMAP_RULE]} with a "
            f"batching rule, {vm[VMAP_ERROR]} refused (data-dependent output shape).")


def render() -> str:
    from xpgrad._spec import API_VERSION

    table = rows()
    lines = [
        "# Function coverage",
        "",
        "<!-- generated by docs/gen_coverage.py: do not edit; run `python docs/gen_coverage.py --write` -->",
        "",
        f"Every function of the {API_VERSION} array API standard (its chapters and the `linalg`",
        "and `fft` extensions), how xpgrad differentiates it, and the backends whose test runs",
        "check its gradients against finite differences (a function is verified on a backend",
        "when one of its test cases in `tests/cases/` runs there rather than being an expected",
        "failure; `cupy` runs on GPU machines only and is not listed). *Second order*: a case",
        "also checks the gradient of the gradient. *Zero gradient*: the output is floating but",
        "its derivative is zero almost everywhere (`floor`, `sign`), so it is a constant.",
        "`linalg.matmul`, `linalg.matrix_transpose`, `linalg.tensordot` and `linalg.vecdot` are",
        "the main namespace's functions.",
        "",
        "*vmap*: how [`xg.vmap`](concepts/vmap.md) handles the function on a batched value.",
        "*rule*: it has a batching rule, which runs it once on the whole batch. *error",
        "(data-dependent)*: its output shape would depend on the values (`nonzero`,",
        "`unique_*`), so it raises a clear error inside vmap. *via parts*: a composite,",
        "batched by the rules of the functions it is made of. *—*: no batching rule yet (it",
        "raises naming the function), or not a primitive: the creation functions and dtype",
        "queries read only a shape or a dtype, which a batched value has (its example's).",
        "",
        summary(table),
        "",
        "| function | chapter | status | reverse rule | forward rule | second order | vmap | verified on |",
        "|---|---|---|---|---|---|---|---|",
    ]
    head = lines[-2:]
    lines += _table([r for r in table if r["standard"]])
    beyond = [r for r in table if not r["standard"]]
    if beyond:
        lines += ["", "## Beyond the standard", "",
                  "The functions of `xg.special` (SciPy's names), which the standard does not have, by",
                  "their path in the namespace (`special.erf` is `xg.special.erf`); the pointwise ones",
                  "are entries of the [operation registry](concepts/operations.md).", "", *head, *_table(beyond)]
    return "\n".join(lines) + "\n"


def _table(table: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in table:
        status = r["status"].replace("|", "\\|")
        out.append(f"| `{r['name']}` | {r['chapter']} | {status} | {r['reverse']} | {r['forward']} "
                   f"| {r['order2']} | {r['vmap']} | {r['verified']} |")
    return out


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        PAGE.write_text(render(), encoding="utf-8")
    else:
        sys.stdout.write(render())
