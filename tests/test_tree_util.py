"""xg.tree_util: one pytree module (jax.tree_util's names and rules) under every transform.

The API is checked against jax.tree_util itself; then OrderedDict, namedtuple,
defaultdict, None, a registered dataclass and a registered custom node go through
grad, jit, jit(grad), vmap, jacrev, hessian, custom_vjp, checkpoint and save/load on
every backend, each keeping its type. Also: a jitted function returning an object jit
cannot flatten (issue 28, item 8), repeated argnums (item 13) and the options' errors.
"""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import tree_util as tu

from ._util import to_numpy

Point = collections.namedtuple("Point", ["x", "y"])


@tu.register_dataclass
@dataclasses.dataclass
class Params:
    w: Any
    b: Any
    name: str = dataclasses.field(default="lin", metadata={"static": True})


class Pair:
    """A custom container, registered with register_pytree_node."""

    def __init__(self, first: Any, second: Any, tag: str = "p") -> None:
        self.first, self.second, self.tag = first, second, tag


tu.register_pytree_node(Pair, lambda p: ((p.first, p.second), p.tag), lambda tag, c: Pair(*c, tag=tag))


@dataclasses.dataclass
class Unregistered:
    w: Any
    b: Any


def _trees(a: Any, b: Any, c: Any) -> list[Any]:
    """One tree per container kind, with leaves a, b, c."""
    dd = collections.defaultdict(list)
    dd["z"] = a
    dd["y"] = (b, c)
    return [
        collections.OrderedDict([("z", a), ("a", (b, None)), ("m", c)]),
        Point(a, [b, c]),
        dd,
        {"k": a, "none": None, "n": (b, {"c": c})},
        Params(w=a, b=(b, c), name="layer"),
        Pair(a, Pair(b, c, tag="in"), tag="out"),
    ]


def _same_type(got: Any, want: Any, order: bool = True) -> None:
    """``got`` has ``want``'s structure, container types and static parts (and, with ``order``,
    its dicts' key order: jax rebuilds a dict in sorted key order, xpgrad in its own order)."""
    assert tu.tree_structure(got) == tu.tree_structure(want), (tu.tree_structure(got), tu.tree_structure(want))
    assert type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want) if order or type(want) is collections.OrderedDict else set(got) == set(want)
    if isinstance(want, Params):
        assert got.name == want.name
    if isinstance(want, Pair):
        assert got.tag == want.tag and type(got.second) is Pair and got.second.tag == want.second.tag


def _sq_loss(tree: Any) -> Any:
    """sum of leaf ** 2 over every leaf: its gradient is 2 * leaf."""
    return sum(xg.sum(leaf * leaf) for leaf in tu.tree_leaves(tree))


# ====================================================================== the API, against jax.tree_util
def _jax_registered() -> Any:
    jtu = pytest.importorskip("jax").tree_util
    if not getattr(_jax_registered, "done", False):
        jtu.register_dataclass(Params)
        jtu.register_pytree_node(Pair, lambda p: ((p.first, p.second), p.tag), lambda tag, c: Pair(*c, tag=tag))
        _jax_registered.done = True  # type: ignore[attr-defined]
    return jtu


@pytest.mark.parametrize("k", range(6))
def test_flatten_leaves_and_unflatten_agree_with_jax(k: int) -> None:
    jtu = _jax_registered()
    tree = _trees(1, 2.5, "s")[k]
    leaves, treedef = tu.tree_flatten(tree)
    jleaves, jdef = jtu.tree_flatten(tree)
    assert leaves == jleaves
    assert tu.tree_leaves(tree) == jtu.tree_leaves(tree)
    assert treedef.num_leaves == jdef.num_leaves == tu.tree_structure(tree).num_leaves
    back = tu.tree_unflatten(treedef, [10 * x if not isinstance(x, str) else x for x in leaves])
    jback = jtu.tree_unflatten(jdef, [10 * x if not isinstance(x, str) else x for x in jleaves])
    _same_type(back, jback, order=False)
    _same_type(back, tree)
    assert tu.tree_leaves(back) == jtu.tree_leaves(jback)


def test_tree_map_and_none_agree_with_jax() -> None:
    jtu = _jax_registered()
    for tree in _trees(1, 2, 3):
        got = tu.tree_map(lambda x, y: x * 100 + y, tree, tu.tree_map(lambda x: x + 1, tree))
        want = jtu.tree_map(lambda x, y: x * 100 + y, tree, jtu.tree_map(lambda x: x + 1, tree))
        _same_type(got, want, order=False)
        _same_type(got, tree)
        assert tu.tree_leaves(got) == jtu.tree_leaves(want)
    assert tu.tree_leaves(None) == jtu.tree_leaves(None) == []
    assert tu.tree_leaves([None, (None,)]) == []
    # a prefix tree in rest: its leaf stands for the whole subtree (jax's rule)
    assert tu.tree_map(lambda x, y: (x, y), [1, 2], [3, 4]) == jtu.tree_map(lambda x, y: (x, y), [1, 2], [3, 4])
    # is_leaf stops the descent
    assert tu.tree_leaves([(1, 2), 3], is_leaf=lambda t: isinstance(t, tuple)) == [(1, 2), 3]
    # dicts flatten in sorted key order (as jax) and rebuild in their own order
    assert tu.tree_leaves({"b": 1, "a": 2}) == jtu.tree_leaves({"b": 1, "a": 2}) == [2, 1]
    assert list(tu.tree_map(lambda x: x, {"b": 1, "a": 2})) == ["b", "a"]


def test_registration_errors() -> None:
    class NotADataclass:
        pass

    with pytest.raises(xg.XpgradTypeError, match="register_dataclass: NotADataclass is not a dataclass"):
        tu.register_dataclass(NotADataclass)

    @dataclasses.dataclass
    class Partial:
        a: Any
        b: Any

    with pytest.raises(xg.XpgradValueError, match=r"register_dataclass: the fields \['b'\] of Partial"):
        tu.register_dataclass(Partial, data_fields=["a"], meta_fields=[])
    with pytest.raises(xg.XpgradValueError, match="register_pytree_node: Pair"):
        tu.register_pytree_node(Pair, lambda p: ((), None), lambda a, c: Pair(1, 2))
    with pytest.raises(xg.XpgradTypeError, match="register_pytree_node: expected a class"):
        tu.register_pytree_node(3, lambda p: ((), None), lambda a, c: None)  # type: ignore[arg-type]
    with pytest.raises(xg.XpgradTypeError, match="tree_unflatten: expected a treedef"):
        tu.tree_unflatten([1], [2])  # type: ignore[arg-type]


# ====================================================================== through the transforms
def _arrays(backend: Any, n: int = 3, seed: int = 0) -> list[Any]:
    rng = np.random.default_rng(seed)
    return [backend.asarray(rng.standard_normal(2 + i)) for i in range(n)]


def _check_grad(g: Any, tree: Any) -> None:
    _same_type(g, tree)
    for gl, x in zip(tu.tree_leaves(g), tu.tree_leaves(tree), strict=True):
        assert type(gl) is type(x)
        np.testing.assert_allclose(to_numpy(gl), 2 * to_numpy(x), rtol=1e-12)


@pytest.mark.parametrize("k", range(6))
def test_grad_keeps_every_container(backend: Any, k: int) -> None:
    tree = _trees(*_arrays(backend))[k]
    _check_grad(xg.grad(_sq_loss)(tree), tree)
    v, g = xg.value_and_grad(_sq_loss)(tree)
    _check_grad(g, tree)
    np.testing.assert_allclose(to_numpy(v), sum(float(np.sum(to_numpy(x) ** 2)) for x in tu.tree_leaves(tree)))
    (g2,) = xg.vjp(_sq_loss, tree)[1](backend.asarray(np.array(1.0)))
    _check_grad(g2, tree)


@pytest.mark.parametrize("k", range(6))
def test_jit_of_grad_keeps_every_container_and_replays_fresh_values(backend: Any, k: int) -> None:
    step = xg.jit(xg.grad(_sq_loss))
    ident = xg.jit(lambda t: tu.tree_map(lambda x: x * 1.0, t))
    for seed in range(3):
        tree = _trees(*_arrays(backend, seed=seed))[k]
        _check_grad(step(tree), tree)
        out = ident(tree)
        _same_type(out, tree)
        for o, x in zip(tu.tree_leaves(out), tu.tree_leaves(tree), strict=True):
            np.testing.assert_array_equal(to_numpy(o), to_numpy(x))
    assert step.cache_info().traces == 1 and ident.cache_info().traces == 1


def test_vmap_maps_containers_with_prefix_axes(backend: Any) -> None:
    a, c = (backend.asarray(np.arange(12.0).reshape(3, 4) + i) for i in range(2))
    b = backend.asarray(np.arange(12.0).reshape(4, 3) - 1.0)
    tree = collections.OrderedDict([("z", a), ("a", Params(w=b, b=c))])
    spec = collections.OrderedDict([("z", 0), ("a", Params(w=1, b=None))])
    out = xg.vmap(lambda t: Point(t["z"] * 2.0, t["a"].w + xg.sum(t["a"].b)), in_axes=(spec,))(tree)
    assert type(out) is Point
    np.testing.assert_allclose(to_numpy(out.x), 2 * to_numpy(a))
    want = to_numpy(b).T + to_numpy(c).sum()
    np.testing.assert_allclose(to_numpy(out.y), want)
    # out_axes as a tree prefix of a registered dataclass
    res = xg.vmap(lambda x: Params(w=x, b=x * 2.0), out_axes=Params(w=1, b=0))(a)
    assert type(res) is Params
    np.testing.assert_allclose(to_numpy(res.w), to_numpy(a).T)
    np.testing.assert_allclose(to_numpy(res.b), 2 * to_numpy(a))
    # None in the arguments is an empty container: nothing to map
    r = xg.vmap(lambda t: t[0] * 3.0)((a, None))
    np.testing.assert_allclose(to_numpy(r), 3 * to_numpy(a))
    with pytest.raises(xg.XpgradValueError, match="vmap: in_axes must match the structure of argument 0"):
        xg.vmap(lambda t: t["z"], in_axes=({"z": 0},))(tree)


def test_jacrev_and_hessian_keep_containers(backend: Any) -> None:
    w, b = backend.asarray(np.array([1.0, 2.0])), backend.asarray(np.array([3.0, -1.0]))
    p = Params(w=w, b=b, name="x")
    jac = xg.jacrev(lambda q: q.w * q.b)(p)
    assert type(jac) is Params and jac.name == "x"
    np.testing.assert_allclose(to_numpy(jac.w), np.diag(to_numpy(b)))
    np.testing.assert_allclose(to_numpy(jac.b), np.diag(to_numpy(w)))
    d = collections.OrderedDict([("w", w), ("b", b)])
    h = xg.hessian(lambda t: xg.sum(t["w"] ** 3 * t["b"]))(d)
    assert type(h) is collections.OrderedDict and list(h) == ["w", "b"]
    assert type(h["w"]) is collections.OrderedDict and list(h["w"]) == ["w", "b"]
    np.testing.assert_allclose(to_numpy(h["w"]["w"]), np.diag(6 * to_numpy(w) * to_numpy(b)))
    np.testing.assert_allclose(to_numpy(h["w"]["b"]), np.diag(3 * to_numpy(w) ** 2))
    np.testing.assert_allclose(to_numpy(h["b"]["b"]), np.zeros((2, 2)))
    jf = xg.jacfwd(lambda q: Point(q.first * 2.0, q.second))(Pair(w, b))
    assert type(jf) is Point and type(jf.x) is Pair
    np.testing.assert_allclose(to_numpy(jf.x.first), 2 * np.eye(2))
    np.testing.assert_allclose(to_numpy(jf.y.second), np.eye(2))


def test_custom_vjp_takes_and_returns_containers(backend: Any) -> None:
    @xg.custom_vjp
    def f(p: Params) -> Any:
        return Point(p.w * p.b, p.w)

    def fwd(p: Params) -> Any:
        return f(p), p

    def bwd(p: Params, g: Point) -> Any:
        assert type(g) is Point
        return (Params(w=g.x * p.b * 10.0 + g.y, b=g.x * p.w, name=p.name),)

    f.defvjp(fwd, bwd)
    w, b = backend.asarray(np.array([1.0, 2.0])), backend.asarray(np.array([3.0, 4.0]))
    g = xg.grad(lambda p: xg.sum(f(p).x) + xg.sum(f(p).y))(Params(w=w, b=b))
    assert type(g) is Params
    # (two calls: the first pulls back g = Point(1, 0), the second Point(0, 1))
    np.testing.assert_allclose(to_numpy(g.w), 10 * to_numpy(b) + 1)
    np.testing.assert_allclose(to_numpy(g.b), to_numpy(w))


def test_checkpoint_keeps_containers(backend: Any) -> None:
    def block(t: Any) -> Any:
        return Point(xg.sin(t["a"].first) * t["a"].second, None)

    a, b = backend.asarray(np.array([0.3, 1.0])), backend.asarray(np.array([2.0, -1.0]))
    tree = collections.OrderedDict([("a", Pair(a, b))])
    outs = []
    for wrap in (xg.checkpoint, lambda fn: fn):
        outs.append(xg.grad(lambda t, w=wrap: xg.sum(w(block)(t).x))(tree))
    got, want = outs
    _same_type(got, tree)
    for x, y in zip(tu.tree_leaves(got), tu.tree_leaves(want), strict=True):
        np.testing.assert_allclose(to_numpy(x), to_numpy(y), rtol=1e-12)
    np.testing.assert_allclose(to_numpy(got["a"].first), np.cos(to_numpy(a)) * to_numpy(b))


def test_save_load_round_trips_ordered_dicts(backend: Any, tmp_path: Path) -> None:
    model = xg.nn.Sequential(xg.nn.Linear(3, 2), xg.nn.Linear(2, 1))
    sd = model.state_dict()
    nested = collections.OrderedDict([("z", sd), ("a", {"step": 3, "p": Point(1, 2)})])
    for k, obj in enumerate((sd, nested)):
        path = tmp_path / f"m{k}.safetensors"
        xg.save(obj, path)
        with backend.policy():
            back = xg.load(path)
        assert type(back) is collections.OrderedDict and list(back) == list(obj)
    assert type(back["z"]) is collections.OrderedDict and list(back["z"]) == list(sd)
    assert type(back["a"]) is dict and back["a"]["p"] == (1, 2)
    for key, v in sd.items():
        np.testing.assert_array_equal(to_numpy(back["z"][key]), to_numpy(v))


def test_save_load_stores_every_registered_container(backend: Any, tmp_path: Path) -> None:
    # (other containers are stored as their children: a dataclass as a dict of its data fields,
    # a custom node by its children, a deque as a list; they were refused)
    a, b, c = (backend.asarray(np.arange(k, k + 3.0)) for k in range(3))
    obj = {"p": Params(w=a, b=(b, None), name="x"), "q": Pair(c, 4), "d": collections.deque([a, 2])}
    xg.save(obj, tmp_path / "t.safetensors")
    with backend.policy():
        back = xg.load(tmp_path / "t.safetensors")
    assert set(back["p"]) == {"w", "b"} and back["p"]["b"][1] is None
    assert back["q"][1] == 4 and back["d"][1] == 2 and type(back["d"]) is list
    for got, want in ((back["p"]["w"], a), (back["p"]["b"][0], b), (back["q"][0], c), (back["d"][0], a)):
        np.testing.assert_array_equal(to_numpy(got), to_numpy(want))


def test_containers_of_traced_arrays_reach_array_functions_under_jit(backend: Any) -> None:
    # a deque or a named tuple of traced arrays handed to a function of the namespace, or to
    # NumPy's own functions (which take any sequence): found, unwrapped and rebuilt at each replay
    fns = [lambda x: xg.stack(collections.deque([x, x * 2.0])),
           lambda x: xg.concat(Point(x, xg.sin(x)))]
    if backend.name == "numpy":  # (NumPy's functions: a deque raised IndexError, a named tuple RecursionError)
        fns += [lambda x: np.stack(collections.deque([x, x * 2.0])),
                lambda x: np.concatenate(Point(x, np.sin(x)))]
    for k, f in enumerate(fns):
        jf = xg.jit(f)
        for i in range(4):
            x = backend.asarray(np.arange(3.0) + i)
            np.testing.assert_array_equal(to_numpy(jf(x)), to_numpy(f(x)), err_msg=f"function {k}, call {i}")
        assert jf.cache_info().traces == 1


# ====================================================================== item 8: a result jit cannot flatten
def test_jit_refuses_a_result_it_cannot_flatten(backend: Any) -> None:
    def make(x: Any) -> Unregistered:
        return Unregistered(w=x * 2.0, b=x + 1.0)

    f = xg.jit(make)
    with pytest.raises(xg.XpgradTypeError) as ei:
        f(backend.asarray(np.array([1.0, 2.0])))
    msg = str(ei.value)
    assert "jit(make)" in msg and "Unregistered" in msg and "register_dataclass" in msg, msg

    class Holder:
        def __init__(self, v: Any) -> None:
            self.v = [v]

    with pytest.raises(xg.XpgradTypeError, match=r"jit\(<lambda>\).*Holder.*register_pytree_node"):
        xg.jit(lambda x: Holder(x * 2.0))(backend.asarray(np.array([1.0])))


def test_jit_replays_a_registered_dataclass_with_fresh_values(backend: Any) -> None:
    f = xg.jit(lambda x: Params(w=x * 2.0, b=Pair(x + 1.0, None), name="out"))
    for k in range(3):
        x = np.array([1.0, 2.0]) + k
        out = f(backend.asarray(x))
        assert type(out) is Params and out.name == "out" and type(out.b) is Pair and out.b.second is None
        np.testing.assert_allclose(to_numpy(out.w), 2 * x)
        np.testing.assert_allclose(to_numpy(out.b.first), x + 1)
    assert f.cache_info().traces == 1


# ====================================================================== item 13 and the options
@pytest.mark.parametrize("name", ["grad", "value_and_grad", "jacrev", "jacfwd", "hessian"])
def test_repeated_argnums_are_refused(np_backend: Any, name: str) -> None:
    transform = getattr(xg, name)
    x = np.array([1.0, 2.0])
    with pytest.raises(xg.XpgradValueError, match=rf"{name}: argnums \(0, 0\) names argument 0 more than once"):
        transform(lambda a, b: xg.sum(a * b), argnums=(0, 0))
    f = transform(lambda a, b: xg.sum(a * b), argnums=(1, -1))  # the same argument, counted from the end
    with pytest.raises(xg.XpgradValueError, match=rf"{name}: argnums \(1, -1\) names argument 1 more than once"):
        f(x, x)


@pytest.mark.parametrize("name", ["grad", "value_and_grad", "jacrev", "jacfwd", "hessian"])
def test_bad_argnums_and_functions_raise_type_errors(name: str) -> None:
    transform = getattr(xg, name)
    for bad in (1.0, "0", (0, 1.5), True):
        with pytest.raises(xg.XpgradTypeError, match=rf"{name}: argnums must be an int or a sequence of ints, got"):
            transform(lambda a: xg.sum(a), argnums=bad)
    with pytest.raises(xg.XpgradTypeError, match=rf"{name}: expected a function to transform, got str 'abc'"):
        transform("abc")


def test_jit_option_errors(np_backend: Any) -> None:
    x = np.array([1.0, 2.0])
    with pytest.raises(xg.XpgradTypeError, match=r"jit: static_argnums must be an int or a sequence of ints, got float 1\.5"):
        xg.jit(lambda a: a, static_argnums=1.5)
    for kw in ({"static_argnums": 1}, {"donate_argnums": (0, 2)}):
        f = xg.jit(lambda a: a * 2.0, **kw)
        label = next(iter(kw))
        for _ in range(2):  # (refused on every call: never cached)
            with pytest.raises(xg.XpgradValueError, match=rf"jit\(<lambda>\): {label} .* but the call has 1 positional"):
                f(x)
    np.testing.assert_allclose(xg.jit(lambda a, n: a * n, static_argnums=1)(x, 3), 3 * x)


def test_none_leaves_are_empty_containers(backend: Any) -> None:
    x = backend.asarray(np.array([1.0, -2.0]))
    g = xg.grad(lambda t: xg.sum(t[0] ** 2))((x, None))
    assert g[1] is None
    np.testing.assert_allclose(to_numpy(g[0]), 2 * to_numpy(x))
    out, t = xg.jvp(lambda t: (t[0] * 3.0, None), ((x, None),), ((x, None),))
    assert out[1] is None and t[1] is None
    np.testing.assert_allclose(to_numpy(t[0]), 3 * to_numpy(x))
    gj = xg.jit(xg.grad(lambda t: xg.sum(t["a"] ** 2)))({"a": x, "b": None})
    assert gj["b"] is None
