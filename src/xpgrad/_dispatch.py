"""Namespace dispatch: which array library does a call's arguments come from.

``backend_namespace(*xs)`` unwraps Tensors and returns the *backend* namespace,
cached by the tuple of argument types, so the per-op hot path pays one dict
lookup. For NumPy and torch arrays that is xpgrad's leaner copy of
``array_api_compat.numpy`` / ``.torch`` (``_fast_adapter``); ``array_namespace`` hands
users the compat module itself. Mixed libraries raise
[`NamespaceMismatchError`][xpgrad.NamespaceMismatchError]; mixed devices raise [`DeviceMismatchError`][xpgrad.DeviceMismatchError].
Python scalars and None are ignored (a NumPy scalar alone counts as NumPy's); a
call with no array at all gets the current policy's namespace.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

import array_api_compat
import numpy as np

from . import _tracing
from ._exceptions import DeviceMismatchError, NamespaceMismatchError, XpgradTypeError, XpgradValueError
from ._fast_adapter import numpy_adapter, torch_adapter

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "NUMPY_SCALARS", "SCALAR_PRIMITIVES", "array_namespace", "backend_namespace", "check_devices", "check_known_shapes", "default_namespace",
    "public_namespace", "python_scalar", "python_scalars", "set_bound_namespace", "set_default_namespace",
    "set_tensor_type", "tensor_namespace",
]

_SCALARS = (bool, int, float, complex, type(None))
#: NumPy's scalar types (``numpy.float64(2.0)``, ``numpy.int64``, ``numpy.bool_``...): next to an
#: array of any library they are Python scalars (see `python_scalars`); alone (a NumPy full
#: reduction's result) they are NumPy's 0-d arrays. ``longdouble`` has no Python scalar: not one.
NUMPY_SCALARS: frozenset[type] = frozenset(
    getattr(np, n) for n in (
        "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64", "complex64", "complex128",
    )
)
_CACHE: dict[tuple[type, ...], ModuleType] = {}
# id(fast-path adapter) -> the compat namespace it adapts (see _fast)
_PUBLIC: dict[int, ModuleType] = {}


# This module is at the bottom of xpgrad's layers (the autograd layer imports it), so the
# three things of the upper layers that it calls are handed down to it when those are
# imported: the Tensor class (by ``autograd._tensor``), the current policy's namespace (by
# ``_policy``) and the bound namespaces (by ``_bound``).
class _NoTensor:  # (until autograd._tensor hands the Tensor class down: nothing is an instance)
    pass


_Tensor: type = _NoTensor


def set_tensor_type(cls: type) -> None:
    """Hand down the Tensor class (``autograd._tensor`` calls this when it is imported)."""
    global _Tensor
    _Tensor = cls
    _tracing._Tensor = cls


def _not_handed_down(*args: Any) -> NoReturn:
    msg = "xpgrad is imported only in part: import xpgrad (its package) first"
    raise XpgradTypeError(msg)


_default_namespace: Callable[[], ModuleType] = _not_handed_down
_bound_namespace: Callable[[ModuleType, Any], Any] = _not_handed_down


def set_default_namespace(fn: Callable[[], ModuleType]) -> None:
    """Hand down ``fn() -> the current policy's namespace`` (``_policy`` calls this when it is imported)."""
    global _default_namespace
    _default_namespace = fn


def default_namespace() -> ModuleType:
    """The current policy's namespace: where arrays go when no input array says."""
    return _default_namespace()


def set_bound_namespace(fn: Callable[[ModuleType, Any], Any]) -> None:
    """Hand down ``fn(xp, device) -> the bound xpgrad namespace`` (``_bound`` calls this when it is imported)."""
    global _bound_namespace
    _bound_namespace = fn


def _fast(xp: ModuleType) -> ModuleType:
    """The namespace xpgrad computes with for a resolved one: NumPy's or torch's fast paths, else ``xp``."""
    name = getattr(xp, "__name__", None)
    if name in ("array_api_compat.numpy", "array_api_compat.torch") and isinstance(xp, ModuleType):
        fast = numpy_adapter() if name == "array_api_compat.numpy" else torch_adapter()
        if fast.adapted is xp:
            _PUBLIC[id(fast)] = xp
            return fast
    return xp


def public_namespace(xp: ModuleType) -> ModuleType:
    """The namespace users are handed for one that `backend_namespace` returned.

    Internally NumPy and torch arrays resolve to xpgrad's fast-path adapters (``_fast_adapter``);
    users, and comparisons with a namespace they gave, see the compat modules.
    """
    return _PUBLIC.get(id(xp), xp)


def _resolve(arrays: list[Any], func: str) -> ModuleType:
    """Resolve the backend namespace of raw arrays (no Tensors); no caching."""
    if _Tracer in map(type, arrays):  # (xg.jit tracing: the tracing namespace over the witnesses')
        return _tracing.namespace_of(arrays)
    try:
        return _fast(array_api_compat.array_namespace(*arrays))
    except TypeError as e:
        kinds: dict[str, Any] = {}
        for a in arrays:
            kinds.setdefault(f"{type(a).__module__}.{type(a).__qualname__}", a)
        if len(kinds) > 1:
            for a in arrays:  # an object that is no array at all: say so, not "two libraries"
                if not array_api_compat.is_array_api_obj(a):
                    msg = f"{func}: {type(a).__name__} {_short(a)} is not an array of any array API library"
                    raise XpgradTypeError(msg) from e
            names = " and ".join(sorted(kinds))
            msg = (
                f"{func}: arrays from different libraries in one call ({names}); "
                "convert one side first, e.g. xp.asarray(x) or xp.from_dlpack(x) "
                "with xp the namespace you want"
            )
            raise NamespaceMismatchError(msg) from e
        bad = arrays[0]
        msg = f"{func}: {type(bad).__name__} {_short(bad)} is not an array of any array API library"
        raise XpgradTypeError(msg) from e


_Tracer = _tracing.Tracer
_tracing.set_resolver(lambda *ws: _resolve(list(ws), "jit"))


#: the primitives whose arguments may be Python scalars, as the standard's binary elementwise
#: functions, ``where`` and ``clip`` (every pointwise primitive of two or more arguments: the
#: registry adds them): there a NumPy scalar next to an array is a Python scalar. Elsewhere a
#: NumPy scalar is what NumPy made it, a 0-d array (an index from NumPy's own indexing).
SCALAR_PRIMITIVES: set[Any] = set()


def python_scalar(x: Any) -> Any:
    """A NumPy scalar (``numpy.float64(2.0)``) as the Python scalar of its kind (``2.0``);
    anything else as it is. For arguments that the standard types as Python scalars
    (``full``'s ``fill_value``, ``arange``'s ends, ``clip``'s bounds)."""
    return x.item() if type(x) in NUMPY_SCALARS else x


def _is_array_arg(x: Any) -> bool:
    return isinstance(x, _Tensor) or (
        type(x) not in NUMPY_SCALARS and not isinstance(x, _SCALARS) and hasattr(x, "shape") and hasattr(x, "dtype")
    )


def python_scalars(args: Any) -> Any:
    """``args`` (a tuple or list of a function's arguments) with its NumPy scalars as Python
    scalars, when another argument is an array (a Tensor, or an array of any library).

    A NumPy scalar from a library (SciPy's ``numpy.float64`` constants, ``np.log(2 * np.pi)``)
    next to a torch, JAX, Dask or array-api-strict array is a Python scalar for every operator
    and every function, as in the standard, with a Python scalar's promotion (``float32``
    times ``numpy.float64(2)`` is ``float32``, on NumPy too). NumPy scalars with no array
    beside them keep NumPy's meaning. Returns ``args`` itself when it has none to convert.

    Examples:
        >>> import numpy as np
        >>> from xpgrad._dispatch import python_scalars
        >>> a = np.ones(2, dtype=np.float32)
        >>> python_scalars((a, np.float64(2.0)))[1], type(python_scalars((a, np.int64(3)))[1])
        (2.0, <class 'int'>)
        >>> python_scalars((np.float64(2.0), 1.0))[0].dtype
        dtype('float64')
    """
    if not any(type(a) in NUMPY_SCALARS for a in args) or not any(map(_is_array_arg, args)):
        return args
    return type(args)(a.item() if type(a) in NUMPY_SCALARS else a for a in args)


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) < 80 else r[:77] + "..."


def _raw(t: Any) -> Any:
    """A Tensor's backend array; a batched one's (inside vmap) physical array, which has its
    library and device."""
    inner = getattr(t, "_inner", None)
    return t.data if inner is None else inner.data


def raw_array(x: Any) -> Any:
    """The backend array behind ``x`` (a Tensor's data; a batched one's physical array, for its
    library, dtype and device only: never its shape or values as the example's); anything
    else as it is."""
    return _raw(x) if isinstance(x, _Tensor) else x


def backend_namespace(*xs: Any, func: str = "array_namespace") -> ModuleType:
    """The backend namespace of the arguments, Tensors unwrapped; cached by types.

    Does not check devices (see `check_devices`); used on the hot path.
    """
    key = tuple(map(type, xs))
    xp = _CACHE.get(key)
    if xp is None:
        xp = _backend_namespace(xs, key, func)
    # (inside xg.jit every call is recorded: one test of a counter when no trace runs)
    return _recording(xp) if _TRACING[0] else xp


_TRACING = _tracing.ACTIVE  # [number of xg.jit traces running, in any thread]: 0 costs eager code one test


def untraced_namespace(*xs: Any, func: str = "array_namespace") -> ModuleType:
    """`backend_namespace` without the recording namespace of a running ``xg.jit`` trace:
    for a function of Python and NumPy scalars only (``xp.log(2 * xp.pi)``), a constant which
    the trace takes as computed, as it takes the Python scalars themselves."""
    key = tuple(map(type, xs))
    xp = _CACHE.get(key)
    if xp is None:
        xp = _backend_namespace(xs, key, func)
    return xp
_recording = _tracing.recording


def _backend_namespace(xs: tuple[Any, ...], key: tuple[type, ...], func: str) -> ModuleType:
    T = _Tensor
    arrays = []
    for x in xs:
        if isinstance(x, T):
            arrays.append(_raw(x))
        elif not isinstance(x, _SCALARS):
            if isinstance(x, (list, tuple, dict, str, bytes, set)):
                msg = (
                    f"{func}: expected an array, a Tensor or a Python scalar, got "
                    f"{type(x).__name__} {_short(x)}; convert it with xpgrad.asarray first"
                )
                raise XpgradTypeError(msg)
            arrays.append(x)
    if not arrays:
        # NumPy's float64/complex128 scalars subclass Python's float/complex: ignored next to
        # arrays, but alone (a full reduction's result) they are NumPy's, not the policy's
        nps = [x for x in xs if hasattr(x, "dtype")]
        if nps:
            xp = _resolve(nps, func)
            if type(xp) is _tracing.TracingNamespace:
                return xp
            _CACHE[key] = xp
            return xp
        if xs and func != "array_namespace" and all(x is None for x in xs):  # sum(None): no array at all
            msg = f"{func}: expected an array, a Tensor or a Python scalar, got None"
            raise XpgradTypeError(msg)
        return _default_namespace()  # depends on the policy: never cached
    xp = _resolve(arrays, func)
    if type(xp) is _tracing.TracingNamespace:  # (depends on the witnesses, not on the types)
        return xp
    if not any(isinstance(x, T) for x in xs):
        # a key made only of raw types determines the namespace for good
        _CACHE[key] = xp
    else:
        # Tensor keys do not determine the backend; cache the unwrapped types instead
        _CACHE.setdefault(tuple(type(a) for a in arrays), xp)
    return xp


def check_devices(*xs: Any, func: str = "array_namespace") -> Any:
    """Raise DeviceMismatchError if the arrays live on different devices; return the device."""
    T = _Tensor
    first = None
    first_dev = None
    for x in xs:
        if isinstance(x, T):
            x = _raw(x)  # (NumPy's 0-d results are NumPy scalars, float's subclass: arrays here)
        elif isinstance(x, _SCALARS):
            continue
        dev = array_api_compat.device(x)
        if dev is None:
            # no placement yet (a JAX tracer under jit/grad/vmap): it goes wherever the others are
            continue
        if first is None:
            first, first_dev = x, dev
        elif dev != first_dev:
            msg = (
                f"{func}: arrays on different devices in one call ({first_dev!r} and {dev!r}); "
                "move one with to_device() first"
            )
            raise DeviceMismatchError(msg)
    return first_dev


def check_known_shapes(func: str, shapes: Any, err: Exception, *, backward: bool = False) -> None:
    """After a backend error in ``func``: raise a clear error if a shape has unknown sizes.

    Dask gives data-dependent sizes (boolean-mask indexing, ``nonzero``,
    ``unique_*``) as NaN; xpgrad never computes to find them. Called only on an
    error path, so the hot path pays nothing. Returns when every size is known.
    """
    for s in shapes:
        if any(d is None or d != d for d in s):
            what = "differentiate through" if backward else "run on"
            msg = (
                f"{func}: cannot {what} an array of data-dependent shape {tuple(s)} (unknown sizes, "
                "as Dask gives after boolean-mask indexing, nonzero or unique), and xpgrad never "
                "computes to find them; use xp.where(mask, x, 0) instead of x[mask], or make the "
                f"sizes known first (Dask: x.compute_chunk_sizes(), which computes). "
                f"The backend said: {type(err).__name__}: {err}"
            )
            raise XpgradValueError(msg) from err


def array_namespace(*xs: Any, api_version: str | None = None) -> ModuleType:
    """The array API namespace of the arguments, with the contract of array_api_compat's.

    Raw arrays give their own library's namespace (NumPy arrays give
    ``array_api_compat.numpy``). If any argument is an xpgrad Tensor, the result is
    the xpgrad namespace *bound* to the arguments' library and device (a
    `BoundNamespace`, whose ``__name__`` is ``"xpgrad"``), so
    generic code keeps recording gradients, and the arrays it creates
    (``xp.asarray(2.0)``, ``xp.zeros(n)``) land next to its inputs; raw arrays
    mixed with Tensors must come from the Tensors' backend. Python scalars, NumPy
    scalars next to arrays, and None are ignored.

    Raises:
        NamespaceMismatchError: arrays from two libraries (names both types).
        DeviceMismatchError: arrays on two devices (names both devices).

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.array_namespace(np.ones(2), 1.0).__name__
        'array_api_compat.numpy'
        >>> xg.array_namespace(xg.asarray([1.0]), np.ones(1)).__name__
        'xpgrad'
        >>> xg.array_namespace(xg.asarray([1.0]))
        <xpgrad namespace bound to numpy on 'cpu'>
    """
    xs = python_scalars(xs)  # (NumPy scalars next to arrays are Python scalars: ignored)
    xp = backend_namespace(*xs)
    device = check_devices(*xs)
    public = _PUBLIC.get(id(xp), xp)
    if any(isinstance(x, _Tensor) for x in xs):
        return _bound_namespace(public, device)
    return public


def tensor_namespace(data: Any) -> Any:
    """The bound xpgrad namespace of one Tensor's backend array (``Tensor.__array_namespace__``)."""
    xp = backend_namespace(data)
    return _bound_namespace(_PUBLIC.get(id(xp), xp), array_api_compat.device(data))
