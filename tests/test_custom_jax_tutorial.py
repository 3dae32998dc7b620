"""JAX's "Custom derivative rules" tutorial, translated to xpgrad.

Every example of https://docs.jax.dev/en/latest/notebooks/Custom_derivative_rules.html
(docs/notebooks/Custom_derivative_rules_for_Python_code.md in jax-ml/jax) except the
vmap/jit/make_jaxpr/plot parts, with ``jnp`` replaced by ``xg``. Each test checks the value
and the derivatives (grad, jvp, and grad of grad where the tutorial shows them) against
JAX itself in float64. Rules that JAX writes as ``return f(x), ...`` call the decorated
function inside their own rule: that evaluates the primal.
"""

from __future__ import annotations

from collections import namedtuple
from functools import partial
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import XpgradTypeError

from ._util import to_numpy


@pytest.fixture(scope="module")
def jax() -> Any:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def close(a: Any, b: Any, **kw: Any) -> None:
    np.testing.assert_allclose(np.asarray(to_numpy(a), dtype=np.float64), np.asarray(b, dtype=np.float64),
                               rtol=kw.pop("rtol", 1e-12), atol=kw.pop("atol", 1e-12), **kw)


# ====================================================================== Summary
def _summary_jvp_f() -> Any:
    @xg.custom_jvp
    def f(x, y):
        return xg.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        x_dot, y_dot = tangents
        primal_out = f(x, y)
        tangent_out = xg.cos(x) * x_dot * y + xg.sin(x) * y_dot
        return primal_out, tangent_out

    return f


def _summary_jvps_f() -> Any:
    @xg.custom_jvp
    def f(x, y):
        return xg.sin(x) * y

    f.defjvps(lambda x_dot, primal_out, x, y: xg.cos(x) * x_dot * y,
              lambda y_dot, primal_out, x, y: xg.sin(x) * y_dot)
    return f


def _summary_vjp_f() -> Any:
    @xg.custom_vjp
    def f(x, y):
        return xg.sin(x) * y

    def f_fwd(x, y):
        return f(x, y), (xg.cos(x), xg.sin(x), y)  # calls f: the primal

    def f_bwd(res, g):
        cos_x, sin_x, y = res
        return (cos_x * g * y, sin_x * g)

    f.defvjp(f_fwd, f_bwd)
    return f


@pytest.mark.parametrize("make", [_summary_jvp_f, _summary_jvps_f], ids=["defjvp", "defjvps"])
def test_summary_custom_jvp(make: Any, jax: Any) -> None:
    jnp = jax.numpy
    f = make()
    close(f(2.0, 3.0), jnp.sin(2.0) * 3.0)
    y, y_dot = xg.jvp(f, (2.0, 3.0), (1.0, 0.0))
    close(y, jnp.sin(2.0) * 3.0)
    close(y_dot, jnp.cos(2.0) * 3.0)  # the tutorial prints -1.2484405
    close(xg.grad(f)(2.0, 3.0), jax.grad(lambda x, y: jnp.sin(x) * y)(2.0, 3.0))
    # higher order: the rule calls f, so it applies at every order
    close(xg.grad(xg.grad(f))(2.0, 3.0), -np.sin(2.0) * 3.0)
    close(xg.grad(f, 1)(2.0, 3.0), np.sin(2.0))


@pytest.mark.parametrize("make", [_summary_jvp_f, _summary_jvps_f], ids=["defjvp", "defjvps"])
def test_summary_custom_jvp_on_backend(make: Any, backend: Any) -> None:
    f = make()
    x = backend.asarray(np.array([0.5, 2.0, -1.0]))
    y = backend.asarray(np.array([3.0, 4.0, 5.0]))
    xn, yn = np.array([0.5, 2.0, -1.0]), np.array([3.0, 4.0, 5.0])
    close(f(x, y), np.sin(xn) * yn)
    gx, gy = xg.grad(lambda a, b: xg.sum(f(a, b)), (0, 1))(x, y)
    close(gx, np.cos(xn) * yn)
    close(gy, np.sin(xn))
    out, tan = xg.jvp(f, (x, y), (xg.ones_like(x), xg.zeros_like(y)))
    close(out, np.sin(xn) * yn)
    close(tan, np.cos(xn) * yn)


def test_summary_custom_vjp_fwd_calls_f(jax: Any) -> None:
    # the example: f called inside its own fwd rule was a RecursionError
    jnp = jax.numpy
    f = _summary_vjp_f()
    ref = jax.grad(lambda x, y: jnp.sin(x) * y)
    close(xg.grad(f)(2.0, 3.0), ref(2.0, 3.0))
    close(xg.grad(f)(3.0, 4.0), ref(3.0, 4.0))
    close(xg.grad(f, 1)(3.0, 4.0), jnp.sin(3.0))
    # bwd is differentiable (its residuals keep their history)
    close(xg.grad(xg.grad(f))(3.0, 4.0), jax.grad(jax.grad(lambda x, y: jnp.sin(x) * y))(3.0, 4.0))


def test_summary_custom_vjp_on_backend(backend: Any) -> None:
    f = _summary_vjp_f()
    xn, yn = np.array([0.5, 2.0, -1.0]), np.array([3.0, 4.0, 5.0])
    x, y = backend.asarray(xn), backend.asarray(yn)
    close(f(x, y), np.sin(xn) * yn)
    gx, gy = xg.grad(lambda a, b: xg.sum(f(a, b)), (0, 1))(x, y)
    close(gx, np.cos(xn) * yn)
    close(gy, np.sin(xn))


# ====================================================================== Numerical stability
def _log1pexp_defjvp() -> Any:
    @xg.custom_jvp
    def log1pexp(x):
        return xg.log(1.0 + xg.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = log1pexp(x)
        ans_dot = (1 - 1 / (1 + xg.exp(x))) * x_dot
        return ans, ans_dot

    return log1pexp


def _log1pexp_defjvps() -> Any:
    @xg.custom_jvp
    def log1pexp(x):
        return xg.log(1.0 + xg.exp(x))

    log1pexp.defjvps(lambda t, ans, x: (1 - 1 / (1 + xg.exp(x))) * t)
    return log1pexp


def test_log1pexp_plain_is_unstable() -> None:
    def log1pexp(x):
        return xg.log(1.0 + xg.exp(x))

    close(log1pexp(3.0), np.log1p(np.exp(3.0)))
    with np.errstate(all="ignore"):
        # the tutorial's nan (0 * inf) comes at x=100 in float32, at x=1000 in float64
        assert np.isnan(xg.grad(log1pexp)(1000.0))


@pytest.mark.parametrize("make", [_log1pexp_defjvp, _log1pexp_defjvps], ids=["defjvp", "defjvps"])
def test_log1pexp(make: Any, jax: Any) -> None:
    log1pexp = make()
    close(xg.grad(log1pexp)(100.0), 1.0)  # the tutorial prints 1.0, not nan
    with np.errstate(all="ignore"):
        close(xg.grad(log1pexp)(1000.0), 1.0)
    close(log1pexp(3.0), jax.nn.softplus(3.0))  # the tutorial prints 3.0485873 (float32)
    close(xg.grad(log1pexp)(3.0), jax.nn.sigmoid(3.0))
    close(xg.jvp(log1pexp, (3.0,), (2.0,))[1], 2 * jax.nn.sigmoid(3.0))
    close(xg.grad(xg.grad(log1pexp))(3.0), jax.grad(jax.nn.sigmoid)(3.0))


@pytest.mark.parametrize("make", [_log1pexp_defjvp, _log1pexp_defjvps], ids=["defjvp", "defjvps"])
def test_log1pexp_on_backend(make: Any, backend: Any) -> None:
    log1pexp = make()
    xn = np.array([0.0, 1.0, 2.0, 100.0])
    x = backend.asarray(xn)
    g = xg.grad(lambda a: xg.sum(log1pexp(a)))(x)
    close(g, 1 / (1 + np.exp(-xn)))  # the tutorial's [0.5, 0.7310586, 0.8807971] and 1.0 at 100
    assert np.isfinite(to_numpy(g)).all()


# ====================================================================== A differentiation convention
def test_convention_at_zero() -> None:
    def f_plain(x):
        return x / (1 + xg.sqrt(x))

    with np.errstate(all="ignore"):
        assert np.isnan(xg.grad(f_plain)(0.0))

    @xg.custom_jvp
    def f(x):
        return x / (1 + xg.sqrt(x))

    @f.defjvp
    def f_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = f(x)
        ans_dot = ((xg.sqrt(x) + 2) / (2 * (xg.sqrt(x) + 1) ** 2)) * x_dot
        return ans, ans_dot

    close(xg.grad(f)(0.0), 1.0)

    @xg.custom_jvp
    def f2(x):
        return x / (1 + xg.sqrt(x))

    f2.defjvps(lambda t, ans, x: ((xg.sqrt(x) + 2) / (2 * (xg.sqrt(x) + 1) ** 2)) * t)
    close(xg.grad(f2)(0.0), 1.0)
    close(xg.grad(f2)(4.0), 4 / 18)


# ====================================================================== Gradient clipping
def _clip_gradient() -> Any:
    @xg.custom_vjp
    def clip_gradient(lo, hi, x):
        return x  # identity function

    def clip_gradient_fwd(lo, hi, x):
        return x, (lo, hi)  # save bounds as residuals

    def clip_gradient_bwd(res, g):
        lo, hi = res
        return (None, None, xg.clip(g, lo, hi))  # None: zero cotangents for lo and hi

    clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)
    return clip_gradient


def test_clip_gradient(backend: Any, jax: Any) -> None:
    clip_gradient = _clip_gradient()

    def clip_sin(x):
        x = clip_gradient(-0.75, 0.75, x)
        return xg.sin(x)

    tn = np.linspace(0, 10, 1000)
    t = backend.asarray(tn)
    close(clip_sin(t), np.sin(tn))
    g = xg.grad(lambda a: xg.sum(clip_sin(a)))(t)
    # JAX: vmap(grad(clip_sin))(t), with JAX's own custom_vjp
    jnp = jax.numpy

    @jax.custom_vjp
    def jclip(lo, hi, x):
        return x

    jclip.defvjp(lambda lo, hi, x: (x, (lo, hi)), lambda res, g: (None, None, jnp.clip(g, *res)))
    ref = jax.vmap(jax.grad(lambda x: jnp.sin(jclip(-0.75, 0.75, x))))(jnp.asarray(tn))
    close(g, ref)
    assert np.abs(to_numpy(g)).max() == 0.75


# ====================================================================== Implicit differentiation
def _fixed_point() -> Any:
    @partial(xg.custom_vjp, nondiff_argnums=(0,))
    def fixed_point(f, a, x_guess):
        # the tutorial's lax.while_loop, as a Python loop (xpgrad runs eagerly)
        x_prev, x = x_guess, f(a, x_guess)
        while xg.abs(x_prev - x) > 1e-6:
            x_prev, x = x, f(a, x)
        return x

    def fixed_point_fwd(f, a, x_init):
        x_star = fixed_point(f, a, x_init)
        return x_star, (a, x_star)

    def fixed_point_rev(f, res, x_star_bar):
        a, x_star = res
        _, vjp_a = xg.vjp(lambda a: f(a, x_star), a)
        a_bar, = vjp_a(fixed_point(partial(rev_iter, f), (a, x_star, x_star_bar), x_star_bar))
        return a_bar, xg.zeros_like(x_star)

    def rev_iter(f, packed, u):
        a, x_star, x_star_bar = packed
        _, vjp_x = xg.vjp(lambda x: f(a, x), x_star)
        return x_star_bar + vjp_x(u)[0]

    fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)
    return fixed_point


def test_fixed_point_newton_sqrt(jax: Any) -> None:
    fixed_point = _fixed_point()

    def newton_sqrt(a):
        def update(a, x):
            return 0.5 * (x + a / x)

        return fixed_point(update, a, a)

    jnp = jax.numpy
    close(newton_sqrt(2.0), np.sqrt(2.0))
    close(xg.grad(newton_sqrt)(2.0), jax.grad(jnp.sqrt)(2.0), rtol=1e-9)  # 0.35355338
    close(xg.grad(xg.grad(newton_sqrt))(2.0), jax.grad(jax.grad(jnp.sqrt))(2.0), rtol=1e-9)  # -0.08838835
    close(xg.grad(newton_sqrt)(9.0), 1 / 6, rtol=1e-9)


# ====================================================================== Basic custom_jvp
def test_custom_jvp_basic(jax: Any) -> None:
    @xg.custom_jvp
    def f(x):
        return xg.sin(x)

    def f_jvp(primals, tangents):
        x, = primals
        t, = tangents
        return f(x), xg.cos(x) * t

    f.defjvp(f_jvp)
    close(f(3.0), np.sin(3.0))
    y, y_dot = xg.jvp(f, (3.0,), (1.0,))
    close(y, np.sin(3.0))
    close(y_dot, np.cos(3.0))
    close(xg.grad(f)(3.0), jax.grad(jax.numpy.sin)(3.0))
    close(xg.grad(xg.grad(f))(3.0), jax.grad(jax.grad(jax.numpy.sin))(3.0))

    @xg.custom_jvp
    def g(x):
        return xg.sin(x)

    g.defjvps(lambda t, ans, x: xg.cos(x) * t)
    close(xg.grad(g)(3.0), np.cos(3.0))


def test_custom_jvp_multiple_args() -> None:
    @xg.custom_jvp
    def f(x, y):
        return x ** 2 * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        x_dot, y_dot = tangents
        primal_out = f(x, y)
        tangent_out = 2 * x * y * x_dot + x ** 2 * y_dot
        return primal_out, tangent_out

    close(xg.grad(f)(2.0, 3.0), 12.0)

    @xg.custom_jvp
    def f2(x, y):
        return x ** 2 * y

    f2.defjvps(lambda x_dot, primal_out, x, y: 2 * x * y * x_dot,
               lambda y_dot, primal_out, x, y: x ** 2 * y_dot)
    close(xg.grad(f2)(2.0, 3.0), 12.0)
    close(xg.grad(f2, 0)(2.0, 3.0), 12.0)
    close(xg.grad(f2, 1)(2.0, 3.0), 4.0)
    close(xg.jvp(f2, (2.0, 3.0), (1.0, 1.0))[1], 16.0)

    @xg.custom_jvp
    def f3(x, y):
        return x ** 2 * y

    f3.defjvps(lambda x_dot, primal_out, x, y: 2 * x * y * x_dot, None)  # None: zero for y
    close(xg.grad(f3)(2.0, 3.0), 12.0)
    close(xg.grad(f3, 0)(2.0, 3.0), 12.0)
    close(xg.grad(f3, 1)(2.0, 3.0), 0.0)


def test_custom_jvp_calls() -> None:
    calls: list[str] = []

    @xg.custom_jvp
    def f(x):
        calls.append("f")
        return xg.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        calls.append("f_jvp")
        x, = primals
        t, = tangents
        return f(x), xg.cos(x) * t

    close(f(3.0), np.sin(3.0))
    assert calls == ["f"]  # not differentiated: f alone
    calls.clear()
    _, y_dot = xg.jvp(f, (3.0,), (1.0,))
    close(y_dot, np.cos(3.0))
    assert "f_jvp" in calls
    calls.clear()
    close(xg.grad(f)(3.0), np.cos(3.0))
    assert "f_jvp" in calls  # reverse mode transposes the rule
    close(xg.grad(xg.grad(f))(3.0), -np.sin(3.0))


def test_custom_jvp_control_flow() -> None:
    @xg.custom_jvp
    def f(x):
        if x > 0:
            return xg.sin(x)
        return xg.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = f(x)
        if x > 0:
            return ans, 2 * x_dot
        return ans, 3 * x_dot

    close(xg.grad(f)(1.0), 2.0)
    close(xg.grad(f)(-1.0), 3.0)


# ====================================================================== Basic custom_vjp
def test_custom_vjp_basic_and_calls() -> None:
    calls: list[str] = []

    @xg.custom_vjp
    def f(x):
        calls.append("f")
        return xg.sin(x)

    def f_fwd(x):
        calls.append("f_fwd")
        return f(x), xg.cos(x)

    def f_bwd(cos_x, y_bar):
        calls.append("f_bwd")
        return (cos_x * y_bar,)

    f.defvjp(f_fwd, f_bwd)
    close(f(3.0), np.sin(3.0))
    assert calls == ["f"]
    calls.clear()
    close(xg.grad(f)(3.0), np.cos(3.0))
    assert calls == ["f_fwd", "f", "f_bwd"]  # f runs once, called by f_fwd
    calls.clear()
    y, f_vjp = xg.vjp(f, 3.0)
    close(y, np.sin(3.0))
    assert calls == ["f_fwd", "f"]
    (ct,) = f_vjp(1.0)
    close(ct, np.cos(3.0))
    assert calls == ["f_fwd", "f", "f_bwd"]
    # JAX refuses jvp of a custom_vjp function; xpgrad differentiates fwd's own operations
    # (here the primal f, called by fwd, and cos), which gives the true derivative
    close(xg.jvp(f, (3.0,), (1.0,))[1], np.cos(3.0))


def test_custom_vjp_debug_identity() -> None:
    seen: list[Any] = []

    @xg.custom_vjp
    def debug(x):
        return x  # acts like identity

    def debug_fwd(x):
        return x, x

    def debug_bwd(x, g):
        seen.append((to_numpy(x), to_numpy(g)))  # the tutorial's pdb.set_trace()
        return (g,)  # JAX too requires a tuple here

    debug.defvjp(debug_fwd, debug_bwd)

    def foo(x):
        y = x ** 2
        y = debug(y)
        return xg.sin(y)

    close(xg.grad(foo)(3.0), np.cos(9.0) * 6.0)
    (x, g), = seen
    close(x, 9.0)
    close(g, np.cos(9.0))  # the tutorial's -0.91113025


# ====================================================================== pytrees
Point = namedtuple("Point", ["x", "y"])


def test_pytrees_custom_jvp(jax: Any) -> None:
    @xg.custom_jvp
    def f(pt):
        x, y = pt.x, pt.y
        return {"a": x ** 2, "b": (xg.sin(x), xg.cos(y))}

    @f.defjvp
    def f_jvp(primals, tangents):
        pt, = primals
        pt_dot, = tangents
        ans = f(pt)
        ans_dot = {"a": 2 * pt.x * pt_dot.x,
                   "b": (xg.cos(pt.x) * pt_dot.x, -xg.sin(pt.y) * pt_dot.y)}
        return ans, ans_dot

    def fun(pt):
        dct = f(pt)
        return dct["a"] + dct["b"][0]

    pt = Point(1.0, 2.0)
    out = f(pt)
    close(out["a"], 1.0)
    close(out["b"][0], np.sin(1.0))
    close(out["b"][1], np.cos(2.0))
    g = xg.grad(fun)(pt)
    assert isinstance(g, Point)
    close(g.x, 2 + np.cos(1.0))  # the tutorial's Point(x=2.5403023, y=0.0)
    close(g.y, 0.0)
    _, tan = xg.jvp(f, (pt,), (Point(1.0, 1.0),))
    close(tan["a"], 2.0)
    close(tan["b"][1], -np.sin(2.0))
    jref = jax.grad(lambda p: p.x ** 2 + jax.numpy.sin(p.x))(Point(1.0, 2.0))
    close(g.x, jref.x)


def test_pytrees_custom_vjp() -> None:
    @xg.custom_vjp
    def f(pt):
        x, y = pt.x, pt.y
        return {"a": x ** 2, "b": (xg.sin(x), xg.cos(y))}

    def f_fwd(pt):
        return f(pt), pt  # a namedtuple as the residuals

    def f_bwd(pt, g):
        a_bar, (b0_bar, b1_bar) = g["a"], g["b"]
        x_bar = 2 * pt.x * a_bar + xg.cos(pt.x) * b0_bar
        y_bar = -xg.sin(pt.y) * b1_bar
        return (Point(x_bar, y_bar),)

    f.defvjp(f_fwd, f_bwd)

    def fun(pt):
        dct = f(pt)
        return dct["a"] + dct["b"][0]

    pt = Point(1.0, 2.0)
    close(f(pt)["b"][1], np.cos(2.0))
    g = xg.grad(fun)(pt)
    assert isinstance(g, Point)
    close(g.x, 2 + np.cos(1.0))
    close(g.y, 0.0)
    # every output used: y gets its cotangent
    g2 = xg.grad(lambda p: f(p)["b"][1])(pt)
    close(g2.y, -np.sin(2.0))


def test_pytree_residuals_on_backend(backend: Any) -> None:
    @xg.custom_vjp
    def f(x, y):
        return xg.sin(x) * y

    def f_fwd(x, y):
        return f(x, y), {"trig": (xg.cos(x), xg.sin(x)), "y": [y]}

    def f_bwd(res, g):
        cos_x, sin_x = res["trig"]
        (y,) = res["y"]
        return (cos_x * g * y, sin_x * g)

    f.defvjp(f_fwd, f_bwd)
    xn, yn = np.array([0.5, 2.0]), np.array([3.0, 4.0])
    gx, gy = xg.grad(lambda a, b: xg.sum(f(a, b)), (0, 1))(backend.asarray(xn), backend.asarray(yn))
    close(gx, np.cos(xn) * yn)
    close(gy, np.sin(xn))


# ====================================================================== nondiff_argnums
def test_nondiff_argnums_custom_jvp() -> None:
    @partial(xg.custom_jvp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    @app.defjvp
    def app_jvp(f, primals, tangents):
        x, = primals
        x_dot, = tangents
        return f(x), 2.0 * x_dot

    close(app(lambda x: x ** 3, 3.0), 27.0)
    close(xg.grad(app, 1)(lambda x: x ** 3, 3.0), 2.0)
    close(xg.jvp(lambda x: app(lambda v: v ** 3, x), (3.0,), (1.0,))[1], 2.0)

    @partial(xg.custom_jvp, nondiff_argnums=(0, 2))
    def app2(f, x, g):
        return f(g(x))

    @app2.defjvp
    def app2_jvp(f, g, primals, tangents):  # the nondiff arguments come first
        x, = primals
        x_dot, = tangents
        return f(g(x)), 3.0 * x_dot

    close(app2(lambda x: x ** 3, 3.0, lambda y: 5 * y), 3375.0)
    close(xg.grad(app2, 1)(lambda x: x ** 3, 3.0, lambda y: 5 * y), 3.0)


def test_nondiff_argnums_custom_vjp() -> None:
    @partial(xg.custom_vjp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)

    def app_fwd(f, x):
        return f(x), x

    def app_bwd(f, x, g):
        return (5 * g,)

    app.defvjp(app_fwd, app_bwd)
    close(app(lambda x: x ** 2, 4.0), 16.0)
    close(xg.grad(app, 1)(lambda x: x ** 2, 4.0), 5.0)


def test_nondiff_argnums_refuses_traced_arrays() -> None:
    @partial(xg.custom_vjp, nondiff_argnums=(0,))
    def f(a, x):
        return a * x

    f.defvjp(lambda a, x: (a * x, a), lambda a, res, g: (a * g,))
    with pytest.raises(XpgradTypeError, match=r"custom_vjp f: argument 0 is in nondiff_argnums"):
        xg.grad(f, 0)(2.0, 3.0)
    close(xg.grad(f, 1)(2.0, 3.0), 2.0)

    @partial(xg.custom_jvp, nondiff_argnums=(0,))
    def h(a, x):
        return a * x

    with pytest.raises(XpgradTypeError, match=r"defjvps cannot be used with nondiff_argnums"):
        h.defjvps(lambda t, ans, x: t)


# ====================================================================== custom_jvp inside custom_vjp
def test_custom_jvp_inside_custom_vjp(jax: Any) -> None:
    log1pexp = _log1pexp_defjvp()

    @xg.custom_vjp
    def softplus_scaled(x, s):
        return log1pexp(x) * s

    def fwd(x, s):
        return softplus_scaled(x, s), (x, s, log1pexp(x))

    def bwd(res, g):
        x, s, lx = res
        return (xg.grad(log1pexp)(x) * s * g, lx * g)  # the custom_jvp rule, differentiated in bwd

    softplus_scaled.defvjp(fwd, bwd)
    jnp = jax.numpy

    def ref(x, s):
        return jnp.logaddexp(0.0, x) * s

    close(softplus_scaled(1.5, 2.0), ref(1.5, 2.0))
    close(xg.grad(softplus_scaled)(1.5, 2.0), jax.grad(ref)(1.5, 2.0))
    close(xg.grad(softplus_scaled, 1)(1.5, 2.0), jax.grad(ref, 1)(1.5, 2.0))
    close(xg.grad(softplus_scaled)(100.0, 2.0), 2.0)  # the stable rule, through both
    close(xg.grad(xg.grad(softplus_scaled))(1.5, 2.0), jax.grad(jax.grad(ref))(1.5, 2.0))


# ====================================================================== keyword arguments
def test_keyword_arguments_are_resolved_to_positions(backend: Any) -> None:
    """As JAX: a call with keywords (and defaults) reaches the rules positionally."""

    @xg.custom_vjp
    def scaled(x, y, scale=2.0):
        return xg.sin(x) * y * scale

    def fwd(x, y, scale):
        return scaled(x, y, scale), (xg.cos(x), xg.sin(x), y, scale)

    def bwd(res, g):
        cos_x, sin_x, y, scale = res
        return (cos_x * g * y * scale, sin_x * g * scale, None)

    scaled.defvjp(fwd, bwd)

    @xg.custom_jvp
    def cube(x, power=3.0):
        return x ** power

    @cube.defjvp
    def cube_jvp(primals, tangents):
        (x, power), (t, _) = primals, tangents
        return cube(x, power), power * x ** (power - 1.0) * t

    x = xg.asarray(backend.asarray(np.array([0.3, 0.7])))
    y = xg.asarray(backend.asarray(np.array([2.0, -1.0])))
    loss = lambda x, y: xg.sum(scaled(x, y=y)) + xg.sum(scaled(x=x, y=y, scale=0.5))
    gx, gy = xg.grad(loss, argnums=(0, 1))(x, y)
    xn, yn = np.array([0.3, 0.7]), np.array([2.0, -1.0])
    np.testing.assert_allclose(to_numpy(gx), np.cos(xn) * yn * 2.5, rtol=1e-12)
    np.testing.assert_allclose(to_numpy(gy), np.sin(xn) * 2.5, rtol=1e-12)
    g = xg.grad(lambda x: xg.sum(cube(x=x)) + xg.sum(cube(x, power=2.0)))(x)
    np.testing.assert_allclose(to_numpy(g), 3 * xn ** 2 + 2 * xn, rtol=1e-12)


def test_keywords_that_cannot_be_positions_are_refused() -> None:
    @xg.custom_vjp
    def f(x, **options):
        return x * 2.0

    f.defvjp(lambda x, **o: (f(x), None), lambda res, g: (g * 2.0,))
    with pytest.raises(XpgradTypeError, match=r"custom_vjp f: keyword arguments \['scale'\] could not be resolved to positions"):
        f(xg.asarray([1.0]), scale=3.0)

    @xg.custom_jvp
    def h(x):
        return x

    h.defjvp(lambda p, t: (p[0], t[0]))
    with pytest.raises(XpgradTypeError, match=r"custom_jvp h: .*unexpected keyword argument 'y'"):
        h(xg.asarray([1.0]), y=2.0)
