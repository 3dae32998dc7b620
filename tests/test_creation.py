"""Creation functions: where arrays go (explicit > input array > policy), default dtypes
per backend, values against the backend itself, array-api-strict's fake devices,
the namespace constants and ``__array_namespace_info__``."""

from __future__ import annotations

import math
from typing import Any

import array_api_compat
import numpy as np
import pytest
from array_api_compat import device as _device

import xpgrad as xg

FLOAT_MAKERS = {
    "zeros": lambda **kw: xg.zeros((2, 3), **kw),
    "ones": lambda **kw: xg.ones(3, **kw),
    "empty": lambda **kw: xg.empty((2,), **kw),
    "eye": lambda **kw: xg.eye(3, **kw),
    "linspace": lambda **kw: xg.linspace(0, 1, 4, **kw),
    "full": lambda **kw: xg.full((2,), 0.5, **kw),
    "arange": lambda **kw: xg.arange(0.0, 2.0, 0.5, **kw),
    "asarray": lambda **kw: xg.asarray([1.0, 2.0], **kw),
}
LIKE = {
    "zeros_like": lambda x, **kw: xg.zeros_like(x, **kw),
    "ones_like": lambda x, **kw: xg.ones_like(x, **kw),
    "empty_like": lambda x, **kw: xg.empty_like(x, **kw),
    "full_like": lambda x, **kw: xg.full_like(x, 3, **kw),
}


def _info(backend: Any) -> Any:
    return backend.xp.__array_namespace_info__()


def _default(backend: Any, key: str) -> str:
    return xg.dtype_name(_info(backend).default_dtypes()[key])


def _same_library(t: xg.Tensor, backend: Any) -> None:
    ref = backend.xp.zeros(1)
    assert array_api_compat.array_namespace(t.data) is array_api_compat.array_namespace(ref)


# ---------------------------------------------------------------- defaults from the policy
@pytest.mark.parametrize("name", sorted(FLOAT_MAKERS))
def test_floating_default_is_the_backends(backend: Any, name: str) -> None:
    with backend.policy():
        t = FLOAT_MAKERS[name]()
    _same_library(t, backend)
    assert t.dtype.name == _default(backend, "real floating")


@pytest.mark.parametrize("name", sorted(FLOAT_MAKERS))
def test_policy_dtype_applies_to_floating_results(backend: Any, name: str) -> None:
    with backend.policy(dtype="float32"):
        t = FLOAT_MAKERS[name]()
    _same_library(t, backend)
    assert t.dtype == xg.float32


def test_integer_and_bool_results_keep_their_dtypes(backend: Any) -> None:
    integral = _default(backend, "integral")
    with backend.policy(dtype="float32"):
        assert xg.arange(3).dtype.name == integral
        assert xg.full(2, 7).dtype.name == integral
        assert xg.asarray([1, 2]).dtype.name == integral
        assert xg.full(2, True).dtype == xg.bool
        assert xg.full(2, 1j).dtype == xg.complex64
        assert xg.asarray([1j]).dtype == xg.complex64


def test_numpy_defaults_to_float64_and_torch_to_float32() -> None:
    assert xg.zeros(2).dtype == xg.float64
    assert xg.arange(0.0, 1.0).dtype == xg.float64
    pytest.importorskip("torch")
    with xg.default_device("torch"):
        assert xg.zeros(2).dtype == xg.float32
        assert xg.eye(2).dtype == xg.float32
        assert xg.full(2, 1.5).dtype == xg.float32
        assert xg.arange(3).dtype == xg.int64


def test_the_policy_is_read_at_call_time() -> None:
    with xg.default_device(dtype="float32"):
        assert xg.ones(1).dtype == xg.float32
    assert xg.ones(1).dtype == xg.float64


# ---------------------------------------------------------------- explicit arguments win
@pytest.mark.parametrize("spelling", ["xpgrad", "name", "backend"])
def test_explicit_dtype_beats_the_policy(backend: Any, spelling: str) -> None:
    dt = {"xpgrad": xg.int32, "name": "int32", "backend": backend.xp.int32}[spelling]
    with backend.policy(dtype="float32"):
        for make in (lambda: xg.zeros(2, dtype=dt), lambda: xg.ones(2, dtype=dt), lambda: xg.full(2, 1, dtype=dt),
                     lambda: xg.eye(2, dtype=dt), lambda: xg.arange(3, dtype=dt), lambda: xg.asarray([1], dtype=dt),
                     lambda: xg.empty(2, dtype=dt)):
            assert make().dtype == xg.int32


def test_a_dtype_of_another_library_is_translated() -> None:
    with xg.default_device("array_api_strict"):
        t = xg.zeros(2, dtype=np.float32)
    assert t.dtype == xg.float32
    assert type(t.data).__module__.startswith("array_api_strict")


def test_explicit_device_string_and_object() -> None:
    import array_api_strict as strict

    with xg.default_device("array_api_strict", device="device1"):
        assert xg.zeros(2).device == strict.Device("device1")
        assert xg.zeros(2, device="device2").device == strict.Device("device2")
        assert xg.arange(2, device=strict.Device("device2")).device == strict.Device("device2")


def test_a_device_object_of_another_library_selects_it() -> None:
    torch = pytest.importorskip("torch")
    t = xg.asarray(torch.ones(2))
    z = xg.zeros((3,), dtype=t.dtype, device=t.device)  # what rules write under create_graph
    assert isinstance(z.data, torch.Tensor)
    assert isinstance(xg.full((2,), 1.0, device=t.device).data, torch.Tensor)


def test_unknown_device_string() -> None:
    with pytest.raises(xg.UnknownNameError, match="no device 'device9'"), xg.default_device("array_api_strict"):
        xg.zeros(2, device="device9")


# ---------------------------------------------------------------- input arrays beat the policy
@pytest.mark.parametrize("name", sorted(LIKE))
def test_like_follows_the_input_not_the_policy(backend: Any, name: str) -> None:
    x = xg.asarray(backend.asarray(np.array([[1.0, 2.0]])), requires_grad=True)
    other = "numpy" if backend.name != "numpy" else "array_api_strict"
    with xg.default_device(other, dtype="float32"):
        out = LIKE[name](x)
        out_int = LIKE[name](x, dtype="int32")
    _same_library(out, backend)
    assert out.dtype == xg.float64
    assert out.shape == (1, 2)
    assert out.device == x.device
    assert out_int.dtype == xg.int32
    assert not out.requires_grad and out.grad_fn is None  # a constant


def test_like_values(backend: Any) -> None:
    x = xg.asarray(backend.asarray(np.array([1.0, 2.0])))
    np.testing.assert_array_equal(backend.to_numpy(xg.zeros_like(x)), [0.0, 0.0])
    np.testing.assert_array_equal(backend.to_numpy(xg.ones_like(x)), [1.0, 1.0])
    np.testing.assert_array_equal(backend.to_numpy(xg.full_like(x, 2.5)), [2.5, 2.5])


def test_asarray_of_an_array_keeps_its_library(backend: Any) -> None:
    a = backend.asarray(np.array([1.0, 2.0]))
    with xg.default_device("numpy" if backend.name != "numpy" else "array_api_strict", dtype="float32"):
        t = xg.asarray(a)
        t32 = xg.asarray(a, dtype=xg.float32)
    _same_library(t, backend)
    assert t.dtype == xg.float64  # the input's dtype, not the policy's
    assert t32.dtype == xg.float32
    _same_library(t32, backend)


def test_asarray_of_a_tensor_is_the_tensor() -> None:
    x = xg.asarray([1.0, 2.0], requires_grad=True)
    assert xg.asarray(x) is x
    y = xg.asarray(x, dtype="float32")
    assert y.dtype == xg.float32 and y.requires_grad  # astype is differentiable
    c = xg.asarray(x, copy=True)
    assert c is not x and c.requires_grad
    with pytest.raises(xg.XpgradValueError, match="copy=False"):
        xg.asarray(x, dtype="float32", copy=False)


def test_asarray_of_nested_tensors() -> None:
    t = xg.asarray([xg.asarray(1.0), xg.asarray(2.0)])
    assert t.shape == (2,) and t.dtype == xg.float64


def test_strict_like_and_asarray_keep_the_input_device() -> None:
    import array_api_strict as strict

    with xg.default_device("array_api_strict", device="device2"):
        x = xg.ones(2)
    with xg.default_device("array_api_strict", device="device1"):
        for make in LIKE.values():
            assert make(x).device == strict.Device("device2")
        assert xg.asarray(x).device == strict.Device("device2")
        assert xg.asarray(x.data).device == strict.Device("device2")
        assert xg.tril(xg.ones((2, 2), device="device2")).device == strict.Device("device2")
        assert xg.zeros_like(x, device="device1").device == strict.Device("device1")
        assert xg.asarray(x, device="device1").device == strict.Device("device1")
        assert xg.asarray([1.0]).device == strict.Device("device1")


# ---------------------------------------------------------------- array-api-strict's no_float64
def test_no_float64_device_defaults_to_float32() -> None:
    with xg.default_device("array_api_strict", device="no_float64"):
        for name, make in FLOAT_MAKERS.items():
            assert make().dtype == xg.float32, name


@pytest.mark.parametrize("name", sorted(FLOAT_MAKERS))
def test_float64_on_no_float64_fails_clearly(name: str) -> None:
    with xg.default_device("array_api_strict"), pytest.raises(xg.DTypeUnavailableError,
                                                              match=f"{name}: .*no_float64.*float64"):
        FLOAT_MAKERS[name](dtype=xg.float64, device="no_float64")


def test_policy_float64_with_a_no_float64_device_fails_clearly() -> None:
    with xg.default_device("array_api_strict", dtype="float64"):
        with pytest.raises(xg.DTypeUnavailableError, match="zeros"):
            xg.zeros(2, device="no_float64")
        with pytest.raises(xg.DTypeUnavailableError, match="asarray"):
            xg.asarray([1.0], device="no_float64")
        assert xg.asarray([1], device="no_float64").dtype == xg.int64  # integers are not affected
    with pytest.raises(xg.DTypeUnavailableError), xg.default_device("array_api_strict", device="no_float64",
                                                                    dtype="float64"):
        pass


def test_like_float64_on_no_float64_fails_clearly() -> None:
    with xg.default_device("array_api_strict"):
        x = xg.ones(2, dtype=xg.float64)
    with pytest.raises(xg.DTypeUnavailableError, match="zeros_like"):
        xg.zeros_like(x, device="no_float64")


# ---------------------------------------------------------------- values against the backend
def test_values_match_the_backend(backend: Any) -> None:
    xp = backend.xp
    with backend.policy():
        pairs = [
            (xg.arange(1, 7, 2), xp.arange(1, 7, 2)),
            (xg.arange(5), xp.arange(5)),
            (xg.arange(0.0, 1.0, 0.25), xp.arange(0.0, 1.0, 0.25)),
            (xg.eye(3, k=-1), xp.eye(3, k=-1)),
            (xg.linspace(0, 1, 5, endpoint=False), xp.linspace(0, 1, 5, endpoint=False)),
            (xg.linspace(-1.0, 1.0, 3), xp.linspace(-1.0, 1.0, 3)),
            (xg.full((2, 3), 2.5), xp.full((2, 3), 2.5)),
            (xg.zeros((2, 0)), xp.zeros((2, 0))),
            (xg.ones(()), xp.ones(())),
        ]
    for ours, theirs in pairs:
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_array_equal(backend.to_numpy(ours), backend.to_numpy(theirs))


def test_eye_rectangular(backend: Any) -> None:
    if backend.name == "dask":
        pytest.xfail("dask.array.eye(N, M=...) with N != M builds a broken graph (dask bug)")
    with backend.policy():
        got = xg.eye(3, 4, k=1)
    np.testing.assert_array_equal(backend.to_numpy(got), np.eye(3, 4, k=1))


def test_complex_linspace(backend: Any) -> None:
    if backend.name == "dask":
        pytest.xfail("dask.array.linspace does not take complex ends")
    with backend.policy(dtype="float32"):
        got = xg.linspace(0j, 1j, 3)
    assert got.dtype == xg.complex64
    np.testing.assert_allclose(backend.to_numpy(got), [0, 0.5j, 1j])


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_tril_triu_values(backend: Any, k: int) -> None:
    a = np.arange(24.0).reshape(2, 3, 4)
    x = xg.asarray(backend.asarray(a))
    np.testing.assert_array_equal(backend.to_numpy(xg.tril(x, k=k)), np.tril(a, k=k))
    np.testing.assert_array_equal(backend.to_numpy(xg.triu(x, k=k)), np.triu(a, k=k))


def test_tril_triu_gradients() -> None:
    g = xg.grad(lambda x: xg.sum(xg.tril(x, k=-1) * 2.0 + xg.triu(x)))(np.ones((3, 3)))
    np.testing.assert_array_equal(g, np.tril(np.full((3, 3), 2.0), k=-1) + np.triu(np.ones((3, 3))))


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid_values_and_gradient(backend: Any, indexing: str) -> None:
    a, b, c = np.arange(3.0), np.arange(2.0) + 10, np.arange(4.0) - 5
    outs = xg.meshgrid(*(xg.asarray(backend.asarray(v)) for v in (a, b, c)), indexing=indexing)
    assert isinstance(outs, tuple)
    for got, want in zip(outs, np.meshgrid(a, b, c, indexing=indexing), strict=True):
        np.testing.assert_array_equal(backend.to_numpy(got), want)

    def loss(a: Any, b: Any, c: Any) -> Any:
        x, y, z = xg.meshgrid(a, b, c, indexing=indexing)
        return xg.sum(x * 1.0 + y * 2.0 + z * 3.0)

    ga, gb, gc = xg.grad(loss, argnums=(0, 1, 2))(*(backend.asarray(v) for v in (a, b, c)))
    n = 3 * 2 * 4
    for g, v, w in ((ga, a, 1.0), (gb, b, 2.0), (gc, c, 3.0)):
        np.testing.assert_allclose(backend.to_numpy(g), np.full(v.shape, w * n / v.size))


def test_meshgrid_errors_and_edge_cases() -> None:
    with pytest.raises(xg.XpgradValueError, match="indexing must be 'xy' or 'ij', got 'yx'"):
        xg.meshgrid(xg.arange(2.0), indexing="yx")
    with pytest.raises(xg.XpgradValueError, match="1-D"):
        xg.meshgrid(xg.ones((2, 2)))
    assert xg.meshgrid() == ()
    (only,) = xg.meshgrid(xg.arange(3.0))
    assert only.shape == (3,)


def test_from_dlpack(backend: Any) -> None:
    src = np.arange(3.0)
    if backend.name == "dask":
        pytest.importorskip("dask")
    with backend.policy():
        t = xg.from_dlpack(src)
    _same_library(t, backend)
    np.testing.assert_array_equal(backend.to_numpy(t), src)


def test_from_dlpack_across_libraries() -> None:
    torch = pytest.importorskip("torch")
    with xg.default_device("torch"):
        t = xg.from_dlpack(xg.asarray(np.arange(3.0)))
    assert isinstance(t.data, torch.Tensor) and t.dtype == xg.float64


def test_tensor_copies() -> None:
    a = np.ones(2)
    t = xg.tensor(a)
    t.data[0] = 5.0
    assert a[0] == 1.0


# ---------------------------------------------------------------- constants and info
def test_constants() -> None:
    assert xg.e == math.e and xg.pi == math.pi
    assert xg.inf == math.inf and math.isnan(xg.nan)
    assert xg.newaxis is None
    assert xg.asarray([1.0, 2.0])[xg.newaxis].shape == (1, 2)


def test_info_tells_the_truth_about_the_policy_backend(backend: Any) -> None:
    theirs = _info(backend)
    with backend.policy():
        ours = xg.__array_namespace_info__()
    expected = dict(theirs.capabilities())
    if backend.name == "dask":
        # xpgrad cannot differentiate through (nor assign back) Dask's unknown-size mask
        # results without computing, so it says so (array-API code then takes where paths)
        expected.update({"boolean indexing": False, "data-dependent shapes": False})
    assert ours.capabilities() == expected
    # the policy's device: the library's default, or the fixture's test device
    want = theirs.default_device() if backend.device is None else _device(backend.asarray(np.zeros(1)))
    assert ours.default_device() == want
    assert {k: v.name for k, v in ours.default_dtypes().items()} == {
        k: xg.dtype_name(v) for k, v in theirs.default_dtypes().items()}
    assert ours.devices() == tuple(d for d in theirs.devices() if d is not None)  # a tuple, as the backend gives
    for kind in (None, "real floating", "integral", ("bool", "complex floating")):
        got = ours.dtypes(kind=kind)
        assert sorted(got) == sorted(theirs.dtypes(kind=kind))
        assert all(v is getattr(xg, k) for k, v in got.items())


def test_info_reports_the_policy_device_and_dtype() -> None:
    import array_api_strict as strict

    with xg.default_device("array_api_strict", device="device1", dtype="float32"):
        info = xg.__array_namespace_info__()
    assert info.default_device() == strict.Device("device1")
    assert info.default_dtypes()["real floating"] is xg.float32
    assert info.default_dtypes()["complex floating"] is xg.complex64
    assert info.default_dtypes()["integral"] is xg.int64
    assert "float64" not in info.dtypes(device="no_float64")
    with xg.default_device("array_api_strict", device="no_float64"):
        assert xg.__array_namespace_info__().default_dtypes()["real floating"] is xg.float32


def test_info_is_the_tensors_namespace_info() -> None:
    x = xg.asarray([1.0])
    assert x.__array_namespace__().__array_namespace_info__().default_dtypes()["indexing"] is xg.int64
