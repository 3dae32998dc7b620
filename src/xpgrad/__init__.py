"""xpgrad: automatic differentiation for any array API array.

The module is itself an array API namespace over :class:`Tensor`; the namespace
of each call comes from its input arrays, and the default-device policy decides
only where no input array exists.
"""

from __future__ import annotations

import sys as _sys
from math import e, inf, nan, pi  # the standard's constants

from ._dtypes import (
    DType,
    complex64,
    complex128,
    complex_dtype,
    dtype,
    dtype_name,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    real_dtype,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._dtypes import bool  # noqa: A004 - the standard's dtype name
from ._dispatch import array_namespace
from ._exceptions import (
    AnomalyError,
    BackendNotInstalledError,
    CutGraphError,
    DeviceMismatchError,
    DTypeUnavailableError,
    GraphFreedError,
    InPlaceModificationError,
    NamespaceMismatchError,
    NonDifferentiableError,
    UnknownNameError,
    XpgradError,
    XpgradIndexError,
    XpgradRuntimeError,
    XpgradTypeError,
    XpgradValueError,
)
from ._info import __array_namespace_info__
from ._policy import DevicePolicy, current_policy, default_device, reset_policy, set_default_policy
from ._spec import API_VERSION as __array_api_version__
from .autograd import Tensor, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .autograd._anomaly import detect_anomaly
from ._custom import custom_jvp, custom_vjp
from ._checkpoint import checkpoint, remat
from .functional import grad, hvp, jvp, linearize, stop_gradient, value_and_grad, vjp
from .ops.creation import *  # noqa: F403
from .ops.data_type import *  # noqa: F403
from .ops.elementwise import *  # noqa: F403
from .ops.indexing import *  # noqa: F403
from .ops.linear_algebra import *  # noqa: F403
from .ops.manipulation import *  # noqa: F403
from .ops.searching import *  # noqa: F403
from .ops.set_functions import *  # noqa: F403
from .ops.sorting import *  # noqa: F403
from .ops.statistical import *  # noqa: F403
from .ops.utility import *  # noqa: F403

from . import autograd, random, testing
from . import nn, optim
from . import linalg
from . import special
from . import fft
from . import viz
from ._io import load, save
from ._vmap import vmap
from ._jacobian import hessian, jacfwd, jacobian, jacrev

from . import _bound  # (it hands the bound namespaces down to _dispatch.array_namespace)

newaxis = None  # the standard's constant: x[newaxis] adds an axis

# Modules below this package that call the whole namespace at run time (Tensor methods such
# as t.mean(), create_graph's tangent rules, vmap's fallbacks, the bound namespaces) get it
# handed down here, once it is complete: no import of the package inside their functions.
autograd._core.set_graph_namespace(_sys.modules[__name__])

__version__ = "0.1.0"
