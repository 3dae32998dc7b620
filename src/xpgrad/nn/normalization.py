"""Batch and group normalization, functional forms (re-exported by ``xpgrad.nn.functional``).

Both normalize with the biased variance, as PyTorch. ``batch_norm`` in training
mode also updates the running statistics in place (under ``no_grad``) with the
unbiased variance, so the buffers of a module follow PyTorch's step for step. On
Dask, running statistics held in Tensors are persisted by the next optimizer step
([`xpgrad.optim.Optimizer.persist`][xpgrad.optim.Optimizer.persist]), so their graphs do not grow either.
"""

from __future__ import annotations

import math
from typing import Any

from .. import _namespace as xg
from .._dispatch import backend_namespace as array_namespace
from .._exceptions import XpgradValueError
from .._lazy import note_update
from ..autograd._batched import Batched
from ..autograd._grad_mode import RECOMPUTING, no_grad
from ..autograd._tensor import Tensor, _wrap
from ._checks import check_dtype, check_float

__all__ = ["batch_norm", "group_norm"]


def _tensor(x: Any) -> Any:
    """A raw array as a Tensor (a constant; anything else as it is), for the functions that put the input
    on the left of an operator with a Tensor: array-api-strict's operators raise there instead of deferring."""
    return x if isinstance(x, Tensor) or not hasattr(x, "shape") else _wrap(x)


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in x.shape)  # (an example's shape inside vmap)


def _per_channel(v: Any, c: int, nd: int, what: str, func: str) -> Any:
    """A ``(C,)`` vector reshaped to broadcast along axis 1 of an ``nd``-D input."""
    if _shape(v) != (c,):
        msg = f"{func}: {what} must have shape ({c},) (one per channel), got {_shape(v)}"
        raise XpgradValueError(msg)
    return xg.reshape(v, (c,) + (1,) * (nd - 2))


def _blend(buf: Any, batch: Tensor, momentum: float) -> None:
    """``buf <- (1 - momentum) * buf + momentum * batch``, in place (a Tensor, or an array of a mutable library)."""
    if isinstance(buf, Tensor):
        buf[...] = xg.astype(buf * (1.0 - momentum) + batch * momentum, buf.dtype)
        note_update(buf)  # on Dask: the optimizer's next persist includes it, so it does not grow
        return
    new = batch.data * momentum + buf * (1.0 - momentum)
    buf[...] = array_namespace(buf).astype(new, buf.dtype)


def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None, bias: Any = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel (axis 1) of ``(N, C, ...)`` by batch or running statistics, then scale and shift.

    Training (or no running statistics): the batch's mean and biased variance over
    every axis but 1; the running buffers, when given, become
    ``(1 - momentum) * running + momentum * batch`` (unbiased variance), in place.
    Evaluation: ``running_mean`` and ``running_var``. Same arguments as
    ``torch.nn.functional.batch_norm``; the running buffers are Tensors (updated in
    place on every library) or arrays of a library that allows in-place updates.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([[1.0, 10.0], [3.0, 30.0]])
        >>> rm, rv = xg.zeros(2), xg.ones(2)
        >>> xg.nn.functional.batch_norm(x, rm, rv, training=True, eps=0.0)
        Tensor([[-1., -1.],
                [ 1.,  1.]], dtype=float64, device=cpu)
        >>> rm, rv
        (Tensor([0.2, 2. ], dtype=float64, device=cpu), Tensor([ 1.1, 20.9], dtype=float64, device=cpu))
    """
    input = _tensor(input)  # noqa: A001 - (a raw array-api-strict array refuses `input - mu`)
    func = "batch_norm"
    check_dtype(input, func, weight, bias, running_mean, running_var)
    check_float(input, func)
    shape = _shape(input)
    if len(shape) < 2:
        msg = f"{func}: expected an input of shape (N, C, ...), got {shape}"
        raise XpgradValueError(msg)
    c, nd = shape[1], len(shape)
    axes = (0, *range(2, nd))
    for v, what in ((running_mean, "running_mean"), (running_var, "running_var")):
        if v is not None and _shape(v) != (c,):
            msg = f"{func}: {what} must have shape ({c},) (one per channel of the input {shape}), got {_shape(v)}"
            raise XpgradValueError(msg)
    if training or running_mean is None or running_var is None:
        n = math.prod(shape) // c if c else 0
        if training and n <= 1:
            msg = f"{func}: expected more than 1 value per channel when training, got input shape {shape}"
            raise XpgradValueError(msg)
        mu = xg.mean(input, axis=axes, keepdims=True)
        d = input - mu
        var = xg.mean(d * d, axis=axes, keepdims=True)
        y = d / xg.sqrt(var + eps)
        if training and (running_mean is not None or running_var is not None) and not RECOMPUTING.get():
            # (not in checkpoint's recomputation: the forward updated them already)
            if isinstance(input, Batched):
                msg = (f"{func}: inside vmap, training mode cannot update running_mean/running_var (each example "
                       "would update them differently); use eval mode, or pass running_mean=None and "
                       "running_var=None (per-example batch statistics)")
                raise XpgradValueError(msg)
            with no_grad():
                if running_mean is not None:
                    _blend(running_mean, xg.reshape(mu.detach(), (c,)), momentum)
                if running_var is not None:
                    _blend(running_var, xg.reshape(var.detach(), (c,)) * (n / (n - 1)), momentum)
    else:
        mean = _per_channel(running_mean, c, nd, "running_mean", func)
        var = _per_channel(running_var, c, nd, "running_var", func)
        y = (input - mean) / xg.sqrt(var + eps)
    if weight is not None:
        y = y * _per_channel(weight, c, nd, "weight", func)
    if bias is not None:
        y = y + _per_channel(bias, c, nd, "bias", func)
    return y


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Tensor:
    """Normalize ``(N, C, ...)`` over each group of ``C / num_groups`` channels (and all spatial axes).

    Then a per-channel scale ``weight`` and shift ``bias`` (shape ``(C,)``).

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([[1.0, 3.0, 10.0, 30.0]])
        >>> xg.nn.functional.group_norm(x, 2, eps=0.0)
        Tensor([[-1.,  1., -1.,  1.]], dtype=float64, device=cpu)
    """
    func = "group_norm"
    check_dtype(input, func, weight, bias)
    check_float(input, func)
    shape = _shape(input)
    if len(shape) < 2:
        msg = f"{func}: expected an input of shape (N, C, ...), got {shape}"
        raise XpgradValueError(msg)
    n, c = shape[:2]
    if not isinstance(num_groups, int) or isinstance(num_groups, bool) or num_groups < 1 or c % num_groups:
        msg = f"{func}: num_groups must be a positive int dividing the {c} channels, got {num_groups!r}"
        raise XpgradValueError(msg)
    # (N, G, C/G, ...): a split, so the axes need no merging (Dask reshapes nothing else)
    x = xg.reshape(input, (n, num_groups, c // num_groups, *shape[2:]))
    axes = tuple(range(2, len(shape) + 1))
    mu = xg.mean(x, axis=axes, keepdims=True)
    d = x - mu
    var = xg.mean(d * d, axis=axes, keepdims=True)
    y = xg.reshape(d / xg.sqrt(var + eps), shape)
    if weight is not None:
        y = y * _per_channel(weight, c, len(shape), "weight", func)
    if bias is not None:
        y = y + _per_channel(bias, c, len(shape), "bias", func)
    return y
