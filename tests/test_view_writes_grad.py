"""Writes into views and views made before a write (issue: two silent wrong derivatives).

- A view made before a recorded write into its base (or into another view of it) reads the
  base's new value and graph (PyTorch's view rebase): reading it, or writing into it (which
  then reaches the base), gives the values of the unrecorded program and its gradient.
- Forward mode: a write into a view carries the view's new tangent into its base's tangent
  (and into the tangents of the base's other views), under jvp, jacfwd, hessian and
  vmap(jvp).

Each program is checked on every backend against float64 central differences of the same
program run without recording, and on NumPy against torch (torch.autograd.grad and
torch.func.jvp of the same code written with torch's tensors).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg

from ._util import to_numpy

Zeros = Callable[[tuple[int, ...]], Any]


def _p_issue(zeros: Zeros, w: Any) -> Any:
    out = zeros((5,))
    head = out[:3]
    out[1:-1] = w[:3]
    head *= w[0]
    return out


def _p_issue_both(zeros: Zeros, w: Any) -> Any:
    out = zeros((5,))
    head = out[:3]
    out[1:-1] = w[:3]
    head *= w[0]
    return head * 1.0 + out[:3] * w[4]


def _p_stale_read(zeros: Zeros, w: Any) -> Any:
    out = zeros((6,))
    head = out[:3]
    out[1:-1] = w[:4]
    return head * w[4]


def _p_overlapping(zeros: Zeros, w: Any) -> Any:
    out = zeros((6,))
    a = out[:3]
    b = out[2:]
    b += w[:4]
    a *= w[4]
    return out


def _p_nested(zeros: Zeros, w: Any) -> Any:
    out = zeros((6,))
    mid = out[1:]
    inner = mid[:3]
    out[2:5] = w[:3]
    inner *= w[3]
    mid[-1] = w[4] + inner[0]  # (a product would save inner[0], which torch then finds written)
    return out


def _p_jvp_issue(zeros: Zeros, w: Any) -> Any:
    out = zeros((7,))
    out[1:-1] = w
    head = out[:3]
    head *= w[0]
    return out


def _p_loop(zeros: Zeros, w: Any) -> Any:
    out = zeros((6,))
    head = out[:4]
    for i in range(3):
        out[i + 1:i + 3] = out[i + 1:i + 3] + w[i]
        head *= w[3 + i % 2]
    return out


def _p_row(zeros: Zeros, w: Any) -> Any:
    m = zeros((2, 3))
    row = m[1, ...]
    m[0, ...] = w[:3]
    m[:, 0] = w[3:5]
    row *= w[0]
    return m * 1.0


PROGRAMS: dict[str, Callable[[Zeros, Any], Any]] = {
    "view before a base write, then written (the issue)": _p_issue,
    "the written stale view read too": _p_issue_both,
    "a stale view read after a base write": _p_stale_read,
    "a view before a write into an overlapping view": _p_overlapping,
    "nested views before a base write": _p_nested,
    "a write into a view under jvp (the issue)": _p_jvp_issue,
    "a loop of base writes and writes through an old view": _p_loop,
    "a row view before writes into a column": _p_row,
}

W0 = np.random.default_rng(27).standard_normal(5)


def _run(backend: Any, name: str, w: Any) -> Any:
    return PROGRAMS[name](lambda shape: xg.asarray(backend.asarray(np.zeros(shape))), w)


def _loss(backend: Any, name: str) -> Callable[[Any], Any]:
    def loss(w: Any) -> Any:
        r = _run(backend, name, w)
        return xg.sum(r * r)

    return loss


def _plain(backend: Any, name: str, w0: np.ndarray) -> np.ndarray:
    """The program's value, unrecorded (the library's own view semantics)."""
    with xg.no_grad():
        return to_numpy(_run(backend, name, xg.asarray(backend.asarray(w0))))


def _numeric_jacobian(backend: Any, name: str, w0: np.ndarray) -> np.ndarray:
    eps = 1e-6
    cols = []
    for i in range(w0.size):
        d = np.zeros_like(w0)
        d[i] = eps
        cols.append((_plain(backend, name, w0 + d) - _plain(backend, name, w0 - d)) / (2 * eps))
    return np.stack(cols, axis=-1)


def _numeric_grad(backend: Any, name: str, w0: np.ndarray) -> np.ndarray:
    jac = _numeric_jacobian(backend, name, w0)  # d out / d w; loss = sum(out^2)
    out = _plain(backend, name, w0)
    return np.tensordot(2 * out, jac, axes=out.ndim)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_grad_through_views_made_before_a_write(name: str, backend: Any) -> None:
    w = xg.asarray(backend.asarray(W0), requires_grad=True)
    out = _run(backend, name, w)
    np.testing.assert_allclose(to_numpy(out), _plain(backend, name, W0), rtol=1e-13, atol=1e-14)
    g = xg.grad(_loss(backend, name))(xg.asarray(backend.asarray(W0)))
    np.testing.assert_allclose(to_numpy(g), _numeric_grad(backend, name, W0), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jvp_and_jacfwd_through_writes_into_views(name: str, backend: Any) -> None:
    jac = _numeric_jacobian(backend, name, W0)
    rng = np.random.default_rng(3)
    for _ in range(2):  # (a loop: nothing carried over from one call to the next)
        t0 = rng.standard_normal(5)
        value, tangent = xg.jvp(lambda w: _run(backend, name, w), (xg.asarray(backend.asarray(W0)),),
                                (xg.asarray(backend.asarray(t0)),))
        np.testing.assert_allclose(to_numpy(value), _plain(backend, name, W0), rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(to_numpy(tangent), jac @ t0, rtol=1e-6, atol=1e-7)
    j = xg.jacfwd(lambda w: _run(backend, name, w))(xg.asarray(backend.asarray(W0)))
    np.testing.assert_allclose(to_numpy(j), jac, rtol=1e-6, atol=1e-7)
    # the scalar loss: jvp agrees with grad . t
    t1 = np.ones(5)
    _, dl = xg.jvp(_loss(backend, name), (xg.asarray(backend.asarray(W0)),), (xg.asarray(backend.asarray(t1)),))
    np.testing.assert_allclose(float(to_numpy(dl)), _numeric_grad(backend, name, W0) @ t1, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_hessian_and_vmap_jvp_through_writes_into_views(name: str, backend: Any) -> None:
    eps = 1e-5
    g = xg.grad(_loss(backend, name))
    numeric = np.stack([
        (to_numpy(g(xg.asarray(backend.asarray(W0 + eps * e)))) - to_numpy(g(xg.asarray(backend.asarray(W0 - eps * e)))))
        / (2 * eps) for e in np.eye(5)], axis=-1)
    h = xg.hessian(_loss(backend, name))(xg.asarray(backend.asarray(W0)))
    np.testing.assert_allclose(to_numpy(h), numeric, rtol=1e-5, atol=1e-6)
    w = xg.asarray(backend.asarray(W0))
    rows = xg.vmap(lambda t: xg.jvp(_loss(backend, name), (w,), (t,))[1])(xg.asarray(backend.asarray(np.eye(5))))
    np.testing.assert_allclose(to_numpy(rows), _numeric_grad(backend, name, W0), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- against torch
@pytest.mark.filterwarnings(r"ignore:.*torch\.jit\.script.* is deprecated:DeprecationWarning")  # (torch.func's own)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_view_writes_match_torch(name: str) -> None:
    torch = pytest.importorskip("torch")
    f = PROGRAMS[name]

    def tzeros(shape: tuple[int, ...]) -> Any:
        # (not a leaf: torch refuses a write into a view made of a leaf before the leaf was
        # written with a value that requires grad)
        return torch.zeros(shape, dtype=torch.float64, requires_grad=True) * 0.0

    def fzeros(shape: tuple[int, ...]) -> Any:  # (inside torch.func's transforms)
        return torch.zeros(shape, dtype=torch.float64)

    def xzeros(shape: tuple[int, ...]) -> Any:
        return xg.asarray(np.zeros(shape))

    wt = torch.tensor(W0, requires_grad=True)
    out_t = f(tzeros, wt)
    (gt,) = torch.autograd.grad((out_t * out_t).sum(), wt)
    w = xg.asarray(W0, requires_grad=True)
    out = f(xzeros, w)
    np.testing.assert_allclose(to_numpy(out), out_t.detach().numpy(), rtol=1e-13, atol=1e-14)
    g = xg.grad(lambda v: xg.sum(f(xzeros, v) ** 2))(xg.asarray(W0))
    np.testing.assert_allclose(to_numpy(g), gt.numpy(), rtol=1e-12, atol=1e-13)
    t0 = np.random.default_rng(5).standard_normal(5)
    _, jt = torch.func.jvp(lambda v: f(fzeros, v), (torch.tensor(W0),), (torch.tensor(t0),))
    _, jx = xg.jvp(lambda v: f(xzeros, v), (xg.asarray(W0),), (xg.asarray(t0),))
    np.testing.assert_allclose(to_numpy(jx), jt.numpy(), rtol=1e-12, atol=1e-13)
    ht = torch.autograd.functional.hessian(lambda v: (f(tzeros, v) ** 2).sum(), torch.tensor(W0))
    h = xg.hessian(lambda v: xg.sum(f(xzeros, v) ** 2))(xg.asarray(W0))
    np.testing.assert_allclose(to_numpy(h), ht.numpy(), rtol=1e-10, atol=1e-12)
