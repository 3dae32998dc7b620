"""Functional forms of the layers, activations and losses (``xpgrad.nn.functional``).

Every function is composed of xpgrad's namespace functions, so it works on any
backend and its gradient (of any order) comes from the primitives' rules. The
numerically delicate ones are written so that no intermediate overflows:
``log_softmax`` shifts by the (detached) maximum, the logistic functions use
``exp(-|x|)``, and ``binary_cross_entropy_with_logits`` is finite with finite
gradients for logits of any size. Axis arguments follow the array API (``axis``);
PyTorch's ``dim=`` is accepted as a keyword alias.
"""

from __future__ import annotations

import math
from typing import Any

import xpgrad as xg

from .._dispatch import backend_namespace
from .._dtypes import dtype_name, is_float
from .._exceptions import XpgradTypeError, XpgradValueError
from ..autograd._core import apply, primitive
from ..autograd._tensor import Tensor

__all__ = [
    "linear", "dropout", "embedding", "layer_norm", "one_hot",
    "relu", "leaky_relu", "gelu", "silu", "tanh", "sigmoid", "softplus", "elu", "softmax", "log_softmax",
    "logsigmoid",
    "mse_loss", "l1_loss", "huber_loss", "smooth_l1_loss", "cross_entropy", "nll_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div",
]

_REDUCTIONS = ("mean", "sum", "none")


# ---------------------------------------------------------------------- helpers
def _data(x: Any) -> Any:
    return x.data if isinstance(x, Tensor) else x


def _bxp(x: Any) -> Any:
    return backend_namespace(_data(x))


def _device(x: Any) -> Any:
    import array_api_compat

    return array_api_compat.device(_data(x))


def _axis(axis: Any, dim: Any, func: str, default: int = -1) -> Any:
    if dim is not None:
        if axis is not None and axis != dim:
            msg = f"{func}: give axis= or its alias dim=, not both (got axis={axis!r}, dim={dim!r})"
            raise XpgradValueError(msg)
        return dim
    return default if axis is None else axis


def _detached_max(x: Any, axis: Any) -> Any:
    """max over ``axis`` (keepdims) as a constant backend array, with non-finite maxima set to 0."""
    bxp = _bxp(x)
    m = bxp.max(_data(x), axis=axis, keepdims=True)
    return bxp.where(bxp.isfinite(m), m, bxp.zeros_like(m))


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
    """log(1 + exp(z)) without overflow for any z; its derivative at 0 is exactly 1/2."""
    a = xg.abs(z)
    return 0.5 * (z + a) + xg.log1p(xg.exp(-a))


# ---------------------------------------------------------------------- erf
# erf is not in the array API standard. For |x| < 0.5 its Taylor series; otherwise
# erfc(z) = t * exp(-z^2 + h(2t - 1)), t = 2 / (2 + z), with h a Chebyshev series fitted
# (28 terms, mpmath reference) to relative error < 5e-16 in erf on [0.5, 10]; erf(10) == 1.
_ERFC_CHEB = (
    -0.6513268598908547, 0.6419697923564902, 0.019476473204185836, -0.009561514786808632,
    -0.0009465953444820369, 0.00036683949785276145, 4.252332480690777e-05, -2.0278578112534242e-05,
    -1.6242900046470256e-06, 1.3036558355805232e-06, 1.5626441722066142e-08, -8.523809591492654e-08,
    6.5290544390988515e-09, 5.0593434955514685e-09, -9.913641564930322e-10, -2.2736512229318417e-10,
    9.646791102014962e-11, 2.394038083065756e-12, -6.886027526536277e-12, 8.944879271730368e-13,
    3.130921408127142e-13, -1.1270822525221733e-13, 3.8108713588528985e-16, 7.106125536922576e-15,
    -1.5230878975373303e-15, -9.464871412184462e-17, 1.218683266906788e-16, -3.0494735135424696e-17,
)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _erf_fwd(xp: Any, x: Any) -> Any:
    x2 = x * x
    term = x
    series = x
    for n in range(1, 14):
        term = term * (-x2) / n
        series = series + term / (2 * n + 1)
    small = series * _TWO_OVER_SQRT_PI
    a = xp.abs(x)
    z = xp.clip(a, 0.5, 10.0)
    t = 2.0 / (2.0 + z)
    u2 = 2.0 * (2.0 * t - 1.0)
    b1 = b2 = 0.0 * z
    for c in _ERFC_CHEB[:0:-1]:
        b1, b2 = u2 * b1 - b2 + c, b1
    h = 0.5 * u2 * b1 - b2 + _ERFC_CHEB[0]
    big = 1.0 - t * xp.exp(h - z * z)
    big = xp.where(x < 0, -big, big)
    return xp.where(a < 0.5, small, big)


def _erf_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    xc = xp.clip(x, -30.0, 30.0)  # beyond, exp(-x^2) is 0 anyway; avoids overflow of x*x
    return g * (_TWO_OVER_SQRT_PI * xp.exp(-(xc * xc)))


_erf = primitive("nn.erf", _erf_fwd, save=(0,), chapter="internal")
_erf.defvjp(_erf_vjp)


def erf(x: Any) -> Tensor:
    """The error function, accurate to a few ulp in float64 (not part of the array API standard).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.erf(xg.asarray([0.0, 0.5, -2.0]))
        Tensor([ 0.        ,  0.52049988, -0.99532227], dtype=float64, device=cpu)
    """
    return apply(_erf, (x,), {})


# ---------------------------------------------------------------------- layers
def linear(input: Any, weight: Any, bias: Any = None) -> Tensor:
    """``input @ weight.T + bias``; ``weight`` has shape ``(out_features, in_features)``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.linear(xg.asarray([[1.0, 2.0]]), xg.asarray([[1.0, 1.0]]), xg.asarray([0.5]))
        Tensor([[3.5]], dtype=float64, device=cpu)
    """
    out = xg.matmul(input, xg.matrix_transpose(weight))
    return out if bias is None else out + bias


def dropout(input: Any, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``; identity unless training.

    The mask comes from :mod:`xpgrad.random`, so the policy's seed makes it reproducible.

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
    data = _data(input)
    name = dtype_name(data.dtype)
    if not is_float(name):
        msg = f"dropout: expected a floating tensor, got dtype {name}"
        raise XpgradTypeError(msg)
    if p == 1.0:
        return input * 0.0
    from .._io import move_array

    mask = xg.random.bernoulli(1.0 - p, tuple(data.shape), dtype=name)
    mask = move_array(mask, _bxp(data), _device(data))
    return input * (mask * (1.0 / (1.0 - p)))


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
    idx = _data(input)
    ixp = _bxp(idx)
    if is_float(idx.dtype):
        msg = f"embedding: indices must be integers, got dtype {dtype_name(idx.dtype)}"
        raise XpgradTypeError(msg)
    wshape = tuple(_data(weight).shape)
    flat = ixp.reshape(idx, (-1,))
    rows = xg.take(weight, flat, axis=0)
    if padding_idx is not None:
        pad = padding_idx % wshape[0]
        keep = ixp.reshape(flat != pad, (-1, 1))
        rows = xg.where(keep, rows, rows.detach())
    return xg.reshape(rows, (*tuple(idx.shape), wshape[1]))


def layer_norm(input: Any, normalized_shape: int | tuple[int, ...], weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing ``normalized_shape`` axes (mean 0, biased variance 1), then scale and shift.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.layer_norm(xg.asarray([[1.0, 3.0]]), (2,), eps=0.0)
        Tensor([[-1.,  1.]], dtype=float64, device=cpu)
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    xshape = tuple(_data(input).shape)
    k = len(shape)
    if k == 0 or xshape[len(xshape) - k:] != shape:
        msg = f"layer_norm: normalized_shape {shape} must equal the trailing axes of the input shape {xshape}"
        raise XpgradValueError(msg)
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
    return xg.where(input > 0, input, 0.0)


def leaky_relu(input: Any, negative_slope: float = 0.01) -> Tensor:
    """``x`` where positive, else ``negative_slope * x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.leaky_relu(xg.asarray([-1.0, 2.0]), 0.1)
        Tensor([-0.1,  2. ], dtype=float64, device=cpu)
    """
    return xg.where(input > 0, input, input * negative_slope)


def elu(input: Any, alpha: float = 1.0) -> Tensor:
    """``x`` where positive, else ``alpha * (exp(x) - 1)``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.elu(xg.asarray([0.0, 1.0]))
        Tensor([0., 1.], dtype=float64, device=cpu)
    """
    return xg.where(input > 0, input, alpha * xg.expm1(xg.minimum(input, 0.0)))


def sigmoid(input: Any) -> Tensor:
    """The logistic function ``1 / (1 + exp(-x))``, without overflow for any ``x``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.sigmoid(xg.asarray([0.0, -1000.0]))
        Tensor([0.5, 0. ], dtype=float64, device=cpu)
    """
    e = xg.exp(-xg.abs(input))
    return xg.where(input >= 0, 1.0, e) / (1.0 + e)


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
    if approximate == "none":
        return 0.5 * input * (1.0 + erf(input * (1.0 / math.sqrt(2.0))))
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (input + 0.044715 * (input * input * input))
        return 0.5 * input * (1.0 + xg.tanh(inner))
    msg = f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}"
    raise XpgradValueError(msg)


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold`` (as in PyTorch).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.softplus(xg.asarray([0.0, 30.0]))
        Tensor([ 0.69314718, 30.        ], dtype=float64, device=cpu)
    """
    bx = input * beta
    soft = xg.log1p(xg.exp(xg.minimum(bx, threshold))) / beta
    return xg.where(bx > threshold, input, soft)


def log_softmax(input: Any, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """``x - logsumexp(x)`` along ``axis`` (default -1), shifted by the maximum: no overflow.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.log_softmax(xg.asarray([0.0, 1000.0]))
        Tensor([-1000.,     0.], dtype=float64, device=cpu)
    """
    ax = _axis(axis, dim, "log_softmax")
    s = input - _detached_max(input, ax)
    return s - xg.log(xg.sum(xg.exp(s), axis=ax, keepdims=True))


def softmax(input: Any, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis`` (default -1), shifted by the maximum: no overflow.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.softmax(xg.asarray([0.0, 1000.0]))
        Tensor([0., 1.], dtype=float64, device=cpu)
    """
    ax = _axis(axis, dim, "softmax")
    e = xg.exp(input - _detached_max(input, ax))
    return e / xg.sum(e, axis=ax, keepdims=True)


# ---------------------------------------------------------------------- losses
def mse_loss(input: Any, target: Any, reduction: str = "mean") -> Tensor:
    """Squared error ``(input - target)**2``, reduced.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.mse_loss(xg.asarray([1.0, 2.0]), xg.asarray([0.0, 0.0]))
        Tensor(2.5, dtype=float64, device=cpu)
    """
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
    _check_reduction(reduction, "l1_loss")
    return _reduce(xg.abs(input - target), reduction)


def huber_loss(input: Any, target: Any, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """``0.5 d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 delta)``, with ``d = input - target``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.huber_loss(xg.asarray([0.5, 3.0]), xg.asarray([0.0, 0.0]), reduction="none")
        Tensor([0.125, 2.5  ], dtype=float64, device=cpu)
    """
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
    nd = len(_data(x).shape)
    if nd == 0:
        msg = f"{func}: the input needs a class axis, got a 0-D input"
        raise XpgradValueError(msg)
    return 0 if nd == 1 else 1


def _targets(input: Any, target: Any, ignore_index: int, cax: int, func: str) -> tuple[Any, Any, Any]:
    """One-hot of the targets (input's float dtype, 0 rows where ignored), the valid mask, the class shape."""
    x = _data(input)
    t = _data(target)
    if is_float(t.dtype):
        msg = f"{func}: class-index targets must be integers, got dtype {dtype_name(t.dtype)}"
        raise XpgradTypeError(msg)
    xshape = tuple(x.shape)
    expect = xshape[:cax] + xshape[cax + 1:]
    if tuple(t.shape) != expect:
        msg = f"{func}: target shape {tuple(t.shape)} does not match input shape {xshape} (expected {expect})"
        raise XpgradValueError(msg)
    bxp = _bxp(x)
    if _bxp(t) is not bxp:
        from .._io import move_array

        t = move_array(t, bxp, _device(x))
    n_cls = xshape[cax]
    cshape = [1] * len(xshape)
    cshape[cax] = n_cls
    classes = bxp.reshape(bxp.arange(n_cls, dtype=t.dtype, device=_device(x)), tuple(cshape))
    valid = t != ignore_index
    texp = bxp.expand_dims(t, axis=cax)
    onehot = bxp.astype(bxp.logical_and(texp == classes, bxp.expand_dims(valid, axis=cax)), x.dtype)
    return onehot, bxp.astype(valid, x.dtype), tuple(cshape)


def _class_weight(weight: Any, input: Any, cshape: tuple[int, ...], func: str) -> Any:
    """``weight`` (one per class) reshaped to broadcast along the class axis of ``input``.

    A constant weight is moved to the input's library, device and dtype; a weight
    that requires grad is used as it is (and receives a gradient).
    """
    w = _data(weight)
    n_cls = math.prod(cshape)
    if tuple(w.shape) != (n_cls,):
        msg = f"{func}: weight must have shape ({n_cls},) (one per class), got {tuple(w.shape)}"
        raise XpgradValueError(msg)
    if isinstance(weight, Tensor) and weight.requires_grad:
        return xg.reshape(weight, cshape)
    from .._io import move_array

    x = _data(input)
    bxp = _bxp(x)
    return bxp.reshape(move_array(w, bxp, _device(x), x.dtype), cshape)


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
        w_t = xg.sum(onehot * w, axis=cax)
        loss = -(picked * w_t)
        denom = w_t
    if reduction == "none":
        return loss
    total = xg.sum(loss)
    if reduction == "sum":
        return total
    return total / xg.sum(denom)


def cross_entropy(input: Any, target: Any, weight: Any = None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of unnormalized logits ``input`` (shape ``(N, C, ...)`` or ``(C,)``).

    ``target`` holds class indices (integers, shape without the class axis) or
    class probabilities (floating, the input's shape). ``label_smoothing`` mixes
    the target with the uniform distribution; ``weight`` weighs classes;
    ``ignore_index`` applies to index targets. Same definitions as PyTorch.

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
    logp = log_softmax(input, axis=cax)
    xshape = tuple(_data(input).shape)
    n_cls = xshape[cax]
    if is_float(_data(target).dtype):
        if tuple(_data(target).shape) != xshape:
            msg = f"{func}: probability targets must have the input's shape {xshape}, got {tuple(_data(target).shape)}"
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
        denom: Any = xg.sum(onehot * w, axis=cax)
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


def binary_cross_entropy(input: Any, target: Any, weight: Any = None, reduction: str = "mean") -> Tensor:
    """``-(y log p + (1 - y) log(1 - p))`` for probabilities ``p``; each log is clamped at -100, as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.functional.binary_cross_entropy(xg.asarray([0.5, 1.0]), xg.asarray([1.0, 0.0]), reduction="none")
        Tensor([  0.69314718, 100.        ], dtype=float64, device=cpu)
    """
    _check_reduction(reduction, "binary_cross_entropy")
    floor = math.exp(-100.0)
    log_p = xg.log(xg.maximum(input, floor))
    log_q = xg.log(xg.maximum(1.0 - input, floor))
    loss = -(target * log_p + (1.0 - target) * log_q)
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
        shape = tuple(_data(input).shape)
        total = xg.sum(loss)
        return total / shape[0] if shape else total
    return _reduce(loss, reduction)
