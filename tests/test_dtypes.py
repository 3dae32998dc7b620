"""Dtypes by name: xg.dtype / dtype_name on every backend, complex/real maps, errors."""

from __future__ import annotations

import pickle
import types
from typing import Any

import array_api_strict as xps
import numpy as np
import pytest

import xpgrad as xg
from xpgrad._dtypes import DTYPE_NAMES

KINDS = {
    "bool": "bool",
    "int8": "signed integer", "int16": "signed integer", "int32": "signed integer", "int64": "signed integer",
    "uint8": "unsigned integer", "uint16": "unsigned integer", "uint32": "unsigned integer",
    "uint64": "unsigned integer",
    "float32": "real floating", "float64": "real floating",
    "complex64": "complex floating", "complex128": "complex floating",
}


def test_thirteen_names() -> None:
    assert set(DTYPE_NAMES) == set(KINDS) and len(DTYPE_NAMES) == 13
    for n in DTYPE_NAMES:
        d = getattr(xg, n)
        assert isinstance(d, xg.DType) and d.name == n and d.kind == KINDS[n]
        assert repr(d) == f"xpgrad.{n}"
        assert pickle.loads(pickle.dumps(d)) is d
        assert xg.dtype(n, xg) is d


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_dtype_on_each_backend(backend: Any, name: str) -> None:
    xp = backend.xp
    if getattr(xp, name, None) is None:
        with pytest.raises(xg.DTypeUnavailableError, match=name):
            xg.dtype(name, xp)
        return
    d = xg.dtype(name, xp)
    assert d == getattr(xp, name)
    # round trips: the namespace's object, xpgrad's object, the name
    assert xg.dtype_name(d) == name
    assert xg.dtype(getattr(xg, name), xp) == d
    assert xg.dtype(d, xp) == d
    info = xp.__array_namespace_info__()
    if name in info.dtypes():
        a = xp.zeros(2, dtype=d)
        assert xg.dtype_name(a.dtype) == name  # the array's spelling of the dtype too
        assert xg.asarray(a).dtype is getattr(xg, name)


def test_namespace_lacking_a_dtype() -> None:
    import array_api_compat.numpy as cnp

    fake = types.ModuleType("fake_xp")
    for n in DTYPE_NAMES:
        if not n.startswith("uint") or n == "uint8":
            setattr(fake, n, getattr(cnp, n))
    for n in ("uint16", "uint32", "uint64"):
        with pytest.raises(xg.DTypeUnavailableError, match=rf"'fake_xp' has no dtype '{n}'.*'uint8'") as ei:
            xg.dtype(n, fake)
        assert isinstance(ei.value, ValueError)
    assert xg.dtype("uint8", fake) is cnp.uint8


def test_dtype_defaults_to_the_policy_namespace() -> None:
    assert xg.dtype("float32") == np.float32
    with xg.default_device("array_api_strict"):
        assert xg.dtype("float32") is xps.float32


def test_dtype_name_round_trips() -> None:
    for n in DTYPE_NAMES:
        assert xg.dtype_name(n) == n
        assert xg.dtype_name(getattr(xg, n)) == n
        assert xg.dtype_name(np.dtype(n)) == n
        assert xg.dtype_name(np.dtype(n).type) == n
        assert xg.dtype_name(getattr(xps, n)) == n
    assert xg.dtype_name(np.bool_) == "bool"
    assert xg.dtype_name(np.dtype(bool)) == "bool"


def test_dtype_name_torch_and_jax() -> None:
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    for n in ("bool", "int8", "int16", "int32", "int64", "uint8", "float32", "float64", "complex64", "complex128"):
        assert xg.dtype_name(getattr(torch, n)) == n
        assert xg.dtype_name(getattr(jnp, n)) == n
        assert xg.dtype_name(jnp.dtype(n)) == n
    assert xg.dtype_name(torch.ones(1).dtype) == "float32"


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(xg.UnknownNameError, match=r"unknown dtype name 'float8'.*'bool'.*'complex128'.*'bfloat16'") as ei:
        xg.dtype("float8")
    assert isinstance(ei.value, ValueError)
    with pytest.raises(xg.UnknownNameError, match=r"is not one of the 13 standard dtypes .* nor an extension dtype"):
        xg.dtype_name(np.datetime64)
    with pytest.raises(xg.UnknownNameError, match=r"unknown dtype name 'double'"):
        xg.dtype_name("double")


def test_complex_and_real_dtype() -> None:
    assert xg.complex_dtype("float32") == "complex64"
    assert xg.complex_dtype(xg.float64) == "complex128"
    assert xg.complex_dtype(np.complex64) == "complex64"
    assert xg.real_dtype("complex128") == "float64"
    assert xg.real_dtype(xps.complex64) == "float32"
    assert xg.real_dtype("float32") == "float32"
    for n in ("int32", "bool", "uint8"):
        with pytest.raises(xg.UnknownNameError, match=rf"complex_dtype: '{n}' is not a floating-point dtype"):
            xg.complex_dtype(n)
        with pytest.raises(xg.UnknownNameError, match=rf"real_dtype: '{n}' is not a floating-point dtype"):
            xg.real_dtype(n)


def test_float64_on_no_float64_device_names_the_device() -> None:
    # as the policy's default dtype: refused at the `with` line
    with pytest.raises(xg.DTypeUnavailableError, match="no_float64"):
        xg.default_device("array_api_strict", device="no_float64", dtype="float64")
    # explicitly in a creation function
    with xg.default_device("array_api_strict", device="no_float64"):
        assert xg.zeros(2).dtype == xg.float32  # the device's default float
        with pytest.raises(ValueError, match="no_float64"):
            xg.zeros(2, dtype=xg.float64)
        with pytest.raises(ValueError, match="no_float64"):
            xg.asarray([1.0], dtype="float64")
    # a device string on a policy whose own device has float64
    with xg.default_device("array_api_strict"), pytest.raises(ValueError, match="no_float64"):
        xg.ones(2, dtype="float64", device="no_float64")
