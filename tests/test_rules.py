"""Every differentiable function, on every backend: values, gradients (reverse and
forward mode), second order, torch agreement (``torch.func.vjp`` and ``torch.func.jvp``),
dtype preservation, no mutation; plus the completeness checks."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xpgrad as xg
from xpgrad._spec import CHAPTERS, FFT
from xpgrad.autograd._core import COMPOSITES, DECLARED, PRIMITIVES
from xpgrad.testing import check_grads

from . import cases as _cases_pkg
from ._cases import OpCase
from .conftest import examples_for

#: the registry's derived cases and the hand-written ones of tests/cases
ALL_CASES: list[OpCase] = _cases_pkg.all_cases()

#: the chapters whose every function must be differentiable or declared
CHECKED_CHAPTERS = ("creation", "data_type", "elementwise", "statistical", "manipulation", "indexing", "linear_algebra", "searching", "set",
                    "sorting", "utility")


def _draw_inputs(case: OpCase, data: Any, complex_: bool = False) -> tuple[list[np.ndarray], dict[str, Any]]:
    shapes = case.shapes(data.draw)
    params = case.params(data.draw, shapes)
    return _draw_arrays(case, data, shapes, params, complex_), params


def _draw_arrays(case: OpCase, data: Any, shapes: list[tuple[int, ...]], params: dict[str, Any],
                 complex_: bool = False) -> list[np.ndarray]:
    """One set of the case's arguments for drawn ``shapes`` and ``params`` (conditioned by ``prepare``)."""
    arrays = []
    for i, (kind, shape) in enumerate(zip(case.kinds(), shapes)):
        if kind == "float":
            lo, hi = case.domain_of(i)
            elems = st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False)
            a = data.draw(hnp.arrays(np.float64, shape, elements=elems))
            if complex_:
                b = data.draw(hnp.arrays(np.float64, shape, elements=elems))
                a = a + 1j * b
        elif kind == "int":
            ir = case.int_range(shapes, params) if callable(case.int_range) else case.int_range
            a = data.draw(hnp.arrays(np.int64, shape, elements=st.integers(*ir)))
        elif kind == "bool":
            a = data.draw(hnp.arrays(np.bool_, shape))
        else:
            raise ValueError(kind)
        arrays.append(a)
    if case.prepare is not None:
        arrays = case.prepare(arrays, params)
    return arrays


def _params(cases: list[OpCase]) -> list[Any]:
    """(case, complex_) pairs: every case with real inputs, and with complex ones where ``case.complex``."""
    return [pytest.param(c, cx, id=f"{c.name}-complex" if cx else c.name)
            for c in cases for cx in ((False, True) if c.complex else (False,))]


def _xfail(case: OpCase, backend: Any) -> None:
    if backend.name in case.xfail:
        pytest.xfail(case.xfail[backend.name])


@pytest.mark.parametrize(("case", "complex_"), _params(ALL_CASES))
def test_gradient(case: OpCase, complex_: bool, backend: Any) -> None:
    _xfail(case, backend)

    @settings(max_examples=examples_for(backend.name))
    @given(data=st.data())
    def run(data: Any) -> None:
        _check_case(case, complex_, backend, data)

    run()


def _check_case(case: OpCase, complex_: bool, backend: Any, data: Any) -> None:
    arrays, params = _draw_inputs(case, data, complex_)
    xs = [backend.asarray(a) for a in arrays]
    before = [a.copy() for a in arrays]
    float_idx = [i for i, k in enumerate(case.kinds()) if k == "float"]

    def f(*a: Any) -> Any:
        return case.fn(xg.array_namespace(*a), *a, **params)

    # forward through xpgrad equals the backend called directly
    if case.fwd_exact:
        want = backend.to_numpy(case.fn(backend.xp, *xs, **params))
        got = backend.to_numpy(f(*[xg.asarray(x) for x in xs]))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{case.name}: forward")
    check_grads(f, *xs, order=2 if case.order2 else 1, argnums=float_idx, rtol=case.rtol, modes=("rev", "fwd"))
    for a, b, x in zip(before, arrays, xs):
        np.testing.assert_array_equal(backend.to_numpy(x), a, err_msg=f"{case.name}: input mutated")
        np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
@given(data=st.data())
def test_float32_stays_float32(case: OpCase, np_backend: Any, data: Any) -> None:
    arrays, params = _draw_inputs(case, data)
    arrays = [a.astype(np.float32) if a.dtype == np.float64 else a for a in arrays]
    float_idx = tuple(i for i, k in enumerate(case.kinds()) if k == "float")

    def loss(*a: Any) -> Any:
        xp = xg.array_namespace(*a)
        out = case.fn(xp, *a, **params)
        assert out.dtype == xg.float32, f"{case.name}: forward upcast to {out.dtype}"
        return xp.sum(out)

    grads = xg.grad(loss, argnums=float_idx)(*arrays)
    for g in grads:
        assert g.dtype == np.float32, f"{case.name}: gradient dtype {g.dtype}"




@pytest.mark.parametrize(("case", "complex_"), _params([c for c in ALL_CASES if c.torch_fn is not None]))
@given(data=st.data())
def test_against_torch(case: OpCase, complex_: bool, np_backend: Any, data: Any) -> None:
    torch = pytest.importorskip("torch")
    from torch.func import vjp as torch_vjp

    arrays, params = _draw_inputs(case, data, complex_)
    float_idx = [i for i, k in enumerate(case.kinds()) if k == "float"]
    out = case.fn(xg.array_namespace(*arrays), *arrays, **params)
    rng = np.random.default_rng(0)
    u = rng.standard_normal(np.shape(out))
    if np.iscomplexobj(out):  # the cotangent u of a complex output: the loss Re(sum(out * conj(u)))
        u = u + 1j * rng.standard_normal(np.shape(out))

    def loss(*a: Any) -> Any:
        xp = xg.array_namespace(*a)
        return xp.real(xp.sum(case.fn(xp, *a, **params) * np.conj(u)))

    ours = xg.grad(loss, argnums=tuple(float_idx))(*arrays)
    targs = [torch.asarray(a.copy()) for a in arrays]

    def tf(*fl: Any) -> Any:
        a = list(targs)
        for i, t in zip(float_idx, fl):
            a[i] = t
        return case.torch_fn(torch, *a, **params)

    tout, pull = torch_vjp(tf, *[targs[i] for i in float_idx])
    np.testing.assert_allclose(tout.detach().numpy(), np.asarray(out), rtol=1e-10, atol=1e-12,
                               err_msg=f"{case.name}: forward differs from torch")
    theirs = pull(torch.asarray(u.reshape(tuple(tout.shape))))
    for k, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b.resolve_conj().resolve_neg().numpy(), rtol=1e-9, atol=1e-11,
                                   err_msg=f"{case.name}: gradient {k} differs from torch.func.vjp")


@pytest.mark.parametrize(("case", "complex_"), _params([c for c in ALL_CASES if c.torch_fn is not None]))
@given(data=st.data())
def test_against_torch_jvp(case: OpCase, complex_: bool, np_backend: Any, data: Any) -> None:
    torch = pytest.importorskip("torch")
    from torch.func import jvp as torch_jvp

    arrays, params = _draw_inputs(case, data, complex_)
    float_idx = [i for i, k in enumerate(case.kinds()) if k == "float"]
    rng = np.random.default_rng(1)
    vs = []
    for i in float_idx:
        v = rng.standard_normal(np.shape(arrays[i]))
        if np.iscomplexobj(arrays[i]):
            v = v + 1j * rng.standard_normal(np.shape(arrays[i]))
        vs.append(np.asarray(v, dtype=arrays[i].dtype))

    def ours_f(*fl: Any) -> Any:
        a = list(arrays)
        for i, t in zip(float_idx, fl):
            a[i] = t
        return case.fn(xg.array_namespace(*a), *a, **params)

    out, ours = xg.jvp(ours_f, tuple(arrays[i] for i in float_idx), tuple(vs))
    targs = [torch.asarray(a.copy()) for a in arrays]

    def tf(*fl: Any) -> Any:
        a = list(targs)
        for i, t in zip(float_idx, fl):
            a[i] = t
        return case.torch_fn(torch, *a, **params)

    with warnings.catch_warnings():  # torch's own: its forward AD scripts a helper on first use, and
        # some of its complex JVPs (vector_norm) cast internally
        warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.* is deprecated", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message="Casting complex values to real", category=UserWarning)
        tout, theirs = torch_jvp(tf, tuple(targs[i] for i in float_idx), tuple(torch.asarray(v) for v in vs))
    np.testing.assert_allclose(tout.detach().numpy(), np.asarray(out), rtol=1e-10, atol=1e-12,
                               err_msg=f"{case.name}: forward differs from torch")
    np.testing.assert_allclose(np.asarray(ours), theirs.resolve_conj().resolve_neg().numpy(), rtol=1e-9, atol=1e-11,
                               err_msg=f"{case.name}: tangent differs from torch.func.jvp")


def _status(name: str) -> str:
    p = PRIMITIVES.get(name)
    if p is not None:
        return "declared" if p.const else "primitive"
    if name in COMPOSITES:
        return "composite"
    if name in DECLARED:
        return "declared"
    return "missing"


@pytest.mark.parametrize("chapter", CHECKED_CHAPTERS)
def test_every_function_is_differentiable_or_declared(chapter: str) -> None:
    missing = [n for n in CHAPTERS[chapter] if _status(n) == "missing" or not hasattr(xg, n)]
    assert not missing, f"{chapter}: no rule, composite or declaration for {missing}"


def test_every_fft_function_is_differentiable_or_declared() -> None:
    missing = [n for n in FFT if _status(n) == "missing" or not hasattr(xg.fft, n)]
    assert not missing, f"fft: no rule, composite or declaration for {missing}"


def test_every_rule_has_a_case() -> None:
    covered = {n for c in ALL_CASES for n in c.covered()}
    need = [n for n, p in PRIMITIVES.items() if not p.const and p.chapter not in ("internal", "")]
    need += list(COMPOSITES)
    untested = sorted(set(need) - covered)
    assert not untested, f"differentiable functions without an OpCase: {untested}"


def test_every_case_names_something_real() -> None:
    known = set(PRIMITIVES) | set(COMPOSITES)
    unknown = sorted({n for c in ALL_CASES for n in c.covered()} - known)
    assert not unknown, f"OpCases covering unknown functions: {unknown}"
