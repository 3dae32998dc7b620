"""vmap of what the generated rule tests (tests/test_vmap_rules.py) do not reach: the
non-differentiable sorting, searching and utility functions, the ``*_like`` creation
functions, ``asarray``/``from_dlpack`` of a batched value, and the errors of functions
whose output would have a data-dependent shape."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad._exceptions import XpgradTypeError, XpgradValueError

from ._util import to_numpy

RNG = np.random.default_rng(0)


def _loop(backend: Any, f: Any, *batch: np.ndarray) -> np.ndarray:
    """``f`` applied to each example (NumPy arrays along axis 0), stacked."""
    return np.stack([to_numpy(f(*(xg.asarray(backend.asarray(a[i])) for a in batch))) for i in range(len(batch[0]))])


def _vmapped(backend: Any, f: Any, *batch: np.ndarray, **kw: Any) -> np.ndarray:
    return to_numpy(xg.vmap(f, **kw)(*(backend.asarray(a) for a in batch)))


@pytest.mark.parametrize(
    "name",
    ["argsort", "argsort_desc", "sort_int", "all", "any_axis", "count_nonzero", "argmax_none", "argmin_none_keep",
     "argmax_axis", "cumsum_1d_none", "clip", "where", "diff_unbatched_ends"],
)
def test_nondifferentiable_functions_match_loop(backend: Any, name: str) -> None:
    """Integer and boolean outputs (no gradient) of vmap equal the loop's: a wrong axis shift
    (the batch axis sorted, reduced or counted) changes the values or the shape."""
    x = np.round(RNG.normal(size=(4, 3, 5)), 1)
    xd = np.random.default_rng(1).permutation(60).reshape(4, 3, 5) * 0.5
    xi = RNG.integers(-3, 4, size=(4, 3, 5))
    pre = backend.asarray(RNG.integers(-3, 4, size=(3, 1)))
    fns: dict[str, tuple[Any, np.ndarray]] = {
        "argsort": (lambda a: xg.argsort(a, axis=0), x),
        "argsort_desc": (lambda a: xg.argsort(a, descending=True), x),
        "sort_int": (lambda a: xg.sort(a, axis=-2), xi),
        "all": (lambda a: xg.all(a > -1.0), x),
        "any_axis": (lambda a: xg.any(a > 1.0, axis=(0,), keepdims=True), x),
        "count_nonzero": (lambda a: xg.count_nonzero(a, axis=1), xi),
        # (distinct values: which of two ties a chunked Dask argmax returns is its own choice)
        "argmax_none": (lambda a: xg.argmax(a), xd),
        "argmin_none_keep": (lambda a: xg.argmin(a, keepdims=True), xd),
        "argmax_axis": (lambda a: xg.argmax(a, axis=-1), xd),
        "cumsum_1d_none": (lambda a: xg.cumulative_sum(a, include_initial=True), x[:, 0]),
        "clip": (lambda a: xg.clip(a, -1, 2), xi),
        "where": (lambda a: xg.where(a > 0, a, 0), xi),
        # unbatched ends joined to a batched x (they get the batch axes)
        "diff_unbatched_ends": (lambda a: xg.diff(a, axis=1, n=2, prepend=pre, append=pre * -2), xi),
    }
    f, data = fns[name]
    got = _vmapped(backend, f, data)
    want = _loop(backend, f, data)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "full_like", "empty_like"])
def test_like_functions_inside_vmap(backend: Any, name: str) -> None:
    """``*_like`` of a batched value: the example's shape, the dtype asked for, one result per
    example (batched along the vmap), usable with the batched value itself."""
    x = RNG.normal(size=(3, 2, 4))

    def f(a: Any) -> Any:
        kw: dict[str, Any] = {"dtype": xg.float32}
        like = getattr(xg, name)
        y = like(a, 2.5, **kw) if name == "full_like" else like(a, **kw)
        assert y.shape == (2, 4)
        assert y.dtype == xg.float32
        return y if name == "empty_like" else xg.astype(y, xg.float64) + a

    out = _vmapped(backend, f, x)
    assert out.shape == (3, 2, 4)
    if name != "empty_like":
        fill = {"zeros_like": 0.0, "ones_like": 1.0, "full_like": 2.5}[name]
        np.testing.assert_allclose(out, x + fill)


def test_like_functions_of_unbatched_value_inside_nested_vmap(backend: Any) -> None:
    """A value mapped only by the outer vmap: zeros_like keeps it batched by that level only."""
    x = RNG.normal(size=(2, 3))
    y = RNG.normal(size=(4,))

    def inner(a: Any, b: Any) -> Any:
        return xg.zeros_like(a) + a * b

    out = to_numpy(xg.vmap(xg.vmap(inner, in_axes=(None, 0)), in_axes=(0, None))(backend.asarray(x), backend.asarray(y)))
    np.testing.assert_allclose(out, x[:, None, :] * y[None, :, None])


def test_batched_fill_value_raises(backend: Any) -> None:
    """A per-example fill value is not a scalar: full/full_like say so (naming the function)."""
    x = backend.asarray(RNG.normal(size=(3, 2)))
    with pytest.raises(XpgradTypeError, match="full_like: fill_value is batched"):
        xg.vmap(lambda a: xg.full_like(a, a[0]))(x)
    with pytest.raises(XpgradTypeError, match="full: fill_value is batched"):
        xg.vmap(lambda a: xg.full((2,), a[0]))(x)


def test_asarray_of_batched_value(backend: Any) -> None:
    """asarray of a batched value returns it (no copy asked); a cast or copy acts per example
    and keeps the gradient; copy=False with a cast and requires_grad=True raise; a list of
    batched values is stacked."""
    x = RNG.normal(size=(3, 2))

    def same(a: Any) -> Any:
        assert xg.asarray(a) is a
        return xg.asarray(a) * 2.0

    np.testing.assert_allclose(_vmapped(backend, same, x), x * 2.0)

    def cast(a: Any) -> Any:
        c = xg.asarray(a, dtype=xg.complex128)
        assert c.dtype == xg.complex128
        return xg.real(xg.asarray(a, copy=True) * c)

    np.testing.assert_allclose(_vmapped(backend, cast, x), x**2)
    g = to_numpy(xg.vmap(xg.grad(lambda a: xg.sum(cast(a))))(backend.asarray(x)))
    np.testing.assert_allclose(g, 2 * x)

    with pytest.raises(XpgradValueError, match="copy=False"):
        xg.vmap(lambda a: xg.asarray(a, dtype=xg.float32, copy=False))(backend.asarray(x))
    with pytest.raises(XpgradTypeError, match="requires_grad"):
        xg.vmap(lambda a: xg.asarray(a, requires_grad=True))(backend.asarray(x))
    # a nested sequence of batched values is stacked per example (as jnp.asarray([x, x]) under vmap)
    np.testing.assert_array_equal(to_numpy(xg.vmap(lambda a: xg.asarray([a, a]))(backend.asarray(x))),
                                  np.stack([x, x], axis=1))


def test_from_dlpack_of_batched_value_raises(backend: Any) -> None:
    with pytest.raises(XpgradTypeError, match="from_dlpack: the value is batched"):
        xg.vmap(xg.from_dlpack)(backend.asarray(RNG.normal(size=(3, 2))))


def test_batched_repeats_raise(np_backend: Any) -> None:
    """repeat by a batched count array: the output length would differ per example."""
    x = np_backend.asarray(RNG.normal(size=(3, 2)))
    r = np_backend.asarray(np.array([[1, 2], [2, 1], [0, 3]]))
    with pytest.raises(XpgradValueError, match="repeat: cannot be used with repeats batched by vmap"):
        xg.vmap(lambda a, c: xg.repeat(a, c, axis=0))(x, r)
    with pytest.raises(XpgradValueError, match="repeat: cannot be used with repeats batched by vmap"):
        xg.vmap(lambda c: xg.repeat(xg.asarray(np.ones(2)), c), in_axes=0)(r)
    # unbatched counts (and an int) are fine
    out = to_numpy(xg.vmap(lambda a: xg.repeat(a, r[0], axis=0))(x))
    np.testing.assert_allclose(out, np.repeat(to_numpy(x), [1, 2], axis=1))
