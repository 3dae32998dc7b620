"""What a replayed xg.jit call does around its program: the learning rate passed as an input
(the same 0-d array for the same value on JAX), the module tree read at every call (a structural
change still traces again), and the ``.grad`` that appears after the first step (no second trace
where the step sets it before reading it).

Every jitted call is compared with the eager call on the same state, in loops.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

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
