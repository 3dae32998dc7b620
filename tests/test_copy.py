"""copy.copy, copy.deepcopy and pickle of Tensors, on every backend, with PyTorch as the reference."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import nn

from ._util import to_numpy as _np

_PYTORCH_DEEPCOPY = "only tensors created explicitly by the user \\(graph leaves\\) support the deepcopy protocol"


def _roundtrip(t: Any) -> Any:
    return pickle.loads(pickle.dumps(t))


def _leaf(backend: Any) -> Any:
    return xg.asarray(backend.asarray(np.array([1.0, 2.0, 3.0])), requires_grad=True)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_leaf_copies_keep_data_and_requires_grad(backend: Any, how: str) -> None:
    x = _leaf(backend)
    (x * x).sum().backward()
    y = copy.deepcopy(x) if how == "deepcopy" else _roundtrip(x)
    assert type(y) is xg.Tensor and y.is_leaf and y.requires_grad and y.grad_fn is None
    assert y.data is not x.data and type(y.data) is type(x.data)
    np.testing.assert_array_equal(_np(y), [1.0, 2.0, 3.0])
    assert y.dtype == x.dtype and y.device == x.device
    if how == "deepcopy":  # PyTorch deep-copies .grad and does not pickle it
        assert y.grad is not None and y.grad is not x.grad
        np.testing.assert_array_equal(_np(y.grad), [2.0, 4.0, 6.0])
    else:
        assert y.grad is None
    (y * 3).sum().backward()  # the copy is a working leaf of its own
    np.testing.assert_array_equal(_np(x.grad), [2.0, 4.0, 6.0])
    with xg.no_grad():
        y += 1
    np.testing.assert_array_equal(_np(x), [1.0, 2.0, 3.0])  # the original's data is not shared


def test_integer_and_plain_tensors_copy(backend: Any) -> None:
    i = xg.asarray(backend.asarray(np.array([[1, 2]], dtype=np.int32)))
    for c in (copy.deepcopy(i), _roundtrip(i)):
        assert not c.requires_grad and c.dtype == xg.int32 and c.shape == (1, 2)
        np.testing.assert_array_equal(_np(c), [[1, 2]])


def test_non_leaf_deepcopy_is_refused_as_in_pytorch(backend: Any) -> None:
    y = _leaf(backend) * 2
    with pytest.raises(xg.XpgradRuntimeError, match=_PYTORCH_DEEPCOPY):
        copy.deepcopy(y)
    with pytest.raises(xg.XpgradRuntimeError, match=r"grad_fn=<multiply>\); deep-copy t.detach\(\) instead"):
        copy.deepcopy({"y": y})
    d = copy.deepcopy(y.detach())
    assert d.is_leaf and not d.requires_grad
    np.testing.assert_array_equal(_np(d), [2.0, 4.0, 6.0])


def test_non_leaf_pickles_as_a_leaf_as_in_pytorch(backend: Any) -> None:
    y = _roundtrip(_leaf(backend) * 2)
    assert y.is_leaf and y.requires_grad and y.grad_fn is None
    np.testing.assert_array_equal(_np(y), [2.0, 4.0, 6.0])


def test_pytorch_behaves_as_documented() -> None:
    torch = pytest.importorskip("torch")
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user \\(graph leaves\\) support the deepcopy"):
        copy.deepcopy(x * 2)
    y = _roundtrip(x * 2)
    assert y.is_leaf and y.requires_grad
    x.grad = torch.ones(2)
    assert copy.deepcopy(x).grad is not None and _roundtrip(x).grad is None
    base = torch.zeros(4)
    b2, v2 = copy.deepcopy((base, base[1:3]))
    v2.add_(1)
    assert b2.tolist() == [0.0, 1.0, 1.0, 0.0]  # torch's deepcopy keeps a view's aliasing


def test_parameter_copies_stay_parameters(backend: Any) -> None:
    p = nn.Parameter(xg.asarray(backend.asarray(np.array([0.5, 1.5]))))
    frozen = nn.Parameter(xg.asarray(backend.asarray(np.array([0.5]))), requires_grad=False)
    for q, rg in ((p, True), (frozen, False)):
        for c in (copy.deepcopy(q), _roundtrip(q)):
            assert type(c) is nn.Parameter and c.requires_grad is rg and c.is_leaf
            np.testing.assert_array_equal(_np(c), _np(q))


def test_deepcopy_of_a_module_gives_independent_parameters(backend: Any) -> None:
    model = backend.to(nn.Linear(2, 2))
    twin = copy.deepcopy(model)
    with xg.no_grad():
        twin.weight += 1
    assert not np.array_equal(_np(twin.weight), _np(model.weight))
    assert [type(p) for p in twin.parameters()] == [nn.Parameter, nn.Parameter]


def test_deepcopy_of_base_and_view_shares_counter_iff_memory(backend: Any) -> None:
    base = xg.asarray(backend.asarray(np.zeros(4)))
    view = base[1:3]
    # a view where the library has views (JAX's and Dask's slices are copies: own counters)
    assert (view._version is base._version) == (backend.name not in ("jax", "dask"))
    b2, v2 = copy.deepcopy((base, view))
    shared = v2._version is b2._version
    before = b2._version[0]
    v2 += 1  # in place through the copied view
    changed = bool(np.any(_np(b2) != 0))
    assert changed == shared, (backend.name, changed, shared)  # both, or neither
    assert (b2._version[0] == before + 1) == shared
    np.testing.assert_array_equal(_np(base), np.zeros(4))  # the originals are untouched
    if backend.name in ("torch", "torch_cuda"):
        assert shared  # torch keeps the view's memory: the counter is shared too
    if backend.name in ("numpy", "array_api_strict", "strict_device1", "jax", "dask"):
        assert not shared  # these copy each array on its own: separate counters


def test_deepcopy_keeps_identity_and_detached_aliases(backend: Any) -> None:
    x = xg.asarray(backend.asarray(np.ones(3)))
    d = x.detach()  # same array object, same counter (JAX: an update replaces one Tensor's data: own counters)
    a, b, c = copy.deepcopy((x, x, d))
    assert a is b and c is not a
    assert c.data is a.data  # still one array
    assert (c._version is a._version) == (backend.name != "jax")  # with one counter where it is one memory


def test_shared_counter_catches_in_place_changes_after_deepcopy() -> None:
    torch = pytest.importorskip("torch")
    base = xg.asarray(torch.ones(4, dtype=torch.float64))
    b2, v2 = copy.deepcopy((base, base[0:2]))
    w = xg.asarray(torch.ones(4, dtype=torch.float64), requires_grad=True)
    out = (w * b2).sum()  # b2 is saved for the gradient
    v2 += 1  # changes b2's memory: the shared counter makes backward refuse
    with pytest.raises(xg.InPlaceModificationError):
        out.backward()


def test_copy_copy_is_the_same_tensor(backend: Any) -> None:
    x = _leaf(backend)
    y = x * 2
    for t in (x, y):
        c = copy.copy(t)
        assert c is not t and c.data is t.data and c._version is t._version
        assert c.requires_grad == t.requires_grad and c.grad_fn is t.grad_fn
