"""``Tensor.__dlpack__``'s keywords for the backend array underneath.

The standard's ``__dlpack__`` takes the keyword-only ``stream``, ``max_version``,
``dl_device`` and ``copy`` (the last three since 2023.12). A backend whose arrays
predate them takes ``stream`` alone; `dlpack_kwargs` then forwards only what it
accepts, as array-api-strict does over older NumPy, and keeps the standard's meaning
of what it leaves out.
"""

from __future__ import annotations

import inspect
from typing import Any

import array_api_compat

from ._exceptions import XpgradTypeError, XpgradValueError

__all__ = ["dlpack_kwargs"]

_NEW = ("max_version", "dl_device", "copy")

#: array type -> the keywords of the standard its ``__dlpack__`` accepts (all, when its
#: signature cannot be read or takes ``**kwargs``)
_ACCEPTS: dict[type, frozenset[str]] = {}


def _accepts(data: Any) -> frozenset[str]:
    t = type(data)
    got = _ACCEPTS.get(t)
    if got is None:
        if not hasattr(t, "__dlpack__"):
            msg = (f"__dlpack__: the backend's {t.__module__}.{t.__name__} arrays do not support DLPack "
                   "(Dask's: compute the array, or move the Tensor to another library with .to(xp=...))")
            raise XpgradTypeError(msg)
        try:
            params = inspect.signature(t.__dlpack__).parameters.values()
        except (TypeError, ValueError):  # a builtin without a signature: assume the standard's
            got = frozenset(_NEW)
        else:
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
                got = frozenset(_NEW)
            else:
                got = frozenset(p.name for p in params if p.name in _NEW)
        _ACCEPTS[t] = got
    return got


def dlpack_kwargs(data: Any, stream: Any, max_version: Any, dl_device: Any, copy: Any) -> tuple[Any, dict[str, Any]]:
    """The array to export and the keywords to call its ``__dlpack__`` with.

    ``stream`` always goes on; ``max_version``, ``dl_device`` and ``copy`` go on when
    given (not None). Where the backend's ``__dlpack__`` lacks one of them:
    ``max_version`` is left out (the standard lets the producer return a capsule of
    another version, here the unversioned one, which consumers check for);
    ``dl_device`` is left out when it is the array's own device and is a
    ``BufferError`` otherwise (the standard's error for a device the producer cannot
    export to); ``copy=False`` is left out (the protocol shares memory) and
    ``copy=True`` exports a copy made by the backend.

    Examples:
        >>> import numpy as np
        >>> from xpgrad._dlpack import dlpack_kwargs
        >>> a = np.ones(2)
        >>> dlpack_kwargs(a, None, (1, 0), None, None)[1]
        {'stream': None, 'max_version': (1, 0)}
    """
    kw: dict[str, Any] = {"stream": stream}
    given = {"max_version": max_version, "dl_device": dl_device, "copy": copy}
    accepts = _accepts(data)
    for name, value in given.items():
        if value is None:
            continue
        if name in accepts:
            kw[name] = value
        elif name == "dl_device":
            if tuple(value) != tuple(data.__dlpack_device__()):
                msg = (f"__dlpack__: {type(data).__name__}.__dlpack__ cannot export to dl_device={value!r} "
                       f"(the array is on {data.__dlpack_device__()!r}, and it has no dl_device keyword)")
                raise BufferError(msg)
        elif name == "copy":
            if copy not in (True, False):
                msg = f"__dlpack__: copy must be True, False or None, got {copy!r}"
                raise XpgradValueError(msg)
            if copy:
                data = array_api_compat.array_namespace(data).asarray(data, copy=True)
    return data, kw
