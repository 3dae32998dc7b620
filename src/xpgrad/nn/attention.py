"""``MultiheadAttention``, PyTorch's layer: same arguments, parameter names and initialization."""

from __future__ import annotations

from typing import Any

from .. import _namespace as xg
from .._exceptions import XpgradValueError
from ..autograd._tensor import Tensor
from . import functional as F  # noqa: N812 - PyTorch's conventional alias
from . import init
from ._checks import check_dtype
from .layers import Linear, _empty, _positive
from .module import Module
from .parameter import Parameter

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """Multi-head attention: ``softmax(Q K^T / sqrt(head_dim) + mask) V`` per head, then an output projection.

    Parameters as PyTorch: ``in_proj_weight`` ``(3E, E)`` (or ``q_proj_weight``,
    ``k_proj_weight``, ``v_proj_weight`` when ``kdim``/``vdim`` differ from ``E``),
    ``in_proj_bias`` ``(3E,)``, ``out_proj`` (a Linear), and ``bias_k``/``bias_v``
    with ``add_bias_kv``; xavier-uniform projections, zero biases. Inputs are
    ``(L, N, E)`` (``(N, L, E)`` with ``batch_first``) or unbatched ``(L, E)``.
    ``forward`` returns ``(output, weights)``; see
    [`xpgrad.nn.functional.multi_head_attention_forward`][xpgrad.nn.functional.multi_head_attention_forward] for the masks.

    Examples:
        >>> import xpgrad as xg
        >>> mha = xg.nn.MultiheadAttention(8, 2, batch_first=True)
        >>> x = xg.ones((3, 5, 8), dtype=xg.float32)
        >>> out, weights = mha(x, x, x)
        >>> out.shape, weights.shape
        ((3, 5, 8), (3, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, *, dtype: Any = None,
                 device: Any = None) -> None:
        super().__init__()
        func = "MultiheadAttention"
        self.embed_dim = _positive(embed_dim, "embed_dim", func)
        self.kdim = embed_dim if kdim is None else _positive(kdim, "kdim", func)
        self.vdim = embed_dim if vdim is None else _positive(vdim, "vdim", func)
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        if not isinstance(num_heads, int) or num_heads < 1 or embed_dim % num_heads:
            msg = f"{func}: embed_dim ({embed_dim}) must be divisible by num_heads, got num_heads={num_heads!r}"
            raise XpgradValueError(msg)
        if not 0.0 <= dropout <= 1.0:
            msg = f"{func}: dropout must be in [0, 1], got {dropout!r}"
            raise XpgradValueError(msg)
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _empty((3 * embed_dim, embed_dim), dtype, device, type(self).__name__)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = _empty((embed_dim, embed_dim), dtype, device, type(self).__name__)
            self.k_proj_weight = _empty((embed_dim, self.kdim), dtype, device, type(self).__name__)
            self.v_proj_weight = _empty((embed_dim, self.vdim), dtype, device, type(self).__name__)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = _empty((3 * embed_dim,), dtype, device, type(self).__name__)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype, device=device)
        self.bias_k: Parameter | None
        self.bias_v: Parameter | None
        if add_bias_kv:
            self.bias_k = _empty((1, 1, embed_dim), dtype, device, type(self).__name__)
            self.bias_v = _empty((1, 1, embed_dim), dtype, device, type(self).__name__)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None and self.bias_v is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(self, query: Any, key: Any, value: Any, key_padding_mask: Any = None, need_weights: bool = True,
                attn_mask: Any = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        for t, what in ((query, "query"), (key, "key"), (value, "value")):
            check_dtype(t, self, self.out_proj.weight, what=what)
        batched = len(tuple(query.shape)) == 3
        if self.batch_first and batched:
            query, key, value = (xg.permute_dims(t, (1, 0, 2)) for t in (query, key, value))
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and batched:
            out = xg.permute_dims(out, (1, 0, 2))
        return out, weights
