"""Datasets and minibatches, PyTorch style (``torch.utils.data``), for arrays of any library.

A `DataLoader` yields batches in the dataset's own library and on its own
device: NumPy arrays stay NumPy, torch tensors stay torch, Tensors stay
Tensors, and Dask arrays stay lazy (nothing is computed). A `TensorDataset` is
indexed a whole batch at a time (``take`` of the array's namespace with an integer array
of that library, or a slice without shuffling), never sample by sample.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import array_api_compat
import numpy as np

from .. import _namespace as xg
from .._exceptions import XpgradIndexError, XpgradTypeError, XpgradValueError
from ..autograd._tensor import Tensor

__all__ = ["DataLoader", "Dataset", "TensorDataset", "default_collate"]


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(i)`` (one sample) and ``__len__``.

    The base class is abstract, as ``torch.utils.data.Dataset`` is: calling either method on a
    subclass that did not define it raises ``NotImplementedError`` naming the subclass.

    Examples:
        >>> import numpy as np
        >>> import xpgrad as xg
        >>> class Squares(xg.utils.data.Dataset):
        ...     def __len__(self) -> int:
        ...         return 4
        ...     def __getitem__(self, i: int) -> tuple[float, float]:
        ...         return float(i), float(i * i)
        >>> [b for b in xg.utils.data.DataLoader(Squares(), batch_size=3)]
        [(array([0., 1., 2.]), array([0., 1., 4.])), (array([3.]), array([9.]))]
    """

    def __getitem__(self, index: int) -> Any:
        msg = f"{type(self).__name__}: a Dataset subclass must define __getitem__"
        raise NotImplementedError(msg)

    def __len__(self) -> int:
        msg = f"{type(self).__name__}: a Dataset subclass must define __len__"
        raise NotImplementedError(msg)


def _rows(a: Any) -> int:
    shape = getattr(a, "shape", None)
    if shape is None or len(shape) == 0:
        msg = f"TensorDataset: every array needs a first (sample) axis, got {type(a).__name__} of shape {shape}"
        raise XpgradValueError(msg)
    n = shape[0]
    if n is None or (isinstance(n, float) and math.isnan(n)):
        msg = "TensorDataset: the number of samples is unknown (a Dask array of unknown chunks: compute_chunk_sizes())"
        raise XpgradValueError(msg)
    return int(n)


def _take(a: Any, idx: np.ndarray | slice) -> Any:
    """Rows ``idx`` of ``a`` (a Tensor or an array of any library), in ``a``'s library and on its device."""
    if isinstance(idx, slice):
        return a[idx, ...]
    data = a.data if isinstance(a, Tensor) else a
    xp = array_api_compat.array_namespace(data)
    rows = xp.asarray(idx, device=array_api_compat.device(data))
    if isinstance(a, Tensor):
        return xg.take(a, xg.asarray(rows), axis=0)
    return xp.take(a, rows, axis=0)


class TensorDataset(Dataset):
    """Samples along the first axis of several arrays of the same length (inputs and targets, say).

    The arrays may be Tensors or arrays of any library (each keeps its own);
    ``dataset[i]`` is the tuple of their ``i``-th rows.

    Examples:
        >>> import numpy as np
        >>> import xpgrad as xg
        >>> ds = xg.utils.data.TensorDataset(np.arange(6.0).reshape(3, 2), np.array([0, 1, 0]))
        >>> len(ds)
        3
        >>> ds[1]
        (array([2., 3.]), array(1))
    """

    def __init__(self, *tensors: Any) -> None:
        if not tensors:
            msg = "TensorDataset: give at least one array"
            raise XpgradValueError(msg)
        sizes = [_rows(t) for t in tensors]
        if len(set(sizes)) != 1:
            msg = f"TensorDataset: the arrays have different numbers of samples (first axes): {sizes}"
            raise XpgradValueError(msg)
        self.tensors = tensors
        self._n = sizes[0]

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        if not -self._n <= index < self._n:
            msg = f"TensorDataset: index {index} is out of range for {self._n} samples"
            raise XpgradIndexError(msg)
        return tuple(t[index, ...] for t in self.tensors)

    def __len__(self) -> int:
        return self._n

    def _batch(self, idx: np.ndarray | slice) -> tuple[Any, ...]:
        """The rows ``idx`` of every array at once (one ``take`` or slice each)."""
        return tuple(_take(t, idx) for t in self.tensors)


def default_collate(samples: Sequence[Any]) -> Any:
    """Stack a list of samples into a batch: arrays with their own namespace's ``stack``, tuples field by field.

    Python numbers become a NumPy array; dicts are collated key by key.

    Examples:
        >>> import numpy as np
        >>> import xpgrad as xg
        >>> xg.utils.data.default_collate([(np.zeros(2), 1), (np.ones(2), 2)])
        (array([[0., 0.],
               [1., 1.]]), array([1, 2]))
    """
    if not samples:
        msg = "default_collate: no samples to collate"
        raise XpgradValueError(msg)
    first = samples[0]
    if isinstance(first, Tensor):
        return xg.stack(list(samples), axis=0)
    if isinstance(first, tuple | list):
        return type(first)(default_collate([s[k] for s in samples]) for k in range(len(first))) \
            if isinstance(first, tuple) else [default_collate([s[k] for s in samples]) for k in range(len(first))]
    if isinstance(first, dict):
        return {k: default_collate([s[k] for s in samples]) for k in first}
    if isinstance(first, bool | int | float | complex | np.generic):
        return np.asarray(samples)
    if array_api_compat.is_array_api_obj(first):
        xp = array_api_compat.array_namespace(*samples)
        return xp.stack(list(samples), axis=0)
    msg = f"default_collate: cannot collate samples of type {type(first).__name__}"
    raise XpgradTypeError(msg)


class DataLoader:
    """Minibatches of a dataset: ``batch_size`` samples at a time, optionally shuffled, each epoch.

    Args:
        dataset: a `TensorDataset` (batched indexing), or any `Dataset`
            (``__getitem__`` and ``__len__``; its samples are collated).
        batch_size: samples per batch (the last one may be shorter unless ``drop_last``).
        shuffle: a new random order every epoch (every ``iter``): reproducible from
            ``generator`` (an int seed or a ``numpy.random.Generator``), different from
            one epoch to the next. Without ``generator``, the seed is drawn from
            `xpgrad.random` when the loader is made (so the policy's seed fixes it).
        drop_last: drop the last batch when it is short.
        collate_fn: builds a batch from the list of samples. Without it, a
            TensorDataset's batches are taken whole (no per-sample stacking) and other
            datasets' samples go through `default_collate`.
        generator: the seed or NumPy generator of the shuffling.

    Examples:
        >>> import numpy as np
        >>> import xpgrad as xg
        >>> ds = xg.utils.data.TensorDataset(np.arange(5.0), np.arange(5))
        >>> for xb, yb in xg.utils.data.DataLoader(ds, batch_size=2):
        ...     print(xb, yb)
        [0. 1.] [0 1]
        [2. 3.] [2 3]
        [4.] [4]
        >>> loader = xg.utils.data.DataLoader(ds, batch_size=2, shuffle=True, drop_last=True, generator=0)
        >>> len(loader), [yb.tolist() for _, yb in loader]
        (2, [[2, 4], [3, 0]])
    """

    def __init__(self, dataset: Any, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False,
                 collate_fn: Callable[[list[Any]], Any] | None = None,
                 generator: int | np.random.Generator | None = None) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            msg = f"DataLoader: batch_size must be a positive int, got {batch_size!r}"
            raise XpgradValueError(msg)
        if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            msg = f"DataLoader: the dataset needs __getitem__ and __len__, got {type(dataset).__name__}"
            raise XpgradTypeError(msg)
        if collate_fn is not None and not callable(collate_fn):
            msg = f"DataLoader: collate_fn must be callable, got {collate_fn!r}"
            raise XpgradTypeError(msg)
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.collate_fn = collate_fn
        if isinstance(generator, np.random.Generator):
            self.generator = generator
        elif generator is None:
            self.generator = np.random.default_rng(int(xg.random.integers(0, 2**62, dtype="int64"))) if shuffle \
                else np.random.default_rng(0)
        elif isinstance(generator, int) and not isinstance(generator, bool):
            self.generator = np.random.default_rng(generator)
        else:
            msg = f"DataLoader: generator must be an int seed or a numpy.random.Generator, got {generator!r}"
            raise XpgradTypeError(msg)

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        n = len(self.dataset)
        order = self.generator.permutation(n) if self.shuffle else None
        batched = self.collate_fn is None and isinstance(self.dataset, TensorDataset)
        for k in range(len(self)):
            lo, hi = k * self.batch_size, min((k + 1) * self.batch_size, n)
            idx: np.ndarray | slice = slice(lo, hi) if order is None else order[lo:hi]
            if batched:
                yield self.dataset._batch(idx)
                continue
            rows = range(lo, hi) if order is None else order[lo:hi].tolist()
            samples = [self.dataset[i] for i in rows]
            yield (self.collate_fn or default_collate)(samples)
