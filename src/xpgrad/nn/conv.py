"""Convolution and pooling, functional forms (re-exported by ``xpgrad.nn.functional``).

Everything is composed of xpgrad namespace functions, so it runs and differentiates
(to any order) on every backend. No Python loop runs over pixels: a window
operation takes one strided slice of the padded input per kernel offset
(``kh * kw`` slices) and stacks them into columns ``(N, C, kh*kw, oh, ow)``; a
convolution is then one ``matmul`` of the reshaped weight with those columns.
This "im2col by slicing" was measured against a loop of per-offset
``tensordot``/``matmul`` and against an im2col gathered with ``take``; it was the
fastest of the three, forward and backward (the gradient of ``take`` is a
scatter-add with repeated indices, which costs a sort). A transposed convolution
is the convolution of the zero-stuffed, re-padded input with the flipped kernel.
Max pooling picks, in each window, the first maximum in row-major kernel order
(``argmax``) and routes the whole gradient there, as PyTorch does on CPU.

Convolution, transposed convolution, max and average pooling are primitives
(``nn.conv2d``, ``nn.conv_transpose2d``, ``nn.max_pool2d``, ``nn.avg_pool2d``) whose
forwards run the library's own kernels where it has them (torch's, JAX's ``lax``; on Dask
the NumPy composition once per batch chunk), and the composition above everywhere else;
the composition is also the reference the native kernels are tested against
(tests/test_native_kernels.py). On raw arrays it works with the batch axis innermost (see
``_batch_last``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import array_api_compat

from .. import _namespace as xg
from .. import _tracing
from .._dispatch import backend_namespace
from .._dispatch import raw_array as _raw
from .._dtypes import is_float
from .._exceptions import XpgradTypeError, XpgradValueError
from ..autograd._batching_util import full
from ..autograd._batching_util import op as _op
from ..autograd._core import Primitive, apply, primitive
from ..autograd._tensor import Tensor
from ..ops._common import is_xpgrad
from ..ops._native import _NATIVE_FNS, USE_NATIVE, native_kernel  # noqa: F401 - (USE_NATIVE: re-exported, tests turn it off)
from ._checks import check_dtype

__all__ = [
    "adaptive_avg_pool2d", "avg_pool2d", "conv1d", "conv2d", "conv_transpose2d", "max_pool2d", "pad",
]

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


# ---------------------------------------------------------------------- argument helpers

def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in x.shape)  # (an example's shape inside vmap)


def _const(like: Any, shape: tuple[int, ...], value: float) -> Any:
    """A constant backend array of ``shape`` filled with ``value``, on ``like``'s library, device and dtype."""
    data = _raw(like)
    bxp = backend_namespace(data)
    return bxp.full(shape, value, dtype=data.dtype, device=array_api_compat.device(data))


def ntuple(value: Any, n: int, what: str, func: str, minimum: int = 0) -> tuple[int, ...]:
    """``value`` (an int or a sequence of ``n`` ints, each >= ``minimum``) as a tuple of ``n`` ints."""
    vals = (value,) * n if isinstance(value, int) and not isinstance(value, bool) else value
    ok = isinstance(vals, Sequence) and len(vals) == n and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= minimum for v in vals)
    if not ok:
        msg = f"{func}: {what} must be an int >= {minimum} or a tuple of {n} such ints, got {value!r}"
        raise XpgradValueError(msg)
    return tuple(vals)


def _check_input(input: Any, spatial: int, func: str) -> tuple[Any, bool]:
    """The input with a batch axis (added for an unbatched input), and whether it was added."""
    x = input if isinstance(input, Tensor) else xg.asarray(input)
    nd = x.ndim
    if nd == spatial + 1:
        return xg.expand_dims(x, axis=0), True
    if nd != spatial + 2:
        msg = (f"{func}: expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D (batched) input, "
               f"got shape {_shape(x)}")
        raise XpgradValueError(msg)
    return x, False


def _check_float(x: Any, func: str) -> None:
    if not is_float(_raw(x).dtype):
        msg = f"{func}: expected a floating input, got dtype {xg.dtype_name(_raw(x).dtype)}"
        raise XpgradTypeError(msg)


# ---------------------------------------------------------------------- padding
def _along(axis: int, start: int, stop: int) -> tuple[Any, ...]:
    """The key ``[:, ..., :, start:stop, ...]`` with the slice at ``axis``."""
    return (*(slice(None),) * axis, slice(start, stop), Ellipsis)


def _pad_axis(x: Any, axis: int, lo: int, hi: int, mode: str, value: float) -> Any:
    """Pad (a positive amount) or crop (a negative one) both ends of one axis."""
    n = _shape(x)[axis]
    if lo < 0 or hi < 0:
        x = x[_along(axis, max(-lo, 0), n - max(-hi, 0))]
        n -= max(-lo, 0) + max(-hi, 0)
        lo, hi = max(lo, 0), max(hi, 0)
    if lo == 0 and hi == 0:
        return x
    if mode == "zeros" or mode == "constant":
        shape = list(_shape(x))
        parts = []
        if lo:
            shape[axis] = lo
            parts.append(_const(x, tuple(shape), value))
        parts.append(x)
        if hi:
            shape[axis] = hi
            parts.append(_const(x, tuple(shape), value))
        return xg.concat(parts, axis=axis)
    if mode == "circular":
        if lo > n or hi > n:
            msg = f"pad: circular padding ({lo}, {hi}) is larger than the axis size {n}"
            raise XpgradValueError(msg)
        before = [x[_along(axis, n - lo, n)]] if lo else []
        after = [x[_along(axis, 0, hi)]] if hi else []
    elif mode == "replicate":
        shape = list(_shape(x))
        before, after = [], []
        if lo:
            shape[axis] = lo
            before = [xg.broadcast_to(x[_along(axis, 0, 1)], tuple(shape))]
        if hi:
            shape[axis] = hi
            after = [xg.broadcast_to(x[_along(axis, n - 1, n)], tuple(shape))]
    else:  # reflect
        if lo >= n or hi >= n:
            msg = f"pad: reflect padding ({lo}, {hi}) must be smaller than the axis size {n}"
            raise XpgradValueError(msg)
        before = [xg.flip(x[_along(axis, 1, lo + 1)], axis=axis)] if lo else []
        after = [xg.flip(x[_along(axis, n - 1 - hi, n - 1)], axis=axis)] if hi else []
    return xg.concat([*before, x, *after], axis=axis)


def pad(input: Any, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the trailing axes: ``pad = (last_lo, last_hi, second_last_lo, second_last_hi, ...)``, as PyTorch.

    ``mode`` is ``"constant"`` (with ``value``, default 0), ``"reflect"``,
    ``"replicate"`` or ``"circular"``. Negative amounts crop.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([[1.0, 2.0, 3.0]])
        >>> xg.nn.functional.pad(x, (1, 2))
        Tensor([[0., 1., 2., 3., 0., 0.]], dtype=float64, device=cpu)
        >>> xg.nn.functional.pad(x, (2, 1), mode="reflect")
        Tensor([[3., 2., 1., 2., 3., 2.]], dtype=float64, device=cpu)
    """
    modes = ("constant", "reflect", "replicate", "circular")
    if mode not in modes:
        msg = f"pad: mode must be one of {list(modes)}, got {mode!r}"
        raise XpgradValueError(msg)
    amounts = tuple(pad)
    if len(amounts) % 2 or not all(isinstance(p, int) for p in amounts):
        msg = f"pad: pad must be an even number of ints, got {pad!r}"
        raise XpgradValueError(msg)
    x = input if isinstance(input, Tensor) else xg.asarray(input)
    nd = x.ndim
    if len(amounts) // 2 > nd:
        msg = f"pad: pad {pad!r} names {len(amounts) // 2} axes, the input has {nd}"
        raise XpgradValueError(msg)
    if mode != "constant" and value not in (None, 0, 0.0):
        msg = f"pad: value applies to mode='constant' only, got value={value!r} with mode={mode!r}"
        raise XpgradValueError(msg)
    for k in range(len(amounts) // 2):
        x = _pad_axis(x, nd - 1 - k, amounts[2 * k], amounts[2 * k + 1], mode, 0.0 if value is None else value)
    return x


def _pad_spatial(x: Any, pads: Sequence[tuple[int, int]], mode: str = "zeros", value: float = 0.0) -> Any:
    """Pad the last ``len(pads)`` axes by ``(lo, hi)`` each."""
    nd = x.ndim
    first = nd - len(pads)
    for k, (lo, hi) in enumerate(pads):
        x = _pad_axis(x, first + k, lo, hi, mode, value)
    return x


# ---------------------------------------------------------------------- windows
def _out_size(size: int, k: int, s: int, d: int, lo: int, hi: int) -> int:
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


def _same_padding(kernel: tuple[int, ...], dilation: tuple[int, ...]) -> list[tuple[int, int]]:
    pads = []
    for k, d in zip(kernel, dilation, strict=True):
        total = d * (k - 1)
        pads.append((total // 2, total - total // 2))
    return pads


def _conv_padding(padding: Any, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...],
                  func: str) -> list[tuple[int, int]]:
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * n
        if padding == "same":
            if any(s != 1 for s in stride):
                msg = f"{func}: padding='same' needs stride 1, got stride={stride}"
                raise XpgradValueError(msg)
            return _same_padding(kernel, dilation)
        msg = f"{func}: padding must be 'valid', 'same', an int or a tuple of {n} ints, got {padding!r}"
        raise XpgradValueError(msg)
    return [(p, p) for p in ntuple(padding, n, "padding", func)]


# ---------------------------------------------------------------------- convolution primitives
# Two primitives: ``nn.conv2d`` (cross-correlation, no bias) and ``nn.conv_transpose2d``, its
# adjoint in the input. ``pads`` is a pair (lo, hi) per spatial axis; a negative amount crops
# (the rules' own calls need that). The transposed convolution's output is the full transposed
# convolution, ``(H - 1) * stride + dilation * (k - 1) + 1``, less ``lo`` and ``hi`` at the ends.
# Each forward is the library's own kernel where it has one (torch's ``conv2d`` /
# ``conv_transpose2d``, JAX's ``lax.conv_general_dilated``), else the portable composition of
# the standard's functions below (the reference the native kernels are tested against). The
# rules call the primitives themselves: the input's gradient of one is the other, the weight's
# gradient a convolution of the input with the cotangent; so first order on raw arrays runs
# native kernels both ways, and create_graph records them on Tensors (any order).
Pads = tuple[tuple[int, int], ...]


def _xpad(xp: Any, x: Any, pads: Pads, first: int | None = None, value: float = 0.0) -> Any:
    """Pad with ``value`` (or crop, a negative amount) ``len(pads)`` axes of raw ``x``: the last
    ones, or those from ``first`` on."""
    if first is None:
        first = x.ndim - len(pads)
    for k, (lo, hi) in enumerate(pads):
        axis = first + k
        n = int(x.shape[axis])
        if lo < 0 or hi < 0:
            x = x[_along(axis, max(-lo, 0), n - max(-hi, 0))]
            lo, hi = max(lo, 0), max(hi, 0)
        if lo == 0 and hi == 0:
            continue
        parts = []
        shape = [int(s) for s in x.shape]
        dev = array_api_compat.device(x)
        if lo:
            shape[axis] = lo
            parts.append(xp.full(tuple(shape), value, dtype=x.dtype, device=dev))
        parts.append(x)
        if hi:
            shape[axis] = hi
            parts.append(xp.full(tuple(shape), value, dtype=x.dtype, device=dev))
        x = xp.concat(parts, axis=axis)
    return x


# The composition on raw arrays works with the batch axis innermost, ``(C, H, W, N)``: each
# kernel offset's strided slice then copies runs of N (not of a few pixels of one row, which
# made the stacking the costliest step of a small image's convolution), and a convolution is
# one matrix product ``(O, C*kh*kw) @ (C*kh*kw, oh*ow*N)`` (its weight's gradient one more),
# not N small ones.
def _batch_last(xp: Any, x: Any, pads: Pads, value: float = 0.0) -> Any:
    """Raw ``(N, C, H, W)`` as ``(C, H, W, N)``, padded by ``pads`` (with ``value``; a negative
    amount crops) and laid out with the batch innermost (a copy, never a strided view)."""
    n, c = int(x.shape[0]), int(x.shape[1])
    xt = xp.permute_dims(x, (1, 2, 3, 0))
    if any(lo > 0 or hi > 0 for lo, hi in pads):
        return _xpad(xp, xt, pads, first=1, value=value)  # (the concatenation copies)
    xt = _xpad(xp, xt, pads, first=1)  # crops only
    shape = tuple(int(s) for s in xt.shape)
    # merging the axes of the permuted view copies it (a copy in the standard's terms: the
    # reshape of a non-contiguous array); then the split is a view of that copy
    return xp.reshape(xp.reshape(xt, (c * shape[1] * shape[2] * n,)), shape)


def _cols_bl(xp: Any, xt: Any, kernel: tuple[int, ...], stride: tuple[int, ...],
             dilation: tuple[int, ...]) -> tuple[Any, tuple[int, int]]:
    """The columns ``(C*kh*kw, oh*ow*N)`` of a padded batch-last ``(C, H, W, N)`` and ``(oh, ow)``."""
    c, h, wd, n = (int(s) for s in xt.shape)
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    if (kh, kw) == (1, 1) and (sh, sw) == (1, 1):
        return xp.reshape(xt, (c, oh * ow * n)), (oh, ow)
    cols = xp.stack([
        xt[:, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw, :]
        for i in range(kh) for j in range(kw)
    ], axis=1)
    return xp.reshape(cols, (c * kh * kw, oh * ow * n)), (oh, ow)


def _batch_first(xp: Any, y: Any, shape: tuple[int, ...]) -> Any:
    """``y``, ``(..., oh*ow*N)`` holding ``(C, oh, ow, N)``, as a (C-contiguous) ``(N, C, oh, ow)``."""
    c, oh, ow, n = shape
    y = xp.reshape(xp.reshape(y, (c, oh * ow * n)), shape)
    y = xp.permute_dims(y, (3, 0, 1, 2))
    return xp.reshape(xp.reshape(y, (n, c * oh * ow)), (n, c, oh, ow))


def _im2col(xp: Any, x: Any, kernel: tuple[int, ...], stride: tuple[int, ...], pads: Pads,
            dilation: tuple[int, ...]) -> tuple[Any, tuple[int, int]]:
    """The columns ``(N, C, kh*kw, oh, ow)`` of ``x`` (one strided slice of the padded input
    per kernel offset; ``(N, C, 1, oh*ow)`` for a 1x1 kernel of stride 1) and ``(oh, ow)``."""
    x = _pad_spatial(x, pads) if is_xpgrad(xp) else _xpad(xp, x, pads)
    n, c, h, wd = (int(s) for s in x.shape)
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    if (kh, kw) == (1, 1) and (sh, sw) == (1, 1):
        return xp.reshape(x, (n, c, 1, oh * ow)), (oh, ow)
    return xp.stack([
        x[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
        for i in range(kh) for j in range(kw)
    ], axis=2), (oh, ow)


def _conv_portable(xp: Any, x: Any, w: Any, *, stride: tuple[int, ...], pads: Pads, dilation: tuple[int, ...],
                   groups: int) -> Any:
    """The composed convolution on raw arrays: one strided slice per kernel offset, one matmul."""
    return _conv_bl(xp, _batch_last(xp, x, pads), w, stride=stride, dilation=dilation, groups=groups)


def _conv_bl(xp: Any, xt: Any, w: Any, *, stride: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Any:
    """The convolution of a padded batch-last ``(C, H, W, N)``, as ``(N, O, oh, ow)``."""
    o, cg, kh, kw = (int(s) for s in w.shape)
    n = int(xt.shape[3])
    cols, (oh, ow) = _cols_bl(xp, xt, (kh, kw), stride, dilation)
    k = kh * kw
    if groups == 1:
        y = xp.matmul(xp.reshape(w, (o, cg * k)), cols)
    else:
        # each reshape only splits or only merges axes (Dask reshapes nothing else)
        wg = xp.reshape(xp.reshape(w, (groups, o // groups, cg, kh, kw)), (groups, o // groups, cg * k))
        y = xp.matmul(wg, xp.reshape(cols, (groups, cg * k, oh * ow * n)))
    return _batch_first(xp, y, (o, oh, ow, n))


def _flip_swap(xp: Any, w: Any, groups: int) -> Any:
    """A transposed convolution's weight ``(C_in, C_out/g, kh, kw)`` as the equivalent forward
    convolution's: flipped, in and out channels swapped within each group."""
    ci, og, kh, kw = (int(s) for s in w.shape)
    wf = xp.flip(w, axis=(2, 3))
    wf = xp.reshape(wf, (groups, ci // groups, og, kh, kw))
    return xp.reshape(xp.permute_dims(wf, (0, 2, 1, 3, 4)), (groups * og, ci // groups, kh, kw))


def _conv_t_portable(xp: Any, x: Any, w: Any, *, stride: tuple[int, ...], pads: Pads, dilation: tuple[int, ...],
                     groups: int) -> Any:
    """The composed transposed convolution: the zero-stuffed, re-padded input convolved with the flipped kernel."""
    kernel = (int(w.shape[2]), int(w.shape[3]))
    full = tuple((d * (k - 1) - lo, d * (k - 1) - hi) for k, d, (lo, hi) in zip(kernel, dilation, pads, strict=True))
    if stride == (1, 1):
        xt = _batch_last(xp, x, full)
    else:
        xt = xp.permute_dims(x, (1, 2, 3, 0))  # (C, H, W, N); the stacking below copies it
        for axis, s in ((1, stride[0]), (2, stride[1])):
            if s == 1:
                continue
            shape = tuple(int(v) for v in xt.shape)
            zero = xp.zeros(shape, dtype=x.dtype, device=array_api_compat.device(x))
            xt = xp.stack([xt] + [zero] * (s - 1), axis=axis + 1)
            xt = xp.reshape(xt, (*shape[:axis], shape[axis] * s, *shape[axis + 1:]))
            xt = xt[_along(axis, 0, (shape[axis] - 1) * s + 1)]
        xt = _xpad(xp, xt, full, first=1)
    return _conv_bl(xp, xt, _flip_swap(xp, w, groups), stride=(1, 1), dilation=dilation, groups=groups)


def _torch_conv(x: Any, w: Any, *, stride: tuple[int, ...], pads: Pads, dilation: tuple[int, ...],
                groups: int) -> Any:
    import torch.nn.functional as F  # noqa: N812

    (lh, hh), (lw, hw) = pads
    if lh == hh >= 0 and lw == hw >= 0:
        return F.conv2d(x, w, None, stride, (lh, lw), dilation, groups)
    return F.conv2d(F.pad(x, (lw, hw, lh, hh)), w, None, stride, 0, dilation, groups)


def _torch_conv_t(x: Any, w: Any, *, stride: tuple[int, ...], pads: Pads, dilation: tuple[int, ...],
                  groups: int) -> Any:
    import torch.nn.functional as F  # noqa: N812

    opad = []
    for (lo, hi), s, d in zip(pads, stride, dilation, strict=True):
        if lo < 0 or not 0 <= lo - hi < max(s, d):
            y = F.conv_transpose2d(x, w, None, stride, 0, 0, groups, dilation)
            (lh, hh), (lw, hw) = pads
            return F.pad(y, (-lw, -hw, -lh, -hh))
        opad.append(lo - hi)
    return F.conv_transpose2d(x, w, None, stride, (pads[0][0], pads[1][0]), tuple(opad), groups, dilation)


def _torch_conv_wgrad(x: Any, g: Any, w: Any, *, stride: tuple[int, ...], pads: Pads, dilation: tuple[int, ...],
                      groups: int) -> Any:
    """The weight's gradient of ``nn.conv2d`` by torch's own backward kernel."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    (lh, hh), (lw, hw) = pads
    if lh == hh >= 0 and lw == hw >= 0:
        padding = [lh, lw]
    else:
        x, padding = F.pad(x, (lw, hw, lh, hh)), [0, 0]
    return torch.ops.aten.convolution_backward(g, x, w, None, list(stride), padding, list(dilation), False, [0, 0],
                                               groups, [False, True, False])[1]


def _jax_conv(x: Any, w: Any, *, stride: tuple[int, ...], pads: Pads, dilation: tuple[int, ...],
              groups: int) -> Any:
    from jax import lax

    return lax.conv_general_dilated(x, w, stride, pads, rhs_dilation=dilation, feature_group_count=groups)


def _jax_conv_t(x: Any, w: Any, *, stride: tuple[int, ...], pads: Pads, dilation: tuple[int, ...],
                groups: int) -> Any:
    import jax.numpy as jnp
    from jax import lax

    kernel = (int(w.shape[2]), int(w.shape[3]))
    full = [(d * (k - 1) - lo, d * (k - 1) - hi) for k, d, (lo, hi) in zip(kernel, dilation, pads, strict=True)]
    return lax.conv_general_dilated(x, _flip_swap(jnp, w, groups), (1, 1), full, lhs_dilation=stride,
                                    rhs_dilation=dilation, feature_group_count=groups)


_NATIVE_FNS["torch"].update(conv2d=_torch_conv, conv_transpose2d=_torch_conv_t, conv2d_wgrad=_torch_conv_wgrad)
_NATIVE_FNS["jax"].update(conv2d=_jax_conv, conv_transpose2d=_jax_conv_t)


def _conv_fwd(xp: Any, x: Any, w: Any, **kw: Any) -> Any:
    f = native_kernel(xp, "conv2d")
    return _conv_portable(xp, x, w, **kw) if f is None else f(x, w, **kw)


def _conv_t_fwd(xp: Any, x: Any, w: Any, **kw: Any) -> Any:
    f = native_kernel(xp, "conv_transpose2d")
    return _conv_t_portable(xp, x, w, **kw) if f is None else f(x, w, **kw)


_CONV = primitive("nn.conv2d", _conv_fwd, save=(0, 1), chapter="nn")
_CONV_T = primitive("nn.conv_transpose2d", _conv_t_fwd, save=(0, 1), chapter="nn")


def _call(xp: Any, prim: Primitive, *args: Any, **kw: Any) -> Any:
    """``prim`` inside a rule: its forward on raw arrays, recorded on Tensors (create_graph)."""
    if is_xpgrad(xp):
        return apply(prim, args, kw)
    return prim.fwd(xp, *args, **kw)


def _trim(size: int, out: int, k: int, s: int, d: int, lo: int, hi: int) -> int:
    """``hi`` less the rows of the padded input that no window of the convolution reads."""
    return hi - (size + lo + hi - d * (k - 1) - 1 - s * (out - 1))


def _wgrad_portable(xp: Any, x: Any, g: Any, wshape: tuple[int, ...], stride: tuple[int, ...], pads: Pads,
                    dilation: tuple[int, ...], groups: int) -> Any:
    """The composed weight's gradient of ``conv2d`` (raw arrays): the cotangent times the columns."""
    o, cg, kh, kw = wshape
    oh, ow = int(g.shape[2]), int(g.shape[3])
    cols, _ = _cols_bl(xp, _batch_last(xp, x, pads), (kh, kw), stride, dilation)
    gt = xp.reshape(_batch_last(xp, g, ((0, 0), (0, 0))), (o, oh * ow * int(x.shape[0])))
    # one matrix product (O, oh*ow*N) @ (oh*ow*N, C*k): the sum over the examples included
    # (each reshape only splits or only merges axes: Dask reshapes nothing else)
    if groups == 1:
        gw = xp.matmul(gt, xp.matrix_transpose(cols))
    else:
        L = int(cols.shape[1])
        gw = xp.matmul(xp.reshape(gt, (groups, o // groups, L)),
                       xp.matrix_transpose(xp.reshape(cols, (groups, cg * kh * kw, L))))
        gw = xp.reshape(gw, (o, cg * kh * kw))
    return xp.reshape(gw, (o, cg, kh, kw))


def _wgrad(xp: Any, x: Any, g: Any, w: Any, stride: tuple[int, ...], pads: Pads, dilation: tuple[int, ...],
           groups: int) -> Any:
    """The weight's gradient of ``conv2d(x, w)`` for the cotangent ``g``: a convolution of the input
    (channels as the batch) with ``g`` (examples as the channels), stride and dilation swapped."""
    o, cg, kh, kw = (int(s) for s in w.shape)
    oh, ow = int(g.shape[2]), int(g.shape[3])
    if not is_xpgrad(xp):
        f = native_kernel(xp, "conv2d_wgrad")
        if f is not None:
            return f(x, g, w, stride=stride, pads=pads, dilation=dilation, groups=groups)
        if native_kernel(xp, "conv2d") is None:  # the composition
            return _wgrad_portable(xp, x, g, (o, cg, kh, kw), stride, pads, dilation, groups)
    n, _, h, wd = (int(s) for s in x.shape)
    pads2 = tuple((lo, _trim(size, out, k, s, d, lo, hi)) for size, out, k, s, d, (lo, hi) in
                  zip((h, wd), (oh, ow), (kh, kw), stride, dilation, pads, strict=True))
    if groups == 1:
        xt = xp.permute_dims(x, (1, 0, 2, 3))
        gt = xp.permute_dims(g, (1, 0, 2, 3))
    else:
        og = o // groups
        xt = xp.reshape(xp.permute_dims(xp.reshape(x, (n, groups, cg, h, wd)), (2, 1, 0, 3, 4)),
                        (cg, groups * n, h, wd))
        gt = xp.reshape(xp.permute_dims(xp.reshape(g, (n, groups, og, oh, ow)), (1, 2, 0, 3, 4)),
                        (groups * og, n, oh, ow))
    r = _call(xp, _CONV, xt, gt, stride=dilation, pads=pads2, dilation=stride, groups=groups)
    return xp.permute_dims(r, (1, 0, 2, 3))


def _conv_vjp_x(xp: Any, g: Any, ans: Any, x: Any, w: Any, *, stride: tuple[int, ...], pads: Pads,
                dilation: tuple[int, ...], groups: int) -> Any:
    h, wd = int(x.shape[2]), int(x.shape[3])
    kh, kw = int(w.shape[2]), int(w.shape[3])
    oh, ow = int(g.shape[2]), int(g.shape[3])
    pads2 = tuple((lo, _trim(size, out, k, s, d, lo, hi)) for size, out, k, s, d, (lo, hi) in
                  zip((h, wd), (oh, ow), (kh, kw), stride, dilation, pads, strict=True))
    return _call(xp, _CONV_T, g, w, stride=stride, pads=pads2, dilation=dilation, groups=groups)


def _conv_vjp_w(xp: Any, g: Any, ans: Any, x: Any, w: Any, *, stride: tuple[int, ...], pads: Pads,
                dilation: tuple[int, ...], groups: int) -> Any:
    return _wgrad(xp, x, g, w, stride, pads, dilation, groups)


def _conv_t_vjp_x(xp: Any, g: Any, ans: Any, x: Any, w: Any, **kw: Any) -> Any:
    return _call(xp, _CONV, g, w, **kw)


def _conv_t_vjp_w(xp: Any, g: Any, ans: Any, x: Any, w: Any, *, stride: tuple[int, ...], pads: Pads,
                  dilation: tuple[int, ...], groups: int) -> Any:
    # <conv_t(x, w), g> = <x, conv(g, w)>: the weight's gradient of conv(g, w) with cotangent x
    return _wgrad(xp, g, x, w, stride, pads, dilation, groups)


_CONV.defvjp(_conv_vjp_x, _conv_vjp_w)
_CONV.defjvp(lambda xp, t, ans, x, w, **kw: _call(xp, _CONV, t, w, **kw),
             lambda xp, t, ans, x, w, **kw: _call(xp, _CONV, x, t, **kw))
_CONV_T.defvjp(_conv_t_vjp_x, _conv_t_vjp_w)
_CONV_T.defjvp(lambda xp, t, ans, x, w, **kw: _call(xp, _CONV_T, t, w, **kw),
               lambda xp, t, ans, x, w, **kw: _call(xp, _CONV_T, x, t, **kw))


def _conv_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:  # noqa: N803
    """vmap: batch axes folded into the examples' axis, or (a batched weight) into the groups."""
    x, w = xs
    if not bs[1]:
        s = tuple(int(v) for v in x.shape)
        y = apply(prim, (_op("reshape", x, shape=(math.prod(s[:K + 1]), *s[K + 1:])), w), kw)
        return _op("reshape", y, shape=(*s[:K + 1], *(int(v) for v in y.shape[1:])))
    x, w = full(xs, bs, K)
    xsh = tuple(int(v) for v in x.shape)
    wsh = tuple(int(v) for v in w.shape)
    lead, b = xsh[:K], math.prod(xsh[:K])
    n = xsh[K]
    xf = _op("reshape", _op("permute_dims", _op("reshape", x, shape=(b, *xsh[K:])), axes=(1, 0, 2, 3, 4)),
            shape=(n, b * xsh[K + 1], *xsh[K + 2:]))
    wf = _op("reshape", w, shape=(b * wsh[K], *wsh[K + 1:]))
    y = apply(prim, (xf, wf), {**kw, "groups": kw["groups"] * b})
    ysh = tuple(int(v) for v in y.shape)
    y = _op("permute_dims", _op("reshape", y, shape=(n, b, ysh[1] // b, *ysh[2:])), axes=(1, 0, 2, 3, 4))
    return _op("reshape", y, shape=(*lead, n, ysh[1] // b, *ysh[2:]))


_CONV.batching(_conv_batch)
_CONV_T.batching(_conv_batch)


# ---------------------------------------------------------------------- convolution
def _conv2d(x: Any, weight: Any, bias: Any, stride: tuple[int, ...], pads: Sequence[tuple[int, int]],
            dilation: tuple[int, ...], groups: int, func: str, padding_mode: str = "zeros") -> Any:
    _, c, h, w = _shape(x)
    wshape = _shape(weight)
    if len(wshape) != 4:
        msg = f"{func}: weight must have shape (out_channels, in_channels / groups, kh, kw), got {wshape}"
        raise XpgradValueError(msg)
    o, cg, kh, kw = wshape
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        msg = f"{func}: groups must be a positive int, got {groups!r}"
        raise XpgradValueError(msg)
    if cg * groups != c:
        msg = (f"{func}: the input has {c} channels, but weight {wshape} with groups={groups} "
               f"expects {cg * groups}")
        raise XpgradValueError(msg)
    if o % groups:
        msg = f"{func}: out_channels ({o}) must be divisible by groups ({groups})"
        raise XpgradValueError(msg)
    if bias is not None and _shape(bias) != (o,):
        msg = f"{func}: bias must have shape ({o},), got {_shape(bias)}"
        raise XpgradValueError(msg)
    oh = _out_size(h, kh, stride[0], dilation[0], *pads[0])
    ow = _out_size(w, kw, stride[1], dilation[1], *pads[1])
    if oh < 1 or ow < 1:
        msg = (f"{func}: the kernel {(kh, kw)} (dilation {dilation}) is larger than the padded input "
               f"{(h + sum(pads[0]), w + sum(pads[1]))}")
        raise XpgradValueError(msg)
    if padding_mode != "zeros":
        x, pads = _pad_spatial(x, pads, padding_mode), [(0, 0), (0, 0)]
    y = apply(_CONV, (x, weight), {"stride": tuple(stride), "pads": tuple((int(lo), int(hi)) for lo, hi in pads),
                                   "dilation": tuple(dilation), "groups": groups})
    if bias is not None:
        y = y + xg.reshape(bias, (o, 1, 1))
    return y


def conv2d(input: Any, weight: Any, bias: Any = None, stride: int | tuple[int, ...] = 1,
           padding: str | int | tuple[int, ...] = 0, dilation: int | tuple[int, ...] = 1,
           groups: int = 1) -> Tensor:
    """2-D cross-correlation of ``(N, C_in, H, W)`` (or ``(C_in, H, W)``) with ``(C_out, C_in/groups, kh, kw)``.

    ``padding`` is an int, a pair, ``"valid"`` (none) or ``"same"`` (output size =
    input size; stride 1; an odd total padding puts the extra row/column at the
    end, as PyTorch). Same arguments and result as ``torch.nn.functional.conv2d``.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.reshape(xg.arange(16.0), (1, 1, 4, 4))
        >>> w = xg.ones((1, 1, 2, 2))
        >>> xg.nn.functional.conv2d(x, w, stride=2)
        Tensor([[[[10., 18.],
                  [42., 50.]]]], dtype=float64, device=cpu)
    """
    func = "conv2d"
    x, unbatched = _check_input(input, 2, func)
    check_dtype(x, func, weight, bias)
    stride_ = ntuple(stride, 2, "stride", func, 1)
    dil = ntuple(dilation, 2, "dilation", func, 1)
    kernel = _shape(weight)[2:]
    pads = _conv_padding(padding, kernel if len(kernel) == 2 else (1, 1), stride_, dil, func)
    y = _conv2d(x, weight, bias, stride_, pads, dil, groups, func)
    return y[0, ...] if unbatched else y


def conv1d(input: Any, weight: Any, bias: Any = None, stride: int | tuple[int, ...] = 1,
           padding: str | int | tuple[int, ...] = 0, dilation: int | tuple[int, ...] = 1, groups: int = 1) -> Tensor:
    """1-D cross-correlation of ``(N, C_in, L)`` (or ``(C_in, L)``) with ``(C_out, C_in/groups, k)``.

    The arguments are those of [`conv2d`][xpgrad.nn.functional.conv2d] for one spatial axis (and of
    ``torch.nn.functional.conv1d``).

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([[[1.0, 2.0, 3.0, 4.0]]])
        >>> xg.nn.functional.conv1d(x, xg.asarray([[[1.0, -1.0]]]), padding="same")
        Tensor([[[-1., -1., -1.,  4.]]], dtype=float64, device=cpu)
    """
    func = "conv1d"
    x, unbatched = _check_input(input, 1, func)
    check_dtype(x, func, weight, bias)
    wshape = _shape(weight)
    if len(wshape) != 3:
        msg = f"{func}: weight must have shape (out_channels, in_channels / groups, k), got {wshape}"
        raise XpgradValueError(msg)
    stride_ = ntuple(stride, 1, "stride", func, 1)
    dil = ntuple(dilation, 1, "dilation", func, 1)
    pads = _conv_padding(padding, wshape[2:], stride_, dil, func)
    y = _conv2d(xg.expand_dims(x, axis=2), xg.expand_dims(weight, axis=2), bias, (1, stride_[0]),
                [(0, 0), pads[0]], (1, dil[0]), groups, func)
    y = y[:, :, 0, ...]
    return y[0, ...] if unbatched else y


def conv_transpose2d(input: Any, weight: Any, bias: Any = None, stride: int | tuple[int, ...] = 1,
                     padding: int | tuple[int, ...] = 0, output_padding: int | tuple[int, ...] = 0,
                     groups: int = 1, dilation: int | tuple[int, ...] = 1) -> Tensor:
    """2-D transposed convolution (the gradient of [`conv2d`][xpgrad.nn.functional.conv2d] with respect to its input).

    ``weight`` has shape ``(C_in, C_out/groups, kh, kw)``; the output size is
    ``(H - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1``.
    Same arguments and result as ``torch.nn.functional.conv_transpose2d``.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([[[[1.0, 2.0], [3.0, 4.0]]]])
        >>> xg.nn.functional.conv_transpose2d(x, xg.ones((1, 1, 2, 2)), stride=2)
        Tensor([[[[1., 1., 2., 2.],
                  [1., 1., 2., 2.],
                  [3., 3., 4., 4.],
                  [3., 3., 4., 4.]]]], dtype=float64, device=cpu)
    """
    func = "conv_transpose2d"
    x, unbatched = _check_input(input, 2, func)
    check_dtype(x, func, weight, bias)
    stride_ = ntuple(stride, 2, "stride", func, 1)
    pad_ = ntuple(padding, 2, "padding", func)
    dil = ntuple(dilation, 2, "dilation", func, 1)
    opad = ntuple(output_padding, 2, "output_padding", func)
    for op, s, d in zip(opad, stride_, dil, strict=True):
        if op >= max(s, d):
            msg = (f"{func}: output_padding {opad} must be smaller than the stride {stride_} "
                   f"or the dilation {dil}")
            raise XpgradValueError(msg)
    wshape = _shape(weight)
    if len(wshape) != 4:
        msg = f"{func}: weight must have shape (in_channels, out_channels / groups, kh, kw), got {wshape}"
        raise XpgradValueError(msg)
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        msg = f"{func}: groups must be a positive int, got {groups!r}"
        raise XpgradValueError(msg)
    ci, og, kh, kw = wshape
    c = _shape(x)[1]
    if ci != c or ci % groups:
        msg = (f"{func}: the input has {c} channels, but weight {wshape} with groups={groups} "
               f"expects {ci} (divisible by groups)")
        raise XpgradValueError(msg)
    h, w = _shape(x)[2:]
    pads = tuple((p, p - op) for p, op in zip(pad_, opad, strict=True))
    size = [(n_ - 1) * s + d * (k - 1) + 1 - lo - hi
            for n_, s, d, k, (lo, hi) in zip((h, w), stride_, dil, (kh, kw), pads, strict=True)]
    if any(sz < 1 for sz in size):
        msg = f"{func}: padding {pad_} leaves an empty output for an input of size {(h, w)}"
        raise XpgradValueError(msg)
    if bias is not None and _shape(bias) != (og * groups,):
        msg = f"{func}: bias must have shape ({og * groups},), got {_shape(bias)}"
        raise XpgradValueError(msg)
    y = apply(_CONV_T, (x, weight), {"stride": stride_, "pads": pads, "dilation": dil, "groups": groups})
    if bias is not None:
        y = y + xg.reshape(bias, (og * groups, 1, 1))
    return y[0, ...] if unbatched else y


# ---------------------------------------------------------------------- pooling
def _pool_geometry(shape: tuple[int, ...], kernel: tuple[int, ...], stride: tuple[int, ...],
                   padding: tuple[int, ...], dilation: tuple[int, ...], ceil_mode: bool,
                   func: str) -> tuple[tuple[int, ...], list[tuple[int, int]]]:
    """Output size and the (lo, hi) padding each spatial axis needs (PyTorch's rules, ceil_mode included)."""
    out, pads = [], []
    for size, k, s, p, d in zip(shape[-2:], kernel, stride, padding, dilation, strict=True):
        if p * 2 > d * (k - 1) + 1:
            msg = f"{func}: padding {padding} must be at most half of the (dilated) kernel size {kernel}"
            raise XpgradValueError(msg)
        span = size + 2 * p - d * (k - 1) - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + p:
            o -= 1  # the last window must start inside the input or the left padding
        if o < 1:
            msg = f"{func}: the kernel {kernel} is larger than the padded input size {size + 2 * p}"
            raise XpgradValueError(msg)
        out.append(o)
        pads.append((p, max((o - 1) * s + d * (k - 1) + 1 - size - p, 0)))
    return (out[0], out[1]), pads


def _pool_args(kernel_size: Any, stride: Any, padding: Any, func: str) -> tuple[tuple[int, ...], ...]:
    kernel = ntuple(kernel_size, 2, "kernel_size", func, 1)
    stride_ = kernel if stride is None or stride == () else ntuple(stride, 2, "stride", func, 1)
    return kernel, stride_, ntuple(padding, 2, "padding", func)


# ---------------------------------------------------------------------- max pooling primitive
# ``nn.max_pool2d`` returns the maxima and, per output, the flat ``H * W`` position of the first
# maximum of its window (PyTorch's indices): the residual its rules read. Torch's own kernel
# where it has one (floating inputs), else the composition: one strided slice of the
# (-inf-)padded input per kernel offset, ``argmax`` over them. The VJP routes each cotangent to
# its window's maximum (torch's backward kernel, or the composition's transpose: one zero-stuffed,
# shifted copy per kernel offset, or a reshape when the windows tile the input); it is linear in
# the cotangent and made of standard functions, so it differentiates again. The JVP gathers the
# tangent at the indices.
def _first_offset(xp: Any, idx: Any, width: int, kernel: tuple[int, ...], stride: tuple[int, ...],
                  padding: tuple[int, ...], dilation: tuple[int, ...]) -> Any:
    """Per output, the kernel offset (row-major) of the window's maximum, from its flat input position."""
    oh, ow = int(idx.shape[-2]), int(idx.shape[-1])
    dev = array_api_compat.device(idx)
    r0 = xp.reshape(xp.arange(oh, dtype=idx.dtype, device=dev), (oh, 1)) * stride[0] - padding[0]
    c0 = xp.reshape(xp.arange(ow, dtype=idx.dtype, device=dev), (1, ow)) * stride[1] - padding[1]
    return ((idx // width - r0) // dilation[0]) * kernel[1] + (idx % width - c0) // dilation[1]


def _maxpool_portable(xp: Any, x: Any, *, kernel: tuple[int, ...], stride: tuple[int, ...],
                      padding: tuple[int, ...], dilation: tuple[int, ...], ceil_mode: bool, pads: Pads,
                      out: tuple[int, ...]) -> tuple[Any, Any]:
    low = -math.inf if is_float(x.dtype) else xp.iinfo(x.dtype).min
    n, c, _, w = (int(s) for s in x.shape)
    xt = _batch_last(xp, x, pads, value=low)  # (C, H, W, N): each slice below copies runs of N
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out
    cols = [xt[:, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw, :]
            for i in range(kh) for j in range(kw)]
    y = xp.max(xp.stack(cols, axis=1), axis=1)
    # the flat input position of each window's first maximum (argmax's: a NaN is the maximum):
    # offset k's position where it holds the maximum, the offsets from the last to the first
    dev = array_api_compat.device(x)
    r0 = xp.reshape(xp.arange(oh, device=dev), (oh, 1, 1)) * sh - padding[0]
    c0 = xp.reshape(xp.arange(ow, device=dev), (1, ow, 1)) * sw - padding[1]
    base = r0 * w + c0
    k = kh * kw
    idx = xp.broadcast_to(base + ((k - 1) // kw) * dh * w + ((k - 1) % kw) * dw, tuple(int(v) for v in y.shape))
    for m in range(k - 2, -1, -1):
        hit = cols[m] == y
        if is_float(x.dtype):
            hit = hit | (cols[m] != cols[m])
        idx = xp.where(hit, base + (m // kw) * dh * w + (m % kw) * dw, idx)
    return _batch_first(xp, y, (c, oh, ow, n)), _batch_first(xp, idx, (c, oh, ow, n))


def _torch_maxpool(x: Any, *, kernel: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...],
                   dilation: tuple[int, ...], ceil_mode: bool, pads: Pads, out: tuple[int, ...]) -> Any:
    import torch.nn.functional as F  # noqa: N812

    return F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)


def _torch_maxpool_vjp(g: Any, x: Any, idx: Any, *, kernel: tuple[int, ...], stride: tuple[int, ...],
                       padding: tuple[int, ...], dilation: tuple[int, ...], ceil_mode: bool, pads: Pads,
                       out: tuple[int, ...]) -> Any:
    import torch

    return torch.ops.aten.max_pool2d_with_indices_backward(g, x, list(kernel), list(stride), list(padding),
                                                           list(dilation), ceil_mode, idx)


_NATIVE_FNS["torch"]["max_pool2d"] = _torch_maxpool
_NATIVE_FNS["torch"]["max_pool2d_vjp"] = _torch_maxpool_vjp


def _maxpool_fwd(xp: Any, x: Any, **kw: Any) -> tuple[Any, Any]:
    f = native_kernel(xp, "max_pool2d") if is_float(x.dtype) else None
    return _maxpool_portable(xp, x, **kw) if f is None else f(x, **kw)


def _zeros_like_pad(xp: Any, x: Any, pads: Pads) -> Any:
    return _pad_spatial(x, pads) if is_xpgrad(xp) else _xpad(xp, x, pads)


def _window_scatter(xp: Any, gk: Any, size: tuple[int, ...], kernel: tuple[int, ...], stride: tuple[int, ...],
                    dilation: tuple[int, ...], pads: Pads) -> Any:
    """The sum, over kernel offsets, of ``gk[:, :, k]`` placed at the input positions that window
    offset ``k`` reads: the transpose of the composition's strided slices; ``(N, C, H, W)``."""
    n, c = int(gk.shape[0]), int(gk.shape[1])
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    oh, ow = int(gk.shape[-2]), int(gk.shape[-1])
    hp, wp = size[0] + sum(pads[0]), size[1] + sum(pads[1])
    if (sh, sw) == (kh, kw) and (dh, dw) == (1, 1):  # the windows tile the input: a reshape
        t = xp.reshape(gk, (n, c, kh, kw, oh, ow))
        t = xp.reshape(xp.permute_dims(t, (0, 1, 4, 2, 5, 3)), (n, c, oh * kh, ow * kw))
        full = _zeros_like_pad(xp, t, ((0, hp - oh * kh), (0, wp - ow * kw)))
    else:
        full = None
        for i in range(kh):
            for j in range(kw):
                t = gk[:, :, i * kw + j, ...]
                for axis, s in ((2, sh), (3, sw)):
                    if s > 1:
                        shp = tuple(int(v) for v in t.shape)
                        z = xp.zeros_like(t)
                        t = xp.reshape(xp.stack([t] + [z] * (s - 1), axis=axis + 1),
                                       (*shp[:axis], shp[axis] * s, *shp[axis + 1:]))
                rows, cols_ = (oh - 1) * sh + 1, (ow - 1) * sw + 1
                t = t[:, :, :rows, :cols_]
                t = _zeros_like_pad(xp, t, ((i * dh, hp - i * dh - rows), (j * dw, wp - j * dw - cols_)))
                full = t if full is None else full + t
    return _zeros_like_pad(xp, full, ((-pads[0][0], -pads[0][1]), (-pads[1][0], -pads[1][1])))


def _maxpool_vjp(xp: Any, g: Any, ans: Any, x: Any, *, kernel: tuple[int, ...], stride: tuple[int, ...],
                 padding: tuple[int, ...], dilation: tuple[int, ...], ceil_mode: bool, pads: Pads,
                 out: tuple[int, ...]) -> Any:
    gy = g[0]
    if gy is None:
        return None
    idx = _raw(ans[1])
    if not is_xpgrad(xp):
        f = native_kernel(xp, "max_pool2d_vjp")
        if f is not None:
            return f(gy, x, idx, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                     ceil_mode=ceil_mode, pads=pads, out=out)
    if (stride == kernel and dilation == (1, 1) and not is_xpgrad(xp) and _tracing.base_namespace(xp) is None
            and not array_api_compat.is_jax_namespace(xp) and not array_api_compat.is_dask_namespace(xp)):
        return _maxpool_vjp_tiles(xp, gy, idx, x, kernel, padding, pads, out)
    hit = _hit(xp, idx, int(x.shape[3]), kernel, stride, padding, dilation)
    ge = xp.expand_dims(gy, axis=2)
    gk = xp.where(hit, ge, xp.zeros_like(ge))
    return _window_scatter(xp, gk, (int(x.shape[2]), int(x.shape[3])), kernel, stride, dilation, pads)


def _maxpool_vjp_tiles(xp: Any, gy: Any, idx: Any, x: Any, kernel: tuple[int, ...], padding: tuple[int, ...],
                       pads: Pads, out: tuple[int, ...]) -> Any:
    """The VJP where the windows tile the input (stride = kernel, no dilation), on a library whose
    arrays take item assignment: per kernel offset, the cotangents whose maximum it holds,
    written into that offset's strided slice of the (padded) input's gradient."""
    n, c, h, w = (int(s) for s in x.shape)
    (kh, kw), (oh, ow) = kernel, out
    dev = array_api_compat.device(gy)
    r0 = xp.reshape(xp.arange(oh, dtype=idx.dtype, device=dev), (oh, 1)) * kh - padding[0]
    c0 = xp.reshape(xp.arange(ow, dtype=idx.dtype, device=dev), (1, ow)) * kw - padding[1]
    base = r0 * w + c0
    zero = xp.zeros((), dtype=gy.dtype, device=dev)
    gx = xp.zeros((n, c, h + sum(pads[0]), w + sum(pads[1])), dtype=gy.dtype, device=dev)
    for i in range(kh):
        for j in range(kw):
            gx[:, :, i: i + kh * (oh - 1) + 1: kh, j: j + kw * (ow - 1) + 1: kw] = xp.where(
                idx == base + (i * w + j), gy, zero)
    return _xpad(xp, gx, ((-pads[0][0], -pads[0][1]), (-pads[1][0], -pads[1][1])))


def _hit(xp: Any, idx: Any, width: int, kernel: tuple[int, ...], stride: tuple[int, ...],
         padding: tuple[int, ...], dilation: tuple[int, ...]) -> Any:
    """``(N, C, kh*kw, oh, ow)``: whether kernel offset k holds its window's maximum (raw, or a
    constant Tensor where ``xp`` is xpgrad's namespace)."""
    raw = _raw(idx)
    bxp = backend_namespace(raw)
    first = _first_offset(bxp, raw, width, kernel, stride, padding, dilation)
    k = kernel[0] * kernel[1]
    hit = bxp.reshape(bxp.arange(k, dtype=first.dtype, device=array_api_compat.device(first)),
                      (1, 1, k, 1, 1)) == bxp.expand_dims(first, axis=2)
    return xp.asarray(hit) if is_xpgrad(xp) else hit


def _maxpool_jvp(xp: Any, t: Any, ans: Any, x: Any, *, kernel: tuple[int, ...], stride: tuple[int, ...],
                 padding: tuple[int, ...], dilation: tuple[int, ...], ceil_mode: bool, pads: Pads,
                 out: tuple[int, ...]) -> tuple[Any, None]:
    # the tangent's value at each window's maximum: the composition's columns, masked
    # (standard functions only: a gather by the indices would rechunk a Dask array)
    hit = _hit(xp, ans[1], int(x.shape[3]), kernel, stride, padding, dilation)
    cols, _ = _im2col(xp, t, kernel, stride, pads, dilation)
    cols = xp.reshape(cols, (int(t.shape[0]), int(t.shape[1]), kernel[0] * kernel[1], *out))
    return xp.sum(xp.where(hit, cols, xp.zeros_like(cols)), axis=2), None


_MAXPOOL = primitive("nn.max_pool2d", _maxpool_fwd, save=(0,), save_ans=True, multi=True, chapter="nn")
_MAXPOOL.defvjp(_maxpool_vjp)
_MAXPOOL.defjvp(_maxpool_jvp)


def _maxpool_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:  # noqa: N803
    s = tuple(int(v) for v in xs[0].shape)
    y, idx = apply(prim, (_op("reshape", xs[0], shape=(math.prod(s[:K + 1]), *s[K + 1:])),), kw)
    return tuple(_op("reshape", o, shape=(*s[:K + 1], *(int(v) for v in o.shape[1:]))) for o in (y, idx))


_MAXPOOL.batching(_maxpool_batch)


def max_pool2d(input: Any, kernel_size: int | tuple[int, ...], stride: int | tuple[int, ...] | None = None,
               padding: int | tuple[int, ...] = 0, dilation: int | tuple[int, ...] = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Any:
    """Maximum over each (dilated) ``kernel_size`` window; ``stride`` defaults to ``kernel_size``.

    Padding is ``-inf`` (at most half the kernel). The gradient goes to the first
    maximum of each window in row-major kernel order, as PyTorch's. With
    ``return_indices=True`` also returns, per output, the flat ``H * W`` position
    of that maximum (int64-like, PyTorch's convention).

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.reshape(xg.arange(16.0), (1, 1, 4, 4))
        >>> xg.nn.functional.max_pool2d(x, 2)
        Tensor([[[[ 5.,  7.],
                  [13., 15.]]]], dtype=float64, device=cpu)
    """
    func = "max_pool2d"
    x, unbatched = _check_input(input, 2, func)
    kernel, stride_, pad_ = _pool_args(kernel_size, stride, padding, func)
    dil = ntuple(dilation, 2, "dilation", func, 1)
    shape = _shape(x)
    out, pads = _pool_geometry(shape, kernel, stride_, pad_, dil, ceil_mode, func)
    y, idx = apply(_MAXPOOL, (x,), {"kernel": kernel, "stride": stride_, "padding": pad_, "dilation": dil,
                                    "ceil_mode": bool(ceil_mode), "pads": tuple(pads), "out": tuple(out)})
    if not return_indices:
        return y[0, ...] if unbatched else y
    return (y[0, ...], idx[0, ...]) if unbatched else (y, idx)


def _counts(size: int, k: int, s: int, o: int, lo: int, hi: int) -> list[int]:
    """Per output position, how many of the window's indices fall in ``[lo, hi)`` (window i starts at i*s)."""
    return [max(min(i * s + k, hi) - max(i * s, lo), 0) for i in range(o)]


# ---------------------------------------------------------------------- average pooling primitive
# ``nn.avg_pool2d``: the sum over each window (zero padding) divided by ``div``: a number
# (``divisor_override``) or per output row and column the counts whose product divides.
# Torch's own kernels both ways; JAX's ``lax.reduce_window``; else the composition. It is
# linear: the VJP spreads ``g / divisor`` over each window (the composition's transpose),
# the JVP is the pooling of the tangent.
Div = Any  # an int, or (per-row counts, per-column counts)


def _divisor(xp: Any, like: Any, div: Div) -> Any:
    if isinstance(div, int):
        return div
    dev = array_api_compat.device(like)
    ch = xp.reshape(xp.asarray(div[0], dtype=like.dtype, device=dev), (len(div[0]), 1))
    cw = xp.reshape(xp.asarray(div[1], dtype=like.dtype, device=dev), (1, len(div[1])))
    return ch * cw


def _avgpool_portable(xp: Any, x: Any, *, kernel: tuple[int, ...], stride: tuple[int, ...], pads: Pads,
                      div: Div, **_: Any) -> Any:
    cols, _o = _im2col(xp, x, kernel, stride, pads, (1, 1))
    return xp.sum(cols, axis=2) / _divisor(xp, x, div)


def _torch_avgpool(x: Any, *, kernel: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...],
                   ceil_mode: bool, count_include_pad: bool, divisor_override: int | None, **_: Any) -> Any:
    import torch.nn.functional as F  # noqa: N812

    return F.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)


def _torch_avgpool_vjp(g: Any, x: Any, *, kernel: tuple[int, ...], stride: tuple[int, ...],
                       padding: tuple[int, ...], ceil_mode: bool, count_include_pad: bool,
                       divisor_override: int | None, **_: Any) -> Any:
    import torch

    return torch.ops.aten.avg_pool2d_backward(g, x, list(kernel), list(stride), list(padding), ceil_mode,
                                              count_include_pad, divisor_override)


def _jax_avgpool(x: Any, *, kernel: tuple[int, ...], stride: tuple[int, ...], pads: Pads, div: Div,
                 **_: Any) -> Any:
    import jax.numpy as jnp
    from jax import lax

    total = lax.reduce_window(x, jnp.zeros((), dtype=x.dtype), lax.add, (1, 1, *kernel), (1, 1, *stride),
                              ((0, 0), (0, 0), *pads))
    return total / _divisor(jnp, x, div)


_NATIVE_FNS["torch"]["avg_pool2d"] = _torch_avgpool
_NATIVE_FNS["torch"]["avg_pool2d_vjp"] = _torch_avgpool_vjp
_NATIVE_FNS["jax"]["avg_pool2d"] = _jax_avgpool


def _avgpool_fwd(xp: Any, x: Any, **kw: Any) -> Any:
    f = native_kernel(xp, "avg_pool2d")
    return _avgpool_portable(xp, x, **kw) if f is None else f(x, **kw)


def _avgpool_vjp(xp: Any, g: Any, ans: Any, x: Any, **kw: Any) -> Any:
    if not is_xpgrad(xp):
        f = native_kernel(xp, "avg_pool2d_vjp")
        if f is not None:
            return f(g, x, **kw)
    kernel = kw["kernel"]
    k = kernel[0] * kernel[1]
    gd = xp.expand_dims(g / _divisor(backend_namespace(_raw(g)), _raw(g), kw["div"]), axis=2)
    gk = xp.broadcast_to(gd, (*gd.shape[:2], k, *gd.shape[3:]))
    return _window_scatter(xp, gk, (int(x.shape[2]), int(x.shape[3])), kernel, kw["stride"], (1, 1), kw["pads"])


_AVGPOOL = primitive("nn.avg_pool2d", _avgpool_fwd, save=(0,), chapter="nn")
_AVGPOOL.defvjp(_avgpool_vjp)
_AVGPOOL.defjvp(lambda xp, t, ans, x, **kw: _call(xp, _AVGPOOL, t, **kw))


def _avgpool_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:  # noqa: N803
    s = tuple(int(v) for v in xs[0].shape)
    y = apply(prim, (_op("reshape", xs[0], shape=(math.prod(s[:K + 1]), *s[K + 1:])),), kw)
    return _op("reshape", y, shape=(*s[:K + 1], *(int(v) for v in y.shape[1:])))


_AVGPOOL.batching(_avgpool_batch)


def avg_pool2d(input: Any, kernel_size: int | tuple[int, ...], stride: int | tuple[int, ...] | None = None,
               padding: int | tuple[int, ...] = 0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """Mean over each ``kernel_size`` window; ``stride`` defaults to ``kernel_size``.

    Zero padding counts in the divisor when ``count_include_pad`` (PyTorch's
    default); windows that ``ceil_mode`` lets run past the padding never count
    the overhang. ``divisor_override`` replaces the divisor.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.reshape(xg.arange(16.0), (1, 1, 4, 4))
        >>> xg.nn.functional.avg_pool2d(x, 2)
        Tensor([[[[ 2.5,  4.5],
                  [10.5, 12.5]]]], dtype=float64, device=cpu)
        >>> xg.nn.functional.avg_pool2d(x, 2, padding=1, count_include_pad=False)[0, 0, 0]
        Tensor([0. , 1.5, 3. ], dtype=float64, device=cpu)
    """
    func = "avg_pool2d"
    x, unbatched = _check_input(input, 2, func)
    _check_float(x, func)
    kernel, stride_, pad_ = _pool_args(kernel_size, stride, padding, func)
    shape = _shape(x)
    out, pads = _pool_geometry(shape, kernel, stride_, pad_, (1, 1), ceil_mode, func)
    div: Div
    if divisor_override is not None:
        if not isinstance(divisor_override, int) or isinstance(divisor_override, bool) or divisor_override == 0:
            msg = f"{func}: divisor_override must be a non-zero int, got {divisor_override!r}"
            raise XpgradValueError(msg)
        div = divisor_override
    else:
        per_axis = []
        for size, k, s, o, p in zip(shape[2:], kernel, stride_, out, pad_, strict=True):
            lo, hi = (0, size + 2 * p) if count_include_pad else (p, size + p)
            per_axis.append(tuple(float(v) for v in _counts(size, k, s, o, lo, hi)))
        div = tuple(per_axis)
    y = apply(_AVGPOOL, (x,), {"kernel": kernel, "stride": stride_, "padding": pad_, "ceil_mode": bool(ceil_mode),
                               "count_include_pad": bool(count_include_pad), "divisor_override": divisor_override,
                               "pads": tuple(pads), "div": div})
    return y[0, ...] if unbatched else y


def _adaptive_matrix(like: Any, size: int, out: int) -> Any:
    """``(out, size)``: row i averages ``[floor(i*size/out), ceil((i+1)*size/out))``, PyTorch's windows."""
    rows = []
    for i in range(out):
        start, end = (i * size) // out, -(-((i + 1) * size) // out)
        rows.append([1.0 / (end - start) if start <= j < end else 0.0 for j in range(size)])
    data = _raw(like)
    bxp = backend_namespace(data)
    return bxp.asarray(rows, dtype=data.dtype, device=array_api_compat.device(data))


def adaptive_avg_pool2d(input: Any, output_size: int | tuple[int | None, int | None]) -> Tensor:
    """Average pooling to a fixed ``output_size`` (``None`` keeps an input size), PyTorch's windows.

    Computed as ``P_h @ x @ P_w.T`` with constant averaging matrices.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.reshape(xg.arange(9.0), (1, 1, 3, 3))
        >>> xg.nn.functional.adaptive_avg_pool2d(x, 2)
        Tensor([[[[2., 3.],
                  [5., 6.]]]], dtype=float64, device=cpu)
        >>> xg.nn.functional.adaptive_avg_pool2d(x, (1, None)).shape
        (1, 1, 1, 3)
    """
    func = "adaptive_avg_pool2d"
    x, unbatched = _check_input(input, 2, func)
    _check_float(x, func)
    h, w = _shape(x)[2:]
    sizes = (output_size, output_size) if not isinstance(output_size, Sequence) else tuple(output_size)
    if len(sizes) != 2 or not all(s is None or (isinstance(s, int) and not isinstance(s, bool) and s >= 1)
                                  for s in sizes):
        msg = f"{func}: output_size must be a positive int or a pair of positive ints / None, got {output_size!r}"
        raise XpgradValueError(msg)
    oh = h if sizes[0] is None else sizes[0]
    ow = w if sizes[1] is None else sizes[1]
    y = x
    if oh != h:
        y = xg.matmul(_adaptive_matrix(x, h, oh), y)
    if ow != w:
        y = xg.matmul(y, xg.matrix_transpose(_adaptive_matrix(x, w, ow)))
    return y[0, ...] if unbatched else y


# ---------------------------------------------------------------------- Dask kernels
# Dask has no convolution of its own, and the composition on a Dask array builds some 10**4
# tasks (a slice, a stack, reshapes and a matmul per chunk and kernel offset). Its kernels
# here are one task per chunk of the batch axis: the input rechunked so that only that axis is
# chunked (channels, rows, columns in one chunk each), then the NumPy composition on each
# chunk (``blockwise`` / ``map_blocks``); the weight's gradient is each chunk's partial sum,
# then their sum. Dask is imported only by these functions, called on Dask arrays.
class _Shape:
    """What a rule reads of an argument it was not given (its shape and dtype)."""

    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        self.shape = shape
        self.dtype = dtype


def _by_batch(a: Any, like: Any = None) -> Any:
    """Dask ``a`` chunked along axis 0 only (as ``like``'s axis 0 where given)."""
    return a.rechunk((a.chunks[0] if like is None else like.chunks[0], *(-1,) * (a.ndim - 1)))


def _block_ns(a: Any) -> Any:
    return backend_namespace(a)


def _dask_conv(x: Any, w: Any, *, stride: tuple[int, ...], pads: Pads, dilation: tuple[int, ...],
               groups: int) -> Any:
    import dask.array as da

    _, _, h, wd = (int(s) for s in x.shape)
    o, _, kh, kw = (int(s) for s in w.shape)
    oh, ow = (_out_size(n, k, s, d, lo, hi) for n, k, s, d, (lo, hi) in
              zip((h, wd), (kh, kw), stride, dilation, pads, strict=True))

    def block(xb: Any, wb: Any) -> Any:
        return _conv_portable(_block_ns(xb), xb, wb, stride=stride, pads=pads, dilation=dilation, groups=groups)

    return da.blockwise(block, "nabc", _by_batch(x), "nijk", w.rechunk(-1), "lmpq", concatenate=True,
                        new_axes={"a": o, "b": oh, "c": ow}, dtype=x.dtype, meta=x._meta)


def _dask_conv_t(x: Any, w: Any, *, stride: tuple[int, ...], pads: Pads, dilation: tuple[int, ...],
                 groups: int) -> Any:
    import dask.array as da

    _, _, h, wd = (int(s) for s in x.shape)
    _, og, kh, kw = (int(s) for s in w.shape)
    oh, ow = ((n - 1) * s + d * (k - 1) + 1 - lo - hi for n, k, s, d, (lo, hi) in
              zip((h, wd), (kh, kw), stride, dilation, pads, strict=True))

    def block(xb: Any, wb: Any) -> Any:
        return _conv_t_portable(_block_ns(xb), xb, wb, stride=stride, pads=pads, dilation=dilation, groups=groups)

    return da.blockwise(block, "nabc", _by_batch(x), "nijk", w.rechunk(-1), "lmpq", concatenate=True,
                        new_axes={"a": og * groups, "b": oh, "c": ow}, dtype=x.dtype, meta=x._meta)


def _dask_conv_wgrad(x: Any, g: Any, w: Any, *, stride: tuple[int, ...], pads: Pads, dilation: tuple[int, ...],
                     groups: int) -> Any:
    import dask.array as da

    wshape = tuple(int(s) for s in w.shape)
    x = _by_batch(x)

    def block(xb: Any, gb: Any) -> Any:
        r = _wgrad_portable(_block_ns(xb), xb, gb, wshape, stride, pads, dilation, groups)
        return r[None, ...]

    parts = da.blockwise(block, "nabcd", x, "nijk", _by_batch(g, x), "nlmp", concatenate=True,
                         new_axes=dict(zip("abcd", wshape, strict=True)), adjust_chunks={"n": 1},
                         dtype=w.dtype, meta=x._meta)
    return da.sum(parts, axis=0)


def _dask_window(x: Any, fn: Any, out: tuple[int, ...], dtype: Any) -> Any:
    """``fn`` on each batch chunk of ``x``, whose blocks become ``(n, C, *out)``."""
    x = _by_batch(x)
    return x.map_blocks(fn, chunks=(x.chunks[0], (int(x.shape[1]),), (out[0],), (out[1],)), dtype=dtype,
                        meta=x._meta.astype(dtype))


def _dask_maxpool(x: Any, **kw: Any) -> tuple[Any, Any]:
    import operator

    def block(xb: Any) -> Any:
        return _maxpool_portable(_block_ns(xb), xb, **kw)

    pair = _dask_window(x, block, kw["out"], x.dtype)  # (the blocks are pairs: picked apart below)
    idx_dtype = array_api_compat.array_namespace(x._meta).arange(1).dtype
    y = pair.map_blocks(operator.itemgetter(0), dtype=x.dtype, meta=x._meta)
    idx = pair.map_blocks(operator.itemgetter(1), dtype=idx_dtype, meta=x._meta.astype(idx_dtype))
    return y, idx


def _dask_maxpool_vjp(g: Any, x: Any, idx: Any, **kw: Any) -> Any:
    _, c, h, w = (int(s) for s in x.shape)
    g = _by_batch(g)

    def block(gb: Any, ib: Any) -> Any:
        return _maxpool_vjp(_block_ns(gb), (gb, None), (None, ib), _Shape((int(gb.shape[0]), c, h, w), gb.dtype),
                            **kw)

    return g.map_blocks(block, _by_batch(idx, g), chunks=(g.chunks[0], (c,), (h,), (w,)), dtype=g.dtype,
                        meta=g._meta)


def _dask_avgpool(x: Any, **kw: Any) -> Any:
    def block(xb: Any) -> Any:
        return _avgpool_portable(_block_ns(xb), xb, **kw)

    out = tuple(len(d) for d in kw["div"]) if not isinstance(kw["div"], int) else None
    if out is None:
        _, _, h, w = (int(s) for s in x.shape)
        out = tuple(_out_size(n, k, s, 1, lo, hi) for n, k, s, (lo, hi) in
                    zip((h, w), kw["kernel"], kw["stride"], kw["pads"], strict=True))
    return _dask_window(x, block, out, x.dtype)


def _dask_avgpool_vjp(g: Any, x: Any, **kw: Any) -> Any:
    _, c, h, w = (int(s) for s in x.shape)
    g = _by_batch(g)

    def block(gb: Any) -> Any:
        return _avgpool_vjp(_block_ns(gb), gb, None, _Shape((int(gb.shape[0]), c, h, w), gb.dtype), **kw)

    return g.map_blocks(block, chunks=(g.chunks[0], (c,), (h,), (w,)), dtype=g.dtype, meta=g._meta)


_NATIVE_FNS["dask"].update({
    "conv2d": _dask_conv, "conv_transpose2d": _dask_conv_t, "conv2d_wgrad": _dask_conv_wgrad,
    "max_pool2d": _dask_maxpool, "max_pool2d_vjp": _dask_maxpool_vjp,
    "avg_pool2d": _dask_avgpool, "avg_pool2d_vjp": _dask_avgpool_vjp,
})
