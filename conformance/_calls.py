"""How to call each function of the standard: a hypothesis strategy per name.

``CALLS[name](xps, bxp)`` returns a strategy of ``(args, kwargs)`` for backend
namespace ``bxp``, whose arrays come from ``xps`` (the
``hypothesis.extra.array_api`` strategies namespace made for ``bxp``). Arrays are
the backend's own; the differential test gives the same arguments, arrays wrapped
as Tensors, to xpgrad. Values include NaN, infinities and signed zeros (the
strategies' defaults); dtypes range over all the backend's dtypes, so a call that
the backend refuses must be refused by xpgrad too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from xpgrad.ops._registry import REGISTRY

Strategy = Callable[[Any, Any], st.SearchStrategy[tuple[tuple[Any, ...], dict[str, Any]]]]

MAX_SIDE = 4
SHAPES = {"min_dims": 0, "max_dims": 3, "min_side": 0, "max_side": MAX_SIDE}


#: dtypes left out per backend, set by the test for the backend it runs (see SKIP_DTYPES_BY_BACKEND)
SKIP_DTYPES: set[str] = set()
#: hypothesis builds torch arrays through int64: uint64 values above 2**63 fail to convert
SKIP_DTYPES_BY_BACKEND = {"torch": {"uint64"}}


def _ok(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return strategy.filter(lambda d: str(d).rsplit(".", 1)[-1] not in SKIP_DTYPES)


def _dtypes(xps: Any) -> st.SearchStrategy[Any]:
    return _ok(xps.scalar_dtypes())


def _array(xps: Any, dtype: Any = None, shape: Any = None, **kw: Any) -> st.SearchStrategy[Any]:
    dt = _dtypes(xps) if dtype is None else dtype
    sh = xps.array_shapes(**SHAPES) if shape is None else shape
    return xps.arrays(dtype=dt, shape=sh, **kw)


@st.composite
def _unary(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (draw(_array(xps)),), {}


@st.composite
def _binary(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_dtypes(xps))
    s1, s2 = draw(xps.mutually_broadcastable_shapes(2, min_dims=0, max_dims=3, max_side=MAX_SIDE)).input_shapes
    x1 = draw(_array(xps, dt, s1))
    if draw(st.integers(0, 4)) == 0:  # a Python scalar on one side, as the standard allows
        x2 = draw(xps.from_dtype(dt))
        return ((x2, x1) if draw(st.booleans()) else (x1, x2)), {}
    return (x1, draw(_array(xps, dt, s2))), {}


@st.composite
def _clip(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_ok(xps.real_dtypes()))
    x = draw(_array(xps, dt))
    lo = draw(st.none() | xps.from_dtype(dt, allow_nan=False))
    hi = draw(st.none() | xps.from_dtype(dt, allow_nan=False))
    return (x,), {"min": lo, "max": hi}


@st.composite
def _round(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_array(xps))
    return (x,), ({"decimals": draw(st.integers(-2, 3))} if draw(st.booleans()) else {})


@st.composite
def _where(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_dtypes(xps))
    s0, s1, s2 = draw(xps.mutually_broadcastable_shapes(3, min_dims=0, max_dims=3, max_side=MAX_SIDE)).input_shapes
    return (draw(_array(xps, bxp.bool, s0)), draw(_array(xps, dt, s1)), draw(_array(xps, dt, s2))), {}


def _axis(draw: Any, ndim: int, tuple_ok: bool = True, none_ok: bool = True) -> Any:
    choices: list[Any] = [None] if none_ok else []
    if ndim:
        choices += list(range(-ndim, ndim))
        if tuple_ok:
            choices.append(tuple(sorted(draw(st.sets(st.integers(0, ndim - 1), min_size=1, max_size=ndim)))))
    return draw(st.sampled_from(choices)) if choices else None


def _reduction(dtypes: Callable[[Any], Any] | None = None, extra: Callable[[Any], dict[str, Any]] | None = None,
               tuple_ok: bool = True, keepdims: bool = True) -> Strategy:
    @st.composite
    def strat(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        dt = draw(dtypes(xps) if dtypes else _dtypes(xps))
        x = draw(_array(xps, dt, xps.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=MAX_SIDE)))
        kw: dict[str, Any] = {"axis": _axis(draw, x.ndim, tuple_ok)}
        if keepdims:
            kw["keepdims"] = draw(st.booleans())
        if extra:
            kw.update(draw(extra(x)))
        return (x,), kw

    return strat


def _cumulative(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_array(xps, draw(_ok(xps.numeric_dtypes())), xps.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=MAX_SIDE)))
    kw: dict[str, Any] = {"include_initial": draw(st.booleans())}
    if x.ndim > 1 or draw(st.booleans()):
        kw["axis"] = draw(st.integers(-x.ndim, x.ndim - 1))
    return (x,), kw


@st.composite
def _diff(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_array(xps, draw(_ok(xps.numeric_dtypes())), xps.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=MAX_SIDE)))
    return (x,), {"axis": draw(st.integers(-x.ndim, x.ndim - 1)), "n": draw(st.integers(0, 2))}


@st.composite
def _sorting(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_array(xps, draw(_ok(xps.real_dtypes())), xps.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=MAX_SIDE)))
    return (x,), {"axis": draw(st.integers(-x.ndim, x.ndim - 1)), "descending": draw(st.booleans()), "stable": True}


@st.composite
def _searchsorted(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_ok(xps.real_dtypes()))
    x1 = bxp.sort(draw(_array(xps, dt, xps.array_shapes(min_dims=1, max_dims=1, min_side=1), elements={"allow_nan": False})))
    x2 = draw(_array(xps, dt, elements={"allow_nan": False}))
    return (x1, x2), {"side": draw(st.sampled_from(["left", "right"]))}


@st.composite
def _nonzero(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (draw(_array(xps, shape=xps.array_shapes(min_dims=1, max_dims=3, max_side=MAX_SIDE))),), {}


@st.composite
def _isin(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_ok(xps.real_dtypes()))
    return (draw(_array(xps, dt)), draw(_array(xps, dt))), {"invert": draw(st.booleans())}


@st.composite
def _take(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_array(xps, shape=xps.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=MAX_SIDE)))
    axis = draw(st.integers(-x.ndim, x.ndim - 1))
    n = x.shape[axis]
    idx = draw(_array(xps, bxp.int64, xps.array_shapes(min_dims=1, max_dims=1, max_side=MAX_SIDE),
                      elements=st.integers(-n, n - 1)))
    return (x, idx), ({"axis": axis} if x.ndim > 1 or draw(st.booleans()) else {})


@st.composite
def _take_along_axis(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_array(xps, shape=xps.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=MAX_SIDE)))
    axis = draw(st.integers(-x.ndim, x.ndim - 1))
    shape = list(x.shape)
    shape[axis] = draw(st.integers(0, MAX_SIDE))
    n = x.shape[axis]
    idx = draw(_array(xps, bxp.int64, tuple(shape), elements=st.integers(-n, n - 1)))
    return (x, idx), {"axis": axis}


@st.composite
def _matmul(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_ok(xps.numeric_dtypes()))
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    b1, b2 = draw(xps.mutually_broadcastable_shapes(2, min_dims=0, max_dims=2, max_side=2)).input_shapes
    s1 = (*b1, m, k) if draw(st.booleans()) else (k,)
    s2 = (*b2, k, n) if draw(st.booleans()) else (k,)
    return (draw(_array(xps, dt, s1)), draw(_array(xps, dt, s2))), {}


@st.composite
def _matrix_transpose(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (draw(_array(xps, shape=xps.array_shapes(min_dims=2, max_dims=3, max_side=MAX_SIDE))),), {}


@st.composite
def _tensordot(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_ok(xps.numeric_dtypes()))
    k = draw(st.integers(0, 2))
    shared = tuple(draw(st.integers(1, 3)) for _ in range(k))
    a = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 1))))
    b = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 1))))
    return (draw(_array(xps, dt, a + shared)), draw(_array(xps, dt, shared + b))), {"axes": k}


@st.composite
def _vecdot(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_ok(xps.numeric_dtypes()))
    k = draw(st.integers(1, 3))
    b1, b2 = draw(xps.mutually_broadcastable_shapes(2, min_dims=0, max_dims=2, max_side=2)).input_shapes
    return (draw(_array(xps, dt, (*b1, k))), draw(_array(xps, dt, (*b2, k)))), {}


def _small(xps: Any, dtype: Any = None, min_dims: int = 0, min_side: int = 0) -> st.SearchStrategy[Any]:
    return _array(xps, dtype, xps.array_shapes(min_dims=min_dims, max_dims=3, min_side=min_side, max_side=MAX_SIDE))


@st.composite
def _broadcast_arrays(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    n = draw(st.integers(1, 3))
    shapes = draw(xps.mutually_broadcastable_shapes(n, min_dims=0, max_dims=3, max_side=MAX_SIDE)).input_shapes
    return tuple(draw(_array(xps, shape=s)) for s in shapes), {}


@st.composite
def _broadcast_shapes(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    n = draw(st.integers(1, 3))
    return tuple(draw(xps.mutually_broadcastable_shapes(n, min_dims=0, max_dims=3, max_side=MAX_SIDE)).input_shapes), {}


@st.composite
def _broadcast_to(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    s, target = draw(xps.mutually_broadcastable_shapes(2, min_dims=0, max_dims=3, max_side=MAX_SIDE)).input_shapes
    full = tuple(max(a, b) for a, b in zip((1,) * (len(target) - len(s)) + s, (1,) * (len(s) - len(target)) + target))
    return (draw(_array(xps, shape=s)), full), {}


@st.composite
def _concat(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_dtypes(xps))
    base = draw(xps.array_shapes(min_dims=1, max_dims=3, max_side=MAX_SIDE))
    axis = draw(st.integers(-len(base), len(base) - 1))
    arrays = []
    for _ in range(draw(st.integers(1, 3))):
        s = list(base)
        s[axis] = draw(st.integers(0, 3))
        arrays.append(draw(_array(xps, dt, tuple(s))))
    return (arrays,), {"axis": axis}


@st.composite
def _stack(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_dtypes(xps))
    s = draw(xps.array_shapes(min_dims=0, max_dims=2, max_side=MAX_SIDE))
    arrays = [draw(_array(xps, dt, s)) for _ in range(draw(st.integers(1, 3)))]
    return (arrays,), {"axis": draw(st.integers(-len(s) - 1, len(s)))}


@st.composite
def _expand_dims(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_small(xps))
    return (x,), {"axis": draw(st.integers(-x.ndim - 1, x.ndim))}


@st.composite
def _axis_arg(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_small(xps))
    return (x,), {"axis": _axis(draw, x.ndim)}


@st.composite
def _moveaxis(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_small(xps, min_dims=1))
    return (x, draw(st.integers(-x.ndim, x.ndim - 1)), draw(st.integers(-x.ndim, x.ndim - 1))), {}


@st.composite
def _permute_dims(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_small(xps))
    return (x, tuple(draw(st.permutations(range(x.ndim))))), {}


@st.composite
def _repeat(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_small(xps, min_dims=1))
    axis = draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    return (x, draw(st.integers(0, 3))), {"axis": axis}


@st.composite
def _reshape(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_small(xps))
    size = 1
    for s in x.shape:
        size *= s
    shape: tuple[int, ...] = (size,)
    if size and draw(st.booleans()):
        d = draw(st.sampled_from([k for k in range(1, size + 1) if size % k == 0]))
        shape = (d, -1) if draw(st.booleans()) else (d, size // d)
    return (x, shape), {}


@st.composite
def _roll(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_small(xps, min_dims=1))
    if draw(st.booleans()):
        return (x, draw(st.integers(-5, 5))), {}
    axis = draw(st.integers(-x.ndim, x.ndim - 1))
    return (x, draw(st.integers(-5, 5))), {"axis": axis}


@st.composite
def _squeeze(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    i = draw(st.integers(0, len(shape) - 1))
    shape[i] = 1
    x = draw(_array(xps, shape=tuple(shape)))
    return (x,), {"axis": draw(st.sampled_from([i, i - len(shape)]))}


@st.composite
def _tile(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_small(xps))
    return (x, tuple(draw(st.lists(st.integers(0, 2), min_size=0, max_size=3)))), {}


@st.composite
def _unstack(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_small(xps, min_dims=1))
    return (x,), {"axis": draw(st.integers(-x.ndim, x.ndim - 1))}


@st.composite
def _astype(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_array(xps, elements={"allow_nan": False, "allow_infinity": False}))
    to = draw(_dtypes(xps))
    src = str(x.dtype)
    if ("float" in src or "complex" in src) and "int" in str(to):
        x = bxp.zeros_like(x)  # out-of-range float -> int casts are undefined behaviour in the standard
    return (x, to), {}


@st.composite
def _dtype_pair(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (draw(_dtypes(xps)), draw(_dtypes(xps))), {}


@st.composite
def _finfo(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (draw(_ok(xps.floating_dtypes())),), {}


@st.composite
def _iinfo(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (draw(_ok(xps.integer_dtypes() | xps.unsigned_integer_dtypes())),), {}


_KINDS = ["bool", "signed integer", "unsigned integer", "integral", "real floating", "complex floating", "numeric"]


@st.composite
def _isdtype(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    kind = draw(st.sampled_from(_KINDS) | st.tuples(st.sampled_from(_KINDS), st.sampled_from(_KINDS)))
    return (draw(_dtypes(xps)), kind), {}


@st.composite
def _result_type(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    items = [draw(st.one_of(_dtypes(xps), _array(xps, shape=()))) for _ in range(draw(st.integers(1, 3)))]
    return tuple(items), {}


@st.composite
def _arange(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if draw(st.booleans()):
        return (draw(st.integers(-5, 10)),), {}
    start, stop = draw(st.integers(-5, 5)), draw(st.integers(-5, 5))
    step = draw(st.sampled_from([1, 2, -1, 3]))
    if draw(st.booleans()):
        return (float(start), float(stop), step / 2), {}
    return (start, stop, step), {}


def _shape() -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(0, 3), max_size=3).map(tuple)


@st.composite
def _from_shape(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    kw = {"dtype": draw(_dtypes(xps))} if draw(st.booleans()) else {}
    return (draw(_shape()),), kw


@st.composite
def _full(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_dtypes(xps))
    value = draw(xps.from_dtype(dt))
    return (draw(_shape()), value), ({"dtype": dt} if draw(st.booleans()) else {})


@st.composite
def _like(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    kw = {"dtype": draw(_dtypes(xps))} if draw(st.booleans()) else {}
    return (draw(_small(xps)),), kw


@st.composite
def _full_like(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_small(xps))
    return (x, draw(xps.from_dtype(x.dtype))), {}


@st.composite
def _eye(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    kw: dict[str, Any] = {"k": draw(st.integers(-3, 3))}
    if draw(st.booleans()):
        kw["dtype"] = draw(_dtypes(xps))
    return (draw(st.integers(0, 4)), draw(st.none() | st.integers(0, 4))), kw


@st.composite
def _linspace(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    start, stop = draw(st.integers(-10, 10)), draw(st.integers(-10, 10))
    return (float(start), float(stop), draw(st.integers(0, 6))), {"endpoint": draw(st.booleans())}


@st.composite
def _meshgrid(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    dt = draw(_ok(xps.numeric_dtypes()))
    arrays = [draw(_array(xps, dt, (draw(st.integers(0, 3)),))) for _ in range(draw(st.integers(1, 3)))]
    return tuple(arrays), {"indexing": draw(st.sampled_from(["xy", "ij"]))}


@st.composite
def _tri(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    x = draw(_array(xps, shape=xps.array_shapes(min_dims=2, max_dims=3, max_side=MAX_SIDE)))
    return (x,), {"k": draw(st.integers(-3, 3))}


@st.composite
def _asarray(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if draw(st.booleans()):
        return (draw(_small(xps)),), {}
    values = draw(st.lists(st.floats(allow_nan=False, width=32) | st.integers(-100, 100), min_size=1, max_size=4))
    return ([float(v) for v in values],), {}


@st.composite
def _from_dlpack(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (draw(_small(xps, draw(_ok(xps.numeric_dtypes())))),), {}


def _std_extra(x: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"correction": st.sampled_from([0, 1, 0.5])})


def _sum_extra(x: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.just({})


def _param(draw: Any, kind: str, ndim: int) -> Any:
    """A keyword parameter of a kind ``Inputs.params`` names (``"axis"``, ``"axis?"``, ``"axes?"``, ``"bool"``)."""
    if kind == "bool":
        return draw(st.booleans())
    return _axis(draw, ndim, tuple_ok=kind == "axes?", none_ok=kind != "axis")


def _with_params(kinds: dict[str, str], min_dims: int) -> Strategy:
    """The call of an entry whose ``Inputs`` says how its parameters are drawn: one array."""

    @st.composite
    def strat(draw: Any, xps: Any, bxp: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        x = draw(_small(xps, min_dims=max(min_dims, 1 if "axis" in kinds.values() else 0)))
        return (x,), {k: _param(draw, kind, x.ndim) for k, kind in kinds.items()}

    return strat


def _derived(op: Any) -> Strategy | None:
    """The call an entry's facts give: a pointwise function's one or two arrays by its
    declaration; a function with ``Inputs.params``, one array and those parameters."""
    if op.batch == "pointwise" and op.nargs in (1, 2):
        return _binary if op.nargs == 2 else _unary
    if op.test is not None and op.test.params and op.nargs == 1:
        return _with_params(op.test.params, op.test.min_dims)
    return None


CALLS: dict[str, Strategy] = {}


def from_registry() -> None:
    """``CALLS`` again from the registry's entries as they are now (a test's throwaway entry
    included, or gone), then the hand-written calls (`HAND`), which win."""
    CALLS.clear()
    for op in REGISTRY.values():
        call = _derived(op)
        if call is not None:
            CALLS[op.standard_name or op.name] = call
    CALLS.update(HAND)


#: the calls no entry's facts give (parameters with constraints of their own, value ranges)
HAND: dict[str, Strategy] = {
    "clip": _clip, "round": _round, "where": _where,
    # statistical, utility, searching reductions
    "max": _reduction(lambda xps: _ok(xps.real_dtypes())), "min": _reduction(lambda xps: _ok(xps.real_dtypes())),
    "mean": _reduction(lambda xps: _ok(xps.floating_dtypes())),
    "prod": _reduction(lambda xps: _ok(xps.numeric_dtypes()), _sum_extra),
    "sum": _reduction(lambda xps: _ok(xps.numeric_dtypes()), _sum_extra),
    "std": _reduction(lambda xps: _ok(xps.floating_dtypes()), _std_extra),
    "var": _reduction(lambda xps: _ok(xps.floating_dtypes()), _std_extra),
    "all": _reduction(), "any": _reduction(),
    "argmax": _reduction(lambda xps: _ok(xps.real_dtypes()), tuple_ok=False),
    "argmin": _reduction(lambda xps: _ok(xps.real_dtypes()), tuple_ok=False),
    "count_nonzero": _reduction(),
    "cumulative_sum": st.composite(_cumulative), "cumulative_prod": st.composite(_cumulative),
    "diff": _diff,
    "argsort": _sorting, "sort": _sorting, "searchsorted": _searchsorted, "nonzero": _nonzero,
    "isin": _isin, "unique_all": _nonzero, "unique_counts": _nonzero, "unique_inverse": _nonzero, "unique_values": _nonzero,
    "take": _take, "take_along_axis": _take_along_axis,
    "matmul": _matmul, "matrix_transpose": _matrix_transpose, "tensordot": _tensordot, "vecdot": _vecdot,
    "broadcast_arrays": _broadcast_arrays, "broadcast_shapes": _broadcast_shapes, "broadcast_to": _broadcast_to,
    "concat": _concat, "stack": _stack, "expand_dims": _expand_dims, "flip": _axis_arg, "moveaxis": _moveaxis,
    "permute_dims": _permute_dims, "repeat": _repeat, "reshape": _reshape, "roll": _roll, "squeeze": _squeeze,
    "tile": _tile, "unstack": _unstack,
    "astype": _astype, "can_cast": _dtype_pair, "finfo": _finfo, "iinfo": _iinfo, "isdtype": _isdtype,
    "result_type": _result_type,
    "arange": _arange, "asarray": _asarray, "empty": _from_shape, "zeros": _from_shape, "ones": _from_shape,
    "full": _full, "empty_like": _like, "zeros_like": _like, "ones_like": _like, "full_like": _full_like,
    "eye": _eye, "linspace": _linspace, "meshgrid": _meshgrid, "tril": _tri, "triu": _tri, "from_dlpack": _from_dlpack,
}
from_registry()
# functions whose output values are unspecified: compared by dtype, shape and device only
UNSPECIFIED_VALUES = {"empty", "empty_like"}
# functions that take no array (creation from Python values, dtype queries): xpgrad asks
# the policy's backend, so they run under default_device(<backend>)
POLICY_FUNCTIONS = {"arange", "empty", "zeros", "ones", "full", "eye", "linspace", "result_type", "can_cast", "finfo",
                    "iinfo", "isdtype"}
