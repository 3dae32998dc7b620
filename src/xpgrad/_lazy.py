"""Lazy arrays (Dask) in loops: persist what a loop carries from one step to the next.

A Dask array is a task graph, and an optimizer step on Dask computes nothing: the
new parameters are a graph built on the graph of the old ones. After ``k`` steps
each parameter holds ``k`` forward and backward passes, so step ``k`` costs ``O(k)``
to build and to compute, and a loop of ``n`` steps costs ``O(n^2)``. Persisting
(``dask.persist``) the arrays a loop carries over (parameters, their gradients, the
optimizer's state, running statistics) computes that step once and leaves arrays
whose graphs are only their chunks, so every step costs the same. dask-ml's solvers
do the same: ``persist`` the iterate after every iteration.

Only Dask can persist, so "lazy" here means a Dask array
(``array_api_compat.is_dask_array``). [`xpgrad.optim.Optimizer.persist`][xpgrad.optim.Optimizer.persist]
calls `persist_arrays`, and ``xpgrad.nn.functional.batch_norm`` calls
`note_update` for the running statistics it updates in place, which the
optimizer's next persist then includes (in the same thread).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import array_api_compat

from .autograd._tensor import Tensor

__all__ = ["is_lazy", "loaded", "note_update", "persist_arrays", "take_noted"]

_LOCAL = threading.local()


def loaded() -> bool:
    """Whether a lazy library (Dask) has been imported at all: when not, no array can be lazy.

    Examples:
        >>> from xpgrad._lazy import loaded
        >>> isinstance(loaded(), bool)
        True
    """
    return "dask.array" in sys.modules


def is_lazy(a: Any) -> bool:
    """Whether ``a`` is an array whose value is a task graph to be computed later (a Dask array).

    Examples:
        >>> import numpy as np
        >>> from xpgrad._lazy import is_lazy
        >>> is_lazy(np.zeros(3))
        False
    """
    # (array-api-compat answers False without importing dask when nobody has)
    return bool(array_api_compat.is_dask_array(a))


def note_update(t: Tensor) -> None:
    """Remember ``t`` if its data are lazy: it was updated in place outside an optimizer.

    Batch normalization updates its running statistics in the forward pass; on Dask
    each update is one more layer of graph. The next
    [`persist`][xpgrad.optim.Optimizer.persist] in this thread persists ``t`` with the
    parameters, so the statistics stop growing too. Only a weak reference is kept.

    Examples:
        >>> import xpgrad as xg
        >>> from xpgrad._lazy import note_update, take_noted
        >>> note_update(xg.zeros(2))  # a NumPy Tensor: nothing to remember
        >>> take_noted()
        []
    """
    if not is_lazy(t.data):
        return
    noted = getattr(_LOCAL, "noted", None)
    if noted is None:
        noted = _LOCAL.noted = weakref.WeakValueDictionary()
    noted[id(t)] = t


def take_noted() -> list[Tensor]:
    """The Tensors `note_update` remembered in this thread (still alive), forgetting them.

    Examples:
        >>> from xpgrad._lazy import take_noted
        >>> take_noted()
        []
    """
    noted = getattr(_LOCAL, "noted", None)
    if not noted:
        return []
    out = list(noted.values())
    noted.clear()
    return out


def persist_arrays(arrays: Sequence[Any]) -> list[Any]:
    """``dask.persist`` the lazy ``arrays`` in one call (shared work is done once); others pass through.

    On the local schedulers this computes the arrays and returns Dask arrays whose
    graphs hold the results; under ``dask.distributed`` it submits them to the
    cluster and returns at once (the results are futures held by the workers).

    Examples:
        >>> import numpy as np
        >>> from xpgrad._lazy import persist_arrays
        >>> persist_arrays([np.ones(2)])
        [array([1., 1.])]
    """
    idx = [i for i, a in enumerate(arrays) if is_lazy(a)]
    out = list(arrays)
    if not idx:
        return out
    import dask  # present: one of the arrays is a Dask array

    done = dask.persist(*(arrays[i] for i in idx))
    for i, a in zip(idx, done):
        out[i] = a
    return out
