"""The rule-test table: one OpCase per differentiable function.

Each chapter's cases live in ``tests/cases/<chapter>.py`` as a ``CASES`` list;
``tests/test_rules.py`` runs every case on every backend with hypothesis, checking
forward values against the backend itself, gradients against float64 central
differences (first and, where ``order2``, second order), gradients against
``torch.func.vjp`` where torch is installed, float32 staying float32, and that no
input was mutated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

Draw = Callable[[st.SearchStrategy[Any]], Any]


def broadcast_shapes(n: int, min_dims: int = 0, max_dims: int = 3, max_side: int = 4) -> Callable[[Draw], list[tuple[int, ...]]]:
    """Shapes for ``n`` arguments that broadcast together."""

    def draw_shapes(draw: Draw) -> list[tuple[int, ...]]:
        bs = draw(hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=min_dims, max_dims=max_dims,
                                                    min_side=1, max_side=max_side))
        return list(bs.input_shapes)

    return draw_shapes


def same_shape(n: int, min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4) -> Callable[[Draw], list[tuple[int, ...]]]:
    """``n`` arguments of one shape."""

    def draw_shapes(draw: Draw) -> list[tuple[int, ...]]:
        s = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side))
        return [s] * n

    return draw_shapes


def axis_params(keepdims: bool = True) -> Callable[[Draw, list[tuple[int, ...]]], dict[str, Any]]:
    """``axis`` (None, an int or a tuple) and ``keepdims`` for a reduction of argument 0."""

    def draw_params(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
        nd = len(shapes[0])
        choices: list[Any] = [None]
        if nd:
            choices += list(range(-nd, nd))
            choices.append(tuple(sorted(draw(st.sets(st.integers(0, nd - 1), min_size=1, max_size=nd)))))
        out: dict[str, Any] = {"axis": draw(st.sampled_from(choices))}
        if keepdims:
            out["keepdims"] = draw(st.booleans())
        return out

    return draw_params


def no_params(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    return {}


@dataclass
class OpCase:
    """How to test the gradient of one function.

    Attributes:
        name: the case id; by default also the primitive/composite it covers.
        fn: ``fn(xp, *arrays, **params)``, written against the array API.
        nargs: number of array arguments.
        shapes: draws the argument shapes.
        params: draws keyword parameters given the shapes.
        domain: (low, high) of the values, or one pair per argument.
        dtypes: per-argument kinds: "float" (differentiable), "int" or "bool".
        int_range: (low, high) for integer arguments, or a callable (shapes, params) -> (low, high).
        torch_fn: ``torch_fn(torch, *tensors, **params)`` for the differential test; None
            skips it (say why in ``torch_skip``).
        order2: also check second order.
        covers: the primitive/composite names this case covers (default: (name,)).
        xfail: backend name -> reason, for a backend's own limitation.
        complex: also draw complex inputs for the float arguments.
        fwd_exact: compare the forward with the backend called directly.
        rtol: tolerance of the finite-difference check.
        prepare: optional ``prepare(np_arrays, params) -> np_arrays`` to condition inputs
            (e.g. keep apart from a singular point).
    """

    name: str
    fn: Callable[..., Any]
    nargs: int = 1
    shapes: Callable[[Draw], list[tuple[int, ...]]] = field(default_factory=lambda: broadcast_shapes(1))
    params: Callable[[Draw, list[tuple[int, ...]]], dict[str, Any]] = no_params
    domain: tuple[float, float] | Sequence[tuple[float, float]] = (-2.0, 2.0)
    dtypes: Sequence[str] | None = None
    int_range: Any = (0, 3)
    torch_fn: Callable[..., Any] | None = None
    torch_skip: str = ""
    order2: bool = True
    covers: Sequence[str] = ()
    xfail: dict[str, str] = field(default_factory=dict)
    complex: bool = False
    fwd_exact: bool = True
    rtol: float = 1e-5
    prepare: Callable[[list[np.ndarray], dict[str, Any]], list[np.ndarray]] | None = None

    def covered(self) -> tuple[str, ...]:
        return tuple(self.covers) or (self.name,)

    def kinds(self) -> list[str]:
        return list(self.dtypes) if self.dtypes is not None else ["float"] * self.nargs

    def domain_of(self, i: int) -> tuple[float, float]:
        d = self.domain
        if isinstance(d[0], (int, float)):
            return d  # type: ignore[return-value]
        return d[i]  # type: ignore[return-value]


# ---------------------------------------------------------------- cases derived from the registry
def _resolve(ns: Any, path: str) -> Any:
    for part in path.split("."):
        ns = getattr(ns, part)
    return ns


def away(points: tuple[float, ...], gap: float = 0.1) -> Callable[[list[np.ndarray], dict[str, Any]], list[np.ndarray]]:
    """Move the real parts of every argument at least ``gap`` away from each point (kinks)."""

    def prepare(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
        out = []
        for a in arrays:
            for p in points:
                re = np.real(a) - p
                a = a + np.where(np.abs(re) < gap, np.where(re < 0, -gap, gap) - re, 0.0)
            out.append(a)
        return out

    return prepare


def _apart(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    """x1 on a grid of step 0.2, x2 on the grid shifted by 0.1: never closer than 0.1 (no ties)."""
    x1, x2 = arrays
    return [np.round(x1 / 0.2) * 0.2, np.round(x2 / 0.2) * 0.2 + 0.1]


def draw_param(draw: Draw, kind: str, ndim: int) -> Any:
    """One keyword parameter of a kind `Inputs.params` names, for an argument of ``ndim`` dimensions."""
    if kind == "bool":
        return draw(st.booleans())
    axes = list(range(-ndim, ndim))
    if kind == "axis":
        return draw(st.sampled_from(axes))
    choices: list[Any] = [None, *axes]
    if kind == "axes?" and ndim:
        picked = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
        choices.append(tuple(a - ndim if draw(st.booleans()) else a for a in picked))
    return draw(st.sampled_from(choices))


def _param_draws(kinds: dict[str, str]) -> Callable[[Draw, list[tuple[int, ...]]], dict[str, Any]]:
    def draw_params(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
        return {k: draw_param(draw, kind, len(shapes[0])) for k, kind in kinds.items()}

    return draw_params


def registry_case(op: Any) -> OpCase:
    """The rule tests' case of a registry entry (``xpgrad.ops._registry.Op``) from its
    ``test`` (an ``Inputs``): the function called through the namespace by its path, on
    drawn shapes, values and parameters (`Inputs.params`), compared with PyTorch's function
    of the same name (or ``Inputs.torch``: a name or a formula)."""
    spec = op.test
    n = op.nargs
    steps = ([_apart] if spec.apart else []) + ([away(spec.away)] if spec.away else [])

    def prepare(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
        for step in steps:
            arrays = step(arrays, params)
        return arrays

    tname = op.name if spec.torch is None else spec.torch
    torch_fn = tname if callable(tname) else None if tname == "" else (lambda t, *a, **kw: _resolve(t, tname)(*a, **kw))
    min_dims = max(spec.min_dims, 1 if "axis" in (spec.params or {}).values() else 0)
    shapes = broadcast_shapes(n, min_dims) if spec.shapes == "broadcast" else same_shape(n, min_dims)
    # a function of the standard through the namespace (the backend's own, then xpgrad's);
    # one beyond it (special.erf, a plugin's) is xpgrad's on either
    path = op.standard_name
    fn = (lambda xp, *a, **kw: _resolve(xp, path)(*a, **kw)) if path is not None else (lambda xp, *a, **kw: op.fn(*a, **kw))
    return OpCase(op.name, fn, nargs=n, shapes=shapes, params=_param_draws(spec.params) if spec.params else no_params,
                  domain=spec.domain, torch_fn=torch_fn, torch_skip="" if torch_fn else "PyTorch has no counterpart",
                  order2=spec.order2, complex=spec.complex, rtol=spec.rtol, prepare=prepare if steps else None)


def registry_cases() -> list[OpCase]:
    """One case per registry entry that says how to draw its inputs."""
    from xpgrad.ops._registry import REGISTRY

    return [registry_case(op) for op in REGISTRY.values() if op.test is not None]
