"""What the rule-test table cannot express for the manipulation and linear algebra
functions: devices (``to_device`` across array-api-strict's fake devices), the
shape-only ``broadcast_shapes``, signatures, and gradients of unused outputs."""

from __future__ import annotations

import inspect
from typing import Any

import array_api_strict as xps
import numpy as np
import pytest

import xpgrad as xg
from xpgrad._spec import FUNCTIONS
from xpgrad.ops import linear_algebra, manipulation
from xpgrad.ops._registry import REGISTRY

from ._util import to_numpy

CPU = xps.Device("CPU_DEVICE")
DEV1 = xps.Device("device1")
DEV2 = xps.Device("device2")


def _host(t: xg.Tensor) -> np.ndarray:
    """The values of an array-api-strict Tensor on any of its devices."""
    return to_numpy(t)


def _of_the_standard(name: str) -> bool:
    """An entry's standard-or-extension fact; a hand-written function's name in the standard's list."""
    return REGISTRY[name].standard_name is not None if name in REGISTRY else name in FUNCTIONS


@pytest.mark.parametrize("name", [n for n in manipulation.__all__ + linear_algebra.__all__ if _of_the_standard(n)])
def test_signature_matches_the_standard(name: str) -> None:
    ours = inspect.signature(getattr(xg, name))
    theirs = inspect.signature(getattr(xps, name))
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()
    ]


# ---------------------------------------------------------------- to_device
@pytest.mark.parametrize(("src", "dst"), [(CPU, DEV1), (DEV1, DEV2), (DEV2, CPU), (DEV1, DEV1)])
def test_to_device_moves_forward_and_gradient_back(src: object, dst: object) -> None:
    x = xg.Tensor(xps.asarray([1.0, 2.0, 3.0], device=src), requires_grad=True)
    y = x.to_device(dst)
    assert y.device == dst
    assert y.grad_fn is not None and y.grad_fn.name() == "to_device"
    w = xg.Tensor(xps.asarray([1.0, -1.0, 2.0], device=dst))
    (y * y * w).sum().backward()
    assert x.grad is not None
    assert x.grad.device == src
    np.testing.assert_allclose(_host(x.grad), [2.0, -4.0, 12.0])


def test_to_device_second_order() -> None:
    x = xg.Tensor(xps.asarray([1.0, 2.0], device=CPU), requires_grad=True)
    y = x.to_device(DEV1)
    (g,) = xg.autograd.grad((y**3).sum(), x, create_graph=True)
    assert g.device == CPU
    (h,) = xg.autograd.grad(g.to_device(DEV2).sum(), x)
    assert h.device == CPU
    np.testing.assert_allclose(_host(h), [6.0, 12.0])


def test_to_device_accepts_device_strings() -> None:
    x = xg.asarray(np.array([1.0, 2.0]), requires_grad=True)
    y = x.to_device("cpu")
    (y * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_to_device_mixing_devices_is_an_error() -> None:
    a = xg.Tensor(xps.asarray([1.0], device=CPU), requires_grad=True)
    b = a.to_device(DEV1)
    with pytest.raises(xg.DeviceMismatchError):
        xg.concat([a, b])


# ---------------------------------------------------------------- broadcast_shapes
def test_broadcast_shapes() -> None:
    assert xg.broadcast_shapes() == ()
    assert xg.broadcast_shapes((3,)) == (3,)
    assert xg.broadcast_shapes((2, 1), (1, 3), ()) == (2, 3)
    assert xg.broadcast_shapes((1, 4), (5, 1, 1)) == (5, 1, 4)
    assert xg.broadcast_shapes((0, 1), (1, 3)) == (0, 3)
    assert xg.broadcast_shapes((None, 3), (2, 1)) == (None, 3)
    assert xg.broadcast_shapes((1, 3), (None, 1)) == (None, 3)
    with pytest.raises(xg.XpgradValueError, match="broadcast_shapes"):
        xg.broadcast_shapes((2,), (3,))


def test_broadcast_shapes_is_declared() -> None:
    from xpgrad.autograd._core import DECLARED

    assert "broadcast_shapes" in DECLARED


# ---------------------------------------------------------------- multi-output and variadic
def test_unstack_unused_outputs_get_zero_gradient() -> None:
    x = xg.asarray(np.arange(6.0).reshape(3, 2), requires_grad=True)
    parts = xg.unstack(x, axis=0)
    assert len(parts) == 3
    (parts[1] * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.0], [2.0, 2.0], [0.0, 0.0]])


def test_broadcast_arrays_unused_input_gets_no_gradient_materialized() -> None:
    a = xg.asarray(np.ones((2, 1)), requires_grad=True)
    b = xg.asarray(np.ones(3), requires_grad=True)
    ra, rb = xg.broadcast_arrays(a, b)
    assert ra.shape == rb.shape == (2, 3)
    (rb * 3.0).sum().backward()
    assert a.grad is None  # only a symbolic zero reached it
    np.testing.assert_array_equal(b.grad.numpy(), [6.0, 6.0, 6.0])


def test_concat_and_stack_take_tuples_and_lists() -> None:
    a = xg.asarray([1.0, 2.0], requires_grad=True)
    b = xg.asarray([3.0], requires_grad=True)
    out = xg.concat((a, b)) * xg.asarray([1.0, 2.0, 3.0])
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(b.grad.numpy(), [3.0])
    s = xg.stack([a, a], axis=1)
    assert s.shape == (2, 2)


def test_repeat_with_a_tensor_of_counts() -> None:
    x = xg.asarray([1.0, 2.0, 3.0], requires_grad=True)
    r = xg.asarray(np.array([2, 0, 3]))
    y = xg.repeat(x, r, axis=0)
    np.testing.assert_array_equal(y.detach().numpy(), [1.0, 1.0, 3.0, 3.0, 3.0])
    (y * xg.asarray([1.0, 2.0, 3.0, 4.0, 5.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 0.0, 12.0])


def test_repeat_counts_have_no_rule() -> None:
    from xpgrad.autograd._core import PRIMITIVES

    assert PRIMITIVES["repeat"].vjp_rule(0) is not None
    assert PRIMITIVES["repeat"].vjp_rule(1) is None  # integer counts


# ---------------------------------------------------------------- views and Tensor methods
def test_view_outputs_share_the_version_counter() -> None:
    x = xg.asarray(np.zeros((2, 3)))
    for y in (
        xg.reshape(x, (3, 2)),
        xg.permute_dims(x, (1, 0)),
        xg.expand_dims(x, axis=0),
        xg.matrix_transpose(x),
        x.mT,
        x.T,
        xg.moveaxis(x, 0, 1),
        xg.broadcast_to(x, (4, 2, 3)),
    ):
        assert y._version is x._version


def test_tensor_methods_reach_the_primitives() -> None:
    a = xg.asarray(np.arange(6.0).reshape(2, 3), requires_grad=True)
    b = xg.asarray(np.arange(3.0), requires_grad=True)
    ((a @ b).sum() + a.mT.sum() + a.T.sum() + a.reshape(3, 2).sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), np.broadcast_to(np.arange(3.0), (2, 3)) + 3.0)
    np.testing.assert_allclose(b.grad.numpy(), [3.0, 5.0, 7.0])


def test_vecdot_conjugates_the_first_argument() -> None:
    x1 = np.array([1 + 2j, 3 - 1j])
    x2 = np.array([2 - 1j, 1j])
    out = xg.vecdot(xg.asarray(x1), xg.asarray(x2))
    np.testing.assert_allclose(out.numpy(), np.sum(np.conj(x1) * x2))


@pytest.mark.parametrize(("what", "fn"), [
    ("repeat 0, axis 0", lambda x: xg.repeat(x, 0, axis=0)),
    ("repeat 0, axis 1", lambda x: xg.repeat(x, 0, axis=1)),
    ("repeat 0, flat", lambda x: xg.repeat(x, 0)),
    ("tile (0, 2)", lambda x: xg.tile(x, (0, 2))),
    ("tile (1, 0)", lambda x: xg.tile(x, (1, 0))),
])
def test_no_copies_give_a_zero_gradient(what: str, fn: Any, backend: Any) -> None:
    """Zero repetitions: an empty result, and a gradient of zeros (Dask could not reshape the
    empty cotangent into the copies' split; found by tests/test_jit_ops.py's thorough run)."""
    x = backend.asarray(np.arange(6.0).reshape(2, 3))
    g = xg.grad(lambda x: xg.sum(fn(x)))(x)
    got = backend.to_numpy(g)
    assert got.shape == (2, 3) and got.dtype == np.float64, what
    np.testing.assert_array_equal(got, np.zeros((2, 3)), err_msg=what)
