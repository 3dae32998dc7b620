"""The exception tree of xpgrad.

Every error xpgrad raises derives from [`XpgradError`][xpgrad.XpgradError] and from the built-in
type a caller would naturally catch, so ``except ValueError`` keeps working::

    XpgradError(Exception)
    ├── XpgradTypeError(TypeError)
    │   └── NamespaceMismatchError        arrays from two libraries in one call
    ├── XpgradValueError(ValueError)
    │   ├── XpgradIndexError(IndexError)  an index out of range (a class label, an embedding index)
    │   ├── DeviceMismatchError           arrays on two devices in one call
    │   ├── UnknownNameError              unknown dtype / library / device name
    │   └── DTypeUnavailableError         the namespace (or device) lacks the dtype
    ├── XpgradRuntimeError(RuntimeError)
    │   ├── NonDifferentiableError        a gradient through a function that has none
    │   │   └── CutGraphError             a gradient through a conversion to a Python number or NumPy
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
    "ConcretizationError",
    "CutGraphError",
    "DTypeUnavailableError",
    "DeviceMismatchError",
    "GraphFreedError",
    "InPlaceModificationError",
    "NamespaceMismatchError",
    "NonDifferentiableError",
    "UnknownNameError",
    "XpgradError",
    "XpgradIndexError",
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


class XpgradIndexError(XpgradValueError, IndexError):
    """An index out of range: a class label outside ``[0, C)``, an embedding index past the table.

    An ``IndexError`` as in PyTorch, and a ``ValueError`` like xpgrad's other bad values.
    """


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


class CutGraphError(NonDifferentiableError):
    """A gradient was requested through a cut graph: the differentiated function's result
    is not an array, or was computed from a traced value converted to a Python number or
    to NumPy (``float``, ``int``, ``complex``, ``item``, ``tolist``, ``math.*``, ``np.asarray``),
    so the gradient would silently be zero. Names the conversion, the value and the line.

    Examples:
        >>> import math, numpy as np, xpgrad as xg
        >>> try:
        ...     xg.grad(lambda a: math.exp(a))(np.asarray(1.0))
        ... except xg.CutGraphError as e:
        ...     print(str(e).splitlines()[0])
        grad: <lambda> returned a Python float, not an array, so its derivative would be silently zero.
    """


class InPlaceModificationError(XpgradRuntimeError):
    """A value saved for backward was modified in place before backward ran."""


class GraphFreedError(XpgradRuntimeError):
    """Backward ran a second time through a graph whose buffers were freed."""


class BackendNotInstalledError(XpgradError, ImportError):
    """The array library asked for is not installed; the message names the extra."""


class AnomalyError(XpgradRuntimeError):
    """Under ``detect_anomaly()``: an op produced a NaN; names the op and where it was created."""


class ConcretizationError(XpgradTypeError):
    """Under [`xpgrad.jit`][xpgrad.jit]: Python read the value of a traced array, or asked for a shape that depends on it.

    The message names the operation that made the array and the line that read it, and
    says what to do instead (``static_argnums``, ``xpgrad.where``), as JAX's
    ``ConcretizationTypeError`` does.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> f = xg.jit(lambda x: x if xg.sum(x) > 0 else -x)
        >>> try:
        ...     f(np.ones(3))
        ... except xg.ConcretizationError as e:
        ...     print(str(e).split(":")[0])
        jit(<lambda>)
    """
