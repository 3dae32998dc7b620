"""Dask: a training loop stays linear in its steps.

An optimizer step on Dask computes nothing by itself: without a persist, the new
parameters are a graph built on the old ones, and step ``k`` holds ``k`` forward and
backward passes (a loop was quadratic in its steps). ``Optimizer.step`` persists the
parameters, their gradients, the optimizer's state and the running statistics of
batch normalization every ``persist_every`` steps (default 1), so the graph of each
of them after step 100 is the same size as after step 10 (one task per chunk), and
the values are those of NumPy step for step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import XpgradValueError

from .conftest import Computes, _selected

if "dask" not in _selected():
    pytest.skip("dask is not in XPGRAD_BACKENDS", allow_module_level=True)
dask = pytest.importorskip("dask", reason="dask is not installed; install xpgrad[dask]")
da = pytest.importorskip("dask.array", reason="dask.array is not installed; install xpgrad[dask]")

RNG = np.random.default_rng(3)
X = RNG.standard_normal((64, 5))
Y = RNG.integers(0, 3, 64)


def _mlp() -> Any:
    return xg.nn.Sequential(xg.nn.Linear(5, 8), xg.nn.Tanh(), xg.nn.Linear(8, 3))


# no bias before a BatchNorm: its gradient is zero but for rounding, which Adam would
# scale up to steps of size lr (and Dask's chunked sums round differently from NumPy's)
def _bn_mlp() -> Any:
    return xg.nn.Sequential(xg.nn.Linear(5, 8, bias=False), xg.nn.BatchNorm1d(8), xg.nn.ReLU(), xg.nn.Linear(8, 3))


def _bn_cumulative() -> Any:  # momentum=None: the cumulative average, which reads num_batches_tracked
    return xg.nn.Sequential(xg.nn.Linear(5, 8, bias=False), xg.nn.BatchNorm1d(8, momentum=None), xg.nn.ReLU(),
                            xg.nn.Linear(8, 3))


def _graph_len(a: Any) -> int:
    return len(a.__dask_graph__())


def _carried(model: Any, opt: Any) -> dict[str, Any]:
    """Every array the loop carries from step to step, by name: parameters, buffers, optimizer state."""
    out = {f"param {n}": p.data for n, p in model.named_parameters()}
    out.update({f"buffer {n}": b.data for n, b in model.named_buffers() if b is not None})
    for i, p in enumerate(model.parameters()):
        for k, v in opt.state.get(id(p), {}).items():
            if isinstance(v, xg.Tensor):
                out[f"state {i} {k}"] = v.data
    return out


def _model(model_fn: Callable[[], Any], x: Any) -> Any:
    """The model of seed 0, built on NumPy and moved to ``x``'s library in float64, as a user would."""
    xg.random.seed(0)
    return model_fn().to(xp=x, dtype="float64")


def _train(model_fn: Callable[[], Any], opt_cls: type, kw: dict[str, Any], x: Any, y: Any, steps: int,
           at: tuple[int, ...] = ()) -> tuple[Any, Any, dict[int, dict[str, int]]]:
    """``steps`` full-batch steps from seed 0; the graph size of each carried array after each step in ``at``."""
    model = _model(model_fn, x)
    opt = opt_cls(model.parameters(), lr=0.05, **kw)
    sizes: dict[int, dict[str, int]] = {}
    xb, yb = xg.asarray(x), xg.asarray(y)
    for step in range(1, steps + 1):
        loss = xg.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step in at:
            sizes[step] = {k: _graph_len(a) for k, a in _carried(model, opt).items()}
    return model, opt, sizes


def _assert_same_values(model: Any, opt: Any, ref_model: Any, ref_opt: Any) -> None:
    got, want = _carried(model, opt), _carried(ref_model, ref_opt)
    assert set(got) == set(want)
    for (k, a), b in zip(dask.compute(got)[0].items(), want.values()):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=k)


# (name, model, optimizer, options, steps): 100 steps for the optimizers the issue names and
# for batch normalization; 30 for the others (a graph that grew would differ from step 10 on)
LOOPS = [
    ("sgd-momentum", _mlp, xg.optim.SGD, {"momentum": 0.9}, 100),
    ("adam", _mlp, xg.optim.Adam, {}, 100),
    ("adamw-amsgrad", _mlp, xg.optim.AdamW, {"amsgrad": True}, 100),
    ("batchnorm-adam", _bn_mlp, xg.optim.Adam, {}, 100),
    ("sgd-nesterov-wd", _mlp, xg.optim.SGD, {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01}, 30),
    ("rmsprop-centered", _mlp, xg.optim.RMSprop, {"momentum": 0.5, "centered": True}, 30),
    ("adagrad", _mlp, xg.optim.Adagrad, {}, 30),
    ("batchnorm-cumulative-sgd", _bn_cumulative, xg.optim.SGD, {"momentum": 0.9}, 30),
]


@pytest.mark.parametrize(("model_fn", "opt_cls", "kw", "steps"), [c[1:] for c in LOOPS], ids=[c[0] for c in LOOPS])
def test_graphs_do_not_grow_with_the_steps(model_fn: Any, opt_cls: type, kw: dict[str, Any], steps: int) -> None:
    x, y = da.from_array(X, chunks=(32, 5)), da.from_array(Y, chunks=32)  # two chunks of rows
    model, opt, sizes = _train(model_fn, opt_cls, kw, x, y, steps, at=(10, steps))
    assert sizes[steps] == sizes[10], {k: (sizes[10][k], v) for k, v in sizes[steps].items() if v != sizes[10][k]}
    # persisted: one task per chunk (parameters and state are single-chunk arrays here)
    assert all(n == 1 for n in sizes[steps].values()), sizes[steps]
    assert all(_graph_len(p.grad.data) == 1 for p in model.parameters())  # the gradients were persisted too
    if model_fn is not _mlp:
        assert {"buffer 1.running_mean", "buffer 1.running_var", "buffer 1.num_batches_tracked"} <= set(sizes[steps])
    ref_model, ref_opt, _ = _train(model_fn, opt_cls, kw, X, Y, steps)  # NumPy, same seed
    _assert_same_values(model, opt, ref_model, ref_opt)


def test_persist_every_sets_how_often_a_step_computes(computes: Computes) -> None:
    x, y = da.from_array(X, chunks=(32, 5)), da.from_array(Y, chunks=32)
    model, opt, sizes = _train(_mlp, xg.optim.Adam, {"persist_every": 5}, x, y, 14, at=(4, 5, 9, 10, 14))
    assert computes.n == 2  # after steps 5 and 10, one persist each
    assert sizes[5] == sizes[10] and all(n == 1 for n in sizes[10].values())
    assert all(sizes[4][k] > sizes[5][k] for k in sizes[5])  # 4 steps not yet persisted
    assert all(sizes[9][k] > sizes[10][k] for k in sizes[10])
    # 4 steps after a persist, the graphs are the same size each time: bounded, not growing (steps 1-4
    # start from the initial arrays, whose graphs differ from persisted ones: at most as large)
    assert sizes[14] == sizes[9] and all(sizes[9][k] <= sizes[4][k] for k in sizes[4])
    ref_model, ref_opt, _ = _train(_mlp, xg.optim.Adam, {}, X, Y, 14)
    _assert_same_values(model, opt, ref_model, ref_opt)


def test_persist_every_none_stays_lazy_and_persist_flattens(computes: Computes) -> None:
    x, y = da.from_array(X, chunks=(32, 5)), da.from_array(Y, chunks=32)
    model, opt, sizes = _train(_bn_mlp, xg.optim.SGD, {"momentum": 0.9, "persist_every": None}, x, y, 6, at=(3, 6))
    computes.assert_none("6 steps with persist_every=None")
    assert all(sizes[6][k] > sizes[3][k] for k in sizes[6] if not k.startswith("state"))  # graphs grow each step
    params = list(model.parameters())
    before = [(id(p), p._version[0]) for p in params]
    model.eval()  # a loss to log, with no further update of the running statistics
    loss = xg.nn.functional.cross_entropy(model(xg.asarray(x)), xg.asarray(y))
    model.train()
    n = opt.persist(loss)  # the parameters, their gradients, the state, the 3 buffers and the loss
    assert computes.n == 1 and n == 5 + 5 + 5 + 3 + 1  # 5 parameters (bias-free Linear, BatchNorm, Linear)
    assert [(id(p), p._version[0]) for p in params] == before  # same objects, values and versions unchanged
    assert all(n == 1 for n in (_graph_len(a) for a in _carried(model, opt).values()))
    assert _graph_len(loss.data) == 1
    assert opt.persist() == 5 + 5 + 5  # nothing noted since: the buffers are not included twice
    ref_model, ref_opt, _ = _train(_bn_mlp, xg.optim.SGD, {"momentum": 0.9}, X, Y, 6)
    _assert_same_values(model, opt, ref_model, ref_opt)


def test_closure_loss_is_persisted_with_the_step(computes: Computes) -> None:
    x, y = da.from_array(X, chunks=(32, 5)), da.from_array(Y, chunks=32)
    model = _model(_mlp, x)
    opt = xg.optim.Adam(model.parameters(), lr=0.05)

    def closure() -> Any:
        opt.zero_grad()
        loss = xg.nn.functional.cross_entropy(model(xg.asarray(x)), xg.asarray(y))
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert _graph_len(loss.data) == 1  # reading it costs no second forward pass
    assert computes.n == 1  # the step's persist
    float(loss)
    assert computes.n == 2  # a compute of the one persisted chunk


def test_an_in_place_update_after_a_persist_is_kept() -> None:
    # the persist rebinds a Tensor only if its data are still the array it persisted
    x, y = da.from_array(X, chunks=(32, 5)), da.from_array(Y, chunks=32)
    model, _opt, _ = _train(_mlp, xg.optim.SGD, {}, x, y, 2)
    w = next(iter(model.parameters()))
    with xg.no_grad():
        w -= 1.0
    assert _graph_len(w.data) > 1
    np.testing.assert_allclose(w.data.compute() + 1.0, _train(_mlp, xg.optim.SGD, {}, X, Y, 2)[0][0].weight.data)


def test_bad_persist_every_is_a_clear_error() -> None:
    w = xg.nn.Parameter(xg.asarray(da.zeros(3)))
    with pytest.raises(XpgradValueError, match=r"^AdamW: persist_every must be a positive int or None, got 0$"):
        xg.optim.AdamW([w], persist_every=0)


# ====================================================================== dask.distributed
@pytest.mark.slow
def test_training_loop_on_a_local_cluster(dask_client: Any) -> None:
    """Persisting under dask.distributed: the parameters become futures on the workers, graphs stay flat."""
    x, y = dask_client.persist([da.from_array(X, chunks=(16, 5)), da.from_array(Y, chunks=16)])  # 4 chunks on the workers
    model, opt, sizes = _train(_bn_mlp, xg.optim.Adam, {}, x, y, 12, at=(4, 12))
    assert sizes[12] == sizes[4] and all(n == 1 for n in sizes[12].values())
    assert all(len(p.data.dask) == 1 for p in model.parameters())
    assert dask_client.has_what()  # the persisted arrays live on the workers
    ref_model, ref_opt, _ = _train(_bn_mlp, xg.optim.Adam, {}, X, Y, 12)
    _assert_same_values(model, opt, ref_model, ref_opt)
