"""Creation functions. They honour the default-device policy.

Priority, as the standard's device-support page says: an explicit ``device=`` /
``dtype=`` first, then the input arrays (``asarray`` of an array, the ``*_like``
functions, ``tril``/``triu``/``meshgrid``), then the policy
([`xpgrad.current_policy`][xpgrad.current_policy]). An explicit device *object* of another library
than the policy's (a ``torch.device`` under a NumPy policy) selects that library;
device strings (``"cpu"``, ``"cuda:1"``, ``"device1"``) are read in the policy's
library. The policy's ``dtype`` is the default for *floating* results only:
integer and boolean results (``arange(3)``, ``full(2, 7)``) keep integer dtypes.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import array_api_compat

from .._backends import LIBRARIES, library_of, load_namespace, namespace_devices, resolve_device
from .._dispatch import _raw, backend_namespace, public_namespace, python_scalar
from .._dtypes import DType, complex_dtype, dtype, dtype_name, fast_name, kind
from .._exceptions import DTypeUnavailableError, UnknownNameError, XpgradError, XpgradTypeError, XpgradValueError
from .._policy import DevicePolicy, current_policy
from .._tracing import is_tracer, recording
from ..autograd._batched import Batched, from_phys
from ..autograd._batching_util import stacked_matrices
from ..autograd._core import Primitive
from ._common import Array, Tensor
from ._registry import Chapter, prim_of
from .data_type import _name as _dtype_name_of
from .data_type import astype, result_type
from .manipulation import broadcast_to, reshape, stack

__all__ = [
    "arange",
    "asarray",
    "empty",
    "empty_like",
    "eye",
    "from_dlpack",
    "full",
    "full_like",
    "linspace",
    "meshgrid",
    "ones",
    "ones_like",
    "tensor",
    "tril",
    "triu",
    "zeros",
    "zeros_like",
]

_C = "creation"
#: every function of the standard is an entry: tril, triu and meshgrid bind their primitive; the
#: others are creation entries (`Chapter.creation`: no primitive, the graph records nothing,
#: the body keeps the default-device policy), tensor (torch's spelling of asarray) too
op = Chapter(_C, module=__name__)
_NO_INPUT = "creates an array from a shape or Python scalars: no array input"
_LIKE = "the values do not depend on the input array's values"


# ---------------------------------------------------------------- where and what
# type of a device object -> the namespace whose devices() lists it (never str:
# strings are read in the policy's library)
_DEVICE_NS: dict[type, ModuleType] = {}


def _device_namespace(xp: ModuleType, device: Any) -> ModuleType:
    """The namespace a device object belongs to: ``xp`` when it lists it, else the
    already-imported library that does (so ``device=t.device`` of a torch Tensor
    works under a NumPy policy); ``xp`` when none does (the backend then says why)."""
    t = type(device)
    ns = _DEVICE_NS.get(t)
    if ns is not None:
        return ns
    candidates = [xp]
    for name, (module, _, _) in LIBRARIES.items():
        if name in sys.modules or module in sys.modules:
            try:
                candidates.append(load_namespace(name))
            except ImportError:
                continue
    for cand in candidates:
        try:
            if device in namespace_devices(cand):
                _DEVICE_NS[t] = cand
                return cand
        except TypeError:  # devices that refuse comparison with other libraries' devices
            continue
    return xp


def _where(device: Any, func: str) -> tuple[DevicePolicy, ModuleType, Any]:
    """(policy, namespace, backend device) for a function without input arrays."""
    p, xp, dev = _where_eager(device, func)
    return p, recording(xp), dev  # (inside xg.jit an array made from nothing is a value of the program)


def _where_eager(device: Any, func: str) -> tuple[DevicePolicy, ModuleType, Any]:
    p = current_policy()
    xp = p.xp
    if device is None:
        return p, xp, p.device
    if isinstance(device, str):
        return p, xp, resolve_device(xp, device, func=func)
    if device is not p.device:
        resolve_device(xp, device, func=func)  # refuses what is no device at all (an int, a list)
        xp = _device_namespace(xp, device)
    return p, xp, device


def _dt(dt: Any, xp: ModuleType, func: str) -> Any:
    """Any dtype spelling (xpgrad dtype, name, any library's dtype) as ``xp``'s object."""
    if dt is None:
        return None
    if type(dt) is DType or isinstance(dt, str):
        return dtype(dt, xp, func=func)
    return dtype(_dtype_name_of(dt, func), xp, func=func)


def _float_default(p: DevicePolicy, xp: ModuleType, complex_: bool = False) -> Any:
    """The policy's floating dtype for ``xp``, or None: the backend's own default."""
    if p.dtype is None:
        return None
    return dtype(complex_dtype(p.dtype) if complex_ else p.dtype, xp)


def _scalar_default(p: DevicePolicy, xp: ModuleType, *values: Any) -> Any:
    """Default dtype for Python scalars: the policy's for floats/complex, else the backend's."""
    if p.dtype is None:
        return None
    if any(isinstance(v, complex) for v in values):
        return _float_default(p, xp, complex_=True)
    if any(isinstance(v, float) for v in values):
        return _float_default(p, xp)
    return None


def _create(func: str, xp: ModuleType, dev: Any, dt: Any, make: Any, *args: Any, **kw: Any) -> Tensor:
    """Call a backend creation function; turn a dtype the device lacks into a clear error."""
    if dev is not None:
        kw["device"] = dev
    try:
        return Tensor(make(*args, dtype=dt, **kw))
    except Exception as e:
        # the *_like functions inherit the input's dtype when dt is None
        like = args[0] if dt is None and args and hasattr(args[0], "dtype") else None
        _explain(func, xp, dev, dt if like is None else like.dtype, e)
        raise


def _explain(func: str, xp: ModuleType, dev: Any, dt: Any, err: Exception) -> None:
    """Raise DTypeUnavailableError when ``err`` came from a dtype the device lacks."""
    if dt is None:
        return
    name = dtype_name(dt)
    info = getattr(xp, "__array_namespace_info__", None)
    if info is None:
        return
    try:
        names = info().dtypes(device=dev)
    except Exception:  # noqa: BLE001 - a namespace that cannot say keeps its own error
        return
    if name not in names:
        msg = (
            f"{func}: the device {dev!r} of {getattr(xp, '__name__', xp)} has no dtype {name!r}; "
            f"it has {sorted(names)}"
        )
        raise DTypeUnavailableError(msg) from err


def _like(func: str, x: Any, dtype_: Any, device: Any) -> tuple[ModuleType, Any, Any, Any]:
    """(namespace, raw array, backend dtype, backend device) for a ``*_like`` function."""
    data = x.data if isinstance(x, Tensor) else x
    xp = backend_namespace(data, func=func)
    dev = resolve_device(xp, device, func=func) if device is not None else None
    return xp, data, _dt(dtype_, xp, func), dev


# ---------------------------------------------------------------- from data
def _is_array(obj: Any) -> bool:
    return hasattr(obj, "__array_namespace__") or (
        hasattr(obj, "shape") and hasattr(obj, "dtype") and not isinstance(obj, (list, tuple))
    )


def _tensor_leaf(obj: Any) -> Any:
    """The first Tensor (or raw traced array, as a Tensor) among the leaves of a nested
    sequence; None where there is none."""
    if isinstance(obj, (list, tuple)):
        for o in obj:
            leaf = _tensor_leaf(o)
            if leaf is not None:
                return leaf
        return None
    if isinstance(obj, Tensor):
        return obj
    return Tensor(obj) if is_tracer(obj) else None


def _leaves(obj: Any, out: list[Any]) -> list[Any]:
    if isinstance(obj, (list, tuple)):
        for o in obj:
            _leaves(o, out)
    else:
        out.append(obj)
    return out


def _stacked(obj: Any, like: Tensor, dt: Any) -> Tensor:
    """A nested sequence as nested `stack` calls (differentiable, batched, traced, as
    ``jnp.asarray([x, 2 * x])``): every leaf cast to ``dt``, the constants made arrays of
    ``like``'s library and device."""
    if isinstance(obj, (list, tuple)):
        parts = [_stacked(o, like, dt) for o in obj]
        if not parts:
            return _stacked_constant([], like, dt)
        shapes = {tuple(p.shape) for p in parts}
        if len(shapes) > 1:
            msg = (f"asarray: the nested sequence is ragged: its items have shapes {sorted(shapes)}; "
                   "expected items of one shape")
            raise XpgradValueError(msg)
        return stack(parts, axis=0)
    if not isinstance(obj, Tensor):
        obj = Tensor(obj) if is_tracer(obj) else _stacked_constant(obj, like, dt)
    return obj if dtype_name(_raw(obj).dtype) == dtype_name(dt) else astype(obj, dt)


def _stacked_constant(obj: Any, like: Tensor, dt: Any) -> Tensor:
    raw = _raw(like)
    bxp = backend_namespace(raw, func="asarray")
    return Tensor(bxp.asarray(obj, dtype=dtype(dt, bxp), device=array_api_compat.device(raw)))


def _asarray_traced(obj: Any, like: Tensor, dtype_: Any, device: Any, copy: bool | None,
                    requires_grad: bool) -> Tensor:
    """``asarray`` of a nested sequence holding Tensors: stacked, so that the gradient, the
    batch axis and the trace flow through (it was a constant: a gradient of 0), in the
    library and on the device of the first Tensor."""
    if copy is False:
        msg = "asarray: copy=False, but making an array from a nested sequence needs a copy"
        raise XpgradValueError(msg)
    leaves = _leaves(obj, [])
    for leaf in leaves:
        if not isinstance(leaf, (Tensor, bool, int, float, complex)) and not _is_array(leaf):
            msg = f"asarray: cannot make an array from a nested sequence holding {type(leaf).__name__} {_short(leaf)}"
            raise XpgradTypeError(msg)
    if dtype_ is not None:
        dt = dtype_name(dtype_, func="asarray")
    else:
        dt = dtype_name(result_type(*[leaf if isinstance(leaf, (Tensor, bool, int, float, complex)) else Tensor(leaf)
                                      for leaf in leaves]))
    t = _moved(_stacked(obj, like, dt), device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _moved(t: Tensor, device: Any) -> Tensor:
    """``t`` on ``device`` (a device of its library; None: where it is)."""
    if device is None:
        return t
    raw = _raw(t)  # (a batched value's physical array)
    dev = resolve_device(backend_namespace(raw, func="asarray"), device, func="asarray")
    return t.to_device(dev) if dev != array_api_compat.device(raw) else t


def _asarray_tensor(t: Tensor, dtype: Any, device: Any, copy: bool | None, requires_grad: bool) -> Tensor:
    """``asarray`` of a Tensor: itself, with its graph, where nothing changes."""
    raw = _raw(t)  # (its dtype; a batched value's physical array)
    if dtype is not None and dtype_name(dtype, func="asarray") != dtype_name(raw.dtype):
        if copy is False:
            msg = f"asarray: copy=False, but casting {dtype_name(raw.dtype)} to {dtype_name(dtype)} needs a copy"
            raise XpgradValueError(msg)
        t = astype(t, dtype)
    elif copy:
        t = astype(t, raw.dtype, copy=True)
    t = _moved(t, device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _asarray_array(obj: Any, dtype: Any, device: Any, copy: bool | None, requires_grad: bool) -> Tensor:
    """``asarray`` of a backend array: in its library and on its device unless ``device=`` says."""
    xp = backend_namespace(obj, func="asarray")
    if dtype is None and device is None and not copy:
        return Tensor(_standard(obj, obj), requires_grad=requires_grad)
    if device is not None and not isinstance(device, (str, int)):
        # a device object of another library than obj's (device=t.device of a torch Tensor
        # for a NumPy array) selects that library, as for the functions without input arrays
        target = _device_namespace(public_namespace(xp), device)
        if target is not public_namespace(xp):
            data = into_library(obj, target, device, dtype, copy, "asarray")
            return Tensor(_standard(data, obj), requires_grad=requires_grad)
    dev = resolve_device(xp, device, func="asarray") if device is not None else None
    dt = _dt(dtype, xp, "asarray")
    try:
        data = xp.asarray(obj, dtype=dt, device=dev, copy=copy)
    except Exception as e:
        _explain("asarray", xp, dev, dt, e)
        raise
    return Tensor(_standard(data, obj), requires_grad=requires_grad)


def _asarray_data(obj: Any, dtype: Any, device: Any, copy: bool | None, requires_grad: bool) -> Tensor:
    """``asarray`` of Python data: on the policy's namespace and device, floats in its dtype."""
    p, xp, dev = _where(device, "asarray")
    dt = _dt(dtype, xp, "asarray")
    try:
        data = xp.asarray(obj, dtype=dt, device=dev, copy=copy)
        if dt is None and p.dtype is not None:
            # rebuilt from the Python numbers, not cast: a cast from the library's float32
            # default would round float64 data (torch, array-api-strict's device1/device2)
            k = kind(data.dtype)
            if k == "real floating" and dtype_name(data.dtype) != p.dtype:
                dt = _float_default(p, xp)
                data = xp.asarray(obj, dtype=dt, device=dev, copy=copy)
            elif k == "complex floating" and dtype_name(data.dtype) != complex_dtype(p.dtype):
                dt = _float_default(p, xp, complex_=True)
                data = xp.asarray(obj, dtype=dt, device=dev, copy=copy)
    except XpgradError:
        raise
    except Exception as e:
        _explain("asarray", xp, dev, dt, e)
        msg = (
            f"asarray: cannot make an array from {type(obj).__name__} {_short(obj)} "
            f"({type(e).__name__}: {e}); expected numbers, nested sequences of numbers of one shape, or an array"
        )
        raise (XpgradValueError if isinstance(e, ValueError) else XpgradTypeError)(msg) from e
    return Tensor(_standard(data, obj), requires_grad=requires_grad)


@op.creation(reason="the identity on Tensors (which keep their graph); a constant from other data")
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

    Backend arrays and Tensors keep their library and device unless ``device=``
    says otherwise; Python data goes to the policy's namespace and device. With no
    ``dtype=``, Python floats take the policy's dtype (or the backend's default
    float dtype). ``asarray`` of a Tensor with nothing to change returns the Tensor
    itself, with its graph.

    ``requires_grad`` is an xpgrad extension (keyword-only, after the standard's
    parameters).

    Inside [`xpgrad.vmap`][xpgrad.vmap], a batched value is a Tensor like any other: with
    nothing to change ``asarray`` returns it; ``dtype=``, ``copy=True`` and
    ``device=`` cast, copy or move every example (``copy=False`` with a cast raises, as
    for a Tensor). ``requires_grad=True`` on it raises (use ``xg.grad`` inside the
    vmapped function).

    A nested sequence holding Tensors is stacked, as ``jnp.asarray([x, 2 * x])`` is in
    JAX: the result keeps the graph (``xg.asarray([t, 2 * t])`` has the gradient ``[1,
    2]``; under `xpgrad.vmap` and `xpgrad.jit` too) and the first Tensor's
    library and device; Python numbers and arrays beside the Tensors are constants there,
    and the dtype is the ``result_type`` of the items (Python numbers weakly typed) unless
    ``dtype=`` says.

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
        return _asarray_tensor(obj, dtype, device, copy, requires_grad)
    if _is_array(obj):
        return _asarray_array(obj, dtype, device, copy, requires_grad)
    if isinstance(obj, (list, tuple)):
        like = _tensor_leaf(obj)
        if like is not None:
            return _asarray_traced(obj, like, dtype, device, copy, requires_grad)
    return _asarray_data(obj, dtype, device, copy, requires_grad)


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) < 60 else r[:57] + "..."


def into_library(obj: Any, xp: ModuleType, device: Any, dtype_: Any, copy: bool | None, func: str) -> Any:
    """The raw array (or NumPy scalar) ``obj`` of another library as an array of namespace ``xp``
    on ``device`` (None: ``xp``'s default), with ``dtype_`` (any spelling; None keeps obj's).

    ``copy=False`` raises XpgradValueError when the conversion needs a copy, as the standard
    says: always into JAX and Dask (their arrays own their memory), and wherever ``xp``
    refuses to share ``obj``'s memory (another device, a dtype change).
    """
    lib = library_of(xp)
    what = f"{type(obj).__module__.split('.')[0]}.{type(obj).__name__}"
    if copy is False and lib in ("jax", "dask"):
        msg = (
            f"{func}: copy=False, but making a {lib} array from a {what} needs a copy ({lib} arrays hold "
            "their own memory); pass copy=None (copy if needed) or copy=True"
        )
        raise XpgradValueError(msg)
    dt = _dt(dtype_, xp, func)
    kw: dict[str, Any] = {}
    if dt is not None:
        kw["dtype"] = dt
    if device is not None:
        kw["device"] = device
    if copy is not None:
        kw["copy"] = copy
    try:
        return xp.asarray(obj, **kw)
    except Exception as e:
        _explain(func, xp, device, dt, e)
        if copy is False and isinstance(e, (ValueError, BufferError, RuntimeError)):
            msg = (
                f"{func}: copy=False, but making a {lib} array on {device!r} from a {what} needs a copy "
                f"({type(e).__name__}: {e}); pass copy=None (copy if needed) or copy=True"
            )
            raise XpgradValueError(msg) from e
        msg = f"{func}: cannot make a {lib} array on {device!r} from a {what} ({type(e).__name__}: {e})"
        raise (XpgradValueError if isinstance(e, ValueError) else XpgradTypeError)(msg) from e


def _standard(data: Any, obj: Any) -> Any:
    """``data`` if its dtype is one of the standard's; else a clear error naming ``obj``
    (NumPy turns a str, a dict or None into a string or object array)."""
    if fast_name(data.dtype) is None:
        try:
            dtype_name(data.dtype)
        except UnknownNameError:
            msg = (
                f"asarray: cannot make an array from {type(obj).__name__} {_short(obj)}: its dtype "
                f"{data.dtype} is not one of the standard's numeric or boolean dtypes"
            )
            raise XpgradTypeError(msg) from None
    return data


@op.creation(reason="a copy of its data: of a Tensor, one that keeps its graph (as asarray's); of other data, a constant")
def tensor(data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Make a new Tensor from data (always a copy), PyTorch style.

    Examples:
        >>> import xpgrad as xg
        >>> xg.tensor([1.0, 2.0], requires_grad=True)
        Tensor([1., 2.], dtype=float64, device=cpu, requires_grad=True)
    """
    return asarray(data, dtype=dtype, device=device, copy=True, requires_grad=requires_grad)


@op.creation(reason="imports foreign memory: a constant")
def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Tensor:
    """A Tensor of the policy's library from any object with ``__dlpack__`` (zero copy where possible).

    The policy's namespace consumes ``x`` (a Tensor gives its data); ``device=``
    and ``copy=`` as in the standard. The result is a constant. A value batched by
    [`xpgrad.vmap`][xpgrad.vmap] has no single buffer: ``from_dlpack`` of it raises
    XpgradTypeError (``asarray`` returns it).

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.from_dlpack(np.arange(3.0))
        Tensor([0., 1., 2.], dtype=float64, device=cpu)
    """
    if isinstance(x, Batched):
        msg = (
            "from_dlpack: the value is batched by vmap: it has no single buffer to import; inside the "
            "vmapped function use xg.asarray (which returns it) instead"
        )
        raise XpgradTypeError(msg)
    data = x.data if isinstance(x, Tensor) else x
    _, xp, dev = _where(device, "from_dlpack")
    kw: dict[str, Any] = {}
    if device is not None:
        kw["device"] = dev
    if copy is not None:
        kw["copy"] = copy
    fn = getattr(xp, "from_dlpack", None)
    if fn is None:  # a namespace without DLPack import (Dask) takes the data through asarray
        return Tensor(xp.asarray(data, **kw))
    return Tensor(fn(data, **kw))


# ---------------------------------------------------------------- from shapes
@op.creation(reason=_NO_INPUT)
def zeros(shape: int | tuple[int, ...], *, dtype: Any = None, device: Any = None) -> Tensor:
    """A Tensor of zeros on the policy's namespace and device.

    Examples:
        >>> import xpgrad as xg
        >>> xg.zeros((2,))
        Tensor([0., 0.], dtype=float64, device=cpu)
        >>> with xg.default_device(dtype="float32"):
        ...     xg.zeros(2).dtype
        xpgrad.float32
    """
    p, xp, dev = _where(device, "zeros")
    dt = _dt(dtype, xp, "zeros") if dtype is not None else _float_default(p, xp)
    return _create("zeros", xp, dev, dt, xp.zeros, shape)


@op.creation(reason=_NO_INPUT)
def ones(shape: int | tuple[int, ...], *, dtype: Any = None, device: Any = None) -> Tensor:
    """A Tensor of ones on the policy's namespace and device.

    Examples:
        >>> import xpgrad as xg
        >>> xg.ones(2, dtype=xg.float32)
        Tensor([1., 1.], dtype=float32, device=cpu)
    """
    p, xp, dev = _where(device, "ones")
    dt = _dt(dtype, xp, "ones") if dtype is not None else _float_default(p, xp)
    return _create("ones", xp, dev, dt, xp.ones, shape)


@op.creation(reason=_NO_INPUT)
def empty(shape: int | tuple[int, ...], *, dtype: Any = None, device: Any = None) -> Tensor:
    """An uninitialized Tensor on the policy's namespace and device.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.empty((2, 3), dtype="float32")
        >>> x.shape, x.dtype
        ((2, 3), xpgrad.float32)
    """
    p, xp, dev = _where(device, "empty")
    dt = _dt(dtype, xp, "empty") if dtype is not None else _float_default(p, xp)
    return _create("empty", xp, dev, dt, xp.empty, shape)


@op.creation(reason=_NO_INPUT)
def full(shape: int | tuple[int, ...], fill_value: bool | int | float | complex, *, dtype: Any = None,
         device: Any = None) -> Tensor:
    """A Tensor filled with ``fill_value`` on the policy's namespace and device.

    Without ``dtype=``, the dtype follows ``fill_value``: bool, the default integer
    dtype, or the floating (complex) default, which the policy's dtype sets.

    Examples:
        >>> import xpgrad as xg
        >>> xg.full(2, 7)
        Tensor([7, 7], dtype=int64, device=cpu)
        >>> with xg.default_device(dtype="float32"):
        ...     xg.full((1,), 0.5)
        Tensor([0.5], dtype=float32, device=cpu)
    """
    p, xp, dev = _where(device, "full")
    _scalar_fill("full", fill_value)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.data
    fill_value = python_scalar(fill_value)  # (a NumPy scalar is a Python scalar, on every backend)
    dt = _dt(dtype, xp, "full") if dtype is not None else _scalar_default(p, xp, fill_value)
    return _create("full", xp, dev, dt, xp.full, shape, fill_value)


def _scalar_fill(func: str, fill_value: Any) -> None:
    """Refuse a fill value batched by vmap (it differs per example: no single Python scalar)."""
    if isinstance(fill_value, Batched):
        msg = (
            f"{func}: fill_value is batched by vmap (one value per example), but it must be a single "
            "scalar; broadcast it instead (xg.broadcast_to(fill_value, shape), or x * 0 + fill_value)"
        )
        raise XpgradTypeError(msg)


@op.creation(reason=_NO_INPUT)
def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None, device: Any = None) -> Tensor:
    """A 2-D Tensor with ones on the ``k``-th diagonal, zeros elsewhere.

    Examples:
        >>> import xpgrad as xg
        >>> xg.eye(2, 3, k=1)
        Tensor([[0., 1., 0.],
                [0., 0., 1.]], dtype=float64, device=cpu)
    """
    p, xp, dev = _where(device, "eye")
    dt = _dt(dtype, xp, "eye") if dtype is not None else _float_default(p, xp)
    return _create("eye", xp, dev, dt, xp.eye, n_rows, n_cols, k=k)


@op.creation(reason=_NO_INPUT)
def arange(start: int | float, /, stop: int | float | None = None, step: int | float = 1, *,
           dtype: Any = None, device: Any = None) -> Tensor:
    """Evenly spaced values in ``[start, stop)``.

    Integer arguments give the default integer dtype; a float among them gives
    the floating default (the policy's dtype where set).

    Examples:
        >>> import xpgrad as xg
        >>> xg.arange(3)
        Tensor([0, 1, 2], dtype=int64, device=cpu)
        >>> xg.arange(0.0, 1.0, 0.5)
        Tensor([0. , 0.5], dtype=float64, device=cpu)
    """
    p, xp, dev = _where(device, "arange")
    start, stop, step = python_scalar(start), python_scalar(stop), python_scalar(step)
    dt = _dt(dtype, xp, "arange") if dtype is not None else _scalar_default(p, xp, start, stop, step)
    return _create("arange", xp, dev, dt, xp.arange, start, stop, step)


@op.creation(reason=_NO_INPUT)
def linspace(start: int | float | complex, stop: int | float | complex, /, num: int, *, dtype: Any = None,
             device: Any = None, endpoint: bool = True) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (floating, or complex for complex ends).

    Examples:
        >>> import xpgrad as xg
        >>> xg.linspace(0, 1, 3)
        Tensor([0. , 0.5, 1. ], dtype=float64, device=cpu)
        >>> xg.linspace(0, 1, 2, endpoint=False, dtype=xg.float32)
        Tensor([0. , 0.5], dtype=float32, device=cpu)
    """
    p, xp, dev = _where(device, "linspace")
    start, stop = python_scalar(start), python_scalar(stop)
    if dtype is not None:
        dt = _dt(dtype, xp, "linspace")
    else:
        dt = _float_default(p, xp, complex_=isinstance(start, complex) or isinstance(stop, complex))
    return _create("linspace", xp, dev, dt, xp.linspace, start, stop, num, endpoint=endpoint)


# ---------------------------------------------------------------- like an array
@op.creation(reason=_LIKE)
def zeros_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Tensor:
    """Zeros with the shape, dtype, namespace and device of ``x`` (a constant).

    Examples:
        >>> import xpgrad as xg
        >>> xg.zeros_like(xg.asarray([1, 2]))
        Tensor([0, 0], dtype=int64, device=cpu)
    """
    if isinstance(x, Batched):  # (the same for every example: built from the physical value)
        return from_phys(zeros_like(x._inner, dtype=dtype, device=device), x._levels)  # type: ignore[no-any-return]
    xp, data, dt, dev = _like("zeros_like", x, dtype, device)
    return _create("zeros_like", xp, dev, dt, xp.zeros_like, data)


@op.creation(reason=_LIKE)
def ones_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Tensor:
    """Ones with the shape, dtype, namespace and device of ``x`` (a constant).

    Examples:
        >>> import xpgrad as xg
        >>> xg.ones_like(xg.asarray([1.0, 2.0]), dtype=xg.float32)
        Tensor([1., 1.], dtype=float32, device=cpu)
    """
    if isinstance(x, Batched):  # (the same for every example: built from the physical value)
        return from_phys(ones_like(x._inner, dtype=dtype, device=device), x._levels)  # type: ignore[no-any-return]
    xp, data, dt, dev = _like("ones_like", x, dtype, device)
    return _create("ones_like", xp, dev, dt, xp.ones_like, data)


@op.creation(reason=_LIKE)
def empty_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Tensor:
    """An uninitialized array with the shape, dtype, namespace and device of ``x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.empty_like(xg.asarray([[1.0, 2.0]])).shape
        (1, 2)
    """
    if isinstance(x, Batched):  # (the same for every example: built from the physical value)
        return from_phys(empty_like(x._inner, dtype=dtype, device=device), x._levels)  # type: ignore[no-any-return]
    xp, data, dt, dev = _like("empty_like", x, dtype, device)
    return _create("empty_like", xp, dev, dt, xp.empty_like, data)


@op.creation(reason=_LIKE)
def full_like(x: Array, /, fill_value: bool | int | float | complex, *, dtype: Any = None,
              device: Any = None) -> Tensor:
    """``fill_value`` everywhere, with the shape, dtype, namespace and device of ``x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.full_like(xg.asarray([1.0, 2.0]), 3)
        Tensor([3., 3.], dtype=float64, device=cpu)
    """
    if isinstance(x, Batched):  # (the same for every example: built from the physical value)
        return from_phys(full_like(x._inner, fill_value, dtype=dtype, device=device), x._levels)  # type: ignore[no-any-return]
    xp, data, dt, dev = _like("full_like", x, dtype, device)
    _scalar_fill("full_like", fill_value)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.data
    fill_value = python_scalar(fill_value)
    return _create("full_like", xp, dev, dt, xp.full_like, data, fill_value)


# ---------------------------------------------------------------- differentiable
# (functions of the last two axes: the batch axes lead, so they are more stack axes)
@op.function(batch=stacked_matrices, fwd=lambda xp, x, *, k=0: xp.tril(x, k=k),
             vjp=(lambda xp, g, ans, x, *, k=0: xp.tril(g, k=k),), jvp="linear", save=())
def tril(x: Array, /, *, k: int = 0) -> Array:
    """The lower triangle of each matrix: elements above the ``k``-th diagonal set to zero.

    Examples:
        >>> import xpgrad as xg
        >>> xg.tril(xg.asarray([[1.0, 2.0], [3.0, 4.0]]))
        Tensor([[1., 0.],
                [3., 4.]], dtype=float64, device=cpu)
    """


@op.function(batch=stacked_matrices, fwd=lambda xp, x, *, k=0: xp.triu(x, k=k),
             vjp=(lambda xp, g, ans, x, *, k=0: xp.triu(g, k=k),), jvp="linear", save=())
def triu(x: Array, /, *, k: int = 0) -> Array:
    """The upper triangle of each matrix: elements below the ``k``-th diagonal set to zero.

    Examples:
        >>> import xpgrad as xg
        >>> xg.triu(xg.asarray([[1.0, 2.0], [3.0, 4.0]]), k=1)
        Tensor([[0., 2.],
                [0., 0.]], dtype=float64, device=cpu)
    """


def _grid_axis(i: int, n: int, indexing: str) -> int:
    """The output axis along which input ``i`` of ``n`` varies ("xy" swaps the first two)."""
    if indexing == "xy" and n >= 2 and i < 2:
        return 1 - i
    return i


def _meshgrid_vjp(xp: Any, g: Any, ans: Any, i: int, *xs: Any, indexing: str = "xy") -> Any:
    gi = g[i] if type(g) is tuple else g
    if gi is None:
        return None
    n = len(xs)
    ax = _grid_axis(i, n, indexing)
    others = tuple(a for a in range(n) if a != ax)
    return xp.sum(gi, axis=others) if others else gi


_reshape_p, _broadcast_to_p = prim_of(reshape), prim_of(broadcast_to)


def _meshgrid_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> tuple[Any, ...]:
    """Each 1-D example put along its output axis (after the batch axes) and broadcast to the grid:
    a reshape and a broadcast per output, as the grid of one example is."""
    indexing = kw.get("indexing", "xy")
    n = len(xs)
    lengths = []
    for i, (x, b) in enumerate(zip(xs, bs)):
        r = len(x.shape) - (K if b else 0)
        if r != 1:
            msg = f"{prim.name}: every array must be 1-D, got {r} dimensions for array {i} (inside vmap)"
            raise XpgradValueError(msg)
        lengths.append(int(x.shape[-1]))
    grid = [0] * n
    for i in range(n):
        grid[_grid_axis(i, n, indexing)] = lengths[i]
    outs = []
    for i, (x, b) in enumerate(zip(xs, bs)):
        batch = tuple(x.shape[:K]) if b else (1,) * K
        ax = _grid_axis(i, n, indexing)
        y = _reshape_p(x, shape=batch + tuple(lengths[i] if a == ax else 1 for a in range(n)))
        outs.append(_broadcast_to_p(y, shape=batch + tuple(grid)))
    return tuple(outs)


_meshgrid = op.primitive("meshgrid", fwd=lambda xp, *xs, indexing="xy": tuple(xp.meshgrid(*xs, indexing=indexing)),
                         batch=_meshgrid_batch, vjp_rest=_meshgrid_vjp, jvp="joint_linear", save=(), multi=True, view=True)


@op.entry(_meshgrid, nargs=-1)
def meshgrid(*arrays: Array, indexing: str = "xy") -> tuple[Array, ...]:
    """Coordinate grids from 1-D arrays: Cartesian (``"xy"``) or matrix (``"ij"``) indexing.

    Examples:
        >>> import xpgrad as xg
        >>> X, Y = xg.meshgrid(xg.asarray([1.0, 2.0, 3.0]), xg.asarray([4.0, 5.0]))
        >>> X.shape, Y.shape
        ((2, 3), (2, 3))
        >>> X, Y = xg.meshgrid(xg.asarray([1.0, 2.0, 3.0]), xg.asarray([4.0, 5.0]), indexing="ij")
        >>> Y
        Tensor([[4., 5.],
                [4., 5.],
                [4., 5.]], dtype=float64, device=cpu)
    """
    if indexing not in ("xy", "ij"):
        msg = f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}"
        raise XpgradValueError(msg)
    for i, a in enumerate(arrays):
        if len(a.shape) != 1:
            msg = f"meshgrid: every array must be 1-D, got shape {tuple(a.shape)} for array {i}"
            raise XpgradValueError(msg)
    if not arrays:
        return ()
    return _meshgrid.bind(*arrays, indexing=indexing)


op.check_all(__all__)
