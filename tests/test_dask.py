"""Dask: gradients stay lazy until the user computes them, data-dependent shapes give
a clear error instead of a compute, and training runs on a ``dask.distributed`` cluster.

Computes are counted twice: a scheduler hook (``dask.config.set(scheduler=...)``, which
every ``compute``/``persist``/``__array__`` without an explicit scheduler goes through)
and a :class:`dask.callbacks.Callback` (which also sees local schedulers chosen
explicitly). Both must stay at zero until the test itself computes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xpgrad as xg
from xpgrad import XpgradValueError

from ._cases import OpCase
from .conftest import Computes, _selected
from .test_rules import ALL_CASES, _draw_inputs

if "dask" not in _selected():
    pytest.skip("dask is not in XPGRAD_BACKENDS", allow_module_level=True)
dask = pytest.importorskip("dask", reason="dask is not installed; install xpgrad[dask]")
da = pytest.importorskip("dask.array", reason="dask.array is not installed; install xpgrad[dask]")


def _data(n: int = 2000, d: int = 5, chunk: int = 200, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    y_lin = X @ w + 0.1 * rng.standard_normal(n)
    y_cls = (rng.random(n) < 1 / (1 + np.exp(-X @ w))).astype(np.float64)
    return X, y_lin, y_cls, rng.standard_normal(d)


def _linear(w: Any, a: Any, y: Any) -> Any:
    xp = xg.array_namespace(w, a, y)
    return xp.mean((a @ w - y) ** 2)


def _logistic(w: Any, a: Any, y: Any) -> Any:
    xp = xg.array_namespace(w, a, y)
    z = a @ w
    # log(1 + exp(z)) - y z, written stably
    return xp.mean(xp.maximum(z, 0.0) + xp.log1p(xp.exp(-xp.abs(z))) - y * z)


def _linear_grad_np(w: np.ndarray, a: np.ndarray, y: np.ndarray) -> np.ndarray:
    return 2 * a.T @ (a @ w - y) / len(y)


def _logistic_grad_np(w: np.ndarray, a: np.ndarray, y: np.ndarray) -> np.ndarray:
    return a.T @ (1 / (1 + np.exp(-a @ w)) - y) / len(y)


# ====================================================================== laziness
@pytest.mark.parametrize(("loss", "exact"), [(_linear, _linear_grad_np), (_logistic, _logistic_grad_np)],
                         ids=["linear", "logistic"])
def test_grad_is_lazy_until_computed(loss: Any, exact: Any, computes: Computes) -> None:
    X, y_lin, y_cls, w0 = _data()
    y = y_lin if loss is _linear else y_cls
    dX, dy, dw = da.from_array(X, chunks=(200, 5)), da.from_array(y, chunks=200), da.from_array(w0)
    v, g = xg.value_and_grad(loss)(dw, dX, dy)
    assert isinstance(g, da.Array) and isinstance(v, da.Array)
    assert g.shape == (5,) and g.dtype == np.float64
    computes.assert_none("value_and_grad on dask")
    gv, vv = dask.compute(g, v)
    assert computes.n == 1
    np.testing.assert_allclose(gv, exact(w0, X, y), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(vv, loss(w0, X, y), rtol=1e-12)


def test_second_order_is_lazy(computes: Computes) -> None:
    X, y, _, w0 = _data(n=400)
    dX, dy = da.from_array(X, chunks=(100, 5)), da.from_array(y, chunks=100)
    v = da.from_array(np.arange(5.0))

    def hvp(w: Any) -> Any:  # a Hessian-vector product through grad of grad
        xp = xg.array_namespace(w)
        return xp.sum(xg.grad(_linear)(w, dX, dy) * v)

    h = xg.grad(hvp)(da.from_array(w0))
    computes.assert_none("grad of grad on dask")
    np.testing.assert_allclose(h.compute(), 2 * X.T @ (X @ np.arange(5.0)) / len(y), rtol=1e-12)


def _train(xb: Any, yb: Any, opt_cls: type, steps: int, **opt_kw: Any) -> list[Any]:
    with xg.default_device(xb, dtype="float64", seed=0):
        model = xg.nn.Sequential(xg.nn.Linear(5, 8), xg.nn.Tanh(), xg.nn.Linear(8, 3))
    # persist_every=None: steps stay lazy (by default each step persists, so that a loop's
    # graphs stay flat: tests/test_dask_loops.py)
    opt = opt_cls(model.parameters(), lr=0.05, persist_every=None, **opt_kw)
    for _ in range(steps):
        loss = xg.nn.functional.cross_entropy(model(xg.asarray(xb)), xg.asarray(yb))
        opt.zero_grad()
        loss.backward()
        opt.step()
    xg.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    return [p.data for p in model.parameters()]


@pytest.mark.parametrize(("opt_cls", "kw"), [(xg.optim.SGD, {"momentum": 0.9, "nesterov": True}), (xg.optim.Adam, {}),
                                             (xg.optim.AdamW, {"amsgrad": True}), (xg.optim.RMSprop, {}),
                                             (xg.optim.Adagrad, {})], ids=lambda v: getattr(v, "__name__", ""))
def test_nn_training_is_lazy(opt_cls: type, kw: dict[str, Any], computes: Computes) -> None:
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((300, 5)), rng.integers(0, 3, 300)
    params = _train(da.from_array(X, chunks=(50, 5)), da.from_array(y, chunks=50), opt_cls, 3, **kw)
    assert all(isinstance(p, da.Array) for p in params)
    computes.assert_none(f"3 training steps with {opt_cls.__name__}")
    got = dask.compute(*params)
    # the same model, seed and data on NumPy; dask's chunked sums differ only in rounding
    want = _train(X, y, opt_cls, 3, **kw)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in ALL_CASES if "dask" not in c.xfail], ids=lambda c: c.name)
def test_every_rule_is_lazy(case: OpCase, computes: Computes) -> None:
    """The forward and backward of every differentiable function build a graph and compute nothing."""
    float_idx = tuple(i for i, k in enumerate(case.kinds()) if k == "float")

    @settings(max_examples=3, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    @given(data=st.data())
    def run(data: Any) -> None:
        arrays, params = _draw_inputs(case, data)
        xs = [da.from_array(a, chunks=tuple(max(1, (s + 1) // 2) for s in a.shape) or ()) for a in arrays]

        def loss(*a: Any) -> Any:
            xp = xg.array_namespace(*a)
            out = case.fn(xp, *a, **params)
            outs = out if isinstance(out, tuple) else (out,)
            return sum(xp.sum(o) for o in outs)

        grads = xg.grad(loss, argnums=float_idx)(*xs)
        assert all(isinstance(g, da.Array) for g in grads)

    run()
    computes.assert_none(f"{case.name}: forward and backward")


def test_diff_with_array_ends_is_lazy(computes: Computes) -> None:
    # dask.array.diff turns array prepend/append into NumPy arrays (a compute); xpgrad
    # attaches the ends itself
    x, p = da.from_array(np.arange(6.0) ** 2, chunks=3), da.from_array(np.array([1.0]))
    g = xg.grad(lambda x, p: xg.sum(xg.diff(x, prepend=p, n=2) ** 2), argnums=(0, 1))(x, p)
    computes.assert_none("diff(prepend=dask array)")
    want = xg.grad(lambda x, p: xg.sum(xg.diff(x, prepend=p, n=2) ** 2), argnums=(0, 1))(
        np.arange(6.0) ** 2, np.array([1.0]))
    for a, b in zip(dask.compute(*g), want):
        np.testing.assert_allclose(a, b)


# ====================================================================== unknown sizes
# (case, the function whose backward meets the unknown size first and is named in the error)
_UNKNOWN = {
    "getitem": (lambda x: xg.sum(x[x > 0]), "sum"),
    "mean": (lambda x: xg.mean(x[x > 0]), "mean"),
    "multiply": (lambda x: xg.sum(x[x > 0] * x[x > 0]), "sum"),
    "take": (lambda x: xg.sum(xg.take(x, xg.nonzero(x > 0)[0])), "sum"),
    "reshape": (lambda x: xg.sum(xg.reshape(x[x > 0], (-1, 1))), "reshape"),
}


@pytest.mark.parametrize("reduce", ["mean", "sum", "mean_axis0", "sum_keepdims"])
def test_reduction_cotangent_is_chunked_like_the_data(reduce: str, computes: Computes) -> None:
    """The backward of a reduction broadcasts its cotangent with the argument's chunks, so
    the rules after it stream chunk by chunk (one chunk of all rows made Dask hold every
    chunk of the data at once: 8 bytes per row at its peak)."""
    x = da.from_array(np.arange(24.0).reshape(12, 2), chunks=(3, 2))
    w = xg.asarray(da.from_array(np.asarray([0.5, -0.25]), chunks=2), requires_grad=True)
    seen: list[Any] = []
    y = xg.asarray(x) * w
    y.register_hook(lambda g: seen.append(g.data))
    r = {"mean": lambda: xg.mean(y), "sum": lambda: xg.sum(y),
         "mean_axis0": lambda: xg.sum(xg.mean(y, axis=0)),
         "sum_keepdims": lambda: xg.sum(xg.sum(y, axis=1, keepdims=True))}[reduce]()
    (g,) = xg.autograd.grad(r, [w])
    computes.assert_none("grad")
    assert seen[0].chunks == x.chunks  # four chunks of three rows, not one of twelve
    scale = 1 / 24 if reduce == "mean" else 1 / 12 if reduce == "mean_axis0" else 1.0
    np.testing.assert_allclose(g.data.compute(), np.arange(24.0).reshape(12, 2).sum(axis=0) * scale)


@pytest.mark.parametrize("case", list(_UNKNOWN))
def test_data_dependent_shape_is_a_clear_error(case: str, computes: Computes) -> None:
    x = da.from_array(np.arange(-3.0, 5.0), chunks=4)
    f, func = _UNKNOWN[case]
    with pytest.raises(XpgradValueError, match=rf"^{func}: cannot .* data-dependent shape \(nan,\)"):
        xg.grad(f)(x)
    computes.assert_none(f"{case} on an array of unknown size")


def test_masking_with_where_works_lazily(computes: Computes) -> None:
    # the documented alternative to x[mask]: keeps the shape known
    x = da.from_array(np.arange(-3.0, 5.0), chunks=4)
    g = xg.grad(lambda x: xg.sum(xg.where(x > 0, x, 0.0) ** 2))(x)
    computes.assert_none("where-masking")
    np.testing.assert_array_equal(g.compute(), np.where(np.arange(-3.0, 5.0) > 0, 2 * np.arange(-3.0, 5.0), 0.0))


def test_non_scalar_output_of_unknown_size_is_a_clear_error(computes: Computes) -> None:
    x = da.from_array(np.arange(-3.0, 5.0), chunks=4)
    with pytest.raises(XpgradValueError, match=r"grad: the function must return a scalar .* \(nan,\)"):
        xg.grad(lambda x: x[x > 0])(x)
    computes.assert_none("a non-scalar output of unknown size")


# ====================================================================== dask.distributed
def _gd(loss: Any, w: Any, a: Any, y: Any, steps: int, lr: float, persist: bool) -> Any:
    for _ in range(steps):
        w = w - lr * xg.grad(loss)(w, a, y)
        if persist:
            w = w.persist()  # runs this step on the cluster, keeps w a dask array
    return w


@pytest.mark.slow
@pytest.mark.parametrize("loss", [_linear, _logistic], ids=["linear", "logistic"])
def test_training_on_a_local_cluster(loss: Any, dask_client: Any) -> None:
    """A gradient and 3 steps of gradient descent on a 100-chunk array, on 2 worker processes, equal NumPy to 1e-10.

    About 25 s on a busy 2-core machine: ~5 s per step for ~750 tasks, plus the cluster start.
    """
    n, d, chunk = 200_000, 8, 2_000  # 100 chunks of 2,000 rows (12.8 MB in all)
    # generated chunk by chunk on the workers (no data in the graph), then kept there
    rng = da.random.default_rng(2)
    w_true = np.linspace(-1.0, 1.0, d)
    dX = rng.standard_normal((n, d), chunks=(chunk, d))
    dy = dX @ w_true + 0.1 * rng.standard_normal(n, chunks=chunk) if loss is _linear else \
        (rng.random(n, chunks=chunk) < 1 / (1 + da.exp(-dX @ w_true))).astype(np.float64)
    assert dX.numblocks[0] == 100
    dX, dy = dask_client.persist([dX, dy])
    X, y = dask.compute(dX, dy)  # the same data for NumPy
    w0 = np.zeros(d)
    g = xg.grad(loss)(da.from_array(w0), dX, dy)
    assert isinstance(g, da.Array)
    g_dist = g.compute()
    w_dist = _gd(loss, da.from_array(w0), dX, dy, steps=3, lr=0.5, persist=True).compute()
    np.testing.assert_allclose(g_dist, xg.grad(loss)(w0, X, y), rtol=1e-10, atol=1e-12)
    exact = _linear_grad_np if loss is _linear else _logistic_grad_np
    np.testing.assert_allclose(g_dist, exact(w0, X, y), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w_dist, _gd(loss, w0, X, y, steps=3, lr=0.5, persist=False), rtol=1e-10, atol=1e-12)


def test_a_reshape_dask_refuses_is_done_after_rechunking() -> None:
    """Dask's reshape only merges or splits whole chunks: (2, 4) in chunks ((1, 1), (2, 2))
    into (4, 2) raises NotImplementedError there. xpgrad rechunks and reshapes (forward and
    backward), and the values and gradient are NumPy's (found by the thorough backend fuzz)."""
    import dask.array as da

    raw = np.arange(8.0).reshape(2, 4)
    x = xg.asarray(da.from_array(raw, chunks=(1, 2)), requires_grad=True)
    with pytest.raises(NotImplementedError):
        x.data.reshape((4, 2))  # Dask itself
    y = xg.reshape(x, (4, 2))
    w = np.arange(8.0).reshape(4, 2)
    xg.sum(y * xg.asarray(da.from_array(w, chunks=(2, 1)))).backward()
    np.testing.assert_array_equal(y.data.compute(), raw.reshape(4, 2))
    np.testing.assert_array_equal(x.grad.data.compute(), w.reshape(2, 4))
