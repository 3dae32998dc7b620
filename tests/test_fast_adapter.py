"""xpgrad's fast-path adapter for NumPy and torch (``xpgrad._fast_adapter``), what it promises:
every replacement gives what ``array_api_compat.numpy``/``.torch`` gives (type of the result,
0-d included, dtype, shape, values, read-only flag, memory sharing) or raises the same error;
on its fast path it runs no Python function but itself; every other attribute is compat's;
the dispatch uses it internally while users keep seeing the compat modules."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from typing import Any

import array_api_compat
import array_api_compat.numpy as cnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xpgrad as xg
from xpgrad import _dispatch, _fast_adapter

FAST = _fast_adapter.numpy_adapter()

DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint64", "float32", "float64", "complex64", "complex128"]
SHAPES = [(), (0,), (3,), (2, 3), (2, 0, 3), (2, 3, 4)]


def _array(shape: tuple[int, ...], dtype: str, *, layout: str = "C") -> np.ndarray:
    """Deterministic values of ``dtype`` (C order, Fortran order or a strided view)."""
    n = int(np.prod(shape))
    a = (np.arange(n) % 7 - 3).reshape(shape).astype(dtype)
    if layout == "F":
        return np.asfortranarray(a)
    if layout == "strided":
        big = np.zeros(tuple(2 * s for s in shape) or (1,), dtype=dtype)
        view = big[tuple(slice(None, None, 2) for _ in shape)] if shape else big[0, ...]
        view[...] = a
        return view
    return a


def _both(ref: Callable[..., Any], fast: Callable[..., Any], args: tuple[Any, ...], kw: dict[str, Any]) -> tuple[Any, Any] | None:
    """(compat's result, the fast one's), or None when compat raised and the fast function
    raised the very same (type and message)."""
    try:
        want = ref(*args, **kw)
    except Exception as e:  # noqa: BLE001 - the fast function must raise the very same
        with pytest.raises(type(e)) as ei:
            fast(*args, **kw)
        assert str(ei.value) == str(e)
        return None
    return want, fast(*args, **kw)


def _same(name: str, *args: Any, **kw: Any) -> Any:
    """Call the fast and the compat function with the same arguments; assert the same outcome."""
    ref: Callable[..., Any] = getattr(cnp, name)
    fast: Callable[..., Any] = getattr(FAST, name)
    outcome = _both(ref, fast, args, kw)
    if outcome is None:
        return None
    want, got = outcome
    assert type(got) is type(want), (name, args, kw)
    if isinstance(want, (np.ndarray, np.generic)):
        assert got.dtype == want.dtype and got.shape == want.shape, (name, args, kw)
        if name not in ("empty", "empty_like"):
            np.testing.assert_array_equal(got, want, strict=True)
    if isinstance(want, np.ndarray):
        assert got.flags.writeable == want.flags.writeable
        for a in args:
            if isinstance(a, np.ndarray):  # views stay views, copies stay copies
                assert np.shares_memory(got, a) == np.shares_memory(want, a), (name, args, kw)
    return got


# ---------------------------------------------------------------- the namespace itself
def test_the_overrides_are_active_here() -> None:
    # array-api-compat 1.16 with NumPy 2.4: every candidate applies (another version keeps
    # the compat functions whose object changed; this pins the versions the tests exercise)
    assert set(_fast_adapter.OVERRIDES) == set(_fast_adapter._CANDIDATES)
    for name in _fast_adapter.OVERRIDES:
        assert getattr(FAST, name) is getattr(_fast_adapter, name)
        assert getattr(FAST, name) is not getattr(cnp, name)


def test_every_other_attribute_is_compats() -> None:
    names = set(dir(cnp)) | {n for n in vars(cnp) if not n.startswith("__")}
    for name in names - set(_fast_adapter.OVERRIDES):
        assert getattr(FAST, name) is getattr(cnp, name), name
    assert FAST.__name__ == "array_api_compat.numpy"
    assert FAST.__array_api_version__ == cnp.__array_api_version__
    assert FAST.__array_namespace_info__ is cnp.__array_namespace_info__
    assert FAST.linalg is cnp.linalg and FAST.fft is cnp.fft
    assert FAST.float64 is np.float64 and FAST.bool is np.bool_
    assert dir(FAST) == dir(cnp)
    assert array_api_compat.is_numpy_namespace(FAST)
    with pytest.raises(AttributeError):
        FAST.no_such_function  # noqa: B018


def test_dispatch_uses_it_internally_and_hands_users_compat() -> None:
    x = np.ones(2)
    assert _dispatch.backend_namespace(x) is FAST
    assert _dispatch.backend_namespace(xg.asarray(x)) is FAST
    assert _dispatch.public_namespace(FAST) is cnp
    assert xg.array_namespace(x) is cnp
    assert xg.array_namespace(np.float32(1.0)) is cnp
    # other libraries are untouched
    import array_api_strict as xps

    assert _dispatch.backend_namespace(xps.ones(2)) is xps
    assert _dispatch.public_namespace(xps) is xps


def test_it_says_what_it_is() -> None:
    assert isinstance(FAST, _fast_adapter.FastAdapter)
    assert FAST.adapted is cnp
    assert repr(FAST) == "<xpgrad's fast-path adapter over 'array_api_compat.numpy'>"
    assert "adapter" in (_fast_adapter.__doc__ or "") and "not: a stand-in for array-api-compat" in (_fast_adapter.__doc__ or "")
    assert _fast_adapter.numpy_adapter() is FAST  # one per process


def test_users_are_handed_compat_never_the_adapter() -> None:
    x = np.ones(2)
    t = xg.asarray(x)
    assert xg.array_namespace(x) is cnp
    assert t.__array_namespace__().binding[0] is cnp
    assert xg.array_namespace(t).binding[0] is cnp
    assert xg.current_policy().xp is cnp  # (the default policy's namespace, as users meet it)
    seen = []

    @xg.custom_vjp
    def f(v: Any) -> Any:
        seen.append(xg.array_namespace(v))
        return v * 2.0

    f.defvjp(lambda v: (f(v), None), lambda res, g: (g * 2.0,))
    xg.grad(lambda v: xg.sum(f(v)))(x)
    assert all(ns is not FAST for ns in seen) and seen


def _python_calls(fn: Callable[[], Any]) -> list[str]:
    """The Python functions (not C ones) that run during ``fn()``, as ``module:name``, in order
    (with the garbage collector off: its callbacks, hypothesis' and JAX's, are Python too)."""
    import gc
    import sys

    names: list[str] = []

    def prof(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            names.append(f"{frame.f_globals.get('__name__')}:{frame.f_code.co_name}")

    enabled = gc.isenabled()
    gc.disable()
    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
        if enabled:
            gc.enable()
    return names[1:]  # (the first is fn itself)


@pytest.mark.parametrize(("name", "args"), [
    ("sum", (np.ones((2, 3)),)), ("max", (np.ones((2, 3)),)), ("min", (np.ones(3),)),
    ("matmul", (np.ones((2, 3)), np.ones((3, 2)))), ("matrix_transpose", (np.ones((2, 3)),)),
    ("reshape", (np.ones((2, 3)), (3, 2))), ("expand_dims", (np.ones(3), 0)), ("broadcast_to", (np.asarray(1.0), (2, 3))),
    ("astype", (np.ones(3), np.float32)), ("zeros", ((2, 3),)), ("ones_like", (np.ones(3),)), ("full", ((2,), 1.5)),
    ("arange", (4,)),
])
def test_the_fast_path_skips_compat(name: str, args: tuple[Any, ...]) -> None:
    # the speed the adapter is for: on a plain ndarray with no device the replacement calls
    # NumPy directly, running fewer Python functions than compat's own, and none of compat's
    fast, ref = getattr(FAST, name), getattr(cnp, name)
    got, want = _python_calls(lambda: fast(*args)), _python_calls(lambda: ref(*args))
    assert got[0] == f"xpgrad._fast_adapter:{name}"
    assert not [c for c in got if c.startswith("array_api_compat")], got
    assert len(got) < len(want), (got, want)
    # off the fast path (a device given) it hands the call to compat's function
    if name in ("zeros", "full", "arange"):
        assert [c for c in _python_calls(lambda: fast(*args, device="cpu")) if c.startswith("array_api_compat")]


def test_the_torch_fast_path_skips_compat() -> None:
    torch = pytest.importorskip("torch")
    ns = _fast_adapter.torch_adapter()
    a, b = torch.ones(2, 3), torch.ones(2, 3)
    for call in (lambda: ns.add(a, b), lambda: ns.multiply(a, b), lambda: ns.matmul(a, b.mT),
                 lambda: ns.matrix_transpose(a), lambda: ns.sum(a), lambda: ns.sum(a, axis=1)):
        got = _python_calls(call)
        assert got and all(c.startswith("xpgrad._fast_adapter:") for c in got), got
    # two dtypes: compat's type promotion runs
    assert [c for c in _python_calls(lambda: ns.add(a, b.double())) if c.startswith("array_api_compat")]


def test_a_lone_numpy_scalar_is_numpys_not_the_policys() -> None:
    # a full reduction gives a NumPy scalar (np.float64 subclasses float); its backward
    # seed must come from NumPy even under another library's policy
    x = xg.asarray(np.ones((2, 2)))
    x.requires_grad = True
    with xg.default_device("array_api_strict"):
        y = xg.sum(x * x)
        assert type(y.data) is np.float64
        assert _dispatch.backend_namespace(y.data) is FAST
        y.backward()
    assert type(x.grad.data) is np.ndarray
    np.testing.assert_array_equal(x.grad.data, np.full((2, 2), 2.0))
    # next to an array a NumPy scalar is still a Python scalar
    import array_api_strict as xps

    assert _dispatch.backend_namespace(xps.ones(2), np.float64(2.0)) is xps


def test_move_array_treats_it_as_numpy() -> None:
    from xpgrad._io import move_array

    a = np.ones((3, 2))[:, 0]  # not contiguous: a move across libraries would copy it
    assert move_array(a, cnp) is a
    assert move_array(a, FAST) is a


# ---------------------------------------------------------------- reductions
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_sum_max_min_axes(shape: tuple[int, ...], dtype: str) -> None:
    x = _array(shape, dtype)
    nd = len(shape)
    axes: list[Any] = [None, *range(-nd - 1, nd + 1), (), tuple(range(nd)), (0, -1), (0, 0)]
    for axis, keepdims in itertools.product(axes, [False, True]):
        for name in ("sum", "max", "min"):
            _same(name, x, axis=axis, keepdims=keepdims)
        _same("sum", x, axis=axis)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("out", [None, "bool", "int8", "int32", "int64", "uint64", "float32", "float64", "complex128"])
def test_sum_dtype(dtype: str, out: str | None) -> None:
    x = _array((2, 3), dtype)
    for axis in (None, 0, (0, 1)):
        _same("sum", x, axis=axis, dtype=out)
        _same("sum", x, axis=axis, dtype=None if out is None else np.dtype(out), keepdims=True)


def test_sum_max_min_other_inputs() -> None:
    scalars = [np.float64(2.5), np.float32(1.5), np.int8(3), np.bool_(True), np.complex64(1 + 2j)]
    for s in scalars:
        for name in ("sum", "max", "min"):
            _same(name, s)
            _same(name, s, axis=0)
    for layout in ("F", "strided"):
        x = _array((2, 3), "float32", layout=layout)
        for name in ("sum", "max", "min"):
            _same(name, x, axis=1, keepdims=True)
    m = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])  # a subclass: its own methods
    for name in ("sum", "max", "min"):
        assert type(getattr(FAST, name)(m)) is type(getattr(cnp, name)(m))
        assert getattr(FAST, name)(m) == getattr(cnp, name)(m)
    x = _array((2, 3), "float64")
    _same("sum", x, axis=0, initial=1.0)
    _same("max", x, axis=0, where=np.array([True, False, True]), initial=-9.0)
    _same("sum", x, axis=[0])
    _same("sum", x, axis=1.5)
    _same("sum", x, 0, None, None, True)  # NumPy's positional order
    out = np.empty(3)
    assert FAST.sum(x, axis=0, out=out) is out
    np.testing.assert_array_equal(out, cnp.sum(x, axis=0))


@given(
    x=hnp.arrays(st.sampled_from([np.int8, np.uint16, np.int64, np.float32, np.float64, np.complex128, np.bool_]),
                 hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3)),
    data=st.data(),
)
def test_reductions_property(x: np.ndarray, data: st.DataObject) -> None:
    nd = x.ndim
    axis = data.draw(st.one_of(st.none(), st.integers(-nd - 1, nd), st.lists(st.integers(-nd, max(nd - 1, 0)),
                                                                               max_size=3).map(tuple)))
    keepdims = data.draw(st.booleans())
    for name in ("sum", "max", "min"):
        _same(name, x, axis=axis, keepdims=keepdims)


# ---------------------------------------------------------------- linear algebra
@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float32", "float64", "complex64"])
def test_matmul(dtype: str) -> None:
    shapes = [(), (3,), (2, 3), (3, 2), (3, 3), (4, 3, 2), (1, 2, 3), (0, 3), (3, 0)]
    for s1, s2 in itertools.product(shapes, repeat=2):
        _same("matmul", _array(s1, dtype), _array(s2, dtype))
    a, b = _array((2, 3), dtype), _array((3, 2), "float64")
    _same("matmul", a, b)
    out = np.empty((2, 2), dtype=np.result_type(a, b))
    assert FAST.matmul(a, b, out=out) is out
    _same("matmul", a, b, out=np.empty((3, 3)))
    _same("matmul", [[1.0, 2.0]], [[3.0], [4.0]])


@pytest.mark.parametrize("dtype", ["bool", "int16", "float32", "complex128"])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_matrix_transpose(dtype: str, layout: str) -> None:
    for shape in [(), (3,), (2, 3), (2, 3, 4), (0, 2), (2, 1, 0, 3)]:
        x = _array(shape, dtype, layout=layout)
        r = _same("matrix_transpose", x)
        if r is not None:
            assert r.strides == cnp.matrix_transpose(x).strides
    _same("matrix_transpose", np.float64(1.0))
    m = np.ma.masked_array(np.ones((2, 3)))
    assert type(FAST.matrix_transpose(m)) is type(cnp.matrix_transpose(m))


# ---------------------------------------------------------------- manipulation
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
@pytest.mark.parametrize("copy", [None, True, False])
def test_reshape(layout: str, copy: bool | None) -> None:
    x = _array((2, 3, 2), "float32", layout=layout)
    for shape in [(12,), (-1,), (3, 4), (2, -1), (1, 12, 1), (-1, -1), (5,), (), 12]:
        _same("reshape", x, shape, copy=copy)
        _same("reshape", x, shape=shape, copy=copy)
    _same("reshape", x, (12,), order="F")
    _same("reshape", _array((), "int8"), (1, 1))
    _same("reshape", _array((0, 3), "bool"), (3, 0))
    _same("reshape", np.float64(1.0), (1,))


@pytest.mark.parametrize("dtype", ["bool", "uint8", "float64"])
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3)])
@pytest.mark.parametrize("layout", ["C", "strided"])
def test_expand_dims(dtype: str, shape: tuple[int, ...], layout: str) -> None:
    x = _array(shape, dtype, layout=layout)
    nd = len(shape)
    for axis in [*range(-nd - 3, nd + 3), (0, -1), (0, 0), np.int64(0), True, 1.0, None]:
        _same("expand_dims", x, axis)
        _same("expand_dims", x, axis=axis)
    _same("expand_dims", np.float64(1.0), 0)
    with pytest.raises(TypeError):
        FAST.expand_dims(x)  # (NumPy's axis has no default, nor has compat's)


@pytest.mark.parametrize("dtype", [*DTYPES, "float16", "datetime64[s]", "object"])
def test_broadcast_to_0d(dtype: str) -> None:
    x = np.asarray(np.array(1, dtype="int64").astype(dtype))
    for shape in [(), (0,), (3,), (2, 3), (2, 0, 3), (1, 1), (-1,), (2, -3), (2.0,), 3, [2, 3], (np.int64(2),),
                  ("a",), (None,), (True, 2), (2**62, 2**62)]:
        r = _same("broadcast_to", x, shape)
        if r is not None:
            with pytest.raises(ValueError, match="read-only"):
                r[...] = 0
    ro = np.asarray(2.5)
    ro.flags.writeable = False
    _same("broadcast_to", ro, (2, 2))
    _same("broadcast_to", np.asarray(2.5).astype(">f8"), (2, 2))
    big = np.arange(6.0)
    _same("broadcast_to", big[3, ...], (2, 2))  # a 0-d view into another buffer
    _same("broadcast_to", np.float64(2.0), (2,))


def test_broadcast_to_other_inputs() -> None:
    for shape, target in [((3,), (2, 3)), ((1, 3), (4, 3)), ((3,), (2,)), ((2, 3), ()), ((3, 1), (3, 0))]:
        _same("broadcast_to", _array(shape, "float32"), target)
    _same("broadcast_to", _array((2,), "float32", layout="strided"), (3, 2))
    _same("broadcast_to", [1.0, 2.0], (2, 2))


# ---------------------------------------------------------------- data type
@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("copy", [True, False])
def test_astype(src: str, copy: bool) -> None:
    x = _array((2, 3), src)
    for dt in DTYPES:
        r = _same("astype", x, np.dtype(dt), copy=copy)
        if r is not None and not copy and dt == src:
            assert r is x
    _same("astype", x, np.float32, device="cpu")
    _same("astype", x, np.float32, device="gpu")
    _same("astype", _array((), src), np.float64)
    _same("astype", np.float64(2.5), np.int8)


# ---------------------------------------------------------------- creation
@pytest.mark.parametrize("device", [None, "cpu", "gpu"])
def test_creation(device: str | None) -> None:
    for shape, dt in itertools.product([(), (0,), (2, 3), 4], [None, "int8", np.float32, "complex64", "bool"]):
        kw = {"dtype": dt, "device": device}
        for name in ("zeros", "ones", "empty"):
            _same(name, shape, **kw)
        _same("full", shape, 2, **kw)
        _same("full", shape, 1.5, **kw)
        like = _array(shape if isinstance(shape, tuple) else (shape,), "float32", layout="F")
        for name in ("zeros_like", "ones_like", "empty_like"):
            _same(name, like, **kw)
        _same("full_like", like, 3, **kw)
    for args, kw in [((5,), {}), ((1, 4), {}), ((0, 1, 0.25), {}), ((3,), {"dtype": "float32"}),
                     ((2.0,), {"stop": 5.0, "step": 0.5}), ((0,), {"stop": 2}), ((0, 5, 0), {})]:
        _same("arange", *args, device=device, **kw)
    _same("zeros", (2, 3), order="F")
    _same("ones_like", _array((2, 3), "int8"), dtype=np.float64, order="C")
    _same("zeros", (-1,))
    _same("full", (2,), [1.0, 2.0])
    _same("ones_like", np.float64(1.0))
    _same("zeros_like", np.int8(1), dtype="float32")


# ---------------------------------------------------------------- torch
def _same_torch(name: str, *args: Any, **kw: Any) -> Any:
    """As _same, for array_api_compat.torch and xpgrad's torch adapter."""
    import array_api_compat.torch as ct
    import torch

    fast = getattr(_fast_adapter.torch_adapter(), name)
    with warnings.catch_warnings():
        # torch warns once per process (complex -> real casts): the second call would not
        warnings.simplefilter("ignore")
        outcome = _both(getattr(ct, name), fast, args, kw)
    if outcome is None:
        return None
    want, got = outcome
    assert type(got) is type(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (name, args, kw)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    for a in args:  # views stay views
        if isinstance(a, torch.Tensor) and a.numel():
            assert (got.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()) == (
                want.untyped_storage().data_ptr() == a.untyped_storage().data_ptr())
    return got


TORCH_DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64", "complex64"]


def test_torch_adapter_dispatch() -> None:
    torch = pytest.importorskip("torch")
    import array_api_compat.torch as ct

    ns = _fast_adapter.torch_adapter()
    assert _dispatch.backend_namespace(torch.ones(2)) is ns
    assert xg.array_namespace(torch.ones(2)) is ct
    assert ns.__name__ == "array_api_compat.torch" and array_api_compat.is_torch_namespace(ns)
    assert ns.linalg is ct.linalg and ns.float32 is torch.float32
    replaced = {n for n, v in vars(ns).items() if getattr(v, "__module__", None) == "xpgrad._fast_adapter"}
    assert {"add", "multiply", "maximum", "matmul", "matrix_transpose", "sum"} <= replaced
    for name in set(dir(ct)) - replaced:
        assert getattr(ns, name) is getattr(ct, name), name


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum", "minimum", "pow", "equal",
                                  "less", "logaddexp", "atan2", "remainder", "floor_divide", "bitwise_and",
                                  "logical_or", "copysign", "hypot", "nextafter"])
def test_torch_binary(name: str) -> None:
    torch = pytest.importorskip("torch")
    for d1, d2 in itertools.product(TORCH_DTYPES, ["bool", "int8", "int64", "float32", "float64"]):
        for s1, s2 in [((), ()), ((3,), ()), ((), (3,)), ((2, 3), (3,)), ((0,), (1,)), ((2,), (3,))]:
            a = torch.asarray(_array(s1, "int64")).to(getattr(torch, d1))
            b = torch.asarray(_array(s2, "int64") + 1).to(getattr(torch, d2))
            _same_torch(name, a, b)
    a = torch.arange(4.0)
    for other in (2, 2.5, True, 1j):
        _same_torch(name, a, other)
        _same_torch(name, other, a)
    _same_torch(name, a, torch.nn.Parameter(torch.ones(4)))  # a subclass: compat's path
    _same_torch(name, a, torch.arange(4.0), out=torch.empty(4))


def test_torch_matmul_transpose_sum() -> None:
    torch = pytest.importorskip("torch")
    shapes = [(), (3,), (2, 3), (3, 2), (4, 3, 2), (0, 3)]
    for dt in ["int32", "float32", "float64", "complex64"]:
        for s1, s2 in itertools.product(shapes, repeat=2):
            a = torch.asarray(_array(s1, "float64")).to(getattr(torch, dt))
            _same_torch("matmul", a, torch.asarray(_array(s2, "float64")).to(getattr(torch, dt)))
            _same_torch("matmul", a, torch.asarray(_array(s2, "float64")))
        for shape in [*shapes, (2, 1, 0, 3)]:
            x = torch.asarray(_array(shape, "float64")).to(getattr(torch, dt))
            _same_torch("matrix_transpose", x)
            nd = len(shape)
            for axis, keepdims in itertools.product([None, *range(-nd - 1, nd + 1), (), (0, -1)], [False, True]):
                _same_torch("sum", x, axis=axis, keepdims=keepdims)
                _same_torch("sum", x, axis=axis, keepdims=keepdims, dtype=torch.float64)
    for dt in TORCH_DTYPES:
        x = torch.asarray(_array((2, 3), "int64")).to(getattr(torch, dt))
        _same_torch("sum", x)
        _same_torch("sum", x, axis=1)
    _same_torch("matrix_transpose", torch.nn.Parameter(torch.ones(2, 3)))
