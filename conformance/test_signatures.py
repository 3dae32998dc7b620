"""Every function of the standard has array-api-strict's signature: parameter names,
kinds (positional-only ``/``, keyword-only ``*``) and defaults. The Tensor's array
methods and the info object's functions meet the standard's stubs (``_stubs.py``) as
the official array-api-tests suite checks them, and ``devices()`` is a tuple.

array-api-strict writes some defaults as its private ``Undef`` sentinel where the
standard says ``None``; those compare as None. ``EXTENSIONS`` lists xpgrad's own
trailing keyword-only parameters (with defaults, so every standard call works).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from _stubs import ARRAY_METHODS, INFO_FUNCTIONS

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


# ---------------------------------------------------------------- array methods and the info object
# As the official array-api-tests suite checks them (``test_array_method_signature``,
# ``TestInspection.test_devices``), against the standard's stubs (``_stubs.py``): a
# parameter the standard lets be passed by keyword has the stub's name and kind; a
# keyword-only parameter of the stub is there, keyword-only or positional-or-keyword.
# Positional-only parameters may have any name (the Tensor's operators call theirs ``o``).

_VAR = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _without_self(stub: Any) -> inspect.Signature:
    sig = inspect.signature(stub)
    return sig.replace(parameters=list(sig.parameters.values())[1:])


def _spec_mismatches(f: Any, stub_sig: inspect.Signature) -> list[str]:
    """How ``f``'s signature breaks the standard's ``stub_sig``, by the official suite's rules."""
    try:
        sig = inspect.signature(f)
    except ValueError:
        return ["the signature cannot be inspected"]
    params = list(sig.parameters.values())
    stub = list(stub_sig.parameters.values())
    positional = [p for p in stub if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    out = []
    for i, sp in enumerate(positional):
        if i >= len(params):
            out.append(f"argument {sp.name!r} missing")
            continue
        p = params[i]
        if sp.kind not in (inspect.Parameter.POSITIONAL_ONLY, *_VAR) and p.name != sp.name:
            out.append(f"argument {p.name!r} should be named {sp.name!r}")
        if sp.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, *_VAR) and p.kind is not sp.kind:
            out.append(f"{p.name!r} is {p.kind.description}, should be {sp.kind.description}")
    for sp in stub[len(positional):]:
        p = sig.parameters.get(sp.name)
        if p is None:
            out.append(f"keyword-only argument {sp.name!r} missing")
        elif p.kind not in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            out.append(f"{sp.name!r} is {p.kind.description}, should be keyword-only")
    return out


def _tensor() -> Any:
    return xg.asarray([1.0, 2.0])


@pytest.mark.parametrize("name", sorted(ARRAY_METHODS))
def test_array_method_signature(name: str) -> None:
    t = _tensor()
    assert hasattr(t, name), f"Tensor lacks the array method {name}"
    bad = _spec_mismatches(getattr(t, name), _without_self(ARRAY_METHODS[name]))
    assert not bad, f"Tensor.{name}{inspect.signature(getattr(t, name))}: {'; '.join(bad)}"


@pytest.mark.parametrize("name", sorted(ARRAY_METHODS))
def test_array_method_stubs_pass_on_array_api_strict(name: str) -> None:
    """The reference implementation passes the same check: the stubs are transcribed right."""
    a = strict.asarray([1.0, 2.0])
    assert not _spec_mismatches(getattr(a, name), _without_self(ARRAY_METHODS[name]))


@pytest.mark.parametrize("name", sorted(INFO_FUNCTIONS))
def test_info_function_signature(name: str) -> None:
    info = xg.__array_namespace_info__()
    assert callable(getattr(info, name, None)), f"the info object lacks {name}()"
    stub = _without_self(INFO_FUNCTIONS[name])
    bad = _spec_mismatches(getattr(info, name), stub)
    assert not bad, f"info.{name}{inspect.signature(getattr(info, name))}: {'; '.join(bad)}"
    # these are pure Python in both: the same parameters as array-api-strict's, exactly
    assert _params(getattr(info, name)) == _params(getattr(strict.__array_namespace_info__(), name))
    assert not _spec_mismatches(getattr(strict.__array_namespace_info__(), name), stub)


def test_dlpack_keywords_reach_the_backend() -> None:
    """Each keyword of the standard's ``__dlpack__`` is accepted, by keyword only, and the
    capsule round-trips through the consumers that pass them."""
    np = pytest.importorskip("numpy")
    t = xg.asarray(np.arange(3.0))
    with pytest.raises(TypeError):
        t.__dlpack__(None)  # keyword-only, as the standard's
    dev = t.__dlpack_device__()
    for kw in ({}, {"stream": None}, {"max_version": (1, 0)}, {"dl_device": dev}, {"copy": True}, {"copy": False}):
        assert type(t.__dlpack__(**kw)).__name__ == "PyCapsule", kw
    np.testing.assert_array_equal(np.from_dlpack(t), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(np.from_dlpack(t, copy=True), [0.0, 1.0, 2.0])


def test_info_devices(backend: Any) -> None:
    """Mirrors ``TestInspection.test_devices``: ``devices()`` is a tuple (what the 2025.12
    suite asks, and what array-api-strict and array-api-compat return; JAX's own is a
    list), holding the default device, over every backend."""
    with xg.default_device(backend.name):
        info = xg.__array_namespace_info__()
        devices = info.devices()
        assert isinstance(devices, tuple), f"devices() is a {type(devices).__name__}, not a tuple"
        assert type(devices) is type(strict.__array_namespace_info__().devices())
        default = info.default_device()
        if default is not None:
            assert default in devices, f"default_device() {default!r} is not in devices() {devices!r}"
        caps = info.capabilities()
        assert isinstance(caps["boolean indexing"], bool) and isinstance(caps["data-dependent shapes"], bool)
        for device in devices:
            assert {"real floating", "complex floating", "integral", "indexing"} <= set(info.default_dtypes(device=device))
