"""Saving and loading tensors (safetensors), and moving arrays between libraries.

:func:`save` writes a mapping of tensors (a ``state_dict``, an optimizer's state,
nested dicts and lists of tensors and plain Python values) to one safetensors
file; :func:`load` reads it back onto the current policy's namespace and device,
so weights saved from NumPy load onto PyTorch, CuPy or JAX. A flat mapping of
tensors is written under its own keys, so other safetensors readers see the same
names. Writes go to a temporary file that replaces the target only when complete;
a corrupt or truncated file raises :class:`~xpgrad.XpgradValueError`.

``safetensors`` is imported only when a file is read or written (``pip install
"xpgrad[io]"``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import array_api_compat

from ._dispatch import backend_namespace, public_namespace
from ._dtypes import dtype_name, to_backend
from ._exceptions import BackendNotInstalledError, XpgradTypeError, XpgradValueError
from .autograd._tensor import Tensor, _to_numpy

__all__ = ["load", "save"]

_META_KEY = "__xpgrad__"
_FORMAT = 1


# ---------------------------------------------------------------------- moving arrays
def move_array(data: Any, xp: Any, device: Any = None, dtype: Any = None, copy: bool = False,
               func: str = "move_array") -> Any:
    """``data`` (a Tensor or an array of any library) as an array of namespace ``xp``.

    Another library's array goes through DLPack where both sides support it, else
    through a host NumPy copy. ``device=None`` keeps the device (or uses ``xp``'s
    default when the library changes); ``dtype`` is a dtype of any kind or a name.
    ``copy=True`` guarantees the result shares no memory with ``data``.
    """
    if isinstance(data, Tensor):
        data = data.data
    dt = to_backend(dtype, xp) if dtype is not None else None
    if not hasattr(data, "shape") or not hasattr(data, "dtype"):
        return xp.asarray(data, dtype=dt, device=device)
    src = backend_namespace(data, func="move_array")
    fresh = False  # whether ``data`` is known to be new memory
    if public_namespace(src) is not public_namespace(xp):  # (NumPy's fast namespace is NumPy's)
        data = _cross(data, xp, device)
    # cast before moving: the target device may lack the source dtype (float64 -> MPS-like)
    if dt is not None and dtype_name(data.dtype) != dtype_name(dt):
        data = xp.astype(data, dt)
        fresh = True
    if device is not None and array_api_compat.device(data) != device:
        from ._policy import check_device_has_dtypes

        check_device_has_dtypes(func, device, [data])
        data = array_api_compat.to_device(data, device)
        fresh = True
    if copy and not fresh:
        data = xp.asarray(data, copy=True)
    return data


def _cross(data: Any, xp: Any, device: Any) -> Any:
    """An array of library ``xp`` from an array of another library."""
    if not array_api_compat.is_numpy_array(data) and not array_api_compat.is_dask_array(data):
        try:
            out = xp.from_dlpack(data)
        except (AttributeError, TypeError, ValueError, BufferError, RuntimeError, NotImplementedError):
            out = None
        if out is not None:
            return out
    import numpy as np

    host = np.asarray(_to_numpy(data))
    if not host.flags.writeable or not host.flags.c_contiguous:
        host = np.ascontiguousarray(host).copy()
    return xp.asarray(host, device=device)


# ---------------------------------------------------------------------- save / load
def _host(value: Any, where: str) -> Any:
    import numpy as np

    data = value.data if isinstance(value, Tensor) else value
    try:
        host = np.ascontiguousarray(_to_numpy(data))
    except Exception as e:
        msg = f"save: cannot copy the array at {where!r} ({type(data).__name__}) to the host: {e}"
        raise XpgradTypeError(msg) from e
    return host


def _is_array(v: Any) -> bool:
    if isinstance(v, Tensor):
        return True
    if not (hasattr(v, "shape") and hasattr(v, "dtype")):
        return False
    return hasattr(v, "__array_namespace__") or type(v).__module__ == "numpy"


def _encode(obj: Any, path: tuple[str, ...], tensors: dict[str, Any], flat: bool) -> Any:
    """The JSON tree of ``obj``; arrays go to ``tensors`` and are replaced by references."""
    if _is_array(obj):
        name = path[-1] if flat else ".".join(path)
        base, n = name, 1
        while name in tensors or name == _META_KEY:
            name = f"{base}#{n}"
            n += 1
        host = _host(obj, ".".join(path))
        ref: dict[str, Any] = {"t": name}
        if host.dtype.kind == "c":
            import numpy as np

            real = np.float32 if host.dtype == np.complex64 else np.float64
            host = np.ascontiguousarray(host).view(real).reshape((*host.shape, 2))
            ref["complex"] = True
        tensors[name] = host
        return ref
    if isinstance(obj, Mapping):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                where = ".".join(path) or "<root>"
                msg = f"save: mapping keys must be str or int, got {type(k).__name__} {k!r} at {where}"
                raise XpgradTypeError(msg)
            items.append([k, _encode(v, (*path, str(k)), tensors, flat)])
        return {"d": items}
    if isinstance(obj, (list, tuple)):
        enc = [_encode(v, (*path, str(i)), tensors, flat) for i, v in enumerate(obj)]
        return {"l" if isinstance(obj, list) else "tu": enc}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        if (isinstance(obj, float) and obj != obj) or obj in (float("inf"), float("-inf")):
            return {"f": repr(obj)}
        return {"v": obj}
    msg = (
        f"save: cannot store a {type(obj).__name__} at {'.'.join(path) or '<root>'}; "
        "values must be tensors/arrays, str, int, float, bool, None, or dicts/lists/tuples of them"
    )
    raise XpgradTypeError(msg)


def save(obj: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Save a mapping of tensors (e.g. ``model.state_dict()``) to a safetensors file.

    Values may be Tensors or arrays of any library (copied to the host), and plain
    Python values or nested dicts / lists of them (an optimizer's ``state_dict()``).
    The file is written next to ``path`` and renamed into place when complete, so
    an error leaves an existing file unchanged.

    Raises:
        XpgradTypeError: ``obj`` is not a mapping, or holds a value that cannot be stored.
        BackendNotInstalledError: ``safetensors`` is not installed.

    Examples:
        >>> import os, tempfile, xpgrad as xg
        >>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> xg.save({"w": xg.asarray([1.0, 2.0]), "step": 3}, path)
        >>> xg.load(path)
        {'w': Tensor([1., 2.], dtype=float64, device=cpu), 'step': 3}
    """
    if not isinstance(obj, Mapping):
        msg = (
            f"save: expected a mapping such as model.state_dict(), got {type(obj).__name__}; "
            "save a module's weights with xpgrad.save(model.state_dict(), path)"
        )
        raise XpgradTypeError(msg)
    st = _safetensors()
    tensors: dict[str, Any] = {}
    flat = all(isinstance(k, str) and _is_array(v) for k, v in obj.items())
    tree = _encode(obj, (), tensors, flat)
    meta = {_META_KEY: json.dumps({"format": _FORMAT, "tree": tree})}
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".xpgrad-", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        st.save_file(tensors, tmp, metadata=meta)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _safetensors() -> Any:
    try:
        import safetensors.numpy as stn
    except ImportError as e:
        msg = f'save/load: the safetensors package is needed ({e}); install it with: pip install "xpgrad[io]"'
        raise BackendNotInstalledError(msg) from e
    return stn


def _decode(node: Any, tensors: dict[str, Any], make: Any, path: str) -> Any:
    if not isinstance(node, dict) or len(node) == 0:
        msg = f"load: malformed xpgrad metadata at {path or '<root>'}"
        raise XpgradValueError(msg)
    if "t" in node:
        name = node["t"]
        if name not in tensors:
            msg = f"load: the file's metadata names a tensor {name!r} that the file does not contain"
            raise XpgradValueError(msg)
        return make(tensors[name], bool(node.get("complex")))
    if "d" in node:
        return {k: _decode(v, tensors, make, f"{path}.{k}" if path else str(k)) for k, v in node["d"]}
    if "l" in node:
        return [_decode(v, tensors, make, f"{path}.{i}") for i, v in enumerate(node["l"])]
    if "tu" in node:
        return tuple(_decode(v, tensors, make, f"{path}.{i}") for i, v in enumerate(node["tu"]))
    if "f" in node:
        return float(node["f"])
    if "v" in node:
        return node["v"]
    msg = f"load: malformed xpgrad metadata at {path or '<root>'}: {node!r}"
    raise XpgradValueError(msg)


def _read_tensor(f: Any, key: str, target: str) -> Any:
    """One tensor of an open safetensors file, refused clearly when its dtype is not a standard one."""
    try:
        host = f.get_tensor(key)
    except Exception as e:
        msg = f"load: cannot read tensor {key!r} of {target!r} as a standard array ({e})"
        raise XpgradValueError(msg) from e
    try:
        dtype_name(host.dtype)
    except XpgradValueError:
        msg = (
            f"load: tensor {key!r} of {target!r} has dtype {host.dtype}, which is not one of the "
            "array API standard's dtypes; convert the file's tensors (e.g. to float32) first"
        )
        raise XpgradValueError(msg) from None
    return host


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load what :func:`save` wrote (or any safetensors file) as Tensors on the current policy.

    Tensors keep their saved dtype and go to the namespace and device of
    :func:`xpgrad.current_policy`, so weights saved from NumPy load onto PyTorch
    under ``with xg.default_device("torch"):``. A file written by another tool
    loads as a flat dict of its tensors.

    Raises:
        FileNotFoundError: no such file.
        XpgradValueError: the file is not a complete safetensors file, or its
            xpgrad metadata names a tensor the file lacks.

    Examples:
        >>> import os, tempfile, xpgrad as xg
        >>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> xg.save({"b": xg.asarray([0.5])}, path)
        >>> with xg.default_device("array_api_strict"):
        ...     xg.load(path)["b"]
        Tensor([0.5], dtype=float64, device=CPU_DEVICE)
    """
    import numpy as np

    from ._policy import current_policy

    st = _safetensors()
    target = os.fspath(path)
    if not os.path.exists(target):
        msg = f"load: no such file {target!r}"
        raise FileNotFoundError(msg)
    try:
        from safetensors import safe_open

        with safe_open(target, framework="numpy") as f:
            meta = f.metadata() or {}
            tensors = {k: _read_tensor(f, k, target) for k in f.keys()}
    except XpgradValueError:
        raise
    except Exception as e:
        msg = f"load: {target!r} is not a valid safetensors file (corrupt or truncated?): {e}"
        raise XpgradValueError(msg) from e
    del st
    p = current_policy()
    xp, dev = p.xp, p.device

    def make(host: Any, is_complex: bool) -> Tensor:
        if is_complex:
            host = np.ascontiguousarray(host)
            cdt = np.complex64 if host.dtype == np.float32 else np.complex128
            host = host.view(cdt).reshape(host.shape[:-1])
        host = np.array(host, copy=True)  # writeable, owned memory for every library
        return Tensor(xp.asarray(host, device=dev))

    raw = meta.get(_META_KEY)
    if raw is None:
        return {k: make(v, False) for k, v in tensors.items()}
    try:
        info = json.loads(raw)
        tree = info["tree"]
    except (ValueError, KeyError, TypeError) as e:
        msg = f"load: {target!r} has damaged xpgrad metadata ({e})"
        raise XpgradValueError(msg) from e
    out = _decode(tree, tensors, make, "")
    if not isinstance(out, dict):
        msg = f"load: {target!r} does not hold a mapping at its root"
        raise XpgradValueError(msg)
    return out

