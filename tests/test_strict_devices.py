"""Device logic without a GPU: array-api-strict's fake devices.

array-api-strict 2.x has the devices ``CPU_DEVICE``, ``device1``, ``device2`` (a
torch-CPU-like device: float64 supported, float32 default), ``no_float64`` (an
MPS-like device without float64/complex128) and ``no_x64`` (JAX-like: no 64-bit
types). Arrays on two of them cannot be combined, just as a CPU and a GPU array
cannot, so every rule about devices is tested here: the policy places new arrays,
``to_device`` and ``Module.to`` move data, mixing raises ``DeviceMismatchError``
naming the function and both devices, and a missing dtype is a clear error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import DeviceMismatchError, DTypeUnavailableError

from ._util import to_numpy as _np
from .conftest import _selected

if "array_api_strict" not in _selected():
    pytest.skip("array_api_strict is not in XPGRAD_BACKENDS", allow_module_level=True)
strict = pytest.importorskip("array_api_strict", reason="array-api-strict is not installed; install xpgrad[strict]")

D1, D2 = strict.Device("device1"), strict.Device("device2")
NO_F64 = strict.Device("no_float64")


def _on(device: Any, values: Any = (1.0, 2.0), dtype: Any = None) -> Any:
    return strict.asarray(values, device=device, dtype=dtype)


# ====================================================================== policy and to_device
@pytest.mark.parametrize("device", ["device1", D2], ids=["string", "object"])
def test_policy_places_new_arrays_and_parameters(device: Any) -> None:
    want = device if isinstance(device, strict.Device) else strict.Device(device)
    with xg.default_device(strict, device=device, seed=0):
        assert xg.current_policy().device == want
        assert xg.zeros(3).device == want
        assert xg.asarray([1.0]).device == want
        assert xg.random.normal((2,)).device == want
        layer = xg.nn.Linear(3, 2)
    assert {p.device for p in layer.parameters()} == {want}


def test_to_device_moves_data_and_the_gradient_comes_back() -> None:
    x = xg.asarray(_on(D1, [1.0, 2.0, 3.0]))
    for target in (D2, "device2"):
        y = x.to_device(target)
        assert y.device == D2 and x.device == D1
        np.testing.assert_array_equal(_np(y), [1.0, 2.0, 3.0])

    def f(a: Any, b: Any) -> Any:  # a on device1 meets b on device2 after a move
        return xg.sum(a.to_device(D2) * b)

    ga, gb = xg.grad(f, argnums=(0, 1))(_on(D1, [1.0, 2.0]), _on(D2, [3.0, 4.0]))
    assert ga.device == D1 and gb.device == D2
    np.testing.assert_array_equal(_np(ga), [3.0, 4.0])
    np.testing.assert_array_equal(_np(gb), [1.0, 2.0])


def test_grad_stays_on_the_input_device() -> None:
    g = xg.grad(lambda x: xg.sum(xg.exp(x) @ xg.ones_like(x)))(_on(D2, [[0.0, 1.0], [1.0, 0.0]]))
    assert type(g) is type(_on(D2)) and g.device == D2


# ====================================================================== mixing devices
_MIXED: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: xg.asarray(a) + xg.asarray(b),
    "multiply": lambda a, b: xg.multiply(a, xg.asarray(b)),
    "matmul": lambda a, b: xg.matmul(a, b),
    "where": lambda a, b: xg.where(xg.asarray(a) > 1, a, b),
    "concat": lambda a, b: xg.concat([xg.asarray(a), xg.asarray(b)]),
    "stack": lambda a, b: xg.stack([xg.asarray(a), xg.asarray(b)]),
    "__iadd__": lambda a, b: _iadd(xg.asarray(a), xg.asarray(b)),
}


def _iadd(a: Any, b: Any) -> Any:
    a += b
    return a


@pytest.mark.parametrize("func", list(_MIXED))
def test_mixing_devices_names_the_function_and_both_devices(func: str) -> None:
    with pytest.raises(DeviceMismatchError, match=rf"^{func}: .*device1.*device2"):
        _MIXED[func](_on(D1), _on(D2))


def test_mixing_devices_inside_grad_and_a_module() -> None:
    with pytest.raises(DeviceMismatchError, match=r"^multiply: .*device1.*device2"):
        xg.grad(lambda a, b: xg.sum(a * b))(_on(D1), _on(D2))
    with xg.default_device(strict, device=D1, seed=0):
        layer = xg.nn.Linear(2, 3)
    with pytest.raises(DeviceMismatchError, match=r"^matmul: .*device2.*device1"):
        layer(xg.asarray(_on(D2, [[1.0, 2.0]], dtype=strict.float32)))
    with pytest.raises(DeviceMismatchError, match=r"device1.*device2"):
        xg.array_namespace(_on(D1), _on(D2))


# ====================================================================== Module.to and training
def _model_on(device: Any, dtype: str = "float32") -> Any:
    with xg.default_device(strict, device=device, dtype=dtype, seed=0):
        return xg.nn.Sequential(xg.nn.Linear(3, 4), xg.nn.Tanh(), xg.nn.Linear(4, 2))


def _batch(device: Any, int_dtype: Any = None) -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    X = strict.asarray(rng.standard_normal((6, 3)).astype(np.float32), device=device)
    y = strict.asarray(rng.integers(0, 2, 6).astype(np.int32 if int_dtype is strict.int32 else np.int64), device=device)
    return xg.asarray(X), xg.asarray(y)


def _step(model: Any, opt: Any, a: Any, y: Any) -> Any:
    loss = xg.nn.functional.cross_entropy(model(a), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def test_training_stays_on_the_device() -> None:
    model = _model_on(D1)
    opt = xg.optim.Adam(model.parameters(), lr=0.1)
    losses = [float(_np(_step(model, opt, *_batch(D1)))) for _ in range(3)]
    assert losses[-1] < losses[0]
    assert {p.device for p in model.parameters()} == {D1}
    assert {p.grad.device for p in model.parameters()} == {D1}
    assert {v.device for st in opt.state.values() for v in st.values() if hasattr(v, "device")} == {D1}


@pytest.mark.parametrize("device", ["device2", D2], ids=["string", "object"])
def test_module_to_moves_parameters_and_gradients(device: Any) -> None:
    model = _model_on(D1)
    ref = [_np(p) for p in model.parameters()]
    _step(model, xg.optim.SGD(model.parameters(), lr=0.0), *_batch(D1))
    params = list(model.parameters())
    assert model.to(device=device) is model
    assert list(model.parameters()) == params  # the same Parameter objects
    assert {p.device for p in params} == {D2} and {p.grad.device for p in params} == {D2}
    for p, r in zip(params, ref):
        np.testing.assert_array_equal(_np(p), r)
    # an optimizer created after the move trains on the new device
    opt = xg.optim.Adam(model.parameters(), lr=0.1)
    _step(model, opt, *_batch(D2))
    assert {p.device for p in params} == {D2}


def test_optimizer_state_does_not_follow_module_to() -> None:
    # as in PyTorch: move the model first, then create the optimizer; a stale state is
    # a clear error, not a silent copy
    model = _model_on(D1)
    opt = xg.optim.Adam(model.parameters(), lr=0.1)
    _step(model, opt, *_batch(D1))
    model.to(device=D2)
    with pytest.raises(DeviceMismatchError, match=r"device1.*device2|device2.*device1"):
        _step(model, opt, *_batch(D2))


# ====================================================================== no_float64 / no_x64
def test_no_float64_policy_refuses_float64() -> None:
    with pytest.raises(DTypeUnavailableError, match=r"default_device: .*no_float64.*'float64'"):
        xg.default_device(strict, device="no_float64", dtype="float64")
    with pytest.raises(DTypeUnavailableError, match=r"no_float64.*'float64'"):
        xg.set_default_policy(strict, device="no_float64", dtype="float64")
    assert xg.current_policy().xp.__name__ == "array_api_compat.numpy"


def test_no_float64_defaults_to_float32_and_trains() -> None:
    model = _model_on("no_float64", dtype=None)  # type: ignore[arg-type]
    assert {p.dtype for p in model.parameters()} == {xg.float32}
    opt = xg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _step(model, opt, *_batch(NO_F64))
    assert {p.grad.dtype for p in model.parameters()} == {xg.float32}
    g = xg.grad(lambda x: xg.sum(xg.sin(x) ** 2))(_on(NO_F64, [0.5, 1.0], dtype=strict.float32))
    assert g.dtype == strict.float32 and g.device == NO_F64


def test_moving_float64_to_no_float64_fails_clearly() -> None:
    x = xg.asarray(_on(D1, [1.0]))
    with pytest.raises(DTypeUnavailableError, match=r"^to_device: .*no_float64.*'float64'"):
        x.to_device("no_float64")
    model = _model_on(D1, dtype="float64")
    with pytest.raises(DTypeUnavailableError, match=r"^to: .*no_float64.*'float64'"):
        model.to(device="no_float64")
    assert {p.device for p in model.parameters()} == {D1}  # nothing moved
    # casting while moving works: the cast happens before the move
    model.to(device="no_float64", dtype="float32")
    assert {(p.device, p.dtype) for p in model.parameters()} == {(NO_F64, xg.float32)}
    assert xg.astype(x, xg.float32).to_device(NO_F64).device == NO_F64


def test_no_x64_device_trains_with_int32_targets() -> None:
    # JAX-like: 32-bit defaults; array-api-strict's own argmax/argsort/nonzero produce
    # int64 there and fail, so rules that index with positions do too (documented)
    model = _model_on("no_x64", dtype=None)  # type: ignore[arg-type]
    X, y = _batch(strict.Device("no_x64"), strict.int32)
    assert y.dtype == xg.int32
    loss = _step(model, xg.optim.Adam(model.parameters(), lr=0.1), X, y)
    assert loss.dtype == xg.float32
