"""The default-device policy: construction, errors, restoration, and what threads,
thread pools and asyncio tasks see."""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import array_api_compat
import array_api_strict as xps
import numpy as np
import pytest

import xpgrad as xg
from xpgrad._backends import load_namespace

from ._util import to_numpy


def lib_of(policy: xg.DevicePolicy) -> str:
    return policy.xp.__name__


# ----------------------------------------------------------------- construction
def test_default_policy() -> None:
    p = xg.current_policy()
    assert p.xp is array_api_compat.numpy
    assert p.device is None and p.dtype is None and p.seed is None
    assert isinstance(p, xg.DevicePolicy)
    assert xg.dtype_name(p.float_dtype()) == "float64"


def test_accepts_namespace_module() -> None:
    with xg.default_device(xps) as p:
        assert p.xp is xps and xg.current_policy() is p
        assert p.device is None
    with xg.default_device(np):  # bare numpy is replaced by its array API namespace
        assert xg.current_policy().xp is array_api_compat.numpy


def test_accepts_library_names_and_aliases() -> None:
    for name, mod in [("numpy", "array_api_compat.numpy"), ("np", "array_api_compat.numpy"),
                      ("array_api_strict", "array_api_strict"), ("strict", "array_api_strict")]:
        with xg.default_device(name):
            assert lib_of(xg.current_policy()) == mod


def test_accepts_existing_array_namespace_and_device() -> None:
    a = xps.asarray([1.0], device=xps.Device("device1"))
    with xg.default_device(a) as p:
        assert p.xp is xps
        assert p.device == xps.Device("device1")
        z = xg.zeros(2)
        assert type(z.data) is type(a) and z.device == xps.Device("device1")


def test_device_string_cpu_per_library() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    import torch

    expected = {
        "numpy": lambda d: d == "cpu",
        "array_api_strict": lambda d: d == xps.Device("CPU_DEVICE"),
        "torch": lambda d: d == torch.device("cpu"),
        "jax": lambda d: d.platform == "cpu",
        "dask": lambda d: d == "cpu",
    }
    for lib, ok in expected.items():
        with xg.default_device(lib, device="cpu") as p:
            assert ok(p.device), (lib, p.device)
            z = xg.zeros(2)
            assert array_api_compat.device(z.data) == p.device or lib == "dask", lib


def test_array_api_strict_device_names() -> None:
    for name in ("device1", "device2", "CPU_DEVICE"):
        with xg.default_device("array_api_strict", device=name) as p:
            assert p.device == xps.Device(name)
            assert xg.ones(1).device == xps.Device(name)
    d2 = xps.Device("device2")
    with xg.default_device("array_api_strict", device=d2):  # device objects pass through
        assert xg.current_policy().device is d2


def test_unknown_device_lists_available() -> None:
    with pytest.raises(xg.UnknownNameError, match=r"no device 'device9'.*device1.*device2") as ei:
        xg.default_device("array_api_strict", device="device9")
    assert isinstance(ei.value, ValueError)
    with pytest.raises(xg.UnknownNameError, match=r"available devices: \['cpu'\]"):
        xg.default_device("numpy", device="cuda")


def test_unknown_library_lists_known() -> None:
    known = r"unknown library name 'tensorflow'; known libraries are \['array_api_strict', 'cupy', 'dask', 'jax'"
    with pytest.raises(xg.UnknownNameError, match=known) as ei:
        xg.default_device("tensorflow")
    assert isinstance(ei.value, ValueError)


def test_not_installed_names_the_extra() -> None:
    try:
        import cupy  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.fail("this test expects cupy not to be installed here")
    with pytest.raises(xg.BackendNotInstalledError, match=r'pip install "xpgrad\[cupy\]"') as ei:
        xg.default_device("cupy")
    assert isinstance(ei.value, ImportError)


@pytest.mark.parametrize(("lib", "module"), [("jax", "jax.numpy"), ("torch", "array_api_compat.torch"),
                                             ("dask", "array_api_compat.dask.array")])
def test_not_installed_simulated(monkeypatch: pytest.MonkeyPatch, lib: str, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(xg.BackendNotInstalledError, match=rf'pip install "xpgrad\[{lib}\]"') as ei:
        xg.default_device(lib)
    assert isinstance(ei.value, ImportError)
    assert f"'{lib}'" in str(ei.value)


def test_bad_arguments() -> None:
    with pytest.raises(xg.XpgradTypeError, match="xp must be a namespace module"):
        xg.default_device(3.5)
    with pytest.raises(xg.XpgradTypeError, match="floating dtype"):
        xg.default_device(dtype="int32")
    with pytest.raises(xg.UnknownNameError, match="unknown dtype name 'float8'"):  # (float16: an extension dtype)
        xg.default_device(dtype="float8")


def test_dtype_the_device_lacks_is_refused_naming_the_device() -> None:
    with pytest.raises(xg.DTypeUnavailableError, match=r"no_float64.*'float64'") as ei:
        xg.default_device("array_api_strict", device="no_float64", dtype="float64")
    assert isinstance(ei.value, ValueError)
    with xg.default_device("array_api_strict", device="no_float64") as p:
        assert xg.dtype_name(p.float_dtype()) == "float32"


def test_dtype_accepts_names_xpgrad_and_backend_dtypes() -> None:
    for d in ("float32", xg.float32, np.float32, xps.float32):
        with xg.default_device(dtype=d) as p:
            assert p.dtype == "float32"
            assert xg.zeros(1).dtype == xg.float32


# ----------------------------------------------------------------- restoration
def test_restores_on_exception() -> None:
    before = xg.current_policy()
    with pytest.raises(RuntimeError, match="boom"), xg.default_device("array_api_strict", dtype="float32"):
        assert xg.current_policy().xp is xps
        raise RuntimeError("boom")
    assert xg.current_policy() is before


def test_nested_blocks_inherit_and_restore() -> None:
    with xg.default_device("array_api_strict", device="device1") as outer:
        with xg.default_device(dtype="float32") as inner:
            assert inner.xp is xps and inner.device == xps.Device("device1") and inner.dtype == "float32"
            with xg.default_device(seed=3) as innermost:
                assert innermost.dtype == "float32" and innermost.seed == 3
            assert xg.current_policy() is inner
            with xg.default_device("numpy") as np_p:  # a new namespace resets the device
                assert np_p.device is None and np_p.dtype == "float32"
        assert xg.current_policy() is outer
    assert xg.current_policy().xp is array_api_compat.numpy


def test_same_manager_reentered() -> None:
    cm = xg.default_device(dtype="float32")
    with cm:
        with cm:
            assert xg.current_policy().dtype == "float32"
        assert xg.current_policy().dtype == "float32"
    assert xg.current_policy().dtype is None


def test_decorator_form() -> None:
    calls: list[Any] = []

    @xg.default_device("array_api_strict", dtype="float32")
    def f(n: int) -> xg.DevicePolicy:
        """Docs kept."""
        calls.append(xg.current_policy())
        if n:
            f(n - 1)
        return xg.current_policy()

    assert f.__doc__ == "Docs kept."
    p = f(2)
    assert p.xp is xps and p.dtype == "float32" and len(calls) == 3
    assert xg.current_policy().xp is array_api_compat.numpy

    @xg.default_device(dtype="float32")
    def g() -> None:
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        g()
    assert xg.current_policy().dtype is None


def test_set_default_policy_and_reset() -> None:
    try:
        p = xg.set_default_policy("array_api_strict", dtype="float32")
        assert xg.current_policy() is p and p.xp is xps
        q = xg.set_default_policy(device="device2")  # other fields kept
        assert q.xp is xps and q.dtype == "float32" and q.device == xps.Device("device2")
        with xg.default_device("numpy"):
            assert xg.current_policy().xp is array_api_compat.numpy
        assert xg.current_policy() is q
        box: list[Any] = []
        t = threading.Thread(target=lambda: box.append(xg.current_policy()))
        t.start()
        t.join()
        assert box == [q]  # threads see the process default
    finally:
        xg.reset_policy()
    p = xg.current_policy()
    assert p.xp is array_api_compat.numpy and p.device is None and p.dtype is None and p.seed is None


def test_reset_policy_clears_the_context_policy() -> None:
    ctx = contextvars.copy_context()

    def inside() -> xg.DevicePolicy:
        with xg.default_device("array_api_strict"):
            xg.reset_policy()
            return xg.current_policy()

    assert ctx.run(inside).xp is array_api_compat.numpy


# ----------------------------------------------------------------- concurrency
def test_new_thread_starts_from_process_default() -> None:
    seen: list[Any] = []
    with xg.default_device("array_api_strict", dtype="float32"):
        t = threading.Thread(target=lambda: seen.append((xg.current_policy(), xg.zeros(1))))
        t.start()
        t.join()
    policy, z = seen[0]
    assert policy.xp is array_api_compat.numpy and policy.dtype is None
    assert isinstance(z.data, np.ndarray) and z.dtype == xg.float64


def test_thread_pool_workers_start_from_process_default_unless_context_copied() -> None:
    with xg.default_device("array_api_strict", dtype="float32") as p, ThreadPoolExecutor(2) as ex:
        plain = ex.submit(xg.current_policy).result()
        copied = ex.submit(contextvars.copy_context().run, xg.current_policy).result()
        # and a worker's own `with` never leaks back to this thread
        inner = ex.submit(_policy_inside_block).result()
        assert inner.dtype == "float32" and inner.xp is array_api_compat.numpy
        assert xg.current_policy() is p
    assert plain.xp is array_api_compat.numpy and plain.dtype is None
    assert copied is p


def _policy_inside_block() -> xg.DevicePolicy:
    with xg.default_device("numpy", dtype="float32"):
        return xg.current_policy()


def test_asyncio_tasks_are_isolated() -> None:
    log: list[tuple[str, str, str | None]] = []

    async def task(name: str, lib: str, dtype: str) -> None:
        with xg.default_device(lib, dtype=dtype):
            for _ in range(20):
                p = xg.current_policy()
                log.append((name, p.xp.__name__, p.dtype))
                z = xg.zeros(1)
                assert z.dtype == getattr(xg, dtype)
                await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(task("a", "array_api_strict", "float32"), task("b", "numpy", "float64"))
        assert xg.current_policy().xp is array_api_compat.numpy

    asyncio.run(main())
    names = [n for n, _, _ in log]
    assert names[:4] in (["a", "b", "a", "b"], ["b", "a", "b", "a"])  # truly interleaved
    expected = {"a": ("array_api_strict", "float32"), "b": ("array_api_compat.numpy", "float64")}
    for name, mod, dtype in log:
        assert (mod, dtype) == expected[name]


def test_eight_threads_under_eight_policies() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    specs: list[dict[str, Any]] = [
        {"xp": "numpy"},
        {"xp": "numpy", "dtype": "float32"},
        {"xp": "array_api_strict"},
        {"xp": "array_api_strict", "device": "device1"},
        {"xp": "array_api_strict", "device": "device2", "dtype": "float32"},
        {"xp": "array_api_strict", "device": "no_float64"},
        {"xp": "torch", "device": "cpu", "dtype": "float64"},
        {"xp": "jax", "dtype": "float32"},
    ]
    for s in specs:
        load_namespace(s["xp"])  # import once, outside the race
    barrier = threading.Barrier(len(specs))
    errors: list[str] = []
    draws: dict[int, list[np.ndarray]] = {}

    def work(i: int, spec: dict[str, Any]) -> None:
        try:
            with xg.default_device(**spec, seed=i) as mine:
                fdt = xg.dtype_name(mine.float_dtype())
                barrier.wait()
                out = []
                for _ in range(40):
                    p = xg.current_policy()
                    if p is not mine:
                        errors.append(f"thread {i}: saw policy {p}")
                    for t in (xg.zeros(3), xg.ones((2,)), xg.asarray([1.0, 2.0]), xg.random.normal(4)):
                        if array_api_compat.array_namespace(t.data) is not array_api_compat.array_namespace(
                            mine.xp.zeros(1)
                        ):
                            errors.append(f"thread {i}: namespace {type(t.data)}")
                        if mine.device is not None and array_api_compat.device(t.data) != mine.device:
                            errors.append(f"thread {i}: device {array_api_compat.device(t.data)}")
                        if xg.dtype_name(t.data.dtype) != fdt:
                            errors.append(f"thread {i}: dtype {t.data.dtype} != {fdt}")
                    out.append(xg.random.normal(2))
                draws[i] = [_host(t) for t in out]
        except Exception as e:  # noqa: BLE001 - reported below with the thread's number
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(i, s)) for i, s in enumerate(specs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    # each thread's random stream is its own seed's, whatever the others did
    for i in range(len(specs)):
        g = np.random.Generator(np.random.PCG64(i))
        expect = []
        for _ in range(40):
            g.standard_normal(4)
            expect.append(g.standard_normal(2))
        np.testing.assert_allclose(np.stack(draws[i]), np.stack(expect), rtol=1e-6)


def _host(t: xg.Tensor) -> np.ndarray:
    return np.asarray(to_numpy(t), dtype=np.float64)
