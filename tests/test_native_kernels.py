"""Native convolution and pooling kernels against the portable composition (issue 30).

``nn.conv2d`` and ``nn.conv_transpose2d`` run the library's own kernels on torch and JAX, and
on Dask the NumPy composition once per batch chunk (``map_blocks``); everywhere, the
composition of the standard's functions is the fallback and the reference.
Each case runs with the native kernels and with them turned off (`USE_NATIVE`), on every
backend: forward, first-order gradients, second order (an HVP, and a gradient of a gradient),
under vmap and under jit; and the gradients against float64 central differences.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.nn import conv as conv_mod

F = xg.nn.functional

RTOL, ATOL = 1e-9, 1e-9

# (input shape, weight shape, keyword arguments of conv2d)
CONV_CASES = {
    "pad1": ((2, 3, 7, 6), (4, 3, 3, 3), {"stride": 1, "padding": 1}),
    "groups_stride_dil": ((2, 4, 8, 7), (6, 2, 3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2),
                                                      "groups": 2}),
    "same_even": ((1, 2, 6, 5), (2, 2, 2, 2), {"padding": "same", "dilation": 2}),
    "stride_leftover": ((2, 2, 9, 8), (3, 2, 3, 3), {"stride": 3, "padding": 2}),
    "depthwise": ((2, 3, 5, 5), (3, 1, 3, 3), {"padding": 1, "groups": 3}),
}
# (input shape, weight shape, keyword arguments of conv_transpose2d)
CONV_T_CASES = {
    "stride_opad": ((2, 4, 3, 4), (4, 3, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    "groups_dil": ((1, 4, 4, 3), (4, 1, 2, 3), {"stride": (1, 2), "padding": (0, 1), "groups": 2,
                                                "dilation": (2, 1)}),
    "crop": ((2, 2, 4, 4), (2, 3, 1, 1), {"padding": 1}),
}


def _r(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


@contextmanager
def portable() -> Iterator[None]:
    """The composition instead of the native kernels."""
    conv_mod.USE_NATIVE[0] = False
    try:
        yield
    finally:
        conv_mod.USE_NATIVE[0] = True


def _both(fn: Callable[[], Any]) -> tuple[Any, Any]:
    native = fn()
    with portable():
        ref = fn()
    return native, ref


def _close(backend: Any, a: Any, b: Any) -> None:
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for u, v in zip(a, b, strict=True):
            _close(backend, u, v)
        return
    np.testing.assert_allclose(backend.to_numpy(a), backend.to_numpy(b), rtol=RTOL, atol=ATOL)


def _op(kind: str) -> tuple[Callable[..., Any], dict[str, tuple[Any, ...]]]:
    return (F.conv2d, CONV_CASES) if kind == "conv" else (F.conv_transpose2d, CONV_T_CASES)


ALL = [("conv", c) for c in CONV_CASES] + [("conv_t", c) for c in CONV_T_CASES]
# the slower checks (second order, vmap, central differences) on fewer cases
SOME = [("conv", "groups_stride_dil"), ("conv", "same_even"), ("conv_t", "stride_opad"), ("conv_t", "groups_dil")]


#: on Dask the slow checks run one case each: the reference, the composition on a Dask array,
#: builds graphs of some 10**4 tasks per compute (the kernels, one task per batch chunk, are also
#: checked by the conv and pooling OpCases, tests/cases/nn.py)
_DASK_CASES = {"same_even", "groups_dil", "tiles"}


def _light_on_dask(backend: Any, case: str) -> None:
    if backend.name == "dask" and case not in _DASK_CASES:
        pytest.skip(f"Dask: the slow checks run on the cases {sorted(_DASK_CASES)} only (CI time; see _DASK_CASES)")


def _setup(backend: Any, kind: str, case: str) -> tuple[Callable[..., Any], Any, Any, Any]:
    fn, cases = _op(kind)
    xs, ws, kw = cases[case]
    x, w = backend.asarray(_r(*xs)), backend.asarray(_r(*ws, seed=1))
    out_shape = fn(x, w, **kw).shape
    c = backend.asarray(_r(*out_shape, seed=2))
    return (lambda x, w: fn(x, w, **kw)), x, w, c


def test_native_kernels_are_found_on_torch_jax_and_dask(backend: Any) -> None:
    want = backend.name in ("torch", "jax", "dask")
    for name in ("conv2d", "conv_transpose2d"):
        assert (conv_mod.native_kernel(backend.xp, name) is not None) == want
    with portable():
        assert conv_mod.native_kernel(backend.xp, "conv2d") is None


@pytest.mark.parametrize(("kind", "case"), ALL)
def test_forward_matches_portable(backend: Any, kind: str, case: str) -> None:
    f, x, w, _ = _setup(backend, kind, case)
    _close(backend, *_both(lambda: f(x, w)))


@pytest.mark.parametrize(("kind", "case"), ALL)
def test_grads_match_portable(backend: Any, kind: str, case: str) -> None:
    f, x, w, c = _setup(backend, kind, case)
    g = xg.grad(lambda x, w: xg.sum(f(x, w) * c), argnums=(0, 1))
    _close(backend, *_both(lambda: g(x, w)))


@pytest.mark.parametrize(("kind", "case"), SOME)
def test_second_order_matches_portable(backend: Any, kind: str, case: str) -> None:
    _light_on_dask(backend, case)
    f, x, w, c = _setup(backend, kind, case)
    vx, vw = backend.asarray(_r(*x.shape, seed=3)), backend.asarray(_r(*w.shape, seed=4))

    def loss(x: Any, w: Any) -> Any:
        return xg.sum(f(x, w) ** 2 * c)

    def rev_rev(x: Any, w: Any) -> Any:
        gx, gw = xg.grad(loss, argnums=(0, 1))(x, w)
        return xg.sum(gx * vx) + xg.sum(gw * vw)

    _close(backend, *_both(lambda: xg.hvp(loss, (x, w), (vx, vw))))
    _close(backend, *_both(lambda: xg.grad(rev_rev, argnums=(0, 1))(x, w)))


@pytest.mark.parametrize(("kind", "case"), SOME)
def test_vmap_matches_loop(backend: Any, kind: str, case: str) -> None:
    _light_on_dask(backend, case)
    fn, cases = _op(kind)
    xs, ws, kw = cases[case]
    xb = backend.asarray(_r(3, *xs))
    wb = backend.asarray(_r(3, *ws, seed=1))
    w = wb[0, ...]
    for in_axes, args in (((0, None), (xb, w)), ((None, 0), (xb[0, ...], wb)), ((0, 0), (xb, wb))):
        def f(x: Any, w: Any) -> Any:
            return xg.sum(fn(x, w, **kw) ** 2)

        def one(i: int, in_axes: Any = in_axes, args: Any = args) -> Any:
            return [a if ax is None else a[i, ...] for a, ax in zip(args, in_axes, strict=True)]

        for per in (lambda x, w: fn(x, w, **kw), xg.grad(f, argnums=(0, 1))):
            got, ref = _both(lambda per=per, in_axes=in_axes, args=args: xg.vmap(per, in_axes=in_axes)(*args))
            _close(backend, got, ref)
            loop = [per(*one(i)) for i in range(3)]
            want = (np.stack([backend.to_numpy(v[0]) for v in loop]), np.stack([backend.to_numpy(v[1]) for v in loop])) \
                if isinstance(loop[0], tuple) else np.stack([backend.to_numpy(v) for v in loop])
            _close(backend, got, want) if not isinstance(want, tuple) else [
                np.testing.assert_allclose(backend.to_numpy(g_), w_, rtol=RTOL, atol=ATOL)
                for g_, w_ in zip(got, want, strict=True)]


@pytest.mark.parametrize(("kind", "case"), [("conv", "groups_stride_dil"), ("conv_t", "stride_opad"), ("conv", "same_even")])
def test_jit_matches_eager(backend: Any, kind: str, case: str) -> None:
    _light_on_dask(backend, case)
    f, x, w, c = _setup(backend, kind, case)

    def step(x: Any, w: Any, c: Any) -> Any:
        return xg.grad(lambda x, w: xg.sum(f(x, w) ** 2 * c), argnums=(0, 1))(x, w)

    want = step(x, w, c)
    for use in (True, False):
        conv_mod.USE_NATIVE[0] = use
        try:
            j = xg.jit(step)
            for _ in range(2):  # the trace, then the replay
                _close(backend, j(x, w, c), want)
        finally:
            conv_mod.USE_NATIVE[0] = True


@pytest.mark.parametrize(("kind", "case"), SOME)
def test_grads_match_central_differences(backend: Any, kind: str, case: str) -> None:
    _light_on_dask(backend, case)
    f, x, w, c = _setup(backend, kind, case)
    gx, gw = xg.grad(lambda x, w: xg.sum(f(x, w) * c), argnums=(0, 1))(x, w)
    xn, wn, cn = backend.to_numpy(x), backend.to_numpy(w), backend.to_numpy(c)

    def value(xv: np.ndarray, wv: np.ndarray) -> float:
        with portable():
            return float(np.sum(np.asarray(f(xg.asarray(xv), xg.asarray(wv)).data) * cn))

    rng = np.random.default_rng(7)
    eps = 1e-6
    for arr, grad, which in ((xn, gx, 0), (wn, gw, 1)):
        gn = backend.to_numpy(grad)
        for _ in range(4):
            idx = tuple(int(rng.integers(s)) for s in arr.shape)
            d = np.zeros_like(arr)
            d[idx] = eps
            args_p = (xn + d, wn) if which == 0 else (xn, wn + d)
            args_m = (xn - d, wn) if which == 0 else (xn, wn - d)
            fd = (value(*args_p) - value(*args_m)) / (2 * eps)
            np.testing.assert_allclose(gn[idx], fd, rtol=1e-6, atol=1e-7)


def test_conv1d_matches_portable(backend: Any) -> None:
    x, w = backend.asarray(_r(2, 3, 9)), backend.asarray(_r(4, 3, 3, seed=1))
    kw = {"stride": 2, "padding": 1, "dilation": 1}
    _close(backend, *_both(lambda: xg.grad(lambda x, w: xg.sum(F.conv1d(x, w, **kw) ** 2), argnums=(0, 1))(x, w)))


# (input shape, keyword arguments of max_pool2d)
POOL_CASES = {
    "tiles": ((2, 3, 8, 6), {"kernel_size": 2}),
    "overlap_pad": ((2, 2, 7, 7), {"kernel_size": 3, "stride": 2, "padding": 1}),
    "dil_ceil": ((1, 2, 9, 8), {"kernel_size": (2, 3), "stride": (2, 1), "dilation": (2, 1), "ceil_mode": True}),
}


def _pool_setup(backend: Any, case: str) -> tuple[Callable[..., Any], Any, Any]:
    xs, kw = POOL_CASES[case]
    # distinct values: the maximum of every window is unique, so the gradient is well defined
    x = backend.asarray(np.random.default_rng(5).permutation(np.prod(xs)).reshape(xs) / 7.0)
    c = backend.asarray(_r(*F.max_pool2d(x, **kw).shape, seed=2))
    return (lambda x: F.max_pool2d(x, **kw)), x, c


def test_max_pool_native_kernel_is_found_on_torch_and_dask(backend: Any) -> None:
    assert (conv_mod.native_kernel(backend.xp, "max_pool2d") is not None) == (backend.name in ("torch", "dask"))


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_forward_and_grads_match_portable(backend: Any, case: str) -> None:
    f, x, c = _pool_setup(backend, case)
    kw = POOL_CASES[case][1]
    _close(backend, *_both(lambda: F.max_pool2d(x, **kw, return_indices=True)))
    _close(backend, *_both(lambda: xg.grad(lambda x: xg.sum(f(x) * c))(x)))


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_second_order_matches_portable(backend: Any, case: str) -> None:
    _light_on_dask(backend, case)
    f, x, c = _pool_setup(backend, case)
    v = backend.asarray(_r(*x.shape, seed=3))

    def loss(x: Any) -> Any:
        return xg.sum(f(x) ** 3 * c)

    def rev_rev(x: Any) -> Any:
        return xg.sum(xg.grad(loss)(x) * v)

    for fn in (lambda: xg.hvp(loss, (x,), (v,)), lambda: xg.grad(rev_rev)(x)):
        got, ref = _both(fn)
        _close(backend, got, ref)
    # against the hessian-vector product of a function with the same local pieces: 6 y c (dy/dx v) dy/dx
    gv = xg.jvp(f, (x,), (v,))[1]
    want = xg.vjp(f, x)[1](6 * f(x) * c * gv)[0]
    _close(backend, xg.hvp(loss, (x,), (v,)), want)


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_vmap_and_jit_match(backend: Any, case: str) -> None:
    _light_on_dask(backend, case)
    xs, kw = POOL_CASES[case]
    xb = backend.asarray(np.random.default_rng(6).permutation(3 * np.prod(xs)).reshape((3, *xs)) / 7.0)

    def per(x: Any) -> Any:
        return xg.grad(lambda x: xg.sum(F.max_pool2d(x, **kw) ** 2))(x)

    got, ref = _both(lambda: xg.vmap(per)(xb))
    _close(backend, got, ref)
    _close(backend, got, np.stack([backend.to_numpy(per(xb[i, ...])) for i in range(3)]))
    j = xg.jit(per)
    for _ in range(2):
        _close(backend, j(xb[0, ...]), ref[0, ...])


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_grads_match_central_differences(backend: Any, case: str) -> None:
    _light_on_dask(backend, case)
    f, x, c = _pool_setup(backend, case)
    gx = backend.to_numpy(xg.grad(lambda x: xg.sum(f(x) * c))(x))
    xn, cn = backend.to_numpy(x), backend.to_numpy(c)
    rng = np.random.default_rng(8)
    eps = 1e-3  # (the values are 1/7 apart: no window's maximum changes)
    for _ in range(6):
        idx = tuple(int(rng.integers(s)) for s in xn.shape)
        d = np.zeros_like(xn)
        d[idx] = eps
        with portable():
            fd = (float(np.sum(np.asarray(f(xg.asarray(xn + d)).data) * cn))
                  - float(np.sum(np.asarray(f(xg.asarray(xn - d)).data) * cn))) / (2 * eps)
        np.testing.assert_allclose(gx[idx], fd, rtol=1e-6, atol=1e-8)


# (input shape, keyword arguments of avg_pool2d)
AVG_CASES = {
    "tiles": ((2, 3, 8, 6), {"kernel_size": 2}),
    "pad_exclude_ceil": ((2, 2, 7, 6), {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False,
                                        "ceil_mode": True}),
    "override": ((1, 2, 6, 7), {"kernel_size": (2, 3), "stride": (1, 2), "divisor_override": 5}),
}


def test_avg_pool_native_kernel_is_found_on_torch_jax_and_dask(backend: Any) -> None:
    want = backend.name in ("torch", "jax", "dask")
    assert (conv_mod.native_kernel(backend.xp, "avg_pool2d") is not None) == want


@pytest.mark.parametrize("case", AVG_CASES)
def test_avg_pool_matches_portable(backend: Any, case: str) -> None:
    _light_on_dask(backend, case)
    xs, kw = AVG_CASES[case]
    x = backend.asarray(_r(*xs))
    c = backend.asarray(_r(*F.avg_pool2d(x, **kw).shape, seed=2))
    v = backend.asarray(_r(*xs, seed=3))

    def loss(x: Any) -> Any:
        return xg.sum(F.avg_pool2d(x, **kw) ** 2 * c)

    def per(x: Any) -> Any:
        return xg.grad(loss)(x)

    _close(backend, *_both(lambda: F.avg_pool2d(x, **kw)))
    _close(backend, *_both(lambda: per(x)))
    _close(backend, *_both(lambda: xg.hvp(loss, (x,), (v,))))
    _close(backend, *_both(lambda: xg.grad(lambda x: xg.sum(per(x) * v))(x)))
    # vmap (the examples' own batch axis too) and jit
    xb = backend.asarray(_r(3, *xs, seed=4))
    got = xg.vmap(per)(xb)
    _close(backend, got, np.stack([backend.to_numpy(per(xb[i, ...])) for i in range(3)]))
    j = xg.jit(lambda x, c: xg.grad(lambda x: xg.sum(F.avg_pool2d(x, **kw) ** 2 * c))(x))
    for _ in range(2):
        _close(backend, j(x, c), per(x))
    # against central differences (linear before the square: float64 differences are exact enough)
    gx, xn = backend.to_numpy(per(x)), backend.to_numpy(x)
    rng = np.random.default_rng(9)
    for _ in range(3):
        idx = tuple(int(rng.integers(s)) for s in xn.shape)
        d = np.zeros_like(xn)
        d[idx] = 1e-6
        with portable():
            cn = backend.to_numpy(c)
            fd = (float(np.sum(np.asarray(F.avg_pool2d(xg.asarray(xn + d), **kw).data) ** 2 * cn))
                  - float(np.sum(np.asarray(F.avg_pool2d(xg.asarray(xn - d), **kw).data) ** 2 * cn))) / 2e-6
        np.testing.assert_allclose(gx[idx], fd, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------- attention, layer_norm, embedding
# (issue 30: the fused kernels of nn.functional against the composition, USE_NATIVE off)

# (query, key, value shapes, keyword arguments of scaled_dot_product_attention; "mask" is made below)
SDPA_CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], dict[str, Any]]] = {
    "causal": ((2, 3, 5, 4), (2, 3, 5, 4), (2, 3, 5, 4), {"is_causal": True}),
    "causal_long_keys": ((2, 4, 3), (2, 6, 3), (2, 6, 3), {"is_causal": True, "scale": 0.3}),
    "bool_mask_empty_row": ((2, 2, 5, 4), (2, 2, 6, 4), (2, 2, 6, 4), {"mask": "bool"}),
    "float_mask_broadcast": ((2, 3, 4, 4), (3, 5, 4), (3, 5, 4), {"mask": "float"}),
    "plain_2d": ((4, 3), (5, 3), (5, 3), {}),
}


def _sdpa_setup(backend: Any, case: str) -> tuple[Callable[..., Any], tuple[Any, Any, Any], Any]:
    qs, ks, vs, kw = SDPA_CASES[case]
    kw = dict(kw)
    q, k, v = (backend.asarray(_r(*s, seed=i)) for i, s in enumerate((qs, ks, vs)))
    mask = kw.pop("mask", None)
    if mask == "bool":
        m = np.random.default_rng(3).standard_normal((qs[-2], ks[-2])) > -0.3
        m[1] = False  # a query that may attend to no key: a zero row, zero gradients
        kw["attn_mask"] = backend.asarray(m)
    elif mask == "float":
        kw["attn_mask"] = backend.asarray(_r(qs[-2], ks[-2], seed=5))
    c = backend.asarray(_r(*F.scaled_dot_product_attention(q, k, v, **kw).shape, seed=6))
    return (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw)), (q, k, v), c


def test_attention_native_kernel_is_found_on_torch(backend: Any) -> None:
    assert (conv_mod.native_kernel(backend.xp, "scaled_dot_product_attention") is not None) == (backend.name == "torch")


@pytest.mark.parametrize("case", SDPA_CASES)
def test_attention_matches_portable(backend: Any, case: str) -> None:
    f, args, c = _sdpa_setup(backend, case)
    vs = tuple(backend.asarray(_r(*a.shape, seed=10 + i)) for i, a in enumerate(args))

    def loss(*a: Any) -> Any:
        return xg.sum(f(*a) ** 2 * c)

    def rev_rev(*a: Any) -> Any:
        gs = xg.grad(loss, argnums=(0, 1, 2))(*a)
        return sum(xg.sum(g * v) for g, v in zip(gs, vs, strict=True))

    _close(backend, *_both(lambda: f(*args)))
    _close(backend, *_both(lambda: xg.grad(lambda *a: xg.sum(f(*a) * c), argnums=(0, 1, 2))(*args)))
    _close(backend, *_both(lambda: xg.jvp(f, args, vs)))
    _close(backend, *_both(lambda: xg.hvp(loss, args, vs)))
    _close(backend, *_both(lambda: xg.grad(rev_rev, argnums=(0, 1, 2))(*args)))


@pytest.mark.parametrize("case", ["causal", "bool_mask_empty_row", "float_mask_broadcast"])
def test_attention_vmap_and_jit_match(backend: Any, case: str) -> None:
    f, args, _ = _sdpa_setup(backend, case)
    batched = tuple(backend.asarray(_r(3, *a.shape, seed=20 + i)) for i, a in enumerate(args))

    def per(q: Any, k: Any, v: Any) -> Any:
        return xg.grad(lambda q, k, v: xg.sum(f(q, k, v) ** 2), argnums=(0, 1, 2))(q, k, v)

    for in_axes in ((0, 0, 0), (0, None, None), (None, 0, 0)):
        vargs = [b if ax == 0 else a for a, b, ax in zip(args, batched, in_axes, strict=True)]
        got, ref = _both(lambda in_axes=in_axes, vargs=vargs: xg.vmap(per, in_axes=in_axes)(*vargs))
        _close(backend, got, ref)
        loop = [per(*[a if ax is None else a[i, ...] for a, ax in zip(vargs, in_axes, strict=True)]) for i in range(3)]
        for j in range(3):
            np.testing.assert_allclose(backend.to_numpy(got[j]), np.stack([backend.to_numpy(r[j]) for r in loop]),
                                       rtol=RTOL, atol=ATOL)
    want = per(*args)
    for use in (True, False):
        conv_mod.USE_NATIVE[0] = use
        try:
            j = xg.jit(per)
            for _ in range(2):  # the trace, then the replay
                _close(backend, j(*args), want)
        finally:
            conv_mod.USE_NATIVE[0] = True


# (input shape, normalized_shape, which of weight and bias are given)
LN_CASES = {
    "affine": ((3, 4, 5), (4, 5), (True, True)),
    "weight_only": ((2, 6), (6,), (True, False)),
    "bias_only": ((2, 3, 4), (4,), (False, True)),
    "plain": ((5, 3), (3,), (False, False)),
}


def _ln_setup(backend: Any, case: str) -> tuple[Callable[..., Any], tuple[Any, Any, Any], Any]:
    xs, shape, (has_w, has_b) = LN_CASES[case]
    x, w, b = backend.asarray(_r(*xs)), backend.asarray(_r(*shape, seed=1)), backend.asarray(_r(*shape, seed=2))

    def f(x: Any, w: Any, b: Any) -> Any:
        return F.layer_norm(x, shape, w if has_w else None, b if has_b else None, eps=1e-3)

    return f, (x, w, b), backend.asarray(_r(*xs, seed=3))


def test_layer_norm_native_kernel_is_found_on_torch(backend: Any) -> None:
    assert (conv_mod.native_kernel(backend.xp, "layer_norm") is not None) == (backend.name == "torch")


@pytest.mark.parametrize("case", LN_CASES)
def test_layer_norm_matches_portable(backend: Any, case: str) -> None:
    f, args, c = _ln_setup(backend, case)
    vs = tuple(backend.asarray(_r(*a.shape, seed=10 + i)) for i, a in enumerate(args))

    def loss(*a: Any) -> Any:
        return xg.sum(f(*a) ** 3 * c)

    def rev_rev(*a: Any) -> Any:
        gs = xg.grad(loss, argnums=(0, 1, 2))(*a)
        return sum(xg.sum(g * v) for g, v in zip(gs, vs, strict=True))

    _close(backend, *_both(lambda: f(*args)))
    _close(backend, *_both(lambda: xg.grad(lambda *a: xg.sum(f(*a) * c), argnums=(0, 1, 2))(*args)))
    _close(backend, *_both(lambda: xg.jvp(f, args, vs)))
    _close(backend, *_both(lambda: xg.hvp(loss, args, vs)))
    _close(backend, *_both(lambda: xg.grad(rev_rev, argnums=(0, 1, 2))(*args)))


@pytest.mark.parametrize("case", ["affine", "weight_only"])
def test_layer_norm_vmap_and_jit_match(backend: Any, case: str) -> None:
    f, args, _ = _ln_setup(backend, case)
    batched = tuple(backend.asarray(_r(3, *a.shape, seed=20 + i)) for i, a in enumerate(args))

    def per(x: Any, w: Any, b: Any) -> Any:
        return xg.grad(lambda x, w, b: xg.sum(f(x, w, b) ** 3), argnums=(0, 1, 2))(x, w, b)

    for in_axes in ((0, None, None), (0, 0, 0), (None, 0, None)):  # (a batched weight and bias too)
        vargs = [b if ax == 0 else a for a, b, ax in zip(args, batched, in_axes, strict=True)]
        got, ref = _both(lambda in_axes=in_axes, vargs=vargs: xg.vmap(per, in_axes=in_axes)(*vargs))
        _close(backend, got, ref)
        loop = [per(*[a if ax is None else a[i, ...] for a, ax in zip(vargs, in_axes, strict=True)]) for i in range(3)]
        for j in range(3):
            np.testing.assert_allclose(backend.to_numpy(got[j]), np.stack([backend.to_numpy(r[j]) for r in loop]),
                                       rtol=RTOL, atol=ATOL)
    want = per(*args)
    for use in (True, False):
        conv_mod.USE_NATIVE[0] = use
        try:
            j = xg.jit(per)
            for _ in range(2):  # the trace, then the replay
                _close(backend, j(*args), want)
        finally:
            conv_mod.USE_NATIVE[0] = True


def test_fused_vjps_share_one_kernel_call_and_keep_nothing(backend: Any) -> None:
    """The three gradients of attention (and layer_norm's) come from one backward call, handed to
    the per-argument rules: right when only some arguments want gradients, on every backward pass
    of a retained graph, and nothing is kept once the cotangent is freed (here a fresh array: the
    square's; a cotangent the caller keeps, as ``c`` of ``sum(y * c)``, keeps the rest until the
    next call)."""
    import gc

    from xpgrad.nn import functional as fmod

    f, (q, k, v), c = _sdpa_setup(backend, "causal")
    lf, (x, w, b), lc = _ln_setup(backend, "affine")
    want_q = xg.grad(lambda q: xg.sum(f(q, k, v) ** 2 * c))(q)
    want_x = xg.grad(lambda x: xg.sum(lf(x, w, b) ** 2 * lc))(x)
    qt, xt = xg.asarray(q, requires_grad=True), xg.asarray(x, requires_grad=True)
    loss = xg.sum(f(qt, k, v) ** 2 * c) + xg.sum(lf(xt, w, b) ** 2 * lc)
    for n in (1, 2, 3):
        loss.backward(retain_graph=True)
        np.testing.assert_allclose(backend.to_numpy(qt.grad), n * backend.to_numpy(want_q), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(backend.to_numpy(xt.grad), n * backend.to_numpy(want_x), rtol=RTOL, atol=ATOL)
    del loss
    gc.collect()
    assert not fmod._JOINT


def test_embedding_and_cross_entropy_native_kernels_are_found_on_torch(backend: Any) -> None:
    for name in ("embedding", "embedding_vjp", "log_softmax"):
        assert (conv_mod.native_kernel(backend.xp, name) is not None) == (backend.name == "torch")


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding_matches_portable(backend: Any, padding_idx: int | None) -> None:
    rng = np.random.default_rng(11)
    idx = backend.asarray(rng.integers(0, 6, (3, 4)))
    w, c = backend.asarray(_r(6, 5)), backend.asarray(_r(3, 4, 5, seed=1))
    v = backend.asarray(_r(6, 5, seed=2))

    def f(w: Any, i: Any = idx) -> Any:
        return F.embedding(i, w, padding_idx=padding_idx)

    def loss(w: Any) -> Any:
        return xg.sum(f(w) ** 3 * c)

    def per(w: Any, i: Any = idx) -> Any:
        return xg.grad(lambda w: xg.sum(f(w, i) ** 3))(w)

    _close(backend, *_both(lambda: f(w)))
    _close(backend, *_both(lambda: xg.grad(loss)(w)))
    _close(backend, *_both(lambda: xg.jvp(f, (w,), (v,))))
    _close(backend, *_both(lambda: xg.hvp(loss, (w,), (v,))))
    _close(backend, *_both(lambda: xg.grad(lambda w: xg.sum(xg.grad(loss)(w) * v))(w)))
    # vmap over the indices, over the weight (a table per example), over both; against a loop
    ib = backend.asarray(rng.integers(0, 6, (3, 3, 4)))
    wb = backend.asarray(_r(3, 6, 5, seed=3))
    for in_axes, args in (((None, 0), (w, ib)), ((0, None), (wb, idx)), ((0, 0), (wb, ib))):
        got, ref = _both(lambda in_axes=in_axes, args=args: xg.vmap(per, in_axes=in_axes)(*args))
        _close(backend, got, ref)
        loop = [per(*[a if ax is None else a[k, ...] for a, ax in zip(args, in_axes, strict=True)]) for k in range(3)]
        np.testing.assert_allclose(backend.to_numpy(got), np.stack([backend.to_numpy(r) for r in loop]),
                                   rtol=RTOL, atol=ATOL)
    want = per(w)
    for use in (True, False):
        conv_mod.USE_NATIVE[0] = use
        try:
            j = xg.jit(per)
            for _ in range(2):  # the trace, then the replay
                _close(backend, j(w), want)
        finally:
            conv_mod.USE_NATIVE[0] = True


@pytest.mark.parametrize("kw", [{}, {"label_smoothing": 0.1, "reduction": "sum"}, {"ignore_index": 1, "reduction": "none"}])
def test_cross_entropy_matches_portable(backend: Any, kw: dict[str, Any]) -> None:
    x, v = backend.asarray(_r(4, 5)), backend.asarray(_r(4, 5, seed=1))
    t = backend.asarray(np.array([0, 1, 4, 2]))

    def loss(x: Any, t: Any = t) -> Any:
        return xg.sum(F.cross_entropy(x, t, **kw) ** 2)

    def per(x: Any, t: Any = t) -> Any:
        return xg.grad(loss)(x, t)

    _close(backend, *_both(lambda: F.cross_entropy(x, t, **kw)))
    _close(backend, *_both(lambda: per(x)))
    _close(backend, *_both(lambda: xg.hvp(loss, (x,), (v,))))
    _close(backend, *_both(lambda: xg.grad(lambda x: xg.sum(per(x) * v))(x)))
    xb = backend.asarray(_r(3, 4, 5, seed=2))
    got, ref = _both(lambda: xg.vmap(per)(xb))
    _close(backend, got, ref)
    _close(backend, got, np.stack([backend.to_numpy(per(xb[k, ...])) for k in range(3)]))
    for use in (True, False):
        conv_mod.USE_NATIVE[0] = use
        try:
            j = xg.jit(per)  # (the target an argument: captured, array-api-strict's == refuses the tracer)
            for _ in range(2):  # the trace, then the replay
                _close(backend, j(x, t), per(x))
        finally:
            conv_mod.USE_NATIVE[0] = True


def test_importing_xpgrad_imports_no_dask() -> None:
    import subprocess
    import sys

    code = ("import sys, xpgrad, xpgrad.nn.functional, xpgrad.nn.conv; "
            "assert 'dask' not in sys.modules, sorted(m for m in sys.modules if m.startswith('dask'))")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_dask_kernels_are_one_task_per_batch_chunk(computes: Any) -> None:
    """A convolution, a transposed one and the poolings on a batch-chunked Dask array: forward and
    gradients are a few tasks per chunk (the composition built some 10**4), no compute while
    building them, and the values are NumPy's."""
    import dask
    import dask.array as da

    rng = np.random.default_rng(0)
    xn, wn = rng.standard_normal((24, 4, 8, 7)), rng.standard_normal((6, 4, 3, 3))
    wtn = rng.standard_normal((4, 3, 3, 3))
    x, w, wt = da.from_array(xn, chunks=(6, 4, 8, 7)), da.from_array(wn), da.from_array(wtn)

    def fns(xp_w: Any, xp_wt: Any) -> list[Callable[[Any], Any]]:
        return [lambda x: F.conv2d(x, xp_w, stride=2, padding=1),
                lambda x: F.conv_transpose2d(x, xp_wt, stride=2, padding=1, output_padding=1),
                lambda x: F.max_pool2d(x, 2),
                lambda x: F.max_pool2d(x, 3, stride=2, padding=1),
                lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)]

    for got_f, want_f in zip(fns(w, wt), fns(wn, wtn), strict=True):
        c = rng.standard_normal(tuple(want_f(xn).shape))
        cd = da.from_array(c)

        def loss(x: Any, f: Any = got_f, c: Any = cd) -> Any:
            return xg.sum(f(x) * c)

        before = computes.n
        y = got_f(x).data
        gx = xg.grad(loss)(x)
        assert computes.n == before, "a compute while building the graphs"
        for arr in (y, gx):
            assert len(dict(arr.__dask_graph__())) <= 8 * 4 + 8  # 4 batch chunks, a few tasks each
        got_y, got_g = dask.compute(y, gx)
        np.testing.assert_allclose(got_y, np.asarray(want_f(xn).data), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got_g, np.asarray(xg.grad(lambda x, f=want_f, c=c: xg.sum(f(x) * c))(xn)),
                                   rtol=1e-12, atol=1e-12)
    # the weight's gradient: per chunk a partial sum, then their sum
    gw = xg.grad(lambda w: xg.sum(F.conv2d(x, w, padding=1) ** 2))(w)
    assert len(dict(gw.__dask_graph__())) <= 8 * 4 + 8
    want = xg.grad(lambda w: xg.sum(F.conv2d(xn, w, padding=1) ** 2))(wn)
    np.testing.assert_allclose(np.asarray(gw.compute()), np.asarray(want), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("which", ["layer_norm", "attention"])
def test_fused_kernels_under_jacfwd_and_hessian_match_the_composition(backend: Any, which: str) -> None:
    """jacfwd and hessian through the fused primitives (forward-mode rules, and a forward over
    the reverse) equal the composition's, on every backend."""
    F = xg.nn.functional
    w, b = backend.asarray(_r(4, seed=1)), backend.asarray(_r(4, seed=2))
    k, v = backend.asarray(_r(1, 3, 4, seed=3)), backend.asarray(_r(1, 3, 4, seed=4))

    def f(x: Any) -> Any:
        if which == "layer_norm":
            return F.layer_norm(x, (4,), w, b)
        return F.scaled_dot_product_attention(x, k, v, is_causal=True)

    x = backend.asarray(_r(1, 3, 4))
    got, ref = _both(lambda: xg.jacfwd(f)(x))
    _close(backend, got, ref)
    got, ref = _both(lambda: xg.hessian(lambda x: xg.sum(xg.sin(f(x))))(x))
    _close(backend, got, ref)
