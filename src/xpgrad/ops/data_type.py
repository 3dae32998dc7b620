"""Data type functions: ``astype`` (differentiable) and the dtype queries.

Dtypes may be given as xpgrad dtypes (``xpgrad.float32``), standard names
(``"float32"``) or any library's dtype objects; results are xpgrad dtypes. The
queries that depend on a library (``result_type``, ``can_cast``, ``finfo``,
``iinfo``) ask the namespace of the array arguments, else the policy's, so they
report what the backend's own functions do; ``isdtype`` is the standard's table.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import array_api_compat

from .._backends import resolve_device
from .._dispatch import _raw, backend_namespace
from .._dtypes import DTYPES, DType, dtype_name, fast_name, real_dtype
from .._dtypes import dtype as backend_dtype
from .._dtypes import kind as dtype_kind
from .._exceptions import UnknownNameError, XpgradTypeError
from .._policy import current_policy
from ..autograd._batching_util import pointwise
from ._common import Array, Tensor, apply, is_complex, is_xpgrad
from ._registry import Chapter

__all__ = ["astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type"]

_C = "data_type"
# astype is an entry; the queries are entries of kind "query" (no primitive: they return no array)
op = Chapter(_C, module=__name__)
_QUERY = "a query about dtypes: returns no array"


def _name(dt: Any, func: str) -> str:
    """The standard name of a dtype in any spelling, or a clear error."""
    try:
        return dtype_name(dt, func=func)
    except UnknownNameError:
        if isinstance(dt, str):
            raise  # an unknown name: the error lists the valid ones
        # a scalar type used as a dtype (np.float32) that no table has met yet
        cand = getattr(dt, "__name__", None) if isinstance(dt, type) else None
        if cand in DTYPES or cand == "bool_":
            return "bool" if cand == "bool_" else cand
        msg = f"{func}: {dt!r} is not a dtype; expected an xpgrad dtype (xpgrad.float32), a name or a library's dtype"
        raise XpgradTypeError(msg) from None


# ---------------------------------------------------------------- astype
def _astype_fwd(xp: Any, x: Any, *, dtype: Any, copy: bool = True, device: Any = None, src: Any = None) -> Any:
    if device is None:
        return xp.astype(x, dtype, copy=copy)
    return xp.astype(x, dtype, copy=copy, device=device)


def _astype_vjp(xp: Any, g: Any, ans: Any, x: Any, *, dtype: Any, copy: bool = True, device: Any = None,
                src: Any = None) -> Any:
    # the engine casts back to x's dtype (and takes the real part for real x);
    # a cast that also moved the array moves the gradient back
    if device is None:
        return g
    if is_xpgrad(xp):
        return g.to_device(src)
    return array_api_compat.to_device(g, src)


def _astype_jvp(xp: Any, t: Any, ans: Any, x: Any, **kw: Any) -> Any:
    # linear: the cast applied to the tangent (its real part when casting complex to real)
    if is_complex(t) and not is_complex(ans):
        t = xp.real(t)
    if is_xpgrad(xp):
        return apply(_astype, (t,), kw)
    return _astype_fwd(xp, t, **kw)


_astype = op.primitive("astype", fwd=_astype_fwd, vjp=(_astype_vjp,), jvp=(_astype_jvp,), save=(), check_dtype=True, view=True,
                       batch=pointwise)


@op.entry(_astype)
def astype(x: Array, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Array:
    """Cast to ``dtype`` (differentiable between floating dtypes, real to complex included).

    ``dtype`` is an xpgrad dtype, a name or a library's dtype. Casting complex to
    real is refused, as the standard says: take ``real(x)`` (or ``abs``) first.
    A cast to an integer or boolean dtype gives a constant.

    Raises:
        XpgradTypeError: a complex-to-real cast.

    Examples:
        >>> import xpgrad as xg
        >>> xg.astype(xg.asarray([1.5]), xg.float32)
        Tensor([1.5], dtype=float32, device=cpu)
        >>> xg.astype(xg.asarray([1.5]), "complex128")
        Tensor([1.5+0.j], dtype=complex128, device=cpu)
    """
    data = _raw(x) if isinstance(x, Tensor) else x  # (a batched value's physical array: dtype and device only)
    xp = backend_namespace(data, func="astype")
    src_name = fast_name(data.dtype) or dtype_name(data.dtype)
    name = _name(dtype, "astype")
    if src_name.startswith("complex") and not name.startswith("complex"):
        msg = (
            f"astype: casting {src_name} to {name} would discard the imaginary part, which the "
            "standard does not permit; use xpgrad.real(x) (or abs) first, then astype"
        )
        raise XpgradTypeError(msg)
    kw: dict[str, Any] = {"dtype": backend_dtype(name, xp, func="astype"), "copy": copy}
    if device is not None:
        dev = resolve_device(xp, device, func="astype")
        src = array_api_compat.device(data)
        if dev != src:
            kw["device"] = dev
            kw["src"] = src
    return _astype.bind(x, **kw)


# ---------------------------------------------------------------- queries
def _namespace(args: tuple[Any, ...], func: str) -> tuple[ModuleType, list[Any]]:
    """The namespace of the array arguments (else the policy's) and the arguments in it:
    arrays unwrapped, dtypes as that namespace's dtype objects, scalars as they are."""
    # (a batched value's physical array has its library and dtype: all a query needs)
    arrays = [(a.data if type(a) is Tensor else _raw(a)) if isinstance(a, Tensor) else a
              for a in args if isinstance(a, Tensor) or _is_array(a)]
    xp = backend_namespace(*arrays, func=func) if arrays else current_policy().xp
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(a.data if type(a) is Tensor else _raw(a))
        elif _is_array(a) or isinstance(a, (bool, int, float, complex)):
            out.append(a)
        else:
            out.append(backend_dtype(_name(a, func), xp, func=func))
    return xp, out


def _is_array(a: Any) -> bool:
    return hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, type)


@op.query(reason=_QUERY)
def result_type(*arrays_and_dtypes: Any) -> DType:
    """The dtype that an operation on these arrays, dtypes and Python scalars returns.

    Arrays and Tensors are asked in their own library (so the answer is what
    that library's operations do); dtypes alone are asked in the policy's.

    Examples:
        >>> import xpgrad as xg
        >>> xg.result_type(xg.float32, xg.float64)
        xpgrad.float64
        >>> xg.result_type(xg.asarray([1.0], dtype=xg.float32), 2.0)
        xpgrad.float32
        >>> xg.result_type("int8", xg.uint8)
        xpgrad.int16
    """
    if not arrays_and_dtypes:
        msg = "result_type: at least one array or dtype is required"
        raise XpgradTypeError(msg)
    xp, args = _namespace(arrays_and_dtypes, "result_type")
    return DTYPES[dtype_name(xp.result_type(*args))]


@op.query(reason=_QUERY)
def can_cast(from_: Any, to: Any, /) -> bool:
    """Whether ``from_`` (a dtype or an array) can be cast to ``to`` by the type promotion rules.

    Examples:
        >>> import xpgrad as xg
        >>> xg.can_cast(xg.float32, xg.float64), xg.can_cast(xg.float64, "float32")
        (True, False)
        >>> xg.can_cast(xg.asarray([1], dtype=xg.int8), xg.int16)
        True
    """
    xp, (f, t) = _namespace((from_, to), "can_cast")
    if _is_array(t):
        msg = f"can_cast: to must be a dtype, got an array of dtype {dtype_name(t.dtype)}"
        raise XpgradTypeError(msg)
    if _is_array(f):  # not every library's can_cast takes arrays (JAX, Dask): ask about its dtype
        f = f.dtype
    return bool(xp.can_cast(f, t))


@dataclass(frozen=True)
class finfo_object:  # noqa: N801 - the standard's name for what finfo returns
    """Machine limits of a floating dtype (as the backend reports them, as Python floats)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: DType


@dataclass(frozen=True)
class iinfo_object:  # noqa: N801 - the standard's name for what iinfo returns
    """Limits of an integer dtype (as the backend reports them)."""

    bits: int
    max: int
    min: int
    dtype: DType


def _info_target(type_: Any, func: str) -> tuple[ModuleType, Any, str]:
    xp, (t,) = _namespace((type_,), func)
    if _is_array(t):
        t = t.dtype
    return xp, t, dtype_name(t)


@op.query(reason=_QUERY)
def finfo(type: Any, /) -> finfo_object:  # noqa: A002 - the standard's parameter name
    """Machine limits of a floating dtype (of an array's dtype), from the backend.

    For a complex dtype, the limits of its real and imaginary parts. For ``float16``
    and ``bfloat16``, the limits their formats fix (the libraries agree), whichever
    library's dtype object is given: ``finfo(x.dtype)`` of a torch bfloat16 array
    needs no torch policy.

    Raises:
        XpgradTypeError: not a floating dtype.

    Examples:
        >>> import xpgrad as xg
        >>> f = xg.finfo(xg.float32)
        >>> f.bits, f.eps, f.dtype
        (32, 1.1920928955078125e-07, xpgrad.float32)
        >>> xg.finfo(xg.complex128).dtype
        xpgrad.float64
    """
    half = _HALF_INFO.get(_name(type, "finfo") if not _is_array(type) else "")
    if half is not None:  # (the formats' limits, whichever library holds the dtype object)
        return half
    xp, t, name = _info_target(type, "finfo")
    if not dtype_kind(name).endswith("floating"):
        msg = f"finfo: {name} is not a floating-point dtype; use iinfo for integers"
        raise XpgradTypeError(msg)
    f = xp.finfo(t)
    return finfo_object(bits=int(f.bits), eps=float(f.eps), max=float(f.max), min=float(f.min),
                        smallest_normal=float(f.smallest_normal), dtype=DTYPES[real_dtype(name)])


#: float16 (IEEE binary16) and bfloat16 (float32's exponent, 8 bits of mantissa): fixed by the
#: formats, as every library reports them; asked of no namespace, so that ``finfo(x.dtype)``
#: of a torch bfloat16 array needs no torch policy
_HALF_INFO = {
    "float16": finfo_object(bits=16, eps=2.0**-10, max=65504.0, min=-65504.0, smallest_normal=2.0**-14,
                            dtype=DTYPES["float16"]),
    "bfloat16": finfo_object(bits=16, eps=2.0**-7, max=(2 - 2.0**-7) * 2.0**127, min=-(2 - 2.0**-7) * 2.0**127,
                             smallest_normal=2.0**-126, dtype=DTYPES["bfloat16"]),
}


@op.query(reason=_QUERY)
def iinfo(type: Any, /) -> iinfo_object:  # noqa: A002 - the standard's parameter name
    """Limits of an integer dtype (of an array's dtype), from the backend.

    Raises:
        XpgradTypeError: not an integer dtype.

    Examples:
        >>> import xpgrad as xg
        >>> xg.iinfo(xg.int8)
        iinfo_object(bits=8, max=127, min=-128, dtype=xpgrad.int8)
    """
    xp, t, name = _info_target(type, "iinfo")
    if not dtype_kind(name).endswith("integer"):
        msg = f"iinfo: {name} is not an integer dtype; use finfo for floating-point dtypes"
        raise XpgradTypeError(msg)
    i = xp.iinfo(t)
    return iinfo_object(bits=int(i.bits), max=int(i.max), min=int(i.min), dtype=DTYPES[name])


_KINDS = {
    "bool": ("bool",),
    "signed integer": ("signed integer",),
    "unsigned integer": ("unsigned integer",),
    "integral": ("signed integer", "unsigned integer"),
    "real floating": ("real floating",),
    "complex floating": ("complex floating",),
    "numeric": ("signed integer", "unsigned integer", "real floating", "complex floating"),
}


@op.query(reason=_QUERY)
def isdtype(dtype: Any, kind: str | Any | tuple[str | Any, ...]) -> bool:
    """Whether ``dtype`` is of ``kind``: a kind name, a dtype, or a tuple of them (any match).

    Kind names: ``"bool"``, ``"signed integer"``, ``"unsigned integer"``,
    ``"integral"``, ``"real floating"``, ``"complex floating"``, ``"numeric"``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.isdtype(xg.float32, "real floating"), xg.isdtype(xg.int8, ("bool", "unsigned integer"))
        (True, False)
        >>> xg.isdtype(xg.float32, xg.float32)
        True
    """
    name = _name(dtype, "isdtype")
    k = dtype_kind(name)
    for want in kind if isinstance(kind, tuple) else (kind,):
        if isinstance(want, str) and want in _KINDS:
            if k in _KINDS[want]:
                return True
        elif isinstance(want, str) and want not in DTYPES:
            msg = f"isdtype: unknown kind {want!r}; kinds are {list(_KINDS)} or dtypes"
            raise UnknownNameError(msg)
        elif _name(want, "isdtype") == name:
            return True
    return False



op.check_all(__all__)
