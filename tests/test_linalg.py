"""The ``linalg`` extension beyond the rule table (tests/cases/linalg.py): completeness
and signatures of the namespace, and the documented behaviour at degenerate points."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import xpgrad as xg
from xpgrad._exceptions import NonDifferentiableError
from xpgrad._spec import LINALG
from xpgrad.autograd._core import COMPOSITES, DECLARED, PRIMITIVES

#: the 2025.12 names of the extension
NAMES = LINALG


@pytest.mark.parametrize("name", NAMES)
def test_every_linalg_function_is_differentiable_or_declared(name: str) -> None:
    assert callable(getattr(xg.linalg, name, None)), f"xpgrad.linalg has no {name}"
    assert name in PRIMITIVES or name in COMPOSITES or name in DECLARED, f"linalg.{name}: no rule or declaration"


def test_matrix_rank_is_declared_non_differentiable() -> None:
    assert PRIMITIVES["matrix_rank"].nondiff


@pytest.mark.parametrize("name", NAMES)
def test_signature_matches_the_standard(name: str) -> None:
    strict = pytest.importorskip("array_api_strict")

    def shape(f: object) -> list[tuple[str, object, object]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]  # type: ignore[arg-type]

    assert shape(getattr(xg.linalg, name)) == shape(getattr(strict.linalg, name))


def test_aliases_are_the_main_namespace_functions() -> None:
    for name in ("matmul", "matrix_transpose", "tensordot", "vecdot"):
        assert getattr(xg.linalg, name) is getattr(xg, name)


def test_result_tuples_have_the_standard_field_names() -> None:
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    assert xg.linalg.eigh(a)._fields == ("eigenvalues", "eigenvectors")
    assert xg.linalg.eig(a)._fields == ("eigenvalues", "eigenvectors")
    assert xg.linalg.svd(a)._fields == ("U", "S", "Vh")
    assert xg.linalg.qr(a)._fields == ("Q", "R")
    assert xg.linalg.slogdet(a)._fields == ("sign", "logabsdet")


def test_vector_norm_gradient_at_the_zero_vector_is_zero() -> None:
    for ord_ in (2, 1, 3, math.inf):
        g = xg.grad(lambda x, o=ord_: xg.linalg.vector_norm(x, ord=o))(np.zeros(3))
        np.testing.assert_array_equal(g, np.zeros(3))
    g = xg.grad(lambda x: xg.linalg.matrix_norm(x))(np.zeros((2, 2)))
    np.testing.assert_array_equal(g, np.zeros((2, 2)))


def test_vector_norm_inf_splits_ties_evenly() -> None:
    g = xg.grad(lambda x: xg.linalg.vector_norm(x, ord=math.inf))(np.array([2.0, -2.0, 1.0]))
    np.testing.assert_allclose(g, [0.5, -0.5, 0.0])


def test_vector_norm_ord_zero_has_zero_gradient() -> None:
    g = xg.grad(lambda x: xg.linalg.vector_norm(x, ord=0) * 1.0)(np.array([2.0, 0.0, 1.0]))
    np.testing.assert_array_equal(g, np.zeros(3))


def test_repeated_eigenvalues() -> None:
    a = np.diag([1.0, 1.0, 2.0])
    # eigenvalues alone: finite (V diag(g) V^H)
    g = xg.grad(lambda x: xg.sum(xg.linalg.eigvalsh(x) ** 2))(a)
    np.testing.assert_allclose(g, 2 * a)
    g = xg.grad(lambda x: xg.sum(xg.linalg.svdvals(x)))(a)
    assert np.all(np.isfinite(g))
    # eigenvectors: the gap 1/(l_j - l_i) is infinite, as in PyTorch
    with np.errstate(divide="ignore", invalid="ignore"):
        g = xg.grad(lambda x: xg.sum(xg.linalg.eigh(x).eigenvectors ** 2 * np.arange(3.0)))(a)
    assert not np.all(np.isfinite(g))


def test_svd_full_matrices_ignores_the_extra_columns() -> None:
    a = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]])

    def extra(x: object) -> object:
        return xg.sum(xg.linalg.svd(x, full_matrices=True).U[:, 2:] ** 3)

    np.testing.assert_array_equal(xg.grad(extra)(a), np.zeros_like(a))

    def reduced(x: object, full: bool) -> object:
        u, s, vh = xg.linalg.svd(x, full_matrices=full)
        return xg.sum(s * s) + xg.sum((u[:, :2] @ vh[:2, :]) ** 2)

    np.testing.assert_allclose(xg.grad(lambda x: reduced(x, True))(a), xg.grad(lambda x: reduced(x, False))(a))


def test_qr_complete_tall_is_not_differentiable() -> None:
    a = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]])
    with pytest.raises(NonDifferentiableError, match="complete"):
        xg.grad(lambda x: xg.sum(xg.linalg.qr(x, mode="complete").R))(a)
    g = xg.grad(lambda x: xg.sum(xg.linalg.qr(x, mode="complete").R))(a.T)  # wide: same as reduced
    np.testing.assert_allclose(g, xg.grad(lambda x: xg.sum(xg.linalg.qr(x).R))(a.T))


def test_gauge_invariant_complex_eigh_gradient_is_hermitian() -> None:
    rng = np.random.default_rng(0)
    b = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    a = b @ b.conj().T + 3 * np.eye(3)

    def loss(x: object) -> object:
        v = xg.linalg.eigh(x).eigenvectors
        return xg.sum(xg.real(v * xg.conj(v)) * np.arange(3.0))

    g = xg.grad(loss)(a)
    np.testing.assert_allclose(g, g.conj().T, atol=1e-12)


def test_matrix_norm_rejects_an_unknown_ord() -> None:
    with pytest.raises(ValueError, match="matrix_norm: ord"):
        xg.linalg.matrix_norm(np.eye(2), ord=3)


# ---------------------------------------------------------------- CuPy's shape limits, on every backend
class _CupyLikeNumpy:
    """NumPy's array-API namespace with CuPy's stricter ``linalg.solve`` and ``tensordot``:
    solve broadcasts no batch axes (``cupy.linalg.solve`` needs ``a.shape[:-1] ==
    b.shape[:a.ndim - 1]``), and tensordot takes a 0-d input only with ``axes`` 0 or
    ``((), ())``. The rules must call a library only in the form every library takes."""

    def __init__(self) -> None:
        import array_api_compat.numpy as cnp

        self._xp = cnp
        self.linalg = self

    def __getattr__(self, name: str) -> object:
        return getattr(self._xp, name)

    def solve(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if not ((a.ndim == b.ndim or a.ndim == b.ndim + 1) and a.shape[:-1] == b.shape[:a.ndim - 1]):
            msg = "a must have (..., M, M) shape and b must have (..., M) or (..., M, K)"
            raise ValueError(msg)
        return np.linalg.solve(a, b)

    def tensordot(self, a: np.ndarray, b: np.ndarray, axes: object = 2) -> np.ndarray:
        if (a.ndim == 0 or b.ndim == 0) and axes != 0 and axes != ((), ()):
            msg = "An input is zero-dim while axes has dimensions"
            raise ValueError(msg)
        return np.tensordot(a, b, axes=axes)  # type: ignore[arg-type]


@pytest.mark.parametrize(("sa", "sb"), [
    ((2, 3, 3), (3,)),        # one vector against a stack
    ((3, 3), (2, 3, 2)),      # one matrix against a stack of right-hand sides
    ((2, 1, 3, 3), (4, 3, 2)),  # batch axes that broadcast both ways
    ((3, 3), (3,)),
])
def test_solve_calls_the_library_without_broadcasting(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    from xpgrad.ops.linalg import _solve

    rng = np.random.default_rng(0)
    a = rng.normal(size=sa) + 4 * np.eye(sa[-1])
    b = rng.normal(size=sb)
    want = np.linalg.solve(a, b[..., None])[..., 0] if len(sb) == 1 else np.linalg.solve(a, b)
    np.testing.assert_allclose(_solve(_CupyLikeNumpy(), a, b), want, rtol=1e-12)
    # and through xpgrad, first and second order, on each shape
    xg.testing.check_grads(lambda a, b: xg.linalg.solve(a, b), a, b, order=2)


@pytest.mark.parametrize("axes", [([], []), ((), ()), 0])
def test_tensordot_of_0d_arrays_uses_axes_0(axes: object) -> None:
    from xpgrad.ops.linear_algebra import _tensordot_fwd

    a, b = np.asarray(1.5), np.arange(3.0)
    np.testing.assert_array_equal(_tensordot_fwd(_CupyLikeNumpy(), a, b, axes=axes), 1.5 * b)
    np.testing.assert_array_equal(_tensordot_fwd(_CupyLikeNumpy(), b, a, axes=axes), 1.5 * b)
    g = xg.grad(lambda a, b: xg.sum(xg.tensordot(a, b, axes=axes) ** 2), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(g[0], np.sum(2 * 1.5 * b * b))
    np.testing.assert_allclose(g[1], 2 * 1.5 * 1.5 * b)


def test_solve_and_tensordot_shapes_on_every_backend(backend: object) -> None:
    """The shapes CuPy refused (a 1-D b against a stack; 0-d tensordot), forward and
    gradient, on the backend fixture (on a GPU machine: CuPy and torch-CUDA)."""
    rng = np.random.default_rng(1)
    a_np = rng.normal(size=(2, 3, 3)) + 4 * np.eye(3)
    b_np = rng.normal(size=(3,))
    a, b = backend.asarray(a_np), backend.asarray(b_np)  # type: ignore[attr-defined]
    if backend.name == "dask":  # type: ignore[attr-defined]
        pytest.skip("Dask's solve takes 2-D arrays only (its own limit; tests/cases/linalg.py's xfail)")
    got = xg.linalg.solve(xg.asarray(a), xg.asarray(b))
    np.testing.assert_allclose(backend.to_numpy(got), np.linalg.solve(a_np, b_np[..., None])[..., 0], rtol=1e-10)  # type: ignore[attr-defined]
    ga, gb = xg.grad(lambda a, b: xg.sum(xg.linalg.solve(a, b) ** 2), argnums=(0, 1))(a, b)
    ga_np, gb_np = xg.grad(lambda a, b: xg.sum(xg.linalg.solve(a, b) ** 2), argnums=(0, 1))(a_np, b_np)
    np.testing.assert_allclose(backend.to_numpy(ga), ga_np, rtol=1e-10)  # type: ignore[attr-defined]
    np.testing.assert_allclose(backend.to_numpy(gb), gb_np, rtol=1e-10)  # type: ignore[attr-defined]
    s, v = backend.asarray(np.asarray(2.0)), backend.asarray(np.arange(3.0))  # type: ignore[attr-defined]
    g = xg.grad(lambda s, v: xg.sum(xg.tensordot(s, v, axes=([], [])) ** 2))(s, v)
    np.testing.assert_allclose(backend.to_numpy(g), 2 * 2.0 * 5.0)  # type: ignore[attr-defined]
