"""docs/coverage.md, the table of every function of the standard, is up to date."""

from __future__ import annotations

from pathlib import Path

from ._util import load_script

_ROOT = Path(__file__).resolve().parents[1]


def _gen():  # type: ignore[no-untyped-def]
    return load_script("docs/gen_coverage.py")


def test_coverage_page_is_up_to_date() -> None:
    """docs/coverage.md is what docs/gen_coverage.py makes from the registries and tests/cases/*.py."""
    page = (_ROOT / "docs" / "coverage.md").read_text(encoding="utf-8")
    assert _gen().render() == page, (
        "docs/coverage.md is out of date with the rules, declarations or tests/cases/*.py; "
        "regenerate it: python docs/gen_coverage.py --write")


def test_coverage_page_lists_every_function() -> None:
    """Every name of the standard has a row, and none is missing a rule or a declaration."""
    from xpgrad._spec import CHAPTERS, FFT, LINALG

    rows = [r for r in _gen().rows() if r["standard"]]
    assert len(rows) == sum(map(len, CHAPTERS.values())) + len(LINALG) + len(FFT)
    missing = [r["name"] for r in rows if r["kind"] == "missing"]
    assert not missing, f"functions of the standard with no rule, composite or declaration: {missing}"


def test_vmap_column_follows_the_batching_registries() -> None:
    """The vmap column is read from ``_batched.RULES``/``UNBATCHABLE`` (no hand edits): a
    primitive with a rule says "rule", a refused one "error (data-dependent)", a composite
    "via parts"; a primitive with neither says "—"."""
    from xpgrad.autograd._batched import RULES, UNBATCHABLE
    from xpgrad.autograd._core import COMPOSITES, PRIMITIVES

    rows = _gen().rows()
    for r in rows:
        name = r["name"].split(".", 1)[1] if r["chapter"] in ("linalg", "fft") else r["name"]
        if name in PRIMITIVES:
            want = "rule" if name in RULES else "error (data-dependent)" if name in UNBATCHABLE else "—"
        else:
            want = "via parts" if name in COMPOSITES else "—"
        assert r["vmap"] == want, (r["name"], r["vmap"], want)
    by_name = {r["name"]: r["vmap"] for r in rows}
    assert by_name["add"] == by_name["matmul"] == "rule" and by_name["std"] == "via parts"
