"""The operation registry (``xpgrad.ops._registry``): one entry per operation, and
everything derived from it.

The central tests add throwaway entries, a pointwise one and a non-pointwise one with its
batching rule beside it, as a user or a new chapter would, touching nothing else, and
find each in the namespace, ``__all__``, vmap, jit, the rule tests' cases, the fuzz ops,
the conformance calls and the coverage page; then they remove them again and find them
nowhere. The completeness tests read the entries' facts (chapter, standard name, module,
batching, data-dependent shape), not lists of names kept here.
"""

from __future__ import annotations

import importlib
import inspect
import math
import sys
from collections.abc import Iterator
from typing import Any

import array_api_compat.numpy as cnp
import array_api_strict as xps
import numpy as np
import pytest
from hypothesis import find
from hypothesis.extra.array_api import make_strategies_namespace

import xpgrad as xg
from xpgrad._spec import CHAPTERS, FUNCTIONS
from xpgrad.autograd._batched import RULES, UNBATCHABLE
from xpgrad.autograd._batching_util import pointwise as pointwise_rule
from xpgrad.autograd._core import COMPOSITES, DECLARED, GRAD_SLOT, PRIMITIVES, WANT_FRESH, GradSlots, Primitive, apply, primitive
from xpgrad.ops._registry import _PRIMS, REGISTRY, Chapter, Inputs, Op, over, prim_of, remove

from . import _fuzz
from ._cases import registry_cases
from ._util import ROOT, load_script
from .cases import all_cases


def _resolve(ns: Any, path: str) -> Any:
    for part in path.split("."):
        ns = getattr(ns, part)
    return ns


def _calls() -> Any:
    """conformance/_calls.py (the conformance suite's calls), imported as its tests import it."""
    if str(ROOT / "conformance") not in sys.path:
        sys.path.insert(0, str(ROOT / "conformance"))
    return importlib.import_module("_calls")


def _coverage_rows() -> list[dict[str, Any]]:
    return load_script("docs/gen_coverage.py").rows()  # type: ignore[no-any-return]


def _found(name: str, shown: str) -> dict[str, bool]:
    """Where an entry is found, by the derived tables' own lookups."""
    _fuzz._from_registry()
    calls = _calls()
    calls.from_registry()
    return {
        "registry": name in REGISTRY, "primitive": name in PRIMITIVES,
        "vmap": name in RULES, "case": any(c.name == name for c in registry_cases()),
        "fuzz": name in _fuzz.OPS, "conformance": shown in calls.CALLS,
        "coverage": any(r["name"] == shown for r in _coverage_rows()),
    }


def _fuzz_values(name: str, x: np.ndarray) -> tuple[Any, Any]:
    """The fuzz op's two spellings evaluated on ``x``: xpgrad's and PyTorch's."""
    torch = pytest.importorskip("torch")
    xg_src, tc_src, shape = _fuzz.OPS[name].fn(None, _fuzz._Builder(0), _fuzz.Val("a", x.shape), [])
    assert tuple(shape) == x.shape
    got = eval(xg_src, {"xp": xg, "a": xg.asarray(x)})
    want = eval(tc_src, {"torch": torch, "a": torch.tensor(x)})
    return got.numpy(), want.numpy()


def _declare_cube() -> Any:
    op = Chapter("elementwise", module="xpgrad.ops.elementwise")

    @op.pointwise(d=lambda xp, x: 3 * x * x, fwd=lambda xp, x: x * x * x, test=Inputs(torch=""),
                  fuzz=("xp.cube_throwaway({a})", "{a} ** 3"))
    def cube_throwaway(x: Any, /) -> Any:
        """Elementwise cube (a test's throwaway entry).

        Examples:
            >>> import xpgrad as xg
            >>> xg.cube_throwaway(xg.asarray([2.0]))
            Tensor([8.], dtype=float64, device=cpu)
        """

    return cube_throwaway


def test_a_throwaway_entry_is_found_everywhere() -> None:
    """One declaration, nothing else touched: the public function, ``__all__``, the
    primitive with derived VJP and JVP, the batching rule, jit, the coverage row, the rule
    test's case, the fuzz op and the conformance call all exist, and all go when the entry
    is removed."""
    cube = _declare_cube()
    try:
        # the namespace: xg.<name>, the chapter's __all__, the signature and docstring declared
        assert xg.cube_throwaway is cube
        from xpgrad import _namespace
        assert _namespace.cube_throwaway is cube  # (what nn sees as xg)
        assert "cube_throwaway" in xg.ops.elementwise.__all__
        assert cube.__doc__.startswith("Elementwise cube")
        op = REGISTRY["cube_throwaway"]
        assert op.standard_name is None  # (an extension: not a function of the standard)
        x = np.array([0.5, -1.0, 2.0])
        np.testing.assert_allclose(cube(xg.asarray(x)).numpy(), x**3)
        # the rules derived from d = 3 x**2: reverse, forward, second order
        np.testing.assert_allclose(xg.grad(lambda v: xg.sum(xg.cube_throwaway(v)))(x), 3 * x**2)
        _, t = xg.jvp(xg.cube_throwaway, (x,), (np.ones(3),))
        np.testing.assert_allclose(t, 3 * x**2)
        np.testing.assert_allclose(xg.grad(lambda v: xg.sum(xg.grad(lambda w: xg.sum(xg.cube_throwaway(w)))(v)))(x), 6 * x)
        # the batching rule, and jit (values and the gradient through the compiled program)
        assert RULES["cube_throwaway"] is pointwise_rule
        np.testing.assert_allclose(xg.vmap(xg.cube_throwaway)(np.arange(6.0).reshape(3, 2)),
                                   np.arange(6.0).reshape(3, 2) ** 3)
        jitted = xg.jit(xg.grad(lambda v: xg.sum(xg.cube_throwaway(v))))
        for k in range(3):
            np.testing.assert_allclose(jitted(x + k), 3 * (x + k) ** 2)
        # the coverage page: a row beyond the standard, differentiable both ways, batched, verified
        row = next(r for r in _coverage_rows() if r["name"] == "cube_throwaway")
        assert (row["kind"], row["reverse"], row["forward"], row["vmap"], row["standard"]) == ("diff", "yes", "yes", "rule", False)
        assert "numpy" in row["verified"]
        # the rule tests' case, which checks it against finite differences
        case = next(c for c in registry_cases() if c.name == "cube_throwaway")
        assert case.torch_fn is None and case.complex
        np.testing.assert_allclose(case.fn(xg, xg.asarray(x)).numpy(), x**3)
        np.testing.assert_allclose(case.fn(np, x).numpy(), x**3)  # (an extension: xpgrad's on any backend)
        xg.testing.check_grads(lambda v: case.fn(xg, v), x, order=2)
        assert all(_found("cube_throwaway", "cube_throwaway").values())
        # the fuzz op: the two spellings give the same values
        assert _fuzz.OPS["cube_throwaway"].covers == ("cube_throwaway",)
        got, want = _fuzz_values("cube_throwaway", x)
        np.testing.assert_allclose(got, want)
    finally:
        remove("cube_throwaway")
    assert not any(_found("cube_throwaway", "cube_throwaway").values())
    assert not hasattr(xg, "cube_throwaway")
    from xpgrad import _namespace
    assert not hasattr(_namespace, "cube_throwaway")
    assert "cube_throwaway" not in xg.ops.elementwise.__all__


def _declare_flip(ran: list[tuple[str, tuple[bool, ...], int]]) -> Any:
    """A throwaway non-pointwise entry whose batching rule, declared beside it, records
    each call, and whose ``Inputs`` says how tests draw its parameter."""
    op = Chapter("manipulation", module="xpgrad.ops.manipulation")

    def batch(prim: Any, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:  # noqa: N803
        ran.append((prim.name, tuple(bs), K))
        n = len(xs[0].shape) - K
        axis = tuple(range(K, K + n)) if kw["axis"] is None else kw["axis"] % n + K  # (the logical axes, past the batch axes)
        return apply(prim, xs, {**kw, "axis": axis})

    def torch_flip(torch: Any, x: Any, *, axis: int | None) -> Any:
        return torch.flip(x, dims=tuple(range(x.ndim)) if axis is None else (axis,))

    @op.function(batch=batch, fwd=lambda xp, x, *, axis: xp.flip(x, axis=axis),
                 vjp=(lambda xp, g, ans, x, *, axis: xp.flip(g, axis=axis),), jvp="linear", save=(),
                 test=Inputs(params={"axis": "axis?"}, torch=torch_flip),
                 fuzz=("{N}.flip_throwaway({a})", "torch.flip({a}, dims=tuple(range({a}.ndim)))"))
    def flip_throwaway(x: Any, /, *, axis: int | None = None) -> Any:
        """Reverse along one axis, or all (a test's throwaway entry).

        Examples:
            >>> import xpgrad as xg
            >>> xg.flip_throwaway(xg.asarray([1.0, 2.0]), axis=0)
            Tensor([2., 1.], dtype=float64, device=cpu)
        """

    return flip_throwaway, batch


def test_a_throwaway_non_pointwise_entry_is_found_everywhere() -> None:
    """A non-pointwise entry declared with its batching rule (``batch=``) and its test
    inputs (``Inputs(params=...)``), nothing else touched: vmap finds the rule on the
    primitive and runs it (once per primitive call, with the batch axes it was given),
    nested vmaps and gradients included; jit compiles it; the rule tests' case, the fuzz
    op, the conformance call and the coverage row are derived from it; removing the entry
    removes them all."""
    ran: list[tuple[str, tuple[bool, ...], int]] = []
    flip, batch = _declare_flip(ran)
    try:
        prim = prim_of(flip)
        assert prim.batch is batch and RULES["flip_throwaway"] is batch
        assert REGISTRY["flip_throwaway"].batch is None  # (written by hand, not derived)
        x = np.arange(24.0).reshape(4, 2, 3)
        for axis in (0, 1, -1):
            ran.clear()
            out = xg.vmap(lambda v, a=axis: xg.flip_throwaway(v, axis=a))(x)
            np.testing.assert_array_equal(out, np.flip(x, axis=axis % 2 + 1))
            assert ran == [("flip_throwaway", (True,), 1)]
        ran.clear()
        out = xg.vmap(xg.vmap(lambda v: xg.flip_throwaway(v, axis=0)))(x)
        np.testing.assert_array_equal(out, np.flip(x, axis=2))
        assert ran == [("flip_throwaway", (True,), 2)]
        ran.clear()
        np.testing.assert_array_equal(xg.vmap(xg.flip_throwaway)(x), x[:, ::-1, ::-1])
        assert ran == [("flip_throwaway", (True,), 1)]
        # per-example gradients: the rule runs forward; the VJP is the primitive's own
        w = np.arange(3.0)
        g = xg.vmap(xg.grad(lambda v: xg.sum(xg.flip_throwaway(v, axis=-1) * w)))(x)
        np.testing.assert_array_equal(g, np.broadcast_to(w[::-1], x.shape))
        assert ran[-1][0] == "flip_throwaway"
        # jit: the compiled program calls the backend's flip; values and gradients on each call
        assert "flip" in str(xg.jit(lambda v: xg.flip_throwaway(v, axis=1)).trace(x))
        jitted = xg.jit(xg.grad(lambda v: xg.sum(xg.flip_throwaway(v, axis=1) * w[:2, None])))
        for k in range(3):
            np.testing.assert_array_equal(jitted(x + k), np.broadcast_to(w[:2][::-1, None], x.shape))
        # the rule tests' case, from Inputs: the parameter drawn, PyTorch's formula, finite differences
        case = next(c for c in registry_cases() if c.name == "flip_throwaway")
        assert case.nargs == 1 and case.complex and case.torch_fn is not None
        np.testing.assert_array_equal(case.fn(xg, xg.asarray(x), axis=1).numpy(), np.flip(x, axis=1))
        xg.testing.check_grads(lambda v: case.fn(xg, v, axis=-1), x, order=2)
        # the coverage page: beyond the standard, differentiable, batched by its rule, verified
        row = next(r for r in _coverage_rows() if r["name"] == "flip_throwaway")
        assert (row["kind"], row["reverse"], row["forward"], row["vmap"], row["standard"]) == ("diff", "yes", "yes", "rule", False)
        assert "numpy" in row["verified"]
        assert all(_found("flip_throwaway", "flip_throwaway").values())
        # the fuzz op's two spellings agree; the conformance call draws an array and an axis
        got, want = _fuzz_values("flip_throwaway", x)
        np.testing.assert_array_equal(got, want)
        args, kw = find(_calls().CALLS["flip_throwaway"](make_strategies_namespace(xps), xps), lambda c: c[0][0].ndim >= 2)
        np.testing.assert_array_equal(xg.flip_throwaway(xg.asarray(args[0]), **kw).numpy(), np.flip(np.asarray(args[0]), **kw))
    finally:
        remove("flip_throwaway")
    assert not any(_found("flip_throwaway", "flip_throwaway").values())
    assert not hasattr(xg, "flip_throwaway")
    assert "flip_throwaway" not in xg.ops.manipulation.__all__
    with pytest.raises(ValueError, match="prim_of"):
        prim_of(flip)


def test_a_rule_attached_to_a_primitive_with_batching_is_what_vmap_runs() -> None:
    """``@prim.batching``: the rule of a primitive made outside the registry (as nn's are)."""
    ran: list[int] = []
    twice = primitive("twice_throwaway", lambda xp, x: 2 * x, save=())
    try:
        @twice.batching
        def _rule(prim: Any, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:  # noqa: N803
            ran.append(K)
            return apply(prim, xs, kw)

        assert twice.batch is _rule and RULES["twice_throwaway"] is _rule
        for n in (1, 3):
            out = xg.vmap(twice)(np.ones((n, 2)))
            np.testing.assert_array_equal(out, np.full((n, 2), 2.0))
        assert ran == [1, 1]
    finally:
        PRIMITIVES.pop("twice_throwaway", None)
    assert "twice_throwaway" not in RULES


def test_every_elementwise_function_of_the_standard_is_a_pointwise_entry() -> None:
    for n in CHAPTERS["elementwise"]:
        op = REGISTRY[n]
        assert (op.batch, op.standard_name, op.chapter) == ("pointwise", n, "elementwise"), n
        assert getattr(xg, n) is op.fn, n


# ---------------------------------------------------------------- the entries' facts, checked against what is derived
ENTRIES = list(REGISTRY.values())


def _chapters() -> Iterator[Chapter]:
    """Every ``Chapter`` of the library: found in the modules that declare its entries."""
    seen: set[int] = set()
    for mod in {sys.modules[op.fn.__module__] for op in ENTRIES}:
        for c in vars(mod).values():
            if isinstance(c, Chapter) and id(c) not in seen:
                seen.add(id(c))
                yield c


def _signature(fn: Any) -> list[tuple[str, Any, Any]]:
    """(name, kind, default) per parameter; array-api-strict's ``Undef`` sentinel (its
    ``astype(device=)``, to tell an explicit None apart) read as the standard's None."""
    def default(p: inspect.Parameter) -> Any:
        return None if type(p.default).__name__ == "Undef" else p.default
    return [(p.name, p.kind, default(p)) for p in inspect.signature(fn).parameters.values()]


#: the keyword-only parameters xpgrad deliberately adds after the standard's
EXTENDS = {"asarray": ("requires_grad",)}  # (asarray(obj, requires_grad=True): a leaf to differentiate)


@pytest.mark.parametrize("op", ENTRIES, ids=lambda op: op.name)
def test_every_entry_is_where_its_facts_say(op: Op) -> None:
    """An entry's primitive, module, namespace path, function and batching, as its kind
    (pointwise, a function generated from its declaration or its declared body binding its
    primitive, a query, a creation, an alias) and its facts (chapter, standard name, module,
    view and multi-output, data-dependent shape) give them; a composite is differentiable through its parts."""
    assert getattr(sys.modules[op.module], op.public_name) is op.fn
    if op.standard_name is not None:  # a function of the standard: where the standard puts it, with its signature
        assert _resolve(xg, op.standard_name) is op.fn
        ours = [p for p in _signature(op.fn) if p[0] not in EXTENDS.get(op.name, ())]
        assert ours == _signature(_resolve(xps, op.standard_name))
        assert all(p[1] is inspect.Parameter.KEYWORD_ONLY for p in _signature(op.fn) if p[0] in EXTENDS.get(op.name, ()))
    else:  # beyond the standard: under its chapter's prefix (special.erf), in its own module
        assert op.chapter not in CHAPTERS or op.public_name not in CHAPTERS[op.chapter]
    if op.kind == "alias":  # a second name: its entry's function and primitive, nothing derived twice
        target = REGISTRY[op.alias_of]
        assert target.kind != "alias" and (op.fn, op.prim) == (target.fn, target.prim)
        assert (op.test, op.fuzz) == (None, None)
        return
    if op.kind in ("query", "creation"):  # no primitive, no rules: declared without a gradient
        assert op.prim is None and op.name in DECLARED and op.name not in PRIMITIVES and op.name not in RULES
        assert op.fn not in _PRIMS and (op.test, op.fuzz) == (None, None)
        assert not hasattr(op.fn, "__wrapped__")  # (its body computes the answer)
        return
    if op.kind == "composite":  # no primitive: differentiable (and batched) through the entries it calls
        assert op.prim is None and op.name in COMPOSITES and op.name not in DECLARED and op.name not in PRIMITIVES
        assert op.fn not in _PRIMS and not hasattr(op.fn, "__wrapped__")
        return
    assert op.kind in ("pointwise", "function"), op.kind
    assert PRIMITIVES[op.prim.name] is op.prim and prim_of(op.fn) is op.prim
    assert op.prim.chapter == op.chapter
    if hasattr(op.fn, "__wrapped__"):  # generated with the declared signature, not the declaration itself
        assert op.prim.name == op.name
        assert op.fn.__wrapped__.__code__.co_code != op.fn.__code__.co_code
        assert inspect.signature(op.fn, follow_wrapped=False) == inspect.signature(op.fn.__wrapped__)
        if not op.prim.fast:  # a view or multi-output primitive is applied directly (apply1/apply2 would pass it on)
            assert "_apply" in op.fn.__code__.co_freevars and "_apply2" not in op.fn.__code__.co_freevars
    else:  # a declared body: the function as written, binding its primitive
        assert op.kind == "function" and op.batch is None
        assert "bind" in op.fn.__code__.co_names
    # batched by its rule, or refused because its output's shape depends on the data
    if op.prim.data_dependent_shape:
        assert op.prim.unbatchable and op.prim.name in UNBATCHABLE and op.prim.name not in RULES
    else:  # (a body may bind a pointwise primitive, astype's or polygamma's: its rule is pointwise's)
        assert RULES[op.prim.name] is op.prim.batch
        if hasattr(op.fn, "__wrapped__"):
            assert (op.prim.batch is pointwise_rule) == (op.batch == "pointwise")
    if op.batch == "pointwise":
        assert op.kind == "pointwise" and op.nargs >= 1 and (op.d is None or len(op.d) == op.nargs)


def test_what_is_derived_from_the_entries_covers_them() -> None:
    """The rule tests' cases, the fuzz ops, the conformance calls and the coverage page hold
    one item per entry that says how (``test=``, ``fuzz=``, a standard name), under its name."""
    cases = {c.name for c in registry_cases()}
    assert cases == {op.name for op in ENTRIES if op.test is not None}
    assert {op.name for op in ENTRIES if op.fuzz is not None} <= set(_fuzz.OPS)
    calls = _calls()
    assert {op.standard_name for op in ENTRIES if op.standard_name in FUNCTIONS} <= set(calls.CALLS)  # (the suite's functions)
    shown = [r["name"] for r in _coverage_rows()]
    for op in ENTRIES:  # (each once, under the standard's name where it has one: linalg.inv, not inv;
        # an alias beyond the standard, special.psi, is its entry's row)
        if op.kind == "alias" and op.standard_name is None:
            assert op.name not in shown and shown.count(op.alias_of) == 1, op.name
            continue
        assert shown.count(op.standard_name or op.name) == 1, op.name
        assert op.standard_name in (None, op.name) or op.name not in shown, op.name


@pytest.mark.parametrize("module", sorted({c.module for c in _chapters()}))
def test_each_modules_all_is_its_entries_and_its_hand_written_rest(module: str) -> None:
    """A module's ``__all__`` is its entries (of each of its ``Chapter``s: ``xpgrad.linalg``'s
    functions and its aliases ``linalg.matmul``...) and the hand-written names its chapters
    list (``extra``: a named-tuple result, a composition such as ``linalg.matrix_norm``)."""
    mod = importlib.import_module(module)
    extra = {n for c in _chapters() if c.module == module for n in c.extra}
    entries = {op.public_name for op in ENTRIES if op.module == module}
    assert set(mod.__all__) == entries | extra and entries.isdisjoint(extra)
    for n in extra:
        assert getattr(mod, n) is not None, n


def _args(op: Any) -> list[np.ndarray]:
    dom = op.test.domain if op.test is not None else (0.3, 0.9)
    out = []
    for i in range(op.nargs):
        lo, hi = dom if isinstance(dom[0], (int, float)) else dom[i]
        out.append(np.linspace(lo + 0.05, hi - 0.05, 7)[::-1 if i else 1] + 0.037 * i)
    return out


DERIVED = [op for op in REGISTRY.values() if op.d is not None]


@pytest.mark.parametrize("op", DERIVED, ids=lambda op: op.name)
def test_derived_vjp_writes_into_a_donated_gradient(op: Any) -> None:
    """Declared by its derivative, a pointwise function's VJP computes ``g * conj(d)`` (or
    ``g / conj(f)`` for ``over(f)``) into the gradient buffer the engine donates, and
    gives the same values as without the donation."""
    args = _args(op)
    ans = op.prim.fwd(cnp, *args)
    for i, spec in enumerate(op.d):
        if spec is None:
            continue
        rule = op.prim.vjps[i]
        plain = rule(cnp, np.full_like(ans, 0.5), ans, *args)
        g = np.full_like(ans, 0.5)
        saved = GRAD_SLOT.s
        GRAD_SLOT.s = slots = GradSlots()
        slots.donated, slots.fresh, slots.borrowed = g, WANT_FRESH, {}
        try:
            r = rule(cnp, g, ans, *args)
        finally:
            GRAD_SLOT.s = saved
        np.testing.assert_allclose(r, plain, rtol=1e-15)
        if callable(spec) or isinstance(spec, over):
            assert r is g, f"{op.name}: argument {i}'s rule did not use the donated buffer"


@pytest.mark.parametrize("op", DERIVED, ids=lambda op: op.name)
def test_derived_jvp_is_the_derivative_times_the_tangent(op: Any) -> None:
    """``jvp`` of a derived entry is ``t * d``: checked against a central difference
    along a direction, complex inputs included where the entry is tested on them."""
    args = _args(op)
    cx = op.test is not None and op.test.complex
    for i in range(op.nargs):
        if op.d[i] is None:
            continue
        t = np.cos(np.arange(7.0)) * (1 + 0.5j if cx else 1.0)
        base = [a.astype(complex) if cx else a for a in args]
        h = 1e-6

        def f(e: complex, i: int = i, base: list[np.ndarray] = base, t: np.ndarray = t) -> np.ndarray:
            xs = [a + e * t if j == i else a for j, a in enumerate(base)]
            return np.asarray(op.prim.fwd(cnp, *xs))

        fd = (f(h) - f(-h)) / (2 * h)
        primals = tuple(xg.asarray(a) for a in base)
        tangents = tuple(xg.asarray(t if j == i else np.zeros_like(a)) for j, a in enumerate(base))
        _, jt = xg.jvp(op.fn, primals, tangents)
        np.testing.assert_allclose(np.asarray(jt.numpy() if hasattr(jt, "numpy") else jt), fd, rtol=1e-6, atol=1e-8)


def test_saved_values_are_what_the_derivative_reads() -> None:
    """Only what ``d`` names is kept for backward: ``exp`` its output, ``sin`` its input,
    ``add`` nothing."""
    assert (REGISTRY["exp"].prim.save, REGISTRY["exp"].prim.save_ans) == ((), True)
    assert (REGISTRY["sin"].prim.save, REGISTRY["sin"].prim.save_ans) == ((0,), False)
    assert (REGISTRY["add"].prim.save, REGISTRY["add"].prim.save_ans) == ((), False)
    assert (REGISTRY["divide"].prim.save, REGISTRY["divide"].prim.save_ans) == ((1,), True)


# ---------------------------------------------------------------- declaration errors
def _decl(**kw: Any) -> Any:
    op = Chapter("elementwise", module="tests.test_registry")

    def bad_throwaway(x: Any, /) -> Any:
        """A bad entry.

        Examples:
            >>> 1
            1
        """

    return op.pointwise(**kw)(bad_throwaway)


@pytest.mark.parametrize(("kw", "match"), [
    ({}, "give the derivative d= or the rules vjp="),
    ({"d": 1, "vjp": (None,)}, "give the derivative d= or the rules vjp="),
    ({"d": (1, 1)}, "1 arguments, 2 derivatives"),
    ({"d": lambda xp, y: y}, "reads 'y', which is neither 'ans' nor an argument"),
    ({"d": lambda x: x}, "takes xp first"),
    ({"d": "cos"}, "a derivative is a number, a function"),
    ({"nondiff": True, "d": 1}, "takes no derivative"),
])
def test_a_bad_declaration_says_what_is_wrong(kw: dict[str, Any], match: str) -> None:
    with pytest.raises((xg.XpgradTypeError, xg.XpgradValueError), match=match):
        _decl(fwd=lambda xp, x: x, **kw)
    assert "bad_throwaway" not in REGISTRY and "bad_throwaway" not in PRIMITIVES


def test_inputs_refuse_a_parameter_kind_they_cannot_draw() -> None:
    with pytest.raises(xg.XpgradValueError, match=r"Inputs: params kinds are .*; got \{'axis': 'shape'\}"):
        Inputs(params={"axis": "shape"})
    assert Inputs(params={"axis": "axis", "keepdims": "bool"}).params == {"axis": "axis", "keepdims": "bool"}


def test_a_declaration_body_is_its_docstring_and_has_an_example() -> None:
    op = Chapter("elementwise", module="tests.test_registry")

    def with_body(x: Any, /) -> Any:
        """Has a body.

        Examples:
            >>> 1
            1
        """
        return x

    with pytest.raises(xg.XpgradTypeError, match="the body of a declaration is its docstring"):
        op.pointwise(d=1)(with_body)

    def no_example(x: Any, /) -> Any:
        """No example."""

    with pytest.raises(xg.XpgradValueError, match="needs an Examples: section"):
        op.pointwise(d=1)(no_example)

    def sin(x: Any, /) -> Any:
        """A second sin.

        Examples:
            >>> 1
            1
        """

    with pytest.raises(xg.XpgradValueError, match="'sin' is already registered"):
        op.pointwise(d=1)(sin)
    assert REGISTRY["sin"].fn is xg.sin
    assert not math.isnan(float(xg.sin(xg.asarray(1.0))))


def test_the_special_functions_are_entries_under_their_prefix() -> None:
    """``xpgrad.special``'s entries are of the ``special`` chapter (registry and primitive
    name ``special.<name>``), beyond the standard, each with its rule test and fuzz op."""
    special = [op for op in ENTRIES if op.chapter == "special"]
    assert special
    tested = {n for c in all_cases() for n in c.covered()}
    for op in special:
        assert (op.name, op.module, op.standard_name) == (f"special.{op.public_name}", "xpgrad.special", None), op.name
        assert op.fn is getattr(xg.special, op.public_name), op.name
        if op.kind == "pointwise":  # its rule test and fuzz op derived from the entry
            assert op.test is not None and op.fuzz is not None, op.name
        elif op.kind == "function":  # a body (polygamma's n, logsumexp's axis): its cases written by hand
            assert op.prim.name in tested, op.name
        else:
            assert op.kind == "alias" and REGISTRY[op.alias_of].module == "xpgrad.special", op.name
    assert xg.special.psi is xg.special.digamma
    # what the derivatives read is what is saved: expit its output, erf its input
    assert (REGISTRY["special.expit"].prim.save, REGISTRY["special.expit"].prim.save_ans) == ((), True)
    assert (REGISTRY["special.erf"].prim.save, REGISTRY["special.erf"].prim.save_ans) == ((0,), False)
    assert (REGISTRY["special.log_ndtr"].prim.save, REGISTRY["special.log_ndtr"].prim.save_ans) == ((0,), True)
    # PyTorch has no rel_entr: its case compares with PyTorch's formula (Inputs.torch a function)
    torch = pytest.importorskip("torch")
    case = next(c for c in registry_cases() if c.name == "special.rel_entr")
    a, b = torch.tensor([0.5, 2.0], dtype=torch.float64), torch.tensor([0.25, 1.0], dtype=torch.float64)
    np.testing.assert_allclose(case.torch_fn(torch, a, b).numpy(), xg.special.rel_entr(a.numpy(), b.numpy()).numpy())


def test_generated_functions_normalise_their_parameters_as_declared() -> None:
    """The ``params=`` normalisers: sequences become tuples, a bad reshape shape is refused
    naming reshape; repeat's integer counts have no rules."""
    assert REGISTRY["repeat"].prim.vjp_rule(1) is None and REGISTRY["repeat"].prim.jvp_rule(1) is None
    x = xg.asarray(np.arange(6.0))
    np.testing.assert_array_equal(xg.reshape(x, [2, 3]).numpy(), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(xg.roll(xg.reshape(x, (2, 3)), [1, 1], axis=(0, 1)).numpy(),
                                  np.roll(np.arange(6.0).reshape(2, 3), (1, 1), axis=(0, 1)))
    np.testing.assert_array_equal(xg.tile(x, [2]).numpy(), np.tile(np.arange(6.0), 2))
    assert xg.permute_dims(xg.reshape(x, (2, 3)), [1, 0]).shape == (3, 2)
    assert xg.broadcast_to(x, [2, 6]).shape == (2, 6)
    with pytest.raises(xg.XpgradTypeError, match=r"reshape: shape must be a tuple of ints, got \[2, 'a'\]"):
        xg.reshape(x, [2, "a"])
    with pytest.raises(xg.XpgradValueError, match=r"reshape: cannot reshape a tensor of shape \(6,\)"):
        xg.reshape(x, (4, 2))


def test_generated_functions_take_their_arguments_as_declared() -> None:
    """The generated bodies (what the primitives receive), on the declared signatures:
    positional-only ``x``, keyword-only parameters and defaults."""
    sig = inspect.signature(xg.sum)
    assert [(p.name, p.kind.name, p.default) for p in sig.parameters.values()] == [
        ("x", "POSITIONAL_ONLY", inspect.Parameter.empty), ("axis", "KEYWORD_ONLY", None),
        ("dtype", "KEYWORD_ONLY", None), ("keepdims", "KEYWORD_ONLY", False)]
    x = xg.asarray([[3.0, 1.0], [2.0, 2.0]])
    np.testing.assert_array_equal(xg.sum(x, axis=1, keepdims=True).numpy(), [[4.0], [4.0]])
    np.testing.assert_array_equal(xg.argsort(x, axis=0, descending=True).numpy(), [[0, 1], [1, 0]])
    np.testing.assert_array_equal(xg.isin(xg.asarray([1, 2]), xg.asarray([2]), invert=True).numpy(), [True, False])
    (i, j) = xg.nonzero(xg.asarray([[0, 1], [1, 0]]))
    np.testing.assert_array_equal(i.numpy(), [0, 1])
    np.testing.assert_array_equal(j.numpy(), [1, 0])
    with pytest.raises(TypeError):
        xg.sum(x, 0)  # axis is keyword-only, as declared
    with pytest.raises(TypeError):
        xg.argmax(x=x)  # x is positional-only


def test_linear_algebra_entries_behave_as_the_hand_written_functions() -> None:
    """What the hand-written bodies did, the generated ones do: matmul straight onto the
    two-argument fast path, tensordot's and vector_norm's sequences made tuples, matrix_power's
    ``n`` made an int, the same errors."""
    assert set(xg.matmul.__code__.co_freevars) == {"_apply2", "_prim", "_NOKW"}  # (the hot path: no apply in between)
    with pytest.raises(xg.XpgradTypeError, match="matmul: argument 0 is None"):
        xg.matmul(None, xg.ones((2, 2)))
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(xg.tensordot(a, b, axes=([1], [0])).numpy(), np.tensordot(a, b, axes=([1], [0])))
    np.testing.assert_allclose(xg.linalg.vector_norm(a, axis=[0, 1]).numpy(), np.linalg.norm(a))
    m = np.array([[1.0, 1.0], [0.0, 1.0]])
    np.testing.assert_allclose(xg.linalg.matrix_power(m, np.int64(3)).numpy(), np.linalg.matrix_power(m, 3))
    g = xg.grad(lambda x: xg.sum(xg.linalg.matrix_power(x, 2.0)))(m)  # n=2.0 is int(n) = 2, as before
    np.testing.assert_allclose(g, np.ones((2, 2)) @ m.T + m.T @ np.ones((2, 2)))
    with pytest.raises(xg.XpgradValueError, match="fft: norm must be 'backward', 'ortho' or 'forward', got 'bad'"):
        xg.fft.fft(xg.ones(4, dtype=xg.complex128), norm="bad")  # type: ignore[arg-type]


# ================================================================ declarations with a body
# (helper regbody: Chapter.primitive / entry / query / alias; JAX's ``def sin(x): return sin_p.bind(x)``)
def _declare_scaled(ran: list[int]) -> tuple[Any, Any]:
    """A throwaway non-pointwise entry with a body: it checks ``k`` (naming itself and the
    value) and binds its primitive, declared with its rules and batching rule beside it."""
    op = Chapter("manipulation", module="xpgrad.ops.manipulation")

    def batch(prim: Any, xs: list[Any], bs: list[bool], kw: dict[str, Any], K: int) -> Any:  # noqa: N803
        ran.append(K)
        return apply(prim, xs, kw)  # (k * x batches for free)

    scaled_p = op.primitive("scaled_throwaway", fwd=lambda xp, x, *, k: k * x, batch=batch, save=(),
                            vjp=(lambda xp, g, ans, x, *, k: k * g,), jvp="linear")

    @op.entry(scaled_p, fuzz=("xp.scaled_throwaway({a}, k=2)", "2 * {a}"))
    def scaled_throwaway(x: Any, /, *, k: float = 2.0) -> Any:
        """``k * x``, ``k`` a positive number (a test's throwaway entry with a body).

        Examples:
            >>> import xpgrad as xg
            >>> xg.scaled_throwaway(xg.asarray([1.0]), k=3)
            Tensor([3.], dtype=float64, device=cpu)
        """
        if isinstance(k, bool) or not isinstance(k, (int, float)) or k <= 0:
            msg = f"scaled_throwaway: k must be a positive number, got {k!r}"
            raise xg.XpgradValueError(msg)
        return scaled_p.bind(x, k=float(k))

    return scaled_throwaway, scaled_p


def test_a_declaration_with_a_body_binds_its_primitive_and_is_found_everywhere() -> None:
    """``op.primitive`` (the rules and batching rule beside it) and ``@op.entry(p)`` whose
    body checks an argument and binds ``p``: the declaration is the public function, its
    check names it and the value, it is an entry with its Op (kind "function"), vmap runs
    its rule, grad/jvp/jit go through the primitive, the fuzz op and the coverage row are
    derived; removing it removes all of that."""
    from tests import _fuzz

    ran: list[int] = []
    fn, prim = _declare_scaled(ran)
    try:
        entry = REGISTRY["scaled_throwaway"]
        assert (entry.kind, entry.prim, entry.fn, entry.batch, entry.nargs) == ("function", prim, fn, None, 1)
        assert fn.__code__.co_name == "scaled_throwaway" and not hasattr(fn, "__wrapped__")  # (the body itself)
        assert xg.scaled_throwaway is fn and prim_of(fn) is prim and PRIMITIVES["scaled_throwaway"] is prim
        assert "scaled_throwaway" in xg.ops.manipulation.__all__ and RULES["scaled_throwaway"] is prim.batch
        x = np.arange(6.0).reshape(3, 2)
        for k in (1, 2.5, 4):
            np.testing.assert_allclose(fn(xg.asarray(x), k=k).numpy(), k * x)
            np.testing.assert_allclose(xg.grad(lambda v, k=k: xg.sum(fn(v, k=k)))(x), np.full_like(x, float(k)))
            _, t = xg.jvp(lambda v, k=k: fn(v, k=k), (x,), (np.ones_like(x),))
            np.testing.assert_allclose(t, np.full_like(x, float(k)))
            ran.clear()
            np.testing.assert_allclose(xg.vmap(lambda v, k=k: fn(v, k=k))(x), k * x)
            assert ran == [1]
            np.testing.assert_allclose(np.asarray(xg.jit(lambda v, k=k: fn(v, k=k))(x)), k * x)
        for bad in (0, -1.0, "2", True):
            with pytest.raises(xg.XpgradValueError, match=rf"scaled_throwaway: k must be a positive number, got {bad!r}"):
                fn(xg.asarray(x), k=bad)
        row = next(r for r in load_script("docs/gen_coverage.py").rows() if r["name"] == "scaled_throwaway")
        assert (row["kind"], row["reverse"], row["forward"], row["vmap"]) == ("diff", "yes", "yes", "rule")
        _fuzz._from_registry()
        assert _fuzz.OPS["scaled_throwaway"].covers == ("scaled_throwaway",)
    finally:
        remove("scaled_throwaway")
        _fuzz.OPS.pop("scaled_throwaway", None)
    assert "scaled_throwaway" not in PRIMITIVES and "scaled_throwaway" not in RULES
    assert not hasattr(xg, "scaled_throwaway") and "scaled_throwaway" not in xg.ops.manipulation.__all__
    assert all(r["name"] != "scaled_throwaway" for r in load_script("docs/gen_coverage.py").rows())


def test_an_entry_without_a_body_is_generated_as_function_makes_it() -> None:
    """``@op.entry(p)`` over a docstring-only declaration: the fast generated function (its
    signature, ``arrays``/``params``), the same as ``op.function``."""
    import inspect

    op = Chapter("manipulation", module="xpgrad.ops.manipulation")
    p = op.primitive("roll1_throwaway", fwd=lambda xp, x, *, shift: xp.roll(x, shift, axis=0), save=(),
                     vjp=(lambda xp, g, ans, x, *, shift: xp.roll(g, -shift, axis=0),), jvp="linear")

    @op.entry(p, params={"shift": int})
    def roll1_throwaway(x: Any, /, shift: int = 1) -> Any:
        """Roll along axis 0 (a test's throwaway entry).

        Examples:
            >>> 1
            1
        """

    try:
        assert roll1_throwaway.__wrapped__.__code__.co_code != roll1_throwaway.__code__.co_code  # generated
        assert inspect.signature(roll1_throwaway, follow_wrapped=False) == inspect.signature(roll1_throwaway.__wrapped__)
        assert set(roll1_throwaway.__code__.co_freevars) >= {"_apply2", "_prim"}  # (the one-argument fast path)
        for s in (1, 2.0, -1):
            np.testing.assert_array_equal(roll1_throwaway(xg.arange(4.0), s).numpy(), np.roll(np.arange(4.0), int(s)))
        assert xg.grad(lambda v: roll1_throwaway(v)[1])(np.arange(4.0)).tolist() == [1.0, 0.0, 0.0, 0.0]
    finally:
        remove("roll1_throwaway")
    assert "roll1_throwaway" not in PRIMITIVES


def test_a_query_and_an_alias_are_entries_without_a_primitive_of_their_own() -> None:
    """``@op.query()``: an Op of kind "query" with no primitive, declared non-differentiable
    (``DECLARED``, the coverage page's reason); ``op.alias``: a second name of an entry, its
    function and primitive (the entry's row only)."""
    from xpgrad.autograd._core import DECLARED

    op = Chapter("data_type", module="tests.test_registry")

    @op.query(reason="a throwaway query")
    def bits_throwaway(dtype: Any, /) -> int:
        """The bits of a dtype (a test's throwaway query).

        Examples:
            >>> 1
            1
        """
        return 8 * int(np.dtype(dtype.name).itemsize)

    sine = op.alias("sine_throwaway", xg.sin)
    try:
        q = REGISTRY["bits_throwaway"]
        assert (q.kind, q.prim, q.fn, q.nargs, q.test, q.fuzz) == ("query", None, bits_throwaway, 1, None, None)
        assert DECLARED["bits_throwaway"] == "a throwaway query"
        assert [bits_throwaway(t) for t in (xg.float32, xg.int8, xg.complex128)] == [32, 8, 128]
        a = REGISTRY["sine_throwaway"]
        assert (a.kind, a.alias_of, a.fn, a.prim) == ("alias", "sin", xg.sin, REGISTRY["sin"].prim) and sine is xg.sin
        rows = load_script("docs/gen_coverage.py").rows()
        shown = [r["name"] for r in rows]  # (a query beyond the standard: its row says why it has no gradient)
        assert [r["status"] for r in rows if r["name"] == "bits_throwaway"] == ["non-differentiable: a throwaway query"]
        assert "sine_throwaway" not in shown and shown.count("sin") == 1
    finally:
        remove("bits_throwaway")
        remove("sine_throwaway")
    assert "bits_throwaway" not in DECLARED and "sine_throwaway" not in REGISTRY
    assert REGISTRY["sin"].fn is xg.sin and prim_of(xg.sin) is REGISTRY["sin"].prim and "sin" in PRIMITIVES


@pytest.mark.parametrize(("module", "chapter", "prefix"), [
    ("xpgrad.linalg", "linalg", "linalg."), ("xpgrad.fft", "fft", "fft."), ("xpgrad.special", "special", "special.")])
def test_an_entry_of_an_extension_module_is_in_that_module_only(module: str, chapter: str, prefix: str) -> None:
    """An entry (and an alias) declared outside ``xpgrad.linalg``, ``xpgrad.fft`` or
    ``xpgrad.special`` for one of them is put into that module and its ``__all__``, not into
    ``xg``'s namespace (only ``xpgrad.ops.*`` entries are); removed from it again."""
    import importlib as _il

    mod = _il.import_module(module)
    op = Chapter(chapter, module=module, prefix=prefix)

    plus_p = op.primitive("plus_throwaway", fwd=lambda xp, x: x + 0, jvp="linear", vjp=(lambda xp, g, ans, x: g,), save=())

    @op.entry(plus_p)
    def plus_throwaway(x: Any, /) -> Any:
        """x + 0 (a test's throwaway entry).

        Examples:
            >>> 1
            1
        """
        return plus_p.bind(x)

    op.alias("plus_alias_throwaway", plus_throwaway)
    try:
        for n in ("plus_throwaway", "plus_alias_throwaway"):
            assert getattr(mod, n) is plus_throwaway and n in mod.__all__, n
            assert not hasattr(xg, n) and not hasattr(xg._namespace, n), n
        assert REGISTRY[prefix + "plus_alias_throwaway"].alias_of == prefix + "plus_throwaway"
        x = np.linspace(0.1, 0.9, 4)
        for k in range(2):
            np.testing.assert_array_equal(plus_throwaway(x + k).numpy(), x + k)
            np.testing.assert_array_equal(xg.grad(lambda v: xg.sum(plus_throwaway(v) * v))(x + k), 2 * (x + k))
    finally:
        remove(prefix + "plus_alias_throwaway")
        remove(prefix + "plus_throwaway")
    for n in ("plus_throwaway", "plus_alias_throwaway"):
        assert not hasattr(mod, n) and n not in mod.__all__, n


def test_a_creation_from_python_numbers_is_an_entry_without_a_primitive() -> None:
    """``@op.creation()``: an array made from Python numbers (no array input): an Op of kind
    "creation", no primitive, declared non-differentiable; removed with its declaration."""
    from xpgrad.autograd._core import DECLARED

    op = Chapter("creation", module="tests.test_registry")

    @op.creation()
    def halves_throwaway(n: int, /) -> Any:
        """0, 1/2, 1, ... (a test's throwaway creation).

        Examples:
            >>> 1
            1
        """
        return xg.arange(n) / 2

    try:
        c = REGISTRY["halves_throwaway"]
        assert (c.kind, c.prim, c.fn, c.nargs) == ("creation", None, halves_throwaway, 1)
        assert DECLARED["halves_throwaway"] == "creates an array from Python numbers: no array input"
        for n in (1, 3):
            np.testing.assert_array_equal(halves_throwaway(n).numpy(), np.arange(n) / 2)
    finally:
        remove("halves_throwaway")
    assert "halves_throwaway" not in DECLARED and "halves_throwaway" not in REGISTRY


def test_a_declaration_with_a_body_says_what_is_wrong() -> None:
    op = Chapter("manipulation", module="tests.test_registry")

    def bad_throwaway(x: Any, /) -> Any:
        """A body.

        Examples:
            >>> 1
            1
        """
        return x

    with pytest.raises(xg.XpgradTypeError, match=r"declare op\.primitive"):
        op.pointwise(d=1)(bad_throwaway)
    with pytest.raises(xg.XpgradTypeError, match="entry takes the primitive it binds"):
        op.entry("bad_throwaway")  # type: ignore[arg-type]
    loose = Primitive("loose_throwaway", lambda xp, x: x)  # (not registered)
    with pytest.raises(xg.XpgradValueError, match="is not registered"):
        op.entry(loose)(bad_throwaway)
    with pytest.raises(xg.XpgradValueError, match="'sin' is already registered"):
        op.primitive("sin", fwd=lambda xp, x: x)
    p = op.primitive("bad_throwaway", fwd=lambda xp, x: x)
    try:
        with pytest.raises(xg.XpgradTypeError, match="arrays= and params= shape a generated function"):
            op.entry(p, params={"x": int})(bad_throwaway)
    finally:
        PRIMITIVES.pop("bad_throwaway", None)

    def no_body_throwaway(dtype: Any) -> Any:
        """No body.

        Examples:
            >>> 1
            1
        """

    with pytest.raises(xg.XpgradTypeError, match="a query's body computes its answer"):
        op.query()(no_body_throwaway)
    with pytest.raises(xg.XpgradValueError, match="is not the public function of a registry entry"):
        op.alias("alias_throwaway", len)
    assert not {"bad_throwaway", "no_body_throwaway", "alias_throwaway"} & set(REGISTRY)


_FFT_TRANSFORMS = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft"]


def test_every_fft_and_special_function_is_an_entry() -> None:
    """Nothing of ``xpgrad.fft`` or ``xpgrad.special`` is left outside the registry: the
    transforms, polygamma and the reductions are entries whose body binds their primitive
    (declared with its rules and batching rule), fftfreq/rfftfreq creation entries, psi an
    alias of digamma."""
    from xpgrad.autograd._core import DECLARED

    for n in xg.fft.__all__:
        op = REGISTRY[n]
        assert op.fn is getattr(xg.fft, n) and op.chapter == "fft" and op.module == "xpgrad.fft", n
    for n in _FFT_TRANSFORMS:
        op = REGISTRY[n]
        assert (op.kind, op.prim, op.prim.batch is not None) == ("function", PRIMITIVES[n], True), n
        assert not hasattr(op.fn, "__wrapped__") and prim_of(op.fn) is op.prim and n in RULES, n  # (the body itself)
    for n in ("fftfreq", "rfftfreq"):
        assert (REGISTRY[n].kind, REGISTRY[n].prim, n in PRIMITIVES) == ("creation", None, False), n
        assert DECLARED[n] == "creates an array from Python numbers: no array input", n
    for n in xg.special.__all__:
        op = REGISTRY[f"special.{n}"]
        assert op.fn is getattr(xg.special, n) and op.chapter == "special", n
    for n in ("polygamma", "logsumexp", "softmax", "log_softmax"):
        op = REGISTRY[f"special.{n}"]
        assert (op.kind, op.prim) == ("function", PRIMITIVES[f"special.{n}"]) and f"special.{n}" in RULES, n
    psi = REGISTRY["special.psi"]
    assert (psi.kind, psi.alias_of, psi.prim) == ("alias", "special.digamma", REGISTRY["special.digamma"].prim)
    assert xg.special.psi is xg.special.digamma


@pytest.mark.parametrize("name", _FFT_TRANSFORMS)
def test_an_fft_entry_checks_norm_then_binds_its_primitive(name: str) -> None:
    """Each transform's body refuses a bad ``norm`` naming itself and the value; a good one
    reaches the primitive (the backend's transform, its gradient, its batching rule)."""
    f = getattr(xg.fft, name)
    real_in = name in ("rfft", "rfftn", "ihfft")
    x = np.cos(np.arange(12.0)).reshape(3, 4) + (0 if real_in else 0.5j * np.sin(np.arange(12.0)).reshape(3, 4))
    for bad in ("bad", None, 1):
        with pytest.raises(xg.XpgradValueError, match=rf"{name}: norm must be 'backward', 'ortho' or 'forward', got {bad!r}"):
            f(xg.asarray(x), norm=bad)
    for norm in ("backward", "ortho", "forward"):
        np.testing.assert_allclose(f(xg.asarray(x), norm=norm).numpy(), getattr(np.fft, name)(x, norm=norm),
                                   rtol=1e-12, atol=1e-12)
        per_row = xg.vmap(lambda v, norm=norm: f(v, norm=norm))(x)  # (the batching rule: each row is one example)
        np.testing.assert_allclose(np.asarray(per_row), np.stack([getattr(np.fft, name)(r, norm=norm) for r in x]),
                                   rtol=1e-12, atol=1e-12)


def test_polygamma_checks_n_and_binds_its_primitive() -> None:
    """polygamma's body: ``n`` a non-negative integer (a clear error naming it otherwise,
    where it was truncated or failed inside the forward before), 0 is digamma, the others
    bind the primitive (whose VJP is the next order)."""
    from scipy import special as sp

    x = np.array([0.7, 1.5, 3.0])
    for bad in (-1, 1.5, "2", True, None):
        with pytest.raises(xg.XpgradValueError, match=rf"polygamma: n must be a non-negative integer, got {bad!r}"):
            xg.special.polygamma(bad, xg.asarray(x))  # type: ignore[arg-type]
    for n in (0, 1, 2.0, np.int64(3)):
        np.testing.assert_allclose(xg.special.polygamma(n, xg.asarray(x)).numpy(), sp.polygamma(int(n), x), rtol=1e-10)
        np.testing.assert_allclose(xg.grad(lambda v, n=n: xg.sum(xg.special.polygamma(n, v)))(x),
                                   sp.polygamma(int(n) + 1, x), rtol=1e-8)


def test_the_dtype_queries_are_query_entries() -> None:
    """result_type, can_cast, finfo, iinfo, isdtype: entries of kind "query", no primitive,
    declared non-differentiable with the reason the coverage page shows; the functions are
    the declarations."""
    from xpgrad.autograd._core import DECLARED

    for n in ("result_type", "can_cast", "finfo", "iinfo", "isdtype"):
        op = REGISTRY[n]
        assert (op.kind, op.prim, op.chapter, op.fn) == ("query", None, "data_type", getattr(xg, n)), n
        assert DECLARED[n] == "a query about dtypes: returns no array" and n not in PRIMITIVES, n
    assert REGISTRY["astype"].kind == "function"
    assert xg.result_type(xg.float32, xg.float64) == xg.float64 and xg.finfo(xg.float32).bits == 32
    assert xg.iinfo(xg.int8).max == 127 and xg.can_cast(xg.int8, xg.int16) and xg.isdtype(xg.int8, "integral")


def test_a_composite_is_an_entry_differentiable_through_its_parts() -> None:
    """``@op.composite(of=...)``: a function composed of other entries (``linalg.matrix_norm``),
    no primitive of its own; grad, vmap and jit go through the entries it calls; the coverage
    page reads ``of``; ``remove`` takes it out of every table."""
    op = Chapter("statistical", module="tests.test_registry")

    @op.composite(of="sum, multiply")
    def sum_of_squares_throwaway(x: Any, /) -> Any:
        """The sum of the squares (a test's throwaway composite).

        Examples:
            >>> 1
            1
        """
        return xg.sum(x * x)

    try:
        c = REGISTRY["sum_of_squares_throwaway"]
        assert (c.kind, c.prim, c.fn) == ("composite", None, sum_of_squares_throwaway)
        assert COMPOSITES["sum_of_squares_throwaway"] == "sum, multiply" and "sum_of_squares_throwaway" not in DECLARED
        x = np.array([[1.0, -2.0], [3.0, 0.5]])
        for f in (xg.grad(sum_of_squares_throwaway), xg.jit(xg.grad(sum_of_squares_throwaway))):
            for _ in range(2):
                np.testing.assert_array_equal(np.asarray(f(x)), 2 * x)
        np.testing.assert_array_equal(np.asarray(xg.vmap(sum_of_squares_throwaway)(x)), (x * x).sum(axis=1))
        assert REGISTRY["matrix_norm"].kind == "composite" and REGISTRY["matrix_norm"].fn is xg.linalg.matrix_norm
    finally:
        remove("sum_of_squares_throwaway")
    assert "sum_of_squares_throwaway" not in COMPOSITES and "sum_of_squares_throwaway" not in REGISTRY
