"""Weight initialization, in place: ``xpgrad.nn.init``.

Each function fills a tensor in place (under ``no_grad``) and returns it. Random
values come from [`xpgrad.random`][xpgrad.random], so a policy seed (``with
xg.default_device(seed=0):``) makes them reproducible on every backend; they are
drawn in the tensor's dtype and moved to the tensor's library and device.
The formulas and defaults are PyTorch's.
"""

from __future__ import annotations

import math
from typing import Any

import array_api_compat

from .. import _namespace as xg
from .._dispatch import backend_namespace
from .._dtypes import dtype_name
from .._exceptions import XpgradValueError
from .._io import move_array
from ..autograd._grad_mode import no_grad
from ..autograd._tensor import Tensor

__all__ = [
    "calculate_gain", "constant_", "kaiming_normal_", "kaiming_uniform_", "normal_", "ones_", "uniform_",
    "xavier_normal_", "xavier_uniform_", "zeros_",
]


def _fill(tensor: Tensor, values: Any) -> Tensor:
    data = tensor.data
    arr = move_array(values, backend_namespace(data), array_api_compat.device(data), data.dtype)
    with no_grad():
        tensor[...] = arr
    return tensor


def _shape(tensor: Tensor) -> tuple[int, ...]:
    return tuple(tensor.data.shape)


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.init.calculate_gain("relu"), xg.nn.init.calculate_gain("tanh")
        (1.4142135623730951, 1.6666666666666667)
    """
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    known = [*linear, "tanh", "relu", "leaky_relu", "selu"]
    msg = f"calculate_gain: unknown nonlinearity {nonlinearity!r}; known: {known}"
    raise XpgradValueError(msg)


def _fans(tensor: Tensor, func: str) -> tuple[int, int]:
    shape = _shape(tensor)
    if len(shape) < 2:
        msg = f"{func}: fan in and fan out need a tensor with at least 2 dimensions, got shape {shape}"
        raise XpgradValueError(msg)
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _fan(tensor: Tensor, mode: str, func: str) -> int:
    fan_in, fan_out = _fans(tensor, func)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    msg = f"{func}: mode must be 'fan_in' or 'fan_out', got {mode!r}"
    raise XpgradValueError(msg)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill with numbers drawn uniformly from ``[a, b)``.

    Examples:
        >>> import xpgrad as xg
        >>> with xg.default_device(seed=0):
        ...     xg.nn.init.uniform_(xg.zeros(2), -1.0, 1.0)
        Tensor([ 0.27392337, -0.46042657], dtype=float64, device=cpu)
    """
    return _fill(tensor, xg.random.uniform(_shape(tensor), low=a, high=b, dtype=dtype_name(tensor.data.dtype)))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill with normal numbers of the given mean and standard deviation."""
    return _fill(tensor, xg.random.normal(_shape(tensor), mean=mean, std=std, dtype=dtype_name(tensor.data.dtype)))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    data = tensor.data
    bxp = backend_namespace(data)
    return _fill(tensor, bxp.full(tuple(data.shape), val, dtype=data.dtype, device=tensor.device))


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.init.zeros_(xg.ones(2))
        Tensor([0., 0.], dtype=float64, device=cpu)
    """
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot uniform: ``U(-a, a)`` with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fans(tensor, "xavier_uniform_")
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot normal: ``N(0, std**2)`` with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fans(tensor, "xavier_normal_")
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu") -> Tensor:
    """He uniform: ``U(-b, b)`` with ``b = gain * sqrt(3 / fan)`` (``a``: the leaky_relu slope).

    Examples:
        >>> import xpgrad as xg
        >>> w = xg.nn.init.kaiming_uniform_(xg.zeros((3, 100)), nonlinearity="relu")
        >>> bool(xg.max(xg.abs(w)) <= (6 / 100) ** 0.5)
        True
    """
    fan = _fan(tensor, mode, "kaiming_uniform_")
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu") -> Tensor:
    """He normal: ``N(0, std**2)`` with ``std = gain / sqrt(fan)``."""
    fan = _fan(tensor, mode, "kaiming_normal_")
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan))
