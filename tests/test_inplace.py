"""In-place semantics of Tensors: ``t[k] = v`` and ``t += v``.

While recording, an in-place update of a tensor in a graph is recorded as the
functional update (the tensor is rebound to the result), so gradients stay
right; a leaf that requires grad refuses it. Outside recording the backend
array is mutated where the backend allows it and the version counter is bumped,
so a value saved for backward and changed afterwards is detected.
"""

from __future__ import annotations

from typing import Any

import array_api_extra as xpx
import numpy as np
import pytest

import xpgrad as xg


def _leaf(backend: Any, values: Any) -> xg.Tensor:
    return xg.asarray(backend.asarray(np.asarray(values, dtype=np.float64)), requires_grad=True)


def _np(backend: Any, t: Any) -> np.ndarray:
    return backend.to_numpy(t)


def _keys(backend: Any) -> list[tuple[str, Any, np.ndarray]]:
    """(label, backend key, written positions as a NumPy mask) for a length-5 vector."""
    out = [
        ("int", 1, np.eye(5, dtype=bool)[1]),
        ("slice", slice(1, 4, 2), np.isin(np.arange(5), [1, 3])),
        ("int array", backend.asarray(np.array([4, 0])), np.isin(np.arange(5), [0, 4])),
    ]
    mask = np.array([True, False, False, True, True])
    out.append(("bool mask", backend.asarray(mask), mask))
    return out


# ---------------------------------------------------------------- recorded (functional) updates
@pytest.mark.parametrize("which", ["int", "slice", "int array", "bool mask"])
def test_setitem_in_a_graph_records_functionally(backend: Any, which: str) -> None:
    label, key, written = next(k for k in _keys(backend) if k[0] == which)
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    x = _leaf(backend, [0.5, 1.5, 2.5, 3.5, 4.5])
    v = _leaf(backend, 7.0)
    y = x * 2
    node_before = y.grad_fn
    y[key] = v
    assert y.grad_fn is not node_before and y.grad_fn.name() == "setitem"
    expected = np.where(written, 7.0, np.array([1.0, 3.0, 5.0, 7.0, 9.0]))
    np.testing.assert_allclose(_np(backend, y.detach()), expected)
    (y * xg.asarray(backend.asarray(w))).sum().backward()
    np.testing.assert_allclose(_np(backend, x.grad), np.where(written, 0.0, 2 * w), err_msg=label)
    np.testing.assert_allclose(_np(backend, v.grad), w[written].sum(), err_msg=label)


def test_setitem_into_a_constant_with_a_grad_value(backend: Any) -> None:
    t = xg.asarray(backend.asarray(np.zeros(3)))
    v = _leaf(backend, [2.0, 3.0])
    t[0:2] = v * v
    assert t.requires_grad and not t.is_leaf
    t.sum().backward()
    np.testing.assert_allclose(_np(backend, v.grad), [4.0, 6.0])


def test_inplace_arithmetic_in_a_graph(backend: Any) -> None:
    x = _leaf(backend, [1.0, 2.0, 3.0])
    v = _leaf(backend, 0.5)
    y = x * 1
    y += v
    y *= x
    y -= 1.0
    y /= 2.0
    # y = (x + v) * x / 2 - 1/2
    np.testing.assert_allclose(_np(backend, y.detach()), ((np.array([1.0, 2, 3]) + 0.5) * [1, 2, 3] - 1) / 2)
    y.sum().backward()
    np.testing.assert_allclose(_np(backend, x.grad), (2 * np.array([1.0, 2, 3]) + 0.5) / 2)
    np.testing.assert_allclose(_np(backend, v.grad), 3.0)


def test_values_saved_before_a_recorded_update_keep_their_gradient(backend: Any) -> None:
    x = _leaf(backend, [0.3, 0.7])
    y = x * 1
    z = xg.sin(y)  # saves y
    y[0] = 5.0  # recorded: y is rebound, the saved value is untouched
    (z.sum() + y.sum()).backward()
    np.testing.assert_allclose(_np(backend, x.grad), np.cos([0.3, 0.7]) + np.array([0.0, 1.0]))


def test_leaf_requiring_grad_refuses_inplace_while_recording(backend: Any) -> None:
    x = _leaf(backend, [1.0, 2.0])
    with pytest.raises(xg.InPlaceModificationError, match=r"__setitem__.*leaf"):
        x[0] = 3.0
    with pytest.raises(xg.InPlaceModificationError, match=r"__iadd__.*leaf"):
        x += 1.0
    np.testing.assert_array_equal(_np(backend, x.detach()), [1.0, 2.0])
    assert x._version[0] == 0


# ---------------------------------------------------------------- updates outside recording
def test_no_grad_mutates_the_numpy_array_in_place() -> None:
    data = np.array([1.0, 2.0, 3.0])
    x = xg.asarray(data, requires_grad=True)
    with xg.no_grad():
        x[0] = 10.0
        x += 1.0
    assert x.data is data and x.is_leaf and x.requires_grad
    np.testing.assert_array_equal(data, [11.0, 3.0, 4.0])
    assert x._version[0] == 2


def test_no_grad_updates_bump_the_version_on_every_backend(backend: Any) -> None:
    x = _leaf(backend, [1.0, 2.0, 3.0, 4.0])
    key = backend.asarray(np.array([3, 1]))
    with xg.no_grad():
        x[0] = 10.0
        x[key] = 0.0  # integer-array assignment: native, or the functional update
        x *= 2.0
    np.testing.assert_array_equal(_np(backend, x.detach()), [20.0, 0.0, 6.0, 0.0])
    assert x._version[0] == 3 and x.is_leaf


def test_immutable_backend_updates_functionally() -> None:
    jnp = pytest.importorskip("jax.numpy")
    x = xg.asarray(jnp.asarray([1.0, 2.0, 3.0]))
    before = x.data
    x[1] = 5.0
    x += 1.0
    assert x.data is not before
    np.testing.assert_array_equal(np.asarray(x.data), [2.0, 6.0, 4.0])
    np.testing.assert_array_equal(np.asarray(before), [1.0, 2.0, 3.0])
    assert x._version[0] == 2


@pytest.mark.parametrize("mutate", ["iadd", "setitem"])
def test_saved_input_changed_afterwards_fails_backward(backend: Any, mutate: str) -> None:
    x = _leaf(backend, [0.1, 0.2])
    y = xg.sin(x)  # saves its input
    with xg.no_grad():
        if mutate == "iadd":
            x += 1.0
        else:
            x[0] = 1.0
    with pytest.raises(xg.InPlaceModificationError, match=r"sin: argument 0.*modified in place"):
        y.sum().backward()


def test_saved_output_changed_afterwards_fails_backward(backend: Any) -> None:
    x = _leaf(backend, [0.1, 0.2])
    y = xg.exp(x)  # saves its output
    s = y.sum()
    with xg.no_grad():
        y[1] = 0.0
    with pytest.raises(xg.InPlaceModificationError, match=r"exp: its output.*modified in place"):
        s.backward()


def test_updates_before_recording_are_fine(backend: Any) -> None:
    x = _leaf(backend, [0.1, 0.2])
    with xg.no_grad():
        x += 1.0
    y = xg.sin(x)  # saves the updated value and its version
    y.sum().backward()
    np.testing.assert_allclose(_np(backend, x.grad), np.cos([1.1, 1.2]))


def test_views_share_the_version_counter() -> None:
    base = xg.asarray(np.arange(4.0))
    view = base[0:2]
    assert view._version is base._version
    with xg.no_grad():
        view += 10.0
    np.testing.assert_array_equal(base.data, [10.0, 11.0, 2.0, 3.0])  # NumPy slices are views
    assert base._version[0] == 1


def test_inplace_through_a_view_is_detected_by_backward() -> None:
    x = xg.asarray(np.array([0.1, 0.2, 0.3]), requires_grad=True)
    y = xg.sin(x)
    with xg.no_grad():
        v = x[1:]
        v[0] = 5.0
    assert x.data[1] == 5.0
    with pytest.raises(xg.InPlaceModificationError, match="sin"):
        y.sum().backward()


# ---------------------------------------------------------------- array_api_extra.at on Tensors
@pytest.mark.parametrize("op", ["set", "add", "multiply"])
def test_array_api_extra_at_on_tensors(backend: Any, op: str) -> None:
    xv = np.array([1.0, 2.0, 3.0, 4.0])
    x = _leaf(backend, xv)
    v = _leaf(backend, [5.0, 7.0])
    idx = backend.asarray(np.array([3, 0]))
    y = x * 1  # a non-leaf: __setitem__ records the update
    z = getattr(xpx.at(y)[idx], op)(v)
    w = np.array([1.0, 10.0, 100.0, 1000.0])
    (z * xg.asarray(backend.asarray(w))).sum().backward()
    hit = np.array([True, False, False, True])
    vals = np.zeros(4)
    vals[[3, 0]] = [5.0, 7.0]
    if op == "set":
        want_z, gx, gv = np.where(hit, vals, xv), np.where(hit, 0.0, w), w[[3, 0]]
    elif op == "add":
        want_z, gx, gv = xv + vals, w, w[[3, 0]]
    else:
        want_z, gx, gv = np.where(hit, xv * vals, xv), np.where(hit, vals, 1.0) * w, (xv * w)[[3, 0]]
    np.testing.assert_allclose(_np(backend, z.detach()), want_z)
    np.testing.assert_allclose(_np(backend, x.grad), gx)
    np.testing.assert_allclose(_np(backend, v.grad), gv)


def test_array_api_extra_at_copy_on_a_leaf(backend: Any) -> None:
    x = _leaf(backend, [1.0, 2.0, 3.0])
    z = xpx.at(x, slice(0, 2)).set(0.0, copy=True)
    (z * z).sum().backward()
    np.testing.assert_allclose(_np(backend, x.grad), [0.0, 0.0, 6.0])
    np.testing.assert_array_equal(_np(backend, x.detach()), [1.0, 2.0, 3.0])


def test_array_api_extra_at_in_place_on_a_leaf_is_refused() -> None:
    x = xg.asarray(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(xg.InPlaceModificationError, match="__setitem__"):
        xpx.at(x, 0).set(0.0, copy=False)
