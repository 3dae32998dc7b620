"""Anomaly mode (``xpgrad.detect_anomaly``): the op that creates a NaN is named, with its stack."""

from __future__ import annotations

import asyncio
import sys
import threading

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.autograd import is_anomaly_check_nan_enabled, is_anomaly_enabled

from .conftest import Backend

# the NaNs below are made on purpose; NumPy (and the backends built on it) warn about them
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

THIS_FILE = __file__.rsplit("/", 1)[-1]


def _t(backend: Backend, values: list[float], requires_grad: bool = True) -> xg.Tensor:
    return xg.Tensor(backend.asarray(np.asarray(values, dtype=np.float64)), requires_grad=requires_grad)


def _line() -> int:
    """The caller's line number plus one: the line of the statement after the call."""
    return sys._getframe(1).f_lineno + 1


def _sqrt_times_zero(x: xg.Tensor) -> xg.Tensor:
    # d/dx sum(sqrt(x) * 0) at x = 0: sqrt's rule computes 0 / (2 * 0) = NaN
    return xg.sum(xg.sqrt(x) * 0.0)


def test_forward_nan_names_primitive_and_user_line(backend: Backend) -> None:
    x = _t(backend, [-1.0, 4.0])
    with xg.detect_anomaly(), pytest.raises(xg.AnomalyError) as info:
        line = _line()
        xg.log(x)
    msg = str(info.value)
    assert msg.startswith("log: the forward output contains NaN")
    assert "op 'log' was created at:\n" in msg
    assert f'{THIS_FILE}", line {line}, in test_forward_nan_names_primitive_and_user_line\n    xg.log(x)' in msg
    assert "xpgrad/ops" not in msg  # xpgrad's own frames are left out
    assert isinstance(info.value, xg.XpgradRuntimeError) and isinstance(info.value, RuntimeError)


def test_backward_nan_names_rule_argument_and_creation_stack(backend: Backend) -> None:
    x = _t(backend, [0.0, 1.0])
    with xg.detect_anomaly():
        line = _line() + 2  # the sqrt call inside the helper
        loss = _sqrt_times_zero(x)
        with pytest.raises(xg.AnomalyError) as info:
            loss.backward()
    msg = str(info.value)
    assert msg.startswith("sqrt: the backward rule for argument 0 returned a gradient containing NaN")
    assert "op 'sqrt' was created at:\n" in msg
    # the stack holds both the test's own call and the helper's line that made sqrt
    assert f'{THIS_FILE}", line {line - 2}, in test_backward_nan_names_rule_argument_and_creation_stack' in msg
    assert "in _sqrt_times_zero\n    return xg.sum(xg.sqrt(x) * 0.0)" in msg
    assert x.grad is None  # nothing was accumulated


def test_custom_vjp_returning_nan(backend: Backend) -> None:
    @xg.custom_vjp
    def ident(v: object) -> object:
        return v

    ident.defvjp(lambda v: (v, None), lambda res, g: (g * float("nan"),))
    x = _t(backend, [1.0, 2.0])
    with xg.detect_anomaly():
        loss = xg.sum(ident(x))
        with pytest.raises(xg.AnomalyError, match=r"custom_vjp\(ident\): the backward rule for argument 0"):
            loss.backward()


def test_off_by_default_nan_passes_silently(backend: Backend) -> None:
    assert not is_anomaly_enabled()
    x = _t(backend, [0.0, 1.0])
    _sqrt_times_zero(x).backward()
    g = backend.to_numpy(x.grad)
    assert np.isnan(g[0]) and g[1] == 0.0
    assert np.isnan(backend.to_numpy(xg.log(_t(backend, [-1.0], requires_grad=False))))[0]


def test_nan_already_in_the_inputs_is_not_blamed(backend: Backend) -> None:
    x = _t(backend, [float("nan"), 1.0])
    w = _t(backend, [2.0, 3.0])
    with xg.detect_anomaly():
        loss = xg.sum(x * w)
        loss.backward()
    assert np.isnan(backend.to_numpy(w.grad)[0])  # d/dw = x: the NaN came from the user's data


def test_forward_mode_tangent_nan(backend: Backend) -> None:
    x = backend.asarray(np.array([0.0, 1.0]))
    t = backend.asarray(np.array([0.0, 1.0]))  # sqrt's tangent at 0: 0 / (2 * 0)
    _, dy = xg.jvp(xg.sqrt, (x,), (t,))
    assert np.isnan(backend.to_numpy(dy)[0])
    with xg.detect_anomaly(), pytest.raises(xg.AnomalyError, match="sqrt: the forward-mode"):
        xg.jvp(xg.sqrt, (x,), (t,))


def test_nesting_check_nan_false_and_restore_on_exception() -> None:
    x = xg.asarray([0.0, 1.0], requires_grad=True)
    with xg.detect_anomaly():
        assert is_anomaly_check_nan_enabled()
        with xg.detect_anomaly(check_nan=False):
            assert is_anomaly_enabled() and not is_anomaly_check_nan_enabled()
            loss = _sqrt_times_zero(x)
            assert loss.grad_fn.stack is not None  # stacks are still recorded
            loss.backward()  # no check
        assert is_anomaly_check_nan_enabled()
        with pytest.raises(xg.AnomalyError):
            _sqrt_times_zero(x).backward()
    assert not is_anomaly_enabled()
    with pytest.raises(ZeroDivisionError), xg.detect_anomaly():
        _ = 1 / 0
    assert not is_anomaly_enabled()
    assert not hasattr((x * 2).grad_fn, "stack")  # off: nothing recorded


def test_decorator() -> None:
    @xg.detect_anomaly()
    def f(x: xg.Tensor) -> xg.Tensor:
        assert is_anomaly_enabled()
        return xg.log(x)

    with pytest.raises(xg.AnomalyError, match="log"):
        f(xg.asarray([-1.0]))
    assert not is_anomaly_enabled()
    np.testing.assert_allclose(f(xg.asarray([1.0])).numpy(), [0.0])
    assert not is_anomaly_enabled()


def test_threads_are_isolated() -> None:
    inside = threading.Event()
    done = threading.Event()
    seen: dict[str, object] = {}

    def with_anomaly() -> None:
        with xg.detect_anomaly():
            seen["a_on"] = is_anomaly_enabled()
            inside.set()
            done.wait(10)
            try:
                xg.log(xg.asarray([-1.0]))
            except xg.AnomalyError:
                seen["a_raised"] = True

    def without() -> None:
        inside.wait(10)
        seen["b_on"] = is_anomaly_enabled()
        x = xg.asarray([0.0], requires_grad=True)
        _sqrt_times_zero(x).backward()  # no error here while the other thread is in the block
        seen["b_grad"] = float(x.grad.numpy()[0])
        done.set()

    ts = [threading.Thread(target=with_anomaly), threading.Thread(target=without)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    assert seen["a_on"] is True and seen["a_raised"] is True
    assert seen["b_on"] is False and np.isnan(seen["b_grad"])  # type: ignore[arg-type]


def test_asyncio_tasks_are_isolated() -> None:
    async def task(on: bool) -> bool:
        if on:
            with xg.detect_anomaly():
                await asyncio.sleep(0)
                return is_anomaly_enabled()
        await asyncio.sleep(0)
        return is_anomaly_enabled()

    async def main() -> list[bool]:
        return await asyncio.gather(*(task(i % 2 == 0) for i in range(10)))

    assert asyncio.run(main()) == [i % 2 == 0 for i in range(10)]


def _mlp_grads(backend: Backend) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    params = [_t(backend, rng.standard_normal(s).tolist()) for s in [(4, 8), (8,), (8, 3), (3,)]]
    x = _t(backend, rng.standard_normal((5, 4)).tolist(), requires_grad=False)
    y = _t(backend, rng.standard_normal((5, 3)).tolist(), requires_grad=False)
    w1, b1, w2, b2 = params
    h = xg.tanh(x @ w1 + b1)
    loss = xg.mean((xg.exp(h @ w2 + b2) - y) ** 2)
    loss.backward()
    return [backend.to_numpy(p.grad) for p in params]


def test_no_false_positive_on_an_mlp_step(backend: Backend) -> None:
    plain = _mlp_grads(backend)
    with xg.detect_anomaly():
        checked = _mlp_grads(backend)
    for a, b in zip(plain, checked):
        np.testing.assert_array_equal(a, b)
