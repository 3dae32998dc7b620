"""The namespace of Tensors is xpgrad's, bound to their library and device.

Array-API code that creates arrays (``xp.asarray(2.0)``, ``xp.zeros(n)``) inside a
differentiated function gets them next to its inputs on every backend, with no
``default_device`` block. Every test here runs on every backend of the fixture
(strict_device1 included: an array made on the default device would meet the test
arrays on device1 and raise) and uses no ``default_device`` wrapper for the device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import array_api_compat
import numpy as np
import pytest

import xpgrad as xg
from xpgrad._bound import BoundNamespace
from xpgrad._dispatch import backend_namespace, public_namespace

from ._util import to_numpy


def _bound(backend: Any, a: Any = None) -> tuple[Any, Any]:
    t = xg.asarray(backend.asarray(np.ones(3) if a is None else a))
    return t, xg.array_namespace(t)


def _same_place(r: Any, t: Any) -> None:
    assert isinstance(r, xg.Tensor)
    assert type(r.data) is type(t.data), (type(r.data), type(t.data))
    assert array_api_compat.device(r.data) == array_api_compat.device(t.data)


def _float_default(t: Any) -> str:
    xp = public_namespace(backend_namespace(t.data))
    info = xp.__array_namespace_info__()
    return xg.dtype_name(info.default_dtypes(device=array_api_compat.device(t.data))["real floating"])


def test_the_issue_example(backend: Any) -> None:
    def f(a: Any) -> Any:
        xp = xg.array_namespace(a)
        return xp.sum(a * xp.asarray(2.0))

    x = backend.asarray(np.ones(3))
    g = xg.grad(f)(x)
    assert type(g) is type(x)
    np.testing.assert_array_equal(to_numpy(g), [2.0, 2.0, 2.0])
    # and the same code on raw NumPy arrays (a raw array_api_strict array on device1 would
    # meet xp.asarray(2.0) on the library's default device: array-api-strict's own rule)
    assert float(f(np.ones(3))) == 6.0


# name -> (call on the bound namespace xp and an input Tensor t, floating result?)
CREATION: dict[str, tuple[Callable[[Any, Any], Any], bool]] = {
    "asarray_float": (lambda xp, t: xp.asarray(2.0), True),
    "asarray_list": (lambda xp, t: xp.asarray([1.0, 2.0]), True),
    "asarray_int": (lambda xp, t: xp.asarray([1, 2]), False),
    "asarray_numpy_array": (lambda xp, t: xp.asarray(np.arange(3.0)), False),
    "tensor": (lambda xp, t: xp.tensor([1.0]), True),
    "zeros": (lambda xp, t: xp.zeros((2, 2)), True),
    "ones": (lambda xp, t: xp.ones(3), True),
    "empty": (lambda xp, t: xp.empty(2), True),
    "full": (lambda xp, t: xp.full(2, 1.5), True),
    "full_int": (lambda xp, t: xp.full(2, 7), False),
    "eye": (lambda xp, t: xp.eye(3, k=1), True),
    "arange": (lambda xp, t: xp.arange(4), False),
    "arange_float": (lambda xp, t: xp.arange(0.0, 1.0, 0.25), True),
    "linspace": (lambda xp, t: xp.linspace(0, 1, 5), True),
    "zeros_like": (lambda xp, t: xp.zeros_like(t), False),
    "ones_like": (lambda xp, t: xp.ones_like(t), False),
    "empty_like": (lambda xp, t: xp.empty_like(t), False),
    "full_like": (lambda xp, t: xp.full_like(t, 3.0), False),
    "from_dlpack": (lambda xp, t: xp.from_dlpack(np.arange(3.0)), False),
    "random.normal": (lambda xp, t: xp.random.normal(shape=(2,)), True),
    "random.uniform": (lambda xp, t: xp.random.uniform((2,), low=-1.0, high=1.0), True),
    "random.integers": (lambda xp, t: xp.random.integers(0, 5, (3,)), False),
    "random.bernoulli": (lambda xp, t: xp.random.bernoulli(0.5, (3,)), True),
    "random.permutation": (lambda xp, t: xp.random.permutation(4), False),
    "random.choice": (lambda xp, t: xp.random.choice(5, (2,)), False),
    "fft.fftfreq": (lambda xp, t: xp.fft.fftfreq(4), True),
    "fft.rfftfreq": (lambda xp, t: xp.fft.rfftfreq(4), True),
}


@pytest.mark.parametrize("name", list(CREATION))
def test_creation_lands_on_the_inputs_library_and_device(name: str, backend: Any) -> None:
    make, floating = CREATION[name]
    t, xp = _bound(backend)
    r = make(xp, t)
    _same_place(r, t)
    if floating:  # the bound library's default float dtype (torch: float32), not the policy library's
        assert xg.dtype_name(r.dtype) == _float_default(t), (name, r.dtype)


def test_the_policy_dtype_still_applies(backend: Any) -> None:
    t, xp = _bound(backend)
    with xg.default_device(dtype="float32"):  # dtype only: the namespace and device come from t
        for r in (xp.zeros(2), xp.asarray(1.5), xp.linspace(0, 1, 3), xp.random.normal(shape=(2,))):
            _same_place(r, t)
            assert r.dtype == xg.float32
    assert xp.zeros(2, dtype=xg.float32).dtype == xg.float32  # the call's dtype first


def test_an_explicit_device_wins(backend: Any) -> None:
    t, xp = _bound(backend)
    dev = array_api_compat.device(t.data)
    _same_place(xp.zeros(2, device=dev), t)
    _same_place(xp.asarray([1.0], device=dev), t)


def test_asarray_keeps_tensors_and_moves_foreign_arrays(backend: Any) -> None:
    t, xp = _bound(backend)
    assert xp.asarray(t) is t
    v = xg.asarray(backend.asarray(np.arange(3.0)), requires_grad=True)
    assert xp.asarray(v) is v and v.requires_grad
    r = xp.asarray(np.array([[1.0, 2.0]]), dtype=xg.float32)
    _same_place(r, t)
    assert r.dtype == xg.float32 and r.shape == (1, 2)
    np.testing.assert_array_equal(to_numpy(r), [[1.0, 2.0]])


def test_a_bound_namespace_is_cached_equal_and_says_what_it_is(backend: Any) -> None:
    t, xp = _bound(backend)
    u = xg.asarray(backend.asarray(np.zeros((2, 2))))
    assert xg.array_namespace(u) is xp and u.__array_namespace__() is xp
    assert xp == xg.array_namespace(t) and hash(xp) == hash(xg.array_namespace(u))
    assert isinstance(xp, BoundNamespace) and xp.__name__ == "xpgrad"
    lib = {"numpy": "numpy", "array_api_strict": "array_api_strict", "torch": "torch", "jax": "jax",
           "dask": "dask", "cupy": "cupy"}[backend.name]
    assert f"bound to {lib} on " in repr(xp)
    assert xp.__array_api_version__ == xg.__array_api_version__
    assert xp.float32 is xg.float32 and xp.linalg is xg.linalg and xp.matmul is xg.matmul
    assert "sin" in dir(xp)


def test_info_describes_the_bound_library_and_device(backend: Any) -> None:
    t, xp = _bound(backend)
    info = xp.__array_namespace_info__()
    dev = array_api_compat.device(t.data)
    assert info.default_device() == dev
    assert dev in info.devices()
    assert xg.dtype_name(info.default_dtypes()["real floating"]) == _float_default(t)
    own = public_namespace(backend_namespace(t.data)).__array_namespace_info__()
    assert set(info.dtypes()) == set(own.dtypes(device=dev))


def test_seeded_draws_continue_the_policy_stream(backend: Any) -> None:
    _, xp = _bound(backend)
    with xg.default_device(seed=5):
        a = to_numpy(xp.random.normal(shape=(4,)))
        b = to_numpy(xp.random.normal(shape=(4,)))
    with xg.default_device(seed=5):
        a0 = to_numpy(xg.random.normal(shape=(4,)))
        b0 = to_numpy(xg.random.normal(shape=(4,)))
    assert not np.array_equal(a, b)  # one stream, not a fresh generator per call
    np.testing.assert_allclose(a, a0, rtol=1e-6)  # the same numbers on every backend
    np.testing.assert_allclose(b, b0, rtol=1e-6)


def _loss_with_constants(w: Any) -> Any:
    xp = xg.array_namespace(w) if isinstance(w, xg.Tensor) else array_api_compat.array_namespace(w)
    n = w.shape[0]
    grid = xp.linspace(0.0, 1.0, n, dtype=w.dtype)
    ramp = xp.astype(xp.arange(n), w.dtype)
    m = xp.eye(n, dtype=w.dtype) + xp.full((n, n), 0.5, dtype=w.dtype)
    z = xp.zeros(n, dtype=w.dtype) + xp.ones(n, dtype=w.dtype)
    c = xp.asarray([1.0, -2.0, 3.0], dtype=w.dtype)
    return xp.sum((m @ w) * grid + ramp * w**2 + z * c * w)


def test_gradients_through_created_constants_match_numpy(backend: Any) -> None:
    w = np.array([0.3, -1.2, 2.0])
    want = xg.grad(_loss_with_constants)(w)
    got = xg.grad(_loss_with_constants)(backend.asarray(w))
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-12)
    # second order: the inner grad's Tensors give the bound namespace again
    hess = xg.hessian(_loss_with_constants)(backend.asarray(w))
    np.testing.assert_allclose(to_numpy(hess), xg.hessian(_loss_with_constants)(w), rtol=1e-12)


def test_an_optimizer_loop_with_created_constants(backend: Any) -> None:
    # 100 steps of plain-array-API code that makes its constants inside the loss
    w = xg.asarray(backend.asarray(np.array([1.0, -1.0, 0.5])), requires_grad=True)
    opt = xg.optim.SGD([w], lr=0.25)
    for _ in range(100):
        opt.zero_grad()
        xp = xg.array_namespace(w)
        loss = xp.sum((w - xp.asarray([0.5, 0.25, -0.5], dtype=w.dtype)) ** 2)
        loss.backward()
        opt.step()
    np.testing.assert_allclose(to_numpy(w.detach()), [0.5, 0.25, -0.5], atol=1e-8)


def test_mixed_libraries_and_devices_still_raise() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(xg.NamespaceMismatchError, match=r"numpy\.ndarray and torch\.Tensor"):
        xg.array_namespace(xg.asarray(np.ones(2)), xg.asarray(torch.ones(2)))


def test_two_devices_of_one_library_raise() -> None:
    import array_api_strict as xps

    a = xg.asarray(xps.asarray([1.0], device=xps.Device("device1")))
    b = xg.asarray(xps.asarray([1.0], device=xps.Device("device2")))
    with pytest.raises(xg.DeviceMismatchError, match=r"device1.*device2"):
        xg.array_namespace(a, b)
    assert xg.array_namespace(a) != xg.array_namespace(b)


def test_compat_resolves_each_tensor_by_its_own_library() -> None:
    # array_api_compat caches namespaces by type; every Tensor has one type, so it must ask
    # each Tensor (SciPy and scikit-learn go through array_api_compat.array_namespace)
    import array_api_strict as xps

    a = xg.asarray(np.ones(2))
    b = xg.asarray(xps.ones(2, device=xps.Device("device1")))
    for _ in range(2):
        xa, xb = array_api_compat.array_namespace(a), array_api_compat.array_namespace(b)
        assert xa.binding[0] is array_api_compat.numpy and xb.binding == (xps, xps.Device("device1"))
        assert type(xb.zeros(1).data) is type(b.data)
        assert xb.zeros(1).device == xps.Device("device1")


def test_the_policy_still_decides_where_no_array_says() -> None:
    import array_api_strict as xps

    t = xg.asarray(np.ones(2))
    xp = xg.array_namespace(t)
    with xg.default_device("array_api_strict"):
        assert isinstance(xg.zeros(2).data, type(xps.zeros(1)))  # the unbound namespace: the policy
        assert isinstance(xp.zeros(2).data, np.ndarray)  # the bound one: the arrays
        assert xg.current_policy().xp is xps  # and the bound call left the policy alone
