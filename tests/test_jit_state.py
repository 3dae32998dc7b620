"""xg.jit and the state a call reads besides its arrays: the random generator of the policy
active at the call, Module attributes and hooks, plain objects, closures and globals,
optimizer learning rates; what a trace that raises leaves behind; what retracing keeps.

Every jitted call is compared with the eager call of the same function on the same state,
in loops that change the state between calls: bit for bit on NumPy, to 1e-12 elsewhere
(float64; JAX runs programs under ``jax.jit``, where XLA may fuse and reorder: the first call
too, so an ulp of Adam's first step grows over a hundred steps, and JAX is held to 1e-10).
"""

from __future__ import annotations

import copy
import gc
import linecache
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgrad as xg
from xpgrad import nn, optim
from xpgrad._jit import JitStateful

from ._util import to_numpy
from .conftest import examples_for

RNG = np.random.default_rng(28)


def _check(backend: Any, got: Any, want: Any) -> None:
    g, w = to_numpy(got), to_numpy(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
    if backend.name == "numpy":
        np.testing.assert_array_equal(g, w)
    else:
        tol = 1e-10 if backend.name == "jax" else 1e-12
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _sin_step(w: Any, opt: Any, c: Any) -> Any:
    """One optimizer step on ``sum(sin(w * c))``; the loss."""
    opt.zero_grad()
    loss = xg.sum(xg.sin(w * c))
    loss.backward()
    opt.step()
    return loss


def _arr(backend: Any, *shape: int) -> Any:
    return backend.asarray(RNG.standard_normal(shape))


def _steps(backend: Any) -> int:
    return 12 if backend.name == "dask" else 100  # (Dask: a graph per step)


def _same_params(backend: Any, a: Any, b: Any) -> None:
    for (name, p), (_, q) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        try:
            _check(backend, p, q)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


# ====================================================================== 3. randomness
def _noisy(x: Any) -> Any:
    return x * 2.0 + xg.random.normal(tuple(x.shape))


def test_random_draws_come_from_the_policy_of_the_call(backend: Any) -> None:
    # each block starts a fresh generator from its seed: a jitted call draws from it (and advances
    # it) as the eager call does, not from the generator of the block that traced
    f = xg.jit(_noisy)
    x = xg.asarray(_arr(backend, 4))
    for i in range(_steps(backend)):
        seed = i % 3
        with backend.policy(seed=seed):
            got = [f(x), f(x)]
        with backend.policy(seed=seed):
            want = [_noisy(x), _noisy(x)]
        for g, w in zip(got, want, strict=True):
            _check(backend, g, w)
    assert f.cache_info().traces == 3  # (one per seed: the seed is part of the policy's signature)


def test_dropout_follows_the_policy_of_the_call(backend: Any) -> None:
    drop = nn.Dropout(0.5)
    f = xg.jit(lambda m, x: m(x))
    x = xg.asarray(_arr(backend, 3, 5))
    for i in range(_steps(backend)):
        with backend.policy(seed=7):
            got = f(drop, x)
        with backend.policy(seed=7):
            want = drop(x)
        _check(backend, got, want)
        if i == 0:
            first = to_numpy(got)
        else:  # (the same fresh stream each time: the same mask)
            np.testing.assert_array_equal(to_numpy(got), first)


def test_an_explicit_generator_advances_as_eagerly(backend: Any) -> None:
    g1, g2 = xg.random.Generator(3), xg.random.Generator(3)

    def noisy(g: Any, x: Any) -> Any:
        return x + g.uniform(tuple(x.shape))

    f = xg.jit(lambda x: noisy(g1, x))
    x = xg.asarray(_arr(backend, 4))
    with backend.policy():
        for _ in range(_steps(backend)):
            _check(backend, f(x), noisy(g2, x))


# ====================================================================== 4. Python state: guards
class _Tempered(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.temperature = 1.0

    def forward(self, x: Any) -> Any:
        return xg.nn.functional.softmax(self.lin(x) / self.temperature, axis=-1)


def test_module_attributes_are_guarded(backend: Any) -> None:
    act = nn.LeakyReLU(0.1)
    temp = backend.to(_Tempered(), dtype=xg.float64)
    drop = nn.Dropout(0.5)
    f = xg.jit(lambda m, x: m(x))
    x = xg.asarray(_arr(backend, 2, 4))
    for i in range(_steps(backend)):
        act.negative_slope = (0.1, 0.2, 0.3)[i % 3]
        temp.temperature = (1.0, 0.5)[i % 2]
        drop.p = (0.5, 0.25)[i % 2]
        _check(backend, f(act, x), act(x))
        _check(backend, f(temp, x), temp(x))
        with backend.policy(seed=i % 2):
            got = f(drop, x)
        with backend.policy(seed=i % 2):
            _check(backend, got, drop(x))
    assert f.cache_info().traces == 3 + 2 + 2


def test_forward_hooks_added_and_removed_after_the_trace(backend: Any) -> None:
    m = backend.to(nn.Linear(4, 2), dtype=xg.float64)
    f = xg.jit(lambda m, x: m(x))
    x = xg.asarray(_arr(backend, 3, 4))
    handles: list[Any] = []
    for i in range(_steps(backend)):
        if i % 10 == 3:
            handles.append(m.register_forward_hook(lambda mod, args, out: out * 3.0))
        if i % 10 == 7:
            handles.pop().remove()
        if i % 10 == 5:
            handles.append(m.register_forward_pre_hook(lambda mod, args: (args[0] + 1.0,)))
        if i % 10 == 9:
            handles.pop().remove()
        with xg.no_grad():
            _check(backend, f(m, x), m(x))


def test_tensor_hooks_removed_after_the_trace_stop_applying(backend: Any) -> None:
    ws = [nn.Parameter(xg.asarray(_arr(backend, 3))) for _ in range(2)]
    ws[1] = nn.Parameter(xg.asarray(backend.asarray(to_numpy(ws[0]))))
    c = _arr(backend, 3)

    def step(w: Any, c: Any) -> Any:
        w.grad = None
        loss = xg.sum(xg.sin(w * c))
        loss.backward()
        return w.grad

    f = xg.jit(step)
    handles: list[Any] = [None, None]
    for i in range(_steps(backend)):
        if i % 4 == 1:
            handles = [w.register_hook(lambda g: g * 10.0) for w in ws]
        if i % 4 == 3:
            for h in handles:
                h.remove()
        _check(backend, f(ws[0], c), step(ws[1], c))


class _Config:
    def __init__(self) -> None:
        self.scale = 2.0
        self.shift = (1.0, -1.0)


class _Scaler:
    def __init__(self) -> None:
        self.k = 3.0

    @xg.jit
    def apply(self, x: Any) -> Any:
        return x * self.k

    def eager(self, x: Any) -> Any:
        return x * self.k


def test_attributes_of_plain_objects_and_self_are_guarded(backend: Any) -> None:
    cfg = _Config()
    s = _Scaler()

    def g(cfg: Any, x: Any) -> Any:
        return x * cfg.scale + cfg.shift[0]

    f = xg.jit(g)
    x = _arr(backend, 4)
    for i in range(_steps(backend)):
        cfg.scale = (2.0, 3.0, -1.0)[i % 3]
        cfg.shift = ((1.0, 0.0), (-2.0, 0.0))[i % 2]
        s.k = (3.0, 0.5)[i % 2]
        _check(backend, f(cfg, x), g(cfg, x))
        _check(backend, s.apply(x), s.eager(x))
    assert f.cache_info().traces == 6


class _Counter:
    def __init__(self) -> None:
        self.n = 0


def test_a_call_that_changes_the_state_it_reads_is_not_replayed(backend: Any) -> None:
    # the Python code runs at every eager call: its effect (a counter) and what it reads must too
    c1, c2 = _Counter(), _Counter()

    def g(c: Any, x: Any) -> Any:
        c.n = (c.n + 1) % 2
        return x * float(c.n)

    f = xg.jit(g)
    x = _arr(backend, 3)
    for _ in range(20):
        _check(backend, f(c1, x), g(c2, x))
        assert c1.n == c2.n


def test_globals_are_guarded(backend: Any) -> None:
    global _SCALE
    f = xg.jit(_by_global)
    x = _arr(backend, 3)
    try:
        for i in range(20):
            _SCALE = (2.0, -0.5)[i % 2]
            _check(backend, f(x), _by_global(x))
    finally:
        _SCALE = 2.0
    assert f.cache_info().traces == 2


_SCALE = 2.0


def _by_global(x: Any) -> Any:
    return x * _SCALE


# ====================================================================== 5. signed zeros, NaN
def test_signed_zero_and_nan_are_signatures(backend: Any) -> None:
    x = _arr(backend, 4)

    def g(x: Any, s: float) -> Any:
        return xg.copysign(x, xg.full_like(x, s)) + xg.atan2(xg.full_like(x, s), x)

    f = xg.jit(g)
    fs = xg.jit(g, static_argnums=1)
    values = [0.0, -0.0, math.nan, 0.0, -0.0, -math.nan, 1.5]
    for s in values * 3:
        for h in (f, fs):
            got, want = to_numpy(h(x, s)), to_numpy(g(x, s))
            np.testing.assert_array_equal(got, want)  # (NaN in the same places; the signs of zeros too)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert f.cache_info().traces == 5  # 0.0, -0.0, NaN, -NaN, 1.5
    assert fs.cache_info().traces == 5


# ====================================================================== 6. closures
def test_closed_over_module_after_load_state_dict(backend: Any) -> None:
    m = backend.to(nn.Linear(4, 2), dtype=xg.float64)
    f = xg.jit(lambda x: m(x))
    x = xg.asarray(_arr(backend, 3, 4))
    states = [copy.deepcopy(m.state_dict()), copy.deepcopy(backend.to(nn.Linear(4, 2), dtype=xg.float64).state_dict())]
    for i in range(_steps(backend)):
        m.load_state_dict(states[i % 2])
        with xg.no_grad():
            _check(backend, f(x), m(x))
    assert f.cache_info().traces == 1


def test_closed_over_tensor_updated_in_place(backend: Any) -> None:
    t = xg.asarray(_arr(backend, 4))
    f = xg.jit(lambda x: x * t)
    x = xg.asarray(_arr(backend, 4))
    for _ in range(_steps(backend)):
        t += 1.0  # (JAX: the Tensor takes a new array; NumPy: the same buffer)
        _check(backend, f(x), x * t)
    assert f.cache_info().traces == 1


def test_closed_over_parameters_get_gradients(backend: Any) -> None:
    m = backend.to(nn.Linear(4, 1), dtype=xg.float64)
    ref = copy.deepcopy(m)
    f = xg.jit(lambda x: xg.sum(m(x) ** 2))
    x = xg.asarray(_arr(backend, 3, 4))
    for _ in range(10):
        m.zero_grad()
        ref.zero_grad()
        out = f(x)
        assert out.requires_grad
        out.backward()
        xg.sum(ref(x) ** 2).backward()
        _check(backend, out, xg.sum(ref(x) ** 2))
        for p, q in zip(m.parameters(), ref.parameters(), strict=True):
            _check(backend, p.grad, q.grad)


# ====================================================================== 7. training loops with state changes
def _model(backend: Any) -> Any:
    m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.LeakyReLU(0.1), nn.Dropout(0.3), nn.Linear(6, 1))
    return backend.to(m, dtype=xg.float64)


def _step(model: Any, opt: Any, x: Any, y: Any) -> Any:
    opt.zero_grad()
    loss = xg.mean((model(x) - y) ** 2)
    loss.backward()
    opt.step()
    return loss


def _run(backend: Any, model: Any, opt: Any, step: Any, x: Any, y: Any, n: int, snapshot: Any) -> list[Any]:
    losses = []
    handle = None
    with backend.policy(seed=0):
        for i in range(n):
            if i % 7 == 3:
                opt.param_groups[0]["lr"] = (0.01, 0.02, 0.005)[i % 3]
            if i % 11 == 5:
                model.train(not model.training)
            if i % 13 == 6:
                model[2].negative_slope = (0.1, 0.3)[i % 2]
                model[3].p = (0.3, 0.1)[i % 2]
            if i % 17 == 8:
                model.load_state_dict(snapshot)
            if i % 19 == 9:
                handle = model[4].register_forward_hook(lambda mod, args, out: out * 0.5)
            if i % 19 == 14 and handle is not None:
                handle.remove()
            losses.append(step(model, opt, x, y))
    return losses


@pytest.mark.parametrize("oname", ["SGD", "Adam"])
def test_training_loop_with_state_changes(oname: str, backend: Any) -> None:
    m1 = _model(backend)
    m2 = copy.deepcopy(m1)
    snapshot = copy.deepcopy(m1.state_dict())
    kw = {"lr": 0.01, "momentum": 0.9} if oname == "SGD" else {"lr": 0.01}
    o1, o2 = getattr(optim, oname)(m1.parameters(), **kw), getattr(optim, oname)(m2.parameters(), **kw)
    x, y = _arr(backend, 8, 4), _arr(backend, 8, 1)
    n = _steps(backend)
    got = _run(backend, m1, o1, xg.jit(_step), x, y, n, snapshot)
    want = _run(backend, m2, o2, _step, x, y, n, snapshot)
    for g, w in zip(got, want, strict=True):
        _check(backend, g, w)
    _same_params(backend, m1, m2)


def test_closed_over_training_step(backend: Any) -> None:
    # the model and the optimizer are closed over: read and written back at every call
    m1 = _model(backend)
    m2 = copy.deepcopy(m1)
    snapshot = copy.deepcopy(m1.state_dict())
    o1, o2 = optim.Adam(m1.parameters(), lr=0.01), optim.Adam(m2.parameters(), lr=0.01)
    x, y = _arr(backend, 8, 4), _arr(backend, 8, 1)
    jstep = xg.jit(lambda x, y: _step(m1, o1, x, y))
    got = _run(backend, m1, o1, lambda m, o, x, y: jstep(x, y), x, y, _steps(backend), snapshot)
    want = _run(backend, m2, o2, _step, x, y, _steps(backend), snapshot)
    for g, w in zip(got, want, strict=True):
        _check(backend, g, w)
    _same_params(backend, m1, m2)


# (a differential test: random small training programs, eager against jitted)
_ACTIONS = st.lists(st.sampled_from(["step", "lr", "train", "eval", "slope", "p", "load", "hook", "unhook",
                                     "inplace"]), min_size=3, max_size=14)


def _program(backend: Any, model: Any, opt: Any, step: Any, actions: list[str], snapshot: Any,
             x: Any, y: Any) -> list[Any]:
    out: list[Any] = []
    handles: list[Any] = []
    with backend.policy(seed=1):
        for k, a in enumerate(actions):
            if a == "lr":
                opt.param_groups[0]["lr"] = 0.001 * (k + 1)
            elif a in ("train", "eval"):
                model.train(a == "train")
            elif a == "slope":
                model[2].negative_slope = 0.05 * (k + 1)
            elif a == "p":
                model[3].p = 0.1 * (k % 5)
            elif a == "load":
                model.load_state_dict(snapshot)
            elif a == "hook":
                handles.append(model[0].register_forward_hook(lambda mod, args, out, k=k: out + 0.1 * k))
            elif a == "unhook" and handles:
                handles.pop().remove()
            elif a == "inplace":
                with xg.no_grad():
                    model[4].weight *= 0.5
            out.append(step(model, opt, x, y))
    return out


def test_random_training_programs_jitted_equal_eager(backend: Any) -> None:
    @settings(max_examples=examples_for(backend.name))
    @given(actions=_ACTIONS, adam=st.booleans())
    def run(actions: list[str], adam: bool) -> None:
        m1 = _model(backend)
        m2 = copy.deepcopy(m1)
        snapshot = copy.deepcopy(m1.state_dict())
        make = (lambda p: optim.Adam(p, lr=0.01)) if adam else (lambda p: optim.SGD(p, lr=0.01, momentum=0.5))
        o1, o2 = make(m1.parameters()), make(m2.parameters())
        x, y = _arr(backend, 6, 4), _arr(backend, 6, 1)
        got = _program(backend, m1, o1, xg.jit(_step), actions, snapshot, x, y)
        want = _program(backend, m2, o2, _step, actions, snapshot, x, y)
        for g, w in zip(got, want, strict=True):
            _check(backend, g, w)
        _same_params(backend, m1, m2)

    run()


# ====================================================================== 7. crashes and leaks
class _BoomError(Exception):
    pass


@pytest.mark.parametrize("exc", [_BoomError, KeyboardInterrupt])
def test_an_exception_while_tracing_leaves_the_optimizer_usable(exc: type[BaseException], backend: Any) -> None:
    m1 = backend.to(nn.Linear(3, 1), dtype=xg.float64)
    m2 = copy.deepcopy(m1)
    o1, o2 = optim.Adam(m1.parameters(), lr=0.1), optim.Adam(m2.parameters(), lr=0.1)
    x, y = _arr(backend, 4, 3), _arr(backend, 4, 1)

    def step(model: Any, opt: Any, x: Any, y: Any, fail: bool) -> Any:
        loss = _step(model, opt, x, y)
        if fail:
            raise exc("while tracing")
        return loss

    f = xg.jit(step, static_argnums=4)
    for i in range(6):
        with pytest.raises(exc, match="while tracing"):
            f(m1, o1, x, y, True)
        with pytest.raises(exc, match="while tracing"):
            step(m2, o2, x, y, True)
        assert type(o1.param_groups[0]["lr"]) is float and o1.param_groups[0]["lr"] == 0.1
        assert not any(xg._tracing.is_tracer(p.data) for p in m1.parameters())
        steps = [int(to_numpy(xg.asarray(o.state_dict()["state"][0]["step"]))) for o in (o1, o2)]
        assert steps == [3 * i + 1] * 2
        _check(backend, _step(m1, o1, x, y), _step(m2, o2, x, y))  # eager works after it
        _check(backend, f(m1, o1, x, y, False), step(m2, o2, x, y, False))
    _same_params(backend, m1, m2)


def test_learning_rates_that_are_numpy_scalars(backend: Any) -> None:
    w1 = nn.Parameter(xg.asarray(_arr(backend, 3)))
    w2 = nn.Parameter(xg.asarray(backend.asarray(to_numpy(w1))))
    o1, o2 = optim.Adam([w1], lr=0.1), optim.Adam([w2], lr=0.1)
    c = _arr(backend, 3)

    f = xg.jit(_sin_step)
    # (NumPy scalars, float32 too: eager step() reads each as the Python number it holds, and so does jit)
    for i in range(20):
        lr = (0.1, np.float64(0.05), np.float32(0.02), 0.03, np.float32(0.7))[i % 5]
        o1.param_groups[0]["lr"] = o2.param_groups[0]["lr"] = lr
        _check(backend, f(w1, o1, c), _sin_step(w2, o2, c))
        assert o1.param_groups[0]["lr"] is lr  # (left as the user set it)
    _check(backend, w1, w2)
    assert f.cache_info().traces == 2  # (the first step, then one with Adam's state: no retrace per scalar type)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("oname", ["SGD", "Adam"])
def test_a_float32_learning_rate_and_schedule_under_jit(oname: str, dtype: str, backend: Any) -> None:
    # a float32 learning rate from the start, and a schedule whose factors are float32
    from xpgrad.optim import lr_scheduler

    w1 = nn.Parameter(xg.asarray(backend.asarray(RNG.standard_normal(4).astype(dtype))))
    w2 = nn.Parameter(xg.asarray(backend.asarray(to_numpy(w1))))
    kw: dict[str, Any] = {"momentum": 0.9} if oname == "SGD" else {}
    o1 = getattr(optim, oname)([w1], lr=np.float32(0.1), **kw)
    o2 = getattr(optim, oname)([w2], lr=np.float32(0.1), **kw)
    s1, s2 = (lr_scheduler.LambdaLR(o, lambda e: np.float32(0.9) ** e) for o in (o1, o2))
    c = backend.asarray(np.arange(4.0, dtype=dtype))

    def check(got: Any, want: Any) -> None:
        if backend.name == "numpy" or dtype == "float64":
            _check(backend, got, want)
        else:  # (float32 under jax.jit: XLA's fused sin/cos differ from eager's in the last bit, a Python lr too)
            np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=1e-5, atol=1e-6)

    f = xg.jit(_sin_step)
    for _ in range(8):
        check(f(w1, o1, c), _sin_step(w2, o2, c))
        s1.step()
        s2.step()
        assert type(o1.param_groups[0]["lr"]) is np.float32 and o1.param_groups[0]["lr"] == o2.param_groups[0]["lr"]
    check(w1, w2)
    assert w1.dtype == getattr(xg, dtype)


def _programs_in_linecache(name: str) -> int:
    return sum(1 for k in list(linecache.cache) if isinstance(k, str) and k.startswith(f"<xpgrad.jit {name} #"))


def test_retracing_frees_programs_and_their_source(backend: Any) -> None:
    def retraced(x: Any, c: float) -> Any:
        return xg.sum(xg.exp(x) * c)

    f = xg.jit(retraced, cache_size=3)
    x = _arr(backend, 3)
    for i in range(60):
        f(x, float(i))
    gc.collect()
    assert f.cache_info().traces == 60
    assert _programs_in_linecache("retraced") <= 3
    f.clear_cache()
    gc.collect()
    assert _programs_in_linecache("retraced") == 0


def test_read_only_donated_numpy_array(np_backend: Any) -> None:
    f = xg.jit(lambda x: xg.sin(x) * 2.0 + 1.0, donate_argnums=0)
    for k in range(5):
        x = np.full(4, 0.25 * k)
        x.flags.writeable = False
        want = np.sin(x) * 2.0 + 1.0
        np.testing.assert_array_equal(to_numpy(f(x)), want)
        np.testing.assert_array_equal(x, np.full(4, 0.25 * k))  # (not written: copied first)


class _Keeps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.last: Any = None

    def forward(self, x: Any) -> Any:
        self.last = self.lin(x)  # (Python state the call changes: a Tensor with a graph)
        return self.last


def test_a_module_that_keeps_its_output(backend: Any) -> None:
    m = backend.to(_Keeps(), dtype=xg.float64)
    f = xg.jit(lambda m, x: xg.sum(m(x) ** 2))
    for _ in range(5):
        x = xg.asarray(_arr(backend, 4, 3))
        _check(backend, f(m, x), xg.sum(m(x) ** 2))  # (the call after the trace runs f as it is)


# ====================================================================== the protocol of stateful objects
class _Box:
    """A user's object that implements jit's protocol of stateful objects (`JitStateful`): a Tensor
    and a step count it keeps, as an optimizer does."""

    def __init__(self, t: xg.Tensor) -> None:
        self.t = t
        self.steps = 0

    def _jit_state(self) -> tuple[Any, list[xg.Tensor]]:
        return ("box",), [self.t]

    def _jit_structure(self) -> Any:
        return ()

    def _jit_numbers(self) -> list[Any]:
        return []

    def _jit_count(self) -> int:
        return self.steps

    def _jit_replayed(self, count: int) -> None:
        self.steps += count


def test_modules_and_optimizers_implement_the_jit_protocol(backend: Any) -> None:
    """The hooks jit reads of a Module or an optimizer are one declared protocol (JitStateful): every
    Module and optimizer implements it, and so may a user's object, whose Tensor is then state
    (read at every call, written back) and whose steps a replay counts as the eager call does."""
    model = backend.to(nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), dtype=xg.float64)
    opts = [optim.SGD(model.parameters(), lr=0.1), optim.Adam(model.parameters(), lr=0.01)]
    for obj in (*model.modules(), *opts):
        assert isinstance(obj, JitStateful), type(obj)
    assert not isinstance(xg.Tensor(_arr(backend, 2)), JitStateful)

    def f(box: _Box, x: Any) -> Any:
        box.t.data = box.t.data * x
        box.steps += 1
        return xg.sum(box.t)

    box, twin = _Box(xg.Tensor(_arr(backend, 3))), _Box(xg.Tensor(_arr(backend, 3)))
    twin.t.data = xg.asarray(box.t.data, copy=True).data
    assert isinstance(box, JitStateful)
    g = xg.jit(f)
    for i in range(_steps(backend)):
        x = _arr(backend, 3)
        _check(backend, g(box, x), f(twin, x))
        _check(backend, box.t, twin.t)
        assert box.steps == twin.steps == i + 1
    assert g.cache_info().traces == 1
