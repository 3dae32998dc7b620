"""Views, version counters and in-place updates (issue 17, sections 1 and 2).

- Every result that shares memory with an argument (as its library says) shares that
  argument's version counter, and no result that does not share memory does (the audit
  over every OpCase, on every backend).
- A write through any view of a saved tensor is caught at backward; a write into a copy
  is not.
- A recorded write through a view reaches its base, with PyTorch's gradient.
- An in-place update that would change a tensor's shape or kind of dtype is refused,
  with nothing changed.
- Integer and boolean results never require grad.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xpgrad as xg

from . import cases as _cases_pkg
from ._cases import OpCase
from ._util import to_numpy

ALL_CASES: list[OpCase] = []
for _m in pkgutil.iter_modules(_cases_pkg.__path__):
    ALL_CASES.extend(importlib.import_module(f"{_cases_pkg.__name__}.{_m.name}").CASES)


# ---------------------------------------------------------------- the library's own answer
def shares_memory(a: Any, b: Any) -> bool:
    """Whether backend arrays ``a`` and ``b`` share memory, as their library says (exactly)."""
    mod = type(a).__module__.split(".")[0]
    if mod in ("jax", "jaxlib"):
        return False  # immutable: an update replaces one Tensor's data, never another's
    if a is b:
        return True
    if mod == "numpy":
        return isinstance(b, np.ndarray) and bool(np.shares_memory(a, b))
    if mod == "array_api_strict":
        return bool(np.shares_memory(a._array, b._array))
    if mod == "torch":
        return (a.device == b.device and a.numel() > 0 and b.numel() > 0
                and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())
    if mod == "cupy":
        import cupy

        # the bounds test: CuPy 14's exact shares_memory compares the addresses of kernel-local
        # copies of the elements (True for any two arrays of overlapping sizes, seen on an H200)
        return bool(cupy.may_share_memory(a, b))
    return False  # JAX (immutable), Dask (a write rebuilds only its own array object's graph)


def _size(a: Any) -> int:
    return int(np.prod(a.shape)) if all(isinstance(s, int) for s in a.shape) else 1


def _outputs(res: Any) -> list[Any]:
    if isinstance(res, xg.Tensor):
        return [res]
    if isinstance(res, (tuple, list)):
        return [o for r in res for o in _outputs(r)]
    return []


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_a_result_shares_the_counter_exactly_when_it_shares_memory(case: OpCase, backend: Any) -> None:
    """(and every integer or boolean result of every function is a constant)"""
    from .test_rules import _draw_inputs

    if backend.name in case.xfail:
        pytest.skip(f"{backend.name} cannot run {case.name}: {case.xfail[backend.name]}")

    @settings(max_examples=3, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(data=st.data())
    def run(data: Any) -> None:
        arrays, params = _draw_inputs(case, data)
        for rg in (False, True):
            args = [xg.asarray(backend.asarray(a), requires_grad=rg and k == "float")
                    for a, k in zip(arrays, case.kinds())]
            res = case.fn(xg, *args, **params)
            for o in _outputs(res):
                if not xg.isdtype(o.dtype, ("real floating", "complex floating")):
                    assert not o.requires_grad, f"{case.name}: an integer or boolean result requires grad"
                for i, a in enumerate(args):
                    if _size(o.data) == 0 or _size(a.data) == 0:
                        continue
                    real = shares_memory(o.data, a.data)
                    same = o._version is a._version
                    assert not (real and not same), (
                        f"{case.name}: output shares memory with argument {i} on {backend.name} "
                        "but not its version counter (a write through it would go unseen)")
                    assert not (same and not real and o is not a), (
                        f"{case.name}: output shares argument {i}'s version counter on {backend.name} "
                        "but not its memory (a write into a copy would raise)")

    run()


# ---------------------------------------------------------------- writes through views
VIEWS = {
    "real": lambda x: xg.real(x),
    "flip": lambda x: xg.flip(x),
    "astype(copy=False)": lambda x: xg.astype(x, x.dtype, copy=False),
    "unstack": lambda x: xg.unstack(xg.reshape(x, (1, 3)))[0],
    "broadcast_arrays": lambda x: xg.broadcast_arrays(x, x[0:1])[0],
    "positive": lambda x: +x,
    "slice": lambda x: x[1:],
    "reshape": lambda x: xg.reshape(x, (3, 1)),
    "mT": lambda x: xg.reshape(x, (1, 3)).mT,
    "conj": lambda x: xg.conj(x),
    "detach": lambda x: x.detach(),
}


@pytest.mark.parametrize("how", sorted(VIEWS))
def test_a_write_through_a_view_of_a_saved_tensor_is_caught(how: str, backend: Any) -> None:
    x = xg.asarray(backend.asarray(np.array([0.1, 0.2, 0.3])), requires_grad=True)
    s = xg.sum(xg.sin(x))
    with xg.no_grad():
        v = VIEWS[how](x)
        aliased = shares_memory(v.data, x.data)
        if how == "broadcast_arrays" and aliased:
            v = xg.asarray(v, copy=True)  # NumPy's broadcast views are read-only: a copy to write
            aliased = False
        v[...] = 5.0
    if aliased:
        with pytest.raises(xg.InPlaceModificationError, match="sin: argument 0"):
            s.backward()
    else:
        s.backward()
        np.testing.assert_allclose(to_numpy(x.grad), np.cos([0.1, 0.2, 0.3]))


def test_the_issue_example_real_on_numpy() -> None:
    x = xg.asarray(np.array([0.1, 0.2, 0.3]), requires_grad=True)
    s = xg.sum(xg.sin(x))
    with xg.no_grad():
        xg.real(x)[2] = 5.0
    with pytest.raises(xg.InPlaceModificationError):
        s.backward()


def test_a_boolean_mask_selection_is_a_copy(backend: Any, request: Any) -> None:
    if backend.name == "dask":
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "Dask cannot assign into an array of unknown chunk sizes (a boolean-mask selection); "
            "the rest of this test (no error, the right gradient) holds once it can")))
    x = xg.asarray(backend.asarray(np.array([0.1, 0.2, 0.3])), requires_grad=True)
    s = xg.sum(xg.sin(x))
    with xg.no_grad():
        m = x[xg.asarray(backend.asarray(np.array([True, False, True])))]
        m[0] = 5.0
    s.backward()
    np.testing.assert_allclose(to_numpy(x.grad), np.cos([0.1, 0.2, 0.3]))
    np.testing.assert_allclose(to_numpy(x), [0.1, 0.2, 0.3])


# ---------------------------------------------------------------- recorded writes through views
class _TorchOps:
    """The functions the programs below call through ``ns``, in torch's spelling."""

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def reshape(self, x: Any, shape: tuple[int, ...]) -> Any:
        return self.torch.reshape(x, shape)

    def unstack(self, x: Any) -> Any:
        return tuple(x[i, ...] for i in range(x.shape[0]))  # torch refuses writes into unbind's views



def _p_slice(ns: Any, x: Any, v: Any) -> Any:
    y = x * 1.0
    t = y[1:]
    t *= v[0]
    return y


def _p_rows(ns: Any, x: Any, v: Any) -> Any:
    m = ns.reshape(x * 0.0, (2, 3))
    m[1, ...][0] = v[0] * 3.0
    m[0, ...][1:] = x[:2]
    return ns.reshape(m, (6,))


def _p_idiom(ns: Any, x: Any, v: Any) -> Any:
    y = x * 1.0
    y[1:] *= v[1]
    return y


def _p_reshape(ns: Any, x: Any, v: Any) -> Any:
    y = x * 1.0
    r = ns.reshape(y, (2, 3))
    r[1, 1:] += v[:2]
    return y


def _p_transpose(ns: Any, x: Any, v: Any) -> Any:
    y = x * 1.0
    c = ns.reshape(y, (2, 3)).mT
    c[2, ...] = v[:2] * v[1]
    return y


def _p_unstack(ns: Any, x: Any, v: Any) -> Any:
    y = ns.reshape(x * 1.0, (2, 3))
    r = ns.unstack(y)[1]
    r *= v[2]
    return ns.reshape(y, (6,))


def _p_twice(ns: Any, x: Any, v: Any) -> Any:
    y = x * 1.0
    t = y[2:5]
    t += v[0]
    t[1] = v[1] * x[0]
    return y


def _p_chain(ns: Any, x: Any, v: Any) -> Any:
    y = x * 1.0
    t = ns.reshape(y, (3, 2))[1:, ...]  # a view of a view
    t[0, ...][1] = v[2]
    t *= v[0]
    return y


#: programs of a recorded write through a view: ``f(ns, x, v)`` with ns the namespace, x and v
#: of shapes (6,) and (3,), both requiring grad; each returns the updated base, shape (6,)
PROGRAMS = {
    "slice *=": _p_slice,
    "m[1][0] = v": _p_rows,
    "y[1:] *= v (the Python idiom)": _p_idiom,
    "reshape view, then slice +=": _p_reshape,
    "transpose of a reshape, row =": _p_transpose,
    "unstack row *=": _p_unstack,
    "two writes through one view": _p_twice,
    "a view of a view": _p_chain,
}


def _numeric_grad(f: Any, backend: Any, x0: np.ndarray, v0: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    def value(x: np.ndarray, v: np.ndarray) -> float:
        with xg.no_grad():
            out = f(xg, xg.asarray(backend.asarray(x)), xg.asarray(backend.asarray(v)))
        return float(np.sum(to_numpy(out) * w))

    eps = 1e-6
    grads = []
    for which, arr in enumerate((x0, v0)):
        g = np.zeros_like(arr)
        for i in range(arr.size):
            d = np.zeros_like(arr)
            d.flat[i] = eps
            hi = value(x0 + d, v0) if which == 0 else value(x0, v0 + d)
            lo = value(x0 - d, v0) if which == 0 else value(x0, v0 - d)
            g.flat[i] = (hi - lo) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_recorded_write_through_a_view_reaches_the_base(name: str, backend: Any) -> None:
    """The recorded program gives the values the unrecorded one does (the library's own view
    semantics: NumPy, PyTorch and array-api-strict write through, JAX and Dask slices are
    copies), and the gradient of both inputs agrees with central differences."""
    f = PROGRAMS[name]
    rng = np.random.default_rng(0)
    x0, v0, w = rng.uniform(-1, 1, 6), rng.uniform(-1, 1, 3), rng.standard_normal(6)
    with xg.no_grad():
        expected = to_numpy(f(xg, xg.asarray(backend.asarray(x0)), xg.asarray(backend.asarray(v0))))
    x = xg.asarray(backend.asarray(x0), requires_grad=True)
    v = xg.asarray(backend.asarray(v0), requires_grad=True)
    out = f(xg, x, v)
    np.testing.assert_allclose(to_numpy(out), expected, rtol=1e-12, atol=1e-12)
    xg.sum(out * xg.asarray(backend.asarray(w))).backward()
    gx, gv = _numeric_grad(f, backend, x0, v0, w)
    # (on JAX and Dask some programs' writes stay in a copy: v does not reach the base, and
    # its .grad stays None, as an unreached leaf's does)
    for t, numeric in ((x, gx), (v, gv)):
        ours = np.zeros_like(numeric) if t.grad is None else to_numpy(t.grad)
        np.testing.assert_allclose(ours, numeric, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_recorded_write_through_a_view_matches_torch(name: str) -> None:
    torch = pytest.importorskip("torch")
    f = PROGRAMS[name]
    rng = np.random.default_rng(1)
    x0, v0, w = rng.uniform(-1, 1, 6), rng.uniform(-1, 1, 3), rng.standard_normal(6)
    x = xg.asarray(x0, requires_grad=True)
    v = xg.asarray(v0, requires_grad=True)
    out = f(xg, x, v)
    xg.sum(out * w).backward()
    xt = torch.tensor(x0, requires_grad=True)
    vt = torch.tensor(v0, requires_grad=True)
    out_t = f(_TorchOps(), xt, vt)
    (out_t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(to_numpy(out), out_t.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(to_numpy(x.grad), xt.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(to_numpy(v.grad), vt.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_a_recorded_write_into_a_view_of_a_leaf_is_refused_with_nothing_changed(backend: Any) -> None:
    x = xg.asarray(backend.asarray(np.arange(3.0)), requires_grad=True)
    # a view of x where slices are views, else (JAX, Dask) a copy that __setitem__ writes back
    with pytest.raises(xg.InPlaceModificationError, match="leaf tensor that requires grad cannot be modified"):
        x[0:2] += 1.0
    np.testing.assert_array_equal(to_numpy(x), [0.0, 1.0, 2.0])
    assert x.is_leaf and x._version[0] == 0


@pytest.mark.parametrize("how", ["detach", "broadcast_to"])
def test_a_recorded_write_that_cannot_reach_the_base_is_refused(how: str, np_backend: Any) -> None:
    x = xg.asarray(np.arange(3.0), requires_grad=True)
    y = x * 2.0
    view = y.detach() if how == "detach" else xg.broadcast_to(y, (2, 3))
    before = to_numpy(y).copy()
    with pytest.raises(xg.InPlaceModificationError, match=f"made by {how}"):
        view[0] = x[1] * 1.0
    np.testing.assert_array_equal(to_numpy(y), before)


def test_a_view_taken_before_a_recorded_update_of_its_base_sees_it() -> None:
    """Documented (docs/concepts/inplace.md): the base gets a new array, and the old view is
    made again from it (PyTorch's view rebase); a write into it then reaches the base."""
    a = xg.asarray([1.0, 2.0, 3.0], requires_grad=True)
    h = a * 1.0
    head = h[0:2]
    h += 10.0
    assert head.tolist() == [11.0, 12.0]
    head[0] = a[2]  # through the view: h changes too
    assert h.tolist() == [3.0, 12.0, 13.0]
    xg.sum(h * h).backward()
    assert to_numpy(a.grad).tolist() == [0.0, 24.0, 2 * 3.0 + 2 * 13.0]


# ---------------------------------------------------------------- shape and dtype of updates
def _state(t: Any) -> tuple[Any, ...]:
    return (to_numpy(t).tolist(), t.dtype, t.requires_grad, t._node, t._version[0])


@pytest.mark.parametrize("grad", [True, False])
def test_an_update_may_not_change_the_shape(grad: bool, backend: Any) -> None:
    v = xg.asarray(backend.asarray(np.ones((2, 3))), requires_grad=grad)
    acc = xg.asarray(backend.asarray(np.zeros(3)))
    before = _state(acc)
    with pytest.raises(xg.XpgradValueError,
                       match=r"__iadd__: a tensor of shape \(3,\) updated with a value of shape \(2, 3\) gives the shape \(2, 3\)"):
        acc += v
    assert _state(acc) == before
    m = xg.asarray(backend.asarray(np.ones((3, 2))), requires_grad=grad)
    acc2 = xg.asarray(backend.asarray(np.ones(3)))
    with pytest.raises(xg.XpgradValueError, match="__imatmul__: the result's shape"):
        acc2 @= m
    assert to_numpy(acc2).tolist() == [1.0, 1.0, 1.0]


def test_an_update_may_not_change_the_kind_of_dtype(backend: Any) -> None:
    v = xg.asarray(backend.asarray(np.array([0.5, 1.5])), requires_grad=True)
    a = xg.asarray(backend.asarray(np.array([1, 2])))
    before = _state(a)
    with pytest.raises(xg.XpgradTypeError, match="__iadd__: the result of __iadd__ of a integer tensor with a real floating value is real floating"):
        a += v
    assert _state(a) == before
    assert v.grad is None


def test_a_recorded_float32_update_with_float64_stays_float32(np_backend: Any) -> None:
    x = xg.asarray(np.ones(2, dtype=np.float32), requires_grad=True)
    y = x * 1.0
    y += xg.asarray(np.array([0.5, 0.25]))
    assert y.dtype == xg.float32
    xg.sum(y).backward()
    assert x.grad.dtype == xg.float32


def test_a_value_requiring_grad_written_into_an_integer_tensor_is_cast(backend: Any) -> None:
    """As in PyTorch: the integer tensor stays an integer constant."""
    v = xg.asarray(backend.asarray(np.array([1.5, 2.5])), requires_grad=True)
    a = xg.asarray(backend.asarray(np.array([7, 8])))
    a[0] = v[1]
    assert to_numpy(a).tolist() == [2, 8] and a.dtype == xg.int64 and not a.requires_grad


def test_floor_divide_in_place_makes_a_constant_not_a_leaf(backend: Any) -> None:
    x = xg.asarray(backend.asarray(np.array([1.5, 2.5])), requires_grad=True)
    y = x * 2.0
    y //= 1.0
    z = x * 2.0 // 1.0  # the out-of-place spelling gives the same
    assert y.requires_grad == z.requires_grad is False
    assert y.grad_fn is None
    assert to_numpy(y).tolist() == [3.0, 5.0]


# ---------------------------------------------------------------- integer and boolean results
INT_RESULTS = {
    "sum(dtype=int64)": lambda x: xg.sum(x, dtype=xg.int64),
    "prod(dtype=int64)": lambda x: xg.prod(x, dtype=xg.int64),
    "cumulative_sum(dtype=int64)": lambda x: xg.cumulative_sum(x, dtype=xg.int64),
    "cumulative_prod(dtype=int64)": lambda x: xg.cumulative_prod(x, dtype=xg.int64),
    "astype(int32)": lambda x: xg.astype(x, xg.int32),
    "astype(bool)": lambda x: xg.astype(x, xg.bool),
    "asarray(dtype=int64)": lambda x: xg.asarray(x, dtype=xg.int64),
    "round then astype": lambda x: xg.astype(xg.round(x), xg.int64),
    "argmax": lambda x: xg.argmax(x),
}


@pytest.mark.parametrize("name", sorted(INT_RESULTS))
def test_integer_and_boolean_results_are_constants(name: str, backend: Any) -> None:
    x = xg.asarray(backend.asarray(np.array([1.5, 2.5, 0.5])), requires_grad=True)
    r = INT_RESULTS[name](x)
    assert not r.requires_grad and r.grad_fn is None, f"{name} of a tensor requiring grad requires grad"
    # and nothing flows through it: the gradient is that of the float part alone
    loss = xg.sum(x * 2.0) + xg.sum(xg.astype(r, x.dtype))
    loss.backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [2.0, 2.0, 2.0])
    with xg.enable_grad():
        (_, tangent) = xg.jvp(lambda t: xg.astype(INT_RESULTS[name](t), t.dtype), (x.detach(),),
                              (xg.asarray(backend.asarray(np.ones(3))),))
    assert not np.any(to_numpy(tangent)), f"{name}: a tangent flowed through an integer result"
