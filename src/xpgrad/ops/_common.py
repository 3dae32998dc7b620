"""Helpers shared by the rule tables (kept tiny: rules should read as math)."""

from __future__ import annotations

from typing import Any

from .._dtypes import DType, dtype_name, fast_name
from ..autograd._core import apply, composite, declare, primitive
from ..autograd._tensor import Tensor

__all__ = ["NOKW", "Array", "apply", "composite", "conj", "declare", "is_complex", "is_xpgrad", "primitive", "Tensor", "zeros_like_shape"]

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
    name = fast_name(dt) or dtype_name(dt)
    return name.startswith("complex")


def conj(xp: Any, x: Any) -> Any:
    """``xp.conj(x)`` for complex arrays, ``x`` itself otherwise (no copy for reals).

    Rules follow PyTorch's convention: the VJP of a holomorphic ``f`` is
    ``g * conj(f'(z))``, so real-valued losses of complex inputs get the
    steepest-ascent direction.
    """
    if hasattr(x, "dtype"):
        return xp.conj(x) if is_complex(x) else x
    if type(x) is complex:  # a Python scalar argument (``multiply(x, 2j)``)
        return x.conjugate()
    return x


def zeros_like_shape(xp: Any, like: Any, shape: tuple[int, ...], dtype: Any = None) -> Any:
    """Zeros of ``shape`` with ``like``'s namespace, device and dtype (or ``dtype``).

    Works in both rule modes: on raw arrays it calls the backend; on Tensors it
    creates a constant Tensor on the same backend (not the policy's namespace).
    """
    import array_api_compat

    if isinstance(like, Tensor):
        data = like.data
        bxp = array_api_compat.array_namespace(data)
        dt = data.dtype if dtype is None else dtype
        return Tensor(bxp.zeros(shape, dtype=dt, device=array_api_compat.device(data)))
    dt = like.dtype if dtype is None else dtype
    return xp.zeros(shape, dtype=dt, device=array_api_compat.device(like))
