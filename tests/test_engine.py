"""The backward engine: accumulation, errors, retain_graph, hooks, grad mode, memory."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import weakref
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.autograd import Tensor, primitive


def leaf(values: object) -> Tensor:
    return xg.asarray(np.asarray(values, dtype=np.float64), requires_grad=True)


def test_backward_accumulates_into_leaves() -> None:
    x = leaf([1.0, 2.0])
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0])
    assert x.is_leaf and x.grad_fn is None and x.grad.grad_fn is None


def test_shared_subexpression_accumulates() -> None:
    x = leaf([3.0])
    y = x * x
    z = y * y + y  # dz/dx = (2y + 1) * 2x
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [(2 * 9 + 1) * 6])


def test_non_scalar_backward_needs_gradient() -> None:
    x = leaf([1.0, 2.0])
    with pytest.raises(xg.XpgradValueError, match="gradient="):
        (x * 2).backward()
    y = x * 2
    y.backward(gradient=np.array([1.0, 10.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 20.0])


def test_gradient_mismatch_errors() -> None:
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.raises(xg.XpgradValueError, match="shape"):
        y.backward(gradient=np.ones(3))
    with pytest.raises(xg.XpgradTypeError, match="dtype"):
        y.backward(gradient=np.ones(2, dtype=np.float32))
    import array_api_strict as s

    dev = s.Device("device1")
    xs = xg.asarray(s.asarray([1.0, 2.0]), requires_grad=True)
    with pytest.raises(xg.DeviceMismatchError, match="device"):
        (xs * 2).backward(gradient=s.asarray([1.0, 1.0], device=dev))


def test_second_backward_needs_retain_graph() -> None:
    x = leaf([1.0, 2.0])
    y = xg.sin(x).sum()
    y.backward()
    with pytest.raises(xg.GraphFreedError, match="retain_graph=True"):
        y.backward()
    x2 = leaf([1.0, 2.0])
    y2 = xg.sin(x2).sum()
    y2.backward(retain_graph=True)
    y2.backward()
    np.testing.assert_allclose(x2.grad.numpy(), 2 * np.cos([1.0, 2.0]))


def test_saved_values_are_freed_after_backward() -> None:
    x = leaf([1.0, 2.0])
    y = xg.sin(x)
    node = y.grad_fn
    assert node.saved is not None
    y.sum().backward()
    assert node.saved is None and node.freed


def test_graph_is_collected_without_cycles() -> None:
    x = leaf(np.ones(4))
    y = xg.exp(xg.sin(x) * x).sum()
    ref = weakref.ref(y.grad_fn)
    inner = weakref.ref(y.grad_fn.parents[0])
    y.backward()
    del y
    assert ref() is None and inner() is None  # freed by refcounting alone: no cycles
    gc.collect()
    assert x.grad is not None


def test_create_graph_outputs_are_collected() -> None:
    x = leaf([0.5, 1.5])
    y = xg.sin(x).sum()
    (g,) = xg.autograd.grad(y, x, create_graph=True)
    ref = weakref.ref(g.grad_fn)
    del g, y
    assert ref() is None


def test_long_chain_has_no_recursion_limit() -> None:
    x = leaf([0.5])
    y = x
    n = max(100_000, sys.getrecursionlimit() * 20)
    for _ in range(n):
        y = y * 1.0
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0])


def test_hooks_on_leaves_and_intermediates() -> None:
    x = leaf([1.0, 2.0])
    seen = []
    h = x.register_hook(lambda g: g * 10)
    y = x * 2
    y.register_hook(lambda g: seen.append(g.numpy().copy()))
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 20.0])
    np.testing.assert_allclose(seen[0], [1.0, 1.0])
    h.remove()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_retain_grad_on_intermediate() -> None:
    x = leaf([1.0, 2.0])
    y = x * 3
    y.retain_grad()
    (y * y).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [6.0, 12.0])


def test_requires_grad_only_on_floats() -> None:
    with pytest.raises(xg.XpgradTypeError, match="int64"):
        xg.asarray([1, 2], requires_grad=True)
    with pytest.raises(xg.XpgradTypeError, match="bool"):
        xg.asarray([True], requires_grad=True)


def test_missing_rule_raises_naming_function_and_argument() -> None:
    p = primitive("test_half_rule", lambda xp, a, b: a * b)
    p.defvjp(lambda xp, g, ans, a, b: g * b, None)
    x = leaf([1.0])
    p(x, np.array([2.0]))  # fine: arg 1 is a constant
    with pytest.raises(xg.NonDifferentiableError, match=r"test_half_rule.*argument 1"):
        p(np.array([2.0]), x)


def test_backward_on_constant_raises() -> None:
    x = xg.asarray([1.0])
    with pytest.raises(xg.NonDifferentiableError, match="does not require grad"):
        (x * 2).sum().backward()


def test_no_grad_and_enable_grad_restore_on_exception() -> None:
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="boom"):
        with xg.no_grad():
            assert not xg.is_grad_enabled()
            raise RuntimeError("boom")
    assert xg.is_grad_enabled()
    with xg.no_grad():
        assert not (x * 2).requires_grad
        with xg.enable_grad():
            assert (x * 2).requires_grad
        assert not xg.is_grad_enabled()
    with xg.set_grad_enabled(False):
        assert not xg.is_grad_enabled()

    @xg.no_grad()
    def f(t: Tensor) -> Tensor:
        return t * 2

    assert not f(x).requires_grad and xg.is_grad_enabled()


def test_grad_mode_is_thread_local() -> None:
    seen = {}
    start = threading.Event()
    done = threading.Event()

    def worker() -> None:
        start.wait()
        seen["worker"] = (leaf([1.0]) * 2).requires_grad
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    with xg.no_grad():
        start.set()
        done.wait()
        seen["main"] = (leaf([1.0]) * 2).requires_grad
    t.join()
    assert seen == {"worker": True, "main": False}


def test_grad_mode_is_task_local() -> None:
    async def under(mode: bool, out: list[bool]) -> None:
        with xg.set_grad_enabled(mode):
            for _ in range(5):
                await asyncio.sleep(0)
                out.append(xg.is_grad_enabled())

    async def main() -> tuple[list[bool], list[bool]]:
        a: list[bool] = []
        b: list[bool] = []
        await asyncio.gather(under(True, a), under(False, b))
        return a, b

    a, b = asyncio.run(main())
    assert a == [True] * 5 and b == [False] * 5


def test_create_graph_records_backward() -> None:
    x = leaf([0.3, 1.1])
    y = (x * x * x).sum()
    y.backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and g.grad_fn is not None
    (gg,) = xg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * np.array([0.3, 1.1]))


def test_autograd_grad_returns_and_does_not_accumulate() -> None:
    x = leaf([1.0, 2.0])
    w = leaf([3.0])
    (gx, gw) = xg.autograd.grad((x * w).sum(), [x, w])
    np.testing.assert_allclose(gx.numpy(), [3.0, 3.0])
    np.testing.assert_allclose(gw.numpy(), [3.0])
    assert x.grad is None and w.grad is None
    unused = leaf([1.0])
    (gu,) = xg.autograd.grad((x * 2).sum(), [unused])
    np.testing.assert_allclose(gu.numpy(), [0.0])
    with pytest.raises(xg.XpgradRuntimeError, match="not used"):
        xg.autograd.grad((x * 2).sum(), [unused], allow_unused=False)


def test_backward_inputs_restricts_accumulation() -> None:
    x = leaf([1.0])
    w = leaf([2.0])
    (x * w).sum().backward(inputs=[x])
    np.testing.assert_allclose(x.grad.numpy(), [2.0])
    assert w.grad is None


def test_constants_mix_with_tensors() -> None:
    x = leaf([1.0, 2.0])
    y = (2.0 * x + np.array([1.0, 1.0]) - 1 * x * np.array([3.0, 4.0])).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2 - 3, 2 - 4])


def test_broadcasting_is_undone() -> None:
    a = xg.asarray(np.ones((3, 1)), requires_grad=True)
    b = xg.asarray(np.arange(4.0), requires_grad=True)
    (a * b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.full((3, 1), 6.0))
    np.testing.assert_allclose(b.grad.numpy(), np.full(4, 3.0))


def test_tensor_attributes_and_repr() -> None:
    x = xg.asarray(np.zeros((2, 3)), requires_grad=True)
    assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6
    assert x.dtype == xg.float64 and x.device == "cpu"
    assert "requires_grad=True" in repr(x)
    y = x * 2
    assert "grad_fn=<multiply>" in repr(y) and "dtype=float64" in repr(y)
    assert x.detach().requires_grad is False
    with pytest.raises(xg.XpgradRuntimeError, match="detach"):
        x.numpy()
    assert float(xg.asarray(np.array(2.5))) == 2.5
    assert int(xg.asarray(np.array(3))) == 3
    assert bool(xg.asarray(np.array(True)))
    assert xg.asarray(np.ones(1)).__array_namespace__() is xg.array_namespace(xg.asarray(np.ones(1)))
    with pytest.raises(xg.XpgradValueError, match="api_version"):
        x.__array_namespace__(api_version="1999.01")


def test_array_api_compat_sees_xpgrad() -> None:
    import array_api_compat

    t = xg.asarray([1.0])
    assert array_api_compat.array_namespace(t) is t.__array_namespace__()
    assert array_api_compat.array_namespace(t).__name__ == "xpgrad"


# ------------------------------------------------- in-place accumulation and donated gradients
def _fanout(x: Tensor, y: Tensor) -> Tensor:
    """Gradients that fan out, meet again, and pass through exp/sin/tanh/multiply chains."""
    e = xg.exp(xg.sin(x))
    t = xg.tanh(x * y)
    s = x + y
    return xg.sum(e * e + xg.exp(e) * y + xg.sin(t * t) * t + xg.exp(s) * xg.sin(s + s))


def _fanout_grads(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    e = np.exp(np.sin(a))
    de = np.cos(a) * e  # d e / d a
    t = np.tanh(a * b)
    u = t * t
    dt = 2 * t * np.cos(u) * t + np.sin(u)  # d/dt of sin(t*t) * t
    s = a + b
    ds = np.exp(s) * (np.sin(2 * s) + 2 * np.cos(2 * s))
    dtu = (1 - t * t) * dt
    gx = (2 * e + np.exp(e) * b) * de + dtu * b + ds
    gy = np.exp(e) + dtu * a + ds
    return gx, gy


def test_inplace_gradient_reuse_is_exact(backend: object) -> None:
    """Buffers the engine owns are reused in place; shared ones (fan-out, x * x) never are."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    x = xg.asarray(backend.asarray(a), requires_grad=True)  # type: ignore[attr-defined]
    y = xg.asarray(backend.asarray(b), requires_grad=True)  # type: ignore[attr-defined]
    gx, gy = xg.autograd.grad(_fanout(x, y), [x, y])
    rx, ry = _fanout_grads(a, b)
    np.testing.assert_allclose(backend.to_numpy(gx), rx, rtol=1e-10)  # type: ignore[attr-defined]
    np.testing.assert_allclose(backend.to_numpy(gy), ry, rtol=1e-10)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(backend.to_numpy(x), a)  # type: ignore[attr-defined]
    z = xg.asarray(backend.asarray(a), requires_grad=True)  # type: ignore[attr-defined]
    (gz,) = xg.autograd.grad(xg.sum(xg.exp(z) * xg.exp(z) * z), [z])  # one buffer reaches z twice
    np.testing.assert_allclose(backend.to_numpy(gz), np.exp(2 * a) * (2 * a + 1), rtol=1e-10)  # type: ignore[attr-defined]


def test_gradients_shown_to_hooks_or_returned_are_not_reused() -> None:
    a = np.array([0.5, -1.0, 2.0])
    x = leaf(a)
    seen: list[np.ndarray] = []
    s = xg.sin(x)
    s.register_hook(lambda g: seen.append(g.data))  # kept, not copied
    e = xg.exp(s)
    e.register_hook(lambda g: seen.append(g.data))
    (xg.sum(e * x)).backward()
    np.testing.assert_allclose(seen[0], a)  # de = x, untouched by exp's rule afterwards
    np.testing.assert_allclose(seen[1], a * np.exp(np.sin(a)))
    x = leaf(a)
    s = xg.sin(x)
    e = xg.exp(s)
    ge, gs, gx = xg.autograd.grad(xg.sum(e * x), [e, s, x])
    np.testing.assert_allclose(ge.numpy(), a)
    np.testing.assert_allclose(gs.numpy(), a * np.exp(np.sin(a)))
    np.testing.assert_allclose(gx.numpy(), np.exp(np.sin(a)) * (a * np.cos(a) + 1))


def test_elementwise_chain_backward_peak_memory() -> None:
    """sum(exp(sin(x)) * x): at most three live arrays of x's size (the tape's floor here)."""
    import tracemalloc

    x = leaf(np.random.default_rng(0).standard_normal(1 << 20))

    def run() -> Tensor:
        return xg.autograd.grad(xg.sum(xg.exp(xg.sin(x)) * x), [x])[0]

    run()
    tracemalloc.start()
    try:
        g = run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3.1 * x.data.nbytes, peak / x.data.nbytes
    a = x.data
    np.testing.assert_allclose(g.numpy(), np.exp(np.sin(a)) * (a * np.cos(a) + 1), rtol=1e-10)


def test_complex_output_needs_an_explicit_gradient() -> None:
    """PyTorch's rule: ones are seeded only for real outputs (which real function of a
    complex output is meant is otherwise ambiguous); gradient= makes it explicit."""
    z = xg.asarray([1.0 + 2.0j, 3.0 - 1.0j], requires_grad=True)
    out = xg.sum(z * z)
    with pytest.raises(xg.XpgradTypeError, match=r"backward: the output is complex \(complex128\)"):
        out.backward(retain_graph=True)
    assert z.grad is None
    with pytest.raises(xg.XpgradTypeError, match=r"grad: the output is complex"):
        xg.autograd.grad(out, z, retain_graph=True)
    out.backward(xg.asarray(1.0 + 0.0j))  # explicit: the gradient of Re(out)
    np.testing.assert_allclose(z.grad.data, np.conj(2 * np.asarray([1.0 + 2.0j, 3.0 - 1.0j])))
    (r,) = xg.autograd.grad(xg.real(xg.sum(z * z)), z)  # a real output needs nothing
    np.testing.assert_allclose(r.data, z.grad.data)


def test_integer_outputs_of_multi_output_primitives_are_constants() -> None:
    """sort records (sorted values, permutation): only the floating output is on the tape."""
    from xpgrad.autograd import PRIMITIVES

    x = xg.asarray([3.0, 1.0, 2.0], requires_grad=True)
    values, perm = PRIMITIVES["sort"](x, axis=-1, descending=False)
    assert values.requires_grad and values.grad_fn is not None
    assert not perm.requires_grad and perm.grad_fn is None
    with pytest.raises(xg.NonDifferentiableError):
        xg.sum(xg.astype(perm, xg.float64)).backward()
    xg.sum(values * xg.astype(perm, xg.float64)).backward()
    np.testing.assert_array_equal(x.grad.data, [0.0, 1.0, 2.0])  # x[1] is first (weight 1), x[2] ...
    # at higher order the saved permutation, handed back to the rule, is a constant too
    y = xg.asarray([3.0, 1.0, 2.0], requires_grad=True)
    (g,) = xg.autograd.grad(xg.sum(xg.sort(y) ** 3), y, create_graph=True)
    (h,) = xg.autograd.grad(xg.sum(g), y)
    np.testing.assert_allclose(h.data, 6 * np.asarray([3.0, 1.0, 2.0]))


def test_leaf_grads_are_own_writable_buffers() -> None:
    """As in PyTorch, .grad can be modified in place (gradient clipping does): a gradient the
    pass did not allocate for one leaf alone (add's shared g, sum's broadcast view) is copied."""
    a = xg.asarray([1.0, 2.0], requires_grad=True)
    b = xg.asarray([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward()
    assert not np.shares_memory(a.grad.data, b.grad.data)
    a.grad *= 2.0
    np.testing.assert_array_equal(a.grad.data, [2.0, 2.0])
    np.testing.assert_array_equal(b.grad.data, [1.0, 1.0])
    c = xg.asarray([5.0], requires_grad=True)
    xg.sum(c * a).backward(inputs=[c])  # the gradient is a's data itself: c gets a copy
    assert not np.shares_memory(c.grad.data, a.data)
    c.grad += 1.0
    np.testing.assert_array_equal(a.data, [1.0, 2.0])


def test_unit_seed_skips_the_multiply_by_ones() -> None:
    """The implicit seed of a one-element output holds only ones, and so does sum's broadcast
    of it: g * d is then d itself, with no pass over the data. The values passed through are
    borrowed (saved inputs, constants): they reach the caller as copies and are never changed."""
    import tracemalloc

    n = 1 << 20
    x = leaf(np.random.default_rng(0).standard_normal(n))
    w = xg.asarray(np.random.default_rng(1).standard_normal(n))

    def run() -> Tensor:
        return xg.autograd.grad(xg.sum(x * w), [x])[0]

    run()
    tracemalloc.start()
    try:
        g = run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.1 * x.data.nbytes, peak / x.data.nbytes  # one array at a time
    np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert not np.shares_memory(g.data, w.data)
    g.data[:] = 0.0  # the caller's copy: w is untouched
    assert np.all(w.numpy() != 0.0)
    # an explicit gradient of ones is not a unit (it is the caller's array): same values
    (g2,) = xg.autograd.grad(xg.sum(x * w), [x], grad_outputs=xg.asarray(1.0))
    np.testing.assert_array_equal(g2.numpy(), w.numpy())
    # backward() into .grad: a buffer of x's own
    xg.sum(x * w).backward()
    assert not np.shares_memory(x.grad.data, w.data)
    x.grad *= 2.0
    np.testing.assert_array_equal(x.grad.numpy(), 2 * w.numpy())


def test_unit_seed_with_broadcasting_and_two_uses() -> None:
    a = leaf(np.ones((3, 1)))
    b = leaf(np.arange(4.0))
    (ga, gb) = xg.autograd.grad(xg.sum(a * b + b * b), [a, b])
    np.testing.assert_allclose(ga.numpy(), np.full((3, 1), 6.0))
    np.testing.assert_allclose(gb.numpy(), 3.0 + 3 * 2 * np.arange(4.0))
    c = leaf([1.0, 2.0])
    (gc,) = xg.autograd.grad(xg.sum(c * c), [c])  # both rules return c's data: summed, not aliased
    np.testing.assert_allclose(gc.numpy(), [2.0, 4.0])
    assert not np.shares_memory(gc.data, c.data)


class _CountingArray(np.ndarray):
    """An ndarray that counts the multiplies it takes part in."""

    multiplies = 0

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if ufunc is np.multiply:
            type(self).multiplies += 1
        inputs = tuple(np.asarray(i) if isinstance(i, _CountingArray) else i for i in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(o) if isinstance(o, _CountingArray) else o for o in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)


def test_unit_seed_multiplies_once() -> None:
    """sum(x * w): the forward's multiply and no other (the gradient w.r.t. x is w itself)."""
    x = leaf(np.arange(1.0, 5.0).view(_CountingArray))
    w = xg.asarray(np.full(4, 3.0).view(_CountingArray))
    _CountingArray.multiplies = 0
    (g,) = xg.autograd.grad(xg.sum(x * w), [x])
    assert _CountingArray.multiplies == 1
    np.testing.assert_array_equal(np.asarray(g.data), [3.0, 3.0, 3.0, 3.0])
    _CountingArray.multiplies = 0
    (g,) = xg.autograd.grad(xg.sum(x * w), [x], grad_outputs=xg.asarray(1.0))  # explicit: multiplied
    assert _CountingArray.multiplies == 2


def test_create_graph_runs_the_rules_on_the_namespace_the_package_hands_down(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import ModuleType

    from xpgrad.autograd import _grad_mode

    assert _grad_mode.graph_namespace() is xg  # registered by `import xpgrad`
    used: list[str] = []

    class Spy(ModuleType):  # xpgrad itself, recording what the rules look up
        def __getattr__(self, name: str) -> Any:
            used.append(name)
            return getattr(xg, name)

    monkeypatch.setattr(_grad_mode, "_GRAPH_NS", Spy("spy"))
    x = leaf([0.5, 1.0])
    (gx,) = xg.autograd.grad(xg.sin(x).sum(), x, create_graph=True)
    assert "cos" in used  # sin's rule ran on the handed-down namespace
    np.testing.assert_allclose(gx.detach().numpy(), np.cos([0.5, 1.0]))
    (ggx,) = xg.autograd.grad(gx.sum(), x)  # and was recorded
    np.testing.assert_allclose(ggx.numpy(), -np.sin([0.5, 1.0]))


def test_the_engine_does_not_import_the_package() -> None:
    import ast
    from pathlib import Path

    import xpgrad.autograd

    root = Path(xpgrad.autograd.__file__).parent
    for name in ("_engine.py", "_grad_mode.py"):
        tree = ast.parse((root / name).read_text())
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                assert all(a.name.split(".")[0] != "xpgrad" for a in n.names), f"{name}:{n.lineno}"
            elif isinstance(n, ast.ImportFrom):
                assert n.level > 0 or (n.module or "").split(".")[0] != "xpgrad", f"{name}:{n.lineno}"
