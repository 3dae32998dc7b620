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
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

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


def _same(backend: Any, got: Any, want: Any, what: str) -> None:
    g, w = to_numpy(got), to_numpy(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (what, g.shape, g.dtype, w.shape, w.dtype)
    if _exact(backend):
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
