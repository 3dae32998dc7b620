"""Convolution, pooling, normalization, bilinear and attention layers, against torch.nn on the same weights."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
import xpgrad.nn as nn
import xpgrad.nn.functional as F  # noqa: N812 - PyTorch's conventional alias
from xpgrad.testing import check_grads

from ._nn_cases import Case, _mk, _ours_args, _x
from ._util import to_numpy as _np

RTOL = 1e-8
ATOL = 1e-10


def _torch() -> Any:
    return pytest.importorskip("torch")


# ====================================================================== functional vs torch


def _bools(*shape: int, p: float = 0.3) -> Callable[[np.random.Generator], np.ndarray]:
    def make(rng: np.random.Generator) -> np.ndarray:
        m = rng.uniform(size=shape) < p
        m[..., 0] = False  # every query keeps at least one key
        return m

    return make


def _conv(name: str, xs: tuple[int, ...], ws: tuple[int, ...], bias: bool = True, **kw: Any) -> Case:
    nd = len(ws) - 2
    fo = {1: "conv1d", 2: "conv2d"}[nd]
    parts = [_x(*xs), _x(*ws, lo=-1, hi=1)] + ([_x(ws[0], lo=-1, hi=1)] if bias else [])
    return Case(name, lambda f, *a: getattr(f, fo)(*a, **kw), lambda t, *a: getattr(t, fo)(*a, **kw),
                _mk(*parts), diff=tuple(range(len(parts))))


def _convt(name: str, xs: tuple[int, ...], ws: tuple[int, ...], **kw: Any) -> Case:
    parts = [_x(*xs), _x(*ws, lo=-1, hi=1), _x(ws[1] * kw.get("groups", 1), lo=-1, hi=1)]
    return Case(name, lambda f, *a: f.conv_transpose2d(*a, **kw), lambda t, *a: t.conv_transpose2d(*a, **kw),
                _mk(*parts), diff=(0, 1, 2))


def _pool(name: str, fn: str, xs: tuple[int, ...], *args: Any, **kw: Any) -> Case:
    return Case(name, lambda f, x: getattr(f, fn)(x, *args, **kw), lambda t, x: getattr(t, fn)(x, *args, **kw),
                _mk(_x(*xs)))


def _sdpa(name: str, shapes: tuple[tuple[int, ...], ...], mask: Any = None, **kw: Any) -> Case:
    parts = [_x(*s) for s in shapes] + ([mask] if mask is not None else [])
    return Case(name, lambda f, *a: f.scaled_dot_product_attention(*a, **kw),
                lambda t, *a: t.scaled_dot_product_attention(*a, **kw), _mk(*parts), diff=(0, 1, 2))


def _mha_fn(lib: Any, q: Any, k: Any, v: Any, w_in: Any, b_in: Any, w_out: Any, b_out: Any, *masks: Any,
            mask_kw: tuple[str, ...] = (), **kw: Any) -> Any:
    """The output and the attention weights (when returned), flattened into one vector."""
    f = lib.nn.functional
    out, w = f.multi_head_attention_forward(q, k, v, 6, 2, w_in, b_in, None, None, False, 0.0, w_out, b_out,
                                            **dict(zip(mask_kw, masks, strict=True)), **kw)
    parts = [lib.reshape(out, (-1,))] + ([] if w is None else [lib.reshape(w, (-1,))])
    return lib.concat(parts) if lib is xg else lib.cat(parts)


def _mha(name: str, l_: int, s: int, n: int | None, masks: tuple[tuple[str, Callable[..., Any]], ...] = (),
         **kw: Any) -> Case:
    lead_q = (l_, n) if n is not None else (l_,)
    lead_k = (s, n) if n is not None else (s,)
    parts = [_x(*lead_q, 6), _x(*lead_k, 6), _x(*lead_k, 6), _x(18, 6, lo=-0.6, hi=0.6), _x(18, lo=-0.3, hi=0.3),
             _x(6, 6, lo=-0.6, hi=0.6), _x(6, lo=-0.3, hi=0.3)] + [m for _, m in masks]
    names = tuple(k for k, _ in masks)
    return Case(name, lambda f, *a: _mha_fn(xg, *a, mask_kw=names, **kw),
                lambda t, *a: _mha_fn(_torch(), *a, mask_kw=names, **kw), _mk(*parts), diff=tuple(range(7)))


def _bn_case(name: str, training: bool, shape: tuple[int, ...]) -> Case:
    c = shape[1]

    def ours(f: Any, x: Any, w: Any, b: Any, rm: np.ndarray, rv: np.ndarray) -> Any:
        return f.batch_norm(x, xg.asarray(rm), xg.asarray(rv), w, b, training=training, momentum=0.3)

    def theirs(t: Any, x: Any, w: Any, b: Any, rm: Any, rv: Any) -> Any:
        return t.batch_norm(x, rm.clone(), rv.clone(), w, b, training=training, momentum=0.3)

    return Case(name, ours, theirs, _mk(_x(*shape), _x(c), _x(c), _x(c), _x(c, lo=0.5, hi=2.0)), diff=(0, 1, 2))


CASES = [
    # convolution
    _conv("conv2d", (2, 3, 7, 6), (4, 3, 3, 3)),
    _conv("conv2d_stride_pad", (2, 3, 8, 7), (4, 3, 3, 2), stride=(2, 1), padding=(1, 2)),
    _conv("conv2d_dilation_groups", (2, 4, 9, 8), (6, 2, 3, 3), padding=2, dilation=(2, 1), groups=2),
    _conv("conv2d_same_even_kernel", (1, 2, 6, 5), (3, 2, 4, 2), padding="same", dilation=(1, 2)),
    _conv("conv2d_valid_nobias", (2, 2, 5, 5), (3, 2, 5, 2), bias=False, padding="valid", stride=3),
    _conv("conv2d_depthwise_unbatched", (4, 6, 6), (4, 1, 3, 3), groups=4, padding=1),
    _conv("conv2d_1x1", (2, 3, 4, 4), (5, 3, 1, 1)),
    _conv("conv1d", (2, 3, 10), (4, 3, 3), stride=2, padding=1),
    _conv("conv1d_same_groups", (2, 4, 9), (6, 2, 4), padding="same", dilation=2, groups=2),
    _conv("conv1d_unbatched", (3, 7), (2, 3, 2)),
    _convt("conv_transpose2d", (2, 3, 4, 5), (3, 2, 3, 3)),
    _convt("conv_transpose2d_stride", (2, 3, 4, 3), (3, 2, 3, 2), stride=(2, 3), padding=(1, 0),
           output_padding=(1, 2)),
    _convt("conv_transpose2d_groups_dilation", (1, 4, 3, 4), (4, 3, 2, 3), stride=2, groups=2, dilation=(2, 1),
           padding=1, output_padding=1),
    # pooling
    _pool("max_pool2d", "max_pool2d", (2, 3, 8, 8), 2),
    _pool("max_pool2d_pad_stride", "max_pool2d", (2, 2, 7, 6), (3, 2), stride=(2, 1), padding=1),
    _pool("max_pool2d_dilation_ceil", "max_pool2d", (1, 2, 9, 8), 3, stride=2, dilation=2, padding=1,
          ceil_mode=True),
    _pool("max_pool2d_unbatched", "max_pool2d", (3, 5, 5), 2, 1),
    _pool("avg_pool2d", "avg_pool2d", (2, 3, 8, 8), 2),
    _pool("avg_pool2d_pad", "avg_pool2d", (2, 2, 7, 6), 3, stride=2, padding=1),
    _pool("avg_pool2d_no_pad_count", "avg_pool2d", (2, 2, 7, 6), 3, stride=2, padding=1, count_include_pad=False),
    _pool("avg_pool2d_ceil", "avg_pool2d", (1, 2, 7, 6), (3, 2), stride=2, padding=1, ceil_mode=True),
    _pool("avg_pool2d_ceil_no_pad_count", "avg_pool2d", (1, 2, 7, 6), 2, stride=(2, 3), padding=1,
          ceil_mode=True, count_include_pad=False),
    _pool("avg_pool2d_divisor", "avg_pool2d", (1, 2, 6, 6), 3, divisor_override=4),
    _pool("adaptive_avg_pool2d", "adaptive_avg_pool2d", (2, 3, 8, 8), 4),
    _pool("adaptive_avg_pool2d_uneven", "adaptive_avg_pool2d", (2, 3, 7, 5), (3, 2)),
    _pool("adaptive_avg_pool2d_none", "adaptive_avg_pool2d", (3, 7, 5), (None, 3)),
    _pool("adaptive_avg_pool2d_global", "adaptive_avg_pool2d", (2, 3, 5, 4), 1),
    # normalization
    _bn_case("batch_norm_train", True, (6, 3, 4, 5)),
    _bn_case("batch_norm_train_1d", True, (5, 4)),
    _bn_case("batch_norm_eval", False, (4, 3, 5)),
    Case("group_norm", lambda f, x, w, b: f.group_norm(x, 2, w, b), lambda t, x, w, b: t.group_norm(x, 2, w, b),
         _mk(_x(3, 4, 5, 2), _x(4), _x(4)), diff=(0, 1, 2)),
    Case("group_norm_noaffine", lambda f, x: f.group_norm(x, 3, eps=1e-3), lambda t, x: t.group_norm(x, 3, eps=1e-3),
         _mk(_x(2, 6, 7))),
    # bilinear
    Case("bilinear", lambda f, *a: f.bilinear(*a), lambda t, *a: t.bilinear(*a),
         _mk(_x(4, 3), _x(4, 5), _x(2, 3, 5), _x(2)), diff=(0, 1, 2, 3)),
    Case("bilinear_batched_nobias", lambda f, *a: f.bilinear(*a), lambda t, *a: t.bilinear(*a),
         _mk(_x(2, 3, 3), _x(2, 3, 2), _x(4, 3, 2)), diff=(0, 1, 2)),
    # attention
    _sdpa("sdpa", ((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 4))),
    _sdpa("sdpa_causal_scale", ((2, 5, 3), (2, 5, 3), (2, 5, 2)), is_causal=True, scale=0.7),
    _sdpa("sdpa_bool_mask", ((2, 4, 3), (2, 5, 3), (2, 5, 3)), mask=lambda r: ~_bools(2, 4, 5)(r)),
    _sdpa("sdpa_float_mask", ((2, 4, 3), (2, 5, 3), (2, 5, 3)), mask=_x(4, 5)),
    _sdpa("sdpa_gqa", ((1, 4, 3, 2), (1, 2, 5, 2), (1, 2, 5, 3)), enable_gqa=True),
    _mha("mha", 4, 5, 3),
    _mha("mha_unbatched_no_avg", 4, 3, None, average_attn_weights=False),
    _mha("mha_masks", 4, 5, 3, masks=(("attn_mask", _bools(4, 5)), ("key_padding_mask", _bools(3, 5)))),
    _mha("mha_float_mask_no_weights", 4, 5, 2, masks=(("attn_mask", _x(2 * 2, 4, 5)),), need_weights=False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_functional_matches_torch(case: Case, backend: Any) -> None:
    torch = _torch()
    rng = np.random.default_rng(sum(map(ord, case.name)))
    arrays = case.make(rng)
    ours_in = _ours_args(backend, arrays, case.diff)
    theirs_in = [torch.tensor(a, requires_grad=(i in case.diff)) for i, a in enumerate(arrays)]
    out = case.ours(F, *ours_in)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about an even kernel with padding="same"
        ref = case.theirs(torch.nn.functional, *theirs_in)
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


@pytest.mark.parametrize("name", ["conv2d_stride_pad", "conv_transpose2d_stride", "max_pool2d_pad_stride",
                                  "avg_pool2d_no_pad_count", "batch_norm_train", "group_norm", "sdpa_bool_mask"])
def test_functional_second_order(name: str) -> None:
    case = next(c for c in CASES if c.name == name)
    rng = np.random.default_rng(11)
    arrays = case.make(rng)
    check_grads(lambda *a: case.ours(F, *a), *arrays, argnums=case.diff[:2], order=2)


def test_float32_stays_float32() -> None:
    rng = np.random.default_rng(0)
    x = xg.asarray(rng.standard_normal((2, 3, 6, 6)).astype(np.float32), requires_grad=True)
    w = xg.asarray(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)
    wt = xg.asarray(rng.standard_normal((3, 2, 2, 2)).astype(np.float32), requires_grad=True)
    for out in (F.conv2d(x, w, padding=1), F.conv_transpose2d(x, wt, stride=2), F.max_pool2d(x, 2, padding=1),
                F.avg_pool2d(x, 3, padding=1, count_include_pad=False), F.adaptive_avg_pool2d(x, 4),
                F.group_norm(x, 3), F.batch_norm(x, None, None, training=True)):
        assert out.dtype == xg.float32
        out.sum().backward()
        assert x.grad.dtype == xg.float32


# ====================================================================== modules vs torch
def _copy_from_torch(ours: nn.Module, theirs: Any, backend: Any) -> None:
    torch = _torch()
    with torch.no_grad():  # non-trivial values for every parameter (BatchNorm starts at 1 and 0)
        for p in theirs.parameters():
            p.add_(torch.linspace(-0.3, 0.3, p.numel(), dtype=p.dtype).reshape(p.shape))
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    backend.to(ours)


def _modules() -> list[tuple[str, Callable[[Any], tuple[Any, Any, list[tuple[int, ...]], dict[str, Any]]]]]:
    def conv1d(t: Any) -> Any:
        return nn.Conv1d(3, 4, 3, stride=2, padding=1), t.nn.Conv1d(3, 4, 3, stride=2, padding=1), [(2, 3, 9)], {}

    def conv2d(t: Any) -> Any:
        kw = {"stride": (1, 2), "padding": "valid", "dilation": 2, "groups": 2}
        return nn.Conv2d(4, 6, (3, 2), **kw), t.nn.Conv2d(4, 6, (3, 2), **kw), [(2, 4, 8, 9)], {}

    def conv2d_same(t: Any) -> Any:
        return nn.Conv2d(2, 3, 4, padding="same"), t.nn.Conv2d(2, 3, 4, padding="same"), [(2, 2, 6, 5)], {}

    def conv2d_modes(t: Any) -> Any:
        mods = [(nn.Conv2d(2, 2, 3, padding=(1, 2), padding_mode=m, bias=False),
                 t.nn.Conv2d(2, 2, 3, padding=(1, 2), padding_mode=m, bias=False))
                for m in ("reflect", "replicate", "circular")]
        return (nn.Sequential(*[a for a, _ in mods]), t.nn.Sequential(*[b for _, b in mods]), [(2, 2, 5, 4)], {})

    def conv1d_reflect_same(t: Any) -> Any:
        kw = {"padding": "same", "padding_mode": "reflect", "dilation": 2}
        return nn.Conv1d(2, 2, 3, **kw), t.nn.Conv1d(2, 2, 3, **kw), [(3, 2, 7)], {}

    def conv_t(t: Any) -> Any:
        kw = {"stride": 2, "padding": 1, "output_padding": 1, "groups": 1}
        return nn.ConvTranspose2d(3, 4, 3, **kw), t.nn.ConvTranspose2d(3, 4, 3, **kw), [(2, 3, 4, 4)], {}

    def conv_t_size(t: Any) -> Any:
        return (nn.ConvTranspose2d(2, 2, 3, stride=2, padding=1, groups=2),
                t.nn.ConvTranspose2d(2, 2, 3, stride=2, padding=1, groups=2), [(1, 2, 3, 4)],
                {"output_size": (6, 8)})

    def pools(t: Any) -> Any:
        return (nn.Sequential(nn.MaxPool2d(3, 2, padding=1), nn.AvgPool2d(2, padding=1, count_include_pad=False),
                              nn.AdaptiveAvgPool2d((2, None))),
                t.nn.Sequential(t.nn.MaxPool2d(3, 2, padding=1),
                                t.nn.AvgPool2d(2, padding=1, count_include_pad=False),
                                t.nn.AdaptiveAvgPool2d((2, None))), [(2, 3, 9, 8)], {})

    def bn1d(t: Any) -> Any:
        return nn.BatchNorm1d(4), t.nn.BatchNorm1d(4), [(6, 4, 3)], {}

    def bn2d(t: Any) -> Any:
        return nn.BatchNorm2d(3, momentum=None), t.nn.BatchNorm2d(3, momentum=None), [(4, 3, 3, 2)], {}

    def gn(t: Any) -> Any:
        return nn.GroupNorm(2, 6), t.nn.GroupNorm(2, 6), [(3, 6, 2, 2)], {}

    def bilinear(t: Any) -> Any:
        return nn.Bilinear(3, 4, 5), t.nn.Bilinear(3, 4, 5), [(6, 3), (6, 4)], {}

    def mha(t: Any) -> Any:
        kw = {"batch_first": True}
        return nn.MultiheadAttention(8, 2, **kw), t.nn.MultiheadAttention(8, 2, **kw), [(3, 4, 8)] * 3, {}

    def mha_kv(t: Any) -> Any:
        kw = {"kdim": 5, "vdim": 3, "add_bias_kv": True, "add_zero_attn": True}
        mask = np.random.default_rng(3).uniform(size=(2, 6)) < 0.3
        mask[:, 0] = False
        extra = {"key_padding_mask": mask, "average_attn_weights": False}
        return (nn.MultiheadAttention(6, 3, **kw), t.nn.MultiheadAttention(6, 3, **kw),
                [(4, 2, 6), (6, 2, 5), (6, 2, 3)], extra)

    def cnn(t: Any) -> Any:
        ours = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(4, 6, 3, padding=1), nn.GroupNorm(3, 6), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(6, 3))
        theirs = t.nn.Sequential(t.nn.Conv2d(1, 4, 3, padding=1), t.nn.BatchNorm2d(4), t.nn.ReLU(),
                                 t.nn.MaxPool2d(2), t.nn.Conv2d(4, 6, 3, padding=1), t.nn.GroupNorm(3, 6),
                                 t.nn.ReLU(), t.nn.AdaptiveAvgPool2d(1), t.nn.Flatten(), t.nn.Linear(6, 3))
        return ours, theirs, [(5, 1, 8, 8)], {}

    return [(f.__name__, f) for f in (conv1d, conv2d, conv2d_same, conv2d_modes, conv1d_reflect_same, conv_t,
                                       conv_t_size, pools, bn1d, bn2d, gn, bilinear, mha, mha_kv, cnn)]


@pytest.mark.parametrize(("name", "make"), _modules(), ids=[n for n, _ in _modules()])
def test_modules_match_torch(name: str, make: Callable[..., Any], backend: Any) -> None:
    torch = _torch()
    with xg.default_device(dtype="float64", seed=1):
        ours, theirs, shapes, extra = make(torch)
    theirs = theirs.double()
    _copy_from_torch(ours, theirs, backend)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s) for s in shapes]
    ours_in = [xg.Tensor(backend.asarray(x), requires_grad=True) for x in xs]
    theirs_in = [torch.tensor(x, requires_grad=True) for x in xs]
    ours_kw = {k: (xg.Tensor(backend.asarray(v)) if isinstance(v, np.ndarray) else v) for k, v in extra.items()}
    theirs_kw = {k: (torch.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in extra.items()}
    out, ref = ours(*ours_in, **ours_kw), theirs(*theirs_in, **theirs_kw)
    checks: list[tuple[Any, Any, str]] = []  # (ours, torch's, what), converted together at the end
    if isinstance(ref, tuple):  # attention: (output, weights)
        checks.append((out[1].detach(), ref[1].detach().numpy(), "attention weights"))
        out, ref = out[0], ref[0]
    checks.append((out.detach(), ref.detach().numpy(), "output"))
    u = rng.standard_normal(tuple(ref.shape))
    out.backward(gradient=backend.asarray(u))
    ref.backward(torch.tensor(u))
    for i, (a, b) in enumerate(zip(ours_in, theirs_in, strict=True)):
        checks.append((a.grad, b.grad.numpy(), f"input {i}'s gradient"))
    ours_p = dict(ours.named_parameters())
    assert set(ours_p) == {n for n, _ in theirs.named_parameters()}
    for pname, p in theirs.named_parameters():
        assert ours_p[pname].grad is not None, pname
        checks.append((ours_p[pname].grad, p.grad.numpy(), pname))
    # the buffers (running statistics) follow torch's
    ours_b = dict(ours.named_buffers())
    for bname, b in theirs.named_buffers():
        checks.append((ours_b[bname], b.numpy(), bname))
    for (_, want, what), got in zip(checks, _np_all([c[0] for c in checks]), strict=True):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)


def _np_all(arrays: list[Any]) -> list[np.ndarray]:
    """``_np`` of each, with Dask's in one compute (their graphs share the forward pass: one
    compute per array ran it again each time, 15 computes of ~7000 tasks for the CNN)."""
    datas = [a.data if isinstance(a, xg.Tensor) else a for a in arrays]
    if any(hasattr(d, "compute") for d in datas):
        import dask

        datas = list(dask.compute(*datas))
    return [_np(d) for d in datas]


# ====================================================================== shapes, init, repr
@pytest.mark.parametrize(("ours", "theirs"), [
    ("Conv1d(3, 8, 5, groups=1)", "Conv1d(3, 8, 5, groups=1)"),
    ("Conv2d(4, 8, (3, 2), stride=2, padding=1, dilation=(2, 1), groups=2)",
     "Conv2d(4, 8, (3, 2), stride=2, padding=1, dilation=(2, 1), groups=2)"),
    ("Conv2d(2, 4, 3, padding='same', padding_mode='circular', bias=False)",
     "Conv2d(2, 4, 3, padding='same', padding_mode='circular', bias=False)"),
    ("ConvTranspose2d(4, 6, 3, stride=2, output_padding=1, groups=2)",
     "ConvTranspose2d(4, 6, 3, stride=2, output_padding=1, groups=2)"),
    ("MaxPool2d(3, 2, 1)", "MaxPool2d(3, 2, 1)"),
    ("AvgPool2d(2)", "AvgPool2d(2)"),
    ("AdaptiveAvgPool2d((2, 3))", "AdaptiveAvgPool2d((2, 3))"),
    ("BatchNorm1d(5, momentum=None, affine=False)", "BatchNorm1d(5, momentum=None, affine=False)"),
    ("BatchNorm2d(5, track_running_stats=False)", "BatchNorm2d(5, track_running_stats=False)"),
    ("GroupNorm(2, 4, affine=False)", "GroupNorm(2, 4, affine=False)"),
    ("GroupNorm(2, 4, bias=False)", "GroupNorm(2, 4, bias=False)"),
    ("BatchNorm2d(3, bias=False)", "BatchNorm2d(3, bias=False)"),
    ("Bilinear(3, 4, 5, bias=False)", "Bilinear(3, 4, 5, bias=False)"),
    ("MultiheadAttention(8, 2, kdim=3, vdim=5, bias=False)", "MultiheadAttention(8, 2, kdim=3, vdim=5, bias=False)"),
])
def test_same_parameters_buffers_and_repr_as_torch(ours: str, theirs: str) -> None:
    torch = _torch()
    a = eval(f"nn.{ours}", {"nn": nn})
    b = eval(f"nn.{theirs}", {"nn": torch.nn})
    assert [(n, tuple(p.shape)) for n, p in a.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in b.named_parameters()]
    assert [(n, tuple(t.shape)) for n, t in a.named_buffers()] == [(n, tuple(t.shape)) for n, t in b.named_buffers()]
    assert list(a.state_dict()) == list(b.state_dict())
    if not isinstance(a, nn.MultiheadAttention):  # torch's MHA repr names its NonDynamicallyQuantizableLinear
        assert repr(a) == repr(b)
    assert all(p.dtype == xg.float32 for p in a.parameters())


def test_init_distributions_and_seeding() -> None:
    with xg.default_device(seed=3):
        a = nn.Conv2d(4, 8, 3, groups=2)
    with xg.default_device(seed=3):
        b = nn.Conv2d(4, 8, 3, groups=2)
    np.testing.assert_array_equal(_np(a.weight), _np(b.weight))
    fan_in = 2 * 9
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform(a=sqrt(5)) and the bias share it
    for p in (a.weight, a.bias):
        v = _np(p)
        assert np.all(np.abs(v) <= bound) and np.abs(v).max() > 0.5 * bound
    t = nn.ConvTranspose2d(4, 6, 3, groups=2)
    assert np.all(np.abs(_np(t.bias)) <= 1 / math.sqrt(3 * 9))
    bil = nn.Bilinear(16, 3, 50)
    assert np.all(np.abs(_np(bil.weight)) <= 0.25) and np.abs(_np(bil.weight)).max() > 0.2
    mha = nn.MultiheadAttention(8, 2)
    xav = math.sqrt(6 / (8 + 24))
    assert np.all(np.abs(_np(mha.in_proj_weight)) <= xav)
    assert np.all(_np(mha.in_proj_bias) == 0) and np.all(_np(mha.out_proj.bias) == 0)
    bn, gn = nn.BatchNorm2d(3), nn.GroupNorm(1, 3)
    for m in (bn, gn):
        assert np.all(_np(m.weight) == 1) and np.all(_np(m.bias) == 0)
    assert np.all(_np(bn.running_var) == 1) and int(bn.num_batches_tracked) == 0
    assert bn.num_batches_tracked.dtype == xg.int64
    with xg.default_device(dtype="float64"):
        assert nn.Conv2d(1, 1, 1).weight.dtype == xg.float64 and nn.BatchNorm1d(2).running_mean.dtype == xg.float64
    with xg.default_device("array_api_strict"):
        m = nn.BatchNorm2d(2)
    assert type(m.running_mean.data).__module__.startswith("array_api_strict")


# ====================================================================== BatchNorm train / eval
@pytest.mark.parametrize("momentum", [0.1, None, 0.5])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_running_stats_follow_torch(momentum: float | None, affine: bool, backend: Any) -> None:
    torch = _torch()
    with xg.default_device(dtype="float64"):
        ours = nn.BatchNorm2d(3, momentum=momentum, affine=affine)
    theirs = torch.nn.BatchNorm2d(3, momentum=momentum, affine=affine).double()
    backend.to(ours)
    rng = np.random.default_rng(4)
    for _ in range(4):
        x = rng.standard_normal((5, 3, 4, 2)) * 3 + 1
        out = ours(xg.Tensor(backend.asarray(x)))
        ref = theirs(torch.tensor(x))
        np.testing.assert_allclose(_np(out), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(_np(getattr(ours, name)), getattr(theirs, name).numpy(), rtol=RTOL, err_msg=name)
    ours.eval()
    theirs.eval()
    x = rng.standard_normal((2, 3, 4, 2))
    np.testing.assert_allclose(_np(ours(xg.Tensor(backend.asarray(x)))), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=RTOL, atol=ATOL)
    assert int(ours.num_batches_tracked) == 4  # eval does not count


def test_batch_norm_without_running_stats_uses_batch_stats_in_eval() -> None:
    torch = _torch()
    ours = nn.BatchNorm1d(2, track_running_stats=False).eval()
    theirs = torch.nn.BatchNorm1d(2, track_running_stats=False).eval()
    x = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    np.testing.assert_allclose(_np(ours(xg.asarray(x))), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5)
    assert ours.running_mean is None and list(ours.state_dict()) == ["weight", "bias"]


def test_batch_norm_updates_raw_running_arrays_in_place() -> None:
    torch = _torch()
    x = np.random.default_rng(5).standard_normal((6, 3))
    rm, rv = np.zeros(3), np.ones(3)
    rmt, rvt = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    F.batch_norm(xg.asarray(x), rm, rv, training=True, momentum=0.2)
    torch.nn.functional.batch_norm(torch.tensor(x), rmt, rvt, training=True, momentum=0.2)
    np.testing.assert_allclose(rm, rmt.numpy(), rtol=RTOL)
    np.testing.assert_allclose(rv, rvt.numpy(), rtol=RTOL)


def test_batch_norm_gradient_in_eval_mode() -> None:
    bn = nn.BatchNorm1d(3).to(dtype="float64").eval()
    rm = np.array([0.5, -1.0, 2.0])
    bn.load_state_dict({**{k: _np(v) for k, v in bn.state_dict().items()}, "running_mean": rm})
    x = xg.asarray(np.ones((2, 3)), requires_grad=True)
    bn(x).sum().backward()
    np.testing.assert_allclose(_np(x.grad), np.full((2, 3), 1 / math.sqrt(1 + 1e-5)))


# ====================================================================== max pooling ties
def test_max_pool_gradient_goes_to_the_first_maximum() -> None:
    torch = _torch()
    x = np.array([[[[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 0.0, 3.0], [5.0, 5.0, 1.0, 1.0], [5.0, 5.0, 1.0, 1.0]]]])
    xo = xg.asarray(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    out, idx = F.max_pool2d(xo, 2, return_indices=True)
    ref, ridx = torch.nn.functional.max_pool2d(xt, 2, return_indices=True)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_array_equal(_np(xo.grad), xt.grad.numpy())
    np.testing.assert_array_equal(_np(idx), ridx.numpy())
    assert _np(xo.grad).sum() == 4  # one element per window, not shared


def test_max_pool_return_indices_match_torch() -> None:
    torch = _torch()
    x = np.random.default_rng(2).standard_normal((2, 3, 9, 8))
    kw = {"stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True}
    _, idx = nn.MaxPool2d(3, return_indices=True, **kw)(xg.asarray(x))
    _, ridx = torch.nn.MaxPool2d(3, return_indices=True, **kw)(torch.tensor(x))
    np.testing.assert_array_equal(_np(idx), ridx.numpy())


# ====================================================================== attention details
def test_mha_causal_and_dropout() -> None:
    torch = _torch()
    with xg.default_device(dtype="float64", seed=0):
        ours = nn.MultiheadAttention(4, 2, dropout=0.5)
    theirs = torch.nn.MultiheadAttention(4, 2, dropout=0.5).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((5, 2, 4))
    causal = np.triu(np.ones((5, 5), dtype=bool), 1)
    ours.eval()
    theirs.eval()
    out, w = ours(xg.asarray(x), xg.asarray(x), xg.asarray(x), attn_mask=xg.asarray(causal), is_causal=True)
    ref, _ = theirs(*[torch.tensor(x)] * 3, attn_mask=torch.tensor(causal), is_causal=True)
    np.testing.assert_allclose(_np(out), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    assert np.all(_np(w)[:, np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0)
    ours.train()
    with xg.default_device(seed=0):
        a, wa = ours(xg.asarray(x), xg.asarray(x), xg.asarray(x))
    with xg.default_device(seed=0):
        b, _ = ours(xg.asarray(x), xg.asarray(x), xg.asarray(x))
    np.testing.assert_array_equal(_np(a), _np(b))  # seeded dropout is reproducible
    assert np.any(_np(wa) == 0)
    with pytest.raises(xg.XpgradValueError, match="is_causal"):
        ours(xg.asarray(x), xg.asarray(x), xg.asarray(x), is_causal=True)


# ====================================================================== errors
@pytest.mark.parametrize(("call", "match"), [
    (lambda: F.conv2d(xg.zeros((1, 3, 5, 5)), xg.zeros((4, 2, 3, 3))), "conv2d: the input has 3 channels"),
    (lambda: F.conv2d(xg.zeros((5,)), xg.zeros((4, 2, 3, 3))), r"conv2d: expected a 3-D \(unbatched\)"),
    (lambda: F.conv2d(xg.zeros((1, 2, 5, 5)), xg.zeros((4, 2, 3)), padding=0), "conv2d: weight must have shape"),
    (lambda: F.conv2d(xg.zeros((1, 2, 5, 5)), xg.zeros((4, 2, 3, 3)), stride=0), "conv2d: stride must be"),
    (lambda: F.conv2d(xg.zeros((1, 2, 5, 5)), xg.zeros((4, 2, 3, 3)), padding="full"), "'valid', 'same'"),
    (lambda: F.conv2d(xg.zeros((1, 2, 5, 5)), xg.zeros((4, 2, 3, 3)), stride=2, padding="same"), "stride 1"),
    (lambda: F.conv2d(xg.zeros((1, 2, 2, 2)), xg.zeros((4, 2, 3, 3))), "larger than the padded input"),
    (lambda: F.conv2d(xg.zeros((1, 4, 5, 5)), xg.zeros((3, 2, 3, 3)), groups=2), "divisible by groups"),
    (lambda: F.conv2d(xg.zeros((1, 2, 5, 5)), xg.zeros((4, 2, 3, 3)), xg.zeros(3)), r"bias must have shape \(4,\)"),
    (lambda: F.conv1d(xg.zeros((1, 2, 5)), xg.zeros((4, 2, 3, 3))), "conv1d: weight must have shape"),
    (lambda: F.conv_transpose2d(xg.zeros((1, 2, 3, 3)), xg.zeros((2, 1, 3, 3)), stride=2, output_padding=2),
     "output_padding"),
    (lambda: F.conv_transpose2d(xg.zeros((1, 3, 3, 3)), xg.zeros((2, 1, 3, 3))), "conv_transpose2d: the input has 3"),
    (lambda: F.max_pool2d(xg.zeros((1, 1, 4, 4)), 2, padding=2), "at most half"),
    (lambda: F.max_pool2d(xg.zeros((1, 1, 4, 4)), (2, 2, 2)), "max_pool2d: kernel_size must be"),
    (lambda: F.avg_pool2d(xg.zeros((1, 1, 4, 4)), 5), "larger than the padded input"),
    (lambda: F.avg_pool2d(xg.zeros((1, 1, 4, 4)), 2, divisor_override=0), "divisor_override"),
    (lambda: F.adaptive_avg_pool2d(xg.zeros((1, 1, 4, 4)), 0), "output_size"),
    (lambda: F.batch_norm(xg.zeros((1, 3)), xg.zeros(3), xg.ones(3), training=True), "more than 1 value"),
    (lambda: F.batch_norm(xg.zeros((2, 3)), xg.zeros(2), xg.ones(2)), r"running_mean must have shape \(3,\)"),
    (lambda: F.group_norm(xg.zeros((2, 3, 4)), 2), "group_norm: num_groups must be"),
    (lambda: F.bilinear(xg.zeros((2, 3)), xg.zeros((2, 4)), xg.zeros((5, 3, 3))), "bilinear: expected inputs"),
    (lambda: F.scaled_dot_product_attention(xg.zeros((2, 3)), xg.zeros((2, 4)), xg.zeros((2, 4))),
     "scaled_dot_product_attention: expected query"),
    (lambda: F.scaled_dot_product_attention(xg.zeros((2, 3)), xg.zeros((2, 3)), xg.zeros((2, 3)),
                                            attn_mask=xg.zeros((2, 2)), is_causal=True), "not both"),
    (lambda: F.pad(xg.zeros((2, 3)), (1, 1), mode="wrap"), "pad: mode must be one of"),
    (lambda: F.pad(xg.zeros((2, 3)), (3, 0), mode="reflect"), "reflect padding"),
    (lambda: nn.Conv2d(3, 4, 3, groups=2), r"in_channels \(3\) and out_channels \(4\) must be divisible"),
    (lambda: nn.Conv2d(3, 4, 3, padding_mode="mirror"), "padding_mode must be one of"),
    (lambda: nn.Conv2d(3, 4, 3, stride=2, padding="same"), "Conv2d: padding='same' needs stride 1"),
    (lambda: nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect"), r"padding_mode must be one of \['zeros'\]"),
    (lambda: nn.Conv1d(3, 4, 0), "Conv1d: kernel_size must be an int >= 1"),
    (lambda: nn.BatchNorm2d(3)(xg.zeros((2, 3, 4))), "BatchNorm2d: expected 4D input, got 3D"),
    (lambda: nn.BatchNorm1d(3)(xg.zeros((2, 3, 4, 4))), "BatchNorm1d: expected 2D or 3D input"),
    (lambda: nn.GroupNorm(4, 6), r"num_channels \(6\) must be divisible by num_groups \(4\)"),
    (lambda: nn.MultiheadAttention(6, 4), "embed_dim \\(6\\) must be divisible by num_heads"),
    (lambda: nn.MultiheadAttention(4, 2)(*(xg.zeros(s, dtype=xg.float32) for s in ((3, 2, 4), (5, 3, 4), (5, 3, 4)))),
     "multi_head_attention_forward: expected query"),
    (lambda: nn.MultiheadAttention(4, 2)(xg.zeros((3, 2, 4), dtype=xg.float32), xg.zeros((5, 2, 4), dtype=xg.float32),
                                         xg.zeros((5, 2, 4), dtype=xg.float32), attn_mask=xg.zeros((3, 4))),
     "attn_mask must have shape"),
    (lambda: nn.ConvTranspose2d(2, 2, 3, stride=2)(xg.zeros((1, 2, 3, 3), dtype=xg.float32), output_size=(9, 9)),
     "output_size"),
])
def test_argument_errors(call: Callable[[], Any], match: str) -> None:
    with pytest.raises(xg.XpgradError, match=match):
        call()


def test_scaled_dot_product_attention_refuses_mixed_dtypes_as_torch(backend: Any) -> None:
    """Query, key and value of two dtypes, a float mask of another, integer inputs: torch refuses
    each ("Expected query, key, and value to have the same dtype"); so does xpgrad, naming the
    function and the dtypes (it promoted silently: float64 attention out of a float32 query)."""
    torch = _torch()
    tdt = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}
    rng = np.random.default_rng(5)
    base = [rng.standard_normal((2, 3, 4)) for _ in range(3)]
    combos = [("float32", "float64", "float32"), ("float32", "float32", "float64"), ("float64", "float32", "float32"),
              ("float64", "float64", "float64"), ("float32", "float32", "float32"), ("int64", "int64", "int64")]
    for q_dt, k_dt, v_dt in combos:
        for mask_dt in (None, "bool", "float32", "float64"):
            ours = [xg.asarray(backend.asarray(a.astype(d))) for a, d in zip(base, (q_dt, k_dt, v_dt))]
            theirs = [torch.tensor(a).to(tdt[d]) for a, d in zip(base, (q_dt, k_dt, v_dt))]
            m = None if mask_dt is None else (rng.standard_normal((3, 3)) > -0.5).astype(mask_dt)
            om = None if m is None else xg.asarray(backend.asarray(m))
            tm = None if m is None else torch.tensor(m)
            try:
                want = torch.nn.functional.scaled_dot_product_attention(*theirs, attn_mask=tm)
            except RuntimeError:
                want = None
            if want is None:
                with pytest.raises(xg.XpgradTypeError, match=r"scaled_dot_product_attention: (query, key and value|attn_mask)"):
                    F.scaled_dot_product_attention(*ours, attn_mask=om)
                continue
            got = F.scaled_dot_product_attention(*ours, attn_mask=om)
            assert got.dtype == xg.asarray(ours[0]).dtype, (q_dt, k_dt, v_dt, mask_dt)
            tol = 1e-5 if q_dt == "float32" else 1e-12
            np.testing.assert_allclose(_np(got), want.numpy(), rtol=tol, atol=tol)
    with pytest.raises(xg.XpgradTypeError, match=r"got query float32, key float64 and value float32; convert them first, "
                                                 r"e.g. xg.astype\(key, xg.float32\)"):
        F.scaled_dot_product_attention(*(xg.asarray(backend.asarray(a.astype(d))) for a, d in
                                         zip(base, ("float32", "float64", "float32"))))


def test_error_types() -> None:
    with pytest.raises(xg.XpgradTypeError, match="avg_pool2d: expected a floating input"):
        F.avg_pool2d(xg.zeros((1, 1, 4, 4), dtype=xg.int64), 2)
    with pytest.raises(xg.XpgradTypeError, match="attn_mask must be boolean or floating"):
        F.multi_head_attention_forward(xg.zeros((2, 1, 2)), xg.zeros((2, 1, 2)), xg.zeros((2, 1, 2)), 2, 1,
                                       xg.zeros((6, 2)), None, None, None, False, 0.0, xg.zeros((2, 2)), None,
                                       attn_mask=xg.zeros((2, 2), dtype=xg.int64))
    with pytest.raises(ValueError, match="conv2d"):  # the xpgrad errors are also the built-in ones
        F.conv2d(xg.zeros((1, 1, 2, 2)), xg.zeros((1, 1, 3, 3)))


# ====================================================================== integer max pooling, pad, speed
def test_max_pool_on_integers_and_pad_modes_match_torch() -> None:
    torch = _torch()
    x = np.arange(2 * 5 * 6).reshape(1, 2, 5, 6)[..., ::-1].copy()
    np.testing.assert_array_equal(_np(F.max_pool2d(xg.asarray(x), 3, 2, padding=1)),
                                  torch.nn.functional.max_pool2d(torch.tensor(x).double(), 3, 2, 1).numpy())
    xf = np.random.default_rng(0).standard_normal((1, 2, 4, 5))
    for mode, amounts in [("constant", (1, 2, 0, 3)), ("reflect", (2, 1, 3, 1)), ("replicate", (3, 0, 1, 4)),
                          ("circular", (2, 3, 1, 2)), ("constant", (-1, 2, 1, -2))]:
        np.testing.assert_array_equal(_np(F.pad(xg.asarray(xf), amounts, mode=mode)),
                                      torch.nn.functional.pad(torch.tensor(xf), amounts, mode=mode).numpy(),
                                      err_msg=mode)
    np.testing.assert_array_equal(_np(F.pad(xg.asarray(xf), (1, 1), value=2.5)),
                                  torch.nn.functional.pad(torch.tensor(xf), (1, 1), value=2.5).numpy())


def test_small_cnn_learns_quickly_on_numpy() -> None:
    rng = np.random.default_rng(0)
    n = 256
    x = rng.standard_normal((n, 1, 8, 8)).astype(np.float32) * 0.3
    y = rng.integers(0, 2, n)
    x[y == 1, 0, 2:6, 2:6] += 1.0  # class 1: a bright square
    with xg.default_device(seed=0):
        model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(32 * 4, 2))
    opt = xg.optim.Adam(model.parameters(), lr=0.01)
    start = time.perf_counter()
    losses = []
    for _ in range(3):
        for i in range(0, n, 64):
            loss = F.cross_entropy(model(xg.asarray(x[i:i + 64])), xg.asarray(y[i:i + 64]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    elapsed = time.perf_counter() - start
    assert losses[-1] < 0.3 * losses[0], losses
    assert elapsed < 20.0, f"12 CNN steps took {elapsed:.1f} s"
