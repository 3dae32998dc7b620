"""Library names and device strings: the one module (with ``random.py``) that knows
array libraries by name.

It turns ``"torch"`` into a namespace (importing the library only when asked), an
array into its namespace and device, and ``"cpu"`` / ``"cuda"`` / ``"cuda:1"`` into
each library's device object.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from types import ModuleType
from typing import Any

from ._exceptions import BackendNotInstalledError, UnknownNameError, XpgradTypeError, XpgradValueError

__all__ = ["LIBRARIES", "backend_info", "library_of", "load_namespace", "owns_device", "resolve_device"]

# name -> (module that provides the array API namespace, distribution, extra)
LIBRARIES: dict[str, tuple[str, str, str]] = {
    "numpy": ("array_api_compat.numpy", "numpy", "numpy"),
    "array_api_strict": ("array_api_strict", "array-api-strict", "strict"),
    "torch": ("array_api_compat.torch", "torch", "torch"),
    "jax": ("jax.numpy", "jax", "jax"),
    "dask": ("array_api_compat.dask.array", "dask", "dask"),
    "cupy": ("array_api_compat.cupy", "cupy-cuda12x", "cupy"),
}

_ALIASES = {"np": "numpy", "strict": "array_api_strict", "array-api-strict": "array_api_strict",
            "jax.numpy": "jax", "dask.array": "dask", "cp": "cupy"}

_NS_TO_LIB = {mod: name for name, (mod, _, _) in LIBRARIES.items()}
_NS_TO_LIB["numpy"] = "numpy"
_NS_TO_LIB["cupy"] = "cupy"
_NS_TO_LIB["torch"] = "torch"
_NS_TO_LIB["dask.array"] = "dask"


def _canonical(name: str, func: str = "default_device") -> str:
    key = _ALIASES.get(name, name)
    if key not in LIBRARIES:
        msg = f"{func}: unknown library name {name!r}; known libraries are {sorted(LIBRARIES)}"
        raise UnknownNameError(msg)
    return key


def load_namespace(name: str, *, func: str = "default_device") -> ModuleType:
    """Import and return the array API namespace for a library name.

    Raises:
        UnknownNameError: not a known library name (lists the known ones).
        BackendNotInstalledError: the library is not installed (names the extra).
    """
    key = _canonical(name, func)
    module, _dist, extra = LIBRARIES[key]
    try:
        return importlib.import_module(module)
    except ImportError as e:
        msg = (
            f"{func}: the library {key!r} is not installed ({e}); "
            f'install it with: pip install "xpgrad[{extra}]"'
        )
        raise BackendNotInstalledError(msg) from e


def library_of(xp: ModuleType) -> str:
    """The library name of a namespace (``array_api_compat.torch`` -> ``"torch"``)."""
    name = getattr(xp, "__name__", "")
    if name in _NS_TO_LIB:
        return _NS_TO_LIB[name]
    head = name.split(".")[0]
    return _NS_TO_LIB.get(head, name)


def namespace_devices(xp: ModuleType) -> list[Any]:
    """The devices a namespace reports through ``__array_namespace_info__().devices()``."""
    info = getattr(xp, "__array_namespace_info__", None)
    if info is None:
        return []
    with warnings.catch_warnings():
        # torch warns about a deprecated 'mkldnn' device type while probing devices
        warnings.simplefilter("ignore")
        try:
            # JAX lists None (its "uncommitted" placement) next to real devices
            return [d for d in info().devices() if d is not None]
        except Exception:  # noqa: BLE001 - a backend that cannot list devices lists none
            return []


# (id(namespace), type(device)) -> whether the namespace lists devices of that type
_OWNS: dict[tuple[int, type], bool] = {}


def owns_device(xp: ModuleType, device: Any) -> bool:
    """Whether ``device`` (a device object) is one of namespace ``xp``'s devices.

    Decided once per device type: every device of one type belongs to one library
    (``torch.device``, JAX's ``Device``, ``array_api_strict.Device``), so a device of the
    library that ``xp`` does not list (a GPU it lacks) still counts as its own.
    """
    key = (id(xp), type(device))
    owned = _OWNS.get(key)
    if owned is None:
        try:
            owned = any(type(d) is type(device) for d in namespace_devices(xp)) or device in namespace_devices(xp)
        except TypeError:  # devices that refuse comparison with other libraries' devices
            owned = False
        owned = _OWNS[key] = bool(owned)
    return owned


def _device_text(d: Any) -> str:
    # array_api_strict.Device('device1') -> device1 ; CpuDevice(id=0) -> cpu:0
    s = str(d)
    if s.startswith("array_api_strict.Device("):
        return s[len("array_api_strict.Device('") : -2]
    if s.startswith(("TFRT_CPU_", "CpuDevice")):
        return "cpu"
    return s


def resolve_device(xp: ModuleType, device: Any, *, func: str = "default_device") -> Any:
    """Translate a device string (``"cpu"``, ``"cuda"``, ``"cuda:1"``) for namespace ``xp``.

    Device objects pass through unchanged. ``None`` means the library's default. For
    torch and CuPy an int is a GPU ordinal: ``1`` is ``"cuda:1"``.
    ``func`` is the function named in error messages.

    Raises:
        UnknownNameError: the library has no such device (lists the ones it has).
        XpgradTypeError: ``device`` is neither a string nor a device object.
    """
    if device is None:
        return device
    if not isinstance(device, str):
        bad = isinstance(device, (bool, float, complex, bytes, list, tuple, dict, set, type)) or (
            isinstance(device, int) and library_of(xp) not in ("torch", "cupy")  # their GPU ordinals
        )
        if bad:
            msg = (
                f"{func}: device must be a device object or a string such as 'cpu' or 'cuda:0', "
                f"got {type(device).__name__} {device!r}"
            )
            raise XpgradTypeError(msg)
        if not isinstance(device, int):
            return device
        if device < 0:
            msg = f"{func}: a GPU ordinal must be >= 0, got {device}"
            raise XpgradValueError(msg)
        device = f"cuda:{device}"  # torch's and CuPy's GPU ordinal: checked and made a device below
    lib = library_of(xp)
    text = device.strip().lower()
    kind, _, index_s = text.partition(":")
    try:
        index = int(index_s) if index_s else 0
    except ValueError:
        index = -1
    if lib == "torch":
        import torch

        try:
            dev = torch.device(text)
        except RuntimeError as e:
            msg = f"{func}: {device!r} is not a torch device string ({e})"
            raise UnknownNameError(msg) from None
        if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
            _no_such_device(device, lib, namespace_devices(xp), func)
        # compare equal to what arrays report: tensors on "cpu:0" report "cpu", and
        # tensors made on "cuda" report the current GPU's index ("cuda:0")
        if dev.type == "cpu":
            return torch.device("cpu")
        if dev.type == "cuda" and dev.index is None:
            return torch.device("cuda", torch.cuda.current_device())
        return dev
    if lib == "cupy":
        import cupy

        if kind in ("cuda", "gpu") and 0 <= index < cupy.cuda.runtime.getDeviceCount():
            return cupy.cuda.Device(index)
        _no_such_device(device, lib, namespace_devices(xp), func)
    if lib == "jax":
        import jax

        platform = {"cuda": "gpu", "gpu": "gpu", "cpu": "cpu", "tpu": "tpu"}.get(kind)
        try:
            devs = jax.devices(platform) if platform else []
        except RuntimeError:
            devs = []
        if 0 <= index < len(devs):
            return devs[index]
        _no_such_device(device, lib, jax.devices(), func)
    # numpy, dask, array_api_strict and any other namespace: match by the device's name
    devs = namespace_devices(xp)
    for d in devs:
        if _device_text(d).lower() in (text, device):
            return d
    if text == "cpu" and devs:
        return devs[0]
    _no_such_device(device, lib, devs, func)
    return None  # unreachable


def _no_such_device(device: str, lib: str, devs: list[Any], func: str) -> None:
    names = [_device_text(d) for d in devs]
    msg = f"{func}: the library {lib!r} has no device {device!r}; available devices: {names}"
    raise UnknownNameError(msg)


def backend_info() -> list[dict[str, Any]]:
    """For each supported library: installed or not, its version, and its devices.

    Only inspects distribution metadata for libraries that are not imported yet,
    so asking does not import an optional backend unless it is installed.
    """
    rows = []
    for name, (_, dist, extra) in LIBRARIES.items():
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = None
        row: dict[str, Any] = {"library": name, "installed": version is not None,
                               "version": version, "extra": extra, "devices": []}
        if version is not None:
            try:
                xp = load_namespace(name)
                row["devices"] = [_device_text(d) for d in namespace_devices(xp)]
            except Exception as e:  # noqa: BLE001 - report a broken install instead of failing
                row["error"] = str(e)
        rows.append(row)
    return rows
