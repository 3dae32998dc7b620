"""Gradient checking against float64 central differences, in the manner of HIPS
autograd's ``check_grads``: the VJP along a random cotangent (reverse mode) and the
JVP along a random direction (forward mode) are compared with a finite-difference
directional derivative, recursively for higher orders."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import array_api_compat
import numpy as np

from ._dispatch import backend_namespace
from ._dtypes import dtype_name, is_float
from ._exceptions import XpgradValueError
from .autograd._grad_mode import graph_namespace
from .autograd._tensor import Tensor
from .functional import jvp, value_and_grad

__all__ = ["check_grads"]


def _raw(x: Any) -> Any:
    return x.data if isinstance(x, Tensor) else x


def _to64(xp: Any, x: Any) -> Any:
    name = dtype_name(x.dtype)
    if name in ("float32", "float16", "bfloat16"):
        return xp.astype(x, xp.float64)
    if name == "complex64":
        return xp.astype(x, xp.complex128)
    return x


def _rand_like(xp: Any, x: Any, rng: Any) -> Any:
    shape = tuple(x.shape)
    v = rng.standard_normal(shape)
    if dtype_name(x.dtype).startswith("complex"):
        v = v + 1j * rng.standard_normal(shape)
    return xp.asarray(np.asarray(v, dtype=np.result_type(v, np.float64)), dtype=x.dtype, device=_dev(x))


def _dev(x: Any) -> Any:
    return array_api_compat.device(x)


def _inner(xp: Any, a: Any, b: Any) -> Any:
    """Real inner product <a, b> = Re(sum(conj(a) * b)), a scalar of xp."""
    if 0 in a.shape:
        # empty: the sum alone (0, with a zero gradient); multiplying first would make Dask
        # rechunk an array joined from empty chunks, which raises inside Dask
        s = xp.sum(a)
        return xp.real(s) if dtype_name(s.dtype).startswith("complex") else s
    prod = a * (xp.conj(b) if dtype_name(b.dtype).startswith("complex") else b)
    s = xp.sum(prod)
    return xp.real(s) if dtype_name(s.dtype).startswith("complex") else s


def check_grads(
    f: Callable[..., Any],
    *args: Any,
    order: int = 1,
    argnums: Sequence[int] | None = None,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    seed: int = 0,
    modes: Sequence[str] = ("rev",),
) -> None:
    """Check the derivatives of ``f`` at ``args`` against central differences.

    ``f`` takes arrays and returns one array (any shape). Inputs are promoted to
    float64 (complex128) for the check, half-precision ones (float16, bfloat16) too. ``modes`` picks what is checked: ``"rev"``
    the VJP (reverse mode), ``"fwd"`` the JVP (forward mode). With ``order=2`` the
    VJP (JVP) itself is checked the same way, in the same mode, which exercises every
    rule's second derivative. A primitive without a rule for a mode fails loudly
    ([`NonDifferentiableError`][xpgrad.NonDifferentiableError]), it is never skipped.

    Raises:
        AssertionError: a gradient disagrees; the message names the argument and order.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> from xpgrad.testing import check_grads
        >>> check_grads(lambda x: xg.sin(x) * x, np.array([0.3, 1.2]), order=2, modes=("rev", "fwd"))
    """
    if order < 1:
        msg = f"check_grads: order must be >= 1, got {order}"
        raise XpgradValueError(msg)
    bad = [m for m in modes if m not in ("rev", "fwd")]
    if bad or not modes:
        msg = f"check_grads: modes must be a non-empty sequence of 'rev' and 'fwd', got {tuple(modes)!r}"
        raise XpgradValueError(msg)
    raw = [_raw(a) for a in args]
    xp = backend_namespace(*raw, func="check_grads")
    raw = [_to64(xp, a) if hasattr(a, "dtype") else a for a in raw]
    nums = list(argnums) if argnums is not None else [
        i for i, a in enumerate(raw) if hasattr(a, "dtype") and is_float(a.dtype)
    ]
    if "rev" in modes:
        _check(f, raw, nums, order, eps, rtol, atol, np.random.default_rng(seed), xp)
    if "fwd" in modes:
        _check_fwd(f, raw, nums, order, eps, rtol, atol, np.random.default_rng(seed), xp)


def _central(scalar: Callable[..., float], raw: list[Any], nums: list[int], vs: list[Any], eps: float) -> float:
    """The central difference of ``scalar`` at ``raw`` along the directions ``vs`` (of ``nums``)."""

    def shifted(sign: float) -> float:
        a = list(raw)
        for i, v in zip(nums, vs):
            a[i] = raw[i] + sign * eps * v
        return scalar(*a)

    return (shifted(1.0) - shifted(-1.0)) / (2 * eps)


def _compare(what: str, order: int, nums: list[int], analytic: float, numeric: float, rtol: float,
             atol: float) -> None:
    scale = max(abs(numeric), abs(analytic), 1.0)
    if abs(numeric - analytic) > atol + rtol * scale:
        msg = (
            f"check_grads: order-{order} {what} mismatch for argnums {nums}: analytic directional "
            f"derivative {analytic!r}, central difference {numeric!r}"
        )
        raise AssertionError(msg)


def _check_fwd(f: Callable[..., Any], raw: list[Any], nums: list[int], order: int, eps: float,
               rtol: float, atol: float, rng: Any, xp: Any) -> None:
    """Forward mode: ``<u, jvp(f, x, v)>`` against the central difference of ``<u, f(x + eps v)>``."""
    out = _raw(f(*raw))
    u = _rand_like(xp, out, rng)
    vs = [_rand_like(xp, raw[i], rng) for i in nums]

    def tangent(*a: Any) -> Any:
        def g(*diff: Any) -> Any:
            full = list(a)
            for i, d in zip(nums, diff):
                full[i] = d
            return f(*full)

        tv = [v if not isinstance(a[i], Tensor) else Tensor(v) for i, v in zip(nums, vs)]
        return jvp(g, tuple(a[i] for i in nums), tuple(tv))[1]

    t = _raw(tangent(*raw))
    analytic = float(_inner(xp, t, u))
    numeric = _central(lambda *a: float(_inner(xp, _raw(f(*a)), u)), raw, nums, vs, eps)
    _compare("forward-mode (JVP)", order, nums, analytic, numeric, rtol, atol)
    if order > 1:
        _check_fwd(tangent, raw, nums, order - 1, eps, rtol, atol, rng, xp)


def _check(f: Callable[..., Any], raw: list[Any], nums: list[int], order: int, eps: float,
           rtol: float, atol: float, rng: Any, xp: Any) -> None:
    out = _raw(f(*raw))
    u = _rand_like(xp, out, rng)  # random cotangent

    def scalar(*a: Any) -> Any:
        o = f(*a)
        ns = _ns_of(o)
        return _inner(ns, o, u if ns is xp else Tensor(u))

    vs = [_rand_like(xp, raw[i], rng) for i in nums]
    _, grads = value_and_grad(scalar, argnums=tuple(nums))(*raw)
    # analytic directional derivative: sum_i <grad_i, v_i>
    analytic = float(sum(float(_inner(xp, g, v)) for g, v in zip(grads, vs)))

    numeric = _central(lambda *a: float(_raw(scalar(*a))), raw, nums, vs, eps)
    _compare("gradient", order, nums, analytic, numeric, rtol, atol)
    if order > 1:
        ws = [_rand_like(xp, raw[i], rng) for i in nums]

        def vjp_dot(*a: Any) -> Any:
            _, gs = value_and_grad(scalar, argnums=tuple(nums))(*a)
            ns = _ns_of(gs[0])
            total = None
            for g, w in zip(gs, ws):
                term = _inner(ns, g, w if ns is xp else Tensor(w))
                total = term if total is None else total + term
            return total

        _check(vjp_dot, raw, nums, order - 1, eps, rtol, atol, rng, xp)


def _ns_of(x: Any) -> Any:
    if isinstance(x, Tensor):
        return graph_namespace()
    return backend_namespace(x)
