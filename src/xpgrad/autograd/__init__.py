"""The tape: Tensor, primitives, the backward engine and grad mode."""

from ._anomaly import detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled
from ._core import PRIMITIVES, ArgMeta, Node, Primitive, apply, primitive
from ._engine import backward, grad
from ._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ._tensor import Tensor, set_backward

set_backward(backward)  # (the Tensor's backward(): _engine imports _tensor, so it is handed down)

__all__ = [
    "PRIMITIVES",
    "ArgMeta",
    "Node",
    "Primitive",
    "Tensor",
    "apply",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "no_grad",
    "primitive",
    "set_grad_enabled",
]
