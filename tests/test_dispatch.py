"""Namespace dispatch: raw arrays of each backend, Tensors, scalars, mismatches, the cache."""

from __future__ import annotations

from typing import Any

import array_api_compat
import array_api_strict as xps
import numpy as np
import pytest

import xpgrad as xg
from xpgrad import _dispatch
from xpgrad._bound import BoundNamespace


def test_raw_arrays_give_their_backend_namespace(backend: Any) -> None:
    a = backend.asarray(np.ones(3))
    b = backend.asarray(np.zeros(3))
    xp = xg.array_namespace(a, b)
    assert xp is backend.xp or xp is array_api_compat.array_namespace(a)
    assert xp.__name__ == backend.xp.__name__
    # (internally NumPy arrays get xpgrad's fast-path adapter over array_api_compat.numpy: tests/test_fast_adapter.py)
    assert _dispatch.public_namespace(_dispatch.backend_namespace(a)) is xp


def test_bare_numpy_gives_the_compat_namespace() -> None:
    assert xg.array_namespace(np.ones(2)) is array_api_compat.numpy
    assert xg.array_namespace(np.float64(1.0), np.ones(2)) is array_api_compat.numpy


def test_tensors_give_the_xpgrad_namespace_bound_to_them(backend: Any) -> None:
    t = xg.asarray(backend.asarray(np.ones(2)))
    xp = xg.array_namespace(t)
    assert isinstance(xp, BoundNamespace) and xp.__name__ == "xpgrad"
    assert xp.binding == (_dispatch.public_namespace(_dispatch.backend_namespace(t)), array_api_compat.device(t.data))
    assert xg.array_namespace(t, backend.asarray(np.ones(2)), 2.0) is xp
    assert t.__array_namespace__() is xp
    assert array_api_compat.array_namespace(t) is xp  # what SciPy, scikit-learn, array-api-extra call
    assert xp.sin is xg.sin  # everything but creation is the xpgrad namespace itself
    # the backend namespace is the one under the Tensor
    assert _dispatch.backend_namespace(t).__name__ == backend.xp.__name__


def test_scalars_and_none_are_ignored() -> None:
    a = xps.asarray([1.0])
    assert xg.array_namespace(a, 1, 2.5, True, 1j, None) is xps
    # no array at all: the current policy's namespace
    assert xg.array_namespace(1.0, None) is array_api_compat.numpy
    with xg.default_device("array_api_strict"):
        assert xg.array_namespace() is xps
        assert xg.array_namespace(3) is xps


def test_mixing_libraries_names_both_types_and_suggests_conversion() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(xg.NamespaceMismatchError) as ei:
        xg.array_namespace(np.ones(2), torch.ones(2))
    msg = str(ei.value)
    assert "numpy.ndarray" in msg and "torch.Tensor" in msg
    assert "asarray" in msg and "from_dlpack" in msg
    assert msg.startswith("array_namespace:")
    assert isinstance(ei.value, TypeError) and isinstance(ei.value, xg.XpgradError)
    # also through a Tensor
    with pytest.raises(xg.NamespaceMismatchError, match=r"torch\.Tensor"):
        xg.array_namespace(xg.asarray(np.ones(2)), torch.ones(2))


def test_mixing_strict_and_numpy() -> None:
    with pytest.raises(xg.NamespaceMismatchError, match=r"array_api_strict.*numpy.ndarray|numpy.ndarray.*strict"):
        xg.array_namespace(xps.asarray([1.0]), np.ones(1))


def test_two_devices_name_both() -> None:
    a = xps.asarray([1.0], device=xps.Device("device1"))
    b = xps.asarray([1.0], device=xps.Device("device2"))
    with pytest.raises(xg.DeviceMismatchError) as ei:
        xg.array_namespace(a, b)
    assert "device1" in str(ei.value) and "device2" in str(ei.value)
    assert isinstance(ei.value, ValueError)
    with pytest.raises(xg.DeviceMismatchError, match=r"device1.*device2"):
        xg.array_namespace(xg.asarray(a), b)
    # same device is fine
    assert xg.array_namespace(a, xps.asarray([2.0], device=xps.Device("device1"))) is xps


@pytest.mark.parametrize("bad", [[1.0, 2.0], (1.0,), "text", b"bytes", {"a": 1}, {1, 2}])
def test_containers_and_strings_are_refused(bad: Any) -> None:
    with pytest.raises(xg.XpgradTypeError, match=rf"array_namespace: .*got {type(bad).__name__}.*xpgrad.asarray"):
        xg.array_namespace(np.ones(1), bad)


def test_non_array_objects_are_refused() -> None:
    with pytest.raises(xg.XpgradTypeError, match=r"object .* is not an array of any array API library"):
        xg.array_namespace(object())


def test_cache_is_hit_on_the_second_call(monkeypatch: pytest.MonkeyPatch) -> None:
    a = xps.asarray([1.0])
    key = (type(a), float, type(a))
    monkeypatch.delitem(_dispatch._CACHE, key, raising=False)
    assert _dispatch.backend_namespace(a, 1.0, a) is xps
    assert _dispatch._CACHE[key] is xps

    def fail(*args: Any, **kw: Any) -> Any:
        raise AssertionError("resolved again instead of hitting the cache")

    monkeypatch.setattr(_dispatch, "_resolve", fail)
    assert _dispatch.backend_namespace(a, 1.0, a) is xps
    assert xg.array_namespace(a, 1.0, a) is xps
    # a Tensor key caches its unwrapped types
    t = xg.asarray(np.ones(1))
    monkeypatch.undo()
    monkeypatch.delitem(_dispatch._CACHE, (np.ndarray,), raising=False)
    _dispatch.backend_namespace(t)
    assert _dispatch.public_namespace(_dispatch._CACHE[(np.ndarray,)]) is array_api_compat.numpy


def test_policy_namespace_is_never_cached() -> None:
    assert () not in _dispatch._CACHE
    with xg.default_device("array_api_strict"):
        assert _dispatch.backend_namespace() is xps
    assert _dispatch.backend_namespace() is array_api_compat.numpy
    assert () not in _dispatch._CACHE
