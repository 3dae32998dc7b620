"""The two walks of the backward engine agree bit for bit.

``_walk_plain`` (first order: buffers owned, donated and summed into in place) and
``_walk_checked`` (the walk of ``create_graph`` and anomaly detection) do the same steps
through different code. Each graph below is differentiated twice, once per walk (the
checked one forced by a pass that does not track ownership), and the gradients must be
the same arrays, bit for bit.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.autograd import _engine


class _UntrackedPass(_engine._Pass):
    """A first-order pass that owns nothing: `_pass` walks it with `_walk_checked`."""

    __slots__ = ()

    def __init__(self, create_graph: bool, retain_graph: bool, check_nan: bool) -> None:
        super().__init__(create_graph, retain_graph, check_nan)
        self.track = False
        self.add = operator.add


def _leaf(backend: Any, values: Any) -> Any:
    return xg.asarray(backend.asarray(np.asarray(values, dtype=np.float64)), requires_grad=True)


# Each graph: (leaf values) -> the gradients it computes (a list of Tensors or None).
def _fan_out(backend: Any) -> list[Any]:
    x = _leaf(backend, [0.5, -1.0, 2.0])
    y = x * x + xg.sin(x) * x  # x read by four nodes
    z = y * y + y  # y read twice
    z = xg.sin(xg.sin(xg.exp(z) * z))  # an owned gradient reaching a node of two parents: not donated
    return list(xg.autograd.grad(xg.sum(z), [x]))


def _unit_seed(backend: Any) -> list[Any]:
    x = _leaf(backend, [0.3, 0.7, -0.2, 1.5])
    w = _leaf(backend, [1.0, 2.0, 3.0, 4.0])
    xg.sum(xg.exp(xg.sin(x)) * x * w).backward()  # (the implicit seed: a unit, scale's borrowed values)
    return [x.grad, w.grad]


def _broadcast_and_kw(backend: Any) -> list[Any]:
    x = _leaf(backend, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = _leaf(backend, [0.5])
    y = xg.tanh(x * b + b)  # b broadcast: its gradient summed back
    s = xg.sum(y * y, axis=1)  # a rule with keyword parameters
    return list(xg.autograd.grad(xg.sum(xg.exp(s)), [x, b]))


def _in_place(backend: Any) -> list[Any]:
    x = _leaf(backend, [1.0, 2.0, 3.0])
    h = x * 2.0
    h += x  # recorded in-place updates: new versions of h
    h *= xg.cos(x)
    h[0] = x[1] * 3.0  # a recorded setitem
    v = h[1:]  # a view written into: carried back to h
    v *= 2.0
    return list(xg.autograd.grad(xg.sum(h * x), [x]))


def _retain_graph(backend: Any) -> list[Any]:
    x = _leaf(backend, [0.1, 0.2, 0.3])
    y = xg.sum(xg.exp(x) * xg.sin(x))
    (g1,) = xg.autograd.grad(y, [x], retain_graph=True)
    y.backward(retain_graph=True)
    y.backward()
    return [g1, x.grad]


def _create_graph(backend: Any) -> list[Any]:
    x = _leaf(backend, [0.4, -0.6, 1.1])
    (g,) = xg.autograd.grad(xg.sum(xg.tanh(x) * x * x), [x], create_graph=True)  # (the checked walk)
    (h,) = xg.autograd.grad(xg.sum(g * g), [x])  # first order over the recorded pass
    return [g.detach(), h]


def _hooks(backend: Any) -> list[Any]:
    x = _leaf(backend, [1.0, -2.0, 0.5])
    x.register_hook(lambda g: g * 0.5)
    y = xg.exp(x) * x
    y.register_hook(lambda g: g + 1.0)
    z = y * y
    z.register_hook(lambda g: None)
    xg.sum(z + y).backward()
    return [x.grad]


def _nondifferentiable(backend: Any) -> list[Any]:
    x = _leaf(backend, [3.0, -1.0, 2.5, 0.5])
    k = xg.argmax(x)  # an integer output: no node
    f = xg.floor(x)  # zero almost everywhere: a constant
    m = x > 1.0
    y = xg.where(m, x * f, xg.sin(x)) + x[k]
    return list(xg.autograd.grad(xg.sum(y), [x]))


def _several_outputs(backend: Any) -> list[Any]:
    x = _leaf(backend, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    a, b, c = xg.unstack(x)  # one node, three outputs
    y = a * b + xg.sin(b)  # c unused: a None entry of the node's gradients
    w = xg.stack([y, c * 0.0 + y])
    return list(xg.autograd.grad(xg.sum(w * w), [x]))


def _targets(backend: Any) -> list[Any]:
    x = _leaf(backend, [0.5, 1.5])
    u = _leaf(backend, [2.0, -1.0])
    h = xg.sin(x) * u  # an inner target: captured by the walk
    y = xg.sum(xg.exp(h) * h)
    return list(xg.autograd.grad(y, [h, x]))  # u not asked for: its branch pruned


GRAPHS: dict[str, Callable[[Any], list[Any]]] = {
    f.__name__.lstrip("_"): f
    for f in (_fan_out, _unit_seed, _broadcast_and_kw, _in_place, _retain_graph, _create_graph, _hooks,
              _nondifferentiable, _several_outputs, _targets)
}


def _numpy(backend: Any, grads: list[Any]) -> list[Any]:
    return [None if g is None else np.asarray(backend.to_numpy(g)) for g in grads]


@pytest.mark.parametrize("graph", GRAPHS)
def test_the_two_walks_give_the_same_gradients_bit_for_bit(backend: Any, graph: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    f = GRAPHS[graph]
    walks: list[str] = []
    plain, checked = _engine._walk_plain, _engine._walk_checked

    def spy(walk: Callable[..., None], name: str) -> Callable[..., None]:
        def run(st: Any, order: Any) -> None:
            walks.append(name)
            walk(st, order)
        return run

    monkeypatch.setattr(_engine, "_walk_plain", spy(plain, "plain"))
    monkeypatch.setattr(_engine, "_walk_checked", spy(checked, "checked"))
    for _ in range(2):  # (twice: nothing a pass leaves behind changes the next)
        walks.clear()
        want = _numpy(backend, f(backend))
        assert "plain" in walks
        with monkeypatch.context() as m:
            m.setattr(_engine, "_Pass", _UntrackedPass)
            walks.clear()
            got = _numpy(backend, f(backend))
            assert "plain" not in walks and "checked" in walks
        assert len(got) == len(want)
        for w, g in zip(want, got):
            assert w is not None and g is not None
            assert w.dtype == g.dtype and w.shape == g.shape
            assert np.array_equal(w, g, equal_nan=True), (graph, w, g)
            assert w.tobytes() == g.tobytes()  # (bit for bit: -0.0 and NaN payloads too)
