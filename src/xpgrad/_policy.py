"""The default-device policy: where arrays are created when no input array says.

One immutable [`DevicePolicy`][xpgrad.DevicePolicy] lives in one `contextvars.ContextVar`.
``with default_device(...)`` sets it for the block and restores the previous one
through its token, even when the block raises. A new thread (or a thread-pool
worker) starts from the *process default* ([`set_default_policy`][xpgrad.set_default_policy]), not from
the parent's ``with`` block; asyncio tasks copy the context at creation.
"""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, TypeVar

import array_api_compat

from ._backends import load_namespace, resolve_device
from ._dispatch import backend_namespace, set_default_namespace
from ._dtypes import EXTENSION_DTYPE_NAMES, DType, dtype, dtype_name, kind, x64_hint
from ._exceptions import DTypeUnavailableError, XpgradTypeError

__all__ = [
    "DevicePolicy",
    "current_policy",
    "default_device",
    "reset_policy",
    "set_default_policy",
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class DevicePolicy:
    """Where new arrays go when no input array decides: namespace, device, dtype, seed.

    Attributes:
        xp: the array API namespace (e.g. ``array_api_compat.numpy``).
        device: a device object of ``xp``, or None for the library's default.
        dtype: the default *floating* dtype name (``"float32"``), or None for the
            backend's own default (NumPy float64, torch float32). ``nn`` layers use
            float32 when this is None, as PyTorch does.
        seed: seed for [`xpgrad.random`][xpgrad.random] under this policy, or None.

    Examples:
        >>> import xpgrad as xg
        >>> p = xg.current_policy()
        >>> p.xp.__name__, p.device, p.dtype
        ('array_api_compat.numpy', None, None)
    """

    xp: ModuleType
    device: Any = None
    dtype: str | None = None
    seed: int | None = None
    # the random generator this policy owns (see xpgrad.random); not part of equality
    rng: Any = field(default=None, compare=False, repr=False)

    def float_dtype(self) -> Any:
        """The backend dtype object for new floating arrays under this policy."""
        if self.dtype is not None:
            return dtype(self.dtype, self.xp)
        info = getattr(self.xp, "__array_namespace_info__", None)
        if info is not None:
            return info().default_dtypes(device=self.device)["real floating"]
        return self.xp.float64


def _numpy_default() -> DevicePolicy:
    return DevicePolicy(xp=load_namespace("numpy"))


_lock = threading.Lock()
_process_default: DevicePolicy | None = None
_POLICY: contextvars.ContextVar[DevicePolicy | None] = contextvars.ContextVar(
    "xpgrad_policy", default=None
)


def current_policy() -> DevicePolicy:
    """The policy in force in this context: the innermost ``with``, else the process default.

    Examples:
        >>> import xpgrad as xg
        >>> with xg.default_device(dtype="float32"):
        ...     xg.current_policy().dtype
        'float32'
        >>> xg.current_policy().dtype is None
        True
    """
    p = _POLICY.get()
    if p is not None:
        return p
    global _process_default
    if _process_default is None:
        with _lock:
            if _process_default is None:
                _process_default = _numpy_default()
    return _process_default


def _make_policy(
    base: DevicePolicy,
    xp: Any,
    device: Any,
    dtype_: Any,
    seed: int | None,
    func: str,
) -> DevicePolicy:
    """Build a policy from ``base`` with the given fields replaced (None = inherit).

    ``xp`` may be a [`DevicePolicy`][xpgrad.DevicePolicy]: it is then the base, the other fields on top
    (``default_device(p)``, ``set_default_policy(p)``).
    """
    if isinstance(xp, DevicePolicy):
        base, xp = xp, None
    new_xp = base.xp
    new_device = base.device
    if xp is not None:
        new_xp, arr_device = _namespace_of(xp, func)
        new_device = arr_device  # a new namespace resets the device unless given
    if device is not None:
        new_device = resolve_device(new_xp, device, func=func)
    new_dtype = base.dtype
    if dtype_ is not None:
        if not isinstance(dtype_, (str, DType)):
            dtype_ = dtype_name(dtype_, func=func)
        new_dtype = dtype_name(dtype_, func=func)
        if not kind(new_dtype).endswith("floating"):
            msg = f"{func}: dtype must be a floating dtype name, got {new_dtype!r}"
            raise XpgradTypeError(msg)
        dtype(new_dtype, new_xp, func=func)  # raises if the namespace lacks it
    if new_dtype is not None and (dtype_ is not None or xp is not None or device is not None):
        _check_device_dtype(new_xp, new_device, new_dtype, func)
    new_seed = base.seed if seed is None else int(seed)
    changed_rng = seed is not None or new_xp is not base.xp or new_device is not base.device
    if changed_rng:
        rng = None
    elif base.seed is not None:
        # a block that shares its parent's stream: create the parent's generator now,
        # so parent and child draw from one stream whichever of them draws first
        rng = _generator_of(base)
    else:
        rng = base.rng
    return replace(base, xp=new_xp, device=new_device, dtype=new_dtype, seed=new_seed, rng=rng)


def _check_device_dtype(xp: Any, device: Any, name: str, func: str) -> None:
    """Refuse a default dtype that the device lacks (float64 on array-api-strict's
    ``no_float64`` device, on JAX without ``jax_enable_x64``), naming the device.

    The extension dtypes (float16, bfloat16) are in no library's inspection table: the
    namespace having the dtype is all that is checked of them (by ``dtype``)."""
    if name in EXTENSION_DTYPE_NAMES:
        return
    info = getattr(xp, "__array_namespace_info__", None)
    if info is None:
        return
    try:
        names = info().dtypes(device=device)
    except Exception:  # noqa: BLE001 - a namespace that cannot say is not checked
        return
    if name not in names:
        msg = (
            f"{func}: the device {device!r} of {getattr(xp, '__name__', xp)} has no dtype {name!r}; "
            f"it has {sorted(names)}{x64_hint(xp, name)}"
        )
        raise DTypeUnavailableError(msg)


def check_device_has_dtypes(func: str, device: Any, arrays: Any, err: Exception | None = None) -> None:
    """Raise DTypeUnavailableError if ``device`` lacks the dtype of one of ``arrays``.

    Used where data moves to a device (``to_device``, ``Module.to``), or after a
    backend error, to name the function, the device and the dtype.
    """
    for a in arrays:
        if not hasattr(a, "dtype") or not hasattr(a, "shape"):
            continue
        try:
            _check_device_dtype(backend_namespace(a, func=func), device, dtype_name(a.dtype), func)
        except DTypeUnavailableError as e:
            msg = f"{e}; cast first, e.g. x.astype(xp.float32)"
            raise DTypeUnavailableError(msg) from err


def _namespace_of(spec: Any, func: str) -> tuple[ModuleType, Any]:
    if isinstance(spec, str):
        return load_namespace(spec, func=func), None
    if isinstance(spec, ModuleType):
        if getattr(spec, "__name__", None) == "numpy":
            return load_namespace("numpy"), None
        return spec, None
    if hasattr(spec, "__array_namespace__") or hasattr(spec, "shape"):
        return array_api_compat.array_namespace(spec), array_api_compat.device(spec)
    msg = (
        f"{func}: xp must be a namespace module, a library name, an array or a DevicePolicy, "
        f"got {type(spec).__name__} {spec!r}"
    )
    raise XpgradTypeError(msg)


class default_device:  # noqa: N801 - a context manager used like a function
    """Set the default namespace, device, dtype and seed for a block (or a function).

    Args:
        xp: a namespace module, a library name (``"numpy"``, ``"cupy"``, ``"torch"``,
            ``"jax"``, ``"dask"``, ``"array_api_strict"``) or an existing array
            (its namespace and device are taken). None keeps the current one. A
            [`DevicePolicy`][xpgrad.DevicePolicy] (from [`current_policy`][xpgrad.current_policy], or another block's
            ``as p``) is used as it is, with the other arguments, if given, on top.
        device: a device object or a string ``"cpu"``, ``"cuda"``, ``"cuda:1"``
            (translated for the library); None keeps the current one, or the
            library's default when ``xp`` changes.
        dtype: default floating dtype name, e.g. ``"float32"``; None keeps the current.
        seed: seed for [`xpgrad.random`][xpgrad.random]; a block with a seed starts a fresh generator.

    The previous policy is restored when the block exits, also on exceptions.
    Usable as a decorator: each call of the decorated function runs under it.

    Examples:
        >>> import xpgrad as xg
        >>> with xg.default_device("array_api_strict", dtype="float32"):
        ...     x = xg.zeros(3)
        >>> x.dtype, xg.current_policy().xp.__name__
        (xpgrad.float32, 'array_api_compat.numpy')
        >>> with xg.default_device("array_api_strict", dtype="float32") as p:
        ...     pass
        >>> with xg.default_device(p):
        ...     xg.zeros(2).dtype, xg.current_policy().xp.__name__
        (xpgrad.float32, 'array_api_strict')
    """

    def __init__(self, xp: Any = None, device: Any = None, dtype: Any = None, seed: int | None = None) -> None:
        self._args = (xp, device, dtype, seed)
        self._tokens: list[contextvars.Token[DevicePolicy | None]] = []
        # validate eagerly so that a bad name fails at the `with` line
        self._policy()

    def _policy(self) -> DevicePolicy:
        xp, device, dtype_, seed = self._args
        return _make_policy(current_policy(), xp, device, dtype_, seed, "default_device")

    def __enter__(self) -> DevicePolicy:
        policy = self._policy()
        self._tokens.append(_POLICY.set(policy))
        return policy

    def __exit__(self, *exc: object) -> None:
        # the newest token made in THIS context: one instance may be entered by several
        # threads or asyncio tasks at once (a shared module-level instance); each resets its own
        tokens = self._tokens
        for tok in tokens[::-1]:
            try:
                _POLICY.reset(tok)
            except ValueError:  # made in another thread's or task's context
                continue
            tokens.remove(tok)
            return

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with default_device(*self._args):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


def set_default_policy(xp: Any = None, device: Any = None, dtype: Any = None, seed: int | None = None) -> DevicePolicy:
    """Set the process default policy: what threads and contexts without a ``with`` see.

    Fields left as None keep the current process default's value. ``xp`` may also be
    a [`DevicePolicy`][xpgrad.DevicePolicy] (e.g. one from [`current_policy`][xpgrad.current_policy], or the value of a
    ``with default_device(...) as p`` block): it becomes the process default, with
    the other arguments, if given, applied on top.

    Examples:
        >>> import xpgrad as xg
        >>> _ = xg.set_default_policy(dtype="float32")
        >>> xg.current_policy().dtype
        'float32'
        >>> with xg.default_device("array_api_strict", dtype="float64") as p:
        ...     pass
        >>> xg.set_default_policy(p).xp.__name__
        'array_api_strict'
        >>> xg.reset_policy()
    """
    global _process_default
    new = _make_policy(_process_default_or_numpy(), xp, device, dtype, seed, "set_default_policy")
    with _lock:
        _process_default = new
    return new


def _process_default_or_numpy() -> DevicePolicy:
    return _process_default if _process_default is not None else _numpy_default()


def reset_policy() -> None:
    """Reset the process default to NumPy, device None, dtype None, seed None.

    Also clears any ``with`` policy of the *current* context (an enclosing
    ``with`` still restores its own previous value when it exits).

    Examples:
        >>> import xpgrad as xg
        >>> xg.reset_policy(); xg.current_policy().xp.__name__
        'array_api_compat.numpy'
    """
    global _process_default
    with _lock:
        _process_default = _numpy_default()
    _POLICY.set(None)


@contextmanager
def _policy_scope(policy: DevicePolicy) -> Iterator[DevicePolicy]:
    """Internal: run a block under an exact policy object."""
    token = _POLICY.set(policy)
    try:
        yield policy
    finally:
        _POLICY.reset(token)


# ``xpgrad.random`` (a higher layer) hands down the function that makes a policy's generator
def _no_random(policy: DevicePolicy) -> Any:
    msg = "xpgrad.random is not imported yet: import xpgrad (its package) first"
    raise XpgradTypeError(msg)


_generator_of: Callable[[DevicePolicy], Any] = _no_random


def set_generator_factory(fn: Callable[[DevicePolicy], Any]) -> None:
    """Hand down ``fn(policy) -> its random generator`` (``xpgrad.random`` calls this when it is imported)."""
    global _generator_of
    _generator_of = fn


def _current_namespace() -> ModuleType:
    return current_policy().xp


set_default_namespace(_current_namespace)  # (_dispatch and _dtypes, lower layers, ask it for the default namespace)
