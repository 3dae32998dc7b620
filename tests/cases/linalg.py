"""OpCases for the ``linalg`` extension.

Matrices are conditioned by ``prepare``: a drawn matrix (plus a fixed generic
perturbation, so that hypothesis' zeros stay generic) is turned into
``Q1 @ diag(s) @ Q2^H`` with orthonormal ``Q1``, ``Q2`` from QR and well separated
``s``, so that inverses are tame and eigenvalue / singular-value gaps are at
least ~0.5. Hermitian inputs are symmetrized inside ``fn`` (``(a + a^H) / 2``):
the backends read one triangle, and the rules give the Hermitian gradient.
Eigenvector and singular-vector outputs enter only through gauge-invariant
expressions (``|V|^2``, ``U @ Vh``, ``V f(L) V^H``); the case's ``fn`` applies
the transform, so the harness needs no output hook.

Dask's linalg works on 2-D arrays with square chunks only, and lacks several
functions: those cases are xfailed with the reason.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests._cases import OpCase
from tests.cases.manipulation import _chosen

Draw = Any
INF = math.inf

_DASK_CHUNKS = "Dask's linalg decompositions need 2-D arrays with square (or single-column) chunks"
_DASK_MISSING = "array_api_compat.dask.array.linalg has no {}"
_DASK_SVD = "Dask's svd supports neither full_matrices=True nor batches (svdvals calls it)"


# ---------------------------------------------------------------- shapes
def _batch(draw: Draw) -> tuple[int, ...]:
    return draw(hnp.array_shapes(min_dims=0, max_dims=1, min_side=1, max_side=2))


def _square(min_n: int = 1, max_n: int = 3) -> Any:
    def draw_shapes(draw: Draw) -> list[Any]:
        n = draw(st.integers(min_n, max_n))
        return [(*_batch(draw), n, n)]

    return draw_shapes


def _rect(draw: Draw) -> list[Any]:
    m, n = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return [(*_batch(draw), m, n)]


def _solve_shapes(draw: Draw) -> list[Any]:
    n = draw(st.integers(1, 3))
    b1, b2 = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=1, max_side=2)).input_shapes
    if draw(st.booleans()):
        return [(*b1, n, n), (n,)]
    return [(*b1, n, n), (*b2, n, draw(st.integers(1, 2)))]


# ---------------------------------------------------------------- conditioning
def _noise(shape: tuple[int, ...], cx: bool, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    return a + 1j * rng.standard_normal(shape) if cx else a


def _orth(a: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Orthonormal columns (``k`` of them) from ``a`` made generic."""
    q, _ = np.linalg.qr(a + _noise(a.shape, np.iscomplexobj(a), seed))
    return q[..., :, :k]


def _spectrum(k: int, lo: float = 1.0, step: float = 0.6) -> np.ndarray:
    return lo + step * np.arange(k)[::-1]


def _from_svd(a: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``Q1 diag(s) Q2^H`` with ``a``'s shape; singular values ``s`` (descending)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    ah = np.conj(np.swapaxes(a, -1, -2))
    q1 = _orth(a @ ah, k, 1)
    q2 = _orth(ah @ a, k, 2)
    return (q1 * s[:k]) @ np.conj(np.swapaxes(q2, -1, -2))


def _svd_prep(lo: float = 1.0, step: float = 0.6) -> Any:
    """Matrices with singular values lo, lo + step, ... (well separated, away from 0)."""

    def prepare(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
        a = arrays[0]
        k = min(a.shape[-2:])
        return [_from_svd(a, _spectrum(k, lo, step)), *arrays[1:]]

    return prepare


def _herm_prep(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    """Hermitian positive-definite matrices with eigenvalues 1, 1.6, 2.2, ..."""
    a = arrays[0]
    n = a.shape[-1]
    q = _orth(a, n, 3)
    return [(q * _spectrum(n)[::-1]) @ np.conj(np.swapaxes(q, -1, -2)), *arrays[1:]]


def _eig_prep(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    """Diagonalizable ``S diag(l) S^-1`` with well-conditioned ``S`` and distinct eigenvalues."""
    a = arrays[0]
    n = a.shape[-1]
    cx = np.iscomplexobj(a)
    s = np.eye(n) + 0.25 * np.tanh(a + _noise(a.shape, cx, 4))
    lam = _spectrum(n, 0.5, 0.8) * (np.exp(0.4j * np.arange(n)) if cx else np.where(np.arange(n) % 2, -1, 1))
    return [(s * lam) @ np.linalg.inv(s)]


def _distinct_abs(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    """Entries with distinct absolute values, all >= 0.2 (no kinks of abs, no ties of max)."""
    a = arrays[0]
    mag = np.abs(a)
    rank = np.argsort(np.argsort(mag.ravel(), kind="stable")).reshape(a.shape)
    new = 0.2 + mag + 0.07 * rank
    unit = np.where(mag > 0, a / np.where(mag > 0, mag, 1), 1)
    return [unit * new]


def _distinct_sums(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    """Entries >= 0.2 whose row sums and column sums of absolute values are all distinct
    (no tie in the max/min over rows or columns of the matrix 1- and inf-norms).

    The k-th smallest magnitude of each matrix becomes 0.2 + 0.05 * 2**k plus under 0.01 of the drawn
    magnitude: disjoint sets of entries (two rows, two columns) then differ by at least
    0.05 in the powers of two, more than the drawn parts of a row or column can make up.
    """
    a = arrays[0]
    mag = np.abs(a)
    per_matrix = mag.reshape(-1, a.shape[-2] * a.shape[-1])  # ranks within each matrix of a batch
    rank = np.argsort(np.argsort(per_matrix, axis=-1, kind="stable"), axis=-1).reshape(a.shape)
    side = max(a.shape[-2:])
    new = 0.2 + 0.05 * 2.0 ** rank + 0.01 / side * mag / (1.0 + mag.max(initial=0.0))
    unit = np.where(mag > 0, a / np.where(mag > 0, mag, 1), 1)
    return [unit * new]


def _norm_prep(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    if params.get("ord") in (2, -2, "nuc"):
        return _svd_prep()(arrays, params)
    return _distinct_abs(arrays, params)


def _matrix_norm_prep(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    if params.get("ord") in (1, -1, INF, -INF):
        return _distinct_sums(arrays, params)
    return _norm_prep(arrays, params)


# ---------------------------------------------------------------- fns
def _cx(xp: Any, a: Any) -> bool:
    return xp.isdtype(a.dtype, "complex floating")


def _mh(xp: Any, a: Any) -> Any:
    return xp.matrix_transpose(xp.conj(a) if _cx(xp, a) else a)


def _sym(xp: Any, a: Any) -> Any:
    return (a + _mh(xp, a)) / 2


def _abs2(xp: Any, v: Any) -> Any:
    return xp.real(v * xp.conj(v)) if _cx(xp, v) else v * v


def _t_sym(t: Any, a: Any) -> Any:
    return (a + a.mH) / 2


def _t_abs2(t: Any, v: Any) -> Any:
    return (v * v.conj()).real if v.is_complex() else v * v


def _eigh_fns(part: str) -> tuple[Any, Any]:
    def fn(xp: Any, a: Any) -> Any:
        lam, v = xp.linalg.eigh(_sym(xp, a))
        if part == "vectors":
            return _abs2(xp, v)
        if part == "both":
            return xp.expand_dims(lam, axis=-2) * _abs2(xp, v)
        return xp.matmul(v * xp.expand_dims(xp.exp(lam / 4), axis=-2), _mh(xp, v))  # a matrix function

    def tfn(t: Any, a: Any) -> Any:
        lam, v = t.linalg.eigh(_t_sym(t, a))
        if part == "vectors":
            return _t_abs2(t, v)
        if part == "both":
            return lam.unsqueeze(-2) * _t_abs2(t, v)
        return (v * t.exp(lam / 4).unsqueeze(-2)) @ v.mH

    return fn, tfn


def _svd_fns(part: str, full: bool = False) -> tuple[Any, Any]:
    def fn(xp: Any, a: Any) -> Any:
        u, s, vh = xp.linalg.svd(a, full_matrices=full)
        k = s.shape[-1]
        u, vh = u[..., :, :k], vh[..., :k, :]
        if part == "U":
            return _abs2(xp, u) * xp.expand_dims(s, axis=-2)
        if part == "Vh":
            return _abs2(xp, vh) * xp.expand_dims(s, axis=-1)
        if part == "S":
            return s
        return xp.matmul(u, vh)  # the polar factor

    def tfn(t: Any, a: Any) -> Any:
        u, s, vh = t.linalg.svd(a, full_matrices=full)
        k = s.shape[-1]
        u, vh = u[..., :, :k], vh[..., :k, :]
        if part == "U":
            return _t_abs2(t, u) * s.unsqueeze(-2)
        if part == "Vh":
            return _t_abs2(t, vh) * s.unsqueeze(-1)
        if part == "S":
            return s
        return u @ vh

    return fn, tfn


def _qr_fns(part: str, mode: str = "reduced") -> tuple[Any, Any]:
    def fn(xp: Any, a: Any) -> Any:
        q, r = xp.linalg.qr(a, mode=mode)
        if part == "Q":
            return q
        if part == "R":
            return r
        return xp.matmul(q, r * r)

    def tfn(t: Any, a: Any) -> Any:
        q, r = t.linalg.qr(a, mode=mode)
        return q if part == "Q" else r if part == "R" else q @ (r * r)

    return fn, tfn


def _ri(xp: Any, z: Any) -> Any:
    """A complex output as real numbers (eig's outputs are complex even for real inputs)."""
    return xp.stack([xp.real(z), xp.imag(z)])


def _eig_fn(xp: Any, a: Any) -> Any:
    lam, v = xp.linalg.eig(a)
    return _ri(xp, xp.expand_dims(lam, axis=-2) * _abs2(xp, v))


def _t_eig(t: Any, a: Any) -> Any:
    lam, v = t.linalg.eig(a)
    z = lam.unsqueeze(-2) * _t_abs2(t, v)
    return t.stack([z.real, z.imag])


def _wide_qr(draw: Draw) -> list[Any]:
    m = draw(st.integers(1, 3))
    return [(*_batch(draw), m, draw(st.integers(m, 4)))]


def _cross_shapes(draw: Draw) -> list[Any]:
    b1, b2 = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=2)).input_shapes
    nd = min(len(b1), len(b2))
    axis = draw(st.integers(-nd - 1, -1))

    def insert(b: tuple[int, ...]) -> tuple[int, ...]:
        pos = len(b) + 1 + axis
        return (*b[:pos], 3, *b[pos:])

    return [insert(b1), insert(b2), {"axis": axis}]


def _offset_shapes(draw: Draw) -> list[Any]:
    m, n = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return [(*_batch(draw), m, n), {"offset": draw(st.integers(-m, n))}]


def _norm_shapes(draw: Draw) -> list[Any]:
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3))
    nd = len(shape)
    axis = draw(st.one_of(st.none(), st.integers(-nd, nd - 1),
                          st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True).map(tuple)))
    ord_ = draw(st.sampled_from([2, 1, INF, -INF, 0, 3, 0.5, -1.5]))
    return [shape, {"axis": axis, "keepdims": draw(st.booleans()), "ord": ord_}]


def _matrix_norm_shapes(ords: list[Any]) -> Any:
    def draw_shapes(draw: Draw) -> list[Any]:
        return [_rect(draw)[0], {"ord": draw(st.sampled_from(ords)), "keepdims": draw(st.booleans())}]

    return draw_shapes


def _power_shapes(draw: Draw) -> list[Any]:
    return [_square()(draw)[0], {"n": draw(st.integers(-3, 4))}]


def _cholesky_shapes(draw: Draw) -> list[Any]:
    return [_square()(draw)[0], {"upper": draw(st.booleans())}]


def _t_solve(t: Any, a: Any, b: Any) -> Any:
    """torch reads a ``b`` of shape ``a.shape[:-1]`` as a batch of vectors: expand the batches so it cannot."""
    if b.ndim == 1:
        return t.linalg.solve(a, b)
    batch = t.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return t.linalg.solve(a.expand(*batch, *a.shape[-2:]), b.expand(*batch, *b.shape[-2:]))


def _t_vector_norm(t: Any, a: Any, **kw: Any) -> Any:
    if kw["ord"] == 0 and a.is_complex():
        # torch's ord=0 (a count of nonzeros) of a complex tensor warns "Casting complex
        # values to real discards the imaginary part" inside torch; the count of |a| is
        # the same number, with the same (zero) gradient
        a = a.abs()
    return t.linalg.vector_norm(a, ord=kw["ord"], dim=kw["axis"], keepdim=kw["keepdims"])


def _t_matrix_norm(t: Any, a: Any, **kw: Any) -> Any:
    return t.linalg.matrix_norm(a, ord=kw["ord"], keepdim=kw["keepdims"])


_eigh_v, _t_eigh_v = _eigh_fns("vectors")
_eigh_b, _t_eigh_b = _eigh_fns("both")
_eigh_f, _t_eigh_f = _eigh_fns("function")
_HERM = {"prepare": _herm_prep, "shapes": _square(), "complex": True}


def _svd_case(name: str, part: str, shapes: Any = _rect, full: bool = False, **kw: Any) -> OpCase:
    fn, tfn = _svd_fns(part, full)
    return OpCase(name, lambda xp, a: fn(xp, a), shapes=shapes, prepare=_svd_prep(), torch_fn=lambda t, a: tfn(t, a),
                  complex=True, covers=("svd",), xfail={"dask": _DASK_SVD}, **kw)


def _qr_case(name: str, part: str, shapes: Any = _rect, mode: str = "reduced") -> OpCase:
    fn, tfn = _qr_fns(part, mode)
    return OpCase(name, lambda xp, a: fn(xp, a), shapes=shapes, prepare=_svd_prep(),
                  torch_fn=lambda t, a: tfn(t, a), complex=True, covers=("qr",), xfail={"dask": _DASK_CHUNKS})


CASES = [
    OpCase("inv", lambda xp, a: xp.linalg.inv(a), shapes=_square(), prepare=_svd_prep(),
           torch_fn=lambda t, a: t.linalg.inv(a), complex=True, xfail={"dask": _DASK_CHUNKS}),
    OpCase("det", lambda xp, a: xp.linalg.det(a), shapes=_square(), prepare=_svd_prep(),
           torch_fn=lambda t, a: t.linalg.det(a), complex=True, xfail={"dask": _DASK_MISSING.format("det")}),
    OpCase("slogdet", lambda xp, a: xp.linalg.slogdet(a).logabsdet, shapes=_square(), prepare=_svd_prep(),
           torch_fn=lambda t, a: t.linalg.slogdet(a).logabsdet, complex=True,
           xfail={"dask": _DASK_MISSING.format("slogdet")}),
    OpCase("slogdet_sign", lambda xp, a: xp.linalg.slogdet(a).sign * xp.exp(xp.linalg.slogdet(a).logabsdet / 3),
           shapes=_square(), prepare=_svd_prep(), complex=True, covers=("slogdet",),
           torch_fn=lambda t, a: t.linalg.slogdet(a).sign * t.exp(t.linalg.slogdet(a).logabsdet / 3),
           xfail={"dask": _DASK_MISSING.format("slogdet")}),
    OpCase("solve", lambda xp, a, b: xp.linalg.solve(a, b), nargs=2, shapes=_solve_shapes, prepare=_svd_prep(),
           torch_fn=_t_solve, complex=True, xfail={"dask": _DASK_CHUNKS}),
    OpCase("cholesky", lambda xp, a, upper: xp.linalg.cholesky(_sym(xp, a), upper=upper), shapes=_cholesky_shapes,
           params=_chosen, prepare=_herm_prep, complex=True,
           torch_fn=lambda t, a, upper: t.linalg.cholesky(_t_sym(t, a), upper=upper), xfail={"dask": _DASK_CHUNKS}),
    OpCase("eigh_values", lambda xp, a: xp.linalg.eigh(_sym(xp, a)).eigenvalues,
           torch_fn=lambda t, a: t.linalg.eigh(_t_sym(t, a)).eigenvalues, covers=("eigh",),
           xfail={"dask": _DASK_MISSING.format("eigh")}, **_HERM),
    OpCase("eigh_vectors", _eigh_v, torch_fn=_t_eigh_v, covers=("eigh",),
           xfail={"dask": _DASK_MISSING.format("eigh")}, **_HERM),
    OpCase("eigh_both", _eigh_b, torch_fn=_t_eigh_b, covers=("eigh",),
           xfail={"dask": _DASK_MISSING.format("eigh")}, **_HERM),
    OpCase("eigh_matrix_function", _eigh_f, torch_fn=_t_eigh_f, covers=("eigh",),
           xfail={"dask": _DASK_MISSING.format("eigh")}, **_HERM),
    OpCase("eigvalsh", lambda xp, a: xp.linalg.eigvalsh(_sym(xp, a)),
           torch_fn=lambda t, a: t.linalg.eigvalsh(_t_sym(t, a)), xfail={"dask": _DASK_MISSING.format("eigvalsh")},
           **_HERM),
    OpCase("eig", _eig_fn, shapes=_square(), prepare=_eig_prep, torch_fn=_t_eig, complex=True,
           xfail={"dask": _DASK_MISSING.format("eig")}),
    OpCase("eigvals", lambda xp, a: _ri(xp, xp.linalg.eigvals(a)), shapes=_square(), prepare=_eig_prep,
           torch_fn=lambda t, a: t.stack([t.linalg.eigvals(a).real, t.linalg.eigvals(a).imag]), complex=True,
           xfail={"dask": _DASK_MISSING.format("eigvals")}),
    _svd_case("svd_U", "U"),
    _svd_case("svd_Vh", "Vh"),
    _svd_case("svd_S", "S"),
    _svd_case("svd_polar", "polar"),
    _svd_case("svd_full_matrices", "polar", full=True),
    OpCase("svdvals", lambda xp, a: xp.linalg.svdvals(a), shapes=_rect, prepare=_svd_prep(),
           torch_fn=lambda t, a: t.linalg.svdvals(a), complex=True, xfail={"dask": _DASK_SVD}),
    _qr_case("qr_Q", "Q"),
    _qr_case("qr_R", "R"),
    _qr_case("qr_both", "both"),
    _qr_case("qr_complete_wide", "both", shapes=_wide_qr, mode="complete"),
    OpCase("pinv", lambda xp, a: xp.linalg.pinv(a), shapes=_rect, prepare=_svd_prep(),
           torch_fn=lambda t, a: t.linalg.pinv(a), complex=True, xfail={"dask": _DASK_MISSING.format("pinv")}),
    OpCase("matrix_power", lambda xp, a, n: xp.linalg.matrix_power(a, n), shapes=_power_shapes, params=_chosen,
           prepare=_svd_prep(0.7, 0.3), torch_fn=lambda t, a, n: t.linalg.matrix_power(a, n), complex=True,
           xfail={"dask": _DASK_MISSING.format("matrix_power")}),
    OpCase("cross", lambda xp, a, b, axis: xp.linalg.cross(a, b, axis=axis), nargs=2, shapes=_cross_shapes,
           params=_chosen, torch_fn=lambda t, a, b, axis: t.linalg.cross(*t.broadcast_tensors(a, b), dim=axis), complex=True,
           xfail={"dask": _DASK_MISSING.format("cross")}),
    OpCase("outer", lambda xp, a, b: xp.linalg.outer(a, b), nargs=2,
           shapes=lambda d: [(d(st.integers(1, 3)),), (d(st.integers(1, 3)),)],
           torch_fn=lambda t, a, b: t.outer(a, b), complex=True),
    OpCase("diagonal", lambda xp, a, offset: xp.linalg.diagonal(a, offset=offset), shapes=_offset_shapes,
           params=_chosen, torch_fn=lambda t, a, offset: t.linalg.diagonal(a, offset=offset), complex=True),
    OpCase("trace", lambda xp, a, offset: xp.linalg.trace(a, offset=offset), shapes=_offset_shapes, params=_chosen,
           torch_fn=lambda t, a, offset: t.diagonal(a, offset=offset, dim1=-2, dim2=-1).sum(-1), complex=True),
    OpCase("vector_norm", lambda xp, a, **kw: xp.linalg.vector_norm(a, **kw), shapes=_norm_shapes, params=_chosen,
           prepare=_distinct_abs, complex=True, torch_fn=_t_vector_norm),
    OpCase("matrix_norm", lambda xp, a, **kw: xp.linalg.matrix_norm(a, **kw),
           shapes=_matrix_norm_shapes(["fro", 1, -1, INF, -INF]), params=_chosen, prepare=_matrix_norm_prep, complex=True,
           torch_fn=_t_matrix_norm),
    OpCase("matrix_norm_svd", lambda xp, a, **kw: xp.linalg.matrix_norm(a, **kw),
           shapes=_matrix_norm_shapes([2, -2, "nuc"]), params=_chosen, prepare=_norm_prep, complex=True,
           torch_fn=_t_matrix_norm, covers=("matrix_norm", "svdvals"), xfail={"dask": _DASK_SVD}),
    OpCase("linalg_matmul_transpose",
           lambda xp, a, b: xp.linalg.matrix_transpose(xp.linalg.matmul(a, b)), nargs=2,
           shapes=lambda d: [(2, 3), (3, d(st.integers(1, 3)))], torch_fn=lambda t, a, b: (a @ b).mT,
           covers=("matmul", "matrix_transpose")),
]
