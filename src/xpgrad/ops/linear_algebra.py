"""Linear algebra functions of the main namespace and their VJP rules.

Complex inputs follow PyTorch's convention: ``matmul``'s gradients are
``g @ conj(x2).mT`` and ``conj(x1).mT @ g``; ``vecdot`` conjugates its first
argument, so its first gradient is ``conj(g) * x2``. Batch broadcasting is
undone by the engine, which sums a gradient down to its argument's shape.

Batching (the rule beside each function): ``matmul``'s is the one the transforms lean on
most. A batch of matrix-vector products is one matrix-matrix product: when only one
operand is batched and the other is a single matrix (or vector), the batch axes are
folded into the batched operand's rows or columns, so the backend does one large product
(BLAS ``gemm``) rather than a stack of small ones. Two batched vectors are a ``vecdot``.
Otherwise the batch axes are stack axes, which ``matmul`` broadcasts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .._exceptions import XpgradIndexError, XpgradTypeError, XpgradValueError
from ..autograd._batching_util import lndim, negative_axis, pad, pad_all, stacked_matrices
from ..autograd._core import Primitive, apply
from ._common import Array, Tensor, conj, fresh
from ._registry import Chapter, Inputs, prim_of
from .elementwise import multiply
from .manipulation import moveaxis, permute_dims, reshape, squeeze
from .statistical import sum as _sum

__all__ = ["matmul", "matrix_transpose", "tensordot", "vecdot"]

op = Chapter("linear_algebra", module=__name__)


# ---------------------------------------------------------------- matrix_transpose
@op.function(batch=stacked_matrices, fwd=lambda xp, x: xp.matrix_transpose(x), vjp=(lambda xp, g, ans, x: xp.matrix_transpose(g),),
             jvp=(lambda xp, t, ans, x: xp.matrix_transpose(t),), save=(), view=True,
             test=Inputs(min_dims=2, torch=lambda t, x: x.mT))
def matrix_transpose(x: Array, /) -> Array:
    """Transpose the last two axes of ``x`` (a stack of matrices).

    Examples:
        >>> import xpgrad as xg
        >>> xg.matrix_transpose(xg.asarray([[1.0, 2.0]]))
        Tensor([[1.],
                [2.]], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- matmul
def _as_matrices(xp: Any, g: Any, a: Any, b: Any) -> tuple[Any, Any, Any]:
    """Give 1-D operands (and ``g``) the axis that matmul removed, so both rules are matrix products."""
    if b.ndim == 1:  # first, so that a 0-D g (vector @ vector) gets its axes in order
        b = xp.expand_dims(b, axis=-1)
        g = xp.expand_dims(g, axis=-1)
    if a.ndim == 1:
        a = xp.expand_dims(a, axis=0)
        g = xp.expand_dims(g, axis=-2)
    return g, a, b


def _col_major(x: Any) -> bool:
    """Whether the matrix ``x`` is laid out column by column (a transposed view of a C-contiguous
    matrix, as ``linear``'s ``weight.mT``), read where the library exposes strides (torch, NumPy,
    CuPy); False elsewhere, and for a 1-row or 1-column matrix, whose layout is both."""
    if isinstance(x, Tensor):
        x = x.data
    mod = type(x).__module__
    if mod == "xpgrad._tracing":  # a traced array (xg.jit): its witness's layout, so that the trace computes as eager does
        x = getattr(x, "_w", None)
        mod = type(x).__module__
    if mod == "torch":
        s, unit = x.stride(), 1
    elif mod in ("numpy", "cupy"):
        s, unit = x.strides, x.itemsize
    else:
        return False
    return len(s) == 2 and x.shape[0] > 1 and x.shape[1] > 1 and s[0] == unit and s[1] != unit


def _matmul_vjp_x1(xp: Any, g: Any, ans: Any, x1: Any, x2: Any) -> Any:
    b = x2
    if x1.ndim == 1 or x2.ndim == 1:  # (matrices, the common case, need no helper call)
        g, _, b = _as_matrices(xp, g, x1, x2)
    elif x1.ndim == 2 and x2.ndim == 2 and _col_major(x1):
        # the gradient in x1's layout, as torch's mm backward: (b @ g.mT).mT, not a C-contiguous g @ b.mT
        # (a transposed gradient makes the optimizer's p -= lr * g walk memory out of order: 5x slower)
        return fresh(xp.matrix_transpose(xp.matmul(conj(xp, b), xp.matrix_transpose(g))))
    out = xp.matmul(g, xp.matrix_transpose(conj(xp, b)))  # (..., m, k); the engine sums batch axes
    return xp.squeeze(out, axis=-2) if x1.ndim == 1 else fresh(out)


def _matmul_vjp_x2(xp: Any, g: Any, ans: Any, x1: Any, x2: Any) -> Any:
    a = x1
    if x1.ndim == 1 or x2.ndim == 1:
        g, a, _ = _as_matrices(xp, g, x1, x2)
    elif x2.ndim == 2 and _col_major(x2):
        # x2 is linear's weight.mT: its gradient in x2's layout, so that the weight's own is C-contiguous
        # (see _matmul_vjp_x1); batch axes of x1 folded into the rows, one product instead of a batch
        # of them summed by the engine
        k, n = x2.shape
        gm = g if g.ndim == 2 else xp.reshape(g, (-1, n))
        am = a if a.ndim == 2 else xp.reshape(a, (-1, k))
        return fresh(xp.matrix_transpose(xp.matmul(xp.matrix_transpose(gm), conj(xp, am))))
    out = xp.matmul(xp.matrix_transpose(conj(xp, a)), g)  # (..., k, n)
    return xp.squeeze(out, axis=-1) if x2.ndim == 1 else fresh(out)


def _known(*sizes: Any) -> bool:
    """Whether every size is a known int (Dask's unknown chunks give NaN, a lazy backend None)."""
    return all(isinstance(n, int) for n in sizes)


def _check_matmul(s1: tuple[Any, ...], s2: tuple[Any, ...], cause: BaseException) -> None:
    """Raise naming matmul and both shapes where the product cannot be taken; return where a size is unknown.

    Called where the backend refused the product (``cause``), so a product that works pays nothing
    (a check before every call cost 0.2 us on NumPy, 0.4 us on torch: 7-10% of a small product).
    The backends' own texts (NumPy's gufunc signature, torch's "mat1 and mat2 shapes cannot be
    multiplied", JAX's ``dot_general``, Dask's "Chunks do not add up") name neither shape.
    """
    if not s1 or not s2:
        msg = (f"matmul: x{1 if not s1 else 2} is 0-d (shapes {s1} and {s2}); matmul takes arrays of 1 or more "
               "axes: use * (xg.multiply) to scale by a scalar")
        raise XpgradValueError(msg) from cause
    k1, k2 = s1[-1], s2[-2 if len(s2) > 1 else 0]
    if _known(k1, k2) and k1 != k2:
        which1 = "last axis of x1" if len(s1) > 1 else "x1's only axis"
        which2 = "first of x2's last two axes" if len(s2) > 1 else "x2's only axis"
        msg = (f"matmul: shapes {s1} and {s2} do not match: {k1} ({which1}) != {k2} ({which2}); "
               "the inner sizes must be equal (transpose an operand with xg.matrix_transpose, or check the sizes)")
        raise XpgradValueError(msg) from cause


def _matmul_fwd(xp: Any, x1: Any, x2: Any) -> Any:
    if x1 is None or x2 is None:
        # refused before the backend: CuPy 14's matmul crashes the process on None (seen on an H200)
        msg = f"matmul: argument {0 if x1 is None else 1} is None; expected an array or a Tensor"
        raise XpgradTypeError(msg)
    try:
        return xp.matmul(x1, x2)
    except Exception as e:  # the backend's text names neither shape: say it as matmul
        _check_matmul(tuple(getattr(x1, "shape", ())), tuple(getattr(x2, "shape", ())), e)
        raise


def _fold_right(prim: Primitive, a: Any, x: Any) -> Any:
    """``a @ x`` for one matrix ``a`` (m, n) and a batched stack ``x`` (*lead, n, k): one product."""
    s = tuple(x.shape)
    lead, n, k = s[:-2], s[-2], s[-1]
    cols = _reshape_p(_moveaxis_p(x, source=-2, destination=0), shape=(n, math.prod(lead) * k))
    y = apply(prim, (a, cols), {})
    m = next(iter(y.shape))
    return _moveaxis_p(_reshape_p(y, shape=(m, *lead, k)), source=0, destination=-2)


def _fold_left(prim: Primitive, x: Any, b: Any) -> Any:
    """``x @ b`` for a batched stack ``x`` (*lead, m, n) and one matrix or vector ``b``: one product."""
    s = tuple(x.shape)
    lead, m, n = s[:-2], s[-2], s[-1]
    y = apply(prim, (_reshape_p(x, shape=(math.prod(lead) * m, n)), b), {})
    return _reshape_p(y, shape=(*lead, m, *tuple(y.shape)[1:]))


def _matmul_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x1, x2 = xs
    b1, b2 = bs
    n1, n2 = lndim(x1, b1, K), lndim(x2, b2, K)
    if n1 == 0 or n2 == 0:  # (the physical array of a batched 0-D example is 1-D: refuse it here)
        msg = f"{prim.name}: operands must be at least 1-D, got {n1}-D and {n2}-D arrays (inside vmap)"
        raise XpgradValueError(msg)
    if b1 and b2 and n1 == 1 and n2 == 1:  # a batch of dot products
        return _sum_p(_multiply_p(x1, x2), axis=-1)
    if b2 and not b1 and n1 <= 2 and n2 >= 2:
        a = x1 if n1 == 2 else _reshape_p(x1, shape=(1, *tuple(x1.shape)))
        y = _fold_right(prim, a, x2)
        return y if n1 == 2 else _squeeze_p(y, axis=-2)
    if b1 and not b2 and n2 <= 2 and n1 >= 2:
        return _fold_left(prim, x1, x2)
    # batched 1-D operands become a row (x1) or a column (x2), dropped after
    sq1 = sq2 = False
    if b1 and n1 == 1:
        s = tuple(x1.shape)
        x1 = _reshape_p(x1, shape=(*s[:K], 1, *s[K:]))
        sq1 = True
    if b2 and n2 == 1:
        x2 = _reshape_p(x2, shape=(*tuple(x2.shape), 1))
        sq2 = True
    if b2 and not b1 and n1 <= 2:  # (a vector x2 made a column: still one product)
        a = x1 if n1 == 2 else _reshape_p(x1, shape=(1, *tuple(x1.shape)))
        y = _fold_right(prim, a, x2)
        s = tuple(y.shape)
        return _reshape_p(y, shape=s[:-2] + ((s[-2],) if n1 == 2 else ()))
    if b1 and not b2 and n2 <= 2:  # (a vector x1 made a row)
        y = _fold_left(prim, x1, x2)
        s = tuple(y.shape)
        return _reshape_p(y, shape=s[:-2] + s[-1:] if n2 == 2 else s[:-1])
    r = max(max(lndim(x1, b1, K), 2), max(lndim(x2, b2, K), 2))
    if b1:
        x1 = pad(x1, K, r)
    if b2:
        x2 = pad(x2, K, r)
    out = apply(prim, (x1, x2), kw)
    if sq1 or sq2:
        s = tuple(out.shape)
        s = s[:-2] if sq1 and sq2 else (s[:-2] + s[-1:] if sq1 else s[:-1])
        out = _reshape_p(out, shape=s)
    return out


@op.function(batch=_matmul_batch, fwd=_matmul_fwd, vjp=(_matmul_vjp_x1, _matmul_vjp_x2),
             jvp=(lambda xp, t, ans, x1, x2: xp.matmul(t, x2), lambda xp, t, ans, x1, x2: xp.matmul(x1, t)), arrays=2)
def matmul(x1: Array, x2: Array, /) -> Array:
    """Matrix product, with NumPy's rules for 1-D operands and broadcasting of batch axes.

    Examples:
        >>> import xpgrad as xg
        >>> xg.matmul(xg.asarray([[1.0, 2.0], [3.0, 4.0]]), xg.asarray([1.0, 1.0]))
        Tensor([3., 7.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- tensordot
def _contracted(axes: int | tuple[Sequence[int], Sequence[int]], nd1: int, nd2: int) -> tuple[list[int], list[int]]:
    """The contracted axes of x1 and x2, non-negative and paired in order."""
    if isinstance(axes, int):
        return list(range(nd1 - axes, nd1)), list(range(axes))
    a1, a2 = axes
    a1 = [a1] if isinstance(a1, int) else a1
    a2 = [a2] if isinstance(a2, int) else a2
    return [a % nd1 for a in a1], [a % nd2 for a in a2]


def _td(xp: Any, a: Any, b: Any, ax_a: list[int], ax_b: list[int]) -> Any:
    return xp.tensordot(a, b, axes=(tuple(ax_a), tuple(ax_b)) if ax_a else 0)


def _back_to(xp: Any, r: Any, order: list[int]) -> Any:
    """Permute ``r``, whose axis i is argument axis ``order[i]``, into the argument's axis order."""
    perm = sorted(range(len(order)), key=order.__getitem__)
    return r if perm == list(range(len(order))) else xp.permute_dims(r, tuple(perm))


def _tensordot_vjp_x1(xp: Any, g: Any, ans: Any, x1: Any, x2: Any, *, axes: Any = 2) -> Any:
    c1, c2 = _contracted(axes, x1.ndim, x2.ndim)
    free1 = [i for i in range(x1.ndim) if i not in c1]
    free2 = [i for i in range(x2.ndim) if i not in c2]
    # contract g's x2-part with x2's free axes: left with free1, then x2's contracted axes in x2's order
    r = _td(xp, g, conj(xp, x2), list(range(len(free1), g.ndim)), free2)
    return _back_to(xp, r, free1 + [c1[c2.index(j)] for j in sorted(c2)])


def _tensordot_vjp_x2(xp: Any, g: Any, ans: Any, x1: Any, x2: Any, *, axes: Any = 2) -> Any:
    c1, c2 = _contracted(axes, x1.ndim, x2.ndim)
    free1 = [i for i in range(x1.ndim) if i not in c1]
    free2 = [i for i in range(x2.ndim) if i not in c2]
    r = _td(xp, conj(xp, x1), g, free1, list(range(len(free1))))
    return _back_to(xp, r, [c2[c1.index(j)] for j in sorted(c1)] + free2)


def _check_tensordot(s1: tuple[Any, ...], s2: tuple[Any, ...], axes: Any, cause: BaseException) -> None:
    """Raise naming tensordot, both shapes and the first pair of contracted axes whose sizes differ."""
    try:
        c1, c2 = _contracted(axes, len(s1), len(s2))
    except (TypeError, ValueError, IndexError, ZeroDivisionError):  # a malformed axes: the backend's error says it
        return
    for a1, a2 in zip(c1, c2, strict=False):
        if 0 <= a1 < len(s1) and 0 <= a2 < len(s2) and _known(s1[a1], s2[a2]) and s1[a1] != s2[a2]:
            msg = (f"tensordot: shapes {s1} and {s2} do not match: axis {a1} of x1 has size {s1[a1]} but axis {a2} "
                   f"of x2, contracted with it, has size {s2[a2]}; pass axes= pairs of equal sizes")
            raise XpgradValueError(msg) from cause


def _tensordot_fwd(xp: Any, x1: Any, x2: Any, *, axes: Any = 2) -> Any:
    try:
        return _tensordot(xp, x1, x2, axes)
    except Exception as e:  # the backend's text ("shape-mismatch for sum") names neither shape
        _check_tensordot(tuple(getattr(x1, "shape", ())), tuple(getattr(x2, "shape", ())), axes, e)
        raise


def _tensordot(xp: Any, x1: Any, x2: Any, axes: Any) -> Any:
    if not isinstance(axes, int):  # non-negative: Dask miscomputes negative pairs
        c1, c2 = _contracted(axes, x1.ndim, x2.ndim)
        # no contracted axes is axes=0: CuPy takes a 0-d input only with axes 0 or ((), ()),
        # and refuses ([], []) (cupy.tensordot: "An input is zero-dim while axes has dimensions")
        axes = (tuple(c1), tuple(c2)) if c1 else 0
    return xp.tensordot(x1, x2, axes=axes)


def _axes_param(axes: int | tuple[Sequence[int], Sequence[int]]) -> int | tuple[Any, Any]:
    """``axes`` as the primitive takes it: an int, or a pair of ints or tuples of ints (hashable)."""
    if not isinstance(axes, int):
        axes = (
            axes[0] if isinstance(axes[0], int) else tuple(axes[0]),
            axes[1] if isinstance(axes[1], int) else tuple(axes[1]),
        )
    return axes


def _tensordot_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
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
        return _permute_dims_p(out, axes=perm)
    s1, s2 = tuple(x1.shape), tuple(x2.shape)
    free1 = [i for i in range(n1) if i not in c1]
    free2 = [i for i in range(n2) if i not in c2]
    bat = tuple(range(k))
    p1 = (*bat, *(k + i for i in free1), *(k + i for i in c1))
    p2 = (*bat, *(k + i for i in c2), *(k + i for i in free2))
    if p1 != tuple(range(len(s1))):
        x1 = _permute_dims_p(x1, axes=p1)
    if p2 != tuple(range(len(s2))):
        x2 = _permute_dims_p(x2, axes=p2)
    fs1 = tuple(int(s1[k + i]) for i in free1)
    fs2 = tuple(int(s2[k + i]) for i in free2)
    cs = tuple(int(s1[k + i]) for i in c1)
    for i, j in zip(c1, c2):
        if s1[k + i] != s2[k + j]:
            msg = (f"{prim.name}: contracted axes {i} of x1 (length {s1[k + i]}) and {j} of x2 "
                   f"(length {s2[k + j]}) differ")
            raise XpgradValueError(msg)
    m1 = _reshape_p(x1, shape=(*s1[:k], _size(fs1), _size(cs)))
    m2 = _reshape_p(x2, shape=(*s2[:k], _size(cs), _size(fs2)))
    out = _matmul_p(m1, m2)
    return _reshape_p(out, shape=tuple(out.shape)[:k] + fs1 + fs2)


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


@op.function(batch=_tensordot_batch, fwd=_tensordot_fwd, vjp=(_tensordot_vjp_x1, _tensordot_vjp_x2),
             jvp=(lambda xp, t, ans, x1, x2, *, axes=2: _tensordot_fwd(xp, t, x2, axes=axes),
                  lambda xp, t, ans, x1, x2, *, axes=2: _tensordot_fwd(xp, x1, t, axes=axes)),
             arrays=2, params={"axes": _axes_param})
def tensordot(x1: Array, x2: Array, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Array:
    """Sum products over ``axes``: the last ``axes`` axes of x1 with the first of x2, or the given pairs.

    Examples:
        >>> import xpgrad as xg
        >>> xg.tensordot(xg.asarray([[1.0, 2.0]]), xg.asarray([[3.0], [4.0]]), axes=1)
        Tensor([[11.]], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- vecdot
def _vec_axis(axis: int, x1: Any, x2: Any) -> int:
    """The reduced axis as a negative index (the standard counts it from the end)."""
    return axis if axis < 0 else axis - max(x1.ndim, x2.ndim)


def _vecdot_vjp_x1(xp: Any, g: Any, ans: Any, x1: Any, x2: Any, *, axis: int = -1) -> Any:
    # out = sum(conj(x1) * x2): antiholomorphic in x1, so the gradient is conj(g) * x2
    return conj(xp, xp.expand_dims(g, axis=_vec_axis(axis, x1, x2))) * x2


def _vecdot_vjp_x2(xp: Any, g: Any, ans: Any, x1: Any, x2: Any, *, axis: int = -1) -> Any:
    return xp.expand_dims(g, axis=_vec_axis(axis, x1, x2)) * x1


def _vecdot_fwd(xp: Any, x1: Any, x2: Any, *, axis: int = -1) -> Any:
    try:
        return xp.vecdot(x1, x2, axis=axis)
    except Exception as e:  # the backend's text names neither shape (NumPy: a gufunc signature)
        s1, s2 = tuple(getattr(x1, "shape", ())), tuple(getattr(x2, "shape", ()))
        ax = axis if not isinstance(axis, int) or axis < 0 else axis - max(len(s1), len(s2))
        if isinstance(ax, int) and -len(s1) <= ax < 0 and -len(s2) <= ax < 0 and _known(s1[ax], s2[ax]) and s1[ax] != s2[ax]:
            msg = (f"vecdot: shapes {s1} and {s2} do not match along axis={axis}: {s1[ax]} != {s2[ax]}; "
                   "both vectors must have the same length on the reduced axis (pass axis= to pick another)")
            raise XpgradValueError(msg) from e
        raise


def _vecdot_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    ys, r = pad_all(xs, bs, k)
    return apply(prim, tuple(ys), {**kw, "axis": negative_axis(prim, kw.get("axis", -1), r)})


# vecdot conjugates x1, so x1's tangent enters conjugated: the real directional derivative
@op.function(batch=_vecdot_batch, fwd=_vecdot_fwd, vjp=(_vecdot_vjp_x1, _vecdot_vjp_x2),
             jvp=(lambda xp, t, ans, x1, x2, *, axis=-1: xp.vecdot(t, x2, axis=axis),
                  lambda xp, t, ans, x1, x2, *, axis=-1: xp.vecdot(x1, t, axis=axis)),
             arrays=2)
def vecdot(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
    """Dot product of vectors along ``axis``, conjugating ``x1``: ``sum(conj(x1) * x2, axis=axis)``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.vecdot(xg.asarray([1.0, 2.0]), xg.asarray([3.0, 4.0]))
        Tensor(11., dtype=float64, device=cpu)
    """


_reshape_p, _moveaxis_p, _permute_dims_p, _squeeze_p = prim_of(reshape), prim_of(moveaxis), prim_of(permute_dims), prim_of(squeeze)
_sum_p, _multiply_p, _matmul_p = prim_of(_sum), prim_of(multiply), prim_of(matmul)

op.check_all(__all__)
