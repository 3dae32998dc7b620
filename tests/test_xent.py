"""The fused softmax cross-entropy (``nn.softmax_cross_entropy``) against PyTorch.

``cross_entropy`` with class-index targets runs one primitive whose constants carry
every option (weight, ignore_index, label_smoothing, reduction). Here each option
combination, on every class-axis layout and every backend, is compared with
``torch.nn.functional.cross_entropy`` in float64 (values and gradients), checked to
second order (reverse and forward mode) against central differences, and its Hessian
against torch's; float32 stays float32; and the fused node is what the loss comes from
(the fallbacks, probability targets and a weight that wants a gradient, are composed).
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
import xpgrad.nn.functional as F  # noqa: N812 - PyTorch's conventional alias
from xpgrad.testing import check_grads

torch = pytest.importorskip("torch")
TF = torch.nn.functional

FUSED = "nn.softmax_cross_entropy"
C = 5
W = np.array([0.5, 1.0, 2.0, 0.25, 1.5])
RNG = np.random.default_rng(8)

#: (layout name, logits shape); the class axis is 1, or 0 for the unbatched (C,) input
LAYOUTS = {"NC": (6, C), "C": (C,), "NCd1d2": (3, C, 2, 3)}


def _case(layout: str, ignore_index: int) -> tuple[np.ndarray, np.ndarray]:
    """Logits and targets; batched targets hit ``ignore_index`` in some rows (not all)."""
    shape = LAYOUTS[layout]
    x = RNG.standard_normal(shape) * 2.0
    tshape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    t = RNG.integers(0, C, tshape)
    if layout == "C":
        t = np.asarray(3 if ignore_index != 3 else 1)
    else:
        flat = t.reshape(-1)
        flat[[0, 3]] = ignore_index  # two ignored positions
        flat[1] = 2  # and the ignored class of ignore_index=2 is also a real one elsewhere
        flat[2] = 0  # and one position surely counts (whatever the generator drew)
        t = flat.reshape(tshape)
    return x, t


def _kwargs(weight: bool, ignore_index: int, reduction: str, smoothing: float, b: Any = None) -> dict[str, Any]:
    kw: dict[str, Any] = {"ignore_index": ignore_index, "reduction": reduction, "label_smoothing": smoothing}
    if weight:
        kw["weight"] = torch.asarray(W) if b is None else b.asarray(W)
    return kw


def _torch_loss_and_grad(x: np.ndarray, t: np.ndarray, u: np.ndarray, kw: dict[str, Any]) -> tuple[Any, Any]:
    xt = torch.asarray(x.copy(), requires_grad=True)
    out = TF.cross_entropy(xt, torch.asarray(t), **kw)
    (out * torch.asarray(u)).sum().backward()
    return out.detach().numpy(), xt.grad.numpy()


OPTIONS = list(itertools.product((False, True), (-100, 2), ("none", "sum", "mean"), (0.0, 0.2)))


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize(("weight", "ignore_index", "reduction", "smoothing"), OPTIONS,
                         ids=[f"w{int(w)}-ig{i}-{r}-ls{s}" for w, i, r, s in OPTIONS])
def test_matches_torch(layout: str, weight: bool, ignore_index: int, reduction: str, smoothing: float,
                       backend: Any) -> None:
    x, t = _case(layout, ignore_index)
    want, want_g = None, None
    u = None
    kw_t = _kwargs(weight, ignore_index, reduction, smoothing)
    xt = xg.asarray(backend.asarray(x), requires_grad=True)
    out = F.cross_entropy(xt, backend.asarray(t), **_kwargs(weight, ignore_index, reduction, smoothing, backend))
    assert out.grad_fn.name() == FUSED
    u = RNG.standard_normal(tuple(out.shape))
    want, want_g = _torch_loss_and_grad(x, t, u, kw_t)
    xg.sum(out * backend.asarray(u)).backward()
    np.testing.assert_allclose(backend.to_numpy(out), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(backend.to_numpy(xt.grad), want_g, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_every_target_ignored(reduction: str, np_backend: Any) -> None:
    """All positions ignored: "mean" is 0/0 (NaN, as in PyTorch); the others are 0; the gradient is 0."""
    x = RNG.standard_normal((3, C))
    t = np.full(3, -100)
    xt = xg.asarray(x, requires_grad=True)
    with np.errstate(invalid="ignore", divide="ignore"):  # NumPy's warnings for 0/0 of "mean"
        out = F.cross_entropy(xt, t, reduction=reduction)
        xg.sum(out).backward()
    want, want_g = _torch_loss_and_grad(x, t, np.ones(np.shape(out)), {"reduction": reduction})
    np.testing.assert_allclose(np.asarray(out.data), want)
    np.testing.assert_array_equal(np.asarray(xt.grad.data), want_g)  # 0, also for the NaN mean (as torch)


def test_fused_only_where_it_applies(np_backend: Any) -> None:
    x, t = _case("NC", -100)
    xt = xg.asarray(x, requires_grad=True)
    assert F.cross_entropy(xt, t).grad_fn.name() == FUSED
    assert F.cross_entropy(xt, xg.asarray(t), weight=xg.asarray(W)).grad_fn.name() == FUSED
    # one node: the loss's only parent is the logits leaf
    node = F.cross_entropy(xt, t).grad_fn
    assert [p for p in node.parents if p is not None] == [xt]
    probs = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    assert F.cross_entropy(xt, probs).grad_fn.name() != FUSED
    w = xg.asarray(W, requires_grad=True)
    assert F.cross_entropy(xt, t, weight=w).grad_fn.name() != FUSED


@pytest.mark.parametrize(("reduction", "smoothing"), [("mean", 0.0), ("sum", 0.3), ("none", 0.1)])
def test_weight_with_gradient_falls_back(reduction: str, smoothing: float, np_backend: Any) -> None:
    """A weight that wants a gradient takes the composed path: values and the logits' gradient
    as PyTorch's (which has no gradient for the weight), both gradients as central differences."""
    x, t = _case("NC", 2)
    xt = xg.asarray(x, requires_grad=True)
    w = xg.asarray(W, requires_grad=True)
    kw = {"ignore_index": 2, "reduction": reduction, "label_smoothing": smoothing}
    out = F.cross_entropy(xt, t, weight=w, **kw)
    assert out.grad_fn.name() != FUSED
    xg.sum(out).backward()
    want, want_g = _torch_loss_and_grad(x, t, np.ones(tuple(out.shape)), {**kw, "weight": torch.asarray(W)})
    np.testing.assert_allclose(np.asarray(out.data), want, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(xt.grad.data), want_g, rtol=1e-10, atol=1e-12)
    check_grads(lambda z, v: F.cross_entropy(z, t, weight=v, **kw), x, W, order=2)


SECOND = [("NC", False, -100, "mean", 0.0), ("NC", True, 2, "sum", 0.2), ("C", True, -100, "mean", 0.1),
          ("NCd1d2", False, 2, "none", 0.0), ("NCd1d2", True, -100, "mean", 0.3)]


@pytest.mark.parametrize(("layout", "weight", "ignore_index", "reduction", "smoothing"), SECOND)
def test_second_order(layout: str, weight: bool, ignore_index: int, reduction: str, smoothing: float,
                      backend: Any) -> None:
    """Gradient of the gradient (reverse and forward mode) against central differences."""
    x, t = _case(layout, ignore_index)
    kw = _kwargs(weight, ignore_index, reduction, smoothing, backend)
    tb = backend.asarray(t)
    check_grads(lambda z: F.cross_entropy(z, tb, **kw), backend.asarray(x), order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize(("layout", "weight", "ignore_index", "reduction", "smoothing"),
                         [s for s in SECOND if s[3] != "none"])
def test_hessian_matches_torch(layout: str, weight: bool, ignore_index: int, reduction: str, smoothing: float,
                               np_backend: Any) -> None:
    x, t = _case(layout, ignore_index)
    ours = xg.hessian(lambda z: F.cross_entropy(z, t, **_kwargs(weight, ignore_index, reduction, smoothing,
                                                               np_backend)))(x)
    kw_t = _kwargs(weight, ignore_index, reduction, smoothing)
    theirs = torch.autograd.functional.hessian(lambda z: TF.cross_entropy(z, torch.asarray(t), **kw_t),
                                               torch.asarray(x.copy()))
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_jvp_matches_torch(reduction: str, np_backend: Any) -> None:
    x, t = _case("NCd1d2", 2)
    v = RNG.standard_normal(x.shape)
    kw = {"weight": W, "ignore_index": 2, "reduction": reduction, "label_smoothing": 0.1}
    out, tan = xg.jvp(lambda z: F.cross_entropy(z, t, **kw), (x,), (v,))
    kw_t = {**kw, "weight": torch.asarray(W)}
    with warnings.catch_warnings():  # torch's own: its forward AD scripts a helper on first use
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.* is deprecated", category=DeprecationWarning)
        tout, ttan = torch.func.jvp(lambda z: TF.cross_entropy(z, torch.asarray(t), **kw_t),
                                    (torch.asarray(x.copy()),), (torch.asarray(v),))
    np.testing.assert_allclose(out, tout.numpy(), rtol=1e-10)
    np.testing.assert_allclose(tan, ttan.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_float32_stays_float32(reduction: str, backend: Any) -> None:
    x, t = _case("NC", 2)
    xt = xg.asarray(backend.asarray(x.astype(np.float32)), requires_grad=True)
    out = F.cross_entropy(xt, backend.asarray(t), weight=backend.asarray(W), ignore_index=2, reduction=reduction,
                          label_smoothing=0.1)
    assert out.dtype == xg.float32
    xg.sum(out).backward()
    assert xt.grad.dtype == xg.float32
    _, want_g = _torch_loss_and_grad(x, t, np.ones(tuple(out.shape)),
                                     _kwargs(True, 2, reduction, 0.1))
    np.testing.assert_allclose(backend.to_numpy(xt.grad), want_g, rtol=1e-5, atol=1e-6)


def test_extreme_logits_stay_finite(np_backend: Any) -> None:
    """The max shift: logits of 1e4 neither overflow the loss nor its gradient."""
    x = np.array([[1e4, 0.0, -1e4], [3e4, 3e4, -3e4]])
    t = np.array([1, 0])
    xt = xg.asarray(x, requires_grad=True)
    out = F.cross_entropy(xt, t, label_smoothing=0.1)
    out.backward()
    want, want_g = _torch_loss_and_grad(x, t, np.array(1.0), {"label_smoothing": 0.1})
    np.testing.assert_allclose(np.asarray(out.data), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(xt.grad.data), want_g, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_masked_logits(reduction: str, backend: Any) -> None:
    """-inf logits off the target (a mask) give PyTorch's finite loss and gradient (zero there)."""
    x = RNG.standard_normal((4, C))
    x[0, 1] = x[2, 4] = x[3, 0] = -np.inf
    t = np.array([0, 3, 1, 2])
    xt = xg.asarray(backend.asarray(x), requires_grad=True)
    out = F.cross_entropy(xt, backend.asarray(t), weight=backend.asarray(W), reduction=reduction)
    xg.sum(out).backward()
    want, want_g = _torch_loss_and_grad(x, t, np.ones(tuple(out.shape)),
                                        {"weight": torch.asarray(W), "reduction": reduction})
    np.testing.assert_allclose(backend.to_numpy(out), want, rtol=1e-12)
    np.testing.assert_allclose(backend.to_numpy(xt.grad), want_g, rtol=1e-12, atol=1e-300)


def test_target_shape_is_checked(np_backend: Any) -> None:
    with pytest.raises(ValueError, match="cross_entropy: target shape"):
        F.cross_entropy(xg.asarray(np.zeros((3, C))), np.zeros(4, dtype=np.int64))
