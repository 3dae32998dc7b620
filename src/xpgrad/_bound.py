"""The xpgrad namespace *bound* to a library and a device.

``xg.array_namespace(t)`` and ``t.__array_namespace__()`` of a Tensor ``t`` over a
torch tensor on ``cuda:0`` return `BoundNamespace` ``(torch, cuda:0)``. It is
the xpgrad namespace in every respect (same functions, same Tensors, gradients
recorded), except that the functions that create arrays with no input array to
ask (``asarray`` of Python data, ``zeros``, ``ones``, ``empty``, ``full``, ``eye``,
``arange``, ``linspace``, ``from_dlpack``, ``fft.fftfreq``/``rfftfreq`` and the
draws of ``random``) make them in the bound library, on the bound device, with the
bound library's default dtypes unless the policy's ``dtype`` or the call sets one.
``__array_namespace_info__()`` describes the bound library and device.

So array-API code that makes its constants with ``xp.asarray(2.0)`` or
``xp.zeros(n)`` (SciPy, scikit-learn, array-api-extra, a user's loss) gets them
next to its inputs under [`xpgrad.grad`][xpgrad.functional.grad], with no ``default_device`` block.

How it works: each creation function of a bound namespace runs the plain xpgrad
function under a policy derived from the current one, with the binding's library
and device (and the current policy's dtype, where the device has it, and its
random generator). The derived policy is cached per current policy, so a call
pays one ContextVar set and reset. Bound namespaces are cached per (library,
device): equal bindings give the same object.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType
from typing import Any

from ._backends import library_of, owns_device, resolve_device
from ._dispatch import NUMPY_SCALARS, backend_namespace, public_namespace, set_bound_namespace
from ._exceptions import DTypeUnavailableError
from ._info import Info
from ._policy import _POLICY, DevicePolicy, _check_device_dtype, current_policy
from .autograd._batched import STACK
from .autograd._grad_mode import graph_namespace
from .autograd._tensor import Tensor
from .ops.creation import into_library
from .random import policy_generator

__all__ = ["BoundNamespace", "bound_namespace"]

# the xpgrad functions that create arrays from the policy when no array says
_CREATION = frozenset({"asarray", "tensor", "zeros", "ones", "empty", "full", "eye", "arange", "linspace", "from_dlpack"})
_FFT_CREATION = frozenset({"fftfreq", "rfftfreq"})
_RANDOM_CREATION = frozenset({"normal", "uniform", "integers", "permutation", "bernoulli", "choice"})


def _library_name(xp: Any) -> str:
    return library_of(xp)


class _Sub(ModuleType):
    """A bound view of a submodule (``fft``, ``random``): its creation functions bound."""

    def __init__(self, owner: BoundNamespace, module: ModuleType, creation: frozenset[str]) -> None:
        super().__init__(module.__name__, module.__doc__)
        self._xg_owner = owner
        self._xg_module = module
        self._xg_creation = creation

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_xg_"):
            raise AttributeError(name)
        value = getattr(self._xg_module, name)
        if name in self._xg_creation:
            value = self._xg_owner._bind(value)
        setattr(self, name, value)
        return value

    def __dir__(self) -> list[str]:
        return dir(self._xg_module)

    def __repr__(self) -> str:
        return f"<namespace {self._xg_module.__name__} bound to {self._xg_owner._xg_where()}>"


class BoundNamespace(ModuleType):
    """The xpgrad namespace with its array creation bound to a library and a device.

    Returned by [`xpgrad.array_namespace`][xpgrad.array_namespace] and ``Tensor.__array_namespace__()``
    for Tensors; never made directly. Every attribute is the xpgrad namespace's,
    except that creation functions (``asarray`` of Python data or of another
    library's arrays, ``zeros``, ``full``, ``arange``, ``random.normal``, ...)
    make arrays in the bound library and on the bound device when no ``device=``
    is given. The default dtypes are the bound library's (torch: float32) unless
    the default-device policy sets ``dtype``. ``__name__`` is ``"xpgrad"``.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xp = xg.array_namespace(xg.asarray(np.ones(2)))
        >>> xp
        <xpgrad namespace bound to numpy on 'cpu'>
        >>> xp == xg.array_namespace(xg.asarray(np.zeros(3))), xp.__name__
        (True, 'xpgrad')
        >>> type(xp.asarray(2.0).data).__name__
        'ndarray'
    """

    def __init__(self, xp: ModuleType, device: Any) -> None:
        super().__init__("xpgrad", graph_namespace().__doc__)
        self._xg_xp = xp
        self._xg_device = device
        self._xg_cache: tuple[DevicePolicy, DevicePolicy] | None = None
        self._xg_key = (_library_name(xp), _device_key(device))

    # ------------------------------------------------------------------ identity
    def __eq__(self, other: object) -> bool:
        if isinstance(other, BoundNamespace):
            return self._xg_key == other._xg_key
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._xg_key)

    def _xg_where(self) -> str:
        return f"{self._xg_key[0]} on {self._xg_device!r}"

    def __repr__(self) -> str:
        return f"<xpgrad namespace bound to {self._xg_where()}>"

    def __dir__(self) -> list[str]:
        return dir(graph_namespace())

    @property
    def binding(self) -> tuple[ModuleType, Any]:
        """The bound library's array API namespace and the bound device.

        Examples:
            >>> import numpy as np, xpgrad as xg
            >>> xp, dev = xg.array_namespace(xg.asarray(np.ones(2))).binding
            >>> xp.__name__, dev
            ('array_api_compat.numpy', 'cpu')
        """
        return self._xg_xp, self._xg_device

    # ------------------------------------------------------------------ policy
    def _xg_policy(self) -> DevicePolicy:
        """The default-device policy the creation functions of this namespace run under.

        The current policy with this binding's library and device; its ``dtype`` is
        kept where the device has it, and its seeded generator is shared, so draws
        through a bound ``random`` continue the current policy's stream.
        """
        p = current_policy()
        cached = self._xg_cache
        if cached is not None and cached[0] is p:
            return cached[1]
        if p.xp is self._xg_xp and p.device is self._xg_device:
            bound = p
        else:
            dt = p.dtype
            if dt is not None:
                try:
                    _check_device_dtype(self._xg_xp, self._xg_device, dt, "array_namespace")
                except DTypeUnavailableError:
                    dt = None  # the device lacks the policy's dtype: the library's default
            if p.seed is not None:
                policy_generator(p)  # create the policy's generator now, so the binding shares it
            bound = replace(p, xp=self._xg_xp, device=self._xg_device, dtype=dt)
        self._xg_cache = (p, bound)
        return bound

    def _bind(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        policy = self._xg_policy

        @functools.wraps(fn)
        def bound(*args: Any, **kwargs: Any) -> Any:
            token = _POLICY.set(policy())
            try:
                return fn(*args, **kwargs)
            finally:
                _POLICY.reset(token)

        return bound

    # ------------------------------------------------------------------ attributes
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_xg_"):
            raise AttributeError(name)
        value = getattr(graph_namespace(), name)
        if name in ("asarray", "tensor"):
            value = self._bind(_converting(value, self))
        elif name == "from_dlpack":
            value = self._bind(_on_device(value, self))
        elif name in _CREATION:
            value = self._bind(value)
        elif name == "fft":
            value = _Sub(self, value, _FFT_CREATION)
        elif name == "random":
            value = _Sub(self, value, _RANDOM_CREATION)
        elif name == "__array_namespace_info__":
            value = self._info
        setattr(self, name, value)  # later lookups are plain attribute reads
        return value

    def _info(self) -> Any:
        """The inspection object of this bound namespace: its library, device and default dtypes."""
        return Info(self._xg_policy(), batching=_batching)


def _batching() -> bool:
    """Whether a vmap level is open (the bound namespace's ``capabilities()`` then report no
    boolean indexing and no data-dependent shapes)."""
    return bool(STACK.get())


def _converting(fn: Callable[..., Any], ns: BoundNamespace) -> Callable[..., Any]:
    """``asarray``/``tensor`` that also move a raw array of another library into the bound one.

    ``xp.asarray(np_array)`` with ``xp`` bound to torch gives a Tensor over a torch tensor
    on the bound device, as ``array_api_compat.torch.asarray`` does; so does
    ``xp.asarray(np_array, device=t.device)`` (the idiom of scikit-learn's
    ``label_binarize`` and ``log_loss``) and any ``device=`` of the bound library (a device
    string is read in the bound library). NumPy scalars count as NumPy arrays. Tensors
    keep their own library (their graph), arrays of the bound library keep theirs, and a
    device object of a third library selects that library (as for ``xg.asarray``).
    ``copy=False`` raises when the conversion needs a copy (into JAX or Dask always).
    """

    @functools.wraps(fn)
    def convert(obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(obj, Tensor) and (type(obj) in NUMPY_SCALARS or (
            hasattr(obj, "shape") and hasattr(obj, "dtype") and not isinstance(obj, (bool, int, float, complex))
        )):
            try:
                src = public_namespace(backend_namespace(obj, func="asarray"))
            except TypeError:
                src = None
            if src is not None and src is not ns._xg_xp:
                device = _bound_device(ns, kwargs.get("device"))
                if device is not _NOT_BOUND:
                    obj = into_library(obj, ns._xg_xp, device, kwargs.get("dtype"), kwargs.get("copy"), "asarray")
                    kwargs = {k: v for k, v in kwargs.items() if k not in ("dtype", "copy", "device")}
        return fn(obj, *args, **kwargs)

    return convert


_NOT_BOUND: Any = object()  # (a device of another library than the bound one)


def _bound_device(ns: BoundNamespace, device: Any) -> Any:
    """``device=`` of a bound ``asarray`` as the bound library's device: None is the bound
    device, a string or GPU ordinal is read in the bound library; a device object the bound
    library does not list gives ``_NOT_BOUND``."""
    if device is None:
        return ns._xg_device
    xp = ns._xg_xp
    if isinstance(device, (str, int)) or device is ns._xg_device:
        return resolve_device(xp, device, func="asarray")
    return device if owns_device(xp, device) else _NOT_BOUND


def _on_device(fn: Callable[..., Any], ns: BoundNamespace) -> Callable[..., Any]:
    """``from_dlpack`` that imports onto the bound device when no ``device=`` is given."""

    @functools.wraps(fn)
    def on_device(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Any:
        return fn(x, device=ns._xg_device if device is None else device, copy=copy)

    return on_device


def _device_key(device: Any) -> Any:
    try:
        hash(device)
    except TypeError:
        return repr(device)
    return device


_LOCK = threading.Lock()
_BOUND: dict[tuple[int, Any], BoundNamespace] = {}


def bound_namespace(xp: ModuleType, device: Any) -> BoundNamespace:
    """The (cached) xpgrad namespace bound to the public namespace ``xp`` and ``device``."""
    key = (id(xp), _device_key(device))
    ns = _BOUND.get(key)
    if ns is None:
        with _LOCK:
            ns = _BOUND.get(key)
            if ns is None:
                ns = BoundNamespace(xp, device)
                _BOUND[key] = ns
    return ns


set_bound_namespace(bound_namespace)  # (_dispatch's array_namespace, a lower layer, returns them)
