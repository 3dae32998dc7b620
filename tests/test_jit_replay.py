"""What a replayed xg.jit call does around its program: the learning rate passed as an input
(the same 0-d array for the same value on JAX), the module tree read at every call (a structural
change still traces again), and the ``.grad`` that appears after the first step (no second trace
where the step sets it before reading it). On JAX, the first call: traced on abstract values
inside one ``jax.jit``, so it compiles the whole step once, not each operation apart.

Every jitted call is compared with the eager call on the same state, in loops.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import nn, optim

from ._util import to_numpy

RNG = np.random.default_rng(30)


def _check(backend: Any, got: Any, want: Any) -> None:
    g, w = to_numpy(got), to_numpy(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
    if backend.name == "numpy":
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def _arr(backend: Any, *shape: int) -> Any:
    return backend.asarray(RNG.standard_normal(shape))


def _model(backend: Any) -> Any:
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    backend.to(m, dtype=xg.float64)
    return m


def _step(model: Any, opt: Any, x: Any, y: Any) -> Any:
    opt.zero_grad()
    loss = xg.mean((model(x) - y) ** 2)
    loss.backward()
    opt.step()
    return loss


def _accumulating_step(model: Any, opt: Any, x: Any, y: Any) -> Any:
    loss = xg.mean((model(x) - y) ** 2)
    loss.backward()  # (no zero_grad: the gradients add up, the step reads the old ones)
    opt.step()
    return loss


def _same_params(backend: Any, a: Any, b: Any) -> None:
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        _check(backend, p, q)
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            _check(backend, p.grad, q.grad)


def _pair(backend: Any, **kw: Any) -> tuple[Any, Any, Any, Any]:
    m1 = _model(backend)
    m2 = copy.deepcopy(m1)
    return m1, m2, optim.SGD(m1.parameters(), **kw), optim.SGD(m2.parameters(), **kw)


def test_gradients_appearing_after_the_first_step_do_not_trace_again(backend: Any) -> None:
    m1, m2, o1, o2 = _pair(backend, lr=0.05)
    x, y = _arr(backend, 6, 4), _arr(backend, 6, 1)
    f = xg.jit(_step)
    for _ in range(8):
        _check(backend, f(m1, o1, x, y), _step(m2, o2, x, y))
        _same_params(backend, m1, m2)
    assert f.cache_info().traces == 1
    # (the parameters keep their class: the trace watched their .grad through a subclass, for the run only)
    assert all(type(p) is nn.Parameter for p in m1.parameters())


def test_a_step_that_reads_the_old_gradients_traces_with_them(backend: Any) -> None:
    m1, m2, o1, o2 = _pair(backend, lr=0.05)
    x, y = _arr(backend, 6, 4), _arr(backend, 6, 1)
    f = xg.jit(_accumulating_step)
    for _ in range(6):
        _check(backend, f(m1, o1, x, y), _accumulating_step(m2, o2, x, y))
        _same_params(backend, m1, m2)
    assert f.cache_info().traces == 2  # (no gradient, then the gradients it adds to)


def test_a_step_that_branches_on_a_gradient_it_has_not_set(backend: Any) -> None:
    # f reads .grad in Python before any write: the state with a gradient is traced apart
    m1, m2 = _model(backend), None
    m2 = copy.deepcopy(m1)
    x = _arr(backend, 5, 4)

    def step(m: Any, x: Any) -> Any:
        w = m[0].weight
        loss = xg.sum(m(x))
        if w.grad is not None:
            loss = loss * 2.0
        w.grad = None
        loss.backward()
        return loss

    f = xg.jit(step)
    for _ in range(4):
        _check(backend, f(m1, x), step(m2, x))
        _same_params(backend, m1, m2)
    assert f.cache_info().traces == 2


def test_learning_rates_changed_between_calls_need_no_trace(backend: Any) -> None:
    m1, m2, o1, o2 = _pair(backend, lr=0.1)
    x, y = _arr(backend, 6, 4), _arr(backend, 6, 1)
    f = xg.jit(_step)
    lrs = [0.1, 0.02, np.float64(0.02), 0.1, 0.0, np.float32(0.5), 0.003, 0.1]
    for i in range(3 * len(lrs)):
        lr = lrs[i % len(lrs)]
        o1.param_groups[0]["lr"] = o2.param_groups[0]["lr"] = lr
        _check(backend, f(m1, o1, x, y), _step(m2, o2, x, y))
        _same_params(backend, m1, m2)
        assert o1.param_groups[0]["lr"] is lr  # (left as the user set it)
    assert f.cache_info().traces == 1


def test_a_learning_rate_is_one_array_per_value_where_arrays_are_immutable(backend: Any) -> None:
    # (a replay's input for a state number: JAX's is made once per value and kind, NumPy's at every call)
    from xpgrad._jit import _number_input, _number_kind

    like = _arr(backend, 3)
    kind = _number_kind(like, 0.1)
    values = [0.1, 0.1, np.float64(0.1), -0.0, 0.0, 0.1]
    arrays = [_number_input(v, kind) for v in values]
    for v, a in zip(values, arrays, strict=True):
        assert a.shape == () and float(to_numpy(a)) == float(v) and str(to_numpy(a).dtype) == "float64"
    assert math.copysign(1.0, float(to_numpy(arrays[3]))) == -1.0  # (-0.0 is not 0.0's array)
    immutable = backend.name == "jax"
    assert (arrays[0] is arrays[1] is arrays[5]) == immutable
    assert arrays[0] is not arrays[2] and arrays[3] is not arrays[4]  # (a NumPy scalar, a signed zero: their own)
    assert _number_input(3, _number_kind(like, 3)) is not _number_input(3.0, kind)


def test_a_structural_change_of_the_module_still_traces_again(backend: Any) -> None:
    m1, m2, o1, o2 = _pair(backend, lr=0.05)
    x, y = _arr(backend, 6, 4), _arr(backend, 6, 1)
    f = xg.jit(_step)
    for i in range(8):
        if i == 3:  # a parameter replaced through the module's table itself, in both models
            for m, o in ((m1, o1), (m2, o2)):
                new = nn.Parameter(xg.asarray(backend.asarray(np.full((8, 4), 0.1))))
                m[0]._parameters["weight"] = new
                o.param_groups[0]["params"][0] = new
        if i == 5:  # a submodule added
            for m in (m1, m2):
                m.append(nn.Tanh())
        _check(backend, f(m1, o1, x, y), _step(m2, o2, x, y))
        _same_params(backend, m1, m2)
    assert f.cache_info().traces == 2  # (the new parameter is read as the old one was; the new submodule traces)


# ====================================================================== JAX: the first call
@pytest.fixture(scope="module")
def jax_backend() -> Any:
    from .conftest import _load

    return _load("jax")


def _count_compiles() -> tuple[list[str], Any]:
    import jax.monitoring

    seen: list[str] = []

    def listen(event: str, duration: float, **kw: Any) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            seen.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    return seen, listen


def test_the_first_call_on_jax_compiles_the_whole_step_once(jax_backend: Any) -> None:
    import jax.monitoring

    # (shapes no other test uses: JAX keeps what it compiled for each shape for the whole process)
    m1 = nn.Sequential(nn.Linear(13, 11), nn.Tanh(), nn.Linear(11, 5), nn.ReLU(), nn.Linear(5, 1))
    jax_backend.to(m1, dtype=xg.float64)
    m2 = copy.deepcopy(m1)
    o1, o2 = optim.Adam(m1.parameters(), lr=0.01), optim.Adam(m2.parameters(), lr=0.01)
    x, y = _arr(jax_backend, 9, 13), _arr(jax_backend, 9, 1)
    f = xg.jit(_step)
    seen, listen = _count_compiles()
    try:
        got = f(m1, o1, x, y)
        first = len(seen)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    _check(jax_backend, got, _step(m2, o2, x, y))
    # one XLA compile of the whole step (run alone: 1); a full CI worker has seen 3, a few tiny conversions
    # compiled first in that process; an eager trace compiles each of its operations apart: 93 on 4677482
    assert first <= 5, first
    for _ in range(6):
        _check(jax_backend, f(m1, o1, x, y), _step(m2, o2, x, y))
    _same_params(jax_backend, m1, m2)
    assert f.cache_info().traces == 2  # (the first step, then the one with Adam's state)


def test_a_step_that_reads_a_constant_in_python_on_jax(jax_backend: Any) -> None:
    # Python reads a value no input reaches: the abstract trace computes the constants, and the result is eager's
    m1 = _model(jax_backend)
    m2 = copy.deepcopy(m1)
    o1, o2 = optim.SGD(m1.parameters(), lr=0.05), optim.SGD(m2.parameters(), lr=0.05)
    x, y = _arr(jax_backend, 6, 4), _arr(jax_backend, 6, 1)

    def step(model: Any, opt: Any, x: Any, y: Any) -> Any:
        scale = xg.sum(xg.arange(4, dtype=xg.float64))
        loss = _step(model, opt, x, y)
        return loss * 2.0 if float(scale) > 5.0 else loss

    f = xg.jit(step)
    for _ in range(5):
        _check(jax_backend, f(m1, o1, x, y), step(m2, o2, x, y))
        _same_params(jax_backend, m1, m2)
    assert f.cache_info().traces == 1


def test_a_step_that_raises_on_jax_leaves_the_state_as_eager_does(jax_backend: Any) -> None:
    m1 = _model(jax_backend)
    m2 = copy.deepcopy(m1)
    o1, o2 = optim.Adam(m1.parameters(), lr=0.05), optim.Adam(m2.parameters(), lr=0.05)
    x, y = _arr(jax_backend, 6, 4), _arr(jax_backend, 6, 1)

    def step(model: Any, opt: Any, x: Any, y: Any, fail: bool) -> Any:
        loss = _step(model, opt, x, y)
        if fail:
            raise ValueError("after the step")
        return loss

    f = xg.jit(step, static_argnums=4)
    for i in range(4):
        for g in (f, step):
            with pytest.raises(ValueError, match="after the step"):
                g(m1 if g is f else m2, o1 if g is f else o2, x, y, True)
        _same_params(jax_backend, m1, m2)
        assert o1._steps == o2._steps == 2 * i + 1
        _check(jax_backend, f(m1, o1, x, y, False), step(m2, o2, x, y, False))


def test_a_whole_step_trace_that_fails_on_jax_falls_back_with_the_optimizer_state_in_place(
        jax_backend: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # (the whole-step jax.jit trace failing after it made its inputs: the state put back as it was, the
    # optimizer's own state dicts, which the eager trace's number cells (Adam's step) are entries of;
    # a copy put back left the replays reading a stale step: a wrong loss from the third call)
    from xpgrad import _jit

    run = _jit._Capture.run

    def failing(self: Any, f: Any, targs: Any, tkw: Any, witnesses: Any = None) -> None:
        if witnesses is not None:
            raise RuntimeError("the whole-step trace fails")
        run(self, f, targs, tkw)

    monkeypatch.setattr(_jit._Capture, "run", failing)
    m1 = _model(jax_backend)
    m2 = copy.deepcopy(m1)
    o1, o2 = optim.Adam(m1.parameters(), lr=0.05), optim.Adam(m2.parameters(), lr=0.05)
    x, y = _arr(jax_backend, 6, 4), _arr(jax_backend, 6, 1)
    f = xg.jit(_step)
    for _ in range(5):
        _check(jax_backend, f(m1, o1, x, y), _step(m2, o2, x, y))
        _same_params(jax_backend, m1, m2)
    assert f.cache_info().traces == 2


def test_numbers_a_transformed_function_closes_over_are_guarded(backend: Any) -> None:
    # (xg.grad's wrapper holds fixed numbers, its argnums, which no call checks; the user's function's are
    # checked at every call: a new value traces again)
    x = _arr(backend, 5)
    k = 1.0

    def f(x: Any) -> Any:
        return xg.sum(xg.sin(x) * k)

    g = xg.jit(xg.grad(f))
    h = xg.jit(xg.hessian(lambda v: xg.sum(v ** 3)))
    for i in range(6):
        k = float(i % 3)
        _check(backend, g(x), xg.grad(f)(x))
        _check(backend, h(x), xg.hessian(lambda v: xg.sum(v ** 3))(x))
    assert g.cache_info().traces == 3 and h.cache_info().traces == 1
