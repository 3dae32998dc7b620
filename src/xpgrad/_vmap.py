"""``vmap``: map a function over a batch axis, with every primitive batched by its rule.

See `xpgrad.autograd._batched` for how batched values are represented; each primitive's
rule is declared beside it (``Primitive.batch``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ._exceptions import XpgradTypeError, XpgradValueError
from .autograd._batched import STACK, Batched, Level, _check_levels, from_phys, lift, open_level
from .autograd._core import PRIMITIVES, apply
from .autograd._tensor import Tensor, _wrap
from .functional import _DEPTH, _SCALARS, PRIVATE_LEAVES
from .ops.creation import asarray
from .ops.manipulation import concat
from .random import VmapRandom
from .tree_util import PyTreeDef, children, tree_flatten, tree_leaves

__all__ = ["vmap"]

_RANDOMNESS = ("same", "different", "error")



def vmap(
    f: Callable[..., Any],
    in_axes: Any = 0,
    out_axes: Any = 0,
    *,
    axis_size: int | None = None,
    chunk_size: int | None = None,
    randomness: str = "same",
) -> Callable[..., Any]:
    """Vectorize ``f`` over a batch axis of its arguments, as ``jax.vmap`` does.

    ``vmap(f)(xs)`` equals stacking ``f(x)`` over the slices ``x`` of ``xs`` along
    axis 0, but runs ``f`` once: each primitive inside is applied to the whole batch
    by its batching rule, so nothing loops in Python. Transforms compose in any order:
    ``vmap(grad(f))`` gives per-example gradients, ``grad`` of ``vmap`` differentiates
    the batched program, and nested ``vmap`` maps over several axes.

    Args:
        f: a function of arrays (or lists/tuples/dicts of arrays), written against the
            array API.
        in_axes: which axis of each positional argument is mapped: an int or None for
            all, or a tuple with one entry per argument, each an int, None (not mapped:
            the argument is the same for every example) or a tree of them matching the
            argument's structure. Negative axes count from the end. Keyword arguments are
            mapped along axis 0.
        out_axes: where the mapped axis goes in each output: an int, or a tree matching
            the output; None for an output that does not vary along the batch.
        axis_size: the batch size, needed only when no argument is mapped.
        chunk_size: map at most this many examples at once (less memory, more calls);
            the results are concatenated, and equal the unchunked ones (random draws included).
        randomness: how the functions of `xpgrad.random` (and so ``Dropout``) draw
            inside ``f``, as torch.func's: ``"same"`` (the default: one draw, shared by every
            example, as JAX with one key), ``"different"`` (one draw per example) or
            ``"error"`` (a random function raises).

    Returns:
        The vectorized function. Given the caller's arrays (NumPy in), it returns the
        caller's arrays (NumPy out), except for an output on the graph of a Tensor that
        requires grad (a model's parameters, closed over): a Tensor, as torch.func gives, so
        ``loss(vmap(model)(batch)).backward()`` fills the parameters' ``grad``.

    A random function called inside ``f`` draws once, and every example sees the same
    numbers (as JAX does with one key), unless ``randomness="different"``: see
    docs/concepts/vmap.md for which numbers each example gets. Functions whose output
    shape would depend on the data (``nonzero``, ``unique_*``, a batched boolean mask) cannot be batched and
    raise, as do conversions of a batched value to a Python value (``float``, ``if x``).

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.vmap(lambda x, y: xg.vecdot(x, y))(np.ones((3, 2)), np.arange(6.0).reshape(3, 2))
        array([1., 5., 9.])
        >>> xg.vmap(lambda w, x: w @ x, in_axes=(None, 0))(np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]]))
        array([[1., 2.],
               [3., 4.]])
        >>> loss = lambda w, x, y: (xg.vecdot(w, x) - y) ** 2
        >>> xg.vmap(xg.grad(loss), in_axes=(None, 0, 0))(np.ones(2), np.eye(2), np.zeros(2))
        array([[2., 0.],
               [0., 2.]])
    """
    if not callable(f):
        msg = f"vmap: f must be callable, got {type(f).__name__}"
        raise XpgradTypeError(msg)
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")
    if axis_size is not None and (not isinstance(axis_size, int) or isinstance(axis_size, bool) or axis_size < 0):
        msg = f"vmap: axis_size must be a non-negative int, got {axis_size!r}"
        raise XpgradValueError(msg)
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1):
        msg = f"vmap: chunk_size must be a positive int, got {chunk_size!r}"
        raise XpgradValueError(msg)
    if randomness not in _RANDOMNESS:
        msg = f"vmap: randomness must be 'same', 'different' or 'error', got {randomness!r}"
        raise XpgradValueError(msg)

    @functools.wraps(f)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        return _call(f, in_axes, out_axes, axis_size, chunk_size, args, kwargs, randomness, VmapRandom())

    return mapped


def _check_axes_spec(spec: Any, what: str) -> None:
    if spec is None or (isinstance(spec, int) and not isinstance(spec, bool)):
        return
    sub = children(spec, none_is_leaf=True)  # (a tuple/list/dict, or a registered pytree node, of axes)
    if sub is not None and not isinstance(spec, (str, bytes)):
        for s in sub[0]:
            _check_axes_spec(s, what)
        return
    msg = f"vmap: {what} must be an int, None, or a tuple/list/dict of them, got {spec!r}"
    raise XpgradTypeError(msg)


def _prefix(spec: Any, tree: Any, what: str, path: str, out: list[Any]) -> list[Any]:
    """``spec`` (a tree prefix of ``tree``, as JAX's ``in_axes``) broadcast to the leaves of
    ``tree``: appends one axis per leaf of ``tree`` (in `xpgrad.tree_util.tree_leaves`
    order) to ``out``. A list may stand for a tuple and a dict for any mapping."""
    if spec is None or isinstance(spec, int):
        out.extend([spec] * len(tree_leaves(tree)))
        return out
    sub = children(tree)
    spec_sub = children(spec, none_is_leaf=True)
    if sub is not None and spec_sub is not None:
        kids, entries = sub
        if isinstance(spec, (list, tuple)) and isinstance(tree, (list, tuple)) and len(spec) == len(tree):
            for i, (s, t) in enumerate(zip(spec, kids)):
                _prefix(s, t, what, f"{path}[{i}]", out)
            return out
        if isinstance(spec, dict) and isinstance(tree, dict) and set(spec) == set(tree):
            for k, t in zip(entries, kids):
                _prefix(spec[k], t, what, f"{path}[{k!r}]", out)
            return out
        if type(spec) is type(tree) and spec_sub[1] == entries:  # (the same registered node type)
            for k, s, t in zip(entries, spec_sub[0], kids):
                _prefix(s, t, what, f"{path}.{k}", out)
            return out
    msg = (
        f"vmap: {what} must match the structure of {path} (a tree prefix of it): got {what} {spec!r} "
        f"for a value of type {type(tree).__name__}"
        + (f" of length {len(tree)}" if isinstance(tree, (list, tuple)) else "")
    )
    raise XpgradValueError(msg)


def _is_array(x: Any) -> bool:
    return isinstance(x, Tensor) or (hasattr(x, "shape") and hasattr(x, "dtype"))


def _mapped_size(x: Any, ax: int, where: str) -> tuple[int, int]:
    """(normalized axis, size along it) of mapped argument ``x``."""
    if not _is_array(x):
        if isinstance(x, _SCALARS):
            msg = (
                f"vmap: {where} is a Python scalar, which has no axis {ax} to map over; give it "
                "in_axes=None, or pass an array"
            )
            raise XpgradValueError(msg)
        msg = f"vmap: {where} has type {type(x).__name__}; only arrays can be mapped (give it in_axes=None)"
        raise XpgradTypeError(msg)
    shape = tuple(x.shape)
    n = len(shape)
    if not -n <= ax < n:
        msg = f"vmap: in_axes {ax} is out of bounds for {where}, of shape {shape} (rank {n})"
        raise XpgradValueError(msg)
    ax %= n
    size = shape[ax]
    if size is None or size != size:
        msg = f"vmap: {where} has an unknown size along its mapped axis {ax} (shape {shape}); compute the sizes first"
        raise XpgradValueError(msg)
    return ax, int(size)


def _flat_in(in_axes: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
             ) -> tuple[list[Any], list[Any], list[str], list[PyTreeDef]]:
    """The leaves of the arguments, their axes and names (keyword arguments last, axis 0), and
    each argument's structure (positional ones first, then the keyword ones in order)."""
    if isinstance(in_axes, (list, tuple)):
        if len(in_axes) != len(args):
            msg = (
                f"vmap: in_axes has {len(in_axes)} entries but the function got {len(args)} positional "
                "arguments; give one entry per argument (or an int/None for all)"
            )
            raise XpgradValueError(msg)
        spec = tuple(in_axes)
    elif isinstance(in_axes, dict):
        msg = "vmap: in_axes for the positional arguments must be an int, None or a tuple, not a dict"
        raise XpgradTypeError(msg)
    else:
        spec = (in_axes,) * len(args)
    leaves: list[Any] = []
    axes: list[Any] = []
    names: list[str] = []
    defs: list[PyTreeDef] = []
    for i, (s, a) in enumerate(zip(spec, args)):
        _prefix(s, a, "in_axes", f"argument {i}", axes)
        la, treedef = tree_flatten(a)
        leaves += la
        defs.append(treedef)
        names += [f"argument {i}" + (f" (leaf {j})" if len(la) > 1 else "") for j in range(len(la))]
    for k, v in kwargs.items():
        la, treedef = tree_flatten(v)
        leaves += la
        defs.append(treedef)
        axes += [0] * len(la)
        names += [f"keyword argument {k!r}" + (f" (leaf {j})" if len(la) > 1 else "") for j in range(len(la))]
    return leaves, axes, names, defs


def _rebuild_args(defs: list[PyTreeDef], leaves: list[Any], n_args: int, keys: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional and keyword arguments of structures ``defs`` (see `_flat_in`) with ``leaves``."""
    it = iter(leaves)
    trees = [d.unflatten([next(it) for _ in range(d.num_leaves)]) for d in defs]
    return tuple(trees[:n_args]), dict(zip(keys, trees[n_args:]))


def _size(leaves: list[Any], axes: list[Any], names: list[str], axis_size: int | None) -> tuple[int, list[Any]]:
    """The batch size, checked to agree across the mapped arguments; the normalized axes."""
    sizes: list[tuple[str, int, int]] = []
    norm: list[Any] = []
    for x, ax, name in zip(leaves, axes, names):
        if ax is None:
            norm.append(None)
            continue
        a, n = _mapped_size(x, ax, name)
        norm.append(a)
        sizes.append((name, a, n))
    if axis_size is not None:
        size = axis_size
    elif sizes:
        size = sizes[0][2]
    else:
        msg = "vmap: no argument is mapped (every in_axes is None) and axis_size is not given; give one of them"
        raise XpgradValueError(msg)
    if any(n != size for _, _, n in sizes):
        detail = ", ".join(f"{name} has size {n} along axis {a}" for name, a, n in sizes)
        head = f"axis_size is {axis_size}; " if axis_size is not None else ""
        msg = f"vmap: the mapped axes have different sizes: {head}{detail}"
        raise XpgradValueError(msg)
    return size, norm


def _call(f: Callable[..., Any], in_axes: Any, out_axes: Any, axis_size: int | None, chunk_size: int | None,
          args: tuple[Any, ...], kwargs: dict[str, Any], randomness: str, rng: VmapRandom, offset: int = 0) -> Any:
    leaves, axes, names, defs = _flat_in(in_axes, args, kwargs)
    size, norm = _size(leaves, axes, names, axis_size)
    outer = STACK.get()
    raw = not outer and _DEPTH.get() == 0 and not any(isinstance(x, Tensor) for x in leaves)
    if chunk_size is not None and size > chunk_size:
        return _chunked(f, in_axes, out_axes, size, chunk_size, args, kwargs, leaves, norm, raw, defs, randomness, rng)
    level = Level(size, randomness, rng, offset)
    Ko = len(outer)
    with open_level(level) as st:
        # (an unmapped raw array becomes a constant Tensor: raw_array * batched and
        # raw_array[batched_index] then work on every library, as they do for Tensors)
        mapped = [(_wrap(x) if _is_array(x) and not isinstance(x, Tensor) else x) if ax is None
                  else _enter(x, ax, outer, st) for x, ax in zip(leaves, norm)]
        new_args, new_kwargs = _rebuild_args(defs, mapped, len(args), kwargs)
        out = f(*new_args, **new_kwargs)
        specs = _prefix(out_axes, out, "out_axes", "the output", [])
        out_leaves, out_def = tree_flatten(out)
        res = [_exit(o, ax, level, outer, st, Ko, k) for k, (o, ax) in enumerate(zip(out_leaves, specs))]
    if raw:  # (an output on the graph of a Tensor that requires grad, a model's parameter, stays a Tensor)
        res = [_unwrap(r) for r in res]
    return out_def.unflatten(res)


def _moveaxis(t: Any, src: int, dst: int) -> Any:
    if src == dst:
        return t
    return apply(PRIMITIVES["moveaxis"], (t,), {"source": src, "destination": dst})


def _enter(x: Any, ax: int, outer: tuple[Level, ...], st: tuple[Level, ...]) -> Batched:
    """Mapped argument ``x`` as a Batched value of the new level (its axis ``ax`` the batch axis)."""
    Ko = len(outer)
    if isinstance(x, Batched):
        _check_levels(x, "vmap")
        phys = lift(x, outer)
    elif Ko:
        phys = lift(x, outer)
    else:
        phys = x if isinstance(x, Tensor) else _wrap(x)
    return from_phys(_moveaxis(phys, Ko + ax, Ko), st)  # type: ignore[no-any-return]


def _exit(o: Any, ax: Any, level: Level, outer: tuple[Level, ...], st: tuple[Level, ...], Ko: int, k: int) -> Any:
    """Output leaf ``o`` of the mapped function, with the level's axis at ``ax`` (None: not mapped)."""
    if isinstance(o, Batched):
        _check_levels(o, "vmap")
        batched = len(o._levels) == len(st)
    elif isinstance(o, Tensor) or _is_array(o):
        batched = False
    elif isinstance(o, _SCALARS):
        if ax is None:
            return o
        o = asarray(o)
        batched = False
    else:
        msg = f"vmap: the function must return arrays (or lists/tuples/dicts of arrays), got {type(o).__name__}"
        raise XpgradTypeError(msg)
    if ax is None:
        if batched:
            msg = (
                f"vmap: out_axes is None for output {k}, but that output varies along the mapped axis; "
                "give it an axis to put the batch in"
            )
            raise XpgradValueError(msg)
        return o
    if batched:
        phys = o._inner
    else:
        inner = lift(o, outer) if Ko or isinstance(o, Batched) else (o if isinstance(o, Tensor) else _wrap(o))
        s = tuple(inner.shape)
        phys = apply(PRIMITIVES["reshape"], (inner,), {"shape": (*s[:Ko], 1, *s[Ko:])})
    s = tuple(phys.shape)
    n = len(s) - Ko - 1
    if not -(n + 1) <= ax <= n:
        msg = f"vmap: out_axes {ax} is out of bounds for output {k}, of rank {n} (the mapped axis makes it {n + 1})"
        raise XpgradValueError(msg)
    if s[Ko] != level.size:
        phys = apply(PRIMITIVES["broadcast_to"], (phys,), {"shape": (*s[:Ko], level.size, *s[Ko + 1:])})
    phys = _moveaxis(phys, Ko, Ko + ax % (n + 1))
    return from_phys(phys, outer)


def _chunked(f: Callable[..., Any], in_axes: Any, out_axes: Any, size: int, chunk: int, args: tuple[Any, ...],
             kwargs: dict[str, Any], leaves: list[Any], norm: list[Any], raw: bool, defs: list[PyTreeDef],
             randomness: str, rng: VmapRandom) -> Any:
    """Map chunks of at most ``chunk`` examples in turn and join the results along ``out_axes``
    (the chunks share ``rng``, so they draw the random numbers one call would)."""
    outs = []
    for start in range(0, size, chunk):
        stop = min(start + chunk, size)
        parts = [x if ax is None else _slice(x, ax, start, stop) for x, ax in zip(leaves, norm)]
        a2, k2 = _rebuild_args(defs, parts, len(args), kwargs)
        outs.append(_call(f, in_axes, out_axes, stop - start, None, a2, k2, randomness, rng, start))
    specs = _prefix(out_axes, outs[0], "out_axes", "the output", [])
    out_def = tree_flatten(outs[0])[1]
    flat = [tree_leaves(o) for o in outs]
    joined = []
    for j, ax in enumerate(specs):
        pieces = [fl[j] for fl in flat]
        if ax is None:
            joined.append(_unwrap(pieces[0]) if raw else pieces[0])
            continue
        ts = [p if isinstance(p, Tensor) else _wrap(p) for p in pieces]
        n = ts[0].ndim
        r = concat(ts, axis=ax % n)
        joined.append(_unwrap(r) if raw else r)
    return out_def.unflatten(joined)


def _unwrap(r: Any) -> Any:
    """An output of a vmap of raw arrays: the backend array, unless it is on the graph of a Tensor
    that requires grad (closed over: a model's parameters), which keeps it a Tensor, as torch.func does."""
    if type(r) is not Tensor:
        return r
    return r if r._requires_grad and _on_callers_graph(r) else r.data


def _on_callers_graph(r: Tensor) -> bool:
    """Whether ``r``'s graph reaches a leaf that requires grad other than those the transforms
    inside the vmap made for themselves (``vmap(hessian(f))`` records on its own copies)."""
    private = PRIVATE_LEAVES
    if r._node is None:
        return private.get(id(r)) is not r
    todo = [r._node]
    seen = {id(r._node)}
    while todo:
        for p in todo.pop().parents:
            if isinstance(p, Tensor):
                if p._requires_grad and private.get(id(p)) is not p:
                    return True
            elif p is not None and id(p) not in seen:
                seen.add(id(p))
                todo.append(p)
    return False


def _slice(x: Any, ax: int, start: int, stop: int) -> Any:
    t = x if isinstance(x, Tensor) else _wrap(x)
    return t[(slice(None),) * ax + (slice(start, stop), Ellipsis)]
