"""The two recording paths (autograd._core): the fast one for one or two arguments
(``apply1``/``apply2`` -> ``_record12``) and the general one (``apply`` -> ``_record``) record
the same Node for the same call, field by field: what a node holds has one source of truth."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.autograd import _core
from xpgrad.autograd._core import PRIMITIVES, apply, apply1, apply2

FIELDS = ("prim", "xp", "kw", "parents", "pidx", "saved", "arrays", "n_out", "ans", "checks", "hooks", "freed", "fw")


def _general(prim: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``apply`` forced down the general path (as a primitive that is not ``fast`` goes)."""
    prim.fast = False
    try:
        return apply(prim, args, kw)
    finally:
        prim.fast = True


def _fields(node: Any) -> dict[str, Any]:
    out = {}
    for f in FIELDS:
        v = getattr(node, f)
        if f in ("parents", "pidx", "saved"):
            v = list(v)
        if f == "arrays":
            v = int(v)
        out[f] = v
    return out


def _same_node(a: Any, b: Any) -> None:
    fa, fb = _fields(a), _fields(b)
    for f in FIELDS:
        va, vb = fa[f], fb[f]
        if f in ("saved", "parents"):  # the very objects: data, ArgMeta, leaf Tensors, Nodes
            assert len(va) == len(vb) and all(x is y for x, y in zip(va, vb)), (f, va, vb)
        elif f == "checks":  # (position, version box, version): the same boxes
            assert len(va) == len(vb) and all(x is y or x == y for x, y in zip(va, vb)), (f, va, vb)
        elif f == "ans":
            assert (va is None) == (vb is None), f
        else:
            assert va == vb, (f, va, vb)
    assert a.seq != b.seq and not hasattr(a, "stack") and not hasattr(b, "stack")


def _leaf(values: list[float]) -> Any:
    return xg.asarray(np.asarray(values), requires_grad=True)


@pytest.mark.parametrize("name", ["tanh", "exp", "sin", "negative", "abs", "square", "log"])
def test_one_argument(name: str) -> None:
    prim = PRIMITIVES[name]
    assert prim.fast
    w = _leaf([0.5, 1.5])
    inner = w * 2.0  # a non-leaf parent
    for x in (w, inner):
        fast, gen = apply1(prim, x, {}), _general(prim, (x,), {})
        _same_node(fast._node, gen._node)
        np.testing.assert_array_equal(fast.data, gen.data)


def test_one_argument_with_keywords() -> None:
    prim = PRIMITIVES["sum"]
    w = _leaf([[1.0, 2.0], [3.0, 4.0]])
    kw = {"axis": 0, "keepdims": True, "dtype": None}
    _same_node(apply1(prim, w, kw)._node, _general(prim, (w,), kw)._node)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "pow", "maximum", "atan2", "matmul"])
def test_two_arguments(name: str) -> None:
    prim = PRIMITIVES[name]
    assert prim.fast
    a, b = _leaf([0.5, 1.5]), _leaf([2.0, 3.0])
    const = xg.asarray(np.asarray([4.0, 5.0]))  # a Tensor that requires no grad
    raw = np.asarray([0.25, 0.75])  # a backend array
    inner = a * b
    cases = [(a, b), (a, const), (const, b), (a, raw), (raw, b), (inner, a)]
    if name != "matmul":
        cases += [(a, 2.0), (3.0, b)]  # Python scalars
    for x, y in cases:
        fast, gen = apply2(prim, x, y, {}), _general(prim, (x, y), {})
        _same_node(fast._node, gen._node)
        np.testing.assert_array_equal(fast.data, gen.data)


def test_multi_output_parent_index() -> None:
    # an argument that is output 1 of a multi-output node: both paths keep its index
    w = _leaf([[2.0, 1.0], [1.0, 3.0]])
    _, vecs = xg.linalg.eigh(w)
    assert vecs._oidx == 1
    prim = PRIMITIVES["tanh"]
    fast, gen = apply1(prim, vecs, {}), _general(prim, (vecs,), {})
    assert list(fast._node.pidx) == [1]
    _same_node(fast._node, gen._node)


def test_the_gradients_agree() -> None:
    # the end-to-end consequence: a backward pass through either path gives the same gradient
    def f(x: Any) -> Any:
        return xg.sum(xg.tanh(x * x) / (x + 1.0))

    x = np.linspace(0.1, 1.0, 5)
    g_fast = xg.grad(f)(x)
    for name in ("tanh", "multiply", "divide", "add"):
        PRIMITIVES[name].fast = False
    try:
        g_general = xg.grad(f)(x)
    finally:
        for name in ("tanh", "multiply", "divide", "add"):
            PRIMITIVES[name].fast = True
    np.testing.assert_array_equal(g_fast, g_general)


def test_a_missing_rule_is_refused_on_both_paths() -> None:
    prim = _core.Primitive("no_rule_for_b", lambda xp, a, b: a * b, save=(0, 1))
    prim.defvjp(lambda xp, g, ans, a, b: g * b, None)
    a, b = _leaf([1.0]), _leaf([2.0])
    with pytest.raises(xg.NonDifferentiableError, match="argument 1"):
        apply2(prim, a, b, {})
    with pytest.raises(xg.NonDifferentiableError, match="argument 1"):
        _general(prim, (a, b), {})
    assert apply2(prim, a, b.detach(), {})._node is not None  # a constant there is fine
