"""Helpers shared by the rule tables (kept tiny: rules should read as math)."""

from __future__ import annotations

from typing import Any

from .._dtypes import _NAME_BY_BACKEND, DType, dtype_name
from ..autograd._core import apply, primitive
from ..autograd._tensor import Tensor

__all__ = ["NOKW", "Array", "apply", "conj", "is_complex", "is_xpgrad", "primitive", "Tensor"]

NOKW: dict[str, Any] = {}
Array = Tensor  # annotation alias used in the public signatures


def is_xpgrad(xp: Any) -> bool:
    """True when a rule runs on xpgrad's own namespace (``create_graph``)."""
    return getattr(xp, "__name__", None) == "xpgrad"


def is_complex(x: Any) -> bool:
    """Whether an array (or Tensor) has a complex dtype; cheap on the hot path."""
    dt = x.dtype
    if type(dt) is DType:
        return dt.kind == "complex floating"
    try:
        name = _NAME_BY_BACKEND[dt]
    except (KeyError, TypeError):
        name = dtype_name(dt)
    return name.startswith("complex")


def conj(xp: Any, x: Any) -> Any:
    """``xp.conj(x)`` for complex arrays, ``x`` itself otherwise (no copy for reals).

    Rules follow PyTorch's convention: the VJP of a holomorphic ``f`` is
    ``g * conj(f'(z))``, so real-valued losses of complex inputs get the
    steepest-ascent direction.
    """
    if hasattr(x, "dtype") and is_complex(x):
        return xp.conj(x)
    return x
