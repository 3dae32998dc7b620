"""xpgrad.nn: Module mechanics, and every layer / loss against torch.nn on the same weights."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from array_api_compat import device as _device

import xpgrad as xg
import xpgrad.nn as nn
import xpgrad.nn.functional as F  # noqa: N812 - PyTorch's conventional alias
from xpgrad.testing import check_grads

from ._nn_cases import Case, _mk, _ours_args, _x
from ._util import to_numpy as _np

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RTOL = 1e-8
ATOL = 1e-10


# ====================================================================== Module mechanics
class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.scale = nn.Parameter(xg.ones(4))
        self.register_buffer("count", xg.zeros(1))
        self.register_buffer("scratch", xg.zeros(2), persistent=False)
        self.act = nn.Tanh()

    def forward(self, x: Any) -> Any:
        return self.act(self.fc(x)) * self.scale


def test_registration_and_traversal() -> None:
    b = Block()
    assert [n for n, _ in b.named_parameters()] == ["scale", "fc.weight", "fc.bias"]
    assert len(list(b.parameters())) == 3
    assert [n for n, _ in b.named_buffers()] == ["count", "scratch"]
    assert [type(m).__name__ for m in b.children()] == ["Linear", "Tanh"]
    assert [n for n, _ in b.named_modules()] == ["", "fc", "act"]
    assert list(b.state_dict()) == ["scale", "count", "fc.weight", "fc.bias"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf for p in b.parameters())
    assert b.get_submodule("fc") is b.fc
    # reassigning a parameter slot to None keeps the slot, a plain value is refused
    b.scale = None
    assert [n for n, _ in b.named_parameters()] == ["fc.weight", "fc.bias"]
    with pytest.raises(xg.XpgradTypeError, match="Parameter or None"):
        b.scale = xg.ones(4)
    del b.act
    assert [n for n, _ in b.named_children()] == ["fc"]


def test_shared_parameter_counted_once() -> None:
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.modules())) == 3


def test_setattr_before_super_init_is_a_clear_error() -> None:
    class Bad(nn.Module):
        def __init__(self) -> None:
            self.w = nn.Parameter(xg.ones(1))

    with pytest.raises(xg.XpgradTypeError, match="super"):
        Bad()


def test_parameter_defaults_follow_the_policy() -> None:
    assert nn.Linear(2, 3).weight.dtype == xg.float32  # PyTorch's float32 when the policy names none
    with xg.default_device(dtype="float64"):
        assert nn.Linear(2, 3).weight.dtype == xg.float64
    with xg.default_device("array_api_strict"):
        w = nn.Linear(2, 3).weight
    assert type(w.data).__module__.startswith("array_api_strict")
    assert nn.Linear(2, 3, dtype="float64").bias.dtype == xg.float64
    p = nn.Parameter(xg.zeros(2))
    assert p.requires_grad and p.is_leaf and type(p * 2) is xg.Tensor
    assert "Parameter containing" in repr(p)


def test_seeded_init_is_reproducible() -> None:
    with xg.default_device(seed=3):
        a = nn.Linear(4, 5)
    with xg.default_device(seed=3):
        b = nn.Linear(4, 5)
    np.testing.assert_array_equal(_np(a.weight), _np(b.weight))
    bound = 1 / math.sqrt(4)
    assert np.all(np.abs(_np(a.weight)) <= bound) and np.all(np.abs(_np(a.bias)) <= bound)


def test_train_eval_requires_grad_zero_grad() -> None:
    m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    assert m.training and m[1].training
    assert m.eval() is m and not m[1].training
    m.train()
    assert m[1].training
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.requires_grad_(True)
    m.eval()
    m(xg.ones((3, 2), dtype=xg.float32)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(float(xg.sum(xg.abs(p.grad))) == 0.0 for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_repr_tree() -> None:
    net = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Sequential(nn.Dropout(0.1), nn.Linear(8, 2, bias=False)))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=4, out_features=8, bias=True)\n"
        "  (1): GELU(approximate='none')\n"
        "  (2): Sequential(\n"
        "    (0): Dropout(p=0.1)\n"
        "    (1): Linear(in_features=8, out_features=2, bias=False)\n"
        "  )\n"
        ")"
    )


def test_forward_hooks_and_removal() -> None:
    lin = nn.Linear(2, 2, dtype="float64")
    calls: list[str] = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0.0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append("post") or out + 1.0)
    out = lin(xg.ones((1, 2)))
    np.testing.assert_allclose(_np(out.detach()), _np(lin.bias.detach())[None] + 1.0)
    assert calls == ["post"]
    h1.remove()
    h2.remove()
    h2.remove()  # idempotent
    out = lin(xg.ones((1, 2)))
    np.testing.assert_allclose(_np(out.detach()), _np(lin.weight.detach()).sum(1)[None] + _np(lin.bias.detach()))
    assert calls == ["post"]


def test_containers() -> None:
    seq = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())
    assert len(seq) == 3 and isinstance(seq[1], nn.Tanh) and isinstance(seq[-1], nn.Sigmoid)
    assert [type(m).__name__ for m in seq[1:]] == ["Tanh", "Sigmoid"]
    seq.append(nn.ELU())
    assert len(seq) == 4
    named = nn.Sequential({"a": nn.ReLU(), "b": nn.Tanh()})
    assert [n for n, _ in named.named_children()] == ["a", "b"]
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml.append(nn.Linear(1, 1)).extend([nn.Linear(1, 1)])
    ml.insert(0, nn.ReLU())
    assert len(ml) == 4 and isinstance(ml[0], nn.ReLU)
    assert [n for n, _ in ml.named_parameters()][:2] == ["1.weight", "1.bias"]
    del ml[0]
    assert isinstance(ml[0], nn.Linear) and len(list(ml.parameters())) == 6
    md = nn.ModuleDict({"x": nn.Linear(1, 2)})
    md["y"] = nn.Linear(2, 1)
    assert list(md) == ["x", "y"] and "y" in md and len(list(md.parameters())) == 4
    with pytest.raises(IndexError):
        seq[10]


# ====================================================================== state_dict
def test_state_dict_round_trip_and_sharing() -> None:
    a, b = Block(), Block()
    res = b.load_state_dict(a.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert ka == kb
        np.testing.assert_array_equal(_np(va), _np(vb))
    # the loaded values are copies: changing the source afterwards changes nothing
    sd = a.state_dict()
    with xg.no_grad():
        a.fc.weight += 1.0
    assert not np.array_equal(_np(a.fc.weight.detach()), _np(b.fc.weight.detach()))
    np.testing.assert_array_equal(_np(sd["fc.weight"]), _np(a.fc.weight.detach()))  # state_dict shares memory


def test_load_state_dict_errors_change_nothing() -> None:
    m = Block()
    before = {k: _np(v).copy() for k, v in m.state_dict().items()}
    good = {k: xg.asarray(np.full(_np(v).shape, 7.0, dtype=np.float32)) for k, v in m.state_dict().items()}
    bad = dict(good)
    del bad["scale"]
    bad["extra.weight"] = xg.zeros(1)
    bad["fc.bias"] = xg.zeros(5, dtype=xg.float32)
    with pytest.raises(xg.XpgradValueError) as err:
        m.load_state_dict(bad)
    text = str(err.value)
    assert "missing keys ['scale']" in text
    assert "unexpected keys ['extra.weight']" in text
    assert "fc.bias: checkpoint shape (5,), module shape (4,)" in text
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(_np(v), before[k])
    # not strict: missing/unexpected keys are reported, the rest loads
    partial = {k: v for k, v in good.items() if k != "scale"}
    partial["other"] = xg.zeros(1)
    res = m.load_state_dict(partial, strict=False)
    assert res.missing_keys == ["scale"] and res.unexpected_keys == ["other"]
    assert np.all(_np(m.fc.weight.detach()) == 7.0)
    assert m.fc.weight.dtype == xg.float32


def test_load_state_dict_from_another_library() -> None:
    m = nn.Linear(3, 2)
    sd = {"weight": torch.full((2, 3), 0.5, dtype=torch.float64), "bias": np.zeros(2)}
    m.load_state_dict(sd)
    assert type(m.weight.data).__module__ == "numpy" and m.weight.dtype == xg.float32
    np.testing.assert_array_equal(_np(m.weight.detach()), np.full((2, 3), 0.5, dtype=np.float32))


# ====================================================================== to()
def test_to_dtype_and_library_keeps_parameter_objects() -> None:
    m = Block()
    params = list(m.parameters())
    m(xg.ones((1, 3), dtype=xg.float32)).sum().backward()
    m.to(dtype="float64")
    assert list(m.parameters()) == params
    assert all(p.dtype == xg.float64 for p in m.parameters())
    assert all(p.grad.dtype == xg.float64 for p in m.parameters())
    assert m.count.dtype == xg.float64
    m.to(xp="torch")
    assert all(isinstance(p.data, torch.Tensor) for p in m.parameters())
    assert all(isinstance(b.data, torch.Tensor) for b in m.buffers())
    out = m(xg.asarray(torch.ones((2, 3), dtype=torch.float64)))
    assert isinstance(out.data, torch.Tensor)
    m.to(xp="numpy")
    assert all(type(p.data).__module__ == "numpy" for p in m.parameters())
    m.to(xg.float32)  # a dtype given positionally
    assert m.fc.weight.dtype == xg.float32
    with pytest.raises(xg.XpgradTypeError):
        m.to(dtype="int64")


def test_to_every_backend(backend: Any) -> None:
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).to(dtype="float64")
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    ref = _np(m(xg.asarray(x)).detach())
    backend.to(m)
    if backend.device is not None:  # torch_cuda's "cuda", strict_device1's device1
        assert all(_device(p.data) == _device(backend.asarray(x)) for p in m.parameters())
    out = m(xg.asarray(backend.asarray(x)))
    np.testing.assert_allclose(_np(out.detach()), ref, rtol=1e-12)
    out.sum().backward()
    assert all(p.grad is not None for p in m.parameters())


# ====================================================================== functional vs torch


def _ints(hi: int, *shape: int, ignore: bool = False) -> Callable[[np.random.Generator], np.ndarray]:
    def make(rng: np.random.Generator) -> np.ndarray:
        t = rng.integers(0, hi, shape)
        if ignore:
            t.flat[1] = -100
        return t

    return make


def _probs(*shape: int, axis: int = 1) -> Callable[[np.random.Generator], np.ndarray]:
    def make(rng: np.random.Generator) -> np.ndarray:
        p = rng.uniform(0.1, 1.0, shape)
        return p / p.sum(axis=axis, keepdims=True)

    return make


W5 = np.array([0.5, 1.0, 2.0, 1.5, 0.25])
ACT = _mk(_x(3, 5))
CASES = [
    Case("relu", lambda f, x: f.relu(x), lambda t, x: t.relu(x), ACT),
    Case("leaky_relu", lambda f, x: f.leaky_relu(x, 0.2), lambda t, x: t.leaky_relu(x, 0.2), ACT),
    Case("elu", lambda f, x: f.elu(x, 0.7), lambda t, x: t.elu(x, 0.7), ACT),
    Case("gelu", lambda f, x: f.gelu(x), lambda t, x: t.gelu(x), _mk(_x(4, 25, lo=-6, hi=6))),
    Case("gelu_tanh", lambda f, x: f.gelu(x, approximate="tanh"), lambda t, x: t.gelu(x, approximate="tanh"), ACT),
    Case("silu", lambda f, x: f.silu(x), lambda t, x: t.silu(x), ACT),
    Case("tanh", lambda f, x: f.tanh(x), lambda t, x: torch.tanh(x), ACT),
    Case("sigmoid", lambda f, x: f.sigmoid(x), lambda t, x: torch.sigmoid(x), _mk(_x(3, 5, lo=-40, hi=40))),
    Case("logsigmoid", lambda f, x: f.logsigmoid(x), lambda t, x: t.logsigmoid(x), _mk(_x(3, 5, lo=-40, hi=40))),
    Case("softplus", lambda f, x: f.softplus(x, 2.0, 5.0), lambda t, x: t.softplus(x, 2.0, 5.0),
         _mk(_x(3, 5, lo=-5, hi=5))),
    Case("softmax", lambda f, x: f.softmax(x, axis=1), lambda t, x: t.softmax(x, dim=1), _mk(_x(2, 4, 3))),
    Case("log_softmax", lambda f, x: f.log_softmax(x, dim=-1), lambda t, x: t.log_softmax(x, dim=-1), ACT),
    Case("layer_norm", lambda f, x, w, b: f.layer_norm(x, (4, 5), w, b),
         lambda t, x, w, b: t.layer_norm(x, (4, 5), w, b), _mk(_x(2, 4, 5), _x(4, 5), _x(4, 5)), diff=(0, 1, 2)),
    Case("linear", lambda f, x, w, b: f.linear(x, w, b), lambda t, x, w, b: t.linear(x, w, b),
         _mk(_x(3, 4), _x(2, 4), _x(2)), diff=(0, 1, 2)),
    Case("embedding", lambda f, i, w: f.embedding(i, w), lambda t, i, w: t.embedding(i, w),
         _mk(_ints(6, 2, 3), _x(6, 4)), diff=(1,)),
    Case("embedding_pad", lambda f, i, w: f.embedding(i, w, padding_idx=2),
         lambda t, i, w: t.embedding(i, w, padding_idx=2), _mk(lambda r: np.array([[2, 1, 2], [0, 2, 5]]), _x(6, 4)),
         diff=(1,), grad_check=False),  # the padding row's gradient is zeroed on purpose
]
for red in ("mean", "sum", "none"):
    CASES += [
        Case(f"mse_{red}", lambda f, x, y, r=red: f.mse_loss(x, y, reduction=r),
             lambda t, x, y, r=red: t.mse_loss(x, y, reduction=r), _mk(_x(3, 4), _x(3, 4)), diff=(0, 1)),
        Case(f"l1_{red}", lambda f, x, y, r=red: f.l1_loss(x, y, reduction=r),
             lambda t, x, y, r=red: t.l1_loss(x, y, reduction=r), _mk(_x(3, 4), _x(3, 4)), diff=(0, 1)),
        Case(f"huber_{red}", lambda f, x, y, r=red: f.huber_loss(x, y, reduction=r, delta=0.7),
             lambda t, x, y, r=red: t.huber_loss(x, y, reduction=r, delta=0.7), _mk(_x(3, 4), _x(3, 4)), diff=(0, 1)),
        Case(f"smooth_l1_{red}", lambda f, x, y, r=red: f.smooth_l1_loss(x, y, reduction=r, beta=0.7),
             lambda t, x, y, r=red: t.smooth_l1_loss(x, y, reduction=r, beta=0.7), _mk(_x(3, 4), _x(3, 4)),
             diff=(0, 1)),
        Case(f"ce_{red}", lambda f, x, t_, r=red: f.cross_entropy(x, t_, reduction=r),
             lambda t, x, t_, r=red: t.cross_entropy(x, t_, reduction=r), _mk(_x(4, 5), _ints(5, 4))),
        Case(f"ce_weight_ignore_smooth_{red}",
             lambda f, x, t_, r=red: f.cross_entropy(x, t_, weight=W5, reduction=r, label_smoothing=0.2),
             lambda t, x, t_, r=red: t.cross_entropy(x, t_, weight=torch.tensor(W5), reduction=r,
                                                     label_smoothing=0.2),
             _mk(_x(4, 5), _ints(5, 4, ignore=True))),
        Case(f"ce_spatial_{red}", lambda f, x, t_, r=red: f.cross_entropy(x, t_, reduction=r, label_smoothing=0.1),
             lambda t, x, t_, r=red: t.cross_entropy(x, t_, reduction=r, label_smoothing=0.1),
             _mk(_x(2, 5, 3), _ints(5, 2, 3, ignore=True))),
        Case(f"ce_probs_{red}", lambda f, x, p, r=red: f.cross_entropy(x, p, weight=W5, reduction=r,
                                                                        label_smoothing=0.3),
             lambda t, x, p, r=red: t.cross_entropy(x, p, weight=torch.tensor(W5), reduction=r, label_smoothing=0.3),
             _mk(_x(4, 5), _probs(4, 5)), diff=(0, 1)),
        Case(f"nll_{red}", lambda f, x, t_, r=red: f.nll_loss(x, t_, weight=W5, reduction=r),
             lambda t, x, t_, r=red: t.nll_loss(x, t_, weight=torch.tensor(W5), reduction=r),
             _mk(_x(4, 5), _ints(5, 4, ignore=True))),
        Case(f"bce_{red}", lambda f, x, y, r=red: f.binary_cross_entropy(x, y, reduction=r),
             lambda t, x, y, r=red: t.binary_cross_entropy(x, y, reduction=r),
             _mk(_x(3, 4, lo=0.05, hi=0.95), _x(3, 4, lo=0, hi=1)), diff=(0, 1)),
        Case(f"bce_logits_{red}",
             lambda f, x, y, w, pw, r=red: f.binary_cross_entropy_with_logits(x, y, w, reduction=r, pos_weight=pw),
             lambda t, x, y, w, pw, r=red: t.binary_cross_entropy_with_logits(x, y, w, reduction=r, pos_weight=pw),
             _mk(_x(3, 4, lo=-8, hi=8), _x(3, 4, lo=0, hi=1), _x(4, lo=0.5, hi=2), _x(4, lo=0.5, hi=3)),
             diff=(0, 1)),
        Case(f"kl_{red}", lambda f, x, y, r=red: f.kl_div(x, y, reduction=r),
             lambda t, x, y, r=red: t.kl_div(x, y, reduction=r), _mk(_x(3, 4, lo=-3, hi=-0.1), _probs(3, 4)),
             diff=(0, 1)),
    ]
CASES += [
    Case("ce_1d", lambda f, x, t_: f.cross_entropy(x, t_), lambda t, x, t_: t.cross_entropy(x, t_),
         _mk(_x(5), lambda r: np.array(3))),
    Case("kl_batchmean_logtarget", lambda f, x, y: f.kl_div(x, y, reduction="batchmean", log_target=True),
         lambda t, x, y: t.kl_div(x, y, reduction="batchmean", log_target=True),
         _mk(_x(3, 4, lo=-3, hi=-0.1), _x(3, 4, lo=-3, hi=-0.1)), diff=(0, 1)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_functional_matches_torch(case: Case, backend: Any) -> None:
    rng = np.random.default_rng(sum(map(ord, case.name)))
    arrays = case.make(rng)
    ours_in = _ours_args(backend, arrays, case.diff)
    theirs_in = [torch.tensor(a, requires_grad=(i in case.diff)) for i, a in enumerate(arrays)]
    out = case.ours(F, *ours_in)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's kl_div warns about reduction="mean"
        ref = case.theirs(TF, *theirs_in)
    np.testing.assert_allclose(_np(out.detach()), ref.detach().numpy(), rtol=RTOL, atol=ATOL,
                               err_msg=f"{case.name}: forward")
    assert out.dtype == xg.float64
    u = rng.standard_normal(tuple(ref.shape))
    out.backward(gradient=backend.asarray(u))
    ref.backward(torch.tensor(u))
    for i in case.diff:
        np.testing.assert_allclose(_np(ours_in[i].grad), theirs_in[i].grad.numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=f"{case.name}: gradient of argument {i}")


@pytest.mark.parametrize("case", [c for c in CASES if c.grad_check], ids=lambda c: c.name)
def test_functional_check_grads(case: Case) -> None:
    rng = np.random.default_rng(sum(map(ord, case.name)) + 1)
    arrays = case.make(rng)
    check_grads(lambda *a: case.ours(F, *a), *arrays, argnums=case.diff)


@pytest.mark.parametrize("name", ["relu", "gelu", "softmax", "layer_norm", "ce_mean", "bce_logits_sum",
                                  "huber_mean", "kl_sum"])
def test_functional_second_order(name: str) -> None:
    case = next(c for c in CASES if c.name == name)
    rng = np.random.default_rng(7)
    arrays = case.make(rng)
    check_grads(lambda *a: case.ours(F, *a), *arrays, argnums=case.diff, order=2)


def test_float32_stays_float32() -> None:
    x = xg.asarray(np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    t = xg.asarray(np.array([0, 3, 1]))
    for out in (F.gelu(x), F.softmax(x), F.sigmoid(x), F.cross_entropy(x, t), F.layer_norm(x, 4),
                F.binary_cross_entropy_with_logits(x, F.sigmoid(x).detach())):
        assert out.dtype == xg.float32
        out.sum().backward()
        assert x.grad.dtype == xg.float32


# ====================================================================== numerical stability
def test_bce_with_logits_extreme_logits() -> None:
    x = xg.asarray([1e4, -1e4, 1e4, -1e4, 0.0], requires_grad=True)
    y = xg.asarray([1.0, 0.0, 0.0, 1.0, 0.5])
    loss = F.binary_cross_entropy_with_logits(x, y, reduction="none")
    np.testing.assert_allclose(_np(loss.detach()), [0.0, 0.0, 1e4, 1e4, math.log(2)], rtol=1e-12, atol=1e-300)
    loss.sum().backward()
    g = _np(x.grad)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, [0.0, 0.0, 1.0, -1.0, 0.0], atol=1e-300)
    xt = torch.tensor([1e4, -1e4, 1e4, -1e4, 0.0], dtype=torch.float64, requires_grad=True)
    TF.binary_cross_entropy_with_logits(xt, torch.tensor(_np(y)), reduction="sum").backward()
    np.testing.assert_allclose(g, xt.grad.numpy(), atol=1e-300)


def test_log_softmax_and_cross_entropy_extreme_logits() -> None:
    x = xg.asarray([[1e4, 0.0, -1e4], [-1e4, -1e4, -1e4]], requires_grad=True)
    out = F.log_softmax(x)
    np.testing.assert_allclose(_np(out.detach())[0], [0.0, -1e4, -2e4])
    np.testing.assert_allclose(_np(out.detach())[1], [-math.log(3)] * 3)
    loss = F.cross_entropy(x, xg.asarray([1, 2]))
    loss.backward()
    assert math.isfinite(float(loss.detach())) and np.all(np.isfinite(_np(x.grad)))


def test_sigmoid_softplus_elu_do_not_overflow() -> None:
    x = xg.asarray([-1e4, -800.0, 0.0, 800.0, 1e4], requires_grad=True)
    for fn in (F.sigmoid, F.softplus, F.elu, F.silu, F.gelu, F.logsigmoid):
        out = fn(x)
        out.sum().backward()
        assert np.all(np.isfinite(_np(x.grad))), fn.__name__
        x.grad = None


def test_erf_accuracy() -> None:
    xs = np.concatenate([np.linspace(-7, 7, 2001), [1e-300, -1e-12, 0.4999999, 0.5, 26.0, -30.0]])
    ours = _np(F.erf(xg.asarray(xs)))
    ref = np.array([math.erf(v) for v in xs])
    np.testing.assert_allclose(ours, ref, rtol=2e-15, atol=1e-300)


# ====================================================================== layer modules vs torch
def _copy_into_torch(ours: nn.Module, theirs: Any) -> None:
    sd = {k: torch.tensor(_np(v)) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(sd)


@pytest.mark.parametrize("make", [
    lambda: (nn.Linear(4, 3), torch.nn.Linear(4, 3), (5, 4)),
    lambda: (nn.LayerNorm((2, 4)), torch.nn.LayerNorm((2, 4)), (3, 2, 4)),
    lambda: (nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.LayerNorm(6), nn.Linear(6, 2), nn.LogSoftmax(dim=-1)),
             torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.GELU(), torch.nn.LayerNorm(6),
                                 torch.nn.Linear(6, 2), torch.nn.LogSoftmax(dim=-1)), (5, 4)),
    lambda: (nn.Sequential(nn.Flatten(), nn.Linear(6, 2), nn.Unflatten(1, (2, 1))),
             torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(6, 2), torch.nn.Unflatten(1, (2, 1))), (3, 2, 3)),
], ids=["linear", "layernorm", "mlp", "flatten"])
def test_layers_match_torch(make: Callable[[], Any], backend: Any) -> None:
    with xg.default_device(dtype="float64", seed=1):
        ours, theirs, shape = make()
    theirs = theirs.double()
    with torch.no_grad():  # make LayerNorm's affine parameters non-trivial
        for p in theirs.parameters():
            p.add_(torch.linspace(-0.3, 0.3, p.numel(), dtype=torch.float64).reshape(p.shape))
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    backend.to(ours)
    x = np.random.default_rng(0).standard_normal(shape)
    xo = xg.Tensor(backend.asarray(x), requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    out, ref = ours(xo), theirs(xt)
    np.testing.assert_allclose(_np(out.detach()), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    u = np.random.default_rng(1).standard_normal(tuple(ref.shape))
    out.backward(gradient=backend.asarray(u))
    ref.backward(torch.tensor(u))
    np.testing.assert_allclose(_np(xo.grad), xt.grad.numpy(), rtol=RTOL, atol=ATOL)
    ours_p = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(_np(ours_p[name].grad), p.grad.numpy(), rtol=RTOL, atol=ATOL, err_msg=name)


def test_embedding_module_padding_gets_no_gradient() -> None:
    with xg.default_device(dtype="float64", seed=0):
        emb = nn.Embedding(5, 3, padding_idx=1)
    np.testing.assert_array_equal(_np(emb.weight.detach())[1], 0.0)
    out = emb(xg.asarray(np.array([[1, 2], [1, 4]])))
    assert out.shape == (2, 2, 3)
    (out * out + out).sum().backward()
    g = _np(emb.weight.grad)
    np.testing.assert_array_equal(g[1], 0.0)
    np.testing.assert_allclose(g[2], 2 * _np(emb.weight.detach())[2] + 1)


def test_dropout() -> None:
    x = xg.ones((200, 50))
    d = nn.Dropout(0.25)
    with xg.default_device(seed=5):
        a = d(x)
    with xg.default_device(seed=5):
        b = d(x)
    np.testing.assert_array_equal(_np(a), _np(b))
    vals = set(np.unique(_np(a)).tolist())
    assert vals == {0.0, 1 / 0.75}
    assert abs((_np(a) == 0).mean() - 0.25) < 0.02
    assert d.eval()(x) is x
    assert np.all(_np(F.dropout(x, 1.0)) == 0)
    with pytest.raises(xg.XpgradValueError):
        nn.Dropout(1.5)
    # the gradient is the mask
    xr = xg.ones(10, dtype=xg.float64).requires_grad_()
    with xg.default_device(seed=1):
        y = F.dropout(xr, 0.5)
    y.sum().backward()
    np.testing.assert_array_equal(_np(xr.grad), _np(y.detach()))


def test_dropout_on_another_backend_than_the_policy() -> None:
    x = xg.asarray(torch.ones(4, 4, dtype=torch.float64))
    with xg.default_device(seed=0):
        y = F.dropout(x, 0.5)
    assert isinstance(y.data, torch.Tensor)


def test_loss_modules() -> None:
    x = xg.asarray(np.random.default_rng(0).standard_normal((4, 3)), requires_grad=True)
    t = xg.asarray(np.array([0, 2, 1, 2]))
    for mod, fn in [
        (nn.CrossEntropyLoss(label_smoothing=0.1), lambda: F.cross_entropy(x, t, label_smoothing=0.1)),
        (nn.NLLLoss(reduction="sum"), lambda: F.nll_loss(x, t, reduction="sum")),
        (nn.MSELoss(), lambda: F.mse_loss(x, x * 0.5)),
        (nn.KLDivLoss(reduction="batchmean"), lambda: F.kl_div(x, x * 0.0 + 0.25, reduction="batchmean")),
    ]:
        args = (x, t) if isinstance(mod, (nn.CrossEntropyLoss, nn.NLLLoss)) else (
            (x, x * 0.5) if isinstance(mod, nn.MSELoss) else (x, x * 0.0 + 0.25))
        np.testing.assert_allclose(_np(mod(*args).detach()), _np(fn().detach()))
    w = xg.asarray(W5[:3])
    ce = nn.CrossEntropyLoss(weight=w)
    assert [n for n, _ in ce.named_buffers()] == ["weight"]
    with pytest.raises(xg.XpgradValueError, match="reduction"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(xg.XpgradValueError, match="reduction"):
        F.l1_loss(x, x, reduction="batchmean")


def test_argument_errors() -> None:
    x = xg.asarray(np.zeros((2, 3)))
    with pytest.raises(xg.XpgradValueError, match="target shape"):
        F.cross_entropy(x, xg.asarray(np.array([0, 1, 2])))
    with pytest.raises(xg.XpgradTypeError, match="integers"):
        F.nll_loss(x, xg.asarray(np.array([0.0, 1.0])))
    with pytest.raises(xg.XpgradValueError, match="weight must have shape"):
        F.cross_entropy(x, xg.asarray(np.array([0, 1])), weight=xg.asarray([1.0, 2.0]))
    with pytest.raises(xg.XpgradValueError, match="normalized_shape"):
        F.layer_norm(x, (2,))
    with pytest.raises(xg.XpgradValueError, match="label_smoothing"):
        F.cross_entropy(x, xg.asarray(np.array([0, 1])), label_smoothing=1.5)
    with pytest.raises(xg.XpgradValueError, match="approximate"):
        nn.GELU("fast")
    with pytest.raises(xg.XpgradValueError, match="both"):
        F.softmax(x, axis=0, dim=1)


# ====================================================================== init and clipping
def test_init_functions() -> None:
    w = xg.zeros((64, 32), dtype=xg.float64)
    with xg.default_device(seed=0):
        nn.init.kaiming_uniform_(w, nonlinearity="relu")
    b = math.sqrt(6 / 32)
    assert np.abs(_np(w)).max() <= b and np.abs(_np(w)).max() > 0.9 * b
    with xg.default_device(seed=0):
        nn.init.kaiming_normal_(w, mode="fan_out")
    assert abs(_np(w).std() - math.sqrt(2 / (1 + 0.01**2)) / math.sqrt(64)) < 0.02
    with xg.default_device(seed=0):
        nn.init.xavier_uniform_(w, gain=2.0)
    assert np.abs(_np(w)).max() <= 2 * math.sqrt(6 / 96)
    with xg.default_device(seed=0):
        nn.init.xavier_normal_(w)
    assert abs(_np(w).std() - math.sqrt(2 / 96)) < 0.02
    nn.init.ones_(w)
    assert np.all(_np(w) == 1)
    nn.init.zeros_(w)
    assert np.all(_np(w) == 0)
    with xg.default_device(seed=0):
        nn.init.normal_(w, 3.0, 0.5)
        nn.init.uniform_(w[:1], 0, 1)  # a view of numpy data is filled in place
    assert abs(_np(w)[1:].mean() - 3.0) < 0.05
    with pytest.raises(xg.XpgradValueError, match="at least 2"):
        nn.init.xavier_uniform_(xg.zeros(3))
    # a Parameter on torch is filled in place, on its own library
    p = nn.Parameter(xg.asarray(torch.zeros(3, 4, dtype=torch.float64)))
    data = p.data
    with xg.default_device(seed=0):
        nn.init.uniform_(p, -1, 1)
    assert p.data is data and float(xg.sum(xg.abs(p.detach()))) > 0


def test_clip_grad_norm_and_value_match_torch() -> None:
    rng = np.random.default_rng(0)
    gs = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    for norm_type in (2.0, 1.0, math.inf):
        ours = [nn.Parameter(xg.asarray(np.zeros_like(g))) for g in gs]
        theirs = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in gs]
        for o, t, g in zip(ours, theirs, gs, strict=True):
            o.grad = xg.asarray(g.copy())
            t.grad = torch.tensor(g)
        n1 = nn.utils.clip_grad_norm_(ours, 0.5, norm_type=norm_type)
        n2 = torch.nn.utils.clip_grad_norm_(theirs, 0.5, norm_type=norm_type)
        np.testing.assert_allclose(float(n1), float(n2), rtol=1e-12)
        for o, t in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(_np(o.grad), t.grad.numpy(), rtol=1e-12)
    ours = [nn.Parameter(xg.asarray(np.zeros(5)))]
    ours[0].grad = xg.asarray(gs[1].copy())
    nn.utils.clip_grad_value_(ours, 0.3)
    np.testing.assert_allclose(_np(ours[0].grad), np.clip(gs[1], -0.3, 0.3))


# ====================================================================== training
def test_small_mlp_learns(backend: Any) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (64, 2))
    y = (x[:, 0] * x[:, 1] > 0).astype(np.int64)
    with backend.policy(seed=0):
        model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
    opt = xg.optim.Adam(model.parameters(), lr=0.05)
    xb = xg.asarray(backend.asarray(x.astype(np.float32)))
    yb = xg.asarray(backend.asarray(y))
    losses = []
    for _ in range(50):
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0], losses
