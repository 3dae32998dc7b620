"""A gradient hook's result must have the gradient's shape, dtype, library and device.

PyTorch raises "hook has changed the size/type of value"; xpgrad raises XpgradValueError
(shape), XpgradTypeError (dtype, or not an array), NamespaceMismatchError (another array
library) and DeviceMismatchError (device), naming the hook and the expected and given
values. Before, a leaf hook returning ``g.sum()`` made ``x.grad`` 0-d and an optimizer then
moved every element by the sum.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import DeviceMismatchError, NamespaceMismatchError, XpgradTypeError, XpgradValueError

from ._util import to_numpy

X0 = np.arange(1.0, 7.0).reshape(2, 3)


def _leaf(x: Any, hook: Callable[..., Any]) -> Any:
    x.register_hook(hook)
    return x


# each kind: (register the hook, run a backward pass) -> the gradient of x that came out
def _kind_leaf(x: Any, hook: Any) -> Any:
    _leaf(x, hook)
    xg.sum(x * 2.0).backward()
    return x.grad


def _kind_nonleaf(x: Any, hook: Any) -> Any:
    y = x * 2.0
    y.register_hook(hook)
    xg.sum(y * 3.0).backward()
    return x.grad


def _kind_leaf_create_graph(x: Any, hook: Any) -> Any:
    _leaf(x, hook)
    xg.sum(x * x).backward(create_graph=True)
    return x.grad


def _kind_nonleaf_create_graph(x: Any, hook: Any) -> Any:
    y = x * x
    y.register_hook(hook)
    xg.sum(y * 3.0).backward(create_graph=True)
    return x.grad


def _kind_leaf_autograd_grad(x: Any, hook: Any) -> Any:
    _leaf(x, hook)
    return xg.autograd.grad(xg.sum(x * 2.0), x)[0]


def _kind_leaf_backward_inputs(x: Any, hook: Any) -> Any:
    _leaf(x, hook)
    xg.sum(x * 2.0).backward(inputs=[x])
    return x.grad


def _kind_multi_output(x: Any, hook: Any) -> Any:
    a, b = xg.unstack(x)  # one node, two outputs: the hook is on output 0
    a.register_hook(hook)
    xg.sum(a * 2.0 + b).backward()
    return x.grad


KINDS = {
    "leaf": (_kind_leaf, np.full((2, 3), 2.0)),
    "nonleaf": (_kind_nonleaf, np.full((2, 3), 6.0)),
    "leaf_create_graph": (_kind_leaf_create_graph, 2 * X0),
    "nonleaf_create_graph": (_kind_nonleaf_create_graph, 6 * X0),
    "leaf_autograd_grad": (_kind_leaf_autograd_grad, np.full((2, 3), 2.0)),
    "leaf_backward_inputs": (_kind_leaf_backward_inputs, np.full((2, 3), 2.0)),
    "multi_output": (_kind_multi_output, None),
}


def _input(backend: Any, kind: str) -> tuple[Any, Any]:
    if kind == "multi_output":
        x = xg.asarray(backend.asarray(X0), requires_grad=True)
        return x, np.array([[2.0] * 3, [1.0] * 3])
    return xg.asarray(backend.asarray(X0), requires_grad=True), KINDS[kind][1]


@pytest.mark.parametrize("kind", list(KINDS))
def test_right_hook_scales(kind: str, backend: Any) -> None:
    run = KINDS[kind][0]
    x, plain = _input(backend, kind)
    seen: list[tuple[int, ...]] = []

    def hook(g: Any) -> Any:
        seen.append(tuple(g.shape))
        return g * 10.0

    g = run(x, hook)
    expected = plain.copy()
    if kind == "multi_output":
        expected[0] *= 10.0
    else:
        expected = expected * 10.0
    np.testing.assert_allclose(to_numpy(g), expected)
    assert seen == ([(3,)] if kind == "multi_output" else [(2, 3)])


@pytest.mark.parametrize("kind", list(KINDS))
def test_none_hook_leaves_gradient(kind: str, backend: Any) -> None:
    run = KINDS[kind][0]
    x, plain = _input(backend, kind)
    np.testing.assert_allclose(to_numpy(run(x, lambda g: None)), plain)


@pytest.mark.parametrize("kind", list(KINDS))
def test_wrong_shape_raises(kind: str, backend: Any) -> None:
    run = KINDS[kind][0]
    x, _ = _input(backend, kind)
    want = r"\(3,\)" if kind == "multi_output" else r"\(2, 3\)"

    def summing_hook(g: Any) -> Any:
        return xg.sum(g)

    with pytest.raises(XpgradValueError, match=rf"tensor hook .*summing_hook has changed the size of value: expected shape {want}, got \(\)"):
        run(x, summing_hook)
    assert x.grad is None  # nothing was accumulated


@pytest.mark.parametrize("kind", list(KINDS))
def test_wrong_dtype_raises(kind: str, backend: Any) -> None:
    run = KINDS[kind][0]
    x, _ = _input(backend, kind)

    def to_float32(g: Any) -> Any:
        return xg.astype(g, xg.float32)

    with pytest.raises(XpgradTypeError, match=r"tensor hook .*to_float32 has changed the type of value: expected dtype float64, got float32"):
        run(x, to_float32)


@pytest.mark.parametrize("kind", list(KINDS))
def test_not_an_array_raises(kind: str, np_backend: Any) -> None:
    run = KINDS[kind][0]
    x, _ = _input(np_backend, kind)
    with pytest.raises(XpgradTypeError, match=r"tensor hook .*<lambda> returned float; a hook must return None or a Tensor"):
        run(x, lambda g: 1.0)


@pytest.mark.parametrize("kind", list(KINDS))
def test_wrong_device_raises(kind: str) -> None:
    strict = pytest.importorskip("array_api_strict")
    run = KINDS[kind][0]
    dev1 = strict.Device("device1")
    x = xg.asarray(strict.asarray(X0, device=dev1), requires_grad=True)

    def to_cpu(g: Any) -> Any:
        return g.to_device(strict.Device("CPU_DEVICE"))

    with pytest.raises(DeviceMismatchError, match=r"tensor hook .*to_cpu has changed the device of value: expected device device1, got CPU_DEVICE"):
        run(x, to_cpu)


def test_other_library_raises() -> None:
    torch = pytest.importorskip("torch")
    x = xg.asarray(torch.tensor(X0), requires_grad=True)
    x.register_hook(lambda g: np.ones((2, 3)))
    with pytest.raises(NamespaceMismatchError, match=r"tensor hook .*<lambda>: arrays from different libraries"):
        xg.sum(x * 2.0).backward()


def test_hook_on_second_order_gradient() -> None:
    # create_graph: the hook sees (and may replace) a Tensor on the tape; its result is checked too
    x = xg.asarray(X0, requires_grad=True)
    (g,) = xg.autograd.grad(xg.sum(x ** 3), x, create_graph=True)
    x.register_hook(lambda h: h * 0.5)
    xg.sum(g).backward()
    np.testing.assert_allclose(to_numpy(x.grad), 0.5 * 6 * X0)
    x.grad = None
    (g,) = xg.autograd.grad(xg.sum(x ** 3), x, create_graph=True)
    x._hooks = None
    x.register_hook(lambda h: xg.sum(h))
    with pytest.raises(XpgradValueError, match="has changed the size of value"):
        xg.sum(g).backward()


def test_issue_example_sum_hook_cannot_reach_the_optimizer() -> None:
    w = xg.asarray(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    w.register_hook(lambda g: g.sum())
    opt = xg.optim.SGD([w], lr=0.1)
    with pytest.raises(XpgradValueError, match=r"expected shape \(3,\), got \(\)"):
        xg.sum(w * w).backward()
    assert w.grad is None
    opt.step()  # no gradient: nothing moves
    np.testing.assert_allclose(to_numpy(w), [1.0, 2.0, 3.0])


def test_scaling_hook_100_sgd_steps_match_torch(backend: Any) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.normal(size=(8, 3))
    y = rng.normal(size=8)
    w0 = rng.normal(size=3)

    w = xg.asarray(backend.asarray(w0), requires_grad=True)
    w.register_hook(lambda g: g * 0.5)
    av, yv = backend.asarray(a), backend.asarray(y)
    opt = xg.optim.SGD([w], lr=0.05, momentum=0.9)
    for _ in range(100):
        opt.zero_grad()
        h = xg.matmul(av, w) - yv
        t = h * h
        t.register_hook(lambda g: g * 2.0)  # a non-leaf hook too
        xg.mean(t).backward()
        opt.step()

    wt = torch.tensor(w0, requires_grad=True)
    wt.register_hook(lambda g: g * 0.5)
    at, ytt = torch.tensor(a), torch.tensor(y)
    topt = torch.optim.SGD([wt], lr=0.05, momentum=0.9)
    for _ in range(100):
        topt.zero_grad()
        tt = (at @ wt - ytt) ** 2
        tt.register_hook(lambda g: g * 2.0)
        tt.mean().backward()
        topt.step()
    np.testing.assert_allclose(to_numpy(w), wt.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert not np.allclose(w0, wt.detach().numpy())  # it moved
