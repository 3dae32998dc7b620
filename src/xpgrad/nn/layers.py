"""Layers with parameters or shape logic: Linear, Embedding, LayerNorm, Dropout, Flatten, Unflatten."""

from __future__ import annotations

import math
from typing import Any

import xpgrad as xg

from .._backends import resolve_device
from .._dtypes import dtype_name, to_backend
from .._exceptions import XpgradValueError
from .._policy import current_policy
from ..autograd._grad_mode import no_grad
from ..autograd._tensor import Tensor
from . import functional as F  # noqa: N812 - PyTorch's conventional alias
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Dropout", "Embedding", "Flatten", "Identity", "LayerNorm", "Linear", "Unflatten"]


def _empty(shape: tuple[int, ...], dtype: Any = None, device: Any = None) -> Parameter:
    """A zero Parameter on the policy's namespace and device; float32 unless a dtype is set (as PyTorch)."""
    p = current_policy()
    name = dtype_name(dtype) if dtype is not None else (p.dtype or "float32")
    dev = resolve_device(p.xp, device) if device is not None else p.device
    return Parameter(p.xp.zeros(shape, dtype=to_backend(name, p.xp), device=dev))


def _positive(value: Any, what: str, func: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        msg = f"{func}: {what} must be a non-negative int, got {value!r}"
        raise XpgradValueError(msg)
    return value


class Identity(Module):
    """Returns its input unchanged (a placeholder in a Sequential).

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Identity()(xg.asarray([1.0]))
        Tensor([1.], dtype=float64, device=cpu)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape ``(out_features, in_features)``.

    Initialized as PyTorch does: ``U(-1/sqrt(in_features), 1/sqrt(in_features))`` for both,
    from :mod:`xpgrad.random` (reproducible under a policy seed). Parameters are
    created on the policy's namespace and device, in float32 unless the policy or
    ``dtype=`` names another dtype.

    Examples:
        >>> import xpgrad as xg
        >>> layer = xg.nn.Linear(3, 2)
        >>> layer.weight.shape, layer.bias.dtype
        ((2, 3), xpgrad.float32)
        >>> layer(xg.ones((5, 3), dtype=xg.float32)).shape
        (5, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 dtype: Any = None, device: Any = None) -> None:
        super().__init__()
        self.in_features = _positive(in_features, "in_features", "Linear")
        self.out_features = _positive(out_features, "out_features", "Linear")
        self.weight = _empty((out_features, in_features), dtype, device)
        if bias:
            self.bias = _empty((out_features,), dtype, device)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw the weights (kaiming uniform with a=sqrt(5), PyTorch's default)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Any) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Flatten(Module):
    """Flatten axes ``start_dim`` .. ``end_dim`` into one.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Flatten()(xg.zeros((2, 3, 4))).shape
        (2, 12)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Any) -> Tensor:
        shape = tuple(input.shape)
        nd = len(shape)
        if nd == 0:
            return xg.reshape(input, (1,))
        s, e = self.start_dim % nd, self.end_dim % nd
        if s > e:
            msg = f"Flatten: start_dim {self.start_dim} comes after end_dim {self.end_dim} for a {nd}-D input"
            raise XpgradValueError(msg)
        return xg.reshape(input, (*shape[:s], math.prod(shape[s:e + 1]), *shape[e + 1:]))

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split axis ``dim`` into ``unflattened_size``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.nn.Unflatten(1, (3, 4))(xg.zeros((2, 12))).shape
        (2, 3, 4)
    """

    def __init__(self, dim: int, unflattened_size: tuple[int, ...]) -> None:
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input: Any) -> Tensor:
        shape = tuple(input.shape)
        d = self.dim % len(shape)
        size = self.unflattened_size
        known = math.prod(s for s in size if s != -1)
        if (-1 not in size and known != shape[d]) or (-1 in size and (known == 0 or shape[d] % known)):
            msg = f"Unflatten: cannot split axis {self.dim} of size {shape[d]} into {size}"
            raise XpgradValueError(msg)
        return xg.reshape(input, (*shape[:d], *size, *shape[d + 1:]))

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Dropout(Module):
    """Zero elements with probability ``p`` while training (scaling the rest by ``1/(1-p)``); identity in eval.

    Examples:
        >>> import xpgrad as xg
        >>> drop = xg.nn.Dropout(0.5).eval()
        >>> drop(xg.ones(3))
        Tensor([1., 1., 1.], dtype=float64, device=cpu)
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            msg = f"Dropout: p must be in [0, 1], got {p!r}"
            raise XpgradValueError(msg)
        self.p = p

    def forward(self, input: Any) -> Tensor:
        return F.dropout(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim``, initialized ``N(0, 1)``.

    The row ``padding_idx`` starts at zero and gets no gradient.

    Examples:
        >>> import xpgrad as xg
        >>> emb = xg.nn.Embedding(10, 4, padding_idx=0)
        >>> emb(xg.asarray([[0, 3]])).shape
        (1, 2, 4)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None, *,
                 dtype: Any = None, device: Any = None) -> None:
        super().__init__()
        self.num_embeddings = _positive(num_embeddings, "num_embeddings", "Embedding")
        self.embedding_dim = _positive(embedding_dim, "embedding_dim", "Embedding")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                msg = f"Embedding: padding_idx must be within num_embeddings ({num_embeddings}), got {padding_idx}"
                raise XpgradValueError(msg)
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        self.weight = _empty((num_embeddings, embedding_dim), dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input: Any) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s if self.padding_idx is None else s + f", padding_idx={self.padding_idx}"


class LayerNorm(Module):
    """Layer normalization over the trailing ``normalized_shape`` axes, with a learned scale and shift.

    Examples:
        >>> import xpgrad as xg
        >>> ln = xg.nn.LayerNorm(4)
        >>> ln
        LayerNorm((4,), eps=1e-05, elementwise_affine=True)
        >>> ln(xg.ones((2, 4), dtype=xg.float32)).shape
        (2, 4)
    """

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, *, dtype: Any = None, device: Any = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = _empty(shape, dtype, device)
            init.ones_(self.weight)
            if bias:
                self.bias = _empty(shape, dtype, device)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Any) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
