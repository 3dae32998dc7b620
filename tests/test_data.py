"""``xg.utils.data``: TensorDataset, Dataset and DataLoader on every backend (issue #31, part 3).

Batches come back in the input's own library and on its own device (a Tensor stays a
Tensor), are taken a whole batch at a time, follow a seeded order that changes from one
epoch to the next, and stay lazy on Dask.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from array_api_compat import device

import xpgrad as xg
from xpgrad.utils.data import DataLoader, Dataset, TensorDataset, default_collate

from ._util import to_numpy

N, D = 11, 3


def _arrays() -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(N * D, dtype=np.float64).reshape(N, D)
    y = np.arange(N, dtype=np.int64) * 10
    return x, y


def _raw(a: Any) -> Any:
    return a.data if isinstance(a, xg.Tensor) else a


@pytest.mark.parametrize("as_tensor", [False, True], ids=["arrays", "tensors"])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sequential_batches_keep_library_and_device(backend: Any, as_tensor: bool, drop_last: bool) -> None:
    x, y = _arrays()
    xb_in, yb_in = backend.asarray(x), backend.asarray(y)
    if as_tensor:
        xb_in, yb_in = xg.asarray(xb_in), xg.asarray(yb_in)
    loader = DataLoader(TensorDataset(xb_in, yb_in), batch_size=4, drop_last=drop_last)
    assert len(loader) == (2 if drop_last else 3)
    for _ in range(2):  # the loader can be iterated again (an epoch each)
        batches = list(loader)
        assert len(batches) == len(loader)
        for k, (xb, yb) in enumerate(batches):
            assert type(xb) is type(xb_in) and type(yb) is type(yb_in)
            assert type(_raw(xb)) is type(_raw(xb_in))
            assert device(_raw(xb)) == device(_raw(xb_in))
            np.testing.assert_array_equal(to_numpy(xb), x[4 * k: 4 * k + 4])
            np.testing.assert_array_equal(to_numpy(yb), y[4 * k: 4 * k + 4])
        assert [int(b[1].shape[0]) for b in batches] == ([4, 4] if drop_last else [4, 4, 3])


@pytest.mark.parametrize("as_tensor", [False, True], ids=["arrays", "tensors"])
def test_shuffled_batches_are_seeded_and_change_per_epoch(backend: Any, as_tensor: bool) -> None:
    x, y = _arrays()
    arrays = [backend.asarray(x), backend.asarray(y)]
    if as_tensor:
        arrays = [xg.asarray(a) for a in arrays]
    ds = TensorDataset(*arrays)

    def epochs(loader: DataLoader, n: int = 3) -> list[list[int]]:
        out = []
        for _ in range(n):
            order: list[int] = []
            for xb, yb in loader:
                assert type(xb) is type(arrays[0])
                assert device(_raw(xb)) == device(_raw(arrays[0]))
                ys = (to_numpy(yb) // 10).tolist()
                np.testing.assert_array_equal(to_numpy(xb), x[ys])  # the rows stay paired
                order += ys
            out.append(order)
        return out

    a = epochs(DataLoader(ds, batch_size=4, shuffle=True, generator=5))
    b = epochs(DataLoader(ds, batch_size=4, shuffle=True, generator=np.random.default_rng(5)))
    assert a == b  # the seed fixes every epoch's order
    for order in a:
        assert sorted(order) == list(range(N))  # each epoch is a permutation of the samples
    assert a[0] != a[1] and a[1] != a[2]  # a new order each epoch
    assert a != epochs(DataLoader(ds, batch_size=4, shuffle=True, generator=6))
    # without a generator the seed comes from xpgrad.random: the policy's seed fixes it
    with xg.default_device(seed=3):
        c = epochs(DataLoader(ds, batch_size=4, shuffle=True), 2)
    with xg.default_device(seed=3):
        d = epochs(DataLoader(ds, batch_size=4, shuffle=True), 2)
    assert c == d
    dropped = epochs(DataLoader(ds, batch_size=4, shuffle=True, drop_last=True, generator=1), 2)
    assert [len(o) for o in dropped] == [8, 8] and dropped[0] != dropped[1]


def test_tensor_dataset_batches_are_taken_whole(backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = _arrays()

    def no_samples(self: Any, index: int) -> Any:
        raise AssertionError("TensorDataset.__getitem__ called: per-sample indexing")

    monkeypatch.setattr(TensorDataset, "__getitem__", no_samples)
    loader = DataLoader(TensorDataset(backend.asarray(x), backend.asarray(y)), batch_size=5, shuffle=True, generator=0)
    assert sum(int(yb.shape[0]) for _, yb in loader) == N


def test_batches_of_tensors_are_differentiable(backend: Any) -> None:
    x, _ = _arrays()
    w = xg.asarray(backend.asarray(x), requires_grad=True)
    total = None
    for (xb,) in DataLoader(TensorDataset(w), batch_size=4, shuffle=True, generator=2):
        s = xg.sum(xb * xb)
        total = s if total is None else total + s
    assert total is not None
    total.backward()
    np.testing.assert_allclose(to_numpy(w.grad), 2 * x)  # every row once, in whatever order


def test_dask_batches_stay_lazy(computes: Any) -> None:
    da = pytest.importorskip("dask.array")
    x, y = _arrays()
    xd, yd = da.from_array(x, chunks=(3, D)), da.from_array(y, chunks=3)
    for shuffle in (False, True):
        for as_tensor in (False, True):
            arrays = (xg.asarray(xd), xg.asarray(yd)) if as_tensor else (xd, yd)
            loader = DataLoader(TensorDataset(*arrays), batch_size=4, shuffle=shuffle, generator=0)
            batches = [b for _ in range(2) for b in loader]
            assert all(type(_raw(xb)) is type(xd) for xb, _ in batches)
            computes.assert_none(f"iterating a DataLoader of Dask arrays (shuffle={shuffle}, tensors={as_tensor})")
    assert to_numpy(batches[0][0]).shape == (4, D)  # (computed here, after the check)


class _Pairs(Dataset):
    """A map-style dataset of (array, int) samples, made on the fly."""

    def __init__(self, make: Any) -> None:
        self.make = make

    def __len__(self) -> int:
        return 7

    def __getitem__(self, i: int) -> tuple[Any, int]:
        return self.make(np.full(2, float(i))), i


def test_map_style_dataset_and_collate(backend: Any) -> None:
    loader = DataLoader(_Pairs(backend.asarray), batch_size=3)
    batches = list(loader)
    assert len(batches) == 3
    xb, ib = batches[0]
    assert type(xb) is type(backend.asarray(np.zeros(1)))
    np.testing.assert_array_equal(to_numpy(xb), [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    np.testing.assert_array_equal(ib, [0, 1, 2])
    # a collate_fn gets the list of samples, TensorDataset included
    seen: list[int] = []
    x, y = _arrays()
    custom = DataLoader(TensorDataset(backend.asarray(x), backend.asarray(y)), batch_size=5,
                        collate_fn=lambda samples: seen.append(len(samples)) or len(samples))
    assert list(custom) == [5, 5, 1] and seen == [5, 5, 1]


def test_default_collate_structures() -> None:
    t = default_collate([xg.ones(2), xg.zeros(2)])
    assert isinstance(t, xg.Tensor) and t.shape == (2, 2)
    d = default_collate([{"a": 1.0, "b": np.zeros(2)}, {"a": 2.0, "b": np.ones(2)}])
    np.testing.assert_array_equal(d["a"], [1.0, 2.0])
    assert d["b"].shape == (2, 2)
    lst = default_collate([[1, np.zeros(1)], [2, np.ones(1)]])
    assert isinstance(lst, list) and lst[1].shape == (2, 1)


@pytest.mark.parametrize(("call", "exc", "match"), [
    (lambda: DataLoader(TensorDataset(np.zeros(3)), batch_size=0), xg.XpgradValueError,
     "DataLoader: batch_size must be a positive int, got 0"),
    (lambda: DataLoader(TensorDataset(np.zeros(3)), generator="x"), xg.XpgradTypeError,
     "DataLoader: generator must be an int seed or a numpy.random.Generator, got 'x'"),
    (lambda: DataLoader(object()), xg.XpgradTypeError, "DataLoader: the dataset needs __getitem__ and __len__"),
    (lambda: TensorDataset(np.zeros(3), np.zeros(4)), xg.XpgradValueError,
     r"TensorDataset: the arrays have different numbers of samples \(first axes\): \[3, 4\]"),
    (lambda: TensorDataset(np.float64(1.0)), xg.XpgradValueError, "TensorDataset: every array needs a first"),
    (lambda: TensorDataset(), xg.XpgradValueError, "TensorDataset: give at least one array"),
    (lambda: TensorDataset(np.zeros(3))[3], xg.XpgradIndexError, "TensorDataset: index 3 is out of range"),
    (lambda: default_collate([object()]), xg.XpgradTypeError, "default_collate: cannot collate samples of type object"),
    (lambda: len(Dataset()), NotImplementedError, "Dataset: a Dataset subclass must define __len__"),
])
def test_errors(call: Any, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        call()
