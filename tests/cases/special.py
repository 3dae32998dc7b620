"""OpCases for ``xpgrad.special`` (not a chapter of the standard) that need more than
the registry's ``Inputs`` can say: the pointwise functions bring their own cases from
their entries (``special.erf``, ...); here are the second domains of ``gammaln`` and
``digamma`` (negative non-integer inputs check the reflection formulas, keeping away
from the poles at the non-positive integers), ``polygamma`` (an int first) and the
reductions (``axis``, ``keepdims``).

The backends with a native special-function module (NumPy through SciPy, torch,
JAX) run it; array-api-strict and Dask run the pure array-API forwards.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests._cases import OpCase, axis_params
from xpgrad import special as xsp


def _dims(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    return (axis,) if isinstance(axis, int) else tuple(axis)


def _torch_lse(t: Any, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    if x.ndim == 0:
        return x
    return t.logsumexp(x, dim=_dims(axis, x.ndim), keepdim=keepdims)


def _torch_log_softmax(t: Any, x: Any, axis: Any = None) -> Any:
    return x - _torch_lse(t, x, axis, True) if x.ndim else x - x


def _axis_only(draw: Any, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    return {"axis": axis_params(keepdims=False)(draw, shapes)["axis"]}


def _n(draw: Any, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    return {"n": draw(st.sampled_from([1, 2]))}


def _unary(name: str, domain: tuple[float, float] = (-3.0, 3.0), case: str | None = None, **kw: Any) -> OpCase:
    return OpCase(case or f"special.{name}", lambda xp, x: getattr(xsp, name)(x), domain=domain,
                  torch_fn=lambda t, x: getattr(t.special, name)(x), covers=(f"special.{name}",), **kw)


# torch.special.polygamma(1, 0.5) = 4.9348022021, pi**2 / 2 = 4.9348022005: torch's trigamma is
# accurate to ~5e-10 only, below the 1e-10 of the differential test (tests/test_special.py
# compares the forward with SciPy instead)
_TORCH_TRIGAMMA = "torch's polygamma(1, x) has relative error ~5e-10 (checked against SciPy in tests/test_special.py)"

CASES = [
    _unary("gammaln", domain=(-2.8, -2.2), case="special.gammaln-reflected"),
    _unary("digamma", domain=(-1.8, -1.2), case="special.digamma-reflected", rtol=1e-4),
    OpCase("special.polygamma", lambda xp, x, n: xsp.polygamma(n, x), domain=(0.5, 4.0), params=_n, rtol=1e-4,
           torch_skip=_TORCH_TRIGAMMA),
    OpCase("special.polygamma-reflected", lambda xp, x, n: xsp.polygamma(n, x), domain=(-0.8, -0.2), params=_n,
           rtol=1e-4, torch_skip=_TORCH_TRIGAMMA, covers=("special.polygamma",)),
    OpCase("special.logsumexp", lambda xp, x, **p: xsp.logsumexp(x, **p), params=axis_params(), domain=(-3.0, 3.0),
           torch_fn=_torch_lse),
    OpCase("special.softmax", lambda xp, x, **p: xsp.softmax(x, **p), params=_axis_only, domain=(-3.0, 3.0),
           torch_fn=lambda t, x, axis: t.exp(_torch_log_softmax(t, x, axis))),
    OpCase("special.log_softmax", lambda xp, x, **p: xsp.log_softmax(x, **p), params=_axis_only, domain=(-3.0, 3.0),
           torch_fn=_torch_log_softmax),
]
