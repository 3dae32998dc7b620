"""The fast-path adapter for NumPy and torch: what xpgrad's own forwards and VJP rules call.

What it is. `xpgrad._dispatch.backend_namespace` resolves the namespace that each
op's forward and each VJP rule computes with. For NumPy and torch arrays that is not
``array_api_compat.numpy``/``.torch`` itself but a `FastAdapter` over it (from
`numpy_adapter` / `torch_adapter`): the compat namespace, with a few of its
functions replaced by direct calls into the library. Forwards and rules call the
namespace once or more per op, and compat's Python wrappers cost 0.3-2 us a call
(NumPy's ``sum`` goes through ``np.sum``'s dispatch, ``matrix_transpose`` through two
wrappers and ``np.swapaxes``, ``broadcast_to`` through an ``nditer``; torch's binary
functions fix type promotion in Python): a visible share of a small op.

What it promises (tests/test_fast_adapter.py checks each):

* a replaced function gives what compat's gives (result type, 0-d NumPy scalars where
  compat gives them, dtype, shape, values, read-only flag, memory sharing) or raises the
  same error: it takes its direct path only where that is exactly what compat computes
  (a plain ``ndarray`` or ``torch.Tensor``, no device, no extra keyword) and calls
  compat's function otherwise;
* on that path it runs no Python function but itself (the speed it is for);
* every other attribute is compat's own object; a replacement is installed only when
  compat's attribute is the object it was written against, so another array-api-compat
  version keeps its own functions (`OVERRIDES` lists the names replaced here);
* it is internal: ``xpgrad.array_namespace``, ``Tensor.__array_namespace__``, the
  policy and the bound namespaces hand users the compat module
  (`xpgrad._dispatch.public_namespace`); `FastAdapter.adapted` is it.

What it is not: a stand-in for array-api-compat. It keeps compat's ``__name__``, because
the library of a namespace is looked up by name (``array_api_compat.is_numpy_namespace``,
xpgrad's own library lookups) and the library *is* NumPy's or torch's; its ``repr`` says
that it is xpgrad's adapter. Importing it imports no optional backend: the torch adapter
imports torch only when `torch_adapter` is first called (on a torch array).
"""

from __future__ import annotations

import builtins
import types
from collections.abc import Callable
from typing import Any

import array_api_compat.numpy as _compat_numpy
import numpy as _numpy
from array_api_compat.common import _aliases as _common
from array_api_compat.numpy import _aliases as _np_aliases

__all__ = ["OVERRIDES", "FastAdapter", "numpy_adapter", "torch_adapter"]

np: Any = _numpy  # (NumPy's stubs type the ufunc reductions by overloads that Any arguments miss)
_cnp: Any = _compat_numpy  # (its names come from a runtime copy of NumPy's: Any for the type checker)
_nd = np.ndarray
_NV = np._NoValue  # numpy's own "argument not given" marker, as in np.sum's defaults
_add_reduce = np.add.reduce
_max_reduce = np.maximum.reduce
_min_reduce = np.minimum.reduce
_np_matmul = np.matmul
_NUMERIC = frozenset("biufc")
_smallest = builtins.min  # (this module defines its own min)


class FastAdapter(types.ModuleType):
    """The fast-path adapter over one array-api-compat namespace (`adapted`).

    A module-like object holding every attribute of `adapted`, with the functions
    of `OVERRIDES` (NumPy) or `_torch_overrides` (torch) replaced; attributes
    missing from the copy are looked up on `adapted`. ``__name__`` is the adapted
    namespace's, so that a lookup of its library by name finds NumPy or torch.
    """

    #: the array-api-compat namespace this adapts (what users are handed instead)
    adapted: types.ModuleType

    def __getattr__(self, name: str) -> Any:
        base = self.__dict__.get("adapted")
        if base is None:
            raise AttributeError(name)
        return getattr(base, name)

    def __repr__(self) -> str:
        return f"<xpgrad's fast-path adapter over {self.__name__!r}>"


# ---------------------------------------------------------------- reductions
# np.sum/np.max/np.min on an exact ndarray are ufunc.reduce(a, axis, dtype, out, **given)
# (numpy's _wrapreduction); other types go to their own method, so they take np.sum.
def sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = _NV,  # noqa: A001
        initial: Any = _NV, where: Any = _NV) -> Any:
    if type(a) is _nd and initial is _NV and where is _NV:
        return _add_reduce(a, axis, dtype, out, False if keepdims is _NV else keepdims)
    return np.sum(a, axis, dtype, out, keepdims, initial, where)


def max(a: Any, axis: Any = None, out: Any = None, keepdims: Any = _NV,  # noqa: A001
        initial: Any = _NV, where: Any = _NV) -> Any:
    if type(a) is _nd and initial is _NV and where is _NV:
        return _max_reduce(a, axis, None, out, False if keepdims is _NV else keepdims)
    return np.max(a, axis, out, keepdims, initial, where)


def min(a: Any, axis: Any = None, out: Any = None, keepdims: Any = _NV,  # noqa: A001
        initial: Any = _NV, where: Any = _NV) -> Any:
    if type(a) is _nd and initial is _NV and where is _NV:
        return _min_reduce(a, axis, None, out, False if keepdims is _NV else keepdims)
    return np.min(a, axis, out, keepdims, initial, where)


# ---------------------------------------------------------------- linear algebra
def matmul(x1: Any, x2: Any, /, **kwargs: Any) -> Any:
    # compat: xp.matmul(x1, x2, **kwargs) behind two wrappers
    return _np_matmul(x1, x2, **kwargs)


def matrix_transpose(x: Any, /) -> Any:
    # compat: a ndim check, then np.swapaxes, which calls the method on an ndarray
    if type(x) is _nd and x.ndim >= 2:
        return x.swapaxes(-1, -2)
    return _cnp.matrix_transpose(x)


# ---------------------------------------------------------------- manipulation
def reshape(a: Any, /, shape: Any, order: str = "C", *, copy: Any = None, **kwargs: Any) -> Any:
    # np.reshape on an ndarray: a.reshape(shape, order=order[, copy=copy])
    if type(a) is _nd and order == "C" and not kwargs:
        return a.reshape(shape) if copy is None else a.reshape(shape, copy=copy)
    return np.reshape(a, shape, order, copy=copy, **kwargs)


def expand_dims(a: Any, axis: Any) -> Any:
    # np.expand_dims with one in-range int axis: a.reshape(shape with a 1 inserted)
    if type(a) is _nd and type(axis) is int:
        n = a.ndim + 1
        if -n <= axis < n:
            if axis < 0:
                axis += n
            s = a.shape
            return a.reshape((*s[:axis], 1, *s[axis:]))
    return np.expand_dims(a, axis)


def broadcast_to(array: Any, shape: Any, subok: bool = False) -> Any:
    # a 0-d array (a reduction's gradient) broadcast with all strides 0, read-only like
    # np.broadcast_to's result; anything else, or a shape NumPy refuses, goes to np.broadcast_to
    if type(array) is _nd and array.ndim == 0 and array.dtype.kind in _NUMERIC and type(shape) is tuple:
        try:
            if not shape or _smallest(shape) >= 0:  # (the constructor reads -1 as "infer")
                r = _nd(shape, array.dtype, array, 0, (0,) * len(shape))
                r.flags.writeable = False
                return r
        except (TypeError, ValueError, BufferError):
            pass
    return np.broadcast_to(array, shape, subok)


# ---------------------------------------------------------------- data type
def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    if device is None:  # compat checks the device, then calls the method
        return x.astype(dtype=dtype, copy=copy)
    return _cnp.astype(x, dtype, copy=copy, device=device)


# ---------------------------------------------------------------- creation
# compat's creation wrappers check ``device`` and call NumPy's function with the rest
def zeros(shape: Any, *, dtype: Any = None, device: Any = None, **kwargs: Any) -> Any:
    if device is None:
        return np.zeros(shape, dtype=dtype, **kwargs)
    return _cnp.zeros(shape, dtype=dtype, device=device, **kwargs)


def ones(shape: Any, *, dtype: Any = None, device: Any = None, **kwargs: Any) -> Any:
    if device is None:
        return np.ones(shape, dtype=dtype, **kwargs)
    return _cnp.ones(shape, dtype=dtype, device=device, **kwargs)


def empty(shape: Any, *, dtype: Any = None, device: Any = None, **kwargs: Any) -> Any:
    if device is None:
        return np.empty(shape, dtype=dtype, **kwargs)
    return _cnp.empty(shape, dtype=dtype, device=device, **kwargs)


def full(shape: Any, fill_value: Any, *, dtype: Any = None, device: Any = None, **kwargs: Any) -> Any:
    if device is None:
        return np.full(shape, fill_value, dtype=dtype, **kwargs)
    return _cnp.full(shape, fill_value, dtype=dtype, device=device, **kwargs)


def zeros_like(x: Any, /, *, dtype: Any = None, device: Any = None, **kwargs: Any) -> Any:
    if device is None:
        return np.zeros_like(x, dtype=dtype, **kwargs)
    return _cnp.zeros_like(x, dtype=dtype, device=device, **kwargs)


def ones_like(x: Any, /, *, dtype: Any = None, device: Any = None, **kwargs: Any) -> Any:
    if device is None:
        return np.ones_like(x, dtype=dtype, **kwargs)
    return _cnp.ones_like(x, dtype=dtype, device=device, **kwargs)


def empty_like(x: Any, /, *, dtype: Any = None, device: Any = None, **kwargs: Any) -> Any:
    if device is None:
        return np.empty_like(x, dtype=dtype, **kwargs)
    return _cnp.empty_like(x, dtype=dtype, device=device, **kwargs)


def full_like(x: Any, /, fill_value: Any, *, dtype: Any = None, device: Any = None, **kwargs: Any) -> Any:
    if device is None:
        return np.full_like(x, fill_value, dtype=dtype, **kwargs)
    return _cnp.full_like(x, fill_value, dtype=dtype, device=device, **kwargs)


def arange(start: Any, /, stop: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None,
           **kwargs: Any) -> Any:
    if device is None:
        return np.arange(start, stop=stop, step=step, dtype=dtype, **kwargs)
    return _cnp.arange(start, stop=stop, step=step, dtype=dtype, device=device, **kwargs)


def _wraps(f: Any) -> Any:
    """The function a compat ``get_xp`` wrapper calls (None for a plain function)."""
    return getattr(f, "__wrapped__", None)


def _wraps_common(name: str) -> Callable[[Any], bool]:
    """Whether a compat attribute is the ``get_xp`` wrapper of ``common._aliases.<name>``."""
    target = getattr(_common, name)
    return lambda f: _wraps(f) is target


# name -> (replacement, what array_api_compat.numpy's attribute must be for it to apply)
_CANDIDATES: dict[str, tuple[Callable[..., Any], Callable[[Any], bool]]] = {
    "sum": (sum, lambda f: f is np.sum),
    "max": (max, lambda f: f is np.max),
    "min": (min, lambda f: f is np.min),
    "matmul": (matmul, lambda f: _wraps(f) is _common.matmul),
    "matrix_transpose": (matrix_transpose, lambda f: _wraps(f) is _common.matrix_transpose),
    "reshape": (reshape, lambda f: f is np.reshape),
    "expand_dims": (expand_dims, lambda f: f is np.expand_dims),
    "broadcast_to": (broadcast_to, lambda f: f is np.broadcast_to),
    "astype": (astype, lambda f: f is _np_aliases.astype),
    **{
        name: (globals()[name], _wraps_common(name))
        for name in ("zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
                     "arange")
    },
}

# the names replaced in this environment (array-api-compat and NumPy versions decide)
OVERRIDES: tuple[str, ...] = tuple(n for n, (_, ok) in _CANDIDATES.items() if ok(getattr(_cnp, n, None)))

_KEEP_DUNDERS = ("__array_api_version__", "__array_namespace_info__", "__all__", "__dir__")
_NS: dict[str, FastAdapter] = {}


def _adapter(base: Any, overrides: dict[str, Callable[..., Any]]) -> FastAdapter:
    ns = FastAdapter(base.__name__, base.__doc__)
    attrs = {k: v for k, v in vars(base).items() if not k.startswith("__") or k in _KEEP_DUNDERS}
    attrs.update(overrides)
    ns.__dict__.update(attrs)
    ns.__dict__["adapted"] = base
    return ns


def numpy_adapter() -> FastAdapter:
    """The fast-path adapter over ``array_api_compat.numpy`` (one per process)."""
    ns = _NS.get("numpy")
    if ns is None:
        ns = _NS["numpy"] = _adapter(_cnp, {n: _CANDIDATES[n][0] for n in OVERRIDES})
    return ns


# ---------------------------------------------------------------- torch
# array_api_compat.torch fixes torch's type promotion in Python: a binary function
# converts Python scalars, then casts both tensors to the standard's result type
# (``_fix_promotion``), matmul always. Two tensors of one dtype need neither: the
# result type is that dtype and ``Tensor.to`` to its own dtype returns the tensor
# itself, so the fast path calls torch directly.
def _torch_overrides(ct: Any) -> dict[str, Callable[..., Any]]:
    import torch as _torch

    torch: Any = _torch  # (its stubs spell keepdims as keepdim; torch takes both, as compat calls it)
    T = torch.Tensor
    out: dict[str, Callable[..., Any]] = {}

    def same_dtype(compat_f: Any, torch_f: Any) -> Callable[..., Any]:
        def f(x1: Any, x2: Any, /, **kwargs: Any) -> Any:
            if type(x1) is T and type(x2) is T and x1.dtype is x2.dtype:
                return torch_f(x1, x2, **kwargs)
            return compat_f(x1, x2, **kwargs)

        f.__name__ = f.__qualname__ = compat_f.__name__
        f.__doc__ = compat_f.__doc__
        return f

    tal = ct._aliases
    two_arg = getattr(tal, "_two_arg", None)
    if two_arg is not None:
        code = two_arg(torch.add).__code__  # (every wrapper _two_arg makes runs this code)
        for name, f in vars(ct).items():
            if isinstance(f, types.FunctionType) and f.__code__ is code and callable(getattr(f, "__wrapped__", None)):
                out[name] = same_dtype(f, getattr(f, "__wrapped__"))  # noqa: B009 - (FunctionType has none for mypy)
    if ct.matmul is getattr(tal, "matmul", None):
        out["matmul"] = same_dtype(ct.matmul, torch.matmul)

    compat_mt = ct.matrix_transpose
    if _wraps(compat_mt) is _common.matrix_transpose:
        swapaxes = torch.swapaxes

        def matrix_transpose(x: Any, /) -> Any:
            if type(x) is T and x.ndim >= 2:
                return swapaxes(x, -1, -2)
            return compat_mt(x)

        out["matrix_transpose"] = matrix_transpose

    compat_sum: Any = ct.sum
    aliases_sum: Any = getattr(tal, "sum", None)
    if aliases_sum is compat_sum:
        tsum = torch.sum

        def sum(x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False,  # noqa: A001
                **kwargs: Any) -> Any:
            # compat: axis=None -> torch.sum(x, dtype=dtype), unsqueezed for keepdims;
            # an int axis -> torch.sum(x, axis, dtype=dtype, keepdims=keepdims)
            if not kwargs:
                if axis is None and not keepdims:
                    return tsum(x, dtype=dtype)
                if type(axis) is int:
                    return tsum(x, axis, dtype=dtype, keepdims=keepdims)
            return compat_sum(x, axis=axis, dtype=dtype, keepdims=keepdims, **kwargs)

        out["sum"] = sum
    return out


def torch_adapter() -> FastAdapter:
    """The fast-path adapter over ``array_api_compat.torch`` (imports torch; one per process)."""
    ns = _NS.get("torch")
    if ns is None:
        import array_api_compat.torch as ct

        ns = _NS["torch"] = _adapter(ct, _torch_overrides(ct))
    return ns

