"""Every case of the rule tests (tests/cases, the registry's and the hand-written ones)
under ``xg.jit``, on every backend of the ``backend`` fixture.

For each case, on drawn inputs ``xs`` and on fresh values ``ys`` of the same shapes:

- the forward ``xg.jit(f)`` equals ``f`` run eagerly;
- the gradient ``xg.jit(xg.grad(loss))`` equals the eager gradient, where ``loss`` is
  ``Re(sum(f(*a) * conj(u)))`` for a random cotangent ``u`` (a VJP of ``f``);
- the second call (on ``ys``) is a *replay* of the program traced on the first call
  (``cache_info()``: one trace, one hit), and equals eager on ``ys``: the first call of
  a jitted function is the trace itself, an eager run, and proves nothing about the
  program;
- no input was written by the program (NumPy's replay writes results into dead buffers).

NumPy must agree bit for bit (values and dtypes): the program replays the very backend
calls eager code makes. JAX runs the program under ``jax.jit`` (XLA may reassociate), so
it agrees to a tolerance; the other backends replay their calls and agree to a tight one.

Example counts: a few per case (the rule tests already sweep values; here every example
traces and replays, and on JAX compiles twice), fewer on the slow namespaces.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgrad as xg

from ._cases import OpCase
from .test_rules import ALL_CASES, _draw_inputs, _params, _xfail

#: hypothesis examples per case and backend under the ci/debug profiles (the thorough
#: profile draws a quarter of its count everywhere)
_CI_EXAMPLES = {"numpy": 3, "array_api_strict": 2, "torch": 2, "jax": 1, "dask": 1, "cupy": 2}


#: cases whose result's shape depends on the values of an argument: under jit they raise
#: ConcretizationError (naming the operation and saying why) instead of tracing
DATA_SHAPED = {
    "getitem_bool_mask": "indexing by a boolean mask",
    "repeat_array_axis0": "repeat() by an array of repeats",
    "repeat_array_last": "repeat() by an array of repeats",
    "repeat_array_flat": "repeat() by an array of repeats",
    "repeat_array_one": "repeat() by an array of repeats",
}


def _examples(backend: str) -> int:
    if os.environ.get("HYPOTHESIS_PROFILE", "ci") not in ("ci", "debug"):
        return max(1, settings().max_examples // 4)
    return _CI_EXAMPLES.get(backend, 2)


def _fresh(case: OpCase, shapes: list[tuple[int, ...]], params: dict[str, Any], rng: np.random.Generator,
           complex_: bool) -> list[np.ndarray]:
    """Other values for the case's arguments, of the same shapes and parameters (conditioned by ``prepare``)."""
    arrays = []
    for i, (kind, shape) in enumerate(zip(case.kinds(), shapes)):
        if kind == "float":
            lo, hi = case.domain_of(i)
            a = rng.uniform(lo, hi, shape)
            if complex_:
                a = a + 1j * rng.uniform(lo, hi, shape)
        elif kind == "int":
            lo, hi = case.int_range(shapes, params) if callable(case.int_range) else case.int_range
            a = rng.integers(lo, hi + 1, shape, dtype=np.int64)
        else:
            a = rng.random(shape) < 0.5
        arrays.append(np.asarray(a))
    if case.prepare is not None:
        arrays = case.prepare(arrays, params)
    return arrays


def _same(what: str, got: Any, want: Any, backend: Any) -> None:
    got, want = backend.to_numpy(got), backend.to_numpy(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} under jit, {want.dtype} eagerly"
    assert got.shape == want.shape, f"{what}: shape {got.shape} under jit, {want.shape} eagerly"
    if backend.name == "numpy":
        assert np.array_equal(got, want, equal_nan=True), f"{what}: not bit for bit equal to eager\n{got}\nvs\n{want}"
    elif backend.name == "jax":  # XLA compiles the program: reassociation, fused multiply-adds
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11 * max(1.0, float(np.max(np.abs(want), initial=0.0))),
                                   err_msg=f"{what}: jit under jax.jit differs from eager")
    else:  # the same calls replayed
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15, err_msg=f"{what}: jit differs from eager")


def _check_jit(what: str, f: Any, eager_args: tuple[list[Any], list[Any]], backend: Any) -> None:
    """``xg.jit(f)`` on the first and then the second argument list, against ``f`` on each."""
    first, second = eager_args
    want1, want2 = f(*first), f(*second)
    jf = xg.jit(f)
    got1, got2 = jf(*first), jf(*second)
    info = jf.cache_info()
    assert (info.traces, info.hits) == (1, 1), f"{what}: the second call did not replay the first call's program: {info}"
    for k, (g, w) in enumerate(zip(_tuple(got1), _tuple(want1))):
        _same(f"{what} (output {k}, the traced call)", g, w, backend)
    for k, (g, w) in enumerate(zip(_tuple(got2), _tuple(want2))):
        _same(f"{what} (output {k}, the replayed call)", g, w, backend)


def _tuple(x: Any) -> tuple[Any, ...]:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


@pytest.mark.parametrize(("case", "complex_"), _params(ALL_CASES))
def test_jit_equals_eager(case: OpCase, complex_: bool, backend: Any) -> None:
    _xfail(case, backend)

    @settings(max_examples=_examples(backend.name))
    @given(data=st.data())
    def run(data: Any) -> None:
        _check_case(case, complex_, backend, data)

    run()


def _check_case(case: OpCase, complex_: bool, backend: Any, data: Any) -> None:
    arrays, params = _draw_inputs(case, data, complex_)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    arrays2 = _fresh(case, [a.shape for a in arrays], params, rng, complex_)
    float_idx = tuple(i for i, k in enumerate(case.kinds()) if k == "float")
    xs = [backend.asarray(a) for a in arrays]
    ys = [backend.asarray(a) for a in arrays2]

    def fwd(*a: Any) -> Any:
        ts = [xg.asarray(x) for x in a]
        return case.fn(xg.array_namespace(*ts), *ts, **params)

    if case.name in DATA_SHAPED:
        for f in (fwd, xg.grad(lambda *a: xg.sum(fwd(*a)), argnums=float_idx)):
            with pytest.raises(xg.ConcretizationError, match="depends on the values") as err:
                xg.jit(f)(*xs)
            assert DATA_SHAPED[case.name] in str(err.value), f"{case.name}: {err.value}"
        return
    _check_jit(f"{case.name}: forward", fwd, (xs, ys), backend)

    out = backend.to_numpy(fwd(*xs))
    if out.dtype.kind in "fc":
        us = []
        for _ in range(2):
            u = rng.standard_normal(out.shape)
            if out.dtype.kind == "c":
                u = u - 1j * rng.standard_normal(out.shape)  # (conj(u): the loss is Re(sum(out * conj(u))))
            us.append(backend.asarray(u.astype(out.dtype)))

        def loss(*a: Any) -> Any:
            *arrs, uc = a
            xp = xg.array_namespace(*arrs)
            s = xp.sum(case.fn(xp, *arrs, **params) * uc)
            return xp.real(s) if out.dtype.kind == "c" else s

        _check_jit(f"{case.name}: gradient", xg.grad(loss, argnums=float_idx), ([*xs, us[0]], [*ys, us[1]]), backend)

    for a, x in zip(arrays, xs):
        np.testing.assert_array_equal(backend.to_numpy(x), a, err_msg=f"{case.name}: an input was written by the program")
    for a, y in zip(arrays2, ys):
        np.testing.assert_array_equal(backend.to_numpy(y), a, err_msg=f"{case.name}: an input was written by the program")
