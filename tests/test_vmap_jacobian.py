"""Jacobians and Hessians inside vmap: the basis and empty blocks of functional.py read no
``.data`` of a batched value, and ``vmap(jacfwd)``/``vmap(jacrev)``/``vmap(hessian)`` match a
loop of the unbatched transform (once ``stack``, which assembles the Jacobian, has a rule)."""

from __future__ import annotations

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import functional
from xpgrad.autograd._batched import RULES

from ._util import to_numpy


def test_basis_of_a_batched_value_is_the_examples_one_hot(backend) -> None:  # type: ignore[no-untyped-def]
    """A one-hot direction built from a batched value has the example's shape and is the
    same for every example (it used to read the batched value's ``.data`` and raise)."""
    xs = backend.asarray(np.arange(12.0).reshape(4, 3))
    seen = []

    def f(v):  # type: ignore[no-untyped-def]
        e = functional._basis(v, 1)
        seen.append(e)
        return v + e

    out = to_numpy(xg.vmap(f)(xs))
    (e,) = seen
    assert not isinstance(e, xg.autograd._batched.Batched)
    assert tuple(e.shape) == (3,)
    np.testing.assert_array_equal(to_numpy(e), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(out, np.arange(12.0).reshape(4, 3) + np.array([0.0, 1.0, 0.0]))


@pytest.mark.parametrize("jac", [xg.jacfwd, xg.jacrev])
def test_zero_size_jacobian_inside_vmap(jac) -> None:  # type: ignore[no-untyped-def]
    """An example with no elements has an empty Jacobian block, per example."""
    out = xg.vmap(jac(lambda v: v * 2.0))(np.ones((3, 0)))
    assert out.shape == (3, 0, 0)


@pytest.mark.xfail("stack" not in RULES, reason="the Jacobian is assembled with stack, which has no batching rule yet",
                   raises=xg.XpgradTypeError, strict=True)
@pytest.mark.parametrize("name", ["jacfwd", "jacrev", "hessian"])
def test_vmap_of_jacobians_matches_a_loop(name: str) -> None:
    def f(v):  # type: ignore[no-untyped-def]
        return xg.tanh(v) * xg.sum(v ** 3)

    transform = {"jacfwd": xg.jacfwd(f), "jacrev": xg.jacrev(f),
                 "hessian": xg.hessian(lambda v: xg.sum(xg.sin(v) * v ** 2))}[name]
    xs = np.random.default_rng(0).normal(size=(5, 3))
    batched = xg.vmap(transform)(xs)
    loop = np.stack([np.asarray(transform(x)) for x in xs])
    assert batched.shape == (5, 3, 3)
    np.testing.assert_allclose(batched, loop, rtol=1e-12, atol=1e-12)
