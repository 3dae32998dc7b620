"""Special functions (``xpgrad.special``): differentiable, on every backend.

Not part of the array API standard: these mirror the names of ``scipy.special``
(so that SciPy's array-API path, which calls ``xp.special.<name>`` when the
namespace has it, dispatches here and becomes differentiable). Each function is a
primitive: its forward uses the backend's own implementation where one exists
(``scipy.special`` for NumPy, ``torch.special``, ``jax.scipy.special``,
``cupyx.scipy.special``, SciPy's blockwise for Dask; imported on first use, never by
``import xpgrad``) and a pure array-API one otherwise (array-api-strict), and its VJP and JVP rules
are written against the namespace like every other rule, so gradients of any
order work. The pointwise functions (``erf`` ... ``rel_entr``) are entries of the
operation registry (`xpgrad.ops._registry`, chapter ``special``, names
``special.<name>``) declared by their derivative, from which their rules, batching
rules, rule tests and fuzz ops are derived; ``polygamma`` (an int first) and the
reductions are entries whose primitive is declared with its rules beside it
(`Chapter.primitive`) and whose body binds it; ``psi`` is an alias of ``digamma``.
The reductions ``logsumexp``, ``softmax`` and ``log_softmax`` are native too (``scipy.special``, ``torch.logsumexp``/``torch.softmax`` over one axis,
``jax.scipy.special.logsumexp``/``jax.nn``), and array-API code shifted by the
maximum (no overflow) on Dask, array-api-strict and torch softmax over several axes.

The pure implementations: ``erf``/``erfc`` from a Taylor series and a Chebyshev
fit of ``log(erfcx)``; ``gammaln`` by the Lanczos approximation (g = 7) with the
reflection formula; ``digamma`` and ``polygamma`` by the recurrence up to x >= 10
and the asymptotic series, reflected for x < 1/2. Accurate to ~1e-13 relative
(absolute near the zeros of ``gammaln`` and ``digamma``) in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

import array_api_compat

from . import _tracing
from ._dispatch import backend_namespace, raw_array
from ._dtypes import is_float
from ._exceptions import XpgradValueError
from .autograd._batching_util import along_axes, pointwise
from .autograd._core import Primitive, apply
from .autograd._tensor import Tensor
from .ops._common import in_float32, is_xpgrad, times_inf
from .ops._registry import Chapter, Inputs, over, prim_of

# a literal for type checkers and readers; op.check_all (at the end) fails the import when it
# and the entries differ
__all__ = [
    "erf", "erfc", "expit", "logit", "gammaln", "digamma", "psi", "polygamma", "xlogy", "xlog1py",
    "logsumexp", "softmax", "log_softmax", "entr", "rel_entr", "ndtr", "log_ndtr",
]

_C = "special"
# every function is a registry entry (xpgrad.ops._registry): the pointwise ones declared by
# their derivative where it is exact; polygamma (an int first) and the reductions (axes) by
# their primitive, its rules beside it, and a body that binds it; psi an alias of digamma
op = Chapter(_C, module=__name__, prefix="special.")
_SQRT_PI = math.sqrt(math.pi)
_TWO_OVER_SQRT_PI = 2.0 / _SQRT_PI
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_LN2 = math.log(2.0)


# ---------------------------------------------------------------------- native lookup
_LIBS: dict[int, Any] = {}
_FNS: dict[tuple[int, str], Any] = {}


def _lib(xp: Any) -> Any:
    """The backend's special-function module, or None (pure array-API path)."""
    key = id(xp)  # namespaces are modules: alive for the whole process
    if key in _LIBS:
        return _LIBS[key]
    base = _tracing.base_namespace(xp)
    if base is not None:  # (under xg.jit: the library of the witnesses; its functions are recorded by _native)
        return _lib(base)
    import array_api_compat as c

    mod: Any = None
    try:
        if c.is_numpy_namespace(xp):
            from scipy import special as scipy_special

            mod = scipy_special
        elif c.is_torch_namespace(xp):
            import torch

            mod = torch.special
        elif c.is_jax_namespace(xp):
            from jax.scipy import special as jax_special

            mod = jax_special
        elif c.is_cupy_namespace(xp):
            from cupyx.scipy import special as cupy_special

            mod = cupy_special
        elif c.is_dask_namespace(xp):
            mod = _dask_special()
    except ImportError:
        mod = None
    _LIBS[key] = mod
    return mod


def _dask_special() -> Any:
    """SciPy's ufuncs on Dask arrays (NEP 13: Dask applies them blockwise, broadcasting): one
    graph layer per call, where the pure forward would add dozens. Assumes NumPy chunks."""
    from types import SimpleNamespace

    import scipy.special as sc

    def ufunc(name: str) -> Any:
        f = getattr(sc, name)
        return getattr(f, "__wrapped__", f)  # under SCIPY_ARRAY_API=1 the ufunc is wrapped

    names = ("erf", "erfc", "expit", "logit", "gammaln", "digamma", "xlogy", "xlog1py", "entr", "rel_entr", "ndtr", "log_ndtr")
    ns = SimpleNamespace(__name__="scipy.special (Dask blockwise)", **{n: ufunc(n) for n in names})
    ns.polygamma = lambda n, x: x.map_blocks(lambda v: sc.polygamma(n, v).astype(v.dtype, copy=False), dtype=x.dtype)
    return ns


def _native(xp: Any, name: str) -> Callable[..., Any] | None:
    """The backend's own ``name``, or None; NumPy results are made arrays (ufuncs give scalars for 0-d)."""
    key = (id(xp), name)
    if key in _FNS:
        return _FNS[key]
    base = _tracing.base_namespace(xp)
    if base is not None:  # under xg.jit: the backend's function, recorded as one call of the program
        f = _native(base, name)
        _FNS[key] = f = None if f is None else _tracing.recorded(f, f"{_lib(base).__name__}.{name}", xp)
        return f
    mod = _lib(xp)
    f = getattr(mod, name, None) if mod is not None else None
    if f is not None and _lib(xp).__name__.startswith("scipy"):
        raw, asarray = f, xp.asarray
        f = lambda *a: asarray(raw(*a))
    _FNS[key] = f
    return f


def _call(xp: Any, prim: Any, *args: Any, **kw: Any) -> Any:
    """``prim`` inside a rule: its forward on raw arrays, recorded on Tensors (create_graph)."""
    if is_xpgrad(xp):
        return apply(prim, args, kw)
    return prim.fwd(xp, *args, **kw)


def _pair(xp: Any, x: Any, y: Any) -> tuple[Any, Any]:
    """Two arguments of a binary function, a Python scalar made an array like the other one
    (its floating dtype, its device): what the forwards and the derivatives mask and index."""
    if hasattr(x, "dtype") == hasattr(y, "dtype"):
        return x, y
    arr, other = (x, y) if hasattr(x, "dtype") else (y, x)
    if is_xpgrad(xp):  # a rule under create_graph: a constant Tensor of the other's library
        data = raw_array(arr)
        bxp = backend_namespace(data)
        c = bxp.asarray(other, dtype=data.dtype if is_float(data.dtype) else None, device=array_api_compat.device(data))
        other = xp.asarray(c)
    else:
        other = xp.asarray(other, dtype=arr.dtype if is_float(arr.dtype) else None, device=array_api_compat.device(arr))
    return (arr, other) if arr is x else (other, arr)


def _native_or_pure(name: str, pure: Callable[..., Any]) -> Callable[..., Any]:
    """The forward of ``special.<name>``: the backend's ``name`` where it has one, else
    ``pure``; a binary one makes a Python scalar an array like the other argument first."""

    def fwd(xp: Any, *args: Any) -> Any:
        if len(args) == 2:
            args = _pair(xp, *args)
        f = _native(xp, name)
        return pure(xp, *args) if f is None else f(*args)

    fwd.__name__ = fwd.__qualname__ = f"_{name}_fwd"
    return fwd


# ---------------------------------------------------------------------- erf, erfc
# For |x| < 0.5 the Taylor series of erf; otherwise erfc(z) = erfcx(z) exp(-z^2) with
# erfcx(z) = t exp(h(2t - 1)), t = 2 / (2 + z), h a Chebyshev series (28 terms, fitted with
# mpmath) good to ~1e-16 relative on [0.5, 10]; beyond 10 the asymptotic series of erfcx.
_ERFC_CHEB = (
    -0.6513268598908547, 0.6419697923564902, 0.019476473204185836, -0.009561514786808632,
    -0.0009465953444820369, 0.00036683949785276145, 4.252332480690777e-05, -2.0278578112534242e-05,
    -1.6242900046470256e-06, 1.3036558355805232e-06, 1.5626441722066142e-08, -8.523809591492654e-08,
    6.5290544390988515e-09, 5.0593434955514685e-09, -9.913641564930322e-10, -2.2736512229318417e-10,
    9.646791102014962e-11, 2.394038083065756e-12, -6.886027526536277e-12, 8.944879271730368e-13,
    3.130921408127142e-13, -1.1270822525221733e-13, 3.8108713588528985e-16, 7.106125536922576e-15,
    -1.5230878975373303e-15, -9.464871412184462e-17, 1.218683266906788e-16, -3.0494735135424696e-17,
)


def _erf_small(xp: Any, x: Any) -> Any:
    """erf by its Taylor series: exact to rounding for |x| < 0.5 (x is clipped there)."""
    x = xp.clip(x, -0.5, 0.5)
    x2 = x * x
    term = x
    series = x
    for n in range(1, 14):
        term = term * (-x2) / n
        series = series + term / (2 * n + 1)
    return series * _TWO_OVER_SQRT_PI


def _erfcx_big(xp: Any, a: Any) -> Any:
    """``exp(a**2) * erfc(a)`` for a >= 0.5 (other values give finite garbage, to be masked)."""
    z = xp.clip(a, 0.5, 10.0)
    t = 2.0 / (2.0 + z)
    u2 = 2.0 * (2.0 * t - 1.0)
    b1 = b2 = xp.zeros_like(z)
    for c in _ERFC_CHEB[:0:-1]:
        b1, b2 = u2 * b1 - b2 + c, b1
    mid = t * xp.exp(0.5 * u2 * b1 - b2 + _ERFC_CHEB[0])
    w = xp.clip(a, 10.0, math.inf)
    iw = 1.0 / w
    v = 0.5 * (iw * iw)  # 0 for huge w: the series is then 1
    s = xp.ones_like(w)
    term = s
    for k in range(1, 12):
        term = term * (-(2 * k - 1) * v)
        s = s + term
    return xp.where(a > 10.0, s * (iw / _SQRT_PI), mid)


def _erf_pure(xp: Any, x: Any) -> Any:
    a = xp.abs(x)
    big = 1.0 - _erfcx_big(xp, a) * xp.exp(-xp.clip(a, 0.5, 30.0) ** 2)
    return xp.where(a < 0.5, _erf_small(xp, x), xp.where(x < 0, -big, big))


def _erfc_pure(xp: Any, x: Any) -> Any:
    a = xp.abs(x)
    tail = _erfcx_big(xp, a) * xp.exp(-xp.clip(a, 0.5, 40.0) ** 2)  # exp(-1600) is 0 anyway
    return xp.where(a < 0.5, 1.0 - _erf_small(xp, x), xp.where(x < 0, 2.0 - tail, tail))


def _gauss(xp: Any, x: Any, scale: float) -> Any:
    """``scale * exp(-x**2)``, without overflow of ``x * x``."""
    xc = xp.clip(x, -40.0, 40.0)
    return scale * xp.exp(-(xc * xc))



# ---------------------------------------------------------------------- normal distribution
def _ndtr_pure(xp: Any, x: Any) -> Any:
    return 0.5 * _erfc_pure(xp, x * -_INV_SQRT2)


def _log_ndtr_pure(xp: Any, x: Any) -> Any:
    z = x * -_INV_SQRT2
    # right of 0: log1p(-Q(x)), Q small; left: log(erfc(z) / 2), in the far tail through
    # erfcx so that nothing underflows: log(erfcx(z)) - z^2 - log(2)
    right = xp.log1p(-0.5 * _erfc_pure(xp, xp.clip(x, 0.0, math.inf) * _INV_SQRT2))
    zc = xp.clip(z, 0.0, math.inf)
    near = xp.log(0.5 * _erfc_pure(xp, xp.clip(zc, 0.0, 0.5)))
    big = math.sqrt(float(xp.finfo(x.dtype).max)) / 2  # beyond, -z^2 overflows: the result is -inf
    zf = xp.clip(zc, 0.5, big)
    far = xp.where(zc > big, -math.inf, xp.log(_erfcx_big(xp, zf)) - zf * zf - _LN2)
    return xp.where(x > 0, right, xp.where(zc < 0.5, near, far))


def _log_ndtr_d(xp: Any, ans: Any, x: Any) -> Any:
    # phi(x) / Phi(x) = exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi), as PyTorch
    return _INV_SQRT_2PI * xp.exp(-0.5 * (x * x) - ans)


# ---------------------------------------------------------------------- logistic
def _expit_pure(xp: Any, x: Any) -> Any:
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1.0, e) / (1.0 + e)


def _logit_pure(xp: Any, x: Any) -> Any:
    # log(x) - log1p(-x): -inf at 0, inf at 1, NaN outside [0, 1]; no divide-by-zero warnings
    lx = xp.where(x > 0, xp.log(xp.where(x > 0, x, 1.0)), xp.where(x == 0, -math.inf, xp.full_like(x, math.nan)))
    l1mx = xp.where(x < 1, xp.log1p(-xp.where(x < 1, x, 0.0)), xp.where(x == 1, -math.inf, xp.full_like(x, math.nan)))
    return lx - l1mx


# ---------------------------------------------------------------------- gamma family
# Lanczos approximation, g = 7, 9 terms: relative error ~1e-15 in Gamma for x >= 1/2
_LANCZOS_G = 7.0
_LANCZOS = (
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
    -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
    1.5056327351493116e-7,
)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _sinpi_abs(xp: Any, x: Any) -> tuple[Any, Any]:
    """``(|sin(pi x)|, x is an integer)``, with the argument reduced exactly first (finite x)."""
    r = x - xp.round(x)  # exact, in [-1/2, 1/2]
    pole = r == 0
    return xp.where(pole, 1.0, xp.abs(xp.sin(math.pi * r))), pole


def _gammaln_pure(xp: Any, x: Any) -> Any:
    finite = xp.isfinite(x)
    xf = xp.where(finite, x, 0.0)
    reflect = xf < 0.5
    z = xp.where(reflect, 1.0 - xf, xf) - 1.0  # z >= -1/2
    a = xp.full_like(z, _LANCZOS[0])
    for i, c in enumerate(_LANCZOS[1:], start=1):
        a = a + c / (z + i)
    t = z + (_LANCZOS_G + 0.5)
    lg = _HALF_LOG_2PI + (z + 0.5) * (xp.log(t) - 1.0) - _LANCZOS_G + xp.log(a)
    s, pole = _sinpi_abs(xp, xf)
    out = xp.where(reflect, (math.log(math.pi) - xp.log(s)) - lg, lg)
    out = xp.where(xp.logical_and(reflect, pole), math.inf, out)
    return xp.where(finite, out, xp.abs(x))  # +-inf -> inf, NaN stays


# Bernoulli numbers B_2, B_4, ..., B_20 for the asymptotic series of the polygamma functions
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330)


@cache
def _cot_derivative(n: int) -> tuple[float, ...]:
    """Coefficients (ascending) of Q_n with d^n/dx^n cot(pi x) = pi^n Q_n(cot(pi x))."""
    q = [0.0, 1.0]  # Q_0(c) = c; Q_{k+1} = -(1 + c^2) Q_k'
    for _ in range(n):
        d = [i * q[i] for i in range(1, len(q))] or [0.0]
        nq = [0.0] * (len(d) + 2)
        for i, v in enumerate(d):
            nq[i] -= v
            nq[i + 2] -= v
        q = nq
    return tuple(q)


def _psi_pure(xp: Any, x: Any, n: int = 0) -> Any:
    """The polygamma function psi^(n) (n = 0: digamma), for real floating x."""
    finite = xp.isfinite(x)
    xf = xp.where(finite, x, 1.0)
    reflect = xf < 0.5
    z = xp.where(reflect, 1.0 - xf, xf)  # >= 1/2
    shift = 10 + 2 * n
    acc = xp.zeros_like(z)
    for k in range(shift):  # psi^(n)(z) = psi^(n)(z + 1) - (-1)^n n! / z^(n+1)
        acc = acc + (z + k) ** -(n + 1)
    y = z + shift
    iy = 1.0 / y
    iy2 = iy * iy
    if n == 0:
        series = xp.zeros_like(y)
        p = iy2
        for k, b in enumerate(_BERNOULLI, start=1):
            series = series + (b / (2 * k)) * p
            p = p * iy2
        out = xp.log(y) - 0.5 * iy - series - acc
    else:
        # (-1)^(n+1) [(n-1)!/y^n + n!/(2 y^(n+1)) + sum_k B_2k (2k+n-1)!/(2k)! / y^(2k+n)]
        series = math.factorial(n - 1) + (math.factorial(n) / 2.0) / y
        p = iy2
        for k, b in enumerate(_BERNOULLI, start=1):
            series = series + (b * math.factorial(2 * k + n - 1) / math.factorial(2 * k)) * p
            p = p * iy2
        sign = -1.0 if n % 2 == 0 else 1.0
        out = sign * (series * iy**n + math.factorial(n) * acc)
    # reflection: psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) Q_n(cot(pi x))
    r = xf - xp.round(xf)
    pole = r == 0
    sr = xp.where(pole, 1.0, xp.sin(math.pi * r))
    c = xp.cos(math.pi * r) / sr
    q = xp.zeros_like(c)
    for coef in reversed(_cot_derivative(n)):
        q = q * c + coef
    refl = (out if n % 2 == 0 else -out) - math.pi ** (n + 1) * q
    out = xp.where(reflect, refl, out)
    # at the poles (non-positive integers), as SciPy: digamma is NaN (its sign flips) but
    # -inf / inf at -0 / +0; polygamma is (-1)^(n+1) inf
    if n == 0:
        at_pole, at_zero = math.nan, xp.where(xp.signbit(xf), math.inf, xp.full_like(xf, -math.inf))
    else:
        at_pole = at_zero = math.inf if n % 2 == 1 else -math.inf
    out = xp.where(xp.logical_and(reflect, pole), xp.where(xf == 0, at_zero, xp.full_like(xf, at_pole)), out)
    # psi(inf) = inf, psi^(n)(inf) = 0; psi(-inf) is NaN
    at_inf = math.inf if n == 0 else 0.0
    return xp.where(finite, out, xp.where(x > 0, at_inf, xp.full_like(x, math.nan)))


# native functions passed over: torch's trigamma has a relative error of ~5e-10 that is not
# smooth (its central differences are off by 1e-3), where the pure one is good to 1e-15
_AVOID = {("torch.special", 1)}


def _polygamma_fwd(xp: Any, x: Any, *, n: int) -> Any:
    f = _native(xp, "polygamma")
    if f is None or (_lib(xp).__name__, n) in _AVOID:
        return _psi_pure(xp, x, n)
    # (CuPy's polygamma compares its order with 0 as an array: a Python int there is a bool, which
    # its where() refuses)
    order = xp.asarray(n, device=array_api_compat.device(x)) if _lib(xp).__name__.startswith("cupyx") else n
    out = f(order, x)
    return out if out.dtype == x.dtype else xp.astype(out, x.dtype)  # SciPy's polygamma computes in float64


polygamma_p: Primitive = op.primitive("polygamma", fwd=_polygamma_fwd, save=(0,), batch=pointwise,
                                      vjp=(lambda xp, g, ans, x, *, n: g * _call(xp, polygamma_p, x, n=n + 1),),
                                      jvp=(lambda xp, t, ans, x, *, n: t * _call(xp, polygamma_p, x, n=n + 1),))


# ---------------------------------------------------------------------- x log y and entropies
def _safe_log(xp: Any, y: Any) -> Any:
    """log(y) where y > 0, else log(1) = 0 (masked by the caller); no warnings."""
    return xp.log(xp.where(y > 0, y, 1.0))


def _log_or_edge(xp: Any, y: Any) -> Any:
    """log(y) as the logarithm gives it: -inf at 0, NaN below 0 and at NaN; no warnings."""
    return xp.where(y > 0, _safe_log(xp, y), xp.where(y == 0, -math.inf, xp.full_like(y, math.nan)))


def _log1p_or_edge(xp: Any, y: Any) -> Any:
    """log1p(y): -inf at -1, NaN below -1 and at NaN; no warnings."""
    yp = y + 1.0
    return xp.where(yp > 0, xp.log1p(xp.where(yp > 0, y, 0.0)), xp.where(yp == 0, -math.inf, xp.full_like(yp, math.nan)))


def _div_or_inf(xp: Any, x: Any, d: Any) -> Any:
    """``x / d`` for real arrays, as the division gives it where ``d`` is (+-)0 (+-inf, NaN for
    ``x == 0``), without NumPy's divide-by-zero warning."""
    zero = d == 0
    return xp.where(zero, times_inf(xp, xp.where(xp.signbit(d), -x, x)), x / xp.where(zero, 1.0, d))


def _xlogy_pure(xp: Any, x: Any, y: Any) -> Any:
    # log of a negative y is NaN; log(0) is -inf, taken without a divide-by-zero warning
    return x * xp.where(xp.logical_and(x == 0, xp.logical_not(xp.isnan(y))), 0.0, _log_or_edge(xp, y))


def _xlog1py_pure(xp: Any, x: Any, y: Any) -> Any:
    return x * xp.where(xp.logical_and(x == 0, xp.logical_not(xp.isnan(y))), 0.0, _log1p_or_edge(xp, y))


# PyTorch's rules: d/dx is 0 where x == 0 and y <= 0, else log(y) (-inf at y == 0, NaN below 0
# and at NaN, +inf at +inf), and d/dy = x / y (+-inf, NaN at 0 / 0). The derivatives
# read the arguments as the engine saved them, a Python scalar as it came: _pair makes it an
# array first
def _xlogy_dx(xp: Any, x: Any, y: Any) -> Any:
    x, y = _pair(xp, x, y)
    return xp.where(xp.logical_and(x == 0, y <= 0), 0.0, _log_or_edge(xp, y))


def _xlogy_dy(xp: Any, x: Any, y: Any) -> Any:
    x, y = _pair(xp, x, y)
    return _div_or_inf(xp, x, y)


def _xlog1py_dx(xp: Any, x: Any, y: Any) -> Any:
    x, y = _pair(xp, x, y)
    return xp.where(xp.logical_and(x == 0, y <= -1), 0.0, _log1p_or_edge(xp, y))


def _xlog1py_dy(xp: Any, x: Any, y: Any) -> Any:
    x, y = _pair(xp, x, y)
    return _div_or_inf(xp, x, y + 1.0)


def _entr_d(xp: Any, x: Any) -> Any:
    # -(log(x) + 1), as PyTorch: +inf at 0, NaN below 0 and at NaN, -inf at +inf
    return -(_log_or_edge(xp, x) + 1.0)


def _entr_pure(xp: Any, x: Any) -> Any:
    # -x log x for x > 0, 0 at 0, -inf for x < 0, NaN stays NaN
    xm = xp.where(x > 0, x, 1.0)
    inner = -xm * xp.log(xm)
    return xp.where(x > 0, inner, xp.where(x == 0, 0.0, xp.where(x < 0, -math.inf, x)))


def _rel_entr_pure(xp: Any, x: Any, y: Any) -> Any:
    # x log(x / y) for x, y > 0; 0 for x == 0, y >= 0; inf otherwise; NaN in, NaN out
    pos = xp.logical_and(x > 0, y > 0)
    both = xp.logical_and(pos, xp.logical_and(xp.isfinite(x), xp.isfinite(y)))
    xm = xp.where(both, x, 1.0)
    inner = xm * (xp.log(xm) - xp.log(xp.where(both, y, 1.0)))
    out = xp.where(both, inner, xp.where(xp.logical_and(x == 0, y >= 0), 0.0, xp.full_like(inner, math.inf)))
    out = xp.where(xp.logical_and(pos, y == math.inf), xp.where(x == math.inf, math.nan, xp.full_like(out, -math.inf)), out)
    return xp.where(xp.logical_or(xp.isnan(x), xp.isnan(y)), math.nan, out)


def _rel_entr_dx(xp: Any, x: Any, y: Any) -> Any:
    x, y = _pair(xp, x, y)
    both = xp.logical_and(x > 0, y > 0)
    return xp.where(both, _safe_log(xp, x) - _safe_log(xp, y) + 1.0, 0.0)


def _rel_entr_dy(xp: Any, x: Any, y: Any) -> Any:
    x, y = _pair(xp, x, y)
    both = xp.logical_and(x > 0, y > 0)
    return xp.where(both, -x / xp.where(both, y, 1.0), 0.0)


# ---------------------------------------------------------------------- reductions
def _axes(ndim: int, axis: Any) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(a % ndim if ndim else a for a in axis)


def _keep(xp: Any, r: Any, like: Any, axis: Any, keepdims: bool) -> Any:
    """``r`` (reduced without keepdims) with the reduced axes of ``like`` put back as size 1."""
    if keepdims:
        return r
    axes = _axes(like.ndim, axis)
    shape = tuple(1 if i in axes else s for i, s in enumerate(like.shape))
    return xp.reshape(r, shape)


def _shift(xp: Any, x: Any, axis: Any) -> Any:
    """The maximum along ``axis`` (keepdims), with non-finite maxima made 0: x - m never is inf - inf."""
    m = xp.max(x, axis=axis, keepdims=True)
    return xp.where(xp.isfinite(m), m, 0.0)


def _native_reduction(xp: Any, name: str) -> Callable[..., Any] | None:
    """The backend's own ``logsumexp(x, axis, keepdims)`` / ``softmax(x, axis)`` /
    ``log_softmax(x, axis)``, or None (Dask and array-api-strict use the array-API code).

    The callables return None where the backend cannot take the axes (torch's softmax
    takes one axis), and the caller falls back to the array-API code.
    """
    key = (id(xp), f"reduction.{name}")
    if key in _FNS:
        return _FNS[key]
    base = _tracing.base_namespace(xp)
    if base is not None:  # under xg.jit: the backend's function, recorded as one call of the program
        native = _native_reduction(base, name)
        _FNS[key] = traced = None if native is None else _tracing.recorded(native, f"special.{name}", xp)
        return traced
    import array_api_compat as c

    f: Callable[..., Any] | None = None
    try:
        if c.is_numpy_namespace(xp) or c.is_cupy_namespace(xp):
            mod = _lib(xp)  # scipy.special / cupyx.scipy.special
            raw = getattr(mod, name, None) if mod is not None else None
            if raw is not None:
                asarray = xp.asarray  # SciPy gives NumPy scalars for 0-d results
                if name == "logsumexp":
                    f = lambda x, axis, keepdims: asarray(raw(x, axis=axis, keepdims=keepdims))
                else:
                    f = lambda x, axis: asarray(raw(x, axis=axis))
        elif c.is_torch_namespace(xp):
            import torch

            f = _torch_reduction(torch, name)
        elif c.is_jax_namespace(xp):
            import jax

            if name == "logsumexp":
                lse = jax.scipy.special.logsumexp
                f = lambda x, axis, keepdims: lse(x, axis=axis, keepdims=keepdims)
            else:
                g = getattr(jax.nn, name)
                f = lambda x, axis: g(x, axis=axis)
    except ImportError:
        f = None
    _FNS[key] = f
    return f


def _torch_reduction(torch: Any, name: str) -> Callable[..., Any]:
    if name == "logsumexp":
        # (torch reads dim=() as every axis; a reduction over no axis is x itself)
        return lambda x, axis, keepdims: (torch.logsumexp(x, dim=dims, keepdim=keepdims)
                                          if (dims := _axes(x.ndim, axis)) else x.clone())
    g = getattr(torch, name)

    def one_axis(x: Any, axis: Any) -> Any:
        axes = _axes(x.ndim, axis)
        return g(x, dim=axes[0]) if len(axes) == 1 else None

    return one_axis


# (float16 and bfloat16: these three and their rules compute in float32, as torch's do)
@in_float32
def _logsumexp_fwd(xp: Any, x: Any, *, axis: Any, keepdims: bool) -> Any:
    f = _native_reduction(xp, "logsumexp")
    if f is not None:
        return f(x, axis, keepdims)
    m = _shift(xp, x, axis)
    s = xp.sum(xp.exp(x - m), axis=axis, keepdims=True)
    out = xp.where(s > 0, xp.log(xp.where(s > 0, s, 1.0)), -math.inf) + m
    if keepdims:
        return out
    axes = _axes(x.ndim, axis)
    return xp.reshape(out, tuple(s for i, s in enumerate(x.shape) if i not in axes))


def _logsumexp_d(xp: Any, ans: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    return xp.exp(x - _keep(xp, ans, x, axis, keepdims))  # softmax(x) along axis


logsumexp_p = op.primitive(
    "logsumexp", fwd=_logsumexp_fwd, save=(0,), save_ans=True, batch=along_axes,
    vjp=(in_float32(lambda xp, g, ans, x, *, axis, keepdims: _keep(xp, g, x, axis, keepdims) * _logsumexp_d(xp, ans, x, axis, keepdims)),),
    jvp=(in_float32(lambda xp, t, ans, x, *, axis, keepdims:
                    xp.sum(t * _logsumexp_d(xp, ans, x, axis, keepdims), axis=axis, keepdims=keepdims)),))


@in_float32
def _softmax_fwd(xp: Any, x: Any, *, axis: Any) -> Any:
    f = _native_reduction(xp, "softmax")
    out = None if f is None else f(x, axis)
    if out is not None:
        return out
    e = xp.exp(x - _shift(xp, x, axis))
    return e / xp.sum(e, axis=axis, keepdims=True)


@in_float32
def _log_softmax_fwd(xp: Any, x: Any, *, axis: Any) -> Any:
    f = _native_reduction(xp, "log_softmax")
    out = None if f is None else f(x, axis)
    if out is not None:
        return out
    s = x - _shift(xp, x, axis)
    return s - xp.log(xp.sum(xp.exp(s), axis=axis, keepdims=True))


softmax_p = op.primitive(
    "softmax", fwd=_softmax_fwd, save=(), save_ans=True, batch=along_axes,
    vjp=(in_float32(lambda xp, g, ans, x, *, axis: ans * (g - xp.sum(g * ans, axis=axis, keepdims=True))),),
    jvp=(in_float32(lambda xp, t, ans, x, *, axis: ans * (t - xp.sum(t * ans, axis=axis, keepdims=True))),))

log_softmax_p = op.primitive(
    "log_softmax", fwd=_log_softmax_fwd, save=(), save_ans=True, batch=along_axes,
    vjp=(in_float32(lambda xp, g, ans, x, *, axis: g - xp.exp(ans) * xp.sum(g, axis=axis, keepdims=True)),),
    jvp=(in_float32(lambda xp, t, ans, x, *, axis: t - xp.sum(xp.exp(ans) * t, axis=axis, keepdims=True)),))


# ---------------------------------------------------------------------- public functions
# The pointwise functions: registry entries, their forward the backend's own or the pure
# one (_native_or_pure), their rules derived from the derivative d (VJP g * d, JVP t * d,
# what d reads saved); gammaln's and digamma's derivatives are the next primitives, called
# through _call so that they are recorded under create_graph.
@op.pointwise(d=lambda xp, x: _gauss(xp, x, _TWO_OVER_SQRT_PI), fwd=_native_or_pure("erf", _erf_pure),
              test=Inputs(domain=(-3.0, 3.0), complex=False), fuzz="{N}.special.erf({a})")
def erf(x: Any, /) -> Tensor:
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t**2) dt``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.erf(xg.asarray([0.0, 0.5, -2.0]))
        Tensor([ 0.        ,  0.52049988, -0.99532227], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, x: _gauss(xp, x, -_TWO_OVER_SQRT_PI), fwd=_native_or_pure("erfc", _erfc_pure),
              test=Inputs(domain=(-3.0, 3.0), complex=False), fuzz="{N}.special.erfc({a})")
def erfc(x: Any, /) -> Tensor:
    """The complementary error function ``1 - erf(x)``, accurate in the right tail.

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.erfc(xg.asarray([0.0, 10.0]))
        Tensor([1.00000000e+00, 2.08848758e-45], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, x: _gauss(xp, x * _INV_SQRT2, _INV_SQRT_2PI), fwd=_native_or_pure("ndtr", _ndtr_pure),
              test=Inputs(domain=(-3.0, 3.0), complex=False), fuzz="{N}.special.ndtr({a})")
def ndtr(x: Any, /) -> Tensor:
    """The standard normal cumulative distribution function.

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.ndtr(xg.asarray([0.0, 1.0]))
        Tensor([0.5       , 0.84134475], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, ans, x: _log_ndtr_d(xp, ans, x), fwd=_native_or_pure("log_ndtr", _log_ndtr_pure),
              test=Inputs(domain=(-6.0, 3.0), complex=False), fuzz="{N}.special.log_ndtr({a})")
def log_ndtr(x: Any, /) -> Tensor:
    """``log(ndtr(x))``, finite far into the left tail.

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.log_ndtr(xg.asarray([0.0, -40.0]))
        Tensor([-6.93147181e-01, -8.04608442e+02], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, ans: ans * (1.0 - ans), fwd=_native_or_pure("expit", _expit_pure),
              test=Inputs(domain=(-5.0, 5.0), complex=False), fuzz="{N}.special.expit({a})")
def expit(x: Any, /) -> Tensor:
    """The logistic sigmoid ``1 / (1 + exp(-x))``, without overflow.

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.expit(xg.asarray([0.0, -1000.0]))
        Tensor([0.5, 0. ], dtype=float64, device=cpu)
    """


@op.pointwise(d=over(lambda xp, x: x * (1.0 - x)), fwd=_native_or_pure("logit", _logit_pure),
              test=Inputs(domain=(0.05, 0.95), complex=False),
              fuzz="{N}.special.logit(0.05 + 0.9 * {N}.special.expit({a}))")
def logit(x: Any, /) -> Tensor:
    """The inverse of [`expit`][xpgrad.special.expit]: ``log(x / (1 - x))``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.logit(xg.asarray([0.5, 0.75]))
        Tensor([0.        , 1.09861229], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, x: _call(xp, _digamma, x), fwd=_native_or_pure("gammaln", _gammaln_pure),
              test=Inputs(domain=(0.2, 6.0), complex=False), fuzz="{N}.special.gammaln(0.5 + {a} * {a})")
def gammaln(x: Any, /) -> Tensor:
    """``log(|Gamma(x)|)``; its derivative is [`digamma`][xpgrad.special.digamma].

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.gammaln(xg.asarray([1.0, 5.0, 0.5]))
        Tensor([0.        , 3.17805383, 0.57236494], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, x: _call(xp, polygamma_p, x, n=1), fwd=_native_or_pure("digamma", _psi_pure),
              test=Inputs(domain=(0.3, 6.0), complex=False, rtol=1e-4), fuzz="{N}.special.digamma(0.5 + {a} * {a})")
def digamma(x: Any, /) -> Tensor:
    """The digamma function ``d/dx log(Gamma(x))`` (also [`psi`][xpgrad.special.digamma]).

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.digamma(xg.asarray([1.0, 0.5]))
        Tensor([-0.57721566, -1.96351003], dtype=float64, device=cpu)
    """


_digamma: Primitive = prim_of(digamma)  # (gammaln's derivative)
psi = op.alias("psi", digamma)  # SciPy's name, the one its array-API path looks up


@op.entry(polygamma_p)
def polygamma(n: int, x: Any, /) -> Tensor:
    """The ``n``-th derivative of [`digamma`][xpgrad.special.digamma] (``n`` a non-negative Python int).

    Raises:
        XpgradValueError: ``n`` is not a non-negative integer.

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.polygamma(1, xg.asarray([1.0]))
        Tensor([1.64493407], dtype=float64, device=cpu)
    """
    try:
        k = int(n)
    except (TypeError, ValueError):
        k = -1
    if isinstance(n, bool) or k < 0 or k != n:
        msg = f"polygamma: n must be a non-negative integer, got {n!r}"
        raise XpgradValueError(msg)
    if k == 0:
        return digamma(x)
    return polygamma_p.bind(x, n=k)


@op.pointwise(d=(_xlogy_dx, _xlogy_dy), fwd=_native_or_pure("xlogy", _xlogy_pure),
              test=Inputs(domain=[(-2.0, 2.0), (0.2, 3.0)], complex=False), fuzz="{N}.special.xlogy({a}, 0.5 + {b} * {b})")
def xlogy(x: Any, y: Any, /) -> Tensor:
    """``x * log(y)``, and 0 where ``x == 0`` (unless ``y`` is NaN).

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.xlogy(xg.asarray([0.0, 2.0]), xg.asarray([0.0, 3.0]))
        Tensor([0.        , 2.19722458], dtype=float64, device=cpu)
    """


@op.pointwise(d=(_xlog1py_dx, _xlog1py_dy), fwd=_native_or_pure("xlog1py", _xlog1py_pure),
              test=Inputs(domain=[(-2.0, 2.0), (-0.7, 2.0)], complex=False), fuzz="{N}.special.xlog1py({a}, {b} * {b})")
def xlog1py(x: Any, y: Any, /) -> Tensor:
    """``x * log1p(y)``, and 0 where ``x == 0`` (unless ``y`` is NaN).

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.xlog1py(xg.asarray([0.0, 2.0]), xg.asarray([-1.0, 1e-10]))
        Tensor([0.e+00, 2.e-10], dtype=float64, device=cpu)
    """


@op.pointwise(d=_entr_d, fwd=_native_or_pure("entr", _entr_pure),
              test=Inputs(domain=(0.1, 3.0), complex=False), fuzz="{N}.special.entr(0.5 + {a} * {a})")
def entr(x: Any, /) -> Tensor:
    """The elementwise entropy ``-x * log(x)`` (0 at 0, ``-inf`` for negative x).

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.entr(xg.asarray([0.0, 0.5]))
        Tensor([0.        , 0.34657359], dtype=float64, device=cpu)
    """


# PyTorch has no rel_entr: compared with its formula
@op.pointwise(d=(_rel_entr_dx, _rel_entr_dy), fwd=_native_or_pure("rel_entr", _rel_entr_pure),
              test=Inputs(domain=[(0.1, 2.0), (0.1, 2.0)], complex=False, torch=lambda t, a, b: a * t.log(a / b)),
              fuzz=("{N}.special.rel_entr(0.5 + {a} * {a}, 0.5 + {b} * {b})",
                    "(0.5 + {a} * {a}) * torch.log((0.5 + {a} * {a}) / (0.5 + {b} * {b}))"))
def rel_entr(x: Any, y: Any, /) -> Tensor:
    """The elementwise relative entropy ``x * log(x / y)`` (see ``scipy.special.rel_entr``).

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.rel_entr(xg.asarray([0.0, 0.5]), xg.asarray([0.3, 0.25]))
        Tensor([0.        , 0.34657359], dtype=float64, device=cpu)
    """


@op.entry(logsumexp_p)
def logsumexp(x: Any, /, axis: int | tuple[int, ...] | None = None, *, keepdims: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` along ``axis`` (default: all axes), shifted by the maximum.

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.logsumexp(xg.asarray([0.0, 1000.0]))
        Tensor(1000., dtype=float64, device=cpu)
    """
    return logsumexp_p.bind(x, axis=axis, keepdims=keepdims)


@op.entry(softmax_p)
def softmax(x: Any, /, axis: int | tuple[int, ...] | None = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis`` (default: all axes, as SciPy), without overflow.

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.softmax(xg.asarray([0.0, 1000.0]))
        Tensor([0., 1.], dtype=float64, device=cpu)
    """
    return softmax_p.bind(x, axis=axis)


@op.entry(log_softmax_p)
def log_softmax(x: Any, /, axis: int | tuple[int, ...] | None = None) -> Tensor:
    """``x - logsumexp(x)`` along ``axis`` (default: all axes, as SciPy), without overflow.

    Examples:
        >>> import xpgrad as xg
        >>> xg.special.log_softmax(xg.asarray([0.0, 1000.0]))
        Tensor([-1000.,     0.], dtype=float64, device=cpu)
    """
    return log_softmax_p.bind(x, axis=axis)


op.check_all(__all__)
