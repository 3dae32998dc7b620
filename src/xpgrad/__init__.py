"""xpgrad: automatic differentiation for any array API array.

The module is itself an array API namespace over [`Tensor`][xpgrad.autograd.Tensor]; the namespace
of each call comes from its input arrays, and the default-device policy decides
only where no input array exists.
"""

from __future__ import annotations

import sys as _sys
from ._namespace import *  # noqa: F403 - the array namespace: every name below nn
from ._namespace import __array_api_version__, __array_namespace_info__
from . import nn, optim, utils, viz
from . import _bound  # (it hands the bound namespaces down to _dispatch.array_namespace)
from .autograd._grad_mode import set_graph_namespace as _set_graph_namespace

# Modules below this package that call the whole namespace at run time (Tensor methods such
# as t.mean(), create_graph's tangent rules, vmap's fallbacks, the bound namespaces) get it
# handed down here, once it is complete: no import of the package inside their functions.
_set_graph_namespace(_sys.modules[__name__])

__version__ = "0.1.0"
