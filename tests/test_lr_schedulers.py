"""The learning-rate schedulers of issue #31 against ``torch.optim.lr_scheduler``, and under ``xg.jit``.

Each schedule runs 60 steps on two parameter groups (different rates) next to PyTorch's,
with the same arguments; the learning rates must agree at every step. A jitted training
step then follows a schedule for 30 steps without retracing (the rate is a program input).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import nn, optim
from xpgrad.optim import lr_scheduler

from ._util import to_numpy

torch = pytest.importorskip("torch")
TS = torch.optim.lr_scheduler
STEPS = 60


def _plateau_metric(i: int) -> float:
    """A loss that falls, plateaus, wobbles and falls again: every branch of ReduceLROnPlateau."""
    return [5.0 - 0.5 * i, 1.0, 1.0 + 1e-6, 0.5 + 0.1 * math.sin(i)][min(i // 10, 3)] if i < 40 else 0.1 / (i - 38)


class Power:
    """A callable object as lr_lambda (its attributes go into LambdaLR's state_dict)."""

    def __init__(self, p: float) -> None:
        self.p = p

    def __call__(self, epoch: int) -> float:
        return 1.0 / (1.0 + epoch) ** self.p


# name, make(lib, opt) with lib the scheduler module (ours or torch's)
CASES: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("exponential", lambda lib, o: lib.ExponentialLR(o, gamma=0.93)),
    ("exponential_1", lambda lib, o: lib.ExponentialLR(o, gamma=1.0)),
    ("multistep", lambda lib, o: lib.MultiStepLR(o, milestones=[5, 12, 12, 40], gamma=0.3)),
    ("multistep_default", lambda lib, o: lib.MultiStepLR(o, milestones=[20])),
    ("lambda", lambda lib, o: lib.LambdaLR(o, lambda e: 0.95 ** e)),
    ("lambda_per_group", lambda lib, o: lib.LambdaLR(o, [lambda e: 1.0 / (e + 1), lambda e: min(1.0, (e + 1) / 10)])),
    ("lambda_object", lambda lib, o: lib.LambdaLR(o, Power(0.5))),
    ("polynomial", lambda lib, o: lib.PolynomialLR(o, total_iters=30, power=2.0)),
    ("polynomial_default", lambda lib, o: lib.PolynomialLR(o)),
    ("polynomial_sqrt", lambda lib, o: lib.PolynomialLR(o, total_iters=45, power=0.5)),
    ("warm_restarts", lambda lib, o: lib.CosineAnnealingWarmRestarts(o, T_0=7)),
    ("warm_restarts_mult", lambda lib, o: lib.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01)),
    ("sequential", lambda lib, o: lib.SequentialLR(o, [lib.LinearLR(o, start_factor=0.1, total_iters=5),
                                                   lib.ExponentialLR(o, gamma=0.9)], milestones=[5])),
    ("sequential_3", lambda lib, o: lib.SequentialLR(o, [lib.LambdaLR(o, lambda e: 0.5 if e < 3 else 1.0),
                                                     lib.StepLR(o, step_size=4, gamma=0.5),
                                                     lib.CosineAnnealingLR(o, T_max=10, eta_min=0.001)],
                                                 milestones=[8, 25])),
    ("sequential_poly_multistep", lambda lib, o: lib.SequentialLR(o, [lib.PolynomialLR(o, total_iters=10),
                                                                 lib.MultiStepLR(o, milestones=[3, 9], gamma=0.5)],
                                                             milestones=[6])),
    ("plateau", lambda lib, o: lib.ReduceLROnPlateau(o, factor=0.5, patience=2)),
    ("plateau_max_abs", lambda lib, o: lib.ReduceLROnPlateau(o, mode="max", factor=0.2, patience=1,
                                                         threshold=0.01, threshold_mode="abs", cooldown=2,
                                                         min_lr=[0.01, 0.002])),
    ("plateau_cooldown", lambda lib, o: lib.ReduceLROnPlateau(o, factor=0.1, patience=0, cooldown=3, min_lr=1e-4,
                                                          eps=1e-3)),
]


def _optimizers(opt_name: str = "SGD") -> tuple[Any, Any]:
    okw = {"lr": 0.3, "momentum": 0.9} if opt_name == "SGD" else {"lr": 0.3}
    ours_p = [nn.Parameter(xg.zeros(1)), nn.Parameter(xg.zeros(1))]
    theirs_p = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
    groups = lambda ps: [{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.05}]
    return getattr(optim, opt_name)(groups(ours_p), **okw), getattr(torch.optim, opt_name)(groups(theirs_p), **okw)


def _step(sched: Any, i: int) -> None:
    metric = _plateau_metric(i)
    if isinstance(sched, (lr_scheduler.ReduceLROnPlateau, TS.ReduceLROnPlateau)):
        sched.step(-metric if sched.mode == "max" else metric)
    else:
        sched.step()


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
@pytest.mark.parametrize(("name", "make"), CASES, ids=[c[0] for c in CASES])
def test_schedule_matches_torch(name: str, make: Callable[[Any, Any], Any], opt_name: str) -> None:
    opt, topt = _optimizers(opt_name)
    sched, tsched = make(lr_scheduler, opt), make(TS, topt)
    seen = set()
    for i in range(STEPS):
        np.testing.assert_allclose(sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-12, atol=1e-15,
                                   err_msg=f"{name}: step {i}")
        for g, tg in zip(opt.param_groups, topt.param_groups, strict=True):
            assert math.isclose(g["lr"], tg["lr"], rel_tol=1e-12, abs_tol=1e-15), (name, i)
        seen.add(round(opt.param_groups[0]["lr"], 12))
        opt.step()
        topt.step()
        _step(sched, i)
        _step(tsched, i)
    assert len(seen) > 1 or name == "exponential_1"  # the schedule did change the rate


@pytest.mark.parametrize(("name", "make"), CASES, ids=[c[0] for c in CASES])
def test_state_dict_resumes_the_schedule(name: str, make: Callable[[Any, Any], Any]) -> None:
    opt, _ = _optimizers()
    sched = make(lr_scheduler, opt)
    for i in range(17):
        opt.step()
        _step(sched, i)
    state = copy.deepcopy(sched.state_dict())
    assert "optimizer" not in state
    opt2, _ = _optimizers()
    sched2 = make(lr_scheduler, opt2)
    sched2.load_state_dict(state)
    for g2, g in zip(opt2.param_groups, opt.param_groups, strict=True):  # the optimizer's own state_dict's part
        g2["lr"] = g["lr"]
    for i in range(17, 45):
        opt.step()
        opt2.step()
        _step(sched, i)
        _step(sched2, i)
        assert sched2.get_last_lr() == sched.get_last_lr(), (name, i)


def test_lambda_state_dict_keeps_callable_objects_only() -> None:
    opt, _ = _optimizers()
    sched = lr_scheduler.LambdaLR(opt, [Power(0.5), lambda e: 1.0])
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"p": 0.5}, None]
    other = lr_scheduler.LambdaLR(_optimizers()[0], [Power(2.0), lambda e: 1.0])
    other.load_state_dict(state)
    assert other.lr_lambdas[0].p == 0.5
    assert "lr_lambdas" in state  # the caller's dict is left whole


def test_warm_restarts_fractional_epochs_match_torch() -> None:
    opt, topt = _optimizers()
    kw = {"T_0": 4, "T_mult": 2, "eta_min": 0.001}
    sched, tsched = lr_scheduler.CosineAnnealingWarmRestarts(opt, **kw), TS.CosineAnnealingWarmRestarts(topt, **kw)
    for epoch in np.arange(0.0, 30.0, 0.37):
        sched.step(float(epoch))
        tsched.step(float(epoch))
        np.testing.assert_allclose(sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(("make", "match"), [
    (lambda o: lr_scheduler.LambdaLR(o, [lambda e: 1.0]), "LambdaLR: expected 2 lr_lambdas"),
    (lambda o: lr_scheduler.LambdaLR(o, 3.0), "LambdaLR: lr_lambda must be callable, got 3.0"),
    (lambda o: lr_scheduler.PolynomialLR(o, total_iters=0), "PolynomialLR: total_iters must be a positive int"),
    (lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=0), "T_0 must be a positive int, got 0"),
    (lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0), "T_mult must be an int >= 1"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, factor=1.0), "ReduceLROnPlateau: factor must be < 1, got 1.0"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, mode="up"), "mode must be 'min' or 'max', got 'up'"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, threshold_mode="x"), "threshold_mode must be 'rel' or 'abs'"),
    (lambda o: lr_scheduler.ReduceLROnPlateau(o, min_lr=[0.1]), "expected 2 min_lrs"),
    (lambda o: lr_scheduler.SequentialLR(o, [], milestones=[]), "SequentialLR: expected at least one scheduler"),
    (lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.ExponentialLR(o, 0.9)], milestones=[3]),
     "expected 0 milestones for 1 schedulers, got 1"),
    (lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.ReduceLROnPlateau(o)], milestones=[]),
     "ReduceLROnPlateau .at index 0. is not supported"),
    (lambda o: lr_scheduler.SequentialLR(o, [lr_scheduler.ExponentialLR(_optimizers()[0], 0.9)], milestones=[]),
     "scheduler 0 .ExponentialLR. belongs to another optimizer"),
])
def test_bad_arguments(make: Callable[[Any], Any], match: str) -> None:
    opt, _ = _optimizers()
    with pytest.raises(xg.XpgradValueError, match=match):
        make(opt)


JIT_CASES = [c for c in CASES if c[0] in ("exponential", "multistep", "lambda_per_group", "polynomial",
                                          "warm_restarts_mult", "sequential", "plateau")]


@pytest.mark.parametrize(("name", "make"), JIT_CASES, ids=[c[0] for c in JIT_CASES])
def test_jitted_training_follows_the_schedule(name: str, make: Callable[[Any, Any], Any], backend: Any) -> None:
    with backend.policy(seed=0, dtype="float64"):
        m1 = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        x = xg.random.normal((8, 3))
        y = xg.random.normal((8, 1))
    m2 = copy.deepcopy(m1)

    def groups(m: Any) -> list[dict[str, Any]]:
        return [{"params": list(m[0].parameters())}, {"params": list(m[2].parameters()), "lr": 0.02}]

    o1, o2 = optim.SGD(groups(m1), lr=0.1, momentum=0.5), optim.SGD(groups(m2), lr=0.1, momentum=0.5)
    s1, s2 = make(lr_scheduler, o1), make(lr_scheduler, o2)

    def train_step(model: Any, opt: Any, x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = xg.mean((model(x) - y) ** 2)
        loss.backward()
        opt.step()
        return loss

    step = xg.jit(train_step)
    rates = set()
    for i in range(30):
        l1 = step(m1, o1, x, y)
        l2 = train_step(m2, o2, x, y)
        np.testing.assert_allclose(to_numpy(l1), to_numpy(l2), rtol=1e-9, err_msg=f"{name}: loss at step {i}")
        _step(s1, i)
        _step(s2, i)
        assert o1.param_groups[1]["lr"] == o2.param_groups[1]["lr"]
        rates.add(float(o1.param_groups[0]["lr"]))
    assert len(rates) > 2  # the rate changed along the way...
    for (k, p), (_, q) in zip(m1.state_dict().items(), m2.state_dict().items(), strict=True):
        np.testing.assert_allclose(to_numpy(p), to_numpy(q), rtol=1e-9, atol=1e-12, err_msg=k)
    # ...and the jitted step traced only for its first call (no gradients, no momentum yet) and the second
    info = step.cache_info()
    assert info.traces == 2, info
    assert info.hits == 28, info
