"""The dtype rule of the layers and of their functional forms: nothing promotes, as in PyTorch.

A float64 batch into a float32 ``Linear`` (or an integer batch into any layer with
floating parameters) raises, naming the layer or function and both dtypes: PyTorch
raises there too ("mat1 and mat2 must have the same dtype"), and NumPy would promote
silently (float64 out of a float32 model, or float64 out of an int64 batch).
The half dtypes follow the same rule: a bfloat16 batch into a bfloat16 layer is
fine, a float16 one (or float32) into it raises.
"""

from __future__ import annotations

from typing import Any

from .._dispatch import raw_array
from .._dtypes import dtype_name, is_float, kind
from .._exceptions import UnknownNameError, XpgradTypeError

__all__ = ["check_dtype", "check_float", "check_indices", "layer_name"]


def _name(dt: Any) -> str:
    try:
        return dtype_name(dt)
    except UnknownNameError:  # a dtype xpgrad does not know (float8): as the library writes it
        return str(dt)


def _floating(name: str) -> bool:
    try:
        return is_float(name)
    except (KeyError, UnknownNameError):  # an unknown one (float8_e4m3fn): floating all the same
        return "float" in name or "complex" in name


def layer_name(module: Any) -> str:
    """``Linear(in_features=3, out_features=2, bias=True)``: the layer as its repr's first line says it."""
    return f"{type(module).__name__}({module.extra_repr()})"


def check_dtype(input: Any, owner: Any, *params: Any, what: str = "input") -> None:
    """Raise unless ``input`` has the dtype of every ``param`` (``None`` ones skipped).

    One comparison of the backend dtypes when they agree (a Tensor's, a vmap-batched
    value's or a jit tracer's: ``raw_array`` gives each one's backend array or tracer).
    ``owner`` is the caller: a layer (a Module, named by `layer_name` only when raising) or a
    function's name.
    An input without a dtype (a list) is left to the caller's own checks.
    """
    dx = getattr(raw_array(input), "dtype", None)
    if dx is None:
        return
    for p in params:
        if p is None:
            continue
        dw = raw_array(p).dtype
        # (== only between one library's dtypes: array_api_strict warns comparing with NumPy's)
        if dx is dw or (type(dx) is type(dw) and dx == dw):
            continue
        nx, nw = _name(dx), _name(dw)
        if nx == nw:  # the same dtype of two libraries (a NumPy batch into a torch model): theirs to settle
            continue
        if not isinstance(owner, str):
            fix = f"convert the input (xg.astype(x, xg.{nw}))"
            if _floating(nx) and not nx.startswith("complex"):
                fix += f" or the model (model.to(dtype=xg.{nx}))"
            msg = f"{layer_name(owner)}: {what} dtype {nx} does not match the layer's {nw} parameters; {fix}"
        else:
            msg = (f"{owner}: {what} dtype {nx} does not match the weight's {nw}; the dtypes must be equal "
                   f"(nothing is promoted): convert one, e.g. xg.astype({what}, xg.{nw})")
        raise XpgradTypeError(msg)


def check_float(input: Any, owner: Any) -> None:
    """Raise unless ``input`` is floating (a layer without parameters to compare with, as LayerNorm's non-affine)."""
    dx = getattr(raw_array(input), "dtype", None)
    if dx is not None and not _floating(_name(dx)):
        func = owner if isinstance(owner, str) else layer_name(owner)
        msg = f"{func}: expected a floating input, got dtype {_name(dx)}; convert it (xg.astype(x, xg.float32))"
        raise XpgradTypeError(msg)


def check_indices(input: Any, owner: Any) -> None:
    """Raise unless ``input`` holds integers (PyTorch's embedding takes int32 and int64: not bool, not floats)."""
    dx = getattr(raw_array(input), "dtype", None)
    if dx is None:
        return
    name = _name(dx)
    try:
        ok = kind(name).endswith("integer")
    except (KeyError, UnknownNameError):  # a dtype xpgrad does not know
        ok = False
    if not ok:
        func = owner if isinstance(owner, str) else layer_name(owner)
        msg = f"{func}: indices must be integers, got dtype {name}; convert them (xg.astype(indices, xg.int64))"
        raise XpgradTypeError(msg)
