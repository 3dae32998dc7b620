"""OpCases for the manipulation chapter (and ``to_device``).

Where a parameter and the shapes must agree (the axis of ``concat``, the axes of
``squeeze``), the shapes draw picks both and hands the parameters on as a trailing
dict in its list: the harness zips shapes with the arguments, so the dict only
reaches ``params`` (see :func:`_chosen`).
"""

from __future__ import annotations

import math
from typing import Any

import array_api_compat
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xpgrad as xg
from tests._cases import OpCase, same_shape

Draw = Any


def _chosen(draw: Draw, shapes: list[Any]) -> dict[str, Any]:
    """The parameters the shapes draw chose (its trailing dict)."""
    return dict(shapes[-1]) if shapes and isinstance(shapes[-1], dict) else {}


def _shape(draw: Draw, min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 3) -> tuple[int, ...]:
    return draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side))


def _axis(draw: Draw, ndim: int) -> int:
    """An axis of an ndim-array, possibly negative."""
    a = draw(st.integers(0, ndim - 1))
    return a - ndim if draw(st.booleans()) else a


def _axes_subset(draw: Draw, ndim: int, min_size: int = 1) -> tuple[int, ...]:
    """Distinct axes, some written negative."""
    picked = draw(st.lists(st.integers(0, ndim - 1), min_size=min_size, max_size=ndim, unique=True))
    return tuple(a - ndim if draw(st.booleans()) else a for a in picked)


def _same_device(x: Any) -> Any:
    """``x.to_device(<its own device>)``: the method on Tensors, array-api-compat on raw arrays."""
    if isinstance(x, xg.Tensor):
        return x.to_device(x.device)
    return array_api_compat.to_device(x, array_api_compat.device(x))


# ---------------------------------------------------------------- shape draws
def _broadcast_to_shapes(draw: Draw) -> list[Any]:
    s = _shape(draw, max_dims=2, max_side=2)
    target = draw(hnp.mutually_broadcastable_shapes(num_shapes=1, base_shape=s, max_dims=3, max_side=3)).result_shape
    return [s, {"shape": tuple(target)}]


def _reshape_shapes(draw: Draw) -> list[Any]:
    s = _shape(draw, max_dims=3)
    n = math.prod(s)
    # split n into factors, then maybe hide one of them as -1
    dims: list[int] = []
    rest = n
    for _ in range(draw(st.integers(0, 3))):
        f = draw(st.sampled_from([d for d in range(1, rest + 1) if rest % d == 0]))
        dims.append(f)
        rest //= f
    dims.append(rest)
    dims = draw(st.permutations(dims))
    if draw(st.booleans()):
        dims[draw(st.integers(0, len(dims) - 1))] = -1
    return [s, {"shape": tuple(dims), "copy": draw(st.sampled_from([None, True]))}]


def _expand_dims_shapes(draw: Draw) -> list[Any]:
    s = _shape(draw, max_dims=3)
    return [s, {"axis": draw(st.integers(-len(s) - 1, len(s)))}]


def _squeeze_shapes(draw: Draw) -> list[Any]:
    s = list(_shape(draw, max_dims=2))
    ones = draw(st.lists(st.integers(0, len(s)), min_size=1, max_size=2))
    for pos in sorted(ones, reverse=True):
        s.insert(pos, 1)
    nd = len(s)
    unit = [i for i, d in enumerate(s) if d == 1]
    picked = draw(st.lists(st.sampled_from(unit), min_size=1, max_size=len(unit), unique=True))
    picked = [a - nd if draw(st.booleans()) else a for a in picked]
    axis: Any = picked[0] if len(picked) == 1 and draw(st.booleans()) else tuple(picked)
    return [tuple(s), {"axis": axis}]


def _permute_shapes(draw: Draw) -> list[Any]:
    s = _shape(draw, max_dims=4, max_side=3)
    return [s, {"axes": tuple(draw(st.permutations(range(len(s)))))}]


def _moveaxis_shapes(draw: Draw) -> list[Any]:
    s = _shape(draw, min_dims=1, max_dims=4)
    nd = len(s)
    if draw(st.booleans()):
        return [s, {"source": _axis(draw, nd), "destination": _axis(draw, nd)}]
    src = _axes_subset(draw, nd)
    dst = tuple(draw(st.lists(st.integers(0, nd - 1), min_size=len(src), max_size=len(src), unique=True)))
    return [s, {"source": src, "destination": dst}]


def _roll_shapes(draw: Draw) -> list[Any]:
    s = _shape(draw, max_dims=3)
    nd = len(s)
    kind = draw(st.sampled_from(["flat", "int", "tuple"] if nd else ["flat"]))
    if kind == "flat":
        return [s, {"shift": draw(st.integers(-5, 5)), "axis": None}]
    if kind == "int":
        return [s, {"shift": draw(st.integers(-5, 5)), "axis": _axis(draw, nd)}]
    axes = _axes_subset(draw, nd)
    shift = tuple(draw(st.integers(-5, 5)) for _ in axes)
    return [s, {"shift": shift, "axis": axes}]


def _concat_shapes(n: int) -> Any:
    def draw_shapes(draw: Draw) -> list[Any]:
        if draw(st.integers(0, 3)) == 0:  # axis=None: any shapes, flattened
            return [_shape(draw, max_dims=2) for _ in range(n)] + [{"axis": None}]
        base = list(_shape(draw, min_dims=1, max_dims=3))
        axis = _axis(draw, len(base))
        shapes = []
        for _ in range(n):
            s = list(base)
            s[axis] = draw(st.integers(0, 3))
            shapes.append(tuple(s))
        return [*shapes, {"axis": axis}]

    return draw_shapes


def _stack_shapes(n: int) -> Any:
    def draw_shapes(draw: Draw) -> list[Any]:
        s = _shape(draw, max_dims=3)
        return [s] * n + [{"axis": draw(st.integers(-len(s) - 1, len(s)))}]

    return draw_shapes


def _unstack_shapes(draw: Draw) -> list[Any]:
    s = _shape(draw, min_dims=1, max_dims=3)
    axis = _axis(draw, len(s))
    n = s[axis]
    used = tuple(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)))
    return [s, {"axis": axis, "used": used}]


def _unstack_fn(xp: Any, x: Any, *, axis: int, used: tuple[int, ...]) -> Any:
    """Some of the outputs, weighted: the others get no gradient (None in the rule)."""
    parts = xp.unstack(x, axis=axis)
    return xp.stack([parts[i] * float(i + 1) for i in used])


def _unstack_torch(t: Any, x: Any, *, axis: int, used: tuple[int, ...]) -> Any:
    parts = t.unbind(x, dim=axis)
    return t.stack([parts[i] * float(i + 1) for i in used])


def _repeat_shapes(flat: bool) -> Any:
    def draw_shapes(draw: Draw) -> list[Any]:
        s = _shape(draw, min_dims=0 if flat else 1, max_dims=3)
        return [s, {"repeats": draw(st.integers(0, 3)), "axis": None if flat else _axis(draw, len(s))}]

    return draw_shapes


def _repeat_array_shapes(axis: int | None) -> Any:
    """x and one repeat count per element along ``axis`` (of the flattened x when None)."""

    def draw_shapes(draw: Draw) -> list[Any]:
        s = _shape(draw, min_dims=0 if axis is None else 1, max_dims=3)
        n = math.prod(s) if axis is None else s[axis]
        return [s, (n,)]

    return draw_shapes


def _repeat_one_shapes(draw: Draw) -> list[Any]:
    s = _shape(draw, min_dims=1, max_dims=3)
    return [s, (1,), {"axis": _axis(draw, len(s))}]


def _tile_shapes(draw: Draw) -> list[Any]:
    s = _shape(draw, max_dims=3)
    reps = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=4)))
    return [s, {"repetitions": reps}]


def _torch_roll(t: Any, x: Any, *, shift: Any, axis: Any) -> Any:
    return t.roll(x, shift) if axis is None else t.roll(x, shift, dims=axis)


def _torch_concat(t: Any, *xs: Any, axis: Any) -> Any:
    if axis is None:
        return t.cat([x.reshape(-1) for x in xs])
    return t.cat(xs, dim=axis)


def _torch_repeat(t: Any, x: Any, *, repeats: int, axis: Any) -> Any:
    return t.repeat_interleave(x, repeats, dim=axis)


CASES = [
    # ------------------------------------------------------------ broadcasting
    OpCase(
        "broadcast_to",
        lambda xp, x, shape: xp.broadcast_to(x, shape),
        shapes=_broadcast_to_shapes,
        params=_chosen,
        torch_fn=lambda t, x, shape: t.broadcast_to(x, shape),
        complex=True,
    ),
    OpCase(
        "broadcast_arrays",
        lambda xp, a, b: (lambda r: r[0] * 2.0 + r[1])(xp.broadcast_arrays(a, b)),
        nargs=2,
        shapes=lambda d: _bshapes(d, 2),
        torch_fn=lambda t, a, b: (lambda r: r[0] * 2.0 + r[1])(t.broadcast_tensors(a, b)),
        covers=("broadcast_arrays", "multiply", "add"),
    ),
    # only the second output is used: the first one's gradient is a symbolic zero
    OpCase(
        "broadcast_arrays_one_used",
        lambda xp, a, b, c: xp.broadcast_arrays(a, b, c)[1],
        nargs=3,
        shapes=lambda d: _bshapes(d, 3),
        torch_fn=lambda t, a, b, c: t.broadcast_tensors(a, b, c)[1],
        covers=("broadcast_arrays",),
    ),
    OpCase(
        "broadcast_arrays_single",
        lambda xp, a: xp.broadcast_arrays(a)[0],
        shapes=same_shape(1),
        torch_fn=lambda t, a: t.broadcast_tensors(a)[0],
        covers=("broadcast_arrays",),
    ),
    # ------------------------------------------------------------ reshaping
    OpCase(
        "reshape",
        lambda xp, x, shape, copy: xp.reshape(x, shape, copy=copy),
        shapes=_reshape_shapes,
        params=_chosen,
        torch_fn=lambda t, x, shape, copy: t.reshape(x, shape),
        complex=True,
    ),
    OpCase(
        "reshape_copy_false",
        lambda xp, x, shape, copy: xp.reshape(x, shape, copy=False),
        shapes=_reshape_shapes,
        params=_chosen,
        torch_fn=lambda t, x, shape, copy: t.reshape(x, shape),
        covers=("reshape",),
        xfail={"dask": "array-api-compat's dask reshape raises AttributeError with copy=False"},
    ),
    OpCase(
        "expand_dims",
        lambda xp, x, axis: xp.expand_dims(x, axis=axis),
        shapes=_expand_dims_shapes,
        params=_chosen,
        torch_fn=lambda t, x, axis: t.unsqueeze(x, axis),
    ),
    OpCase(
        "squeeze",
        lambda xp, x, axis: xp.squeeze(x, axis=axis),
        shapes=_squeeze_shapes,
        params=_chosen,
        torch_fn=lambda t, x, axis: t.squeeze(x, dim=axis),
    ),
    # ------------------------------------------------------------ axes
    OpCase(
        "permute_dims",
        lambda xp, x, axes: xp.permute_dims(x, axes),
        shapes=_permute_shapes,
        params=_chosen,
        torch_fn=lambda t, x, axes: t.permute(x, axes),
        complex=True,
    ),
    OpCase(
        "moveaxis",
        lambda xp, x, source, destination: xp.moveaxis(x, source, destination),
        shapes=_moveaxis_shapes,
        params=_chosen,
        torch_fn=lambda t, x, source, destination: t.moveaxis(x, source, destination),
    ),
    # (flip: its entry's Inputs, src/xpgrad/ops/manipulation.py)
    OpCase(
        "roll",
        lambda xp, x, shift, axis: xp.roll(x, shift, axis=axis),
        shapes=_roll_shapes,
        params=_chosen,
        torch_fn=_torch_roll,
    ),
    # ------------------------------------------------------------ joining and splitting
    OpCase(
        "concat",
        lambda xp, a, b, axis: xp.concat([a, b], axis=axis),
        nargs=2,
        shapes=_concat_shapes(2),
        params=_chosen,
        torch_fn=lambda t, a, b, axis: _torch_concat(t, a, b, axis=axis),
        complex=True,
    ),
    OpCase(
        "concat3",
        lambda xp, a, b, c, axis: xp.concat((a, b, c), axis=axis),
        nargs=3,
        shapes=_concat_shapes(3),
        params=_chosen,
        torch_fn=lambda t, a, b, c, axis: _torch_concat(t, a, b, c, axis=axis),
        covers=("concat",),
    ),
    OpCase(
        "stack",
        lambda xp, a, b, axis: xp.stack([a, b], axis=axis),
        nargs=2,
        shapes=_stack_shapes(2),
        params=_chosen,
        torch_fn=lambda t, a, b, axis: t.stack([a, b], dim=axis),
        complex=True,
    ),
    OpCase(
        "stack1",
        lambda xp, a, axis: xp.stack((a,), axis=axis),
        shapes=_stack_shapes(1),
        params=_chosen,
        torch_fn=lambda t, a, axis: t.stack([a], dim=axis),
        covers=("stack",),
    ),
    OpCase(
        "unstack",
        _unstack_fn,
        shapes=_unstack_shapes,
        params=_chosen,
        torch_fn=_unstack_torch,
        covers=("unstack", "stack", "multiply"),
        complex=True,
    ),
    # ------------------------------------------------------------ repetition
    OpCase(
        "repeat",
        lambda xp, x, repeats, axis: xp.repeat(x, repeats, axis=axis),
        shapes=_repeat_shapes(False),
        params=_chosen,
        torch_fn=_torch_repeat,
        complex=True,
    ),
    # xpgrad flattens first, but the forward check also calls the backend's own repeat
    OpCase(
        "repeat_flat",
        lambda xp, x, repeats, axis: xp.repeat(x, repeats, axis=axis),
        shapes=_repeat_shapes(True),
        params=_chosen,
        torch_fn=_torch_repeat,
        covers=("repeat",),
        xfail={"dask": "dask's own repeat needs an integer axis"},
    ),
    OpCase(
        "repeat_array_axis0",
        lambda xp, x, r: xp.repeat(x, r, axis=0),
        nargs=2,
        shapes=_repeat_array_shapes(0),
        dtypes=["float", "int"],
        torch_fn=lambda t, x, r: t.repeat_interleave(x, r, dim=0),
        covers=("repeat",),
        xfail={"dask": "dask repeats only by a Python int (NotImplementedError)"},
    ),
    OpCase(
        "repeat_array_last",
        lambda xp, x, r: xp.repeat(x, r, axis=-1),
        nargs=2,
        shapes=_repeat_array_shapes(-1),
        dtypes=["float", "int"],
        torch_fn=lambda t, x, r: t.repeat_interleave(x, r, dim=-1),
        covers=("repeat",),
        xfail={"dask": "dask repeats only by a Python int (NotImplementedError)"},
    ),
    OpCase(
        "repeat_array_flat",
        lambda xp, x, r: xp.repeat(x, r),
        nargs=2,
        shapes=_repeat_array_shapes(None),
        dtypes=["float", "int"],
        torch_fn=lambda t, x, r: t.repeat_interleave(x.reshape(-1), r),
        covers=("repeat",),
        xfail={"dask": "dask repeats only by a Python int (NotImplementedError)"},
    ),
    OpCase(
        "repeat_array_one",
        lambda xp, x, r, axis: xp.repeat(x, r, axis=axis),
        nargs=2,
        shapes=_repeat_one_shapes,
        params=_chosen,
        dtypes=["float", "int"],
        torch_fn=lambda t, x, r, axis: t.repeat_interleave(x, r, dim=axis),
        covers=("repeat",),
        xfail={"dask": "dask repeats only by a Python int (NotImplementedError)"},
    ),
    OpCase(
        "tile",
        lambda xp, x, repetitions: xp.tile(x, repetitions),
        shapes=_tile_shapes,
        params=_chosen,
        torch_fn=lambda t, x, repetitions: t.tile(x, repetitions),
        complex=True,
    ),
    # ------------------------------------------------------------ devices
    OpCase(
        "to_device",
        lambda xp, x: _same_device(x) * 1.5,
        torch_fn=lambda t, x: x.to("cpu") * 1.5,
        shapes=same_shape(1),
        covers=("to_device", "multiply"),
        complex=True,
    ),
]


def _bshapes(draw: Draw, n: int) -> list[tuple[int, ...]]:
    """``n`` more shapes that broadcast together (drawn after any base shape)."""
    bs = draw(hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=3, min_side=1, max_side=3))
    return list(bs.input_shapes)
