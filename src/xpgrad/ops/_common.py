"""Helpers shared by the rule tables (kept tiny: rules should read as math)."""

from __future__ import annotations

import functools
import math
from typing import Any

import array_api_compat

from .._dispatch import raw_array
from .._dtypes import HALF_DTYPE_NAMES, DType, dtype, dtype_name, fast_name, promote_names
from .._exceptions import UnknownNameError
from ..autograd._core import (
    GRAD_SLOT,
    WANT_FRESH,
    ArgMeta,
    apply,
    apply1,
    apply2,
    broadcast_like,
    composite,
    declare,
    primitive,
)
from ..autograd._tensor import Tensor

__all__ = [
    "NOKW", "Array", "Tensor", "apply", "apply1", "apply2", "broadcast_like",
    "composite", "conj", "declare", "defjvp_from_vjp", "fresh", "in_float32", "is_complex",
    "is_half", "is_xpgrad", "promoting",
    "joint_linear_jvp", "jvp_from_vjp", "linear_jvp", "primitive", "reduction_jvp", "scale", "times_inf", "unit_from", "unscale",
    "zeros_like_shape",
]

NOKW: dict[str, Any] = {}
Array = Tensor  # annotation alias used in the public signatures


def is_xpgrad(xp: Any) -> bool:
    """True when a rule runs on xpgrad's own namespace (``create_graph``)."""
    return getattr(xp, "__name__", None) == "xpgrad"


# id(dtype object) -> (the object, is it complex): dtype objects are few and long-lived
# (singletons in every library), and an id lookup never compares dtypes of two libraries
_COMPLEX: dict[int, tuple[Any, bool]] = {}


def _dtype_is_complex(dt: Any) -> bool:
    e = _COMPLEX.get(id(dt))
    if e is not None and e[0] is dt:
        return e[1]
    if type(dt) is DType:
        r = dt.kind == "complex floating"
    else:
        r = (fast_name(dt) or dtype_name(dt)).startswith("complex")
    if len(_COMPLEX) < 1024:  # bounded: a library that made a new dtype object per array
        _COMPLEX[id(dt)] = (dt, r)
    return r


def is_complex(x: Any) -> bool:
    """Whether an array (or Tensor) has a complex dtype; cheap on the hot path."""
    return _dtype_is_complex(x.dtype)


# id(dtype object) -> (the object, is it float16 or bfloat16)
_HALF: dict[int, tuple[Any, bool]] = {}


def _dtype_is_half(dt: Any) -> bool:
    e = _HALF.get(id(dt))
    if e is not None and e[0] is dt:
        return e[1]
    try:
        r = (dt.name if type(dt) is DType else fast_name(dt) or dtype_name(dt)) in HALF_DTYPE_NAMES
    except UnknownNameError:
        r = False
    if len(_HALF) < 1024:
        _HALF[id(dt)] = (dt, r)
    return r


def is_half(x: Any) -> bool:
    """Whether an array (or Tensor) has dtype ``float16`` or ``bfloat16``; False for
    anything without a dtype (a Python scalar, None)."""
    dt = getattr(x, "dtype", None)
    return dt is not None and _dtype_is_half(dt)


def _half_of(args: tuple[Any, ...]) -> Any:
    """The dtype of the first float16 or bfloat16 array of ``args`` (in a tuple too), else None
    (the hot path of every reduction: one loop, the cache read inline)."""
    for a in args:
        dt = getattr(a, "dtype", None)
        if dt is None:
            if type(a) is tuple:
                dt = _half_of(a)
                if dt is not None:
                    return dt
            continue
        e = _HALF.get(id(dt))
        if e[1] if e is not None and e[0] is dt else _dtype_is_half(dt):
            return dt
    return None


def in_float32(f: Any) -> Any:
    """The forward or rule ``f(xp, *arrays, **kw)`` of a reduction, computed in float32 when
    an argument is ``float16`` or ``bfloat16``, its float32 results cast back to that dtype.

    Half precision cannot accumulate: a float16 sum stops growing at 2048 when it adds
    ones one by one, and NumPy does so along any axis but the contiguous one. As torch
    accumulates its half reductions, softmaxes and norms in float32, so do these: the
    half arguments (in tuples too: a multi-output ``ans``) are cast to float32, and only
    the result is rounded. An explicit ``dtype=`` keyword (``sum(x, dtype=...)``) is the
    caller's choice, and the rules on Tensors (``create_graph``) call functions that
    upcast by themselves: both run ``f`` as it is.
    """

    def cast(xp: Any, a: Any, to: Any) -> Any:
        if isinstance(a, tuple):
            return tuple(cast(xp, b, to) for b in a)
        if not is_half(a):
            return a
        if type(a) is ArgMeta:  # (an argument the rule reads only the shape of: not saved)
            return ArgMeta(a.shape, to, a.chunks)
        return xp.astype(a, to)

    @functools.wraps(f)
    def wrapped(xp: Any, *args: Any, **kw: Any) -> Any:
        half = _half_of(args)
        if half is None or kw.get("dtype") is not None or is_xpgrad(xp):
            return f(xp, *args, **kw)
        f32 = dtype("float32", xp)
        out = f(xp, *(cast(xp, a, f32) for a in args), **kw)

        def back(o: Any) -> Any:
            return xp.astype(o, half) if getattr(o, "dtype", None) == f32 else o

        return tuple(back(o) for o in out) if isinstance(out, tuple) else back(out)

    return wrapped


# (id(dtype a), id(dtype b)) -> (dtype a, dtype b, a's cast or None, b's cast or None): what
# promoting() casts two arrays of those dtypes to (the entry holds the dtypes: no id reuse)
_PROMOTE: dict[tuple[int, int], tuple[Any, Any, Any, Any]] = {}


def _casts(xp: Any, da: Any, db: Any) -> tuple[Any, Any]:
    """The backend dtypes to cast arrays of dtypes ``da`` and ``db`` to (None: keep)."""
    key = (id(da), id(db))
    e = _PROMOTE.get(key)
    if e is not None and e[0] is da and e[1] is db:
        return e[2], e[3]
    ta = tb = None
    na: str | None
    nb: str | None
    try:
        na, nb = fast_name(da) or dtype_name(da), fast_name(db) or dtype_name(db)
    except UnknownNameError:  # a dtype outside the standard (bfloat16): the backend decides
        na = nb = None
    if na is not None and nb is not None and na != nb:
        target = promote_names(na, nb)
        if target is not None:  # (None: a mix the standard leaves to the library)
            ta = None if na == target else dtype(target, xp)
            tb = None if nb == target else dtype(target, xp)
    if len(_PROMOTE) < 1024:
        _PROMOTE[key] = (da, db, ta, tb)
    return ta, tb


def promoting(fwd: Any) -> Any:
    """The forward ``fwd(xp, a, b)`` of a binary elementwise function, with the arrays first
    cast to the standard's result dtype when their dtypes differ.

    The standard's promotion table holds whatever the shapes, while a backend may have
    its own rule: PyTorch lets a 1-d array's dtype win over a 0-d array's of the same
    kind (``uint16`` 0-d ``&`` ``uint8`` 1-d is ``uint8`` there, ``uint16`` in the
    standard) and refuses some mixes (``int8`` with ``uint16``). Casting first makes
    every backend give the standard's dtype, or raise as it does for that dtype.
    Python scalars, one dtype on both sides, and mixes the standard leaves to the
    library (integer with floating) go to ``fwd`` as they are.

    Examples:
        >>> import numpy as np, array_api_compat.numpy as cnp
        >>> from xpgrad.ops._common import promoting
        >>> band = promoting(lambda xp, a, b: a & b)
        >>> band(cnp, np.asarray(511, dtype=np.uint16), np.asarray([255], dtype=np.uint8)).dtype
        dtype('uint16')
    """

    # (binary elementwise forwards take no keywords: none are passed through, no dict per call)
    def f(xp: Any, a: Any, b: Any) -> Any:
        da = getattr(a, "dtype", None)
        if da is not None:
            db = getattr(b, "dtype", None)
            if db is not None and db is not da and not is_xpgrad(xp):  # (on Tensors each op promotes)
                ta, tb = _casts(xp, da, db)
                if ta is not None:
                    a = xp.astype(a, ta)
                if tb is not None:
                    b = xp.astype(b, tb)
        return fwd(xp, a, b)

    f.__name__ = f.__qualname__ = getattr(fwd, "__name__", "forward")
    f.__wrapped__ = fwd  # type: ignore[attr-defined]
    return f


def conj(xp: Any, x: Any) -> Any:
    """``xp.conj(x)`` for complex arrays, ``x`` itself otherwise (no copy for reals).

    Rules follow PyTorch's convention: the VJP of a holomorphic ``f`` is
    ``g * conj(f'(z))``, so real-valued losses of complex inputs get the
    steepest-ascent direction.
    """
    dt = getattr(x, "dtype", None)
    if dt is not None:
        e = _COMPLEX.get(id(dt))  # (the inlined fast path of _dtype_is_complex)
        if e is not None and e[0] is dt:
            return xp.conj(x) if e[1] else x
        return xp.conj(x) if _dtype_is_complex(dt) else x
    if type(x) is complex:  # a Python scalar argument (``multiply(x, 2j)``)
        return x.conjugate()
    return x


def scale(xp: Any, g: Any, d: Any) -> Any:
    """``g * d`` for a VJP rule, computed in place into ``g`` when the engine allows it.

    The backward engine donates the upstream gradient ``g`` to a node's only rule
    when it owns the buffer: a fresh result of this helper that no one else has
    seen (no hook, not an output asked for, first order, no anomaly check). The
    product is then written into ``g`` when ``d`` has its shape and dtype, so
    elementwise chains (``exp(sin(x))``) need no new buffer per step. Use it only as
    the rule's one and last use of ``g``. On immutable arrays (JAX, Dask) ``*=``
    makes a new array, which is as right.
    """
    s = GRAD_SLOT.s
    units = s.units
    if units and units.get(id(g)) is g and getattr(d, "shape", None) == g.shape:
        # g holds only ones and d has its shape: g * d is d (its dtype the engine fits)
        s.borrowed[id(d)] = d  # borrowed (a saved input, say): copied before it is handed out
        return d
    if g is s.donated and getattr(d, "dtype", None) is g.dtype and d.shape == g.shape:
        s.donated = None
        g *= d
        r = g
    else:
        r = g * d
        if r is g:  # not a new buffer (never, for the known backends): not ours to reuse
            return r
    if s.fresh is WANT_FRESH:
        s.fresh = r
    return r


def unscale(xp: Any, g: Any, f: Any) -> Any:
    """``g / f`` for a VJP rule, computed in place into ``g`` when the engine donates it (the
    division of `scale`: the same rules of use)."""
    s = GRAD_SLOT.s
    if g is s.donated and getattr(f, "dtype", None) is g.dtype and f.shape == g.shape:
        s.donated = None
        g /= f
        r = g
    else:
        r = g / f
        if r is g:
            return r
    if s.fresh is WANT_FRESH:
        s.fresh = r
    return r


def unit_from(g: Any, r: Any) -> Any:
    """Return ``r``, a broadcast or reshape of ``g``; if ``g`` holds only ones (the implicit
    seed of ``backward()``), tell the engine that ``r`` does too, so that `scale`
    can return ``d`` for ``g * d`` without a pass over the data (``sum(f(x) * x)``).
    First order only; elsewhere it is ``r``.
    """
    units = GRAD_SLOT.s.units
    if units and units.get(id(g)) is g:
        units[id(r)] = r
    return r


def fresh(r: Any) -> Any:
    """Return ``r``, telling the backward engine that it is a new buffer no one else holds.

    For a VJP rule whose result is freshly allocated by a backend call (``matmul``):
    the engine may then sum into it, or hand it to the next rule to overwrite (see
    `scale`). Never for ``g`` itself, a view of an argument, or a saved value.
    """
    s = GRAD_SLOT.s
    if s.fresh is WANT_FRESH:
        s.fresh = r
    return r


def times_inf(xp: Any, g: Any) -> Any:
    """``g * inf`` as the product gives it (``+-inf``, NaN where ``g`` is 0 or NaN), without
    computing ``0 * inf``, which NumPy warns about. For real ``g``. Piecewise constant in
    ``g``, so never recorded (a recorded ``* inf`` would give ``0 * inf`` one order up)."""
    if isinstance(g, Tensor):
        g = g.detach()
    zero = g == 0
    return xp.where(zero, math.nan, xp.where(zero, 1.0, g) * math.inf)


def zeros_like_shape(xp: Any, like: Any, shape: tuple[int, ...], dtype: Any = None) -> Any:
    """Zeros of ``shape`` with ``like``'s namespace, device and dtype (or ``dtype``).

    Works in both rule modes: on raw arrays it calls the backend; on Tensors it
    creates a constant Tensor on the same backend (not the policy's namespace).
    """
    if isinstance(like, Tensor):
        data = raw_array(like)  # (a batched one: its physical array's library and device)
        bxp = array_api_compat.array_namespace(data)
        dt = data.dtype if dtype is None else dtype
        return Tensor(bxp.zeros(shape, dtype=dt, device=array_api_compat.device(data)))
    dt = like.dtype if dtype is None else dtype
    return xp.zeros(shape, dtype=dt, device=array_api_compat.device(like))


# ---------------------------------------------------------------- forward-mode rules from other rules
# Where a JVP rule is built from something that already exists, it is built by one of
# these four helpers, so that the reuse is visible at the ``defjvp`` line:
#   jvp_from_vjp(vjp)      pointwise rules: the VJP rule itself, conjugated (elementwise chapter)
#   reduction_jvp(vjp)     reductions: the VJP's partial derivatives, summed against the tangent
#   linear_jvp(prim)       primitives linear in argument 0: the primitive applied to the tangent
#   joint_linear_jvp(prim) primitives linear in all their array arguments together


def _run(prim: Any, xp: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """Run a primitive from inside a rule: recorded with xpgrad's namespace, raw otherwise."""
    if is_xpgrad(xp):
        return apply(prim, args, kw or NOKW)
    return prim.fwd(xp, *args, **kw)


def jvp_from_vjp(vjp: Any) -> Any:
    """The JVP of a pointwise rule from its VJP: ``conj(vjp(conj(t)))``.

    A pointwise VJP is ``g * conj(d)`` with ``d`` the derivative (the holomorphic one
    for complex ``z``; a real mask or factor for ``maximum``, ``clip``...), so this is
    ``t * d``, broadcast to the output by the engine. Also right for real-valued
    functions of a complex ``z`` whose VJP is ``g * dR/dconj(z) * 2`` (``abs``,
    ``real``, ``imag``): the engine keeps the real part. Not for ``sign`` of a complex
    ``z``, which is neither.
    """

    def rule(xp: Any, t: Any, ans: Any, *args: Any, **kw: Any) -> Any:
        r = vjp(xp, conj(xp, t), ans, *args, **kw)
        return None if r is None else conj(xp, r)

    return rule


def defjvp_from_vjp(prim: Any) -> None:
    """Give a pointwise primitive the JVP rules `jvp_from_vjp` of its VJP rules."""
    prim.defjvp(*(None if r is None else jvp_from_vjp(r) for r in prim.vjps))


def reduction_jvp(vjp: Any) -> Any:
    """The JVP of a reduction from its VJP: ``sum(conj(vjp(1)) * t)`` over ``axis``.

    ``vjp(1)`` is the conjugated partial derivative of the result with respect to
    each element (``prod``, ``var``, ``max``/``min`` with their tie convention); the
    engine keeps the real part for real-valued results (``var`` of complex input).
    """

    def rule(xp: Any, t: Any, ans: Any, x: Any, **kw: Any) -> Any:
        d = vjp(xp, xp.ones_like(ans), ans, x, **kw)
        axis = kw.get("axis")
        if isinstance(axis, list):
            axis = tuple(axis)
        return xp.sum(conj(xp, d) * t, axis=axis, keepdims=kw.get("keepdims", False))

    return rule


def linear_jvp(prim: Any) -> Any:
    """The JVP of a primitive linear in argument 0 (the others constant): ``prim(t, *rest)``."""

    def rule(xp: Any, t: Any, ans: Any, x: Any, *rest: Any, **kw: Any) -> Any:
        return _run(prim, xp, (t, *rest), kw)

    return rule


def joint_linear_jvp(prim: Any) -> Any:
    """A ``rest=`` JVP rule for a primitive linear in all its array arguments together
    (``concat``, ``stack``, ``setitem``...): argument ``i``'s tangent with zeros in
    place of the other arguments."""

    def rule(xp: Any, t: Any, ans: Any, i: int, *args: Any, **kw: Any) -> Any:
        parts = tuple(t if j == i else _zero_of(xp, a) for j, a in enumerate(args))
        return _run(prim, xp, parts, kw)

    return rule


def _zero_of(xp: Any, a: Any) -> Any:
    if hasattr(a, "shape"):
        return xp.zeros_like(a)
    return type(a)(0) if isinstance(a, (int, float, complex)) else a
