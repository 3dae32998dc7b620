"""Elementwise functions, one registry entry each (see `xpgrad.ops._registry`).

Most are declared by their derivative ``d`` (``sin``: ``d = cos(x)``; ``exp``: ``d = ans``;
``log``: ``d = 1 / x``, written ``over(x)``), from which the registry derives the VJP
``g * conj(d)`` (in place into a donated gradient buffer), the JVP ``t * d`` and the
batching rule. Complex inputs follow PyTorch's convention (see
`xpgrad.ops._common.conj`): the VJP of a holomorphic ``f`` is ``g * conj(f'(z))``.
Functions with kinks, poles or ties (``sqrt`` at 0, ``pow``, ``maximum``, ``clip``,
``hypot``, ``atan2``), and the non-holomorphic ones (``abs``, ``conj``, ``sign``) have
hand-written rules, their JVPs the VJPs conjugated. Python scalars are accepted on either
side of binary functions, as the standard allows.
"""

from __future__ import annotations

import cmath
import math
from typing import Any

from ..autograd._batching_util import pointwise
from ._common import Array, apply, is_complex, is_xpgrad, primitive
from ._common import conj as _conj  # the public ``conj`` below takes the name
from ._common import times_inf as _times_inf
from ._registry import Chapter, Inputs, over

op = Chapter("elementwise", module=__name__)

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)

# ---------------------------------------------------------------- arithmetic
@op.pointwise(d=(1, 1), fwd=lambda xp, a, b: a + b, fuzz="{N}.add({a}, {b})")
def add(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 + x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.add(xg.asarray([1.0]), 2.0)
        Tensor([3.], dtype=float64, device=cpu)
    """


@op.pointwise(d=(1, -1), fwd=lambda xp, a, b: a - b, test=Inputs(torch="sub"), fuzz="{N}.subtract({a}, {b})")
def subtract(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 - x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.subtract(xg.asarray([1.0]), 2.0)
        Tensor([-1.], dtype=float64, device=cpu)
    """


@op.pointwise(d=(lambda xp, x2: x2, lambda xp, x1: x1), fwd=lambda xp, a, b: a * b, test=Inputs(torch="mul"),
              fuzz="{N}.multiply({a}, {b})")
def multiply(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 * x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.multiply(xg.asarray([3.0]), 2.0)
        Tensor([6.], dtype=float64, device=cpu)
    """


@op.pointwise(d=(over(lambda xp, x2: x2), lambda xp, ans, x2: -ans / x2), fwd=lambda xp, a, b: a / b,
              test=Inputs(torch="div", domain=[(-2.0, 2.0), (0.3, 2.0)]), fuzz="{N}.divide({a}, 0.5 + {b} * {b})")
def divide(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 / x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.divide(xg.asarray([3.0]), 2.0)
        Tensor([1.5], dtype=float64, device=cpu)
    """


# the functions, not the unary operators: Dask returns NotImplemented from them for unsupported dtypes
@op.pointwise(d=-1, test=Inputs(torch="neg"), fuzz="{N}.negative({a})")
def negative(x: Array, /) -> Array:
    """Elementwise ``-x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.negative(xg.asarray([1.0]))
        Tensor([-1.], dtype=float64, device=cpu)
    """


@op.pointwise(d=1, view=True, fuzz="{N}.positive({a}) * 1.5")
def positive(x: Array, /) -> Array:
    """Elementwise ``+x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.positive(xg.asarray([-1.0]))
        Tensor([-1.], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, x: 2 * x, fuzz="{N}.square({a})")
def square(x: Array, /) -> Array:
    """Elementwise ``x * x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.square(xg.asarray([3.0]))
        Tensor([9.], dtype=float64, device=cpu)
    """


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


@op.pointwise(vjp=(_sqrt_vjp,), save=(), save_ans=True, test=Inputs(domain=(0.1, 3.0)), fuzz="{N}.sqrt(0.5 + {a} * {a})")
def sqrt(x: Array, /) -> Array:
    """Elementwise square root.

    Examples:
        >>> import xpgrad as xg
        >>> xg.sqrt(xg.asarray([4.0]))
        Tensor([2.], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, ans: -(ans * ans), test=Inputs(domain=(0.2, 2.0)), fuzz="{N}.reciprocal(0.5 + {a} * {a})")
def reciprocal(x: Array, /) -> Array:
    """Elementwise ``1 / x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.reciprocal(xg.asarray([4.0]))
        Tensor([0.25], dtype=float64, device=cpu)
    """


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
    # PyTorch, computed without the division by zero that NumPy warns about, by a primitive
    # whose own rules keep the pole one order up (d2/dx2 x ** 0.5 is -inf at 0, not 0)
    return _pole_power_call(xp, g * x2, x1, e)


def _pole_power_fwd(xp: Any, h: Any, x: Any, e: Any) -> Any:
    """``h * x ** e`` for real arguments; at a pole (``x == 0``, ``e < 0``) ``h * inf`` (+-inf,
    NaN where ``h`` is 0), without NumPy's divide-by-zero warning."""
    if not hasattr(e, "shape"):
        if e >= 0:
            return h * x**e
        pole = x == 0
    else:
        pole = xp.logical_and(x == 0, e < 0)
    return xp.where(pole, _times_inf(xp, h), h * xp.where(pole, 1.0, x) ** e)


def _pole_power_call(xp: Any, h: Any, x: Any, e: Any) -> Any:
    # inside a rule: the forward on raw arrays, recorded on Tensors (create_graph)
    if is_xpgrad(xp):
        return apply(_pole_power, (h, x, e), {})
    return _pole_power_fwd(xp, h, x, e)


def _pole_power_dx(xp: Any, c: Any, h: Any, x: Any, e: Any) -> Any:
    # c * d/dx (h x^e) = c h e x^(e - 1), 0 where e == 0 (h x^0 is constant, as PyTorch's pow):
    # there the exponent is made 1, not -1 (0 * 0^-1 would be NaN)
    if not hasattr(e, "shape"):
        e1: Any = 1.0 if e == 0 else e - 1
    else:
        e1 = xp.where(e == 0, 1.0, e - 1)
    return _pole_power_call(xp, c * h * e, x, e1)


def _pole_power_de(xp: Any, c: Any, h: Any, x: Any, e: Any) -> Any:
    # c * d/de (h x^e) = c h x^e log(x): 0 where x == 0 and e >= 0 (PyTorch's pow), -+inf at a pole
    zero = xp.logical_and(x == 0, e >= 0)
    xs = xp.where(zero, 1.0, x)
    log = xp.where(xs > 0, xp.log(xp.where(xs > 0, xs, 1.0)), xp.where(xs == 0, -math.inf, xp.full_like(xs, math.nan)))
    return xp.where(zero, 0.0, _pole_power_call(xp, c * h, xs, e) * log)


_pole_power = primitive("pow.pole_power", _pole_power_fwd, chapter="internal", batch=pointwise)
_pole_power.defvjp(lambda xp, g, ans, h, x, e: _pole_power_call(xp, g, x, e),
                   lambda xp, g, ans, h, x, e: _pole_power_dx(xp, g, h, x, e),
                   lambda xp, g, ans, h, x, e: _pole_power_de(xp, g, h, x, e))
_pole_power.defjvp(lambda xp, t, ans, h, x, e: _pole_power_call(xp, t, x, e),
                   lambda xp, t, ans, h, x, e: _pole_power_dx(xp, t, h, x, e),
                   lambda xp, t, ans, h, x, e: _pole_power_de(xp, t, h, x, e))


def _scalar_log(x: float | complex) -> float | complex:
    if isinstance(x, complex):
        return cmath.log(x)
    return math.log(x) if x > 0 else math.nan


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


@op.pointwise(vjp=(_pow_vjp_x1, _pow_vjp_x2), save_ans=True, fwd=lambda xp, a, b: a ** b,
              test=Inputs(domain=[(0.2, 2.0), (-2.0, 2.0)]), fuzz="{N}.pow(0.5 + {a} * {a}, {N}.tanh({b}))")
def pow(x1: Array | complex, x2: Array | complex, /) -> Array:  # noqa: A001 - the standard's name
    """Elementwise ``x1 ** x2``; the exponent's gradient is zero where ``x1 == 0`` (as in PyTorch).

    Examples:
        >>> import xpgrad as xg
        >>> xg.pow(xg.asarray([2.0, 3.0]), 2.0)
        Tensor([4., 9.], dtype=float64, device=cpu)
    """


# jumps where x1 / x2 is an integer: its cases are written by hand (tests/cases/elementwise.py)
@op.pointwise(d=(1, lambda xp, x1, x2: -xp.floor_divide(x1, x2)), fwd=lambda xp, a, b: a % b, test=None,
              fuzz="{N}.remainder({a} + 0.123, 0.7 + {b} * {b})")
def remainder(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 % x2`` with the sign of ``x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.remainder(xg.asarray([5.0, -5.0]), 3.0)
        Tensor([2., 1.], dtype=float64, device=cpu)
    """


@op.pointwise(zero_grad=True, fwd=lambda xp, a, b: a // b)
def floor_divide(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 // x2`` (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.floor_divide(xg.asarray([7.0, -7.0]), 2.0)
        Tensor([ 3., -4.], dtype=float64, device=cpu)
    """


def _max_vjp(xp: Any, g: Any, ans: Any, a: Any, b: Any) -> Any:
    # ties (x1 == x2) split the gradient evenly, g/2 each, as PyTorch
    return xp.where(a < b, 0.0, xp.where(a == b, g / 2, g))


def _min_vjp(xp: Any, g: Any, ans: Any, a: Any, b: Any) -> Any:
    return xp.where(a > b, 0.0, xp.where(a == b, g / 2, g))


@op.pointwise(vjp=(_max_vjp, lambda xp, g, ans, a, b: _max_vjp(xp, g, ans, b, a)), save=(0, 1),
              test=Inputs(complex=False, apart=True), fuzz="{N}.maximum({a}, {b} + 0.31)")
def maximum(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise maximum; at ties the gradient is split evenly (``g/2`` each), as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.maximum(xg.asarray([1.0, 3.0]), 2.0)
        Tensor([2., 3.], dtype=float64, device=cpu)
    """


@op.pointwise(vjp=(_min_vjp, lambda xp, g, ans, a, b: _min_vjp(xp, g, ans, b, a)), save=(0, 1),
              test=Inputs(complex=False, apart=True), fuzz="{N}.minimum({a}, {b} + 0.31)")
def minimum(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise minimum; at ties the gradient is split evenly (``g/2`` each), as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.minimum(xg.asarray([1.0, 3.0]), 2.0)
        Tensor([1., 2.], dtype=float64, device=cpu)
    """


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


# three arguments, bounds optional: its cases and fuzz op are written by hand
@op.pointwise(vjp=(_clip_vjp_x, _clip_vjp_min, _clip_vjp_max), save=(0, 1, 2), test=None)
def clip(x: Array, /, min: Array | float | None = None, max: Array | float | None = None) -> Array:  # noqa: A002 - the standard's names
    """Clamp ``x`` to ``[min, max]``; differentiable in ``x`` and in array bounds.

    Examples:
        >>> import xpgrad as xg
        >>> xg.clip(xg.asarray([-2.0, 0.5, 3.0]), -1.0, 1.0)
        Tensor([-1. ,  0.5,  1. ], dtype=float64, device=cpu)
    """


# d/dx1 = +-1 (0 at x1 == 0, as PyTorch); zero almost everywhere with respect to x2
@op.pointwise(vjp=(lambda xp, g, ans, a, b: g * (xp.sign(a) * xp.sign(ans)), lambda xp, g, ans, a, b: xp.zeros_like(g)),
              save=(0,), save_ans=True, test=Inputs(complex=False, away=(0.0,)),
              fuzz="{N}.copysign({a} - 0.123, {b} + 0.31)")
def copysign(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``|x1|`` with the sign of ``x2`` (gradient zero in ``x2``).

    Examples:
        >>> import xpgrad as xg
        >>> xg.copysign(xg.asarray([1.5, -2.0]), -1.0)
        Tensor([-1.5, -2. ], dtype=float64, device=cpu)
    """


@op.pointwise(zero_grad=True)
def nextafter(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise next representable value after ``x1`` towards ``x2`` (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nextafter(xg.asarray([1.0]), 2.0) > 1.0
        Tensor([ True], dtype=bool, device=cpu)
    """


# ---------------------------------------------------------------- complex parts
def _abs_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    if not is_complex(x):
        return g * xp.sign(x)
    a = xp.abs(x)  # complex: g * z/|z|, and 0 at z == 0 (no 0/0 computed)
    return g * (x / xp.where(a == 0, 1.0, a))


@op.pointwise(vjp=(_abs_vjp,), save=(0,), test=Inputs(away=(0.0,)), fuzz="{N}.abs({a} - 0.123)")
def abs(x: Array, /) -> Array:  # noqa: A001 - the standard's name
    """Elementwise absolute value; for complex ``z`` the gradient is ``g * z/|z|``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.abs(xg.asarray([-1.5, 2.0]))
        Tensor([1.5, 2. ], dtype=float64, device=cpu)
    """


@op.pointwise(d=1, view=True,
              fuzz=("xp.real(xp.astype({a}, xp.complex128) * (0.6 - 0.8j))", "torch.real({a}.to(torch.complex128) * (0.6 - 0.8j))"))
def real(x: Array, /) -> Array:
    """Elementwise real part (the identity for real ``x``).

    Examples:
        >>> import xpgrad as xg
        >>> xg.real(xg.asarray([1 + 2j]))
        Tensor([1.], dtype=float64, device=cpu)
    """


# the case multiplies by (1 + 2j) first: the imaginary part of a real input is constant
@op.pointwise(d=-1j, view=True, test=None,
              fuzz=("xp.imag(xp.astype({a}, xp.complex128) * (1 + 2j))", "torch.imag({a}.to(torch.complex128) * (1 + 2j))"))
def imag(x: Array, /) -> Array:
    """Elementwise imaginary part of a complex array.

    Examples:
        >>> import xpgrad as xg
        >>> xg.imag(xg.asarray([1 + 2j]))
        Tensor([2.], dtype=float64, device=cpu)
    """


# antiholomorphic: the VJP conjugates g (no derivative d with g * conj(d))
@op.pointwise(vjp=(lambda xp, g, ans, x: _conj(xp, g),), save=(), view=True, test=Inputs(torch="conj_physical"),
              fuzz=("xp.real(xp.conj(xp.astype({a}, xp.complex128) * (0.6 + 0.8j)) * (0.3 - 0.7j))",
                    "torch.real(torch.conj_physical({a}.to(torch.complex128) * (0.6 + 0.8j)) * (0.3 - 0.7j))"))
def conj(x: Array, /) -> Array:
    """Elementwise complex conjugate (the identity for real ``x``).

    Examples:
        >>> import xpgrad as xg
        >>> xg.conj(xg.asarray([1 + 2j]))
        Tensor([1.-2.j], dtype=complex128, device=cpu)
    """


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


# torch answers a real sgn's VJP with a ZeroTensor: its case is written by hand
@op.pointwise(vjp=(_sign_vjp,), jvp=(_sign_jvp,), save=(0,), save_ans=True, test=None,
              # a zero derivative on reals: multiplied by its argument it still shapes the gradient
              fuzz="{N}.sign({a} - 0.123) * {a}")
def sign(x: Array, /) -> Array:
    """Elementwise sign; ``z/|z|`` for complex ``z`` (differentiable there, zero gradient for reals).

    Examples:
        >>> import xpgrad as xg
        >>> xg.sign(xg.asarray([-2.0, 0.0, 3.0]))
        Tensor([-1.,  0.,  1.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- exponential and logarithm
@op.pointwise(d=lambda xp, ans: ans, fuzz="{N}.exp({a})")
def exp(x: Array, /) -> Array:
    """Elementwise exponential.

    Examples:
        >>> import xpgrad as xg
        >>> xg.exp(xg.asarray([0.0]))
        Tensor([1.], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, ans: ans + 1, fuzz="{N}.expm1({a})")
def expm1(x: Array, /) -> Array:
    """Elementwise ``exp(x) - 1``, accurate for small ``x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.expm1(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


@op.pointwise(d=over(lambda xp, x: x), test=Inputs(domain=(0.1, 3.0)), fuzz="{N}.log(0.5 + {a} * {a})")
def log(x: Array, /) -> Array:
    """Elementwise natural logarithm.

    Examples:
        >>> import xpgrad as xg
        >>> xg.log(xg.asarray([1.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


@op.pointwise(d=over(lambda xp, x: x + 1), test=Inputs(domain=(-0.5, 2.0)), fuzz="{N}.log1p({a} * {a})")
def log1p(x: Array, /) -> Array:
    """Elementwise ``log(1 + x)``, accurate for small ``x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.log1p(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


@op.pointwise(d=over(lambda xp, x: x * _LN2), test=Inputs(domain=(0.1, 3.0)), fuzz="{N}.log2(0.5 + {a} * {a})")
def log2(x: Array, /) -> Array:
    """Elementwise base-2 logarithm.

    Examples:
        >>> import xpgrad as xg
        >>> xg.log2(xg.asarray([8.0]))
        Tensor([3.], dtype=float64, device=cpu)
    """


@op.pointwise(d=over(lambda xp, x: x * _LN10), test=Inputs(domain=(0.1, 3.0)), fuzz="{N}.log10(0.5 + {a} * {a})")
def log10(x: Array, /) -> Array:
    """Elementwise base-10 logarithm.

    Examples:
        >>> import xpgrad as xg
        >>> xg.log10(xg.asarray([100.0]))
        Tensor([2.], dtype=float64, device=cpu)
    """


def _sigmoid_of_difference(xp: Any, a: Any, b: Any) -> Any:
    """``1 / (1 + exp(b - a))``, the derivative of ``logaddexp(a, b)`` in ``a`` (PyTorch's rule):
    exactly 0.5 at a tie, where ``exp(a - ans)`` lost to the rounding of ``ans`` (0.47 at 1e15).
    The exponent is capped below the dtype's overflow (700 for float64, 80 otherwise), where the
    result is below 1e-304 (1e-34) anyway: no overflow warning, and each op smooth for second order."""
    d = b - a
    cap = 700.0 if getattr(d, "dtype", None) == getattr(xp, "float64", None) else 80.0
    return 1.0 / (1.0 + xp.exp(xp.minimum(d, cap)))


@op.pointwise(d=(lambda xp, x1, x2: _sigmoid_of_difference(xp, x1, x2),
                 lambda xp, x1, x2: _sigmoid_of_difference(xp, x2, x1)),
              test=Inputs(complex=False, domain=(-3.0, 3.0)), fuzz="{N}.logaddexp({a}, {b})")
def logaddexp(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``log(exp(x1) + exp(x2))``, without overflow.

    Examples:
        >>> import xpgrad as xg
        >>> xg.logaddexp(xg.asarray([0.0]), 0.0)
        Tensor([0.69314718], dtype=float64, device=cpu)
    """


def _hypot_part(xp: Any, g: Any, ans: Any, a: Any) -> Any:
    # g * a / hypot: NaN at (0, 0) (0 / 0), as PyTorch, without NumPy's RuntimeWarning
    zero = ans == 0
    return xp.where(zero, math.nan, g * (a / xp.where(zero, 1.0, ans)))


@op.pointwise(vjp=(lambda xp, g, ans, a, b: _hypot_part(xp, g, ans, a), lambda xp, g, ans, a, b: _hypot_part(xp, g, ans, b)),
              save=(0, 1), save_ans=True, test=Inputs(complex=False, away=(0.0,)), fuzz="{N}.hypot({a} - 0.123, {b} + 0.31)")
def hypot(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``sqrt(x1**2 + x2**2)`` without overflow.

    Examples:
        >>> import xpgrad as xg
        >>> xg.hypot(xg.asarray([3.0]), 4.0)
        Tensor([5.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- trigonometric and hyperbolic
@op.pointwise(d=lambda xp, x: xp.cos(x), fuzz="{N}.sin({a})")
def sin(x: Array, /) -> Array:
    """Elementwise sine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.sin(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, x: -xp.sin(x), fuzz="{N}.cos({a})")
def cos(x: Array, /) -> Array:
    """Elementwise cosine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.cos(xg.asarray([0.0]))
        Tensor([1.], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, ans: 1 + ans * ans, test=Inputs(domain=(-1.2, 1.2)), fuzz="{N}.tan({N}.tanh({a}))")
def tan(x: Array, /) -> Array:
    """Elementwise tangent.

    Examples:
        >>> import xpgrad as xg
        >>> xg.tan(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


@op.pointwise(d=over(lambda xp, x: xp.sqrt(1 - x * x)), test=Inputs(domain=(-0.9, 0.9)), fuzz="{N}.asin(0.9 * {N}.tanh({a}))")
def asin(x: Array, /) -> Array:
    """Elementwise inverse sine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.asin(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


@op.pointwise(d=over(lambda xp, x: -xp.sqrt(1 - x * x)), test=Inputs(domain=(-0.9, 0.9)), fuzz="{N}.acos(0.9 * {N}.tanh({a}))")
def acos(x: Array, /) -> Array:
    """Elementwise inverse cosine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.acos(xg.asarray([1.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


@op.pointwise(d=over(lambda xp, x: 1 + x * x), test=Inputs(domain=(-0.9, 0.9)), fuzz="{N}.atan({a})")
def atan(x: Array, /) -> Array:
    """Elementwise inverse tangent.

    Examples:
        >>> import xpgrad as xg
        >>> xg.atan(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


def _atan2_recip(xp: Any, a: Any, b: Any) -> Any:
    # 1 / (a**2 + b**2), made 0 where it is infinite (at the origin), as PyTorch's atan2_backward
    d = a * a + b * b
    zero = d == 0
    return xp.where(zero, 0.0, 1.0 / xp.where(zero, 1.0, d))


@op.pointwise(vjp=(lambda xp, g, ans, a, b: g * b * _atan2_recip(xp, a, b), lambda xp, g, ans, a, b: -g * a * _atan2_recip(xp, a, b)),
              save=(0, 1), test=Inputs(complex=False, domain=[(0.2, 2.0), (-2.0, 2.0)]), fuzz="{N}.atan2(0.5 + {a} * {a}, {b})")
def atan2(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise angle of the point ``(x2, x1)``, in ``[-pi, pi]``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.atan2(xg.asarray([1.0]), 1.0)
        Tensor([0.78539816], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, x: xp.cosh(x), fuzz="{N}.sinh({a})")
def sinh(x: Array, /) -> Array:
    """Elementwise hyperbolic sine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.sinh(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, x: xp.sinh(x), fuzz="{N}.cosh({a})")
def cosh(x: Array, /) -> Array:
    """Elementwise hyperbolic cosine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.cosh(xg.asarray([0.0]))
        Tensor([1.], dtype=float64, device=cpu)
    """


@op.pointwise(d=lambda xp, ans: 1 - ans * ans, fuzz="{N}.tanh({a})")
def tanh(x: Array, /) -> Array:
    """Elementwise hyperbolic tangent.

    Examples:
        >>> import xpgrad as xg
        >>> xg.tanh(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


@op.pointwise(d=over(lambda xp, x: xp.sqrt(x * x + 1)), test=Inputs(domain=(-0.9, 0.9)), fuzz="{N}.asinh({a})")
def asinh(x: Array, /) -> Array:
    """Elementwise inverse hyperbolic sine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.asinh(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


# sqrt(x - 1) * sqrt(x + 1), not sqrt(x*x - 1): the right branch for complex x
@op.pointwise(d=over(lambda xp, x: xp.sqrt(x - 1) * xp.sqrt(x + 1)), test=Inputs(domain=(1.1, 3.0)),
              fuzz="{N}.acosh(1.5 + {a} * {a})")
def acosh(x: Array, /) -> Array:
    """Elementwise inverse hyperbolic cosine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.acosh(xg.asarray([1.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


@op.pointwise(d=over(lambda xp, x: 1 - x * x), test=Inputs(domain=(-0.9, 0.9)), fuzz="{N}.atanh(0.9 * {N}.tanh({a}))")
def atanh(x: Array, /) -> Array:
    """Elementwise inverse hyperbolic tangent.

    Examples:
        >>> import xpgrad as xg
        >>> xg.atanh(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- rounding (zero gradient)
@op.pointwise(zero_grad=True)
def ceil(x: Array, /) -> Array:
    """Elementwise ceiling (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.ceil(xg.asarray([1.2, -1.2]))
        Tensor([ 2., -1.], dtype=float64, device=cpu)
    """


@op.pointwise(zero_grad=True)
def floor(x: Array, /) -> Array:
    """Elementwise floor (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.floor(xg.asarray([1.7, -1.2]))
        Tensor([ 1., -2.], dtype=float64, device=cpu)
    """


@op.pointwise(zero_grad=True)
def round(x: Array, /) -> Array:  # noqa: A001 - the standard's name
    """Elementwise rounding to the nearest integer, half to even (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.round(xg.asarray([0.5, 1.5, 2.7]))
        Tensor([0., 2., 3.], dtype=float64, device=cpu)
    """


@op.pointwise(zero_grad=True)
def trunc(x: Array, /) -> Array:
    """Elementwise rounding towards zero (zero gradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.trunc(xg.asarray([1.7, -1.7]))
        Tensor([ 1., -1.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- selection
# a boolean first argument: its cases are written by hand
@op.pointwise(vjp=(None, lambda xp, g, ans, c, a, b: xp.where(c, g, 0.0), lambda xp, g, ans, c, a, b: xp.where(c, 0.0, g)),
              save=(0,), chapter="searching", test=None, fuzz="{N}.where({b} > 0.25, {a}, {N}.sin({b}))")
def where(condition: Array, x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elements of ``x1`` where ``condition`` is true, else of ``x2``; differentiable in both.

    Examples:
        >>> import xpgrad as xg
        >>> xg.where(xg.asarray([True, False]), xg.asarray([1.0, 2.0]), 0.0)
        Tensor([1., 0.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- boolean and integer outputs (not differentiable)
@op.pointwise(nondiff=True, fwd=lambda xp, a, b: a == b)
def equal(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 == x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.equal(xg.asarray([1.0, 2.0]), 2.0)
        Tensor([False,  True], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True, fwd=lambda xp, a, b: a != b)
def not_equal(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 != x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.not_equal(xg.asarray([1.0, 2.0]), 2.0)
        Tensor([ True, False], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True, fwd=lambda xp, a, b: a > b)
def greater(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 > x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.greater(xg.asarray([1.0, 3.0]), 2.0)
        Tensor([False,  True], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True, fwd=lambda xp, a, b: a >= b)
def greater_equal(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 >= x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.greater_equal(xg.asarray([1.0, 2.0]), 2.0)
        Tensor([False,  True], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True, fwd=lambda xp, a, b: a < b)
def less(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 < x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.less(xg.asarray([1.0, 3.0]), 2.0)
        Tensor([ True, False], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True, fwd=lambda xp, a, b: a <= b)
def less_equal(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 <= x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.less_equal(xg.asarray([1.0, 3.0]), 1.0)
        Tensor([ True, False], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True)
def isfinite(x: Array, /) -> Array:
    """Elementwise test for finite values (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.isfinite(xg.asarray([1.0, float('inf')]))
        Tensor([ True, False], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True)
def isinf(x: Array, /) -> Array:
    """Elementwise test for infinities (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.isinf(xg.asarray([1.0, float('inf')]))
        Tensor([False,  True], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True)
def isnan(x: Array, /) -> Array:
    """Elementwise test for NaN (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.isnan(xg.asarray([1.0, float('nan')]))
        Tensor([False,  True], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True)
def signbit(x: Array, /) -> Array:
    """Elementwise test of the sign bit (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.signbit(xg.asarray([-0.0, 1.0]))
        Tensor([ True, False], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True)
def logical_and(x1: Array | bool, x2: Array | bool, /) -> Array:
    """Elementwise logical AND (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.logical_and(xg.asarray([True, False]), True)
        Tensor([ True, False], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True)
def logical_or(x1: Array | bool, x2: Array | bool, /) -> Array:
    """Elementwise logical OR (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.logical_or(xg.asarray([True, False]), False)
        Tensor([ True, False], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True)
def logical_xor(x1: Array | bool, x2: Array | bool, /) -> Array:
    """Elementwise logical XOR (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.logical_xor(xg.asarray([True, False]), True)
        Tensor([False,  True], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True)
def logical_not(x: Array, /) -> Array:
    """Elementwise logical NOT (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.logical_not(xg.asarray([True, False]))
        Tensor([False,  True], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True)
def bitwise_invert(x: Array, /) -> Array:
    """Elementwise ``~x`` (integer or boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_invert(xg.asarray([True, False]))
        Tensor([False,  True], dtype=bool, device=cpu)
    """


@op.pointwise(nondiff=True, fwd=lambda xp, a, b: a & b)
def bitwise_and(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise ``x1 & x2`` (integer or boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_and(xg.asarray([6, 3]), 5)
        Tensor([4, 1], dtype=int64, device=cpu)
    """


@op.pointwise(nondiff=True, fwd=lambda xp, a, b: a | b)
def bitwise_or(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise ``x1 | x2`` (integer or boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_or(xg.asarray([6, 3]), 5)
        Tensor([7, 7], dtype=int64, device=cpu)
    """


@op.pointwise(nondiff=True, fwd=lambda xp, a, b: a ^ b)
def bitwise_xor(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise ``x1 ^ x2`` (integer or boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_xor(xg.asarray([6, 3]), 5)
        Tensor([3, 6], dtype=int64, device=cpu)
    """


# the functions, not the operators: array-api-strict checks x2 >= 0 only in the functions
@op.pointwise(nondiff=True)
def bitwise_left_shift(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise ``x1 << x2`` (integer; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_left_shift(xg.asarray([1, 2]), 2)
        Tensor([4, 8], dtype=int64, device=cpu)
    """


@op.pointwise(nondiff=True)
def bitwise_right_shift(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise ``x1 >> x2`` (integer; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.bitwise_right_shift(xg.asarray([8, 4]), 2)
        Tensor([2, 1], dtype=int64, device=cpu)
    """


# a literal for type checkers and readers; check_all fails the import when it and the entries differ
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
op.check_all(__all__)
