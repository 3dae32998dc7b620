"""xpgrad.save / xpgrad.load: safetensors round trips across libraries, and clear errors."""

from __future__ import annotations

import json
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


# ---------------------------------------------------------------------- issue #17, section 5
def _write_raw(path: Path, tensors: dict[str, Any], meta: str | None) -> Path:
    """A safetensors file with hand-written xpgrad metadata (what a hostile or damaged file holds)."""
    from safetensors.numpy import save_file

    save_file(tensors, str(path), metadata=None if meta is None else {"__xpgrad__": meta})
    return path


def test_zero_d_tensors_keep_their_shape(tmp_path: Path) -> None:
    path = tmp_path / "scalars.safetensors"
    xg.save({"f": xg.asarray(2.5), "i": np.array(7, dtype=np.int64), "z": xg.asarray(np.complex64(1 - 2j)),
             "b": np.array(True)}, path)
    out = xg.load(path)
    assert {k: v.shape for k, v in out.items()} == {"f": (), "i": (), "z": (), "b": ()}
    assert out["z"].dtype == xg.complex64 and complex(_np(out["z"])) == 1 - 2j
    assert float(out["f"]) == 2.5 and int(out["i"]) == 7 and bool(out["b"])


def test_zero_d_moves_between_libraries() -> None:
    from xpgrad._io import move_array

    ro = np.array(3.0)
    ro.flags.writeable = False  # read-only host arrays take the copying path
    out = move_array(ro, pytest.importorskip("array_api_strict"))
    assert out.shape == ()


def test_batchnorm_and_adam_scalar_checkpoints_reload(tmp_path: Path) -> None:
    bn = nn.BatchNorm1d(3)
    bn(xg.asarray(np.arange(6.0, dtype=np.float32).reshape(2, 3)))
    xg.save(bn.state_dict(), tmp_path / "bn.safetensors")
    fresh = nn.BatchNorm1d(3)
    fresh.load_state_dict(xg.load(tmp_path / "bn.safetensors"))  # num_batches_tracked is 0-d
    assert fresh.num_batches_tracked.shape == () and int(fresh.num_batches_tracked) == 1
    fresh(xg.asarray(np.ones((2, 3), dtype=np.float32)))
    assert int(fresh.num_batches_tracked) == 2

    p = nn.Parameter(xg.asarray(2.0))
    opt = xg.optim.Adam([p], lr=0.1)
    (p * p).backward()
    opt.step()
    xg.save(opt.state_dict(), tmp_path / "adam.safetensors")
    opt2 = xg.optim.Adam([p], lr=0.1)
    opt2.load_state_dict(xg.load(tmp_path / "adam.safetensors"))
    p.grad = None
    (p * p).backward()
    opt2.step()  # exp_avg of shape (1,) could not be updated in place from a 0-d gradient
    assert p.shape == () and opt2.state[id(p)]["exp_avg"].shape == ()


def test_metadata_referencing_one_tensor_many_times_is_refused_before_reading(tmp_path: Path) -> None:
    import tracemalloc

    big = np.zeros(250_000, dtype=np.float32)  # 1 MB
    tree = {"d": [[f"k{i}", {"t": "w"}] for i in range(1000)]}  # would load as 1000 copies: 1 GB
    path = _write_raw(tmp_path / "amplify.safetensors", {"w": big}, json.dumps({"format": 1, "tree": tree}))
    assert path.stat().st_size < 2_000_000
    tracemalloc.start()
    try:
        with pytest.raises(xg.XpgradValueError, match=r"tensor 'w' is referenced again \(first at k0\)"):
            xg.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000, peak  # the metadata is checked before any tensor is read


def test_load_memory_is_bounded_by_the_file(tmp_path: Path) -> None:
    import tracemalloc

    tensors = {f"w{i}": np.full(50_000, float(i)) for i in range(10)}  # 4 MB of float64
    path = tmp_path / "ten.safetensors"
    xg.save(tensors, path)
    tracemalloc.start()
    try:
        out = xg.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [float(v[0]) for v in out.values()] == [float(i) for i in range(10)]
    assert peak < 2.5 * path.stat().st_size, (peak, path.stat().st_size)
    data = [v.data for v in out.values()]
    assert not any(np.shares_memory(a, b) for i, a in enumerate(data) for b in data[i + 1:])


_W = {"w": np.zeros((2, 2), dtype=np.float64)}


@pytest.mark.parametrize(
    ("meta", "tensors", "match"),
    [
        ('{"format": 1, "tree": {"d": [["a"]]}}', _W, r"at <root>: a dict entry is \['a'\], not a \[key, value\] pair"),
        ('{"format": 1, "tree": {"d": [["a", {"t": "w"}, 3]]}}', _W, "not a \\[key, value\\] pair"),
        ('{"format": 1, "tree": {"d": [["a", {"t": ["w"]}]]}}', _W, r"at a: a tensor reference names \['w'\], not a str"),
        ('{"format": 1, "tree": {"d": [[["a"], {"t": "w"}]]}}', _W, r"a dict key is \['a'\], not a str or int"),
        ('{"format": 1, "tree": {"d": [[true, {"t": "w"}]]}}', _W, "a dict key is True, not a str or int"),
        ('{"format": 1, "tree": {"d": [["a", {"v": 1}], ["a", {"v": 2}]]}}', _W, "the key 'a' appears twice"),
        ('{"format": 1, "tree": {"d": {"a": {"t": "w"}}}}', _W, "not a list of \\[key, value\\] pairs"),
        ('{"format": 1, "tree": {"d": [["a", {"l": 3}]]}}', _W, "at a: a list node holds 3, not a list"),
        ('{"format": 1, "tree": {"d": [["a", {"f": 3}]]}}', _W, "at a: a float node holds 3"),
        ('{"format": 1, "tree": {"d": [["a", {"f": "x"}]]}}', _W, "a float node holds 'x'"),
        ('{"format": 1, "tree": {"d": [["a", {"v": [1]}]]}}', _W, r"a value node holds \[1\]"),
        ('{"format": 1, "tree": {"d": [["a", {"q": 1}]]}}', _W, r"at a: unknown node \{'q': 1\}"),
        ('{"format": 1, "tree": {"d": [["a", {"v": 1, "l": []}]]}}', _W, "unknown node"),
        ('{"format": 1, "tree": {"d": [["a", 5]]}}', _W, "at a: expected a node"),
        ('{"format": 1, "tree": {"l": []}}', _W, "does not hold a mapping at its root"),
        ('{"format": 1, "tree": {"d": [["a", {"t": "nope"}]]}}', _W, "names a tensor 'nope' .at a. that the file does not contain"),
        ('{"format": 1, "tree": {"d": [["a", {"t": "w", "complex": 1}]]}}', _W, "'complex' flag of tensor 'w' is 1"),
        ('{"format": 1}', _W, "expected an object with 'format' and 'tree'"),
        ('[1, 2]', _W, "expected an object with 'format' and 'tree'"),
        ('{"format": 1, "tree": ', _W, "not JSON"),
        ('{"format": 2, "tree": {"d": []}}', _W, "xpgrad format 2, which this version of xpgrad cannot read"),
        ('{"format": true, "tree": {"d": []}}', _W, "xpgrad format True"),
        ('{"format": "1", "tree": {"d": []}}', _W, "xpgrad format '1'"),
        # the "complex" flag only on float32/float64 tensors whose last axis is 2
        ('{"format": 1, "tree": {"d": [["a", {"t": "i", "complex": true}]]}}',
         {"i": np.zeros((3, 2), dtype=np.int64)}, "flagged complex but has dtype I64"),
        ('{"format": 1, "tree": {"d": [["a", {"t": "b", "complex": true}]]}}',
         {"b": np.zeros((3, 2), dtype=bool)}, "flagged complex but has dtype BOOL"),
        ('{"format": 1, "tree": {"d": [["a", {"t": "h", "complex": true}]]}}',
         {"h": np.zeros((3, 2), dtype=np.float16)}, "flagged complex but has dtype F16"),
        ('{"format": 1, "tree": {"d": [["a", {"t": "w", "complex": true}]]}}',
         {"w": np.zeros((2, 3))}, r"flagged complex but has dtype F64 and shape \[2, 3\]"),
        ('{"format": 1, "tree": {"d": [["a", {"t": "w", "complex": true}]]}}',
         {"w": np.zeros(())}, r"shape \[\]"),
    ],
)
def test_malformed_metadata_is_a_value_error(tmp_path: Path, meta: str, tensors: dict[str, Any], match: str) -> None:
    path = _write_raw(tmp_path / "bad.safetensors", tensors, meta)
    with pytest.raises(xg.XpgradValueError, match=match) as info:
        xg.load(path)
    assert type(info.value) is xg.XpgradValueError  # not a bare ValueError, TypeError, RecursionError


@pytest.mark.parametrize("depth", [150, 100_000])
def test_deeply_nested_metadata_is_refused(tmp_path: Path, depth: int) -> None:
    tree = '{"d": [["a", ' + '{"l": [' * depth + ']}' * depth + "]]}"
    path = _write_raw(tmp_path / "deep.safetensors", _W, '{"format": 1, "tree": ' + tree + "}")
    with pytest.raises(xg.XpgradValueError, match=r"nested more than 100 levels deep|nested too deeply"):
        xg.load(path)


def test_save_refuses_nesting_past_the_limit_and_cycles(tmp_path: Path) -> None:
    deep: Any = {"w": xg.asarray([1.0])}
    for _ in range(99):
        deep = {"x": deep}
    xg.save(deep, tmp_path / "ok.safetensors")  # 100 levels: written, and read back
    assert xg.load(tmp_path / "ok.safetensors")["x"]["x"]["x"] is not None
    with pytest.raises(xg.XpgradValueError, match="nested more than 100 levels deep"):
        xg.save({"x": deep}, tmp_path / "deep.safetensors")
    loop: dict[str, Any] = {}
    loop["me"] = loop
    with pytest.raises(xg.XpgradValueError, match="contains itself"):
        xg.save(loop, tmp_path / "loop.safetensors")


def test_save_accepts_raw_torch_tensors(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "torch.safetensors"
    w = torch.arange(6.0, requires_grad=True).reshape(2, 3)
    xg.save({"w": w, "s": torch.tensor(4, dtype=torch.int32), "nested": {"b": torch.ones(2)}}, path)
    out = xg.load(path)
    np.testing.assert_array_equal(_np(out["w"]), w.detach().numpy())
    assert out["s"].shape == () and out["s"].dtype == xg.int32 and int(out["s"]) == 4
    np.testing.assert_array_equal(_np(out["nested"]["b"]), [1.0, 1.0])


def test_a_key_spelled_metadata_round_trips(tmp_path: Path) -> None:
    from safetensors.numpy import load_file

    path = tmp_path / "meta.safetensors"
    xg.save({"__metadata__": xg.asarray([1.0]), "__xpgrad__": xg.asarray([2.0]), "w": xg.asarray([3.0])}, path)
    out = xg.load(path)
    assert {k: float(v[0]) for k, v in out.items()} == {"__metadata__": 1.0, "__xpgrad__": 2.0, "w": 3.0}
    assert sorted(load_file(str(path))) == ["__metadata__#1", "__xpgrad__#1", "w"]  # other readers see the escape
    xg.save({"n": {"__metadata__": xg.asarray([4.0])}}, path)
    assert float(xg.load(path)["n"]["__metadata__"][0]) == 4.0


def test_unreferenced_and_plain_files_still_load(tmp_path: Path) -> None:
    tensors = {"w": np.ones(2), "extra": np.zeros(3)}
    path = _write_raw(tmp_path / "x.safetensors", tensors, '{"format": 1, "tree": {"d": [["a", {"t": "w"}]]}}')
    assert list(xg.load(path)) == ["a"]  # "extra" is not referenced, so not read
    plain = _write_raw(tmp_path / "plain.safetensors", {"s": np.array(1.5)}, None)
    assert xg.load(plain)["s"].shape == ()


def test_save_accepts_raw_arrays_of_every_backend(backend: Any, tmp_path: Path) -> None:
    path = tmp_path / "raw.safetensors"
    xg.save({"w": backend.asarray(np.arange(4.0).reshape(2, 2)), "s": backend.asarray(np.array(3.0))}, path)
    out = xg.load(path)
    np.testing.assert_array_equal(_np(out["w"]), [[0.0, 1.0], [2.0, 3.0]])
    assert out["s"].shape == () and float(out["s"]) == 3.0
