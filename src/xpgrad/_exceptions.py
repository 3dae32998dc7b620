"""The exception tree of xpgrad.

Every error xpgrad raises derives from :class:`XpgradError` and from the built-in
type a caller would naturally catch, so ``except ValueError`` keeps working::

    XpgradError(Exception)
    ├── XpgradTypeError(TypeError)
    │   └── NamespaceMismatchError        arrays from two libraries in one call
    ├── XpgradValueError(ValueError)
    │   ├── DeviceMismatchError           arrays on two devices in one call
    │   ├── UnknownNameError              unknown dtype / library / device name
    │   └── DTypeUnavailableError         the namespace (or device) lacks the dtype
    ├── XpgradRuntimeError(RuntimeError)
    │   ├── NonDifferentiableError        a gradient through a function that has none
    │   ├── InPlaceModificationError      a value saved for backward was changed
    │   ├── GraphFreedError               a second backward through freed buffers
    │   └── AnomalyError                  a NaN appeared under detect_anomaly()
    └── BackendNotInstalledError(ImportError)

Messages name the function and the offending value.
"""

from __future__ import annotations

__all__ = [
    "AnomalyError",
    "BackendNotInstalledError",
    "DTypeUnavailableError",
    "DeviceMismatchError",
    "GraphFreedError",
    "InPlaceModificationError",
    "NamespaceMismatchError",
    "NonDifferentiableError",
    "UnknownNameError",
    "XpgradError",
    "XpgradRuntimeError",
    "XpgradTypeError",
    "XpgradValueError",
]


class XpgradError(Exception):
    """Base class of every error raised by xpgrad."""


class XpgradTypeError(XpgradError, TypeError):
    """A value of the wrong kind was passed to an xpgrad function."""


class XpgradValueError(XpgradError, ValueError):
    """A value of the right kind but a wrong value was passed."""


class XpgradRuntimeError(XpgradError, RuntimeError):
    """An operation cannot be carried out in the current state."""


class NamespaceMismatchError(XpgradTypeError):
    """Arrays from two different array libraries were mixed in one call."""


class DeviceMismatchError(XpgradValueError):
    """Arrays on two different devices were mixed in one call."""


class UnknownNameError(XpgradValueError):
    """An unknown dtype name, library name or device string."""


class DTypeUnavailableError(XpgradValueError):
    """The namespace or device has no such dtype (e.g. float64 on ``no_float64``)."""


class NonDifferentiableError(XpgradRuntimeError):
    """A gradient was requested through a function or argument that has none."""


class InPlaceModificationError(XpgradRuntimeError):
    """A value saved for backward was modified in place before backward ran."""


class GraphFreedError(XpgradRuntimeError):
    """Backward ran a second time through a graph whose buffers were freed."""


class BackendNotInstalledError(XpgradError, ImportError):
    """The array library asked for is not installed; the message names the extra."""


class AnomalyError(XpgradRuntimeError):
    """Under ``detect_anomaly()``: an op produced a NaN; names the op and where it was created."""
