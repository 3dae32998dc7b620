"""Set functions: ``isin`` and the ``unique_*`` family, declared non-differentiable.

``isin`` and the indices and counts are integer or boolean. ``unique_values`` (and
the ``values`` field of the others) is floating, but deduplication has no useful
derivative: a gradient would have to pick one of the merged elements or spread
over them, and PyTorch (``torch.unique``) and JAX (``jnp.unique``) give none
either. So the outputs are constants; select with indices from
``unique_inverse`` or ``unique_all`` (``take``) to differentiate through them.
The ``unique_*`` results are named tuples with the standard's field names.

Batching: ``isin`` with a batched ``x2`` compares each element of ``x1`` with every
element of its example's ``x2`` (one more axis, reduced with ``any``); with an unbatched
``x2`` it is pointwise in ``x1``. The ``unique_*`` functions cannot be batched: their
output's shape depends on the data (``data_dependent_shape``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..autograd._batching_util import with_new_last_axis
from ..autograd._core import Primitive
from ._common import Array, apply
from ._registry import Chapter, prim_of
from .elementwise import equal, logical_not
from .manipulation import reshape
from .utility import any as _any

# the result types stay out of ``__all__``: the namespace holds exactly the standard's names
__all__ = ["isin", "unique_all", "unique_counts", "unique_inverse", "unique_values"]

_C = "set"
# every function is an entry; the bodies of unique_all, unique_counts and unique_inverse wrap
# their primitive's outputs in a named tuple
op = Chapter(_C, module=__name__)


class UniqueAllResult(NamedTuple):
    """The result of [`unique_all`][xpgrad.ops.set_functions.unique_all]."""

    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCountsResult(NamedTuple):
    """The result of [`unique_counts`][xpgrad.ops.set_functions.unique_counts]."""

    values: Array
    counts: Array


class UniqueInverseResult(NamedTuple):
    """The result of [`unique_inverse`][xpgrad.ops.set_functions.unique_inverse]."""

    values: Array
    inverse_indices: Array


def _isin_fwd(xp: Any, x1: Any, x2: Any, *, invert: bool) -> Any:
    # (negated here: array-api-strict's isin ignores invert=)
    out = xp.isin(x1, x2)
    return xp.logical_not(out) if invert else out


_reshape_p, _any_p, _equal_p, _not_p = prim_of(reshape), prim_of(_any), prim_of(equal), prim_of(logical_not)


def _isin_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:
    x1, x2 = xs
    if not bs[1]:
        return apply(prim, tuple(xs), kw)
    s2 = tuple(x2.shape)
    a, r = with_new_last_axis(x1, bs[0], K)
    b = _reshape_p(x2, shape=s2[:K] + (1,) * r + (-1,))
    out = _any_p(_equal_p(a, b), axis=-1)
    return _not_p(out) if kw.get("invert") else out


#: the facts of the unique_* functions: their output's shape depends on the data
_UNIQUE: dict[str, Any] = {"nondiff": True, "data_dependent_shape": True, "unbatchable": (
    "the number of unique values differs from example to example, so the result's shape would depend on "
    "the data; call it outside the vmapped function, or compare with xg.isin or == instead"
)}
_unique_all = op.primitive("unique_all", fwd=lambda xp, x: tuple(xp.unique_all(x)), multi=True, **_UNIQUE)
_unique_counts = op.primitive("unique_counts", fwd=lambda xp, x: tuple(xp.unique_counts(x)), multi=True, **_UNIQUE)
_unique_inverse = op.primitive("unique_inverse", fwd=lambda xp, x: tuple(xp.unique_inverse(x)), multi=True, **_UNIQUE)


@op.function(fwd=_isin_fwd, arrays=2, nondiff=True, batch=_isin_batch)
def isin(x1: Array | int, x2: Array | int, /, *, invert: bool = False) -> Array:
    """Whether each element of ``x1`` occurs in ``x2`` (negated with ``invert``). Not differentiable.

    Examples:
        >>> import xpgrad as xg
        >>> xg.isin(xg.asarray([1, 2, 3]), xg.asarray([3, 1]))
        Tensor([ True, False,  True], dtype=bool, device=cpu)
    """


@op.entry(_unique_all)
def unique_all(x: Array, /) -> UniqueAllResult:
    """Unique values of ``x`` with first indices, inverse indices and counts. Not differentiable.

    Examples:
        >>> import xpgrad as xg
        >>> r = xg.unique_all(xg.asarray([2.0, 1.0, 2.0]))
        >>> r.values
        Tensor([1., 2.], dtype=float64, device=cpu)
        >>> r.indices, r.counts
        (Tensor([1, 0], dtype=int64, device=cpu), Tensor([1, 2], dtype=int64, device=cpu))
    """
    return UniqueAllResult(*_unique_all.bind(x))


@op.entry(_unique_counts)
def unique_counts(x: Array, /) -> UniqueCountsResult:
    """Unique values of ``x`` and how often each occurs. Not differentiable.

    Examples:
        >>> import xpgrad as xg
        >>> xg.unique_counts(xg.asarray([2.0, 1.0, 2.0])).counts
        Tensor([1, 2], dtype=int64, device=cpu)
    """
    return UniqueCountsResult(*_unique_counts.bind(x))


@op.entry(_unique_inverse)
def unique_inverse(x: Array, /) -> UniqueInverseResult:
    """Unique values of ``x`` and, per element, the index of its value. Not differentiable.

    ``take(values, inverse_indices)`` rebuilds ``x`` (flattened where ``x`` is not 1-D).

    Examples:
        >>> import xpgrad as xg
        >>> xg.unique_inverse(xg.asarray([2.0, 1.0, 2.0])).inverse_indices
        Tensor([1, 0, 1], dtype=int64, device=cpu)
    """
    return UniqueInverseResult(*_unique_inverse.bind(x))


# floating output, but no gradient: see the module docstring (as torch.unique and jnp.unique)
@op.function(fwd=lambda xp, x: xp.unique_values(x), **_UNIQUE)
def unique_values(x: Array, /) -> Array:
    """Sorted unique values of ``x``.

    Not differentiable, although floating (as ``torch.unique`` and ``jnp.unique``):
    the output is a constant.

    Examples:
        >>> import xpgrad as xg
        >>> xg.unique_values(xg.asarray([2.0, 1.0, 2.0]))
        Tensor([1., 2.], dtype=float64, device=cpu)
    """


op.check_all(__all__)
