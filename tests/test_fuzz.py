"""Differential fuzzing: random programs over every differentiable primitive
(tests/_fuzz.py), run on xpgrad and on PyTorch, then on every backend against NumPy.

1. :func:`test_fuzz_against_torch`: each program runs on xpgrad (NumPy backend,
   float64) and on torch (float64). Every intermediate value, the loss, the gradient
   with respect to every input and, for a random subset, a Hessian-vector product
   (``xpgrad.hvp``, forward over reverse, or ``grad`` of ``grad``, reverse over
   reverse; torch: double backward) must agree.
2. :func:`test_fuzz_backends`: the same programs run through xpgrad on each backend
   of the ``backend`` fixture and must agree with the NumPy run (values, gradients).
3. Under ``xg.jit`` (:func:`test_fuzz_jit_against_eager_and_torch`,
   :func:`test_fuzz_jit_inplace_and_views`, :func:`test_fuzz_jit_backends`): each program's
   value-and-gradient and HVP functions are jitted, traced on the drawn inputs and
   *replayed* on other inputs of the same shapes (the first call is the trace, an eager
   run); the replay must equal eager bit for bit (NumPy, and every backend whose program
   is replayed call by call; JAX, compiled by ``jax.jit``, within the tolerance below) and
   torch within the tolerance.

Tolerance: ``|ours - ref| <= 1e-9 * |ref| + 1e-11 * max(1, max|ref|)`` per array.
The relative part is the requirement; the absolute floor is 100 times below the
relative one at the array's own scale: an entry that is the difference of terms of
the array's size (a cancellation) carries rounding errors of that size, about
``eps * depth`` relative to the scale (``~1e-14`` for 30 steps), not relative to the
entry, so such entries are compared on the scale of the array, still 1000 times
above double-precision rounding.

Example counts follow the hypothesis profile (tests/conftest.py): ``ci``/``debug``
run :data:`N_TORCH` programs against torch and a few dozen per backend,
``thorough`` runs 10,000 against torch (and :data:`N_BACKEND_THOROUGH` per backend).

Programs whose reference (torch, or NumPy for the backend fuzz) is not finite or
exceeds 1e8 somewhere are discarded (``assume``): the maps of tests/_fuzz.py keep
every op inside its domain, but long chains of ``exp``/``cosh``/``pow`` can still
overflow, and such values test nothing.

Every mismatch found becomes a regression test at the end of this file, the program
written out as source.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import xpgrad as xg
from xpgrad.autograd._core import PRIMITIVES

from . import _fuzz
from ._fuzz import OPS, Program, programs
from ._util import to_numpy as _np
from .conftest import Backend

torch = pytest.importorskip("torch")

_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
_THOROUGH = _PROFILE not in ("ci", "debug")
#: programs compared with torch
N_TORCH = 10_000 if _THOROUGH else 300
#: programs per backend in the thorough profile (the ci count is scaled per backend below)
N_BACKEND_THOROUGH = 1_000
# ci: the slow namespaces (JAX dispatch, Dask graphs) get fewer programs
# (NumPy is the reference itself: its run only checks that the policy-driven path agrees;
# JAX compiles every op for every new shape, seconds per program)
_N_BACKEND_CI = {"numpy": 5, "array_api_strict": 40, "torch": 40, "jax": 4, "dask": 20, "cupy": 25}
_N_BACKEND_THOROUGH_SHARE = {"jax": 0.1, "dask": 0.5}

RTOL = 1e-9
ATOL_SCALE = 1e-11
#: references beyond this (or not finite) discard the program
HUGE = 1e8

_HC = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
       HealthCheck.function_scoped_fixture]

#: primitives the fuzz reaches only through other ones' rules: internal helpers of the
#: indexing rules (their own VJPs run in the second-order checks of getitem/take) and
#: the identity the transforms insert
INTERNAL = {
    "embed": "the VJP of getitem's basic keys; reached by HVPs through getitem",
    "gather": "the VJP of scatter_add; reached by HVPs through take / integer-array getitem",
    "scatter_add": "the VJP of take / integer-array getitem; reached by every gradient through them",
    "identity": "inserted by the transforms themselves (nested grad); reached by the rev HVPs",
    "pow.pole_power": "pow's derivatives (h * x ** e, inf at a pole); reached by every HVP through pow",
}


# ---------------------------------------------------------------- comparison
def _close(what: str, ours: Any, ref: Any, prog: Program) -> None:
    ours = np.asarray(ours)
    ref = np.asarray(ref)
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} != reference {ref.shape}"
    scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
    err = np.abs(ours - ref)
    bad = ~(err <= RTOL * np.abs(ref) + ATOL_SCALE * scale)
    if np.any(bad):
        i = np.argwhere(bad)[0] if ref.ndim else ()
        idx = tuple(int(j) for j in i)
        raise AssertionError(
            f"{what} differs at {idx}: {ours[idx]!r} vs reference {ref[idx]!r} "
            f"({int(bad.sum())} of {ref.size} entries)")


def _sane(*arrays: Any) -> bool:
    for a in arrays:
        a = np.asarray(a)
        if a.size and not (np.all(np.isfinite(a)) and np.max(np.abs(a)) < HUGE):
            return False
    return True


def _step_of(prog: Program, i: int) -> str:
    s = prog.steps[i]
    return f"value {s.out.name} ({s.op})"


# ---------------------------------------------------------------- running a program
def run_torch(prog: Program) -> dict[str, Any]:
    """Values, gradients and (if asked) the HVP of ``prog`` in PyTorch (float64)."""
    f = prog.compile("torch", {"torch": torch})
    xs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in prog.inputs]
    ws = [torch.tensor(w, dtype=torch.float64) for w in prog.weights]
    second = prog.hvp != "none"
    loss, vals = f(*xs, *ws)
    if loss.requires_grad:
        grads = torch.autograd.grad(loss, xs, create_graph=second, allow_unused=True, materialize_grads=True)
    else:
        grads = tuple(torch.zeros_like(x) for x in xs)
    out = {"loss": _np(loss), "values": [_np(v) for v in vals], "grads": [_np(g) for g in grads]}
    if second:
        ts = [torch.tensor(t) for t in prog.tangents]
        dot = sum((g * t).sum() for g, t in zip(grads, ts))
        if isinstance(dot, torch.Tensor) and dot.requires_grad:
            h = torch.autograd.grad(dot, xs, allow_unused=True, materialize_grads=True)
        else:
            h = tuple(torch.zeros_like(x) for x in xs)
        out["hvp"] = [_np(a) for a in h]
    return out


def run_xpgrad(prog: Program, bk: Backend | None = None, hvp: bool = True, jit_warm: Program | None = None) -> dict[str, Any]:
    """The same through xpgrad, on ``bk``'s arrays (NumPy when None); results as NumPy.

    ``jit_warm``: the functions (value and gradient, HVP) run under ``xg.jit``, traced on
    ``jit_warm``'s inputs (the same program on other values) first, so that the results
    returned are the *replay* of the traced program on ``prog``'s inputs.
    """
    f = prog.compile("xpgrad", {"xp": xg, "np": np})
    conv = (lambda a: np.array(a)) if bk is None else bk.asarray
    back = (lambda a: np.asarray(a)) if bk is None else bk.to_numpy
    xs = [conv(a) for a in prog.inputs]
    ws = [conv(w) for w in prog.weights]
    n = prog.n_inputs
    nums = tuple(range(n))
    warm = None if jit_warm is None else [conv(a) for a in jit_warm.inputs]

    def run(fn: Any, *args: Any) -> Any:
        if warm is None:
            return fn(*args)
        return _replay(fn, args, [*warm, *args[n:]])

    policy = bk.policy() if bk is not None else xg.default_device()
    with policy:
        (loss, vals), grads = run(xg.value_and_grad(f, argnums=nums, has_aux=True), *xs, *ws)
        out = {"loss": back(loss), "values": [back(v) for v in vals], "grads": [back(g) for g in grads]}
        if hvp and prog.hvp != "none":
            ts = [conv(t) for t in prog.tangents]

            def floss(*a: Any) -> Any:
                return f(*a, *ws)[0]

            if prog.hvp == "fwd":
                def fwd_hvp(*a: Any) -> Any:
                    h = xg.hvp(floss, tuple(a[:n]), tuple(a[n:]))
                    return (h,) if n == 1 else h

                h = run(fwd_hvp, *xs, *ts)
            else:
                def rev_hvp(*a: Any) -> Any:
                    def gdot(*x: Any) -> Any:
                        g = xg.grad(floss, argnums=nums)(*x)
                        return sum(xg.sum(gi * ti) for gi, ti in zip(g, a[n:]))

                    return xg.grad(gdot, argnums=nums)(*a[:n])

                h = run(rev_hvp, *xs, *ts)
            out["hvp"] = [back(a) for a in h]
    return out


def _replay(fn: Any, args: Any, warm: Any) -> Any:
    """``xg.jit(fn)(*args)`` as a replay: traced on ``warm`` first (the trace is an eager run
    and proves nothing about the program), then called on ``args`` (same signature)."""
    jf = xg.jit(fn)
    with warnings.catch_warnings():  # (the warm values are only traced: an overflow there is no finding)
        warnings.simplefilter("ignore", RuntimeWarning)
        jf(*warm)
    out = jf(*args)
    info = jf.cache_info()
    assert (info.traces, info.hits) == (1, 1), f"jit: the second call did not replay the traced program: {info}"
    return out


def compare(prog: Program, ours: dict[str, Any], ref: dict[str, Any], what: str) -> None:
    for i, (o, r) in enumerate(zip(ours["values"], ref["values"])):
        _close(f"{what}: {_step_of(prog, i)}", o, r, prog)
    _close(f"{what}: loss", ours["loss"], ref["loss"], prog)
    for i, (o, r) in enumerate(zip(ours["grads"], ref["grads"])):
        _close(f"{what}: gradient w.r.t. x{i}", o, r, prog)
    if "hvp" in ref and "hvp" in ours:
        for i, (o, r) in enumerate(zip(ours["hvp"], ref["hvp"])):
            _close(f"{what}: HVP ({prog.hvp}) w.r.t. x{i}", o, r, prog)


def _reference_ok(ref: dict[str, Any]) -> bool:
    return _sane(ref["loss"], *ref["values"], *ref["grads"], *ref.get("hvp", []))


def check_against_torch(prog: Program, drawn: bool = True) -> None:
    """``drawn``: a program from the strategy (an unusable reference discards it);
    otherwise a written one, whose reference must be usable."""
    ref = run_torch(prog)
    if drawn:
        assume(_reference_ok(ref))
    else:
        assert _reference_ok(ref), "the reference is not finite or too large"
    compare(prog, run_xpgrad(prog), ref, "xpgrad vs torch")


# ---------------------------------------------------------------- the fuzz tests
@settings(settings.default, max_examples=N_TORCH, deadline=None, suppress_health_check=_HC)
@given(prog=programs([op for op in sorted(OPS) if op not in _fuzz.TORCH_EXCLUDED], no_hvp=_fuzz.TORCH_NO_HVP))
def test_fuzz_against_torch(prog: Program) -> None:
    check_against_torch(prog)


#: the ops of the in-place fuzz: updates and writes through views, among ops that make and
#: read views (slicing, reshapes, transposes, setitem) and a few smooth ones between them
_INPLACE_FUZZ_OPS = ["inplace", "view_write", "setitem", "getitem", "reshape", "permute_dims", "matrix_transpose",
                     "sin", "exp", "multiply", "add", "sum", "matmul"]


@settings(settings.default, max_examples=max(60, N_TORCH // 5), deadline=None, suppress_health_check=_HC)
@given(prog=programs(_INPLACE_FUZZ_OPS, max_steps=12))
def test_fuzz_inplace_and_views_against_torch(prog: Program) -> None:
    """Programs dense in in-place updates and writes through views (``t = y[1:]; t *= v``,
    ``reshape(y, (n,))[2:] = v``), values, gradients and HVPs against torch's."""
    check_against_torch(prog)


#: programs compared with torch.func under vmap(grad): per-example gradients of a batch of 3
N_VMAP = 2_000 if _THOROUGH else 60
VMAP_BATCH = 3


def _vmap_inputs(prog: Program, in_axes: tuple[Any, ...]) -> list[np.ndarray]:
    """The program's inputs as a batch: the mapped ones stacked (along their axis) with two
    neighbours each, ``x + 0.01 * k * noise``, small enough to stay inside the ops' domains."""
    rng = np.random.default_rng(len(prog.steps))
    out = []
    for x, ax in zip(prog.inputs, in_axes):
        if ax is None:
            out.append(x)
            continue
        noise = rng.standard_normal(x.shape)
        out.append(np.stack([x + 0.01 * k * noise for k in range(VMAP_BATCH)], axis=ax))
    return out


@settings(settings.default, max_examples=N_VMAP, deadline=None, suppress_health_check=_HC)
@given(prog=programs([op for op in sorted(OPS) if op not in _fuzz.TORCH_EXCLUDED and op not in _fuzz.VMAP_EXCLUDED],
                     max_steps=12, no_hvp=_fuzz.TORCH_NO_HVP),
       data=st.data())
def test_fuzz_vmap_grad_against_torch_func(prog: Program, data: Any) -> None:
    """Random programs under ``vmap(grad(loss))`` (per-example gradients, each input mapped along
    a random axis or shared), against ``torch.func.vmap(torch.func.grad(loss))``."""
    n = prog.n_inputs
    in_axes = tuple(data.draw(st.one_of(st.none(), st.integers(0, x.ndim)), label=f"in_axes {i}")
                    for i, x in enumerate(prog.inputs))
    if all(a is None for a in in_axes):
        in_axes = (0, *in_axes[1:])
    xs = _vmap_inputs(prog, in_axes)
    ws = list(prog.weights)
    nums = tuple(range(n))
    f_tc = prog.compile("torch", {"torch": torch})

    def tloss(*a: Any) -> Any:
        return f_tc(*a, *[torch.from_numpy(w) for w in ws])[0]

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = torch.func.vmap(torch.func.grad(tloss, argnums=nums), in_dims=in_axes)(
                *[torch.from_numpy(x) for x in xs])
            ref = [r.detach().numpy() for r in ref]
    except (RuntimeError, NotImplementedError, ValueError, TypeError):
        assume(False)  # torch.func cannot vmap this program (an op without a batching rule in torch)
        return
    assume(_sane(*ref))
    f_xg = prog.compile("xpgrad", {"xp": xg})

    def loss(*a: Any) -> Any:
        return f_xg(*a, *ws)[0]

    got = xg.vmap(xg.grad(loss, argnums=nums), in_axes=in_axes)(*xs)
    for i, (o, r) in enumerate(zip(got, ref)):
        _close(f"vmap(grad) w.r.t. x{i} (in_axes {in_axes})", _np(o), r, prog)


def _backend_ops(name: str) -> list[str]:
    excluded = _fuzz.BACKEND_EXCLUDED.get(name, {})
    return [op for op in sorted(OPS) if op not in excluded]


def test_fuzz_backends(backend: Backend) -> None:
    if _THOROUGH:
        n = round(N_BACKEND_THOROUGH * _N_BACKEND_THOROUGH_SHARE.get(backend.name, 1.0))
    else:
        n = _N_BACKEND_CI.get(backend.name, 25)

    @settings(settings.default, max_examples=n, deadline=None, suppress_health_check=_HC)
    @given(prog=programs(_backend_ops(backend.name)))
    def run(prog: Program) -> None:
        # a reference that overflows is discarded, not failed: NumPy warns (an error here) on
        # the way to the inf that _reference_ok rejects (the thorough profile draws such programs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ref = run_xpgrad(prog, None, hvp=False)
        assume(_reference_ok(ref))
        compare(prog, run_xpgrad(prog, backend, hvp=False), ref, f"{backend.name} vs numpy")

    run()


# ---------------------------------------------------------------- under xg.jit
#: programs run under xg.jit on NumPy, against eager and torch
N_JIT = 2_000 if _THOROUGH else 300
#: programs per backend under xg.jit (ci; the thorough profile runs N_JIT_BACKEND_THOROUGH, JAX a tenth)
_N_JIT_BACKEND_CI = {"numpy": 10, "array_api_strict": 30, "torch": 30, "jax": 3, "dask": 15, "cupy": 20}
N_JIT_BACKEND_THOROUGH = 300


def _identical(what: str, ours: dict[str, Any], ref: dict[str, Any]) -> None:
    """Every value, the loss, the gradients and the HVP equal bit for bit (and in dtype)."""
    for key in ("values", "loss", "grads", "hvp"):
        if key not in ref:
            continue
        mine, theirs = ours[key], ref[key]
        pairs = list(zip(mine, theirs)) if isinstance(theirs, list) else [(mine, theirs)]
        for k, (o, r) in enumerate(pairs):
            o, r = np.asarray(o), np.asarray(r)
            assert o.dtype == r.dtype and o.shape == r.shape, f"{what}: {key} {k}: {o.dtype}{o.shape} vs {r.dtype}{r.shape}"
            assert np.array_equal(o, r, equal_nan=True), f"{what}: {key} {k} differs (max |diff| {np.max(np.abs(o - r))})"


@settings(settings.default, max_examples=N_JIT, deadline=None, suppress_health_check=_HC)
@given(prog=programs([op for op in sorted(OPS) if op not in _fuzz.TORCH_EXCLUDED], no_hvp=_fuzz.TORCH_NO_HVP),
       seed=st.integers(0, 2**32 - 1))
def test_fuzz_jit_against_eager_and_torch(prog: Program, seed: int) -> None:
    """Random programs under ``xg.jit`` (values and gradients by ``value_and_grad``, the HVP
    by ``hvp`` or ``grad`` of ``grad``): traced on the drawn inputs, replayed on other ones,
    the replay equal to eager bit for bit (NumPy replays the very calls eager code makes)
    and to torch within the fuzz's tolerance."""
    check_jit(prog, seed)


@settings(settings.default, max_examples=max(30, N_JIT // 2), deadline=None, suppress_health_check=_HC)
@given(prog=programs(_INPLACE_FUZZ_OPS, max_steps=12), seed=st.integers(0, 2**32 - 1))
def test_fuzz_jit_inplace_and_views(prog: Program, seed: int) -> None:
    """The in-place fuzz's programs (updates, writes through views) under ``xg.jit``: where the
    replay's buffer reuse (NumPy results written into dead buffers) meets views and writes."""
    check_jit(prog, seed)


def check_jit(prog: Program, seed: int, drawn: bool = True) -> None:
    """``prog`` jitted: traced on its inputs, replayed on other ones (from ``seed``), against
    eager and torch (``drawn``: as in :func:`check_against_torch`)."""
    other = prog.with_new_inputs(seed)
    ref = run_torch(other)
    if drawn:
        assume(_reference_ok(ref))
    else:
        assert _reference_ok(ref), "the reference is not finite or too large"
    jitted = run_xpgrad(other, jit_warm=prog)
    _identical("jit (replayed) vs eager", jitted, run_xpgrad(other))
    compare(other, jitted, ref, "jit (replayed) vs torch")


def test_fuzz_jit_backends(backend: Backend) -> None:
    """Random programs under ``xg.jit`` on each backend, replayed on other inputs, against the
    backend's eager run: equal bit for bit where the program is replayed call by call, and
    within the fuzz's tolerance on JAX (the program runs under ``jax.jit``: XLA fuses)."""
    if _THOROUGH:
        n = round(N_JIT_BACKEND_THOROUGH * (0.1 if backend.name == "jax" else 1.0))
    else:
        n = _N_JIT_BACKEND_CI.get(backend.name, 6)

    @settings(settings.default, max_examples=n, deadline=None, suppress_health_check=_HC)
    @given(prog=programs(_backend_ops(backend.name)), seed=st.integers(0, 2**32 - 1))
    def run(prog: Program, seed: int) -> None:
        other = prog.with_new_inputs(seed)
        with warnings.catch_warnings():  # (as in test_fuzz_backends: an overflowing reference is discarded)
            warnings.simplefilter("ignore", RuntimeWarning)
            ref = run_xpgrad(other, backend, hvp=False)
        assume(_reference_ok(ref))
        jitted = run_xpgrad(other, backend, hvp=False, jit_warm=prog)
        if backend.name == "jax":
            compare(other, jitted, ref, "jax: jit (under jax.jit) vs eager")
        else:
            _identical(f"{backend.name}: jit (replayed) vs eager", jitted, ref)

    run()


# ---------------------------------------------------------------- coverage of the op table
def test_every_differentiable_primitive_is_fuzzed() -> None:
    """Every differentiable primitive (and composite) appears in some op of the fuzz."""
    from xpgrad.autograd._core import COMPOSITES

    covered = {c for op in OPS.values() for c in op.covers}
    # the library's own primitives: a forward in xpgrad and a chapter (a test may define more,
    # with forwards in tests/; a docstring example defines one without a chapter)
    wanted = {n for n, p in PRIMITIVES.items()
              if not p.const and p.chapter and str(getattr(p.fwd, "__module__", "")).startswith("xpgrad")
              } | set(COMPOSITES)
    missing = wanted - covered - set(INTERNAL)
    assert not missing, f"primitives the fuzz never draws: {sorted(missing)}"
    unknown = covered - set(PRIMITIVES) - set(COMPOSITES)
    assert not unknown, f"fuzz ops cover unknown names: {sorted(unknown)}"


def test_backend_exclusions_name_real_ops_with_reasons() -> None:
    for name, table in [*_fuzz.BACKEND_EXCLUDED.items(), ("torch fuzz", _fuzz.TORCH_EXCLUDED)]:
        for op, reason in table.items():
            assert op in OPS, f"{name}: excluded op {op!r} is not a fuzz op"
            assert len(reason) > 20, f"{name}: excluded op {op!r} needs a reason"


def test_program_source_is_pasteable() -> None:
    """A failure prints the program as source: that source runs as it reads."""
    from hypothesis import find

    prog = find(programs(), lambda p: len(p.steps) >= 5 and p.hvp != "none", settings=settings(max_examples=200))
    ns: dict[str, Any] = {}
    exec(compile(prog.to_source(), "<program>", "exec"), ns)
    xs = [ns[f"x{i}"] for i in range(prog.n_inputs)]
    ws = [ns[f"W{i}"] for i in range(len(prog.weights))]
    loss, _ = ns["f_xpgrad"](*[xg.asarray(x) for x in xs], *ws)
    tloss, _ = ns["f_torch"](*[torch.asarray(x) for x in xs], *[torch.asarray(w) for w in ws])
    assert np.allclose(np.asarray(loss.data), tloss.numpy(), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- regressions (programs found by the fuzz)

def test_regression_sort_hvp_forward_over_reverse() -> None:
    """Found by the fuzz (first CI run): ``xpgrad.hvp`` through ``sort`` raised
    NonDifferentiableError. sort's JVP rule gathered the tangent with the recorded
    permutation output, a Tensor marked as requiring grad, which take_along_axis refuses
    as an index. Fixed in src/xpgrad/ops/sorting.py (the JVP uses the permutation as a
    constant)."""
    prog = _fuzz.from_source(
        [np.array([[0.4108850619643629, -0.6906398587083891, 1.3770794281914158]])],
        """
        v0 = xp.sort(x0 + xp.reshape(xp.arange(3, dtype=xp.float64), (1, 3)) * 0.37, axis=1, descending=True)
        v1 = xp.sin(v0) ** 2
        """,
        """
        v0 = torch.sort(x0 + torch.arange(3, dtype=torch.float64).reshape((1, 3)) * 0.37, dim=1, descending=True).values
        v1 = torch.sin(v0) ** 2
        """,
        hvp="fwd",
    )
    check_against_torch(prog, drawn=False)


def test_regression_remainder_of_a_structural_zero() -> None:
    """Found by the thorough fuzz: ``remainder(pinv(upper-triangular), d)`` differed by ``d``
    at an entry that is 0 in exact arithmetic: NumPy's pinv gave -1e-17 there, torch's 0,
    on the two sides of remainder's jump at 0. Not an xpgrad bug: the generator now shifts
    remainder's dividend (tests/_fuzz.py), as written here."""
    prog = _fuzz.from_source(
        [np.array([0.4108850619643629, -0.6906398587083891, -1.3770794281914158, -1.4504170934144127]).reshape(2, 2)],
        """
        t3_1 = 0.1 * xp.tanh(x0) + xp.eye(2, 2, dtype=xp.float64) * xp.arange(1, 3, dtype=xp.float64)
        t3_1 = (t3_1 + xp.matrix_transpose(t3_1)) / 2
        v3 = xp.linalg.cholesky(t3_1, upper=True)
        t4_1 = 0.1 * xp.tanh(v3) + xp.eye(2, 2, dtype=xp.float64) * xp.arange(1, 3, dtype=xp.float64)
        v4 = xp.linalg.pinv(t4_1)
        v7 = xp.remainder(v4 + 0.123, 0.7 + x0 * x0)
        """,
        """
        t3_1 = 0.1 * torch.tanh(x0) + torch.eye(2, 2, dtype=torch.float64) * torch.arange(1, 3, dtype=torch.float64)
        t3_1 = (t3_1 + t3_1.mT) / 2
        v3 = torch.linalg.cholesky(t3_1, upper=True)
        t4_1 = 0.1 * torch.tanh(v3) + torch.eye(2, 2, dtype=torch.float64) * torch.arange(1, 3, dtype=torch.float64)
        v4 = torch.linalg.pinv(t4_1)
        v7 = torch.remainder(v4 + 0.123, 0.7 + x0 * x0)
        """,
        hvp="rev",
    )
    check_against_torch(prog, drawn=False)


def test_regression_eig_order_of_a_nearly_triangular_matrix() -> None:
    """Found by the thorough fuzz: for a matrix triangular up to 1e-18 entries, LAPACK's
    eig returned the eigenpairs in opposite orders for inputs that differ by rounding
    (xpgrad's NumPy run and torch's). eig has no canonical order, so this is no bug: the
    generator now uses order-invariant expressions of eig's outputs, as written here."""
    prog = _fuzz.from_source(
        [np.array([0.4108850619643629, -0.6906398587083891, -1.3770794281914158]).reshape(1, 1, 3)],
        """
        v0 = xp.fft.irfft(xp.astype(x0, xp.complex128) * (0.6 + 0.8j), n=2, axis=1, norm='ortho')
        v1 = xp.linalg.cross(x0, v0, axis=-1)
        t2_1 = 0.1 * xp.tanh(v1[..., :2, :2]) + xp.eye(2, 2, dtype=xp.float64) * xp.arange(1, 3, dtype=xp.float64)
        t2_2 = xp.linalg.eig(t2_1)
        t2_3 = xp.sum(t2_2.eigenvalues[..., None, :] * (xp.real(t2_2.eigenvectors) ** 2 + xp.imag(t2_2.eigenvectors) ** 2), axis=-1)
        v2 = xp.real(t2_3) + 0.5 * xp.imag(t2_3)
        """,
        """
        v0 = torch.fft.irfft(x0.to(torch.complex128) * (0.6 + 0.8j), n=2, dim=1, norm='ortho')
        v1 = torch.linalg.cross(*torch.broadcast_tensors(x0, v0), dim=-1)
        t2_1 = 0.1 * torch.tanh(v1[..., :2, :2]) + torch.eye(2, 2, dtype=torch.float64) * torch.arange(1, 3, dtype=torch.float64)
        t2_2 = torch.linalg.eig(t2_1)
        t2_3 = torch.sum(t2_2.eigenvalues[..., None, :] * (t2_2.eigenvectors.real ** 2 + t2_2.eigenvectors.imag ** 2), dim=-1)
        v2 = t2_3.real + 0.5 * t2_3.imag
        """,
        hvp="fwd",
    )
    check_against_torch(prog, drawn=False)


def test_regression_gammaln_hvp_is_not_compared_with_torch() -> None:
    """Found by the thorough fuzz: the HVP of ``gammaln`` differed from torch's by 1.5e-9
    relative, from torch's trigamma (4e-10 off SciPy at 0.67). Programs with gammaln are
    compared with torch on values and gradients only (``TORCH_NO_HVP``); the gradient
    itself (torch's digamma, accurate) agrees, as checked here."""
    x = np.array(0.4108850619643629)
    prog = _fuzz.from_source([x], "v0 = xp.special.gammaln(0.5 + x0 * x0)",
                             "v0 = torch.special.gammaln(0.5 + x0 * x0)")
    check_against_torch(prog, drawn=False)


def test_regression_std_hvp_through_the_root() -> None:
    """Found by the fuzz (the CI run of issue 17): the reverse-over-reverse HVP through
    ``std`` was NaN. std's root rule returned ``where(ok, d, where(zero, 0, d * nan))``; one
    order up, ``where``'s unselected branch got ``0 * nan``. Fixed in
    src/xpgrad/ops/statistical.py (the NaN branch is a constant)."""
    prog = _fuzz.from_source(
        [np.array(0.4108850619643629)],
        """
        v0 = xp.concat([x0, x0], axis=None)
        v1 = xp.std((xp.tanh(v0) + xp.reshape(xp.arange(2, dtype=xp.float64), (2,)) * 0.37), axis=None, correction=0.0)
        """,
        """
        v0 = torch.cat([x0.reshape(1), x0.reshape(1)])
        v1 = torch.std((torch.tanh(v0) + torch.arange(2, dtype=torch.float64) * 0.37), correction=0.0)
        """,
        hvp="rev",
    )
    check_against_torch(prog, drawn=False)


def test_regression_jit_reuse_keeps_the_memory_layout() -> None:
    """Found by the jit fuzz (thorough): the replayed gradient differed from eager in the last
    bit. The program wrote ``a4 * v19`` into ``v19``'s dead buffer, whose layout was a
    transposed one (``v2 * 1.0`` follows the layout of its permuted input), where eager
    allocates a fresh result of another layout; the sum after it added in another order.
    Fixed in src/xpgrad/_jit_passes.py (a buffer is reused only with the result's strides)."""
    prog = _fuzz.from_source(
        [np.array([1.2925846929061189, -0.8840202685229602]).reshape((2, 1)),
         np.array([0.7365737444215421, 0.028265311710605978, 1.1892443698579105, 1.1154495797486774,
                   0.5146648881504587, -1.0186879588096813, 0.9841426650125076, 0.24665229023647406]).reshape((2, 2, 2))],
        """
        v0 = xp.permute_dims(x1, (1, 2, 0))
        t1_1 = v0 * 1.0
        t1_1 /= (1.5 + 0.5 * x0 * 0.5 * x0)
        v1 = t1_1
        """,
        """
        v0 = torch.permute(x1, (1, 2, 0))
        t1_1 = v0 * 1.0
        t1_1 /= (1.5 + 0.5 * x0 * 0.5 * x0)
        v1 = t1_1
        """,
    )
    check_jit(prog, 143519, drawn=False)
