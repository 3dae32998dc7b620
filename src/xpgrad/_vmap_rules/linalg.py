"""Batching rules of the linear algebra primitives (``matmul``, ``vecdot``, ``tensordot``, ``xg.linalg``).

The matrix functions of one stack argument (``inv``, ``det``, ``svd``...) batch as
stacks: see `xpgrad._vmap_rules.elementwise`. The functions of two stacks
(``solve``, ``cross``) get every argument at the same physical rank (the batch axes,
then the example's stack axes padded with size 1), so that the backend broadcasts
the stacks as it would the examples' and never reads an argument's stack axes as
another's batch axes.
"""

from __future__ import annotations

from typing import Any

import array_api_compat

from .._exceptions import XpgradIndexError, XpgradValueError
from ..autograd._batched import RULES, STACK, Batched, from_phys, lift
from ..autograd._core import Primitive, apply
from ..ops.linear_algebra import _contracted
from ._util import check_ndim, is_array, lndim, op, pad, pad_all


def _negative_axis(prim: Primitive, axis: int, r: int) -> int:
    """A logical axis of the broadcast example (rank ``r``) counted from the end."""
    if not -r <= axis < r:
        msg = f"{prim.name}: axis {axis} is out of bounds for arrays of dimension {r}"
        raise XpgradIndexError(msg)
    return axis - r if axis >= 0 else axis


def _vecdot(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    ys, r = pad_all(xs, bs, k)
    return apply(prim, tuple(ys), {**kw, "axis": _negative_axis(prim, kw.get("axis", -1), r)})


RULES["vecdot"] = _vecdot


def _to_rank(x: Any, b: bool, k: int, r: int) -> Any:
    """Array argument ``x`` with ``k + r`` physical axes: a batched one padded after its batch
    axes, an unbatched one given leading size-1 axes (it broadcasts along every level)."""
    if b:
        return pad(x, k, r)
    s = tuple(x.shape)
    if len(s) >= k + r:
        return x
    return op("reshape", x, shape=(1,) * (k + r - len(s)) + s)


# ---------------------------------------------------------------- solve
def _solve(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    """``x2`` is one vector only when its example is 1-D: it is made a column (and the column
    dropped after), so that every stack axis, batch axes included, broadcasts."""
    x1, x2 = xs
    b1, b2 = bs
    check_ndim(prim, x1, k if b1 else 0, 2, "array (a stack of square matrices)")
    vec = lndim(x2, b2, k) == 1
    if vec:
        s = tuple(x2.shape)
        x2 = op("reshape", x2, shape=(*s, 1))
    else:
        check_ndim(prim, x2, k if b2 else 0, 1)
    r = max(lndim(x1, b1, k), lndim(x2, b2, k))
    out = apply(prim, (_to_rank(x1, b1, k, r), _to_rank(x2, b2, k, r)), kw)
    if vec:
        out = op("reshape", out, shape=tuple(out.shape)[:-1])
    return out


RULES["solve"] = _solve


# ---------------------------------------------------------------- pinv / matrix_rank (rtol)
def _rtol_stack(prim: Primitive, x: Any, k: int, rtol: Any, rb: bool) -> tuple[Any, Any]:
    """``x`` (batched, physical) and an array ``rtol`` (physical with ``k`` batch axes when
    ``rb``, else the example's) at the same physical rank: ``rtol`` broadcasts against the
    stack axes of ``x`` (all but the last two)."""
    check_ndim(prim, x, k, 2)
    rs = tuple(rtol.shape)
    rn = len(rs) - k if rb else len(rs)
    r = max(len(x.shape) - k - 2, rn)
    x = pad(x, k, r + 2)
    new = rs[:k] + (1,) * (r - rn) + rs[k:] if rb else (1,) * (k + r - rn) + rs
    if new != rs:
        rtol = array_api_compat.array_namespace(rtol).reshape(rtol, new)
    xs = tuple(x.shape)
    stack = tuple(a if b == 1 else b for a, b in zip(xs[:-2], new))  # (NumPy's pinv needs x at the full stack shape)
    if stack != xs[:-2]:
        x = op("broadcast_to", x, shape=(*stack, *xs[-2:]))
    return x, rtol


def _with_rtol(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    x = xs[0]
    rtol = kw.get("rtol")
    if rtol is None or not is_array(rtol):
        check_ndim(prim, x, k, 2)
        return apply(prim, tuple(xs), kw)
    if not bs[0]:  # (only called with a batched x from here)
        x = op("reshape", x, shape=(1,) * k + tuple(x.shape))
    x, rtol = _rtol_stack(prim, x, k, rtol, False)
    return apply(prim, (x,), {**kw, "rtol": rtol})


RULES["pinv"] = RULES["matrix_rank"] = _with_rtol


def batched_rtol(prim: Primitive, x: Any, rtol: Batched, kw: dict[str, Any]) -> Any:
    """``pinv``/``matrix_rank`` with a batched ``rtol`` (a keyword, so ``vmap_apply`` does not
    see it): ``x`` and ``rtol`` lifted to the open levels, the physical call, the Batched result."""
    st = STACK.get()
    k = len(st)
    xb = isinstance(x, Batched)
    xphys = lift(x, st) if xb else op("reshape", x, shape=(1,) * k + tuple(x.shape))
    rphys = lift(rtol, st)
    xphys, r = _rtol_stack(prim, xphys, k, rphys.detach().data, True)
    return from_phys(apply(prim, (xphys,), {**kw, "rtol": r}), st)


# ---------------------------------------------------------------- cross / outer
def _cross(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    r = max(lndim(x, b, k) for x, b in zip(xs, bs))
    axis = _negative_axis(prim, kw.get("axis", -1), r)
    ys = [_to_rank(x, b, k, r) for x, b in zip(xs, bs)]
    return apply(prim, tuple(ys), {**kw, "axis": axis})


RULES["cross"] = _cross


def _outer(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    """``x1`` as a column times ``x2`` (a row): a broadcast product."""
    x1, x2 = xs
    for i, (x, b) in enumerate(zip(xs, bs)):
        n = lndim(x, b, k)
        if n != 1:
            msg = f"{prim.name}: expected 1-D arguments, got argument {i + 1} of dimension {n} (inside vmap)"
            raise XpgradValueError(msg)
    x1 = op("reshape", x1, shape=(*x1.shape, 1))
    if bs[1]:
        s = tuple(x2.shape)
        x2 = op("reshape", x2, shape=(*s[:k], 1, *s[k:]))
    return op("multiply", x1, x2)


RULES["outer"] = _outer


# ---------------------------------------------------------------- tensordot
def _tensordot(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    """One batched operand: its batch axes are free axes (moved to the front after, for ``x2``).
    Both batched: contracted axes moved last (``x1``) or first (``x2``), flattened, and one
    batched ``matmul`` (its batch broadcasting handles the size-1 batch axes)."""
    x1, x2 = xs
    b1, b2 = bs
    n1, n2 = lndim(x1, b1, k), lndim(x2, b2, k)
    axes = kw.get("axes", 2)
    if isinstance(axes, int):
        if not 0 <= axes <= min(n1, n2):
            msg = f"{prim.name}: axes={axes} is out of range for arrays of dimensions {n1} and {n2}"
            raise XpgradValueError(msg)
    else:
        a1, a2 = axes
        a1 = [a1] if isinstance(a1, int) else list(a1)
        a2 = [a2] if isinstance(a2, int) else list(a2)
        if len(a1) != len(a2):
            msg = f"{prim.name}: axes must pair as many axes of x1 as of x2, got {axes!r}"
            raise XpgradValueError(msg)
        for a, n in [*((a, n1) for a in a1), *((a, n2) for a in a2)]:
            if not -n <= a < n:
                msg = f"{prim.name}: axis {a} of axes={axes!r} is out of bounds for an array of dimension {n}"
                raise XpgradIndexError(msg)
        axes = (a1, a2)
    c1, c2 = _contracted(axes, n1, n2)
    if not (b1 and b2):
        if b1:  # (the last axes of x1 stay its last: an int stays as it is)
            ax1: Any = axes if isinstance(axes, int) else ([c + k for c in c1], c2)
            return apply(prim, (x1, x2), {**kw, "axes": ax1})
        ax2: Any = (c1, [c + k for c in c2]) if c1 else 0
        out = apply(prim, (x1, x2), {**kw, "axes": ax2})
        f1 = n1 - len(c1)  # (x1's free axes lead: the batch axes of x2 follow them)
        if f1 == 0:
            return out
        perm = (*range(f1, f1 + k), *range(f1), *range(f1 + k, len(out.shape)))
        return op("permute_dims", out, axes=perm)
    s1, s2 = tuple(x1.shape), tuple(x2.shape)
    free1 = [i for i in range(n1) if i not in c1]
    free2 = [i for i in range(n2) if i not in c2]
    bat = tuple(range(k))
    p1 = (*bat, *(k + i for i in free1), *(k + i for i in c1))
    p2 = (*bat, *(k + i for i in c2), *(k + i for i in free2))
    if p1 != tuple(range(len(s1))):
        x1 = op("permute_dims", x1, axes=p1)
    if p2 != tuple(range(len(s2))):
        x2 = op("permute_dims", x2, axes=p2)
    fs1 = tuple(int(s1[k + i]) for i in free1)
    fs2 = tuple(int(s2[k + i]) for i in free2)
    cs = tuple(int(s1[k + i]) for i in c1)
    for i, j in zip(c1, c2):
        if s1[k + i] != s2[k + j]:
            msg = (f"{prim.name}: contracted axes {i} of x1 (length {s1[k + i]}) and {j} of x2 "
                   f"(length {s2[k + j]}) differ")
            raise XpgradValueError(msg)
    m1 = op("reshape", x1, shape=(*s1[:k], _size(fs1), _size(cs)))
    m2 = op("reshape", x2, shape=(*s2[:k], _size(cs), _size(fs2)))
    out = op("matmul", m1, m2)
    return op("reshape", out, shape=tuple(out.shape)[:k] + fs1 + fs2)


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


RULES["tensordot"] = _tensordot
