"""Layers and their functional forms refuse an input of another dtype than their parameters (as PyTorch).

Nothing promotes: a float64 batch into a float32 layer, or an integer batch into any
floating layer, raises an XpgradTypeError naming the layer (or function) and both dtypes;
matching dtypes pass, in float32 and in float64, eagerly and under vmap and jit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import nn
from xpgrad.nn import functional as F  # noqa: N812

# name, constructor, input shapes (every input of the forward)
LAYERS: list[tuple[str, Callable[..., Any], tuple[tuple[int, ...], ...]]] = [
    ("Linear", lambda **kw: nn.Linear(3, 2, **kw), ((4, 3),)),
    ("Bilinear", lambda **kw: nn.Bilinear(3, 3, 2, **kw), ((4, 3), (4, 3))),
    ("Conv1d", lambda **kw: nn.Conv1d(2, 3, 2, **kw), ((1, 2, 5),)),
    ("Conv2d", lambda **kw: nn.Conv2d(2, 3, 2, **kw), ((1, 2, 4, 4),)),
    ("ConvTranspose2d", lambda **kw: nn.ConvTranspose2d(2, 3, 2, **kw), ((1, 2, 3, 3),)),
    ("LayerNorm", lambda **kw: nn.LayerNorm(3, **kw), ((4, 3),)),
    ("GroupNorm", lambda **kw: nn.GroupNorm(1, 2, **kw), ((4, 2, 3),)),
    ("BatchNorm1d", lambda **kw: nn.BatchNorm1d(3, **kw), ((4, 3),)),
    ("BatchNorm2d", lambda **kw: nn.BatchNorm2d(2, **kw).eval(), ((4, 2, 3, 3),)),
    ("MultiheadAttention", lambda **kw: nn.MultiheadAttention(4, 2, **kw), ((3, 2, 4),) * 3),
]
IDS = [name for name, _, _ in LAYERS]
_rng = np.random.default_rng(0)


def _inputs(backend: Any, shapes: tuple[tuple[int, ...], ...], dtype: str) -> list[Any]:
    return [backend.asarray(_rng.standard_normal(s).astype(dtype)) for s in shapes]


def _model(backend: Any, make: Callable[..., Any], dtype: Any = None) -> Any:
    return backend.to(make(dtype=dtype) if dtype is not None else make())


@pytest.mark.parametrize(("name", "make", "shapes"), LAYERS, ids=IDS)
@pytest.mark.parametrize("bad", ["float64", "int64"])
def test_other_dtype_into_float32_layer_raises(name: str, make: Callable[..., Any], shapes: Any, bad: str,
                                               backend: Any) -> None:
    m = _model(backend, make)
    assert all(p.dtype == xg.float32 for p in m.parameters())
    with pytest.raises(xg.XpgradTypeError, match=rf"^{name}\(.*(input1?|query) dtype {bad} does not match the layer's float32"):
        m(*_inputs(backend, shapes, bad))


@pytest.mark.parametrize(("name", "make", "shapes"), LAYERS, ids=IDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matching_dtypes_pass(name: str, make: Callable[..., Any], shapes: Any, dtype: str, backend: Any) -> None:
    m = _model(backend, make, getattr(xg, dtype))
    for _ in range(2):  # (twice: BatchNorm's state, a model used again)
        # (as Tensors: a raw array_api_strict array into LayerNorm/BatchNorm fails apart from dtypes)
        out = m(*map(xg.asarray, _inputs(backend, shapes, dtype)))
        out = out[0] if isinstance(out, tuple) else out
        assert xg.dtype_name(out.dtype) == dtype, name


def test_float32_input_into_float64_model_raises_naming_the_model_fix(backend: Any) -> None:
    m = backend.to(nn.Linear(3, 2, dtype=xg.float64))
    with pytest.raises(xg.XpgradTypeError, match=r"input dtype float32 does not match the layer's float64 "
                                                 r"parameters; convert the input \(xg.astype\(x, xg.float64\)\) "
                                                 r"or the model \(model.to\(dtype=xg.float32\)\)"):
        m(*_inputs(backend, ((4, 3),), "float32"))


def test_complex_input_into_real_layer_raises(backend: Any) -> None:
    m = _model(backend, lambda **kw: nn.Linear(3, 2, **kw))
    x = xg.astype(backend.asarray(_rng.standard_normal((4, 3)).astype("float32")), xg.complex64)
    with pytest.raises(xg.XpgradTypeError, match="input dtype complex64 does not match the layer's float32"):
        m(x)


def test_a_sequential_names_the_refusing_layer(backend: Any) -> None:
    m = backend.to(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)))
    with pytest.raises(xg.XpgradTypeError, match=r"Linear\(in_features=3, out_features=4, bias=True\): input dtype "
                                                 r"float64"):
        m(*_inputs(backend, ((5, 3),), "float64"))


@pytest.mark.parametrize(("name", "make", "shapes"), LAYERS, ids=IDS)
def test_under_vmap(name: str, make: Callable[..., Any], shapes: Any, backend: Any) -> None:
    m = _model(backend, make)
    if name.startswith("BatchNorm"):
        m.eval()
    shapes = tuple((5, *s) for s in shapes)  # 5 examples of the shapes above
    out = xg.vmap(m)(*_inputs(backend, shapes, "float32"))
    out = out[0] if isinstance(out, tuple) else out
    assert xg.dtype_name(out.dtype) == "float32"
    with pytest.raises(xg.XpgradTypeError, match=rf"^{name}\(.*(input1?|query) dtype float64 does not match"):
        xg.vmap(m)(*_inputs(backend, shapes, "float64"))


@pytest.mark.parametrize(("name", "make", "shapes"), LAYERS, ids=IDS)
def test_under_jit(name: str, make: Callable[..., Any], shapes: Any, backend: Any) -> None:
    m = _model(backend, make)
    f = xg.jit(lambda *xs: m(*xs))
    for _ in range(2):  # traced, then replayed
        out = f(*_inputs(backend, shapes, "float32"))
        out = out[0] if isinstance(out, tuple) else out
        assert xg.dtype_name(out.dtype) == "float32"
    with pytest.raises(xg.XpgradTypeError, match=rf"^{name}\(.*(input1?|query) dtype float64 does not match"):
        f(*_inputs(backend, shapes, "float64"))


def test_under_grad(backend: Any) -> None:
    m = backend.to(nn.Linear(3, 2))
    w = m.weight
    g = xg.grad(lambda x: xg.sum(m(x)))(*_inputs(backend, ((4, 3),), "float32"))
    assert xg.dtype_name(g.dtype) == xg.dtype_name(w.dtype) == "float32"
    with pytest.raises(xg.XpgradTypeError, match="Linear"):
        xg.grad(lambda x: xg.sum(m(x)))(*_inputs(backend, ((4, 3),), "float64"))


@pytest.mark.parametrize(("func", "call"), [
    ("linear", lambda x, w: F.linear(x, w((2, 3)))),
    ("bilinear", lambda x, w: F.bilinear(x, x, w((2, 3, 3)))),
    ("conv1d", lambda x, w: F.conv1d(xg.reshape(x, (1, 3, 4)), w((2, 3, 2)))),
    ("conv2d", lambda x, w: F.conv2d(xg.reshape(x, (1, 3, 2, 2)), w((2, 3, 1, 1)))),
    ("conv_transpose2d", lambda x, w: F.conv_transpose2d(xg.reshape(x, (1, 3, 2, 2)), w((3, 2, 1, 1)))),
    ("layer_norm", lambda x, w: F.layer_norm(x, (3,), w((3,)))),
    ("group_norm", lambda x, w: F.group_norm(xg.reshape(x, (1, 3, 4)), 1, w((3,)))),
    ("batch_norm", lambda x, w: F.batch_norm(x, None, None, w((3,)), training=True)),
])
def test_functional_forms(func: str, call: Callable[..., Any], backend: Any) -> None:
    a = _rng.standard_normal((4, 3))
    x64, x32 = xg.asarray(backend.asarray(a)), xg.asarray(backend.asarray(a.astype("float32")))

    def w(shape: tuple[int, ...]) -> Any:
        return xg.asarray(backend.asarray(np.ones(shape, dtype="float32")))

    assert xg.dtype_name(call(x32, w).dtype) == "float32"
    with pytest.raises(xg.XpgradTypeError, match=rf"^{func}: input1? dtype float64 does not match the weight's float32"):
        call(x64, w)


def test_integer_input_into_norm_without_parameters_raises(backend: Any) -> None:
    x = backend.asarray(np.ones((4, 3), dtype="int64"))
    with pytest.raises(xg.XpgradTypeError, match=r"LayerNorm\(\(3,\).*expected a floating input, got dtype int64"):
        backend.to(nn.LayerNorm(3, elementwise_affine=False))(x)
    with pytest.raises(xg.XpgradTypeError, match="layer_norm: expected a floating input"):
        F.layer_norm(x, (3,))


@pytest.mark.parametrize("dtype", ["float32", "float64", "bool"])
def test_embedding_refuses_non_integer_indices(dtype: str, backend: Any) -> None:
    m = backend.to(nn.Embedding(5, 2))
    bad = backend.asarray(np.ones((2, 3), dtype=dtype))
    with pytest.raises(xg.XpgradTypeError, match=rf"^Embedding\(5, 2\): indices must be integers, got dtype {dtype}"):
        m(bad)
    with pytest.raises(xg.XpgradTypeError, match=rf"^embedding: indices must be integers, got dtype {dtype}"):
        F.embedding(bad, m.weight)
    for idt in ("int32", "int64"):
        out = m(backend.asarray(np.ones((2, 3), dtype=idt)))
        assert out.shape == (2, 3, 2)
        assert xg.dtype_name(out.dtype) == "float32"
