"""Sorting: ``sort`` (differentiable through its permutation) and ``argsort``.

The forward of ``sort`` finds the permutation with a stable ``argsort`` and
gathers with it; the VJP gathers the upstream gradient with the inverse
permutation (``argsort`` of the permutation). A gather, not a scatter: it works
on every backend, immutable ones included, and to any order, since the gather
(``take_along_axis``) is itself differentiable. Tied elements get the gradient of
the output position the stable order gives them.
"""

from __future__ import annotations

from typing import Any

from .._dtypes import is_float
from ..autograd._batching_util import along_axis
from ._common import Array, Tensor, primitive
from ._registry import Chapter
from .indexing import _take_along_axis_fwd as _take_along

__all__ = ["argsort", "sort"]

_C = "sorting"
op = Chapter(_C, module=__name__)


def _sort_fwd(xp: Any, x: Any, *, axis: int, descending: bool) -> tuple[Any, Any]:
    perm = xp.argsort(x, axis=axis, descending=descending, stable=True)
    return _take_along(xp, x, perm, axis=axis), perm


def _sort_vjp(xp: Any, g: Any, ans: Any, x: Any, *, axis: int, descending: bool) -> Any:
    if g[0] is None:
        return None
    return _take_along(xp, g[0], xp.argsort(ans[1], axis=axis), axis=axis)


def _sort_jvp(xp: Any, t: Any, ans: Any, x: Any, *, axis: int, descending: bool) -> tuple[Any, None]:
    perm = ans[1]
    if isinstance(perm, Tensor):  # higher order: the recorded permutation output, used as a constant index
        perm = Tensor(perm.data)
    return _take_along(xp, t, perm, axis=axis), None


# outputs (sorted values, permutation); the permutation is what the VJP needs; forward mode:
# the tangent in sorted order (the permutation's tangent is none)
_sort = op.primitive("sort", fwd=_sort_fwd, vjp=(_sort_vjp,), jvp=(_sort_jvp,), save=(), save_ans=True, multi=True,
                     batch=along_axis)

# integer and boolean inputs have no gradient: the backend's own sort (torch cannot gather uint16)
_sort_values = primitive("sort.values", lambda xp, x, **kw: xp.sort(x, **kw), nondiff=True, chapter="internal",
                         batch=along_axis)


@op.entry(_sort)
def sort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Array:
    """Sorted copy of ``x`` along ``axis``.

    Floating ``x``: the differentiable permutation gather; integer and boolean: the
    backend's sort. Always sorts stably (a stable sort is also a valid unstable one),
    so that tied elements, and their gradients, keep their relative order.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([3.0, 1.0, 2.0], requires_grad=True)
        >>> y = xg.sort(x, descending=True)
        >>> y.backward(gradient=xg.asarray([1.0, 10.0, 100.0]))
        >>> x.grad
        Tensor([  1., 100.,  10.], dtype=float64, device=cpu)
    """
    if not is_float(x.dtype):
        return _sort_values.bind(x, axis=axis, descending=descending, stable=True)
    return _sort.bind(x, axis=axis, descending=descending)[0]


@op.function(fwd=lambda xp, x, **kw: xp.argsort(x, **kw), nondiff=True, batch=along_axis)
def argsort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Array:
    """Indices that sort ``x`` along ``axis``. Not differentiable (integer output).

    Examples:
        >>> import xpgrad as xg
        >>> xg.argsort(xg.asarray([3.0, 1.0, 2.0]))
        Tensor([1, 2, 0], dtype=int64, device=cpu)
    """


op.check_all(__all__)
