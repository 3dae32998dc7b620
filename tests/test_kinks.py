"""Kinks and special values, as PyTorch defines them (issue #17, section 4).

Every function is evaluated at its exact kink or special point (a tie of ``maximum``,
the boundary of a ``where``, 0 for ``sqrt``/``abs``/``sign``, a NaN in a reduction,
``correction >= N``, a fully masked attention row...) on every backend, and its value,
reverse-mode gradient and forward-mode derivative are compared with PyTorch's CPU
float64 result (``torch.autograd.grad`` and ``torch.func.jvp``). The suite's
``filterwarnings = error`` also makes each check fail on a RuntimeWarning leaked by a
rule (NumPy's divide-by-zero at ``sqrt(0)``, say).

Conventions pinned here: ``max``/``min`` follow ``torch.amax``/``torch.amin`` (tied
extrema share the gradient evenly, a slice holding NaN has NaN gradients), not
``torch.max(dim)``, which gives the whole gradient to one index. ``var``/``std`` with
``correction >= N`` follow PyTorch's whole-reduction rule (``g * inf``, NaN where the
element equals the mean) for every ``axis``; PyTorch's ``dim=`` path instead gives
``2 / (N - correction) * (x - mean)``, finite and sign-flipped for ``correction > N``.
"""

from __future__ import annotations

import math
import warnings
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
NAN, INF = math.nan, math.inf


@dataclass(frozen=True)
class Kink:
    """One function at its kink points: ``ours(xg, x)`` and ``theirs(torch, x)`` of one array."""

    id: str
    ours: Callable[[Any], Any]
    theirs: Callable[[Any], Any]
    point: tuple[Any, ...]
    #: compare forward mode with torch.func.jvp; a string says why not (where torch's
    #: forward rule disagrees with its own reverse rule, xpgrad's JVP follows the reverse one)
    jvp: bool | str = True


def _t(v: float) -> Any:
    return torch.tensor(v, dtype=torch.float64)


def _sdpa_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(size=(1, 3, 3)), rng.normal(size=(1, 3, 3)), np.array([[True, True, False],
                                                                              [False, False, False],
                                                                              [False, False, True]])


_K, _V, _MASK = _sdpa_inputs()


def _our_sdpa(q: Any, float_mask: bool) -> Any:
    mask = np.where(_MASK, 0.0, -INF) if float_mask else _MASK
    return F.scaled_dot_product_attention(q, _const(q, _K), _const(q, _V), attn_mask=_const(q, mask))


def _const(like: Any, a: np.ndarray) -> Any:
    """``a`` as a constant array of ``like``'s backend and device."""
    import array_api_compat

    data = like.data if isinstance(like, xg.Tensor) else like
    return array_api_compat.array_namespace(data).asarray(a.copy(), device=array_api_compat.device(data))


def _their_sdpa(q: Any, float_mask: bool) -> Any:
    mask = torch.tensor(_MASK)
    if float_mask:
        mask = torch.where(mask, 0.0, -INF).double()
    return TF.scaled_dot_product_attention(q, torch.tensor(_K), torch.tensor(_V), attn_mask=mask)


def _m2(x: Any) -> Any:
    return xg.reshape(x, (2, 2))


KINKS = [
    # ---- activations: a where/minimum/maximum at the kink
    Kink("elu", F.elu, TF.elu, (0.0, -0.0, 1.0, -1.0)),
    Kink("elu_alpha2", lambda x: F.elu(x, 2.0), lambda x: TF.elu(x, 2.0), (0.0,)),
    Kink("softplus_threshold", F.softplus, TF.softplus, (20.0, 0.0, 21.0)),
    Kink("softplus_beta2", lambda x: F.softplus(x, 2.0, 20.0), lambda x: TF.softplus(x, 2.0, 20.0), (10.0,)),
    Kink("softplus_beta_half", lambda x: F.softplus(x, 0.5, 1.0), lambda x: TF.softplus(x, 0.5, 1.0), (2.0,)),
    Kink("relu", F.relu, TF.relu, (0.0, -0.0)),
    Kink("leaky_relu", lambda x: F.leaky_relu(x, 0.1), lambda x: TF.leaky_relu(x, 0.1), (0.0, -0.0)),
    Kink("sigmoid", F.sigmoid, torch.sigmoid, (0.0, -0.0, 800.0, -800.0)),
    Kink("logsigmoid", F.logsigmoid, TF.logsigmoid, (0.0, -800.0, 800.0)),
    Kink("silu", F.silu, TF.silu, (0.0,)),
    Kink("gelu", F.gelu, TF.gelu, (0.0,)),
    Kink("gelu_tanh", lambda x: F.gelu(x, "tanh"), lambda x: TF.gelu(x, approximate="tanh"), (0.0,)),
    Kink("bce_with_logits", lambda x: F.binary_cross_entropy_with_logits(x, x * 0.0 + 0.5, reduction="none"),
         lambda x: TF.binary_cross_entropy_with_logits(x, x * 0.0 + 0.5, reduction="none"), (0.0,)),
    # ---- losses with a where at |d| == delta or d == 0
    Kink("huber", lambda x: F.huber_loss(x, x * 0.0, reduction="none"),
         lambda x: TF.huber_loss(x, x * 0.0, reduction="none"), (1.0, -1.0, 0.0)),
    Kink("smooth_l1", lambda x: F.smooth_l1_loss(x, x * 0.0, reduction="none", beta=0.5),
         lambda x: TF.smooth_l1_loss(x, x * 0.0, reduction="none", beta=0.5), (0.5, -0.5, 0.0)),
    Kink("l1", lambda x: F.l1_loss(x, x * 0.0, reduction="none"),
         lambda x: TF.l1_loss(x, x * 0.0, reduction="none"), (0.0,)),
    # ---- elementwise
    Kink("abs", xg.abs, torch.abs, (0.0, -0.0)),
    Kink("sign", xg.sign, torch.sign, (0.0, -0.0, 2.0)),
    Kink("sqrt", xg.sqrt, torch.sqrt, (0.0, 4.0)),
    Kink("pow_0", lambda x: x ** 0.0, lambda x: x ** 0.0, (2.0, 0.0, -1.0)),
    Kink("pow_half", lambda x: x ** 0.5, lambda x: x ** 0.5, (0.0, 4.0)),
    Kink("pow_1", lambda x: x ** 1.0, lambda x: x ** 1.0, (0.0,)),
    Kink("pow_2", lambda x: x ** 2.0, lambda x: x ** 2.0, (0.0,)),
    Kink("pow_array_exponent", lambda x: xg.pow(x, x * 0.0 + 0.5), lambda x: torch.pow(x, x.detach() * 0.0 + 0.5),
         (0.0, 4.0)),
    Kink("maximum_tie", lambda x: xg.maximum(x, 0.0), lambda x: torch.maximum(x, _t(0.0)), (0.0, 1.0, -1.0)),
    Kink("minimum_tie", lambda x: xg.minimum(x, 0.0), lambda x: torch.minimum(x, _t(0.0)), (0.0, 1.0, -1.0)),
    Kink("maximum_self", lambda x: xg.maximum(x, x), lambda x: torch.maximum(x, x), (0.0, 1.0)),
    Kink("maximum_nan", lambda x: xg.maximum(x, 0.0), lambda x: torch.maximum(x, _t(0.0)), (NAN,),
         jvp="torch.func.jvp gives the NaN operand tangent 0, its reverse rule gives it the gradient 1"),
    Kink("clip_bounds", lambda x: xg.clip(x, 0.0, 1.0), lambda x: torch.clamp(x, 0.0, 1.0), (0.0, 1.0, 0.5, -1.0, 2.0)),
    Kink("where_boundary", lambda x: xg.where(x > 0, 2.0 * x, 3.0 * x), lambda x: torch.where(x > 0, 2.0 * x, 3.0 * x),
         (0.0,)),
    Kink("hypot_origin", lambda x: xg.hypot(x, 0.0), lambda x: torch.hypot(x, _t(0.0)), (0.0, 3.0)),
    Kink("atan2_origin", lambda x: xg.atan2(x, 0.0), lambda x: torch.atan2(x, _t(0.0)), (0.0, 1.0),
         jvp="torch.func.jvp gives NaN at the origin (0/0), its reverse rule masks it to 0"),
    Kink("copysign_zero", lambda x: xg.copysign(x, 1.0), lambda x: torch.copysign(x, _t(1.0)), (0.0, -0.0)),
    # ---- reductions: ties, NaN, correction >= N
    Kink("amax_ties", xg.max, torch.amax, (1.0, 3.0, 3.0)),
    Kink("amin_ties", xg.min, torch.amin, (1.0, 1.0, 1.0)),
    Kink("amax_nan", xg.max, torch.amax, (1.0, NAN, 2.0)),
    Kink("amin_nan", xg.min, torch.amin, (NAN, NAN)),
    Kink("amax_axis_nan", lambda x: xg.max(_m2(x), axis=1), lambda x: torch.amax(x.reshape(2, 2), dim=1),
         (1.0, NAN, 3.0, 3.0)),
    Kink("amax_inf", xg.max, torch.amax, (INF, 1.0)),
    Kink("var_correction_N", lambda x: xg.var(x, correction=2), lambda x: torch.var(x, correction=2), (1.0, 2.0)),
    Kink("var_correction_gt_N", lambda x: xg.var(x, correction=3), lambda x: torch.var(x, correction=3), (1.0, 2.0)),
    Kink("var_correction_N_constant", lambda x: xg.var(x, correction=1), lambda x: torch.var(x, correction=1), (1.0,)),
    Kink("var_correction_N_mean", lambda x: xg.var(x, correction=3), lambda x: torch.var(x, correction=3),
         (1.0, 2.0, 3.0)),
    Kink("std_correction_N", lambda x: xg.std(x, correction=2), lambda x: torch.std(x, correction=2), (1.0, 2.0)),
    Kink("std_correction_gt_N", lambda x: xg.std(x, correction=5), lambda x: torch.std(x, correction=5), (1.0, 2.0)),
    Kink("std_constant", lambda x: xg.std(x), lambda x: torch.std(x, correction=0), (1.0, 1.0)),
    Kink("std_constant_axis", lambda x: xg.std(_m2(x), axis=1), lambda x: torch.std(x.reshape(2, 2), dim=1, correction=0),
         (1.0, 1.0, 1.0, 2.0)),
    # ---- norms: at zero, ties at the max/min absolute value
    Kink("norm2_zero", xg.linalg.vector_norm, torch.linalg.vector_norm, (0.0, 0.0)),
    Kink("norm1_zero", lambda x: xg.linalg.vector_norm(x, ord=1), lambda x: torch.linalg.vector_norm(x, ord=1),
         (0.0, 1.0)),
    Kink("norm3_zero", lambda x: xg.linalg.vector_norm(x, ord=3), lambda x: torch.linalg.vector_norm(x, ord=3),
         (0.0, 0.0)),
    Kink("norm_half_zero", lambda x: xg.linalg.vector_norm(x, ord=0.5),
         lambda x: torch.linalg.vector_norm(x, ord=0.5), (0.0, 1.0)),
    Kink("norm_inf_tie", lambda x: xg.linalg.vector_norm(x, ord=INF), lambda x: torch.linalg.vector_norm(x, ord=INF),
         (3.0, -3.0, 1.0)),
    Kink("norm_neginf_tie", lambda x: xg.linalg.vector_norm(x, ord=-INF),
         lambda x: torch.linalg.vector_norm(x, ord=-INF), (1.0, -1.0, 3.0)),
    Kink("norm_inf_zero", lambda x: xg.linalg.vector_norm(x, ord=INF), lambda x: torch.linalg.vector_norm(x, ord=INF),
         (0.0, 0.0)),
    Kink("matrix_norm_fro_zero", lambda x: xg.linalg.matrix_norm(_m2(x)),
         lambda x: torch.linalg.matrix_norm(x.reshape(2, 2)), (0.0, 0.0, 0.0, 0.0)),
    Kink("matrix_norm_1_tie", lambda x: xg.linalg.matrix_norm(_m2(x), ord=1),
         lambda x: torch.linalg.matrix_norm(x.reshape(2, 2), ord=1), (1.0, 2.0, 2.0, 1.0)),
    Kink("matrix_norm_inf_tie", lambda x: xg.linalg.matrix_norm(_m2(x), ord=INF),
         lambda x: torch.linalg.matrix_norm(x.reshape(2, 2), ord=INF), (1.0, 2.0, -2.0, 1.0)),
    Kink("matrix_norm_neg1_tie", lambda x: xg.linalg.matrix_norm(_m2(x), ord=-1),
         lambda x: torch.linalg.matrix_norm(x.reshape(2, 2), ord=-1), (1.0, 2.0, 2.0, 1.0)),
    Kink("matrix_norm_1_zero_column", lambda x: xg.linalg.matrix_norm(_m2(x), ord=1),
         lambda x: torch.linalg.matrix_norm(x.reshape(2, 2), ord=1), (0.0, 2.0, 0.0, 1.0)),
    # ---- attention: a query row that may attend to no key
    Kink("sdpa_masked_row_bool", lambda q: _our_sdpa(xg.reshape(q, (1, 3, 3)), False),
         lambda q: _their_sdpa(q.reshape(1, 3, 3), False), tuple(np.linspace(-1.0, 1.0, 9))),
    Kink("sdpa_masked_row_float", lambda q: _our_sdpa(xg.reshape(q, (1, 3, 3)), True),
         lambda q: _their_sdpa(q.reshape(1, 3, 3), True), tuple(np.linspace(-1.0, 1.0, 9))),
]


def _torch_ref(k: Kink) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """PyTorch's value, gradient (ones cotangent) and forward derivative (ones tangent)."""
    x = torch.tensor(k.point, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # var's "degrees of freedom <= 0"
        y = k.theirs(x)
        (g,) = torch.autograd.grad(y, x, torch.ones_like(y), allow_unused=True, materialize_grads=True)
        t = None
        if k.jvp is True:
            from torch.func import jvp

            t = jvp(k.theirs, (x.detach(),), (torch.ones_like(x),))[1].numpy()
    return y.detach().numpy(), g.numpy(), t


def _assert_same(ours: Any, theirs: np.ndarray, what: str) -> None:
    # exact where PyTorch is exact (inf, NaN, signed zeros aside), else within float64 rounding
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("k", KINKS, ids=lambda k: k.id)
def test_value_and_gradient_match_torch(backend: Any, k: Kink) -> None:
    """Value and reverse-mode gradient at the kink agree with PyTorch (no RuntimeWarning on the way)."""
    want_y, want_g, _ = _torch_ref(k)
    x = backend.asarray(np.asarray(k.point, dtype=np.float64))
    y, pull = xg.vjp(k.ours, x)
    (g,) = pull(backend.xp.ones_like(y))
    _assert_same(to_numpy(y), want_y, f"{k.id}: value")
    _assert_same(to_numpy(g), want_g, f"{k.id}: gradient")


@pytest.mark.parametrize("k", [k for k in KINKS if k.jvp is True], ids=lambda k: k.id)
def test_forward_mode_matches_torch(backend: Any, k: Kink) -> None:
    """Forward mode (``xg.jvp``, a ones tangent) at the kink agrees with ``torch.func.jvp``."""
    _, _, want_t = _torch_ref(k)
    x = backend.asarray(np.asarray(k.point, dtype=np.float64))
    _, t = xg.jvp(k.ours, (x,), (backend.xp.ones_like(x),))
    _assert_same(to_numpy(t), want_t, f"{k.id}: forward derivative")


# ---------------------------------------------------------------------- zero, not None
_CONSTANT = [
    ("pow_0", lambda x, y: x ** 0.0),
    ("xg_pow_0", lambda x, y: xg.pow(x, 0.0)),
    ("sign", lambda x, y: xg.sign(x)),
    ("copysign_x2", lambda x, y: xg.copysign(y, x)),
]


@pytest.mark.parametrize(("name", "f"), _CONSTANT, ids=[c[0] for c in _CONSTANT])
def test_constant_results_give_zero_gradients(backend: Any, name: str, f: Any) -> None:
    """``x ** 0``, ``sign(x)``, ``copysign(y, x)``: ``x.grad`` is zeros after backward, as in PyTorch, not None."""
    x = xg.asarray(backend.asarray(np.array([2.0, 0.0, -1.0])), requires_grad=True)
    y = xg.asarray(backend.asarray(np.array([1.0, 1.0, 1.0])))
    xg.sum(f(x, y)).backward()
    assert x.grad is not None, f"{name}: x.grad is None"
    np.testing.assert_array_equal(to_numpy(x.grad), np.zeros(3))


# ---------------------------------------------------------------------- second order at the kink
# Not elu at 0 nor softplus at the threshold: there PyTorch's double backward takes the other
# branch than its own first derivative (0, where the first derivative is alpha and
# sigmoid(threshold)); xpgrad's second derivative is that of the branch its first one uses.
_SECOND = [
    ("sigmoid", F.sigmoid, torch.sigmoid, 0.0),
    ("logsigmoid", F.logsigmoid, TF.logsigmoid, 0.0),
    ("silu", F.silu, TF.silu, 0.0),
    ("bce_with_logits", lambda x: F.binary_cross_entropy_with_logits(x, x * 0.0 + 1.0, reduction="none"),
     lambda x: TF.binary_cross_entropy_with_logits(x, x * 0.0 + 1.0, reduction="none"), 0.0),
]


@pytest.mark.parametrize(("name", "ours", "theirs", "at"), _SECOND, ids=[c[0] for c in _SECOND])
def test_second_derivative_at_the_kink_matches_torch(backend: Any, name: str, ours: Any, theirs: Any,
                                                     at: float) -> None:
    """The second derivative at the kink is PyTorch's: the composites take the analytic branch there
    (``|x|`` inside ``sigmoid``/``logsigmoid`` used to make it 0)."""
    tx = torch.tensor([at], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(theirs(tx).sum(), tx, create_graph=True)
    (want,) = torch.autograd.grad(g.sum(), tx)
    d2 = xg.grad(lambda x: xg.sum(xg.grad(lambda y: xg.sum(ours(y)))(x)))
    got = d2(backend.asarray(np.array([at])))
    np.testing.assert_allclose(to_numpy(got), want.numpy(), rtol=1e-12, atol=1e-15, err_msg=name)


# ---------------------------------------------------------------------- var along an axis, correction >= N
@pytest.mark.parametrize("correction", [2, 3])
def test_var_along_an_axis_with_correction_at_least_n(backend: Any, correction: int) -> None:
    """Each slice follows PyTorch's whole-reduction rule: inf (NaN for a constant slice), gradient
    ``g * inf`` (NaN at the mean) — never PyTorch's ``dim=`` result ``2 / (N - correction) * (x - mean)``,
    finite with the wrong sign for ``correction > N``."""
    rows = np.array([[1.0, 2.0], [3.0, 3.0]])
    want_y, want_g = [], []
    for r in rows:
        tr = torch.tensor(r, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ty = torch.var(tr, correction=correction)
            ty.backward()
        want_y.append(ty.item())
        want_g.append(tr.grad.numpy())
    y, pull = xg.vjp(lambda x: xg.var(x, axis=1, correction=correction), backend.asarray(rows))
    (g,) = pull(backend.xp.ones_like(y))
    np.testing.assert_array_equal(to_numpy(y), np.array(want_y))  # [inf, nan]
    np.testing.assert_array_equal(to_numpy(g), np.stack(want_g))  # [[inf, inf], [nan, nan]]


def test_binary_cross_entropy_at_zero_and_one_matches_torch(backend: Any) -> None:
    """torch's loss and both gradients at p in {0, 1} (and inside): a probability saturated at
    the wrong end gets a gradient of 1e12 (it was 0 here: the clamped logs' derivative), and
    the target's gradient is log1p(-p) - log(p), infinite at the ends."""
    torch = pytest.importorskip("torch")
    p0 = np.array([0.0, 1.0, 0.0, 1.0, 0.3, 1e-300])
    t0 = np.array([0.0, 0.0, 1.0, 1.0, 0.6, 1.0])
    p = xg.asarray(backend.asarray(p0), requires_grad=True)
    t = xg.asarray(backend.asarray(t0), requires_grad=True)
    loss = F.binary_cross_entropy(p, t, reduction="none")
    xg.sum(loss).backward()
    pt = torch.tensor(p0, requires_grad=True)
    tt = torch.tensor(t0, requires_grad=True)
    ref = torch.nn.functional.binary_cross_entropy(pt, tt, reduction="none")
    ref.sum().backward()
    np.testing.assert_allclose(to_numpy(loss), ref.detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(to_numpy(p.grad), pt.grad.numpy(), rtol=1e-14)
    np.testing.assert_allclose(to_numpy(t.grad), tt.grad.numpy(), rtol=1e-14)
