"""Batching rules of the ``fft`` extension: the transforms act along axes, so a logical axis
(or tuple of axes) is shifted past the ``k`` batch axes and the batch axes are never
transformed. ``fftn``-style primitives receive explicit, non-negative logical ``axes``
(``xpgrad.fft`` resolves the defaults against the example's shape); ``fftshift`` with
``axes=None`` shifts every logical axis.
"""

from __future__ import annotations

from typing import Any

from ..autograd._batched import RULES, shift_axes, shift_axis
from ..autograd._core import Primitive, apply


def _along_axis(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    """``fft``, ``ifft``, ``rfft``, ``irfft``, ``hfft``, ``ihfft``: ``axis`` an int (default -1)."""
    n = len(xs[0].shape) - k
    return apply(prim, tuple(xs), {**kw, "axis": shift_axis(prim.name, kw.get("axis", -1), n, k)})


def _along_axes(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    """``fftn``, ``ifftn``, ``rfftn``, ``irfftn``, ``fftshift``, ``ifftshift``: ``axes`` None
    (every logical axis), an int or a sequence of ints."""
    n = len(xs[0].shape) - k
    axes = kw.get("axes")
    s = kw.get("s")
    if axes is None and s is not None:  # (the standard's default: the last len(s) axes)
        axes = tuple(range(n - len(s), n))
    return apply(prim, tuple(xs), {**kw, "axes": shift_axes(prim.name, axes, n, k)})


for _name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    RULES[_name] = _along_axis
for _name in ("fftn", "ifftn", "rfftn", "irfftn", "fftshift", "ifftshift"):
    RULES[_name] = _along_axes
