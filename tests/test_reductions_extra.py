"""Reductions, sorting, searching, set and utility functions at the points the
property tests stay away from (ties, zeros, include_initial), plus signatures and
the dtypes and values of the non-differentiable outputs."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad._spec import CHAPTERS
from xpgrad.autograd._core import PRIMITIVES
from xpgrad.testing import check_grads

NAMES = tuple(n for c in ("statistical", "searching", "sorting", "set", "utility") for n in CHAPTERS[c] if n != "where")
NONDIFF = ("argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "argsort", "isin", "unique_all",
           "unique_counts", "unique_inverse", "unique_values", "all", "any")


def _grad(f: Any, x: Any) -> Any:
    return xg.grad(lambda a: xg.sum(f(a)))(x)


def _np(backend: Any, a: Any) -> np.ndarray:
    return backend.to_numpy(a)


@pytest.mark.parametrize("name", NAMES)
def test_signature_matches_the_standard(name: str) -> None:
    strict = pytest.importorskip("array_api_strict")

    def shape(f: Any) -> list[tuple[str, Any, Any]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]

    assert shape(getattr(xg, name)) == shape(getattr(strict, name))


@pytest.mark.parametrize("name", NONDIFF)
def test_declared_non_differentiable(name: str) -> None:
    assert PRIMITIVES[name].nondiff


# ---------------------------------------------------------------- max, min: ties
@pytest.mark.parametrize(("name", "torch_name"), [("max", "amax"), ("min", "amin")])
def test_ties_split_the_gradient_evenly(backend: Any, name: str, torch_name: str) -> None:
    x = np.array([[1.0, 3.0, 3.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    sign = 1.0 if name == "max" else -1.0
    xs = x * sign
    g = _grad(lambda a: getattr(xg, name)(a, axis=1), backend.asarray(xs))
    want = np.array([[0.0, 0.5, 0.5, 0.0], [0.25, 0.25, 0.25, 0.25]])
    np.testing.assert_allclose(_np(backend, g), want)
    g_all = _grad(lambda a: getattr(xg, name)(a, keepdims=True), backend.asarray(xs))
    np.testing.assert_allclose(_np(backend, g_all), np.where(x == 3.0, 0.5, 0.0))
    torch = pytest.importorskip("torch")
    t = torch.asarray(xs, requires_grad=True)
    getattr(torch, torch_name)(t, dim=1).sum().backward()
    np.testing.assert_allclose(_np(backend, g), t.grad.numpy())


def test_ties_with_an_upstream_gradient() -> None:
    x = xg.asarray([[5.0, 5.0, 1.0]], requires_grad=True)
    xg.max(x, axis=(0, 1)).backward(gradient=xg.asarray(3.0))
    np.testing.assert_allclose(x.grad.data, [[1.5, 1.5, 0.0]])


# ---------------------------------------------------------------- prod, cumulative_prod: zeros
@pytest.mark.parametrize(("x", "want"), [
    ([2.0, 0.0, 3.0], [0.0, 6.0, 0.0]),
    ([0.0, 2.0, 0.0, 3.0], [0.0, 0.0, 0.0, 0.0]),
    ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
    ([2.0, -1.0, 4.0], [-4.0, 8.0, -2.0]),
])
def test_prod_gradient_with_zeros(backend: Any, x: list[float], want: list[float]) -> None:
    g = _grad(xg.prod, backend.asarray(np.array(x)))
    np.testing.assert_array_equal(_np(backend, g), want)


def test_prod_second_derivative_with_two_zeros() -> None:
    # d2 prod / dx_i dx_j is the product of the other elements: 2 * 3 for the two zeros
    x = xg.asarray([0.0, 2.0, 0.0, 3.0], requires_grad=True)
    (g,) = xg.autograd.grad(xg.prod(x), x, create_graph=True)
    rows = [xg.autograd.grad(g[i], x, retain_graph=True)[0].data for i in range(4)]
    hess = np.stack([np.asarray(r) for r in rows])
    want = np.zeros((4, 4))
    want[0, 2] = want[2, 0] = 6.0
    want[0, 1] = want[1, 0] = 0.0
    np.testing.assert_allclose(hess, want)


def test_prod_with_zeros_second_order_numerically(backend: Any) -> None:
    x = np.array([[0.0, 2.0, 0.0, 3.0], [1.5, 0.0, -2.0, 0.5], [0.0, 0.0, 0.0, 1.0]])
    for axis in (None, 0, 1):
        check_grads(lambda a, axis=axis: xg.prod(a, axis=axis), backend.asarray(x), order=2)


def test_cumulative_prod_with_zeros(backend: Any) -> None:
    x = np.array([[2.0, 0.0, 3.0, 0.0, 5.0], [0.0, 1.5, -2.0, 0.5, 2.0], [1.0, 2.0, 3.0, 4.0, 0.0]])
    u = np.random.default_rng(1).standard_normal(x.shape)
    g = xg.grad(lambda a: xg.sum(xg.cumulative_prod(a, axis=1) * xg.asarray(u)))(x)
    torch = pytest.importorskip("torch")
    t = torch.asarray(x, requires_grad=True)
    torch.cumprod(t, dim=1).backward(torch.asarray(u))
    np.testing.assert_allclose(g, t.grad.numpy())
    for inc in (False, True):
        check_grads(lambda a, inc=inc: xg.cumulative_prod(a, axis=1, include_initial=inc),
                    backend.asarray(x), order=2)


# ---------------------------------------------------------------- dtype=, include_initial, axis
@pytest.mark.parametrize("name", ["sum", "prod", "cumulative_sum", "cumulative_prod"])
def test_dtype_parameter(name: str) -> None:
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    f = getattr(xg, name)
    y = f(xg.asarray(x), dtype=xg.float64)
    assert y.dtype == xg.float64
    g = xg.grad(lambda a: xg.sum(f(a, dtype=xg.float64)))(x)
    assert g.dtype == np.float32


def test_include_initial_values() -> None:
    x = xg.asarray([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(xg.cumulative_sum(x, axis=0, include_initial=True).data, [[0, 0], [1, 2], [4, 6]])
    np.testing.assert_array_equal(xg.cumulative_prod(x, axis=1, include_initial=True).data, [[1, 1, 2], [1, 3, 12]])


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
def test_cumulative_axis_required_beyond_1d(name: str) -> None:
    with pytest.raises(xg.XpgradValueError, match=f"{name}: axis is required"):
        getattr(xg, name)(xg.asarray([[1.0]]))
    with pytest.raises(xg.XpgradValueError, match="out of range"):
        getattr(xg, name)(xg.asarray([1.0]), axis=1)


def test_var_and_std_correction() -> None:
    x = np.array([1.0, 2.0, 4.0, 7.0])
    np.testing.assert_allclose(xg.var(xg.asarray(x), correction=1).data, np.var(x, ddof=1))
    np.testing.assert_allclose(xg.std(xg.asarray(x), correction=1.0).data, np.std(x, ddof=1))
    g = xg.grad(lambda a: xg.var(a, correction=1))(x)
    np.testing.assert_allclose(g, 2 * (x - x.mean()) / 3)


@pytest.mark.parametrize("name", ["var", "std"])
def test_fractional_correction(backend: Any, name: str) -> None:
    x = np.array([[1.0, 2.0, 4.0], [7.0, -1.0, 0.5]])
    f = getattr(xg, name)  # std is sqrt(var): fine on torch, whose compat std refuses 0.5
    want = np.var(x, axis=1, ddof=0.5)
    got = _np(backend, f(xg.asarray(backend.asarray(x)), axis=1, correction=0.5))
    np.testing.assert_allclose(got, want if name == "var" else np.sqrt(want))
    check_grads(lambda a: f(a, axis=1, correction=0.5), backend.asarray(x), order=2)


# ---------------------------------------------------------------- sort
def test_sort_descending_with_ties(backend: Any) -> None:
    x = np.array([1.0, 3.0, 1.0, 2.0, 3.0])
    u = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    for descending in (False, True):
        y = xg.sort(xg.asarray(backend.asarray(x)), descending=descending)
        np.testing.assert_array_equal(_np(backend, y), np.sort(x)[::-1] if descending else np.sort(x))
        g = xg.grad(lambda a, d=descending: xg.sum(xg.sort(a, descending=d) * xg.asarray(backend.asarray(u))))(
            backend.asarray(x))
        torch = pytest.importorskip("torch")
        t = torch.asarray(x, requires_grad=True)
        torch.sort(t, descending=descending, stable=True).values.backward(torch.asarray(u))
        np.testing.assert_array_equal(_np(backend, g), t.grad.numpy())
        # a permutation of u: every upstream entry lands on exactly one element
        np.testing.assert_array_equal(np.sort(_np(backend, g)), u)


def test_sort_second_order_along_axis_0(backend: Any) -> None:
    x = np.array([[0.3, -1.0, 2.0], [1.7, 0.1, -0.5], [-2.0, 0.9, 0.4]])
    check_grads(lambda a: xg.sort(a, axis=0, descending=True) ** 2, backend.asarray(x), order=2)


# ---------------------------------------------------------------- non-differentiable outputs
def test_nondiff_output_dtypes(backend: Any) -> None:
    x = xg.asarray(backend.asarray(np.array([[3.0, 0.0, 1.0], [1.0, 5.0, 0.0]])), requires_grad=True)
    for t in (xg.argmax(x, axis=1), xg.argmin(x), xg.argsort(x), xg.count_nonzero(x, axis=0)):
        assert t.dtype == xg.int64
        assert not t.requires_grad
    # searchsorted keeps the backend's index dtype (jax.numpy's is int32 whatever the default)
    edges = backend.asarray(np.array([0.0, 1.0, 2.0]))
    s = xg.searchsorted(xg.asarray(edges), x[0, :])
    assert s.data.dtype == backend.xp.searchsorted(edges, x.data[0, :]).dtype
    assert s.dtype.kind == "signed integer" and not s.requires_grad
    ints = xg.asarray(backend.asarray(np.array([0, 1])))
    for t in (xg.all(x), xg.any(x, axis=0, keepdims=True), xg.isin(xg.argsort(x), ints)):
        assert t.dtype == xg.bool
        assert not t.requires_grad
    assert xg.count_nonzero(x, axis=(0, 1), keepdims=True).shape == (1, 1)


def test_argmax_argmin_values() -> None:
    x = xg.asarray([[1.0, 5.0, 5.0], [7.0, 2.0, 7.0]])
    np.testing.assert_array_equal(xg.argmax(x, axis=1).data, [1, 0])  # first occurrence
    np.testing.assert_array_equal(xg.argmin(x, axis=0, keepdims=True).data, [[0, 1, 0]])
    assert int(xg.argmax(x).data) == 3


def test_searchsorted_side_and_sorter() -> None:
    x1 = xg.asarray([3.0, 1.0, 2.0])
    sorter = xg.argsort(x1)
    np.testing.assert_array_equal(xg.searchsorted(x1, xg.asarray([2.0]), sorter=sorter).data, [1])
    np.testing.assert_array_equal(xg.searchsorted(x1, xg.asarray([2.0]), side="right", sorter=sorter).data, [2])


def test_nonzero_values_and_dtype() -> None:
    x = xg.asarray([[0.0, 1.5], [2.0, 0.0]], requires_grad=True)
    idx = xg.nonzero(x)
    assert isinstance(idx, tuple) and len(idx) == 2
    np.testing.assert_array_equal(idx[0].data, [0, 1])
    np.testing.assert_array_equal(idx[1].data, [1, 0])
    assert all(t.dtype == xg.int64 and not t.requires_grad for t in idx)


def _unique_input(backend: Any) -> tuple[np.ndarray, Any]:
    data = np.array([3.0, 1.0, 3.0, 2.0, 1.0, 3.0])
    return data, xg.asarray(backend.asarray(data), requires_grad=True)


def test_unique_all(backend: Any) -> None:
    _, x = _unique_input(backend)
    if backend.name == "torch":  # a limitation of array-api-compat's torch namespace
        with pytest.raises(NotImplementedError, match="unique_all"):
            xg.unique_all(x)
        return
    r = xg.unique_all(x)
    assert type(r).__name__ == "UniqueAllResult"
    assert r._fields == ("values", "indices", "inverse_indices", "counts")
    np.testing.assert_array_equal(_np(backend, r.values), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(_np(backend, r.indices), [1, 3, 0])
    np.testing.assert_array_equal(_np(backend, r.inverse_indices), [2, 0, 2, 1, 0, 2])
    np.testing.assert_array_equal(_np(backend, r.counts), [2, 1, 3])
    assert r.values.dtype == xg.float64 and not r.values.requires_grad
    assert r.counts.dtype == xg.int64 and not r.counts.requires_grad


def test_unique_counts_inverse_values(backend: Any) -> None:
    data, x = _unique_input(backend)
    c = xg.unique_counts(x)
    assert type(c).__name__ == "UniqueCountsResult" and c._fields == ("values", "counts")
    np.testing.assert_array_equal(_np(backend, c.counts), [2, 1, 3])
    inv = xg.unique_inverse(x)
    assert type(inv).__name__ == "UniqueInverseResult" and inv._fields == ("values", "inverse_indices")
    np.testing.assert_array_equal(_np(backend, inv.values)[_np(backend, inv.inverse_indices)], data)
    v = xg.unique_values(x)
    np.testing.assert_array_equal(_np(backend, v), [1.0, 2.0, 3.0])
    assert v.dtype == xg.float64
    assert not any(t.requires_grad for t in (*c, *inv, v))


def test_isin_scalar_and_invert() -> None:
    x = xg.asarray([1, 2, 3])
    np.testing.assert_array_equal(xg.isin(x, 2).data, [False, True, False])
    np.testing.assert_array_equal(xg.isin(x, xg.asarray([1, 3]), invert=True).data, [False, True, False])


# ---------------------------------------------------------------- diff
def test_diff_gradient_parts(backend: Any) -> None:
    x = backend.asarray(np.array([1.0, 4.0, 9.0]))
    pre = backend.asarray(np.array([0.0, 0.5]))
    app = backend.asarray(np.array([16.0]))
    u = np.array([1.0, 2.0, 3.0, 4.0])  # n=2: 6 - 2 outputs

    def loss(x: Any, pre: Any, app: Any) -> Any:
        return xg.sum(xg.diff(x, n=2, prepend=pre, append=app) * xg.asarray(backend.asarray(u)))

    gx, gp, ga = xg.grad(loss, argnums=(0, 1, 2))(x, pre, app)
    # adjoint of two differences: u convolved with [1, -2, 1]
    full = np.convolve(u, [1.0, -2.0, 1.0])
    np.testing.assert_allclose(_np(backend, gp), full[:2])
    np.testing.assert_allclose(_np(backend, gx), full[2:5])
    np.testing.assert_allclose(_np(backend, ga), full[5:])
