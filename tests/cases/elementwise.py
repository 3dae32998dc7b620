"""OpCases for the elementwise chapter (and ``where``).

Domains keep inputs away from singular points; ``prepare`` moves values off kinks
and jumps (``abs`` at 0, ties of ``maximum``, jumps of ``remainder``) so that the
central differences are meaningful. Ties and boundaries themselves are pinned
down in tests/test_elementwise.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tests._cases import OpCase, away, broadcast_shapes, same_shape


def _off_jumps(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    """Put x1 / x2 at least 0.1 away from an integer, where remainder jumps (x1, x2 same shape)."""
    x1, x2 = arrays
    q = x1 / x2
    f = q - np.floor(q)
    bad = (f < 0.1) | (f > 0.9)
    return [np.where(bad, (np.floor(q) + 0.5) * x2, x1), x2]


def _off_jumps_scalar(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    return [_off_jumps([arrays[0], np.full_like(arrays[0], 1.5)], params)[0]]


def _clip_apart(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    """Keep x at least 0.05 away from both bounds (min < max by their domains)."""
    x, lo, hi = arrays
    x = np.where(np.abs(x - lo) < 0.05, lo + 0.05, x)
    x = np.where(np.abs(x - hi) < 0.05, hi - 0.05, x)
    return [x, lo, hi]


def _clip_apart_scalar(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    x = arrays[0]
    for b in (-0.5, 0.7):
        x = np.where(np.abs(x - b) < 0.05, b + 0.05, x)
    return [x]


def _clip_shapes(n: int) -> Any:
    """x with the full shape, bounds broadcasting to it."""

    def draw(draw_: Any) -> list[tuple[int, ...]]:
        shapes = broadcast_shapes(n)(draw_)
        full = tuple(np.broadcast_shapes(*shapes))
        return [full, *shapes[1:]]

    return draw


def _binary(name: str, torch_name: str | None = None, complex_: bool = False, **kw: Any) -> OpCase:
    """A case for ``xp.<name>(x1, x2)`` on broadcasting shapes."""
    tname = torch_name or name
    kw.setdefault("shapes", broadcast_shapes(2))
    return OpCase(name, lambda xp, a, b: getattr(xp, name)(a, b), nargs=2,
                  torch_fn=lambda t, a, b: getattr(t, tname)(a, b), complex=complex_, **kw)


CASES = [
    # ------------------------------------------------------------ arithmetic
    # (the functions declared with test=Inputs(...) in src/xpgrad/ops/elementwise.py bring
    # their own cases; these are the ones that need more: jumps, scalars, bounds)
    _binary("remainder", shapes=same_shape(2), domain=[(-3.0, 3.0), (0.5, 2.0)], prepare=_off_jumps),
    # Python scalars on either side
    OpCase("rsub_scalar", lambda xp, x: 2.0 - x, torch_fn=lambda t, x: 2.0 - x, covers=("subtract",),
           complex=True),
    OpCase("rdiv_scalar", lambda xp, x: xp.divide(2.0, x), domain=(0.3, 2.0), torch_fn=lambda t, x: 2.0 / x,
           covers=("divide",), complex=True),
    OpCase("mul_complex_scalar", lambda xp, x: xp.real(xp.multiply(x, 1 - 2j)),
           torch_fn=lambda t, x: t.real(t.mul(x, 1 - 2j)), covers=("multiply", "real"), complex=True),
    OpCase("pow_scalar_exponent", lambda xp, x: x ** 3.0, torch_fn=lambda t, x: x ** 3.0, covers=("pow",),
           complex=True),
    OpCase("pow_square", lambda xp, x: xp.pow(x, 2), torch_fn=lambda t, x: t.pow(x, 2), covers=("pow",)),
    OpCase("pow_scalar_base", lambda xp, x: xp.pow(1.7, x), torch_fn=lambda t, x: t.pow(1.7, x), covers=("pow",),
           complex=True),
    OpCase("remainder_scalar", lambda xp, x: x % 1.5, domain=(-3.0, 3.0), prepare=_off_jumps_scalar,
           torch_fn=lambda t, x: t.remainder(x, 1.5), covers=("remainder",)),
    OpCase("maximum_scalar", lambda xp, x: xp.maximum(x, 0.05), torch_fn=lambda t, x: t.clamp(x, min=0.05),
           prepare=away((0.0,)), covers=("maximum",)),
    OpCase("atan2_scalar", lambda xp, x: xp.atan2(1.5, x), torch_fn=lambda t, x: t.atan2(t.asarray(1.5), x),
           covers=("atan2",)),
    # ------------------------------------------------------------ clip
    OpCase("clip", lambda xp, x, lo, hi: xp.clip(x, lo, hi), nargs=3, shapes=_clip_shapes(3),
           domain=[(-2.0, 2.0), (-1.5, -0.2), (0.2, 1.5)], prepare=_clip_apart,
           torch_fn=lambda t, x, lo, hi: t.clamp(x, lo, hi)),
    OpCase("clip_scalar", lambda xp, x: xp.clip(x, -0.5, 0.7), prepare=_clip_apart_scalar,
           torch_fn=lambda t, x: t.clamp(x, -0.5, 0.7), covers=("clip",)),
    OpCase("clip_min_only", lambda xp, x, lo: xp.clip(x, min=lo), nargs=2, shapes=_clip_shapes(2),
           prepare=lambda a, p: _clip_apart([a[0], a[1], np.full_like(a[0], 9.0)], p)[:2],
           torch_fn=lambda t, x, lo: t.clamp(x, min=lo), covers=("clip",)),
    OpCase("clip_max_only", lambda xp, x, hi: xp.clip(x, max=hi), nargs=2, shapes=_clip_shapes(2),
           prepare=lambda a, p: _clip_apart([a[0], np.full_like(a[0], -9.0), a[1]], p)[::2],
           torch_fn=lambda t, x, hi: t.clamp(x, max=hi), covers=("clip",)),
    # ------------------------------------------------------------ complex parts
    OpCase("imag", lambda xp, x: xp.imag(x * (1 + 2j)), torch_fn=lambda t, x: t.imag(x * (1 + 2j)), complex=True,
           covers=("imag", "multiply")),
    # "+ 0 * x": torch answers a real sgn's VJP with a ZeroTensor, which has no .numpy()
    OpCase("sign", lambda xp, x: xp.sign(x), prepare=away((0.0,)), torch_fn=lambda t, x: t.sgn(x) + 0 * x,
           complex=True),
    # ------------------------------------------------------------ selection
    OpCase("where", lambda xp, c, a, b: xp.where(c, a, b), nargs=3, shapes=broadcast_shapes(3),
           dtypes=["bool", "float", "float"], torch_fn=lambda t, c, a, b: t.where(c, a, b), complex=True),
    OpCase("where_scalar", lambda xp, c, a: xp.where(c, a, 0.5), nargs=2, shapes=broadcast_shapes(2),
           dtypes=["bool", "float"], torch_fn=lambda t, c, a: t.where(c, a, 0.5), covers=("where",)),
]
