"""One path for an opaque call: custom rules, checkpoint and jit record through ``record_opaque``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad._exceptions import XpgradTypeError
from xpgrad.autograd._core import _opaque_forward, record_opaque


class _Square:
    """A call that already ran (``x * x``): its cotangents, computed when backward asks."""

    def __init__(self) -> None:
        self.asked = 0

    def cotangents(self, xp: Any, g: Any, datas: tuple[Any, ...]) -> list[Any]:
        self.asked += 1
        return [2 * datas[0] * g, None]


def _rule(xp: Any, g: Any, ans: Any, i: int, *args: Any) -> Any:
    return args[-1].cotangents(xp, g, args[:-1])[i]


def test_record_opaque_records_one_node_with_the_given_rule(backend: Any) -> None:
    for k in range(3):  # (a fresh node each call: nothing kept between them)
        x = xg.asarray(backend.asarray(np.array([1.0, 2.0, 3.0 + k])), requires_grad=True)
        c = xg.asarray(backend.asarray(np.array([5.0, 6.0, 7.0])))
        call = _Square()
        (y,) = record_opaque(f"square{k}", (x, c), [x.data * x.data], call, _rule, save=(0,))
        assert y.grad_fn is not None and y.grad_fn.name() == f"square{k}"
        assert y.grad_fn.prim.fwd is _opaque_forward
        xg.sum(y * 3.0).backward()
        np.testing.assert_allclose(np.asarray(backend.to_numpy(x.grad.data)), [6.0, 12.0, 6.0 * (3.0 + k)])
        assert call.asked == 1


def test_record_opaque_several_outputs(backend: Any) -> None:
    x = xg.asarray(backend.asarray(np.array([1.0, 2.0])), requires_grad=True)

    class Two:
        def cotangents(self, xp: Any, g: Any, datas: tuple[Any, ...]) -> list[Any]:
            g0, g1 = g
            return [(0 if g0 is None else g0) + (0 if g1 is None else 3 * g1)]

    outs = record_opaque("two", (x,), [x.data, 3 * x.data], Two(), _rule)
    assert len(outs) == 2 and outs[0].grad_fn is outs[1].grad_fn
    xg.sum(outs[0] + outs[1]).backward()
    np.testing.assert_allclose(np.asarray(backend.to_numpy(x.grad.data)), [4.0, 4.0])


def test_opaque_forward_is_never_run() -> None:
    with pytest.raises(XpgradTypeError, match="record_opaque"):
        _opaque_forward(np, np.ones(2))


def test_custom_checkpoint_and_jit_record_through_the_one_path() -> None:
    @xg.custom_vjp
    def f(x: Any) -> Any:
        return xg.sin(x)

    f.defvjp(lambda x: (xg.sin(x), x), lambda res, g: (g * xg.cos(res),))
    jitted = xg.jit(lambda x: xg.sin(x) * 2.0)
    ck = xg.checkpoint(lambda x: xg.sin(x) * 2.0)
    for _ in range(2):
        x = xg.asarray(np.array([0.5, 1.0]), requires_grad=True)
        for y in (f(x), ck(x), jitted(x)):
            assert y.grad_fn is not None
            assert y.grad_fn.prim.fwd is _opaque_forward, y.grad_fn.name()
