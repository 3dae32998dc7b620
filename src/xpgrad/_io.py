"""Saving and loading tensors (safetensors), and moving arrays between libraries.

[`save`][xpgrad.save] writes a mapping of tensors (a ``state_dict``, an optimizer's state,
nested dicts and lists of tensors and plain Python values) to one safetensors
file; [`load`][xpgrad.load] reads it back onto the current policy's namespace and device,
so weights saved from NumPy load onto PyTorch, CuPy or JAX. A flat mapping of
tensors is written under its own keys, so other safetensors readers see the same
names. Writes go to a temporary file that replaces the target only when complete;
a corrupt or truncated file raises [`XpgradValueError`][xpgrad.XpgradValueError].

The format: each array is one safetensors tensor (complex arrays as float32/float64
with a last axis of 2, 0-d arrays as 0-d tensors); the structure is a JSON tree in
the file's ``__xpgrad__`` metadata entry, ``{"format": 1, "tree": ...}``, whose
nodes are ``{"d": [[key, node], ...]}`` (``{"od": ...}`` for an ``OrderedDict``, which
loads as one), ``{"l": [...]}``, ``{"tu": [...]}`` (a named tuple is stored as a tuple;
another `xpgrad.tree_util` container as its children: a registered dataclass as a dict
of its data fields, a deque as a list),
``{"t": name}`` (with ``"complex": true`` for a complex array), ``{"f": "nan"}``
and ``{"v": value}``. [`load`][xpgrad.load] checks the whole tree against the tensor headers
before it reads any tensor, and refuses with [`XpgradValueError`][xpgrad.XpgradValueError]
what [`save`][xpgrad.save] never writes: a tensor referenced twice (so a small file cannot
load as many copies of one tensor), nesting past 100 levels, a ``"complex"`` flag
on any other tensor, an unknown format number or a malformed node.

``safetensors`` is imported only when a file is read or written (``pip install
"xpgrad[io]"``).
"""

from __future__ import annotations

import collections
import json
import os
import tempfile
import zipfile
from collections.abc import Mapping
from typing import Any, NoReturn

import array_api_compat
import numpy as np

from . import tree_util
from ._backends import library_of
from ._dispatch import backend_namespace, public_namespace
from ._dtypes import dtype_name, to_backend
from ._exceptions import BackendNotInstalledError, XpgradTypeError, XpgradValueError
from ._policy import check_device_has_dtypes, current_policy
from ._tracing import base_namespace, is_tracer
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
    dt = to_backend(dtype, xp, func=func) if dtype is not None else None
    if not hasattr(data, "shape") or not hasattr(data, "dtype"):
        return xp.asarray(data, dtype=dt, device=device)
    src = backend_namespace(data, func="move_array")
    fresh = False  # whether ``data`` is known to be new memory
    if public_namespace(src) is not public_namespace(xp):  # (NumPy's fast namespace is NumPy's)
        data = _cross(data, xp, device, func)
    # cast before moving: the target device may lack the source dtype (float64 -> MPS-like)
    if dt is not None and dtype_name(data.dtype) != dtype_name(dt):
        data = xp.astype(data, dt)
        fresh = True
    if device is not None and array_api_compat.device(data) != device:
        check_device_has_dtypes(func, device, [data])
        data = array_api_compat.to_device(data, device)
        fresh = True
    if copy and not fresh:
        data = xp.asarray(data, copy=True)
    return data


def _cross(data: Any, xp: Any, device: Any, func: str = "move_array") -> Any:
    """An array of library ``xp`` from an array of another library (``func``: the caller, named in errors)."""
    if is_tracer(data):  # (inside xg.jit, a traced array: the move is one call of the program, on its values)
        base = base_namespace(xp) or xp
        return data._t.call(_cross, "move_array", (data, base, device), {}, base)
    if not array_api_compat.is_numpy_array(data) and not array_api_compat.is_dask_array(data):
        try:
            out = xp.from_dlpack(data)
        except (AttributeError, TypeError, ValueError, BufferError, RuntimeError, NotImplementedError):
            out = None
        if out is not None:
            return out
    host = np.asarray(_to_numpy(data))
    if not host.flags.writeable or not host.flags.c_contiguous:
        host = np.array(host, order="C", copy=True)  # (not ascontiguousarray: it makes a 0-d array 1-d)
    out = xp.asarray(host, device=device)
    src = dtype_name(data.dtype)
    if src != dtype_name(host.dtype):  # bfloat16 crossed the host as float32 (NumPy has none): back to it
        out = xp.astype(out, to_backend(src, xp, func=func))
    return out


# ---------------------------------------------------------------------- save / load
_MAX_DEPTH = 100  # nesting of dicts / lists / tuples that save writes and load accepts
_RESERVED = (_META_KEY, "__metadata__")  # tensor names safetensors or xpgrad keep for themselves
_COMPLEX_PARTS = {"F32": "complex64", "F64": "complex128"}  # what a "complex" tensor may be stored as


def _host(value: Any, where: str) -> Any:
    """A C-contiguous NumPy copy (or view) of ``value`` on the host, of the same shape (0-d stays 0-d)."""
    data = value.data if isinstance(value, Tensor) else value
    try:
        host = np.asarray(_to_numpy(data))
        if not host.flags.c_contiguous:
            host = np.array(host, order="C", copy=True)
    except Exception as e:
        msg = f"save: cannot copy the array at {where!r} ({type(data).__name__}) to the host: {e}"
        raise XpgradTypeError(msg) from e
    name = dtype_name(data.dtype)
    if name != dtype_name(host.dtype):  # torch's bfloat16 reaches NumPy as float32: never store it so silently
        msg = (f"save: the array at {where!r} is {name}, which the NumPy-based writer cannot store as such; "
               f"cast it first (xg.astype(x, xg.float32), or model.to(dtype=xg.float32))")
        raise XpgradTypeError(msg)
    return host


def _is_array(v: Any) -> bool:
    if isinstance(v, Tensor):
        return True
    if not (hasattr(v, "shape") and hasattr(v, "dtype")):
        return False
    # array_api_compat knows the libraries whose arrays lack __array_namespace__ (torch, Dask...)
    return hasattr(v, "__array_namespace__") or type(v).__module__ == "numpy" or array_api_compat.is_array_api_obj(v)


def _encode(obj: Any, path: tuple[str, ...], tensors: dict[str, Any], flat: bool) -> Any:
    """The JSON tree of ``obj``; arrays go to ``tensors`` and are replaced by references."""
    if len(path) > _MAX_DEPTH:
        msg = (f"save: the value is nested more than {_MAX_DEPTH} levels deep at {'.'.join(path[:8])}... "
               "(a dict or list that contains itself?)")
        raise XpgradValueError(msg)
    if _is_array(obj):
        name = path[-1] if flat else ".".join(path)
        base, n = name, 1
        while name in tensors or name in _RESERVED:  # "__metadata__" is escaped to "__metadata__#1"
            name = f"{base}#{n}"
            n += 1
        host = _host(obj, ".".join(path))
        ref: dict[str, Any] = {"t": name}
        if host.dtype.kind == "c":
            real = np.float32 if host.dtype == np.complex64 else np.float64
            host = host.reshape((*host.shape, 1)).view(real)  # (view alone refuses 0-d arrays)
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
        return {"od" if isinstance(obj, collections.OrderedDict) else "d": items}
    if isinstance(obj, (list, tuple)):
        enc = [_encode(v, (*path, str(i)), tensors, flat) for i, v in enumerate(obj)]
        return {"l" if isinstance(obj, list) else "tu": enc}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        if (isinstance(obj, float) and obj != obj) or obj in (float("inf"), float("-inf")):
            return {"f": repr(obj)}
        return {"v": obj}
    node = tree_util.children(obj)
    if node is not None:  # (another container of xg.tree_util: a deque, a registered dataclass or class)
        kids, entries = node
        if all(isinstance(e, str) for e in entries):  # (named children: a dataclass's fields)
            return {"d": [[e, _encode(v, (*path, e), tensors, flat)] for e, v in zip(entries, kids)]}
        return {"l": [_encode(v, (*path, str(i)), tensors, flat) for i, v in enumerate(kids)]}
    msg = (
        f"save: cannot store a {type(obj).__name__} at {'.'.join(path) or '<root>'}; "
        "values must be tensors/arrays, str, int, float, bool, None, or dicts/lists/tuples (or other "
        "xg.tree_util containers) of them"
    )
    raise XpgradTypeError(msg)


def save(obj: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Save a mapping of tensors (e.g. ``model.state_dict()``) to a safetensors file.

    Values may be Tensors or arrays of any library (NumPy, PyTorch, JAX, CuPy, Dask...;
    copied to the host, detached, with their shape, 0-d included), and plain Python
    values or nested dicts / lists / tuples of them (an optimizer's ``state_dict()``),
    at most 100 levels deep. Other `xpgrad.tree_util` containers are stored as their
    children and load as plain ones: a registered dataclass as a dict of its data
    fields, a deque as a list (as a named tuple loads as a tuple). Each value is written as its own tensor: two entries
    holding the same array load as two independent tensors. A flat mapping of
    tensors is written under its own keys, except that a key spelled
    ``__metadata__`` (which safetensors reserves) is stored as ``__metadata__#1``
    and still loads under its own key. The file is written next to ``path`` and
    renamed into place when complete, so an error leaves an existing file unchanged.

    Raises:
        XpgradTypeError: ``obj`` is not a mapping, or holds a value that cannot be stored.
        XpgradValueError: ``obj`` is nested more than 100 levels deep (or contains itself).
        BackendNotInstalledError: ``safetensors`` is not installed.

    Examples:
        >>> import os, tempfile, xpgrad as xg
        >>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> xg.save({"w": xg.asarray([1.0, 2.0]), "step": 3, "t": xg.asarray(5.0)}, path)
        >>> xg.load(path)
        {'w': Tensor([1., 2.], dtype=float64, device=cpu), 'step': 3, 't': Tensor(5., dtype=float64, device=cpu)}
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


class _Checker:
    """Validates the whole xpgrad metadata tree against the file's tensor headers, reading no tensor.

    ``refs`` maps each referenced tensor name to whether it is stored as a complex
    tensor; a name may be referenced once, so what load allocates is bounded by the file.
    """

    def __init__(self, target: str, headers: dict[str, tuple[str, list[int]]]) -> None:
        self.target = target
        self.headers = headers
        self.refs: dict[str, bool] = {}
        self.where: dict[str, str] = {}

    def fail(self, path: str, what: str) -> NoReturn:
        msg = f"load: {self.target!r} has malformed xpgrad metadata at {path or '<root>'}: {what}"
        raise XpgradValueError(msg)

    def check(self, node: Any, path: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            self.fail(path, f"nested more than {_MAX_DEPTH} levels deep")
        if not isinstance(node, dict) or not node:
            self.fail(path, f"expected a node like {{\"d\": [...]}}, got {_short(node)}")
        kind = "t" if "t" in node else next(iter(node))
        allowed = ("t", "complex") if kind == "t" else (kind,)
        if kind not in ("t", "d", "od", "l", "tu", "f", "v") or any(k not in allowed for k in node):
            self.fail(path, f"unknown node {_short(node)}")
        value = node[kind]
        if kind == "t":
            self.check_ref(node, value, path)
        elif kind in ("d", "od"):
            self.check_dict(value, path, depth)
        elif kind in ("l", "tu"):
            if not isinstance(value, list):
                self.fail(path, f"a list node holds {_short(value)}, not a list")
            for i, v in enumerate(value):
                self.check(v, f"{path}.{i}" if path else str(i), depth + 1)
        elif kind == "f":
            try:
                ok = isinstance(value, str) and float(value) is not None
            except ValueError:
                ok = False
            if not ok:
                self.fail(path, f"a float node holds {_short(value)}, not a number's text")
        elif value is not None and not isinstance(value, (bool, int, float, str)):
            self.fail(path, f"a value node holds {_short(value)}, not a str, number, bool or null")

    def check_dict(self, items: Any, path: str, depth: int) -> None:
        if not isinstance(items, list):
            self.fail(path, f"a dict node holds {_short(items)}, not a list of [key, value] pairs")
        seen = set()
        for pair in items:
            if not isinstance(pair, list) or len(pair) != 2:
                self.fail(path, f"a dict entry is {_short(pair)}, not a [key, value] pair")
            k = pair[0]
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                self.fail(path, f"a dict key is {_short(k)}, not a str or int")
            if k in seen:
                self.fail(path, f"the key {k!r} appears twice")
            seen.add(k)
            self.check(pair[1], f"{path}.{k}" if path else str(k), depth + 1)

    def check_ref(self, node: dict[str, Any], name: Any, path: str) -> None:
        if not isinstance(name, str):
            self.fail(path, f"a tensor reference names {_short(name)}, not a str")
        if name not in self.headers:
            msg = f"load: the file's metadata names a tensor {name!r} (at {path or '<root>'}) that the file does not contain"
            raise XpgradValueError(msg)
        if name in self.refs:
            self.fail(path, f"tensor {name!r} is referenced again (first at {self.where[name] or '<root>'}); "
                            "each tensor of the file may be referenced once")
        flag = node.get("complex", False)
        if not isinstance(flag, bool):
            self.fail(path, f"the 'complex' flag of tensor {name!r} is {_short(flag)}, not true or false")
        if flag:
            dtype, shape = self.headers[name]
            if dtype not in _COMPLEX_PARTS or not shape or shape[-1] != 2:
                self.fail(path, f"tensor {name!r} is flagged complex but has dtype {dtype} and shape {shape}; "
                                "a complex tensor is stored as float32 or float64 with a last axis of 2")
        self.refs[name] = flag
        self.where[name] = path


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _decode(node: dict[str, Any], made: dict[str, Any]) -> Any:
    """The value of a node that `_Checker` accepted; ``made`` holds the tensors."""
    kind = "t" if "t" in node else next(iter(node))
    value = node[kind]
    if kind == "t":
        return made.pop(value)
    if kind == "d":
        return {k: _decode(v, made) for k, v in value}
    if kind == "od":
        return collections.OrderedDict((k, _decode(v, made)) for k, v in value)
    if kind == "l":
        return [_decode(v, made) for v in value]
    if kind == "tu":
        return tuple(_decode(v, made) for v in value)
    if kind == "f":
        return float(value)
    return value


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


def _tree(target: str, raw: str, headers: dict[str, tuple[str, list[int]]]) -> tuple[Any, dict[str, bool]]:
    """The checked metadata tree of a file and the tensors it references (name: complex flag)."""
    try:
        info = json.loads(raw)
    except (ValueError, RecursionError) as e:
        msg = f"load: {target!r} has damaged xpgrad metadata (not JSON, or nested too deeply: {type(e).__name__})"
        raise XpgradValueError(msg) from None
    if not isinstance(info, dict) or "tree" not in info or "format" not in info:
        msg = f"load: {target!r} has damaged xpgrad metadata (expected an object with 'format' and 'tree')"
        raise XpgradValueError(msg)
    fmt = info["format"]
    if type(fmt) is not int or fmt != _FORMAT:
        msg = (f"load: {target!r} has xpgrad format {_short(fmt)}, which this version of xpgrad cannot read "
               f"(it reads format {_FORMAT})")
        raise XpgradValueError(msg)
    tree = info["tree"]
    checker = _Checker(target, headers)
    checker.check(tree, "", 0)
    if next(iter(tree)) not in ("d", "od"):
        msg = f"load: {target!r} does not hold a mapping at its root"
        raise XpgradValueError(msg)
    return tree, checker.refs


def _not_safetensors(target: str) -> str | None:
    """The message for a file of another format that `load` was given, or None.

    Read where safetensors refused the file (its own text, "header too large", names no format):
    ``torch.save`` writes a zip archive holding ``data.pkl`` (older torch a bare pickle),
    ``np.savez`` a zip of ``.npy`` files, ``np.save`` a ``.npy`` file.
    """
    try:
        with open(target, "rb") as fh:
            head = fh.read(8)
    except OSError:
        return None
    cure = ("xg.load reads safetensors only (it never unpickles). Convert it once: in torch, "
            "sd = torch.load(path, weights_only=True), then model.load_state_dict(sd) on the xpgrad model, "
            "or xg.save(sd, 'model.safetensors') to keep a safetensors copy")
    if head.startswith(b"PK"):
        try:
            with zipfile.ZipFile(target) as z:
                names = z.namelist()
        except (zipfile.BadZipFile, OSError):
            names = []
        if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            return f"load: {target!r} is a PyTorch checkpoint (torch.save's zip of a pickle), not a safetensors file; {cure}"
        if names and all(n.endswith(".npy") for n in names):
            return (f"load: {target!r} is a NumPy .npz archive (np.savez), not a safetensors file; load it with "
                    "np.load(path) and pass the arrays to model.load_state_dict(...) or xg.save(...)")
        return None
    if head.startswith(b"\x80"):
        return (f"load: {target!r} is a Python pickle (an older torch.save, or pickle.dump), not a safetensors "
                f"file; {cure}")
    if head.startswith(b"\x93NUMPY"):
        return (f"load: {target!r} is a NumPy .npy file (np.save), not a safetensors file; load it with "
                "np.load(path) and wrap it with xg.asarray(...)")
    return None


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load what [`save`][xpgrad.save] wrote (or any safetensors file) as Tensors on the current policy.

    Tensors keep their saved dtype and shape (0-d included) and go to the
    namespace and device of [`xpgrad.current_policy`][xpgrad.current_policy], so weights saved from
    NumPy load onto PyTorch under ``with xg.default_device("torch"):``. A file
    written by another tool loads as a flat dict of its tensors.

    The whole xpgrad metadata is checked against the file's tensor headers before
    any tensor is read: each tensor may be referenced once, so the memory a load
    takes is bounded by the file's size; nesting is limited to 100 levels; the
    ``"complex"`` flag is accepted on float32/float64 tensors with a last axis of 2
    only, and only format 1 is read. Tensors the metadata does not reference are
    not read.

    Raises:
        FileNotFoundError: no such file.
        XpgradValueError: the file is not a complete safetensors file, or its
            xpgrad metadata is malformed (names the problem and where it is). A
            ``torch.save`` checkpoint (or a NumPy ``.npy``/``.npz`` file) is named as
            such, with how to convert it: ``torch.load(path, weights_only=True)``,
            then ``model.load_state_dict(sd)`` or ``xg.save(sd, path)``.

    Examples:
        >>> import os, tempfile, xpgrad as xg
        >>> path = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> xg.save({"b": xg.asarray([0.5])}, path)
        >>> with xg.default_device("array_api_strict"):
        ...     xg.load(path)["b"]
        Tensor([0.5], dtype=float64, device=CPU_DEVICE)
    """
    _safetensors()
    target = os.fspath(path)
    if not os.path.exists(target):
        msg = f"load: no such file {target!r}"
        raise FileNotFoundError(msg)
    try:
        from safetensors import safe_open

        with safe_open(target, framework="numpy") as f:
            meta = f.metadata() or {}
            headers = {}
            for k in f.keys():
                sl = f.get_slice(k)
                headers[k] = (sl.get_dtype(), list(sl.get_shape()))
            raw = meta.get(_META_KEY)
            if raw is None:
                tree, refs = None, dict.fromkeys(headers, False)
            else:
                tree, refs = _tree(target, raw, headers)
            hosts = {k: _read_tensor(f, k, target) for k in refs}
    except XpgradValueError:
        raise
    except Exception as e:
        msg = _not_safetensors(target) or (
            f"load: {target!r} is not a valid safetensors file (corrupt or truncated?): {e}")
        raise XpgradValueError(msg) from e
    p = current_policy()
    xp, dev = p.xp, p.device
    made: dict[str, Tensor] = {}
    for name, is_complex in refs.items():
        host = hosts.pop(name)  # one array at a time: the host copy is freed as it moves
        if is_complex:
            host = np.ascontiguousarray(host).view(_COMPLEX_PARTS[headers[name][0]])[..., 0]
        if not host.flags.writeable:
            host = np.array(host, copy=True)  # writeable, owned memory for every library
        try:
            made[name] = Tensor(xp.asarray(host, device=dev))
        except (TypeError, ValueError) as e:  # (a dtype the policy's library lacks: float16 on array-api-strict)
            msg = (f"load: {target!r}: tensor {name!r} has dtype {dtype_name(host.dtype)}, which the current "
                   f"policy's library ({library_of(xp)}) cannot hold ({e}); load it under a policy whose library has it "
                   f"(with xg.default_device('numpy'): ...) and convert")
            raise XpgradValueError(msg) from e
    if tree is None:
        return made
    out: dict[str, Any] = _decode(tree, made)
    return out
