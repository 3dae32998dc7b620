"""The passes over a jitted NumPy program (xpgrad._jit_passes): each fires where it should and
never changes a value: the program with the pass gives, bit for bit, what the program without
it gives and what the trace (an eager run) gave, on new values, with an aliased input, and
after the caller writes into a returned array."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import _jit_passes as passes

OFF: dict[str, Callable[..., Any]] = {  # (each pass switched off; the last argument is optimize's PassState)
    "fold_constants": lambda t, ins, outs, state: ins,
    "elide_copies": lambda t, ins, outs, state: (ins, outs),
    "fuse_mask_casts": lambda t, ins, outs, state: ins,
    "direct_calls": lambda t, ins: ins,
    "fuse_elementwise": lambda t, ins, outs, state: ins,
}


@contextlib.contextmanager
def _without(name: str | None) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        if name is not None:
            mp.setattr(passes, name, OFF[name])
        yield


def _arrays(out: Any) -> list[np.ndarray]:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [np.array(o, copy=True) for o in outs]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
                                    for x, y in zip(a, b, strict=True))


def _names(prog: Any) -> list[str]:
    return [ins.name.split(".")[-1] for ins in prog.instructions]


def check(f: Callable[..., Any], calls: list[tuple[Any, ...]], name: str, scribble: bool = True) -> tuple[Any, Any]:
    """Run ``f`` jitted with and without pass ``name`` on ``calls`` (the first traces); both must agree
    bit for bit with each other and, on a repeat of the first arguments, with the trace's (eager) result.
    With ``scribble``, every returned array is overwritten before the next call. Returns both programs."""
    results, progs = [], []
    for off in (None, name):
        with _without(off), np.errstate(all="ignore"):
            j = xg.jit(f)
            progs.append(j.trace(*calls[0]))
            got = []
            for c in [*calls, calls[0]]:
                out = j(*c)
                got.append(_arrays(out))
                if scribble:
                    for o in out if isinstance(out, (tuple, list)) else (out,):
                        if isinstance(o, np.ndarray) and o.flags.writeable:
                            o[...] = 7
        results.append(got)
        assert _same(got[0], got[-1]), "a replay of the first arguments differs from the trace (eager) result"
    for with_pass, without in zip(*results, strict=True):
        assert _same(with_pass, without)
    return progs[0], progs[1]


SPECIAL = np.array([0.5, -0.0, 0.0, -2.0, np.inf, -np.inf, np.nan, 3.0])


def test_fold_constants_creation_and_like() -> None:
    def f(x: Any) -> Any:
        xp = x.__array_namespace__()
        c = xp.reshape(xp.arange(8.0), (8,))
        return x * c + xp.ones_like(x) * 2.0 - xp.zeros_like(x), xp.full_like(x, 3.0) / x

    x2 = np.linspace(-1, 1, 8)
    with_p, without = check(f, [(SPECIAL.copy(),), (x2,), (x2[::-1].copy(),)], "fold_constants")
    for fn in ("arange", "reshape", "ones_like", "zeros_like", "full_like"):
        assert fn in _names(without) and fn not in _names(with_p), fn
    assert len(with_p) < len(without)


def test_fold_constants_keeps_what_a_call_returns_or_writes() -> None:
    """A constant returned, or updated in place (or viewed by a value that is), stays a call:
    otherwise the caller's writes, or the program's own, would reach the next call."""

    def f(x: Any) -> Any:
        xp = x.__array_namespace__()
        z = xp.zeros(3)
        z[0] = x[0]
        w = xp.ones(4)
        v = w[1:]
        v[0] = x[1]  # written through a view of a constant
        return z * 2.0, xp.ones(2), w * 1.0

    with_p, _ = check(f, [(np.array([1.0, 2.0]),), (np.array([5.0, -1.0]),)], "fold_constants")
    assert _names(with_p).count("zeros") == 1 and _names(with_p).count("ones") == 2
    j = xg.jit(f)
    j(np.array([1.0, 2.0]))
    _, ones, _ = j(np.array([1.0, 2.0]))
    ones[...] = 9.0
    assert np.array_equal(j(np.array([1.0, 2.0]))[1], [1.0, 1.0])


def test_elide_copies() -> None:
    def f(x: Any) -> Any:
        xp = x.__array_namespace__()
        v = x * 2.0
        r = xp.asarray(v, copy=True)
        return r, xp.asarray(x * 3.0, copy=True) + 1.0

    with_p, without = check(f, [(SPECIAL.copy(),), (np.arange(8.0),)], "elide_copies")
    assert _names(without).count("asarray") == 2 and "asarray" not in _names(with_p)


def test_elide_copies_keeps_a_copy_of_a_viewed_value_or_an_input() -> None:
    def f(x: Any) -> Any:
        xp = x.__array_namespace__()
        v = x * 2.0
        t = v[1:]  # a view of v, read after the copy is written
        r = xp.asarray(v, copy=True)
        r[1] = 5.0
        return t + 0.0, r, xp.asarray(x, copy=True)

    with_p, _ = check(f, [(np.arange(4.0),), (np.array([1.0, -1.0, 2.0, 0.5]),)], "elide_copies")
    assert _names(with_p).count("asarray") == 2
    out = xg.jit(f)(np.arange(4.0))
    assert np.array_equal(out[0], [2.0, 4.0, 6.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fuse_mask_casts(dtype: Any) -> None:
    def f(g: Any, h: Any) -> Any:
        xp = g.__array_namespace__()
        a = g * xp.astype(h > 0, g.dtype)
        k = g * 1.0
        k *= xp.astype(h < 0, g.dtype)  # in place (a ReLU's backward)
        return a, k, xp.astype(h > 1, g.dtype) * g

    g = SPECIAL.astype(dtype)
    h = np.array([1.0, -1.0, 0.0, 2.0, -3.0, 0.5, 1.5, -0.0], dtype=dtype)
    calls = [(g, h), (h.copy(), g.copy()), (g, g)]  # (the last: one array as both arguments)
    with_p, without = check(f, calls, "fuse_mask_casts")
    assert _names(without).count("astype") == 3 and "astype" not in _names(with_p)


def test_fuse_mask_casts_leaves_a_cast_read_twice_or_returned() -> None:
    def f(g: Any, h: Any) -> Any:
        xp = g.__array_namespace__()
        m = xp.astype(h > 0, g.dtype)
        c = xp.astype(h < 0, g.dtype)
        wide = xp.astype(h > 0.5, xp.float64)  # (a float16 times it is float64; times the mask, float16)
        return g * m, m + 1.0, c, g * c, xp.astype(g, xp.float16) * wide

    g, h = SPECIAL.copy(), np.linspace(-1, 1, 8)
    with_p, _ = check(f, [(g, h), (h.copy(), g.copy())], "fuse_mask_casts")
    assert _names(with_p).count("astype") == 4


def test_direct_calls() -> None:
    from xpgrad import _fast_adapter

    def f(a: Any, b: Any, k: Any) -> Any:
        xp = a.__array_namespace__()
        m = xp.matrix_transpose(a) @ b
        return (xp.sum(m, axis=0), xp.max(a, axis=1, keepdims=True), xp.min(m), xp.sum(k),
                xp.reshape(xp.astype(a, xp.float32), (-1,)), xp.sum(a, axis=(0, 1), dtype=xp.float32))

    rng = np.random.default_rng(0)
    calls = [(rng.standard_normal((5, 3)), rng.standard_normal((5, 4)), np.arange(-100, 100, dtype=np.int8)),
             (rng.standard_normal((5, 3)), rng.standard_normal((5, 4)), np.full(200, 100, dtype=np.int8))]
    with_p, without = check(f, calls, "direct_calls")
    adapter = [i for i in with_p.instructions if isinstance(i.fn, types.FunctionType) and i.fn.__module__ == _fast_adapter.__name__]
    assert adapter == []
    assert sum(isinstance(i.fn, types.FunctionType) for i in without.instructions) >= 7
    assert np.add.reduce in [i.fn for i in with_p.instructions]


def test_reuse_plan_never_writes_a_matmul_into_its_operand() -> None:
    def f(a: Any, b: Any) -> Any:
        return xg.grad(lambda p, q: xg.sum(xg.tanh(p @ q)), argnums=(0, 1))(a, b)

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    prog = xg.jit(f).trace(a, b)
    matmuls = [i for i, ins in enumerate(prog.instructions) if ins.fn is np.matmul]
    assert len(matmuls) == 3 and not set(matmuls) & set(prog._out_into)
    check(f, [(a, b), (b.copy(), a.copy()), (a, a)], "direct_calls")


def test_training_steps_with_every_pass_equal_eager() -> None:
    """An MLP's jitted SGD steps (constant folding, mask fusion, copy elision and direct calls all
    fire in it) equal the eager steps bit for bit."""
    rng = np.random.default_rng(2)
    x = rng.random((16, 12), dtype=np.float32)
    y = rng.integers(0, 5, 16)

    def make() -> tuple[Any, Any]:
        r = np.random.default_rng(3)
        model = xg.nn.Sequential(xg.nn.Linear(12, 8), xg.nn.ReLU(), xg.nn.Linear(8, 5))
        for p in model.parameters():
            p.data = r.standard_normal(p.shape).astype(np.float32)
        return model, xg.optim.SGD(model.parameters(), lr=0.1)

    def step(model: Any, opt: Any, x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = xg.nn.functional.cross_entropy(model(xg.asarray(x)), xg.asarray(y))
        loss.backward()
        opt.step()
        return [p.grad for p in model.parameters()]

    (m1, o1), (m2, o2) = make(), make()
    j = xg.jit(step)
    # (trace() on a model of its own: its eager run updates the parameters' arrays in place)
    names = _names(j.trace(*make(), x, y))
    with _without("fuse_mask_casts"):
        before = _names(xg.jit(step).trace(*make(), x, y))
    assert names.count("astype") == before.count("astype") - 1  # (the ReLU's mask; the one-hot's is read twice)
    with _without("elide_copies"):
        before = _names(xg.jit(step).trace(*make(), x, y))
    # the biases' gradients (fresh sums) are not copied; the weights' (transposed views) still are
    assert names.count("asarray") == before.count("asarray") - 2 == 2
    assert "ones_like" not in names
    for _ in range(4):
        g1 = [np.array(g.data) for g in j(m1, o1, x, y)]
        g2 = [np.array(g.data) for g in step(m2, o2, x, y)]
        assert _same(g1, g2)
    assert _same([np.array(p.data) for p in m1.parameters()], [np.array(p.data) for p in m2.parameters()])


def test_frees_at_inverts_last_uses() -> None:
    assert passes.frees_at({3: 0, 1: 2, 2: 0}) == {0: [2, 3], 2: [1]}


def test_generated_source_reuses_dying_variables() -> None:
    """A result takes over the variable of a value its call reads last (no ``del`` line); values
    and the freeing of intermediates are unchanged."""

    def f(a: Any, b: Any) -> Any:
        h = a
        for _ in range(20):
            h = xg.sin(h * b)
        return h, b * 2.0

    a, b = np.linspace(-1, 1, 6), np.linspace(0.5, 1.5, 6)
    prog = xg.jit(f).trace(a, b)
    body = prog.source.splitlines()[1:-1]
    assert len(body) == len(prog.instructions)  # one line per call: every dying value's variable was reused
    assert not any(line.strip().startswith("del ") for line in body)
    with np.errstate(all="ignore"):
        check(f, [(a, b), (b.copy(), a.copy()), (a, a)], "direct_calls")
    var, dels = passes.variables(prog.instructions, prog.output_slots, dict(zip(prog.input_slots, prog.inputs)))
    assert dels == {} and len(set(var.values())) < len(var)


def _large_grad(x: Any) -> Any:
    return xg.grad(lambda v: xg.sum(xg.exp(xg.sin(v)) * v))(x)


@pytest.mark.parametrize("n", [70_000, 8 * 8192])  # (a ragged last chunk; whole chunks)
def test_fuse_elementwise_runs_a_chain_chunk_by_chunk(n: int) -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal(n) * 30
    x[:8] = SPECIAL
    with_p, without = check(_large_grad, [(x,), (rng.standard_normal(n),), (x[::-1].copy(),)], "fuse_elementwise")
    assert len(with_p) == 1 and _names(with_p)[0].startswith("fused[") and len(without) == 6

    def two(a: Any, b: Any) -> Any:
        h = xg.tanh(a * b + 1.0) * a
        return h - b, xg.sum(h)

    got, _ = check(two, [(x, x), (x, rng.standard_normal(n)), (x, x)], "fuse_elementwise")  # (one array as both)
    assert _names(got)[0].startswith("fused[")


def test_fuse_elementwise_keeps_the_whole_arrays_read_later_and_frees_the_rest() -> None:
    import tracemalloc

    rng = np.random.default_rng(5)
    x = rng.standard_normal(200_000)
    j = xg.jit(_large_grad)
    j(x)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        g = j(x)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 1.3 * x.nbytes  # the gradient and a few chunks (unfused: three arrays of x's size)
    with np.errstate(all="ignore"):
        assert _same([g], [np.array(_large_grad(x))])

    def f(a: Any) -> Any:
        h = xg.sin(a) * 2.0
        k = xg.exp(h) + 1.0
        return k, xg.sum(h)  # (h is read after the run: it stays a whole array)

    prog = xg.jit(f).trace(x)
    assert _names(prog)[0].startswith("fused[") and len(prog.instructions[0].outs) == 2
    check(f, [(x,), (x * 2.0,)], "fuse_elementwise")


def test_fuse_elementwise_leaves_runs_that_write_outside_or_broadcast() -> None:
    rng = np.random.default_rng(6)
    x, row = rng.standard_normal((300, 300)), rng.standard_normal(300)

    def f(a: Any, r: Any) -> Any:
        xp = a.__array_namespace__()
        b = xp.sin(a) * 2.0
        c = xp.exp(b) + r  # (a broadcast operand: the run ends before the add)
        s = xp.sum(c)
        c *= a  # (a write into an array made before the run: no run starts here)
        d = c * 3.0
        d[0, 0] = 1.0
        return d, s

    with_p, without = check(f, [(x, row), (x * 0.5, row * 2.0)], "fuse_elementwise")
    assert [n for n in _names(with_p) if n.startswith("fused[")] == ["fused[sin, multiply, exp]"]
    assert "multiply (in place)" in _names(with_p) and len(with_p) == len(without) - 2


@pytest.mark.parametrize("dtype", [np.complex128, np.float32, np.float64])
def test_power_is_never_rewritten_where_numpy_computes_it_another_way(dtype: Any) -> None:
    """``a ** 0.5`` on complex arrays is ``sqrt(a)`` in NumPy, not ``np.power`` (to the last bits):
    buffer reuse and chunked runs keep such a call as it is (values bit for bit)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(70_000).astype(dtype)
    if dtype is np.complex128:
        x = x + 1j * rng.standard_normal(70_000)

    def f(v: Any) -> Any:
        return (v * 2.0) ** 0.5 + (v * 3.0) ** 2 + 1.0

    with_p, _ = check(f, [(x,), (x * 0.5,)], "fuse_elementwise")
    import operator

    if dtype is np.complex128:  # (kept as the calls they were: neither fused nor given out=)
        pows = [i for i, ins in enumerate(with_p.instructions) if ins.fn is operator.pow]
        assert len(pows) == 2 and not set(pows) & set(with_p._out_into)
    else:
        assert _names(with_p)[0].startswith("fused[")
    j = xg.jit(f)
    with np.errstate(all="ignore"):
        ref = [np.array(f(x))]
        j(x)
        assert _same([np.array(j(x))], ref)


def test_fold_constants_leaves_a_large_constant_to_each_call() -> None:
    def f(x: Any) -> Any:
        xp = x.__array_namespace__()
        return x * xp.ones_like(x) + xp.zeros(x.shape)

    small, large = check(f, [(np.arange(8.0),)], "fold_constants")[0], xg.jit(f).trace(np.arange(200_000.0))
    assert "ones_like" not in _names(small) and "zeros" not in _names(small)
    assert "ones_like" in _names(large) and "zeros" in _names(large)  # (1.6 MB each: over FOLD_MAX_BYTES)


def test_passes_share_a_state_handed_to_them() -> None:
    """The passes' shared state (each instruction's reads, computed once) is one object `optimize`
    makes and hands through them, not module state: while a pass runs the module's globals are
    what they are outside the passes; a pass given a state caches in it, one called alone
    caches nothing, and both give the same result."""

    def f(a: Any, b: Any) -> Any:
        return xg.sum(xg.sin(a) * b + a), b * 2.0

    def module_state() -> dict[str, Any]:
        return {k: v for k, v in vars(passes).items() if not callable(v) and not k.startswith("__")}

    outside = module_state()
    states: list[Any] = []
    real = passes.dead_code

    def spy(ins: Any, outs: Any, state: Any = None) -> Any:
        states.append(state)
        assert module_state() == outside
        return real(ins, outs, state)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(passes, "dead_code", spy)
        for _ in range(2):
            prog = xg.jit(f).trace(np.linspace(-1, 1, 6), np.linspace(0.5, 1.5, 6))
    assert len(states) >= 2 and all(isinstance(st, passes.PassState) for st in states)
    assert states[0] is not states[-1]  # (one per optimize: nothing carried from one program to the next)
    ins, outs = prog.instructions, prog.output_slots
    state = passes.PassState()
    assert passes.last_uses(ins, outs, state) == passes.last_uses(ins, outs)
    assert len(state.reads) == len(ins)
    assert all(state.tracers_of(x) is state.reads[id(x)][1] for x in ins)
    assert passes.dead_code(ins, outs, state) == passes.dead_code(ins, outs) == ins
