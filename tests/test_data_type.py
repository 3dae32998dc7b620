"""Data type functions: ``astype`` (dtype spellings, gradients across casts, the refused
complex-to-real cast, device moves) and the queries ``result_type``, ``can_cast``,
``finfo``, ``iinfo``, ``isdtype`` against the backend's own answers."""

from __future__ import annotations

import itertools
from typing import Any

import array_api_strict as strict
import numpy as np
import pytest

import xpgrad as xg
from xpgrad._dtypes import DTYPE_NAMES

KINDS = ("bool", "signed integer", "unsigned integer", "integral", "real floating", "complex floating", "numeric")


def _names(backend: Any, kind: str | None = None) -> list[str]:
    return sorted(backend.xp.__array_namespace_info__().dtypes(kind=kind))


# ---------------------------------------------------------------- astype
@pytest.mark.parametrize(("src", "dst"), [("float64", "float32"), ("float32", "float64")])
def test_astype_between_floats_differentiates(backend: Any, src: str, dst: str) -> None:
    x = backend.asarray(np.array([1.5, -2.0], dtype=src))

    def loss(x: Any) -> Any:
        y = xg.astype(x, dst)
        assert y.dtype.name == dst
        return xg.sum(y * y)

    g = xg.grad(loss)(x)
    assert xg.dtype_name(g.dtype) == src
    np.testing.assert_allclose(backend.to_numpy(g), [3.0, -4.0])


def test_astype_real_to_complex_gradient_is_real(backend: Any) -> None:
    x = backend.asarray(np.array([1.0, 2.0]))
    g = xg.grad(lambda x: xg.real(xg.sum(xg.astype(x, xg.complex128) * (2 + 3j))))(x)
    assert xg.dtype_name(g.dtype) == "float64"
    np.testing.assert_allclose(backend.to_numpy(g), [2.0, 2.0])


def test_astype_complex_to_real_is_refused(backend: Any) -> None:
    z = xg.asarray(backend.asarray(np.array([1 + 2j])))
    with pytest.raises(xg.XpgradTypeError, match=r"astype: casting complex128 to float64 .*real\(x\)"):
        xg.astype(z, xg.float64)
    assert xg.astype(xg.real(z), xg.float64).dtype == xg.float64
    assert xg.astype(z, "complex64").dtype == xg.complex64


@pytest.mark.parametrize("spelling", ["xpgrad", "name", "backend", "numpy"])
def test_astype_dtype_spellings(backend: Any, spelling: str) -> None:
    dt = {"xpgrad": xg.float32, "name": "float32", "backend": backend.xp.float32, "numpy": np.float32}[spelling]
    x = xg.asarray(backend.asarray(np.array([1.0, 2.0])))
    y = xg.astype(x, dt)
    assert y.dtype == xg.float32
    np.testing.assert_array_equal(backend.to_numpy(y), [1.0, 2.0])


def test_astype_to_integer_is_a_constant(backend: Any) -> None:
    x = xg.asarray(backend.asarray(np.array([1.7, -2.2])), requires_grad=True)
    y = xg.astype(x, xg.int32)
    assert y.dtype == xg.int32 and not y.requires_grad
    np.testing.assert_array_equal(backend.to_numpy(y), [1, -2])


def test_astype_unknown_dtype() -> None:
    with pytest.raises(xg.UnknownNameError, match="astype: unknown dtype name 'float8'; valid names"):
        xg.astype(xg.ones(2), "float8")
    with pytest.raises(xg.XpgradTypeError, match="astype: 3 is not a dtype"):
        xg.astype(xg.ones(2), 3)


def test_astype_second_order() -> None:
    def f(x: Any) -> Any:
        return xg.sum(xg.astype(x, xg.float32) ** 3)

    h = xg.grad(lambda x: xg.sum(xg.grad(f)(x)))(np.array([1.0, 2.0]))
    np.testing.assert_allclose(h, [6.0, 12.0])


def test_astype_with_device_moves_the_gradient_back() -> None:
    with xg.default_device("array_api_strict", device="device1"):
        x = xg.asarray([1.0, 2.0], requires_grad=True)
    y = xg.astype(x, xg.float32, device="device2")
    assert y.device == strict.Device("device2") and y.dtype == xg.float32
    (y * y).sum().backward()
    assert x.grad is not None
    assert x.grad.device == strict.Device("device1") and x.grad.dtype == xg.float64
    np.testing.assert_allclose(np.asarray(x.grad.to_device(strict.Device("CPU_DEVICE")).data), [2.0, 4.0])


def test_astype_copy_false_same_dtype() -> None:
    a = np.ones(2)
    assert xg.astype(a, xg.float64, copy=False).data is a


# ---------------------------------------------------------------- result_type, can_cast
def test_result_type_matches_the_backend_for_arrays(backend: Any) -> None:
    names = _names(backend, ("real floating", "complex floating", "signed integer"))
    for a, b in itertools.combinations_with_replacement(names, 2):
        xa = backend.asarray(np.zeros(1, dtype=a))
        xb = backend.asarray(np.zeros(1, dtype=b))
        try:
            want = xg.dtype_name(backend.xp.result_type(xa, xb))
        except TypeError:
            with pytest.raises(TypeError):
                xg.result_type(xg.asarray(xa), xb)
            continue
        assert xg.result_type(xg.asarray(xa), xb).name == want
        with backend.policy():  # dtypes alone: asked in the policy's library
            got = xg.result_type(a, getattr(xg, b)).name
        assert got == xg.dtype_name(backend.xp.result_type(getattr(backend.xp, a), getattr(backend.xp, b)))


def test_result_type_standard_promotions() -> None:
    assert xg.result_type(xg.float32, xg.float64) is xg.float64
    assert xg.result_type("int8", xg.uint8) is xg.int16
    assert xg.result_type(xg.float32, xg.complex64) is xg.complex64
    assert xg.result_type(np.float32, "float32") is xg.float32
    assert xg.result_type(xg.bool, xg.bool) is xg.bool


def test_result_type_with_python_scalars(backend: Any) -> None:
    x32 = xg.asarray(backend.asarray(np.ones(1, dtype=np.float32)))
    assert xg.result_type(x32, 2.0) is xg.float32
    assert xg.result_type(x32, 2) is xg.float32
    xi = xg.asarray(backend.asarray(np.ones(1, dtype=np.int32)))
    assert xg.result_type(xi, 2) is xg.int32


def test_result_type_needs_an_argument() -> None:
    with pytest.raises(xg.XpgradTypeError, match="at least one"):
        xg.result_type()


def test_can_cast_matches_the_backend(backend: Any) -> None:
    names = _names(backend, ("real floating", "complex floating", "integral", "bool"))
    for a, b in itertools.product(names, repeat=2):
        want = bool(backend.xp.can_cast(getattr(backend.xp, a), getattr(backend.xp, b)))
        with backend.policy():  # dtypes alone: asked in the policy's library
            assert xg.can_cast(getattr(xg, a), b) is want, (a, b)
    x = xg.asarray(backend.asarray(np.ones(1, dtype=np.int8)))
    assert xg.can_cast(x, xg.int16) is True
    assert xg.can_cast(x.data, xg.uint8) is bool(backend.xp.can_cast(backend.xp.int8, backend.xp.uint8))


def test_can_cast_standard_answers() -> None:
    assert xg.can_cast(xg.float32, xg.float64)
    assert not xg.can_cast(xg.float64, xg.float32)
    assert not xg.can_cast(xg.complex64, xg.float64)
    with pytest.raises(xg.XpgradTypeError, match="to must be a dtype"):
        xg.can_cast(xg.float32, xg.ones(1))


# ---------------------------------------------------------------- finfo, iinfo
def test_finfo_reports_the_backends_values(backend: Any) -> None:
    for name in _names(backend, ("real floating", "complex floating")):
        with backend.policy():
            ours = xg.finfo(getattr(xg, name))
        theirs = backend.xp.finfo(getattr(backend.xp, name))
        for field in ("bits", "eps", "max", "min", "smallest_normal"):
            assert getattr(ours, field) == getattr(theirs, field), (name, field)
            assert type(getattr(ours, field)) is (int if field == "bits" else float)
        assert ours.dtype is getattr(xg, xg.real_dtype(name))
        arr = xg.asarray(backend.asarray(np.zeros(1, dtype=name)))
        assert xg.finfo(arr) == ours


def test_iinfo_reports_the_backends_values(backend: Any) -> None:
    for name in _names(backend, "integral"):
        with backend.policy():
            ours = xg.iinfo(name)
        theirs = backend.xp.iinfo(getattr(backend.xp, name))
        assert (ours.bits, ours.max, ours.min) == (theirs.bits, theirs.max, theirs.min)
        assert ours.dtype is getattr(xg, name)
    assert xg.iinfo(xg.asarray([1], dtype="int16")).max == 2**15 - 1


def test_finfo_iinfo_refuse_the_wrong_kind() -> None:
    with pytest.raises(xg.XpgradTypeError, match="finfo: int32 is not a floating-point dtype"):
        xg.finfo(xg.int32)
    with pytest.raises(xg.XpgradTypeError, match="iinfo: float32 is not an integer dtype"):
        xg.iinfo(xg.float32)
    with pytest.raises(xg.UnknownNameError, match="finfo: unknown dtype name 'nonsense'"):
        xg.finfo("nonsense")


# ---------------------------------------------------------------- isdtype
@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_isdtype_matches_array_api_strict(name: str) -> None:
    for kind in KINDS:
        assert xg.isdtype(getattr(xg, name), kind) is strict.isdtype(getattr(strict, name), kind), kind
    assert xg.isdtype(name, tuple(KINDS)) is strict.isdtype(getattr(strict, name), tuple(KINDS))


def test_isdtype_spellings_and_dtype_kinds() -> None:
    assert xg.isdtype(np.float32, "real floating")
    assert xg.isdtype(np.dtype("int8"), ("bool", "signed integer"))
    assert xg.isdtype(xg.float32, xg.float32)
    assert xg.isdtype(xg.float32, (xg.float64, "float32"))
    assert not xg.isdtype(xg.float32, xg.float64)
    assert xg.isdtype(xg.asarray([1.0]).dtype, "numeric")
    with pytest.raises(xg.UnknownNameError, match="isdtype: unknown kind 'floating'"):
        xg.isdtype(xg.float32, "floating")
