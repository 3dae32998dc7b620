"""Elementwise functions: forwards and VJP rules, side by side.

Rules receive ``(xp, g, ans, *args, **kw)`` and return the gradient for one
argument; broadcasting is undone by the engine. Complex inputs follow PyTorch's
convention (see :func:`xpgrad.ops._common.conj`).
"""

from __future__ import annotations

from typing import Any

from ._common import NOKW, Array, apply, conj, primitive

__all__ = ["add", "exp", "multiply", "sin", "subtract", "equal"]

_C = "elementwise"

# ---------------------------------------------------------------- arithmetic
_add = primitive("add", lambda xp, a, b: a + b, save=(), chapter=_C)
_add.defvjp(lambda xp, g, ans, a, b: g, lambda xp, g, ans, a, b: g)

_subtract = primitive("subtract", lambda xp, a, b: a - b, save=(), chapter=_C)
_subtract.defvjp(lambda xp, g, ans, a, b: g, lambda xp, g, ans, a, b: -g)

_multiply = primitive("multiply", lambda xp, a, b: a * b, chapter=_C)
_multiply.defvjp(lambda xp, g, ans, a, b: g * conj(xp, b), lambda xp, g, ans, a, b: g * conj(xp, a))

# ---------------------------------------------------------------- transcendental
_sin = primitive("sin", lambda xp, x: xp.sin(x), save=(0,), chapter=_C)
_sin.defvjp(lambda xp, g, ans, x: g * conj(xp, xp.cos(x)))

_exp = primitive("exp", lambda xp, x: xp.exp(x), save=(), save_ans=True, chapter=_C)
_exp.defvjp(lambda xp, g, ans, x: g * conj(xp, ans))

# ---------------------------------------------------------------- comparisons (declared)
_equal = primitive("equal", lambda xp, a, b: a == b, nondiff=True, chapter=_C)


def add(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 + x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.add(xg.asarray([1.0]), 2.0)
        Tensor([3.], dtype=float64, device=cpu)
    """
    return apply(_add, (x1, x2), NOKW)


def subtract(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 - x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.subtract(xg.asarray([1.0]), 2.0)
        Tensor([-1.], dtype=float64, device=cpu)
    """
    return apply(_subtract, (x1, x2), NOKW)


def multiply(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 * x2``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.multiply(xg.asarray([3.0]), 2.0)
        Tensor([6.], dtype=float64, device=cpu)
    """
    return apply(_multiply, (x1, x2), NOKW)


def sin(x: Array, /) -> Array:
    """Elementwise sine.

    Examples:
        >>> import xpgrad as xg
        >>> xg.sin(xg.asarray([0.0]))
        Tensor([0.], dtype=float64, device=cpu)
    """
    return apply(_sin, (x,), NOKW)


def exp(x: Array, /) -> Array:
    """Elementwise exponential.

    Examples:
        >>> import xpgrad as xg
        >>> xg.exp(xg.asarray([0.0]))
        Tensor([1.], dtype=float64, device=cpu)
    """
    return apply(_exp, (x,), NOKW)


def equal(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 == x2`` (boolean; not differentiable).

    Examples:
        >>> import xpgrad as xg
        >>> xg.equal(xg.asarray([1.0, 2.0]), 2.0)
        Tensor([False,  True], dtype=bool, device=cpu)
    """
    return apply(_equal, (x1, x2), NOKW)


_ = Any
