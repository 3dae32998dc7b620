"""OpCases for the ``fft`` extension: every transform in every ``norm`` mode.

The transforms are drawn with trimming and zero-padding (``n``/``s``), any axis,
and (n-dimensional) any order of axes. The harness draws real arrays (and, with
``complex=True``, complex ones): a complex-input transform gets a real array cast
to complex in the case function, and a complex output of a real input is viewed
as ``stack([real, imag])`` (so float32 in stays float32 out). ``irfft``, ``irfftn``
and ``hfft`` take arbitrary complex inputs: the imaginary parts of their DC and
Nyquist bins are ignored by every backend and get a zero gradient, as in
PyTorch, which the torch differential test confirms.

Dask's FFT works only along an axis held in a single chunk, and the harness
splits every axis in two: the transforms are xfails there (xpgrad does not
rechunk, having no library-specific code in the ops; tests/test_fft.py checks
single-chunk Dask arrays). ``fftshift``/``ifftshift`` run on Dask.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests._cases import OpCase, same_shape

Draw = Any

NORMS = ("backward", "ortho", "forward")

_DASK = ("the central differences call dask.array.fft on the raw array, which transforms only along an "
         "axis held in one chunk, and the harness splits every axis in two; xpgrad's transforms rechunk "
         "(tests/test_transform_idioms_bound.py checks their gradients on such arrays against NumPy's)")


# ---------------------------------------------------------------- real <-> complex views
def _cplx(xp: Any, x: Any) -> Any:
    """``x`` as complex (a real array is cast, keeping its precision)."""
    if xp.isdtype(x.dtype, "complex floating"):
        return x
    return xp.astype(x, xp.complex64 if x.dtype == xp.float32 else xp.complex128)


def _ri(xp: Any, y: Any) -> Any:
    """A complex array as a real one: its real and imaginary parts stacked."""
    return xp.stack([xp.real(y), xp.imag(y)])


def _t_cplx(t: Any, x: Any) -> Any:
    if x.is_complex():
        return x
    return x.to(t.complex64 if x.dtype == t.float32 else t.complex128)


def _t_ri(t: Any, y: Any) -> Any:
    return t.stack([y.real, y.imag])


# ---------------------------------------------------------------- parameters
def _params1(norm: str, c2r: bool = False) -> Any:
    """``n`` (None, trimming or padding), ``axis``, ``norm`` for a 1-D transform."""

    def draw_params(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
        shape = shapes[0]
        nd = len(shape)
        axis = draw(st.integers(-nd, nd - 1))
        ns: list[Any] = list(range(1, 7))
        if not c2r or shape[axis] >= 2:  # irfft's default n = 2 * (m - 1) needs m >= 2
            ns.append(None)
        return {"n": draw(st.sampled_from(ns)), "axis": axis, "norm": norm}

    return draw_params


def _paramsn(norm: str, c2r: bool = False) -> Any:
    """``axes`` (None: all, or any order), ``s`` with them (None, trimming or padding),
    ``norm``. No ``-1`` in ``s``: JAX refuses it and NumPy reads it differently from
    torch for the last axis of ``irfftn`` (tests/test_fft.py checks xpgrad's reading)."""

    def draw_params(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
        shape = shapes[0]
        nd = len(shape)
        axes: Any = None
        if draw(st.booleans()):
            perm = draw(st.permutations(range(nd)))
            k = draw(st.integers(1, nd))
            axes = tuple(a - nd if draw(st.booleans()) else a for a in perm[:k])
        if c2r and shape[-1] < 2 and axes is None:  # irfftn's default s[-1] = 2 * (m - 1) needs m >= 2
            axes = tuple(range(nd))
        s: Any = None
        if axes is not None and (draw(st.booleans()) or (c2r and shape[axes[-1]] < 2)):
            s = tuple(draw(st.integers(1, 5)) for _ in axes)
        return {"s": s, "axes": axes, "norm": norm}

    return draw_params


# ---------------------------------------------------------------- case builders
def _c2c(name: str, norm: str) -> OpCase:
    """fft, ifft: complex in, complex out (a real draw is cast and its output viewed as real)."""

    def fn(xp: Any, x: Any, **p: Any) -> Any:
        y = getattr(xp.fft, name)(_cplx(xp, x), **p)
        return y if xp.isdtype(x.dtype, "complex floating") else _ri(xp, y)

    def tfn(t: Any, x: Any, n: Any, axis: int, norm: str) -> Any:
        y = getattr(t.fft, name)(_t_cplx(t, x), n=n, dim=axis, norm=norm)
        return y if x.is_complex() else _t_ri(t, y)

    return OpCase(f"{name}-{norm}", fn, shapes=same_shape(1, min_dims=1), params=_params1(norm),
                  complex=True, torch_fn=tfn, covers=(name,), xfail={"dask": _DASK})


def _c2cn(name: str, norm: str) -> OpCase:
    """fftn, ifftn."""

    def fn(xp: Any, x: Any, **p: Any) -> Any:
        y = getattr(xp.fft, name)(_cplx(xp, x), **p)
        return y if xp.isdtype(x.dtype, "complex floating") else _ri(xp, y)

    def tfn(t: Any, x: Any, s: Any, axes: Any, norm: str) -> Any:
        y = getattr(t.fft, name)(_t_cplx(t, x), s=s, dim=axes, norm=norm)
        return y if x.is_complex() else _t_ri(t, y)

    return OpCase(f"{name}-{norm}", fn, shapes=same_shape(1, min_dims=1), params=_paramsn(norm),
                  complex=True, torch_fn=tfn, covers=(name,), xfail={"dask": _DASK})


def _r2c(name: str, norm: str, nd: bool = False) -> OpCase:
    """rfft, ihfft, rfftn: real in, complex out (viewed as real)."""

    def fn(xp: Any, x: Any, **p: Any) -> Any:
        return _ri(xp, getattr(xp.fft, name)(x, **p))

    if nd:
        def tfn(t: Any, x: Any, s: Any, axes: Any, norm: str) -> Any:
            return _t_ri(t, getattr(t.fft, name)(x, s=s, dim=axes, norm=norm))
    else:
        def tfn(t: Any, x: Any, n: Any, axis: int, norm: str) -> Any:  # type: ignore[misc]
            return _t_ri(t, getattr(t.fft, name)(x, n=n, dim=axis, norm=norm))

    return OpCase(f"{name}-{norm}", fn, shapes=same_shape(1, min_dims=1),
                  params=_paramsn(norm) if nd else _params1(norm), torch_fn=tfn, covers=(name,),
                  xfail={"dask": _DASK})


def _c2r(name: str, norm: str, nd: bool = False) -> OpCase:
    """irfft, hfft, irfftn: arbitrary complex in (a real draw is cast), real out."""

    def fn(xp: Any, x: Any, **p: Any) -> Any:
        return getattr(xp.fft, name)(_cplx(xp, x), **p)

    if nd:
        def tfn(t: Any, x: Any, s: Any, axes: Any, norm: str) -> Any:
            return getattr(t.fft, name)(_t_cplx(t, x), s=s, dim=axes,
                                        norm=norm)
    else:
        def tfn(t: Any, x: Any, n: Any, axis: int, norm: str) -> Any:  # type: ignore[misc]
            return getattr(t.fft, name)(_t_cplx(t, x), n=n, dim=axis, norm=norm)

    return OpCase(f"{name}-{norm}", fn, shapes=same_shape(1, min_dims=1),
                  params=_paramsn(norm, c2r=True) if nd else _params1(norm, c2r=True), complex=True,
                  torch_fn=tfn, covers=(name,), xfail={"dask": _DASK})


def _shift_params(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    nd = len(shapes[0])
    choices: list[Any] = [None, *range(-nd, nd)]
    if nd:
        choices.append(tuple(draw(st.permutations(range(nd))))[: draw(st.integers(1, nd))])
    return {"axes": draw(st.sampled_from(choices))}


def _shift(name: str) -> OpCase:
    return OpCase(name, lambda xp, x, **p: getattr(xp.fft, name)(x, **p), shapes=same_shape(1, min_dims=1),
                  params=_shift_params, complex=True,
                  torch_fn=lambda t, x, axes: getattr(t.fft, name)(x, dim=axes))


CASES = [
    *(_c2c(name, norm) for name in ("fft", "ifft") for norm in NORMS),
    *(_c2cn(name, norm) for name in ("fftn", "ifftn") for norm in NORMS),
    *(_r2c(name, norm) for name in ("rfft", "ihfft") for norm in NORMS),
    *(_r2c("rfftn", norm, nd=True) for norm in NORMS),
    *(_c2r(name, norm) for name in ("irfft", "hfft") for norm in NORMS),
    *(_c2r("irfftn", norm, nd=True) for norm in NORMS),
    _shift("fftshift"),
    _shift("ifftshift"),
]
