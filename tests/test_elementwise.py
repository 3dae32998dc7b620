"""Elementwise functions at the points the property tests stay away from: ties,
boundaries, zeros; plus signatures, Python scalars and the non-differentiable table."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad._spec import CHAPTERS
from xpgrad.autograd._core import PRIMITIVES

NAMES = (*CHAPTERS["elementwise"], "where")


def _grads(f: Any, *args: Any) -> tuple[np.ndarray, ...]:
    return xg.grad(lambda *a: xg.sum(f(*a)), argnums=tuple(range(len(args))))(*args)


def _torch_grads(f: Any, *args: np.ndarray) -> list[np.ndarray]:
    torch = pytest.importorskip("torch")
    ts = [torch.asarray(a.copy(), requires_grad=True) for a in args]
    f(torch, *ts).sum().backward()
    return [t.grad.numpy() if t.grad is not None else np.zeros_like(a) for t, a in zip(ts, args, strict=True)]


@pytest.mark.parametrize("name", NAMES)
def test_signature_matches_the_standard(name: str) -> None:
    strict = pytest.importorskip("array_api_strict")

    def shape(f: Any) -> list[tuple[str, Any, Any]]:
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]

    assert shape(getattr(xg, name)) == shape(getattr(strict, name))


@pytest.mark.parametrize(("name", "torch_name"), [("maximum", "maximum"), ("minimum", "minimum")])
def test_ties_split_the_gradient_evenly_as_torch(name: str, torch_name: str) -> None:
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([2.0, 2.0, 2.0])
    ours = _grads(getattr(xg, name), a, b)
    theirs = _torch_grads(lambda t, x, y: getattr(t, torch_name)(x, y), a, b)
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(o, t)
    np.testing.assert_array_equal(ours[0][1], 0.5)


def test_clip_boundaries_as_torch() -> None:
    x = np.array([0.0, 1.0, 1.5, 2.0, 3.0, 5.0])
    lo = np.array([1.0, 1.0, 1.0, 1.0, 4.0, 4.0])
    hi = np.array([2.0, 2.0, 2.0, 2.0, 2.0, 4.0])  # the fifth has min > max: the result is max
    ours = _grads(xg.clip, x, lo, hi)
    theirs = _torch_grads(lambda t, a, b, c: t.clamp(a, b, c), x, lo, hi)
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(o, t)
    np.testing.assert_array_equal(_grads(lambda v: xg.clip(v, 1.0, 2.0), x)[0], [0, 1, 1, 1, 0, 0])


def test_pow_at_zero_gives_no_nan() -> None:
    x = np.array([0.0, 0.0, 0.0, 2.0])
    y = np.array([0.0, 2.0, 1.0, 0.0])
    ours = _grads(xg.pow, x, y)
    theirs = _torch_grads(lambda t, a, b: t.pow(a, b), x, y)
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(o, t)
    assert not np.isnan(ours[0]).any() and not np.isnan(ours[1]).any()
    (g,) = _grads(lambda e: xg.pow(0.0, e), np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0])


def test_abs_and_sign_at_zero() -> None:
    np.testing.assert_array_equal(_grads(xg.abs, np.array([-1.0, 0.0, 2.0]))[0], [-1.0, 0.0, 1.0])
    np.testing.assert_array_equal(_grads(xg.sign, np.array([-1.0, 0.0, 2.0]))[0], [0.0, 0.0, 0.0])
    z = np.array([0j, 3 + 4j])
    g = xg.grad(lambda v: xg.sum(xg.abs(v)))(z)
    np.testing.assert_allclose(g, [0, 0.6 + 0.8j])


def test_copysign_gradient_is_zero_in_x2() -> None:
    gx, gs = _grads(xg.copysign, np.array([1.5, -2.0, 3.0]), np.array([-1.0, -1.0, 2.0]))
    np.testing.assert_array_equal(gx, [-1.0, 1.0, 1.0])
    np.testing.assert_array_equal(gs, [0.0, 0.0, 0.0])


def test_scalars_on_either_side() -> None:
    x = np.array([0.5, 1.5])
    for f, want in [
        (lambda v: 2.0 - v, [-1.0, -1.0]),
        (lambda v: xg.subtract(2.0, v), [-1.0, -1.0]),
        (lambda v: xg.divide(3.0, v), -3.0 / x**2),
        (lambda v: xg.pow(2.0, v), 2.0**x * np.log(2.0)),
        (lambda v: xg.atan2(1.0, v), -1.0 / (1.0 + x**2)),
        (lambda v: xg.where(xg.asarray(np.array([True, False])), v, 0.0), [1.0, 0.0]),
        (lambda v: xg.where(xg.asarray(np.array([True, False])), 0.0, v), [0.0, 1.0]),
    ]:
        np.testing.assert_allclose(_grads(f, x)[0], want)


def test_complex_python_scalar_is_conjugated() -> None:
    z = np.array([1 + 1j])
    g = xg.grad(lambda v: xg.sum(xg.real(xg.multiply(v, 2j))))(z)
    np.testing.assert_allclose(g, [-2j])  # d Re(2j z) = conj(2j) as PyTorch


@pytest.mark.parametrize("name", NAMES)
def test_differentiability_is_declared(name: str) -> None:
    p = PRIMITIVES[name]
    nondiff = name.startswith(("bitwise_", "logical_", "is")) or name in (
        "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "signbit")
    zero = name in ("ceil", "floor", "round", "trunc", "floor_divide", "nextafter")
    assert (p.nondiff, p.zero_grad) == (nondiff, zero)


def test_nondifferentiable_outputs_are_constants() -> None:
    x = xg.asarray([0.5, 1.5], requires_grad=True)
    for out in (x > 1.0, xg.isnan(x), xg.floor(x), xg.round(x), xg.nextafter(x, 2.0), x // 1.0):
        assert not out.requires_grad
