"""xg.vmap's API and composition: in_axes/out_axes trees, nesting, axis_size, chunk_size, every
order of composition with the differentiation transforms, JAX's documented examples, and
the errors (each names vmap or the function and the offending value).

The per-primitive batching rules are tested in tests/test_vmap_rules.py.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.autograd._batched import STACK

from .conftest import Backend


def _np(a: Any) -> np.ndarray:
    from ._util import to_numpy

    return np.asarray(to_numpy(a))


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------- JAX's own examples
def test_jax_docs_dot_products(backend: Backend) -> None:
    """jax.vmap's docstring: vv -> mv -> mm by nesting, and in_axes/out_axes."""
    rng = _rng()
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))

    def vv(x: Any, y: Any) -> Any:
        return xg.vecdot(x, y)

    mv = xg.vmap(vv, (0, None), 0)
    mm = xg.vmap(mv, (None, 1), 1)
    got = mm(backend.asarray(a), backend.asarray(b))
    np.testing.assert_allclose(_np(got), a @ b, rtol=1e-12)
    assert type(got) is type(backend.asarray(a))  # the caller's arrays back
    # out_axes=1 and a negative in_axes
    got2 = xg.vmap(lambda x: x * 2.0, in_axes=-1, out_axes=1)(backend.asarray(b))
    np.testing.assert_allclose(_np(got2), 2 * b, rtol=1e-12)


def test_jax_docs_pytrees_and_dict_in_axes(backend: Backend) -> None:
    """in_axes matching a tuple/dict structure, None for shared entries; pytree outputs."""
    rng = _rng(1)
    xs, w = rng.standard_normal((5, 3)), rng.standard_normal(3)
    p = {"w": backend.asarray(w), "scale": backend.asarray(np.asarray(2.0))}

    def f(params: dict[str, Any], x: Any) -> Any:
        y = params["scale"] * xg.vecdot(params["w"], x)
        return {"y": y, "both": (y, x)}

    out = xg.vmap(f, in_axes=({"w": None, "scale": None}, 0))(p, backend.asarray(xs))
    want = 2.0 * xs @ w
    np.testing.assert_allclose(_np(out["y"]), want, rtol=1e-12)
    np.testing.assert_allclose(_np(out["both"][0]), want, rtol=1e-12)
    np.testing.assert_allclose(_np(out["both"][1]), xs, rtol=1e-12)
    # out_axes as a tree: None for an output that does not vary
    o2 = xg.vmap(lambda x, c: (x + c, c), in_axes=(0, None), out_axes=(0, None))(backend.asarray(xs), backend.asarray(w))
    np.testing.assert_allclose(_np(o2[1]), w)


def test_jax_tutorial_per_example_gradients(backend: Backend) -> None:
    """JAX's "automatic vectorization" tutorial: per-example gradients of a loss, vmap(grad)."""
    rng = _rng(2)
    X, y, w = rng.standard_normal((8, 4)), rng.integers(0, 2, 8).astype(float), rng.standard_normal(4)

    def loss(w: Any, x: Any, t: Any) -> Any:
        z = xg.vecdot(w, x)
        return xg.logaddexp(0.0, z) - t * z

    per = xg.vmap(xg.grad(loss), in_axes=(None, 0, 0))(backend.asarray(w), backend.asarray(X), backend.asarray(y))
    p = 1 / (1 + np.exp(-(X @ w)))
    np.testing.assert_allclose(_np(per), (p - y)[:, None] * X, rtol=1e-10)
    # the same with value_and_grad, and through jacrev inside vmap
    vals, grads = xg.vmap(xg.value_and_grad(loss), in_axes=(None, 0, 0))(
        backend.asarray(w), backend.asarray(X), backend.asarray(y))
    np.testing.assert_allclose(_np(grads), (p - y)[:, None] * X, rtol=1e-10)
    np.testing.assert_allclose(_np(vals), np.logaddexp(0, X @ w) - y * (X @ w), rtol=1e-10)


# ---------------------------------------------------------------------- composition
def _f(w: Any, x: Any) -> Any:
    return xg.sum(xg.tanh(w * x) ** 2) + xg.sum(xg.sin(x) * w)


def _loop_grad(w: np.ndarray, xs: np.ndarray, argnums: int) -> np.ndarray:
    return np.stack([xg.grad(_f, argnums=argnums)(w, x) for x in xs])


def test_every_order_with_reverse_mode(backend: Backend) -> None:
    rng = _rng(3)
    w, xs = rng.standard_normal(3), rng.standard_normal((4, 3))
    bw, bx = backend.asarray(w), backend.asarray(xs)
    # vmap(grad) w.r.t. the shared and the mapped argument
    for argnums in (0, 1):
        got = xg.vmap(xg.grad(_f, argnums=argnums), in_axes=(None, 0))(bw, bx)
        np.testing.assert_allclose(_np(got), _loop_grad(w, xs, argnums), rtol=1e-10)
    # grad(vmap): the gradient of the batch's sum
    total = xg.grad(lambda w_, x_: xg.sum(xg.vmap(_f, in_axes=(None, 0))(w_, x_)), argnums=(0, 1))(bw, bx)
    np.testing.assert_allclose(_np(total[0]), _loop_grad(w, xs, 0).sum(0), rtol=1e-10)
    np.testing.assert_allclose(_np(total[1]), _loop_grad(w, xs, 1), rtol=1e-10)
    # vmap(vjp) and vjp(vmap)
    _out, pull = xg.vjp(xg.vmap(_f, in_axes=(None, 0)), bw, bx)
    gw, _gx = pull(backend.asarray(np.ones(4)))
    np.testing.assert_allclose(_np(gw), _loop_grad(w, xs, 0).sum(0), rtol=1e-10)
    per = xg.vmap(lambda x: xg.vjp(lambda w_: _f(w_, x), bw)[1](backend.asarray(np.asarray(1.0)))[0])(bx)
    np.testing.assert_allclose(_np(per), _loop_grad(w, xs, 0), rtol=1e-10)
    # grad(grad) inside vmap and vmap inside grad(grad)
    d2 = xg.vmap(xg.grad(lambda x: xg.sum(xg.grad(lambda y: xg.sum(y ** 3))(x))))(bx)
    np.testing.assert_allclose(_np(d2), 6 * xs, rtol=1e-10)


def test_every_order_with_forward_mode(backend: Backend) -> None:
    rng = _rng(4)
    w, xs, ts = rng.standard_normal(3), rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    # (closed over as a Tensor: array-api-strict's own operators refuse other types)
    bw, bx, bt = xg.asarray(backend.asarray(w)), backend.asarray(xs), backend.asarray(ts)

    def g(x: Any) -> Any:
        return xg.tanh(bw * x)

    want = (1 - np.tanh(w * xs) ** 2) * w * ts
    # vmap(jvp): primals and tangents mapped, or one shared primal with a batch of tangents
    _, dy = xg.vmap(lambda x, t: xg.jvp(g, (x,), (t,)))(bx, bt)
    np.testing.assert_allclose(_np(dy), want, rtol=1e-10)
    _, dy0 = xg.vmap(lambda t: xg.jvp(g, (bx[0, ...],), (t,)), in_axes=0)(bt)
    np.testing.assert_allclose(_np(dy0), (1 - np.tanh(w * xs[0]) ** 2) * w * ts, rtol=1e-10)
    # jvp(vmap)
    _, dy2 = xg.jvp(xg.vmap(g), (bx,), (bt,))
    np.testing.assert_allclose(_np(dy2), want, rtol=1e-10)
    # hvp inside vmap: a batch of Hessian-vector products
    hv = xg.vmap(lambda x, t: xg.hvp(lambda y: xg.sum(y ** 4), (x,), (t,)))(bx, bt)
    np.testing.assert_allclose(_np(hv), 12 * xs ** 2 * ts, rtol=1e-10)


def test_jacobians_and_hessians_inside_and_around_vmap(backend: Backend) -> None:
    rng = _rng(5)
    a = rng.standard_normal((3, 3)) / 3
    xs = rng.standard_normal((4, 3))
    ba, bx = xg.asarray(backend.asarray(a)), backend.asarray(xs)

    def f(x: Any) -> Any:
        return xg.tanh(ba @ x)

    def jac(x: np.ndarray) -> np.ndarray:
        return (1 - np.tanh(a @ x) ** 2)[:, None] * a

    want = np.stack([jac(x) for x in xs])
    for t in (xg.jacrev, xg.jacfwd):
        np.testing.assert_allclose(_np(xg.vmap(t(f))(bx)), want, rtol=1e-10)
    # a jacobian of a vmapped function: block diagonal
    big = xg.jacrev(xg.vmap(f))(bx)
    np.testing.assert_allclose(_np(big)[np.arange(4), :, np.arange(4), :], want, rtol=1e-10)
    # hessians, one per example
    def s(x: Any) -> Any:
        return xg.sum(xg.tanh(ba @ x) ** 2)

    hs = _np(xg.vmap(xg.hessian(s))(bx))
    for x, h in zip(xs, hs):
        np.testing.assert_allclose(h, _np(xg.hessian(s)(backend.asarray(x))), rtol=1e-10)


def test_jacobian_chunk_size_and_hessian_against_torch_func(np_backend: Backend) -> None:
    torch = pytest.importorskip("torch")
    rng = _rng(6)
    a, x = rng.standard_normal((20, 20)) / 5, rng.standard_normal(20)

    def f(v: Any) -> Any:
        return xg.sum(xg.tanh(a @ v) ** 2) + xg.special.logsumexp(v)

    ta = torch.from_numpy(a)
    with warnings.catch_warnings():  # (torch.func warns about its own use of torch.jit.script)
        warnings.simplefilter("ignore", DeprecationWarning)
        want_h = torch.func.hessian(lambda v: (torch.tanh(ta @ v) ** 2).sum() + torch.logsumexp(v, 0))(torch.from_numpy(x))
        want_j = torch.func.jacrev(lambda v: torch.tanh(ta @ v))(torch.from_numpy(x))
    for cs in (None, 1, 7, 20, 100):
        np.testing.assert_allclose(xg.hessian(f, chunk_size=cs)(x), want_h.numpy(), rtol=1e-10, atol=1e-12)
    for cs in (None, 3):
        np.testing.assert_allclose(xg.jacrev(lambda v: xg.tanh(a @ v), chunk_size=cs)(x), want_j.numpy(), rtol=1e-12)
        np.testing.assert_allclose(xg.jacfwd(lambda v: xg.tanh(a @ v), chunk_size=cs)(x), want_j.numpy(), rtol=1e-12)


def test_nested_vmap_and_axis_size_and_chunks(backend: Backend) -> None:
    rng = _rng(7)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    pair = xg.vmap(xg.vmap(lambda a, b: xg.sum((a - b) ** 2), in_axes=(None, 0)), in_axes=(0, None))
    d = _np(pair(backend.asarray(x), backend.asarray(y)))
    np.testing.assert_allclose(d, ((x[:, None] - y[None]) ** 2).sum(-1), rtol=1e-12)
    # no mapped argument: axis_size, the output broadcast
    c = xg.vmap(lambda a: a * 2.0, in_axes=None, axis_size=3)(backend.asarray(np.ones(2)))
    np.testing.assert_allclose(_np(c), np.full((3, 2), 2.0))
    # chunks give the same result as one pass, for every chunk size
    f = xg.vmap(lambda a, b: (xg.sum(a * b), a + b), in_axes=(0, None))
    full = f(backend.asarray(y), backend.asarray(x[0]))
    for cs in (1, 2, 5, 7):
        part = xg.vmap(lambda a, b: (xg.sum(a * b), a + b), in_axes=(0, None), chunk_size=cs)(
            backend.asarray(y), backend.asarray(x[0]))
        for p, q in zip(part, full):
            np.testing.assert_allclose(_np(p), _np(q), rtol=1e-12)


def test_keyword_arguments_are_mapped_along_axis_0(backend: Backend) -> None:
    xs = np.arange(6.0).reshape(3, 2)
    out = xg.vmap(lambda x, *, scale: x * scale)(backend.asarray(xs), scale=backend.asarray(np.asarray([1.0, 2.0, 3.0])))
    np.testing.assert_allclose(_np(out), xs * np.asarray([1.0, 2.0, 3.0])[:, None])


def test_tensors_in_tensors_out_and_gradients_flow() -> None:
    x = xg.asarray(np.arange(6.0).reshape(3, 2), requires_grad=True)
    y = xg.vmap(lambda r: xg.sum(r * r))(x)
    assert isinstance(y, xg.Tensor) and y.shape == (3,)
    xg.sum(y).backward()
    np.testing.assert_allclose(x.grad.data, 2 * x.data)


def test_loop_of_100_steps_with_per_example_clipping() -> None:
    """A DP-SGD-style loop: per-example gradients clipped, averaged, 100 steps; equals a Python loop."""
    rng = _rng(8)
    X, t = rng.standard_normal((16, 5)), rng.standard_normal(16)

    def loss(w: Any, x: Any, y: Any) -> Any:
        return (xg.vecdot(w, x) - y) ** 2

    per = xg.vmap(xg.grad(loss), in_axes=(None, 0, 0))
    w1 = np.zeros(5)
    w2 = np.zeros(5)
    for _ in range(100):
        g = per(w1, X, t)
        norms = np.linalg.norm(g, axis=1, keepdims=True)
        w1 = w1 - 0.05 * (g / np.maximum(1.0, norms)).mean(0)
        gl = np.stack([xg.grad(loss)(w2, x, y) for x, y in zip(X, t)])
        w2 = w2 - 0.05 * (gl / np.maximum(1.0, np.linalg.norm(gl, axis=1, keepdims=True))).mean(0)
    np.testing.assert_allclose(w1, w2, rtol=1e-12)


@pytest.mark.parametrize("s1", [(3,), (2, 3), (5, 2, 3)])
@pytest.mark.parametrize("s2", [(3,), (3, 4), (5, 3, 4)])
@pytest.mark.parametrize("mapped", [(0, None), (None, 0), (0, 0), (1, -1)])
def test_matmul_every_rank_and_mapping(s1: tuple[int, ...], s2: tuple[int, ...], mapped: tuple[Any, Any]) -> None:
    """matmul's rule folds batches into one product where it can: every pairing of ranks
    (1-D vectors included), with each operand mapped or not, against a loop; and vmap(grad)."""
    rng = _rng(11)
    B = 4
    def batch(shape: tuple[int, ...], ax: Any) -> np.ndarray:
        if ax is None:
            return rng.standard_normal(shape)
        return np.stack([rng.standard_normal(shape) for _ in range(B)], axis=ax % (len(shape) + 1))

    a, b = batch(s1, mapped[0]), batch(s2, mapped[1])
    take = [lambda arr, i, ax=ax: arr if ax is None else np.take(arr, i, axis=ax) for ax in mapped]
    want = np.stack([np.matmul(take[0](a, i), take[1](b, i)) for i in range(B)])
    np.testing.assert_allclose(xg.vmap(lambda x, y: x @ y, in_axes=mapped)(a, b), want, rtol=1e-12)
    g = xg.vmap(xg.grad(lambda x, y: xg.sum(xg.sin(x @ y)), argnums=(0, 1)), in_axes=mapped)(a, b)
    for k in range(B):
        gk = xg.grad(lambda x, y: xg.sum(xg.sin(x @ y)), argnums=(0, 1))(take[0](a, k), take[1](b, k))
        np.testing.assert_allclose(g[0][k], gk[0], rtol=1e-12)
        np.testing.assert_allclose(g[1][k], gk[1], rtol=1e-12)


# ---------------------------------------------------------------------- errors
def test_errors_name_vmap_and_the_value() -> None:
    a3, a4 = np.ones((3, 2)), np.ones((4, 2))
    with pytest.raises(xg.XpgradValueError, match=r"vmap: the mapped axes have different sizes: argument 0 has size 3 "
                                                  r"along axis 0, argument 1 has size 4 along axis 0"):
        xg.vmap(lambda a, b: a + b)(a3, a4)
    with pytest.raises(xg.XpgradValueError, match=r"vmap: out_axes is None for output 0, but that output varies"):
        xg.vmap(lambda a: a * 2, out_axes=None)(a3)
    with pytest.raises(xg.XpgradValueError, match=r"vmap: in_axes has 1 entries but the function got 2"):
        xg.vmap(lambda a, b: a + b, in_axes=(0,))(a3, a3)
    with pytest.raises(xg.XpgradValueError, match=r"vmap: in_axes 2 is out of bounds for argument 0, of shape \(3, 2\)"):
        xg.vmap(lambda a: a, in_axes=2)(a3)
    with pytest.raises(xg.XpgradValueError, match=r"vmap: argument 0 is a Python scalar"):
        xg.vmap(lambda a: a)(1.0)
    with pytest.raises(xg.XpgradValueError, match=r"vmap: no argument is mapped"):
        xg.vmap(lambda a: a, in_axes=None)(a3)
    with pytest.raises(xg.XpgradTypeError, match=r"vmap: in_axes must be an int, None, or a tuple/list/dict"):
        xg.vmap(lambda a: a, in_axes="0")
    with pytest.raises(xg.XpgradValueError, match=r"vmap: in_axes must match the structure of argument 0"):
        xg.vmap(lambda a: a, in_axes=((0, 0),))((a3, a3, a3))
    with pytest.raises(xg.XpgradValueError, match=r"vmap: out_axes 3 is out of bounds for output 0"):
        xg.vmap(lambda a: a, out_axes=3)(a3)
    with pytest.raises(xg.XpgradTypeError, match=r"vmap: f must be callable"):
        xg.vmap(3)
    with pytest.raises(xg.XpgradValueError, match=r"vmap: chunk_size must be a positive int"):
        xg.vmap(lambda a: a, chunk_size=0)
    with pytest.raises(xg.XpgradValueError, match=r"vmap: the mapped axes have different sizes: axis_size is 5; argument 0 has size 3"):
        xg.vmap(lambda a: a, axis_size=5)(a3)


@pytest.mark.parametrize(("convert", "what"), [(float, "float"), (bool, "bool"), (int, "int"),
                                                (lambda v: v.item(), "item"), (lambda v: v.tolist(), "tolist"),
                                                (lambda v: np.asarray(v), "__array__"), (lambda v: v.data, ".data")])
def test_a_batched_value_has_no_python_value(convert: Any, what: str) -> None:
    with pytest.raises(xg.XpgradTypeError, match=rf"^{what}: this value is batched by vmap"):
        xg.vmap(lambda a: convert(xg.sum(a)))(np.ones((3, 2)))


def test_a_leaked_batched_value_is_refused() -> None:
    kept: list[Any] = []
    xg.vmap(lambda a: (kept.append(a), a)[1])(np.ones((3, 2)))
    assert STACK.get() == ()
    with pytest.raises(xg.XpgradValueError, match=r"a value batched by a vmap was used outside that vmap"):
        xg.vmap(lambda b: b + kept[0])(np.ones((3, 2)))
    with pytest.raises(xg.XpgradTypeError, match=r"\.data: this value is batched"):
        _ = kept[0] + 1.0


def test_hot_path_counter_is_restored_after_errors() -> None:
    from xpgrad.autograd import _core

    before = _core._vmap_open
    with pytest.raises(ZeroDivisionError):
        xg.vmap(lambda a: 1 / 0)(np.ones(2))
    assert _core._vmap_open == before and STACK.get() == ()


def test_every_primitive_has_a_batching_rule_or_a_reason() -> None:
    """No primitive falls through to "has no batching rule": each has a rule, or is refused
    because its output shape depends on the data."""
    from xpgrad.autograd._batched import RULES, UNBATCHABLE
    from xpgrad.autograd._core import PRIMITIVES

    # (xpgrad's own: other tests register throwaway primitives in the same process)
    ours = [n for n, p in PRIMITIVES.items() if getattr(p.fwd, "__module__", "").startswith("xpgrad")]
    missing = sorted(n for n in ours if n not in RULES and n not in UNBATCHABLE)
    assert not missing, f"primitives without a batching rule: {missing}"
    # refused exactly where the output's shape depends on the data (a fact declared on the primitive)
    assert set(UNBATCHABLE) == {n for n in ours if PRIMITIVES[n].data_dependent_shape}
    assert {"nonzero", "unique_values"} <= set(UNBATCHABLE)
    for name, why in UNBATCHABLE.items():
        assert "depend" in why, (name, why)
