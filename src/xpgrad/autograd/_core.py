"""Primitives and the recording step.

A [`Primitive`][xpgrad.autograd.Primitive] is a table entry: a name, a forward ``fwd(xp, *arrays, **kw)``
written against a namespace, and one VJP rule ``vjp(xp, g, ans, *args, **kw)`` per
positional argument. [`apply`][xpgrad.autograd.apply] is the per-op hot path: unwrap Tensors, resolve
the backend namespace (cached by types), run the forward on raw arrays, and when
any input requires grad in grad mode, record a [`Node`][xpgrad.autograd.Node] that keeps only what
the rules declared they need. Two paths do this: the general [`apply`][xpgrad.autograd.apply] /
`_record` (any number of arguments, several outputs, views) and the fast path
`apply2` / `_record12` for one or two arguments of a one-output primitive
that makes no view (most ops of a training step; `apply1` is ``apply2`` for one
argument). Both make their Node with `_new_node`, the one place that says
what a node holds.

Forward mode lives here too. Each ``jvp`` opens a *level* (an ever-increasing
int, kept in the context-local tuple `FWD_LEVELS`); a Tensor carries its
tangents in ``_fw``, a dict level -> tangent. When an input carries a tangent of an
active level, [`apply`][xpgrad.autograd.apply] adds the output's tangent for that level: the sum of
the primitive's JVP rules over the inputs that carry one. Levels are processed
from the outermost in; the rules of level ``L`` run with only the levels outside
``L`` active, so a level-``L`` tangent carries only outer tangents (no
perturbation confusion). A tangent is a raw backend array, computed with the
backend namespace, unless something outside must differentiate it (an outer
level, or reverse-mode recording): then the rules run with ``xp`` = ``xpgrad`` on
Tensors. With no ``jvp`` running, the cost on the hot path is one int test.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
import weakref
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from numpy import ndarray as np_ndarray

from .._dispatch import (
    _CACHE,
    _TRACING,
    NUMPY_SCALARS,
    SCALAR_PRIMITIVES,
    backend_namespace,
    check_devices,
    check_known_shapes,
    python_scalars,
    untraced_namespace,
)
from .._dtypes import dtype_name, is_float, kind
from .._exceptions import NonDifferentiableError, XpgradTypeError
from .._policy import check_device_has_dtypes, current_policy
from .._tracing import Tracer as _Tracer
from . import _anomaly
from ._alias import may_alias
from ._grad_mode import GRAD_ENABLED, graph_namespace

__all__ = [
    "COMPOSITES", "DECLARED", "FWD_LEVELS", "PRIMITIVES", "Node", "Primitive", "apply", "apply1", "apply2", "composite", "declare",
    "primitive", "record_opaque",
]

Rule = Callable[..., Any]

#: every primitive by name; the docs' differentiability table is generated from it
PRIMITIVES: dict[str, Primitive] = {}
#: namespace functions without a primitive of their own: name -> what they are composed of
COMPOSITES: dict[str, str] = {}
#: namespace functions that return no differentiable output and need no primitive
#: (queries, creation from shapes): name -> reason
DECLARED: dict[str, str] = {}


#: the active forward-mode levels of this context, outermost first (empty: no jvp running)
FWD_LEVELS: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar("xpgrad_fwd_levels", default=())
#: how many forward levels are open in the whole process: the hot path's one test
_fwd_open = 0
_fwd_lock = threading.Lock()
_fwd_ids = itertools.count(1)


class forward_level:  # noqa: N801 - used like a function: ``with forward_level() as L``
    """Open a new forward-mode level for a block; ``with`` yields its id.

    Ids never repeat, so tangents left on Tensors by a finished ``jvp`` are inert.
    """

    __slots__ = ("level", "token")

    def __enter__(self) -> int:
        global _fwd_open
        self.level = next(_fwd_ids)
        self.token = FWD_LEVELS.set((*FWD_LEVELS.get(), self.level))
        with _fwd_lock:
            _fwd_open += 1
        return self.level

    def __exit__(self, *exc: object) -> None:
        global _fwd_open
        FWD_LEVELS.reset(self.token)
        with _fwd_lock:
            _fwd_open -= 1


def composite(name: str, of: str) -> None:
    """Declare that namespace function ``name`` is differentiable by composition of ``of``."""
    COMPOSITES[name] = of


def declare(name: str, reason: str) -> None:
    """Declare that namespace function ``name`` has no gradient, with the reason."""
    DECLARED[name] = reason
_NOKW: dict[str, Any] = {}

class GradSlots:
    """The backward engine's hand-off to the rule helpers of ``ops._common`` (``scale``,
    ``fresh``, ``unit_from``), one per thread (`GRAD_SLOT`). Outside the engine all four
    fields are None.

    Attributes:
        donated: the upstream gradient donated to the one rule now running (a fresh buffer
            that the engine owns and no one reads afterwards), else None.
        fresh: ``WANT_FRESH`` while the engine runs a rule, replaced by the helper with the
            fresh array it returns.
        units: the *unit* gradients of this pass, id -> array (arrays known to hold only
            ones: the implicit seed of a one-element output and what ``sum``'s rule
            broadcasts from it), or None.
        borrowed: the *borrowed* gradients, id -> array (values ``scale`` returned as they
            are, because ``g`` was a unit: a saved input, say), which the engine copies
            before handing them out.

    The dicts hold their arrays, so no id is reused while they live. (Named slots, not a
    list: an attribute of a ``__slots__`` object reads faster than a list item.)
    """

    __slots__ = ("borrowed", "donated", "fresh", "units")

    def __init__(self) -> None:
        self.donated: Any = None
        self.fresh: Any = None
        self.units: Any = None  # dict[int, Any] | None
        self.borrowed: Any = None  # dict[int, Any] | None

    def save(self) -> tuple[Any, Any, Any, Any]:
        """The four fields, for `restore` (a pass inside a rule of another keeps the outer one's)."""
        return self.donated, self.fresh, self.units, self.borrowed

    def restore(self, fields: tuple[Any, Any, Any, Any]) -> None:
        self.donated, self.fresh, self.units, self.borrowed = fields


#: ``GRAD_SLOT.s``: this thread's `GradSlots` (two threads running backward never see each
#: other's buffers); ``GRAD_SLOT.seeds``: the unit seeds made by the engine's ``_seed`` for
#: the next pass.
class _GradSlot(threading.local):
    def __init__(self) -> None:
        self.s = GradSlots()
        self.seeds: list[Any] = []


GRAD_SLOT = _GradSlot()
WANT_FRESH = object()


class Primitive:
    """One differentiable (or declared non-differentiable) operation.

    Args:
        name: the name used in errors, ``grad_fn`` and the docs table.
        fwd: ``fwd(xp, *arrays, **params)`` -> array (or tuple when ``multi``).
        save: positions of the positional arguments the VJP rules read (None: all).
            Arguments not saved reach the rules as None.
        save_ans: whether the rules read the forward output ``ans``.
        nondiff: the output is integer/boolean: never differentiable (e.g. ``argmax``).
        zero_grad: the output is floating but its derivative is zero almost
            everywhere (``floor``, ``sign``); the output is treated as a constant.
        view: the output may share memory with an argument on some library (reshape,
            slicing, ``flip`` on NumPy, ``real`` of a real array): the library is asked
            (`may_alias`), and an output that does shares
            that argument's version counter and remembers it as its base.
        multi: the forward returns a tuple of arrays (``eigh``, ``unstack``).
        check_dtype: the output dtype may be integer or boolean for some inputs or
            parameters (``astype``, ``sum(dtype=int64)``); such outputs are constants.
        chapter: the standard's chapter, for the docs table.
        batch: its batching rule ``batch(prim, xs, bs, kw, K)`` (see
            `xpgrad.autograd._batched`), read by vmap; or set with `batching`.
        data_dependent_shape: the output's shape depends on the values (``nonzero``,
            ``unique_*``): such a primitive cannot be traced into a fixed-shape program
            nor batched.
        unbatchable: why vmap refuses it (a data-dependent shape), instead of a rule.

    Examples:
        >>> from xpgrad.autograd import primitive
        >>> cube = primitive("cube_example", lambda xp, x: x * x * x, save=(0,))
        >>> cube.defvjp(lambda xp, g, ans, x: g * 3 * x * x)
        >>> cube.defjvp(lambda xp, t, ans, x: t * 3 * x * x)
        >>> import xpgrad as xg
        >>> xg.grad(lambda x: xg.sum(cube(x)))(xg.asarray([2.0]).data)
        array([12.])
    """

    __slots__ = (
        "__weakref__",
        "batch",
        "chapter",
        "check_dtype",
        "const",
        "data_dependent_shape",
        "fast",
        "fwd",
        "jvp_rest",
        "jvps",
        "multi",
        "name",
        "nondiff",
        "save",
        "save0",
        "save1",
        "save_ans",
        "saves",
        "unbatchable",
        "view",
        "vjp_rest",
        "vjps",
        "zero_grad",
    )

    def __init__(
        self,
        name: str,
        fwd: Callable[..., Any],
        *,
        save: tuple[int, ...] | None = None,
        save_ans: bool = False,
        nondiff: bool = False,
        zero_grad: bool = False,
        view: bool = False,
        multi: bool = False,
        check_dtype: bool = False,
        chapter: str = "",
        batch: Callable[..., Any] | None = None,
        data_dependent_shape: bool = False,
        unbatchable: str | None = None,
    ) -> None:
        self.name = name
        self.fwd = fwd
        self.save = save
        self.save_ans = save_ans
        self.nondiff = nondiff
        self.zero_grad = zero_grad
        self.const = nondiff or zero_grad
        self.view = view
        self.multi = multi
        self.check_dtype = check_dtype
        self.chapter = chapter
        self.batch = batch
        self.data_dependent_shape = data_dependent_shape
        self.unbatchable = unbatchable
        #: one output, not a view: calls with one or two arguments take the fast path (apply2)
        self.fast = not (multi or view)
        #: arguments 0 and 1 are saved for the rules (read by the fast path's recording, _record12)
        self.save0 = save is None or 0 in save
        self.save1 = save is None or 1 in save
        #: the rules read saved data (so a freed node cannot be gone through again)
        self.saves = save is None or bool(save) or save_ans
        self.vjps: tuple[Rule | None, ...] = ()
        self.vjp_rest: Rule | None = None
        self.jvps: tuple[Rule | None, ...] = ()
        self.jvp_rest: Rule | None = None

    def defvjp(self, *rules: Rule | None, rest: Rule | None = None) -> None:
        """Register one VJP rule per positional argument (None: not differentiable there).

        ``rest(xp, g, ans, i, *args, **kw)`` covers variadic arguments beyond ``rules``.
        """
        self.vjps = rules
        self.vjp_rest = rest

    def defjvp(self, *rules: Rule | None, rest: Rule | None = None) -> None:
        """Register one forward-mode (JVP) rule per positional argument.

        ``rule_i(xp, t, ans, *args, **kw)`` returns the output's tangent caused by the
        tangent ``t`` of argument ``i`` (the output's shape and dtype; a tuple for
        ``multi`` primitives, None entries being zero); the contributions of several
        arguments are summed. Unlike VJP rules, JVP rules see every argument's value.
        None: not differentiable there. ``rest(xp, t, ans, i, *args, **kw)`` covers
        variadic arguments beyond ``rules``.
        """
        self.jvps = rules
        self.jvp_rest = rest

    def batching(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """Set ``rule`` as the batching rule (a decorator: ``@prim.batching``)."""
        self.batch = rule
        return rule

    def jvp_rule(self, i: int) -> Rule | None:
        if i < len(self.jvps):
            return self.jvps[i]
        rest = self.jvp_rest
        if rest is None:
            return None
        return lambda xp, t, ans, *args, **kw: rest(xp, t, ans, i, *args, **kw)

    def vjp_rule(self, i: int) -> Rule | None:
        if i < len(self.vjps):
            return self.vjps[i]
        rest = self.vjp_rest
        if rest is None:
            return None
        return lambda xp, g, ans, *args, **kw: rest(xp, g, ans, i, *args, **kw)

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return apply(self, args, kw)

    def bind(self, *args: Any, **params: Any) -> Any:
        """Apply to the arrays ``args`` with the keyword ``params`` (JAX's ``bind``): what
        the body of a registry declaration returns once it has checked its arguments."""
        return apply(self, args, params)

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


def primitive(name: str, fwd: Callable[..., Any], **opts: Any) -> Primitive:
    """Create and register a primitive (see [`Primitive`][xpgrad.autograd.Primitive])."""
    if name in PRIMITIVES:
        msg = f"primitive: a primitive named {name!r} is already registered"
        raise ValueError(msg)
    p = Primitive(name, fwd, **opts)
    PRIMITIVES[name] = p
    return p


class ArgMeta:
    """What a rule sees of an argument whose data was not saved: shape and dtype, and for
    a chunked (Dask) array its chunks, so that a gradient broadcast to its shape streams
    chunk by chunk (``ops._common.broadcast_like``)."""

    __slots__ = ("chunks", "dtype", "shape")

    def __init__(self, shape: Any, dtype: Any, chunks: Any = None) -> None:
        self.shape = shape
        self.dtype = dtype
        self.chunks = chunks

    @property
    def ndim(self) -> int:
        return len(self.shape)


class Node:
    """A recorded application of a primitive: what backward needs, nothing more.

    ``parents[i]`` is None (no gradient wanted), a leaf Tensor (accumulate into its
    ``.grad``) or the Node that produced argument i (output ``pidx[i]``). Made only
    by `_new_node`, the one place that says what a node holds.
    """

    __slots__ = (
        "__weakref__",
        "ans",
        "arrays",
        "checks",
        "freed",
        "fw",
        "hooks",
        "kw",
        "n_out",
        "parents",
        "pidx",
        "prim",
        "saved",
        "seq",
        "stack",
        "xp",
    )

    prim: Primitive
    xp: ModuleType
    kw: dict[str, Any]
    parents: Sequence[Any]  # per argument: None, a leaf Tensor or the producing Node
    pidx: Sequence[int]
    # per argument what the rules see: the data where saved, else its ArgMeta (shape and
    # dtype; None for a scalar not saved); None once freed (kept when the rules read no data)
    saved: Sequence[Any] | None
    arrays: int  # bit i set: argument i is an array (for viz.to_dot, after backward freed ``saved``)
    # flat (position, version box, version at record, ...); position -1 - j: output j
    checks: tuple[Any, ...] | None
    ans: Any
    n_out: int
    hooks: dict[int, list[Callable[..., Any]]] | None
    freed: bool
    # forward mode: (tangent dict of each argument, of the output(s)) when any was set,
    # so that a recorded backward pass (fwd-over-rev) sees the saved values' tangents
    fw: tuple[list[Any], Any] | None
    seq: int  # creation order: a node's parents always have a smaller seq
    stack: Any  # set only under detect_anomaly(): where the op was created (read with getattr)

    def name(self) -> str:
        return self.prim.name

    def __repr__(self) -> str:
        return f"<{self.prim.name}>"

    def free(self) -> None:
        if self.prim.saves:  # (else saved holds only shapes: a later pass may still read them)
            self.saved = None
        self.ans = None
        self.checks = None
        self.fw = None
        self.freed = True


def _fail_forward(prim: Primitive, datas: list[Any], kw: dict[str, Any], err: Exception) -> None:
    """Turn a backend error in a forward into a clear one where we can say more."""
    for i, d in enumerate(datas):
        if d is None:
            msg = f"{prim.name}: argument {i} is None; expected an array, a Tensor or a Python scalar"
            raise XpgradTypeError(msg) from err
    check_devices(*datas, func=prim.name)  # raises DeviceMismatchError when that is the cause
    check_known_shapes(prim.name, [getattr(d, "shape", ()) for d in datas], err)  # Dask's NaN sizes
    if kw.get("device") is not None:  # e.g. float64 to array-api-strict's no_float64 device
        check_device_has_dtypes(prim.name, kw["device"], datas, err)
    try:
        raise err
    finally:
        del err  # no cycle error -> traceback -> this frame -> error: the graph dies by refcount


_seq = itertools.count()  # next() on a count is atomic under the GIL
_new = object.__new__

# Handed down by _tensor.py when it is imported (it imports this module).
Tensor: Any = None
_wrap: Any = None


def _bind(tensor_cls: type, wrap: Any) -> None:
    global Tensor, _wrap
    Tensor = tensor_cls
    _wrap = wrap


#: how many vmap levels are open in the whole process: the hot path's one test (see _batched)
_vmap_open = 0


class _NoBatched:  # (until _batched binds the real class: nothing is an instance)
    pass


Batched: Any = _NoBatched
_vmap_apply: Any = None
_vmap_getitem: Any = None  # a Tensor indexed by a key holding batched index arrays
_vmap_write: Any = None  # an in-place write of a batched value (or by a batched key) into a plain Tensor
_vmap_stack: Any = None  # the ContextVar of the open vmap levels (autograd._batched.STACK)


def raw_dtype(t: Any) -> Any:
    """The backend dtype of Tensor ``t`` (of its physical value when Batched)."""
    return t._inner.data.dtype if isinstance(t, Batched) else t.data.dtype


def _bind_batched(cls: type, vmap_apply: Any, getitem: Any, write: Any, stack: Any) -> None:
    global Batched, _vmap_apply, _vmap_getitem, _vmap_write, _vmap_stack
    Batched = cls
    _vmap_apply = vmap_apply
    _vmap_getitem = getitem
    _vmap_write = write
    _vmap_stack = stack


#: open collectors (``checkpoint``'s forward), each (thread id, {id: version counter}) of every
#: Tensor an op of that thread reads: backward refuses one modified in place before the
#: recomputation reads it again
READS: list[tuple[int, dict[int, list[int]]]] = []

#: ``checkpoint(policy=)`` (see `xpgrad._checkpoint`): None, or what runs each op of the function
#: being checkpointed (``.apply(prim, args, kw)``: it saves, or reuses, the outputs the policy
#: names). Read only while READS is open, so that ops outside a checkpoint pay nothing for it.
REMAT: contextvars.ContextVar[Any] = contextvars.ContextVar("REMAT", default=None)


def _note_reads(args: Sequence[Any]) -> None:
    me = threading.get_ident()
    for a in args:
        if isinstance(a, Tensor):
            v = a._version
            for tid, r in READS:
                if tid == me:
                    r[id(v)] = v


def apply(prim: Primitive, args: Sequence[Any], kw: dict[str, Any]) -> Any:
    """Run ``prim`` on ``args`` (Tensors, backend arrays, Python scalars); record if needed.

    The general path: any number of arguments, several outputs, views. One or two
    arguments of a ``fast`` primitive take `apply2` (most ops of a training step).
    """
    if prim.fast:
        n = len(args)
        if n == 1:
            return apply2(prim, args[0], _NOARG, kw)
        if n == 2:
            return apply2(prim, args[0], args[1], kw)
    if READS:
        _note_reads(args)
        remat = REMAT.get()
        if remat is not None:
            return remat.apply(prim, args, kw)
    if prim in SCALAR_PRIMITIVES:  # (where, clip: NumPy scalars next to arrays are Python scalars)
        args = python_scalars(args)
    if _vmap_open:
        for a in args:
            if isinstance(a, Batched):
                return _vmap_apply(prim, args, kw)
    rg = False
    datas = []
    for a in args:
        if isinstance(a, Tensor):
            datas.append(a.data)
            if a._requires_grad:
                rg = True
        else:
            datas.append(a)
    key = tuple(map(type, datas))
    xp = _CACHE.get(key)
    if xp is None or _TRACING[0]:  # (inside xg.jit, backend_namespace gives the recording namespace)
        xp = backend_namespace(*datas, func=prim.name)
    try:
        out = prim.fwd(xp, *datas, **kw)
    except Exception as e:  # noqa: BLE001 - re-raised as is, or as a clearer device error
        _fail_forward(prim, datas, kw, e)
    if not rg or prim.const or not GRAD_ENABLED.get() or (
            prim.check_dtype and not _all_float(out, prim.multi)):
        if prim.multi:
            res = tuple(_wrap_view(prim, args, kw, o, None, 0, j) for j, o in enumerate(out)) if prim.view else (
                tuple(_wrap(o) for o in out))
        elif prim.view:
            res = _wrap_view(prim, args, kw, out, None, 0, 0)
        else:
            res = _wrap(out)
    else:
        res = _record(prim, xp, args, datas, kw, out)
    if (_fwd_open and not prim.const and FWD_LEVELS.get()) or _anomaly.depth:
        _tail(prim, xp, args, datas, kw, out, res)
    return res


def apply1(prim: Primitive, a: Any, kw: dict[str, Any]) -> Any:
    """[`apply`][xpgrad.autograd.apply] for one argument (``apply(prim, (a,), kw)`` without the tuple)."""
    return apply2(prim, a, _NOARG, kw)


#: ``b`` of `apply2` and `_record12` for a one-argument call
_NOARG: Any = object()


def _all_float(out: Any, multi: bool) -> bool:
    """Whether the output (every output, when ``multi``) is floating-point or complex."""
    if multi:
        return all(is_float(o.dtype) for o in out)
    return is_float(out.dtype)


def _wrap_view(prim: Primitive, args: Sequence[Any], kw: dict[str, Any], o: Any, node: Any, oidx: int,
               j: int) -> Any:
    """Wrap output ``j`` of a ``view`` primitive: sharing the counter of the argument it aliases.

    The library says whether ``o`` shares memory with an argument (a NumPy flip does, a
    boolean-mask selection does not); an output that does shares that argument's version
    counter, and keeps ``_base = (argument, prim, kw, j, position)`` so that a recorded
    in-place write into it can be carried back to the argument (``Tensor._inplace``).
    """
    for pos, a in enumerate(args):
        if isinstance(a, Tensor) and may_alias(o, a.data):
            t = _wrap(o, node, oidx, a._version)
            t._base = (a, prim, kw, j, pos)
            _note_view(a, t)
            return t
    return _wrap(o, node, oidx)


def _note_view(base: Any, view: Any) -> None:
    """Remember (weakly) that ``view`` is a view of ``base``: a recorded write into ``base``
    regenerates it from the new base (``Tensor._refresh_views``), as PyTorch regenerates a
    view's graph after an in-place update of its base."""
    views: list[Any] | None = getattr(base, "_views", None)
    if views is None:
        base._views = [weakref.ref(view)]
        return
    views.append(weakref.ref(view))
    n = len(views)
    if n >= 16 and not n & (n - 1):  # (at each power of two: the dead ones out, amortized O(1))
        views[:] = [r for r in views if r() is not None]


# The fast path: `apply` and `_record` for one or two arguments of a ``fast``
# primitive (one output, not a view; an integer result of a ``check_dtype`` one is a
# constant, as in `apply`): most ops of a training step. The same steps and the same
# Node (through ``_new_node`` and ``_wrap``), without the per-argument loop, the lists and
# the ``*args`` calls (about half the cost per op).
#: Python scalars: an elementwise function given only these (``xg.log(2.0)``) computes on a
#: 0-d array of the policy's library and device (NumPy's scalars are NumPy's 0-d values)
_SCALAR_TYPES = frozenset({bool, int, float, complex})
#: Python's and NumPy's scalars: a function of these only is a constant, inside xg.jit too
_SCALARS = _SCALAR_TYPES | frozenset(NUMPY_SCALARS)


def _scalar_array(xp: Any, v: Any) -> Any:
    """``v`` (a Python scalar) as a 0-d array of ``xp`` on the policy's device: the standard's
    elementwise functions take arrays, and array-api-strict and torch refuse a scalar
    (``xp.log(2.0)``), where NumPy and JAX take it."""
    return xp.asarray(v, device=current_policy().device)


def _foreign_numpy_scalar(t: Any, d: Any, other: Any) -> Any:
    """``d`` (the data of argument ``t``) as a Python scalar when it is NumPy's scalar held by a
    constant Tensor and ``other`` is an array of another library: NumPy's result of a
    function of scalars only (``xp.log(2 * xp.pi)``), which array-api-strict and torch
    refuse beside their arrays. Next to NumPy arrays it keeps NumPy's meaning."""
    if type(d) not in NUMPY_SCALARS or (isinstance(t, Tensor) and t._requires_grad):
        return d
    if type(other) is _Tracer:  # (inside xg.jit: the library of the traced array)
        other = other._w
    if type(other) in NUMPY_SCALARS or isinstance(other, (np_ndarray, bool, int, float, complex)):
        return d
    return d.item()


def _numpy_scalars(a: Any, b: Any, da: Any, db: Any) -> tuple[Any, Any, Any, Any]:
    """`apply2`'s arguments ``a, b`` and their data ``da, db`` when one of the data is NumPy's
    scalar, for a primitive of ``SCALAR_PRIMITIVES``: a raw NumPy scalar next to an array is a
    Python scalar, where the standard takes one."""
    if (da is a and type(a) in NUMPY_SCALARS) or (db is b and type(b) in NUMPY_SCALARS):
        a, b = python_scalars((a, b))
        if not isinstance(a, Tensor):  # (a Tensor's data is unchanged; a raw argument converted)
            da = a
        if not isinstance(b, Tensor):
            db = b
    else:  # a constant Tensor of NumPy's scalar (xp.log(2 * xp.pi)) next to another library's array
        da, db = _foreign_numpy_scalar(a, da, db), _foreign_numpy_scalar(b, db, da)
    return a, b, da, db


def _namespace1(prim: Primitive, da: Any) -> tuple[Any, Any]:
    """`apply2`'s namespace for one argument's data ``da`` when the cache has none (or inside
    xg.jit), and ``da`` (a Python scalar as a 0-d array of it). A function of scalars only is a
    constant: computed, inside xg.jit too, as eager code computes it."""
    xp = untraced_namespace(da, func=prim.name) if type(da) in _SCALARS else backend_namespace(da, func=prim.name)
    if type(da) in _SCALAR_TYPES:
        da = _scalar_array(xp, da)
    return xp, da


def _namespace2(prim: Primitive, da: Any, db: Any) -> tuple[Any, Any]:
    """`_namespace1` for two arguments' data: the namespace, and ``da``."""
    xp = untraced_namespace(da, db, func=prim.name) if type(da) in _SCALARS and type(db) in _SCALARS else (
        backend_namespace(da, db, func=prim.name))
    if type(da) in _SCALAR_TYPES and type(db) in _SCALAR_TYPES:
        da = _scalar_array(xp, da)
    return xp, da


def apply2(prim: Primitive, a: Any, b: Any, kw: dict[str, Any]) -> Any:
    """[`apply`][xpgrad.autograd.apply] for arguments ``(a, b)``, or ``(a,)`` when ``b`` is ``_NOARG`` (``apply(prim,
    (a, b), kw)`` without the tuple); a primitive that is not ``fast`` goes to [`apply`][xpgrad.autograd.apply]."""
    one = b is _NOARG
    if not prim.fast:
        return apply(prim, (a,) if one else (a, b), kw)
    if READS:
        _note_reads((a,) if one else (a, b))
        remat = REMAT.get()
        if remat is not None:
            return remat.apply(prim, (a,) if one else (a, b), kw)
    if _vmap_open and (isinstance(a, Batched) or isinstance(b, Batched)):
        args = (a,) if one else (a, b)
        return _vmap_apply(prim, python_scalars(args) if prim in SCALAR_PRIMITIVES else args, kw)
    if isinstance(a, Tensor):
        da = a.data
        rg = a._requires_grad
    else:
        da = a
        rg = False
    if one:
        db = b
        xp = _CACHE.get((type(da),))
        if xp is None or _TRACING[0]:
            xp, da = _namespace1(prim, da)
        try:
            out = prim.fwd(xp, da, **kw) if kw else prim.fwd(xp, da)
        except Exception as e:  # noqa: BLE001 - re-raised as is, or as a clearer device error
            _fail_forward(prim, [da], kw, e)
    else:
        if isinstance(b, Tensor):
            db = b.data
            if b._requires_grad:
                rg = True
        else:
            db = b
        if (type(da) in NUMPY_SCALARS or type(db) in NUMPY_SCALARS) and prim in SCALAR_PRIMITIVES:
            a, b, da, db = _numpy_scalars(a, b, da, db)
        xp = _CACHE.get((type(da), type(db)))
        if xp is None or _TRACING[0]:
            xp, da = _namespace2(prim, da, db)
        try:
            out = prim.fwd(xp, da, db, **kw) if kw else prim.fwd(xp, da, db)
        except Exception as e:  # noqa: BLE001 - re-raised as is, or as a clearer device error
            _fail_forward(prim, [da, db], kw, e)
    if rg and not prim.const and GRAD_ENABLED.get() and not (prim.check_dtype and not is_float(out.dtype)):
        res = _record12(prim, xp, a, b, da, db, kw, out)
    else:
        res = _wrap(out)
    if (_fwd_open and not prim.const and FWD_LEVELS.get()) or _anomaly.depth:
        _tail(prim, xp, (a,) if one else (a, b), [da] if one else [da, db], kw, out, res)
    return res


def _no_rule(prim: Primitive, i: int) -> NonDifferentiableError:
    msg = (
        f"{prim.name}: argument {i} requires grad, but {prim.name} is not "
        f"differentiable with respect to argument {i}; detach() it or pass "
        "a constant"
    )
    return NonDifferentiableError(msg)


def _new_node(prim: Primitive, xp: ModuleType, kw: dict[str, Any], parents: Sequence[Any], pidx: Sequence[int],
              saved: Sequence[Any], arrays: int, n_out: int) -> Node:
    """A new Node: every field it holds is set here (the recorders then set ``ans`` and
    ``checks``, which name the wrapped outputs)."""
    node = _new(Node)  # (no __init__ frame)
    node.prim = prim
    node.xp = xp
    node.kw = kw
    node.parents = parents
    node.pidx = pidx
    node.saved = saved
    node.arrays = arrays
    node.n_out = n_out
    node.ans = None
    node.checks = ()
    node.hooks = None
    node.freed = False
    node.fw = None
    node.seq = next(_seq)
    if _anomaly.depth and _anomaly.ANOMALY.get() is not None:
        node.stack = _anomaly.user_stack()
    return node


# Everything a node keeps outlives the forward pass, so each object it allocates costs
# twice: once to make, and again in every garbage-collector pass over the young
# generation until backward frees it (about as much again as recording itself, for a
# long chain). The record functions therefore allocate as few objects as they can: no
# ArgMeta for a saved argument (its data has the shape), shared index tuples, and the
# version checks as one flat tuple ``(position, box, version, position, box, version...)``.
_Z1 = (0,)
_Z2 = (0, 0)


#: (shape, id(dtype)) -> its ArgMeta, shared by every node that needs one (they are
#: read-only): the arguments of a training step have a handful of shapes, so recording
#: usually allocates none. Bounded (a Dask NaN size never compares equal, so never hits).
_METAS: dict[tuple[Any, int], ArgMeta] = {}


#: array type -> whether its arrays are chunked (Dask's: they have ``chunks`` and ``rechunk``)
_CHUNKED: dict[type, bool] = {}


def _meta(d: Any) -> ArgMeta:
    """The ArgMeta (shape and dtype; chunks for a chunked array) of array ``d``."""
    t = type(d)
    chunked = _CHUNKED.get(t)
    if chunked is None:
        chunked = hasattr(d, "chunks") and hasattr(d, "rechunk")
        if t is not _Tracer:  # (xg.jit's one Tracer type stands for arrays of every library: asked each time)
            _CHUNKED[t] = chunked
    if chunked:  # (not shared: two arrays of one shape may be chunked differently)
        return ArgMeta(d.shape, d.dtype, d.chunks)
    dt = d.dtype
    key = (d.shape, id(dt))  # (the entry holds the dtype: its id cannot be reused meanwhile)
    m = _METAS.get(key)
    if m is None:
        if len(_METAS) >= 4096:
            _METAS.clear()
        m = _new(ArgMeta)
        m.shape = key[0]
        m.dtype = dt
        m.chunks = None
        _METAS[key] = m
    return m


def _record12(prim: Primitive, xp: ModuleType, a: Any, b: Any, da: Any, db: Any, kw: dict[str, Any],
             out: Any) -> Any:
    """`_record` for arguments ``(a, b)``, or ``(a,)`` when ``b`` is ``_NOARG``, of a ``fast``
    primitive, at least one requiring grad; unrolled (no loop, no lists)."""
    checks: tuple[Any, ...] = ()
    # argument 0
    pa = None
    ia = 0
    sa = da
    ta = isinstance(a, Tensor)
    arr_a = ta or hasattr(da, "shape")
    if ta and a._requires_grad:
        if (prim.vjps[0] if prim.vjps else prim.vjp_rest) is None:
            raise _no_rule(prim, 0)
        pa = a._node
        if pa is None:
            pa = a
        ia = a._oidx
    if not prim.save0:
        sa = _meta(da) if arr_a else None
    elif ta:
        v = a._version
        checks = (0, v, v[0])
    if b is _NOARG:
        node = _new_node(prim, xp, kw, (pa,), _Z1 if ia == 0 else (ia,), (sa,), arr_a, 1)
    else:
        # argument 1
        pb = None
        ib = 0
        sb = db
        tb = isinstance(b, Tensor)
        arr_b = tb or hasattr(db, "shape")
        if tb and b._requires_grad:
            if (prim.vjps[1] if len(prim.vjps) > 1 else prim.vjp_rest) is None:
                raise _no_rule(prim, 1)
            pb = b._node
            if pb is None:
                pb = b
            ib = b._oidx
        if not prim.save1:
            sb = _meta(db) if arr_b else None
        elif tb:
            v = b._version
            checks = checks + (1, v, v[0])  # noqa: RUF005 - (() + t is t itself: no copy)
        node = _new_node(prim, xp, kw, (pa, pb), _Z2 if ia == 0 and ib == 0 else (ia, ib), (sa, sb),
                         arr_a | (arr_b << 1), 1)
    t = _wrap(out, node)
    if prim.save_ans:
        node.ans = out
        checks = checks + (-1, t._version, 0)  # noqa: RUF005 - (faster; a fresh output: version 0)
    node.checks = checks
    return t


def _record(prim: Primitive, xp: ModuleType, args: Sequence[Any], datas: Any,
            kw: dict[str, Any], out: Any) -> Any:
    """Record a Node for ``prim`` applied to ``args`` (their backend arrays ``datas``) giving
    ``out``, and return the wrapped output(s): the general case (any number of arguments,
    several outputs, views; also used by custom functions and checkpoint)."""
    save = prim.save
    vjps = prim.vjps
    nrules = len(vjps)
    n = len(args)
    parents: list[Any] = [None] * n  # filled by index: cheaper than appends
    pidx: list[int] = [0] * n
    saved: list[Any] = [None] * n
    checks: list[Any] = []
    for i, a in enumerate(args):
        d = datas[i]
        keep = save is None or i in save
        if isinstance(a, Tensor):
            if a._requires_grad:
                if (vjps[i] if i < nrules else prim.vjp_rest) is None:
                    raise _no_rule(prim, i)
                p = a._node
                parents[i] = a if p is None else p
                pidx[i] = a._oidx
            if keep:
                saved[i] = d
                v = a._version
                checks += (i, v, v[0])
            else:
                saved[i] = _meta(d)
        elif keep:
            saved[i] = d
        elif hasattr(d, "shape"):
            saved[i] = _meta(d)
    arrays = sum(1 << i for i, d in enumerate(datas) if hasattr(d, "shape"))
    n_out = len(out) if prim.multi else 1
    node = _new_node(prim, xp, kw, parents, pidx, saved, arrays, n_out)
    if prim.multi:
        # integer and boolean outputs (unique_all's indices and counts) are constants
        outs = tuple((_wrap_view(prim, args, kw, o, node, j, j) if prim.view else _wrap(o, node, j))
                     if is_float(o.dtype) else _wrap(o) for j, o in enumerate(out))
        if prim.save_ans:
            node.ans = out
            for j, t in enumerate(outs):
                v = t._version
                checks += (-1 - j, v, v[0])
        node.checks = tuple(checks)
        return outs
    t = _wrap_view(prim, args, kw, out, node, 0, 0) if prim.view else _wrap(out, node)
    if prim.save_ans:
        node.ans = out
        v = t._version
        checks += (-1, v, v[0])
    node.checks = tuple(checks)
    return t


def _opaque_forward(xp: Any, *args: Any, **kw: Any) -> Any:
    """The forward of an opaque call's primitive: never run (the call ran before it was recorded)."""
    msg = "record_opaque: an opaque call's node has no forward of its own; it records a call that already ran"
    raise XpgradTypeError(msg)


def record_opaque(name: str, inputs: Sequence[Any], outputs: Sequence[Any], call: Any, vjp: Rule, *,
                  save: tuple[int, ...] | None = None, xp: ModuleType | None = None) -> list[Any]:
    """Record a call that already ran (a custom rule's function, a checkpointed function, a jitted
    call) as one node on the tape, and return its outputs as Tensors of that node.

    The one path for an opaque call: a primitive of its own (``name``, as ``grad_fn`` and errors
    show it) whose forward is never run. ``inputs``: the Tensors the node reads (its parents where
    they require grad; backward refuses one modified in place since). ``outputs``: the call's
    output arrays. ``call``: what computes the cotangents, handed to the rule as the last
    argument (saved like an argument, so backward frees it with the node).
    ``vjp(xp, g, ans, i, *datas, call)``: input ``i``'s cotangent, ``g`` a tuple when there are
    several outputs. ``save``: the positions of the inputs ``vjp`` reads (None: all); ``xp``:
    the outputs' namespace, when the caller has it already.
    """
    multi = len(outputs) != 1
    prim = Primitive(name, _opaque_forward, save=None if save is None else (*save, len(inputs)), multi=multi,
                     chapter="internal")
    prim.defvjp(rest=vjp)
    if xp is None:
        xp = backend_namespace(*outputs)
    datas = [t.data for t in inputs]
    res = _record(prim, xp, (*inputs, call), [*datas, call], {}, tuple(outputs) if multi else outputs[0])
    return list(res) if multi else [res]


# ---------------------------------------------------------------------- forward mode
def _tail(prim: Primitive, xp: ModuleType, args: Sequence[Any], datas: list[Any], kw: dict[str, Any], out: Any,
          res: Any) -> None:
    """The one end of [`apply`][xpgrad.autograd.apply] and `apply2`, run while anomaly detection is open
    anywhere or a ``jvp`` is, here, and ``prim`` is not constant (the callers test this first, so
    the hot path pays no call): the forward's output checked for NaN; the outputs' tangents attached."""
    check = _anomaly.depth and _anomaly.ANOMALY.get()
    if check:
        _anomaly.check_forward(prim.name, xp, datas, out, prim.multi)
    active = FWD_LEVELS.get() if _fwd_open and not prim.const else ()
    if not active:
        return
    present: set[int] = set()
    for a in args:
        if isinstance(a, Tensor) and a._fw:
            present.update(lv for lv in a._fw if lv in active)
    if not present or (prim.check_dtype and not _all_float(out, prim.multi)):
        return
    outs = res if prim.multi else (res,)
    for level in sorted(present):
        _tangent(prim, xp, level, active, args, datas, kw, out, outs)
        if check:
            _anomaly.check_tangents(prim.name, xp, level, args, outs)
    node = outs[0]._node
    if node is not None and node.prim is prim:
        node.fw = ([a._fw if isinstance(a, Tensor) else None for a in args],
                   [o._fw for o in outs] if prim.multi else outs[0]._fw)


def _needs_tape(t: Any, below: tuple[int, ...]) -> bool:
    """Whether ``t`` must stay a Tensor: it is on the tape or carries an outer tangent."""
    if not isinstance(t, Tensor):
        return False
    if t._requires_grad:
        return True
    fw = t._fw
    return bool(fw) and any(lv in below for lv in fw)


def _tangent(prim: Primitive, xp: ModuleType, level: int, active: tuple[int, ...], args: Sequence[Any],
             datas: list[Any], kw: dict[str, Any], out: Any, outs: tuple[Any, ...]) -> None:
    """Compute and attach the outputs' tangent of ``level``."""
    below = tuple(lv for lv in active if lv < level)
    ts = [a._fw.get(level) if isinstance(a, Tensor) and a._fw else None for a in args]
    # differentiable tangent computation: when an outer level or the tape must see it
    hi = (GRAD_ENABLED.get() and any(isinstance(a, Tensor) and a._requires_grad for a in args)) or any(
        _needs_tape(t, below) for t in ts
    ) or (bool(below) and any(_needs_tape(a, below) for a in args)) or (
        _vmap_open and any(isinstance(t, Batched) for t in ts))  # (a batched tangent: see functional._dual)
    total: Any = None
    if hi:
        xg = graph_namespace()  # (xpgrad itself: the rules run on Tensors)
        token = FWD_LEVELS.set(below)  # the rules of this level see only the outer levels
        try:
            targs = [a if isinstance(a, Tensor) or not hasattr(a, "shape") else _wrap(a) for a in args]
            ans = tuple(outs) if prim.multi else outs[0]
            for i, t in enumerate(ts):
                if t is not None:
                    r = _rule(prim, i)(xg, t if isinstance(t, Tensor) else _wrap(t), ans, *targs, **kw)
                    total = _accumulate(total, r, prim.multi)
            if total is None:
                return
            if prim.multi:
                total = tuple(None if r is None else _fit_tangent(xg, r, o.data, True)
                              for r, o in zip(total, outs))
            else:
                total = _fit_tangent(xg, total, outs[0].data, True)
        finally:
            FWD_LEVELS.reset(token)
    else:
        for i, t in enumerate(ts):
            if t is not None:
                total = _accumulate(total, _rule(prim, i)(xp, t, out, *datas, **kw), prim.multi)
        if total is None:
            return
        if prim.multi:
            total = tuple(None if r is None else _fit_tangent(xp, r, o, False) for r, o in zip(total, out))
        else:
            total = _fit_tangent(xp, total, out, False)
    for o, r in zip(outs, total if prim.multi else (total,)):
        if r is None or not is_float(o.data.dtype):
            continue
        if isinstance(r, Tensor) and not isinstance(r, Batched) and not _needs_tape(r, below):
            r = r.data  # a constant: keep it raw (cheap downstream)
        o._fw = {level: r} if not o._fw else {**o._fw, level: r}


def _rule(prim: Primitive, i: int) -> Rule:
    rule = prim.jvp_rule(i)
    if rule is None:
        msg = (
            f"{prim.name}: no forward-mode (JVP) rule for argument {i}, but it carries a tangent; "
            f"{prim.name} cannot be differentiated in forward mode with respect to argument {i}"
        )
        raise NonDifferentiableError(msg)
    return rule


def _accumulate(total: Any, r: Any, multi: bool) -> Any:
    if r is None:
        return total
    if total is None:
        return r
    if multi:
        return tuple(b if a is None else a if b is None else a + b for a, b in zip(total, r))
    return total + r


def _fit_tangent(xp: Any, t: Any, like: Any, tensors: bool) -> Any:
    """Bring a tangent to the output's shape and dtype (broadcast; real part; cast)."""
    if not tensors and isinstance(t, Tensor):
        t = t.data  # a rule on raw arrays called an xpgrad function (a custom_jvp one, say)
    if not hasattr(t, "shape"):  # a Python scalar from a rule
        t = xp.asarray(t, dtype=like.dtype if not tensors else None)
    shape = tuple(like.shape)
    tshape = tuple(t.shape)
    if tshape != shape and not (len(tshape) == len(shape) and all(
            a == b or a is None or b is None or a != a or b != b for a, b in zip(tshape, shape))):
        t = xp.broadcast_to(t, shape)  # (sizes unknown until computed, Dask's NaN, count as equal)
    return fit_dtype(xp, t, like.dtype, tensors)


def broadcast_like(xp: Any, g: Any, like: Any) -> Any:
    """``xp.broadcast_to(g, like.shape)``; chunked like ``like`` when it is a chunked (Dask)
    array or its ArgMeta, so that what is computed from it streams chunk by chunk (a
    broadcast to one chunk of all rows makes Dask hold every chunk of the data at once).
    Used by the engine to undo a reduction and by the rules that broadcast themselves."""
    chunks = getattr(like, "chunks", None)
    gchunks = getattr(g, "chunks", None)
    if chunks is not None and gchunks is not None:
        # Dask keeps the chunks of the dimensions g has (size > 1); the new and the size-1
        # dimensions take like's
        lead = len(chunks) - len(gchunks)
        chunks = tuple(c if i < lead or g.shape[i - lead] == 1 else gchunks[i - lead] for i, c in enumerate(chunks))
        return xp.broadcast_to(g, tuple(like.shape), chunks=chunks)
    return xp.broadcast_to(g, tuple(like.shape))


def fit_dtype(xp: Any, g: Any, dt: Any, tensors: bool) -> Any:
    """``g`` cast to the backend dtype ``dt``; a complex ``g`` for a real ``dt`` keeps its
    real part (a real input's gradient or tangent). ``tensors``: ``g`` is a Tensor and
    ``xp`` is xpgrad. Shared by the engine's gradients and forward mode's tangents."""
    gdt = raw_dtype(g) if tensors else g.dtype
    if gdt == dt:
        return g
    if kind(gdt) == "complex floating" and kind(dt) != "complex floating":
        g = xp.real(g)
        gdt = raw_dtype(g) if tensors else g.dtype
    if gdt != dt:
        g = xp.astype(g, dtype_name(dt) if tensors else dt)
    return g
