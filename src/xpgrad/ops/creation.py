"""Creation functions. They honour the default-device policy.

Priority, as the standard's device-support page says: an explicit ``device=`` /
``dtype=`` first, then the input arrays (``asarray`` of an array, the ``*_like``
functions), then the policy (:func:`xpgrad.current_policy`).
"""

from __future__ import annotations

from typing import Any

from .._backends import resolve_device
from .._dispatch import backend_namespace
from .._dtypes import complex_dtype, dtype_name, kind, to_backend
from .._policy import current_policy
from ._common import Tensor

__all__ = ["asarray", "ones", "tensor", "zeros"]


def _target(dtype: Any, device: Any) -> tuple[Any, Any, Any]:
    """(xp, backend device, backend float dtype or explicit dtype) from the policy."""
    p = current_policy()
    xp = p.xp
    dev = resolve_device(xp, device) if device is not None else p.device
    dt = to_backend(dtype, xp) if dtype is not None else p.float_dtype()
    return xp, dev, dt


def _is_array(obj: Any) -> bool:
    return hasattr(obj, "__array_namespace__") or (
        hasattr(obj, "shape") and hasattr(obj, "dtype") and not isinstance(obj, (list, tuple))
    )


def asarray(
    obj: Any,
    /,
    *,
    dtype: Any = None,
    device: Any = None,
    copy: bool | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """Convert ``obj`` (a Tensor, any backend array, a scalar or nested sequence) to a Tensor.

    Backend arrays keep their library and device unless ``device=`` says otherwise;
    Python data goes to the policy's namespace and device. With no ``dtype=``,
    Python floats take the policy's dtype (or the backend's default float dtype).

    ``requires_grad`` is an xpgrad extension (keyword-only, after the standard's
    parameters).

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.asarray([1, 2]).dtype, xg.asarray([1.0]).dtype
        (xpgrad.int64, xpgrad.float64)
        >>> with xg.default_device(dtype="float32"):
        ...     xg.asarray([1.0]).dtype
        xpgrad.float32
        >>> type(xg.asarray(np.ones(2)).data).__name__
        'ndarray'
    """
    if isinstance(obj, Tensor):
        t = obj
        if dtype is not None and dtype_name(dtype) != dtype_name(t.data.dtype):
            from .data_type import astype

            t = astype(t, dtype)
        elif copy:
            from .data_type import astype

            t = astype(t, t.data.dtype, copy=True)
        if device is not None:
            t = t.to_device(device)
        if requires_grad:
            t.requires_grad_(True)
        return t
    if _is_array(obj):
        xp = backend_namespace(obj, func="asarray")
        if dtype is None and device is None and not copy:
            return Tensor(obj, requires_grad=requires_grad)
        dev = resolve_device(xp, device) if device is not None else None
        data = xp.asarray(obj, dtype=to_backend(dtype, xp), device=dev, copy=copy)
        return Tensor(data, requires_grad=requires_grad)
    p = current_policy()
    xp = p.xp
    dev = resolve_device(xp, device) if device is not None else p.device
    if dtype is not None:
        data = xp.asarray(obj, dtype=to_backend(dtype, xp), device=dev, copy=copy)
    else:
        data = xp.asarray(obj, device=dev, copy=copy)
        if p.dtype is not None:
            k = kind(data.dtype)
            if k == "real floating" and dtype_name(data.dtype) != p.dtype:
                data = xp.astype(data, to_backend(p.dtype, xp))
            elif k == "complex floating" and dtype_name(data.dtype) != complex_dtype(p.dtype):
                data = xp.astype(data, to_backend(complex_dtype(p.dtype), xp))
    return Tensor(data, requires_grad=requires_grad)


def tensor(data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Make a new Tensor from data (always a copy), PyTorch style.

    Examples:
        >>> import xpgrad as xg
        >>> xg.tensor([1.0, 2.0], requires_grad=True)
        Tensor([1., 2.], dtype=float64, device=cpu, requires_grad=True)
    """
    return asarray(data, dtype=dtype, device=device, copy=True, requires_grad=requires_grad)


def zeros(shape: int | tuple[int, ...], *, dtype: Any = None, device: Any = None) -> Tensor:
    """A Tensor of zeros on the policy's namespace and device.

    Examples:
        >>> import xpgrad as xg
        >>> xg.zeros((2,))
        Tensor([0., 0.], dtype=float64, device=cpu)
    """
    xp, dev, dt = _target(dtype, device)
    return Tensor(xp.zeros(shape, dtype=dt, device=dev))


def ones(shape: int | tuple[int, ...], *, dtype: Any = None, device: Any = None) -> Tensor:
    """A Tensor of ones on the policy's namespace and device.

    Examples:
        >>> import xpgrad as xg
        >>> xg.ones(2, dtype=xg.float32)
        Tensor([1., 1.], dtype=float32, device=cpu)
    """
    xp, dev, dt = _target(dtype, device)
    return Tensor(xp.ones(shape, dtype=dt, device=dev))
