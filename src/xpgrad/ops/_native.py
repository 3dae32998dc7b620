"""The native-kernel table: per-library kernels of the operations the standard lacks (issue 30).

An operation composed of the standard's functions (a convolution, attention, a layer norm,
a cross entropy) may name, per array library, that library's own kernel for a piece of its
forward or backward: ``_NATIVE_FNS[library][name] = fn``, written beside the operation's
primitive (``nn.conv``, ``nn.functional``). The primitive asks `native_kernel` for it and
runs the portable composition when there is none, so the composition stays the fallback on
every other library and the reference the kernels are tested against
(tests/test_native_kernels.py, with `USE_NATIVE` turned off).

The table lives here, below ``nn``, so that any operation (in ``ops`` or ``nn``) can name
its kernels without importing another operation's module. It never imports a library
itself: a library's kernels are looked up only for arrays of that library, which is then
imported already.
"""

from __future__ import annotations

from typing import Any

import array_api_compat

from .. import _tracing

__all__ = ["USE_NATIVE", "native_kernel"]

#: library name -> kernel name -> the kernel (a function of the library's raw arrays)
_NATIVE_FNS: dict[str, dict[str, Any]] = {"torch": {}, "jax": {}, "dask": {}, "cupy": {}}
_NATIVE: dict[tuple[int, str], Any] = {}
#: whether the native kernels are used (tests turn them off to compare with the composition)
USE_NATIVE = [True]

#: (library name, whether a namespace is that library's), in the order asked
_LIBRARIES = (
    ("torch", array_api_compat.is_torch_namespace),
    ("jax", array_api_compat.is_jax_namespace),
    ("dask", array_api_compat.is_dask_namespace),
    ("cupy", array_api_compat.is_cupy_namespace),
)


def native_kernel(xp: Any, name: str) -> Any:
    """The library's own kernel ``name`` for arrays of namespace ``xp`` (recorded as one call under
    xg.jit), or None: then the portable composition runs. Never imports a library itself."""
    if not USE_NATIVE[0]:
        return None
    key = (id(xp), name)
    try:
        return _NATIVE[key]
    except KeyError:
        pass
    base = _tracing.base_namespace(xp)
    f: Any = None
    if base is not None:
        f = native_kernel(base, name)
        if f is not None:
            f = _tracing.recorded(f, f"nn.{name}", xp)
    else:
        for lib, is_lib in _LIBRARIES:
            if is_lib(xp):
                f = _NATIVE_FNS[lib].get(name)
                break
    _NATIVE[key] = f
    return f
