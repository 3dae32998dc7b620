"""``Tensor.__dlpack__``: the standard's keyword-only signature, and a backend whose
arrays' ``__dlpack__`` predates ``max_version``, ``dl_device`` and ``copy``."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad._dlpack import dlpack_kwargs


class OldArray(np.ndarray):
    """A NumPy array whose ``__dlpack__`` is the pre-2023.12 one: ``stream`` alone."""

    def __dlpack__(self, stream: Any = None) -> Any:  # type: ignore[override]
        return np.asarray(self).__dlpack__(stream=stream)


def _old(values: list[float]) -> Any:
    return np.asarray(values, dtype=np.float64).view(OldArray)


def test_signature_is_the_standards() -> None:
    sig = inspect.signature(xg.asarray([1.0]).__dlpack__)
    assert [(p.name, p.kind, p.default) for p in sig.parameters.values()] == [
        (n, inspect.Parameter.KEYWORD_ONLY, None) for n in ("stream", "max_version", "dl_device", "copy")]


def test_every_keyword_reaches_a_current_backend(backend: Any) -> None:
    data = backend.asarray(np.arange(3.0))
    t = xg.asarray(data)
    if not hasattr(data, "__dlpack__"):  # Dask: a clear error, not an AttributeError
        with pytest.raises(xg.XpgradTypeError, match=r"__dlpack__: the backend's dask\.array.*do not support DLPack"):
            np.from_dlpack(t)
        return
    dev = t.__dlpack_device__()
    got = dlpack_kwargs(data, None, (1, 0), dev, False)[1]
    assert got == {"stream": None, "max_version": (1, 0), "dl_device": dev, "copy": False}
    # the library's own from_dlpack (NumPy's refuses a GPU array: "Unsupported device in DLTensor")
    np.testing.assert_array_equal(backend.to_numpy(backend.xp.from_dlpack(t)), [0.0, 1.0, 2.0])


def test_an_old_backend_gets_only_stream() -> None:
    data = _old([1.0, 2.0])
    dev = data.__dlpack_device__()
    assert dlpack_kwargs(data, None, (1, 0), dev, False) == (data, {"stream": None})
    t = xg.Tensor(data)
    assert type(t.__dlpack__(max_version=(1, 0), dl_device=dev, copy=False)).__name__ == "PyCapsule"
    # NumPy as the consumer asks for a versioned capsule and gets the unversioned one
    shared = np.from_dlpack(t)
    assert np.shares_memory(shared, data) and shared.tolist() == [1.0, 2.0]


def test_an_old_backend_copies_when_asked() -> None:
    data = _old([1.0, 2.0])
    out = np.from_dlpack(xg.Tensor(data), copy=True)
    assert not np.shares_memory(out, data) and out.tolist() == [1.0, 2.0]


def test_an_old_backend_refuses_another_device() -> None:
    data = _old([1.0, 2.0])
    with pytest.raises(BufferError, match=r"cannot export to dl_device=\(2, 0\)"):
        xg.Tensor(data).__dlpack__(dl_device=(2, 0))
    with pytest.raises(xg.XpgradValueError, match="copy must be True, False or None, got 'yes'"):
        xg.Tensor(data).__dlpack__(copy="yes")  # type: ignore[arg-type]
