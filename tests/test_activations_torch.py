"""Every activation of ``xpgrad.nn.functional`` against PyTorch (issue #31, part 1).

On every backend, at random points and exactly at the kinks: the value and the
reverse-mode gradient equal torch's CPU float64 ones (at a kink, the one-sided value
torch's backward picks), the second derivative too where the function is smooth at the
point; a few under ``xg.jit`` and ``xg.vmap``. The Modules are checked to call them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
import xpgrad.nn.functional as F  # noqa: N812 - PyTorch's conventional alias

from ._util import to_numpy

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RTOL, ATOL = 1e-9, 1e-12


@dataclass(frozen=True)
class Act:
    """One activation: ``ours(F, x)`` and ``theirs(TF, x)``, its kink points, and whether it is smooth there."""

    id: str
    ours: Callable[[Any, Any], Any]
    theirs: Callable[[Any, Any], Any]
    kinks: tuple[float, ...] = ()
    #: the second derivative is compared at the random points (False: torch's own double
    #: backward is not the derivative of its backward there, or the function is piecewise linear)
    second: bool = True
    #: an even last axis (glu)
    shape: tuple[int, ...] = (3, 4)
    #: the gradient's tolerance: torch's CPU hardsigmoid backward multiplies by the float32
    #: constant ``1.0f / 6.0f`` (a relative error of 3e-8), xpgrad by the float64 1/6
    grad_rtol: float = RTOL


ACTS = [
    Act("celu", lambda f, x: f.celu(x, 1.5), lambda t, x: t.celu(x, 1.5), (0.0,)),
    Act("selu", lambda f, x: f.selu(x), lambda t, x: t.selu(x), (0.0,)),
    Act("relu6", lambda f, x: f.relu6(x), lambda t, x: t.relu6(x), (0.0, 6.0), second=False),
    Act("hardtanh", lambda f, x: f.hardtanh(x), lambda t, x: t.hardtanh(x), (-1.0, 1.0), second=False),
    Act("hardtanh_range", lambda f, x: f.hardtanh(x, -0.5, 2.0), lambda t, x: t.hardtanh(x, -0.5, 2.0),
        (-0.5, 2.0), second=False),
    Act("hardswish", lambda f, x: f.hardswish(x), lambda t, x: t.hardswish(x), (-3.0, 3.0)),
    Act("hardsigmoid", lambda f, x: f.hardsigmoid(x), lambda t, x: t.hardsigmoid(x), (-3.0, 3.0), second=False,
        grad_rtol=1e-7),
    Act("softshrink", lambda f, x: f.softshrink(x), lambda t, x: t.softshrink(x), (-0.5, 0.5), second=False),
    Act("softshrink_1", lambda f, x: f.softshrink(x, 1.0), lambda t, x: t.softshrink(x, 1.0), (-1.0, 1.0),
        second=False),
    Act("hardshrink", lambda f, x: f.hardshrink(x), lambda t, x: t.hardshrink(x), (-0.5, 0.5), second=False),
    Act("tanhshrink", lambda f, x: f.tanhshrink(x), lambda t, x: t.tanhshrink(x), (0.0,)),
    Act("glu", lambda f, x: f.glu(x), lambda t, x: t.glu(x), (0.0,)),
    Act("glu_dim0", lambda f, x: f.glu(x, 0), lambda t, x: t.glu(x, 0), (0.0,), shape=(4, 3)),
    Act("mish", lambda f, x: f.mish(x), lambda t, x: t.mish(x), (0.0, 30.0, -30.0)),
    Act("logsigmoid", lambda f, x: f.logsigmoid(x), lambda t, x: t.logsigmoid(x), (0.0, -50.0, 50.0)),
    Act("softsign", lambda f, x: f.softsign(x), lambda t, x: t.softsign(x), (0.0,)),
    Act("threshold", lambda f, x: f.threshold(x, 0.5, -2.0), lambda t, x: t.threshold(x, 0.5, -2.0), (0.5,),
        second=False),
    Act("rrelu_eval", lambda f, x: f.rrelu(x, 0.1, 0.3), lambda t, x: t.rrelu(x, 0.1, 0.3, training=False), (0.0,),
        second=False),
    Act("gelu_tanh", lambda f, x: f.gelu(x, approximate="tanh"), lambda t, x: t.gelu(x, approximate="tanh"),
        (0.0,)),
    Act("gelu", lambda f, x: f.gelu(x), lambda t, x: t.gelu(x), (0.0,)),
    Act("elu", lambda f, x: f.elu(x), lambda t, x: t.elu(x), (0.0,)),
    Act("leaky_relu", lambda f, x: f.leaky_relu(x, 0.2), lambda t, x: t.leaky_relu(x, 0.2), (0.0,), second=False),
    Act("silu", lambda f, x: f.silu(x), lambda t, x: t.silu(x), (0.0,)),
    Act("softplus", lambda f, x: f.softplus(x), lambda t, x: t.softplus(x), (0.0, 20.0)),
    Act("prelu_shared", lambda f, x: f.prelu(x, _like(x, np.array([0.25]))),
        lambda t, x: t.prelu(x, torch.tensor([0.25], dtype=torch.float64)), (0.0,), second=False),
    Act("prelu_channels", lambda f, x: f.prelu(x, _like(x, np.array([0.1, 0.2, 0.3]))),
        lambda t, x: t.prelu(x, torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)), (0.0,), second=False,
        shape=(2, 3, 2)),
]


def _like(x: Any, a: np.ndarray) -> Any:
    """``a`` as a constant array of ``x``'s backend and device."""
    import array_api_compat

    data = x.data
    return array_api_compat.array_namespace(data).asarray(a.copy(), device=array_api_compat.device(data))


def _points(act: Act, kinks: bool) -> np.ndarray:
    rng = np.random.default_rng(sum(map(ord, act.id)) + kinks)
    n = int(np.prod(act.shape))
    if kinks:  # every kink (and the points just beside it), the rest random
        vals = [v for k in act.kinks for v in (k, k - 1e-9, k + 1e-9)]
        x = rng.uniform(-4.0, 4.0, n)
        x[: min(len(vals), n)] = vals[:n]
        return x.reshape(act.shape)
    return rng.uniform(-7.0, 7.0, act.shape)


def _torch(act: Act, x: np.ndarray, u: np.ndarray | None,
           second: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Torch's value, gradient of ``sum(u * f)`` (``u`` None: of ``sum(f)``), and derivative of ``sum(gradient of sum(f))``."""
    tx = torch.tensor(x, requires_grad=True)
    y = act.theirs(TF, tx)
    (g,) = torch.autograd.grad(y, tx, torch.ones_like(y) if u is None else torch.tensor(u))
    if not second:
        return y.detach().numpy(), g.numpy(), g.numpy()
    (g1,) = torch.autograd.grad(act.theirs(TF, tx).sum(), tx, create_graph=True)
    if g1.requires_grad:
        (g2,) = torch.autograd.grad(g1.sum(), tx)
    else:
        g2 = torch.zeros_like(tx)
    return y.detach().numpy(), g.numpy(), g2.detach().numpy()


@pytest.mark.parametrize("kinks", [False, True], ids=["random", "kinks"])
@pytest.mark.parametrize("act", ACTS, ids=lambda a: a.id)
def test_activation_matches_torch(act: Act, kinks: bool, backend: Any) -> None:
    x = _points(act, kinks)
    rng = np.random.default_rng(1)
    with torch.no_grad():
        shape = act.theirs(TF, torch.tensor(x)).shape
    u = rng.standard_normal(tuple(shape))
    y_ref, g_ref, h_ref = _torch(act, x, u, second=act.second and not kinks)
    ours = xg.asarray(backend.asarray(x), requires_grad=True)
    y = act.ours(F, ours)
    np.testing.assert_allclose(to_numpy(y.detach()), y_ref, rtol=RTOL, atol=ATOL, err_msg=f"{act.id}: value")
    y.backward(gradient=backend.asarray(u))
    np.testing.assert_allclose(to_numpy(ours.grad), g_ref, rtol=act.grad_rtol, atol=ATOL,
                               err_msg=f"{act.id}: gradient")
    if act.second and not kinks:
        def first(z: Any) -> Any:
            return xg.grad(lambda w: xg.sum(act.ours(F, w)))(z)

        h = xg.grad(lambda z: xg.sum(first(z)))(backend.asarray(x))
        np.testing.assert_allclose(to_numpy(h), h_ref, rtol=1e-7, atol=1e-10, err_msg=f"{act.id}: 2nd derivative")


@pytest.mark.parametrize("act", [a for a in ACTS if a.id in ("hardswish", "relu6", "mish", "softshrink", "celu",
                                                              "glu", "threshold")], ids=lambda a: a.id)
def test_activation_under_jit_and_vmap(act: Act, backend: Any) -> None:
    x = _points(act, kinks=True)
    y_ref, g_ref, _ = _torch(act, x, None)
    xb = backend.asarray(x)
    step = xg.jit(xg.value_and_grad(lambda z: xg.sum(act.ours(F, z))))
    for _ in range(2):  # the trace, then the replay
        v, g = step(xb)
        np.testing.assert_allclose(float(to_numpy(v)), y_ref.sum(), rtol=RTOL, err_msg=f"{act.id}: jit value")
        np.testing.assert_allclose(to_numpy(g), g_ref, rtol=RTOL, atol=ATOL, err_msg=f"{act.id}: jit gradient")
    rows = xg.vmap(lambda r: act.ours(F, r))(xb)  # a row is an example: glu splits its last axis
    np.testing.assert_allclose(to_numpy(rows), y_ref, rtol=RTOL, atol=ATOL, err_msg=f"{act.id}: vmap value")
    grows = xg.vmap(xg.grad(lambda r: xg.sum(act.ours(F, r))))(xb)
    np.testing.assert_allclose(to_numpy(grows), g_ref, rtol=RTOL, atol=ATOL, err_msg=f"{act.id}: vmap gradient")


# the activations ACTS leaves out (no kink of interest), for the transform comparison below
_MORE = [Act("relu", lambda f, x: f.relu(x), lambda t, x: t.relu(x)),
         Act("sigmoid", lambda f, x: f.sigmoid(x), lambda t, x: t.sigmoid(x)),
         Act("tanh", lambda f, x: f.tanh(x), lambda t, x: t.tanh(x)),
         Act("softmax", lambda f, x: f.softmax(x, dim=-1), lambda t, x: t.softmax(x, dim=-1)),
         Act("log_softmax", lambda f, x: f.log_softmax(x, dim=-1), lambda t, x: t.log_softmax(x, dim=-1))]
#: the axis a row is mapped over where axis 0 is not independent (glu along axis 0, prelu's channels at axis 1)
_VMAP_AXIS = {"glu_dim0": 1, "prelu_channels": 2}


@pytest.mark.parametrize("bname", ["numpy", "torch"])
@pytest.mark.parametrize("act", ACTS + _MORE, ids=lambda a: a.id)
def test_activation_eager_jit_vmap_hessian_agree(act: Act, bname: str) -> None:
    # each activation eagerly, under jit (trace and replay), under vmap (value and grad per row) and
    # under hessian of the sum (forward over reverse: against reverse over reverse, and jitted):
    # bit for bit on NumPy where the programs are the same calls, else to 1e-12; jacrev(grad) against hessian to 1e-10
    from .conftest import _load

    backend = _load(bname)
    x = backend.asarray(_points(act, kinks=True))
    exact = bname == "numpy"

    def same(got: Any, want: Any, what: str, tol: float = 1e-12, same_calls: bool = True) -> None:
        g, w = to_numpy(got), to_numpy(want)
        assert g.shape == w.shape, (act.id, what, g.shape, w.shape)
        if exact and same_calls:
            np.testing.assert_array_equal(g, w, err_msg=f"{act.id}: {what}")
        else:
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{act.id}: {what}")

    if act.id.startswith("prelu"):  # (its weight made once, outside: _like reads x's data)
        w = backend.asarray(np.array([0.25] if act.id == "prelu_shared" else [0.1, 0.2, 0.3]))

        def f(z: Any) -> Any:
            return F.prelu(z, w)
    else:
        def f(z: Any) -> Any:
            return act.ours(F, z)

    def s(z: Any) -> Any:
        return xg.sum(f(z))

    y, g, h = f(x), xg.grad(s)(x), xg.hessian(s)(x)
    jf, jg, jh = xg.jit(f), xg.jit(xg.grad(s)), xg.jit(xg.hessian(s))
    for _ in range(2):  # the trace, then the replay
        same(jf(x), y, "jit value")
        same(jg(x), g, "jit gradient")
        same(jh(x), h, "jit hessian")
    same(h, xg.jacrev(xg.grad(s))(x), "hessian (forward over reverse) and jacrev(grad)", 1e-10, same_calls=False)
    ax = _VMAP_AXIS.get(act.id, 0)
    same(xg.vmap(f, in_axes=ax, out_axes=ax)(x), y, "vmap value")
    same(xg.vmap(xg.grad(s), in_axes=ax, out_axes=ax)(x), g, "vmap gradient")


def test_prelu_weight_gradient_matches_torch(backend: Any) -> None:
    x = _points(ACTS[-1], kinks=True)
    m = xg.nn.PReLU(3, init=0.375, dtype="float64")
    backend.to(m)
    tm = torch.nn.PReLU(3, init=0.375).double()
    y = m(xg.asarray(backend.asarray(x)))
    ty = tm(torch.tensor(x))
    u = np.random.default_rng(2).standard_normal(x.shape)
    y.backward(gradient=backend.asarray(u))
    ty.backward(torch.tensor(u))
    np.testing.assert_allclose(to_numpy(y.detach()), ty.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(to_numpy(m.weight.grad), tm.weight.grad.numpy(), rtol=RTOL, atol=ATOL)
    assert repr(m) == "PReLU(num_parameters=3)"


def test_prelu_default_is_float32_and_shared() -> None:
    m = xg.nn.PReLU()
    assert m.weight.shape == (1,)
    assert m.weight.dtype == xg.float32
    assert float(to_numpy(m.weight)[0]) == pytest.approx(0.25)
    with pytest.raises(xg.XpgradValueError, match="prelu: weight has 2 elements for 3 channels"):
        F.prelu(xg.ones((2, 3)), xg.ones(2))


def test_rrelu_training_draws_slopes_from_the_policy(backend: Any) -> None:
    x = -np.linspace(0.5, 3.0, 200)
    m = xg.nn.RReLU(0.1, 0.3)
    outs = []
    for _ in range(2):
        with backend.policy(seed=7):
            outs.append(to_numpy(m(xg.asarray(backend.asarray(x)))))
    np.testing.assert_array_equal(outs[0], outs[1])  # the seed fixes the slopes
    slopes = outs[0] / x
    assert slopes.min() >= 0.1
    assert slopes.max() < 0.3
    assert np.unique(slopes).size > 100  # one slope per element
    with backend.policy(seed=8):
        other = to_numpy(m(xg.asarray(backend.asarray(x))))
    assert not np.array_equal(outs[0], other)
    # the gradient is the slope drawn for the value
    xt = xg.asarray(backend.asarray(x), requires_grad=True)
    with backend.policy(seed=7):
        y = m(xt)
    xg.sum(y).backward()
    np.testing.assert_allclose(to_numpy(xt.grad), slopes, rtol=1e-12)
    # positive inputs pass through, and eval mode is the mean slope
    np.testing.assert_array_equal(to_numpy(m(xg.asarray(backend.asarray(-x)))), -x)
    m.eval()
    np.testing.assert_allclose(to_numpy(m(xg.asarray(backend.asarray(x)))), 0.2 * x, rtol=1e-12)


@pytest.mark.parametrize(("module", "func"), [
    (lambda: xg.nn.CELU(1.5), lambda x: F.celu(x, 1.5)),
    (xg.nn.SELU, F.selu),
    (xg.nn.ReLU6, F.relu6),
    (lambda: xg.nn.Hardtanh(-2.0, 0.5), lambda x: F.hardtanh(x, -2.0, 0.5)),
    (xg.nn.Hardswish, F.hardswish),
    (xg.nn.Hardsigmoid, F.hardsigmoid),
    (lambda: xg.nn.Softshrink(0.3), lambda x: F.softshrink(x, 0.3)),
    (lambda: xg.nn.Hardshrink(0.3), lambda x: F.hardshrink(x, 0.3)),
    (xg.nn.Tanhshrink, F.tanhshrink),
    (xg.nn.GLU, F.glu),
    (xg.nn.Mish, F.mish),
    (xg.nn.LogSigmoid, F.logsigmoid),
    (xg.nn.Softsign, F.softsign),
    (lambda: xg.nn.Threshold(0.1, 20.0), lambda x: F.threshold(x, 0.1, 20.0)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_modules_call_the_functions(module: Callable[[], Any], func: Callable[[Any], Any]) -> None:
    x = xg.asarray(np.random.default_rng(0).uniform(-4.0, 4.0, (3, 4)))
    np.testing.assert_array_equal(to_numpy(module()(x)), to_numpy(func(x)))


@pytest.mark.parametrize(("call", "match"), [
    (lambda: F.hardtanh(xg.ones(2), 1.0, -1.0), "hardtanh: min_val must not exceed max_val"),
    (lambda: F.softshrink(xg.ones(2), -0.5), "softshrink: lambd must be non-negative, got -0.5"),
    (lambda: F.glu(xg.ones(3)), "glu: the size of dim -1 must be even, got 3"),
    (lambda: F.rrelu(xg.ones(2), 0.5, 0.1), "rrelu: need 0 <= lower <= upper"),
    (lambda: F.celu(xg.ones(2), 0.0), "celu: alpha must not be 0"),
    (lambda: xg.nn.PReLU(0), "PReLU: num_parameters must be a positive int, got 0"),
])
def test_bad_arguments(call: Callable[[], Any], match: str) -> None:
    with pytest.raises(xg.XpgradValueError, match=match):
        call()
