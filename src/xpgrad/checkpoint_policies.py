"""JAX's ``jax.checkpoint_policies``: what [`checkpoint`][xpgrad.checkpoint] keeps of ``f``'s intermediates.

A policy is a callable ``policy(prim, *arrays, **params) -> bool`` asked for each
primitive the checkpointed function runs (``prim`` an xpgrad ``Primitive``, whose
``.name`` names it; the arrays are its raw inputs): True keeps its output in the
forward, so that backward takes it instead of running the primitive again.

Examples:
    >>> import numpy as np, xpgrad as xg
    >>> w = np.eye(2)
    >>> f = xg.checkpoint(lambda x: xg.sin(x @ w) @ w, policy=xg.checkpoint_policies.dots_saveable)
    >>> xg.grad(lambda x: xg.sum(f(x)))(np.zeros((1, 2)))
    array([[1., 1.]])
"""

from __future__ import annotations

from typing import Any

__all__ = ["checkpoint_dots", "dots_saveable", "everything_saveable", "nothing_saveable"]


def nothing_saveable(prim: Any, *args: Any, **params: Any) -> bool:
    """Keep no output of ``f``: backward recomputes it all (the default)."""
    return False


def everything_saveable(prim: Any, *args: Any, **params: Any) -> bool:
    """Keep every output of ``f``: nothing is recomputed (``f`` runs as if not wrapped)."""
    return True


#: the primitives `dots_saveable` keeps (matrix products)
_DOTS = frozenset({"matmul", "tensordot", "vecdot"})


def dots_saveable(prim: Any, *args: Any, **params: Any) -> bool:
    """Keep the results of matrix products (``matmul``, ``tensordot``, ``vecdot``); recompute the rest."""
    return getattr(prim, "name", None) in _DOTS


#: JAX's older name for `dots_saveable`
checkpoint_dots = dots_saveable
