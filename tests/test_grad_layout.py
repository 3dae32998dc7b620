"""Gradients come back in the parameter's layout: a C-contiguous weight gets a C-contiguous
``.grad`` (issue 30), where the library exposes strides (torch, NumPy, CuPy); values unchanged."""

from __future__ import annotations

from typing import Any

import numpy as np

import xpgrad as xg
import xpgrad.nn as nn

from ._util import to_numpy


def _c_contiguous(a: Any) -> bool | None:
    """Whether ``a`` (a backend array or Tensor) is C-contiguous; None where the library has no layout."""
    a = a.data if isinstance(a, xg.Tensor) else a
    if type(a).__module__ == "torch":
        return bool(a.is_contiguous())
    flags = getattr(a, "flags", None)
    if type(a).__module__ in ("numpy", "cupy") and flags is not None:
        return bool(flags.c_contiguous)
    return None


def _layout_ok(a: Any, backend: Any) -> None:
    c = _c_contiguous(a)
    if backend.name in ("numpy", "torch", "cupy"):
        assert c is True, f"{backend.name}: the gradient is not C-contiguous"


def test_linear_weight_grad_contiguous(backend: Any) -> None:
    rng = np.random.default_rng(0)
    layer = backend.to(nn.Linear(7, 5, dtype="float64"))
    w = to_numpy(layer.weight)
    for step, shape in enumerate([(4, 7), (3, 4, 7), (6, 7)]):  # 2-D and batched inputs, accumulated
        xn = rng.standard_normal(shape)
        gn = rng.standard_normal((*shape[:-1], 5))
        x = xg.asarray(backend.asarray(xn))
        y = layer(x)
        (y * xg.asarray(backend.asarray(gn))).sum().backward()
        want_w = gn.reshape(-1, 5).T @ xn.reshape(-1, 7)
        want_b = gn.reshape(-1, 5).sum(0)
        if step == 0:
            acc_w, acc_b = want_w, want_b
        else:
            acc_w, acc_b = acc_w + want_w, acc_b + want_b
        np.testing.assert_allclose(to_numpy(layer.weight.grad), acc_w, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(to_numpy(layer.bias.grad), acc_b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(to_numpy(y), xn @ w.T + to_numpy(layer.bias), rtol=1e-12, atol=1e-12)
        _layout_ok(layer.weight.grad, backend)
        if step == 1:  # zero_grad between: the first gradient of a fresh pass too
            layer.zero_grad()
            acc_w, acc_b = np.zeros_like(acc_w), np.zeros_like(acc_b)


def test_matmul_transposed_left_operand_grad_contiguous(backend: Any) -> None:
    """``w.mT @ x`` with a C-contiguous leaf ``w``: w's gradient is C-contiguous, values as x @ g.T."""
    rng = np.random.default_rng(1)
    wn, xn, gn = rng.standard_normal((5, 3)), rng.standard_normal((5, 4)), rng.standard_normal((3, 4))
    w = xg.asarray(backend.asarray(wn), requires_grad=True)
    for k in range(1, 3):
        (xg.matmul(xg.matrix_transpose(w), xg.asarray(backend.asarray(xn))) * xg.asarray(backend.asarray(gn))).sum().backward()
        np.testing.assert_allclose(to_numpy(w.grad), k * (xn @ gn.T), rtol=1e-12, atol=1e-12)
        _layout_ok(w.grad, backend)


def test_linear_second_order_through_weight(backend: Any) -> None:
    """Higher order through the reordered products: the gradient of sum((d loss / d W)^2) in x."""
    rng = np.random.default_rng(2)
    wn, xn = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))

    def inner(w: Any, x: Any) -> Any:
        gw = xg.grad(lambda w_: (xg.nn.functional.linear(x, w_) ** 2).sum())(w)
        return (gw ** 2).sum()

    got = xg.grad(inner, argnums=1)(xg.asarray(backend.asarray(wn)), xg.asarray(backend.asarray(xn)))
    # loss = sum((x W^T)^2): dW = 2 (x W^T)^T x = 2 W x^T x; f = ||2 W x^T x||^2; df/dx = 8 x (M + M^T) with M = W^T W x^T x
    m = wn.T @ wn @ xn.T @ xn
    want = 8 * xn @ (m + m.T)
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-10, atol=1e-10)
