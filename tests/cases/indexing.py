"""OpCases for indexing: ``x[key]``, ``x[key] = value`` (functional), ``take``, ``take_along_axis``.

Keys are drawn per shape: basic keys (ints, slices with steps, None, ``...``),
integer arrays (with a forced repeated index, so the gradient must add up) and
boolean masks. Keys cover every axis or use ``...``, as the standard requires
(array-api-strict refuses flat indexing). Where a backend's own indexing cannot
run the key, the case is an xfail naming the limitation; xpgrad's own fallbacks
for those (negative steps on PyTorch, integer-array assignment on
array-api-strict and Dask, ``take_along_axis`` on Dask) are checked in
tests/test_indexing.py.
"""

from __future__ import annotations

from typing import Any

import array_api_extra as xpx
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests._cases import OpCase

_NO_TORCH_NEG = "PyTorch slices refuse negative steps, so the backend's own forward cannot run"
_NO_STRICT_FANCY_SET = "array-api-strict has no integer-array __setitem__, so the backend's own forward cannot run"
_DASK_NAN = "Dask: boolean-mask indexing gives unknown (nan) sizes, so no gradient of that shape can be drawn"


# ---------------------------------------------------------------- key drawing
def _slice(draw: Any, n: int, neg: bool) -> slice:
    start = draw(st.none() | st.integers(-n, n - 1))
    stop = draw(st.none() | st.integers(-n, n))
    step = draw(st.integers(-3, -1) if neg else st.none() | st.integers(1, 3))
    return slice(start, stop, step)


def _basic_key(draw: Any, shape: tuple[int, ...], neg: bool = False, none: bool = True) -> tuple[Any, ...]:
    """Ints and slices for every axis, maybe ``...`` for a run of full axes, and (with
    ``none``) some Nones; the standard's ``__setitem__`` takes no None.

    With ``neg`` at least one axis gets a negative step.
    """
    nd = len(shape)
    forced = draw(st.integers(0, nd - 1)) if neg and nd else -1
    parts: list[Any] = []
    for ax, n in enumerate(shape):
        if ax == forced:
            parts.append(_slice(draw, n, True))
        elif draw(st.booleans()):
            parts.append(draw(st.integers(-n, n - 1)))
        else:
            parts.append(_slice(draw, n, neg and draw(st.booleans())))
    if draw(st.booleans()):  # a run of full axes written as ...
        a = draw(st.integers(0, nd))
        b = draw(st.integers(a, nd))
        if not (a <= forced < b):
            parts[a:b] = [Ellipsis]
    for _ in range(draw(st.integers(0, 2)) if none else 0):
        parts.insert(draw(st.integers(0, len(parts))), None)
    return tuple(parts)


def _x_shape(draw: Any, min_dims: int = 1, max_dims: int = 3) -> tuple[int, ...]:
    return draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=4))


def _value_shape(draw: Any, target: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``target``: a suffix of it, some sides set to 1."""
    k = draw(st.integers(0, len(target)))
    suffix = target[len(target) - k:]
    return tuple(1 if draw(st.booleans()) else s for s in suffix)


def _with_repeat(idx: int) -> Any:
    """Make argument ``idx`` (an index array) repeat its first value, when it has two or more."""

    def prepare(arrays: list[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
        out = list(arrays)
        a = out[idx].copy()
        if a.size >= 2:
            a.flat[-1] = a.flat[0]
        out[idx] = a
        return out

    return prepare


def _target_shape(shape: tuple[int, ...], key: Any) -> tuple[int, ...]:
    return np.empty(shape)[key].shape


def _carried(draw: Any, shapes: list[Any]) -> dict[str, Any]:
    """Parameters drawn together with the shapes (a value's shape can depend on the key).

    Such ``shapes`` functions append a dict after the argument shapes; the harness
    pairs shapes with arguments (``zip``), so the extra entry reaches only ``params``.
    """
    return dict(shapes[-1])


# ---------------------------------------------------------------- getitem
def _basic_case(name: str, neg: bool, **kw: Any) -> OpCase:
    def shapes(draw: Any) -> list[tuple[int, ...]]:
        return [_x_shape(draw)]

    def params(draw: Any, shapes_: list[tuple[int, ...]]) -> dict[str, Any]:
        return {"key": _basic_key(draw, shapes_[0], neg)}

    torch_fn = None if neg else (lambda t, x, key: x[key])
    return OpCase(name, lambda xp, x, key: x[key], shapes=shapes, params=params, complex=True,
                  torch_fn=torch_fn, covers=("getitem",), **kw)


def _int_key(params: dict[str, Any], i: Any) -> tuple[Any, ...]:
    """``params["pre"] + (i,) + params["post"]``: ints or slices around one index array."""
    return (*params["pre"], i, *params["post"])


def _int_shapes(min_dims: int, max_dims: int) -> Any:
    def draw_shapes(draw: Any) -> list[tuple[int, ...]]:
        return [_x_shape(draw), draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=4))]

    return draw_shapes


def _int_params(slices: bool) -> Any:
    """Where the index array goes; ints (or, with ``slices``, also slices) on the other axes."""

    def params(draw: Any, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
        xs = shapes[0]
        pos = draw(st.integers(0, len(xs) - 1))
        other = [draw(st.integers(-n, n - 1)) if not slices or draw(st.booleans()) else _slice(draw, n, False)
                 for n in xs]
        return {"pre": tuple(other[:pos]), "post": tuple(other[pos + 1:]), "n": xs[pos]}

    return params


def _int_range(shapes: list[tuple[int, ...]], params: dict[str, Any]) -> tuple[int, int]:
    n = params["n"]
    return (-n, n - 1)


def _getitem_int(xp: Any, x: Any, i: Any, **p: Any) -> Any:
    return x[_int_key(p, i)]


def _two_shapes(draw: Any) -> list[tuple[int, ...]]:
    bs = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, min_side=1, max_side=3))
    return [_x_shape(draw, 2, 3), *bs.input_shapes]


def _two_params(draw: Any, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    xs = shapes[0]
    p, q = sorted(draw(st.lists(st.integers(0, len(xs) - 1), min_size=2, max_size=2, unique=True)))
    ints = [draw(st.integers(-n, n - 1)) for n in xs]
    return {"p": p, "q": q, "ints": tuple(ints), "n": min(xs[p], xs[q])}


def _two_key(p: dict[str, Any], i: Any, j: Any) -> tuple[Any, ...]:
    key: list[Any] = list(p["ints"])
    key[p["p"]] = i
    key[p["q"]] = j
    return tuple(key)


def _mask_shapes(draw: Any) -> list[tuple[int, ...]]:
    xs = _x_shape(draw)
    k = draw(st.integers(1, len(xs)))
    return [xs, xs[:k]]


# ---------------------------------------------------------------- setitem (copy, then assign)
def _assign(x: Any, key: Any, v: Any) -> Any:
    """``y = x * 1; y[key] = v``: recorded on Tensors; ``at().set`` for raw immutable arrays (JAX)."""
    y = x * 1
    try:
        y[key] = v
    except TypeError:  # JAX arrays are immutable
        return xpx.at(x, key).set(v, copy=True)
    return y


def _torch_assign(t: Any, x: Any, key: Any, v: Any) -> Any:
    y = x.clone()
    y[key] = v
    return y


def _set_basic_case(name: str, neg: bool, **kw: Any) -> OpCase:
    def shapes(draw: Any) -> list[Any]:
        xs = _x_shape(draw)
        key = _basic_key(draw, xs, neg, none=False)
        return [xs, _value_shape(draw, _target_shape(xs, key)), {"key": key}]

    torch_fn = None if neg else (lambda t, x, v, key: _torch_assign(t, x, key, v))
    return OpCase(name, lambda xp, x, v, key: _assign(x, key, v), nargs=2, shapes=shapes, params=_carried,
                  complex=True, torch_fn=torch_fn, covers=("setitem",), **kw)


def _set_int_shapes(draw: Any) -> list[Any]:
    """x, the value, the index array; ints before the index array's axis, full slices after."""
    xs = _x_shape(draw)
    ishape = draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4))
    pos = draw(st.integers(0, len(xs) - 1))
    p = {"pre": tuple(draw(st.integers(-n, n - 1)) for n in xs[:pos]),
         "post": (slice(None),) * (len(xs) - pos - 1), "n": xs[pos]}
    target = _target_shape(xs, _int_key(p, np.zeros(ishape, dtype=np.int64)))
    return [xs, _value_shape(draw, target), ishape, p]


def _set_mask_shapes(draw: Any) -> list[tuple[int, ...]]:
    xs, ms = _mask_shapes(draw)
    return [xs, _value_shape(draw, xs[len(ms):]), ms]


CASES = [
    # ------------------------------------------------------------ getitem
    _basic_case("getitem_basic", neg=False),
    _basic_case("getitem_negative_step", neg=True, xfail={"torch": _NO_TORCH_NEG},
                torch_skip="PyTorch slices refuse negative steps"),
    OpCase("getitem_int_array", _getitem_int, nargs=2, dtypes=["float", "int"], shapes=_int_shapes(0, 1),
           params=_int_params(slices=False), int_range=_int_range, prepare=_with_repeat(1), complex=True,
           torch_fn=lambda t, x, i, **p: x[_int_key(p, i)], covers=("getitem",)),
    OpCase("getitem_int_array_2d", _getitem_int, nargs=2, dtypes=["float", "int"], shapes=_int_shapes(2, 2),
           params=_int_params(slices=False), int_range=_int_range, prepare=_with_repeat(1),
           torch_fn=lambda t, x, i, **p: x[_int_key(p, i)], covers=("getitem",),
           xfail={"dask": "Dask indexes with integer arrays of at most one dimension"}),
    OpCase("getitem_int_array_slices", _getitem_int, nargs=2, dtypes=["float", "int"], shapes=_int_shapes(1, 1),
           params=_int_params(slices=True), int_range=_int_range, prepare=_with_repeat(1), covers=("getitem",),
           torch_skip="PyTorch places the axes of an int and an array separated by a slice unlike NumPy",
           xfail={"array_api_strict": "array-api-strict allows integer arrays only together with integers"}),
    OpCase("getitem_two_int_arrays", lambda xp, x, i, j, **p: x[_two_key(p, i, j)], nargs=3,
           dtypes=["float", "int", "int"], shapes=_two_shapes, params=_two_params, int_range=_int_range,
           prepare=_with_repeat(1), torch_fn=lambda t, x, i, j, **p: x[_two_key(p, i, j)], covers=("getitem",),
           xfail={"dask": "Dask does not support several integer arrays in one key (nd fancy indexing)"}),
    OpCase("getitem_bool_mask", lambda xp, x, m: x[m], nargs=2, dtypes=["float", "bool"], shapes=_mask_shapes,
           complex=True, torch_fn=lambda t, x, m: x[m], covers=("getitem",), xfail={"dask": _DASK_NAN}),
    # ------------------------------------------------------------ setitem
    _set_basic_case("setitem_basic", neg=False),
    _set_basic_case("setitem_negative_step", neg=True,
                    xfail={"torch": _NO_TORCH_NEG, "dask": "Dask's own assignment through negative-step slices "
                                                          "fails (IndexError), so the backend's forward cannot run"},
                    torch_skip="PyTorch slices refuse negative steps"),
    OpCase("setitem_int_array", lambda xp, x, v, i, **p: _assign(x, _int_key(p, i), v), nargs=3,
           dtypes=["float", "float", "int"], shapes=_set_int_shapes, params=_carried,
           int_range=_int_range, prepare=_with_repeat(2), complex=True, covers=("setitem",),
           torch_skip="with repeated indices PyTorch gives every written value a gradient, "
                      "not only the last write (the one that reaches the output)",
           xfail={"array_api_strict": _NO_STRICT_FANCY_SET,
                  "dask": "Dask's own assignment through an integer Dask array fails, so the backend's "
                          "forward cannot run"}),
    OpCase("setitem_bool_mask", lambda xp, x, v, m: _assign(x, m, v), nargs=3, dtypes=["float", "float", "bool"],
           shapes=_set_mask_shapes, complex=True, torch_fn=lambda t, x, v, m: _torch_assign(t, x, m, v),
           covers=("setitem",),
           xfail={"dask": "Dask's own masked assignment refuses masks of fewer dimensions than x, so the "
                          "backend's forward cannot run (xpgrad's where-based update works there)"}),
    # ------------------------------------------------------------ take, take_along_axis
    OpCase("take", lambda xp, x, i, axis: xp.take(x, i, axis=axis), nargs=2, dtypes=["float", "int"],
           shapes=lambda draw: [_x_shape(draw), draw(hnp.array_shapes(min_dims=1, max_dims=1, max_side=5))],
           params=lambda draw, s: {"axis": draw(st.integers(-len(s[0]), len(s[0]) - 1))},
           int_range=lambda s, p: (0, s[0][p["axis"]] - 1), prepare=_with_repeat(1), complex=True,
           torch_fn=lambda t, x, i, axis: t.index_select(x, axis, i)),
    OpCase("take_1d_no_axis", lambda xp, x, i: xp.take(x, i), nargs=2, dtypes=["float", "int"],
           shapes=lambda draw: [_x_shape(draw, 1, 1), draw(hnp.array_shapes(min_dims=1, max_dims=1, max_side=5))],
           int_range=lambda s, p: (0, s[0][0] - 1), prepare=_with_repeat(1),
           torch_fn=lambda t, x, i: t.index_select(x, 0, i), covers=("take",)),
    OpCase("take_along_axis", lambda xp, x, i, axis: xp.take_along_axis(x, i, axis=axis), nargs=2,
           dtypes=["float", "int"], shapes=lambda draw: _along_shapes(draw), params=_carried,
           int_range=lambda s, p: (0, s[0][p["axis"]] - 1), prepare=_with_repeat(1), complex=True,
           torch_fn=lambda t, x, i, axis: t.take_along_dim(x, i, dim=axis),
           xfail={"dask": "array_api_compat's Dask namespace has no take_along_axis, so the backend's "
                          "forward cannot run (xpgrad's flat-take fallback is tested in tests/test_indexing.py)"}),
]


def _along_shapes(draw: Any) -> list[tuple[int, ...]]:
    xs = _x_shape(draw)
    axis = draw(st.integers(-len(xs), len(xs) - 1))
    ishape = list(xs)
    ishape[axis] = draw(st.integers(1, 5))
    return [xs, tuple(ishape), {"axis": axis}]
