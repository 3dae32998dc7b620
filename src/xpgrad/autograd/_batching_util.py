"""Shared pieces of the batching rules, and the rules many primitives share.

The rules themselves are declared beside their operations (``batch=`` of a registry
entry or of `primitive`, or ``@prim.batching``) and kept on the primitive
(``Primitive.batch``), which vmap reads. The helpers here apply primitives by name
(`op`): this layer is below ``xpgrad.ops``, which defines them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._exceptions import XpgradIndexError, XpgradValueError
from ._batched import STACK, shift_axes, shift_axis
from ._core import PRIMITIVES, Primitive, apply

_NOKW: dict[str, Any] = {}


def op(name: str, *args: Any, **kw: Any) -> Any:
    """Apply primitive ``name`` to physical values."""
    return apply(PRIMITIVES[name], args, kw or _NOKW)


def is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def lndim(x: Any, b: bool, K: int) -> int:
    """The logical rank of physical argument ``x`` (batched ones have ``K`` batch axes more)."""
    return len(x.shape) - K if b else len(x.shape)


def pad(x: Any, K: int, r: int) -> Any:
    """Batched physical ``x`` with size-1 axes after its batch axes, up to logical rank ``r``
    (so that it broadcasts against unbatched arguments as its example would)."""
    s = tuple(x.shape)
    n = len(s) - K
    if n >= r:
        return x
    return op("reshape", x, shape=s[:K] + (1,) * (r - n) + s[K:])


def pad_all(xs: Sequence[Any], bs: Sequence[bool], K: int) -> tuple[list[Any], int]:
    """Every batched array argument padded to the largest logical rank; that rank."""
    r = max((lndim(x, b, K) for x, b in zip(xs, bs) if is_array(x)), default=0)
    return [pad(x, K, r) if b else x for x, b in zip(xs, bs)], r


def full(xs: Sequence[Any], bs: Sequence[bool], K: int) -> list[Any]:
    """Every array argument with its batch axes at full size (unbatched ones broadcast along new
    leading axes): for the functions that do not broadcast (concat, stack, gathers)."""
    st = STACK.get()[:K]
    sizes = tuple(lv.size for lv in st)
    out = []
    for x, b in zip(xs, bs):
        if not is_array(x):
            out.append(x)
            continue
        s = tuple(x.shape)
        if not b:
            x = op("reshape", x, shape=(1,) * K + s)
            s = tuple(x.shape)
        if s[:K] != sizes:
            x = op("broadcast_to", x, shape=sizes + s[K:])
        out.append(x)
    return out


def check_ndim(prim: Primitive, x: Any, K: int, least: int, what: str = "array") -> None:
    """Refuse an example of too low a rank, as the unbatched call would (the physical array has
    ``K`` axes more and would be accepted silently)."""
    n = len(x.shape) - K
    if n < least:
        msg = f"{prim.name}: expected an {what} of at least {least} dimensions, got {n} (inside vmap)"
        raise XpgradValueError(msg)


def with_new_last_axis(x: Any, b: bool, K: int) -> tuple[Any, int]:
    """Argument ``x`` given a new last axis, with ``K`` batch axes (size 1 when unbatched), and
    its logical rank: for comparing every element of it against every element of another
    argument along that axis (``isin``, ``searchsorted``). A Python scalar passes, of rank 0."""
    if b:
        return op("expand_dims", x, axis=-1), len(x.shape) - K
    if is_array(x):
        return op("reshape", x, shape=(1,) * K + tuple(x.shape) + (1,)), len(x.shape)
    return x, 0


# ---------------------------------------------------------------- shared rules
def pointwise(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """The rule of a pointwise (broadcasting) primitive: a batched argument is padded with size-1
    axes after its batch axes up to the largest logical rank, so that it broadcasts against the
    unbatched ones as its example would."""
    ys, _ = pad_all(xs, bs, K)
    return apply(prim, ys, kw)


def matrices(least: int) -> Any:
    """The rule of a function of the last two axes, every axis before them a stack: the batch
    axes lead, so they are more stack axes; the rule only checks the example's rank."""

    def rule(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
        check_ndim(prim, xs[0], K, least)
        return apply(prim, xs, kw)

    return rule


#: (functions of the last two axes of one stack: ``inv``, ``det``, ``svd``, ``tril``...)
stacked_matrices = matrices(2)


def along_axes(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """``axis`` None, an int or a tuple (reductions, ``flip``...): shifted past the ``K`` batch
    axes (None, every logical axis, becomes the tuple of them), never reducing over them."""
    n = len(xs[0].shape) - K
    return apply(prim, xs, {**kw, "axis": shift_axes(prim.name, kw.get("axis"), n, K)})


def along_axis(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """``axis`` an int (scans, sorts)."""
    n = len(xs[0].shape) - K
    return apply(prim, xs, {**kw, "axis": shift_axis(prim.name, kw["axis"], n, K)})


def negative_axis(prim: Primitive, axis: int, r: int) -> int:
    """A logical axis of the broadcast example (rank ``r``) counted from the end (``vecdot``, ``cross``)."""
    if not -r <= axis < r:
        msg = f"{prim.name}: axis {axis} is out of bounds for arrays of dimension {r}"
        raise XpgradIndexError(msg)
    return axis - r if axis >= 0 else axis


def to_rank(x: Any, b: bool, k: int, r: int) -> Any:
    """Array argument ``x`` with ``k + r`` physical axes: a batched one padded after its batch
    axes, an unbatched one given leading size-1 axes (it broadcasts along every level); so that
    functions of two stacks (``solve``, ``cross``) never read an argument's stack axes as
    another's batch axes."""
    if b:
        return pad(x, k, r)
    s = tuple(x.shape)
    if len(s) >= k + r:
        return x
    return op("reshape", x, shape=(1,) * (k + r - len(s)) + s)
