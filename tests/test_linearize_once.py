"""jacfwd, hessian (and so hvp-free Hessians) evaluate the primal once: the tangents alone are
batched (as ``jax.linearize`` pushes a batch of tangents), so a term such as ``A @ x`` is
computed once, not once per direction. Checked by counting the primal forward calls of a
primitive, on every backend, against vmap of jvp and float64 finite differences."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.autograd._core import PRIMITIVES

N = 5
RNG = np.random.default_rng(7)
A = RNG.standard_normal((N, N)) / np.sqrt(N)
XS = [RNG.standard_normal(N) for _ in range(3)]


@pytest.fixture
def tanh_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The sizes of the arrays tanh's forward is called on (the primal's evaluations)."""
    prim = PRIMITIVES["tanh"]
    fwd = prim.fwd
    calls: list[int] = []

    def counted(xp: Any, x: Any, **kw: Any) -> Any:
        calls.append(int(np.prod([int(s) for s in x.shape])))
        return fwd(xp, x, **kw)

    monkeypatch.setattr(prim, "fwd", counted)
    yield calls


def _f(a: Any) -> Any:
    def f(v: Any) -> Any:
        return xg.sum(xg.tanh(xg.matmul(a, v)) ** 2) + xg.special.logsumexp(v)

    return f


def _hess_np(x: np.ndarray) -> np.ndarray:
    """f's Hessian by float64 central differences of its analytic gradient."""

    def grad(v: np.ndarray) -> np.ndarray:
        t = np.tanh(A @ v)
        e = np.exp(v - v.max())
        return A.T @ (2 * t * (1 - t * t)) + e / e.sum()

    eps = 1e-6
    return np.stack([(grad(x + eps * e) - grad(x - eps * e)) / (2 * eps) for e in np.eye(N)], axis=1)


def test_hessian_evaluates_the_primal_once(backend: Any, tanh_calls: list[int]) -> None:
    a = backend.asarray(A)
    f = _f(a)
    h = xg.hessian(f)
    for x_np in XS:  # (a loop: nothing is cached between calls)
        x = backend.asarray(x_np)
        del tanh_calls[:]
        got = backend.to_numpy(h(x))
        assert tanh_calls == [N]  # one unbatched evaluation, not one per direction
        np.testing.assert_allclose(got, _hess_np(x_np), atol=1e-6)
        # the old way: vmap of one jvp of the gradient per basis direction
        g = xg.grad(f)
        old = xg.vmap(lambda t, x=x, g=g: xg.jvp(g, (x,), (t,))[1])(backend.asarray(np.eye(N)))
        np.testing.assert_allclose(got, backend.to_numpy(old).T, atol=1e-12)


def test_jacfwd_evaluates_the_primal_once(backend: Any, tanh_calls: list[int]) -> None:
    a = backend.asarray(A)

    def f(v: Any) -> Any:
        return xg.tanh(xg.matmul(a, v)) * v

    for chunk in (None, 2):
        j = xg.jacfwd(f, chunk_size=chunk)
        for x_np in XS:
            x = backend.asarray(x_np)
            del tanh_calls[:]
            got = backend.to_numpy(j(x))
            # once (once a chunk with chunk_size), never on a batch of directions
            assert tanh_calls == [N] * (1 if chunk is None else 3)
            old = xg.vmap(lambda t, x=x: xg.jvp(f, (x,), (t,))[1])(backend.asarray(np.eye(N)))
            np.testing.assert_allclose(got, backend.to_numpy(old).T, atol=1e-12)
            t = np.tanh(A @ x_np)
            want = (1 - t * t)[:, None] * A * x_np[:, None] + np.diag(t)
            np.testing.assert_allclose(got, want, atol=1e-12)


def test_has_aux_evaluates_f_once(backend: Any) -> None:
    a = backend.asarray(A)
    calls = []

    def f(v: Any) -> Any:
        calls.append(1)
        return xg.sum(xg.sin(xg.matmul(a, v)) ** 2), {"v2": v * 2.0, "tag": "t"}

    for x_np in XS:
        x = backend.asarray(x_np)
        del calls[:]
        h, aux = xg.hessian(f, has_aux=True)(x)
        assert len(calls) == 1
        assert aux["tag"] == "t"
        np.testing.assert_allclose(backend.to_numpy(aux["v2"]), 2 * x_np)
        ref = xg.jacrev(xg.jacrev(lambda v: f(v)[0]))(x)
        np.testing.assert_allclose(backend.to_numpy(h), backend.to_numpy(ref), atol=1e-12)
        del calls[:]
        j, aux = xg.jacfwd(lambda v: (xg.sin(v), v + 1.0), has_aux=True)(x)
        np.testing.assert_allclose(backend.to_numpy(j), np.diag(np.cos(x_np)), atol=1e-12)
        np.testing.assert_allclose(backend.to_numpy(aux), x_np + 1.0)


def test_custom_jvp_rule_used_under_jacfwd_and_hessian(np_backend: Any) -> None:
    rule_calls = []

    @xg.custom_jvp
    def soft(v: Any) -> Any:
        return xg.sin(v)

    @soft.defjvp
    def _(primals: Any, tangents: Any) -> Any:
        (v,), (dv,) = primals, tangents
        rule_calls.append(type(v))
        return soft(v), 2.0 * xg.cos(v) * dv  # (twice the true derivative: the rule is what counts)

    for x_np in XS:
        del rule_calls[:]
        j = xg.jacfwd(lambda v: soft(A @ v))(x_np)
        np.testing.assert_allclose(j, 2 * np.cos(A @ x_np)[:, None] * A, atol=1e-12)
        assert rule_calls and all(t is xg.Tensor for t in rule_calls)  # (the unbatched primal)
        h = xg.hessian(lambda v: xg.sum(soft(A @ v)))(x_np)
        want = xg.jacrev(xg.jacrev(lambda v: xg.sum(soft(A @ v))))(x_np)
        np.testing.assert_allclose(h, want, atol=1e-12)


def test_under_vmap_and_nested(np_backend: Any) -> None:
    f = _f(A)
    xs = np.stack(XS)
    np.testing.assert_allclose(xg.vmap(xg.hessian(f))(xs), np.stack([_hess_np(x) for x in XS]), atol=1e-6)
    third = xg.jacfwd(xg.hessian(f))(XS[0])
    np.testing.assert_allclose(third, xg.jacrev(xg.jacrev(xg.jacrev(f)))(XS[0]), atol=1e-12)
    inner = xg.hessian(lambda v: xg.sum(xg.jacfwd(lambda w: xg.sin(w) * w)(v)))(XS[0])
    np.testing.assert_allclose(inner, xg.jacrev(xg.jacrev(lambda v: xg.sum(xg.jacrev(lambda w: xg.sin(w) * w)(v))))(XS[0]),
                               atol=1e-12)
    # a vmap inside f (its own jvp, the primal batched along the user's level)
    ts = RNG.standard_normal((3, N))
    g = lambda v: xg.sum(xg.vmap(lambda t: xg.jvp(lambda w: xg.tanh(A @ w), (v,), (t,))[1])(ts) ** 2)
    np.testing.assert_allclose(xg.hessian(g)(XS[1]), xg.jacrev(xg.jacrev(g))(XS[1]), atol=1e-10)


def test_batched_tangent_round_trip() -> None:
    """A batched tangent of a batched value, moved onto its physical value and back: where the
    value and the tangent vary along the same level, example ``i`` takes the physical tangent's
    example ``i`` (the diagonal)."""
    from xpgrad.autograd._batched import Batched
    from xpgrad.functional import _physical_tangent, logical_tangent

    def body(d: Any, p: Any) -> Any:
        st = p._levels if isinstance(p, Batched) else ()
        phys = p._inner if isinstance(p, Batched) else p
        t = _physical_tangent(d, st, phys)
        assert tuple(t.shape) == tuple(phys.shape)
        return logical_tangent(t, st) if st else t

    for _ in range(2):
        ds, ps = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
        np.testing.assert_allclose(xg.vmap(body)(ds, ps), ds)
        np.testing.assert_allclose(xg.vmap(body, in_axes=(0, None))(ds, ps[0]), ds)


def test_hessian_through_rules_that_copy(backend: Any) -> None:
    """stack, concat and the fused cross-entropy batch by copying every argument along every
    level (their rules do not broadcast): the copies of the primal along jacfwd's level must
    not each add to the gradient (they made the Hessian n times too large)."""

    def f(v: Any) -> Any:
        return xg.sum(xg.stack([v, v * v]) ** 3) + xg.sum(xg.concat([v, xg.sin(v)]) ** 2)

    def g(v: Any) -> Any:  # (a jacfwd inside: its primal copied too)
        return xg.sum(xg.jacfwd(lambda w: xg.stack([w, w ** 3]))(v) ** 2)

    for x_np in XS:
        x = backend.asarray(x_np)
        for fn in (f, g):
            want = xg.jacrev(xg.jacrev(fn))(x)
            np.testing.assert_allclose(backend.to_numpy(xg.hessian(fn)(x)), backend.to_numpy(want), atol=1e-10)
