"""xpgrad.save / xpgrad.load: safetensors round trips across libraries, and clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import nn

from ._util import to_numpy as _np

pytest.importorskip("safetensors")


def test_state_dict_numpy_to_torch(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    with xg.default_device(seed=0):
        src = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Embedding(5, 4))
    src.register_buffer("steps", xg.asarray(np.array([7])))
    path = tmp_path / "model.safetensors"
    xg.save(src.state_dict(), path)
    with xg.default_device("torch"):
        sd = xg.load(path)
        dst = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Embedding(5, 4))
    dst.register_buffer("steps", xg.asarray(torch.zeros(1, dtype=torch.int64)))
    assert list(sd) == list(src.state_dict())
    assert all(isinstance(v.data, torch.Tensor) for v in sd.values())
    assert sd["steps"].dtype == xg.int64 and sd["0.weight"].dtype == xg.float32
    dst.load_state_dict(sd)
    for (k, a), (_, b) in zip(src.state_dict().items(), dst.state_dict().items(), strict=True):
        np.testing.assert_array_equal(_np(a), _np(b), err_msg=k)
    # a flat state dict is an ordinary safetensors file: other readers see the same names
    from safetensors.numpy import load_file

    assert sorted(load_file(str(path))) == sorted(src.state_dict())


def test_load_onto_every_backend(backend: Any, tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    w = np.arange(6, dtype=np.float64).reshape(2, 3)
    xg.save({"w": xg.asarray(backend.asarray(w)), "i": np.array([1, 2], dtype=np.int32)}, path)
    with backend.policy():
        out = xg.load(path)
    np.testing.assert_array_equal(_np(out["w"]), w)
    assert out["i"].dtype == xg.int32
    assert xg.array_namespace(out["w"].data) is not None


def test_nested_structures_and_plain_values(tmp_path: Path) -> None:
    obj = {
        "model": {"a": xg.asarray([1.0, 2.0]), "b": np.zeros((2, 2), dtype=np.float32)},
        "state": {0: {"step": 3, "exp_avg": xg.asarray([0.5])}, 1: {}},
        "groups": [{"lr": 0.1, "betas": (0.9, 0.99), "params": [0, 1], "name": None, "nan": float("nan")}],
        "z": xg.asarray(np.array([1 + 2j, 3 - 1j], dtype=np.complex64)),
        "flag": True,
    }
    path = tmp_path / "nested.safetensors"
    xg.save(obj, path)
    back = xg.load(path)
    assert back["state"][0]["step"] == 3 and back["state"][1] == {}
    np.testing.assert_array_equal(_np(back["state"][0]["exp_avg"]), [0.5])
    g = back["groups"][0]
    assert g["lr"] == 0.1 and g["betas"] == (0.9, 0.99) and g["params"] == [0, 1] and g["name"] is None
    assert np.isnan(g["nan"])
    assert back["flag"] is True
    assert back["z"].dtype == xg.complex64
    np.testing.assert_array_equal(_np(back["z"]), [1 + 2j, 3 - 1j])
    assert back["model"]["b"].dtype == xg.float32


def test_load_plain_safetensors_file(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    path = tmp_path / "plain.safetensors"
    save_file({"x": np.ones((2, 2), dtype=np.float32)}, str(path))
    out = xg.load(path)
    assert list(out) == ["x"] and out["x"].dtype == xg.float32


def test_corrupt_and_truncated_files(tmp_path: Path) -> None:
    path = tmp_path / "good.safetensors"
    xg.save({"w": xg.asarray(np.arange(100.0))}, path)
    raw = path.read_bytes()
    bad = tmp_path / "truncated.safetensors"
    bad.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(xg.XpgradValueError, match="not a valid safetensors file"):
        xg.load(bad)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x00\x01not a safetensors file at all")
    with pytest.raises(xg.XpgradValueError, match="not a valid safetensors file"):
        xg.load(junk)
    with pytest.raises(FileNotFoundError):
        xg.load(tmp_path / "missing.safetensors")


def test_missing_key_changes_nothing(tmp_path: Path) -> None:
    with xg.default_device(seed=0):
        model = nn.Linear(2, 2)
    path = tmp_path / "partial.safetensors"
    xg.save({"weight": xg.zeros((2, 2), dtype=xg.float32)}, path)
    before = _np(model.weight.detach()).copy()
    with pytest.raises(xg.XpgradValueError, match=r"missing keys \['bias'\]"):
        model.load_state_dict(xg.load(path))
    np.testing.assert_array_equal(_np(model.weight.detach()), before)


def test_save_errors_leave_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "keep.safetensors"
    xg.save({"w": xg.asarray([1.0])}, path)
    before = path.read_bytes()
    with pytest.raises(xg.XpgradTypeError, match="cannot store a object"):
        xg.save({"w": xg.asarray([2.0]), "bad": object()}, path)
    with pytest.raises(xg.XpgradTypeError, match="mapping"):
        xg.save([xg.asarray([1.0])], path)  # type: ignore[arg-type]
    with pytest.raises(xg.XpgradTypeError, match="keys must be str or int"):
        xg.save({(1, 2): xg.asarray([1.0])}, path)  # type: ignore[dict-item]
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.safetensors"]  # no temporary left behind


def test_tensors_that_require_grad_are_saved_detached(tmp_path: Path) -> None:
    p = nn.Parameter(xg.asarray([1.0, 2.0]))
    xg.save({"p": p}, tmp_path / "p.safetensors")
    out = xg.load(tmp_path / "p.safetensors")["p"]
    assert not out.requires_grad
    np.testing.assert_array_equal(_np(out), [1.0, 2.0])
