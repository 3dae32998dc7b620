"""xpgrad over backend B against B itself, for every function of the standard.

For each function and backend, hypothesis draws a call (``_calls.CALLS``) with the
backend's own arrays; the same call goes to xpgrad with the arrays wrapped as
Tensors. The outputs must agree in dtype, shape, device and values (NaNs and
signed zeros included), or both calls must raise. Where the backend deviates from
the standard and xpgrad corrects it, xpgrad's output is instead checked against
array-api-strict (the reference implementation) on the same inputs: a pass, since
only the backend is wrong there. ``XFAIL`` lists the backend's own failures that
make even that comparison impossible, each with its reason; xpgrad adds none.
"""

from __future__ import annotations

import warnings
from typing import Any

import _calls
import numpy as np
import pytest
from _calls import CALLS, POLICY_FUNCTIONS, SKIP_DTYPES_BY_BACKEND, UNSPECIFIED_VALUES
from hypothesis import given
from hypothesis import strategies as st

import xpgrad as xg
from xpgrad._dtypes import dtype_name
from xpgrad._spec import FUNCTIONS

#: (backend, function) -> reason: the backend's own failures (strict xfails)
XFAIL: dict[tuple[str, str], str] = {
    ("array_api_strict", "isin"): "array-api-strict 2.6.1's isin ignores invert= (returns the un-negated result); "
                                  "xpgrad negates it itself (tests/test_vmap_indexing.py::test_isin checks invert "
                                  "against NumPy's values)",
}


class Raised:
    """A call that raised (any exception: the message may differ between libraries)."""

    def __init__(self, e: BaseException) -> None:
        self.e = e

    def __repr__(self) -> str:
        return f"raised {type(self.e).__name__}: {str(self.e)[:200]}"


def _name(dt: Any) -> str:
    """The standard's name of a dtype; a backend's extra dtypes (NumPy's float16) by their own."""
    try:
        return dtype_name(dt)
    except Exception:  # noqa: BLE001 - not one of the 13
        return str(dt)


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, type)


def _is_dtype(x: Any) -> bool:
    if isinstance(x, (str, tuple, int, float, complex, bool)) or x is None or _is_array(x):
        return False
    try:
        dtype_name(x)
    except Exception:  # noqa: BLE001 - not a dtype
        return False
    return True


def _to_xpgrad(x: Any) -> Any:
    if _is_array(x):
        return xg.asarray(x)
    if isinstance(x, list):
        return [_to_xpgrad(v) for v in x]
    if isinstance(x, tuple) and any(_is_array(v) for v in x):
        return tuple(_to_xpgrad(v) for v in x)
    if _is_dtype(x):
        return getattr(xg, dtype_name(x))
    return x


def _to_strict(x: Any, strict: Any) -> Any:
    if _is_array(x):
        return strict.asarray(_numpy(x))
    if isinstance(x, list):
        return [_to_strict(v, strict) for v in x]
    if isinstance(x, tuple) and any(_is_array(v) for v in x):
        return tuple(_to_strict(v, strict) for v in x)
    if _is_dtype(x):
        return getattr(strict, dtype_name(x))
    return x


def _numpy(x: Any) -> np.ndarray:
    if isinstance(x, xg.Tensor):
        x = x.data
    if hasattr(x, "compute"):  # dask
        x = x.compute()
    if hasattr(x, "detach"):  # torch
        return x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError, RuntimeError):
        return np.from_dlpack(x)


def _call(f: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    with warnings.catch_warnings():
        # overflow / invalid-value warnings of the backends on NaN and inf inputs
        warnings.simplefilter("ignore")
        try:
            out = f(*args, **kw)
            if hasattr(out, "compute") or (isinstance(out, xg.Tensor) and hasattr(out.data, "compute")):
                _numpy(out)  # dask: errors surface at compute time
            elif isinstance(out, (tuple, list)):
                for o in out:
                    if _is_array(o) or isinstance(o, xg.Tensor):
                        _numpy(o)
            return out
        except Exception as e:  # noqa: BLE001 - compared with the other side
            return Raised(e)


def _diff(got: Any, want: Any, *, values: bool = True, exact: bool = True, path: str = "out") -> str | None:
    """Why ``got`` (xpgrad) differs from ``want`` (the backend), or None."""
    if isinstance(want, Raised) or isinstance(got, Raised):
        if isinstance(want, Raised) and isinstance(got, Raised):
            return None
        return f"{path}: backend {want!r}, xpgrad {got!r}"
    if _is_array(want):
        if not isinstance(got, xg.Tensor):
            return f"{path}: xpgrad returned {type(got).__name__}, not a Tensor"
        g = got.data
        if _name(g.dtype) != _name(want.dtype):
            return f"{path}: dtype {_name(g.dtype)} != {_name(want.dtype)}"
        if exact:
            import array_api_compat

            dg, dw = array_api_compat.device(g), array_api_compat.device(want)
            if dg != dw:
                return f"{path}: device {dg!r} != {dw!r}"
        a, b = _numpy(g), _numpy(want)
        if a.shape != b.shape:
            return f"{path}: shape {a.shape} != {b.shape}"
        if not values:
            return None
        return _value_diff(a, b, exact, path)
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"{path}: {type(got).__name__} of {len(got) if isinstance(got, (tuple, list)) else '?'} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            d = _diff(g, w, values=values, exact=exact, path=f"{path}[{i}]")
            if d:
                return d
        return None
    if _is_dtype(want):
        return None if _is_dtype(got) and dtype_name(got) == dtype_name(want) else f"{path}: {got!r} != {want!r}"
    if hasattr(want, "bits"):  # finfo / iinfo
        for field in ("bits", "eps", "max", "min", "smallest_normal"):
            if hasattr(want, field) and float(getattr(got, field)) != float(getattr(want, field)):
                return f"{path}.{field}: {getattr(got, field)!r} != {getattr(want, field)!r}"
        return None
    return None if got == want else f"{path}: {got!r} != {want!r}"


def _value_diff(a: np.ndarray, b: np.ndarray, exact: bool, path: str) -> str | None:
    if a.dtype.kind in "fc":
        parts = [(a.real, b.real), (a.imag, b.imag)] if a.dtype.kind == "c" else [(a, b)]
        for x, y in parts:
            if not np.array_equal(np.isnan(x), np.isnan(y)):
                return f"{path}: NaN pattern differs: {x} vs {y}"
            m = ~np.isnan(y)
            if exact:
                if not np.array_equal(x[m], y[m]):
                    return f"{path}: values {x} != {y}"
            elif not np.allclose(x[m], y[m], rtol=1e-6, atol=1e-300, equal_nan=True):
                return f"{path}: values {x} != {y} (rtol 1e-6)"
            zero = m & (y == 0)
            if not np.array_equal(np.signbit(x[zero]), np.signbit(y[zero])):
                return f"{path}: signed zeros differ: {x} vs {y}"
        return None
    return None if np.array_equal(a, b) else f"{path}: values {a} != {b}"


def _run_xpgrad(name: str, args: tuple[Any, ...], kw: dict[str, Any], backend: Any) -> Any:
    xargs = tuple(_to_xpgrad(a) for a in args)
    xkw = {k: _to_xpgrad(v) for k, v in kw.items()}
    if name in POLICY_FUNCTIONS:
        with xg.default_device(backend.name):
            return _call(getattr(xg, name), xargs, xkw)
    return _call(getattr(xg, name), xargs, xkw)


@pytest.mark.parametrize("name", FUNCTIONS)
@given(data=st.data())
def test_matches_backend(name: str, backend: Any, strict: Any, data: Any) -> None:
    reason = XFAIL.get((backend.name, name))
    if reason is not None:
        pytest.xfail(reason)
    if not hasattr(backend.xp, name):
        pytest.xfail(f"{backend.name} ({backend.xp.__name__}) has no {name}")
    _calls.SKIP_DTYPES = SKIP_DTYPES_BY_BACKEND.get(backend.name, set())
    args, kw = data.draw(CALLS[name](backend.xps, backend.xp), label="call")
    with warnings.catch_warnings():
        # overflow / invalid-value warnings of the backends on NaN and inf inputs (Dask
        # raises them lazily, when the results are compared)
        warnings.simplefilter("ignore")
        _check(name, args, kw, backend, strict)


def _check(name: str, args: tuple[Any, ...], kw: dict[str, Any], backend: Any, strict: Any) -> None:
    values = name not in UNSPECIFIED_VALUES
    want = _call(getattr(backend.xp, name), args, kw)
    got = _run_xpgrad(name, args, kw, backend)
    d = _diff(got, want, values=values)
    if d is None:
        return
    # the backend may deviate from the standard where xpgrad follows it: ask the reference
    ref = _call(getattr(strict, name), tuple(_to_strict(a, strict) for a in args),
                {k: _to_strict(v, strict) for k, v in kw.items()})
    if isinstance(ref, Raised) and not isinstance(got, Raised):
        pytest.fail(f"{name}: xpgrad differs from {backend.name} ({d}); array-api-strict {ref!r}")
    d_ref = _diff(got, ref, values=values, exact=False)
    if d_ref is not None:
        pytest.fail(f"{name}: xpgrad differs from {backend.name} ({d}) and from array-api-strict ({d_ref})")


def test_every_function_has_a_call() -> None:
    assert sorted(set(FUNCTIONS) - set(CALLS)) == []
