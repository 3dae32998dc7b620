"""Batching rules of indexing: ``getitem``/``setitem`` keys, ``take``, ``take_along_axis``."""

from __future__ import annotations

from typing import Any

from .._exceptions import XpgradTypeError
from ..autograd._batched import STACK, Batched, from_phys, lift
from ..autograd._tensor import Tensor
from ._util import op


def _basic(key: Any) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in items)


def batched_getitem(x: Any, key: Any) -> Tensor:
    """``x[key]`` where ``x`` or an index array in ``key`` is batched."""
    st = STACK.get()
    if not _basic(key):
        msg = "getitem: inside vmap only integers, slices, None and Ellipsis index a batched value (for now)"
        raise XpgradTypeError(msg)
    items = key if isinstance(key, tuple) else (key,)
    K = len(x._levels) if isinstance(x, Batched) else 0
    st = st[:K]
    phys = lift(x, st)
    return from_phys(op("getitem", phys, key=(slice(None),) * K + items), st)  # type: ignore[no-any-return]


def batched_setitem(x: Any, value: Any, key: Any) -> Tensor:
    """The out-of-place ``x[key] = value`` where ``x`` or ``value`` is batched."""
    msg = "setitem: not yet batched"
    raise XpgradTypeError(msg)
