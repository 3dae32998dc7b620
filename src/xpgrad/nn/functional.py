"""Functional forms of the layers, activations and losses (``xpgrad.nn.functional``).

Every function is composed of xpgrad's namespace functions, so it works on any
backend and its gradient (of any order) comes from the primitives' rules; the two hot
enough to matter are primitives of their own: ``relu`` (``nn.relu``) and
``cross_entropy`` of class indices (``nn.softmax_cross_entropy``). The
numerically delicate ones are written so that no intermediate overflows:
``log_softmax`` shifts by the (detached) maximum, the logistic functions use
``exp(-|x|)``, and ``binary_cross_entropy_with_logits`` is finite with finite
gradients for logits of any size. Axis arguments follow the array API (``axis``);
PyTorch's ``dim=`` is accepted as a keyword alias.
"""

from __future__ import annotations

import functools
import math
import weakref
from typing import Any

import array_api_compat
import numpy as np

from .. import _namespace as xg
from .._dispatch import backend_namespace
from .._dispatch import raw_array as _raw
from .._dtypes import dtype_name, is_float, kind
from .._exceptions import XpgradIndexError, XpgradTypeError, XpgradValueError
from .._io import move_array
from .._lazy import is_lazy
from .._tracing import is_tracer
from ..autograd._batched import Batched, from_phys
from ..autograd._batching_util import full, pointwise
from ..autograd._batching_util import op as _op
from ..autograd._batching_util import pad as _pad
from ..autograd._core import Primitive
from ..autograd._tensor import Tensor, _to_numpy
from ..ops._common import apply, defjvp_from_vjp, is_half, is_xpgrad, primitive, scale
from ..ops._native import _NATIVE_FNS, native_kernel
from ..ops._registry import prim_of
from ..ops.creation import zeros_like
from ..ops.elementwise import where
from ..ops.indexing import _take_vjp
from ..ops.statistical import sum as _sum
from ..special import erf, expit
from ._checks import _floating, check_dtype, check_float, check_indices
from ._checks import _name as _dtype_text_of
from .conv import adaptive_avg_pool2d, avg_pool2d, conv1d, conv2d, conv_transpose2d, max_pool2d, pad
from .normalization import _tensor, batch_norm, group_norm

__all__ = [
    "linear", "bilinear", "dropout", "embedding", "layer_norm", "batch_norm", "group_norm", "one_hot",
    "conv1d", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "pad",
    "scaled_dot_product_attention", "multi_head_attention_forward",
    "relu", "leaky_relu", "gelu", "silu", "tanh", "sigmoid", "softplus", "elu", "softmax", "log_softmax",
    "logsigmoid", "celu", "selu", "relu6", "hardtanh", "hardswish", "hardsigmoid", "softshrink", "hardshrink",
    "tanhshrink", "glu", "mish", "softsign", "threshold", "prelu", "rrelu",
    "mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss", "cross_entropy", "nll_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div",
]

_REDUCTIONS = ("mean", "sum", "none")


# ---------------------------------------------------------------------- helpers
def _data(x: Any) -> Any:
    """The backend array of ``x``, to compute on (never a batched value: see `_raw`)."""
    return x.data if isinstance(x, Tensor) else x



def _shape(x: Any) -> tuple[Any, ...]:
    """The shape of ``x`` (an example's, inside vmap)."""
    return tuple(x.shape)


def _short(x: Any, width: int = 60) -> str:
    """``repr(x)`` cut to ``width`` characters, for a message."""
    r = repr(x)
    return r if len(r) <= width else r[: width - 3] + "..."


def _dtype(x: Any) -> Any:
    """The backend dtype of ``x``."""
    return _raw(x).dtype


def _batched(*xs: Any) -> bool:
    return any(isinstance(x, Batched) for x in xs)


def _bxp(x: Any) -> Any:
    return backend_namespace(_raw(x))


def _device(x: Any) -> Any:
    return array_api_compat.device(_raw(x))


def _axis(axis: Any, dim: Any, func: str, default: int = -1) -> Any:
    if dim is not None:
        if axis is not None and axis != dim:
            msg = f"{func}: give axis= or its alias dim=, not both (got axis={axis!r}, dim={dim!r})"
            raise XpgradValueError(msg)
        return dim
    return default if axis is None else axis


def _detached_max(x: Any, axis: Any) -> Any:
    """max over ``axis`` (keepdims) as a constant backend array, with non-finite maxima set to 0."""
    if isinstance(x, Batched):  # (each example's own maximum: a batched constant)
        mb = xg.stop_gradient(xg.max(x, axis=axis, keepdims=True))
        return xg.where(xg.isfinite(mb), mb, 0.0)
    bxp = _bxp(x)
    m = bxp.max(_data(x), axis=axis, keepdims=True)
    return bxp.where(bxp.isfinite(m), m, bxp.zeros_like(m))


def _half(x: Any) -> Any:
    """The dtype of ``x`` if it is float16 or bfloat16, else None."""
    return _dtype(x) if is_half(_raw(x)) else None


def _check_reduction(reduction: str, func: str, allowed: tuple[str, ...] = _REDUCTIONS) -> None:
    if reduction not in allowed:
        msg = f"{func}: reduction must be one of {list(allowed)}, got {reduction!r}"
        raise XpgradValueError(msg)


def _reduce(loss: Any, reduction: str) -> Any:
    if reduction == "none":
        return loss
    total = xg.sum(loss)
    if reduction == "sum":
        return total
    return total / max(math.prod(loss.shape), 1) if loss.shape else total


def _softplus0(z: Any) -> Any:
    """log(1 + exp(z)) without overflow for any z.

    ``max(z, 0) + log1p(exp(-|z|))``, written with ``where`` so that ``z <= 0`` (0 included)
    takes the branch ``log1p(exp(z))``, analytic there: the derivatives at 0 are the
    exact ones at every order (1/2, then 1/4), not those of ``|z|``'s kink.
    """
    pos = z > 0
    return xg.where(pos, z, 0.0) + xg.log1p(xg.exp(xg.where(pos, -z, z)))


# ---------------------------------------------------------------------- layers
def linear(input: Any, weight: Any, bias: Any = None) -> Tensor:
    """``input @ weight.T + bias``; ``weight`` has shape ``(out_features, in_features)``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.linear(xg.asarray([[1.0, 2.0]]), xg.asarray([[1.0, 1.0]]), xg.asarray([0.5]))
        Tensor([[3.5]], dtype=float64, device=cpu)
    """
    check_dtype(input, "linear", weight, bias)
    try:
        out = xg.matmul(input, xg.matrix_transpose(weight))
    except Exception:  # the product's own message names neither linear nor in_features
        _check_linear(input, weight, "linear")
        raise
    return out if bias is None else out + bias


def _check_linear(input: Any, weight: Any, func: str) -> None:
    """Raise naming ``func`` and both shapes if ``input``'s last axis is not ``weight``'s ``in_features``.

    Run where the product failed, not before every one (a forward that works pays nothing)."""
    if not hasattr(input, "shape"):  # torch: "linear(): argument 'input' must be Tensor, not list"
        msg = (f"{func}: the input must be an array or an xpgrad Tensor, not {type(input).__name__} "
               f"{_short(input)}; convert it first with xg.asarray(...)")
        raise XpgradTypeError(msg)
    xs, ws = _shape(input), _shape(weight)
    if len(ws) != 2:
        msg = f"{func}: weight must have shape (out_features, in_features), got {ws}"
        raise XpgradValueError(msg)
    if not xs or xs[-1] != ws[1]:
        msg = (f"{func}: expected an input of shape (..., {ws[1]}) (in_features={ws[1]}, weight {ws}), "
               f"got shape {xs}")
        raise XpgradValueError(msg)


def bilinear(input1: Any, input2: Any, weight: Any, bias: Any = None) -> Tensor:
    """``y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``.

    ``weight`` has shape ``(out_features, in1_features, in2_features)``; the leading
    axes of the two inputs must agree.

    Examples:
        >>> import xpgrad as xg
        >>> w = xg.reshape(xg.arange(8.0), (2, 2, 2))
        >>> xg.nn.functional.bilinear(xg.asarray([[1.0, 2.0]]), xg.asarray([[1.0, -1.0]]), w)
        Tensor([[-3., -3.]], dtype=float64, device=cpu)
    """
    check_dtype(input1, "bilinear", weight, bias, what="input1")
    check_dtype(input2, "bilinear", weight, bias, what="input2")
    s1, s2, sw = (_shape(a) for a in (input1, input2, weight))
    if len(sw) != 3 or not s1 or not s2 or s1[-1] != sw[1] or s2[-1] != sw[2] or s1[:-1] != s2[:-1]:
        msg = (f"bilinear: expected inputs (..., {sw[1] if len(sw) == 3 else 'in1'}) and "
               f"(..., {sw[2] if len(sw) == 3 else 'in2'}) with the same leading axes and weight "
               f"(out, in1, in2), got {s1}, {s2} and {sw}")
        raise XpgradValueError(msg)
    t = xg.tensordot(input1, weight, axes=([len(s1) - 1], [1]))  # (..., out, in2)
    y = xg.sum(t * xg.expand_dims(input2, axis=-2), axis=-1)
    return y if bias is None else y + bias


def dropout(input: Any, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``; identity unless training.

    The mask comes from [`xpgrad.random`][xpgrad.random], so the policy's seed makes it reproducible.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.ones(4)
        >>> xg.nn.functional.dropout(x, 0.5, training=False) is x
        True
        >>> with xg.default_device(seed=0):
        ...     xg.nn.functional.dropout(x, 0.5)
        Tensor([0., 2., 2., 2.], dtype=float64, device=cpu)
    """
    if not 0.0 <= p <= 1.0:
        msg = f"dropout: p must be in [0, 1], got {p!r}"
        raise XpgradValueError(msg)
    if not training or p == 0.0:
        return input if isinstance(input, Tensor) else Tensor(input)
    name = dtype_name(_dtype(input))
    if not is_float(name):
        msg = f"dropout: expected a floating tensor, got dtype {name}"
        raise XpgradTypeError(msg)
    if p == 1.0:
        return input * 0.0
    # inside vmap the mask has the example's shape: one draw shared by every example, or one per
    # example (a batched mask), as vmap's randomness says
    mask = xg.random.bernoulli(1.0 - p, _shape(input), dtype=name)
    if isinstance(mask, Batched):
        mask = from_phys(Tensor(move_array(mask._inner, _bxp(input), _device(input))), mask._levels)
    else:
        mask = move_array(mask, _bxp(input), _device(input))
    return input * (mask * (1.0 / (1.0 - p)))


# embedding as one primitive, ``nn.embedding`` (the weight, then flat indices), on the libraries
# with a kernel (issue 30): torch's ``embedding`` and ``embedding_dense_backward`` (the
# composition's gradient, take's scatter-add, sorts the indices). Elsewhere, and as their
# reference, the composition: ``take`` rows, the padding row's detached. The VJP is linear in
# the cotangent: with ``create_graph`` it is the composition's own (take's VJP), any order.
def _emb_fwd(xp: Any, w: Any, idx: Any, *, padding_idx: int | None) -> Any:
    f = native_kernel(xp, "embedding")
    return xp.take(w, idx, axis=0) if f is None else f(w, idx)


def _emb_vjp(xp: Any, g: Any, ans: Any, w: Any, idx: Any, *, padding_idx: int | None) -> Any:
    f = None if is_xpgrad(xp) else native_kernel(xp, "embedding_vjp")
    if f is not None:
        return f(g, idx, int(w.shape[0]), padding_idx)
    if padding_idx is not None:
        ri = _raw(idx)
        keep = _bxp(ri).reshape(ri != padding_idx, (-1, 1))
        g = xp.where(Tensor(keep) if is_xpgrad(xp) else keep, g, xp.zeros_like(g))
    return _take_vjp(xp, g, None, w, idx, axis=0)


def _emb_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """vmap: batched indices fold into one list; a batched weight's examples stack into one table
    (each example's indices offset by its table's rows)."""
    w, idx = xs
    if not bs[0]:
        s = tuple(int(d) for d in idx.shape)
        out = apply(prim, (w, _op("reshape", idx, shape=(-1,))), kw)
        return _op("reshape", out, shape=(*s, int(w.shape[-1])))
    w, idx = full(xs, bs, K)
    ws, s = tuple(int(d) for d in w.shape), tuple(int(d) for d in idx.shape)
    nb, rows = math.prod(ws[:K]), ws[K]
    bxp = _bxp(idx)
    offs = bxp.reshape(bxp.arange(nb, dtype=_dtype(idx), device=_device(idx)) * rows, (nb, 1))
    flat = _raw(_op("reshape", idx, shape=(nb, -1))) + offs
    out = apply(prim, (_op("reshape", w, shape=(nb * rows, ws[-1])), bxp.reshape(flat, (-1,))), {"padding_idx": None})
    out = _op("reshape", out, shape=(*s, ws[-1]))
    if kw["padding_idx"] is not None:  # (the padding row of each example's table: no gradient)
        keep = bxp.reshape(_raw(idx) != kw["padding_idx"], (*s, 1))
        out = _op("where", keep, out, _op("stop_gradient", out))
    return out


def _torch_embedding(w: Any, idx: Any) -> Any:
    import torch

    return torch.nn.functional.embedding(idx, w)


def _torch_embedding_vjp(g: Any, idx: Any, rows: int, padding_idx: int | None) -> Any:
    import torch

    return torch.ops.aten.embedding_dense_backward(g, idx, rows, -1 if padding_idx is None else padding_idx, False)


_NATIVE_FNS["torch"]["embedding"] = _torch_embedding
_NATIVE_FNS["torch"]["embedding_vjp"] = _torch_embedding_vjp
_embedding = primitive("nn.embedding", _emb_fwd, save=(1,), chapter="nn", batch=_emb_batch)
_embedding.defvjp(_emb_vjp, None)
_embedding.defjvp(lambda xp, t, ans, w, idx, **kw: _call_emb(xp, t, idx, kw), None)


def _call_emb(xp: Any, t: Any, idx: Any, kw: dict[str, Any]) -> Any:
    """The tangent: the tangent's rows, none for the padding row (the VJP's transpose)."""
    rows = apply(_embedding, (t, idx), kw) if is_xpgrad(xp) else _emb_fwd(xp, t, idx, **kw)
    if kw["padding_idx"] is None:
        return rows
    ri = _raw(idx)
    keep = _bxp(ri).reshape(ri != kw["padding_idx"], (-1, 1))
    return xp.where(Tensor(keep) if is_xpgrad(xp) else keep, rows, xp.zeros_like(rows))


def embedding(input: Any, weight: Any, padding_idx: int | None = None) -> Tensor:
    """Rows of ``weight`` picked by the integer ``input``: shape ``input.shape + (embedding_dim,)``.

    The row ``padding_idx`` receives no gradient.

    Examples:
        >>> import xpgrad as xg
        >>> w = xg.asarray([[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])
        >>> xg.nn.functional.embedding(xg.asarray([[2, 1]]), w)
        Tensor([[[3., 4.],
                 [1., 2.]]], dtype=float64, device=cpu)
    """
    check_indices(input, "embedding")
    wshape = _shape(weight)
    ishape = _shape(input)
    if isinstance(input, Batched):  # (every example's indices are checked, on the physical array)
        _check_indices(_raw(input), wshape[0], None, "embedding", _bxp(input))
        ixp: Any = xg
        flat = xg.reshape(input, (-1,))
    else:
        idx = _data(input)
        ixp = _bxp(idx)
        idx = _check_indices(idx, wshape[0], None, "embedding", ixp)
        flat = ixp.reshape(idx, (-1,))
    if len(wshape) == 2 and _bxp(weight) is _bxp(input) and native_kernel(_bxp(weight), "embedding") is not None:
        pad = None if padding_idx is None else padding_idx % wshape[0]
        return xg.reshape(apply(_embedding, (weight, flat), {"padding_idx": pad}), (*ishape, wshape[1]))
    rows = xg.take(weight, flat, axis=0)
    if padding_idx is not None:
        pad = padding_idx % wshape[0]
        keep = ixp.reshape(flat != pad, (-1, 1))
        rows = xg.where(keep, rows, rows.detach())
    return xg.reshape(rows, (*ishape, wshape[1]))


# layer_norm as one primitive, ``nn.layer_norm`` (x, then the weight and the bias where given:
# ``affine`` says which), on every backend: torch's ``native_layer_norm`` and its backward
# kernel on torch (issue 30), the composition elsewhere and as their reference. Its hidden
# outputs are the mean and ``rstd = 1 / sqrt(var + eps)`` over the normalized axes (keepdims),
# which the rules read (nothing else is saved); they are outputs of this node, so the VJP
# takes their cotangents too. The rules are written against ``xp`` (with ``create_graph``
# they run on Tensors: any order).
def _ln_axes(x: Any, k: int) -> tuple[int, ...]:
    n = len(x.shape)
    return tuple(range(n - k, n))


def _ln_fwd(xp: Any, x: Any, *wb: Any, k: int, eps: float, affine: tuple[bool, bool]) -> tuple[Any, Any, Any]:
    w = wb[0] if affine[0] else None
    b = wb[-1] if affine[1] else None
    f = native_kernel(xp, "layer_norm")
    if f is not None:
        return f(x, w, b, k=k, eps=eps)
    axes = _ln_axes(x, k)
    n = math.prod(int(x.shape[a]) for a in axes)
    mu = xp.sum(x, axis=axes, keepdims=True) / n
    d = x - mu
    rstd = 1.0 / xp.sqrt(xp.sum(d * d, axis=axes, keepdims=True) / n + eps)
    y = d * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mu, rstd


def _ln_vjp_portable(xp: Any, g: Any, x: Any, w: Any, mu: Any, rstd: Any, gmu: Any, grstd: Any, k: int,
                     affine: tuple[bool, bool]) -> list[Any]:
    axes = _ln_axes(x, k)
    lead = tuple(range(len(x.shape) - k))
    n = math.prod(int(x.shape[a]) for a in axes)
    xhat = (x - mu) * rstd
    out: list[Any] = []
    if g is None:
        dx = xp.zeros_like(x)
    else:
        gx = g if w is None else g * w
        dx = rstd * (gx - xp.sum(gx, axis=axes, keepdims=True) / n
                     - xhat * (xp.sum(gx * xhat, axis=axes, keepdims=True) / n))
    if gmu is not None:  # (reached only through the rules' own use of the mean: higher order)
        dx = dx + gmu / n
    if grstd is not None:  # d rstd / dx = -rstd**2 xhat / n
        dx = dx - grstd * rstd * rstd * xhat / n
    out.append(dx)
    if affine[0]:
        out.append(None if g is None else xp.sum(g * xhat, axis=lead))
    if affine[1]:
        out.append(None if g is None else xp.sum(g, axis=lead))
    return out


def _ln_vjp(i: int) -> Any:
    def rule(xp: Any, g: Any, ans: Any, x: Any, *wb: Any, k: int, eps: float, affine: tuple[bool, bool]) -> Any:
        gy, gmu, grstd = g
        w = wb[0] if affine[0] else None

        def compute() -> Any:
            mu, rstd = ans[1], ans[2]
            if is_xpgrad(xp):  # (the statistics as functions of x: their own gradients follow)
                axes = _ln_axes(x, k)
                n = math.prod(int(x.shape[a]) for a in axes)
                mu = xp.sum(x, axis=axes, keepdims=True) / n
                d = x - mu
                rstd = 1.0 / xp.sqrt(xp.sum(d * d, axis=axes, keepdims=True) / n + eps)
                f = None
            else:
                f = None if gmu is not None or grstd is not None or gy is None else native_kernel(xp, "layer_norm_vjp")
            if f is None:
                return _ln_vjp_portable(xp, gy, x, w, mu, rstd, gmu, grstd, k, affine)
            b = wb[-1] if affine[1] else None
            return f(gy, x, mu, rstd, w, b, k=k)

        return _joint("layer_norm", i, (gy, gmu, grstd, ans[1]), compute)  # (ans[1]: this node's own)

    return rule


def _ln_jvp(i: int) -> Any:
    def rule(xp: Any, t: Any, ans: Any, x: Any, *wb: Any, k: int, eps: float, affine: tuple[bool, bool]) -> Any:
        mu, rstd = ans[1], ans[2]
        xhat = (x - mu) * rstd
        if i > 0:  # the weight's or the bias's tangent
            return (xhat * t if i == 1 and affine[0] else t), None, None
        axes = _ln_axes(x, k)
        n = math.prod(int(x.shape[a]) for a in axes)
        tmu = xp.sum(t, axis=axes, keepdims=True) / n
        s = xp.sum(t * xhat, axis=axes, keepdims=True) / n
        ty = rstd * (t - tmu - xhat * s)
        if affine[0]:
            ty = ty * wb[0]
        return ty, tmu, -rstd * rstd * s

    return rule


def _ln_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """vmap: the batch axes are more leading axes of x; a batched weight or bias is applied after."""
    if not any(bs[1:]):
        return apply(prim, tuple(xs), kw)
    y, mu, rstd = apply(prim, (xs[0],), {**kw, "affine": (False, False)})
    r = len(xs[0].shape) - K if bs[0] else len(xs[0].shape)
    rest = list(zip(xs[1:], bs[1:], strict=True))
    if kw["affine"][0]:
        w, bw = rest.pop(0)
        y = _op("multiply", y, _pad(w, K, r) if bw else w)
    if kw["affine"][1]:
        b, bb = rest.pop(0)
        y = _op("add", y, _pad(b, K, r) if bb else b)
    return y, mu, rstd


def _torch_layer_norm(x: Any, w: Any, b: Any, *, k: int, eps: float) -> tuple[Any, Any, Any]:
    import torch

    return torch.ops.aten.native_layer_norm(x, list(x.shape[x.ndim - k:]), w, b, eps)


def _torch_layer_norm_vjp(g: Any, x: Any, mu: Any, rstd: Any, w: Any, b: Any, *, k: int) -> list[Any]:
    import torch

    mask = [True, w is not None, b is not None]
    dx, dw, db = torch.ops.aten.native_layer_norm_backward(g, x, list(x.shape[x.ndim - k:]), mu, rstd, w, b, mask)
    return [dx] + [d for d, m in zip((dw, db), mask[1:], strict=True) if m]


_NATIVE_FNS["torch"]["layer_norm"] = _torch_layer_norm
_NATIVE_FNS["torch"]["layer_norm_vjp"] = _torch_layer_norm_vjp
_layer_norm = primitive("nn.layer_norm", _ln_fwd, save=None, save_ans=True, multi=True, chapter="nn",
                        batch=_ln_batch)
_layer_norm.defvjp(_ln_vjp(0), _ln_vjp(1), _ln_vjp(2))
_layer_norm.defjvp(_ln_jvp(0), _ln_jvp(1), _ln_jvp(2))


def layer_norm(input: Any, normalized_shape: int | tuple[int, ...], weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing ``normalized_shape`` axes (mean 0, biased variance 1), then scale and shift.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.layer_norm(xg.asarray([[1.0, 3.0]]), (2,), eps=0.0)
        Tensor([[-1.,  1.]], dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    check_dtype(input, "layer_norm", weight, bias)
    check_float(input, "layer_norm")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    xshape = _shape(input)
    k = len(shape)
    if k == 0 or xshape[len(xshape) - k:] != shape:
        msg = f"layer_norm: normalized_shape {shape} must equal the trailing axes of the input shape {xshape}"
        raise XpgradValueError(msg)
    if native_kernel(_bxp(input), "layer_norm") is not None:
        args = tuple(a for a in (input, weight, bias) if a is not None)
        kw = {"k": k, "eps": float(eps), "affine": (weight is not None, bias is not None)}
        return apply(_layer_norm, args, kw)[0]
    axes = tuple(range(len(xshape) - k, len(xshape)))
    n = math.prod(shape)
    mu = xg.sum(input, axis=axes, keepdims=True) / n
    d = input - mu
    var = xg.sum(d * d, axis=axes, keepdims=True) / n
    y = d / xg.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def one_hot(input: Any, num_classes: int = -1) -> Tensor:
    """Integer class indices to one-hot rows (int64, a constant); ``num_classes=-1`` uses ``max + 1``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.one_hot(xg.asarray([0, 2]), 3)
        Tensor([[1, 0, 0],
                [0, 0, 1]], dtype=int64, device=cpu)
    """
    if isinstance(input, Batched):
        if num_classes < 0:
            msg = ("one_hot: inside vmap num_classes must be given (with -1 the output's shape would depend "
                   "on each example's maximum)")
            raise XpgradValueError(msg)
        bxp = _bxp(input)
        classes = bxp.arange(num_classes, device=_device(input), dtype=_dtype(input))
        return xg.astype(xg.stop_gradient(xg.expand_dims(input, axis=-1)) == classes, input.dtype)
    idx = _data(input)
    bxp = _bxp(idx)
    if num_classes < 0:
        num_classes = int(bxp.max(idx)) + 1
    classes = bxp.arange(num_classes, device=_device(idx), dtype=idx.dtype)
    return Tensor(bxp.astype(bxp.expand_dims(idx, axis=-1) == classes, idx.dtype))


# ---------------------------------------------------------------------- activations
def relu(input: Any) -> Tensor:
    """``max(x, 0)``; the gradient at 0 is 0 (as in PyTorch).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.relu(xg.asarray([-1.0, 2.0]))
        Tensor([0., 2.], dtype=float64, device=cpu)
    """
    return apply(_relu, (input,), {})


# relu: one maximum forward, one mask multiply backward (in place into a donated gradient).
# ``where(x > 0, x, 0)`` costs a compare and two selects, which NumPy runs ~5x slower than
# a multiply. The mask is cast to the gradient's dtype (the standard has no bool * float).
# A non-finite upstream gradient at an inactive unit gives NaN there (0 * inf), as in a
# hand-written NumPy backward; PyTorch gives 0.
_relu = primitive("nn.relu", lambda xp, x: xp.maximum(x, 0.0), save=(), save_ans=True, chapter="nn", batch=pointwise)
_relu.defvjp(lambda xp, g, ans, x: scale(xp, g, xp.astype(ans > 0, g.dtype)))
defjvp_from_vjp(_relu)


def leaky_relu(input: Any, negative_slope: float = 0.01) -> Tensor:
    """``x`` where positive, else ``negative_slope * x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.leaky_relu(xg.asarray([-1.0, 2.0]), 0.1)
        Tensor([-0.1,  2. ], dtype=float64, device=cpu)
    """
    return xg.where(input > 0, input, input * negative_slope)


def elu(input: Any, alpha: float = 1.0) -> Tensor:
    """``x`` where positive, else ``alpha * (exp(x) - 1)``; the gradient at 0 is ``alpha``, as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.elu(xg.asarray([0.0, 1.0]))
        Tensor([0., 1.], dtype=float64, device=cpu)
    """
    # where, not minimum(x, 0): at x == 0 the gradient is alpha (the exp branch's, as
    # PyTorch), not the alpha / 2 of minimum's tie split
    return xg.where(input > 0, input, alpha * xg.expm1(xg.where(input > 0, 0.0, input)))


def sigmoid(input: Any) -> Tensor:
    """The logistic function ``1 / (1 + exp(-x))``, without overflow for any ``x`` ([`xpgrad.special.expit`][xpgrad.special.expit]).

    One node whose derivative is ``s * (1 - s)`` everywhere (1/4 at 0).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.sigmoid(xg.asarray([0.0, -1000.0]))
        Tensor([0.5, 0. ], dtype=float64, device=cpu)
    """
    return expit(input)


def logsigmoid(input: Any) -> Tensor:
    """``log(sigmoid(x))``, finite for any ``x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.logsigmoid(xg.asarray([0.0, -1000.0]))
        Tensor([-6.93147181e-01, -1.00000000e+03], dtype=float64, device=cpu)
    """
    return -_softplus0(-input)


def tanh(input: Any) -> Tensor:
    """The hyperbolic tangent (``xpgrad.tanh``)."""
    return xg.tanh(input)


def silu(input: Any) -> Tensor:
    """``x * sigmoid(x)`` (also called swish).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.silu(xg.asarray([0.0, 1.0]))
        Tensor([0.        , 0.73105858], dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    return input * sigmoid(input)


def gelu(input: Any, approximate: str = "none") -> Tensor:
    """``x * Phi(x)`` with the exact normal CDF (``approximate="none"``) or its tanh approximation.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.gelu(xg.asarray([1.0]))
        Tensor([0.84134475], dtype=float64, device=cpu)
        >>> xg.nn.functional.gelu(xg.asarray([1.0]), approximate="tanh")
        Tensor([0.84119199], dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    if approximate == "none":
        return 0.5 * input * (1.0 + erf(input * (1.0 / math.sqrt(2.0))))
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (input + 0.044715 * (input * input * input))
        return 0.5 * input * (1.0 + xg.tanh(inner))
    msg = f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}"
    raise XpgradValueError(msg)


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold`` (as in PyTorch).

    At ``beta * x == threshold`` the soft branch holds, gradient ``sigmoid(threshold)``, as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.softplus(xg.asarray([0.0, 30.0]))
        Tensor([ 0.69314718, 30.        ], dtype=float64, device=cpu)
    """
    bx = input * beta
    # where, not minimum(bx, threshold): at beta * x == threshold the gradient is the soft
    # branch's sigmoid(threshold), as PyTorch, not half of it (minimum's tie split)
    above = bx > threshold
    soft = xg.log1p(xg.exp(xg.where(above, 0.0, bx))) / beta
    return xg.where(above, input, soft)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def celu(input: Any, alpha: float = 1.0) -> Tensor:
    """``x`` where positive, else ``alpha * (exp(x / alpha) - 1)``; the gradient at 0 is 1, as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.celu(xg.asarray([-1.0, 2.0]), alpha=2.0)
        Tensor([-0.78693868,  2.        ], dtype=float64, device=cpu)
    """
    if alpha == 0:
        msg = f"celu: alpha must not be 0, got {alpha!r}"
        raise XpgradValueError(msg)
    pos = input > 0
    return xg.where(pos, input, alpha * xg.expm1(xg.where(pos, 0.0, input) * (1.0 / alpha)))


def selu(input: Any) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalizing constants; the gradient at 0 is ``scale * alpha``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.selu(xg.asarray([-1.0, 1.0]))
        Tensor([-1.11133074,  1.05070099], dtype=float64, device=cpu)
    """
    return _SELU_SCALE * elu(input, _SELU_ALPHA)


def hardtanh(input: Any, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """``x`` clipped to ``[min_val, max_val]``; the gradient is 0 at both ends, as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.hardtanh(xg.asarray([-2.0, 0.5, 2.0]))
        Tensor([-1. ,  0.5,  1. ], dtype=float64, device=cpu)
    """
    if min_val > max_val:
        msg = f"hardtanh: min_val must not exceed max_val, got {min_val!r} and {max_val!r}"
        raise XpgradValueError(msg)
    # the scalar branches make the gradient 0 at both ends (PyTorch's convention)
    return xg.where(input <= min_val, min_val, xg.where(input >= max_val, max_val, input))


def relu6(input: Any) -> Tensor:
    """``min(max(x, 0), 6)``: `hardtanh` on ``[0, 6]`` (gradient 0 at 0 and at 6, as in PyTorch).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.relu6(xg.asarray([-1.0, 3.0, 7.0]))
        Tensor([0., 3., 6.], dtype=float64, device=cpu)
    """
    return hardtanh(input, 0.0, 6.0)


def hardsigmoid(input: Any) -> Tensor:
    """``relu6(x + 3) / 6``; the gradient is 0 at -3 and 3, as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.hardsigmoid(xg.asarray([-4.0, 0.0, 4.0]))
        Tensor([0. , 0.5, 1. ], dtype=float64, device=cpu)
    """
    return hardtanh(input, -3.0, 3.0) * (1.0 / 6.0) + 0.5


def hardswish(input: Any) -> Tensor:
    """``x * relu6(x + 3) / 6``; the gradient is 0 at -3 and 1 at 3, as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.hardswish(xg.asarray([-4.0, 1.0, 4.0]))
        Tensor([0.        , 0.66666667, 4.        ], dtype=float64, device=cpu)
    """
    # PyTorch's backward: 0 up to -3, x / 3 + 1/2 inside (-3, 3), 1 from 3 on
    mid = (input > -3.0) & (input < 3.0)
    middle = input * (input + 3.0) * (1.0 / 6.0)
    return xg.where(mid, middle, xg.where(input >= 3.0, input, 0.0))


def softshrink(input: Any, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0 (gradient 0 at the kinks).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.softshrink(xg.asarray([-1.0, 0.2, 1.0]))
        Tensor([-0.5,  0. ,  0.5], dtype=float64, device=cpu)
    """
    if lambd < 0:
        msg = f"softshrink: lambd must be non-negative, got {lambd!r}"
        raise XpgradValueError(msg)
    return xg.where(input > lambd, input - lambd, xg.where(input < -lambd, input + lambd, 0.0))


def hardshrink(input: Any, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0 (gradient 0 at the kinks).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.hardshrink(xg.asarray([-1.0, 0.2, 1.0]))
        Tensor([-1.,  0.,  1.], dtype=float64, device=cpu)
    """
    return xg.where((input > lambd) | (input < -lambd), input, 0.0)


def tanhshrink(input: Any) -> Tensor:
    """``x - tanh(x)``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.tanhshrink(xg.asarray([1.0]))
        Tensor([0.23840584], dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    return input - xg.tanh(input)


def softsign(input: Any) -> Tensor:
    """``x / (1 + |x|)``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.softsign(xg.asarray([-1.0, 3.0]))
        Tensor([-0.5 ,  0.75], dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    return input / (1.0 + xg.abs(input))


def mish(input: Any) -> Tensor:
    """``x * tanh(softplus(x))``, without overflow for any ``x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.mish(xg.asarray([0.0, 1.0]))
        Tensor([0.        , 0.86509839], dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    return input * xg.tanh(_softplus0(input))


def threshold(input: Any, threshold: float, value: float) -> Tensor:
    """``x`` where ``x > threshold``, else ``value`` (gradient 0 at ``threshold``, as in PyTorch).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.threshold(xg.asarray([0.5, 2.0]), 1.0, -1.0)
        Tensor([-1.,  2.], dtype=float64, device=cpu)
    """
    return xg.where(input > threshold, input, value)


def glu(input: Any, dim: int = -1) -> Tensor:
    """The gated linear unit: ``a * sigmoid(b)``, ``a`` and ``b`` the two halves of ``input`` along ``dim``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.glu(xg.asarray([[1.0, 2.0, 0.0, 100.0]]))
        Tensor([[0.5, 2. ]], dtype=float64, device=cpu)
    """
    shape = _shape(input)
    nd = len(shape)
    if not -nd <= dim < nd:
        msg = f"glu: dim {dim!r} is out of range for an input of {nd} dimensions"
        raise XpgradIndexError(msg)
    d = dim % nd
    n = shape[d]
    if n % 2:
        msg = f"glu: the size of dim {dim} must be even, got {n}"
        raise XpgradValueError(msg)
    before = (slice(None),) * d
    first = (*before, slice(0, n // 2), Ellipsis)
    second = (*before, slice(n // 2, n), Ellipsis)
    a, b = input[first], input[second]
    return a * sigmoid(b)


def prelu(input: Any, weight: Any) -> Tensor:
    """``x`` where positive, else ``weight * x``, one slope per channel (axis 1); the gradient at 0 is ``weight``.

    ``weight`` has one element (shared) or one per channel (``input.shape[1]``).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.prelu(xg.asarray([[-1.0, 2.0]]), xg.asarray([0.25]))
        Tensor([[-0.25,  2.  ]], dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    wshape = _shape(weight)
    n = math.prod(wshape)
    shape = _shape(input)
    if len(wshape) > 1:
        msg = f"prelu: weight must be 0-d or 1-d, got shape {wshape}"
        raise XpgradValueError(msg)
    if n != 1:
        channels = shape[1] if len(shape) >= 2 else (shape[0] if shape else 1)
        if n != channels:
            msg = f"prelu: weight has {n} elements for {channels} channels (input shape {shape})"
            raise XpgradValueError(msg)
        if len(shape) >= 2:
            weight = xg.reshape(weight, (n,) + (1,) * (len(shape) - 2))
    return xg.where(input > 0, input, input * weight)


def rrelu(input: Any, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """Randomized leaky ReLU: slope ``(lower + upper) / 2`` for ``x <= 0`` when not training.

    When training, each element's slope is drawn uniformly from ``[lower, upper)`` by
    `xpgrad.random` (the policy's seed makes it reproducible, as for dropout).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.rrelu(xg.asarray([-1.0, 2.0]), 0.1, 0.3)
        Tensor([-0.2,  2. ], dtype=float64, device=cpu)
    """
    if not 0 <= lower <= upper:
        msg = f"rrelu: need 0 <= lower <= upper, got lower={lower!r} and upper={upper!r}"
        raise XpgradValueError(msg)
    if not training:
        return leaky_relu(input, (lower + upper) / 2.0)
    name = dtype_name(_dtype(input))
    if not is_float(name):
        msg = f"rrelu: expected a floating tensor, got dtype {name}"
        raise XpgradTypeError(msg)
    slopes = xg.random.uniform(_shape(input), low=lower, high=upper, dtype=name)
    slopes = move_array(slopes, _bxp(input), _device(input))
    return xg.where(input > 0, input, input * slopes)


def log_softmax(input: Any, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """``x - logsumexp(x)`` along ``axis`` (default -1), shifted by the maximum: no overflow.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.log_softmax(xg.asarray([0.0, 1000.0]))
        Tensor([-1000.,     0.], dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    ax = _axis(axis, dim, "log_softmax")
    half = _half(input)
    if half is not None:  # float16, bfloat16: computed in float32, rounded once (torch's)
        return xg.astype(log_softmax(xg.astype(input, xg.float32), ax), half)
    s = input - _detached_max(input, ax)
    return s - xg.log(xg.sum(xg.exp(s), axis=ax, keepdims=True))


def softmax(input: Any, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis`` (default -1), shifted by the maximum: no overflow.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.softmax(xg.asarray([0.0, 1000.0]))
        Tensor([0., 1.], dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    ax = _axis(axis, dim, "softmax")
    half = _half(input)
    if half is not None:  # float16, bfloat16: computed in float32, rounded once (torch's)
        return xg.astype(softmax(xg.astype(input, xg.float32), ax), half)
    e = xg.exp(input - _detached_max(input, ax))
    return e / xg.sum(e, axis=ax, keepdims=True)


# ---------------------------------------------------------------------- attention
def _neg_inf_where(mask: Any, like: Any) -> Any:
    """A float additive mask: ``-inf`` where the boolean ``mask`` is True, 0 elsewhere (``like``'s dtype)."""
    if isinstance(mask, Batched):
        zero = xg.zeros_like(xg.astype(mask, like.dtype))
        return xg.where(mask, zero - math.inf, zero)
    m = _data(mask)
    bxp = _bxp(m)
    zero = bxp.zeros(tuple(m.shape), dtype=_dtype(like), device=_device(m))
    return bxp.where(m, zero - math.inf, zero)


def _is_bool(mask: Any) -> bool:
    return dtype_name(_dtype(mask)) == "bool"


# Scaled dot-product attention as one primitive, ``nn.scaled_dot_product_attention``, on the
# libraries with a fused kernel (torch's flash attention on CPU; issue 30); the composition
# below it (matmul, scale, mask, safe softmax, matmul) everywhere else, and as the reference.
# Its arguments are ``q (..., L, E)``, ``k (..., S, E)``, ``v (..., S, Ev)`` of equal leading
# axes and a constant float mask (additive, ``-inf`` where masked) broadcast to ``(..., L, S)``,
# or None. Its second output is each query's log-sum-exp of the scores (never shown to the
# user, as the cross entropy's ``logp``): the rules recompute the weights as ``exp(s - lse)``
# (one matmul; nothing of size L x S is saved). A fully masked query has lse 0 (its weights
# ``exp(-inf)`` are 0: a zero output row and zero gradients, torch's ``_safe_softmax``). The
# rules are written against ``xp``: with ``create_graph`` they run on Tensors and the
# gradient of the gradient is theirs; the lse they read is an output of this very node, so
# the VJP takes its cotangent too (``p * glse``).
def _sdpa_scores(xp: Any, q: Any, k: Any, mask: Any, *, scale: float, is_causal: bool) -> Any:
    s = xp.matmul(q, xp.matrix_transpose(k)) * scale
    if is_causal:
        n_q, n_k = int(q.shape[-2]), int(k.shape[-2])
        bxp = _bxp(q)
        keep = bxp.reshape(bxp.arange(n_q, device=_device(q)), (-1, 1)) >= bxp.reshape(
            bxp.arange(n_k, device=_device(q)), (1, -1))
        s = s + _neg_inf_where(bxp.logical_not(keep), s)
    if mask is not None:
        s = s + mask
    return s


def _sdpa_portable(xp: Any, q: Any, k: Any, v: Any, mask: Any, *, scale: float, is_causal: bool) -> tuple[Any, Any]:
    s = _sdpa_scores(xp, q, k, mask, scale=scale, is_causal=is_causal)
    m = xp.max(s, axis=-1, keepdims=True)
    m = xp.where(xp.isfinite(m), m, xp.zeros_like(m))
    e = xp.exp(s - m)
    den = xp.sum(e, axis=-1, keepdims=True)
    den = xp.where(den == 0, xp.ones_like(den), den)
    return xp.matmul(e / den, v), (m + xp.log(den))[..., 0]


def _sdpa_weights(xp: Any, q: Any, k: Any, mask: Any, lse: Any, **kw: Any) -> Any:
    return xp.exp(_sdpa_scores(xp, q, k, mask, **kw) - xp.expand_dims(lse, axis=-1))


def _sdpa_vjp_portable(xp: Any, g: Any, glse: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, mask: Any, *,
                       scale: float, is_causal: bool) -> tuple[Any, Any, Any]:
    p = _sdpa_weights(xp, q, k, mask, lse, scale=scale, is_causal=is_causal)
    if g is None:
        ds = p * xp.expand_dims(glse, axis=-1)
        dv = xp.zeros_like(v)
    else:
        dv = xp.matmul(xp.matrix_transpose(p), g)
        dp = xp.matmul(g, xp.matrix_transpose(v))
        delta = xp.sum(g * out, axis=-1, keepdims=True)  # = sum(dp * p) per query
        if glse is not None:
            delta = delta - xp.expand_dims(glse, axis=-1)
        ds = p * (dp - delta)
    return xp.matmul(ds, k) * scale, xp.matmul(xp.matrix_transpose(ds), q) * scale, dv


def _sdpa_fwd(xp: Any, q: Any, k: Any, v: Any, mask: Any = None, *, scale: float, is_causal: bool) -> tuple[Any, Any]:
    f = native_kernel(xp, "scaled_dot_product_attention")
    if f is None:
        return _sdpa_portable(xp, q, k, v, mask, scale=scale, is_causal=is_causal)
    return f(q, k, v, mask, scale=scale, is_causal=is_causal)


#: per primitive, the last VJP's gradients, handed out one by one (the rules are per argument;
#: a library's backward kernel computes them all at once): name -> [key objects, gradients]
_JOINT: dict[str, list[Any]] = {}


def _joint(name: str, i: int, key: tuple[Any, ...], compute: Any) -> Any:
    """Argument ``i``'s part of the gradients ``compute()`` returns for the call ``key`` (objects
    compared by identity), computed once for the node's rules; dropped once every part is taken,
    once the cotangent is freed, or at the next call (a part taken already is computed again:
    another backward pass). The key is held by weak references where its objects allow."""
    last = _JOINT.get(name)
    if last is None or last[1][i] is None or len(last[0]) != len(key) \
            or not all(r() is b for r, b in zip(last[0], key, strict=True)):
        last = _JOINT[name] = [tuple(_weak(a) for a in key), list(compute())]
        cot = next((a for a in key if a is not None), None)  # (the cotangent: freed after the node's rules)
        try:
            weakref.finalize(cot, _drop_joint, name, last)
        except TypeError:  # (not weakly referable: kept until the next call)
            pass
    got = last[1]
    r, got[i] = got[i], None
    if all(x is None for x in got):
        del _JOINT[name]
    return r


def _weak(a: Any) -> Any:
    try:
        return weakref.ref(a)
    except TypeError:
        return lambda: a


def _drop_joint(name: str, entry: list[Any]) -> None:
    if _JOINT.get(name) is entry:
        del _JOINT[name]


def _sdpa_vjp(i: int) -> Any:
    def rule(xp: Any, g: Any, ans: Any, q: Any, k: Any, v: Any, mask: Any = None, **kw: Any) -> Any:
        gout, glse = g

        def compute() -> Any:
            f = None if is_xpgrad(xp) or glse is not None else native_kernel(xp, "scaled_dot_product_attention_vjp")
            if f is None:
                return _sdpa_vjp_portable(xp, gout, glse, q, k, v, ans[0], ans[1], mask, **kw)
            return f(gout, q, k, v, ans[0], ans[1], mask, **kw)

        return _joint("sdpa", i, (gout, glse, ans[1]), compute)  # (ans[1]: this node's own)

    return rule


def _sdpa_jvp(i: int) -> Any:
    def rule(xp: Any, t: Any, ans: Any, q: Any, k: Any, v: Any, mask: Any = None, *, scale: float,
             is_causal: bool) -> tuple[Any, Any]:
        lse = ans[1]
        p = _sdpa_weights(xp, q, k, mask, lse, scale=scale, is_causal=is_causal)
        if i == 2:
            return xp.matmul(p, t), None
        ts = (xp.matmul(t, xp.matrix_transpose(k)) if i == 0 else xp.matmul(q, xp.matrix_transpose(t))) * scale
        tlse = xp.sum(p * ts, axis=-1, keepdims=True)
        return xp.matmul(p * (ts - tlse), v), tlse[..., 0]

    return rule


def _sdpa_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    """vmap: the batch axes and the leading axes folded into one (every argument has them all)."""
    ys = full(xs, bs, K)
    qs = tuple(int(d) for d in ys[0].shape)
    lead = qs[:-2]
    flat = [None if y is None else _op("reshape", y, shape=(math.prod(lead), *(int(d) for d in y.shape[-2:])))
            for y in ys]
    out, lse = apply(prim, tuple(flat), kw)
    return _op("reshape", out, shape=(*lead, *(int(d) for d in out.shape[-2:]))), _op("reshape", lse, shape=(*lead, qs[-2]))


def _torch_sdpa(q: Any, k: Any, v: Any, mask: Any, *, scale: float, is_causal: bool) -> tuple[Any, Any]:
    """torch's flash attention on CPU (the kernel torch's own ``scaled_dot_product_attention`` runs)."""
    import torch

    if not _torch_flash_ok(q, k, v):
        from array_api_compat import torch as tnp

        return _sdpa_portable(tnp, q, k, v, mask, scale=scale, is_causal=is_causal)
    lead = tuple(q.shape[:-2])
    q4, k4, v4, m4 = (None if a is None else _as4(a) for a in (q, k, v, mask))
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q4, k4, v4, 0.0, is_causal, attn_mask=m4,
                                                                         scale=scale)
    return out.reshape((*lead, *out.shape[-2:])), lse.reshape((*lead, lse.shape[-1]))


def _torch_sdpa_vjp(g: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, mask: Any, *, scale: float,
                    is_causal: bool) -> tuple[Any, Any, Any]:
    import torch

    if not _torch_flash_ok(q, k, v):
        from array_api_compat import torch as tnp

        return _sdpa_vjp_portable(tnp, g, None, q, k, v, out, lse, mask, scale=scale, is_causal=is_causal)
    g4, q4, k4, v4, o4 = (_as4(a) for a in (g, q, k, v, out))
    m4 = None if mask is None else _as4(mask)
    l4 = lse if q.ndim == 4 else lse.reshape((1, -1, lse.shape[-1]))
    dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        g4.contiguous(), q4, k4, v4, o4, l4, 0.0, is_causal, attn_mask=m4, scale=scale)
    return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)


def _torch_flash_ok(q: Any, k: Any, v: Any) -> bool:
    """Whether torch's CPU flash kernel takes these (CPU tensors, one floating dtype, one head size)."""
    return (q.device.type == "cpu" and q.ndim >= 2 and q.shape[-1] == v.shape[-1]
            and str(q.dtype) in ("torch.float32", "torch.float64", "torch.bfloat16", "torch.float16"))


def _as4(a: Any) -> Any:
    """``(..., R, C)`` as the kernel's ``(B, H, R, C)``: the leading axes as heads of one batch."""
    return a if a.ndim == 4 else a.reshape((1, -1, *a.shape[-2:]))


_NATIVE_FNS["torch"]["scaled_dot_product_attention"] = _torch_sdpa
_NATIVE_FNS["torch"]["scaled_dot_product_attention_vjp"] = _torch_sdpa_vjp
_sdpa = primitive("nn.scaled_dot_product_attention", _sdpa_fwd, save=(0, 1, 2, 3), save_ans=True, multi=True,
                  chapter="nn", batch=_sdpa_batch)
_sdpa.defvjp(_sdpa_vjp(0), _sdpa_vjp(1), _sdpa_vjp(2), None)
_sdpa.defjvp(_sdpa_jvp(0), _sdpa_jvp(1), _sdpa_jvp(2), None)


def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(query @ key^T * scale + mask) @ value`` over the last two axes, PyTorch's definition.

    ``attn_mask``: boolean (True = may attend) or float (added to the scores),
    broadcasting to ``(..., L, S)``. A query that may attend to no key gets a zero
    output row and zero gradients, as in PyTorch. ``is_causal`` masks future keys (no
    ``attn_mask`` then). ``scale`` defaults to ``1 / sqrt(E)``. ``dropout_p`` is
    applied to the attention weights. ``enable_gqa`` repeats each key/value head
    for a group of query heads (axis -3).

    Examples:
        >>> import xpgrad as xg
        >>> q = xg.asarray([[[1.0, 0.0], [0.0, 1.0]]])
        >>> v = xg.asarray([[[1.0, 2.0], [3.0, 4.0]]])
        >>> xg.nn.functional.scaled_dot_product_attention(q, q, v, is_causal=True)
        Tensor([[[1.       , 2.       ],
                 [2.3395231, 3.3395231]]], dtype=float64, device=cpu)
    """
    func = "scaled_dot_product_attention"
    qs, ks, vs = (_shape(a) for a in (query, key, value))
    if len(qs) < 2 or len(ks) < 2 or len(vs) < 2 or qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        msg = (f"{func}: expected query (..., L, E), key (..., S, E) and value (..., S, Ev), "
               f"got {qs}, {ks} and {vs}")
        raise XpgradValueError(msg)
    _check_attention_dtypes(func, query, key, value, attn_mask)
    if enable_gqa and len(qs) >= 3 and ks[-3] != qs[-3]:
        if ks[-3] != vs[-3] or qs[-3] % ks[-3]:
            msg = f"{func}: with enable_gqa the query heads ({qs[-3]}) must be a multiple of the key heads ({ks[-3]})"
            raise XpgradValueError(msg)
        key = xg.repeat(key, qs[-3] // ks[-3], axis=-3)
        value = xg.repeat(value, qs[-3] // ks[-3], axis=-3)
        ks, vs = _shape(key), _shape(value)
    factor = 1.0 / math.sqrt(qs[-1]) if scale is None else scale
    if is_causal and attn_mask is not None:
        msg = f"{func}: give attn_mask or is_causal=True, not both"
        raise XpgradValueError(msg)
    if dropout_p == 0.0 and not (isinstance(attn_mask, Tensor) and attn_mask.requires_grad) \
            and native_kernel(_bxp(query), "scaled_dot_product_attention") is not None:
        return _sdpa_fused(query, key, value, attn_mask, factor, is_causal, (qs, ks, vs))
    scores = xg.matmul(query, xg.matrix_transpose(key)) * factor
    if is_causal:
        bxp = _bxp(query)
        pos = bxp.arange(qs[-2], device=_device(query))
        keys = bxp.arange(ks[-2], device=_device(query))
        attn_mask = bxp.reshape(pos, (-1, 1)) >= bxp.reshape(keys, (1, -1))
    if attn_mask is not None:
        scores = scores + (_neg_inf_where(xg.logical_not(attn_mask), scores) if _is_bool(attn_mask) else attn_mask)
    weights = _safe_softmax(scores)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return xg.matmul(weights, value)


def _sdpa_fused(query: Any, key: Any, value: Any, attn_mask: Any, scale: float, is_causal: bool,
                shapes: tuple[tuple[int, ...], ...]) -> Tensor:
    """``nn.scaled_dot_product_attention`` on arguments broadcast to one set of leading axes."""
    qs, ks, vs = shapes
    lead = qs[:-2] if qs[:-2] == ks[:-2] == vs[:-2] else _broadcast_shapes(qs[:-2], ks[:-2], vs[:-2])
    if attn_mask is not None:
        if _is_bool(attn_mask):
            attn_mask = _neg_inf_where(xg.logical_not(attn_mask), query)
        lead = _broadcast_shapes(lead, _shape(attn_mask)[:-2])
    args = [_full_to(a, (*lead, *s[-2:])) for a, s in ((query, qs), (key, ks), (value, vs))]
    if attn_mask is not None:
        args.append(_full_to(attn_mask, (*lead, qs[-2], ks[-2])))
    return apply(_sdpa, tuple(args), {"scale": float(scale), "is_causal": bool(is_causal)})[0]


def _broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(s) for s in shapes)
    out = []
    for dims in zip(*((1,) * (n - len(s)) + tuple(s) for s in shapes), strict=True):
        big = {d for d in dims if d != 1}
        if len(big) > 1:
            msg = f"scaled_dot_product_attention: the leading axes {shapes} do not broadcast"
            raise XpgradValueError(msg)
        out.append(big.pop() if big else 1)
    return tuple(out)


def _full_to(a: Any, shape: tuple[int, ...]) -> Any:
    return a if _shape(a) == shape else xg.broadcast_to(a, shape)


def _check_attention_dtypes(func: str, query: Any, key: Any, value: Any, attn_mask: Any) -> None:
    """As torch: query, key and value of one floating dtype (nothing promotes); a mask boolean, float32 or of that dtype."""
    found = [_dtype_text(getattr(_raw(a), "dtype", None)) for a in (query, key, value)]
    names = [n for n in found if n is not None]
    if len(names) != 3:
        return  # (a list: the shape check said it already, or the backend will)
    if len(set(names)) != 1:
        msg = (f"{func}: query, key and value must have the same dtype (nothing is promoted), got query {names[0]}, "
               f"key {names[1]} and value {names[2]}; convert them first, e.g. xg.astype(key, xg.{names[0]})")
        raise XpgradTypeError(msg)
    if not _floating(names[0]):
        msg = f"{func}: query, key and value must be floating, got dtype {names[0]}; convert them (xg.astype(query, xg.float32))"
        raise XpgradTypeError(msg)
    if attn_mask is not None and not _is_bool(attn_mask):
        mname = _dtype_text(getattr(_raw(attn_mask), "dtype", None))
        if mname is not None and mname not in (names[0], "float32"):  # (torch takes float32 masks too)
            msg = (f"{func}: attn_mask must be boolean, float32 or of the query's dtype {names[0]}, got dtype {mname}; "
                   f"convert it (xg.astype(attn_mask, xg.{names[0]}))")
            raise XpgradTypeError(msg)


def _dtype_text(dt: Any) -> str | None:
    return None if dt is None else _dtype_text_of(dt)


def _safe_softmax(scores: Any) -> Tensor:
    """Softmax over the last axis with zero weights for a row whose scores are all ``-inf``.

    PyTorch's ``_safe_softmax`` (its attention since 2.5): a fully masked query row gives a
    zero output row and zero, finite gradients, not 0/0 = NaN. The row's exponentials are
    all 0, so only the denominator needs guarding.
    """
    e = xg.exp(scores - _detached_max(scores, -1))
    den = xg.sum(e, axis=-1, keepdims=True)
    return e / xg.where(den == 0, 1.0, den)


def _float_mask(mask: Any, like: Any, what: str, func: str) -> Any:
    if mask is None:
        return None
    if _is_bool(mask):
        return _neg_inf_where(mask, like)
    if not is_float(_dtype(mask)):
        msg = f"{func}: {what} must be boolean or floating, got dtype {dtype_name(_dtype(mask))}"
        raise XpgradTypeError(msg)
    return mask


def _pad_last(mask: Any) -> Any:
    """A mask with one more (unmasked) key at the end."""
    bxp = _bxp(mask)
    col = bxp.zeros((*_shape(mask)[:-1], 1), dtype=_dtype(mask), device=_device(mask))
    return xg.concat([mask, col], axis=-1)


def _heads(x: Any, bsz: int, num_heads: int, head_dim: int) -> Any:
    """``(S, N, E)`` -> ``(N * H, S, head_dim)``."""
    s = int(_shape(x)[0])
    x = xg.permute_dims(xg.reshape(x, (s, bsz, num_heads, head_dim)), (1, 2, 0, 3))
    return xg.reshape(x, (bsz * num_heads, s, head_dim))


def multi_head_attention_forward(
    query: Any, key: Any, value: Any, embed_dim_to_check: int, num_heads: int, in_proj_weight: Any,
    in_proj_bias: Any, bias_k: Any, bias_v: Any, add_zero_attn: bool, dropout_p: float, out_proj_weight: Any,
    out_proj_bias: Any, training: bool = True, key_padding_mask: Any = None, need_weights: bool = True,
    attn_mask: Any = None, use_separate_proj_weight: bool = False, q_proj_weight: Any = None,
    k_proj_weight: Any = None, v_proj_weight: Any = None, static_k: Any = None, static_v: Any = None,
    average_attn_weights: bool = True, is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention on sequence-first inputs ``(L, N, E)`` (or unbatched ``(L, E)``), PyTorch's function.

    Returns ``(output, weights)``: output ``(L, N, E)``; weights ``(N, L, S)``
    averaged over heads (``(N, num_heads, L, S)`` when not ``average_attn_weights``),
    or None when not ``need_weights``. Boolean masks are True where attention is
    *not* allowed; float masks are added to the scores. ``attn_mask`` is
    ``(L, S)`` or ``(N * num_heads, L, S)``; ``key_padding_mask`` is ``(N, S)``.

    Examples:
        >>> import xpgrad as xg
        >>> E = 2
        >>> w_in, w_out = xg.concat([xg.eye(E)] * 3), xg.eye(E)
        >>> x = xg.asarray([[[1.0, 0.0]], [[0.0, 1.0]]])  # (L=2, N=1, E=2)
        >>> out, w = xg.nn.functional.multi_head_attention_forward(
        ...     x, x, x, E, 1, w_in, None, None, None, False, 0.0, w_out, None)
        >>> w
        Tensor([[[0.66976155, 0.33023845],
                 [0.33023845, 0.66976155]]], dtype=float64, device=cpu)
    """
    func = "multi_head_attention_forward"
    qs, ks, vs = (_shape(a) for a in (query, key, value))
    batched = len(qs) == 3
    if len(qs) not in (2, 3) or len(ks) != len(qs) or len(vs) != len(qs) or ks[:-1] != vs[:-1] \
            or (batched and not qs[1] == ks[1]):
        msg = (f"{func}: expected query (L, N, E), key (S, N, kdim), value (S, N, vdim) (or all without N), "
               f"got {qs}, {ks} and {vs}")
        raise XpgradValueError(msg)
    if not batched:
        query, key, value = (xg.expand_dims(a, axis=1) for a in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = xg.expand_dims(key_padding_mask, axis=0)
    tgt_len, bsz, embed_dim = _shape(query)
    src_len = int(_shape(key)[0])
    if embed_dim != embed_dim_to_check:
        msg = f"{func}: expected embed_dim {embed_dim_to_check}, got a query with embed_dim {embed_dim}"
        raise XpgradValueError(msg)
    if not isinstance(num_heads, int) or num_heads < 1 or embed_dim % num_heads:
        msg = f"{func}: embed_dim ({embed_dim}) must be divisible by num_heads, got num_heads={num_heads!r}"
        raise XpgradValueError(msg)
    head_dim = embed_dim // num_heads
    if is_causal and attn_mask is None:
        msg = f"{func}: is_causal=True is a hint that attn_mask is the causal mask; attn_mask must be given"
        raise XpgradValueError(msg)
    key_padding_mask = _float_mask(key_padding_mask, query, "key_padding_mask", func)
    attn_mask = _float_mask(attn_mask, query, "attn_mask", func)
    # input projections
    e = embed_dim
    if use_separate_proj_weight:
        w_q, w_k, w_v = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        w_q, w_k, w_v = in_proj_weight[:e, ...], in_proj_weight[e:2 * e, ...], in_proj_weight[2 * e:, ...]
    if in_proj_bias is None:
        b_q = b_k = b_v = None
    else:
        b_q, b_k, b_v = in_proj_bias[:e], in_proj_bias[e:2 * e], in_proj_bias[2 * e:]
    q = linear(query, w_q, b_q)
    k = linear(key, w_k, b_k)
    v = linear(value, w_v, b_v)
    if attn_mask is not None:
        ms = _shape(attn_mask)
        if ms == (tgt_len, src_len):
            attn_mask = xg.expand_dims(attn_mask, axis=0)
        elif ms != (bsz * num_heads, tgt_len, src_len):
            msg = (f"{func}: attn_mask must have shape {(tgt_len, src_len)} or "
                   f"{(bsz * num_heads, tgt_len, src_len)}, got {ms}")
            raise XpgradValueError(msg)
    if key_padding_mask is not None and _shape(key_padding_mask) != (bsz, src_len):
        msg = f"{func}: key_padding_mask must have shape {(bsz, src_len)}, got {_shape(key_padding_mask)}"
        raise XpgradValueError(msg)
    if (bias_k is None) != (bias_v is None):
        msg = f"{func}: give both bias_k and bias_v or neither"
        raise XpgradValueError(msg)
    if bias_k is not None:
        k = xg.concat([k, xg.broadcast_to(xg.reshape(bias_k, (1, 1, e)), (1, bsz, e))], axis=0)
        v = xg.concat([v, xg.broadcast_to(xg.reshape(bias_v, (1, 1, e)), (1, bsz, e))], axis=0)
        attn_mask = None if attn_mask is None else _pad_last(attn_mask)
        key_padding_mask = None if key_padding_mask is None else _pad_last(key_padding_mask)
    # (L, N, E) -> (N * H, L, head_dim); each reshape only splits or only merges (Dask reshapes nothing else)
    q = _heads(q, bsz, num_heads, head_dim)
    k = static_k if static_k is not None else _heads(k, bsz, num_heads, head_dim)
    v = static_v if static_v is not None else _heads(v, bsz, num_heads, head_dim)
    if add_zero_attn:
        zeros = _bxp(q).zeros((bsz * num_heads, 1, head_dim), dtype=_dtype(q), device=_device(q))
        k = xg.concat([k, zeros], axis=1)
        v = xg.concat([v, zeros], axis=1)
        attn_mask = None if attn_mask is None else _pad_last(attn_mask)
        key_padding_mask = None if key_padding_mask is None else _pad_last(key_padding_mask)
    src_len = _shape(k)[1]
    if key_padding_mask is not None:
        kpm = xg.reshape(key_padding_mask, (bsz, 1, 1, src_len))
        kpm = xg.reshape(xg.broadcast_to(kpm, (bsz, num_heads, 1, src_len)), (bsz * num_heads, 1, src_len))
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    scores = xg.matmul(q * math.sqrt(1.0 / head_dim), xg.matrix_transpose(k))
    if attn_mask is not None:
        scores = scores + attn_mask
    weights = softmax(scores, axis=-1)
    if training and dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    out = xg.matmul(weights, v)  # (N * H, L, head_dim)
    out = xg.reshape(out, (bsz, num_heads, tgt_len, head_dim))
    out = xg.reshape(xg.permute_dims(out, (2, 0, 1, 3)), (tgt_len, bsz, embed_dim))
    out = linear(out, out_proj_weight, out_proj_bias)
    if not batched:
        out = out[:, 0, ...]
    if not need_weights:
        return out, None
    weights = xg.reshape(weights, (bsz, num_heads, tgt_len, src_len))
    if average_attn_weights:
        weights = xg.mean(weights, axis=1)
    if not batched:
        weights = weights[0, ...]
    return out, weights


# ---------------------------------------------------------------------- losses
def mse_loss(input: Any, target: Any, reduction: str = "mean") -> Tensor:
    """Squared error ``(input - target)**2``, reduced.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.mse_loss(xg.asarray([1.0, 2.0]), xg.asarray([0.0, 0.0]))
        Tensor(2.5, dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    _check_reduction(reduction, "mse_loss")
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(input: Any, target: Any, reduction: str = "mean") -> Tensor:
    """Absolute error ``|input - target|``, reduced.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.l1_loss(xg.asarray([1.0, -3.0]), xg.asarray([0.0, 0.0]), reduction="sum")
        Tensor(4., dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    _check_reduction(reduction, "l1_loss")
    return _reduce(xg.abs(input - target), reduction)


def huber_loss(input: Any, target: Any, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """``0.5 d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 delta)``, with ``d = input - target``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.huber_loss(xg.asarray([0.5, 3.0]), xg.asarray([0.0, 0.0]), reduction="none")
        Tensor([0.125, 2.5  ], dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    _check_reduction(reduction, "huber_loss")
    if delta <= 0:
        msg = f"huber_loss: delta must be positive, got {delta!r}"
        raise XpgradValueError(msg)
    d = input - target
    ad = xg.abs(d)
    return _reduce(xg.where(ad < delta, 0.5 * (d * d), delta * (ad - 0.5 * delta)), reduction)


def smooth_l1_loss(input: Any, target: Any, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (Huber loss divided by ``beta``).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.smooth_l1_loss(xg.asarray([0.5, 3.0]), xg.asarray([0.0, 0.0]), reduction="sum")
        Tensor(2.625, dtype=float64, device=cpu)
    """
    input = _tensor(input)  # noqa: A001 - (a raw array as a Tensor: see _tensor)
    _check_reduction(reduction, "smooth_l1_loss")
    if beta < 0:
        msg = f"smooth_l1_loss: beta must be >= 0, got {beta!r}"
        raise XpgradValueError(msg)
    d = input - target
    ad = xg.abs(d)
    if beta == 0:
        return _reduce(ad, reduction)
    return _reduce(xg.where(ad < beta, (0.5 / beta) * (d * d), ad - 0.5 * beta), reduction)


def _class_axis(x: Any, func: str) -> int:
    nd = len(_shape(x))
    if nd == 0:
        msg = f"{func}: the input needs a class axis, got a 0-D input"
        raise XpgradValueError(msg)
    return 0 if nd == 1 else 1


def _targets(input: Any, target: Any, ignore_index: int, cax: int, func: str) -> tuple[Any, Any, Any]:
    """One-hot of the targets (input's float dtype, 0 rows where ignored), the valid mask, the class shape.

    Backend arrays (constants); inside vmap, with batched targets, batched Tensors (computed
    with xpgrad's functions, so that each example gets its own).
    """
    if is_float(_dtype(target)):
        msg = f"{func}: class-index targets must be integers, got dtype {dtype_name(_dtype(target))}"
        raise XpgradTypeError(msg)
    xshape = _shape(input)
    expect = xshape[:cax] + xshape[cax + 1:]
    if _shape(target) != expect:
        msg = f"{func}: target shape {_shape(target)} does not match input shape {xshape} (expected {expect})"
        raise XpgradValueError(msg)
    bxp = _bxp(input)
    n_cls = xshape[cax]
    cshape = [1] * len(xshape)
    cshape[cax] = n_cls
    if isinstance(target, Batched):  # (every example's labels are checked, on the physical array)
        _check_indices(_raw(target), n_cls, ignore_index, func, _bxp(target))
        tb = xg.stop_gradient(target)
        classes = bxp.reshape(bxp.arange(n_cls, dtype=_dtype(target), device=_device(input)), tuple(cshape))
        texpb = xg.expand_dims(tb, axis=cax)
        hitb = texpb == classes
        if 0 <= ignore_index < n_cls:
            hitb = xg.logical_and(hitb, texpb != ignore_index)
        fdt = input.dtype if isinstance(input, Tensor) else _dtype(input)
        return xg.astype(hitb, fdt), xg.astype(tb != ignore_index, fdt), tuple(cshape)
    x = _raw(input)
    t = _data(target)
    if type(t) is not type(x) and _bxp(t) is not bxp:
        t = move_array(t, bxp, _device(x))
    t = _check_indices(t, n_cls, ignore_index, func, bxp)
    classes = bxp.reshape(bxp.arange(n_cls, dtype=t.dtype, device=_device(x)), tuple(cshape))
    texp = t[(slice(None),) * cax + (None, ...)]  # (expand_dims at cax, as an index: cheaper)
    hit = bxp.equal(texp, classes)  # (not ==: a captured raw array on the left refuses a traced one)
    if 0 <= ignore_index < n_cls:  # else an ignored target matches no class: its row is 0 already
        hit = bxp.logical_and(hit, texp != ignore_index)
    return bxp.astype(hit, x.dtype), bxp.astype(t != ignore_index, x.dtype), tuple(cshape)


def _index_error(host: Any, n: int, ignore_index: int | None, func: str) -> XpgradIndexError:
    """The error for the first value of NumPy array ``host`` outside ``[0, n)`` (other than ``ignore_index``)."""
    bad = _out_of_range(np, host, n, ignore_index)
    value = int(host[bad].flat[0])
    count = f"{int(np.count_nonzero(bad))} of {host.size}"
    if ignore_index is None:  # embedding's indices; PyTorch: "index out of range in self"
        msg = (f"{func}: index out of range in self: index {value}, but the table has {n} rows, so indices "
               f"must be in [0, {n}); {count} indices are out of range")
    else:
        msg = (f"{func}: Target {value} is out of bounds: class labels must be in [0, {n}) "
               f"(the input has {n} classes) or equal ignore_index={ignore_index}; {count} targets are out of bounds")
    return XpgradIndexError(msg)


def _out_of_range(xp: Any, t: Any, n: int, ignore_index: int | None) -> Any:
    bad = xp.logical_or(t < 0, t >= n)
    return bad if ignore_index is None else xp.logical_and(bad, t != ignore_index)


def _check_block(block: Any, n: int, ignore_index: int | None, func: str) -> Any:
    """A Dask block of indices, unchanged, once checked (runs when what depends on it is computed)."""
    host = np.asarray(block)
    if host.size and _out_of_range(np, host, n, ignore_index).any():
        raise _index_error(host, n, ignore_index, func)
    return block


def _check_indices(t: Any, n: int, ignore_index: int | None, func: str, bxp: Any) -> Any:
    """``t``, once checked: [`XpgradIndexError`][xpgrad.XpgradIndexError] for a value outside ``[0, n)`` that is not ``ignore_index``.

    Class labels of ``cross_entropy``/``nll_loss`` (PyTorch: "Target 3 is out of bounds";
    unchecked, such a label matches no class, and the loss counts it as 0 while its gradient
    is not) and the indices of ``embedding`` (PyTorch: "index out of range in self"; unchecked,
    a negative index would silently pick a row from the end). Where the values are known (every
    eager library) the check is one reduction (a device sync on a GPU). On Dask it is part of
    the graph (``map_blocks`` over ``t``; the checked ``t`` is returned, and must be used): it
    raises when the result, or anything computed from it, is computed, and adds no compute of
    its own. Under a JAX transformation (``jax.jit``, ``jax.grad``) the values are tracers
    without values, and they are not checked.
    """
    if is_lazy(t):
        check = functools.partial(_check_block, n=n, ignore_index=ignore_index, func=func)
        return t.map_blocks(check, dtype=t.dtype, token=f"{func}-check-indices")
    if array_api_compat.is_jax_array(t):
        import jax

        if isinstance(t, jax.core.Tracer):
            return t
    if (array_api_compat.is_torch_array(t) and t.device.type == "meta") or is_tracer(t):
        return t  # (no values to check: a meta tensor, or an array xg.jit traces)
    if bool(bxp.any(_out_of_range(bxp, t, n, ignore_index))):
        raise _index_error(np.asarray(_to_numpy(t)), n, ignore_index, func)
    return t


def _class_weight(weight: Any, input: Any, cshape: tuple[int, ...], func: str) -> Any:
    """``weight`` (one per class) reshaped to broadcast along the class axis of ``input``.

    A constant weight is moved to the input's library, device and dtype; a weight
    that requires grad is used as it is (and receives a gradient).
    """
    n_cls = math.prod(cshape)
    if _shape(weight) != (n_cls,):
        msg = f"{func}: weight must have shape ({n_cls},) (one per class), got {_shape(weight)}"
        raise XpgradValueError(msg)
    if isinstance(weight, Batched) or (isinstance(weight, Tensor) and weight.requires_grad):
        return xg.reshape(weight, cshape)
    bxp = _bxp(input)
    return bxp.reshape(move_array(_data(weight), bxp, _device(input), _dtype(input)), cshape)


def nll_loss(input: Any, target: Any, weight: Any = None, ignore_index: int = -100,
             reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class indices, given log-probabilities ``input`` of shape ``(N, C, ...)``.

    ``weight`` (shape ``(C,)``) weighs each class; targets equal to ``ignore_index``
    contribute nothing. ``"mean"`` divides by the summed weights of the counted targets.

    Examples:
        >>> import xpgrad as xg
        >>> logp = xg.log(xg.asarray([[0.25, 0.75], [0.5, 0.5]]))
        >>> xg.nn.functional.nll_loss(logp, xg.asarray([1, -100]))
        Tensor(0.28768207, dtype=float64, device=cpu)
    """
    _check_reduction(reduction, "nll_loss")
    cax = _class_axis(input, "nll_loss")
    onehot, valid, cshape = _targets(input, target, ignore_index, cax, "nll_loss")
    picked = xg.sum(input * onehot, axis=cax)
    if weight is None:
        loss = -picked
        denom: Any = valid
    else:
        w = _class_weight(weight, input, cshape, "nll_loss")
        w_t = xg.sum(w * onehot, axis=cax)
        loss = -(picked * w_t)
        denom = w_t
    if reduction == "none":
        return loss
    total = xg.sum(loss)
    if reduction == "sum":
        return total
    return total / xg.sum(denom)


# Softmax cross-entropy of class-index targets, fused: one node instead of the ~15 of
# log_softmax + nll_loss. Every option (weight, ignore_index, label_smoothing) arrives in
# two constants built by `_xent_targets`: ``q``, the weighted target distribution
# (one per logit: ``valid * w_c * ((1 - eps) onehot + eps / C)``), and ``qsum``, its sum
# over the class axis (keepdims); ``den`` (reduction="mean" only) is the summed weight of
# the counted targets. The loss per position is ``-sum_c q logp``, and its derivative
# ``softmax * qsum - q``. The forward's second output is ``logp``, the log-softmax (never
# shown to the user): the rule reads the softmax as ``exp(logp)``, one call, and the
# logits need not be saved. With ``create_graph`` the rule's ``logp`` is an output of this
# very node, so its own VJP (``g - softmax * sum(g)``) and JVP make the rules exact at any
# order. Standard calls only.
def _torch_log_softmax(x: Any, axis: int) -> Any:
    import torch

    return torch.log_softmax(x, dim=axis)


_NATIVE_FNS["torch"]["log_softmax"] = _torch_log_softmax


def _log_softmax_fwd(xp: Any, x: Any, axis: int) -> Any:
    """``log_softmax`` of the backend array ``x``: the library's own kernel where the native-kernel
    table has one (torch's: one call, not six; issue 30), the standard's composition elsewhere (and
    the reference the kernel is tested against). The rules that use it are written against ``xp``,
    so higher order is unchanged."""
    f = native_kernel(xp, "log_softmax")
    if f is not None:
        return f(x, axis)
    s = x - xp.max(x, axis=axis, keepdims=True)
    return s - xp.log(xp.sum(xp.exp(s), axis=axis, keepdims=True))


def _xent_fwd(xp: Any, x: Any, q: Any, qsum: Any, den: Any = None, *, axis: int,
              reduction: str) -> tuple[Any, Any]:
    logp = _log_softmax_fwd(xp, x, axis)
    qlogp = q * xp.where(q == 0, 0.0, logp)  # a masked (-inf) logit off the target adds 0, not 0 * inf
    if reduction == "none":
        return -xp.sum(qlogp, axis=axis), logp
    loss = -xp.sum(qlogp)
    return (loss if reduction == "sum" else loss / den), logp


def _xent_vjp(xp: Any, g: Any, ans: Any, x: Any, q: Any, qsum: Any, den: Any = None, *, axis: int,
              reduction: str) -> Any:
    gl, glogp = g
    p = xp.exp(ans[1])  # the softmax
    out = None
    if gl is not None:
        if reduction == "none":
            gl = xp.expand_dims(gl, axis=axis)
        elif reduction == "mean":
            # every position ignored: den is 0 and so is every row of p * qsum - q; the
            # gradient is then 0 (as PyTorch's), not 0 * inf
            gl = gl / xp.where(den == 0, xp.ones_like(den), den)
        out = (p * qsum - q) * gl
    if glogp is not None:  # reached only through this rule's own use of logp (higher order)
        d = glogp - p * xp.sum(glogp, axis=axis, keepdims=True)
        out = d if out is None else out + d
    return out


def _xent_jvp(xp: Any, t: Any, ans: Any, x: Any, q: Any, qsum: Any, den: Any = None, *, axis: int,
              reduction: str) -> tuple[Any, Any]:
    tlogp = t - xp.sum(xp.exp(ans[1]) * t, axis=axis, keepdims=True)
    if reduction == "none":
        return -xp.sum(q * tlogp, axis=axis), tlogp
    tl = -xp.sum(q * tlogp)
    return (tl if reduction == "sum" else tl / den), tlogp


# (vmap: "sum" and "mean" run over the example's axes only, never the batch axes, so the rule
# computes the per-position loss, reduction="none", on the whole batch and reduces each
# example on its own)
def _xent_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    ys = full(xs, bs, K)  # (the logits and the constants q, qsum, den: each example its own)
    x, q, qsum = ys[:3]
    reduction = kw["reduction"]
    loss, logp = apply(prim, (x, q, qsum), {**kw, "axis": kw["axis"] + K, "reduction": "none"})
    if reduction == "none":
        return loss, logp
    n = len(loss.shape) - K
    total = _sum_p(loss, axis=tuple(range(K, K + n))) if n else loss
    if reduction == "sum":
        return total, logp
    # "mean": as the unbatched rule, an example whose every position is ignored (den = 0)
    # gets the value 0 / 0 = nan but a zero gradient (a constant nan is added)
    den = ys[3]
    zero = den == 0
    nought = zeros_like(den)
    mean = total / where(zero, nought + 1.0, den)
    return mean + where(zero, nought + math.nan, nought), logp


_sum_p = prim_of(_sum)
_xent = primitive("nn.softmax_cross_entropy", _xent_fwd, save=(1, 2, 3), save_ans=True, multi=True, chapter="nn",
                  batch=_xent_batch)
_xent.defvjp(_xent_vjp, None, None, None)
_xent.defjvp(_xent_jvp, None, None, None)


def _xent_targets(input: Any, target: Any, weight: Any, ignore_index: int, label_smoothing: float, cax: int,
                  reduction: str, func: str) -> tuple[Any, ...]:
    """The constant arguments of the fused primitive after the logits: ``q``, ``qsum`` (and ``den``)."""
    onehot, valid, cshape = _targets(input, target, ignore_index, cax, func)
    # constants of the backend; xpgrad's functions where a batched value is involved
    bxp = xg if _batched(onehot, weight) else _bxp(input)
    n_cls = cshape[cax]
    vf = bxp.expand_dims(valid, axis=cax)
    q = onehot
    eps = label_smoothing
    if weight is None:
        qsum = vf
        den = bxp.sum(valid) if reduction == "mean" else None
        if eps > 0:
            q = q * (1.0 - eps) + vf * (eps / n_cls)
    else:
        w = _class_weight(weight, input, cshape, func)
        q = q * w
        den = bxp.sum(q) if reduction == "mean" else None
        if eps > 0:
            q = q * (1.0 - eps) + (vf * (eps / n_cls)) * w
        qsum = bxp.sum(q, axis=cax, keepdims=True)
    return (q, qsum) if den is None else (q, qsum, den)


def _fusable(input: Any, target: Any, weight: Any) -> bool:
    """Whether ``cross_entropy`` can take the fused primitive: real logits, index targets, a constant weight."""
    return (kind(_dtype(input)) == "real floating" and kind(_dtype(target)).endswith("integer")
            and not (isinstance(weight, Tensor) and weight.requires_grad))


def cross_entropy(input: Any, target: Any, weight: Any = None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of unnormalized logits ``input`` (shape ``(N, C, ...)`` or ``(C,)``).

    ``target`` holds class indices (integers, shape without the class axis) or
    class probabilities (floating, the input's shape). ``label_smoothing`` mixes
    the target with the uniform distribution; ``weight`` weighs classes;
    ``ignore_index`` applies to index targets. Same definitions as PyTorch. With
    index targets the loss is one recorded node, ``nn.softmax_cross_entropy`` (unless
    ``weight`` itself requires grad: then it is composed, and ``weight`` gets a gradient).

    Examples:
        >>> import xpgrad as xg
        >>> logits = xg.asarray([[2.0, 0.0], [0.0, 2.0]])
        >>> xg.nn.functional.cross_entropy(logits, xg.asarray([0, 1]))
        Tensor(0.12692801, dtype=float64, device=cpu)
        >>> xg.nn.functional.cross_entropy(logits, xg.asarray([[1.0, 0.0], [0.0, 1.0]]), label_smoothing=0.1)
        Tensor(0.22692801, dtype=float64, device=cpu)
    """
    func = "cross_entropy"
    _check_reduction(reduction, func)
    if not 0.0 <= label_smoothing <= 1.0:
        msg = f"{func}: label_smoothing must be in [0, 1], got {label_smoothing!r}"
        raise XpgradValueError(msg)
    cax = _class_axis(input, func)
    half = _half(input)
    if half is not None:  # float16, bfloat16 logits: the loss in float32, rounded once (torch's)
        loss = cross_entropy(xg.astype(input, xg.float32), target, weight, ignore_index, reduction, label_smoothing)
        return xg.astype(loss, half)
    if _fusable(input, target, weight):
        args = _xent_targets(input, target, weight, ignore_index, label_smoothing, cax, reduction, func)
        return apply(_xent, (input, *args), {"axis": cax, "reduction": reduction})[0]
    logp = log_softmax(input, axis=cax)
    xshape = _shape(input)
    n_cls = xshape[cax]
    if is_float(_dtype(target)):
        if _shape(target) != xshape:
            msg = f"{func}: probability targets must have the input's shape {xshape}, got {_shape(target)}"
            raise XpgradValueError(msg)
        y = target
        if label_smoothing > 0:
            y = y * (1.0 - label_smoothing) + label_smoothing / n_cls
        if weight is not None:
            cshape = tuple(n_cls if i == cax else 1 for i in range(len(xshape)))
            logp = logp * _class_weight(weight, input, cshape, func)
        loss = -xg.sum(logp * y, axis=cax)
        return _reduce(loss, reduction)
    nll = nll_loss(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0.0:
        return nll
    onehot, valid, cshape = _targets(input, target, ignore_index, cax, func)
    if weight is not None:
        w = _class_weight(weight, input, cshape, func)
        smooth = -xg.sum(logp * w, axis=cax) * valid
        denom: Any = xg.sum(w * onehot, axis=cax)
    else:
        smooth = -xg.sum(logp, axis=cax) * valid
        denom = valid
    if reduction == "none":
        ret = smooth
    elif reduction == "sum":
        ret = xg.sum(smooth)
    else:
        ret = xg.sum(smooth) / xg.sum(denom)
    return (1.0 - label_smoothing) * nll + ret * (label_smoothing / n_cls)


# binary_cross_entropy as PyTorch defines it, at p = 0 and 1 too: the loss
# (t - 1) max(log1p(-p), -100) - t max(log p, -100), the gradient
# (p - t) / max(p (1 - p), 1e-12) (so a saturated p = 1 with target 0 still gets pushed back,
# by 1e12, where the clamped logs' own derivative is 0), and the target's gradient
# log1p(-p) - log(p) with the logs unclamped (+-inf at p = 0 or 1), as torch's. The logs are
# taken where they are finite: no NumPy divide-by-zero warning at the ends.
def _bce_logs(xp: Any, p: Any) -> tuple[Any, Any]:
    inside_p = p > 0
    inside_q = p < 1
    log_p = xp.where(inside_p, xp.log(xp.where(inside_p, p, 1.0)), -math.inf)
    log_q = xp.where(inside_q, xp.log1p(-xp.where(inside_q, p, 0.0)), -math.inf)
    return log_p, log_q


def _bce_fwd(xp: Any, p: Any, t: Any) -> Any:
    log_p, log_q = _bce_logs(xp, p)
    return (t - 1.0) * xp.maximum(log_q, -100.0) - t * xp.maximum(log_p, -100.0)


#: torch's EPSILON of the binary_cross_entropy backward: 1e-12 as a float32 (its kernel's
#: constant), which is 9.999999960041972e-13 (so p = 1, target 0 gives 1.000000004e12)
_BCE_EPS = 9.999999960041972e-13


def _bce_vjp_p(xp: Any, g: Any, ans: Any, p: Any, t: Any) -> Any:
    return g * (p - t) / xp.maximum(p * (1.0 - p), _BCE_EPS)


def _bce_vjp_t(xp: Any, g: Any, ans: Any, p: Any, t: Any) -> Any:
    log_p, log_q = _bce_logs(xp, p)
    return g * (log_q - log_p)


_bce = primitive("nn.binary_cross_entropy", _bce_fwd, chapter="nn", batch=pointwise)
_bce.defvjp(_bce_vjp_p, _bce_vjp_t)
defjvp_from_vjp(_bce)


def binary_cross_entropy(input: Any, target: Any, weight: Any = None, reduction: str = "mean") -> Tensor:
    """``-(y log p + (1 - y) log(1 - p))`` for probabilities ``p``; each log is clamped at -100, as in PyTorch.

    The gradient is PyTorch's at every ``p`` in [0, 1]: ``(p - y) / max(p (1 - p), 1e-12)``,
    so a probability saturated at the wrong end (``p = 1``, ``y = 0``) still gets a gradient.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.binary_cross_entropy(xg.asarray([0.5, 1.0]), xg.asarray([1.0, 0.0]), reduction="none")
        Tensor([  0.69314718, 100.        ], dtype=float64, device=cpu)
        >>> p = xg.asarray([1.0], requires_grad=True)
        >>> xg.nn.functional.binary_cross_entropy(p, xg.asarray([0.0])).backward()
        >>> p.grad
        Tensor([1.e+12], dtype=float64, device=cpu)
    """
    _check_reduction(reduction, "binary_cross_entropy")
    loss = apply(_bce, (input, target), {})
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input: Any, target: Any, weight: Any = None, reduction: str = "mean",
                                     pos_weight: Any = None) -> Tensor:
    """``binary_cross_entropy(sigmoid(input), target)`` computed stably from logits.

    ``(1 - y) x + w_pos(y) * softplus(-x)`` with ``softplus(z) = max(z, 0) + log1p(exp(-|z|))``:
    finite values and gradients for logits of any size. ``pos_weight`` weighs positives.

    Examples:
        >>> import xpgrad as xg
        >>> f = xg.nn.functional.binary_cross_entropy_with_logits
        >>> f(xg.asarray([1e4, -1e4, 0.0]), xg.asarray([0.0, 0.0, 1.0]), reduction="none")
        Tensor([1.00000000e+04, 0.00000000e+00, 6.93147181e-01], dtype=float64, device=cpu)
    """
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    sp = _softplus0(-input)
    if pos_weight is None:
        loss = (1.0 - target) * input + sp
    else:
        if not isinstance(pos_weight, Tensor):  # (a raw array of a strict library cannot multiply a Tensor)
            pos_weight = xg.asarray(pos_weight)
        loss = (1.0 - target) * input + ((pos_weight - 1.0) * target + 1.0) * sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def kl_div(input: Any, target: Any, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence ``target * (log(target) - input)`` with ``input`` log-probabilities.

    ``log_target=True`` takes ``target`` as log-probabilities too. ``reduction`` is
    ``"mean"`` (over all elements, as PyTorch), ``"batchmean"`` (sum divided by the
    batch size: the mathematical KL divergence), ``"sum"`` or ``"none"``.

    Examples:
        >>> import xpgrad as xg
        >>> logq = xg.log(xg.asarray([[0.5, 0.5]]))
        >>> xg.nn.functional.kl_div(logq, xg.asarray([[1.0, 0.0]]), reduction="batchmean")
        Tensor(0.69314718, dtype=float64, device=cpu)
    """
    _check_reduction(reduction, "kl_div", (*_REDUCTIONS, "batchmean"))
    if log_target:
        loss = xg.exp(target) * (target - input)
    else:
        pos = target > 0
        loss = xg.where(pos, target * xg.log(xg.where(pos, target, 1.0)), 0.0) - target * input
    if reduction == "batchmean":
        shape = _shape(input)
        total = xg.sum(loss)
        return total / shape[0] if shape else total
    return _reduce(loss, reduction)
