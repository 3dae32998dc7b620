"""``xpgrad.fft``: the array API ``fft`` extension over Tensors, differentiable.

The functions and their rules live in [`xpgrad.ops.fft`][xpgrad.ops.fft]; this module is the
namespace a user (and ``Tensor.__array_namespace__().fft``) sees, as
``array_api_strict.fft`` is.
"""

from __future__ import annotations

from .ops.fft import (
    fft,
    fftfreq,
    fftn,
    fftshift,
    hfft,
    ifft,
    ifftn,
    ifftshift,
    ihfft,
    irfft,
    irfftn,
    rfft,
    rfftfreq,
    rfftn,
)

__all__ = [
    "fft",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "ifft",
    "ifftn",
    "ifftshift",
    "ihfft",
    "irfft",
    "irfftn",
    "rfft",
    "rfftfreq",
    "rfftn",
]
