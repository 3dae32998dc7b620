"""Indexing specifics the rule table does not pin down.

Repeated indices add up (``array_api_extra.at(...).add`` would drop them on
NumPy), the segment sum keeps large and non-finite gradients in their own bins,
repeated assignment keeps the last write, and xpgrad's fallbacks run keys that a
backend's own indexing refuses (negative steps on PyTorch, integer-array
assignment on array-api-strict, None in assignments).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.ops.indexing import gather, scatter_add, source_index


def _leaf(backend: Any, values: Any) -> xg.Tensor:
    return xg.asarray(backend.asarray(np.asarray(values, dtype=np.float64)), requires_grad=True)


def _np(backend: Any, t: Any) -> np.ndarray:
    return backend.to_numpy(t)


def test_repeated_indices_add_up(backend: Any) -> None:
    x = _leaf(backend, [0.0, 0.0, 0.0, 0.0])
    idx = backend.asarray(np.array([0, 0, 2, 0, -1]))
    x[idx].sum().backward()
    np.testing.assert_array_equal(_np(backend, x.grad), [3.0, 0.0, 1.0, 1.0])


def test_take_and_take_along_axis_repeated_indices(backend: Any) -> None:
    x = _leaf(backend, np.arange(6.0).reshape(2, 3))
    g = xg.grad(lambda a: xg.sum(xg.take(a, backend.asarray(np.array([2, 2, 0])), axis=1)))(x.data)
    np.testing.assert_array_equal(_np(backend, g), [[1.0, 0.0, 2.0], [1.0, 0.0, 2.0]])
    idx = backend.asarray(np.array([[1, 1, 1, 0], [2, 0, 2, 2]]))
    g = xg.grad(lambda a: xg.sum(xg.take_along_axis(a, idx, axis=1)))(x.data)
    np.testing.assert_array_equal(_np(backend, g), [[1.0, 3.0, 0.0], [1.0, 0.0, 3.0]])


def test_segment_sum_keeps_each_bin_exact_and_non_finite_values_local(np_backend: Any) -> None:
    # a huge gradient in one bin must not swamp the others (no differences of a running sum)
    idx = np.array([3, 0, 3, 1, 0, 2, 3])
    g = np.array([1e-9, 1e12, 2e-9, 5e-7, -1e12, np.inf, 3e-9])
    out = scatter_add(np_backend.xp, g, idx, (5,))
    np.testing.assert_array_equal(out[[1, 3, 4]], [5e-7, 6e-9, 0.0])
    assert out[0] == 0.0 and out[2] == np.inf
    g2 = g.copy()
    g2[5] = np.nan
    out2 = scatter_add(np_backend.xp, g2, idx, (5,))
    assert np.isnan(out2[2]) and np.isfinite(np.delete(out2, 2)).all()


def test_scatter_add_gather_helpers_in_both_modes(np_backend: Any) -> None:
    ids = source_index(np.zeros(1), (2, 3), lambda bxp, pos: pos[:, [2, 2, 0]])
    np.testing.assert_array_equal(ids, [[2, 2, 0], [5, 5, 3]])
    v = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(scatter_add(np_backend.xp, v, ids, (2, 3)), [[2.0, 0.0, 1.0], [5.0, 0.0, 7.0]])
    np.testing.assert_array_equal(gather(np_backend.xp, v, ids), [[2.0, 2.0, 0.0], [5.0, 5.0, 3.0]])
    # on Tensors they record, and the second derivative goes through the gather/scatter pair
    t = xg.asarray(v, requires_grad=True)
    (gt,) = xg.autograd.grad(xg.sum(scatter_add(xg, t * t, ids, (2, 3)) ** 2), t, create_graph=True)
    (ggt,) = xg.autograd.grad(xg.sum(gt), t)
    s = np.zeros(6)
    np.add.at(s, ids.ravel(), (v * v).ravel())
    want_g = 4 * v * s[ids]  # d/dv sum(S(v^2)^2) = 2 S(v^2)[ids] * 2v
    np.testing.assert_allclose(gt.detach().numpy(), want_g)
    assert ggt.shape == (2, 3)


def test_repeated_assignment_keeps_the_last_write(backend: Any) -> None:
    x = _leaf(backend, [1.0, 2.0, 3.0, 4.0])
    v = _leaf(backend, [10.0, 20.0, 30.0, 40.0])
    idx = backend.asarray(np.array([2, 0, 2, -2]))  # position 2 written three times
    y = x * 1
    y[idx] = v
    np.testing.assert_array_equal(_np(backend, y.detach()), [20.0, 2.0, 40.0, 4.0])
    (y * xg.asarray(backend.asarray(np.array([1.0, 2.0, 3.0, 4.0])))).sum().backward()
    np.testing.assert_array_equal(_np(backend, x.grad), [0.0, 2.0, 0.0, 4.0])
    np.testing.assert_array_equal(_np(backend, v.grad), [0.0, 1.0, 0.0, 3.0])  # overwritten writes get none


def test_negative_steps_on_every_backend(backend: Any) -> None:
    base = np.arange(12.0).reshape(3, 4)
    x = _leaf(backend, base)
    y = x[::-1, 3:0:-2]
    np.testing.assert_array_equal(_np(backend, y.detach()), base[::-1, 3:0:-2])
    w = np.arange(1.0, 7.0).reshape(3, 2)
    (y * xg.asarray(backend.asarray(w))).sum().backward()
    want = np.zeros((3, 4))
    want[::-1, 3:0:-2] = w
    np.testing.assert_array_equal(_np(backend, x.grad), want)
    z = x * 1
    z[2:0:-1, ::-3] = xg.asarray(backend.asarray(np.array([[1.0, 2.0], [3.0, 4.0]])))
    ref = base.copy()
    ref[2:0:-1, ::-3] = [[1.0, 2.0], [3.0, 4.0]]
    np.testing.assert_array_equal(_np(backend, z.detach()), ref)


def test_none_in_an_assignment_key(backend: Any) -> None:
    x = _leaf(backend, np.zeros((2, 3)))
    v = _leaf(backend, [[1.0, 2.0, 3.0]])
    y = x * 1
    y[None, 1, ...] = v  # beyond the standard's __setitem__, accepted as NumPy does
    np.testing.assert_array_equal(_np(backend, y.detach()), [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
    y.sum().backward()
    np.testing.assert_array_equal(_np(backend, v.grad), [[1.0, 1.0, 1.0]])


def test_integer_array_assignment_without_backend_support(backend: Any) -> None:
    # array-api-strict has no integer-array __setitem__; xpgrad's functional update runs anyway
    t = xg.asarray(backend.asarray(np.zeros(4)))
    with xg.no_grad():
        t[backend.asarray(np.array([1, 3, 1]))] = xg.asarray(backend.asarray(np.array([5.0, 6.0, 7.0])))
    np.testing.assert_array_equal(_np(backend, t), [0.0, 7.0, 0.0, 6.0])
    assert t._version[0] == 1


def test_boolean_mask_with_a_row_value(backend: Any) -> None:
    x = _leaf(backend, np.zeros((3, 2)))
    v = _leaf(backend, [1.0, 2.0])
    y = x * 1
    y[backend.asarray(np.array([True, False, True]))] = v  # one value for every selected row: a where
    np.testing.assert_array_equal(_np(backend, y.detach()), [[1.0, 2.0], [0.0, 0.0], [1.0, 2.0]])
    y.sum().backward()
    np.testing.assert_array_equal(_np(backend, v.grad), [2.0, 2.0])
    np.testing.assert_array_equal(_np(backend, x.grad), [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])


def test_boolean_mask_gradient_on_unknown_sizes_raises() -> None:
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.arange(6.0), chunks=3)
    mask = x > 2.0
    with pytest.raises(ValueError, match=r"nan|unknown"):
        xg.grad(lambda a: xg.sum(a[mask] ** 2))(x)


def test_take_needs_an_axis_for_nd_input() -> None:
    with pytest.raises(xg.XpgradValueError, match="take: axis is required"):
        xg.take(xg.asarray(np.zeros((2, 2))), xg.asarray(np.array([0])))
