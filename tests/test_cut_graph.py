"""A gradient through a cut graph is an error, never a silent zero (issue: same code on any array, part 3).

``float(x)``, ``int(x)``, ``complex(x)``, ``x.item()``, ``x.tolist()``, ``math.*`` and
NumPy conversions leave the tape. Under ``grad``/``value_and_grad``/``vjp``/``jvp`` and
the transforms built on them, a result that is a Python number, or whose gradient came
out structurally zero while a traced value depending on the input was converted, raises
:class:`xpgrad.CutGraphError` naming the conversion and the line. Logging a value,
control flow on a value, ``stop_gradient`` and a function genuinely constant in its
input keep working, with the right gradient, on every backend.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad.autograd import _cut

from .conftest import Backend

HERE = __file__.rsplit("/", 1)[-1]


def _ns(a: Any) -> Any:
    return xg.array_namespace(a)


# (id, function of one scalar array, the conversion the message names): each returns an
# array computed only through a value converted to a Python number, so its gradient
# would silently be zero
CUT_TO_ARRAY: list[tuple[str, Callable[[Any], Any], str]] = [
    ("float", lambda a: _ns(a).asarray(float(a)) * 2.0, "float()"),
    ("math.exp", lambda a: _ns(a).asarray(math.exp(a)), "float()"),
    ("item", lambda a: _ns(a).asarray(a.item() ** 2), ".item()"),
    ("tolist", lambda a: _ns(a).asarray(sum(_ns(a).reshape(a, (1,)).tolist())), ".tolist()"),
    ("statistics", lambda a: _ns(a).asarray(statistics.fmean(_ns(a).stack([a, a]).tolist())), ".tolist()"),
]
# functions that return the Python number itself
CUT_TO_NUMBER: list[tuple[str, Callable[[Any], Any], str, str]] = [
    ("math.exp", lambda a: math.exp(a), "float()", "float"),
    ("float", lambda a: float(a * a), "float()", "float"),
    ("item", lambda a: (a * 3.0).item(), ".item()", "float"),
    ("complex", lambda a: complex(a), "complex()", "complex"),
]


def _x(backend: Backend, v: float = 0.5) -> Any:
    return backend.asarray(np.asarray(v))


@pytest.mark.parametrize(("f", "what"), [c[1:] for c in CUT_TO_ARRAY], ids=[c[0] for c in CUT_TO_ARRAY])
def test_grad_of_a_value_computed_from_a_python_number_raises(backend: Backend, f: Any, what: str) -> None:
    for transform, name in ((xg.grad, "grad"), (xg.value_and_grad, "value_and_grad")):
        with pytest.raises(xg.CutGraphError) as ei:
            transform(f)(_x(backend))
        msg = str(ei.value)
        assert msg.startswith(f"{name}: the gradient of <lambda> with respect to argument 0 would be silently zero"), msg
        assert f"The graph was cut by {what} of a traced array of shape (" in msg and "dtype float64" in msg, msg
        assert HERE in msg and "xp.exp(x), not math.exp(x)" in msg and "has_aux=True" in msg, msg
    assert _cut.WINDOW.get() is None  # no window left open by the error


@pytest.mark.parametrize(("f", "what", "kind"), [c[1:] for c in CUT_TO_NUMBER], ids=[c[0] for c in CUT_TO_NUMBER])
def test_a_python_number_as_the_result_raises(backend: Backend, f: Any, what: str, kind: str) -> None:
    with pytest.raises(xg.CutGraphError) as ei:
        xg.grad(f)(_x(backend))
    msg = str(ei.value)
    assert msg.startswith(f"grad: <lambda> returned a Python {kind}, not an array"), msg
    assert f"The graph was cut by {what}" in msg and HERE in msg, msg


def test_the_error_names_the_line_of_the_conversion_and_of_the_function() -> None:
    def helper(v: Any) -> Any:
        return math.log(v)  # the conversion, in a helper the differentiated function calls

    def model(a: Any) -> Any:
        xp = xg.array_namespace(a)
        return xp.asarray(helper(a)) + 1.0

    with pytest.raises(xg.CutGraphError) as ei:
        xg.grad(model)(np.asarray(2.0))
    msg = str(ei.value)
    assert "in helper: return math.log(v)" in msg and "called from" in msg, msg
    assert "in model: return xp.asarray(helper(a)) + 1.0" in msg, msg
    # the hierarchy: a NonDifferentiableError, an XpgradError and a RuntimeError
    assert isinstance(ei.value, xg.NonDifferentiableError)
    assert isinstance(ei.value, xg.XpgradError)
    assert isinstance(ei.value, RuntimeError)


def test_numpy_conversion_of_a_traced_value_raises_at_once(backend: Backend) -> None:
    def f(a: Any) -> Any:
        return _ns(a).asarray(np.sin(np.asarray(a)))  # NumPy computes on a host copy: no gradient

    with pytest.raises(xg.CutGraphError, match=r"^grad: __array__\(\) \(a conversion to NumPy.*inside grad: NumPy "
                                               r"cannot carry the gradient"):
        xg.grad(f)(_x(backend))
    with pytest.raises(xg.CutGraphError, match=r"^vjp: \.numpy\(\) of a traced array"):
        xg.vjp(lambda a: a.numpy(), _x(backend))
    # outside a transform it stays the plain error it was
    t = xg.asarray(np.asarray(1.0), requires_grad=True)
    with pytest.raises(xg.XpgradRuntimeError, match="detach"):
        t.numpy()


def test_vjp_and_jvp_raise(backend: Backend) -> None:
    def f(a: Any) -> Any:
        xp = _ns(a)
        return xp.stack([a * 2.0, xp.asarray([math.exp(a[0])], dtype=a.dtype)])

    x = backend.asarray(np.asarray([0.5]))
    out, pull = xg.vjp(f, x)  # the forward pass is fine
    np.testing.assert_allclose(backend.to_numpy(out), [[1.0], [math.exp(0.5)]])
    pull(backend.asarray(np.ones((2, 1))))  # argument 0 has a path through a * 2: no structural zero
    g = lambda a: _ns(a).asarray(math.exp(a[0]), dtype=a.dtype)
    _, pull = xg.vjp(g, x)
    with pytest.raises(xg.CutGraphError, match=r"^vjp: the gradient of <lambda> with respect to argument 0 would be "):
        pull(backend.asarray(np.asarray(1.0)))
    with pytest.raises(xg.CutGraphError, match=r"^jvp: the tangent of output 0 of <lambda> would be silently zero"):
        xg.jvp(g, (x,), (backend.asarray(np.ones(1)),))
    with pytest.raises(xg.CutGraphError, match=r"^jvp: <lambda> returned a Python float"):
        xg.jvp(lambda a: float(a[0]), (x,), (backend.asarray(np.ones(1)),))


@pytest.mark.parametrize(("transform", "name"), [
    (lambda f: xg.jacrev(f), "jacrev"),
    (lambda f: xg.jacfwd(f), "jacfwd"),
    (lambda f: xg.hessian(lambda a: xg.sum(f(a))), "hessian"),
])
def test_jacobians_and_hessians_name_themselves(backend: Backend, transform: Any, name: str) -> None:
    def f(a: Any) -> Any:
        xp = _ns(a)
        return xp.asarray([math.sin(a[0]), float(a[1]) ** 2])

    with pytest.raises(xg.CutGraphError, match=rf"^{name}: "):
        transform(f)(backend.asarray(np.asarray([0.5, 1.5])))


def test_hvp_and_linearize_name_themselves(backend: Backend) -> None:
    x, t = backend.asarray(np.asarray([0.5])), backend.asarray(np.asarray([1.0]))
    with pytest.raises(xg.CutGraphError, match=r"^hvp: "):
        xg.hvp(lambda a: _ns(a).asarray(math.exp(a[0])), (x,), (t,))
    with pytest.raises(xg.CutGraphError, match=r"^linearize: "):
        xg.linearize(lambda a: _ns(a).asarray([math.exp(a[0])]), x)


def test_only_the_argument_whose_gradient_was_cut_is_named(backend: Backend) -> None:
    def f(a: Any, b: Any) -> Any:
        return b * _ns(b).asarray(float(a))  # d/db is right; d/da is cut

    a, b = _x(backend, 2.0), _x(backend, 3.0)
    gb = xg.grad(f, argnums=1)(a, b)  # a is not differentiated: float(a) is a constant, no error
    assert float(backend.to_numpy(gb)) == 2.0
    with pytest.raises(xg.CutGraphError, match=r"^grad: the gradient of f with respect to argument 0 would be"):
        xg.grad(f, argnums=(0, 1))(a, b)
    with pytest.raises(xg.CutGraphError, match=r"with respect to argument 0 \(leaf 1 of its tree\)"):
        xg.grad(lambda d: d["u"] * _ns(d["u"]).asarray(float(d["v"])))({"u": b, "v": a})


# ====================================================================== what keeps working
def test_logging_and_control_flow_keep_the_right_gradient(backend: Backend) -> None:
    log: list[float] = []

    def f(a: Any) -> Any:
        xp = _ns(a)
        y = xp.sum(a * a)
        log.append(float(y))  # logging a traced value: fine, as in PyTorch
        if float(xp.max(a)) > 0:  # Python control flow on a value: fine
            return y * 3.0
        return y

    x = backend.asarray(np.asarray([1.0, 2.0]))
    np.testing.assert_allclose(backend.to_numpy(xg.grad(f)(x)), [6.0, 12.0])
    assert log == [5.0]
    (v, aux), g = xg.value_and_grad(lambda a: (xg.sum(a * a), float(xg.sum(a))), has_aux=True)(x)  # aux: a number
    assert aux == 3.0 and float(backend.to_numpy(v)) == 5.0
    np.testing.assert_allclose(backend.to_numpy(g), [2.0, 4.0])


def test_constant_functions_and_stop_gradient_give_zeros(backend: Backend) -> None:
    x = backend.asarray(np.asarray([1.0, 2.0]))
    # genuinely constant in the input, nothing converted: zeros, as in JAX
    g = xg.grad(lambda a: _ns(a).sum(_ns(a).ones(2)))(x)
    np.testing.assert_array_equal(backend.to_numpy(g), [0.0, 0.0])
    # a conversion of stop_gradient(x) is a constant on purpose: zeros, no error
    g = xg.grad(lambda a: _ns(a).asarray(math.exp(xg.stop_gradient(a)[0])))(x)
    np.testing.assert_array_equal(backend.to_numpy(g), [0.0, 0.0])
    _, t = xg.jvp(lambda a: _ns(a).asarray(math.exp(xg.stop_gradient(a)[0])), (x,), (x,))
    assert float(backend.to_numpy(t)) == 0.0
    # a conversion of a value that does not depend on the argument: zeros, no error
    g = xg.grad(lambda a, c: xg.sum(a * 0.0) + _ns(c).asarray(float(xg.sum(c))))(x, x)
    np.testing.assert_array_equal(backend.to_numpy(g), [0.0, 0.0])


def test_nested_transforms(backend: Backend) -> None:
    x = _x(backend, 0.5)

    def inner(a: Any) -> Any:
        return _ns(a).asarray(math.exp(a))

    with pytest.raises(xg.CutGraphError, match=r"^grad: the gradient of inner"):
        xg.grad(xg.grad(inner))(x)
    # the inner gradient is right; the outer function turns it into a number
    with pytest.raises(xg.CutGraphError, match=r"^grad: <lambda> returned a Python float"):
        xg.grad(lambda a: float(xg.grad(lambda b: b * b * b)(a)))(x)
    # logging inside the inner function of a second derivative is fine
    seen: list[float] = []

    def cube(a: Any) -> Any:
        seen.append(float(a))
        return a * a * a

    assert float(backend.to_numpy(xg.grad(xg.grad(cube))(x))) == pytest.approx(3.0)
    assert seen == [0.5]


def test_custom_jvp_whose_rule_converts_a_tangent() -> None:
    @xg.custom_jvp
    def h(a: Any) -> Any:
        return a * 2.0

    @h.defjvp
    def h_jvp(p: Any, t: Any) -> Any:
        (a,), (ta,) = p, t
        return h(a), xg.array_namespace(ta).asarray([float(ta[0]) * 2.0])  # the tangent leaves the tape

    x = np.asarray([1.5])
    _, tan = xg.jvp(h, (x,), (np.asarray([1.0]),))  # forward mode gets the value
    np.testing.assert_allclose(tan, 2.0)
    with pytest.raises(xg.CutGraphError, match=r"^custom_jvp h: the gradient of the jvp rule h_jvp with respect to "
                                               r"tangent 0 would be silently zero.*tangent_out must be computed"):
        xg.grad(lambda a: xg.sum(h(a)))(x)


def test_a_training_loop_with_float_logging_is_untouched() -> None:
    # backward() outside the transforms: float(loss) for logging, as every PyTorch loop does
    w = xg.nn.Parameter(xg.asarray(np.asarray([1.0, -2.0])))
    opt = xg.optim.SGD([w], lr=0.1)
    losses = []
    for _ in range(100):
        loss = xg.sum(w * w)
        losses.append(float(loss))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert losses[-1] < 1e-15 < losses[0]
    assert _cut.WINDOW.get() is None
