"""Errors in the user's words (issue 31): each names the user's layer or function, the value, and
the cure, where xpgrad used to pass on another library's text ("'list' object has no attribute
'shape'", NumPy's gufunc signature, safetensors' "header too large")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from tests.conftest import Backend


def _x(backend: Backend, shape: tuple[int, ...]) -> Any:
    return xg.asarray(backend.asarray(np.ones(shape, dtype=np.float32)))


# ---------------------------------------------------------------- 1. a Python list into a layer
_LIST_LAYERS = [
    pytest.param(lambda: xg.nn.Linear(3, 2), [1.0, 2.0, 3.0], r"Linear\(in_features=3, out_features=2, bias=True\)",
                 id="Linear-1d"),
    pytest.param(lambda: xg.nn.Linear(3, 2), [[1.0, 2.0, 3.0]], r"Linear\(in_features=3", id="Linear-2d"),
    pytest.param(lambda: xg.nn.LayerNorm(3), [[1.0, 2.0, 3.0]], r"LayerNorm\(\(3,\)", id="LayerNorm"),
    pytest.param(lambda: xg.nn.ReLU(), [[1.0, -2.0]], r"ReLU", id="ReLU"),
    pytest.param(lambda: xg.nn.Dropout(0.5), [[1.0, -2.0]], r"Dropout\(p=0.5\)", id="Dropout"),
    pytest.param(lambda: xg.nn.Embedding(5, 2), [1, 2], r"Embedding\(5, 2\)", id="Embedding"),
    pytest.param(lambda: xg.nn.Sequential(xg.nn.Linear(3, 2), xg.nn.ReLU()), [[1.0, 2.0, 3.0]], r"Sequential",
                 id="Sequential"),
]


@pytest.mark.parametrize(("make", "value", "name"), _LIST_LAYERS)
def test_a_list_into_a_layer_names_the_layer_and_asarray(backend: Backend, make: Callable[[], Any], value: Any,
                                                         name: str) -> None:
    layer = backend.to(make())
    for _ in range(2):  # the same refusal each call (no state left behind)
        with pytest.raises(xg.XpgradTypeError, match=name) as info:
            layer(value)
        text = str(info.value)
        assert isinstance(info.value, TypeError)
        assert "not a Python list" in text
        assert repr(value)[:10] in text  # the value
        assert "xg.asarray(" in text


def test_a_list_into_a_users_model_names_the_model(backend: Backend) -> None:
    class MLP(xg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = xg.nn.Sequential(xg.nn.Linear(3, 4), xg.nn.ReLU(), xg.nn.Linear(4, 1))

        def forward(self, x: Any) -> Any:
            return self.body(x)

    with pytest.raises(xg.XpgradTypeError, match=r"^MLP: argument 0 must be an array .*not a Python list") as info:
        backend.to(MLP())([[1.0, 2.0, 3.0]])
    assert isinstance(info.value.__cause__, (AttributeError, TypeError))  # the original error, for the traceback


def test_a_forwards_own_error_next_to_a_list_argument_is_kept(backend: Backend) -> None:
    class Picks(xg.nn.Module):
        def forward(self, x: Any, which: list[int]) -> Any:
            return x.no_such_method(which)  # the user's bug, not the list's

    with pytest.raises(AttributeError, match="no_such_method"):
        Picks()(_x(backend, (3,)), [0, 2])


def test_a_list_into_functional_linear(backend: Backend) -> None:
    with pytest.raises(xg.XpgradTypeError, match=r"^linear: the input must be an array .*not list \[\[1\.0, 2\.0, 3\.0\]\].*"
                                                r"xg\.asarray"):
        xg.nn.functional.linear([[1.0, 2.0, 3.0]], _x(backend, (2, 3)))


# ---------------------------------------------------------------- 2. shape mismatches of products
_PRODUCTS = [
    pytest.param(lambda a, b: a @ b, "matmul", id="@"),
    pytest.param(xg.matmul, "matmul", id="xg.matmul"),
    pytest.param(xg.linalg.matmul, "matmul", id="xg.linalg.matmul"),
    pytest.param(lambda a, b: xg.grad(lambda x: xg.sum(x @ b))(a), "matmul", id="grad-matmul"),
    pytest.param(lambda a, b: xg.grad(lambda y: xg.sum(a @ y))(b), "matmul", id="grad-matmul-x2"),
    pytest.param(lambda a, b: xg.tensordot(a, b, axes=1), "tensordot", id="tensordot"),
]


@pytest.mark.parametrize(("product", "name"), _PRODUCTS)
def test_a_product_of_mismatched_shapes_names_both_shapes(backend: Backend, product: Callable[[Any, Any], Any],
                                                          name: str) -> None:
    a, b = _x(backend, (4, 3)), _x(backend, (2, 5))
    with pytest.raises(xg.XpgradValueError, match=rf"^{name}: shapes \(4, 3\) and \(2, 5\) do not match") as info:
        product(a, b)
    text = str(info.value)
    assert "3" in text and "2" in text and "gufunc" not in text
    if name == "matmul":
        assert "3 (last axis of x1) != 2 (first of x2's last two axes)" in text


def test_matmul_of_a_vector_names_its_only_axis(backend: Backend) -> None:
    with pytest.raises(xg.XpgradValueError, match=r"matmul: shapes \(3,\) and \(2, 5\) do not match: 3 \(x1's only axis\)"):
        _x(backend, (3,)) @ _x(backend, (2, 5))
    with pytest.raises(xg.XpgradValueError, match=r"matmul: shapes \(4, 3\) and \(2,\) .*2 \(x2's only axis\)"):
        _x(backend, (4, 3)) @ _x(backend, (2,))


def test_vecdot_of_mismatched_vectors_names_both_shapes(backend: Backend) -> None:
    with pytest.raises(xg.XpgradValueError, match=r"^vecdot: shapes \(4, 3\) and \(4, 5\) do not match along axis=-1: "
                                                 r"3 != 5"):
        xg.vecdot(_x(backend, (4, 3)), _x(backend, (4, 5)))


def test_products_that_match_still_work(backend: Backend) -> None:
    a, b = _x(backend, (4, 3)), _x(backend, (3, 5))
    assert tuple((a @ b).shape) == (4, 5)
    assert tuple(xg.tensordot(a, b, axes=1).shape) == (4, 5)
    assert tuple(xg.vecdot(a, a).shape) == (4,)


# ---------------------------------------------------------------- 3. xg.load of a torch.save file
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy-pickle"])
def test_load_of_a_torch_checkpoint_says_so_and_how_to_convert(tmp_path: Path, legacy: bool) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.pt"
    torch.save({"weight": torch.ones(2, 3)}, path, _use_new_zipfile_serialization=not legacy)
    with pytest.raises(xg.XpgradValueError, match=r"model\.pt.* not a safetensors file") as info:
        xg.load(path)
    text = str(info.value)
    assert ("PyTorch checkpoint" if not legacy else "older torch.save") in text
    assert "header too large" not in text
    assert "torch.load(path, weights_only=True)" in text and "load_state_dict" in text and "xg.save" in text


def test_load_of_numpy_files_names_them(tmp_path: Path) -> None:
    np.save(tmp_path / "w.npy", np.ones(3))
    np.savez(tmp_path / "w.npz", w=np.ones(3))
    with pytest.raises(xg.XpgradValueError, match=r"w\.npy' is a NumPy \.npy file .*np\.load"):
        xg.load(tmp_path / "w.npy")
    with pytest.raises(xg.XpgradValueError, match=r"w\.npz' is a NumPy \.npz archive .*np\.load"):
        xg.load(tmp_path / "w.npz")


# ---------------------------------------------------------------- 4. grad of a (loss, aux) function
@pytest.mark.parametrize("transform", [xg.grad, xg.value_and_grad], ids=["grad", "value_and_grad"])
def test_grad_of_a_loss_and_aux_pair_suggests_has_aux(backend: Backend, transform: Callable[..., Any]) -> None:
    def loss_and_logits(x: Any) -> tuple[Any, Any]:
        return xg.sum(x * x), x

    name = transform.__name__
    with pytest.raises(xg.XpgradTypeError, match=rf"^{name}: the function must return a scalar array, got tuple of 2 from loss_and_logits; "
                                                rf".*has_aux=True \({name}\(loss_and_logits, has_aux=True\)\)"):
        transform(loss_and_logits)(_x(backend, (3,)))
    (value, aux), _ = xg.value_and_grad(loss_and_logits, has_aux=True)(_x(backend, (3,)))  # the cure works
    assert float(value) == 3.0
    assert tuple(aux.shape) == (3,)


# ---------------------------------------------------------------- 5. a model of one library given another's batch
def test_a_model_given_another_librarys_batch_names_the_model_and_to(backend: Backend) -> None:
    other = "torch" if backend.name != "torch" else "numpy"
    if other == "torch":
        torch = pytest.importorskip("torch")
        batch: Any = torch.ones(4, 3)
    else:
        batch = np.ones((4, 3), dtype=np.float32)

    class Net(xg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = xg.nn.Linear(3, 2)

        def forward(self, x: Any) -> Any:
            return self.fc(x)

    net = backend.to(Net())
    for given in (batch, xg.asarray(batch)):  # a raw array and a Tensor of the other library
        with pytest.raises(xg.NamespaceMismatchError,
                           match=rf"^Net: its parameters are {backend.name} arrays but argument 0 is a {other} array "
                                 rf"\(shape \(4, 3\)\); move the model first with model\.to\(xp='{other}'\)"):
            net(given)
    net.to(xp=other)  # the cure works
    assert tuple(net(batch).shape) == (4, 2)
