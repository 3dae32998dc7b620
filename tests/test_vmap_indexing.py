"""vmap of indexing, searching and set functions, and of in-place updates, on every backend.

Each batched result is checked against a Python loop of the unbatched function on the
same backend (so each backend's own indexing rules are the reference); the functions
whose output shape would depend on the data are checked for their error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad._exceptions import XpgradValueError

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _seed() -> None:
    """The same draws whichever tests run, and in whichever order."""
    global RNG
    RNG = np.random.default_rng(0)


def _np(backend: Any, t: Any) -> np.ndarray:
    return np.asarray(backend.to_numpy(t.data if isinstance(t, xg.Tensor) else t))


def _t(backend: Any, a: Any) -> Any:
    return xg.asarray(backend.asarray(np.asarray(a)))


def _loop(backend: Any, f: Any, *batched: np.ndarray, fixed: tuple[Any, ...] = ()) -> np.ndarray:
    """``f`` example by example (the batched arguments sliced along axis 0, then ``fixed``)."""
    n = batched[0].shape[0]
    outs = [_np(backend, f(*[_t(backend, a[b]) for a in batched], *fixed)) for b in range(n)]
    return np.stack(outs)


def _close(got: Any, want: np.ndarray, backend: Any) -> None:
    g = _np(backend, got)
    assert g.shape == want.shape
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- getitem
# (key builder from the batched index arrays i, j; needs slices next to arrays; needs several arrays)
_KEYS = [
    ("i", lambda i, j: (i,), True, False),  # (the axes it leaves out are full slices)
    ("i_full", lambda i, j: (i, 0, 1), False, False),
    ("int_i_full", lambda i, j: (1, i, 2), False, False),
    ("i_j_full", lambda i, j: (i, j, 0), False, True),
    ("slice_i", lambda i, j: (slice(None), i), True, False),
    ("i_slice_int", lambda i, j: (i, slice(1, None), 0), True, False),
    ("int_slice_i", lambda i, j: (0, slice(None), i), True, False),  # NumPy: index axes first
    ("i_j", lambda i, j: (i, j), True, True),
    ("i_slice_j", lambda i, j: (i, slice(None), j), True, True),
    ("none_i_ellipsis", lambda i, j: (None, i, Ellipsis), True, False),
]
_NONE = "none_i_ellipsis"


def _supported(backend: Any, name: str, slices: bool, multi: bool) -> bool:
    if backend.name in ("array_api_strict", "strict_device1") and slices:
        return False  # array-api-strict: integer arrays only together with integers, on every axis
    # Dask: one integer array per key, and none next to None
    return not (backend.name == "dask" and (multi or name == _NONE))


@pytest.mark.parametrize(("name", "key", "slices", "multi"), _KEYS, ids=[k[0] for k in _KEYS])
def test_getitem_batched_index_arrays(backend: Any, name: str, key: Any, slices: bool, multi: bool) -> None:
    if not _supported(backend, name, slices, multi):
        pytest.skip(f"{backend.name} cannot index the unbatched example with this key either")
    x = RNG.standard_normal((3, 4, 5, 4))
    i = RNG.integers(-4, 4, (3, 2))
    j = RNG.integers(-2, 2, (3, 2))
    f = lambda x, i, j: x[key(i, j)]
    got = xg.vmap(f)(_t(backend, x), _t(backend, i), _t(backend, j))
    _close(got, _loop(backend, f, x, i, j), backend)
    # x unbatched (in_axes=None), the indices batched
    got = xg.vmap(f, in_axes=(None, 0, 0))(_t(backend, x[0]), _t(backend, i), _t(backend, j))
    _close(got, _loop(backend, lambda i, j: f(_t(backend, x[0]), i, j), i, j), backend)


@pytest.mark.parametrize(("name", "key", "slices", "multi"), _KEYS, ids=[k[0] for k in _KEYS])
def test_getitem_unbatched_index_arrays(backend: Any, name: str, key: Any, slices: bool, multi: bool) -> None:
    if not _supported(backend, name, slices, multi):
        pytest.skip(f"{backend.name} cannot index the unbatched example with this key either")
    x = RNG.standard_normal((3, 4, 5, 4))
    # (Dask indexes with one-dimensional integer arrays only)
    i = _t(backend, np.array([0, -1, 2]) if backend.name == "dask" else np.array([[0, -1], [2, 2]]))
    j = _t(backend, np.array([1, 0]))
    k = key(i, j)
    got = xg.vmap(lambda x: x[k])(_t(backend, x))
    _close(got, _loop(backend, lambda x: x[k], x), backend)


def test_getitem_nested_batched_index(backend: Any) -> None:
    x = RNG.standard_normal((2, 3, 4))
    i = RNG.integers(0, 4, (3, 5))  # batched along the inner level only
    f = xg.vmap(xg.vmap(lambda x, i: x[i], in_axes=(0, 0)), in_axes=(0, None))
    got = f(_t(backend, x), _t(backend, i))
    want = np.stack([[x[a, b][i[b]] for b in range(3)] for a in range(2)])
    _close(got, want, backend)


def test_getitem_unbatched_mask(backend: Any) -> None:
    if backend.name == "dask":
        pytest.skip("Dask: boolean-mask indexing gives unknown (nan) sizes")
    x = RNG.standard_normal((3, 4, 2))
    m = _t(backend, np.array([True, False, True, True]))
    got = xg.vmap(lambda x: x[m])(_t(backend, x))
    _close(got, _loop(backend, lambda x: x[m], x), backend)


def test_getitem_batched_mask_raises(backend: Any) -> None:
    x = RNG.standard_normal((3, 4))
    m = _t(backend, RNG.standard_normal((3, 4)) > 0)
    with pytest.raises(XpgradValueError, match=r"getitem: cannot be used on a value batched by vmap.*xg\.where"):
        xg.vmap(lambda x, m: x[m])(_t(backend, x), m)
    with pytest.raises(XpgradValueError, match=r"getitem: .*boolean mask"):
        xg.vmap(lambda x, m: x[m, ...], in_axes=(None, 0))(_t(backend, x[0]), m)


# ---------------------------------------------------------------- setitem
def _set(key: Any) -> Any:
    def f(x: Any, v: Any, *idx: Any) -> Any:
        y = x * 1
        y[key(*idx)] = v
        return y

    return f


def test_setitem_batched_value_and_index(backend: Any) -> None:
    if backend.name in ("array_api_strict", "strict_device1", "dask"):
        pytest.skip(f"{backend.name} has no integer-array assignment for the unbatched example either")
    x = RNG.standard_normal((3, 4, 5))
    v = RNG.standard_normal((3, 2, 5))
    i = np.array([[0, 0], [3, -1], [1, 2]])  # a repeated index: the last write wins
    f = _set(lambda i: i)
    got = xg.vmap(f)(_t(backend, x), _t(backend, v), _t(backend, i))
    _close(got, _loop(backend, f, x, v, i), backend)
    # index unbatched, value batched
    fi = _set(lambda: (slice(None), _t(backend, np.array([4, 0]))))
    v2 = RNG.standard_normal((3, 4, 2))
    got = xg.vmap(fi)(_t(backend, x), _t(backend, v2))
    _close(got, _loop(backend, fi, x, v2), backend)


@pytest.mark.parametrize("value_batched", [False, True])
def test_setitem_basic_and_mask(backend: Any, value_batched: bool) -> None:
    x = RNG.standard_normal((3, 4, 5))
    v = RNG.standard_normal((3, 5)) if value_batched else RNG.standard_normal((5,))
    axes = (0, 0) if value_batched else (0, None)
    fixed = () if value_batched else (_t(backend, v),)
    f = _set(lambda: (slice(1, 3), Ellipsis))
    batched = (x, v) if value_batched else (x,)
    got = xg.vmap(f, in_axes=axes)(_t(backend, x), _t(backend, v))
    _close(got, _loop(backend, f, *batched, fixed=fixed), backend)
    if backend.name == "dask":
        return  # (Dask's masked assignment refuses masks of fewer dimensions than x)
    m = _t(backend, np.array([True, False, False, True]))
    fm = _set(lambda: m)
    got = xg.vmap(fm, in_axes=axes)(_t(backend, x), _t(backend, v))
    _close(got, _loop(backend, fm, *batched, fixed=fixed), backend)


def test_setitem_batched_mask_is_a_where(backend: Any) -> None:
    x = RNG.standard_normal((3, 4))
    m = RNG.standard_normal((3, 4)) > 0

    def f(x: Any, m: Any) -> Any:
        y = x * 1
        y[m] = 7.0
        return y

    got = xg.vmap(f)(_t(backend, x), _t(backend, m))
    _close(got, np.where(m, 7.0, x), backend)


def test_setitem_batched_mask_with_selected_values_raises(backend: Any) -> None:
    x = _t(backend, RNG.standard_normal((3, 4)))
    m = _t(backend, np.ones((3, 4), dtype=bool))
    v = _t(backend, RNG.standard_normal((3, 4)))

    def f(x: Any, m: Any, v: Any) -> Any:
        y = x * 1
        y[m] = v  # one value per selected element: as many as the mask selects
        return y

    with pytest.raises(XpgradValueError, match=r"setitem: cannot be used on a value batched by vmap.*mask"):
        xg.vmap(f)(x, m, v)


# ---------------------------------------------------------------- in place
def test_inplace_batched(backend: Any) -> None:
    x = RNG.standard_normal((3, 4))
    y = RNG.standard_normal((3, 4))

    def f(x: Any, y: Any) -> Any:
        z = x * 1
        z += y
        z[0] = y[1]
        z *= 2.0
        return z

    got = xg.vmap(f)(_t(backend, x), _t(backend, y))
    _close(got, _loop(backend, f, x, y), backend)
    # y unbatched: broadcast into the batched z
    got = xg.vmap(f, in_axes=(0, None))(_t(backend, x), _t(backend, y[0]))
    _close(got, _loop(backend, f, x, fixed=(_t(backend, y[0]),)), backend)


def test_inplace_through_view_reaches_base(backend: Any) -> None:
    x = RNG.standard_normal((3, 4, 2))

    def f(x: Any) -> Any:
        z = x * 1
        v = z[1:3, ...]
        v += 10.0
        v[0, 1, ...] = -1.0
        return z

    got = xg.vmap(f)(_t(backend, x))
    _close(got, _loop(backend, f, x), backend)


def test_inplace_unbatched_by_batched_becomes_batched(backend: Any) -> None:
    """A value made inside the mapped function, written with a batched value (or through a
    batched key), becomes batched, as jax.vmap's x.at[...].set(batched) is: the loop's result."""
    x = _t(backend, RNG.standard_normal((4,)))
    y = RNG.standard_normal((3, 4))

    def add(y: Any) -> Any:
        z = x * 1
        z += y
        return z

    def assign(y: Any) -> Any:
        z = x * 1
        z[1] = y[0]
        return z

    for f in (add, assign):
        _close(xg.vmap(f)(_t(backend, y)), _loop(backend, f, y), backend)

    if backend.name not in ("array_api_strict", "strict_device1", "dask"):  # (integer-array assignment)
        def batched_key(i: Any) -> Any:
            z = x * 1
            z[i] = 0.0
            return z

        i = np.array([0, 1, 2])
        _close(xg.vmap(batched_key)(_t(backend, i)), _loop(backend, batched_key, i), backend)


def test_inplace_into_a_value_from_outside_by_batched_raises(backend: Any) -> None:
    """A value the mapped function closes over (or is given) is one for every example: a batched
    write into it is refused, as torch.func.vmap refuses it (the loop would accumulate)."""
    x = _t(backend, RNG.standard_normal((4,)))
    y = _t(backend, RNG.standard_normal((3, 4)))

    def add(y: Any) -> Any:
        x.__iadd__(y)
        return x

    with pytest.raises(XpgradValueError, match=r"__iadd__: an in-place update of a value that does not vary"):
        xg.vmap(add)(y)

    def assign(y: Any) -> Any:
        x[1] = y[0]
        return x

    with pytest.raises(XpgradValueError, match=r"__setitem__: an in-place update of a value that does not vary"):
        xg.vmap(assign)(y)

    # batched along the outer level only (an argument), updated by a value batched along the inner one
    def inner(z: Any) -> Any:
        return xg.vmap(lambda yy: z.__iadd__(yy))(y)

    with pytest.raises(XpgradValueError, match=r"__iadd__: an in-place update"):
        xg.vmap(inner)(_t(backend, RNG.standard_normal((2, 4))))


def test_grad_through_indexing_and_inplace(backend: Any) -> None:
    if backend.name in ("array_api_strict", "strict_device1", "dask"):
        pytest.skip(f"{backend.name} has no integer-array assignment for the unbatched example either")
    x = RNG.standard_normal((3, 4, 2))
    v = RNG.standard_normal((3, 2))
    i = np.array([[0, 2], [3, 3], [1, 0]])

    def loss(x: Any, v: Any, i: Any) -> Any:
        z = x * 1
        z[i] = v * 2.0
        z += x[i[::-1]].sum() * x
        return xg.sum(z * z)

    g = xg.grad(loss, argnums=(0, 1))
    got = xg.vmap(g)(_t(backend, x), _t(backend, v), _t(backend, i))
    for k in range(2):
        want = np.stack([_np(backend, g(_t(backend, x[b]), _t(backend, v[b]), _t(backend, i[b]))[k]) for b in range(3)])
        _close(got[k], want, backend)


# ---------------------------------------------------------------- vmap of vjp: batched backward passes
def _vjp_cases(backend: Any) -> list[tuple[str, Any, tuple[int, ...]]]:
    idx = _t(backend, np.array([2, 0, 2]))
    mask = _t(backend, np.array([True, False, True, True]))
    cases = [
        ("basic", lambda x: x[1:, 0], (3,)),
        ("int_array", lambda x: x[idx, 1], (3,)),
        ("take", lambda x: xg.take(x, idx, axis=1), (4, 3)),
        ("take_along_axis", lambda x: xg.take_along_axis(x, _t(backend, np.array([[0], [2], [1], [1]])), axis=1),
         (4, 1)),
        ("mask", lambda x: x[mask], (3, 3)),
        ("setitem", lambda x: _set(lambda: (slice(None), 1))(x, x[:, 0] * 3.0), (4, 3)),
        ("setitem_int", lambda x: _set(lambda: idx)(x, x[0] * 3.0), (4, 3)),
    ]
    if backend.name in ("array_api_strict", "strict_device1"):
        cases = [c for c in cases if c[0] != "setitem_int"]
    if backend.name == "dask":
        cases = [c for c in cases if c[0] not in ("mask", "setitem_int", "take_along_axis")]
    return cases


def test_vmap_of_vjp(backend: Any) -> None:
    x = _t(backend, RNG.standard_normal((4, 3)))
    for name, f, oshape in _vjp_cases(backend):
        _, pull = xg.vjp(f, x)
        cts = RNG.standard_normal((5, *oshape))
        got = xg.vmap(pull)(_t(backend, cts))
        got = got[0] if isinstance(got, tuple) else got
        want = []
        for b in range(5):
            w = pull(_t(backend, cts[b]))
            want.append(_np(backend, w[0] if isinstance(w, tuple) else w))
        _close(got, np.stack(want), backend)
        assert _np(backend, got).shape == (5, 4, 3), name


# ---------------------------------------------------------------- searching
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(backend: Any, side: str) -> None:
    x1 = np.sort(RNG.standard_normal((3, 6)), axis=1)
    x1[:, 2] = x1[:, 3]  # ties
    x2 = RNG.standard_normal((3, 2, 4))
    x2[0, 0, 0] = x1[0, 3]
    nan = backend.name != "torch"  # (NaN placement is NumPy's; compared where the backend follows it)
    if nan:
        x1[1, -1] = np.nan
        x2[1, 1, 1] = np.nan
    f = lambda a, v: xg.searchsorted(a, v, side=side)
    want = _loop(backend, f, x1, x2)
    for axes in [(0, 0), (None, 0)]:
        args = (_t(backend, x1 if axes[0] == 0 else x1[0]), _t(backend, x2))
        got = xg.vmap(f, in_axes=axes)(*args)
        w = want if axes[0] == 0 else _loop(backend, lambda v: f(_t(backend, x1[0]), v), x2)
        assert _np(backend, got).dtype == w.dtype
        np.testing.assert_array_equal(_np(backend, got), w)
    # x1 batched, x2 unbatched
    got = xg.vmap(f, in_axes=(0, None))(_t(backend, x1), _t(backend, x2[0]))
    np.testing.assert_array_equal(_np(backend, got), _loop(backend, lambda a: f(a, _t(backend, x2[0])), x1))
    if backend.name == "dask":
        return  # (Dask's searchsorted takes no sorter)
    # an unsorted x1 with its sorter, both batched
    perm = np.stack([RNG.permutation(6) for _ in range(3)])
    xs = np.take_along_axis(x1, np.argsort(perm, axis=1), axis=1)  # xs[perm] == x1
    fs = lambda a, p, v: xg.searchsorted(a, v, side=side, sorter=p)
    got = xg.vmap(fs)(_t(backend, xs), _t(backend, perm), _t(backend, x2))
    np.testing.assert_array_equal(_np(backend, got), _loop(backend, fs, xs, perm, x2))


def test_argmax_argmin_count_nonzero(backend: Any) -> None:
    x = RNG.standard_normal((3, 4, 5))
    for f in (lambda x: xg.argmax(x), lambda x: xg.argmin(x, axis=1, keepdims=True),
              lambda x: xg.count_nonzero(x > 0, axis=-1), lambda x: xg.where(x > 0, x, -x)):
        np.testing.assert_array_equal(_np(backend, xg.vmap(f)(_t(backend, x))), _loop(backend, f, x))


def test_nonzero_raises(backend: Any) -> None:
    with pytest.raises(XpgradValueError, match=r"nonzero: cannot be used on a value batched by vmap.*depend on the data"):
        xg.vmap(xg.nonzero)(_t(backend, RNG.standard_normal((3, 4))))


# ---------------------------------------------------------------- set functions
@pytest.mark.parametrize("invert", [False, True])
def test_isin(backend: Any, invert: bool) -> None:
    x1 = RNG.integers(0, 5, (3, 2, 4))
    x2 = RNG.integers(0, 5, (3, 3))
    f = lambda a, b: xg.isin(a, b, invert=invert)
    for axes in [(0, 0), (None, 0), (0, None)]:
        a = x1 if axes[0] == 0 else x1[0]
        b = x2 if axes[1] == 0 else x2[0]
        got = xg.vmap(f, in_axes=axes)(_t(backend, a), _t(backend, b))
        if axes == (0, 0):
            want = _loop(backend, f, x1, x2)
        elif axes[0] is None:
            want = _loop(backend, lambda bb: f(_t(backend, x1[0]), bb), x2)
        else:
            want = _loop(backend, lambda aa: f(aa, _t(backend, x2[0])), x1)
        np.testing.assert_array_equal(_np(backend, got), want)


@pytest.mark.parametrize("name", ["unique_all", "unique_counts", "unique_inverse", "unique_values"])
def test_unique_raises(backend: Any, name: str) -> None:
    fn = getattr(xg, name)
    with pytest.raises(XpgradValueError, match=rf"{name}: cannot be used on a value batched by vmap.*depend on the data"):
        xg.vmap(fn)(_t(backend, RNG.standard_normal((3, 4))))


# ---------------------------------------------------------------- jacrev through index arrays
_M = np.array([True, False, True])
_M2 = np.array([[True, False], [False, False], [True, True]])
_I = np.array([0, 2])
_J = np.array([1, 3])
_KEYS = {
    "mask_and_int": (_M, 1), "int_array": (_I,), "slice_int_array": (slice(None), 1, _J),
    "arrays_apart": (_I[:1], slice(None), _J), "ellipsis_array": (Ellipsis, _J), "mask_ellipsis_array": (_M, Ellipsis, _J),
    "mask_2d": (_M2,), "mask_2d_and_array": (_M2, _J[:1]),
}


@pytest.mark.parametrize("name", list(_KEYS))
def test_jacrev_through_index_arrays_matches_torch_func(name: str) -> None:
    """``jacrev`` pulls a batch of cotangents back through ``x[key]``: the gradient of a
    getitem (embed) runs batched for keys with index arrays and masks mixed with integers,
    slices and ``...``, as ``torch.func.jacrev`` does."""
    torch = pytest.importorskip("torch")
    key = _KEYS[name]
    x = np.arange(24.0).reshape(3, 2, 4) / 7.0
    k = tuple(xg.asarray(a) if isinstance(a, np.ndarray) else a for a in key)
    got = xg.jacrev(lambda v: xg.sin(v[k]) * 2.0)(x)
    tk = tuple(torch.tensor(a) if isinstance(a, np.ndarray) else a for a in key)
    want = torch.func.jacrev(lambda v: torch.sin(v[tk]) * 2.0)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_jacrev_and_jacfwd_through_repeat_with_array_repeats() -> None:
    """``repeat`` with an array of repeats (read as data by its rules) under the batched
    backward of ``jacrev`` and the batched forward of ``jacfwd``."""
    torch = pytest.importorskip("torch")
    x = np.arange(3.0) + 0.5
    r = np.array([1, 2, 0])
    want = torch.func.jacrev(lambda v: torch.repeat_interleave(v, torch.tensor(r)) * 2)(torch.tensor(x)).numpy()
    f = lambda v: xg.repeat(v, xg.asarray(r)) * 2.0
    np.testing.assert_allclose(xg.jacrev(f)(x), want)
    np.testing.assert_allclose(xg.jacfwd(f)(x), want)
