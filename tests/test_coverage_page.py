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

    rows = _gen().rows()
    assert len(rows) == sum(map(len, CHAPTERS.values())) + len(LINALG) + len(FFT)
    missing = [r["name"] for r in rows if r["kind"] == "missing"]
    assert not missing, f"functions of the standard with no rule, composite or declaration: {missing}"
