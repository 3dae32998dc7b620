"""The backward engine: one iterative pass in reverse topological order.

Order comes from the nodes' creation order (a flat walk and one sort, no
recursion, so chains of any length work): every node is visited after all of its
consumers. Gradients wait in a buffer per node and are dropped as soon as the
node has used them; saved values are freed after use unless ``retain_graph``.
A ``None`` gradient is a symbolic zero: it is never materialized. Gradient
buffers that the pass allocated itself and that no one else has seen are summed
into in place, and handed to the next rule to overwrite (``ops._common.scale``),
so an elementwise chain needs no new buffer per step (see `_Pass`).

First order calls each rule with the node's backend namespace and raw arrays;
``create_graph=True`` calls the same rule with the ``xpgrad`` namespace and
Tensors, so the backward pass is itself recorded. The engine gets that namespace
from the package (``_grad_mode.graph_namespace``); it never imports it.

Reading order: `_pass` is the core (seed the roots, order the nodes, walk,
deliver); the steps before the walk, the two walks (`_walk_plain`, the hot
path, and `_walk_checked`), the steps of one node, buffer ownership, hooks
and delivery follow, each under its own heading.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, cast

import array_api_compat

from .. import _tracing
from .._backends import _device_text
from .._dispatch import backend_namespace, check_devices, check_known_shapes
from .._dtypes import dtype_name, is_float, kind
from .._exceptions import (
    DeviceMismatchError,
    GraphFreedError,
    InPlaceModificationError,
    NonDifferentiableError,
    XpgradRuntimeError,
    XpgradTypeError,
    XpgradValueError,
)
from . import _anomaly
from ._core import GRAD_SLOT, WANT_FRESH, ArgMeta, Node, Primitive, broadcast_like, fit_dtype
from ._grad_mode import GRAD_ENABLED, graph_namespace
from ._tensor import Tensor, _wrap

__all__ = ["backward", "grad"]


def _toposort(roots: list[Node], leaves: set[int]) -> list[Node]:
    """Nodes reachable from ``roots``, consumers before producers; ``leaves`` gets the
    ids of the leaf Tensors reached.

    A node is always created after its parents, so descending creation order
    (``seq``) is a topological order: one flat walk collects the nodes (no
    recursion, so chains of any length work) and one sort orders them.
    """
    seen = set(roots)
    stack = list(seen)
    push = stack.append
    add = seen.add
    leaf = leaves.add
    while stack:
        for p in stack.pop().parents:
            if type(p) is Node:
                if p not in seen:
                    add(p)
                    push(p)
            elif p is not None:
                leaf(id(p))
    return sorted(seen, key=_by_seq, reverse=True)


_by_seq = operator.attrgetter("seq")


def _needed(order: list[Node], targets: Sequence[Tensor]) -> set[int]:
    """ids of the nodes and leaves whose backward leads to a target."""
    need: set[int] = set()
    for t in targets:
        need.add(id(t) if t._node is None else id(t._node))
    for node in reversed(order):  # producers first
        if id(node) in need:
            continue
        for p in node.parents:
            if p is not None and id(p) in need:
                need.add(id(node))
                break
    return need


def _unbroadcast(xp: Any, g: Any, like: Any) -> Any:
    """Bring ``g`` to the shape of ``like`` (an argument or its ArgMeta): sum over
    broadcast axes, or broadcast a reduced result (chunked like a Dask argument).

    The one place broadcasting is undone: rules return a gradient that broadcasts
    against their output (or, for reductions, against their input), and the
    engine fits it to the argument.
    """
    shape = tuple(like.shape)
    gshape = tuple(g.shape)
    lead = len(gshape) - len(shape)
    if lead > 0 or any(s == 1 and gs != 1 for s, gs in zip(shape, gshape[max(lead, 0):])):
        ones = tuple(lead + i for i, (s, gs) in enumerate(zip(shape, gshape[lead:])) if s == 1 and gs != 1)
        if not ones and shape:  # only leading axes (a bias): no keepdims, no reshape (NumPy's 0-D
            # sum would be a scalar, not an array)
            g = xp.sum(g, axis=tuple(range(lead)))
        else:
            g = xp.sum(g, axis=tuple(range(lead)) + ones, keepdims=True)
            if lead:
                g = xp.reshape(g, tuple(g.shape)[lead:])
    if tuple(g.shape) != shape:
        g = broadcast_like(xp, g, like)
    return g


def _fit(xp: Any, g: Any, meta: ArgMeta, create_graph: bool) -> Any:
    """Bring a rule's result to the argument's shape and dtype."""
    shape, dt = meta.shape, meta.dtype
    if not hasattr(g, "shape"):  # a Python scalar from a rule
        g = xp.asarray(g)
    if tuple(g.shape) != tuple(shape):
        g = _unbroadcast(xp, g, meta)
    return fit_dtype(xp, g, dt, create_graph)


def _as_backend(value: Any, like: Tensor, func: str) -> Any:
    """Validate and unwrap a user-supplied upstream gradient for ``like``."""
    if isinstance(value, Tensor):
        data = value.data
    elif hasattr(value, "shape") and hasattr(value, "dtype"):
        data = value
    else:
        xp = backend_namespace(like.data)
        try:
            data = xp.asarray(value, dtype=like.data.dtype, device=like.device)
        except Exception as e:
            msg = f"{func}: gradient must be an array or a number, got {type(value).__name__}"
            raise XpgradTypeError(msg) from e
    if type(data) is not type(like.data):
        backend_namespace(data, like.data, func=func)  # NamespaceMismatchError naming both libraries
    if tuple(data.shape) != tuple(like.data.shape):
        msg = f"{func}: gradient has shape {tuple(data.shape)}, but the output has shape {tuple(like.data.shape)}"
        raise XpgradValueError(msg)
    if data.dtype != like.data.dtype:
        msg = (
            f"{func}: gradient has dtype {dtype_name(data.dtype)}, but the output has dtype "
            f"{dtype_name(like.data.dtype)}"
        )
        raise XpgradTypeError(msg)
    check_devices(data, like.data, func=func)
    return value if isinstance(value, Tensor) else data


def _seed(t: Tensor, gradient: Any, func: str, real_only: bool = False) -> Any:
    """The upstream gradient of output ``t``: ones for a one-element output, else ``gradient``
    checked. ``real_only``: a complex output needs an explicit ``gradient`` (PyTorch's rule:
    the gradient of which real function of it is meant is otherwise ambiguous)."""
    if gradient is None:
        data = t.data
        shape = tuple(data.shape)
        if shape and math.prod(shape) != 1:
            msg = (
                f"{func}: the output has shape {shape}; backward without gradient= works only "
                "for one-element outputs, so pass gradient= (the upstream gradient) explicitly"
            )
            raise XpgradValueError(msg)
        if real_only and kind(data.dtype) == "complex floating":
            msg = (
                f"{func}: the output is complex ({dtype_name(data.dtype)}); a gradient is implicitly "
                "created only for real outputs: differentiate xg.real(...) or xg.abs(...) of it, "
                "or pass gradient= explicitly"
            )
            raise XpgradTypeError(msg)
        xp = backend_namespace(data)
        one = xp.ones_like(data)  # (the output's dtype and device)
        GRAD_SLOT.seeds.append(one)  # a unit: the pass may multiply by it for free
        return one
    return _as_backend(gradient, t, func)


def _run(
    outputs: Sequence[Tensor],
    grads: Sequence[Any],
    *,
    retain_graph: bool,
    create_graph: bool,
    targets: Sequence[Tensor] | None,
    func: str,
    accumulate: bool = False,
    record: bool | None = None,
) -> list[Any] | None:
    """The engine, in grad mode ``create_graph`` (recorded only for higher order; ``record``
    overrides it: a pass of Tensors that nothing differentiates, as vmap of a vjp).
    Accumulates into leaves (targets None), into the targets' ``.grad`` (``accumulate``),
    or returns target grads."""
    token = GRAD_ENABLED.set(create_graph if record is None else record)
    slot = GRAD_SLOT.s
    outer = slot.save()  # (a pass inside a rule of another, as a jitted call's VJP: the outer pass's slot is kept)
    try:
        return _pass(outputs, grads, retain_graph=retain_graph, create_graph=create_graph, targets=targets,
                     accumulate=accumulate)
    finally:
        GRAD_ENABLED.reset(token)
        slot.restore(outer)
        GRAD_SLOT.seeds = []


def _pass(
    outputs: Sequence[Tensor],
    grads: Sequence[Any],
    *,
    retain_graph: bool,
    create_graph: bool,
    targets: Sequence[Tensor] | None,
    accumulate: bool = False,
) -> list[Any] | None:
    """One backward pass (see `_run`): seed the roots, order the nodes, walk them,
    hand out the gradients.

    The walk visits each node after all of its consumers and does, per node: take its
    gradient (`_receive` when it has hooks, several outputs or is a target), skip
    it when nothing needs it, check what its rules read (`_rule_inputs`: freed?
    modified in place?), run each argument's rule and send the result to that argument's
    producer or leaf (`_send`), free what the node saved (`_release`).
    Two walks, chosen once per pass: `_walk_plain` (first order, with buffer
    donation) and `_walk_checked` (``create_graph`` or anomaly detection).
    """
    seeds = GRAD_SLOT.seeds  # the ones made by _seed for this pass (see _core.GRAD_SLOT)
    GRAD_SLOT.seeds = []
    st = _Pass(create_graph, retain_graph, bool(_anomaly.depth and _anomaly.ANOMALY.get()))  # (check_nan)
    reached: set[int] = set()
    order = _toposort(_seed_roots(st, outputs, grads), reached)
    if targets is not None:
        _select_targets(st, order, targets, reached)
    if st.track:
        _lend_units(st, grads, seeds)
        _walk_plain(st, order)
    else:
        _walk_checked(st, order)
    slot = GRAD_SLOT.s
    slot.units = slot.borrowed = None
    return _deliver(st, targets, accumulate)


class _Pass:
    """The state of one backward pass, shared by its steps.

    Gradient buffers: ``gbuf[node]`` is the gradient of a one-output node itself, a
    list (one entry per output) for a multi-output node; ``leaf_grads[id(leaf)]`` is a
    leaf's (``leaves`` maps the id back to the leaf). None is a symbolic zero.

    Targets (``grad``, ``backward(inputs=)``): ``results[k]`` is target k's gradient;
    ``capture`` maps (id(node), output index) of a target that is an inner node to its
    k; ``needed`` holds the ids of the nodes and leaves that lead to a target (None: all).

    Ownership (``track``: first order without anomaly detection): ``owned`` holds the ids
    of the gradient buffers that the pass itself allocated (fresh results of
    ``ops._common.scale``, of an accumulation) and that sit in exactly one buffer slot,
    seen by no one else. Such a buffer is summed into in place (``add``), and donated
    (``GRAD_SLOT.s.donated``) to its node's rule when that rule is the only one to read it.
    Ids leave the set when their buffer is taken out, so an id never outlives its array.
    Not at all under ``create_graph`` (Tensors) or anomaly detection (which compares the
    gradient before and after the rule). ``borrowed``: ``GRAD_SLOT.s.borrowed``.

    ``xp``: the namespace the rules run on under ``create_graph`` (`graph_namespace`).
    """

    __slots__ = ("add", "borrowed", "capture", "check_nan", "create_graph", "gbuf", "leaf_grads", "leaves",
                 "needed", "owned", "results", "retain_graph", "track", "xp")

    def __init__(self, create_graph: bool, retain_graph: bool, check_nan: bool) -> None:
        self.create_graph = create_graph
        self.retain_graph = retain_graph
        self.check_nan = check_nan
        self.track = not create_graph and not check_nan
        self.xp: Any = graph_namespace() if create_graph else None
        self.gbuf: dict[Node, Any] = {}
        self.leaf_grads: dict[int, Any] = {}
        self.leaves: dict[int, Tensor] = {}
        self.results: list[Any] = []
        self.capture: dict[tuple[int, int], int] = {}
        self.needed: set[int] | None = None
        self.owned: set[int] = set()
        # two gradients of one argument: summed in place into an owned buffer when tracking
        self.add: Callable[[Any, Any], Any] = functools.partial(_accum, self.owned) if self.track else operator.add
        self.borrowed: dict[int, Any] = {}


# ---- before the walk --------------------------------------------------------------------


def _seed_roots(st: _Pass, outputs: Sequence[Tensor], grads: Sequence[Any]) -> list[Node]:
    """Put each output's upstream gradient into its node's buffer (an output that is a leaf:
    straight into the leaf's gradient), a Tensor under ``create_graph``, else a raw array.
    Returns the nodes seeded: the roots of the walk."""
    create_graph = st.create_graph
    gbuf = st.gbuf
    roots: list[Node] = []
    for t, g in zip(outputs, grads):
        if create_graph and not isinstance(g, Tensor):
            g = _wrap(g)
        elif not create_graph and isinstance(g, Tensor):
            g = g.data
        node = t._node
        if node is None:
            _acc_leaf(st.leaf_grads, st.leaves, t, g)
            continue
        if node not in gbuf:
            roots.append(node)
            gbuf[node] = None if node.n_out == 1 else [None] * node.n_out
        if node.n_out == 1:
            prev = gbuf[node]
            gbuf[node] = g if prev is None else prev + g
        else:
            buf = gbuf[node]
            j = t._oidx
            buf[j] = g if buf[j] is None else buf[j] + g
    return roots


def _select_targets(st: _Pass, order: list[Node], targets: Sequence[Tensor], reached: set[int]) -> None:
    """Prepare a pass that returns the gradients of ``targets``: a result slot each, the
    targets that are inner nodes to capture when the walk reaches them, and the nodes
    that lead to a target (``needed``; the others are skipped). ``reached``: the ids of
    the leaves the graph reaches. Every node leads to some leaf, so when every leaf
    reached is a target and no target is an inner node, every node is needed: no pruning.
    """
    st.results = [None] * len(targets)
    tids = set()
    for k, t in enumerate(targets):
        if t._node is not None:
            st.capture[(id(t._node), t._oidx)] = k
        tids.add(id(t))
    if st.capture or not reached <= tids:
        st.needed = _needed(order, targets)


def _lend_units(st: _Pass, grads: Sequence[Any], seeds: list[Any]) -> None:
    """Tell the rule helpers which upstream gradients are units (the ones ``_seed`` made
    for this pass), so that multiplying by one costs nothing; a value ``scale`` then
    passes through as it is is recorded in ``st.borrowed`` (see ``_core.GRAD_SLOT``)."""
    if seeds:
        units = {id(g): g for g in grads if any(g is u for u in seeds)}
        if units:
            gslot = GRAD_SLOT.s
            gslot.units = units
            gslot.borrowed = st.borrowed


# ---- the walk ---------------------------------------------------------------------------


def _walk_plain(st: _Pass, order: list[Node]) -> None:
    """The first-order walk, the hot path of every training step: `_walk_checked`'s steps on raw
    arrays, buffers owned and donated (see `_Pass`), the per-edge steps inlined (`_call_rule`,
    `_send`, `_release`); the rare ones (hooks, several outputs, targets) are one call, `_receive`."""
    gbuf, owned, needed, capture = st.gbuf, st.owned, st.needed, st.capture
    pop, add, retain_graph, gslot = gbuf.pop, st.add, st.retain_graph, GRAD_SLOT.s
    for node in order:
        g = pop(node, None)  # 1. the node's gradient, and whether the pass owns it
        own = id(g) in owned if owned else False  # (never None, nor a multi-output node's list)
        if own:
            owned.discard(id(g))
        if node.hooks or node.n_out != 1 or capture:
            g, own = _receive(st, node, g, own)
        if g is None or (needed is not None and id(node) not in needed):  # 2. skipped: nothing to send
            if not retain_graph:
                node.free()
            continue
        args = node.saved  # 3. what its rules read (_rule_inputs): not freed, not modified in place
        if args is None:
            _raise_freed(node)
        if (ch := node.checks) and (ch[1][0] != ch[2] or (len(ch) > 3 and _stale(ch))):
            _check_versions(node)  # raises, naming the value
        prim, xp, ans = node.prim, node.xp, node.ans
        kw, parents, vjps = node.kw, node.parents, prim.vjps
        nargs = len(args)
        donate = own and (nargs == 1 or _one_parent(parents))  # (to the one rule that reads it, to overwrite)
        for i, parent in enumerate(parents):  # 4. each argument's rule, its result fitted and sent on
            if parent is None or (needed is not None and id(parent) not in needed):
                continue
            rule = (vjps[i] if i < len(vjps) else None) or _rule_of(prim, i)
            if donate:
                gslot.donated = g
            gslot.fresh = WANT_FRESH
            try:
                if kw or nargs > 2:
                    gi = rule(xp, g, ans, *args, **kw)
                else:  # (one or two arguments: called without unpacking)
                    gi = rule(xp, g, ans, args[0]) if nargs == 1 else rule(xp, g, ans, args[0], args[1])
                fresh = gi is not None and gslot.fresh is gi  # a new buffer: the pass owns it
                gslot.donated = gslot.fresh = None
                if gi is None:
                    continue
                m = args[i]  # (_fit when needed: the common case is two comparisons; unknown sizes are fitted)
                if getattr(gi, "shape", None) != m.shape or (gi.dtype is not m.dtype and gi.dtype != m.dtype):
                    gi = _fit(xp, gi, m, False)
                    fresh = False  # (a copy, possibly a view of it: not owned)
            except Exception as e:  # noqa: BLE001 - re-raised, or replaced by a clearer error
                _fail_rule(node, g, e)
            if fresh:
                owned.add(id(gi))
            if type(parent) is Node and parent.n_out == 1:
                gbuf[parent] = gi if (pb := gbuf.get(parent)) is None else add(pb, gi)
            else:
                _send(st, node, i, parent, gi)  # (a leaf, or a multi-output parent: its output's entry)
        if not retain_graph:  # 5. what it saved is freed (_release: Node.free, inlined)
            if prim.saves:
                node.saved = None
            node.ans = node.checks = node.fw = None
            node.freed = True


def _walk_checked(st: _Pass, order: list[Node]) -> None:
    """The walk under ``create_graph`` (the rules run on Tensors with the graph namespace,
    so the pass is itself recorded) or anomaly detection (each rule's result is checked
    for NaN). Nothing is owned: no buffer is donated or summed into in place."""
    gbuf = st.gbuf
    for node in order:
        g, _ = _receive(st, node, gbuf.pop(node, None), False)  # 1. the node's gradient
        if g is None or not _wanted(st, node):  # 2. skipped
            _release(st, node)
            continue
        xp, args, ans = _rule_inputs(st, node)  # 3. what its rules read
        saved = cast("Sequence[Any]", node.saved)  # (checked by _rule_inputs)
        for i, parent in enumerate(node.parents):  # 4. each argument's rule
            if parent is None or not _wanted(st, parent):
                continue
            rule = _rule_of(node.prim, i)
            try:
                gi = _call_rule(rule, node, xp, g, ans, args)
                if gi is None:
                    continue
                gi = _fit(xp, gi, saved[i], st.create_graph)
            except Exception as e:  # noqa: BLE001 - re-raised, or replaced by a clearer error
                _fail_rule(node, g, e)
            if st.check_nan:
                _anomaly.check_backward(node, i, node.xp, g, gi)
            _send(st, node, i, parent, gi)
        _release(st, node)  # 5. what it saved is freed


# ---- the steps of one node --------------------------------------------------------------


def _receive(st: _Pass, node: Node, g: Any, own: bool) -> tuple[Any, bool]:
    """The rare part of taking a node's gradient ``g`` (``own``: the pass owns it).

    A multi-output node's per-output list is released from ownership and becomes a tuple
    for its rules (None when every entry is). The node's hooks run and may replace the
    gradient (then no longer owned: a hook may keep what it is shown). A target that is
    this node (``grad`` of an inner Tensor) gets its result (shared: no longer owned).
    Returns the gradient and whether the pass still owns it.
    """
    if g is None:
        return None, False
    capture = st.capture
    if node.n_out == 1:
        if node.hooks:
            own = False
            g = _run_hooks(node, [g], st.create_graph)[0]
        if capture:
            slot = capture.get((id(node), 0))
            if slot is not None:
                st.results[slot] = g
                own = False
        return g, own
    buf = g
    owned = st.owned
    for b in buf:
        owned.discard(id(b))
    if node.hooks:
        buf = _run_hooks(node, buf, st.create_graph)
    if capture:
        for j in range(node.n_out):
            slot = capture.get((id(node), j))
            if slot is not None and buf[j] is not None:
                st.results[slot] = buf[j]
    return (None if all(b is None for b in buf) else tuple(buf)), False


def _wanted(st: _Pass, x: Any) -> bool:
    """Whether node or leaf ``x`` leads to a target (always, without targets to prune to)."""
    return st.needed is None or id(x) in st.needed


def _rule_inputs(st: _Pass, node: Node) -> tuple[Any, Sequence[Any], Any]:
    """What the node's rules read: the namespace, the saved arguments (or their ArgMeta)
    and the output. Raises when they were freed by an earlier pass or modified in place
    since. Under ``create_graph``: the graph namespace and Tensors (`_saved_tensors`)."""
    if node.saved is None:
        _raise_freed(node)
    _check_versions(node)
    if st.create_graph:
        args, ans = _saved_tensors(node)
        return st.xp, args, ans
    return node.xp, node.saved, node.ans


def _raise_freed(node: Node) -> NoReturn:
    """Going through a node a second time after its saved values were freed."""
    msg = (
        f"backward: trying to go through the graph of {node.prim.name} a second time, but its "
        "saved values were freed after the first backward; pass retain_graph=True to the "
        "first backward (or grad call) if you need to go through it again"
    )
    raise GraphFreedError(msg)


def _stale(ch: tuple[Any, ...]) -> bool:
    """Whether any version box of a flat checks tuple moved since it was recorded."""
    return any(ch[k][0] != ch[k + 1] for k in range(1, len(ch), 3))


def _check_versions(node: Node) -> None:
    """Raise if a value saved for backward was modified in place since it was recorded."""
    ch = node.checks or ()
    for k in range(0, len(ch), 3):
        pos, box, ver = ch[k], ch[k + 1], ch[k + 2]
        if box[0] != ver:
            what = "its output" if pos < 0 else f"argument {pos}"
            msg = (
                f"{node.prim.name}: {what}, saved for backward, was modified in place afterwards "
                f"(version {box[0]}, expected {ver}); make a copy before modifying it, or "
                "modify it out of place"
            )
            raise InPlaceModificationError(msg)


def _saved_tensors(node: Node) -> tuple[Sequence[Any], Any]:
    """The saved arguments and output as Tensors on the tape (``create_graph``): each
    connected to its producer, so that the recorded pass differentiates through it, and
    with its tangents back (forward mode over reverse)."""
    saved = node.saved or ()
    ans = node.ans
    fw_args, fw_ans = node.fw if node.fw is not None else (None, None)
    args: list[Any] = []
    for i, d in enumerate(saved):
        if d is None or type(d) is ArgMeta or not hasattr(d, "shape"):
            args.append(d)
            continue
        p = node.parents[i]
        if p is None:
            t = _wrap(d)
        elif type(p) is Node:
            t = _wrap(d, p, node.pidx[i])
        else:
            args.append(p)  # the leaf itself (its version was checked)
            continue
        if fw_args is not None:
            t._fw = fw_args[i]
        args.append(t)
    if ans is not None:
        if node.n_out == 1:
            ans = _wrap(ans, node, 0)
            if fw_ans is not None:
                ans._fw = fw_ans
        else:
            ans = tuple(_wrap(a, node, j) if is_float(a.dtype) else _wrap(a) for j, a in enumerate(ans))
            if fw_ans is not None:
                for a, f in zip(ans, fw_ans):
                    a._fw = f
    return args, ans


def _rule_of(prim: Primitive, i: int) -> Callable[..., Any]:
    """The gradient rule of ``prim`` for argument ``i``."""
    vjps = prim.vjps
    rule = vjps[i] if i < len(vjps) else prim.vjp_rule(i)
    if rule is None:
        _no_rule(prim, i)
    return rule


def _no_rule(prim: Primitive, i: int) -> NoReturn:
    # (a node is recorded only for arguments whose rule exists: kept for safety)
    msg = f"{prim.name}: no gradient rule for argument {i}"
    raise NonDifferentiableError(msg)


def _call_rule(rule: Callable[..., Any], node: Node, xp: Any, g: Any, ans: Any, args: Sequence[Any]) -> Any:
    """``rule(xp, g, ans, *args, **kw)``: an argument's gradient from the upstream ``g``."""
    return rule(xp, g, ans, *args, **node.kw)


def _fail_rule(node: Node, g: Any, err: Exception) -> NoReturn:
    """Re-raise a rule's error, or a clearer one when a shape is data-dependent (Dask's NaN sizes)."""
    shapes = [m.shape for m in node.saved or () if hasattr(m, "shape")]
    shapes += [getattr(v, "shape", ()) for v in (g if isinstance(g, tuple) else (g,))]
    check_known_shapes(node.prim.name, shapes, err, backward=True)
    try:
        raise err
    finally:
        del err  # no cycle error -> traceback -> this frame -> error: the graph dies by refcount


def _send(st: _Pass, node: Node, i: int, parent: Any, gi: Any) -> None:
    """Add argument ``i``'s gradient ``gi`` to what its parent has: the buffer of the node
    that produced the argument (that output's entry, for a multi-output node), or the
    leaf's gradient."""
    add = st.add
    if type(parent) is Node:
        gbuf = st.gbuf
        pb = gbuf.get(parent)
        if parent.n_out == 1:
            gbuf[parent] = gi if pb is None else add(pb, gi)
        else:
            if pb is None:
                pb = gbuf[parent] = [None] * parent.n_out
            j = node.pidx[i]
            pb[j] = gi if pb[j] is None else add(pb[j], gi)
    else:
        _acc_leaf(st.leaf_grads, st.leaves, parent, gi, add)


def _acc_leaf(leaf_grads: dict[int, Any], leaves: dict[int, Tensor], leaf: Tensor, g: Any,
              add: Callable[[Any, Any], Any] = operator.add) -> None:
    """Add ``g`` to the pass's gradient of ``leaf``."""
    k = id(leaf)
    prev = leaf_grads.get(k)
    if prev is None:
        leaf_grads[k] = g
        leaves[k] = leaf
    else:
        leaf_grads[k] = add(prev, g)


def _release(st: _Pass, node: Node) -> None:
    """Free what the node saved for its rules, unless ``retain_graph`` (a later pass may go
    through it again)."""
    if not st.retain_graph:
        node.free()


# ---- buffer ownership (see _Pass) -------------------------------------------------------


def _one_parent(parents: Sequence[Any]) -> bool:
    """Whether exactly one argument has a parent (so exactly one rule reads the gradient).
    (Identity counts: list.count would compare a Tensor parent with ==, elementwise.)"""
    n = 0
    for p in parents:
        if p is not None:
            n += 1
    return n == 1


def _accum(owned: set[int], a: Any, b: Any) -> Any:
    """``a + b`` (two gradients fitted to the same argument), in place into an owned one.

    The sum is a fresh buffer of the pass, so it is owned in turn.
    """
    oa = id(a) in owned
    ob = id(b) in owned
    if oa or ob:
        owned.discard(id(a))  # both are used up: no id may outlive its array
        owned.discard(id(b))
    if oa:
        a += b
        r = a
    elif ob:
        b += a
        r = b
    else:
        r = a + b
    owned.add(id(r))
    return r


def _copy(a: Any) -> Any:
    """A new array with ``a``'s values (for a gradient the pass does not own)."""
    xp = backend_namespace(a)
    return xp.asarray(a, copy=True)


# ---- hooks ------------------------------------------------------------------------------


def _run_hooks(node: Node, buf: list[Any], create_graph: bool) -> list[Any]:
    """Run the node's hooks on each output's gradient in ``buf`` (replaced where a hook returns one).

    Key -1 holds the node's own hooks (a Module's backward hooks, ``nn._hooks``), run after the
    outputs' ones: ``hook(buf, create_graph)`` sees every output's gradient (None where there is
    none) at once and returns the list that replaces ``buf``.
    """
    hooks_of = cast("dict[int, Any]", node.hooks)  # (not None: checked by the caller)
    for j, hooks in hooks_of.items():
        if j >= 0 and buf[j] is not None and hooks:
            buf[j] = _apply_hooks(hooks, buf[j], create_graph)
    for hook in hooks_of.get(-1, ()):
        buf = hook(buf, create_graph)
    return buf


def _apply_hooks(hooks: list[Any], g: Any, create_graph: bool) -> Any:
    """Run ``hooks`` in order on the gradient ``g``; each sees the previous one's result."""
    for hook in list(hooks):
        gt = g if create_graph else _wrap(g)
        r = hook(gt)
        if r is not None:
            check_hook_result(hook, r, g, "tensor hook")
            g = r if create_graph else (r.data if isinstance(r, Tensor) else r)
    return g


def _known(shape: tuple[Any, ...]) -> bool:
    return all(isinstance(n, int) for n in shape)  # Dask's unknown sizes are NaN or None


def check_hook_result(hook: Any, r: Any, g: Any, what: str) -> None:
    """A hook's replacement gradient ``r`` must have the shape, dtype, library and device of
    ``g``, the gradient it was shown (PyTorch: "hook has changed the size/type of value")."""
    name = getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or type(hook).__name__
    who = f"{what} {name}"
    rd = r.data if isinstance(r, Tensor) else r
    gd = g.data if isinstance(g, Tensor) else g
    if not (hasattr(rd, "shape") and hasattr(rd, "dtype")):
        msg = (f"{who} returned {type(r).__name__}; a hook must return None or a Tensor like the gradient "
               f"(shape {tuple(gd.shape)}, dtype {dtype_name(gd.dtype)})")
        raise XpgradTypeError(msg)
    rs, gs = tuple(rd.shape), tuple(gd.shape)
    if rs != gs and _known(rs) and _known(gs):
        msg = f"{who} has changed the size of value: expected shape {gs}, got {rs}"
        raise XpgradValueError(msg)
    if type(rd) is not type(gd):
        backend_namespace(rd, gd, func=who)  # NamespaceMismatchError for two array libraries
    if rd.dtype != gd.dtype:
        msg = f"{who} has changed the type of value: expected dtype {dtype_name(gd.dtype)}, got {dtype_name(rd.dtype)}"
        raise XpgradTypeError(msg)
    rdev, gdev = array_api_compat.device(rd), array_api_compat.device(gd)
    if rdev is not None and gdev is not None and rdev != gdev:
        msg = f"{who} has changed the device of value: expected device {_device_text(gdev)}, got {_device_text(rdev)}"
        raise DeviceMismatchError(msg)


# ---- after the walk ---------------------------------------------------------------------


def _deliver(st: _Pass, targets: Sequence[Tensor] | None, accumulate: bool) -> list[Any] | None:
    """Hand out the pass's gradients: into the leaves' ``.grad`` (no targets), into the
    targets' ``.grad`` (``accumulate``: ``backward(inputs=)``), or as one per target."""
    if targets is None:
        _give_leaves(st)
        return None
    results = _target_results(st, targets)
    if accumulate:
        for t, g in zip(targets, results):
            if g is not None:
                _give(t, g, id(g) in st.owned, st.create_graph)
        return None
    return results


def _target_results(st: _Pass, targets: Sequence[Tensor]) -> list[Any]:
    """Each target's gradient: captured by the walk (an inner node), or the leaf's after
    its hooks (they run for ``grad()`` and ``backward(inputs=)`` too, as in PyTorch). A
    borrowed value (one ``scale`` passed through: a saved input) is copied for the caller."""
    results = st.results
    for k, t in enumerate(targets):
        if t._node is None and id(t) in st.leaf_grads:
            g = st.leaf_grads[id(t)]
            if t._hooks:
                st.owned.discard(id(g))
                g = _apply_hooks(t._hooks, g, st.create_graph)
            results[k] = g
    borrowed = st.borrowed
    if borrowed:
        for k, r in enumerate(results):
            if r is not None and borrowed.get(id(r)) is r:
                results[k] = _copy(r)
    return results


def _give_leaves(st: _Pass) -> None:
    """Accumulate each leaf's gradient into its ``.grad``, after the leaf's hooks."""
    if _tracing.ACTIVE[0]:
        _check_traced_leaves(st)
    for key, g in st.leaf_grads.items():
        leaf = st.leaves[key]
        fresh = id(g) in st.owned
        if leaf._hooks:
            g = _apply_hooks(leaf._hooks, g, st.create_graph)
            fresh = False
        _give(leaf, g, fresh, st.create_graph)


def _check_traced_leaves(st: _Pass) -> None:
    """Inside xg.jit: a traced gradient for a leaf whose value is no traced one (a parameter of a
    Module the jitted function captured instead of taking it as an argument) would be lost at
    replay; refused before any ``.grad`` changes."""
    for key, g in st.leaf_grads.items():
        leaf = st.leaves[key]
        data = g.data if isinstance(g, Tensor) else g
        if type(data) is _tracing.Tracer and type(leaf.data) is not _tracing.Tracer:
            err = _tracing.untraced_write("backward", tuple(leaf.shape), "a gradient flows into")
            raise err


def _give(leaf: Tensor, g: Any, fresh: bool, create_graph: bool) -> None:
    """Accumulate the gradient ``g`` into ``leaf.grad``.

    A leaf gets a buffer of its own, which it may modify in place (``p.grad *= s``, as in
    PyTorch): a first gradient that the pass did not allocate for this leaf alone (a
    broadcast view, a saved value, one array shared by the two arguments of ``add``) is
    copied. ``fresh``: ``g`` is such an allocation (in the pass's ``owned`` set).
    """
    if create_graph:
        leaf.grad = g if leaf.grad is None else leaf.grad + g
    elif leaf.grad is None:
        leaf.grad = _wrap(g if fresh else _copy(g))
    else:
        leaf.grad = leaf.grad + _wrap(g)


# ---- the public entry points ------------------------------------------------------------

def backward(
    tensors: Sequence[Tensor],
    grad_tensors: Sequence[Any] | None = None,
    *,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Sequence[Tensor] | None = None,
) -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([1.0, 2.0], requires_grad=True)
        >>> xg.autograd.backward([(x * x).sum()])
        >>> x.grad
        Tensor([2., 4.], dtype=float64, device=cpu)
    """
    func = "backward"
    tensors = list(tensors)
    seeds = []
    for k, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            msg = f"{func}: expected Tensors, got {type(t).__name__}"
            raise XpgradTypeError(msg)
        if not t._requires_grad:
            msg = (
                f"{func}: the tensor does not require grad and has no grad_fn; "
                "it does not depend on any tensor with requires_grad=True"
            )
            raise NonDifferentiableError(msg)
        seeds.append(_seed(t, None if grad_tensors is None else grad_tensors[k], func, real_only=True))
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is not None:
        _run(tensors, seeds, retain_graph=retain_graph, create_graph=create_graph, targets=list(inputs),
             func=func, accumulate=True)
        return
    _engine_call(tensors, seeds, retain_graph, create_graph, None, func)


def _engine_call(tensors: list[Tensor], seeds: list[Any], retain_graph: bool, create_graph: bool,
                 targets: list[Tensor] | None, func: str, record: bool | None = None) -> Any:
    """The engine for the function transforms. ``create_graph``: the rules run on Tensors with
    the xpgrad namespace; ``record`` (default: ``create_graph``): they are recorded."""
    return _run(tensors, seeds, retain_graph=retain_graph, create_graph=create_graph, targets=targets, func=func,
                record=record)


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    *,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = True,
) -> tuple[Tensor, ...]:
    """Gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated).

    Inputs that the outputs do not depend on get zeros (as in JAX), unless
    ``allow_unused=False``, which raises instead.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([1.0, 2.0], requires_grad=True)
        >>> (gx,) = xg.autograd.grad((x ** 3).sum(), x)
        >>> gx
        Tensor([ 3., 12.], dtype=float64, device=cpu)
    """
    func = "grad"
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    for t in ins:
        if not isinstance(t, Tensor) or not t._requires_grad:
            msg = f"{func}: every input must be a Tensor that requires grad, got {t!r}"
            raise XpgradRuntimeError(msg)
    live_outs, seeds = _grad_seeds(outputs, grad_outputs, func)
    if retain_graph is None:
        retain_graph = create_graph
    if not live_outs:
        res: list[Any] = [None] * len(ins)
    else:
        res = _run(live_outs, seeds, retain_graph=retain_graph, create_graph=create_graph, targets=ins,
                   func=func)  # type: ignore[assignment]  # (a list: targets given)
    return _grad_results(ins, res, create_graph, allow_unused, func)


def _grad_seeds(outputs: Tensor | Sequence[Tensor], grad_outputs: Any, func: str) -> tuple[list[Tensor], list[Any]]:
    """`grad`'s outputs that depend on an input (the others contribute zeros) and their seeds."""
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    if grad_outputs is None:
        gos: list[Any] = [None] * len(outs)
    elif isinstance(grad_outputs, Tensor) or hasattr(grad_outputs, "shape"):
        gos = [grad_outputs]
    else:
        gos = list(grad_outputs)
    seeds = []
    live_outs = []
    for t, g in zip(outs, gos):
        if not isinstance(t, Tensor):
            msg = f"{func}: outputs must be Tensors, got {type(t).__name__}"
            raise XpgradTypeError(msg)
        if not t._requires_grad:
            continue  # does not depend on any input: contributes zeros
        live_outs.append(t)
        seeds.append(_seed(t, g, func, real_only=True))
    return live_outs, seeds


def _grad_results(ins: list[Tensor], res: list[Any], create_graph: bool, allow_unused: bool,
                  func: str) -> tuple[Tensor, ...]:
    """`grad`'s result per input: its gradient as a Tensor, zeros for an unused one."""
    out = []
    for t, g in zip(ins, res):
        if g is None:
            if not allow_unused:
                msg = f"{func}: one of the inputs was not used to compute the outputs (allow_unused=False)"
                raise XpgradRuntimeError(msg)
            xp = backend_namespace(t.data)
            out.append(_wrap(xp.zeros(t.data.shape, dtype=t.data.dtype, device=t.device)))
        elif create_graph or isinstance(g, Tensor):
            out.append(g)
        else:
            out.append(_wrap(g))
    return tuple(out)
