"""What is particular to JAX and torch: immutable arrays, JAX's transforms, torch's own autograd.

JAX: arrays are immutable, so no rule may write into one (functional updates go
through ``array_api_extra.at``); ``grad`` gives JAX arrays back; nn and optim rebind
parameters instead of mutating them; xpgrad runs inside ``jax.jit``, ``jax.grad``
and ``jax.vmap`` (it runs at trace time, on tracers).

torch: xpgrad's tape replaces torch's autograd: no torch graph is built, even for
inputs that have ``requires_grad=True``; the policy and ``Module.to`` take torch
device strings and objects.

The rest of the suite (tests/test_rules.py, test_nn.py, ...) runs on every backend
through the ``backend`` fixture; the page docs/backends.md lists each backend's
limitations, checked against the xfail reasons here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import array_api_compat
import numpy as np
import pytest

import xpgrad as xg

from ._util import load_script
from .conftest import _load, _selected


def _need(name: str) -> Any:
    if name not in _selected():
        pytest.skip(f"{name} is not in XPGRAD_BACKENDS")
    return _load(name)


@pytest.fixture(scope="module")
def jax() -> Any:
    _need("jax")
    import jax

    return jax


@pytest.fixture(scope="module")
def torch() -> Any:
    _need("torch")
    import torch

    return torch


def _linear(w: Any, a: Any, y: Any) -> Any:
    xp = xg.array_namespace(w, a, y)
    return xp.mean((a @ w - y) ** 2)


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(3), rng.standard_normal((20, 3)), rng.standard_normal(20)


def _model() -> Any:
    with xg.default_device("numpy", dtype="float64", seed=0):
        return xg.nn.Sequential(xg.nn.Linear(3, 5), xg.nn.Tanh(), xg.nn.Linear(5, 2))


def _train(model: Any, opt: Any, a: Any, y: Any, steps: int = 3) -> list[float]:
    losses = []
    for _ in range(steps):
        loss = xg.nn.functional.cross_entropy(model(xg.asarray(a)), xg.asarray(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


# ====================================================================== JAX
def test_jax_grad_returns_a_jax_array(jax: Any) -> None:
    w, X, y = _data()
    g = xg.grad(_linear)(*(jax.numpy.asarray(a) for a in (w, X, y)))
    assert isinstance(g, jax.Array) and g.dtype == jax.numpy.float64
    np.testing.assert_allclose(np.asarray(g), xg.grad(_linear)(w, X, y), rtol=1e-12)


_INDEXING = {
    "getitem_slices": lambda x: xg.sum(x[1:, ::2] ** 2),
    "getitem_int_array": lambda x: xg.sum(x[_index(x, [0, 2, 2]), ...] ** 2),
    "take_repeated": lambda x: xg.sum(xg.take(x, _index(x, [1, 1, 0]), axis=1) ** 3),
    "setitem_functional": lambda x: xg.sum(_setitem(x) ** 2),
    "sort": lambda x: xg.sum(xg.sort(x, axis=0) * xg.cumulative_sum(xg.ones_like(x), axis=0)),
}


def _index(x: Any, values: list[int]) -> Any:
    """An integer index array of ``x``'s own library."""
    return xg.asarray(array_api_compat.array_namespace(x.data).asarray(values))


def _setitem(x: Any) -> Any:
    y = x * 1.0
    y[0, 1:] = x[1, :-1] * 3.0
    return y


@pytest.mark.parametrize("name", list(_INDEXING))
def test_jax_indexing_gradients_never_write_into_arrays(name: str, jax: Any) -> None:
    # a write into a JAX array raises TypeError, so these pass only if every rule
    # (scatter-adds included) is functional
    x = np.random.default_rng(1).standard_normal((3, 4))
    jx = jax.numpy.asarray(x)
    g = xg.grad(_INDEXING[name])(jx)
    assert isinstance(g, jax.Array)
    np.testing.assert_allclose(np.asarray(g), xg.grad(_INDEXING[name])(x), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(jx), x)


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_jax_nn_training_rebinds_parameters(opt_name: str, jax: Any) -> None:
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((16, 3)), rng.integers(0, 2, 16)
    ref, model = _model(), _model().to(xp="jax")
    params = list(model.parameters())
    before = [p.data for p in params]
    kw = {"momentum": 0.9} if opt_name == "SGD" else {}
    got = _train(model, getattr(xg.optim, opt_name)(model.parameters(), lr=0.1, **kw), jax.numpy.asarray(X),
                 jax.numpy.asarray(y))
    want = _train(ref, getattr(xg.optim, opt_name)(ref.parameters(), lr=0.1, **kw), X, y)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert list(model.parameters()) == params  # same Parameter objects, new immutable arrays
    for p, old, r in zip(params, before, ref.parameters()):
        assert isinstance(p.data, jax.Array) and isinstance(p.grad.data, jax.Array)
        assert p.data is not old
        np.testing.assert_allclose(np.asarray(p.data), r.data, rtol=1e-10, atol=1e-12)


def test_jax_jit_traces_through_xpgrad(jax: Any) -> None:
    w, X, y = (jax.numpy.asarray(a) for a in _data())
    traces = []

    def step(w: Any) -> Any:
        traces.append(1)  # runs once per trace: xpgrad's tape runs at trace time only
        return w - 0.1 * xg.grad(_linear)(w, X, y)  # X, y: concrete arrays closed over

    jstep = jax.jit(step)
    for _ in range(3):
        w_jit = jstep(w)
    assert len(traces) == 1
    np.testing.assert_allclose(np.asarray(w_jit), np.asarray(step(w)), rtol=1e-12)


def test_jax_transforms_compose_with_xpgrad(jax: Any) -> None:
    w, X, y = _data()
    jw, jX, jy = (jax.numpy.asarray(a) for a in (w, X, y))
    # jax.grad of a function that uses xpgrad, and of xpgrad's own gradient
    np.testing.assert_allclose(np.asarray(jax.grad(_linear)(jw, jX, jy)), xg.grad(_linear)(w, X, y), rtol=1e-12)
    hsum = jax.grad(lambda v: xg.grad(_linear)(v, jX, jy).sum())(jw)
    np.testing.assert_allclose(np.asarray(hsum), 2 * X.T @ X.sum(axis=1) / len(y), rtol=1e-12)
    # vmap over a batch of weights
    ws = np.stack([w, 2 * w])
    batched = jax.vmap(lambda v: xg.grad(_linear)(v, jX, jy))(jax.numpy.asarray(ws))
    np.testing.assert_allclose(np.asarray(batched), [xg.grad(_linear)(v, X, y) for v in ws], rtol=1e-12)


def test_jax_jit_refuses_boolean_masks(jax: Any) -> None:
    # JAX's own limitation: shapes must be static under jit; xp.where masks instead
    x = jax.numpy.arange(-2.0, 3.0)
    with pytest.raises(jax.errors.NonConcreteBooleanIndexError):
        jax.jit(xg.grad(lambda x: xg.sum(x[x > 0] ** 2)))(x)
    g = jax.jit(xg.grad(lambda x: xg.sum(xg.where(x > 0, x, 0.0) ** 2)))(x)
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.0, 0.0, 2.0, 4.0])


# ====================================================================== torch
@pytest.mark.parametrize("requires_grad", [False, True], ids=["plain", "requires_grad"])
def test_torch_graph_is_never_built(requires_grad: bool, torch: Any) -> None:
    w, X, y = (torch.asarray(a) for a in _data())
    w.requires_grad_(requires_grad)
    packed = []
    # torch calls the pack hook for every tensor its autograd saves for a backward
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
        v, g = xg.value_and_grad(_linear)(w, X, y)
        t = xg.asarray(w, requires_grad=True)
        out = xg.sum(xg.exp(t) * t)
        out.backward()
    assert packed == []
    for a in (v, g, out.data, t.data, t.grad.data):
        assert not a.requires_grad and a.grad_fn is None
    assert w.grad is None  # torch's own .grad is untouched
    assert torch.is_grad_enabled()
    np.testing.assert_allclose(g.numpy(), xg.grad(_linear)(*_data()), rtol=1e-12)


def test_torch_nn_training_builds_no_torch_graph(torch: Any) -> None:
    rng = np.random.default_rng(4)
    X, y = rng.standard_normal((16, 3)), rng.integers(0, 2, 16)
    ref, model = _model(), _model().to(xp="torch")
    opt = xg.optim.Adam(model.parameters(), lr=0.1)
    got = _train(model, opt, torch.asarray(X), torch.asarray(y))
    want = _train(ref, xg.optim.Adam(ref.parameters(), lr=0.1), X, y)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    for p in model.parameters():
        assert isinstance(p.data, torch.Tensor) and not p.data.requires_grad and p.data.grad_fn is None
        assert not p.grad.data.requires_grad
    for st in opt.state.values():
        assert all(not v.data.requires_grad for v in st.values() if isinstance(v, xg.Tensor))


@pytest.mark.parametrize("device", ["cpu", "CPU", "cpu:0", "torch.device"])
def test_torch_device_strings_and_objects(device: str, torch: Any) -> None:
    dev = torch.device("cpu") if device == "torch.device" else device
    with xg.default_device("torch", device=dev, dtype="float32"):
        assert xg.current_policy().device == torch.device("cpu")
        z = xg.zeros(2)
    assert isinstance(z.data, torch.Tensor) and z.data.device.type == "cpu"
    model = _model()
    assert model.to(device=dev, xp="torch") is model
    assert {(type(p.data), p.data.device.type) for p in model.parameters()} == {(torch.Tensor, "cpu")}
    model.to(device=dev)  # already there: a no-op
    assert {p.data.device.type for p in model.parameters()} == {"cpu"}


def test_torch_cuda_without_a_gpu_is_a_clear_error(torch: Any) -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: the torch_cuda backend of the test fixture covers it")
    with pytest.raises(xg.UnknownNameError, match=r"'torch' has no device 'cuda'.*available devices"):
        xg.default_device("torch", device="cuda")
    with pytest.raises(xg.UnknownNameError, match="cuda:1"):
        _model().to(xp="torch", device="cuda:1")


def test_host_copies_of_a_torch_tensor_off_the_cpu(torch: Any) -> None:
    """``numpy()``, ``item()``, ``tolist()``, ``repr`` and ``xg.save`` read a CUDA tensor
    through ``.cpu()``: NumPy's conversion and DLPack both refuse one. A tensor that
    refuses them the same way stands in for it here."""

    class OffHost(torch.Tensor):
        def __array__(self, *a: Any, **k: Any) -> Any:
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu()")

        def __dlpack__(self, *a: Any, **k: Any) -> Any:
            raise BufferError("unsupported device")

    data = torch.tensor([1.5, -2.0], dtype=torch.float64).as_subclass(OffHost)
    with pytest.raises(TypeError):
        np.asarray(data)
    t = xg.Tensor(data)
    np.testing.assert_array_equal(t.numpy(), [1.5, -2.0])
    assert t.tolist() == [1.5, -2.0] and t[0].item() == 1.5 and float(t[1]) == -2.0
    assert "1.5" in repr(t) and "-2." in repr(t)


def test_torch_cuda_string_names_the_current_gpu(torch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``"cuda"`` resolves to the index tensors report, so the policy's device compares equal
    to its arrays' (``torch.device("cuda") != torch.device("cuda:0")``). The GPU is faked:
    resolving a device string creates nothing on it."""
    from xpgrad._backends import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    ns = xg.array_namespace(torch.zeros(1))
    assert resolve_device(ns, "cuda") == torch.device("cuda:1")
    assert resolve_device(ns, "CUDA:0") == torch.device("cuda:0")
    assert resolve_device(ns, "cuda:1") == torch.device("cuda:1")
    with pytest.raises(xg.UnknownNameError, match="cuda:2"):
        resolve_device(ns, "cuda:2")
    assert resolve_device(ns, 1) == torch.device("cuda:1")  # an int is a GPU ordinal
    with pytest.raises(xg.XpgradValueError, match="ordinal must be >= 0, got -1"):
        resolve_device(ns, -1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(xg.UnknownNameError, match="cuda:0"):
        resolve_device(ns, 0)


# ====================================================================== docs
_ROOT = Path(__file__).resolve().parents[1]


def test_docs_list_every_xfail_reason() -> None:
    """docs/backends.md lists each backend's limitations with the reasons the tests give."""
    gen = load_script("docs/gen_backend_limits.py")
    page = (_ROOT / "docs" / "backends.md").read_text(encoding="utf-8")
    assert gen.START in page and gen.END in page
    assert gen.rewrite(page) == page, (
        "docs/backends.md's table of limitations is out of date with the xfail reasons of "
        "tests/cases/*.py; regenerate it: python docs/gen_backend_limits.py --write")
