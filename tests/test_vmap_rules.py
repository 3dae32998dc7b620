"""Every batching rule, on every backend, against a Python loop of the unbatched function.

The cases are the rule tests' OpCases (tests/cases/): for each, hypothesis draws one
set of shapes and parameters, a batch of inputs, which arguments are mapped and along
which axis (None and negative axes included), and whether to nest two vmaps. The
vmapped function must equal the loop; so must ``vmap`` of ``grad`` (per-example
gradients) and ``grad`` of ``vmap`` (the gradient of the batch's sum).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgrad as xg
from xpgrad.autograd._core import PRIMITIVES

from ._cases import OpCase
from .conftest import examples_for
from .test_rules import ALL_CASES, _draw_arrays, _params, _xfail

#: cases whose function cannot be batched (data-dependent output shapes): tested for the error
UNBATCHABLE = {n for n, p in PRIMITIVES.items() if p.data_dependent_shape}
#: case -> arguments that vmap must not map: mapped, the output shape would depend on the data
#: (a batched boolean mask: tests/test_vmap_indexing.py checks the error; a batched ``repeats``
#: array: tests/test_vmap_misc.py)
UNMAPPED = {"getitem_bool_mask": (1,), "repeat_array_axis0": (1,), "repeat_array_last": (1,),
            "repeat_array_flat": (1,), "repeat_array_one": (1,)}
#: case -> the argument it updates in place: vmap refuses an in-place update of a value
#: not mapped along a level by one that is (the updated value would become batched;
#: tests/test_vmap_indexing.py checks the error), so it is mapped wherever another is
INPLACE = {"setitem_basic": 0, "setitem_negative_step": 0, "setitem_int_array": 0, "setitem_bool_mask": 0}


def _leaves(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return [y for o in out for y in _leaves(o)]
    return [out]


def _np(backend: Any, out: Any) -> list[np.ndarray]:
    return [np.asarray(backend.to_numpy(o)) for o in _leaves(out)]


def _scalar_loss(out: Any) -> Any:
    """The real sum of the floating outputs (None when there is none)."""
    total = None
    for o in _leaves(out):
        if not xg.isdtype(o.dtype, ("real floating", "complex floating")):
            continue
        s = xg.sum(xg.real(o) if xg.isdtype(o.dtype, "complex floating") else o)
        total = s if total is None else total + s
    return total


def _allclose(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
        np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-9, err_msg=what, equal_nan=True)


def _check(case: OpCase, complex_: bool, backend: Any, data: Any) -> None:
    shapes = case.shapes(data.draw)
    params = case.params(data.draw, shapes)
    nested = data.draw(st.booleans(), label="nested")
    sizes = (2, 3) if nested else (3,)
    n_ex = int(np.prod(sizes))
    examples = [_draw_arrays(case, data, shapes, params, complex_) for _ in range(n_ex)]
    nargs = len(case.kinds())
    # per level (outer first) and argument: the axis the batch goes in, or None
    axes: list[list[Any]] = [[None] * nargs for _ in sizes]
    for lvl in reversed(range(len(sizes))):  # (an outer level sees the inner levels' axes)
        target = INPLACE.get(case.name)
        order = [i for i in range(nargs) if i != target] + ([] if target is None else [target])
        for i in order:
            n = len(shapes[i]) + sum(axes[inner][i] is not None for inner in range(lvl + 1, len(sizes)))
            if i in UNMAPPED.get(case.name, ()):
                continue
            mapped_ax = st.integers(-(n + 1), n)
            if i == target and any(axes[lvl][j] is not None for j in range(nargs) if j != i):
                axes[lvl][i] = data.draw(mapped_ax, label=f"axis {i}")
            else:
                axes[lvl][i] = data.draw(st.one_of(st.none(), mapped_ax), label=f"axis {i}")

    # build per level: innermost stacks first
    def build_arg(i: int, per_example: Any = None, total: bool = False) -> np.ndarray:
        """Argument ``i`` as vmap takes it; or, from ``per_example[j]`` values of each example,
        the gradient of the batch's sum with respect to it (``total``: summed along the
        levels that do not map it)."""
        def rec(lvl: int, idx: tuple[int, ...]) -> np.ndarray:
            if lvl == len(sizes):
                j = int(np.ravel_multi_index(idx, sizes))
                return examples[j][i] if per_example is None else per_example[j]
            ax = axes[lvl][i]
            if ax is None:
                if total:
                    return sum(rec(lvl + 1, (*idx, b)) for b in range(sizes[lvl]))  # type: ignore[return-value]
                return rec(lvl + 1, (*idx, 0))
            return np.stack([rec(lvl + 1, (*idx, b)) for b in range(sizes[lvl])], axis=ax)

        return rec(0, ())

    # examples not mapped along a level must be the same along it
    for i in range(nargs):
        for j in range(n_ex):
            idx = list(np.unravel_index(j, sizes))
            for lvl in range(len(sizes)):
                if axes[lvl][i] is None:
                    idx[lvl] = 0
            examples[j][i] = examples[int(np.ravel_multi_index(tuple(idx), sizes))][i]
    inputs = [backend.asarray(build_arg(i)) for i in range(nargs)]

    def f(*a: Any) -> Any:
        # as Tensors (asarray returns a batched value itself): xpgrad's functions run, in the loop and
        # where vmap maps no argument, not the backend's own (Dask's reshape refuses what xpgrad's rechunks)
        a = tuple(xg.asarray(v) for v in a)
        return case.fn(xg.array_namespace(*a), *a, **params)

    mapped = f
    for lvl in reversed(range(len(sizes))):
        mapped = xg.vmap(mapped, in_axes=tuple(axes[lvl]), axis_size=sizes[lvl])

    def loop(fn: Any) -> list[np.ndarray]:
        outs = [_np(backend, fn(*[backend.asarray(a) for a in ex])) for ex in examples]
        return [np.stack([o[k] for o in outs]).reshape(sizes + outs[0][k].shape) for k in range(len(outs[0]))]

    want = loop(f)
    got = _np(backend, mapped(*inputs))
    _allclose(got, want, f"{case.name}: vmap (axes {axes})")

    float_idx = tuple(i for i, k in enumerate(case.kinds()) if k == "float")
    if not float_idx or _scalar_loss(f(*[xg.asarray(backend.asarray(a)) for a in examples[0]])) is None:
        return

    def loss(*a: Any) -> Any:
        return _scalar_loss(f(*a))

    # per-example gradients: vmap of grad
    per = xg.grad(loss, argnums=float_idx)
    mapped_g = per
    for lvl in reversed(range(len(sizes))):
        mapped_g = xg.vmap(mapped_g, in_axes=tuple(axes[lvl]), axis_size=sizes[lvl])
    want_g = loop(per)
    got_g = _np(backend, mapped_g(*inputs))
    _allclose(got_g, want_g, f"{case.name}: vmap(grad) (axes {axes})")

    # grad of vmap: the gradient of the sum over the batch
    def total(*a: Any) -> Any:
        return _scalar_loss(mapped(*a))

    got_s = _np(backend, xg.grad(total, argnums=float_idx)(*inputs))
    per_ex = [_np(backend, per(*[backend.asarray(a) for a in ex])) for ex in examples]
    # an argument shared by the examples of a level (not mapped along it) gets their sum; a
    # mapped one each example's gradient in its own slot
    want_s = [build_arg(i, [pe[k] for pe in per_ex], total=True) for k, i in enumerate(float_idx)]
    _allclose(got_s, want_s, f"{case.name}: grad(vmap) (axes {axes})")


CASES = [c for c in ALL_CASES if c.name not in UNBATCHABLE]


def _examples(backend: str) -> int:
    """Under the ci profile: 3 drawn batches per case on NumPy (the reference), 1 on the other
    backends (each rule is the same code there; the backend's own namespace is what a draw
    re-checks), so the sweep of about 330 cases x 6 backends stays near two minutes on 2 cores.
    The thorough profile draws a quarter of its count on every backend."""
    if os.environ.get("HYPOTHESIS_PROFILE", "ci") in ("ci", "debug"):
        return 3 if backend == "numpy" else 1
    return max(3, examples_for(backend) // 4)


@pytest.mark.parametrize(("case", "complex_"), _params(CASES))
def test_vmap_matches_loop(case: OpCase, complex_: bool, backend: Any) -> None:
    _xfail(case, backend)

    @settings(max_examples=_examples(backend.name), deadline=None)
    @given(data=st.data())
    def run(data: Any) -> None:
        _check(case, complex_, backend, data)

    run()
