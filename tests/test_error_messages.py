"""Errors that used to read as another library's (issue #17, section 10): each names xpgrad's
function or layer, the offending value, and the cure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from tests.conftest import Backend

F = xg.nn.functional


def _x(backend: Backend, shape: tuple[int, ...]) -> Any:
    return xg.asarray(backend.asarray(np.ones(shape, dtype=np.float32)))


# ---------------------------------------------------------------- layers name themselves and both shapes
_LAYERS = [
    pytest.param(lambda: xg.nn.Linear(3, 2), [(5, 4)],
                 r"Linear\(in_features=3, out_features=2\): expected an input of shape \(\.\.\., 3\).*got shape \(5, 4\)",
                 id="Linear"),
    pytest.param(lambda: xg.nn.Bilinear(3, 4, 2), [(5, 3), (5, 5)],
                 r"Bilinear\(in1_features=3, in2_features=4\): expected inputs of shapes \(\.\.\., 3\) and \(\.\.\., 4\).*"
                 r"got \(5, 3\) and \(5, 5\)", id="Bilinear"),
    pytest.param(lambda: xg.nn.LayerNorm(4), [(2, 5)],
                 r"LayerNorm\(\(4,\)\): expected an input whose trailing axes are \(4,\).*got shape \(2, 5\)", id="LayerNorm"),
    pytest.param(lambda: xg.nn.BatchNorm1d(4), [(2, 5)],
                 r"BatchNorm1d\(4\): expected 4 channels \(num_features, axis 1\), got input of shape \(2, 5\)", id="BatchNorm1d"),
    pytest.param(lambda: xg.nn.BatchNorm2d(4).eval(), [(2, 5, 3, 3)],
                 r"BatchNorm2d\(4\): expected 4 channels .*\(2, 5, 3, 3\)", id="BatchNorm2d-eval"),
    pytest.param(lambda: xg.nn.GroupNorm(2, 4), [(2, 6, 3)],
                 r"GroupNorm\(2, 4\): expected an input of shape \(N, 4, \.\.\.\), got \(2, 6, 3\)", id="GroupNorm"),
]


@pytest.mark.parametrize(("make", "shapes", "match"), _LAYERS)
def test_layer_with_a_wrong_input_size_names_itself_and_the_shapes(backend: Backend, make: Any, shapes: Any,
                                                                   match: str) -> None:
    layer = backend.to(make(), dtype="float32")
    with pytest.raises(xg.XpgradValueError, match=match):
        layer(*(_x(backend, s) for s in shapes))


def test_functional_linear_and_batch_norm_name_themselves(backend: Backend) -> None:
    with pytest.raises(xg.XpgradValueError, match=r"linear: expected an input of shape \(\.\.\., 3\).*weight \(2, 3\).*\(5, 4\)"):
        F.linear(_x(backend, (5, 4)), _x(backend, (2, 3)))
    # training: checked before the running statistics are updated (was NumPy's broadcast error)
    rm, rv = _x(backend, (4,)), _x(backend, (4,))
    with pytest.raises(xg.XpgradValueError, match=r"batch_norm: running_mean must have shape \(5,\).*got \(4,\)"):
        F.batch_norm(_x(backend, (2, 5)), rm, rv, training=True)
    np.testing.assert_array_equal(backend.to_numpy(rm), np.ones(4))


@pytest.mark.parametrize("bad", [10, -1, -11])
def test_embedding_index_out_of_range(backend: Backend, bad: int) -> None:
    emb = backend.to(xg.nn.Embedding(10, 3), dtype="float32")
    idx = xg.asarray(backend.asarray(np.asarray([1, bad, 2], dtype=np.int64)))
    with pytest.raises(xg.XpgradIndexError, match=rf"embedding: index out of range in self: index {bad}, but the table has 10 rows"):
        backend.to_numpy(emb(idx))  # Dask: when computed


def test_embedding_error_is_an_index_error_as_in_torch() -> None:
    torch = pytest.importorskip("torch")
    for bad in (10, -1):
        with pytest.raises(IndexError, match="index out of range in self"):
            torch.nn.functional.embedding(torch.asarray([1, bad]), torch.ones(10, 3))
        with pytest.raises(IndexError, match="index out of range in self"):
            F.embedding(xg.asarray([1, bad]), xg.ones((10, 3)))


# ---------------------------------------------------------------- reshape
def test_reshape_to_an_impossible_shape(backend: Backend) -> None:
    x = _x(backend, (2, 3))
    with pytest.raises(xg.XpgradValueError,
                       match=r"reshape: cannot reshape a tensor of shape \(2, 3\) \(6 elements\) into shape \(4,\)"):
        xg.reshape(x, (4,))
    with pytest.raises(xg.XpgradValueError, match=r"reshape: cannot reshape .* into shape \(4, -1\) \(6 is not a multiple of 4\)"):
        x.reshape(4, -1)
    with pytest.raises(xg.XpgradValueError, match=r"reshape: shape \(-1, -1\) may hold one -1"):
        xg.reshape(x, (-1, -1))
    with pytest.raises(xg.XpgradValueError, match=r"reshape: cannot reshape"):  # raw arrays too
        xg.reshape(backend.asarray(np.ones((2, 3))), (5,))
    assert xg.reshape(x, (2, -1)).shape == (2, 3)


# ---------------------------------------------------------------- leaving the array API
def _scipy_calls() -> list[Any]:
    special = pytest.importorskip("scipy.special")
    signal = pytest.importorskip("scipy.signal")
    distance = pytest.importorskip("scipy.spatial.distance")
    linalg = pytest.importorskip("scipy.linalg")
    return [("scipy.special.i0", special.i0), ("scipy.signal.convolve", lambda t: signal.convolve(t, t)),
            ("scipy.spatial.distance.cdist", lambda t: distance.cdist(t, t)), ("scipy.linalg.expm", linalg.expm)]


def test_a_library_converting_to_numpy_is_told_it_left_the_array_api() -> None:
    t = xg.asarray(np.eye(3), requires_grad=True)
    for name, call in _scipy_calls():
        with pytest.raises(xg.XpgradRuntimeError) as info:
            call(t)
        msg = str(info.value)
        assert "detach().numpy()" not in msg, name
        assert "leaves the array API and cannot carry a gradient" in msg, name
        assert "not array-API generic" in msg, name
        if name != "scipy.special.i0":  # a NumPy ufunc converts in C: no SciPy frame to name
            assert "inside scipy (scipy." in msg, (name, msg)


def test_np_asarray_of_a_tensor_that_requires_grad() -> None:
    t = xg.asarray(np.eye(2), requires_grad=True)
    with pytest.raises(xg.XpgradRuntimeError, match=r"converted to NumPy \(called from tests\.test_error_messages\).*tensor\.detach\(\)"):
        np.asarray(t)
    np.testing.assert_array_equal(np.asarray(t.detach()), np.eye(2))
    with pytest.raises(xg.XpgradRuntimeError, match=r"numpy: the tensor requires grad; call detach\(\)\.numpy\(\)"):
        t.numpy()  # the user's own call: there the advice is right


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_np_sum_of_a_tensor_is_refused_as_torch_refuses_it(name: str) -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):  # the reference: PyTorch's tensors do not take np.sum either
        getattr(np, name)(torch.ones(3))
    t = xg.asarray([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(xg.XpgradTypeError, match=rf"{name}: Tensor.{name} takes axis= and keepdims= only, got .*out=.*use xg\.{name}"):
        getattr(np, name)(t)
    assert float(getattr(t, name)(axis=0).detach()) == {"sum": 6.0, "mean": 2.0}[name]


def test_torch_function_given_an_xpgrad_tensor() -> None:
    torch = pytest.importorskip("torch")
    t = xg.asarray(torch.ones(3), requires_grad=True)
    with pytest.raises(xg.XpgradTypeError, match=r"torch\.exp was given an xpgrad Tensor; use xg\.exp \(or xg_tensor\.data"):
        torch.exp(t)
    with pytest.raises(xg.XpgradTypeError, match=r"torch\.nn\.functional\.relu was given an xpgrad Tensor; use xg\.nn\.functional\.relu"):
        torch.nn.functional.relu(t)
    # torch's operators turn the refusal into NotImplemented: xpgrad's reflected operator runs
    out = torch.full((3,), 2.0) * t
    assert isinstance(out, xg.Tensor)
    xg.sum(out).backward()
    np.testing.assert_array_equal(t.grad.data.numpy(), [2.0, 2.0, 2.0])


def test_jax_function_given_an_xpgrad_tensor() -> None:
    """``jnp.sin(t)`` names jnp.sin and xg.sin (JAX said "Error interpreting argument to <function sin>
    as an abstract array ... static_argnums"); JAX's operators and jnp.asarray still work."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    calls = [
        (lambda t: jnp.sin(t), r"jax\.numpy\.sin was given an xpgrad Tensor; use xg\.sin \(xpgrad's namespace"),
        (lambda t: jnp.add(t, 1.0), r"jax\.numpy\.add was given an xpgrad Tensor; use xg\.add "),
        (lambda t: jnp.sum(t, axis=0), r"jax\.numpy\.sum was given an xpgrad Tensor; use xg\.sum "),
        (lambda t: jnp.linalg.norm(t), r"jax\.numpy\.linalg\.norm was given an xpgrad Tensor; use xpgrad's functions"),
        (lambda t: jax.jit(lambda x: x * 2.0)(t), r"jax\.jit\(<lambda>\) was given an xpgrad Tensor"),
        (lambda t: jax.grad(lambda x: jnp.sum(x))(t), r"jax\.grad was given an xpgrad Tensor; use xg\.grad "),
    ]
    for data in (np.ones(3, dtype=np.float32), jnp.ones(3, dtype=jnp.float32)):
        for rg in (False, True):
            t = xg.asarray(data, requires_grad=rg)
            for call, match in calls:
                with pytest.raises(xg.XpgradValueError, match=match):
                    call(t)
            assert not hasattr(t, "__jax_array__")  # (only JAX is answered)
    # JAX's operators return NotImplemented: xpgrad's reflected operator runs and records
    t = xg.asarray(jnp.ones(3, dtype=jnp.float32), requires_grad=True)
    out = jnp.full((3,), 2.0, dtype=jnp.float32) * t
    assert isinstance(out, xg.Tensor)
    xg.sum(out).backward()
    np.testing.assert_array_equal(np.asarray(t.grad.data), [2.0, 2.0, 2.0])
    # jnp.asarray converts as np.asarray does: a Tensor that requires grad is refused, else its array
    assert jnp.asarray(t.detach()) is t.data
    np.testing.assert_array_equal(np.asarray(jnp.asarray(xg.asarray(np.arange(3.0)))), [0.0, 1.0, 2.0])
    with pytest.raises(xg.XpgradRuntimeError, match="requires grad"):
        jnp.asarray(t)


# ---------------------------------------------------------------- JAX float64 without jax_enable_x64
def test_float64_on_jax_without_x64_names_the_cure() -> None:
    pytest.importorskip("jax")
    code = """
import warnings
warnings.simplefilter("error")  # JAX's own truncation warning must not come first
import jax, jax.numpy as jnp, numpy as np, xpgrad as xg
assert not jax.config.jax_enable_x64
calls = {
    "asarray": lambda: xg.asarray(jnp.ones(2), dtype="float64"),
    "astype": lambda: xg.astype(xg.asarray(jnp.ones(2)), xg.float64),
    "asarray-complex128": lambda: xg.asarray(jnp.ones(2), dtype=xg.complex128),
    "default_device": lambda: xg.default_device(jnp, dtype="float64"),
    "Module.to": lambda: xg.nn.Linear(2, 2).to(xp=jnp, dtype="float64"),
}
for name, call in calls.items():
    try:
        call()
    except xg.DTypeUnavailableError as e:
        assert 'jax.config.update("jax_enable_x64", True)' in str(e), (name, str(e))
    else:
        raise SystemExit(f"{name}: no error")
assert xg.asarray(jnp.ones(2), dtype="float32").dtype == xg.float32
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(xg.__file__).parents[1]), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


# ---------------------------------------------------------------- demo --plot, set_default_policy
def test_demo_plot_into_a_missing_directory_fails_before_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    from xpgrad import _demo
    from xpgrad.__main__ import main

    def no_training(*a: Any, **k: Any) -> Any:
        raise AssertionError("the demo started training")

    monkeypatch.setattr(_demo, "load_digits_split", no_training)
    missing = tmp_path / "nope" / "curves.png"
    with pytest.raises(xg.XpgradValueError, match=r"demo: cannot write the plot to .*curves\.png.*does not exist"):
        _demo.train(plot=missing, progress=False)
    assert main(["demo", "--quiet", "--plot", str(missing)]) == 1
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(xg.XpgradValueError, match=r"demo: cannot write the plot to .*: it is a directory"):
        _demo.train(plot=tmp_path, progress=False)


def test_set_default_policy_accepts_a_device_policy() -> None:
    try:
        with xg.default_device("array_api_strict", dtype="float32", seed=3) as p:
            pass
        got = xg.set_default_policy(p)
        assert (got.xp, got.dtype, got.seed) == (p.xp, "float32", 3)
        assert type(xg.zeros(2).data).__module__.startswith("array_api_strict")
        assert xg.set_default_policy(xg.current_policy(), dtype="float64").dtype == "float64"
        with pytest.raises(xg.XpgradTypeError, match="an array or a DevicePolicy, got int 3"):
            xg.set_default_policy(3)
    finally:
        xg.reset_policy()


def test_default_device_accepts_a_device_policy() -> None:
    with xg.default_device("array_api_strict", dtype="float32", seed=3) as p:
        pass
    with xg.default_device(p) as q:
        assert (q.xp, q.dtype, q.seed) == (p.xp, "float32", 3)
        assert type(xg.zeros(2).data).__module__.startswith("array_api_strict")
        with xg.default_device(q, dtype="float64") as r:
            assert r.xp is p.xp and r.dtype == "float64"
    assert xg.current_policy().xp is not p.xp  # restored
