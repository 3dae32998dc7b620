"""One training loop run four ways: eagerly, as ``xg.jit(step)``, with backward outside a
jitted forward (``jf(model, x, y).backward()``), and with ``xg.checkpoint`` around a block.

The loop is a user's (24 steps; 8 on Dask): a Module with Dropout and BatchNorm, SGD with momentum under an
``ExponentialLR`` schedule, minibatches from a seeded shuffling
``xg.utils.data.DataLoader``, and state changed between the calls (the learning rate set
by hand, ``model.eval()``/``model.train()``, a layer reloaded with ``load_state_dict``).
Every run starts from the same weights under the same seeded policy; the losses, the
parameters, BatchNorm's buffers and the generator's next draw must agree with the eager
run. On NumPy and array-api-strict bit for bit: the four programs are the same operations
in the same order (jit replays them; the backward program is the eager backward's
operations; the checkpoint recomputation repeats the forward's). Elsewhere to 1e-12
(float64): JAX runs the programs under ``jax.jit``, where XLA may fuse and reorder.

Then random training programs (hypothesis): a model drawn from a vocabulary of layers
(Linear, activations, Dropout, BatchNorm1d, LayerNorm, a residual block, a user Module
reading a Python ``temperature``), SGD with or without momentum, Adam or AdamW, and steps
with events between them (updates in place under ``no_grad`` and through ``.data``, forward
hooks and pre-hooks added and removed, Tensor hooks, attributes changed, ``train``/``eval``,
``load_state_dict``, the learning rate set, ``requires_grad`` toggled). The same ways run it,
and a jitted step that closes over the model and optimizer; a backward hook, which jit
refuses, is checked to raise its documented error (and the step then runs eagerly). Bit for
bit on NumPy, to 1e-12 elsewhere.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgrad as xg
from xpgrad import nn, optim
from xpgrad.optim import lr_scheduler
from xpgrad.utils.data import DataLoader, TensorDataset

from ._util import to_numpy

RNG = np.random.default_rng(2028)
X = RNG.standard_normal((24, 4))
Y = RNG.standard_normal((24, 1))


def _exact(backend: Any) -> bool:
    return backend.name in ("numpy", "array_api_strict")


def _same(backend: Any, got: Any, want: Any, what: str, exact: bool | None = None) -> None:
    g, w = to_numpy(got), to_numpy(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (what, g.shape, g.dtype, w.shape, w.dtype)
    if _exact(backend) if exact is None else exact:
        np.testing.assert_array_equal(g, w, err_msg=what)
    else:  # (relative to the array's scale: a bias before BatchNorm gets a gradient of rounding noise)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12 * float(np.max(np.abs(w), initial=1.0)),
                                   err_msg=what)


class Net(nn.Module):
    """A block (Linear, BatchNorm, ReLU, Dropout), checkpointed when ``ckpt``, then a head."""

    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.25))
        self.head = nn.Linear(8, 1)
        self.ckpt = False

    def forward(self, x: Any) -> Any:
        h = xg.checkpoint(self.block)(x) if self.ckpt else self.block(x)
        return self.head(h)


def _loss(model: Any, x: Any, y: Any) -> Any:
    return xg.mean((model(x) - y) ** 2)


def _step(model: Any, opt: Any, x: Any, y: Any) -> Any:
    opt.zero_grad()
    loss = _loss(model, x, y)
    loss.backward()
    opt.step()
    return loss


def _outside(jf: Any) -> Callable[..., Any]:
    """A step whose forward is the jitted ``jf``: backward and the update run outside it."""
    def step(model: Any, opt: Any, x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = jf(model, x, y)
        loss.backward()
        opt.step()
        return loss
    return step


WAYS: dict[str, Callable[[], tuple[Callable[..., Any], bool]]] = {
    "jit": lambda: (xg.jit(_step), False),
    "jit_forward_backward_outside": lambda: (_outside(xg.jit(_loss)), False),
    "checkpoint": lambda: (_step, True),
    "jit_checkpoint": lambda: (xg.jit(_step), True),
}


def _plan(backend: Any) -> tuple[int, dict[int, str], int]:
    """(epochs of 4 batches, what to change before which step, epochs per scheduler step)."""
    if backend.name == "dask":  # (8 steps: each step builds and computes a Dask graph)
        return 2, {1: "lr", 2: "eval", 3: "load", 4: "train", 5: "eval", 7: "train"}, 1
    return 6, {5: "lr", 9: "eval", 13: "train", 15: "load", 17: "eval", 19: "train"}, 2


def _train(backend: Any, model: Net, step: Callable[..., Any], snapshot: Any) -> tuple[list[Any], Any, int]:
    """The training loop; the losses, the generator's next draw and the steps in training mode."""
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = lr_scheduler.ExponentialLR(opt, gamma=0.8)
    loader = DataLoader(TensorDataset(backend.asarray(X), backend.asarray(Y)), batch_size=6, shuffle=True,
                        generator=5)
    epochs, changes, every = _plan(backend)
    losses = []
    trained = 0
    with backend.policy(seed=0):
        for epoch in range(epochs):
            for xb, yb in loader:
                change = changes.get(len(losses))
                if change == "lr":
                    opt.param_groups[0]["lr"] = 0.02  # set by hand (the schedule goes on from it)
                elif change in ("eval", "train"):
                    model.train(change == "train")
                elif change == "load":
                    model.head.load_state_dict(snapshot)
                trained += model.training
                losses.append(step(model, opt, xb, yb))
            if epoch % every == every - 1:
                sched.step()
        nxt = xg.random.normal((3,))
    return losses, nxt, trained


def test_training_loop_agrees_with_eager(backend: Any) -> None:
    with backend.policy(seed=3):
        ref = backend.to(Net(), dtype=xg.float64)
    snapshot = copy.deepcopy(ref.head.state_dict())
    start = copy.deepcopy(ref)
    want, want_next, trained = _train(backend, ref, _step, snapshot)
    assert len(want) == 4 * _plan(backend)[0] and 0 < trained < len(want)
    ref_sd = ref.state_dict()
    assert int(to_numpy(ref_sd["block.1.num_batches_tracked"])) == trained
    for way, make in WAYS.items():
        model = copy.deepcopy(start)
        step, model.ckpt = make()
        got, got_next, _ = _train(backend, model, step, snapshot)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(backend, g, w, f"{way}: loss at step {i}")
        _same(backend, got_next, want_next, f"{way}: the generator's next draw")
        sd = model.state_dict()
        assert list(sd) == list(ref_sd)
        for name in sd:  # parameters and BatchNorm's running_mean, running_var, num_batches_tracked
            _same(backend, sd[name], ref_sd[name], f"{way}: {name}")


def _optioned_step(model: Any, opt: Any, x: Any, y: Any, kind: str) -> Any:
    opt.zero_grad()
    out = model(x)
    loss = xg.mean((out - y) ** 2) if kind == "mse" else xg.mean(xg.abs(out - y))
    loss.backward()
    opt.step()
    return loss


def test_jit_options_and_a_loader_replay_after_state_changes(backend: Any) -> None:
    # static_argnums (the loss's kind: a Python string) and donate_argnames (the batch, a fresh
    # array per step from the shuffled loader), with the state changed between replays: a layer
    # reloaded, a float32 learning rate set by hand (read as the Python number it holds)
    with backend.policy(seed=4):
        ref = backend.to(Net(), dtype=xg.float64)
    model = copy.deepcopy(ref)
    snapshot = copy.deepcopy(ref.head.state_dict())
    jstep = xg.jit(_optioned_step, static_argnums=4, donate_argnames="x")
    runs = []
    for m, step in ((ref, _optioned_step), (model, jstep)):
        opt = optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        loader = DataLoader(TensorDataset(backend.asarray(X), backend.asarray(Y)), batch_size=6, shuffle=True,
                            generator=9)
        losses = []
        with backend.policy(seed=1):
            for epoch in range(2 if backend.name == "dask" else 3):
                for k, (xb, yb) in enumerate(loader):
                    if k == 2:
                        m.head.load_state_dict(snapshot)
                        opt.param_groups[0]["lr"] = np.float32(0.02 * (epoch + 1))
                    losses.append(step(m, opt, xb, yb, "mse" if k % 2 == 0 else "l1"))
            losses.append(xg.random.normal((2,)))
        runs.append(losses)
    for i, (g, w) in enumerate(zip(runs[1], runs[0], strict=True)):
        _same(backend, g, w, f"loss {i}")
    for name, v in ref.state_dict().items():
        _same(backend, model.state_dict()[name], v, name)
    # (traced for each kind, without and with the momentum buffers: every other call replayed)
    info = jstep.cache_info()
    assert info.traces == 3 and info.hits == len(runs[0]) - 1 - 3, info


# ---------------------------------------------------------------------------------------------
# Random training programs: a model drawn from a vocabulary of layers, an optimizer, and a
# sequence of steps with events between them, run eagerly and the four transformed ways.

D = 4  # (every layer maps (batch, D) to (batch, D): any sequence of them composes)
XS = RNG.standard_normal((4, 6, D))  # four minibatches
YS = RNG.standard_normal((4, 6, 1))
LAYERS = ("linear", "relu", "tanh", "leaky", "dropout", "batchnorm", "layernorm", "residual", "tempered")
EVENTS = ("data_add", "nograd_add", "fwd_hook", "fwd_hook_remove", "tensor_hook", "tensor_hook_remove",
          "dropout_p", "slope", "temperature", "toggle", "load", "lr", "backward_hook", "pre_hook", "data_set",
          "freeze", "buffer_scale")


class Tempered(nn.Module):
    """A user Module whose forward reads a Python attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.temperature = 2.0

    def forward(self, x: Any) -> Any:
        return xg.tanh(x / self.temperature)


class Residual(nn.Module):
    """``block(x) + x`` (array-api-strict's ``+`` refuses a Tensor on the right of its array)."""

    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(D, D), nn.Tanh())

    def forward(self, x: Any) -> Any:
        return self.block(x) + x


class Program(nn.Module):
    """The drawn layers, checkpointed when ``ckpt``, then a head."""

    def __init__(self, layers: list[str]) -> None:
        super().__init__()
        make = {"linear": lambda: nn.Linear(D, D), "relu": nn.ReLU, "tanh": nn.Tanh,
                "leaky": lambda: nn.LeakyReLU(0.1), "dropout": lambda: nn.Dropout(0.3),
                # (BatchNorm after a Tanh: after a Linear, or a LeakyReLU linear on a channel's
                # batch, it cancels the bias, whose gradient is then rounding noise; Adam divides
                # it by its eps, and the noise of JAX's fused programs is not eager's)
                "batchnorm": lambda: nn.Sequential(nn.Tanh(), nn.BatchNorm1d(D)), "layernorm": lambda: nn.LayerNorm(D),
                "residual": Residual, "tempered": Tempered}
        self.body = nn.Sequential(*(make[k]() for k in layers))
        self.head = nn.Linear(D, 1)
        self.ckpt = False

    def forward(self, x: Any) -> Any:
        h = xg.checkpoint(self.body)(x) if self.ckpt else self.body(x)
        return self.head(h)


@st.composite
def programs(draw: Any, n_steps: int) -> tuple[list[str], tuple[str, bool], list[tuple[str, int, float]]]:
    """(the layers, (the optimizer, momentum or amsgrad), the events: (kind, which, value) before each step)."""
    layers = draw(st.lists(st.sampled_from(LAYERS), min_size=1, max_size=4))
    opt = (draw(st.sampled_from(("sgd", "adam", "adamw"))), draw(st.booleans()))
    events = []
    for _ in range(n_steps):
        for kind in draw(st.lists(st.sampled_from(EVENTS), max_size=2)):
            events.append((kind, draw(st.integers(0, 99)), draw(st.sampled_from((0.05, 0.2, 0.5, 1.5)))))
        events.append(("step", draw(st.integers(0, 3)), 0.0))
    return layers, opt, events


def _optimizer(model: Any, kind: str, flag: bool) -> Any:
    if kind == "sgd":
        return optim.SGD(model.parameters(), lr=0.05, momentum=0.9 if flag else 0.0)
    cls = optim.Adam if kind == "adam" else optim.AdamW
    return cls(model.parameters(), lr=0.01, amsgrad=flag)


def _of(model: Any, cls: type) -> list[Any]:
    return [m for m in model.modules() if isinstance(m, cls)]


def _closed(model: Any, opt: Any) -> Callable[..., Any]:
    """A jitted step that closes over the model and the optimizer (read at every call)."""
    jc = xg.jit(lambda x, y: _step(model, opt, x, y))
    return lambda m, o, x, y: jc(x, y)


def _run_program(backend: Any, start: Any, prog: Any, way: str, snapshot: Any) -> tuple[list[Any], Any, Any]:
    """Run the program one way: the losses, the generator's next draw, the model."""
    _, (opt_kind, flag), events = prog
    model = copy.deepcopy(start)
    model.ckpt = way in ("checkpoint", "jit_checkpoint")
    opt = _optimizer(model, opt_kind, flag)
    step: Callable[..., Any] = {"eager": _step, "checkpoint": _step, "jit": xg.jit(_step),
                                "jit_checkpoint": xg.jit(_step), "jit_closure": _closed(model, opt),
                                "jit_forward_backward_outside": _outside(xg.jit(_loss))}[way]
    jitted = way.startswith("jit")
    fwd_hooks: list[Any] = []
    tensor_hooks: list[Any] = []
    losses = []
    with backend.policy(seed=7):
        for kind, k, v in events:
            params = list(model.parameters())
            if kind == "step":
                xb, yb = backend.asarray(XS[k]), backend.asarray(YS[k])
                losses.append(step(model, opt, xb, yb))
            elif kind == "data_add":
                p = params[k % len(params)]
                p.data += v * 0.01  # (the array's own +=: in place on NumPy, a new array on JAX)
            elif kind == "nograd_add":
                p = params[k % len(params)]
                with xg.no_grad():
                    p += v * 0.01
            elif kind == "fwd_hook":
                mods = [*model.body, model.head]
                fwd_hooks.append(mods[k % len(mods)].register_forward_hook(
                    lambda mod, args, out, s=v: out * s))
            elif kind == "fwd_hook_remove" and fwd_hooks:
                fwd_hooks.pop(k % len(fwd_hooks)).remove()
            elif kind == "tensor_hook":
                learning = [q for q in params if q.requires_grad]
                tensor_hooks.append(learning[k % len(learning)].register_hook(lambda g, s=v: g * s))
            elif kind == "tensor_hook_remove" and tensor_hooks:
                tensor_hooks.pop(k % len(tensor_hooks)).remove()
            elif kind == "dropout_p":
                for m in _of(model, nn.Dropout):
                    m.p = min(v, 0.9)
            elif kind == "slope":
                for m in _of(model, nn.LeakyReLU):
                    m.negative_slope = v
            elif kind == "temperature":
                for m in _of(model, Tempered):
                    m.temperature = v
            elif kind == "toggle":
                model.train(not model.training)
            elif kind == "load":
                model.load_state_dict(snapshot)
            elif kind == "lr":
                opt.param_groups[0]["lr"] = v * 0.1
            elif kind == "pre_hook":  # (a forward pre-hook that changes the input)
                mods = [*model.body, model.head]
                fwd_hooks.append(mods[k % len(mods)].register_forward_pre_hook(
                    lambda mod, args, s=v: (args[0] * s,)))
            elif kind == "data_set":  # (a new array bound to .data)
                p = params[k % len(params)]
                p.data = p.data * (1.0 - v * 0.01)
            elif kind == "freeze":  # (requires_grad toggled: no gradient, no update while frozen)
                free = [q for q in params if q is not model.head.weight]  # (something always learns)
                p = free[k % len(free)]
                p.requires_grad_(not p.requires_grad)
            elif kind == "buffer_scale":
                for m in _of(model, nn.BatchNorm1d):
                    with xg.no_grad():
                        m.running_var *= 1.0 + v
            elif kind == "backward_hook":  # (for one step: jit refuses it, documented)
                # (on the head, whose output requires grad: a module whose tensors do not needs no hook node)
                h = model.head.register_full_backward_pre_hook(
                    lambda mod, go, s=v: tuple(g * s for g in go))
                xb, yb = backend.asarray(XS[k % 4]), backend.asarray(YS[k % 4])
                if jitted:
                    # refused at the trace, on copies under another seed: a refused call that traced
                    # up to the hook leaves what ran before it done (BatchNorm's statistics, draws),
                    # as an eager call that raised there would
                    m2, o2 = copy.deepcopy((model, opt))
                    step2 = _closed(m2, o2) if way == "jit_closure" else step
                    with backend.policy(seed=99), pytest.raises(xg.XpgradValueError,
                                                                 match=r"cannot run inside xg\.jit"):
                        step2(m2, o2, xb, yb)
                    # (the learning rate a float again, not a Tracer; the parameters not stepped)
                    assert isinstance(o2.param_groups[0]["lr"], float)
                    for p2, p1 in zip(m2.parameters(), model.parameters(), strict=True):
                        _same(backend, p2, p1, f"{way}: a parameter after the refusal")
                    losses.append(_step(model, opt, xb, yb))  # (the user's way out: this step eagerly)
                else:
                    losses.append(_step(model, opt, xb, yb))
                h.remove()
        nxt = xg.random.normal((3,))
    return losses, nxt, model


def _program_examples(backend: Any) -> int:
    return {"numpy": 3, "dask": 1, "jax": 1}.get(backend.name, 2) if os.environ.get("HYPOTHESIS_PROFILE", "ci") in (
        "ci", "debug") else settings().max_examples


def test_random_training_programs_agree_with_eager(backend: Any) -> None:
    n_steps = 3 if backend.name in ("dask", "jax") else 6  # (JAX compiles each retrace with XLA)
    # bit for bit on NumPy; elsewhere to 1e-12: under jit, Adam's bias corrections are powers of a
    # traced step count (array-api-strict's power of a 0-d array may differ from Python's by an ulp)
    exact = backend.name == "numpy"

    @settings(max_examples=_program_examples(backend))
    @given(prog=programs(n_steps))
    def run(prog: Any) -> None:
        with backend.policy(seed=11):
            start = backend.to(Program(prog[0]), dtype=xg.float64)
        snapshot = copy.deepcopy(start.state_dict())
        with xg.no_grad():  # (a snapshot a little away from the start: load_state_dict changes something)
            for name, t in snapshot.items():
                if not name.endswith("num_batches_tracked"):
                    t += 0.125
        want, want_next, ref = _run_program(backend, start, prog, "eager", snapshot)
        ref_sd = ref.state_dict()
        for way in (*WAYS, "jit_closure"):
            got, got_next, model = _run_program(backend, start, prog, way, snapshot)
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                _same(backend, g, w, f"{way}: loss at step {i}", exact)
            _same(backend, got_next, want_next, f"{way}: the generator's next draw", exact)
            sd = model.state_dict()
            assert list(sd) == list(ref_sd)
            for name in sd:
                _same(backend, sd[name], ref_sd[name], f"{way}: {name}", exact)

    run()


def test_a_tensor_hook_runs_once_through_a_jitted_call(backend: Any) -> None:
    # backward (and a gradient of a gradient) outside a jitted forward: a parameter's hook runs
    # once, when the gradient reaches the parameter, as eagerly (it ran inside the traced VJP too)
    with backend.policy(seed=0):
        m = backend.to(nn.Linear(3, 1), dtype=xg.float64)
    x = backend.asarray(np.linspace(-1.0, 1.0, 6).reshape(2, 3))
    jf = xg.jit(lambda m, x: xg.sum(xg.sin(m(x)) ** 2))
    calls = []
    for k in range(4):  # (traced without the hook, then with it, then replayed, then removed)
        h = m.weight.register_hook(lambda g: calls.append(1) or g * 0.5) if k in (1, 2) else None
        got = []
        for f in (lambda m, x: xg.sum(xg.sin(m(x)) ** 2), jf):
            m.zero_grad()
            f(m, x).backward()
            got.append((m.weight.grad, xg.autograd.grad(f(m, x), [m.weight], create_graph=True)[0]))
        _same(backend, got[1][0], got[0][0], f"call {k}: weight.grad")
        _same(backend, got[1][1], got[0][1], f"call {k}: create_graph")
        if h is not None:
            h.remove()
    assert len(calls) == 8  # (two calls with the hook, eager and jitted, each a backward and a grad)
