"""The xpgrad array namespace: every name of ``xpgrad`` that sits below ``nn``.

``xpgrad`` re-exports all of it (``from ._namespace import *``) and adds ``nn``, ``optim``
and ``viz``, which compute with it: they import this module as ``xg``, not the package
that imports them, so the import order has no circle (tests/test_imports.py).
"""

from __future__ import annotations

from math import e, inf, nan, pi  # the standard's constants

from ._dtypes import (
    DType,
    complex64,
    complex128,
    complex_dtype,
    dtype,
    bfloat16,
    dtype_name,
    float16,
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
    ConcretizationError,
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
from . import checkpoint_policies, tree_util
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

from . import autograd, fft, linalg, random, special, testing
from ._io import load, save
from ._vmap import vmap
from ._jit import CacheInfo, Jitted, Program, jit
from ._jacobian import hessian, jacfwd, jacobian, jacrev

newaxis = None  # the standard's constant: x[newaxis] adds an axis
