"""Shared pieces of the batching rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._exceptions import XpgradValueError
from ..autograd._batched import STACK
from ..autograd._core import PRIMITIVES, Primitive, apply

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
