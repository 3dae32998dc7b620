"""The ``linalg`` extension: primitives with their VJP and JVP rules, and the public functions.

The rules follow Giles, "Collected matrix derivative results" (inv, det, slogdet,
solve, cholesky) and PyTorch's ``FunctionsManual.cpp`` (eigh, eig, svd, qr, pinv,
norms), so that gradients agree with ``torch.func.vjp``. Complex inputs use
PyTorch's convention (the conjugate Wirtinger derivative; see ``ops/_common.py``).
JVP rules give the real directional derivative, which is the plain derivative
``t * f'(z)`` where ``f`` is holomorphic.

Degenerate points, documented per function and as in PyTorch:

- ``eigh``/``eig``/``svd``: the gradient through eigenvectors or singular vectors
  divides by the gaps between eigenvalues (squared singular values), so it is
  inf/nan where two of them coincide. Gradients of eigenvalues or singular values
  alone (``eigvalsh``, ``eigvals``, ``svdvals``, ``matrix_norm`` with ``2``/``-2``/
  ``"nuc"``) never divide and stay finite.
- Eigenvectors and singular vectors are defined up to a sign (real) or a phase
  (complex). Only the gradient of a loss invariant to that gauge (``abs(U)``,
  ``U @ Vh``, ``V * conj(V)``...) is well defined; for complex inputs of another
  loss the result depends on the gauge the backend picked (PyTorch raises there).
- ``svd(full_matrices=True)``: the extra columns of ``U`` (rows of ``Vh``) are an
  arbitrary basis; their gradients are ignored, as in PyTorch, and forward mode
  gives them a zero tangent (the adjoint of ignoring them).
- ``qr``: differentiable in ``"reduced"`` mode, and in ``"complete"`` mode when
  rows <= columns (where it equals reduced); complete mode with more rows than
  columns raises, as in PyTorch.
- ``det``: the gradient is the adjugate (its conjugate transpose), from the SVD at a
  singular matrix, as in PyTorch; higher order too (NaN where the singular values
  repeat, as PyTorch's).
- ``slogdet``/``inv``/``solve``/``cholesky``: the rules use the inverse or solves
  with the input, so a singular input gives inf/nan (or the backend's error).
- ``pinv``: differentiable where the rank is locally constant (full rank); ``rtol``
  only affects the forward.
- ``vector_norm``: at the zero vector the gradient is 0 (PyTorch); ``ord=0`` has a
  zero gradient; ``ord=inf/-inf`` split the gradient evenly between tied entries.
- ``matrix_rank`` returns integers: not differentiable.

Batching (the rule beside each function): the matrix functions of one stack argument
(``inv``, ``det``, ``svd``...) batch as stacks (the batch axes are more stack axes). The
functions of two stacks (``solve``, ``cross``) get every argument at the same physical
rank (the batch axes, then the example's stack axes padded with size 1), so that the
backend broadcasts the stacks as it would the examples' and never reads an argument's
stack axes as another's batch axes.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import array_api_compat

from .. import _lazy
from .._dispatch import _raw
from .._dtypes import to_backend
from .._exceptions import NonDifferentiableError, XpgradValueError
from .._tracing import is_tracer
from ..autograd import _batched
from ..autograd._batched import STACK, Batched, from_phys, lift
from ..autograd._batching_util import along_axes, check_ndim, is_array, lndim, negative_axis, pad, stacked_matrices, to_rank
from ..autograd._core import Primitive
from ._common import Array, Tensor, apply, conj, in_float32, is_complex, zeros_like_shape
from ._registry import Chapter, prim_of
from .elementwise import abs as _abs
from .elementwise import multiply
from .linear_algebra import matmul, matrix_transpose, tensordot, vecdot
from .manipulation import broadcast_shapes, broadcast_to
from .manipulation import reshape as _reshape
from .statistical import max as _max
from .statistical import min as _min
from .statistical import sum as _sum

_reshape_p, _broadcast_to_p, _multiply_p = prim_of(_reshape), prim_of(broadcast_to), prim_of(multiply)

__all__ = [
    "EigResult", "EighResult", "QRResult", "SVDResult", "SlogdetResult",
    "cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "matmul",
    "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr",
    "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
]

_C = "linalg"
# xpgrad.linalg (the module users import) re-exports these functions; their registry and
# primitive names carry no prefix ("inv"), as the batching rules and the coverage page
# key them. With a body: the ones that wrap a multi-output primitive's result in a named
# tuple (slogdet, eigh, eig, svd, qr), take rtol as a Tensor or batched array (pinv,
# matrix_rank) or read the arguments to normalise a keyword (cross). matrix_norm is a
# composite entry (composed of other entries, no primitive of its own); the main
# namespace's functions it re-exports are declared as aliases of their entries (at the end).
op = Chapter(_C, module="xpgrad.linalg", extra=(
    "EigResult", "EighResult", "QRResult", "SVDResult", "SlogdetResult",
))


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class EigResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


# ---------------------------------------------------------------- helpers (both rule modes)
def _mH(xp: Any, x: Any) -> Any:
    """Conjugate transpose of the last two axes."""
    return xp.matrix_transpose(conj(xp, x))


def _eye(xp: Any, like: Any, n: int, m: int | None = None, k: int = 0) -> Any:
    """An identity-like constant with ``like``'s backend, device and dtype (Tensor if ``like`` is)."""
    if m is not None and m > n:
        # the transpose of the tall one: Dask's eye loses blocks of wide matrices (dask 2026.8)
        return xp.matrix_transpose(_eye(xp, like, m, n, -k))
    if isinstance(like, Tensor):
        data = _raw(like)  # (a batched one's physical array: the library, dtype and device are its)
        bxp = array_api_compat.array_namespace(data)
        return Tensor(bxp.eye(n, m, k=k, dtype=data.dtype, device=array_api_compat.device(data)))
    return xp.eye(n, m, k=k, dtype=like.dtype, device=array_api_compat.device(like))


def _diag_embed(xp: Any, v: Any) -> Any:
    """Matrices with ``v`` on their diagonal."""
    return xp.expand_dims(v, axis=-1) * _eye(xp, v, v.shape[-1])


def _col(xp: Any, v: Any) -> Any:
    return xp.expand_dims(v, axis=-1)


def _row(xp: Any, v: Any) -> Any:
    return xp.expand_dims(v, axis=-2)


def _solve(xp: Any, a: Any, b: Any) -> Any:
    """``xp.linalg.solve(a, b)`` as the standard defines it, on every library.

    ``b`` of shape ``(M,)`` is one vector, solved against every matrix of ``a``'s stack;
    otherwise ``b`` is a stack of ``(M, K)`` matrices whose batch axes broadcast against
    ``a``'s. CuPy's solve broadcasts nothing (``cupy.linalg.solve`` requires
    ``a.shape[:-1] == b.shape[:a.ndim - 1]``), so a 1-D ``b`` against a stack and unequal
    batch axes are made explicit here; equal batch axes go straight to the library.
    """
    if b.ndim == 1:
        if a.ndim == 2:
            return xp.linalg.solve(a, b)
        return _solve(xp, a, _col(xp, b))[..., 0]
    ba, bb = tuple(a.shape[:-2]), tuple(b.shape[:-2])
    if ba != bb:
        batch = broadcast_shapes(ba, bb)
        if batch != ba:
            a = xp.broadcast_to(a, (*batch, *a.shape[-2:]))
        if batch != bb:
            b = xp.broadcast_to(b, (*batch, *b.shape[-2:]))
    return xp.linalg.solve(a, b)


def _right_solve(xp: Any, b: Any, a: Any) -> Any:
    """``b @ inv(a)``."""
    return xp.matrix_transpose(_solve(xp, xp.matrix_transpose(a), xp.matrix_transpose(b)))


def _right_solve_h(xp: Any, b: Any, a: Any) -> Any:
    """``b @ inv(a)^H``."""
    return _mH(xp, _solve(xp, a, _mH(xp, b)))


def _im_part(xp: Any, z: Any) -> Any:
    """``1j * imag(z)`` as a complex array."""
    return z - xp.real(z)


def _like_complex(xp: Any, t: Any, z: Any) -> Any:
    """``t`` cast to ``z``'s complex dtype when ``t`` is real (torch's matmul does not promote)."""
    return xp.astype(t, z.dtype) if is_complex(z) and not is_complex(t) else t


def _trace(xp: Any, m: Any) -> Any:
    return xp.sum(xp.linalg.diagonal(m), axis=-1)


# ---------------------------------------------------------------- inv
@op.function(batch=stacked_matrices, fwd=lambda xp, x: xp.linalg.inv(x), vjp=(lambda xp, g, ans, x: -(_mH(xp, ans) @ g @ _mH(xp, ans)),),
             jvp=(lambda xp, t, ans, x: -(ans @ t @ ans),), save=(), save_ans=True)
def inv(x: Array, /) -> Array:
    """The inverse of each square matrix; gradient ``-inv(x)^H @ g @ inv(x)^H``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.inv(xg.asarray([[2.0, 0.0], [0.0, 4.0]]))
        Tensor([[0.5 , 0.  ],
                [0.  , 0.25]], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- det
def _known_invertible(ans: Any) -> bool:
    """Whether every determinant in ``ans`` is known to be nonzero, read without waiting on a
    lazy (Dask) or traced (``xg.jit``, JAX, a meta tensor) value: False where it cannot be
    read, and where some is 0."""
    raw = _raw(ans) if isinstance(ans, Tensor) else ans
    if is_tracer(raw) or _lazy.is_lazy(raw):
        return False
    try:
        return not bool(array_api_compat.array_namespace(raw).any(raw == 0))
    except Exception:  # noqa: BLE001 - a value that cannot be read (a JAX tracer, a meta tensor): both formulas
        return False


def _adjugate(xp: Any, x: Any, ans: Any) -> Any:
    """``adj(x)``, the derivative of ``det`` (``d det = tr(adj(x) dx)``), for every matrix:
    ``det(x) inv(x)`` where ``det(x) != 0``, and from the SVD ``x = U diag(S) Vh`` where it is
    0 (``det(U) det(Vh) Vh^H diag(prod_{j != i} S_j) U^H``, PyTorch's choice), so a singular
    matrix gets its adjugate (it got NumPy's LinAlgError, or inf/nan). Where the values cannot
    be read first (jit, Dask), both are computed, each on a matrix its formula is smooth at
    (the identity for the inverse, ``diag(1 + k / n^2)`` for the SVD, where the other formula
    is taken), so that neither leaves NaN in the other's gradient one order up."""
    det_ = _col(xp, _col(xp, ans))
    if _known_invertible(ans):  # (the common case: no SVD)
        return det_ * xp.linalg.inv(x)
    n = x.shape[-1]
    eye = _eye(xp, x, n)
    singular = det_ == 0
    adj_inv = det_ * xp.linalg.inv(xp.where(singular, eye, x))
    distinct = eye * (1.0 + (xp.cumulative_sum(xp.ones_like(eye), axis=-1) - 1.0) / (n * n))  # distinct, product < e
    u, sv, vh = xp.linalg.svd(xp.where(singular, x, distinct))
    others = xp.prod(xp.where(eye == 1, 1.0, _row(xp, sv)), axis=-1)  # prod_{j != i} S_j, no division
    unit = xp.linalg.det(u) * xp.linalg.det(vh)
    adj_svd = _col(xp, _col(xp, unit)) * ((_mH(xp, vh) * _like_complex(xp, _row(xp, others), vh)) @ _mH(xp, u))
    return xp.where(singular, adj_svd, adj_inv)


def _det_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    # d det = tr(adj(x) dx): the gradient is g * adj(x)^H (g * conj(det) * inv(x)^H where invertible)
    return _col(xp, _col(xp, g)) * _mH(xp, _adjugate(xp, x, ans))


def _det_jvp(xp: Any, t: Any, ans: Any, x: Any) -> Any:
    return _trace(xp, _adjugate(xp, x, ans) @ _like_complex(xp, t, x))


@op.function(batch=stacked_matrices, fwd=lambda xp, x: xp.linalg.det(x), vjp=(_det_vjp,), jvp=(_det_jvp,), save=(0,), save_ans=True)
def det(x: Array, /) -> Array:
    """The determinant of each square matrix.

    The gradient is the adjugate's conjugate transpose (``g * det * inv(x)^H`` where
    ``x`` is invertible), from the SVD at a singular matrix, as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.det(xg.asarray([[2.0, 1.0], [1.0, 3.0]]))
        Tensor(5., dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- slogdet
def _slogdet_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    gs, gl = g
    if is_complex(x):
        # d logabsdet = Re tr(inv(x) dx), d sign = sign * 1j * Im tr(inv(x) dx)
        w = gl
        if gs is not None:
            c = conj(xp, ans[0]) * gs
            w = _im_part(xp, c) if w is None else w + _im_part(xp, c)
    elif gl is None:
        return None  # the sign of a real determinant is locally constant
    else:
        w = gl
    return _col(xp, _col(xp, w)) * _mH(xp, xp.linalg.inv(x))


def _slogdet_jvp(xp: Any, t: Any, ans: Any, x: Any) -> Any:
    d = _trace(xp, _solve(xp, x, t))
    if is_complex(d):
        return ans[0] * _im_part(xp, d), xp.real(d)
    return None, d


_slogdet = op.primitive("slogdet", fwd=lambda xp, x: tuple(xp.linalg.slogdet(x)),
                        vjp=(_slogdet_vjp,), jvp=(_slogdet_jvp,),
                        save=(0,), save_ans=True, multi=True, batch=stacked_matrices)


@op.entry(_slogdet)
def slogdet(x: Array, /) -> SlogdetResult:
    """Sign and natural log of the absolute value of the determinant of each square matrix.

    For real inputs ``sign`` is locally constant (no gradient); for complex inputs
    ``sign = det / |det|`` is differentiable too.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.slogdet(xg.asarray([[-2.0, 0.0], [0.0, 1.0]])).logabsdet
        Tensor(0.69314718, dtype=float64, device=cpu)
    """
    return SlogdetResult(*_slogdet.bind(x))


# ---------------------------------------------------------------- solve
def _solve_gb(xp: Any, g: Any, a: Any, vec: bool) -> Any:
    if vec:
        return _solve(xp, _mH(xp, a), _col(xp, g))[..., 0]
    return _solve(xp, _mH(xp, a), g)


def _solve_vjp_x1(xp: Any, g: Any, ans: Any, x1: Any, x2: Any) -> Any:
    vec = x2.ndim == 1
    gb = _solve_gb(xp, g, x1, vec)
    if vec:
        return -(_col(xp, gb) * _row(xp, conj(xp, ans)))
    return -(gb @ _mH(xp, ans))


def _solve_vjp_x2(xp: Any, g: Any, ans: Any, x1: Any, x2: Any) -> Any:
    return _solve_gb(xp, g, x1, x2.ndim == 1)


def _solve_jvp_x1(xp: Any, t: Any, ans: Any, x1: Any, x2: Any) -> Any:
    if x2.ndim == 1:
        return -_solve(xp, x1, t @ _col(xp, ans))[..., 0]
    return -_solve(xp, x1, t @ ans)


def _solve_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    """``x2`` is one vector only when its example is 1-D: it is made a column (and the column
    dropped after), so that every stack axis, batch axes included, broadcasts."""
    x1, x2 = xs
    b1, b2 = bs
    check_ndim(prim, x1, k if b1 else 0, 2, "array (a stack of square matrices)")
    vec = lndim(x2, b2, k) == 1
    if vec:
        s = tuple(x2.shape)
        x2 = _reshape_p(x2, shape=(*s, 1))
    else:
        check_ndim(prim, x2, k if b2 else 0, 1)
    r = max(lndim(x1, b1, k), lndim(x2, b2, k))
    out = apply(prim, (to_rank(x1, b1, k, r), to_rank(x2, b2, k, r)), kw)
    if vec:
        out = _reshape_p(out, shape=tuple(out.shape)[:-1])
    return out


@op.function(batch=_solve_batch, fwd=lambda xp, x1, x2: _solve(xp, x1, x2), vjp=(_solve_vjp_x1, _solve_vjp_x2),
             jvp=(_solve_jvp_x1, lambda xp, t, ans, x1, x2: _solve(xp, x1, t)), arrays=2, save=(0,), save_ans=True)
def solve(x1: Array, x2: Array, /) -> Array:
    """The solution ``X`` of ``x1 @ X = x2`` (``x2`` of shape ``(M,)`` is one vector).

    Gradients: ``g_x2 = solve(x1^H, g)`` and ``g_x1 = -g_x2 @ X^H``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.solve(xg.asarray([[2.0, 0.0], [0.0, 4.0]]), xg.asarray([2.0, 2.0]))
        Tensor([1. , 0.5], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- cholesky
def _cholesky_vjp(xp: Any, g: Any, ans: Any, x: Any, *, upper: bool = False) -> Any:
    # Murray (2016), as in PyTorch: gA = L^{-H} Phi(L^H gL) L^{-1}
    low, gl = (_mH(xp, ans), _mH(xp, g)) if upper else (ans, g)
    p = xp.tril(_mH(xp, low) @ gl)
    p = 0.5 * (p + _mH(xp, xp.tril(p, k=-1)))
    lh = _mH(xp, low)
    y = _solve(xp, lh, p)
    return _mH(xp, _solve(xp, lh, _mH(xp, y)))


def _cholesky_jvp(xp: Any, t: Any, ans: Any, x: Any, *, upper: bool = False) -> Any:
    low = _mH(xp, ans) if upper else ans
    z = _solve(xp, low, t)
    s = _mH(xp, _solve(xp, low, _mH(xp, z)))  # L^{-1} dA L^{-H}
    phi = xp.tril(s, k=-1) + 0.5 * (xp.tril(s) - xp.tril(s, k=-1))
    dl = low @ phi
    return _mH(xp, dl) if upper else dl


@op.function(batch=stacked_matrices, fwd=lambda xp, x, *, upper=False: xp.linalg.cholesky(x, upper=upper), vjp=(_cholesky_vjp,),
             jvp=(_cholesky_jvp,), save=(), save_ans=True)
def cholesky(x: Array, /, *, upper: bool = False) -> Array:
    """The Cholesky factor of each Hermitian positive-definite matrix (lower, or upper if ``upper``).

    The backend reads one triangle of ``x``; the gradient is the Hermitian one
    (PyTorch's), so differentiate a function of a symmetrized input
    (``(a + a^H) / 2``) to compare with finite differences.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.cholesky(xg.asarray([[4.0, 2.0], [2.0, 2.0]]))
        Tensor([[2., 0.],
                [1., 1.]], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- eigh / eigvalsh
def _eigh_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    gl, gv = g
    lam, v = ans
    if gv is None:
        return (v * _row(xp, gl)) @ _mH(xp, v)
    m = _mH(xp, v) @ gv
    m = 0.5 * (m - _mH(xp, m))  # the skew-Hermitian part: the tangent space of U(n)
    eye = _eye(xp, lam, lam.shape[-1])
    e = _row(xp, lam) - _col(xp, lam) + eye  # e_ij = lam_j - lam_i, 1 on the diagonal
    inner = m / e
    if gl is not None:
        inner = inner - inner * eye + _diag_embed(xp, gl)
    return v @ inner @ _mH(xp, v)


def _eigh_jvp(xp: Any, t: Any, ans: Any, x: Any) -> Any:
    lam, v = ans
    dp = _mH(xp, v) @ t @ v
    dl = xp.linalg.diagonal(dp)
    if is_complex(dl):
        dl = xp.real(dl)
    eye = _eye(xp, lam, lam.shape[-1])
    e = _row(xp, lam) - _col(xp, lam) + eye
    return dl, v @ (dp / e - (dp / e) * eye)


_eigh = op.primitive("eigh", fwd=lambda xp, x: tuple(xp.linalg.eigh(x)),
                     vjp=(_eigh_vjp,), jvp=(_eigh_jvp,), save=(), save_ans=True, multi=True, batch=stacked_matrices)


@op.entry(_eigh)
def eigh(x: Array, /) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of each Hermitian matrix.

    The eigenvector gradient divides by eigenvalue gaps (inf/nan at repeated
    eigenvalues) and is well defined only for losses invariant to the sign/phase of
    each eigenvector, as in PyTorch; the gradient is the Hermitian one.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.eigh(xg.asarray([[2.0, 0.0], [0.0, 1.0]])).eigenvalues
        Tensor([1., 2.], dtype=float64, device=cpu)
    """
    return EighResult(*_eigh.bind(x))


def _eigvalsh_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    _, v = xp.linalg.eigh(x)
    return (v * _row(xp, g)) @ _mH(xp, v)


def _eigvalsh_jvp(xp: Any, t: Any, ans: Any, x: Any) -> Any:
    _, v = xp.linalg.eigh(x)
    dl = xp.linalg.diagonal(_mH(xp, v) @ t @ v)
    return xp.real(dl) if is_complex(dl) else dl


@op.function(batch=stacked_matrices, fwd=lambda xp, x: xp.linalg.eigvalsh(x), vjp=(_eigvalsh_vjp,), jvp=(_eigvalsh_jvp,), save=(0,))
def eigvalsh(x: Array, /) -> Array:
    """Eigenvalues (ascending) of each Hermitian matrix; gradient ``V diag(g) V^H``.

    The backward recomputes the eigenvectors; it stays finite at repeated eigenvalues
    (where it is one valid subgradient).

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.eigvalsh(xg.asarray([[2.0, 1.0], [1.0, 2.0]]))
        Tensor([1., 3.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- eig / eigvals
def _eig_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    gl, gv = g
    lam, v = ans
    vh = _mH(xp, v)
    if gv is None:
        return _solve(xp, vh, _col(xp, gl) * vh)
    m = vh @ gv
    # project onto the tangent space of matrices with unit-norm columns
    m = m - vh @ (v * _row(xp, xp.real(xp.linalg.diagonal(m))))
    eye = _eye(xp, lam, lam.shape[-1])
    lc = conj(xp, lam)
    inner = m / (_row(xp, lc) - _col(xp, lc) + eye)
    if gl is not None:
        inner = inner - inner * eye + _diag_embed(xp, gl)
    return _solve(xp, vh, inner @ vh)


def _eig_jvp(xp: Any, t: Any, ans: Any, x: Any) -> Any:
    lam, v = ans
    dp = _solve(xp, v, _like_complex(xp, t, v) @ v)
    eye = _eye(xp, lam, lam.shape[-1])
    c = dp / (_row(xp, lam) - _col(xp, lam) + eye)
    c = c - c * eye
    # keep the columns at unit norm: Re(v_j^H dv_j) = 0
    c = c - _diag_embed(xp, xp.real(xp.linalg.diagonal(_mH(xp, v) @ v @ c)))
    return xp.linalg.diagonal(dp), v @ c


_eig = op.primitive("eig", fwd=lambda xp, x: tuple(xp.linalg.eig(x)),
                    vjp=(_eig_vjp,), jvp=(_eig_jvp,), save=(), save_ans=True, multi=True, batch=stacked_matrices)


@op.entry(_eig)
def eig(x: Array, /) -> EigResult:
    """Eigenvalues and unit-norm eigenvectors of each square matrix (complex outputs).

    As for [`eigh`][xpgrad.ops.linalg.eigh]: the eigenvector gradient divides by eigenvalue gaps and is
    well defined only for losses invariant to each eigenvector's phase. A real
    input gets the real part of the gradient.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.eig(xg.asarray([[2.0, 0.0], [0.0, 1.0]])).eigenvalues
        Tensor([2.+0.j, 1.+0.j], dtype=complex128, device=cpu)
    """
    return EigResult(*_eig.bind(x))


def _eigvals_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    _, v = xp.linalg.eig(x)
    vh = _mH(xp, v)
    return _solve(xp, vh, _col(xp, g) * vh)


def _eigvals_jvp(xp: Any, t: Any, ans: Any, x: Any) -> Any:
    _, v = xp.linalg.eig(x)
    return xp.linalg.diagonal(_solve(xp, v, _like_complex(xp, t, v) @ v))


@op.function(batch=stacked_matrices, fwd=lambda xp, x: xp.linalg.eigvals(x), vjp=(_eigvals_vjp,), jvp=(_eigvals_jvp,), save=(0,))
def eigvals(x: Array, /) -> Array:
    """Eigenvalues of each square matrix (complex); gradient ``V^{-H} diag(g) V^H``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.eigvals(xg.asarray([[2.0, 0.0], [0.0, 1.0]]))
        Tensor([2.+0.j, 1.+0.j], dtype=complex128, device=cpu)
    """


# ---------------------------------------------------------------- svd / svdvals
def _svd_vjp(xp: Any, g: Any, ans: Any, x: Any, *, full_matrices: bool = True) -> Any:
    gu, gs, gvh = g
    u, s, vh = ans
    k = s.shape[-1]
    if full_matrices:  # the extra columns are an arbitrary basis: their gradients are ignored
        u, vh = u[..., :, :k], vh[..., :k, :]
        gu = None if gu is None else gu[..., :, :k]
        gvh = None if gvh is None else gvh[..., :k, :]
    m, n = u.shape[-2], vh.shape[-1]
    if gu is None and gvh is None:
        return (u * _row(xp, gs)) @ vh
    uhgu = None
    vhgv = None
    if gu is not None:
        uhgu = _mH(xp, u) @ gu
        uhgu = uhgu - _mH(xp, uhgu)
    if gvh is not None:
        vhgv = vh @ _mH(xp, gvh)
        vhgv = vhgv - _mH(xp, vhgv)
    s2 = s * s
    eye = _eye(xp, s, k)
    e = _row(xp, s2) - _col(xp, s2) + eye
    if uhgu is not None and vhgv is not None:
        ga = (uhgu * _row(xp, s) + _col(xp, s) * vhgv) / e
    elif uhgu is not None:
        ga = (uhgu / e) * _row(xp, s)
    else:
        ga = _col(xp, s) * (vhgv / e)
    if gs is not None:
        ga = ga + _diag_embed(xp, gs)
    if uhgu is not None and is_complex(uhgu):
        ga = ga + _diag_embed(xp, xp.linalg.diagonal(uhgu) / (2 * s))
    if m > n and gu is not None:
        ga = u @ ga
        gusinv = gu / _row(xp, s)
        ga = (ga + gusinv - u @ (_mH(xp, u) @ gusinv)) @ vh
    elif m < n and gvh is not None:
        ga = ga @ vh
        sinvgvh = gvh / _col(xp, s)
        ga = u @ (ga + sinvgvh - (sinvgvh @ _mH(xp, vh)) @ vh)
    else:
        ga = u @ ga @ vh
    return ga


def _svd_jvp(xp: Any, t: Any, ans: Any, x: Any, *, full_matrices: bool = True) -> Any:
    u, s, vh = ans
    m, n = x.shape[-2], x.shape[-1]
    k = s.shape[-1]
    if full_matrices and m != n:  # the adjoint of the VJP's choice: the extra basis vectors do not move
        du, ds, dvh = _svd_jvp(xp, t, (u[..., :, :k], s, vh[..., :k, :]), x, full_matrices=False)
        if m > k:
            du = xp.concat([du, zeros_like_shape(xp, du, (*du.shape[:-1], m - k))], axis=-1)
        if n > k:
            dvh = xp.concat([dvh, zeros_like_shape(xp, dvh, (*dvh.shape[:-2], n - k, n))], axis=-2)
        return du, ds, dvh
    v = _mH(xp, vh)
    p = _mH(xp, u) @ t @ v
    eye = _eye(xp, s, k)
    dpd = xp.linalg.diagonal(p)
    ds = xp.real(dpd) if is_complex(dpd) else dpd
    s2 = s * s
    e = _row(xp, s2) - _col(xp, s2) + eye
    om_u = (p * _row(xp, s) + _col(xp, s) * _mH(xp, p)) / e
    om_v = (_col(xp, s) * p + _mH(xp, p) * _row(xp, s)) / e
    om_u = om_u - om_u * eye
    om_v = om_v - om_v * eye
    if is_complex(p):  # the phase of each pair goes to U, as in the VJP
        om_u = om_u + _diag_embed(xp, _im_part(xp, dpd) / s)
    du = u @ om_u
    dv = v @ om_v
    if m > n:
        du = du + (t @ v - u @ (_mH(xp, u) @ (t @ v))) / _row(xp, s)
    elif m < n:
        th = _mH(xp, t)
        dv = dv + (th @ u - v @ (vh @ (th @ u))) / _row(xp, s)
    return du, ds, _mH(xp, dv)


_svd = op.primitive("svd", fwd=lambda xp, x, *, full_matrices=True: tuple(xp.linalg.svd(x, full_matrices=full_matrices)),
                    vjp=(_svd_vjp,), jvp=(_svd_jvp,), save=(), save_ans=True, multi=True, batch=stacked_matrices)


@op.entry(_svd)
def svd(x: Array, /, *, full_matrices: bool = True) -> SVDResult:
    """Singular value decomposition ``x = U @ diag(S) @ Vh`` of each matrix.

    The singular-vector gradient divides by gaps of squared singular values (inf/nan
    where two coincide) and needs a loss invariant to the sign/phase of each pair of
    singular vectors. With ``full_matrices=True`` the gradients of the extra columns
    of ``U`` (rows of ``Vh``) are ignored, as in PyTorch, and forward mode gives
    them a zero tangent (the adjoint choice).

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.svd(xg.asarray([[3.0, 0.0], [0.0, -4.0]])).S
        Tensor([4., 3.], dtype=float64, device=cpu)
    """
    return SVDResult(*_svd.bind(x, full_matrices=full_matrices))


def _svdvals_vjp(xp: Any, g: Any, ans: Any, x: Any) -> Any:
    u, _, vh = xp.linalg.svd(x, full_matrices=False)
    return (u * _row(xp, g)) @ vh


def _svdvals_jvp(xp: Any, t: Any, ans: Any, x: Any) -> Any:
    u, _, vh = xp.linalg.svd(x, full_matrices=False)
    d = xp.linalg.diagonal(_mH(xp, u) @ t @ _mH(xp, vh))
    return xp.real(d) if is_complex(d) else d


@op.function(batch=stacked_matrices, fwd=lambda xp, x: xp.linalg.svdvals(x), vjp=(_svdvals_vjp,), jvp=(_svdvals_jvp,), save=(0,))
def svdvals(x: Array, /) -> Array:
    """Singular values (descending) of each matrix; gradient ``U diag(g) Vh``.

    The backward recomputes the singular vectors; it stays finite at repeated
    singular values (one valid subgradient there).

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.svdvals(xg.asarray([[3.0, 0.0], [0.0, -4.0]]))
        Tensor([4., 3.], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- qr
def _copyltu(xp: Any, m: Any) -> Any:
    """The Hermitian matrix with ``m``'s strict lower triangle and the real part of its diagonal."""
    low = xp.tril(m, k=-1)
    d = xp.tril(m) - low
    return low + _mH(xp, low) + (xp.real(d) if is_complex(d) else d)


def _qr_vjp_tall(xp: Any, gq: Any, gr: Any, q: Any, r: Any) -> Any:
    # m >= n (Walter & Lehmann; Seeger et al.): gA = (gQ + Q copyltu(M)) R^{-H}, M = R gR^H - gQ^H Q
    if gr is None:
        m = -(_mH(xp, gq) @ q)
    else:
        m = r @ _mH(xp, gr)
        if gq is not None:
            m = m - _mH(xp, gq) @ q
    b = q @ _copyltu(xp, m)
    if gq is not None:
        b = b + gq
    return _right_solve_h(xp, b, r)


def _qr_vjp(xp: Any, g: Any, ans: Any, x: Any, *, mode: str = "reduced") -> Any:
    gq, gr = g
    q, r = ans
    m, n = q.shape[-2], r.shape[-1]
    if mode == "complete" and m > n:
        msg = (f"qr: mode='complete' is not differentiable for matrices with more rows ({m}) than columns "
               f"({n}): the extra columns of Q are an arbitrary basis; use mode='reduced'")
        raise NonDifferentiableError(msg)
    if m >= n:
        return _qr_vjp_tall(xp, gq, gr, q, r)
    # wide: A = [X | Y], X = Q U (square), V = Q^H Y
    u, v = r[..., :, :m], r[..., :, m:]
    gu = None if gr is None else gr[..., :, :m]
    gv = None if gr is None else gr[..., :, m:]
    if gv is not None:
        extra = (q @ v) @ _mH(xp, gv)
        gq = extra if gq is None else gq + extra
    gx = _qr_vjp_tall(xp, gq, gu, q, u)
    gy = xp.zeros_like(q @ v) if gv is None else q @ gv
    return xp.concat([gx, gy], axis=-1)


def _qr_jvp_tall(xp: Any, t: Any, q: Any, r: Any) -> tuple[Any, Any]:
    tr = _right_solve(xp, t, r)  # dA R^{-1}
    c = _mH(xp, q) @ tr
    low = xp.tril(c, k=-1)
    om = low - _mH(xp, low)
    if is_complex(c):
        d = xp.tril(c) - low
        om = om + _im_part(xp, d)
    up = c - om
    return tr - q @ up, up @ r


def _qr_jvp(xp: Any, t: Any, ans: Any, x: Any, *, mode: str = "reduced") -> Any:
    q, r = ans
    m, n = q.shape[-2], r.shape[-1]
    if mode == "complete" and m > n:
        msg = (f"qr: mode='complete' is not differentiable for matrices with more rows ({m}) than columns "
               f"({n}): the extra columns of Q are an arbitrary basis; use mode='reduced'")
        raise NonDifferentiableError(msg)
    if m >= n:
        return _qr_jvp_tall(xp, t, q, r)
    dq, du = _qr_jvp_tall(xp, t[..., :, :m], q, r[..., :, :m])
    dv = _mH(xp, dq) @ (q @ r[..., :, m:]) + _mH(xp, q) @ t[..., :, m:]
    return dq, xp.concat([du, dv], axis=-1)


_qr = op.primitive("qr", fwd=lambda xp, x, *, mode="reduced": tuple(xp.linalg.qr(x, mode=mode)),
                   vjp=(_qr_vjp,), jvp=(_qr_jvp,), save=(), save_ans=True, multi=True, batch=stacked_matrices)


@op.entry(_qr)
def qr(x: Array, /, *, mode: Literal["reduced", "complete"] = "reduced") -> QRResult:
    """QR decomposition of each matrix.

    Differentiable in ``"reduced"`` mode, and in ``"complete"`` mode when rows <=
    columns; ``"complete"`` with more rows than columns raises in backward (the
    extra columns of Q are arbitrary), as in PyTorch. A loss must not depend on
    the sign (phase) convention of R's diagonal, which is the backend's.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.qr(xg.asarray([[3.0, 0.0], [4.0, 5.0]])).Q.shape
        (2, 2)
    """
    return QRResult(*_qr.bind(x, mode=mode))


# ---------------------------------------------------------------- pinv
def _pinv_vjp(xp: Any, g: Any, ans: Any, x: Any, *, rtol: Any = None) -> Any:
    # PyTorch's pinv_backward (Golub & Pereyra), arranged for the smaller intermediate products
    p = ans
    ph = _mH(xp, p)
    gh = _mH(xp, g)
    m, n = x.shape[-2], x.shape[-1]
    if m <= n:
        k = gh @ p
        kph = k @ ph
        return -_mH(xp, p @ k) + kph - x @ (p @ kph) + ph @ (p @ (gh - k @ x))
    k = p @ gh
    phk = ph @ k
    return -_mH(xp, k @ p) + (gh - x @ k) @ (p @ ph) + phk - (phk @ p) @ x


def _pinv_jvp(xp: Any, t: Any, ans: Any, x: Any, *, rtol: Any = None) -> Any:
    p = ans
    ph = _mH(xp, p)
    th = _mH(xp, t)
    first = -(p @ t @ p)
    second = p @ (ph @ (th - th @ (x @ p)))  # P P^H dA^H (I - A P)
    third = (th - p @ (x @ th)) @ (ph @ p)  # (I - P A) dA^H P^H P
    return first + second + third


def _pinv_fwd(xp: Any, x: Any, *, rtol: Any = None) -> Any:
    return xp.linalg.pinv(x, rtol=rtol)


def _rtol_stack(prim: Primitive, x: Any, k: int, rtol: Any, rb: bool) -> tuple[Any, Any]:
    """``x`` (batched, physical) and an array ``rtol`` (physical with ``k`` batch axes when
    ``rb``, else the example's) at the same physical rank: ``rtol`` broadcasts against the
    stack axes of ``x`` (all but the last two)."""
    check_ndim(prim, x, k, 2)
    rs = tuple(rtol.shape)
    rn = len(rs) - k if rb else len(rs)
    r = max(len(x.shape) - k - 2, rn)
    x = pad(x, k, r + 2)
    new = rs[:k] + (1,) * (r - rn) + rs[k:] if rb else (1,) * (k + r - rn) + rs
    if new != rs:
        rtol = array_api_compat.array_namespace(rtol).reshape(rtol, new)
    xs = tuple(x.shape)
    stack = tuple(a if b == 1 else b for a, b in zip(xs[:-2], new))  # (NumPy's pinv needs x at the full stack shape)
    if stack != xs[:-2]:
        x = _broadcast_to_p(x, shape=(*stack, *xs[-2:]))
    return x, rtol


def _rtol_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    x = xs[0]
    rtol = kw.get("rtol")
    if rtol is None or not is_array(rtol):
        check_ndim(prim, x, k, 2)
        return apply(prim, tuple(xs), kw)
    if not bs[0]:  # (only called with a batched x from here)
        x = _reshape_p(x, shape=(1,) * k + tuple(x.shape))
    x, rtol = _rtol_stack(prim, x, k, rtol, False)
    return apply(prim, (x,), {**kw, "rtol": rtol})


def batched_rtol(prim: Primitive, x: Any, rtol: Batched, kw: dict[str, Any]) -> Any:
    """``pinv``/``matrix_rank`` with a batched ``rtol`` (a keyword, so ``vmap_apply`` does not
    see it): ``x`` and ``rtol`` lifted to the open levels, the physical call, the Batched result."""
    st = STACK.get()
    k = len(st)
    xb = isinstance(x, Batched)
    xphys = lift(x, st) if xb else _reshape_p(x, shape=(1,) * k + tuple(x.shape))
    rphys = lift(rtol, st)
    xphys, r = _rtol_stack(prim, xphys, k, rphys.detach().data, True)
    return from_phys(apply(prim, (xphys,), {**kw, "rtol": r}), st)


_pinv = op.primitive("pinv", fwd=_pinv_fwd, vjp=(_pinv_vjp,), jvp=(_pinv_jvp,), save=(0,), save_ans=True, batch=_rtol_batch)


@op.entry(_pinv)
def pinv(x: Array, /, *, rtol: float | Array | None = None) -> Array:
    """The Moore-Penrose pseudo-inverse of each matrix.

    Differentiable where the rank is locally constant (e.g. full rank); ``rtol``
    (the cut-off for small singular values) affects only the forward.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.pinv(xg.asarray([[2.0, 0.0]]))
        Tensor([[0.5],
                [0. ]], dtype=float64, device=cpu)
    """
    if isinstance(rtol, Tensor):
        if isinstance(rtol, _batched.Batched):  # (a keyword: vmap_apply would not see it)
            return batched_rtol(_pinv, x, rtol, {})  # type: ignore[no-any-return]
        rtol = rtol.data
    return _pinv.bind(x, rtol=rtol)


# ---------------------------------------------------------------- matrix_power
def _powers(xp: Any, a: Any, n: int) -> list[Any]:
    """``[None, a, a^2, ..., a^(n-1)]`` (None: the identity)."""
    out: list[Any] = [None]
    for _ in range(1, n):
        out.append(a if out[-1] is None else out[-1] @ a)
    return out


def _sandwich(pw: list[Any], mid: Any) -> Any:
    """``sum_k pw[k] @ mid @ pw[n-1-k]`` for the powers ``pw`` (None: identity)."""
    n = len(pw)
    total = None
    for k in range(n):
        left, right = pw[k], pw[n - 1 - k]
        term = mid if left is None else left @ mid
        term = term if right is None else term @ right
        total = term if total is None else total + term
    return total


def _matrix_power_vjp(xp: Any, g: Any, ans: Any, x: Any, *, n: int) -> Any:
    if n == 0:
        return None
    if n > 0:
        return _sandwich(_powers(xp, _mH(xp, x), n), g)
    b = xp.linalg.inv(x)
    bh = _mH(xp, b)
    gb = _sandwich(_powers(xp, bh, -n), g)
    return -(bh @ gb @ bh)


def _matrix_power_jvp(xp: Any, t: Any, ans: Any, x: Any, *, n: int) -> Any:
    if n == 0:
        return None
    if n > 0:
        return _sandwich(_powers(xp, x, n), t)
    b = xp.linalg.inv(x)
    return _sandwich(_powers(xp, b, -n), -(b @ t @ b))


# (view: NumPy's power 1 is the matrix itself)
@op.function(batch=stacked_matrices, fwd=lambda xp, x, *, n: xp.linalg.matrix_power(x, n), vjp=(_matrix_power_vjp,), jvp=(_matrix_power_jvp,),
             params={"n": int}, save=(0,), view=True)
def matrix_power(x: Array, n: int, /) -> Array:
    """``x`` raised to the integer power ``n`` (a negative ``n`` inverts first).

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.matrix_power(xg.asarray([[1.0, 1.0], [0.0, 1.0]]), 3)
        Tensor([[1., 3.],
                [0., 1.]], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- matrix_rank (integer output)
def _matrix_rank_fwd(xp: Any, x: Any, *, rtol: Any = None) -> Any:
    return xp.linalg.matrix_rank(x, rtol=rtol)


_matrix_rank = op.primitive("matrix_rank", fwd=_matrix_rank_fwd, nondiff=True, batch=_rtol_batch)


@op.entry(_matrix_rank)
def matrix_rank(x: Array, /, *, rtol: float | Array | None = None) -> Array:
    """The rank of each matrix: the number of singular values above ``rtol * max(S)``.

    Not differentiable (an integer output).

    Examples:
        >>> import xpgrad as xg
        >>> int(xg.linalg.matrix_rank(xg.asarray([[1.0, 2.0], [2.0, 4.0]])))
        1
    """
    if isinstance(rtol, Tensor):
        if isinstance(rtol, _batched.Batched):  # (a keyword: vmap_apply would not see it)
            return batched_rtol(_matrix_rank, x, rtol, {})  # type: ignore[no-any-return]
        rtol = rtol.data
    return _matrix_rank.bind(x, rtol=rtol)


# ---------------------------------------------------------------- cross / outer
def _cross_axis(axis: int, x1: Any, x2: Any) -> int:
    """The axis as a negative index of the broadcast shape (the standard's reading)."""
    return axis if axis < 0 else axis - max(x1.ndim, x2.ndim)


def _cross_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    r = max(lndim(x, b, k) for x, b in zip(xs, bs))
    axis = negative_axis(prim, kw.get("axis", -1), r)
    ys = [to_rank(x, b, k, r) for x, b in zip(xs, bs)]
    return apply(prim, tuple(ys), {**kw, "axis": axis})


_cross = op.primitive("cross", fwd=lambda xp, x1, x2, *, axis=-1: xp.linalg.cross(x1, x2, axis=axis), batch=_cross_batch, vjp=(
    lambda xp, g, ans, x1, x2, *, axis=-1: xp.linalg.cross(conj(xp, x2), g, axis=axis),
    lambda xp, g, ans, x1, x2, *, axis=-1: xp.linalg.cross(g, conj(xp, x1), axis=axis),
), jvp=(
    lambda xp, t, ans, x1, x2, *, axis=-1: xp.linalg.cross(t, x2, axis=axis),
    lambda xp, t, ans, x1, x2, *, axis=-1: xp.linalg.cross(x1, t, axis=axis),
))


@op.entry(_cross, nargs=2)
def cross(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
    """The cross product of 3-element vectors along ``axis`` (broadcasting the others).

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.cross(xg.asarray([1.0, 0.0, 0.0]), xg.asarray([0.0, 1.0, 0.0]))
        Tensor([0., 0., 1.], dtype=float64, device=cpu)
    """
    return _cross.bind(x1, x2, axis=_cross_axis(axis, x1, x2))


def _outer_batch(prim: Primitive, xs: list[Any], bs: list[bool], kw: dict[str, Any], k: int) -> Any:
    """``x1`` as a column times ``x2`` (a row): a broadcast product."""
    x1, x2 = xs
    for i, (x, b) in enumerate(zip(xs, bs)):
        n = lndim(x, b, k)
        if n != 1:
            msg = f"{prim.name}: expected 1-D arguments, got argument {i + 1} of dimension {n} (inside vmap)"
            raise XpgradValueError(msg)
    x1 = _reshape_p(x1, shape=(*x1.shape, 1))
    if bs[1]:
        s = tuple(x2.shape)
        x2 = _reshape_p(x2, shape=(*s[:k], 1, *s[k:]))
    return _multiply_p(x1, x2)


@op.function(batch=_outer_batch, fwd=lambda xp, x1, x2: xp.linalg.outer(x1, x2),
             vjp=(lambda xp, g, ans, x1, x2: g @ conj(xp, x2), lambda xp, g, ans, x1, x2: conj(xp, x1) @ g),
             jvp=(lambda xp, t, ans, x1, x2: xp.linalg.outer(t, x2), lambda xp, t, ans, x1, x2: xp.linalg.outer(x1, t)),
             arrays=2)
def outer(x1: Array, x2: Array, /) -> Array:
    """The outer product of two vectors: ``out[i, j] = x1[i] * x2[j]``.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.outer(xg.asarray([1.0, 2.0]), xg.asarray([3.0, 4.0]))
        Tensor([[3., 4.],
                [6., 8.]], dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- diagonal / trace
def _diagonal_vjp(xp: Any, g: Any, ans: Any, x: Any, *, offset: int = 0) -> Any:
    rows, cols = x.shape[-2], x.shape[-1]
    length = g.shape[-1]
    side = rows if offset >= 0 else cols
    if length < side:  # pad g to the side it runs along, then spread it onto the diagonal
        pad = zeros_like_shape(xp, g, (*g.shape[:-1], side - length))
        g = xp.concat([g, pad], axis=-1)
    band = _eye(xp, g, rows, cols, k=offset)
    return (_col(xp, g) if offset >= 0 else _row(xp, g)) * band


@op.function(batch=stacked_matrices, fwd=lambda xp, x, *, offset=0: xp.linalg.diagonal(x, offset=offset), vjp=(_diagonal_vjp,),
             jvp=(lambda xp, t, ans, x, *, offset=0: xp.linalg.diagonal(t, offset=offset),), save=(), view=True)
def diagonal(x: Array, /, *, offset: int = 0) -> Array:
    """The ``offset``-th diagonal of each matrix (above the main one if positive).

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.diagonal(xg.asarray([[1.0, 2.0], [3.0, 4.0]]), offset=1)
        Tensor([2.], dtype=float64, device=cpu)
    """


def _trace_fwd(xp: Any, x: Any, *, offset: int = 0, dtype: Any = None) -> Any:
    return xp.linalg.trace(x, offset=offset, dtype=to_backend(dtype, xp, func="trace"))


def _trace_vjp(xp: Any, g: Any, ans: Any, x: Any, *, offset: int = 0, dtype: Any = None) -> Any:
    return _col(xp, _col(xp, g)) * _eye(xp, g, x.shape[-2], x.shape[-1], k=offset)


@op.function(batch=stacked_matrices, fwd=_trace_fwd, vjp=(_trace_vjp,),
             jvp=(lambda xp, t, ans, x, *, offset=0, dtype=None: _trace_fwd(xp, t, offset=offset, dtype=dtype),), save=())
def trace(x: Array, /, *, offset: int = 0, dtype: Any = None) -> Array:
    """The sum of the ``offset``-th diagonal of each matrix.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.trace(xg.asarray([[1.0, 2.0], [3.0, 4.0]]))
        Tensor(5., dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- vector_norm
def _norm_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        return (axis % ndim,)
    return tuple(a % ndim for a in axis)


def _kept(xp: Any, a: Any, x: Any, axes: tuple[int, ...]) -> Any:
    """``a`` (reduced over ``axes``) with the reduced axes back as size 1."""
    if a.ndim == x.ndim:
        return a
    return xp.reshape(a, tuple(1 if i in axes else s for i, s in enumerate(x.shape)))


def _norm_dir(xp: Any, x: Any, norm: Any, ord: float, axes: tuple[int, ...]) -> Any:  # noqa: A002 - the standard's name
    """The gradient of the norm with respect to ``x`` (for a unit upstream gradient); None: zero."""
    if ord == 0:
        return None
    if ord == 2:
        safe = xp.where(norm == 0, xp.ones_like(norm), norm)
        return x / safe  # x is zero wherever the norm is: the gradient at the zero vector is 0
    if ord == 1:
        return xp.sign(x)
    ax = xp.abs(x)
    if ord in (float("inf"), float("-inf")):
        hit = ax == norm
        hitf = xp.astype(hit, ax.dtype)
        count = xp.sum(hitf, axis=axes, keepdims=True)
        return xp.sign(x) * hitf / count  # ties share the gradient evenly
    if ord < 1:
        zero = ax == 0
        pw = xp.where(zero, xp.zeros_like(ax), xp.where(zero, xp.ones_like(ax), ax) ** (ord - 1))
        return xp.sign(x) * pw * norm ** (1 - ord)
    safe = xp.where(norm == 0, xp.ones_like(norm), norm)
    return xp.sign(x) * ax ** (ord - 1) / safe ** (ord - 1)


@in_float32  # (half precision: the norm and its rules in float32, as torch's)
def _vector_norm_vjp(xp: Any, g: Any, ans: Any, x: Any, *, axis: Any = None, keepdims: bool = False,
                     ord: float = 2) -> Any:  # noqa: A002 - the standard's name
    axes = _norm_axes(axis, x.ndim)
    d = _norm_dir(xp, x, _kept(xp, ans, x, axes), ord, axes)
    return None if d is None else _kept(xp, g, x, axes) * d


@in_float32
def _vector_norm_jvp(xp: Any, t: Any, ans: Any, x: Any, *, axis: Any = None, keepdims: bool = False,
                     ord: float = 2) -> Any:  # noqa: A002 - the standard's name
    axes = _norm_axes(axis, x.ndim)
    d = _norm_dir(xp, x, _kept(xp, ans, x, axes), ord, axes)
    if d is None:
        return None
    prod = conj(xp, d) * t
    if is_complex(prod):
        prod = xp.real(prod)
    return xp.sum(prod, axis=axes if axes else None, keepdims=keepdims)


@in_float32
def _vector_norm_fwd(xp: Any, x: Any, *, axis: Any = None, keepdims: bool = False, ord: float = 2) -> Any:  # noqa: A002
    return xp.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)


def _axis_param(axis: int | tuple[int, ...] | None) -> int | tuple[int, ...] | None:
    """``axis`` as the primitive takes it: None, an int or a tuple (hashable)."""
    if axis is not None and not isinstance(axis, int):
        axis = tuple(axis)
    return axis


@op.function(batch=along_axes, fwd=_vector_norm_fwd, vjp=(_vector_norm_vjp,), jvp=(_vector_norm_jvp,), params={"axis": _axis_param},
             save=(0,), save_ans=True)
def vector_norm(x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False,
                ord: float = 2) -> Array:  # noqa: A002 - the standard's name
    """The ``ord``-norm of ``x`` over ``axis`` (all axes if None).

    Gradients follow PyTorch: 0 at the zero vector; 0 for ``ord=0``; for
    ``ord=inf/-inf`` the gradient is split evenly between entries tied at the
    max/min absolute value.

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.vector_norm(xg.asarray([3.0, 4.0]))
        Tensor(5., dtype=float64, device=cpu)
    """


# ---------------------------------------------------------------- matrix_norm (composite)
_INF = float("inf")


@op.composite(of="vector_norm (fro), svdvals (2, -2, nuc), abs/sum/max/min (1, -1, inf, -inf)")
def matrix_norm(x: Array, /, *, keepdims: bool = False,
                ord: float | Literal["fro", "nuc"] | None = "fro") -> Array:  # noqa: A002 - the standard's name
    """The ``ord``-norm of each matrix: ``"fro"``, ``"nuc"``, 1, -1, 2, -2, inf or -inf.

    Composed of differentiable functions: ``"fro"`` of [`vector_norm`][xpgrad.ops.linalg.vector_norm] (0 gradient
    at the zero matrix), ``2``/``-2``/``"nuc"`` of [`svdvals`][xpgrad.ops.linalg.svdvals] (finite at repeated
    singular values), the others of ``abs``, ``sum`` and ``max``/``min`` (ties as
    those functions document).

    Examples:
        >>> import xpgrad as xg
        >>> xg.linalg.matrix_norm(xg.asarray([[3.0, 0.0], [0.0, 4.0]]), ord=2)
        Tensor(4., dtype=float64, device=cpu)
    """
    if ord is None or ord == "fro":
        return vector_norm(x, axis=(-2, -1), keepdims=keepdims, ord=2)
    if ord == "nuc":
        out = _sum(svdvals(x), axis=-1)
    elif ord in (2, -2):
        out = (_max if ord == 2 else _min)(svdvals(x), axis=-1)
    elif ord in (1, -1, _INF, -_INF):
        sums = _sum(_abs(x), axis=-2 if ord in (1, -1) else -1)
        out = (_max if ord > 0 else _min)(sums, axis=-1)
    else:
        msg = f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}"
        raise XpgradValueError(msg)
    if keepdims:
        out = _reshape(out, (*out.shape, 1, 1))  # type: ignore[arg-type]  # (a None size stays unknown)
    return out


# the main namespace's functions that linalg re-exports: aliases of their entries (linalg.matmul
# names the entry matmul: the same function and primitive)
_aliases = Chapter(_C, module="xpgrad.linalg", prefix="linalg.")
for _f in (matmul, matrix_transpose, tensordot, vecdot):
    _aliases.alias(_f.__name__, _f)
del _f
op.check_all(__all__)
