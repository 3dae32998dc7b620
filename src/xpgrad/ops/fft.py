"""The ``fft`` extension: discrete Fourier transforms and their VJP and JVP rules.

Every transform is linear, so its JVP is the same transform of the tangent and
its VJP is the adjoint transform of the cotangent (PyTorch's convention: for a
linear ``A``, the VJP is ``A^H g``, its real part for a real input). The adjoint
of a complex transform is the opposite transform with the ``norm`` swapped
(``backward`` <-> ``forward``, ``ortho`` stays): ``fft(x, norm="backward")`` has
the adjoint ``n * ifft(g, norm="backward") == ifft(g, norm="forward")``. The
zero-padding or trimming of ``n``/``s`` has the trimming or zero-padding back to
the input's length as adjoint.

The real transforms need one more step. ``rfft`` keeps half of a full ``fft``:
its adjoint zero-pads the cotangent to the full length, applies the adjoint
``ifft`` and keeps the real part. ``irfft`` extends its half-spectrum input by
conjugate symmetry, so each bin other than the zero-frequency (DC) bin and, for
an even length, the Nyquist bin, appears twice in the output: its adjoint is an
``rfft`` whose other bins are doubled (as PyTorch's ``fft_c2r_backward`` and
JAX's ``_irfft_transpose``). Like every backend, ``irfft`` ignores the imaginary
parts of the DC and Nyquist bins, so their gradient is zero. ``hfft`` is
``irfft`` of the conjugate input and ``ihfft`` the conjugate of ``rfft``, with
the ``norm`` swapped; their rules follow. ``fftshift``/``ifftshift`` are
permutations: each is the other's adjoint. ``fftfreq``/``rfftfreq`` create
arrays from Python numbers and have no gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from array_api_compat import is_dask_namespace

from .._exceptions import XpgradValueError
from .._tracing import TracingNamespace, base_namespace, recorded
from ..autograd._batched import shift_axes, shift_axis
from ..autograd._core import Primitive
from ._common import Array, Tensor, apply, zeros_like_shape
from ._registry import Chapter
from .creation import _create, _dt, _float_default, _where

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

_C = "fft"
# xpgrad.fft (the module users import) re-exports these functions; the registry and
# primitive names carry no prefix ("fftshift"). Each transform is a primitive declared with
# its rules and batching rule (`_transform`) and an entry whose body checks ``norm`` (and
# the n-dimensional ones ``s`` and ``axes`` against the input) and binds it; fftfreq and
# rfftfreq are creation entries (no array input, no primitive).
op = Chapter(_C, module="xpgrad.fft")

Norm = Literal["backward", "ortho", "forward"]

#: the norm of the adjoint transform
_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


# ---------------------------------------------------------------- helpers
def _check_norm(func: str, norm: Any) -> str:
    if norm not in _SWAP:
        msg = f"{func}: norm must be 'backward', 'ortho' or 'forward', got {norm!r}"
        raise XpgradValueError(msg)
    return norm  # type: ignore[no-any-return]


def _nd_params(func: str, x: Any, s: Sequence[int] | None, axes: Sequence[int] | None,
               c2r: bool = False) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Explicit ``(s, axes)`` for an n-dimensional transform (so backends never see
    defaults or ``-1``): no axes means all axes (and then ``s`` must be None, as the
    standard says); ``s[i] == -1`` or no ``s`` means the input's length,
    ``2 * (m - 1)`` for the last axis of a complex-to-real transform."""
    shape = tuple(x.shape)
    nd = len(shape)
    if axes is None:
        if s is not None:
            msg = f"{func}: s={tuple(s)} needs axes (the standard leaves no default for them)"
            raise XpgradValueError(msg)
        ax = tuple(range(nd))
    else:
        ax = tuple(axes)
        bad = [a for a in ax if not -nd <= a < nd]
        if bad:
            msg = f"{func}: axes {ax} out of range for an array of {nd} dimensions"
            raise XpgradValueError(msg)
        ax = tuple(a % nd for a in ax)
        if len(set(ax)) != len(ax):
            msg = f"{func}: axes must be distinct, got {tuple(axes)}"
            raise XpgradValueError(msg)
    if s is None:
        s = [-1] * len(ax)
    elif len(s) != len(ax):
        msg = f"{func}: s and axes must have the same length, got s={tuple(s)} and axes={ax}"
        raise XpgradValueError(msg)
    sizes = [int(n) for n in s]
    for i, a in enumerate(ax):
        if sizes[i] == -1:
            sizes[i] = 2 * (int(shape[a]) - 1) if c2r and i == len(ax) - 1 else int(shape[a])
    return tuple(sizes), ax


def _along(axis: int, start: int | None, stop: int | None) -> tuple[Any, ...]:
    """The index of ``start:stop`` along ``axis``."""
    return (*(slice(None),) * axis, slice(start, stop), ...)


def _resize(xp: Any, a: Any, axis: int, length: int) -> Any:
    """``a`` trimmed or zero-padded at the end to ``length`` along ``axis``."""
    have = int(a.shape[axis])
    if have == length:
        return a
    if have > length:
        return a[_along(axis, 0, length)]
    shape = tuple(length - have if i == axis else int(d) for i, d in enumerate(a.shape))
    return xp.concat([a, zeros_like_shape(xp, a, shape)], axis=axis)


def _resize_to(xp: Any, a: Any, axes: Sequence[int], shape: Sequence[int]) -> Any:
    for ax in axes:
        a = _resize(xp, a, ax, int(shape[ax]))
    return a


def _double(xp: Any, a: Any, axis: int, n: int) -> Any:
    """Double the half-spectrum bins of a length-``n`` real signal that stand for two
    bins of the full spectrum: all but DC and (``n`` even) Nyquist."""
    d = n - (n // 2 + 1)
    if d <= 0:
        return a
    parts = [a[_along(axis, 0, 1)], 2 * a[_along(axis, 1, 1 + d)]]
    if int(a.shape[axis]) > 1 + d:
        parts.append(a[_along(axis, 1 + d, None)])
    return xp.concat(parts, axis=axis)


def _ax(x: Any, axis: int) -> int:
    return axis % len(x.shape)


def _call(xp: Any, name: str, a: Any, **kw: Any) -> Any:
    """``xp.fft.<name>(a, **kw)``, with a chunked (Dask) array first made one chunk along
    the transformed axes (``axis``, or ``axes``: all of them when None), which Dask's
    transforms need ("only supports taking an FFT along an axis that has a single
    chunk"), as SciPy does before calling them. The rules call their transforms
    through it too: a cotangent or tangent is chunked as the input was. A Tensor (a
    rule recorded for a higher order) is rechunked by the primitive it goes through;
    inside [`xpgrad.jit`][xpgrad.jit] on Dask the rechunk and the transform are one recorded
    call, which rechunks the arrays of each replay as they come.
    """
    if type(xp) is TracingNamespace:
        base = base_namespace(xp)
        if is_dask_namespace(base):
            return _recorded_dask(xp, base, name)(a, **kw)
        return getattr(xp.fft, name)(a, **kw)
    return getattr(xp.fft, name)(_whole(a, kw), **kw)


def _whole(a: Any, kw: dict[str, Any]) -> Any:
    """``a``, rechunked to one chunk along the axes that ``kw`` transforms where it has several."""
    chunks = getattr(a, "chunks", None)
    if chunks is None or isinstance(a, Tensor):
        return a
    nd = len(chunks)
    if "axes" in kw:
        axes = range(nd) if kw["axes"] is None else kw["axes"]
    else:
        axes = (kw.get("axis", -1),)
    split = {int(ax) % nd: -1 for ax in axes if len(chunks[int(ax) % nd]) > 1}
    return a.rechunk(split) if split else a


_RECORDED: dict[tuple[int, str], Any] = {}


def _recorded_dask(xp: Any, base: Any, name: str) -> Any:
    """The recording (xg.jit) form of ``base.fft.<name>`` after `_whole`, for Dask's ``base``."""
    key = (id(xp), name)
    fn = _RECORDED.get(key)
    if fn is None:
        transform = getattr(base.fft, name)

        def whole_then(a: Any, **kw: Any) -> Any:
            return transform(_whole(a, kw), **kw)

        fn = _RECORDED[key] = recorded(whole_then, f"fft.{name}", xp)
    return fn


# ---------------------------------------------------------------- complex-to-complex
def _fft_vjp(xp: Any, g: Any, ans: Any, x: Any, *, n: Any, axis: int, norm: str) -> Any:
    ax = _ax(x, axis)
    return _resize(xp, _call(xp, "ifft", g, axis=ax, norm=_SWAP[norm]), ax, int(x.shape[ax]))


def _ifft_vjp(xp: Any, g: Any, ans: Any, x: Any, *, n: Any, axis: int, norm: str) -> Any:
    ax = _ax(x, axis)
    return _resize(xp, _call(xp, "fft", g, axis=ax, norm=_SWAP[norm]), ax, int(x.shape[ax]))


def _fftn_vjp(xp: Any, g: Any, ans: Any, x: Any, *, s: Any, axes: Any, norm: str) -> Any:
    return _resize_to(xp, _call(xp, "ifftn", g, axes=axes, norm=_SWAP[norm]), axes, x.shape)


def _ifftn_vjp(xp: Any, g: Any, ans: Any, x: Any, *, s: Any, axes: Any, norm: str) -> Any:
    return _resize_to(xp, _call(xp, "fftn", g, axes=axes, norm=_SWAP[norm]), axes, x.shape)


# ---------------------------------------------------------------- real-to-complex and back
def _rfft_vjp(xp: Any, g: Any, ans: Any, x: Any, *, n: Any, axis: int, norm: str) -> Any:
    ax = _ax(x, axis)
    m = int(x.shape[ax]) if n is None else n
    # zero-pad the half spectrum to the full one (ifft's n), adjoint of the full fft
    full = _call(xp, "ifft", g, n=m, axis=ax, norm=_SWAP[norm])
    return _resize(xp, xp.real(full), ax, int(x.shape[ax]))


def _irfft_vjp(xp: Any, g: Any, ans: Any, x: Any, *, n: Any, axis: int, norm: str) -> Any:
    ax = _ax(x, axis)
    m = 2 * (int(x.shape[ax]) - 1) if n is None else n
    half = _double(xp, _call(xp, "rfft", g, axis=ax, norm=_SWAP[norm]), ax, m)
    return _resize(xp, half, ax, int(x.shape[ax]))


def _hfft_vjp(xp: Any, g: Any, ans: Any, x: Any, *, n: Any, axis: int, norm: str) -> Any:
    # hfft(x) = irfft(conj(x)) with the norm swapped: the conjugate of irfft's rule
    ax = _ax(x, axis)
    m = 2 * (int(x.shape[ax]) - 1) if n is None else n
    half = _double(xp, _call(xp, "ihfft", g, axis=ax, norm=_SWAP[norm]), ax, m)
    return _resize(xp, half, ax, int(x.shape[ax]))


def _ihfft_vjp(xp: Any, g: Any, ans: Any, x: Any, *, n: Any, axis: int, norm: str) -> Any:
    # ihfft(x) = conj(rfft(x)) with the norm swapped: rfft's rule on conj(g), whose
    # real part is that of the fft with the norm swapped back
    ax = _ax(x, axis)
    m = int(x.shape[ax]) if n is None else n
    full = _call(xp, "fft", g, n=m, axis=ax, norm=_SWAP[norm])
    return _resize(xp, xp.real(full), ax, int(x.shape[ax]))


def _rfftn_vjp(xp: Any, g: Any, ans: Any, x: Any, *, s: Any, axes: Any, norm: str) -> Any:
    full = _call(xp, "ifftn", g, s=s, axes=axes, norm=_SWAP[norm])  # s pads the half axis
    return _resize_to(xp, xp.real(full), axes, x.shape)


def _irfftn_vjp(xp: Any, g: Any, ans: Any, x: Any, *, s: Any, axes: Any, norm: str) -> Any:
    half = _double(xp, _call(xp, "rfftn", g, axes=axes, norm=_SWAP[norm]), axes[-1], s[-1])
    return _resize_to(xp, half, axes, x.shape)


# ---------------------------------------------------------------- batching
# The transforms act along axes, so a logical axis (or tuple of axes) is shifted past the
# ``k`` batch axes and the batch axes are never transformed. ``fftn``-style primitives
# receive explicit, non-negative logical ``axes`` (the functions resolve the defaults
# against the example's shape); ``fftshift`` with ``axes=None`` shifts every logical axis.
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


def _transform(name: str, vjp: Any, batch: Any = _along_axis) -> Primitive:
    """The primitive of a linear transform ``xp.fft.<name>``, declared with its rules: the
    backend's forward, the same transform of the tangent as JVP, the adjoint as VJP (only
    the input's shape is kept), and its batching rule."""

    def fwd(xp: Any, x: Any, **kw: Any) -> Any:
        return _call(xp, name, x, **kw)

    def jvp(xp: Any, t: Any, ans: Any, x: Any, **kw: Any) -> Any:
        return _call(xp, name, t, **kw)

    return op.primitive(name, fwd=fwd, vjp=(vjp,), jvp=(jvp,), batch=batch, save=())


# ---------------------------------------------------------------- the namespace functions
# (each entry's primitive above it, with its rules; the body checks the arguments and binds it)
fft_p = _transform("fft", _fft_vjp)


@op.entry(fft_p)
def fft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The one-dimensional discrete Fourier transform of a complex array.

    ``n`` trims or zero-pads ``x`` along ``axis`` first; ``norm="backward"`` leaves the
    forward transform unscaled, ``"ortho"`` scales it by ``1/sqrt(n)``, ``"forward"``
    by ``1/n``. Differentiable (the VJP is the adjoint ``ifft``).

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.fft(xg.asarray([1.0, 0.0, 0.0, 0.0], dtype=xg.complex128))
        Tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex128, device=cpu)
        >>> xg.fft.fft(xg.asarray([1.0, 1.0], dtype=xg.complex128), n=4, norm="forward")
        Tensor([0.5 +0.j  , 0.25-0.25j, 0.  +0.j  , 0.25+0.25j], dtype=complex128, device=cpu)
    """
    return fft_p.bind(x, n=n, axis=axis, norm=_check_norm("fft", norm))


ifft_p = _transform("ifft", _ifft_vjp)


@op.entry(ifft_p)
def ifft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The one-dimensional inverse discrete Fourier transform of a complex array.

    ``norm="backward"`` scales by ``1/n``, ``"ortho"`` by ``1/sqrt(n)``, ``"forward"``
    not at all. Differentiable (the VJP is the adjoint ``fft``).

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.ifft(xg.asarray([4.0, 0.0, 0.0, 0.0], dtype=xg.complex128))
        Tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex128, device=cpu)
    """
    return ifft_p.bind(x, n=n, axis=axis, norm=_check_norm("ifft", norm))


fftn_p = _transform("fftn", _fftn_vjp, _along_axes)


@op.entry(fftn_p)
def fftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: Norm = "backward") -> Array:
    """The n-dimensional discrete Fourier transform of a complex array over ``axes``.

    ``s`` trims or zero-pads each axis of ``axes`` first (``-1``: keep its length);
    without ``axes`` (and then without ``s``) the transform runs over all axes.

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.fftn(xg.ones((2, 2), dtype=xg.complex128))
        Tensor([[4.+0.j, 0.+0.j],
                [0.+0.j, 0.+0.j]], dtype=complex128, device=cpu)
    """
    s_, axes_ = _nd_params("fftn", x, s, axes)
    return fftn_p.bind(x, s=s_, axes=axes_, norm=_check_norm("fftn", norm))


ifftn_p = _transform("ifftn", _ifftn_vjp, _along_axes)


@op.entry(ifftn_p)
def ifftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: Norm = "backward") -> Array:
    """The n-dimensional inverse discrete Fourier transform of a complex array over ``axes``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.ifftn(xg.ones((2, 2), dtype=xg.complex128))
        Tensor([[1.+0.j, 0.+0.j],
                [0.+0.j, 0.+0.j]], dtype=complex128, device=cpu)
    """
    s_, axes_ = _nd_params("ifftn", x, s, axes)
    return ifftn_p.bind(x, s=s_, axes=axes_, norm=_check_norm("ifftn", norm))


rfft_p = _transform("rfft", _rfft_vjp)


@op.entry(rfft_p)
def rfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The one-dimensional discrete Fourier transform of a real array: the
    ``n // 2 + 1`` non-negative frequencies.

    The gradient is real: the real part of the adjoint of the full transform.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.fft.rfft(xg.asarray([1.0, 2.0, 3.0, 4.0]))
        Tensor([10.+0.j, -2.+2.j, -2.+0.j], dtype=complex128, device=cpu)
        >>> xg.grad(lambda x: xg.sum(xg.real(xg.fft.rfft(x))))(np.array([1.0, 2.0, 3.0, 4.0]))
        array([3., 0., 1., 0.])
    """
    return rfft_p.bind(x, n=n, axis=axis, norm=_check_norm("rfft", norm))


irfft_p = _transform("irfft", _irfft_vjp)


@op.entry(irfft_p)
def irfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The inverse of [`rfft`][xpgrad.ops.fft.rfft]: a real signal of length ``n`` (default
    ``2 * (m - 1)``) from the ``m`` non-negative frequencies in ``x``.

    The imaginary parts of the zero-frequency bin and (``n`` even) of the Nyquist bin
    are ignored, so their gradient is zero; the other bins stand for two bins of the
    full spectrum, so their gradient counts twice (PyTorch's convention).

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.fft.irfft(xg.asarray([4.0, 0.0, 0.0], dtype=xg.complex128))
        Tensor([1., 1., 1., 1.], dtype=float64, device=cpu)
        >>> xg.grad(lambda x: xg.fft.irfft(x)[0])(np.array([4.0, 0.0, 0.0], dtype=complex))
        array([0.25+0.j, 0.5 +0.j, 0.25+0.j])
    """
    return irfft_p.bind(x, n=n, axis=axis, norm=_check_norm("irfft", norm))


rfftn_p = _transform("rfftn", _rfftn_vjp, _along_axes)


@op.entry(rfftn_p)
def rfftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: Norm = "backward") -> Array:
    """The n-dimensional discrete Fourier transform of a real array; the last axis
    of ``axes`` keeps its ``s[-1] // 2 + 1`` non-negative frequencies.

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.rfftn(xg.ones((2, 4)))
        Tensor([[8.+0.j, 0.+0.j, 0.+0.j],
                [0.+0.j, 0.+0.j, 0.+0.j]], dtype=complex128, device=cpu)
    """
    s_, axes_ = _nd_params("rfftn", x, s, axes)
    return rfftn_p.bind(x, s=s_, axes=axes_, norm=_check_norm("rfftn", norm))


irfftn_p = _transform("irfftn", _irfftn_vjp, _along_axes)


@op.entry(irfftn_p)
def irfftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: Norm = "backward") -> Array:
    """The inverse of [`rfftn`][xpgrad.ops.fft.rfftn]: a real array; the last axis of ``axes`` gets
    length ``s[-1]`` (default ``2 * (m - 1)``). Gradient as for [`irfft`][xpgrad.ops.fft.irfft].

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.irfftn(xg.asarray([[8.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=xg.complex128))
        Tensor([[1., 1., 1., 1.],
                [1., 1., 1., 1.]], dtype=float64, device=cpu)
    """
    s_, axes_ = _nd_params("irfftn", x, s, axes, c2r=True)
    return irfftn_p.bind(x, s=s_, axes=axes_, norm=_check_norm("irfftn", norm))


hfft_p = _transform("hfft", _hfft_vjp)


@op.entry(hfft_p)
def hfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The discrete Fourier transform of a signal with Hermitian symmetry, given by
    its first half ``x``: a real array of length ``n`` (default ``2 * (m - 1)``).

    Gradient as for [`irfft`][xpgrad.ops.fft.irfft], conjugated (``hfft(x)`` is ``irfft(conj(x))``
    with the norm swapped).

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.hfft(xg.asarray([1.0, 0.0, 0.0], dtype=xg.complex128))
        Tensor([1., 1., 1., 1.], dtype=float64, device=cpu)
    """
    return hfft_p.bind(x, n=n, axis=axis, norm=_check_norm("hfft", norm))


ihfft_p = _transform("ihfft", _ihfft_vjp)


@op.entry(ihfft_p)
def ihfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: Norm = "backward") -> Array:
    """The inverse of [`hfft`][xpgrad.ops.fft.hfft]: the first ``n // 2 + 1`` bins of the inverse
    transform of a real array.

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.ihfft(xg.asarray([1.0, 1.0, 1.0, 1.0]))
        Tensor([1.-0.j, 0.-0.j, 0.-0.j], dtype=complex128, device=cpu)
    """
    return ihfft_p.bind(x, n=n, axis=axis, norm=_check_norm("ihfft", norm))


# (view: a shift over no axis is the input itself on Dask)
@op.function(batch=_along_axes, fwd=lambda xp, x, *, axes=None: xp.fft.fftshift(x, axes=axes),
             vjp=(lambda xp, g, ans, x, *, axes: xp.fft.ifftshift(g, axes=axes),),
             jvp=(lambda xp, t, ans, x, *, axes=None: xp.fft.fftshift(t, axes=axes),), save=(), view=True)
def fftshift(x: Array, /, *, axes: int | Sequence[int] | None = None) -> Array:
    """Move the zero-frequency term to the center of ``axes`` (all axes by default).

    Differentiable: the VJP is [`ifftshift`][xpgrad.ops.fft.ifftshift].

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.fftshift(xg.fft.fftfreq(5))
        Tensor([-0.4, -0.2,  0. ,  0.2,  0.4], dtype=float64, device=cpu)
    """


@op.function(batch=_along_axes, fwd=lambda xp, x, *, axes=None: xp.fft.ifftshift(x, axes=axes),
             vjp=(lambda xp, g, ans, x, *, axes: xp.fft.fftshift(g, axes=axes),),
             jvp=(lambda xp, t, ans, x, *, axes=None: xp.fft.ifftshift(t, axes=axes),), save=(), view=True)
def ifftshift(x: Array, /, *, axes: int | Sequence[int] | None = None) -> Array:
    """The inverse of [`fftshift`][xpgrad.ops.fft.fftshift] (they differ for odd lengths).

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.ifftshift(xg.asarray([-0.4, -0.2, 0.0, 0.2, 0.4]))
        Tensor([ 0. ,  0.2,  0.4, -0.4, -0.2], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- creation
@op.creation()
def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Tensor:
    """The sample frequencies of [`fft`][xpgrad.ops.fft.fft] for a signal of ``n`` samples spaced ``d``.

    A creation function (no gradient) on the policy's namespace and device, or
    ``device``; floating of ``dtype``, by default the policy's floating dtype.

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.fftfreq(4)
        Tensor([ 0.  ,  0.25, -0.5 , -0.25], dtype=float64, device=cpu)
        >>> xg.fft.fftfreq(4, d=0.5, dtype=xg.float32)
        Tensor([ 0. ,  0.5, -1. , -0.5], dtype=float32, device=cpu)
    """
    p, xp, dev = _where(device, "fftfreq")
    dt = _dt(dtype, xp, "fftfreq") if dtype is not None else _float_default(p, xp)
    return _create("fftfreq", xp, dev, dt, xp.fft.fftfreq, n, d=d)


@op.creation()
def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Tensor:
    """The sample frequencies of [`rfft`][xpgrad.ops.fft.rfft] (the ``n // 2 + 1`` non-negative ones).

    Examples:
        >>> import xpgrad as xg
        >>> xg.fft.rfftfreq(4)
        Tensor([0.  , 0.25, 0.5 ], dtype=float64, device=cpu)
    """
    p, xp, dev = _where(device, "rfftfreq")
    dt = _dt(dtype, xp, "rfftfreq") if dtype is not None else _float_default(p, xp)
    return _create("rfftfreq", xp, dev, dt, xp.fft.rfftfreq, n, d=d)


op.check_all(__all__)
