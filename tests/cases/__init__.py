"""Per-chapter OpCase tables (see tests/_cases.py): the cases written by hand. The
registry's entries bring their own (``tests._cases.registry_cases``); :func:`all_cases`
is both."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any


def all_cases() -> list[Any]:
    """The registry's derived cases, then every chapter's hand-written ones."""
    from tests._cases import registry_cases

    out = registry_cases()
    for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        out.extend(importlib.import_module(f"{__name__}.{m.name}").CASES)
    return out
