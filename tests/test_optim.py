"""xpgrad.optim against torch.optim: 10 steps in float64 on every backend, schedulers, state dicts."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import nn, optim
from xpgrad.optim import lr_scheduler

from ._util import to_numpy as _np

torch = pytest.importorskip("torch")


RNG = np.random.default_rng(0)
W0 = [RNG.uniform(-1, 1, (3, 4)), RNG.uniform(-1, 1, 5)]
C = [RNG.uniform(0.5, 2.0, (3, 4)), RNG.uniform(-1, 1, 5)]


def _loss(ns: Any, ws: list[Any], cs: list[Any]) -> Any:
    """A non-quadratic loss of two parameters, written for xpgrad and torch alike."""
    w1, w2 = ws
    c1, c2 = cs
    return ns.sum((w1 * c1 - 0.3) ** 2) + 0.1 * ns.sum(w1**4) + ns.sum(ns.sin(w2) * c2) + 0.05 * ns.sum(w2 * w2)


CONFIGS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.01, "momentum": 0.5, "maximize": True}),
    ("Adam", {"lr": 0.01, "maximize": True}),
    ("Adam", {"lr": 0.05}),
    ("Adam", {"lr": 0.05, "betas": (0.8, 0.9), "weight_decay": 0.1}),
    ("Adam", {"lr": 0.05, "amsgrad": True}),
    ("AdamW", {"lr": 0.05}),
    ("AdamW", {"lr": 0.05, "weight_decay": 0.3, "amsgrad": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True, "weight_decay": 0.1}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1, "initial_accumulator_value": 0.2}),
]


def _ids(c: tuple[str, dict[str, Any]]) -> str:
    return c[0] + "-" + "-".join(f"{k}={v}" for k, v in c[1].items())


@pytest.mark.parametrize("config", CONFIGS, ids=[_ids(c) for c in CONFIGS])
def test_ten_steps_match_torch(config: tuple[str, dict[str, Any]], backend: Any) -> None:
    name, kw = config
    ours = [nn.Parameter(xg.asarray(backend.asarray(w.copy()))) for w in W0]
    theirs = [torch.tensor(w.copy(), requires_grad=True) for w in W0]
    cs_ours = [backend.asarray(c) for c in C]
    cs_theirs = [torch.tensor(c) for c in C]
    opt = getattr(optim, name)(ours, **kw)
    topt = getattr(torch.optim, name)(theirs, **kw)
    datas = [p.data for p in ours]
    for _ in range(10):
        opt.zero_grad()
        _loss(xg, ours, cs_ours).backward()
        opt.step()
        topt.zero_grad()
        _loss(torch, theirs, cs_theirs).backward()
        topt.step()
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(_np(o), t.detach().numpy(), rtol=1e-6, atol=1e-12)
        assert o.requires_grad and o.is_leaf and isinstance(o, nn.Parameter)
    if backend.name in ("numpy", "torch"):
        # the update mutated the parameters' own arrays
        assert all(p.data is d for p, d in zip(ours, datas, strict=True))


def test_param_groups_with_their_own_lr() -> None:
    a = nn.Parameter(xg.asarray([1.0]))
    b = nn.Parameter(xg.asarray([1.0]))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    (a * a + b * b).sum().backward()
    opt.step()
    np.testing.assert_allclose(_np(a.detach()), [0.8])
    np.testing.assert_allclose(_np(b.detach()), [0.0])
    with pytest.raises(xg.XpgradValueError, match="more than one group"):
        optim.SGD([{"params": [a]}, {"params": [a]}])
    with pytest.raises(xg.XpgradValueError, match="unknown option"):
        optim.SGD([{"params": [a], "lrr": 1.0}])
    with pytest.raises(xg.XpgradValueError, match="nesterov"):
        optim.SGD([a], nesterov=True)
    with pytest.raises(xg.XpgradValueError, match="empty"):
        optim.Adam([])


def test_zero_grad_and_parameters_without_grad() -> None:
    a = nn.Parameter(xg.asarray([1.0, 2.0]))
    b = nn.Parameter(xg.asarray([3.0]))
    opt = optim.Adam([a, b], lr=0.1)
    (a * a).sum().backward()
    opt.step()  # b has no gradient: untouched
    np.testing.assert_array_equal(_np(b.detach()), [3.0])
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(_np(a.grad), [0.0, 0.0])
    opt.zero_grad()
    assert a.grad is None


def test_step_with_closure() -> None:
    a = nn.Parameter(xg.asarray([2.0]))
    opt = optim.SGD([a], lr=0.25)

    def closure() -> Any:
        opt.zero_grad()
        loss = (a * a).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert float(loss.detach()) == 4.0
    np.testing.assert_allclose(_np(a.detach()), [1.0])


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad"])
def test_state_dict_round_trip(name: str, tmp_path: Any) -> None:
    kw = {"lr": 0.05, "momentum": 0.9} if name in ("SGD", "RMSprop") else {"lr": 0.05}

    def make() -> tuple[list[nn.Parameter], Any]:
        ps = [nn.Parameter(xg.asarray(w.copy())) for w in W0]
        return ps, getattr(optim, name)(ps, **kw)

    def run(ps: list[nn.Parameter], opt: Any, n: int, cs: list[Any] = C) -> None:
        for _ in range(n):
            opt.zero_grad()
            _loss(xg, ps, cs).backward()
            opt.step()

    ref_p, ref_opt = make()
    run(ref_p, ref_opt, 6)
    p1, o1 = make()
    run(p1, o1, 3)
    # through a file, onto torch: parameters and optimizer state both move
    xg.save({"model": {str(i): p.detach() for i, p in enumerate(p1)}, "optim": o1.state_dict()},
            tmp_path / "ckpt.safetensors")
    with xg.default_device("torch"):
        ck = xg.load(tmp_path / "ckpt.safetensors")
    p2 = [nn.Parameter(ck["model"][str(i)]) for i in range(len(W0))]
    assert all(isinstance(p.data, torch.Tensor) for p in p2)
    o2 = getattr(optim, name)(p2, **kw)
    o2.load_state_dict(ck["optim"])
    run(p2, o2, 3, [torch.tensor(c) for c in C])
    for a, b in zip(ref_p, p2, strict=True):
        np.testing.assert_allclose(_np(a.detach()), _np(b.detach()), rtol=1e-12)
    # in memory
    p3, o3 = make()
    run(p3, o3, 3)
    o4 = getattr(optim, name)(p3, **kw)
    o4.load_state_dict(o3.state_dict())
    run(p3, o4, 3)
    for a, b in zip(ref_p, p3, strict=True):
        np.testing.assert_allclose(_np(a.detach()), _np(b.detach()), rtol=1e-12)


def test_load_state_dict_mismatch() -> None:
    a = nn.Parameter(xg.asarray([1.0]))
    b = nn.Parameter(xg.asarray([1.0]))
    sd = optim.SGD([a, b]).state_dict()
    with pytest.raises(xg.XpgradValueError, match="group 0 has 2 parameters"):
        optim.SGD([a]).load_state_dict(sd)
    with pytest.raises(xg.XpgradValueError, match="parameter groups"):
        optim.SGD([{"params": [a]}, {"params": [b]}]).load_state_dict(sd)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad"])
def test_load_state_dict_refuses_state_of_another_shape(name: str, backend: Any) -> None:
    """A state array whose shape is not its parameter's is refused, naming the parameter's index
    and both shapes, and the optimizer keeps its own state (it was taken, to fail at the next
    step or broadcast silently)."""
    kw = {"lr": 0.05, "momentum": 0.9} if name in ("SGD", "RMSprop") else {"lr": 0.05}
    small = [nn.Parameter(xg.asarray(backend.asarray(np.ones(3)))), nn.Parameter(xg.asarray(backend.asarray(np.ones(2))))]
    big = [nn.Parameter(xg.asarray(backend.asarray(np.ones(3)))), nn.Parameter(xg.asarray(backend.asarray(np.ones(4))))]
    src, dst = getattr(optim, name)(small, **kw), getattr(optim, name)(big, **kw)
    for opt, ps in ((src, small), (dst, big)):
        for _ in range(2):
            opt.zero_grad()
            sum(xg.sum(p * p) for p in ps).backward()
            opt.step()
    before = {k: {n: _np(v).copy() if isinstance(v, xg.Tensor) else v for n, v in st.items()}
              for k, st in dst.state.items()}
    with pytest.raises(xg.XpgradValueError, match=r"of parameter 1 has shape \(2,\), the parameter \(4,\)"):
        dst.load_state_dict(src.state_dict())
    after = {k: {n: _np(v) if isinstance(v, xg.Tensor) else v for n, v in st.items()} for k, st in dst.state.items()}
    assert before.keys() == after.keys()
    for k in before:
        for n in before[k]:
            np.testing.assert_array_equal(after[k][n], before[k][n])
    ok = getattr(optim, name)(small, **kw)
    ok.load_state_dict(src.state_dict())  # (the same shapes load)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
@pytest.mark.parametrize("lr", [np.float32(0.1), np.float64(0.1)], ids=["np.float32", "np.float64"])
def test_numpy_scalar_learning_rate(name: str, lr: Any, backend: Any) -> None:
    """A NumPy scalar learning rate (and betas), given to the constructor or set in a group, steps
    on every backend as the Python float of the same value: float32 parameters stay float32, the
    steps are exactly those of ``float(lr)``, and the group keeps the value it was given."""
    extra: dict[str, Any] = {"betas": (np.float32(0.8), 0.9)} if name.startswith("Adam") else {}

    def run(lr_init: Any, lr_set: Any, kw: dict[str, Any]) -> tuple[np.ndarray, Any]:
        p = nn.Parameter(xg.asarray(backend.asarray(np.array([1.0, -2.0, 0.5], dtype=np.float32))))
        opt = getattr(optim, name)([p], lr=lr_init, **kw)
        for i in range(4):
            if i == 2:
                opt.param_groups[0]["lr"] = lr_set
            opt.zero_grad()
            xg.sum(p * p * p).backward()
            opt.step()
            assert p.dtype == xg.float32, f"{name}: step {i} made the parameter {p.dtype}"
        return _np(p.detach()), opt.param_groups[0]["lr"]

    plain = {k: tuple(float(e) for e in v) for k, v in extra.items()}
    got, kept = run(lr, lr * 2, extra)
    want, _ = run(float(lr), float(lr * 2), plain)
    np.testing.assert_array_equal(got, want)
    assert type(kept) is type(lr)


def test_optimizer_trains_a_model_moved_to_torch() -> None:
    with xg.default_device(dtype="float64", seed=0):
        model = nn.Linear(3, 1)
    model.to(xp="torch")
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    x = xg.asarray(torch.randn(16, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    y = xg.asarray(torch.ones(16, 1, dtype=torch.float64))
    first = None
    for _ in range(20):
        loss = xg.nn.functional.mse_loss(model(x), y)
        first = first if first is not None else float(loss.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < 0.1 * first
    assert isinstance(model.weight.data, torch.Tensor)


# ====================================================================== schedulers
SCHEDULERS = [
    ("StepLR", {"step_size": 3, "gamma": 0.5}, "SGD"),
    ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.01}, "SGD"),
    ("LinearLR", {"start_factor": 0.2, "end_factor": 0.9, "total_iters": 6}, "SGD"),
    ("LinearLR", {}, "SGD"),
    ("OneCycleLR", {"max_lr": 1.0, "total_steps": 20}, "SGD"),
    ("OneCycleLR", {"max_lr": [1.0, 0.5], "epochs": 4, "steps_per_epoch": 5, "anneal_strategy": "linear",
                    "three_phase": True, "pct_start": 0.25}, "SGD"),
    ("OneCycleLR", {"max_lr": 0.01, "total_steps": 20, "div_factor": 10.0, "final_div_factor": 100.0}, "Adam"),
]


@pytest.mark.parametrize("spec", SCHEDULERS, ids=[f"{s[0]}-{i}" for i, s in enumerate(SCHEDULERS)])
def test_scheduler_matches_torch(spec: tuple[str, dict[str, Any], str]) -> None:
    name, kw, opt_name = spec
    okw = {"lr": 0.3, "momentum": 0.9} if opt_name == "SGD" else {"lr": 0.3}
    ours_p = [nn.Parameter(xg.zeros(1)), nn.Parameter(xg.zeros(1))]
    theirs_p = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
    groups = lambda ps: [{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.1}]
    opt = getattr(optim, opt_name)(groups(ours_p), **okw)
    topt = getattr(torch.optim, opt_name)(groups(theirs_p), **okw)
    sched = getattr(lr_scheduler, name)(opt, **kw)
    tsched = getattr(torch.optim.lr_scheduler, name)(topt, **kw)
    total = 20 if name == "OneCycleLR" else 16
    for _ in range(total):
        np.testing.assert_allclose(sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-10, atol=1e-15)
        for g, tg in zip(opt.param_groups, topt.param_groups, strict=True):
            assert math.isclose(g["lr"], tg["lr"], rel_tol=1e-10, abs_tol=1e-15)
            if "momentum" in tg:
                assert math.isclose(g["momentum"], tg["momentum"], rel_tol=1e-10)
            if "betas" in tg:
                assert math.isclose(g["betas"][0], tg["betas"][0], rel_tol=1e-10)
        opt.step()
        topt.step()
        sched.step()
        tsched.step()


def test_scheduler_state_dict_and_errors() -> None:
    opt = optim.SGD([nn.Parameter(xg.zeros(1))], lr=1.0)
    s = lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    for _ in range(3):
        s.step()
    state = s.state_dict()
    assert state["last_epoch"] == 3 and "optimizer" not in state
    opt2 = optim.SGD([nn.Parameter(xg.zeros(1))], lr=1.0)
    s2 = lr_scheduler.StepLR(opt2, step_size=2, gamma=0.1)
    s2.load_state_dict(state)
    s.step()
    s2.step()
    assert s.get_last_lr() == s2.get_last_lr()
    with pytest.raises(xg.XpgradValueError):
        lr_scheduler.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(xg.XpgradValueError, match="cycle_momentum"):
        lr_scheduler.OneCycleLR(optim.Adagrad([nn.Parameter(xg.zeros(1))]), max_lr=1.0, total_steps=5)
    one = lr_scheduler.OneCycleLR(optim.SGD([nn.Parameter(xg.zeros(1))], lr=1.0, momentum=0.9), max_lr=1.0,
                                  total_steps=2)
    one.step()
    one.step()
    with pytest.raises(xg.XpgradValueError, match="total_steps"):
        one.step()


# Peak extra memory of one step(), as multiples of the parameter's size: the full-size
# temporaries the update needs (see xpgrad/optim/algorithms.py), plus on the first step
# the state buffers the optimizer creates. NumPy reports its allocations to tracemalloc.
MEMORY_CONFIGS = [
    ("SGD", {}, 1, 0),
    ("SGD", {"momentum": 0.9}, 1, 1),
    ("SGD", {"momentum": 0.9, "dampening": 0.5, "maximize": True}, 1, 1),
    ("SGD", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1}, 2, 1),
    ("Adam", {}, 2, 2),
    ("Adam", {"weight_decay": 0.1, "maximize": True}, 2, 2),
    ("Adam", {"amsgrad": True}, 2, 3),
    ("AdamW", {}, 2, 2),
    ("RMSprop", {}, 2, 1),
    ("RMSprop", {"momentum": 0.9, "centered": True}, 2, 3),
    ("RMSprop", {"momentum": 0.9, "centered": True, "weight_decay": 0.1}, 3, 3),
    ("Adagrad", {}, 2, 0),
    ("Adagrad", {"weight_decay": 0.1}, 2, 0),
]


@pytest.mark.parametrize("config", MEMORY_CONFIGS, ids=[_ids(c[:2]) for c in MEMORY_CONFIGS])
def test_step_makes_no_extra_copies(config: tuple[str, dict[str, Any], int, int]) -> None:
    import tracemalloc

    name, kw, temporaries, state_buffers = config
    n = 250_000
    rng = np.random.default_rng(1)
    p = nn.Parameter(xg.asarray(rng.standard_normal(n)))
    grad = rng.standard_normal(n)
    opt = getattr(optim, name)([p], lr=1e-3, **kw)
    size = p.data.nbytes
    data = p.data
    peaks = []
    for _ in range(3):
        p.grad = xg.asarray(grad.copy())
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            opt.step()
            peaks.append((tracemalloc.get_traced_memory()[1] - base) / size)
        finally:
            tracemalloc.stop()
    assert p.data is data  # updated in place
    # a little slack for small Python objects; a full-size copy would add 1.0
    assert peaks[0] <= temporaries + state_buffers + 0.05, peaks
    assert max(peaks[1:]) <= temporaries + 0.05, peaks
