"""Data type functions: ``astype`` (differentiable) and the dtype queries."""

from __future__ import annotations

from typing import Any

from .._dtypes import dtype_name, to_backend
from ._common import NOKW, Array, apply, is_complex, primitive

__all__ = ["astype"]

_C = "data_type"


def _astype_fwd(xp: Any, x: Any, *, dtype: Any, copy: bool = True, device: Any = None) -> Any:
    return xp.astype(x, to_backend(dtype, xp), copy=copy, **({"device": device} if device is not None else {}))


def _astype_vjp(xp: Any, g: Any, ans: Any, x: Any, *, dtype: Any, copy: bool = True, device: Any = None) -> Any:
    # the engine casts back to x's dtype (and takes the real part for real x)
    return g


_astype = primitive("astype", _astype_fwd, save=(), check_dtype=True, chapter=_C)
_astype.defvjp(_astype_vjp)


def astype(x: Array, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Array:
    """Cast to ``dtype`` (differentiable between floating dtypes).

    Examples:
        >>> import xpgrad as xg
        >>> xg.astype(xg.asarray([1.5]), xg.float32)
        Tensor([1.5], dtype=float32, device=cpu)
    """
    _ = (dtype_name, is_complex, NOKW)
    return apply(_astype, (x,), {"dtype": dtype, "copy": copy, "device": device})
