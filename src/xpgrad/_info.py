"""``__array_namespace_info__``: what the xpgrad namespace offers under the current policy.

xpgrad creates arrays in the policy's library, so the info object describes that
library (asking the library's own info object), with two things the policy
decides: the default device (the policy's, when it sets one) and the default
floating dtypes (the policy's ``dtype``, when it sets one). Dtypes come back as
xpgrad dtypes (``{"float32": xpgrad.float32, ...}``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from array_api_compat import is_dask_namespace

from ._backends import LIBRARIES, namespace_devices, resolve_device
from ._dtypes import DTYPES, complex_dtype, dtype_name
from ._policy import DevicePolicy, current_policy

__all__ = ["Info", "__array_namespace_info__"]


class Info:
    """The namespace inspection object of xpgrad (the standard's ``Info``).

    It describes the policy in force when it was made: its library, device and
    default dtype.

    Examples:
        >>> import xpgrad as xg
        >>> info = xg.__array_namespace_info__()
        >>> info.default_dtypes()["real floating"]
        xpgrad.float64
        >>> with xg.default_device(dtype="float32"):
        ...     xg.__array_namespace_info__().default_dtypes()["complex floating"]
        xpgrad.complex64
    """

    __slots__ = ("_backend", "_batching", "_policy")

    def __init__(self, policy: DevicePolicy, batching: Callable[[], bool] | None = None) -> None:
        self._policy = policy
        self._backend = policy.xp.__array_namespace_info__()
        #: whether a vmap level is open (handed down by the bound namespace, a higher layer)
        self._batching = batching

    def __repr__(self) -> str:
        return f"<xpgrad info over {getattr(self._policy.xp, '__name__', self._policy.xp)}>"

    def _device(self, device: Any) -> Any:
        if device is None:
            return self._policy.device
        return resolve_device(self._policy.xp, device)

    def _for(self, device: Any) -> tuple[Any, Any]:
        """The backend info object and device to ask about ``device``.

        A device object of another library than the policy's (the ``.device`` of a
        Tensor over it, which code that received the Tensor passes back) is answered
        by that library, among the ones already imported.
        """
        if device is None or isinstance(device, str):
            return self._backend, self._device(device)
        if device in namespace_devices(self._policy.xp):
            return self._backend, device
        for module, _, _ in LIBRARIES.values():
            ns = sys.modules.get(module)
            if ns is not None and ns is not self._policy.xp and device in namespace_devices(ns):
                return ns.__array_namespace_info__(), device
        return self._backend, self._device(device)

    def capabilities(self) -> dict[str, Any]:
        """The backend's capabilities (``"boolean indexing"``, ``"data-dependent shapes"``, ...).

        Examples:
            >>> import xpgrad as xg
            >>> sorted(xg.__array_namespace_info__().capabilities())[:2]
            ['boolean indexing', 'data-dependent shapes']

        Over Dask both ``"boolean indexing"`` and ``"data-dependent shapes"`` are
        ``False``, although Dask itself reports ``True``: Dask's boolean-mask results
        have unknown (``nan``) sizes, which xpgrad can neither differentiate through
        nor assign back without computing, and it never computes behind the user's
        back. Array-API code that reads this (array-api-extra's ``isclose``,
        ``apply_where``, ``at()``; SciPy) then takes its mask-free ``where`` paths,
        which stay lazy and differentiable.

        In the namespace of a Tensor (``array_namespace(t)``) inside [`xpgrad.vmap`][xpgrad.vmap]
        (and ``jacfwd``/``hessian``, which run under it) both are ``False`` too, as over JAX arrays under ``jax.vmap``: a batched boolean mask
        selects a different number of elements per example, so code that asks takes its
        ``where`` paths, which batch.
        """
        caps = dict(self._backend.capabilities())
        if is_dask_namespace(self._policy.xp) or (self._batching is not None and self._batching()):
            caps["boolean indexing"] = False
            caps["data-dependent shapes"] = False
        return caps

    def default_device(self) -> Any:
        """The device new arrays go to: the policy's device, else the backend's default.

        Examples:
            >>> import xpgrad as xg
            >>> with xg.default_device("array_api_strict", device="device1"):
            ...     xg.__array_namespace_info__().default_device()
            array_api_strict.Device('device1')
        """
        if self._policy.device is not None:
            return self._policy.device
        return self._backend.default_device()

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        """The default dtypes for ``device`` (default: the policy's): keys ``"real floating"``,
        ``"complex floating"``, ``"integral"``, ``"indexing"``; the policy's dtype sets the
        floating ones.

        Examples:
            >>> import xpgrad as xg
            >>> xg.__array_namespace_info__().default_dtypes()["integral"]
            xpgrad.int64
        """
        info, dev = self._for(device)
        out = {k: DTYPES[dtype_name(v)] for k, v in info.default_dtypes(device=dev).items()}
        if self._policy.dtype is not None:
            out["real floating"] = DTYPES[self._policy.dtype]
            out["complex floating"] = DTYPES[complex_dtype(self._policy.dtype)]
        return out

    def devices(self) -> tuple[Any, ...]:
        """The backend's devices, as a tuple (JAX's ``None``, its "uncommitted" placement, left out).

        A tuple, as the standard's 2025.12 signature and every backend's own info object
        give it.

        Examples:
            >>> import xpgrad as xg
            >>> with xg.default_device("array_api_strict"):
            ...     devices = xg.__array_namespace_info__().devices()
            >>> type(devices).__name__, len(devices) > 1
            ('tuple', True)
        """
        return tuple(namespace_devices(self._policy.xp))

    def dtypes(self, *, device: Any = None, kind: str | tuple[str, ...] | None = None) -> dict[str, Any]:
        """The dtypes ``device`` (default: the policy's) supports, optionally of a ``kind``.

        Examples:
            >>> import xpgrad as xg
            >>> xg.__array_namespace_info__().dtypes(kind="real floating")
            {'float32': xpgrad.float32, 'float64': xpgrad.float64}
        """
        info, dev = self._for(device)
        found = info.dtypes(device=dev, kind=kind)
        return {name: DTYPES[name] for name in found}


def __array_namespace_info__() -> Info:  # noqa: N807 - the standard's name
    """The inspection object of the xpgrad namespace under the current policy.

    Examples:
        >>> import xpgrad as xg
        >>> xg.__array_namespace_info__().default_device()
        'cpu'
    """
    return Info(current_policy())
