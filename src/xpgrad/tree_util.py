"""Pytrees: nested containers of arrays, with `jax.tree_util`'s names and rules.

Every transform (``grad``, ``vjp``, ``jvp``, ``jacrev``/``jacfwd``/``hessian``, ``vmap``,
``jit``, ``custom_vjp``/``custom_jvp``, ``checkpoint``) and `xpgrad.save` take
their arguments and give their results through this one module, so a container keeps
its type through all of them.

The containers (*nodes*): ``tuple``, ``list``, ``dict``, ``collections.OrderedDict``,
``collections.defaultdict``, ``collections.deque``, named tuples, ``None`` (a node with
no children, as in JAX), dataclasses registered with `register_dataclass` and
types registered with `register_pytree_node`. Everything else (arrays, Tensors,
Python numbers, strings) is a *leaf*. A ``dict`` is flattened in sorted key order (as
JAX does) and rebuilt in its own insertion order; an ``OrderedDict`` keeps its order.

It is built on `optree <https://github.com/metaopt/optree>`_ (the C++ pytree library
that PyTorch also uses), with xpgrad's own registry: types registered here are nodes for
xpgrad, whatever JAX or PyTorch register in theirs.

Examples:
    >>> import collections, numpy as np, xpgrad as xg
    >>> tree = collections.OrderedDict(b=np.ones(2), a=(np.zeros(1), None))
    >>> leaves, treedef = xg.tree_util.tree_flatten(tree)
    >>> len(leaves), treedef.num_leaves
    (2, 2)
    >>> out = xg.tree_util.tree_map(lambda x: x + 1, tree)
    >>> type(out).__name__, list(out), out["b"]
    ('OrderedDict', ['b', 'a'], array([2., 2.]))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import optree

from ._exceptions import XpgradTypeError, XpgradValueError

__all__ = [
    "PyTreeDef",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "tree_flatten",
    "tree_leaves",
    "tree_map",
    "tree_structure",
    "tree_unflatten",
]

#: the optree registry namespace of xpgrad's registrations
NAMESPACE = "xpgrad"

#: a tree's structure (``optree.PyTreeSpec``): ``treedef.unflatten(leaves)``,
#: ``treedef.num_leaves``, ``treedef.children()``; hashable and comparable
PyTreeDef = optree.PyTreeSpec

_T = TypeVar("_T")


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], PyTreeDef]:
    """``(leaves, treedef)``: the leaves of ``tree`` left to right, and its structure.

    Examples:
        >>> import xpgrad as xg
        >>> xg.tree_util.tree_flatten({"b": 1, "a": (2, None)})
        ([2, 1], PyTreeSpec({'a': (*, None), 'b': *}))
    """
    return optree.tree_flatten(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """The tree of structure ``treedef`` with ``leaves`` in its leaves' places."""
    if not isinstance(treedef, PyTreeDef):
        msg = f"tree_unflatten: expected a treedef (from tree_flatten or tree_structure), got {type(treedef).__name__}"
        raise XpgradTypeError(msg)
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of ``tree``, in `tree_flatten`'s order."""
    return optree.tree_leaves(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The structure (treedef) of ``tree``."""
    return optree.tree_structure(tree, is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``tree`` with each leaf ``x`` replaced by ``f(x, *ys)``, ``ys`` the leaves of ``rest`` at its place.

    Each tree of ``rest`` has ``tree``'s structure, or ``tree``'s as a prefix (as in JAX).

    Examples:
        >>> import xpgrad as xg
        >>> xg.tree_util.tree_map(lambda x, y: x + y, [1, (2, None)], [10, (20, None)])
        [11, (22, None)]
    """
    return optree.tree_map(f, tree, *rest, is_leaf=is_leaf, none_is_leaf=False, namespace=NAMESPACE)


def register_pytree_node(nodetype: type[_T], flatten_func: Callable[[_T], tuple[Iterable[Any], Any]],
                         unflatten_func: Callable[[Any, Iterable[Any]], _T]) -> None:
    """Make ``nodetype`` a container for every xpgrad transform, as `jax.tree_util.register_pytree_node`.

    Args:
        nodetype: the class.
        flatten_func: ``x -> (children, aux_data)``: the children are flattened further;
            ``aux_data`` (hashable, compared by ``==``) is the static rest of ``x``.
        unflatten_func: ``(aux_data, children) -> x``.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> class Pair:
        ...     def __init__(self, a, b):
        ...         self.a, self.b = a, b
        >>> xg.tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
        >>> g = xg.grad(lambda p: xg.sum(p.a * p.b))(Pair(np.array([2.0]), np.array([3.0])))
        >>> type(g).__name__, g.a, g.b
        ('Pair', array([3.]), array([2.]))
    """
    if not isinstance(nodetype, type):
        msg = f"register_pytree_node: expected a class, got {type(nodetype).__name__} {nodetype!r}"
        raise XpgradTypeError(msg)
    if not callable(flatten_func) or not callable(unflatten_func):
        msg = f"register_pytree_node: flatten_func and unflatten_func of {nodetype.__name__} must be callable"
        raise XpgradTypeError(msg)
    try:
        optree.register_pytree_node(nodetype, flatten_func, unflatten_func, namespace=NAMESPACE)  # type: ignore[arg-type]
    except ValueError as e:
        msg = f"register_pytree_node: {nodetype.__name__}: {e}"
        raise XpgradValueError(msg) from None


def register_pytree_node_class(cls: type[_T]) -> type[_T]:
    """Class decorator: register ``cls`` with its ``tree_flatten`` method and ``tree_unflatten`` classmethod."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)  # type: ignore[attr-defined]
    return cls


def register_dataclass(nodetype: type[_T], data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None, drop_fields: Sequence[str] = ()) -> type[_T]:
    """Make a dataclass a container, as `jax.tree_util.register_dataclass`; usable as a decorator.

    ``data_fields`` are its children (arrays, or trees of them); ``meta_fields`` its static
    part (hashable: under ``jit`` a new value traces again). Left out, both come from
    the dataclass's fields: a field declared with ``field(metadata={"static": True})`` is
    a meta field, the others data fields. ``drop_fields`` are fields left out of both
    (rebuilt by the constructor's default).

    Examples:
        >>> import dataclasses, numpy as np, xpgrad as xg
        >>> @xg.tree_util.register_dataclass
        ... @dataclasses.dataclass
        ... class Params:
        ...     w: object
        ...     b: object
        ...     name: str = dataclasses.field(default="lin", metadata={"static": True})
        >>> g = xg.grad(lambda p: xg.sum(p.w * 3.0 + p.b))(Params(np.ones(2), np.ones(2)))
        >>> type(g).__name__, g.w, g.name
        ('Params', array([3., 3.]), 'lin')
    """
    if not isinstance(nodetype, type):
        msg = f"register_dataclass: expected a class, got {type(nodetype).__name__} {nodetype!r}"
        raise XpgradTypeError(msg)
    if data_fields is None or meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            msg = (f"register_dataclass: {nodetype.__name__} is not a dataclass; decorate it with "
                   "@dataclasses.dataclass, or give data_fields and meta_fields")
            raise XpgradTypeError(msg)
        dropped = set(drop_fields)
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in dropped]
        if meta_fields is None:
            meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        if data_fields is None:
            data_fields = [f.name for f in fields if f.name not in set(meta_fields)]
    data, meta = tuple(data_fields), tuple(meta_fields)
    for label, names in (("data_fields", data), ("meta_fields", meta), ("drop_fields", tuple(drop_fields))):
        if not all(isinstance(n, str) for n in names):
            msg = f"register_dataclass: {label} of {nodetype.__name__} must be field names (str), got {names!r}"
            raise XpgradTypeError(msg)
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init}
        missing = sorted(init - set(data) - set(meta) - set(drop_fields))
        if missing:
            msg = (f"register_dataclass: the fields {missing} of {nodetype.__name__} are in neither "
                   "data_fields, meta_fields nor drop_fields")
            raise XpgradValueError(msg)

    def flatten(x: Any) -> tuple[list[Any], tuple[Any, ...], tuple[str, ...]]:
        return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta), data

    def unflatten(aux: tuple[Any, ...], children: Iterable[Any]) -> Any:
        return nodetype(**dict(zip(meta, aux)), **dict(zip(data, children)))

    register_pytree_node(nodetype, flatten, unflatten)  # type: ignore[arg-type]
    return nodetype


# ---------------------------------------------------------------------- for xpgrad's transforms
def describe(x: Any) -> str:
    """A short description of a (sub)tree for error messages: ``tuple of 2``, ``dict with keys [...]``."""
    if isinstance(x, dict):
        return f"{type(x).__name__} with keys {sorted(map(str, x))}"
    if isinstance(x, (list, tuple)):
        return f"{type(x).__name__} of {len(x)}"
    shape = getattr(x, "shape", None)
    return f"{type(x).__name__}{'' if shape is None else f' of shape {tuple(shape)}'}"


def is_leaf(x: Any) -> bool:
    """Whether ``x`` is a leaf (not a registered container; ``None`` is a container)."""
    return optree.tree_is_leaf(x, none_is_leaf=False, namespace=NAMESPACE)


def leaves_up_to(treedef: PyTreeDef, other: Any, func: str, what: str, like: Any) -> list[Any]:
    """The leaves of ``other``, which must have structure ``treedef`` (that of ``like``); a
    leaf of ``other`` may be ``None`` where ``like`` has a leaf (a zero, in cotangents).
    A mismatch raises one ValueError naming ``func`` and ``what``."""
    try:
        parts = treedef.flatten_up_to(other)
    except (ValueError, TypeError):
        parts = None
    if parts is None or not all(p is None or is_leaf(p) for p in parts):
        msg = f"{func}: {what} do not have the same structure: {describe(like)} and {describe(other)}"
        raise XpgradValueError(msg)
    return parts


def map2(fn: Callable[[Any, Any], Any], a: Any, b: Any, func: str, what: str) -> Any:
    """``fn`` over the leaves of two trees of the same structure, naming ``what`` on a mismatch."""
    leaves, treedef = tree_flatten(a)
    other = leaves_up_to(treedef, b, func, what, a)
    return treedef.unflatten([fn(x, y) for x, y in zip(leaves, other)])


def children(tree: Any, none_is_leaf: bool = False) -> tuple[list[Any], tuple[Any, ...]] | None:
    """``(children, entries)`` of a container one level down (``entries``: its keys, indices
    or field names, in flattening order), or None for a leaf."""
    if optree.tree_is_leaf(tree, none_is_leaf=none_is_leaf, namespace=NAMESPACE):
        return None
    one = optree.tree_flatten_one_level(tree, none_is_leaf=none_is_leaf, namespace=NAMESPACE)
    return list(one.children), tuple(one.entries)
