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
