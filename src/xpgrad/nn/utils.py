"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_`` (in place, under ``no_grad``)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from .. import _namespace as xg
from .._dispatch import backend_namespace
from .._exceptions import XpgradRuntimeError, XpgradValueError
from ..autograd._grad_mode import no_grad
from ..autograd._tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p.grad for p in params if p.grad is not None]


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False) -> Tensor:
    """Scale the gradients in place so that their joint norm is at most ``max_norm``.

    The norm is taken over all gradients together, as if concatenated. Returns
    the total norm before clipping (a 0-D Tensor).

    Examples:
        >>> import xpgrad as xg
        >>> w = xg.nn.Parameter(xg.asarray([3.0, 4.0]))
        >>> (w * w).sum().backward()
        >>> xg.nn.utils.clip_grad_norm_([w], 1.0)
        Tensor(10., dtype=float64, device=cpu)
        >>> w.grad  # scaled by max_norm / (norm + 1e-6), as in PyTorch
        Tensor([0.59999994, 0.79999992], dtype=float64, device=cpu)
    """
    grads = _grads(parameters)
    if norm_type <= 0:
        msg = f"clip_grad_norm_: norm_type must be positive (or inf), got {norm_type!r}"
        raise XpgradValueError(msg)
    if not grads:
        return xg.asarray(0.0)
    with no_grad():
        if math.isinf(norm_type):
            parts = [xg.max(xg.abs(g)) for g in grads]
            total = parts[0]
            for t in parts[1:]:
                total = xg.maximum(total, t)
        else:
            total = xg.sum(xg.abs(grads[0]) ** norm_type)
            for g in grads[1:]:
                total = total + xg.sum(xg.abs(g) ** norm_type)
            total = total ** (1.0 / norm_type)
        if error_if_nonfinite and not math.isfinite(float(total)):
            msg = (f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is non-finite "
                   f"({float(total)})")
            raise XpgradRuntimeError(msg)
        coef = xg.clip(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g *= coef if _same_backend(g, coef) else float(coef)
    return total


def _same_backend(a: Tensor, b: Tensor) -> bool:
    return backend_namespace(a.data) is backend_namespace(b.data)


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float) -> None:
    """Clip every gradient elementwise to ``[-clip_value, clip_value]``, in place.

    Examples:
        >>> import xpgrad as xg
        >>> w = xg.nn.Parameter(xg.asarray([3.0, -4.0]))
        >>> (w * w).sum().backward()
        >>> xg.nn.utils.clip_grad_value_([w], 1.0); w.grad
        Tensor([ 1., -1.], dtype=float64, device=cpu)
    """
    with no_grad():
        for g in _grads(parameters):
            g[...] = xg.clip(g, min=-float(clip_value), max=float(clip_value))
