"""Elementwise functions: forwards and VJP rules, side by side.

Rules receive ``(xp, g, ans, *args, **kw)`` and return the gradient for one
argument; broadcasting is undone by the engine. Forward mode reuses the VJP rules:
every primitive here except ``sign`` gets its JVP rules from
:func:`~xpgrad.ops._common.defjvp_from_vjp` (``t * d`` from ``g * conj(d)``). Complex inputs follow PyTorch's
convention (see :func:`xpgrad.ops._common.conj`): the VJP of a holomorphic ``f``
is ``g * conj(f'(z))``; ``abs``, ``real``, ``imag``, ``conj`` and ``sign`` have
their own Wirtinger rules. Python scalars are accepted on either side of binary
functions, as the standard allows.
"""

from __future__ import annotations

import cmath
import math
from typing import Any

from ._common import NOKW, Array, apply, apply1, apply2, defjvp_from_vjp, is_complex, primitive, promoting
from ._common import conj as _conj  # the public ``conj`` below takes the name
from ._common import scale as _scale  # g * d, in place when the engine owns g
from ._common import times_inf as _times_inf

__all__ = [
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_invert", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "ceil", "clip", "conj", "copysign", "cos", "cosh", "divide", "equal", "exp", "expm1",
    "floor", "floor_divide", "greater", "greater_equal", "hypot", "imag", "isfinite", "isinf",
    "isnan", "less", "less_equal", "log", "log1p", "log2", "log10", "logaddexp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "real", "reciprocal", "remainder", "round",
    "sign", "signbit", "sin", "sinh", "square", "sqrt", "subtract", "tan", "tanh", "trunc",
    "where",
]

_C = "elementwise"
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)

# ---------------------------------------------------------------- arithmetic
_add = primitive("add", promoting(lambda xp, a, b: a + b), save=(), chapter=_C)
_add.defvjp(lambda xp, g, ans, a, b: g, lambda xp, g, ans, a, b: g)
defjvp_from_vjp(_add)

_subtract = primitive("subtract", promoting(lambda xp, a, b: a - b), save=(), chapter=_C)
_subtract.defvjp(lambda xp, g, ans, a, b: g, lambda xp, g, ans, a, b: -g)
defjvp_from_vjp(_subtract)

_multiply = primitive("multiply", promoting(lambda xp, a, b: a * b), chapter=_C)
_multiply.defvjp(lambda xp, g, ans, a, b: _scale(xp, g, _conj(xp, b)),
                 lambda xp, g, ans, a, b: _scale(xp, g, _conj(xp, a)))
defjvp_from_vjp(_multiply)

_divide = primitive("divide", promoting(lambda xp, a, b: a / b), save=(1,), save_ans=True, chapter=_C)
_divide.defvjp(lambda xp, g, ans, a, b: g / _conj(xp, b),
               lambda xp, g, ans, a, b: -g * _conj(xp, ans / b))
defjvp_from_vjp(_divide)

# the functions, not the unary operators: Dask returns NotImplemented from them for unsupported dtypes
_negative = primitive("negative", lambda xp, x: xp.negative(x), save=(), chapter=_C)
_negative.defvjp(lambda xp, g, ans, x: -g)
defjvp_from_vjp(_negative)

_positive = primitive("positive", lambda xp, x: xp.positive(x), save=(), view=True, chapter=_C)
_positive.defvjp(lambda xp, g, ans, x: g)
defjvp_from_vjp(_positive)

_square = primitive("square", lambda xp, x: xp.square(x), save=(0,), chapter=_C)
_square.defvjp(lambda xp, g, ans, x: g * _conj(xp, 2 * x))
defjvp_from_vjp(_square)

def _div_or_inf(xp: Any, g: Any, d: Any) -> Any:
    """``g / d`` for real ``d >= 0``, as the division gives it (``+-inf`` or NaN where ``d == 0``),
    without the division by zero that NumPy warns about."""
    zero = d == 0
    return xp.where(zero, _times_inf(xp, g), g / xp.where(zero, 1.0, d))


def _sqrt_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    # g / (2 sqrt(x)): +-inf (NaN for g == 0) at x == 0, as PyTorch, with no RuntimeWarning
    if is_complex(ans) or is_complex(g):
        return g / _conj(xp, 2 * ans)
    return _div_or_inf(xp, g, 2 * ans)


_sqrt = primitive("sqrt", lambda xp, x: xp.sqrt(x), save=(), save_ans=True, chapter=_C)
_sqrt.defvjp(_sqrt_vjp)
defjvp_from_vjp(_sqrt)

_reciprocal = primitive("reciprocal", lambda xp, x: xp.reciprocal(x), save=(), save_ans=True, chapter=_C)
_reciprocal.defvjp(lambda xp, g, ans, x: -g * _conj(xp, ans * ans))
defjvp_from_vjp(_reciprocal)


def _pow_vjp_x1(xp: Any, g: Any, ans: Any, x1: Any, x2: Any) -> Any:
    # d/dx1 x1**x2 = x2 * x1**(x2 - 1), zero at x2 == 0 as PyTorch. At x1 == x2 == 0 the exponent
    # is made 1 (0 * 0**1 = 0, not 0 * inf = NaN); elsewhere the formula is kept as it is, so it
    # stays differentiable in x2 for second order.
    if not hasattr(x2, "shape"):
        if x2 == 0:  # x1 ** 0 is constant: a zero gradient (not None: x1.grad is zeros, as PyTorch)
            return xp.zeros_like(g)
        if x2 == 2:
            return g * _conj(xp, x2 * x1)
        e: Any = x2 - 1
    elif not hasattr(x1, "shape"):
        e = xp.where(x2 == 0, 1.0, x2 - 1) if x1 == 0 else x2 - 1
    else:
        e = xp.where(xp.logical_and(x2 == 0, x1 == 0), 1.0, x2 - 1)
    scalar_e = not hasattr(e, "shape")
    if (not hasattr(x1, "shape") or (scalar_e and (isinstance(e, complex) or e >= 0))
            or is_complex(x1) or is_complex(g) or (not scalar_e and is_complex(x2))):
        return g * _conj(xp, x2 * x1**e)
    # 0 ** (negative) is inf: the gradient there is g * x2 * inf (+-inf, NaN for 0), as
    # PyTorch, computed without the division by zero that NumPy warns about
    pole = x1 == 0 if scalar_e else xp.logical_and(x1 == 0, e < 0)
    gx2 = g * x2
    return xp.where(pole, _times_inf(xp, gx2), gx2 * xp.where(pole, 1.0, x1) ** e)


def _scalar_log(x: float | complex) -> float | complex:
    if isinstance(x, complex):
        return cmath.log(x)
    return math.log(x) if x > 0 else math.nan  # a negative real base: NaN, as PyTorch


def _pow_vjp_x2(xp: Any, g: Any, ans: Any, x1: Any, x2: Any) -> Any:
    # d/dx2 x1**x2 = x1**x2 * log(x1); zero where x1 == 0 and real(x2) >= 0, as PyTorch: there
    # log(x1) is taken at 1 instead of 0 (no inf * 0 = NaN)
    nonneg = (xp.real(x2) if is_complex(x2) else x2) >= 0
    if not hasattr(x1, "shape"):
        if x1 == 0:
            return g * xp.where(nonneg, 0.0, -math.inf)  # 0**x2 * log(0): 0, or inf * -inf
        return g * _conj(xp, ans * _scalar_log(x1))
    safe = xp.where(xp.logical_and(x1 == 0, nonneg), 1.0, x1)
    return g * _conj(xp, ans * xp.log(safe))


_pow = primitive("pow", promoting(lambda xp, a, b: a ** b), save_ans=True, chapter=_C)
_pow.defvjp(_pow_vjp_x1, _pow_vjp_x2)
defjvp_from_vjp(_pow)

_remainder = primitive("remainder", promoting(lambda xp, a, b: a % b), chapter=_C)
_remainder.defvjp(lambda xp, g, ans, a, b: g, lambda xp, g, ans, a, b: -g * xp.floor_divide(a, b))
defjvp_from_vjp(_remainder)

_floor_divide = primitive("floor_divide", promoting(lambda xp, a, b: a // b), zero_grad=True, chapter=_C)


# ties (x1 == x2) split the gradient evenly, g/2 each, as PyTorch
_maximum = primitive("maximum", promoting(lambda xp, a, b: xp.maximum(a, b)), chapter=_C)
_maximum.defvjp(lambda xp, g, ans, a, b: xp.where(a < b, 0.0, xp.where(a == b, g / 2, g)),
                lambda xp, g, ans, a, b: xp.where(b < a, 0.0, xp.where(a == b, g / 2, g)))
defjvp_from_vjp(_maximum)

_minimum = primitive("minimum", promoting(lambda xp, a, b: xp.minimum(a, b)), chapter=_C)
_minimum.defvjp(lambda xp, g, ans, a, b: xp.where(a > b, 0.0, xp.where(a == b, g / 2, g)),
                lambda xp, g, ans, a, b: xp.where(b > a, 0.0, xp.where(a == b, g / 2, g)))
defjvp_from_vjp(_minimum)


def _clip_vjp_x(xp: Any, g: Any, ans: Any, x: Any, lo: Any, hi: Any) -> Any:
    # PyTorch: the gradient flows to x where min <= x <= max (boundaries included)
    inside = None if lo is None else x >= lo
    if hi is not None:
        below = x <= hi
        inside = below if inside is None else xp.logical_and(inside, below)
    return g if inside is None else xp.where(inside, g, 0.0)


def _clip_vjp_min(xp: Any, g: Any, ans: Any, x: Any, lo: Any, hi: Any) -> Any:
    wins = x < lo
    if hi is not None:  # with min > max the result is max
        wins = xp.logical_and(wins, lo <= hi)
    return xp.where(wins, g, 0.0)


def _clip_vjp_max(xp: Any, g: Any, ans: Any, x: Any, lo: Any, hi: Any) -> Any:
    wins = x > hi
    if lo is not None:
        wins = xp.logical_or(wins, hi < lo)
    return xp.where(wins, g, 0.0)


_clip = primitive("clip", lambda xp, x, lo, hi: xp.clip(x, lo, hi), chapter=_C)
_clip.defvjp(_clip_vjp_x, _clip_vjp_min, _clip_vjp_max)
defjvp_from_vjp(_clip)

_copysign = primitive("copysign", promoting(lambda xp, a, b: xp.copysign(a, b)), save=(0,), save_ans=True, chapter=_C)
# d/dx1 = +-1 (0 at x1 == 0, as PyTorch); zero almost everywhere with respect to x2
_copysign.defvjp(lambda xp, g, ans, a, b: g * (xp.sign(a) * xp.sign(ans)), lambda xp, g, ans, a, b: xp.zeros_like(g))
defjvp_from_vjp(_copysign)

_nextafter = primitive("nextafter", promoting(lambda xp, a, b: xp.nextafter(a, b)), zero_grad=True, chapter=_C)

# ---------------------------------------------------------------- complex parts
_abs = primitive("abs", lambda xp, x: xp.abs(x), save=(0,), chapter=_C)


def _abs_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    if not is_complex(x):
        return g * xp.sign(x)
    a = xp.abs(x)  # complex: g * z/|z|, and 0 at z == 0 (no 0/0 computed)
    return g * (x / xp.where(a == 0, 1.0, a))


_abs.defvjp(_abs_vjp)
defjvp_from_vjp(_abs)

_real = primitive("real", lambda xp, x: xp.real(x), save=(), view=True, chapter=_C)
_real.defvjp(lambda xp, g, ans, x: g)
defjvp_from_vjp(_real)

_imag = primitive("imag", lambda xp, x: xp.imag(x), save=(), view=True, chapter=_C)
_imag.defvjp(lambda xp, g, ans, x: g * 1j)
defjvp_from_vjp(_imag)

_conj_p = primitive("conj", lambda xp, x: xp.conj(x), save=(), view=True, chapter=_C)
_conj_p.defvjp(lambda xp, g, ans, x: _conj(xp, g))
defjvp_from_vjp(_conj_p)


def _sign_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    # real: zero almost everywhere (zeros, not None: x.grad is zeros, as PyTorch);
    # complex sgn(z) = z/|z|: (g - sgn**2 * conj(g)) / (2|z|)
    if not is_complex(x):
        return xp.zeros_like(g)
    a = xp.abs(x)
    zero = a == 0
    return xp.where(zero, 0.0, (g - ans * ans * _conj(xp, g)) / (2 * xp.where(zero, 1.0, a)))


def _sign_jvp(xp: Any, t: Any, ans: Any, x: Any) -> Any:
    # real: zero almost everywhere; complex: d(z/|z|) = (t - sgn * Re(conj(sgn) * t)) / |z|
    if not is_complex(x):
        return None
    a = xp.abs(x)
    zero = a == 0
    return xp.where(zero, 0.0, (t - ans * xp.real(xp.conj(ans) * t)) / xp.where(zero, 1.0, a))


_sign = primitive("sign", lambda xp, x: xp.sign(x), save=(0,), save_ans=True, chapter=_C)
_sign.defvjp(_sign_vjp)
_sign.defjvp(_sign_jvp)

# ---------------------------------------------------------------- exponential and logarithm
_exp = primitive("exp", lambda xp, x: xp.exp(x), save=(), save_ans=True, chapter=_C)
_exp.defvjp(lambda xp, g, ans, x: _scale(xp, g, _conj(xp, ans)))
defjvp_from_vjp(_exp)

_expm1 = primitive("expm1", lambda xp, x: xp.expm1(x), save=(), save_ans=True, chapter=_C)
_expm1.defvjp(lambda xp, g, ans, x: g * _conj(xp, ans + 1))
defjvp_from_vjp(_expm1)

_log = primitive("log", lambda xp, x: xp.log(x), save=(0,), chapter=_C)
_log.defvjp(lambda xp, g, ans, x: g / _conj(xp, x))
defjvp_from_vjp(_log)

_log1p = primitive("log1p", lambda xp, x: xp.log1p(x), save=(0,), chapter=_C)
_log1p.defvjp(lambda xp, g, ans, x: g / _conj(xp, x + 1))
defjvp_from_vjp(_log1p)

_log2 = primitive("log2", lambda xp, x: xp.log2(x), save=(0,), chapter=_C)
_log2.defvjp(lambda xp, g, ans, x: g / _conj(xp, x * _LN2))
defjvp_from_vjp(_log2)

_log10 = primitive("log10", lambda xp, x: xp.log10(x), save=(0,), chapter=_C)
_log10.defvjp(lambda xp, g, ans, x: g / _conj(xp, x * _LN10))
defjvp_from_vjp(_log10)

_logaddexp = primitive("logaddexp", promoting(lambda xp, a, b: xp.logaddexp(a, b)), save_ans=True, chapter=_C)
_logaddexp.defvjp(lambda xp, g, ans, a, b: g * xp.exp(a - ans), lambda xp, g, ans, a, b: g * xp.exp(b - ans))
defjvp_from_vjp(_logaddexp)

_hypot = primitive("hypot", promoting(lambda xp, a, b: xp.hypot(a, b)), save_ans=True, chapter=_C)
def _hypot_part(xp: Any, g: Any, ans: Any, a: Any) -> Any:
    # g * a / hypot: NaN at (0, 0) (0 / 0), as PyTorch, without NumPy's RuntimeWarning
    zero = ans == 0
    return xp.where(zero, math.nan, g * (a / xp.where(zero, 1.0, ans)))


_hypot.defvjp(lambda xp, g, ans, a, b: _hypot_part(xp, g, ans, a), lambda xp, g, ans, a, b: _hypot_part(xp, g, ans, b))
defjvp_from_vjp(_hypot)

# ---------------------------------------------------------------- trigonometric and hyperbolic
_sin = primitive("sin", lambda xp, x: xp.sin(x), save=(0,), chapter=_C)
_sin.defvjp(lambda xp, g, ans, x: _scale(xp, g, _conj(xp, xp.cos(x))))
defjvp_from_vjp(_sin)

_cos = primitive("cos", lambda xp, x: xp.cos(x), save=(0,), chapter=_C)
_cos.defvjp(lambda xp, g, ans, x: -g * _conj(xp, xp.sin(x)))
defjvp_from_vjp(_cos)

_tan = primitive("tan", lambda xp, x: xp.tan(x), save=(), save_ans=True, chapter=_C)
_tan.defvjp(lambda xp, g, ans, x: g * _conj(xp, 1 + ans * ans))
defjvp_from_vjp(_tan)

_asin = primitive("asin", lambda xp, x: xp.asin(x), save=(0,), chapter=_C)
_asin.defvjp(lambda xp, g, ans, x: g / _conj(xp, xp.sqrt(1 - x * x)))
defjvp_from_vjp(_asin)

_acos = primitive("acos", lambda xp, x: xp.acos(x), save=(0,), chapter=_C)
_acos.defvjp(lambda xp, g, ans, x: -g / _conj(xp, xp.sqrt(1 - x * x)))
defjvp_from_vjp(_acos)

_atan = primitive("atan", lambda xp, x: xp.atan(x), save=(0,), chapter=_C)
_atan.defvjp(lambda xp, g, ans, x: g / _conj(xp, 1 + x * x))
defjvp_from_vjp(_atan)

_atan2 = primitive("atan2", promoting(lambda xp, a, b: xp.atan2(a, b)), chapter=_C)
def _atan2_recip(xp: Any, a: Any, b: Any) -> Any:
    # 1 / (a**2 + b**2), made 0 where it is infinite (at the origin), as PyTorch's atan2_backward
    d = a * a + b * b
    zero = d == 0
    return xp.where(zero, 0.0, 1.0 / xp.where(zero, 1.0, d))


_atan2.defvjp(lambda xp, g, ans, a, b: g * b * _atan2_recip(xp, a, b), lambda xp, g, ans, a, b: -g * a * _atan2_recip(xp, a, b))
defjvp_from_vjp(_atan2)

_sinh = primitive("sinh", lambda xp, x: xp.sinh(x), save=(0,), chapter=_C)
_sinh.defvjp(lambda xp, g, ans, x: g * _conj(xp, xp.cosh(x)))
defjvp_from_vjp(_sinh)

_cosh = primitive("cosh", lambda xp, x: xp.cosh(x), save=(0,), chapter=_C)
_cosh.defvjp(lambda xp, g, ans, x: g * _conj(xp, xp.sinh(x)))
defjvp_from_vjp(_cosh)

_tanh = primitive("tanh", lambda xp, x: xp.tanh(x), save=(), save_ans=True, chapter=_C)
_tanh.defvjp(lambda xp, g, ans, x: _scale(xp, g, _conj(xp, 1 - ans * ans)))
defjvp_from_vjp(_tanh)

_asinh = primitive("asinh", lambda xp, x: xp.asinh(x), save=(0,), chapter=_C)
_asinh.defvjp(lambda xp, g, ans, x: g / _conj(xp, xp.sqrt(x * x + 1)))
defjvp_from_vjp(_asinh)

# sqrt(x - 1) * sqrt(x + 1), not sqrt(x*x - 1): the right branch for complex x
_acosh = primitive("acosh", lambda xp, x: xp.acosh(x), save=(0,), chapter=_C)
_acosh.defvjp(lambda xp, g, ans, x: g / _conj(xp, xp.sqrt(x - 1) * xp.sqrt(x + 1)))
defjvp_from_vjp(_acosh)

_atanh = primitive("atanh", lambda xp, x: xp.atanh(x), save=(0,), chapter=_C)
_atanh.defvjp(lambda xp, g, ans, x: g / _conj(xp, 1 - x * x))
defjvp_from_vjp(_atanh)

# ---------------------------------------------------------------- rounding (zero gradient)
_ceil = primitive("ceil", lambda xp, x: xp.ceil(x), zero_grad=True, chapter=_C)
_floor = primitive("floor", lambda xp, x: xp.floor(x), zero_grad=True, chapter=_C)
_round = primitive("round", lambda xp, x: xp.round(x), zero_grad=True, chapter=_C)
_trunc = primitive("trunc", lambda xp, x: xp.trunc(x), zero_grad=True, chapter=_C)

# ---------------------------------------------------------------- selection
_where = primitive("where", lambda xp, c, a, b: xp.where(c, a, b), save=(0,), chapter="searching")
_where.defvjp(None, lambda xp, g, ans, c, a, b: xp.where(c, g, 0.0), lambda xp, g, ans, c, a, b: xp.where(c, 0.0, g))
defjvp_from_vjp(_where)

# ---------------------------------------------------------------- boolean and integer outputs (not differentiable)
_equal = primitive("equal", promoting(lambda xp, a, b: a == b), nondiff=True, chapter=_C)
_not_equal = primitive("not_equal", promoting(lambda xp, a, b: a != b), nondiff=True, chapter=_C)
_greater = primitive("greater", promoting(lambda xp, a, b: a > b), nondiff=True, chapter=_C)
_greater_equal = primitive("greater_equal", promoting(lambda xp, a, b: a >= b), nondiff=True, chapter=_C)
_less = primitive("less", promoting(lambda xp, a, b: a < b), nondiff=True, chapter=_C)
_less_equal = primitive("less_equal", promoting(lambda xp, a, b: a <= b), nondiff=True, chapter=_C)
_isfinite = primitive("isfinite", lambda xp, x: xp.isfinite(x), nondiff=True, chapter=_C)
_isinf = primitive("isinf", lambda xp, x: xp.isinf(x), nondiff=True, chapter=_C)
_isnan = primitive("isnan", lambda xp, x: xp.isnan(x), nondiff=True, chapter=_C)
_signbit = primitive("signbit", lambda xp, x: xp.signbit(x), nondiff=True, chapter=_C)
_logical_and = primitive("logical_and", lambda xp, a, b: xp.logical_and(a, b), nondiff=True, chapter=_C)
_logical_or = primitive("logical_or", lambda xp, a, b: xp.logical_or(a, b), nondiff=True, chapter=_C)
_logical_xor = primitive("logical_xor", lambda xp, a, b: xp.logical_xor(a, b), nondiff=True, chapter=_C)
_logical_not = primitive("logical_not", lambda xp, x: xp.logical_not(x), nondiff=True, chapter=_C)
_bitwise_and = primitive("bitwise_and", promoting(lambda xp, a, b: a & b), nondiff=True, chapter=_C)
_bitwise_or = primitive("bitwise_or", promoting(lambda xp, a, b: a | b), nondiff=True, chapter=_C)
_bitwise_xor = primitive("bitwise_xor", promoting(lambda xp, a, b: a ^ b), nondiff=True, chapter=_C)
_bitwise_invert = primitive("bitwise_invert", lambda xp, x: xp.bitwise_invert(x), nondiff=True, chapter=_C)
# the functions, not the operators: array-api-strict checks x2 >= 0 only in the functions
_bitwise_left_shift = primitive("bitwise_left_shift", promoting(lambda xp, a, b: xp.bitwise_left_shift(a, b)), nondiff=True, chapter=_C)
_bitwise_right_shift = primitive("bitwise_right_shift", promoting(lambda xp, a, b: xp.bitwise_right_shift(a, b)), nondiff=True, chapter=_C)


def abs(x: Array, /) -> Array:  # noqa: A001 - the standard's name
    """Elementwise absolute value; for complex ``z`` the gradient is ``g * z/|z|``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.abs(xg.asarray([-1.5, 2.0]))
        Tensor([1.5, 2. ], dtype=float64, device=cpu)
    """
    return apply1(_abs, x, NOKW)


def acos(x: Array, /) -> Array:
    """Elementwise inverse cosine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.acos(xg.asarray([1.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_acos, x, NOKW)


def acosh(x: Array, /) -> Array:
    """Elementwise inverse hyperbolic cosine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.acosh(xg.asarray([1.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_acosh, x, NOKW)


def add(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 + x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.add(xg.asarray([1.0]), 2.0)
        Tensor([3.], dtype=float64, device=cpu)
    """
    return apply2(_add, x1, x2, NOKW)


def asin(x: Array, /) -> Array:
    """Elementwise inverse sine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.asin(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_asin, x, NOKW)


def asinh(x: Array, /) -> Array:
    """Elementwise inverse hyperbolic sine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.asinh(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_asinh, x, NOKW)


def atan(x: Array, /) -> Array:
    """Elementwise inverse tangent.

    Examples:
        >>> import xpgrad as xg
        >>> xg.atan(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_atan, x, NOKW)


def atan2(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise angle of the point ``(x2, x1)``, in ``[-pi, pi]``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.atan2(xg.asarray([1.0]), 1.0)
        Tensor([0.78539816], dtype=float64, device=cpu)
    """
    return apply2(_atan2, x1, x2, NOKW)


def atanh(x: Array, /) -> Array:
    """Elementwise inverse hyperbolic tangent.

    Examples:
        >>> import xpgrad as xg
        >>> xg.atanh(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_atanh, x, NOKW)


def bitwise_and(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise ``x1 & x2`` (integer or boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_and(xg.asarray([6, 3]), 5)
        Tensor([4, 1], dtype=int64, device=cpu)
    """
    return apply2(_bitwise_and, x1, x2, NOKW)


def bitwise_invert(x: Array, /) -> Array:
    """Elementwise ``~x`` (integer or boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_invert(xg.asarray([True, False]))
        Tensor([False,  True], dtype=bool, device=cpu)
    """
    return apply1(_bitwise_invert, x, NOKW)


def bitwise_left_shift(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise ``x1 << x2`` (integer; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_left_shift(xg.asarray([1, 2]), 2)
        Tensor([4, 8], dtype=int64, device=cpu)
    """
    return apply2(_bitwise_left_shift, x1, x2, NOKW)


def bitwise_or(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise ``x1 | x2`` (integer or boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_or(xg.asarray([6, 3]), 5)
        Tensor([7, 7], dtype=int64, device=cpu)
    """
    return apply2(_bitwise_or, x1, x2, NOKW)


def bitwise_right_shift(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise ``x1 >> x2`` (integer; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_right_shift(xg.asarray([8, 4]), 2)
        Tensor([2, 1], dtype=int64, device=cpu)
    """
    return apply2(_bitwise_right_shift, x1, x2, NOKW)


def bitwise_xor(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise ``x1 ^ x2`` (integer or boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_xor(xg.asarray([6, 3]), 5)
        Tensor([3, 6], dtype=int64, device=cpu)
    """
    return apply2(_bitwise_xor, x1, x2, NOKW)


def ceil(x: Array, /) -> Array:
    """Elementwise ceiling (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.ceil(xg.asarray([1.2, -1.2]))
        Tensor([ 2., -1.], dtype=float64, device=cpu)
    """
    return apply1(_ceil, x, NOKW)


def clip(x: Array, /, min: Array | float | None = None, max: Array | float | None = None) -> Array:  # noqa: A002 - the standard's names
    """Clamp ``x`` to ``[min, max]``; differentiable in ``x`` and in array bounds.

    Examples:
        >>> import xpgrad as xg
        >>> xg.clip(xg.asarray([-2.0, 0.5, 3.0]), -1.0, 1.0)
        Tensor([-1. ,  0.5,  1. ], dtype=float64, device=cpu)
    """
    return apply(_clip, (x, min, max), NOKW)


def conj(x: Array, /) -> Array:
    """Elementwise complex conjugate (the identity for real ``x``).

    Examples:
        >>> import xpgrad as xg
        >>> xg.conj(xg.asarray([1 + 2j]))
        Tensor([1.-2.j], dtype=complex128, device=cpu)
    """
    return apply1(_conj_p, x, NOKW)


def copysign(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``|x1|`` with the sign of ``x2`` (gradient zero in ``x2``).

    Examples:
        >>> import xpgrad as xg
        >>> xg.copysign(xg.asarray([1.5, -2.0]), -1.0)
        Tensor([-1.5, -2. ], dtype=float64, device=cpu)
    """
    return apply2(_copysign, x1, x2, NOKW)


def cos(x: Array, /) -> Array:
    """Elementwise cosine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.cos(xg.asarray([0.0]))
        Tensor([1.], dtype=float64, device=cpu)
    """
    return apply1(_cos, x, NOKW)


def cosh(x: Array, /) -> Array:
    """Elementwise hyperbolic cosine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.cosh(xg.asarray([0.0]))
        Tensor([1.], dtype=float64, device=cpu)
    """
    return apply1(_cosh, x, NOKW)


def divide(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 / x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.divide(xg.asarray([3.0]), 2.0)
        Tensor([1.5], dtype=float64, device=cpu)
    """
    return apply2(_divide, x1, x2, NOKW)


def equal(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 == x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.equal(xg.asarray([1.0, 2.0]), 2.0)
        Tensor([False,  True], dtype=bool, device=cpu)
    """
    return apply2(_equal, x1, x2, NOKW)


def exp(x: Array, /) -> Array:
    """Elementwise exponential.

    Examples:
        >>> import xpgrad as xg
        >>> xg.exp(xg.asarray([0.0]))
        Tensor([1.], dtype=float64, device=cpu)
    """
    return apply1(_exp, x, NOKW)


def expm1(x: Array, /) -> Array:
    """Elementwise ``exp(x) - 1``, accurate for small ``x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.expm1(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_expm1, x, NOKW)


def floor(x: Array, /) -> Array:
    """Elementwise floor (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.floor(xg.asarray([1.7, -1.2]))
        Tensor([ 1., -2.], dtype=float64, device=cpu)
    """
    return apply1(_floor, x, NOKW)


def floor_divide(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 // x2`` (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.floor_divide(xg.asarray([7.0, -7.0]), 2.0)
        Tensor([ 3., -4.], dtype=float64, device=cpu)
    """
    return apply2(_floor_divide, x1, x2, NOKW)


def greater(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 > x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.greater(xg.asarray([1.0, 3.0]), 2.0)
        Tensor([False,  True], dtype=bool, device=cpu)
    """
    return apply2(_greater, x1, x2, NOKW)


def greater_equal(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 >= x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.greater_equal(xg.asarray([1.0, 2.0]), 2.0)
        Tensor([False,  True], dtype=bool, device=cpu)
    """
    return apply2(_greater_equal, x1, x2, NOKW)


def hypot(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``sqrt(x1**2 + x2**2)`` without overflow.

    Examples:
        >>> import xpgrad as xg
        >>> xg.hypot(xg.asarray([3.0]), 4.0)
        Tensor([5.], dtype=float64, device=cpu)
    """
    return apply2(_hypot, x1, x2, NOKW)


def imag(x: Array, /) -> Array:
    """Elementwise imaginary part of a complex array.

    Examples:
        >>> import xpgrad as xg
        >>> xg.imag(xg.asarray([1 + 2j]))
        Tensor([2.], dtype=float64, device=cpu)
    """
    return apply1(_imag, x, NOKW)


def isfinite(x: Array, /) -> Array:
    """Elementwise test for finite values (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.isfinite(xg.asarray([1.0, float('inf')]))
        Tensor([ True, False], dtype=bool, device=cpu)
    """
    return apply1(_isfinite, x, NOKW)


def isinf(x: Array, /) -> Array:
    """Elementwise test for infinities (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.isinf(xg.asarray([1.0, float('inf')]))
        Tensor([False,  True], dtype=bool, device=cpu)
    """
    return apply1(_isinf, x, NOKW)


def isnan(x: Array, /) -> Array:
    """Elementwise test for NaN (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.isnan(xg.asarray([1.0, float('nan')]))
        Tensor([False,  True], dtype=bool, device=cpu)
    """
    return apply1(_isnan, x, NOKW)


def less(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 < x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.less(xg.asarray([1.0, 3.0]), 2.0)
        Tensor([ True, False], dtype=bool, device=cpu)
    """
    return apply2(_less, x1, x2, NOKW)


def less_equal(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 <= x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.less_equal(xg.asarray([1.0, 3.0]), 1.0)
        Tensor([ True, False], dtype=bool, device=cpu)
    """
    return apply2(_less_equal, x1, x2, NOKW)


def log(x: Array, /) -> Array:
    """Elementwise natural logarithm.

    Examples:
        >>> import xpgrad as xg
        >>> xg.log(xg.asarray([1.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_log, x, NOKW)


def log1p(x: Array, /) -> Array:
    """Elementwise ``log(1 + x)``, accurate for small ``x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.log1p(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_log1p, x, NOKW)


def log2(x: Array, /) -> Array:
    """Elementwise base-2 logarithm.

    Examples:
        >>> import xpgrad as xg
        >>> xg.log2(xg.asarray([8.0]))
        Tensor([3.], dtype=float64, device=cpu)
    """
    return apply1(_log2, x, NOKW)


def log10(x: Array, /) -> Array:
    """Elementwise base-10 logarithm.

    Examples:
        >>> import xpgrad as xg
        >>> xg.log10(xg.asarray([100.0]))
        Tensor([2.], dtype=float64, device=cpu)
    """
    return apply1(_log10, x, NOKW)


def logaddexp(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``log(exp(x1) + exp(x2))``, without overflow.

    Examples:
        >>> import xpgrad as xg
        >>> xg.logaddexp(xg.asarray([0.0]), 0.0)
        Tensor([0.69314718], dtype=float64, device=cpu)
    """
    return apply2(_logaddexp, x1, x2, NOKW)


def logical_and(x1: Array | bool, x2: Array | bool, /) -> Array:
    """Elementwise logical AND (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.logical_and(xg.asarray([True, False]), True)
        Tensor([ True, False], dtype=bool, device=cpu)
    """
    return apply2(_logical_and, x1, x2, NOKW)


def logical_not(x: Array, /) -> Array:
    """Elementwise logical NOT (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.logical_not(xg.asarray([True, False]))
        Tensor([False,  True], dtype=bool, device=cpu)
    """
    return apply1(_logical_not, x, NOKW)


def logical_or(x1: Array | bool, x2: Array | bool, /) -> Array:
    """Elementwise logical OR (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.logical_or(xg.asarray([True, False]), False)
        Tensor([ True, False], dtype=bool, device=cpu)
    """
    return apply2(_logical_or, x1, x2, NOKW)


def logical_xor(x1: Array | bool, x2: Array | bool, /) -> Array:
    """Elementwise logical XOR (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.logical_xor(xg.asarray([True, False]), True)
        Tensor([False,  True], dtype=bool, device=cpu)
    """
    return apply2(_logical_xor, x1, x2, NOKW)


def maximum(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise maximum; at ties the gradient is split evenly (``g/2`` each), as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.maximum(xg.asarray([1.0, 3.0]), 2.0)
        Tensor([2., 3.], dtype=float64, device=cpu)
    """
    return apply2(_maximum, x1, x2, NOKW)


def minimum(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise minimum; at ties the gradient is split evenly (``g/2`` each), as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.minimum(xg.asarray([1.0, 3.0]), 2.0)
        Tensor([1., 2.], dtype=float64, device=cpu)
    """
    return apply2(_minimum, x1, x2, NOKW)


def multiply(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 * x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.multiply(xg.asarray([3.0]), 2.0)
        Tensor([6.], dtype=float64, device=cpu)
    """
    return apply2(_multiply, x1, x2, NOKW)


def negative(x: Array, /) -> Array:
    """Elementwise ``-x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.negative(xg.asarray([1.0]))
        Tensor([-1.], dtype=float64, device=cpu)
    """
    return apply1(_negative, x, NOKW)


def nextafter(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise next representable value after ``x1`` towards ``x2`` (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nextafter(xg.asarray([1.0]), 2.0) > 1.0
        Tensor([ True], dtype=bool, device=cpu)
    """
    return apply2(_nextafter, x1, x2, NOKW)


def not_equal(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 != x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.not_equal(xg.asarray([1.0, 2.0]), 2.0)
        Tensor([ True, False], dtype=bool, device=cpu)
    """
    return apply2(_not_equal, x1, x2, NOKW)


def positive(x: Array, /) -> Array:
    """Elementwise ``+x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.positive(xg.asarray([-1.0]))
        Tensor([-1.], dtype=float64, device=cpu)
    """
    return apply1(_positive, x, NOKW)


def pow(x1: Array | complex, x2: Array | complex, /) -> Array:  # noqa: A001 - the standard's name
    """Elementwise ``x1 ** x2``; the exponent's gradient is zero where ``x1 == 0`` (as in PyTorch).

    Examples:
        >>> import xpgrad as xg
        >>> xg.pow(xg.asarray([2.0, 3.0]), 2.0)
        Tensor([4., 9.], dtype=float64, device=cpu)
    """
    return apply2(_pow, x1, x2, NOKW)


def real(x: Array, /) -> Array:
    """Elementwise real part (the identity for real ``x``).

    Examples:
        >>> import xpgrad as xg
        >>> xg.real(xg.asarray([1 + 2j]))
        Tensor([1.], dtype=float64, device=cpu)
    """
    return apply1(_real, x, NOKW)


def reciprocal(x: Array, /) -> Array:
    """Elementwise ``1 / x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.reciprocal(xg.asarray([4.0]))
        Tensor([0.25], dtype=float64, device=cpu)
    """
    return apply1(_reciprocal, x, NOKW)


def remainder(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 % x2`` with the sign of ``x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.remainder(xg.asarray([5.0, -5.0]), 3.0)
        Tensor([2., 1.], dtype=float64, device=cpu)
    """
    return apply2(_remainder, x1, x2, NOKW)


def round(x: Array, /) -> Array:  # noqa: A001 - the standard's name
    """Elementwise rounding to the nearest integer, half to even (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.round(xg.asarray([0.5, 1.5, 2.7]))
        Tensor([0., 2., 3.], dtype=float64, device=cpu)
    """
    return apply1(_round, x, NOKW)


def sign(x: Array, /) -> Array:
    """Elementwise sign; ``z/|z|`` for complex ``z`` (differentiable there, zero gradient for reals).

    Examples:
        >>> import xpgrad as xg
        >>> xg.sign(xg.asarray([-2.0, 0.0, 3.0]))
        Tensor([-1.,  0.,  1.], dtype=float64, device=cpu)
    """
    return apply1(_sign, x, NOKW)


def signbit(x: Array, /) -> Array:
    """Elementwise test of the sign bit (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.signbit(xg.asarray([-0.0, 1.0]))
        Tensor([ True, False], dtype=bool, device=cpu)
    """
    return apply1(_signbit, x, NOKW)


def sin(x: Array, /) -> Array:
    """Elementwise sine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.sin(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_sin, x, NOKW)


def sinh(x: Array, /) -> Array:
    """Elementwise hyperbolic sine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.sinh(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_sinh, x, NOKW)


def square(x: Array, /) -> Array:
    """Elementwise ``x * x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.square(xg.asarray([3.0]))
        Tensor([9.], dtype=float64, device=cpu)
    """
    return apply1(_square, x, NOKW)


def sqrt(x: Array, /) -> Array:
    """Elementwise square root.

    Examples:
        >>> import xpgrad as xg
        >>> xg.sqrt(xg.asarray([4.0]))
        Tensor([2.], dtype=float64, device=cpu)
    """
    return apply1(_sqrt, x, NOKW)


def subtract(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 - x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.subtract(xg.asarray([1.0]), 2.0)
        Tensor([-1.], dtype=float64, device=cpu)
    """
    return apply2(_subtract, x1, x2, NOKW)


def tan(x: Array, /) -> Array:
    """Elementwise tangent.

    Examples:
        >>> import xpgrad as xg
        >>> xg.tan(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_tan, x, NOKW)


def tanh(x: Array, /) -> Array:
    """Elementwise hyperbolic tangent.

    Examples:
        >>> import xpgrad as xg
        >>> xg.tanh(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply1(_tanh, x, NOKW)


def trunc(x: Array, /) -> Array:
    """Elementwise rounding towards zero (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.trunc(xg.asarray([1.7, -1.7]))
        Tensor([ 1., -1.], dtype=float64, device=cpu)
    """
    return apply1(_trunc, x, NOKW)


def where(condition: Array, x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elements of ``x1`` where ``condition`` is true, else of ``x2``; differentiable in both.

    Examples:
        >>> import xpgrad as xg
        >>> xg.where(xg.asarray([True, False]), xg.asarray([1.0, 2.0]), 0.0)
        Tensor([1., 0.], dtype=float64, device=cpu)
    """
    return apply(_where, (condition, x1, x2), NOKW)
