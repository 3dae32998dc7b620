"""Tracing for [`xpgrad.jit`][xpgrad.jit]: arrays that record what is done to them.

A `Tracer` stands for one array of a function that ``jit`` traces. It knows its
shape, dtype, device and library; every call made on it (a function of its namespace,
an operator, indexing, an in-place update) is recorded as one instruction of a
`Trace`, a straight-line program of backend calls. Reading its *value* (``bool``,
``float``, ``int``, ``item``, ``tolist``, ``__array__``, DLPack, a Python ``if``) raises
[`ConcretizationError`][xpgrad.ConcretizationError], naming the operation and the line, because the
value differs from call to call and a program that branched on it would be silently
wrong on the next call. So do functions whose result's *shape* depends on the values
(``nonzero``, ``unique_*``, boolean-mask indexing, ``repeat`` by an array).

How shapes are known. Each tracer carries a *witness*: the array the traced call
computes (the first call's own values). Every recorded call also runs on the
witnesses, so result shapes and dtypes are exactly the backend's, for every function of
every library, with no shape rules to keep; the witness is never read by the program
and never reaches Python control flow (the value-reading methods raise). The first call
of a jitted function therefore *is* one eager run, and returns its results.

It holds no more memory than that eager run: a recorded instruction holds a *record* of
each traced argument (a twin tracer that holds no value), and when the traced array that
the traced code holds is gone, no later call can read its value, so the trace drops it,
keeping its shape, dtype and layout (`_Meta`, with a sample of each end of a large
array). It keeps to its end only the values the program needs: its inputs and outputs,
the values written in place, and its small constants (see `Trace.release`).

The namespace of a tracer (``tracer.__array_namespace__()``, and what
`xpgrad._dispatch.backend_namespace` resolves for it) is a `TracingNamespace`
over the namespace eager code would use for the witness, so xpgrad's forwards and rules
record the same backend calls they make eagerly: the replay is bit-identical on NumPy.

A tracer is the array it stands for to the code that runs on it, so code cannot tell
that it is traced until it asks for a value: the methods and attributes of its witness
(``x.max()``, ``x.flatten()``, torch's ``x.exp()``, ``x.real``), what a Tensor has
(``sum``, ``mean``, ``reshape``, ``data``, ``grad``, ``detach``...), NumPy's functions and
ufuncs on a NumPy (or Dask) witness (``np.sum(x)``, ``np.exp(x)``) and torch's functions
on a torch witness (``torch.sum(x)``) are recorded calls; the dtype queries
(``result_type``, ``can_cast``, ``finfo``, ``iinfo``, ``isdtype``) take it as its witness.
A write into a tracer of an immutable library (JAX) is a functional update that the
tracer takes from then on (the program rebinds its variable), as a Tensor's write is
under eager ``grad``.
"""

from __future__ import annotations

import contextvars
import copy
import linecache
import math
import operator
import os
import sys
import types
from typing import Any

import array_api_compat
import array_api_extra as xpx
import numpy as np

from ._exceptions import ConcretizationError, XpgradRuntimeError, XpgradTypeError
from .tree_util import is_leaf as _is_tree_leaf
from .tree_util import tree_leaves as _tree_leaves
from .tree_util import tree_map as _tree_map

__all__ = ["ACTIVE", "TRACE", "Instruction", "Trace", "Tracer", "TracingNamespace", "base_namespace", "is_tracer",
           "namespace_of", "rebinds", "recorded", "recording", "set_may_alias", "untraced_write"]

# the trace this context records into: every backend call made while it is set is recorded,
# those on constants (arrays made inside, captured by closures) too
TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("xpgrad_jit_trace", default=None)
ACTIVE = [0]  # how many traces run now, in any thread (eager code tests this before the ContextVar)

_PKG = os.path.dirname(os.path.abspath(__file__)) + os.sep  # .../xpgrad/
#: whether two arrays may share memory (xpgrad.autograd._alias.may_alias, handed down by it)
_MAY_ALIAS: list[Any] = [lambda a, b: True]


def set_may_alias(fn: Any) -> None:
    """Hand down the memory-sharing check of `xpgrad.autograd._alias` (a higher layer)."""
    _MAY_ALIAS[0] = fn


class Instruction:
    """One backend call of a program: ``outs = fn(*args, **kwargs)``.

    ``args``/``kwargs`` hold `Tracer` objects where the program passes one of its
    values; ``outs`` is the list of slots the result fills (one, several for a tuple
    result, or none for a call made for its effect: an in-place update); ``unpack`` says
    whether the result is a sequence to unpack. ``name`` is the readable name.
    """

    __slots__ = ("args", "fn", "kwargs", "name", "outs", "unpack", "writes")

    def __init__(self, fn: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                 outs: list[int], unpack: bool, writes: int | None) -> None:
        self.fn = fn
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.outs = outs
        self.unpack = unpack
        self.writes = writes  # the slot updated in place (an effect), or None


class Trace:
    """A program being recorded: its inputs, instructions and witnesses (see the module doc)."""

    def __init__(self, func: str) -> None:
        self.func = func  # the traced function's name, for messages
        self.instructions: list[Instruction] = []
        self.witness: list[Any] = []  # slot -> witness
        self.namespace: list[Any] = []  # slot -> the witness's backend namespace
        self.inputs: list[int] = []
        self.stateful = False  # a call that must run at every replay and differs each time (random)
        # slots whose values vary from call to call: the inputs, random draws, and what is computed
        # from them. The others are constants of the program (made from Python values, closures'
        # arrays): their values are the same at every call, so Python may read them, as JAX reads
        # a concrete array under jax.jit (SciPy's `if xp.any(order != xp.round(order))`)
        self.varying: set[int] = set()
        # checkpoint inside the trace: the draws of its forward are logged, and its recomputation
        # is served those same values (the program draws once; the backward reads the forward's numbers)
        self.draw_logs: list[list[Tracer]] = []
        self.redraws: list[list[Tracer]] = []
        # what the trace keeps of a value whose traced array is gone (`release`): the slots it
        # keeps whole, those below ``keep_below`` too (the forward's, while its backward is traced)
        self.kept: set[int] = set()
        self.keep_below = 0
        # constants of the program (made from no traced value but constants, or the shape of one):
        # the passes may fold them into the program, so the small ones are kept (KEEP_CONSTANT_BYTES)
        self.constant: set[int] = set()
        # NumPy views: slot -> the slots whose buffer it views (its .base chain, when it was made)
        self.bases: dict[int, tuple[int, ...]] = {}
        self._arrays: dict[int, int] = {}  # id(NumPy witness) -> its slot (checked against witness)
        self.ended = False

    def forget(self) -> None:
        """Drop the witnesses (the first call's values), keeping each value's shape, dtype and device."""
        self.ended = True
        self.witness[:] = [_Meta(w) for w in self.witness]  # (in place: a copy of the trace shares the list)
        self._arrays.clear()

    def keep(self, t: Tracer) -> None:
        """Keep the value of ``t`` to the end of the trace (an output of the program)."""
        self.kept.add(t._i)

    def release(self, i: int) -> None:
        """The traced array of slot ``i`` is gone (`Tracer.__del__`): no later call can read its value,
        so the trace drops it, keeping its metadata (`_Meta`), as an eager run frees it. It keeps
        the values the program needs after the trace: inputs, outputs (`keep`), values written in
        place (`_keep_written`), small constants (the passes fold them into the program) and 0-d
        values (operands a chunked run takes whole)."""
        if self.ended or i in self.kept or i < self.keep_below or i in self.constant:
            return
        w = self.witness[i]
        if type(w) is _Meta or not getattr(w, "shape", ()):
            return
        self.witness[i] = _Meta(w, sample=True)

    # ------------------------------------------------------------------ slots
    def new(self, w: Any, xp: Any, op: str) -> Tracer:
        i = len(self.witness)
        self.witness.append(w)
        self.namespace.append(base_namespace(xp) or xp)
        if type(w) is np.ndarray:
            self._arrays[id(w)] = i
            if w.base is not None:
                self.bases[i] = self._viewed(w)
        t = Tracer(self, i, op)
        t._r = Tracer(self, i, op)  # (its record: what an instruction holds, no value)
        return t

    def _viewed(self, w: Any) -> tuple[int, ...]:
        """The slots in the ``.base`` chain of the NumPy view ``w``."""
        out = []
        b = w.base
        while b is not None:
            s = self._arrays.get(id(b))
            if s is not None and self.witness[s] is b:
                out.append(s)
            b = getattr(b, "base", None)
        return tuple(out)

    def input(self, w: Any, xp: Any, what: str) -> Tracer:
        t = self.new(w, xp, what)
        self.inputs.append(t._i)
        self.varying.add(t._i)
        self.kept.add(t._i)
        return t

    def write(self, fn: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], target: Tracer) -> None:
        """Record ``fn(*args, **kwargs)``, a call made for its effect: it updates ``target`` in place."""
        ts = _tracers_in((args, kwargs))
        self.instructions.append(Instruction(fn, name, _records(args), _records(kwargs), [], False, target._i))
        self._keep_written(target)
        self.written(target, ts)

    def _keep_written(self, target: Tracer) -> None:
        """Keep a value written in place (a constant must share no memory with it; a write into
        a view of an input changes state), except a NumPy array that owns its memory: only a
        view of it could share that, and views read it (a constant made from it is kept)."""
        w = self.witness[target._i]
        if type(w) is not np.ndarray or w.base is not None:
            self.kept.add(target._i)

    def written(self, target: Tracer, ts: list[Tracer]) -> None:
        """``target`` was written with the values of ``ts``: if one varies, ``target`` does, and
        so do the constants that may share its memory (views of it, or it of them)."""
        v = self.varying
        if target._i in v or not any(t._i in v for t in ts):
            return
        v.add(target._i)
        w = target._w
        may_alias = _MAY_ALIAS[0]
        for i, o in enumerate(self.witness):
            if i not in v and o is not None and type(o) is not _Meta and may_alias(o, w):
                v.add(i)

    def varies(self, ts: list[Tracer]) -> bool:
        """Whether one of the traced arrays ``ts`` varies from call to call (see ``varying``)."""
        v = self.varying
        return any(t._i in v for t in ts)

    # ------------------------------------------------------------------ recording
    def call(self, fn: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], xp: Any,
             ts: list[Tracer] | None = None) -> Any:
        """Run ``fn`` on the witnesses and record it; return the result with tracers for arrays.
        ``ts``: the tracers among the arguments, where the caller has collected them already."""
        wargs = _unwrap(args, self)
        wkw = {k: _unwrap(v, self) for k, v in kwargs.items()} if kwargs else kwargs
        out = fn(*wargs, **wkw)
        return self.record(fn, name, args, kwargs, out, xp, _tracers_in((args, kwargs)) if ts is None else ts)

    def record(self, fn: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any, xp: Any,
               ts: list[Tracer]) -> Any:
        """Record ``fn(*args, **kwargs)`` (its tracers ``ts``) whose witness result is ``out``; return the traced result."""
        # a result that is an argument's own witness (an update in place, out=, asarray(x)):
        # the same tracer, and the call is kept for its effect
        if ts:
            rargs, rkw = _records(args), _records(kwargs)
        else:
            rargs, rkw = args, kwargs
        for a in ts:
            # (not a NumPy scalar: immutable, and np.True_/np.False_ are singletons that any
            # boolean function of 0-d arrays may return; a new value of the program)
            if a._w is out and not isinstance(out, np.generic):
                self.instructions.append(Instruction(fn, name, rargs, rkw, [], False, a._i))
                self._keep_written(a)
                self.written(a, ts)
                return a
        if _is_array(out):
            t = self.new(out, _namespace_for(out, xp), name)
            self.instructions.append(Instruction(fn, name, rargs, rkw, [t._i], False, None))
            if self.varies(ts):
                self.varying.add(t._i)
            self._constant(fn, args, ts, (out,), [t._i])
            return t
        if isinstance(out, (tuple, list)) and out and any(_is_array(o) for o in out):
            if not all(_is_array(o) for o in out):
                msg = f"jit: {name} returned a sequence of arrays and other values, which xpgrad cannot trace"
                raise ConcretizationError(msg)
            vary = self.varies(ts)
            reads = ts
            ts = [self.new(o, _namespace_for(o, xp), name) for o in out]
            self.instructions.append(Instruction(fn, name, rargs, rkw, [t._i for t in ts], True, None))
            if vary:
                self.varying.update(t._i for t in ts)
            self._constant(fn, args, reads, out, [t._i for t in ts])
            if hasattr(out, "_make"):  # a named tuple (eigh, svd, slogdet...)
                return type(out)._make(ts)
            return type(out)(ts) if isinstance(out, list) else tuple(ts)
        # no array: a static answer (a dtype, finfo, a bool of isdtype), not recorded
        return out

    def _constant(self, fn: Any, args: tuple[Any, ...], ts: list[Tracer], out: Any, outs: list[int]) -> None:
        """Note NumPy results that are constants of the program (made from constants only, or
        ``*_like`` of any value: only its shape and dtype are read), up to KEEP_CONSTANT_BYTES: the
        trace keeps them (_jit_passes.fold_constants folds them into a program of NumPy arrays)."""
        c = self.constant
        reads = ts[1:] if (ts and getattr(fn, "__name__", "") in _LIKE and args and type(args[0]) is Tracer) else ts
        if all(t._i in c for t in reads) and all(isinstance(o, (np.ndarray, np.generic))
                                                 and o.nbytes <= KEEP_CONSTANT_BYTES for o in out):
            c.update(outs)

    def draw(self, fn: Any, name: str, xp: Any) -> Tracer:
        """Record ``fn()``, a call that gives new values each time (a random draw): run at every replay.

        Never removed as dead code (the generator's state advances as eagerly), and a
        program that holds one is replayed, not handed to ``jax.jit`` (which would fix
        the numbers at compile time).
        """
        if self.redraws and self.redraws[-1]:  # (a checkpoint's recomputation: the forward's draw again)
            t = self.redraws[-1].pop(0)
        else:
            out = fn()
            fn._xg_stateful = True
            self.stateful = True
            t = self.new(out, _namespace_for(out, xp), name)
            self.instructions.append(Instruction(fn, name, (), {}, [t._i], False, None))
            self.varying.add(t._i)
        for log in self.draw_logs:
            log.append(t)
        return t


#: the constants (`Trace.constant`) a trace keeps: the largest the passes fold (_jit_passes.FOLD_MAX_BYTES)
KEEP_CONSTANT_BYTES = 1 << 20
# creation functions whose values do not depend on the values of their first argument (only its shape and dtype)
_LIKE = frozenset({"ones_like", "zeros_like", "full_like"})
#: elements of each end of a large NumPy array that the trace keeps when it drops the array:
#: _jit_passes.fuse_elementwise checks a chunked run on them. Large: SAMPLE_MIN elements and more,
#: the arrays a chunked run may read (_jit_passes sets it to its _MIN_FUSE)
SAMPLE = 1024
SAMPLE_MIN = 8 * 8192


class _Meta:
    """What a trace keeps of a value it dropped: shape, dtype, device and type; for a NumPy array
    also its strides and flags (``writeable`` False for a view), whether it is a view (``base``), and with
    ``sample``, for a large C-contiguous one, copies of its first and last SAMPLE elements
    (``head``, ``tail``). The passes read these as they read an array's."""

    __slots__ = ("base", "c_contiguous", "cls", "device", "dtype", "head", "shape", "strides", "tail", "writeable")
    base: Any
    c_contiguous: bool
    cls: type
    device: Any
    dtype: Any
    head: Any
    shape: tuple[Any, ...]
    strides: Any
    tail: Any
    writeable: bool

    def __init__(self, w: Any, *, sample: bool = False) -> None:
        self.shape = tuple(w.shape)
        self.dtype = w.dtype
        self.head = self.tail = None
        if type(w) is _Meta:
            self.device, self.cls, self.base, self.strides = w.device, w.cls, w.base, w.strides
            self.c_contiguous, self.writeable = w.c_contiguous, w.writeable
            return
        self.cls = type(w)
        if self.cls is np.ndarray:
            self.device = "cpu"
            self.base = None if w.base is None else True
            self.strides = w.strides
            # (writeable: read of an array that owns its memory; a view's flag may warn: broadcast_arrays)
            self.c_contiguous, self.writeable = w.flags.c_contiguous, w.base is None and w.flags.writeable
            if sample and self.c_contiguous and w.size >= SAMPLE_MIN:
                flat = w.reshape(-1)
                self.head, self.tail = flat[:SAMPLE].copy(), flat[-SAMPLE:].copy()
        else:
            try:
                self.device = array_api_compat.device(w)
            except AttributeError:  # (no device: JAX's ShapedArray, a traced ``.aval``)
                self.device = None
            self.base = self.strides = None
            self.c_contiguous = self.writeable = False

    @property
    def flags(self) -> _Meta:
        return self  # (``flags.c_contiguous``, ``flags.writeable``, as on a NumPy array)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


def held(w: Any) -> bool:
    """Whether ``w`` (an entry of ``Trace.witness``) is the value itself, not what a trace kept of a dropped one."""
    return type(w) is not _Meta


def is_numpy(w: Any) -> bool:
    """Whether ``w`` (an entry of ``Trace.witness``) is, or was, a NumPy array or scalar."""
    t = w.cls if type(w) is _Meta else type(w)
    return issubclass(t, (np.ndarray, np.generic))


def _namespace_for(w: Any, xp: Any) -> Any:
    try:
        return _resolve_backend(w)
    except Exception:  # noqa: BLE001 - (a NumPy scalar of an odd kind): the call's namespace
        return xp


def _is_array(x: Any) -> bool:
    # (NumPy's float64 and complex128 scalars are arrays here, although they subclass Python's numbers)
    return (hasattr(x, "shape") and hasattr(x, "dtype") and type(x) not in (bool, int, float, complex)
            and not isinstance(x, type) and array_api_compat.is_array_api_obj(x))


def _records(obj: Any) -> Any:
    """``obj`` with each traced array replaced by its record (what an instruction holds: no value)."""
    t = type(obj)
    if t is Tracer:
        r = obj._r
        return obj if r is None else r
    if t is tuple or t is list:
        return t(_records(o) for o in obj)
    if t is dict:
        return {k: _records(v) for k, v in obj.items()} if obj else obj
    if t in _LEAF_TYPES or t is slice or _is_tree_leaf(obj):
        return obj
    return _tree_map(_records, obj)  # (another container: a deque, a registered dataclass)


def _tracers_in(obj: Any) -> list[Tracer]:
    """The traced arrays in ``obj``: its `xpgrad.tree_util` leaves (any registered container,
    a deque, a named tuple, a registered dataclass) and the bounds of its slices."""
    out: list[Tracer] = []
    for leaf in _tree_leaves(obj):
        t = type(leaf)
        if t is Tracer:
            out.append(leaf)
        elif t is slice:  # (a leaf of the tree: its bounds may be traced, x[i:j] with 0-d arrays)
            out.extend(v for v in (leaf.start, leaf.stop, leaf.step) if type(v) is Tracer)
    return out


# (types that are leaves of every tree: _unwrap returns them without asking tree_util)
_LEAF_TYPES = frozenset({int, float, bool, str, complex, type(None), type(Ellipsis), np.ndarray})


def _unwrap(obj: Any, trace: Trace | None) -> Any:
    t = type(obj)
    if t is Tracer:
        if trace is not None and obj._t is not trace:
            msg = (
                f"jit: a traced array of another call of a jitted function ({obj._t.func}) reached "
                f"{trace.func}: a traced value escaped its trace (kept in a global or a closure?)"
            )
            raise ConcretizationError(msg)
        return obj._t.witness[obj._i]
    if t is tuple or t is list:
        return t(_unwrap(o, trace) for o in obj)
    if t is slice:
        if any(type(v) is Tracer for v in (obj.start, obj.stop, obj.step)):
            raise _concrete(obj.start if type(obj.start) is Tracer else obj.stop if type(obj.stop) is Tracer else obj.step,
                            "a slice bound")
        return obj
    if t is dict:
        return {k: _unwrap(v, trace) for k, v in obj.items()}
    if t in _LEAF_TYPES or _is_tree_leaf(obj):
        return obj
    return _tree_map(lambda v: _unwrap(v, trace), obj)  # (another container: a deque, a registered dataclass)


# ---------------------------------------------------------------- the namespace of tracers
_resolve_backend: Any = None  # _dispatch's resolution of a raw array (handed in by set_resolver)


def set_resolver(fn: Any) -> None:
    """Hand in ``fn(raw array) -> backend namespace`` (``_dispatch`` does at import)."""
    global _resolve_backend
    _resolve_backend = fn


#: the primitives by name (``autograd`` hands its table down, `set_primitives`)
_PRIMITIVES: dict[str, Any] = {}


def set_primitives(table: dict[str, Any]) -> None:
    """Hand in the table of primitives (``autograd._batched`` does at import)."""
    global _PRIMITIVES
    _PRIMITIVES = table


def _data_shaped(name: str) -> bool:
    """Whether the namespace function ``name`` is a primitive whose result's shape depends on the
    values of its arguments (declared on it: ``Primitive.data_dependent_shape``)."""
    p = _PRIMITIVES.get(name)
    return p is not None and bool(p.data_dependent_shape)


# attributes of a namespace that are no computation (static): handed through as they are
_STATIC = frozenset({"isdtype", "result_type", "can_cast", "finfo", "iinfo", "__array_namespace_info__",
                     "__array_api_version__", "__name__", "__doc__", "__file__", "__spec__", "__path__",
                     "__loader__", "__package__", "e", "pi", "inf", "nan", "newaxis"})

# the static functions that take arrays: they read the dtype (and, in finfo/iinfo, nothing else)
_DTYPE_QUERIES = frozenset({"result_type", "can_cast", "finfo", "iinfo", "isdtype"})

_NAMESPACES: dict[int, TracingNamespace] = {}


class _TracedInfo:
    """A backend's ``__array_namespace_info__()`` as a traced program sees it: its capabilities
    without boolean indexing and data-dependent shapes (their results' shapes vary per call)."""

    def __init__(self, base: Any) -> None:
        self._base = base

    def capabilities(self) -> dict[str, Any]:
        out = dict(self._base.capabilities())
        out["boolean indexing"] = False
        out["data-dependent shapes"] = False
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)


def _static_arg(a: Any) -> Any:
    if type(a) is Tracer:
        w = a._w
        return w.dtype if type(w) is _Meta else w  # (after the trace: its dtype, all these functions read)
    return a


def _dtype_query(fn: Any, name: str) -> Any:
    """``fn`` (``result_type``, ``can_cast``, ``finfo``, ``iinfo``, ``isdtype``) taking traced
    arrays: each is passed as the array it stands for (the backend's functions refuse other
    objects: array-api-strict's ``result_type``)."""

    def query(*args: Any, **kwargs: Any) -> Any:
        return fn(*[_static_arg(a) for a in args], **{k: _static_arg(v) for k, v in kwargs.items()})

    query.__name__ = name
    query.__wrapped__ = fn  # type: ignore[attr-defined]
    return query


class TracingNamespace(types.ModuleType):
    """The namespace of tracers over one backend namespace: each call is recorded.

    Its attributes are the backend namespace's; a function call runs on the witnesses
    and records one `Instruction` into the trace of its traced arguments (or,
    with none, the context's trace: an array made from nothing is a value of the program
    too, so that a later update in place of it is replayed). ``linalg`` and ``fft`` are
    tracing namespaces too. ``__name__`` is the backend's, so a lookup of the library by
    name finds the library of the witnesses.
    """

    def __init__(self, base: Any) -> None:
        super().__init__(getattr(base, "__name__", "xpgrad.jit"))
        self.__dict__["_base"] = base

    def __getattr__(self, name: str) -> Any:
        base = self.__dict__["_base"]
        v = getattr(base, name)
        if name == "__array_namespace_info__" and callable(v):
            # (what a traced program can do: no boolean indexing, no data-dependent shapes, as
            # under jax.jit; array-api-extra and SciPy then take their where-based paths)
            def info() -> _TracedInfo:
                return _TracedInfo(v())

            self.__dict__[name] = info
            return info
        if name in _DTYPE_QUERIES and callable(v):
            # (static, not recorded: a traced array is asked as the array it stands for)
            q = _dtype_query(v, name)
            self.__dict__[name] = q
            return q
        if name in _STATIC or name.startswith("__") or isinstance(v, type) or not callable(v):
            if name in ("linalg", "fft") and isinstance(v, types.ModuleType):
                v = tracing_namespace(v)
                self.__dict__[name] = v
            return v
        qual = f"{_short_ns(base)}.{name}"
        rec = _recorder(v, name, qual, self)
        self.__dict__[name] = rec
        return rec

    def __repr__(self) -> str:
        return f"<xpgrad.jit's tracing namespace over {self.__dict__['_base']!r}>"


def _short_ns(base: Any) -> str:
    name = getattr(base, "__name__", "xp")
    for pre in ("array_api_compat.", "xpgrad."):
        if name.startswith(pre):
            name = name[len(pre):]
    return name


def _recorder(fn: Any, name: str, qual: str, ns: TracingNamespace) -> Any:
    data_shaped = _data_shaped(name)
    is_repeat = name == "repeat"

    def record(*args: Any, **kwargs: Any) -> Any:
        ts = _tracers_in((args, kwargs))
        tr = ts[0]._t if ts else TRACE.get()
        if tr is None:  # (a tracing namespace used after its trace): no recording
            return fn(*args, **kwargs)
        if data_shaped and ts and not all(_fixed(t) for t in ts):
            raise _concrete(ts[0], f"{name}()", shape=True)
        if is_repeat and len(args) > 1 and type(args[1]) is Tracer and not _fixed(args[1]):
            raise _concrete(args[1], "repeat() by an array of repeats", shape=True)
        return tr.call(fn, qual, args, kwargs, ns, ts)

    record.__name__ = name
    record.__qualname__ = qual
    record.__wrapped__ = fn  # type: ignore[attr-defined]
    return record


def tracing_namespace(base: Any) -> TracingNamespace:
    """The (shared) tracing namespace over one backend namespace."""
    if type(base) is TracingNamespace:
        return base
    ns = _NAMESPACES.get(id(base))
    if ns is None or ns.__dict__["_base"] is not base:
        ns = TracingNamespace(base)
        _NAMESPACES[id(base)] = ns
    return ns


def namespace_of(arrays: list[Any]) -> Any:
    """The tracing namespace for a call's raw arguments, some of them tracers (``_dispatch`` calls it)."""
    ws = []
    for a in arrays:
        if type(a) is Tracer:
            ws.append(a._w)
            base = a._t.namespace[a._i]
        else:
            ws.append(a)
    if len(ws) > 1:
        if any(isinstance(w, np.generic) for w in ws) and not all(isinstance(w, (np.generic, np.ndarray)) for w in ws):
            # a NumPy scalar (np.float32(2), a float a library returned) next to arrays of another
            # library is a scalar, as a Python number is
            ws = [w for w in ws if not isinstance(w, np.generic)]
        if len(ws) > 1:
            _resolve_backend(*ws)  # (two libraries in one call: the same error as eagerly)
    return tracing_namespace(base)


def base_namespace(ns: Any) -> Any:
    """The backend namespace under a tracing namespace, or None when ``ns`` is no tracing namespace."""
    return ns.__dict__["_base"] if type(ns) is TracingNamespace else None


def recording(xp: Any) -> Any:
    """``xp``, or its tracing namespace while a trace records in this context: inside xg.jit
    every backend call is recorded, calls on constants and arrays made from nothing too
    (``_dispatch.backend_namespace`` and the creation functions ask here)."""
    if ACTIVE[0] and type(xp) is not TracingNamespace and TRACE.get() is not None:
        return tracing_namespace(xp)
    return xp


def untraced_write(func: str, shape: tuple[Any, ...], what: str) -> ConcretizationError:
    """The error for a traced value reaching a Tensor that xg.jit does not trace (``what``: a
    gradient, a write): the update would be lost when the program is replayed."""
    msg = (
        f"{func}: inside xg.jit, {what} a Tensor {shape} that is not an argument of the jitted function "
        "(a Module, optimizer or Tensor captured by a closure?): the program would not update it when it is "
        "replayed; pass them as arguments of the jitted function"
    )
    return ConcretizationError(msg)


def recorded(fn: Any, qual: str, ns: TracingNamespace) -> Any:
    """``fn``, a function of raw arrays outside the namespace (``scipy.special.erf``,
    ``torch.logsumexp``), made to record one call of the program (named ``qual``) when it
    gets tracers of ``ns``; called with no tracer and no trace open, it is ``fn``."""
    return _recorder(fn, qual.rsplit(".", 1)[-1], qual, ns)


def is_tracer(x: Any) -> bool:
    """Whether ``x`` is a traced array (raw, not a Tensor)."""
    return type(x) is Tracer


# ---------------------------------------------------------------- concretization
# the array libraries whose frames are not the user's line (numpy's fromnumeric wrappers, say)
_LIBRARIES = ("numpy", "array_api_compat", "array_api_extra", "array_api_strict", "torch", "jax", "jaxlib", "dask", "cupy")


def _library_dirs() -> tuple[str, ...]:
    out = []
    for name in _LIBRARIES:
        mod = sys.modules.get(name)
        file = getattr(mod, "__file__", None)
        if file:
            out.append(os.path.dirname(os.path.abspath(file)) + os.sep)
    return tuple(out)


def _user_line() -> str:
    """``file:line (function): source`` of the innermost frame outside xpgrad and the array
    libraries (the user's code)."""
    f = sys._getframe(1)
    inner = None
    here = os.path.abspath(__file__)
    skip = (_PKG, "<xpgrad", *_library_dirs())
    while f is not None and f.f_code.co_filename == here:
        f = f.f_back  # type: ignore[assignment]
    while f is not None:
        fn = f.f_code.co_filename
        # (xpgrad's generated code, the registry's functions, is named "<xpgrad registry: NAME>")
        if not fn.startswith(skip):
            src = linecache.getline(fn, f.f_lineno).strip()
            where = f"{fn}:{f.f_lineno} (in {f.f_code.co_name})"
            if inner is not None:
                where += f", through xpgrad's {inner}"
            return f"{where}: {src}" if src else where
        if inner is None and fn.startswith(_PKG):
            mod = fn[len(_PKG):].replace(os.sep, ".").removesuffix(".py")
            inner = f"{mod}.{f.f_code.co_name}"
        f = f.f_back  # type: ignore[assignment]
    return "an unknown line"


def _concrete(t: Any, what: str, *, shape: bool = False) -> ConcretizationError:
    if type(t) is Tracer:
        desc = f"the traced array {t._desc()} made by {t._op}"
        func = t._t.func
    else:
        desc, func = "a traced array", "jit"
    if shape:
        msg = (
            f"jit({func}): {what} of {desc}, at {_user_line()}: the shape of its result depends on the "
            "values, which are not known while xg.jit traces, and a program has one shape per call. "
            "Use a fixed-size form (xg.where(mask, x, 0) instead of x[mask]; size= arguments), or "
            "make the argument static with static_argnums/static_argnames"
        )
    else:
        msg = (
            f"jit({func}): {what} of {desc}, at {_user_line()}: the value of a traced array is not known "
            "while xg.jit traces (the next call has other values, so a program that branched on this "
            "one would be wrong). Shapes and dtypes are static and may be read. Make the argument "
            "static with static_argnums/static_argnames, choose per element with xg.where(cond, a, b) "
            "instead of a Python if, or call the function without jit"
        )
    return ConcretizationError(msg)


# ---------------------------------------------------------------- the traced array
class _NoTensor:
    pass


_Tensor: type = _NoTensor  # xpgrad's Tensor (handed down by _dispatch.set_tensor_type)


def _binary(name: str, op: Any) -> tuple[Any, Any]:
    def fwd(self: Tracer, other: Any) -> Any:
        if isinstance(other, _Tensor):  # (a Tensor's own operator records the op: traced @ tensor)
            return NotImplemented
        return self._t.call(op, name, (self, other), {}, self._ns())

    def rev(self: Tracer, other: Any) -> Any:
        if isinstance(other, _Tensor):
            return NotImplemented
        return self._t.call(op, name, (other, self), {}, self._ns())

    return fwd, rev


def _inplace(name: str, op: Any) -> Any:
    def fn(self: Tracer, other: Any) -> Any:
        if isinstance(other, _Tensor):
            return NotImplemented
        return self._t.call(op, name, (self, other), {}, self._ns())

    return fn


def _T(x: Any) -> Any:
    return x.T


def _mT(x: Any) -> Any:
    return x.mT


def _to_device(x: Any, device: Any, /, **kw: Any) -> Any:
    # (array-api-compat's: torch tensors and Dask arrays have no to_device method)
    return array_api_compat.to_device(x, device, **kw)


class Tracer:
    """A traced array: shape, dtype, device and library of one value of a traced program."""

    __slots__ = ("__weakref__", "_i", "_op", "_r", "_t")
    __array_priority__ = 10000  # NumPy (and Tensors) on the left defer to our reflected operators
    __hash__ = object.__hash__

    def __init__(self, trace: Trace, i: int, op: str) -> None:
        self._t = trace
        self._i = i
        self._op = op
        self._r: Tracer | None = None  # (the record an instruction holds; None: this is one)

    @property
    def _w(self) -> Any:
        """The witness (or, once the trace dropped it, its `_Meta`)."""
        return self._t.witness[self._i]

    def __del__(self) -> None:
        if self._r is not None:  # (the traced array the code held, not a record: its value may go)
            self._t.release(self._i)

    # ---------------------------------------------------------------- static attributes
    @property
    def shape(self) -> tuple[Any, ...]:
        return tuple(self._w.shape)

    @property
    def dtype(self) -> Any:
        return self._w.dtype

    @property
    def device(self) -> Any:
        w = self._w
        return w.device if type(w) is _Meta else array_api_compat.device(w)

    @property
    def ndim(self) -> int:
        return len(self._w.shape)

    @property
    def size(self) -> int | None:
        return math.prod(self._w.shape)

    def __len__(self) -> int:
        if not self._w.shape:
            msg = "len() of a 0-d traced array"
            raise XpgradTypeError(msg)
        return int(self._w.shape[0])

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def _ns(self) -> Any:
        return self._t.namespace[self._i]

    def _desc(self) -> str:
        return f"({_short_ns(self._ns())} {self.dtype}, shape {self.shape})"

    def __repr__(self) -> str:
        return f"Traced<{self.dtype}{list(self.shape)}>(made by {self._op})"

    def __array_namespace__(self, api_version: str | None = None) -> Any:
        return tracing_namespace(self._ns())

    # ---------------------------------------------------------------- value reads: refused
    # ---------------------------------------------------------------- value reads: refused where the value varies
    def _constant(self, what: str) -> Any:
        """The witness, where this value is a constant of the program (the same at every call);
        else the ConcretizationError naming ``what`` and the line."""
        w = self._w
        if self._i in self._t.varying or type(w) is _Meta:
            raise _concrete(self, what)
        return w

    def __bool__(self) -> bool:
        return bool(self._constant("bool() (an if, while, and/or or assert on an array)"))

    def __float__(self) -> float:
        return float(self._constant("float()"))

    def __int__(self) -> int:
        return int(self._constant("int()"))

    def __complex__(self) -> complex:
        return complex(self._constant("complex()"))

    def __index__(self) -> int:
        return operator.index(self._constant("use as a Python index (__index__)"))

    def item(self) -> Any:
        w = self._constant("item()")
        return w.item() if hasattr(w, "item") else _to_numpy(w).item()

    def tolist(self) -> Any:
        w = self._constant("tolist()")
        return w.tolist() if hasattr(w, "tolist") else _to_numpy(w).tolist()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        # (a copy: a write into it must not reach the program's constant)
        out = _to_numpy(self._constant("conversion to a NumPy array (__array__)"))
        return np.array(out, dtype=dtype, copy=True)

    def __dlpack__(self, *a: Any, **k: Any) -> Any:
        raise _concrete(self, "export by DLPack (__dlpack__)")

    def __dlpack_device__(self) -> Any:
        return self._w.__dlpack_device__()

    def __format__(self, spec: str) -> str:
        if spec:
            raise _concrete(self, f"formatting with {spec!r}")
        return repr(self)

    # ---------------------------------------------------------------- operations: recorded
    __add__, __radd__ = _binary("add", operator.add)
    __sub__, __rsub__ = _binary("subtract", operator.sub)
    __mul__, __rmul__ = _binary("multiply", operator.mul)
    __truediv__, __rtruediv__ = _binary("divide", operator.truediv)
    __floordiv__, __rfloordiv__ = _binary("floor_divide", operator.floordiv)
    __mod__, __rmod__ = _binary("remainder", operator.mod)
    __pow__, __rpow__ = _binary("pow", operator.pow)
    __matmul__, __rmatmul__ = _binary("matmul", operator.matmul)
    __and__, __rand__ = _binary("bitwise_and", operator.and_)
    __or__, __ror__ = _binary("bitwise_or", operator.or_)
    __xor__, __rxor__ = _binary("bitwise_xor", operator.xor)
    __lshift__, __rlshift__ = _binary("bitwise_left_shift", operator.lshift)
    __rshift__, __rrshift__ = _binary("bitwise_right_shift", operator.rshift)
    __lt__ = _binary("less", operator.lt)[0]
    __le__ = _binary("less_equal", operator.le)[0]
    __gt__ = _binary("greater", operator.gt)[0]
    __ge__ = _binary("greater_equal", operator.ge)[0]
    __eq__ = _binary("equal", operator.eq)[0]  # type: ignore[assignment]
    __ne__ = _binary("not_equal", operator.ne)[0]  # type: ignore[assignment]
    __iadd__ = _inplace("add (in place)", operator.iadd)
    __isub__ = _inplace("subtract (in place)", operator.isub)
    __imul__ = _inplace("multiply (in place)", operator.imul)
    __itruediv__ = _inplace("divide (in place)", operator.itruediv)
    __ifloordiv__ = _inplace("floor_divide (in place)", operator.ifloordiv)
    __imod__ = _inplace("remainder (in place)", operator.imod)
    __ipow__ = _inplace("pow (in place)", operator.ipow)
    __imatmul__ = _inplace("matmul (in place)", operator.imatmul)
    __iand__ = _inplace("bitwise_and (in place)", operator.iand)
    __ior__ = _inplace("bitwise_or (in place)", operator.ior)
    __ixor__ = _inplace("bitwise_xor (in place)", operator.ixor)
    __ilshift__ = _inplace("bitwise_left_shift (in place)", operator.ilshift)
    __irshift__ = _inplace("bitwise_right_shift (in place)", operator.irshift)

    def __neg__(self) -> Any:
        return self._t.call(operator.neg, "negative", (self,), {}, self._ns())

    def __pos__(self) -> Any:
        return self._t.call(operator.pos, "positive", (self,), {}, self._ns())

    def __abs__(self) -> Any:
        return self._t.call(operator.abs, "abs", (self,), {}, self._ns())

    def __invert__(self) -> Any:
        return self._t.call(operator.invert, "bitwise_invert", (self,), {}, self._ns())

    @property
    def T(self) -> Any:
        return self._t.call(_T, "T", (self,), {}, self._ns())

    @property
    def mT(self) -> Any:
        if not hasattr(self._w, "mT"):  # (Dask's arrays: the namespace's, as a Tensor's mT)
            return tracing_namespace(self._ns()).matrix_transpose(self)
        return self._t.call(_mT, "mT", (self,), {}, self._ns())

    def to_device(self, device: Any, /, **kw: Any) -> Any:
        return self._t.call(_to_device, "to_device", (self, device), kw, self._ns())

    # ---------------------------------------------------------------- what a Tensor has, and the array's own
    # A traced array is the array it stands for to the code that runs on it: the methods of
    # its library (x.sum(), x.max(), x.flatten(); torch's x.exp()) and the library's functions
    # (np.sum(x) on a NumPy array, torch.sum(x)) are recorded calls; whatever a Tensor has
    # (sum, mean, reshape, data, grad, detach...) it has too. A Python value is refused
    # (ConcretizationError naming the line), shapes, dtypes and other static facts are not.
    @property
    def data(self) -> Tracer:
        """The backend array: a traced array is its own (as a Tensor's ``data`` is its array)."""
        return self

    @property
    def grad(self) -> None:
        """None: a traced array of the program is no Tensor and accumulates no gradient."""
        return None

    @property
    def grad_fn(self) -> None:
        return None

    @property
    def is_leaf(self) -> bool:
        return True

    @property
    def requires_grad(self) -> bool:
        return False

    def requires_grad_(self, requires_grad: bool = True) -> Tracer:
        """``requires_grad_(False)`` is itself; a raw traced array cannot start requiring grad."""
        if requires_grad:
            msg = (
                f"requires_grad_: {self!r} is a raw traced array of jit({self._t.func}), not a Tensor, and cannot "
                "require grad; make a Tensor of it (xg.asarray(x, requires_grad=True)) or differentiate with xg.grad"
            )
            raise XpgradTypeError(msg)
        return self

    def detach(self) -> Tracer:
        """Itself: a raw traced array has no graph to leave."""
        return self

    def backward(self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False,
                 inputs: Any = None) -> None:
        """Refused, as a Tensor that does not require grad refuses it."""
        msg = (
            f"backward: {self!r} is a raw traced array of jit({self._t.func}) and does not require grad; "
            "differentiate a Tensor (xg.asarray(x, requires_grad=True)) or use xg.grad"
        )
        raise XpgradRuntimeError(msg)

    def register_hook(self, hook: Any) -> Any:
        """Refused, as on a Tensor that does not require grad."""
        msg = "register_hook: cannot register a hook on a tensor that doesn't require grad (a raw traced array)"
        raise XpgradRuntimeError(msg)

    def retain_grad(self) -> None:
        """Nothing to do: a traced array is a leaf, as ``Tensor.retain_grad`` on a leaf."""
        return None

    def numpy(self) -> Any:
        return np.array(_to_numpy(self._constant("numpy()")), copy=True)

    def sum(self, *args: Any, **kwargs: Any) -> Any:
        """The array's own ``sum`` (NumPy, torch, JAX, Dask), else the namespace's (``Tensor.sum``'s signature)."""
        if hasattr(self._w, "sum"):
            return _call_method(self, "sum", args, kwargs)
        return _namespace_method(self, "sum", args, kwargs)

    def mean(self, *args: Any, **kwargs: Any) -> Any:
        """The array's own ``mean``, else the namespace's (``Tensor.mean``'s signature)."""
        if hasattr(self._w, "mean"):
            return _call_method(self, "mean", args, kwargs)
        return _namespace_method(self, "mean", args, kwargs)

    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        """The array's own ``reshape``, else the namespace's (``t.reshape(2, 3)`` or ``t.reshape((2, 3))``)."""
        if hasattr(self._w, "reshape"):
            return _call_method(self, "reshape", shape, kwargs)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return tracing_namespace(self._ns()).reshape(self, shape, **kwargs)

    def __copy__(self) -> Any:
        """``copy.copy``: a copy of the array (recorded), as ``copy.copy`` of a NumPy array is."""
        return self._t.call(_copy, "copy", (self,), {}, self._ns())

    def __deepcopy__(self, memo: dict[Any, Any]) -> Any:
        out = self.__copy__()
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise _concrete(self, "pickling")

    def __getattr__(self, name: str) -> Any:
        # (only names the class lacks: the witness's own attributes and methods)
        if name == "_meta" and type(self._w) is not _Meta and hasattr(self._w, "_meta"):
            # (Dask's meta array, the empty array of its chunks' type: static; array-api-extra's
            # meta_namespace reads it to find the chunks' namespace)
            return self._w._meta
        if name.startswith("_"):  # (protocols and private names: as on any object without them)
            msg = f"{type(self).__name__!r} object has no attribute {name!r}"
            raise AttributeError(msg)
        w = self._w
        if type(w) is _Meta:
            msg = f"{name}: this traced array's trace has ended, with its array"
            raise AttributeError(msg)
        try:
            v = getattr(w, name)
        except AttributeError:
            msg = f"traced array of {type(w).__module__}.{type(w).__qualname__} has no attribute {name!r}"
            raise AttributeError(msg) from None
        if callable(v) and not isinstance(v, type):
            return _BoundMethod(self, name)
        if _holds_array(v):  # (x.real, x.imag, torch's x.H): a recorded read
            return self._t.call(_attribute(name), f".{name}", (self,), {}, self._ns())
        if isinstance(v, _VALUE_TYPES):  # (NumPy's x.flat, x.ctypes, x.data: the values)
            raise _concrete(self, f"the attribute .{name}")
        return v  # (static: strides, itemsize, flags, layout...)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """A torch function given traced arrays (``torch.sum(x)``): recorded, as any call of the program."""
        kwargs = kwargs or {}
        ts = _tracers_in((args, kwargs))
        if not ts:
            return func(*args, **kwargs)
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", "function")
        return _call_external(func, f"torch.{name}", args, kwargs, ts)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """A NumPy ufunc on traced arrays: recorded where they stand for NumPy (or Dask) arrays,
        which take it; on another library's array NumPy would convert it to NumPy (a value: refused),
        except for an operator (``ndarray + x``), which is the traced array's own (as Python
        falls back to it eagerly)."""
        ts = _tracers_in((inputs, kwargs))
        name = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        if all(_numpy_like(t._w, "__array_ufunc__") for t in ts):
            fn = ufunc if method == "__call__" else getattr(ufunc, method)
            return _call_external(fn, name, inputs, kwargs, ts)
        op = _UFUNC_OPERATORS.get(ufunc.__name__) if method == "__call__" and not kwargs and len(inputs) == 2 else None
        if op is not None:
            return ts[0]._t.call(op, ufunc.__name__, inputs, {}, ts[0]._ns(), ts)
        raise _concrete(ts[0], f"{name} (NumPy converts the array to a NumPy array)")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """A NumPy function on traced arrays (``np.sum(x)``): recorded where they stand for NumPy
        (or Dask) arrays; on another library's, NumPy's own code runs on them (it calls their
        methods, or converts them to NumPy: a value, refused)."""
        ts = _tracers_in((args, kwargs))
        fname = getattr(func, "__name__", "function")
        name = f"numpy.{fname}"
        if (fname in _NP_DATA_SHAPED or (fname == "where" and len(args) + len(kwargs) == 1)) and ts \
                and not all(_fixed(t) for t in ts):
            raise _concrete(ts[0] if ts else self, f"{name}()", shape=True)
        if all(_numpy_like(t._w, "__array_function__") for t in ts):
            return _call_external(func, name, args, kwargs, ts)
        impl = getattr(func, "_implementation", None)
        if impl is None:
            raise _concrete(ts[0] if ts else self, f"{name} (NumPy converts the array to a NumPy array)")
        return impl(*args, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        _check_key(key, "indexing")
        return self._t.call(operator.getitem, "getitem", (self, key), {}, self._ns())

    def __setitem__(self, key: Any, value: Any) -> None:
        self._setitem(key, value, functional=True)

    def _setitem(self, key: Any, value: Any, *, functional: bool) -> None:
        """``self[key] = value``, recorded. On an immutable library (JAX) the library's error,
        or with ``functional`` a functional update that this traced array takes from here on
        (what raw code that writes into it means; a Tensor instead rebinds its own data, so
        that other Tensors sharing this array keep the old value: ``Tensor._inplace``)."""
        wkey = _unwrap(key, self._t)
        wval = _unwrap(value, self._t)
        w = self._w
        try:
            w[wkey] = wval
        except TypeError:
            if not functional or not _immutable(w):
                raise  # (as the witness's library raises it)
            # an immutable library (JAX): the write is a functional update, and this traced
            # value is the updated array from here on, as a Tensor is under eager grad
            new = _functional_set(w, wkey, wval)
            self._t.witness[self._i] = new
            self._t.write(_functional_set, "setitem (functional update)", (self, key, value), {}, self)
            return
        self._t.write(operator.setitem, "setitem", (self, key, value), {}, self)


# ---------------------------------------------------------------- calls beyond the namespace: methods, NumPy's and torch's functions
# calls whose Python result is a static fact (a shape, a dtype, a size, a flag of the layout), not a value
_STATIC_CALLS = frozenset({
    "shape", "ndim", "size", "result_type", "can_cast", "promote_types", "iscomplexobj", "isrealobj", "isscalar",
    "dim", "ndimension", "numel", "nelement", "stride", "strides", "is_contiguous", "element_size", "get_device",
    "is_floating_point", "is_complex", "is_signed", "is_tensor", "type", "storage_offset", "dim_order", "is_conj",
    "is_neg", "is_inference", "is_pinned", "is_shared", "is_sparse", "has_names", "Tensor.size", "Tensor.dim",
    "Tensor.numel", "Tensor.stride", "Tensor.is_contiguous", "Tensor.element_size", "Tensor.is_floating_point",
    "Tensor.is_complex", "Tensor.type", "Tensor.get_device", "Tensor.nelement", "Tensor.ndimension",
})
# NumPy functions whose result's shape depends on the values
_NP_DATA_SHAPED = frozenset({"nonzero", "flatnonzero", "argwhere", "unique", "unique_all", "unique_counts",
                             "unique_inverse", "unique_values", "extract", "compress", "trim_zeros", "delete"})
# Python values that are an array's values, not static facts (NumPy's x.flat, x.ctypes, x.data)
_VALUE_TYPES: tuple[type, ...] = (memoryview, float, complex, bytes, np.flatiter)
# NumPy's ufuncs that are Python's operators: ``ndarray + x`` on a traced array of another library
_UFUNC_OPERATORS = {
    "add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "divide": operator.truediv,
    "true_divide": operator.truediv, "floor_divide": operator.floordiv, "remainder": operator.mod,
    "power": operator.pow, "matmul": operator.matmul, "bitwise_and": operator.and_, "bitwise_or": operator.or_,
    "bitwise_xor": operator.xor, "left_shift": operator.lshift, "right_shift": operator.rshift,
    "less": operator.lt, "less_equal": operator.le, "greater": operator.gt, "greater_equal": operator.ge,
    "equal": operator.eq, "not_equal": operator.ne,
}


def _numpy_like(w: Any, protocol: str) -> bool:
    """Whether NumPy's function or ufunc takes the array ``w`` as it is (NumPy's arrays and
    scalars, and libraries that implement the ``protocol``: Dask, CuPy)."""
    return isinstance(w, (np.ndarray, np.generic)) or getattr(type(w), protocol, None) is not None


def _holds_array(v: Any) -> bool:
    return _is_array(v) or (isinstance(v, (tuple, list)) and bool(v) and any(_is_array(o) for o in v))


def _copy(x: Any) -> Any:
    return copy.copy(x)


_ATTRIBUTES: dict[str, Any] = {}
_METHODS: dict[str, Any] = {}


def _attribute(name: str) -> Any:
    """``fn(x) -> x.<name>`` (one per name: the program's call of an attribute read)."""
    fn = _ATTRIBUTES.get(name)
    if fn is None:
        fn = operator.attrgetter(name)
        _ATTRIBUTES[name] = fn
    return fn


def _method(name: str) -> Any:
    """``fn(x, *args, **kwargs) -> x.<name>(*args, **kwargs)`` (one per name)."""
    fn = _METHODS.get(name)
    if fn is None:
        def fn(x: Any, *args: Any, **kwargs: Any) -> Any:
            return getattr(x, name)(*args, **kwargs)

        fn.__name__ = fn.__qualname__ = name
        _METHODS[name] = fn
    return fn


class _BoundMethod:
    """A method of the array a traced array stands for (``x.max``): calling it records the call."""

    __slots__ = ("name", "t")

    def __init__(self, t: Tracer, name: str) -> None:
        self.t = t
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call_method(self.t, self.name, args, kwargs)

    def __repr__(self) -> str:
        return f"<method {self.name} of {self.t!r}>"


def _call_method(t: Tracer, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``t.<name>(*args, **kwargs)`` on the array ``t`` stands for, recorded."""
    return _call_external(_method(name), name, (t, *args), kwargs, None)


def _namespace_method(t: Tracer, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.<name>``'s meaning for an array with no such method (array-api-strict's):
    the namespace's function, with ``axis=``/``keepdims=`` (positional too), as a Tensor's."""
    names = ("axis", "keepdims")
    if len(args) > len(names) or set(kwargs) - set(names):
        keys = ", ".join(list(kwargs)) or f"{len(args)} positional arguments"
        msg = f"{name}: a traced {_short_ns(t._ns())} array's {name} takes axis= and keepdims= only, got {keys}"
        raise XpgradTypeError(msg)
    kw = dict(zip(names, args))
    kw.update(kwargs)
    return getattr(tracing_namespace(t._ns()), name)(t, **kw)


def _call_external(fn: Any, name: str, args: Any, kwargs: dict[str, Any], ts: list[Tracer] | None) -> Any:
    """``fn(*args, **kwargs)``, a function outside the namespace given traced arrays (a method of
    the array, NumPy's or torch's function), run on the witnesses and recorded.

    A result of arrays is recorded as any call is; a static fact (a shape, a dtype, ``x.dim()``)
    is returned; a result of None is an update in place of the first argument (``x.sort()``,
    ``np.copyto(x, y)``); any other Python value is the array's values, refused."""
    if ts is None:
        ts = _tracers_in((args, kwargs))
    t0 = ts[0]
    tr = t0._t
    wargs = _unwrap(args, tr)
    wkw = {k: _unwrap(v, tr) for k, v in kwargs.items()} if kwargs else kwargs
    out = fn(*wargs, **wkw)
    if out is None:
        first = args[0] if args else None
        if type(first) is not Tracer:
            raise _concrete(t0, f"{name}(), which writes into an array that is not a value of the program")
        tr.write(fn, name, tuple(args), kwargs, first)
        return None
    if _holds_array(out):
        return tr.record(fn, name, tuple(args), kwargs, out, t0._ns(), ts)
    short = name.rsplit(".", 1)[-1]
    if name in _STATIC_CALLS or short in _STATIC_CALLS or not isinstance(out, (*_VALUE_TYPES, bool, int, list, str, dict)):
        return out  # (a static fact: a shape, a dtype, a device, a size)
    raise _concrete(t0, f"{name}(), which gives a Python value,")


def _to_numpy(w: Any) -> Any:
    """A constant's witness as NumPy (array-api-strict's through DLPack or its NumPy array, Dask's computed)."""
    if isinstance(w, (np.ndarray, np.generic)):
        return w
    if hasattr(w, "compute"):
        return np.asarray(w.compute())
    inner = getattr(w, "_array", None)  # (array-api-strict's NumPy array, on any of its devices)
    if isinstance(inner, (np.ndarray, np.generic)):
        return inner
    return np.asarray(w)


def _immutable(w: Any) -> bool:
    """Whether ``w``'s library has no writes into an array (JAX): a NumPy array that is only
    read-only this once (a broadcast view) is not, and its write raises as NumPy raises it."""
    return not array_api_compat.is_writeable_array(w) and not isinstance(w, (np.ndarray, np.generic))


def _functional_set(x: Any, key: Any, value: Any) -> Any:
    """``x`` with ``x[key] = value``, as a new array (array-api-extra's ``at``: JAX's ``.at[].set``).

    Recorded as an instruction that *rebinds* the value it updates (``rebinds``): the
    program's variable takes the new array, so later reads see the write."""
    return xpx.at(x, key).set(value, copy=True)


_functional_set.rebinds = True  # type: ignore[attr-defined]


def rebinds(x: Instruction) -> bool:
    """Whether the instruction's result replaces the value it writes (a functional update), not updates it in place."""
    return x.writes is not None and getattr(x.fn, "rebinds", False) is True


def _fixed(t: Tracer) -> bool:
    """Whether the values of ``t`` are fixed in the program, so that a shape computed from them
    (a mask's selection, ``nonzero``) is too: a constant of the program, except on JAX, whose
    program runs under ``jax.jit``, where every value of the program is traced."""
    return t._i not in t._t.varying and not array_api_compat.is_jax_array(t._w)


def _check_key(key: Any, what: str) -> None:
    keys = key if isinstance(key, tuple) else (key,)
    for k in keys:
        dt = getattr(k, "dtype", None)
        # (a mask that is a constant of the program is fine: its result's shape is fixed too)
        if dt is not None and type(k) is Tracer and "bool" in str(dt) and not _fixed(k):
            raise _concrete(k, f"{what} by a boolean mask", shape=True)
