"""Isolation under concurrency: threads, thread pools and asyncio tasks each see their own
policy and grad mode, and training in parallel gives the results of training in sequence.

The ambient state of xpgrad is two ContextVars (the default-device policy and the grad
mode; forward-mode levels are a third) plus caches that map types to namespaces. The
tape itself is per graph: each thread records and walks only its own nodes. These tests
make the interleaving real (barriers, events, ``asyncio.sleep(0)`` between ops) and check
values bit for bit. The basic cases also live in tests/test_policy.py (a new thread or a
pool worker starts from the process default; two interleaved tasks; eight threads drawing
random numbers) and tests/test_engine.py (grad mode per thread and per task); this module
extends them to training, gradients, many tasks, shared context-manager instances and
thread-pool reuse. See docs/concepts/policy.md ("Free-threaded CPython").
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import array_api_compat
import numpy as np
import pytest

import xpgrad as xg

from ._util import to_numpy

strict = pytest.importorskip("array_api_strict", reason="array-api-strict is not installed; install xpgrad[strict]")

CPU = strict.Device("CPU_DEVICE")
TIMEOUT = 120  # seconds a barrier or event waits before the test fails instead of hanging

# (library, device, dtype): numpy, array_api_strict and its two fake devices, two threads each
SPECS: list[tuple[str, str | None, str]] = [
    ("numpy", None, "float64"),
    ("array_api_strict", None, "float64"),
    ("array_api_strict", "device1", "float64"),
    ("array_api_strict", "device2", "float32"),
]


def _host(a: Any) -> np.ndarray:
    return to_numpy(a)


def _train(lib: str, device: str | None, dtype: str, seed: int, sync: Callable[[], None]) -> dict[str, Any]:
    """Train a small MLP with Adam for 30 steps under one policy; ``sync`` runs before each step."""
    with xg.default_device(lib, device=device, dtype=dtype, seed=seed) as mine:
        model = xg.nn.Sequential(xg.nn.Linear(3, 8), xg.nn.Tanh(), xg.nn.Linear(8, 1))
        opt = xg.optim.Adam(model.parameters(), lr=2e-2)
        xb = xg.random.normal((24, 3))
        yb = xg.sin(xb[:, :1]) * 0.5
        losses = []
        for _ in range(30):
            sync()
            p = xg.current_policy()
            if p is not mine or not xg.is_grad_enabled():
                msg = f"seed {seed}: saw policy {p} and grad mode {xg.is_grad_enabled()} inside {mine}"
                raise AssertionError(msg)
            opt.zero_grad()
            loss = xg.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            losses.append(_host(loss).item())
        devices = {array_api_compat.device(p.data) for p in model.parameters()}
        want = mine.device if mine.device is not None else array_api_compat.device(mine.xp.zeros(1))
        if devices != {want}:
            msg = f"seed {seed}: parameters on {devices}, expected {want}"
            raise AssertionError(msg)
        return {"losses": losses, "weights": [_host(p) for p in model.parameters()],
                "dtype": xg.dtype_name(model[0].weight.dtype), "xp": type(model[0].weight.data).__module__}


def test_eight_threads_train_bit_identical_to_sequential() -> None:
    jobs = [(*SPECS[i // 2], 100 + i) for i in range(8)]
    sequential = [_train(*job, sync=lambda: None) for job in jobs]
    barrier = threading.Barrier(len(jobs), timeout=TIMEOUT)
    results: dict[int, dict[str, Any]] = {}
    errors: list[str] = []

    def run(i: int) -> None:
        try:
            results[i] = _train(*jobs[i], sync=barrier.wait)  # lockstep: every step of every thread interleaves
        except Exception as e:  # noqa: BLE001 - reported below with the thread's job
            errors.append(f"thread {i} {jobs[i]}: {type(e).__name__}: {e}")
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, (seq, par) in enumerate(zip(sequential, (results[k] for k in range(len(jobs))))):
        assert par["losses"] == seq["losses"], f"thread {i} {jobs[i]}: losses differ from the sequential run"
        for a, b in zip(par["weights"], seq["weights"]):
            np.testing.assert_array_equal(a, b, err_msg=f"thread {i} {jobs[i]}")
        assert (par["dtype"], par["xp"]) == (seq["dtype"], seq["xp"])
        assert par["losses"][-1] < par["losses"][0], f"thread {i} did not train: {par['losses']}"
    # the two threads of one policy used different seeds, so they are not trivially equal
    assert sequential[0]["losses"] != sequential[1]["losses"]
    assert {r["xp"] for r in sequential} == {"numpy", "array_api_strict._array_object"}


# ----------------------------------------------------------------------------- asyncio
def test_hundred_asyncio_tasks_keep_their_policy_grad_mode_and_gradients() -> None:
    """100 tasks under 8 policies x 2 grad modes, switching after every op."""
    n_tasks, n_ops = 100, 12
    order: list[int] = []
    errors: list[str] = []
    x0 = np.linspace(-1.0, 1.0, 5)

    async def task(i: int) -> None:
        lib, device, _ = SPECS[i % 4]
        dtype = ("float32", "float64")[(i // 4) % 2]
        recording = i % 3 != 0
        with xg.default_device(lib, device=device, dtype=dtype) as mine, xg.set_grad_enabled(recording):
            x = xg.asarray((x0 + i / n_tasks).tolist(), requires_grad=True)
            v = x
            for k in range(n_ops):
                order.append(i)
                p = xg.current_policy()
                if p is not mine or xg.is_grad_enabled() is not recording:
                    errors.append(f"task {i} op {k}: policy {p}, grad mode {xg.is_grad_enabled()}")
                z = xg.zeros(2)
                if (xg.dtype_name(z.dtype), z.device) != (dtype, mine.device or z.device) or (
                    type(z.data).__module__.split(".")[0] != lib
                ):
                    errors.append(f"task {i} op {k}: zeros gave {z!r}")
                v = xg.sin(v) * 0.5 + v
                await asyncio.sleep(0)
                if v.requires_grad is not recording:
                    errors.append(f"task {i} op {k}: requires_grad {v.requires_grad}, recording {recording}")
            if not recording:
                if v.grad_fn is not None:
                    errors.append(f"task {i}: a graph was recorded under no_grad")
                return
            await asyncio.sleep(0)
            v.sum().backward()
            # d v_{k+1} / d v_k = 0.5 cos(v_k) + 1, in float64 on the host
            ref, d = x0 + i / n_tasks, np.ones_like(x0)
            for _ in range(n_ops):
                d, ref = d * (0.5 * np.cos(ref) + 1), np.sin(ref) * 0.5 + ref
            got = _host(x.grad).astype(np.float64)
            tol = 1e-4 if dtype == "float32" else 1e-12
            if not np.allclose(got, d, rtol=tol, atol=0):
                errors.append(f"task {i} ({lib}, {device}, {dtype}): gradient {got} != {d}")

    async def main() -> None:
        await asyncio.gather(*(task(i) for i in range(n_tasks)))
        # the event loop's own context never saw any task's setting
        assert xg.current_policy().dtype is None and xg.is_grad_enabled()

    asyncio.run(main())
    assert not errors, errors[:5]
    assert sorted(set(order)) == list(range(n_tasks)) and len(order) == n_tasks * n_ops
    # truly interleaved: every task did its first op before any task did its second
    assert sorted(order[:n_tasks]) == list(range(n_tasks)), order[: n_tasks + 5]


def test_a_shared_context_manager_instance_is_safe_across_tasks() -> None:
    """One module-level ``no_grad()`` / ``default_device(...)`` / ``detect_anomaly()`` entered by overlapping tasks,
    exited in non-nested order (each task resets its own token; it used to raise
    ``ValueError: <Token> was created in a different Context``)."""
    from xpgrad.autograd import is_anomaly_enabled

    no_grad = xg.no_grad()
    fp32 = xg.default_device("array_api_strict", dtype="float32")
    anomaly = xg.detect_anomaly()
    seen: dict[str, tuple[bool, str | None, bool]] = {}

    async def worker(name: str, delay: float) -> None:
        with no_grad, fp32, anomaly:
            await asyncio.sleep(delay)
            seen[name] = (xg.is_grad_enabled(), xg.current_policy().dtype, is_anomaly_enabled())
        seen[name + " after"] = (xg.is_grad_enabled(), xg.current_policy().dtype, is_anomaly_enabled())

    async def main() -> None:
        await asyncio.gather(worker("first", 0.02), worker("second", 0.0), worker("third", 0.01))

    asyncio.run(main())
    for name in ("first", "second", "third"):
        assert seen[name] == (False, "float32", True)
        assert seen[name + " after"] == (True, None, False)


def test_a_shared_context_manager_instance_is_safe_across_threads() -> None:
    no_grad = xg.no_grad()
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}
    errors: list[str] = []

    def a() -> None:
        try:
            with no_grad:
                a_in.set()
                assert b_in.wait(TIMEOUT)
            seen["a after"] = xg.is_grad_enabled()  # exits first, while b is still inside
            a_out.set()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"a: {type(e).__name__}: {e}")
            a_out.set()

    def b() -> None:
        try:
            assert a_in.wait(TIMEOUT)
            with no_grad:
                b_in.set()
                assert a_out.wait(TIMEOUT)
                seen["b inside"] = xg.is_grad_enabled()
            seen["b after"] = xg.is_grad_enabled()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"b: {type(e).__name__}: {e}")
            b_in.set()

    ts = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert seen == {"a after": True, "b inside": False, "b after": True}


# ----------------------------------------------------------------------------- threads and grad mode
def test_no_grad_in_one_thread_does_not_disable_recording_in_another() -> None:
    """Ping-pong with events: each side holds its mode while the other records or not."""
    rounds = 5
    turn = [threading.Event() for _ in range(2 * rounds + 1)]
    log: list[tuple[str, int, bool, bool]] = []
    errors: list[str] = []

    def quiet() -> None:  # holds no_grad across all rounds
        try:
            x = xg.asarray([1.0, 2.0], requires_grad=True)
            with xg.no_grad():
                for r in range(rounds):
                    assert turn[2 * r].wait(TIMEOUT)
                    y = xg.exp(x) * x
                    log.append(("quiet", r, xg.is_grad_enabled(), y.requires_grad))
                    turn[2 * r + 1].set()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"quiet: {type(e).__name__}: {e}")
            for ev in turn:
                ev.set()

    def loud() -> None:  # records, and backpropagates, while the other thread is inside no_grad
        try:
            x = xg.asarray([1.0, 2.0], requires_grad=True)
            for r in range(rounds):
                turn[2 * r].set()
                assert turn[2 * r + 1].wait(TIMEOUT)
                y = xg.exp(x) * x
                log.append(("loud", r, xg.is_grad_enabled(), y.requires_grad))
                x.grad = None
                y.sum().backward()
                np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"loud: {type(e).__name__}: {e}")

    ts = [threading.Thread(target=quiet), threading.Thread(target=loud)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert [e for e in log if e[0] == "quiet"] == [("quiet", r, False, False) for r in range(rounds)]
    assert [e for e in log if e[0] == "loud"] == [("loud", r, True, True) for r in range(rounds)]
    assert [e[0] for e in log] == ["quiet", "loud"] * rounds  # strictly alternating: the modes overlapped


def test_threads_differentiate_through_a_shared_parameter() -> None:
    """Eight threads read one parameter (the tape is per graph; leaves are only read) and
    each takes ``autograd.grad`` of its own loss: results equal the sequential ones."""
    w = xg.asarray(np.linspace(0.1, 0.8, 8), requires_grad=True)

    def grad_of(i: int) -> np.ndarray:
        (g,) = xg.autograd.grad(xg.sum(xg.sin(w * (i + 1)) ** 2), w)
        return g.numpy()

    expected = [grad_of(i) for i in range(8)]
    barrier = threading.Barrier(8, timeout=TIMEOUT)

    def work(i: int) -> list[np.ndarray]:
        out = []
        for _ in range(20):
            barrier.wait()
            out.append(grad_of(i))
        return out

    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(work, range(8)))
    for i in range(8):
        for g in got[i]:
            np.testing.assert_array_equal(g, expected[i])
    assert w.grad is None  # autograd.grad returns; nothing accumulated into the shared leaf


# ----------------------------------------------------------------------------- thread pools
def _state() -> tuple[str, str | None, bool]:
    p = xg.current_policy()
    return p.xp.__name__, p.dtype, xg.is_grad_enabled()


def _set_and_fail() -> None:
    with xg.default_device("array_api_strict", dtype="float32"), xg.no_grad():
        msg = "worker failed inside its blocks"
        raise RuntimeError(msg)


def test_thread_pool_workers_see_the_process_default_unless_the_context_is_copied() -> None:
    default = ("array_api_compat.numpy", None, True)
    with ThreadPoolExecutor(1) as ex:  # one worker thread: every task runs on the same thread
        with xg.default_device("array_api_strict", dtype="float32"), xg.no_grad():
            here = _state()
            plain = ex.submit(_state).result()
            copied = ex.submit(contextvars.copy_context().run, _state).result()
            ctx = contextvars.copy_context()
        assert here == ("array_api_strict", "float32", False)
        assert plain == default  # a worker starts from the process default, grad mode on
        assert copied == here  # copy_context().run carries policy and grad mode
        # a context copied inside the block keeps that block's state after the block ended
        assert ex.submit(ctx.run, _state).result() == here
        # a worker's own blocks, even when they raise, do not leak to its next task ...
        with pytest.raises(RuntimeError, match="worker failed"):
            ex.submit(_set_and_fail).result()
        assert ex.submit(_state).result() == default
        # ... nor does a block run in a copied context leak into the worker's own context
        with pytest.raises(RuntimeError, match="worker failed"):
            ex.submit(contextvars.copy_context().run, _set_and_fail).result()
        assert ex.submit(_state).result() == default
    assert _state() == default


def test_thread_pool_computations_follow_the_copied_policy() -> None:
    def make() -> tuple[str, str, bool]:
        t = xg.ones(3) * xg.asarray([1.0, 2.0, 3.0], requires_grad=True)
        return type(t.data).__module__.split(".")[0], xg.dtype_name(t.dtype), t.requires_grad

    with ThreadPoolExecutor(2) as ex, xg.default_device("array_api_strict", device="device1", dtype="float32"):
        with xg.no_grad():
            copied = [ex.submit(contextvars.copy_context().run, make) for _ in range(4)]
            plain = [ex.submit(make) for _ in range(4)]
            assert {f.result() for f in copied} == {("array_api_strict", "float32", False)}
            assert {f.result() for f in plain} == {("numpy", "float64", True)}


@pytest.mark.parametrize(("lib", "device"), [("array_api_strict", "device2"), ("torch", None)])
def test_float64_policy_keeps_python_floats_exact_on_a_float32_default_device(lib: str, device: str | None) -> None:
    """Regression (found by the asyncio test's float64 tasks on ``device2``): under a float64
    policy on a library or device whose default float is float32, ``asarray`` of Python
    floats built float32 and cast, so 0.1 became 0.10000000149."""
    if lib == "torch":
        pytest.importorskip("torch")
    with xg.default_device(lib, device=device, dtype="float64"):
        x = xg.asarray([0.1, 1 / 3])
        z = xg.asarray([0.1 + 1j / 3])
    assert xg.dtype_name(x.dtype) == "float64" and xg.dtype_name(z.dtype) == "complex128"
    host = x.data.to_device(CPU) if lib == "array_api_strict" else x.data
    np.testing.assert_array_equal(np.asarray(host), [0.1, 1 / 3])
    zh = z.data.to_device(CPU) if lib == "array_api_strict" else z.data
    np.testing.assert_array_equal(np.asarray(zh), [0.1 + 1j / 3])
