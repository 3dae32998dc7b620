"""Dtypes by name: the 13 standard dtype names, the extension dtypes ``float16`` and
``bfloat16``, xpgrad's own dtype objects, and the mapping to and from each namespace's
dtype objects.

xpgrad's namespace sits over any backend, so its dtypes (``xpgrad.float32``, ...)
are its own singletons; [`dtype`][xpgrad.dtype] gives the backend's object for a name and
[`dtype_name`][xpgrad.dtype_name] goes back. Tables are built once per namespace and cached.
"""

from __future__ import annotations

import builtins
from types import ModuleType
from typing import Any

import numpy as np

from ._dispatch import default_namespace
from ._exceptions import DTypeUnavailableError, UnknownNameError

__all__ = [
    "DType",
    "DTYPE_NAMES",
    "EXTENSION_DTYPE_NAMES",
    "complex_dtype",
    "dtype",
    "dtype_name",
    "promote_names",
    "real_dtype",
]

DTYPE_NAMES: tuple[str, ...] = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
)

#: Real floating dtypes outside the standard, accepted where the array's library has them
#: (torch: both; JAX: both; NumPy, CuPy and Dask: float16). Rules compute with them as
#: with any real floating dtype; reductions and softmax-like functions accumulate in
#: float32 (``HALF_DTYPE_NAMES``), as torch does.
EXTENSION_DTYPE_NAMES: tuple[str, ...] = ("float16", "bfloat16")
HALF_DTYPE_NAMES = frozenset(EXTENSION_DTYPE_NAMES)

_KIND = {
    "bool": "bool",
    **{n: "signed integer" for n in ("int8", "int16", "int32", "int64")},
    **{n: "unsigned integer" for n in ("uint8", "uint16", "uint32", "uint64")},
    "float32": "real floating",
    "float64": "real floating",
    "complex64": "complex floating",
    "complex128": "complex floating",
    "float16": "real floating",
    "bfloat16": "real floating",
}

_COMPLEX = {
    "float16": "complex64",  # (torch and JAX: float16 with complex64 gives complex64)
    "bfloat16": "complex64",
    "float32": "complex64",
    "float64": "complex128",
    "complex64": "complex64",
    "complex128": "complex128",
}
_REAL = {
    "complex64": "float32",
    "complex128": "float64",
    "float32": "float32",
    "float64": "float64",
    "float16": "float16",
    "bfloat16": "bfloat16",
}


class DType:
    """A dtype of xpgrad's namespace, e.g. ``xpgrad.float32``.

    Singletons: compare with ``==`` or ``is``. ``str(d)`` is the standard name.

    Examples:
        >>> import xpgrad as xg
        >>> xg.float32.name, xg.float32.kind
        ('float32', 'real floating')
    """

    __slots__ = ("kind", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.kind = _KIND[name]

    def __repr__(self) -> str:
        return f"xpgrad.{self.name}"

    __str__ = __repr__

    def __reduce__(self) -> str:
        return self.name  # pickles as the module-level singleton


DTYPES: dict[str, DType] = {n: DType(n) for n in (*DTYPE_NAMES, *EXTENSION_DTYPE_NAMES)}
bool = DTYPES["bool"]  # noqa: A001 - the standard dtype name
int8 = DTYPES["int8"]
int16 = DTYPES["int16"]
int32 = DTYPES["int32"]
int64 = DTYPES["int64"]
uint8 = DTYPES["uint8"]
uint16 = DTYPES["uint16"]
uint32 = DTYPES["uint32"]
uint64 = DTYPES["uint64"]
float32 = DTYPES["float32"]
float64 = DTYPES["float64"]
complex64 = DTYPES["complex64"]
complex128 = DTYPES["complex128"]
float16 = DTYPES["float16"]
bfloat16 = DTYPES["bfloat16"]

# type of a backend dtype object -> {dtype object -> name}, filled per namespace on first
# sight. Keyed by type first: array-api-strict dtypes hash like NumPy's and warn when
# compared with them, so dtypes of different libraries must never meet in one dict.
_NAME_BY_TYPE: dict[type, dict[Any, str]] = {}


def fast_name(dt: Any) -> str | None:
    """The standard name of a backend dtype object seen before, else None (hot path)."""
    d = _NAME_BY_TYPE.get(type(dt))
    if d is None:
        return None
    try:
        return d.get(dt)
    except TypeError:
        return None
_TABLES: dict[int, dict[str, Any]] = {}


def _table(xp: ModuleType) -> dict[str, Any]:
    """name -> dtype object of ``xp``; only the dtypes the namespace has."""
    tab = _TABLES.get(id(xp))
    if tab is None:
        tab = {}
        for name in (*DTYPE_NAMES, *EXTENSION_DTYPE_NAMES):
            obj = getattr(xp, name, None)
            if obj is None and name in HALF_DTYPE_NAMES:
                obj = _numpy_extension(tab.get("float32"), name)
            if obj is None:
                continue
            tab[name] = obj
            _register(obj, name)
        _TABLES[id(xp)] = tab
    return tab


def _numpy_extension(f32: Any, name: str) -> Any:
    """NumPy's extension dtype ``name`` for a namespace whose dtypes are NumPy's (Dask's
    namespace does not name ``float16``, yet its arrays hold NumPy's), else None."""
    if f32 is None or type(f32) is not type or getattr(f32, "__module__", "") != "numpy":
        return None
    return getattr(np, name, None)


def _register(obj: Any, name: str) -> None:
    try:
        _NAME_BY_TYPE.setdefault(type(obj), {})[obj] = name
    except TypeError:  # unhashable dtype objects: fall back to the slow path
        return
    # NumPy-like libraries spell an array's dtype differently from the namespace
    # attribute (np.dtype('float32') vs np.float32): register both spellings.
    if type(obj) is type and getattr(obj, "__module__", "") == "numpy":
        nd = np.dtype(obj)
        _NAME_BY_TYPE.setdefault(type(nd), {})[nd] = name


def dtype(name: str | DType | Any, xp: ModuleType | None = None, *, func: str = "dtype") -> Any:
    """Return the dtype object of namespace ``xp`` for a standard dtype name.

    Args:
        name: one of the 13 standard names (``"float32"``, ``"complex64"``, ...), an
            extension name (``"float16"``, ``"bfloat16"``), an xpgrad dtype, or a dtype
            object of any backend.
        xp: the namespace; defaults to the current policy's namespace. Pass the
            ``xpgrad`` module itself to get xpgrad's own dtype object.
        func: the function named in error messages (the one the user called).

    Raises:
        UnknownNameError: ``name`` is not a standard dtype name (lists them).
        DTypeUnavailableError: ``xp`` has no such dtype.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> import array_api_compat.numpy as cnp
        >>> xg.dtype("float32", cnp) is cnp.float32
        True
        >>> xg.dtype("complex64", xg)
        xpgrad.complex64
    """
    n = dtype_name(name, func=func)
    if xp is None:
        xp = default_namespace()
    if getattr(xp, "__name__", None) == "xpgrad":
        return DTYPES[n]
    tab = _table(xp)
    if n in _X64 and getattr(xp, "__name__", None) == "jax.numpy" and not _jax_x64():
        # JAX has float64 objects, but without jax_enable_x64 it makes float32 arrays of
        # them (with at most a warning): refuse, naming the cure
        msg = f"{func}: {n} on JAX needs its 64-bit mode{x64_hint(xp, n)}"
        raise DTypeUnavailableError(msg)
    try:
        return tab[n]
    except KeyError:
        msg = (
            f"{func}: the namespace {getattr(xp, '__name__', xp)!r} has no dtype {n!r}; "
            f"it has {sorted(tab)}"
        )
        raise DTypeUnavailableError(msg) from None


_X64 = ("float64", "complex128")


def _jax_x64() -> builtins.bool:
    import jax

    return builtins.bool(jax.config.read("jax_enable_x64"))


def x64_hint(xp: Any, name: str) -> str:
    """The cure for a 64-bit floating dtype on JAX without ``jax_enable_x64`` ("" elsewhere).

    Examples:
        >>> import numpy as np
        >>> x64_hint(np, "float64")
        ''
    """
    if name not in _X64 or not str(getattr(xp, "__name__", "")).startswith("jax") or _jax_x64():
        return ""
    return ('; JAX makes float32 (complex64) arrays unless 64-bit mode is on: call '
            'jax.config.update("jax_enable_x64", True) at startup, before creating arrays '
            '(or set JAX_ENABLE_X64=1), or use float32')


def dtype_name(dt: Any, *, func: str = "dtype_name") -> str:
    """Return the standard name of a dtype given as a name, xpgrad dtype or backend dtype.

    Raises:
        UnknownNameError: not one of the 13 standard dtypes nor an extension dtype
            (``float16``, ``bfloat16``).

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.dtype_name(np.float32), xg.dtype_name(np.dtype("int64")), xg.dtype_name(xg.bool)
        ('float32', 'int64', 'bool')
    """
    if type(dt) is DType:
        return dt.name
    if isinstance(dt, str):
        if dt in _KIND:
            return dt
        msg = f"{func}: unknown dtype name {dt!r}; valid names are {[*DTYPE_NAMES, *EXTENSION_DTYPE_NAMES]}"
        raise UnknownNameError(msg)
    name = fast_name(dt)
    if name is not None:
        return name
    return _slow_name(dt, func)


def _slow_name(dt: Any, func: str = "dtype_name") -> str:
    # Unseen backend dtype: derive the name from its text ("torch.float32",
    # "dtype('float32')", "array_api_strict.float32") and check it round-trips.
    cand = ""
    try:  # NumPy-compatible dtypes and scalar types (NumPy, JAX, CuPy, Dask)
        nd = np.dtype(dt)
        if nd.kind != "O":
            cand = nd.name
    except Exception:  # noqa: BLE001 - not NumPy-compatible: read the name from its text
        pass
    if not cand:
        text = str(getattr(dt, "name", None) or dt)
        cand = text.rsplit(".", 1)[-1].strip("'\")>").replace("dtype('", "")
    if cand == "bool_":
        cand = "bool"
    if cand in _KIND:
        _register(dt, cand)
        return cand
    msg = (f"{func}: {dt!r} is not one of the 13 standard dtypes {list(DTYPE_NAMES)} nor an "
           f"extension dtype {list(EXTENSION_DTYPE_NAMES)}")
    raise UnknownNameError(msg)


def complex_dtype(name: str | DType | Any) -> str:
    """Real -> complex dtype name map: ``float32`` -> ``complex64``, ``float64`` -> ``complex128``.

    Complex dtypes map to themselves.

    Raises:
        UnknownNameError: the dtype is not floating point.

    Examples:
        >>> import xpgrad as xg
        >>> xg.complex_dtype("float32"), xg.complex_dtype("complex128")
        ('complex64', 'complex128')
    """
    n = dtype_name(name)
    try:
        return _COMPLEX[n]
    except KeyError:
        msg = f"complex_dtype: {n!r} is not a floating-point dtype; expected one of {list(_COMPLEX)}"
        raise UnknownNameError(msg) from None


def real_dtype(name: str | DType | Any) -> str:
    """Complex -> real dtype name map (``complex64`` -> ``float32``); real floats map to themselves.

    Examples:
        >>> import xpgrad as xg
        >>> xg.real_dtype("complex64")
        'float32'
    """
    n = dtype_name(name)
    try:
        return _REAL[n]
    except KeyError:
        msg = f"real_dtype: {n!r} is not a floating-point dtype; expected one of {list(_REAL)}"
        raise UnknownNameError(msg) from None


_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64,
         "float32": 32, "float64": 64, "complex64": 32, "complex128": 64,  # (complex: of each part)
         "float16": 16, "bfloat16": 16}


def promote_names(a: str, b: str) -> str | None:
    """The standard's result dtype of two arrays of dtypes ``a`` and ``b`` (standard names).

    The type promotion table of the standard (2025.12), whatever the arrays' shapes
    (a 0-d array promotes as any other): within ``bool``, within the integers
    (``int8`` and ``uint8`` give ``int16``) and within the floating dtypes (real and
    complex mix: ``float64`` and ``complex64`` give ``complex128``). None where the
    standard leaves the result to the library: integer with floating, ``bool`` with
    a number, and ``int64`` with ``uint64``. The extension dtypes promote as torch,
    JAX and NumPy promote them: ``float16`` with ``bfloat16`` gives ``float32``, and
    with a wider floating dtype the wider one (``complex64`` for a complex one).

    Examples:
        >>> from xpgrad._dtypes import promote_names
        >>> promote_names("uint16", "uint8"), promote_names("int8", "uint8"), promote_names("float64", "complex64")
        ('uint16', 'int16', 'complex128')
        >>> promote_names("int64", "float32") is None
        True
        >>> promote_names("float16", "bfloat16"), promote_names("bfloat16", "float32")
        ('float32', 'float32')
    """
    if a == b:
        return a
    ka, kb = _KIND[a], _KIND[b]
    if ka == "bool" or kb == "bool":
        return None
    if ka.endswith("floating") != kb.endswith("floating"):
        return None
    bits = max(_BITS[a], _BITS[b])
    if bits == 16 and ka.endswith("floating"):  # float16 with bfloat16: neither holds the other
        return "float32"
    if ka.endswith("floating"):
        return f"complex{2 * bits}" if "complex floating" in (ka, kb) else f"float{bits}"
    if ka == kb:
        return ("int" if ka == "signed integer" else "uint") + str(bits)
    signed, unsigned = (a, b) if ka == "signed integer" else (b, a)
    if _BITS[signed] > _BITS[unsigned]:
        return signed
    return None if _BITS[unsigned] == 64 else f"int{2 * _BITS[unsigned]}"


def kind(dt: Any) -> str:
    """The standard's kind of a dtype: 'bool', 'signed integer', ..., 'complex floating'."""
    return _KIND[dtype_name(dt)]


def is_float(dt: Any) -> builtins.bool:  # `bool` is the dtype here
    """True for real or complex floating dtypes (the ones that can carry gradients)."""
    return _KIND[dtype_name(dt)].endswith("floating")


def to_backend(dt: Any, xp: ModuleType, *, func: str = "dtype") -> Any:
    """Translate an xpgrad dtype or a name to ``xp``'s dtype object; others pass through.

    ``func`` is the function named in errors (the one the user called)."""
    if dt is None:
        return None
    if type(dt) is DType or isinstance(dt, str):
        return dtype(dt, xp, func=func)
    return dt
