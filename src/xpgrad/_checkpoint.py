"""Gradient checkpointing (rematerialization): [`checkpoint`][xpgrad.checkpoint], alias [`remat`][xpgrad.remat].

``checkpoint(f)`` is ``f`` with a different memory/compute trade-off under reverse
mode: the tape keeps only ``f``'s *inputs*, not its intermediates, and backward
recomputes ``f`` from them (with recording on) to run the VJP of the recomputation.
It is JAX's ``jax.checkpoint``/``jax.remat`` and PyTorch's
``torch.utils.checkpoint.checkpoint``.

How it is recorded. The forward runs ``f`` once with recording on, on fresh leaves
standing for the inputs that require grad, and walks the graph it made to find the
*boundary*: the Tensors requiring grad that ``f`` reached without getting them as
arguments (closed-over parameters of an ``nn.Module``, a closed-over value computed
outside). Then it drops that graph and records one node (a primitive, as
``custom_vjp`` does) whose inputs are the differentiable arguments and the boundary
Tensors, and which saves the arguments only. Its VJP rule recomputes ``f`` on fresh
stand-ins for the arguments, re-points the recomputed nodes' boundary parents at
stand-ins too, and runs the engine from the recomputed outputs, with the incoming
cotangents, to those stand-ins: the result is one gradient per node input, which the
outer pass routes on as for any primitive. So gradients reach closed-over parameters
through ``Tensor.backward()``, and ``grad``/``vjp`` (which ask for their own inputs)
never touch a parameter's ``.grad``; and nothing of the recomputation leaks into the
outer graph. Under ``create_graph`` (``grad`` of ``grad``) the stand-ins are identity
nodes on the node's connected inputs and the recomputation's backward is recorded, so
the outer derivative sees it.

Random numbers drawn by ``f`` through [`xpgrad.random`][xpgrad.random] (``nn.Dropout``) are the
same in the recomputation: the forward saves the state of the generator of the
current policy, and the recomputation runs under the same policy with that state
restored, then puts back the state it found (so backward leaves the stream where it
was), as PyTorch's ``preserve_rng_state=True``. An explicit
[`xpgrad.random.Generator`][xpgrad.random.Generator] that ``f`` closes over is not saved. Inside ``xg.jit``,
where a draw is a call of the program, the recomputation is handed the forward's
traced draws instead (the program draws once per call).

Policies (``policy=``, JAX's ``jax.checkpoint_policies``): a policy is a callable
``policy(prim, *arrays, **params) -> bool`` asked for each primitive ``f`` runs (``prim``
an xpgrad ``Primitive``, with ``.name``; the arrays its raw inputs). The forward keeps
the output of every primitive it answers True for, in order; the recomputation asks
again and takes the kept output instead of running the primitive (the node is recorded
as usual, so its VJP reads the same inputs). `nothing_saveable` is the default (keep
nothing); `everything_saveable` keeps everything, which is ``f`` unwrapped: it is run
as is, recording its whole graph.

State: the recomputation runs with ``RECOMPUTING`` set, so BatchNorm does not update its
running statistics and ``num_batches_tracked`` a second time. The version counter of
every Tensor ``f``'s ops read (closed-over constants too) is checked before it runs.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable
from typing import Any

import array_api_compat

from ._dispatch import backend_namespace
from ._exceptions import InPlaceModificationError, XpgradRuntimeError, XpgradTypeError
from ._policy import _policy_scope, current_policy
from ._tracing import TRACE
from .autograd import _core
from .autograd._batched import STACK
from .autograd._core import FWD_LEVELS, GRAD_SLOT, REMAT, Node, Primitive, record_opaque
from .autograd._engine import _engine_call
from .autograd._grad_mode import GRAD_ENABLED, RECOMPUTING, enable_grad
from .autograd._tensor import Tensor, _wrap
from .checkpoint_policies import everything_saveable, nothing_saveable
from .functional import _DEPTH, _identity
from .ops._common import is_xpgrad
from .random import _current
from .tree_util import tree_flatten, tree_leaves

__all__ = ["checkpoint", "remat"]

_READS_LOCK = threading.Lock()  # (guards _core.READS, shared by the threads)


def _fname(f: Any) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _standin(t: Tensor) -> Tensor:
    """A fresh leaf that requires grad, sharing ``t``'s data and version counter."""
    s = _wrap(t.data, None, 0, t._version)
    s._requires_grad = True
    return s


def _boundary(roots: list[Node], marker: int, ex_leaves: set[int], ex_nodes: set[int],
              boxes: dict[int, list[int]] | None = None) -> list[tuple[Node, int, Any]]:
    """Every (node, argument, parent) where a node recorded after ``marker`` reads a Tensor
    requiring grad that was not made after ``marker`` and is not an explicit stand-in.
    ``boxes`` collects the version counters of what those nodes saved."""
    seen: set[int] = set()
    stack = list(roots)
    found: list[tuple[Node, int, Any]] = []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if boxes is not None and n.checks:
            ch = n.checks
            for k in range(1, len(ch), 3):
                boxes[id(ch[k])] = ch[k]
        for i, p in enumerate(n.parents):
            if p is None:
                continue
            if type(p) is Node:
                if id(p) in ex_nodes:
                    continue
                if p.seq > marker:
                    stack.append(p)
                    continue
            elif id(p) in ex_leaves:
                continue
            found.append((n, i, p))
    return found


def _key(n: Node, i: int, p: Any) -> tuple[int, int]:
    return (id(p), n.pidx[i]) if type(p) is Node else (id(p), -1)


def _placeholder(meta: Any, xp: Any, device: Any) -> Any:
    """A read-only array of ``meta``'s shape and dtype (a graph connector: its values are never read)."""
    z = xp.zeros((), dtype=meta.dtype, device=device)
    return xp.broadcast_to(z, tuple(meta.shape))


class _Call:
    """What the checkpoint node keeps besides the saved arguments: the function, the
    static parts of the call, and how to find the boundary again. Never a Tensor made by ``f``."""

    __slots__ = ("closed", "depth", "drawn", "ex_pos", "f", "g", "keys", "leaves", "n_ex", "n_leaves", "name", "out_pos",
                 "policy", "remat", "result", "rng", "trace", "tree", "versions", "where")

    closed: list[tuple[Any, int, Any]]  # per closed-over Tensor: (leaf or node, output index, shape/dtype)
    depth: int  # functional._DEPTH at the forward
    drawn: list[Any] | None  # inside xg.jit: the traced values f drew (its recomputation reuses them)
    ex_pos: list[int]  # which argument leaves are the node's explicit inputs
    f: Callable[..., Any]
    keys: dict[tuple[int, int], int]  # closed-over Tensor's key -> its index in ``closed``
    leaves: list[Any]  # the argument leaves; None where an explicit input goes
    n_ex: int
    n_leaves: int  # how many leaves f's output has
    name: str
    out_pos: list[int]  # which output leaves are the node's outputs
    policy: Any  # the DevicePolicy of the forward
    remat: Any  # (the checkpoint policy, the outputs it kept in the forward), or None
    rng: Any  # (generator, its state before the forward), or None
    trace: Any  # the xg.jit trace the forward ran in, or None
    tree: Any  # the structure (a treedef) of (args, kwargs) as called
    versions: list[tuple[list[int], int]]  # version counters of what f read, and their values
    where: tuple[Any, Any]  # the outputs' namespace and device

    def __init__(self) -> None:
        self.g: Any = None
        self.result: Any = None

    def cotangents(self, xp: Any, g: Any, node_args: tuple[Any, ...]) -> list[Any]:
        if self.result is not None and self.g is g:
            return self.result  # (the rule runs once per input; one recomputation serves them all)
        slot = GRAD_SLOT.s
        keep = slot.units, slot.borrowed
        # the outer pass may have donated ``g`` (slot.donated): the nested pass must not overwrite it
        slot.donated = slot.fresh = slot.units = slot.borrowed = None
        try:
            result = self._pullback(g, node_args, is_xpgrad(xp))
        finally:
            slot.units, slot.borrowed = keep
        self.g, self.result = g, result
        return result

    def _pullback(self, g: Any, node_args: tuple[Any, ...], graph: bool) -> list[Any]:
        who = f"checkpoint({self.name})"
        for box, ver in self.versions:
            if box[0] != ver:
                msg = (f"{who}: a Tensor that {self.name} reads (an argument or a closed-over value) was modified "
                       f"in place after the forward (version {box[0]}, expected {ver}); the recomputation in "
                       "backward would see the new values: make a copy before modifying it")
                raise InPlaceModificationError(msg)
        n_ex = self.n_ex
        with enable_grad():
            if graph:  # connected stand-ins: the outer derivative sees the recomputation
                ex = [_core.apply(_identity, (a,), {}) for a in node_args[:n_ex]]
            else:
                ex = []
                for a in node_args[:n_ex]:
                    s = _wrap(a)
                    s._requires_grad = True
                    ex.append(s)
            leaves = list(self.leaves)
            for j, s in zip(self.ex_pos, ex):
                leaves[j] = s
            args, kwargs = self.tree.unflatten(leaves)
            # stand-ins for the closed-over Tensors, made before the recomputation: the engine
            # orders nodes by creation, so a stand-in node must be older than its consumers
            closed = [self._closed_standin(k, graph) for k in range(len(self.closed))]
            marker = next(_core._seq)
            token = _DEPTH.set(self.depth)
            again = RECOMPUTING.set(True)  # (state writes of f, done by the forward, are not done again)
            replay = None
            if self.remat is not None:  # (the outputs the policy kept are taken, not computed again)
                replay = _open_remat(_Remat(self.remat[0], who, self.remat[1]))
            try:
                with _policy_scope(self.policy):
                    out = self._run_rng(args, kwargs)
            finally:
                if replay is not None:
                    _close_remat(replay)
                RECOMPUTING.reset(again)
                _DEPTH.reset(token)
            out_leaves = tree_leaves(out)
            if len(out_leaves) != self.n_leaves:
                msg = (f"{who}: the recomputation in backward returned {len(out_leaves)} values, the forward "
                       f"{self.n_leaves}; {self.name} must compute the same thing every time it is called")
                raise XpgradRuntimeError(msg)
            outs = []
            for k in self.out_pos:
                o = out_leaves[k]
                if not (isinstance(o, Tensor) and o._requires_grad):
                    msg = (f"{who}: output {k} required grad in the forward but not in the recomputation; "
                           f"{self.name} must compute the same thing every time it is called")
                    raise XpgradRuntimeError(msg)
                outs.append(_core.apply(_identity, (o,), {}))
        # re-point the recomputed graph's boundary parents at the stand-ins
        ex_leaves = {id(s) for s in ex if s._node is None}
        ex_nodes = {id(s._node) for s in ex if s._node is not None}
        found = _boundary([o._node for o in outs], marker, ex_leaves, ex_nodes)
        used = [False] * len(closed)
        edits: dict[int, tuple[Node, list[Any], list[int]]] = {}
        for n, i, p in found:
            kk = self.keys.get(_key(n, i, p))
            if kk is None:
                msg = (f"{who}: the recomputation in backward reads a Tensor requiring grad that the forward did "
                       f"not read; {self.name} must compute the same thing every time it is called")
                raise XpgradRuntimeError(msg)
            s = closed[kk]
            used[kk] = True
            e = edits.get(id(n))
            if e is None:
                e = edits[id(n)] = (n, list(n.parents), list(n.pidx))
            e[1][i] = s if s._node is None else s._node
            e[2][i] = 0
        for n, parents, pidx in edits.values():
            n.parents = tuple(parents)
            n.pidx = tuple(pidx)
        targets = ex + [c for c, u in zip(closed, used) if u]
        gs = list(g) if isinstance(g, tuple) else [g]
        live = [(o, c) for o, c in zip(outs, gs) if c is not None]
        if not live or not targets:
            return [None] * (n_ex + len(self.closed))
        if graph:
            live = [(o, c if isinstance(c, Tensor) else _wrap(c)) for o, c in live]
        res = _engine_call([o for o, _ in live], [c for _, c in live], graph, graph, targets, who)
        got = iter(res[n_ex:])
        return list(res[:n_ex]) + [next(got) if u else None for u in used]

    def _closed_standin(self, k: int, graph: bool) -> Tensor:
        p0, pidx, meta = self.closed[k]
        if type(p0) is Node:  # a value computed outside f: a connector to its node
            conn = _wrap(_placeholder(meta, *self.where), p0, pidx)
        else:  # a leaf (a Module's parameter)
            conn = p0
        if graph:
            return _core.apply(_identity, (conn,), {})
        s = _wrap(conn.data)
        s._requires_grad = True
        return s

    def _run_rng(self, args: Any, kwargs: Any) -> Any:
        trace = TRACE.get()
        if self.drawn is not None and trace is not None and trace is self.trace:
            # inside xg.jit: a draw is a call of the program; the recomputation takes the forward's
            # values instead of drawing again (the program draws once per call, as eagerly)
            trace.redraws.append(list(self.drawn))
            try:
                return self.f(*args, **kwargs)
            finally:
                trace.redraws.pop()
        if self.rng is None:
            return self.f(*args, **kwargs)
        gen, state = self.rng
        with gen._lock:
            now = gen._np.bit_generator.state
            gen._np.bit_generator.state = state
        try:
            return self.f(*args, **kwargs)
        finally:
            with gen._lock:
                gen._np.bit_generator.state = now


def _raw(x: Any) -> Any:
    return x.data if isinstance(x, Tensor) else x


class _Remat:
    """Runs the ops of a checkpointed ``f`` under a policy (`REMAT`): the forward keeps the
    outputs the policy names; the recomputation (``saved`` given) takes them back in order."""

    def __init__(self, policy: Callable[..., Any], who: str, saved: list[tuple[str, Any]] | None = None) -> None:
        self.policy = policy
        self.who = who
        self.replay = saved is not None
        self.saved: list[tuple[str, Any]] = [] if saved is None else saved
        self.k = 0

    def apply(self, prim: Primitive, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        token = REMAT.set(None)  # (the op itself runs as usual)
        try:
            keep = bool(self.policy(prim, *map(_raw, args), **kw))
            if not self.replay:
                res = _core.apply(prim, args, kw)
                if keep:
                    self.saved.append((prim.name, tuple(map(_raw, res)) if prim.multi else _raw(res)))
                return res
            if not keep:
                return _core.apply(prim, args, kw)
            if self.k >= len(self.saved) or self.saved[self.k][0] != prim.name:
                msg = (f"{self.who}: the recomputation in backward ran {prim.name} where the forward kept "
                       f"{self.saved[self.k][0] if self.k < len(self.saved) else 'nothing more'}; the function must "
                       "compute the same thing every time it is called")
                raise XpgradRuntimeError(msg)
            value = self.saved[self.k][1]
            self.k += 1
            kept = copy.copy(prim)  # (the same rules; its forward hands back the kept output)
            kept.fwd = lambda xp, *a, **k: value
            return _core.apply(kept, args, kw)
        finally:
            REMAT.reset(token)


def _open_remat(remat: _Remat) -> tuple[Any, Any]:
    """Route the ops of this thread through ``remat`` (READS must be open for `apply` to look)."""
    entry: tuple[int, dict[int, list[int]]] = (threading.get_ident(), {})
    with _READS_LOCK:
        _core.READS.append(entry)
    return entry, REMAT.set(remat)


def _close_remat(opened: tuple[Any, Any]) -> None:
    entry, token = opened
    REMAT.reset(token)
    with _READS_LOCK:
        _core.READS[:] = [e for e in _core.READS if e is not entry]


def _rule(xp: Any, g: Any, ans: Any, i: int, *args: Any) -> Any:
    # the last argument is the call (saved like an argument, so backward frees it)
    return args[-1].cotangents(xp, g, args[:-1])[i]


def checkpoint(f: Callable[..., Any], *, preserve_rng_state: bool = True,
               policy: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """``f`` that keeps only its inputs on the tape and recomputes itself in backward.

    Gradient checkpointing (rematerialization), as JAX's ``jax.checkpoint`` (alias
    [`remat`][xpgrad.remat]) and PyTorch's ``torch.utils.checkpoint.checkpoint``: the returned
    function computes ``f`` and gives the same values and gradients, but under reverse
    mode the tape holds only ``f``'s arguments; backward runs ``f`` again (with
    recording on) from them and differentiates that recomputation. Wrapping each block
    of a deep network trades one extra forward per block for not keeping the blocks'
    intermediates: memory grows with the number of blocks, not of operations.

    Arguments may be arrays, Tensors and (nested) lists, tuples and dicts of them, and
    any other Python value (passed as is: static); keyword arguments too. The output
    is an array or a pytree of arrays. Tensors requiring grad that ``f`` reads without
    receiving them as arguments (an ``nn.Module``'s parameters, a value closed over)
    are found in the forward and get their gradients as if ``f`` were not wrapped:
    ``loss.backward()`` fills a closed-over parameter's ``.grad``.

    It composes: ``grad``/``value_and_grad``/``vjp`` and ``Tensor.backward()``, higher
    order (``grad(grad(checkpoint(f)))``: the recomputation's backward is recorded),
    and forward mode (``jvp``, ``jacfwd``, ``hessian``), which needs no saved values:
    while a ``jvp`` is running, and under ``no_grad``, ``checkpoint(f)(x)`` is just ``f(x)``.
    When nothing ``f`` reads requires grad, its result is returned as it is.

    ``f`` must compute the same thing every time: the recomputation must read the same
    Tensors requiring grad and return the same structure (else XpgradRuntimeError).
    Tensors it reads must not be modified in place between the forward and backward
    (InPlaceModificationError). Random numbers drawn through [`xpgrad.random`][xpgrad.random]
    (``nn.Dropout``) are reproduced: the state of the current policy's generator is
    saved in the forward and restored for the recomputation (then put back), unless
    ``preserve_rng_state=False`` (PyTorch's flag; it saves copying the state per call).

    Args:
        f: the function to checkpoint (a function, a Module, any callable).
        preserve_rng_state: reproduce [`xpgrad.random`][xpgrad.random] draws in the recomputation.
        policy: what to keep of ``f``'s intermediates instead of recomputing them, as
            ``jax.checkpoint``'s ``policy``: one of ``xg.checkpoint_policies``
            (``nothing_saveable``, the default; ``everything_saveable``: recompute
            nothing; ``dots_saveable``, alias ``checkpoint_dots``: keep matrix products),
            or a callable ``policy(prim, *arrays, **params) -> bool`` asked per
            primitive ``f`` runs (``prim.name`` names it; True keeps its output).

    Raises:
        XpgradTypeError: ``f`` is not callable.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> def block(x):
        ...     return xg.sin(xg.sin(x)) * x
        >>> x = np.array([0.5, 1.0])
        >>> g1 = xg.grad(lambda x: xg.sum(xg.checkpoint(block)(x)))(x)
        >>> g2 = xg.grad(lambda x: xg.sum(block(x)))(x)
        >>> bool(np.allclose(g1, g2))
        True
        >>> lin = xg.nn.Linear(2, 1)
        >>> loss = xg.sum(xg.checkpoint(lambda h: xg.tanh(lin(h)))(xg.asarray(x, dtype=xg.float32)))
        >>> loss.backward()
        >>> lin.weight.grad.shape
        (1, 2)
    """
    if not callable(f):
        msg = f"checkpoint: expected a callable to checkpoint, got {type(f).__name__} {f!r}"
        raise XpgradTypeError(msg)
    if policy is not None and not callable(policy):
        msg = (f"checkpoint: policy must be a callable (prim, *arrays, **params) -> bool such as "
               f"xg.checkpoint_policies.dots_saveable, got {type(policy).__name__} {policy!r}")
        raise XpgradTypeError(msg)
    name = _fname(f)
    keeps = None if policy is None or policy is nothing_saveable else policy

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not GRAD_ENABLED.get() or FWD_LEVELS.get() or STACK.get() or keeps is everything_saveable:
            # (forward mode needs no saved values; inside vmap f runs as is: no memory saving yet;
            # everything_saveable keeps all of f's graph: f as it is)
            return f(*args, **kwargs)
        return _forward(f, name, preserve_rng_state, args, kwargs, keeps)

    return wrapped


def _forward(f: Callable[..., Any], name: str, preserve_rng_state: bool, args: tuple[Any, ...],
             kwargs: dict[str, Any], keeps: Callable[..., Any] | None = None) -> Any:
    tree = (args, kwargs)
    leaves, tree_def = tree_flatten(tree)
    ex_pos = [j for j, a in enumerate(leaves) if isinstance(a, Tensor) and a._requires_grad]
    ins = [leaves[j] for j in ex_pos]
    stand = [_standin(a) for a in ins]
    run_leaves = list(leaves)
    for j, s in zip(ex_pos, stand):
        run_leaves[j] = s
    policy = current_policy()
    rng = None
    if preserve_rng_state:
        gen = _current()
        with gen._lock:
            rng = (gen, gen._np.bit_generator.state)
    marker = next(_core._seq)
    a2, k2 = tree_def.unflatten(run_leaves)
    trace = TRACE.get()
    drawn: list[Any] | None = [] if preserve_rng_state and trace is not None else None
    if drawn is not None:
        trace.draw_logs.append(drawn)  # type: ignore[union-attr]
    reads: dict[int, list[int]] = {}  # the version counters of every Tensor f's ops read (closed-over constants too)
    entry = (threading.get_ident(), reads)
    with _READS_LOCK:
        _core.READS.append(entry)
    remat = _Remat(keeps, f"checkpoint({name})") if keeps is not None else None
    rtoken = REMAT.set(remat) if remat is not None else None
    try:
        out = f(*a2, **k2)
    finally:
        if rtoken is not None:
            REMAT.reset(rtoken)
        with _READS_LOCK:
            _core.READS[:] = [e for e in _core.READS if e is not entry]
        if drawn is not None:
            trace.draw_logs.pop()  # type: ignore[union-attr]
    out_leaves, out_def = tree_flatten(out)
    out_pos = [k for k, o in enumerate(out_leaves) if isinstance(o, Tensor) and o._requires_grad]
    if not out_pos:  # nothing f read requires grad: a constant result
        return out
    outs = [_core.apply(_identity, (out_leaves[k],), {}) for k in out_pos]
    boxes: dict[int, list[int]] = dict(reads)
    found = _boundary([o._node for o in outs], marker, {id(s) for s in stand}, set(), boxes)
    keys: dict[tuple[int, int], int] = {}
    closed: list[tuple[Any, int, Any]] = []
    bound: list[Tensor] = []
    for n, i, p in found:
        key = _key(n, i, p)
        if key in keys:
            continue
        keys[key] = len(closed)
        if type(p) is Node:
            meta = n.saved[i] if n.saved is not None else None
            closed.append((p, n.pidx[i], meta))
            bound.append(_wrap(meta, p, n.pidx[i]))
        else:
            closed.append((p, -1, None))
            bound.append(p)
    call = _Call()
    call.f = f
    call.name = name
    call.tree = tree_def
    call.leaves = [None if j in set(ex_pos) else a for j, a in enumerate(leaves)]
    call.ex_pos = ex_pos
    call.n_ex = len(ins)
    call.closed = closed
    call.keys = keys
    call.out_pos = out_pos
    call.n_leaves = len(out_leaves)
    call.policy = policy
    call.remat = (keeps, remat.saved) if remat is not None else None
    call.rng = rng
    call.drawn = drawn
    call.trace = trace
    call.depth = _DEPTH.get()
    for a in leaves:
        if isinstance(a, Tensor):
            boxes[id(a._version)] = a._version
    # every version counter of what f's nodes saved (arguments, closed-over constants and
    # parameters, intermediates), with its value now: backward checks them before recomputing
    call.versions = [(b, b[0]) for b in boxes.values()]
    data_outs = [o.data for o in outs]
    xp = backend_namespace(*data_outs)
    call.where = (xp, array_api_compat.device(data_outs[0]))
    res_leaves = record_opaque(f"checkpoint({name})", (*ins, *bound), data_outs, call, _rule,
                               save=tuple(range(len(ins))), xp=xp)
    result = list(out_leaves)
    for k, r in zip(out_pos, res_leaves):
        result[k] = r
    return out_def.unflatten(result)


#: JAX's name for `checkpoint`
remat = checkpoint
