"""Every function of the standard has array-api-strict's signature: parameter names,
kinds (positional-only ``/``, keyword-only ``*``) and defaults.

array-api-strict writes some defaults as its private ``Undef`` sentinel where the
standard says ``None``; those compare as None. ``EXTENSIONS`` lists xpgrad's own
trailing keyword-only parameters (with defaults, so every standard call works).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import xpgrad as xg
from xpgrad._spec import CONSTANTS, FFT, FUNCTIONS, LINALG

strict = pytest.importorskip("array_api_strict")

#: function -> xpgrad-only keyword-only parameters
EXTENSIONS = {"asarray": {"requires_grad"}}


def _params(f: Any, drop: set[str] = frozenset()) -> list[tuple[str, Any, Any]]:  # type: ignore[assignment]
    out = []
    for p in inspect.signature(f).parameters.values():
        if p.name in drop:
            continue
        default = p.default
        if type(default).__name__ == "Undef":  # array-api-strict's "not given" sentinel
            default = None
        out.append((p.name, p.kind, default))
    return out


def _cases() -> list[Any]:
    cases = [pytest.param(xg, strict, n, id=n) for n in FUNCTIONS]
    cases += [pytest.param(xg.linalg, strict.linalg, n, id=f"linalg.{n}") for n in LINALG]
    cases += [pytest.param(xg.fft, strict.fft, n, id=f"fft.{n}") for n in FFT]
    return cases


@pytest.mark.parametrize(("ours", "ref", "name"), _cases())
def test_signature_equals_array_api_strict(ours: Any, ref: Any, name: str) -> None:
    assert hasattr(ours, name), f"xpgrad lacks {name}"
    got = _params(getattr(ours, name), EXTENSIONS.get(name, set()) if ours is xg else set())
    want = _params(getattr(ref, name))
    assert got == want, f"{name}: {inspect.signature(getattr(ours, name))} != {inspect.signature(getattr(ref, name))}"


def test_extensions_are_trailing_keyword_only_with_defaults() -> None:
    for name, extra in EXTENSIONS.items():
        params = list(inspect.signature(getattr(xg, name)).parameters.values())
        tail = params[-len(extra):]
        assert {p.name for p in tail} == extra
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty for p in tail)


def test_namespace_names() -> None:
    for c in CONSTANTS:
        assert hasattr(xg, c), c
    assert xg.__array_api_version__ == "2025.12"
    info = xg.__array_namespace_info__()
    for m in ("capabilities", "default_device", "default_dtypes", "devices", "dtypes"):
        assert callable(getattr(info, m)), m


def test_array_namespace_of_a_tensor_is_xpgrad() -> None:
    import array_api_compat

    t = xg.asarray([1.0])
    xp = array_api_compat.array_namespace(t)
    assert xp is xg.array_namespace(t) and xp.__name__ == "xpgrad"  # bound to t's library and device
    assert xp.__array_api_version__ == xg.__array_api_version__
    for name in ("asarray", "zeros", "linspace", "from_dlpack"):  # the bound functions keep the standard's signature
        assert inspect.signature(getattr(xp, name)) == inspect.signature(getattr(xg, name)), name
