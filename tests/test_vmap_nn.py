"""vmap of ``xg.nn``: every functional against a Python loop (values and per-example
gradients), modules mapped over inputs, ``functional_call`` for per-example gradients of
a module's parameters (against ``torch.func``), ``custom_vjp``/``custom_jvp`` under vmap
(JAX's documentation examples), and random draws inside vmap (one draw, shared)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.autograd._batched import RULES

F = xg.nn.functional
B = 3
_rng = np.random.default_rng(0)


def _r(*s: int) -> np.ndarray:
    return _rng.standard_normal(s)


def _needs(*names: str) -> None:
    """The functions composed of primitives whose batching rules live in other chapters."""
    missing = [n for n in names if n not in RULES]
    assert not missing, f"no batching rule for {missing}"


# name: (function, inputs (batched along axis 0 where in_axes is 0), in_axes, primitives needed)
CASES: dict[str, tuple[Any, list[np.ndarray], tuple[Any, ...], tuple[str, ...]]] = {
    "linear": (lambda x, w, b: F.linear(x, w, b), [_r(B, 2, 4), _r(3, 4), _r(3)], (0, None, None), ()),
    "linear_w": (lambda x, w: F.linear(x, w), [_r(2, 4), _r(B, 3, 4)], (None, 0), ()),
    "bilinear": (lambda a, b, w: F.bilinear(a, b, w), [_r(B, 2, 3), _r(B, 2, 4), _r(5, 3, 4)], (0, 0, None),
                 ("tensordot",)),
    "embedding": (lambda w, i: F.embedding(i, w), [_r(5, 3), _rng.integers(0, 5, (B, 4))], (None, 0), ("take",)),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b), [_r(B, 2, 4), _r(4), _r(4)], (0, None, None), ()),
    "batch_norm_eval": (lambda x, m, v: F.batch_norm(x, m, v, training=False),
                        [_r(B, 2, 3), _r(3), np.abs(_r(3)) + 0.5], (0, None, None), ()),
    "batch_norm_batch_stats": (lambda x: F.batch_norm(x, None, None, training=True), [_r(B, 4, 3)], (0,), ()),
    "group_norm": (lambda x, w: F.group_norm(x, 2, w), [_r(B, 2, 4, 3), _r(4)], (0, None), ()),
    "conv1d": (lambda x, w: F.conv1d(x, w, padding=1), [_r(B, 2, 3, 6), _r(4, 3, 3)], (0, None), ("concat", "stack")),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [_r(B, 2, 3, 5, 5), _r(4, 3, 3, 3), _r(4)],
               (0, None, None), ("concat", "stack")),
    "conv2d_weights": (lambda x, w: F.conv2d(x, w), [_r(3, 5, 5), _r(B, 4, 3, 3, 3)], (None, 0), ("stack",)),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2), [_r(B, 2, 3, 4, 4), _r(3, 2, 3, 3)],
                         (0, None), ("concat", "stack")),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [_r(B, 2, 3, 4, 4)], (0,), ("stack",)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2, padding=1, count_include_pad=False), [_r(B, 2, 3, 4, 4)], (0,),
                   ("concat", "stack")),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 2), [_r(B, 2, 3, 5, 5)], (0,), ()),
    "pad_reflect": (lambda x: F.pad(x, (1, 2), mode="reflect"), [_r(B, 2, 4)], (0,), ("concat",)),
    "sdpa_causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                    [_r(B, 2, 4, 3), _r(B, 2, 4, 3), _r(B, 2, 4, 3)], (0, 0, 0), ()),
    "sdpa_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                  [_r(B, 2, 4, 3), _r(B, 2, 4, 3), _r(B, 2, 4, 3), _rng.random((B, 4, 4)) > 0.3], (0, 0, 0, 0), ()),
    "relu": (F.relu, [_r(B, 4)], (0,), ()),
    "leaky_relu": (F.leaky_relu, [_r(B, 4)], (0,), ()),
    "elu": (F.elu, [_r(B, 4)], (0,), ()),
    "gelu": (F.gelu, [_r(B, 4)], (0,), ()),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), [_r(B, 4)], (0,), ()),
    "silu": (F.silu, [_r(B, 4)], (0,), ()),
    "softplus": (F.softplus, [_r(B, 4)], (0,), ()),
    "sigmoid": (F.sigmoid, [_r(B, 4)], (0,), ()),
    "logsigmoid": (F.logsigmoid, [_r(B, 4)], (0,), ()),
    "softmax": (lambda x: F.softmax(x, axis=-1), [_r(B, 2, 4)], (0,), ()),
    "log_softmax": (lambda x: F.log_softmax(x, axis=0), [_r(B, 2, 4)], (0,), ()),
    "mse_loss": (F.mse_loss, [_r(B, 4), _r(B, 4)], (0, 0), ()),
    "l1_loss": (F.l1_loss, [_r(B, 4), _r(B, 4)], (0, 0), ()),
    "huber_loss": (F.huber_loss, [_r(B, 4), _r(B, 4)], (0, 0), ()),
    "smooth_l1_loss": (F.smooth_l1_loss, [_r(B, 4), _r(B, 4)], (0, 0), ()),
    "cross_entropy": (F.cross_entropy, [_r(B, 2, 4), _rng.integers(0, 4, (B, 2))], (0, 0), ()),
    "cross_entropy_options": (
        lambda x, y: F.cross_entropy(x, y, weight=np.arange(1.0, 5.0), label_smoothing=0.1, ignore_index=2),
        [_r(B, 2, 4), _rng.integers(0, 4, (B, 2))], (0, 0), ()),
    "cross_entropy_shared_targets": (F.cross_entropy, [_r(B, 2, 4), _rng.integers(0, 4, (2,))], (0, None), ()),
    "cross_entropy_probs": (F.cross_entropy, [_r(B, 2, 4), _rng.random((B, 2, 4))], (0, 0), ()),
    "nll_loss": (F.nll_loss, [_r(B, 2, 4), _rng.integers(0, 4, (B, 2))], (0, 0), ()),
    "binary_cross_entropy": (F.binary_cross_entropy, [_rng.uniform(0.1, 0.9, (B, 4)), _rng.random((B, 4))],
                             (0, 0), ()),
    "bce_with_logits": (lambda x, y, pw: F.binary_cross_entropy_with_logits(x, y, pos_weight=pw),
                        [_r(B, 4), _rng.random((B, 4)), np.full(4, 2.0)], (0, 0, None), ()),
    "kl_div": (lambda x, y: F.kl_div(x, y, reduction="batchmean"), [_r(B, 2, 4), _rng.random((B, 2, 4))], (0, 0), ()),
    "dropout_eval": (lambda x: F.dropout(x, 0.5, training=False), [_r(B, 4)], (0,), ()),
}


def _slice(a: Any, i: int, ax: Any) -> Any:
    """Example ``i`` of ``a`` as a Tensor (some functionals take Tensors, not raw arrays, on strict backends)."""
    return xg.asarray(a if ax is None else a[i, ...])


def _np(backend: Any, out: Any) -> list[np.ndarray]:
    outs = out if isinstance(out, tuple) else (out,)
    return [np.asarray(backend.to_numpy(o)) for o in outs]


@pytest.mark.parametrize("name", list(CASES))
def test_functional_matches_loop(name: str, backend: Any) -> None:
    """vmap of each functional equals the loop; vmap(grad) of its sum gives each example's gradient."""
    f, arrays, axes, needs = CASES[name]
    _needs(*needs)
    args = [backend.asarray(a) for a in arrays]
    got = _np(backend, xg.vmap(f, in_axes=axes)(*args))
    per = [_np(backend, f(*[_slice(a, i, ax) for a, ax in zip(args, axes)])) for i in range(B)]
    for k, g in enumerate(got):
        np.testing.assert_allclose(g, np.stack([p[k] for p in per]), rtol=1e-9, atol=1e-12, err_msg=name)
    floats = tuple(i for i, a in enumerate(arrays) if a.dtype.kind == "f")

    def loss(*a: Any) -> Any:
        return xg.sum(f(*a))

    grads = xg.vmap(xg.grad(loss, argnums=floats), in_axes=axes)(*args)
    want = [xg.grad(loss, argnums=floats)(*[_slice(a, i, ax) for a, ax in zip(args, axes)]) for i in range(B)]
    for k in range(len(floats)):
        np.testing.assert_allclose(np.asarray(backend.to_numpy(grads[k])),
                                   np.stack([np.asarray(backend.to_numpy(w[k])) for w in want]),
                                   rtol=1e-9, atol=1e-12, err_msg=f"{name}: vmap(grad) of argument {floats[k]}")


def test_batch_norm_training_with_running_stats_refuses(backend: Any) -> None:
    """Inside vmap, updating running statistics (one buffer, a batch of updates) is refused, naming the way out."""
    rm, rv = xg.zeros(3), xg.ones(3)
    with pytest.raises(xg.XpgradValueError, match=r"batch_norm: inside vmap.*running_mean=None"):
        xg.vmap(lambda x: F.batch_norm(x, rm, rv, training=True))(backend.asarray(_r(B, 4, 3)))


def test_one_hot_needs_num_classes_inside_vmap(backend: Any) -> None:
    idx = backend.asarray(_rng.integers(0, 4, (B, 2)))
    got = backend.to_numpy(xg.vmap(lambda i: F.one_hot(i, 4))(idx))
    np.testing.assert_array_equal(got, np.eye(4, dtype=got.dtype)[backend.to_numpy(idx)])
    with pytest.raises(xg.XpgradValueError, match="one_hot: inside vmap num_classes"):
        xg.vmap(F.one_hot)(idx)


# ---------------------------------------------------------------------- modules
def _mlp() -> Any:
    xg.random.seed(1)
    return xg.nn.Sequential(xg.nn.Linear(3, 5, dtype=xg.float64), xg.nn.Tanh(), xg.nn.Linear(5, 2, dtype=xg.float64))


def test_vmap_of_module_forward_equals_loop() -> None:
    model = _mlp()
    X = _r(4, 2, 3)
    got = xg.vmap(model)(X)
    want = np.stack([model(x).data for x in X])
    assert isinstance(got, xg.Tensor) and got.requires_grad  # (on the graph of the parameters)
    np.testing.assert_allclose(got.data, want, rtol=1e-12)


def test_functional_call_per_example_gradients_match_loop_and_restores() -> None:
    model = _mlp()
    params = {k: v.detach() for k, v in model.named_parameters()}
    X, Y = _r(6, 3), _rng.integers(0, 2, 6)

    def loss(p: Any, x: Any, y: Any) -> Any:
        return F.cross_entropy(xg.nn.functional_call(model, p, (x[None],)), y[None])

    g = xg.vmap(xg.grad(loss), in_axes=(None, 0, 0))(params, X, Y)
    assert set(g) == set(params)
    for i in range(6):
        gi = xg.grad(loss)(params, X[i], Y[i])
        for k in g:
            np.testing.assert_allclose(np.asarray(g[k])[i], np.asarray(gi[k]), rtol=1e-10, atol=1e-14, err_msg=k)
    # the module's own parameters are untouched and used again outside the call
    w0 = model[0].weight
    assert isinstance(w0, xg.nn.Parameter)
    zero = {k: np.zeros(tuple(v.shape)) for k, v in params.items()}
    np.testing.assert_array_equal(xg.nn.functional_call(model, zero, (X,)).data, np.zeros((6, 2)))
    assert model[0].weight is w0
    with pytest.raises(TypeError, match="boom"):  # an error inside the call: the parameters come back too
        xg.nn.functional_call(model, zero, (X,), {"boom": 1})
    np.testing.assert_allclose(model(X).data, xg.nn.functional_call(model, {}, (X,)).data)


def test_functional_call_errors_and_ties() -> None:
    model = _mlp()
    with pytest.raises(xg.XpgradValueError, match=r"functional_call: \['0.wieght'\] is not a parameter"):
        xg.nn.functional_call(model, {"0.wieght": np.zeros((5, 3))}, (np.zeros(3),))
    with pytest.raises(xg.XpgradValueError, match="strict=True and no value"):
        xg.nn.functional_call(model, {"0.weight": np.zeros((5, 3))}, (np.zeros(3),), strict=True)
    # tied weights: one value stands for every name of the tensor
    a, b = xg.nn.Linear(2, 2, bias=False, dtype=xg.float64), xg.nn.Linear(2, 2, bias=False, dtype=xg.float64)
    b.weight = a.weight
    tied = xg.nn.Sequential(a, b)
    out = xg.nn.functional_call(tied, {"0.weight": 2.0 * np.eye(2)}, (np.ones(2),))
    np.testing.assert_allclose(out.data, [4.0, 4.0])


def test_functional_call_is_thread_local() -> None:
    """A functional_call in one thread does not change what the module computes in another."""
    import threading

    model = _mlp()
    x = _r(3)
    want = model(x).data
    zero = {k: np.zeros(tuple(v.shape)) for k, v in model.named_parameters()}
    inside, seen = threading.Event(), threading.Event()
    got: dict[str, Any] = {}

    class Wait(xg.nn.Module):
        def forward(self, y: Any) -> Any:
            inside.set()
            seen.wait(5)
            return y

    wrapped = xg.nn.Sequential(model, Wait())

    def other() -> None:
        inside.wait(5)
        got["out"] = model(x).data
        seen.set()

    th = threading.Thread(target=other)
    th.start()
    res = xg.nn.functional_call(wrapped, {f"0.{k}": v for k, v in zero.items()}, (x,))
    th.join()
    np.testing.assert_array_equal(res.data, np.zeros(2))
    np.testing.assert_allclose(got["out"], want)


def test_functional_call_per_example_gradients_match_torch_func() -> None:
    torch = pytest.importorskip("torch")
    from torch.func import functional_call, grad, vmap

    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2)).double()
    model = _mlp()
    model.load_state_dict({k: v.detach().numpy() for k, v in tmodel.state_dict().items()})
    X, Y = _r(6, 3), _rng.integers(0, 2, 6)

    def tloss(p: Any, x: Any, y: Any) -> Any:
        return torch.nn.functional.cross_entropy(functional_call(tmodel, p, (x[None],)), y[None])

    tp = {k: v.detach() for k, v in tmodel.named_parameters()}
    want = vmap(grad(tloss), in_dims=(None, 0, 0))(tp, torch.from_numpy(X), torch.from_numpy(Y))

    def loss(p: Any, x: Any, y: Any) -> Any:
        return F.cross_entropy(xg.nn.functional_call(model, p, (x[None],)), y[None])

    params = {k: v.detach().data for k, v in model.named_parameters()}
    got = xg.vmap(xg.grad(loss), in_axes=(None, 0, 0))(params, X, Y)
    for k in want:
        np.testing.assert_allclose(np.asarray(got[k]), want[k].numpy(), rtol=1e-10, atol=1e-13, err_msg=k)


# ---------------------------------------------------------------------- custom rules
def _clip_gradient() -> Any:
    @xg.custom_vjp
    def clip_gradient(lo: Any, hi: Any, x: Any) -> Any:
        return x

    def fwd(lo: Any, hi: Any, x: Any) -> Any:
        return x, (lo, hi)

    def bwd(res: Any, g: Any) -> Any:
        lo, hi = res
        return (None, None, xg.clip(g, lo, hi))

    clip_gradient.defvjp(fwd, bwd)
    return clip_gradient


def _log1pexp() -> Any:
    @xg.custom_jvp
    def log1pexp(x: Any) -> Any:
        return xg.log(1.0 + xg.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return log1pexp(x), t * (1.0 - 1.0 / (1.0 + xg.exp(x)))

    return log1pexp


@pytest.mark.parametrize("which", ["clip_gradient", "log1pexp"])
def test_custom_rules_under_vmap(which: str, backend: Any) -> None:
    """JAX's custom_vjp/custom_jvp documentation examples: vmap, vmap(grad), grad(vmap) against loops;
    the custom rule is what runs (the clipped gradient; log1pexp's finite gradient at x = 100)."""
    if which == "clip_gradient":
        cg = _clip_gradient()

        def f(x: Any) -> Any:
            return xg.sum(xg.sin(cg(-0.75, 0.75, x * 3.0)))
        X = backend.asarray(np.array([[1.0, -2.0, 0.1], [3.0, 0.2, -0.3]]))
    else:
        lp = _log1pexp()

        def f(x: Any) -> Any:
            return xg.sum(lp(x) * x)
        X = backend.asarray(np.array([[0.0, 100.0], [-1.0, 2.0], [30.0, -3.0]]))
    n = X.shape[0]
    rows = [X[i, ...] for i in range(n)]
    tn = backend.to_numpy
    np.testing.assert_allclose(tn(xg.vmap(f)(X)), [tn(f(r)) for r in rows], rtol=1e-12)
    per = np.stack([tn(xg.grad(f)(r)) for r in rows])
    assert np.all(np.isfinite(per))
    np.testing.assert_allclose(tn(xg.vmap(xg.grad(f))(X)), per, rtol=1e-12)
    np.testing.assert_allclose(tn(xg.grad(lambda xs: xg.sum(xg.vmap(f)(xs)))(X)), per, rtol=1e-12)
    if which == "clip_gradient":  # |3 cos(3x)| <= 3 clipped to 0.75, times the outer 3
        assert np.max(np.abs(per)) <= 2.25 + 1e-12


# ---------------------------------------------------------------------- random
def test_dropout_inside_vmap_shares_one_mask() -> None:
    """A draw inside the mapped function is made once: every example gets the same dropout mask."""
    X = np.ones((4, 50))
    xg.random.seed(0)
    out = np.asarray(xg.vmap(lambda x: F.dropout(x, 0.5))(X))
    assert 0 < np.count_nonzero(out[0]) < 50
    for i in range(1, 4):
        np.testing.assert_array_equal(out[i], out[0])


def test_random_batch_drawn_outside_differs_per_example() -> None:
    """Drawing the batch of random numbers outside and mapping over it gives each example its own."""
    xg.random.seed(0)
    noise = xg.random.normal((4, 50))
    X = np.ones((4, 50))
    out = np.asarray(xg.vmap(lambda x, e: x + e)(X, noise))
    np.testing.assert_allclose(out, 1.0 + np.asarray(noise.data))
    assert not any(np.array_equal(out[0], out[i]) for i in range(1, 4))
