"""Whether two backend arrays may share memory: the library is asked.

A write through one Tensor must be seen by every Tensor whose data is the same memory,
so the version counter (``Tensor._version``) is shared exactly between Tensors whose
arrays alias. Which results are views depends on the library, not on the function:
``flip`` is a view on NumPy and a copy on PyTorch, ``real`` of a real array is the
array itself on both, a boolean-mask selection is always a copy. So the primitives that
*may* return a view of an argument (``Primitive(view=True)``) ask `may_alias`
about the result they got.

Per library:

- NumPy, CuPy, array-api-strict (a NumPy array inside): ``may_share_memory`` (the
  bounds test: conservative, never misses a real overlap);
- PyTorch: the same storage (``untyped_storage().data_ptr()``), on the same device;
- JAX: never. Its arrays are immutable, and a Tensor's in-place update replaces that
  Tensor's ``data``; no other Tensor sees it, whatever it was computed from.
- Dask: only the same array object. ``__setitem__`` rebuilds that object's graph; a
  slice taken before is another object and does not see it.
- any other library: always (a missed alias is a silent wrong gradient, a false one
  only an error at backward).

Under ``xg.jit`` a Tensor's data is a traced array (``xpgrad._tracing.Tracer``): the
library is asked about the arrays it stands for (its witnesses, the first call's arrays),
so a write into a fresh copy (``asarray(x, copy=True)``, an ``astype`` that converts) is
no write into a view under jit either. The replay makes the same calls on arrays of the
same types, shapes, dtypes and (NumPy) strides, so it aliases where the trace did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _tracing
from .._tracing import Tracer

__all__ = ["may_alias"]

Check = Callable[[Any, Any], bool]

#: array type -> its check (filled on first sight of a type)
_CHECKS: dict[type, Check] = {}


def _numpy() -> Check:
    nd, overlap = np.ndarray, np.may_share_memory

    def check(a: Any, b: Any) -> bool:
        return a is b or (type(b) is nd and bool(overlap(a, b)))

    return check


def _strict() -> Check:
    nd, overlap = np.ndarray, np.may_share_memory

    def check(a: Any, b: Any) -> bool:
        if a is b:
            return True
        inner_a = getattr(a, "_array", None)
        inner_b = getattr(b, "_array", None)
        return isinstance(inner_a, nd) and isinstance(inner_b, nd) and bool(overlap(inner_a, inner_b))

    return check


def _cupy() -> Check:
    import cupy

    nd, overlap = cupy.ndarray, cupy.may_share_memory

    def check(a: Any, b: Any) -> bool:
        return a is b or (isinstance(b, nd) and bool(overlap(a, b)))

    return check


def _torch() -> Check:
    import torch

    tensor = torch.Tensor

    def check(a: Any, b: Any) -> bool:
        if a is b:
            return True
        if not isinstance(b, tensor) or a.device != b.device:
            return False
        base_a = a._base if a._base is not None else a
        base_b = b._base if b._base is not None else b
        if base_a is base_b:
            return True
        try:
            return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())
        except (RuntimeError, NotImplementedError):  # tensors without storage (functorch wrappers)
            return True

    return check


def _never(a: Any, b: Any) -> bool:
    return False


def _same_object(a: Any, b: Any) -> bool:
    return a is b


def _always(a: Any, b: Any) -> bool:
    return True


def _traced(a: Any, b: Any) -> bool:
    # (a traced array, or a constant next to one: the arrays they stand for are asked)
    return may_alias(getattr(a, "_w", a) if type(a) is _TRACER[0] else a,
                     getattr(b, "_w", b) if type(b) is _TRACER[0] else b)


#: xpgrad's traced array type
_TRACER: list[Any] = [Tracer]


def _check_for(t: type) -> Check:
    mod = t.__module__.split(".", 1)[0]
    if t is Tracer:
        return _traced
    if mod == "numpy":
        return _numpy()
    if mod == "array_api_strict":
        return _strict()
    if mod == "cupy":
        return _cupy()
    if mod == "torch":
        return _torch()
    if mod in ("jax", "jaxlib"):
        return _never
    if mod == "dask":
        return _same_object
    return _always


def may_alias(a: Any, b: Any) -> bool:
    """Whether a write into backend array ``a`` may change backend array ``b`` (or back).

    Examples:
        >>> import numpy as np
        >>> from xpgrad.autograd._alias import may_alias
        >>> x = np.arange(4.0)
        >>> may_alias(x[::-1], x), may_alias(x[x > 1], x)
        (True, False)
    """
    t = type(a)
    if t is not type(b) and type(b) is _TRACER[0]:  # (a constant and a traced array)
        return _traced(a, b)
    check = _CHECKS.get(t)
    if check is None:
        check = _CHECKS[t] = _check_for(t)
    return check(a, b)


_tracing.set_may_alias(may_alias)  # (the trace asks it; _tracing cannot import this package: hand it down)
