"""``xg.jit``: trace a function once, then replay its forward and backward with no tape.

The first call with a new *signature* traces: every array argument becomes a
`Tracer`, ``f`` runs once (its forward, the backward rules of any
``grad``/``backward`` inside it, optimizer updates), and each backend call is recorded.
The result is a [`Program`][xpgrad.Program]: a straight-line Python function of backend calls, with
each intermediate deleted at its last use and, on NumPy, elementwise results written
into a dead buffer of their shape and dtype. Later calls with the same signature run the
program on the raw arrays: no Tensor, no Node, no version counter, no dispatch per op.
On JAX arrays the program runs under ``jax.jit`` (XLA); with ``compile="torch"`` it is
handed to ``torch.compile``; NumPy, array-api-strict, CuPy and Dask replay it. On JAX the
trace itself runs inside one ``jax.jit`` trace, on JAX's abstract values (`Jitted._trace_jax`):
no operation is compiled apart, and the first call's results are those of the whole call
compiled once, which later calls replay.

The signature: the structure of the arguments; each array's library, shape, dtype,
device (and NumPy strides, which decide which results are views); each Tensor's
``requires_grad`` and whether it has a ``.grad``; the values of static arguments and of
Python scalars; Modules (their identity and train/eval flags) and optimizers (their
identity, hyperparameters and which state they hold); the default-device policy; grad
and anomaly modes; and the guards (`_Guards`): the Python state the call can read
(Module attributes and hooks, Tensor hooks, plain objects' attributes, ``f``'s closures
and the globals it names), whose Tensors are implicit inputs of the program.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import inspect
import linecache
import math
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import array_api_compat
import numpy as np

from . import _tracing
from ._dispatch import backend_namespace
from ._exceptions import XpgradRuntimeError, XpgradTypeError, XpgradValueError
from ._jit_passes import frees_at as _frees_at
from ._jit_passes import last_uses as _last_uses
from ._jit_passes import optimize as _optimize
from ._jit_passes import reuse_plan as _reuse_plan
from ._jit_passes import variables as _variables
from ._policy import current_policy
from ._tracing import TRACE, Trace, Tracer
from .autograd import _core
from .autograd._anomaly import ANOMALY
from .autograd._engine import grad as _autograd_grad
from .autograd._grad_mode import GRAD_ENABLED, enable_grad
from .autograd._tensor import Tensor
from .random import _current as _current_generator
from .tree_util import PyTreeDef, is_leaf, tree_flatten, tree_leaves

if TYPE_CHECKING:  # (the classes that implement JitStateful: mypy checks them against it below)
    from .nn.module import Module
    from .optim.optimizer import Optimizer

__all__ = ["CacheInfo", "Jitted", "Program", "jit"]


_ACTIVE_LOCK = threading.Lock()


class CacheInfo(NamedTuple):
    """What a jitted function's cache holds: ``traces`` counts every trace (retraces included)."""

    hits: int
    traces: int
    maxsize: int
    currsize: int


# ---------------------------------------------------------------- the protocol of objects whose arrays are state
@runtime_checkable
class JitStateful(Protocol):
    """What ``xg.jit`` asks of an object whose arrays are state, not arguments: the hooks a
    `Module` (``nn/module.py``) and an `Optimizer` (``optim/optimizer.py``) implement.

    Such an object, passed to a jitted call or reached by what ``f`` reads (`_Guards`), is
    in the call's signature by `_jit_state`'s static part (and, a Module, by its attributes
    and hooks); its Tensors and numbers are inputs of the program, read at every call and
    written back. jit recognizes one by its ``_jit_state`` attribute (a lookup on every call,
    cheaper than an ``isinstance`` check of a runtime protocol, which says the same).
    """

    def _jit_state(self) -> tuple[Any, list[Tensor]]:
        """(the static part of the signature: hashable, the Tensors a call reads and may rebind)."""
        ...

    def _jit_structure(self) -> Any:
        """What the object holds (its parameters' and buffers' names, its state's keys): a call that
        changes it is not cached (it traces again)."""
        ...

    def _jit_numbers(self) -> list[tuple[dict[str, Any], str, Tensor]]:
        """The Python numbers (or 0-d arrays) a call reads and may rebind, each an input of the program
        (a learning rate, Adam's step): ``(dict, key, a Tensor whose array it is made beside)``."""
        ...

    def _jit_count(self) -> int:
        """The steps taken so far (an optimizer's): a replay makes as many as the traced call made."""
        ...

    def _jit_replayed(self, count: int) -> None:
        """Told after a replayed call that made ``count`` steps (an optimizer's bookkeeping)."""
        ...


if TYPE_CHECKING:
    _IMPLEMENTERS: tuple[type[JitStateful], ...] = (Module, Optimizer)


# ---------------------------------------------------------------- arguments: flattening
_SCALARS = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis))


_KEYFN: dict[type, Any] = {}  # type -> its arrays' signature function, or False (no raw array type)


def _array_key(a: Any) -> Any:
    """The signature of a raw array: its type, shape, dtype and device (NumPy: its strides,
    which decide which results are views); None for anything else."""
    fn = _KEYFN.get(type(a))
    if fn is None:
        fn = _KEYFN[type(a)] = _key_function(a)
    return fn(a) if fn else None


def _key_function(a: Any) -> Any:
    t = type(a)
    if t is Tracer or not _is_raw_array(a):
        return False
    if t is np.ndarray:
        return lambda a: (t, a.shape, a.dtype, a.strides)
    mod = t.__module__.split(".")[0]
    if mod == "torch" and t.__name__ == "Tensor":
        return lambda a: (t, a.shape, a.dtype, a.device, a.requires_grad)
    if mod in ("jax", "jaxlib") and "Tracer" not in t.__name__:
        return lambda a: (t, a.shape, a.dtype, a.sharding)

    def key(a: Any) -> Any:
        dev = array_api_compat.device(a)
        try:
            hash(dev)
        except TypeError:
            dev = str(dev)
        return (t, tuple(a.shape), a.dtype, dev)

    return key


def _is_raw_array(x: Any) -> bool:
    return not isinstance(x, (*_SCALARS, type)) and array_api_compat.is_array_api_obj(x) and not isinstance(x, Tensor)


def _freeze(v: Any, who: str) -> Any:
    """A hashable stand-in for a static value (lists become tuples); refuses arrays."""
    if isinstance(v, (list, tuple)):
        return (type(v), tuple(_freeze(x, who) for x in v))
    if isinstance(v, dict):
        return (dict, tuple((k, _freeze(x, who)) for k, x in v.items()))
    if isinstance(v, Tensor) or _is_raw_array(v):
        msg = f"{who}: an array cannot be a static value (its value would be baked into the program)"
        raise XpgradValueError(msg)
    try:
        hash(v)
    except TypeError:
        msg = (f"{who}: a static value must be hashable, got {type(v).__name__} {v!r} (a container of "
               "arrays is an argument when registered with xg.tree_util.register_dataclass or register_pytree_node)")
        raise XpgradTypeError(msg) from None
    return _scalar_key(v)


# ---------------------------------------------------------------- guards: the Python state a call reads
# (libraries whose functions' globals are not walked: their state is not the user's)
_LIBRARIES = frozenset({"xpgrad", "numpy", "jax", "jaxlib", "torch", "dask", "array_api_strict", "array_api_compat",
                        "array_api_extra", "cupy", "scipy", "builtins", "functools", "math", "operator", "typing",
                        "collections", "contextlib", "threading", "abc", "enum", "hypothesis", "pytest", "_pytest"})
_MODULE_TABLES = frozenset({"_parameters", "_buffers", "_modules", "_non_persistent", "training",
                            "_forward_hooks", "_forward_pre_hooks"})
_SKIP = (types.ModuleType, type, types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodWrapperType,
         types.WrapperDescriptorType, types.MethodDescriptorType, types.GetSetDescriptorType)
# code object -> the global names it (and the code it holds) may read
_NAMES: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _scalar_key(v: Any) -> Any:
    """A Python scalar's signature: floats by value and sign (``0.0`` and ``-0.0`` differ; NaN equals NaN of its sign)."""
    t = type(v)
    if t is float:
        return (t, "nan" if v != v else v, math.copysign(1.0, v))
    if t is complex:
        return (t, _scalar_key(v.real), _scalar_key(v.imag))
    return (t, v)


def _code_names(code: types.CodeType) -> tuple[str, ...]:
    names = _NAMES.get(code)
    if names is None:
        found = list(code.co_names)
        for c in code.co_consts:
            if isinstance(c, types.CodeType):  # (lambdas, comprehensions and functions defined inside)
                found.extend(_code_names(c))
        names = _NAMES[code] = tuple(dict.fromkeys(found))
    return names


def _library(obj: Any) -> bool:
    mod = getattr(obj, "__module__", None) or ""
    return mod.split(".")[0] in _LIBRARIES


class _Guards:
    """The Python state a call reads besides its arguments' arrays, found by walking its
    arguments' objects and ``f``'s closures, defaults and the globals its code names (as
    torch.compile guards on them): Tensors are implicit inputs of the program (added to
    ``flat.tensors``: read at every call, written back, differentiated); Modules and
    optimizers are state (their attributes and hooks are guarded); every other value is
    part of the signature (a new value traces again)."""

    def __init__(self, flat: _Flat, *, eager: bool = True) -> None:
        self.flat = flat
        self.eager = eager  # (False: no _Eager signal for a Tensor that a call would run f eagerly for)
        self.key: list[Any] = []  # Python values read (compared before and after a trace)
        self.objects: list[Any] = []  # the signatures of Modules' and optimizers' own state
        self.seen: dict[int, int] = {}
        self.alive: list[Any] = []
        self.budget = 5_000  # (objects walked; past it, identity only)
        self.state = False  # whether anything but code was found

    def walk(self, v: Any, depth: int = 0) -> None:
        """Append ``v``'s guard to `key` (scalars, containers and functions here; the rest: `_walk_object`)."""
        key = self.key
        t = type(v)
        if t is _Leaf or v is None:
            return
        if t is _Tree:  # (an argument's template: its structure is in the signature, its leaves are walked)
            for x in v.items:
                self.walk(x, depth + 1)
            return
        if t in _SCALARS:
            key.append(_scalar_key(v))
            self.state = True
            return
        if isinstance(v, _SKIP):
            return
        i = id(v)
        n = self.seen.get(i)
        if n is not None:
            key.append(("@", n))
            return
        self.seen[i] = len(self.seen)
        self.alive.append(v)  # (an id stays this object's while the walk runs)
        self.budget -= 1
        if depth > 12 or self.budget < 0:
            key.append(("id", t, i))
            return
        if t is tuple or t is list or t is set or t is frozenset:
            key.append((t, len(v)))
            for x in v:
                self.walk(x, depth + 1)
            return
        if t is dict or t is collections.OrderedDict:
            key.append((t, len(v)))
            for k, x in v.items():
                self.walk(k, depth + 1)
                self.walk(x, depth + 1)
            return
        if t is types.FunctionType:
            self._walk_function(v, depth)
        else:
            self._walk_object(v, t, i, depth)

    def _walk_function(self, v: Any, depth: int) -> None:
        """A function's guard: its code, closures, defaults, and the globals its code names."""
        key = self.key
        key.append(("F", v.__code__))
        # (a library's function, xg.grad's or xg.hessian's wrapper, by the module it runs in: functools.wraps
        # gives it the user's __module__; its own numbers, argnums, are fixed: not state a call must check)
        lib = (v.__globals__.get("__name__") or "").split(".")[0] in _LIBRARIES
        for c in v.__closure__ or ():
            try:
                x = c.cell_contents
            except ValueError:  # (a cell not filled yet)
                continue
            state = self.state
            self.walk(x, depth + 1)
            if lib and (type(x) in _SCALARS or (type(x) is tuple and all(type(y) in _SCALARS for y in x))):
                self.state = state
        self.walk(v.__defaults__, depth + 1)
        self.walk(v.__kwdefaults__, depth + 1)
        if not lib:
            glb = v.__globals__
            for name in _code_names(v.__code__):
                if name in glb:
                    key.append(name)
                    self.walk(glb[name], depth + 1)

    def _walk_object(self, v: Any, t: type, i: int, depth: int) -> None:
        """Any object but a scalar, a container or a function: a Tensor (an implicit input), a method,
        a partial, a jitted function, an array (a constant of the program), a Module or an optimizer
        (`JitStateful`), a plain object (what it holds), a hashable value, or else its identity."""
        key = self.key
        if isinstance(v, Tensor):
            if self.eager and (v._fw or getattr(v, "_inner", None) is not None
                               or (v._node is not None and GRAD_ENABLED.get())):
                raise _Eager
            self.flat.tensors.setdefault(i, v)
            key.append("T")
            self.state = True
            return
        if t is types.MethodType:
            self.walk(v.__self__, depth + 1)
            self.walk(v.__func__, depth + 1)
            return
        if t is functools.partial:
            self.walk(v.func, depth + 1)
            self.walk(v.args, depth + 1)
            self.walk(v.keywords, depth + 1)
            return
        if isinstance(v, Jitted):
            self.walk(v.f, depth + 1)
            return
        self.state = True
        if t is Tracer or _is_raw_array(v):  # (a constant of the program: the same array, or a new one)
            key.append(("A", i))
            return
        jit_state = getattr(v, "_jit_state", None)  # (JitStateful's hook; looked up, not isinstance: faster)
        if jit_state is not None:
            self._walk_stateful(v, i, depth)
            return
        if getattr(v, "_xg_batched", False):
            raise _Eager
        if getattr(t, "__hash__", None) is object.__hash__ and hasattr(v, "__dict__") and not _library(t):
            # a plain object (its identity is its hash): what it holds is guarded, as torch.compile does
            key.append(("O", t, i))
            self.walk(vars(v), depth + 1)
            return
        try:
            hash(v)
        except TypeError:
            key.append(("id", t, i))
            return
        key.append((t, v))

    def _walk_stateful(self, v: JitStateful, i: int, depth: int) -> None:
        """A Module or an optimizer: its arrays are state, its attributes and hooks guarded."""
        passed = any(o is v for o in self.flat.objects)  # (an argument: _flatten took its state)
        if not passed:
            static, tensors = v._jit_state()
            self.objects.append((i, static))
            for tt in tensors:
                self.flat.tensors.setdefault(id(tt), tt)
        if not isinstance(getattr(v, "__dict__", {}).get("_modules"), dict):
            if not passed:  # (an optimizer the call reaches: its numbers too)
                self.flat.objects.append(v)
            return
        key = self.key
        stack: list[Any] = [v]
        mods = {i}
        while stack:  # (every submodule: its attributes and hooks)
            m = stack.pop()
            d = m.__dict__
            pre, post = d.get("_forward_pre_hooks"), d.get("_forward_hooks")
            key.append(("M", id(m), len(pre or ()), len(post or ())))
            if pre:
                self.walk(tuple(pre.values()), depth + 1)
            if post:
                self.walk(tuple(post.values()), depth + 1)
            for k, x in d.items():
                if k not in _MODULE_TABLES:
                    key.append(k)
                    self.walk(x, depth + 1)
            for sub in reversed(d["_modules"].values()):
                if sub is not None and id(sub) not in mods:
                    mods.add(id(sub))
                    stack.append(sub)


class _Flat:
    """One call's arguments, flattened: the signature key, the array leaves and the state."""

    __slots__ = ("key", "leaves", "objects", "tensors")

    def __init__(self) -> None:
        self.leaves: list[Any] = []  # raw arrays passed as such (their position in the program's inputs)
        self.tensors: dict[int, Tensor] = {}  # every Tensor the call hands over, by id
        self.objects: list[JitStateful] = []  # Modules and optimizers
        self.key: list[Any] = []


def _flatten(obj: Any, flat: _Flat, who: str) -> Any:
    """Append ``obj``'s signature to ``flat.key``; return its template (its structure, and its
    leaves with each raw array replaced by a marker). Pytrees are `xpgrad.tree_util`'s."""
    if isinstance(obj, Tensor) or _array_key(obj) is not None or getattr(obj, "_jit_state", None) is not None:
        return _flatten_leaf(obj, flat, who)  # (a leaf: the common arguments, with no tree to walk)
    leaves, treedef = tree_flatten(obj)
    try:
        hash(treedef)
    except TypeError as e:
        msg = (f"{who}: an argument's pytree structure is not hashable ({e}): the aux data (meta fields) of a "
               "registered node must be hashable")
        raise XpgradTypeError(msg) from None
    flat.key.append(treedef)
    return _Tree(treedef, [_flatten_leaf(x, flat, who) for x in leaves])


def _flatten_leaf(obj: Any, flat: _Flat, who: str) -> Any:
    key = flat.key
    k = _array_key(obj)
    if k is not None:  # (a raw array: the common leaf first)
        key.append(k)
        flat.leaves.append(obj)
        return _Leaf(len(flat.leaves) - 1)
    if isinstance(obj, Tensor):
        if obj._fw or getattr(obj, "_inner", None) is not None or (obj._node is not None and GRAD_ENABLED.get()):
            # forward mode, vmap, or a graph that reaches outside the call: f runs as it is
            raise _Eager
        ts = flat.tensors
        if id(obj) not in ts:
            ts[id(obj)] = obj
        key.append(("T", list(ts).index(id(obj))))
        return obj
    if isinstance(obj, _SCALARS):
        key.append((type(obj), obj))
        return obj
    if type(obj) is Tracer:  # (a raw traced array: jit called inside a trace, inlined before this)
        raise _Eager
    jit_state = getattr(obj, "_jit_state", None)
    if jit_state is not None:
        flat.objects.append(obj)
        static, tensors = jit_state()
        key.append((id(obj), static))
        for tt in tensors:
            flat.tensors.setdefault(id(tt), tt)
        return obj
    if getattr(obj, "_xg_batched", False):
        raise _Eager
    key.append(_freeze(obj, who))
    return obj


class _Tree:
    """One argument's template: its structure and its leaves (raw arrays as `_Leaf` markers)."""

    __slots__ = ("items", "treedef")

    def __init__(self, treedef: PyTreeDef, items: list[Any]) -> None:
        self.treedef = treedef
        self.items = items


class _Leaf:
    __slots__ = ("i",)

    def __init__(self, i: int) -> None:
        self.i = i


class _Eager(Exception):  # noqa: N818 - (a signal: this call runs f eagerly, not an error)
    pass


def _rebuild(tmpl: Any, leaves: Sequence[Any]) -> Any:
    """The arguments of templates ``tmpl`` (a `_Tree`, or a list/dict of them and static
    values) with the markers replaced by ``leaves``."""
    t = type(tmpl)
    if t is _Leaf:
        return leaves[tmpl.i]
    if t is _Tree:
        return tmpl.treedef.unflatten([leaves[x.i] if type(x) is _Leaf else x for x in tmpl.items])
    if t is list:
        return [_rebuild(o, leaves) for o in tmpl]
    if t is dict:
        return {k: _rebuild(v, leaves) for k, v in tmpl.items()}
    return tmpl


# ---------------------------------------------------------------- state cells
def _is_integer(v: Any) -> bool:
    """Whether a state number (a Python number or a 0-d array written back by a replay) counts in integers."""
    if isinstance(v, (bool, int)):
        return True
    return "int" in str(getattr(v, "dtype", ""))


def _number_kind(like: Any, v: Any) -> tuple[Any, Any, Any]:
    """(namespace, dtype, device) of the 0-d array a state number (Python or 0-d array) is traced as:
    int64 or float64 where the library has them (JAX without x64 gives its 32-bit default)."""
    xp = backend_namespace(like)
    xp = _tracing.base_namespace(xp) or xp
    return xp, (xp.int64 if _is_integer(v) else xp.float64), array_api_compat.device(like)


def _as_number_array(v: Any, kind: tuple[Any, Any, Any]) -> Any:
    if hasattr(v, "shape") and not isinstance(v, np.generic):  # (NumPy's float64 is a Python float)
        return v
    xp, dt, dev = kind
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (JAX without x64: its 32-bit dtype, without the warning)
        return xp.asarray(v, dtype=dt, device=dev)


# (immutable 0-d arrays of state numbers, by value and kind: a replay reuses the committed device scalar of
# a learning rate it saw before, as jax.jit would be handed, instead of converting the number at every call)
_NUMBER_CACHE: dict[Any, Any] = {}
_NUMBER_CACHE_SIZE = 256


def _number_input(v: Any, kind: tuple[Any, Any, Any]) -> Any:
    """A replay's input for a state number: a Python number as its 0-d array (cached where the library's
    arrays are immutable, JAX's: no writes into it can reach another call), an array as it is."""
    if not isinstance(v, (int, float, np.generic)):
        return v
    try:
        key = (id(kind[0]), kind[1], kind[2], _scalar_key(v.item() if isinstance(v, np.generic) else v), type(v))
        a = _NUMBER_CACHE.get(key)
    except TypeError:  # (an unhashable device)
        return _as_number_array(v, kind)
    if a is None:
        a = _as_number_array(v, kind)
        if _tracing._immutable(a):
            if len(_NUMBER_CACHE) >= _NUMBER_CACHE_SIZE:
                _NUMBER_CACHE.clear()
            _NUMBER_CACHE[key] = (a, kind[0])  # (the namespace too: its id stays its own while cached)
        return a
    return a[0]


class _Cells:
    """The arrays a call reads and may rebind besides its array arguments: Tensor data,
    gradients, optimizer state numbers. Each is one input of the program and, if the call
    changes it, one output written back."""

    def __init__(self, flat: _Flat) -> None:
        self.tensors = list(flat.tensors.values())
        grads = []
        for t in self.tensors:
            g = t.grad
            if isinstance(g, Tensor) and id(g) not in flat.tensors:
                grads.append(g)
        self.grad_tensors = grads  # gradients held now: their data are inputs too
        self.numbers: list[tuple[dict[str, Any], str, Any]] = []  # (dict, key, a Tensor the number lives beside)
        for o in flat.objects:
            self.numbers.extend(o._jit_numbers())

    def key(self, *, blind: bool = False) -> tuple[Any, ...]:
        """The cells' part of the signature (``blind``: as if no Tensor held a ``.grad``)."""
        k: list[Any] = []
        for t in self.tensors:
            g = None if blind else t.grad
            k.append((type(t), t._requires_grad, t._node is not None, _array_key(t.data),
                      None if g is None else _array_key(g.data), tuple(map(id, t._hooks or ()))))
        for d, name, _ in self.numbers:
            k.append((name, _is_integer(d[name])))
        return tuple(k)


_GRAD_SLOT = Tensor.__dict__["grad"]
_WATCHED: dict[type, type] = {}  # a Tensor class -> its subclass whose .grad reports the first access
_FIRST: dict[int, str] = {}  # id(tensor) -> its first .grad access while watched: "r" or "w"


def _watched_class(cls: type) -> type:
    w = _WATCHED.get(cls)
    if w is None:
        def get(self: Tensor) -> Any:
            _FIRST.setdefault(id(self), "r")
            return _GRAD_SLOT.__get__(self, Tensor)

        def set_(self: Tensor, v: Any) -> None:
            _FIRST.setdefault(id(self), "w")
            _GRAD_SLOT.__set__(self, v)

        def del_(self: Tensor) -> None:
            _FIRST.setdefault(id(self), "w")
            _GRAD_SLOT.__delete__(self)

        w = _WATCHED[cls] = type(cls.__name__, (cls,), {"__slots__": (), "grad": property(get, set_, del_),
                                                      "__module__": cls.__module__, "__qualname__": cls.__qualname__})
    return w


class _GradWatch:
    """While a trace runs ``f``: which Tensors holding no ``.grad`` have their ``.grad`` set before it is read
    (``zero_grad()``, then ``backward()``) or never touched. For those, a state where they hold one (after
    the first step) changes nothing the call computes: it replays the same program (`Jitted._lookup_blind`).
    Each is given, for the run, a subclass of its class whose ``grad`` reports the first access."""

    def __init__(self, tensors: list[Tensor]) -> None:
        self.watched: list[tuple[int, Tensor, type]] = []
        for i, t in enumerate(tensors):
            cls = type(t)
            if _GRAD_SLOT.__get__(t, Tensor) is not None or cls in _WATCHED.values():
                continue  # (held, or watched by another trace: not blind)
            try:
                t.__class__ = _watched_class(cls)
            except TypeError:  # (a class whose layout a subclass cannot take)
                continue
            self.watched.append((i, t, cls))

    def close(self) -> frozenset[int]:
        blind = []
        for i, t, cls in self.watched:
            t.__class__ = cls
            if _FIRST.pop(id(t), "w") == "w":
                blind.append(i)
        return frozenset(blind)


# ---------------------------------------------------------------- the program
class Program:
    """A traced program: a straight-line function of backend calls.

    ``str(program)`` is its readable listing; `source` the Python it runs;
    `instructions` the recorded calls; `inputs`/`outputs` name what it
    reads and gives back. ``xg.viz.draw_program(program)`` draws it.
    """

    def __init__(self, trace: Trace, outputs: list[Any], donated: set[int], name: str, reuse: bool) -> None:
        self.name = name
        self.input_slots = list(trace.inputs)
        self.stateful = trace.stateful
        # each value's (shape, dtype), by slot: what xg.viz.draw_program labels the values with
        self._meta = [(tuple(w.shape), w.dtype) for w in trace.witness]
        # (the passes: _jit_passes.optimize; on NumPy they may rename an output's slot, never its value)
        self.instructions, outputs = _optimize(trace, trace.instructions, outputs, reuse)
        self.output_slots = outputs  # a slot per output (int), or ("const", value)
        self._const: dict[str, Any] = {}
        names = {s: f"a{k}" for k, s in enumerate(self.input_slots)}
        self._names = names
        self._out_into = _reuse_plan(trace, self.instructions, outputs, donated) if reuse else {}
        self.source = self._codegen(trace)
        self.fn = self._compile()

    # ---------------------------------------------------------------- code generation
    def _name(self, s: int) -> str:
        return self._names.get(s) or f"v{s}"

    def _const_expr(self, v: Any) -> str:
        t = type(v)
        if v is None or t is bool or t is int or t is str:
            return repr(v)
        if t is float and math.isfinite(v):
            return repr(v)
        if v is Ellipsis:
            return "..."
        if t is tuple:
            return "(" + "".join(self._expr(x) + ", " for x in v) + ")"
        if t is list:
            return "[" + ", ".join(self._expr(x) for x in v) + "]"
        if t is slice:
            return f"slice({self._expr(v.start)}, {self._expr(v.stop)}, {self._expr(v.step)})"
        if t is dict:
            return "{" + ", ".join(f"{k!r}: {self._expr(x)}" for k, x in v.items()) + "}"
        if t not in _tracing._LEAF_TYPES and not is_leaf(v):  # (a deque, a registered dataclass: rebuilt)
            leaves, treedef = tree_flatten(v)
            if any(type(x) is Tracer for x in leaves):
                return f"{self._const_expr(treedef)}.unflatten([{', '.join(self._expr(x) for x in leaves)}])"
        name = f"k{len(self._const)}"
        self._const[name] = v
        return name

    def _expr(self, v: Any) -> str:
        if type(v) is Tracer:
            return self._name(v._i)
        return self._const_expr(v)

    def _codegen(self, trace: Trace) -> str:
        self._fns: dict[int, str] = {}
        # (the source's variables: a result may take over a dying value's; the listing keeps slot names)
        var, dels = _variables(self.instructions, self.output_slots, self._names)
        listing, self._names = self._names, var
        try:
            return self._emit(dels)
        finally:
            self._names = listing

    def _emit(self, dels: dict[int, list[str]]) -> str:
        lines = [f"def {_ident(self.name)}({', '.join(self._names[s] for s in self.input_slots)}):"]
        for i, ins in enumerate(self.instructions):
            fname = self._fns.get(id(ins.fn))
            if fname is None:
                fname = f"f{len(self._fns)}_{_ident(ins.name.split('.')[-1].split(' ')[0])}"
                self._fns[id(ins.fn)] = fname
                self._const[fname] = ins.fn
            args = [self._expr(a) for a in ins.args] + [f"{k}={self._expr(v)}" for k, v in ins.kwargs.items()]
            into = self._out_into.get(i)
            if into is not None:
                args.append(f"out={self._name(into)}")
            call = f"{fname}({', '.join(args)})"
            if _tracing.rebinds(ins):  # (a functional update: the variable takes the new array)
                lines.append(f"    {self._name(ins.writes)} = {call}")  # type: ignore[arg-type]
            elif not ins.outs:
                lines.append(f"    {call}")
            elif ins.unpack:
                lines.append(f"    {', '.join(self._name(o) for o in ins.outs)}, = {call}")
            else:
                lines.append(f"    {self._name(ins.outs[0])} = {call}")
            dead = dels.get(i)
            if dead:
                lines.append(f"    del {', '.join(dead)}")
        outs = [self._name(o) if isinstance(o, int) else self._const_expr(o[1]) for o in self.output_slots]
        lines.append(f"    return ({''.join(o + ', ' for o in outs)})")
        return "\n".join(lines) + "\n"

    def _compile(self) -> Callable[..., tuple[Any, ...]]:
        filename = f"<xpgrad.jit {self.name} #{id(self):x}>"
        code = compile(self.source, filename, "exec")
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        weakref.finalize(self, linecache.cache.pop, filename, None)  # (its source goes with the program)
        glb: dict[str, Any] = dict(self._const)
        glb["__builtins__"] = __builtins__
        exec(code, glb)
        return glb[_ident(self.name)]  # type: ignore[no-any-return]

    # ---------------------------------------------------------------- reading it
    @property
    def inputs(self) -> list[str]:
        """The program's parameters, in order."""
        return [self._names[s] for s in self.input_slots]

    @property
    def outputs(self) -> list[str]:
        """What it returns, in order (value names, or constants)."""
        return [self._name(o) if isinstance(o, int) else repr(o[1]) for o in self.output_slots]

    def __len__(self) -> int:
        return len(self.instructions)

    def __str__(self) -> str:
        out = [f"program {self.name}({', '.join(self.inputs)}): {len(self.instructions)} calls"]
        frees = _frees_at(_last_uses(self.instructions, self.output_slots))
        for i, ins in enumerate(self.instructions):
            args = [self._show(a) for a in ins.args] + [f"{k}={self._show(v)}" for k, v in ins.kwargs.items()]
            into = self._out_into.get(i)
            if into is not None:
                args.append(f"out={self._name(into)}")
            call = f"{ins.name}({', '.join(args)})"
            if ins.writes is not None and _tracing.rebinds(ins):
                out.append(f"  {self._name(ins.writes)} = {call}    # a functional update of {self._name(ins.writes)}")
            elif ins.writes is not None:
                out.append(f"  {call}    # updates {self._name(ins.writes)} in place")
            else:
                lhs = ", ".join(self._name(o) for o in ins.outs)
                out.append(f"  {lhs} = {call}")
            dead = frees.get(i)
            if dead:
                out[-1] += f"    # frees {', '.join(self._name(s) for s in dead)}"
        out.append(f"  return {', '.join(self.outputs)}")
        return "\n".join(out)

    def _show(self, v: Any) -> str:
        if type(v) is Tracer:
            return f"{self._name(v._i)}:{_dtype_str(v.dtype)}{list(v.shape)}"
        if isinstance(v, (tuple, list)):
            inner = ", ".join(self._show(x) for x in v)
            return f"({inner},)" if isinstance(v, tuple) and len(v) == 1 else (f"({inner})" if isinstance(v, tuple) else f"[{inner}]")
        if _is_raw_array(v):
            return f"<constant {_dtype_str(v.dtype)}{list(v.shape)}>"
        r = repr(v)
        return r if len(r) < 60 else r[:57] + "..."

    def __repr__(self) -> str:
        return f"<xpgrad.jit Program {self.name}: {len(self.instructions)} calls, {len(self.input_slots)} inputs>"


def _dtype_str(dt: Any) -> str:
    s = str(dt)
    return s.rsplit(".", 1)[-1]


def _ident(s: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in s)
    return out if out and not out[0].isdigit() else "_" + out


# ---------------------------------------------------------------- one cached trace
class _Capture:
    """A trace's run (a stage of `Jitted._trace_call`): ``f`` once on tracers, its backward
    where its results require grad, and what the call changed (the program's extra outputs).

    The arguments' arrays, the Tensors' data and gradients and the state numbers become the
    trace's inputs while ``f`` runs; after it, whatever it raised, each holds its first
    call's value again (the call was one eager run).
    """

    def __init__(self, name: str, flat: _Flat, cells: _Cells) -> None:
        self.trace = Trace(name)
        self.flat, self.cells = flat, cells
        self.versions = [t._version[0] for t in cells.tensors]
        self.structure = [o._jit_structure() for o in flat.objects]  # (a call that changes it is not cached)
        self.steps = [o._jit_count() for o in flat.objects]
        self.leaf_tracers: list[Tracer] = []
        self.tensor_in: list[Tracer] = []
        self.grad_in: list[Tracer] = []
        self.grads0: list[Any] = []
        self.number_kinds: list[tuple[Any, Any, Any]] = []
        self.number_in: list[tuple[Any, Tracer]] = []  # (each number's value, its input)
        self.outputs: list[Any] = []  # the program's outputs: a slot, or ("const", value)
        self.out_tmpl: Any = None
        self.rebind: list[tuple[tuple[int, int], int]] = []
        self.new_grads: list[tuple[int, Any]] = []
        self.numbers: list[tuple[int, int]] = []
        self.linear: _Linear | None = None
        self.grad_blind: frozenset[int] = frozenset()

    def run(self, f: Callable[..., Any], targs: Any, tkw: Any, witnesses: Sequence[Any] | None = None) -> None:
        """Run ``f`` on tracers, recording its calls; put the first call's values back after.

        ``witnesses``: the inputs' values are those (JAX's abstract values of one ``jax.jit`` trace,
        `Jitted._trace_jax`), `_inputs` ran before, and the caller puts the values back."""
        token = TRACE.set(self.trace)
        with _ACTIVE_LOCK:
            _tracing.ACTIVE[0] += 1
        try:
            if witnesses is None:
                self._inputs()
            else:
                for tr, w in zip(self.input_tracers(), witnesses, strict=True):
                    self.trace.witness[tr._i] = w
            watch = _GradWatch(self.cells.tensors)
            try:
                out = f(*_rebuild(targs, self.leaf_tracers), **_rebuild(tkw, self.leaf_tracers))
            finally:
                self.grad_blind = watch.close()
            self.out_tmpl = _out_template(out, self.outputs, self.flat.tensors)
            self._changes()
            # outputs that require grad: the backward of the call is traced too, from cotangents that
            # are inputs of the trace, and the trace is split in two programs (see _Linear)
            if GRAD_ENABLED.get():
                req = [t for t in self.cells.tensors if t._requires_grad]
                grad_leaves = _grad_leaves(out, self.flat.tensors)
                if req and grad_leaves:
                    self.linear = _trace_backward(self.trace, req, grad_leaves)
        finally:
            TRACE.reset(token)
            with _ACTIVE_LOCK:
                _tracing.ACTIVE[0] -= 1
            if witnesses is None:
                self._restore()

    def input_tracers(self) -> list[Tracer]:
        """The trace's inputs (`_inputs`'), in order."""
        return [*self.leaf_tracers, *self.tensor_in, *self.grad_in, *(tr for _, tr in self.number_in)]

    def _inputs(self) -> None:
        """The trace's inputs: the array arguments, the Tensors' data, their gradients, the numbers."""
        trace, cells = self.trace, self.cells
        for a in self.flat.leaves:
            self.leaf_tracers.append(trace.input(a, backend_namespace(a), "an argument"))
        for t in cells.tensors:
            tr = trace.input(t.data, backend_namespace(t.data), "a Tensor argument")
            self.tensor_in.append(tr)
            t.data = tr
        for g in cells.grad_tensors:
            tr = trace.input(g.data, backend_namespace(g.data), "a gradient")
            self.grad_in.append(tr)
            g.data = tr
        self.grads0 = [t.grad for t in cells.tensors]
        for d, name, like in cells.numbers:
            v = d[name]
            kind = _number_kind(like.data._w, v)
            self.number_kinds.append(kind)
            tr = trace.input(_as_number_array(v, kind), kind[0], f"the optimizer's {name!r}")
            self.number_in.append((v, tr))
            d[name] = tr

    def _changes(self) -> None:
        """What the call changed: rebound Tensor data, new gradients, state numbers (each an output)."""
        trace, cells, outputs = self.trace, self.cells, self.outputs
        # (an input updated by a functional update, on JAX, is rebound too: the program returns its new value)
        functional = {x.writes for x in trace.instructions if _tracing.rebinds(x)}
        self.rebind = [((kind, i), _slot(t.data, outputs)) for kind, (ts, ins) in enumerate(((cells.tensors, self.tensor_in),
                       (cells.grad_tensors, self.grad_in))) for i, (t, tr) in enumerate(zip(ts, ins))
                       if t.data is not tr or tr._i in functional]
        for i, (t, g0) in enumerate(zip(cells.tensors, self.grads0)):
            gnew = t.grad
            if gnew is not g0:
                self.new_grads.append((i, None if gnew is None else _slot(gnew.data, outputs)))
        # (a number the call left alone, the learning rate, is no output: it stays the user's)
        # (a call that gave back its argument, JAX's astype to the same dtype, writes nothing into
        # an immutable array: the learning rate stays the user's number there too)
        written = {x.writes for x in trace.instructions if x.writes is not None
                   and (_tracing.rebinds(x) or not _tracing._immutable(trace.witness[x.writes]))}
        number_in = self.number_in
        self.numbers = [(k, _slot(d[name], outputs)) for k, (d, name, _) in
                        enumerate(cells.numbers) if d[name] is not number_in[k][1] or number_in[k][1]._i in written]

    def _restore(self, value: Callable[[Tracer], Any] = lambda tr: tr._w) -> None:
        """The arguments hold the first call's values (the witnesses, or ``value`` of each traced value
        they hold): this call was one eager run."""
        cells = self.cells
        for obj in (*cells.tensors, *cells.grad_tensors):
            if type(obj.data) is Tracer:
                obj.data = value(obj.data)
        for t in [*cells.tensors, *(x for o in self.flat.objects for x in o._jit_state()[1])]:
            if type(t.data) is Tracer:  # (state the call made: Adam's moments on its first step)
                t.data = value(t.data)
            g = t.grad
            if g is not None and type(g.data) is Tracer:
                g.data = value(g.data)
        kept = {k for k, _ in self.numbers}
        for k, (d, name, _) in enumerate(cells.numbers):
            if type(d[name]) is Tracer:  # (a number f rebound: its new value, also when f raised after)
                d[name] = value(d[name]) if k in kept or d[name] is not self.number_in[k][1] else self.number_in[k][0]

    def state_slots(self) -> list[int]:
        """The slots `_restore` reads: the values the call leaves in the state."""
        found: list[int] = []

        def note(tr: Tracer) -> Tracer:
            found.append(tr._i)
            return tr

        self._restore(note)
        return found

    def first_result(self) -> tuple[Any, ...]:
        """The first call's result: the program's outputs as the trace computed them."""
        return tuple(self.trace.witness[o] if isinstance(o, int) else o[1] for o in self.outputs)


class _Entry:
    """One signature's program, with how to feed it and where its results go.

    Built from a trace's run (`_Capture`): the partial-evaluation split where results
    require grad (`_Linear.split`), the passes and the generated source (`Program`), and
    the runner of the backend (`_backend_runner`).
    """

    program: Program
    out_tmpl: Any
    grad_outputs: list[int]  # outputs that required grad when traced
    simple: bool  # only raw arrays in and out: nothing to write back, no node to record
    key: Any  # its key in the cache
    rebind: list[tuple[tuple[int, int], int]]  # ((tensors 0 / gradients 1, index), output) for rebound data
    new_grads: list[tuple[int, Any]]  # (tensor index, output or None) for a .grad the call set
    number_cells: list[tuple[int, int]]  # (number cell, output) for the numbers the call changes
    number_kinds: list[tuple[Any, Any, Any]]  # (namespace, dtype, device) a Python number becomes an array with
    counts: list[int]  # optimizer steps the call made, per state object
    bumps: list[tuple[int, int]]  # (tensor index, version increments) for tensors updated in place
    donated: list[int]  # the program's inputs whose buffers it may overwrite or hand to XLA (donate_argnums)
    n_out: int  # the program's outputs before the residuals (which follow them, for the backward program)
    linear: _Linear | None  # the backward program, where results required grad when traced
    n_grads: int  # the gradients held when traced (inputs of the program)
    grad_blind: frozenset[int]  # the tensors (by index) whose .grad f set before reading it, or never touched

    run: Callable[..., tuple[Any, ...]]

    def __init__(self, key: Any, cap: _Capture, name: str, compile: str | None, donated: set[int]) -> None:  # noqa: A002
        flat, cells, trace = cap.flat, cap.cells, cap.trace
        self.key = key
        self.out_tmpl = cap.out_tmpl
        self.rebind = cap.rebind
        self.new_grads = cap.new_grads
        self.number_cells = cap.numbers
        self.number_kinds = cap.number_kinds
        self.counts = [o._jit_count() - c for o, c in zip(flat.objects, cap.steps)]
        self.bumps = [(i, t._version[0] - v) for i, (t, v) in enumerate(zip(cells.tensors, cap.versions)) if t._version[0] != v]
        self.grad_outputs = _grad_outputs(cap.out_tmpl)
        self.n_grads = len(cells.grad_tensors)
        self.grad_blind = cap.grad_blind
        self.simple = not (cells.tensors or cells.grad_tensors or cells.numbers or flat.objects or self.grad_outputs)
        reuse = all(_tracing.is_numpy(w) for w in trace.witness)
        self.n_out = len(cap.outputs)
        self.linear = lin = cap.linear
        run_trace = trace if lin is None else self._split(lin, cap, name, compile, reuse)
        self.program = Program(run_trace, cap.outputs, donated, name, reuse)  # (the passes run here)
        self.run = _backend_runner(self.program, run_trace, compile, donated)
        self.donated = [k for k, s in enumerate(run_trace.inputs) if s in donated]

    def _split(self, lin: _Linear, cap: _Capture, name: str, compile: str | None, reuse: bool) -> Trace:  # noqa: A002
        """Partial evaluation: the backward program apart; the forward's trace, which also returns the residuals."""
        run_trace = lin.split(cap.trace, cap.outputs, name, compile, reuse)
        lin.kept = [i for i, (t, tr) in enumerate(zip(cap.cells.tensors, cap.tensor_in))
                    if not t._requires_grad and tr._i in lin.residuals]
        # (what a recomputation for create_graph could not reproduce: state the call changes)
        lin.changes_state = bool(self.rebind or self.new_grads or self.number_cells or self.bumps
                                 or any(self.counts) or _writes_inputs(run_trace))
        return run_trace


class Jitted:
    """A function compiled by [`jit`][xpgrad.jit]: call it like the function; see [`jit`][xpgrad.jit].

    ``f`` may call any xpgrad function, ``grad``/``value_and_grad``/``vjp``/``jvp``/``vmap``/
    ``hessian``, nn Modules, losses, ``backward()`` and optimizer steps. The first call with a
    new signature runs ``f`` once on tracers (see `xpgrad._tracing`) and returns its
    results; later calls run the recorded program. Modules and optimizers passed as
    arguments, or reached through ``f``'s closures and globals, are state: their parameters,
    buffers, gradients and optimizer state are read and written back by each call. Python
    scalars and the Python state ``f`` reads (attributes, hooks) are static (a new value
    traces again).
    """

    def __init__(self, f: Callable[..., Any], static_argnums: tuple[int, ...], static_argnames: tuple[str, ...],
                 donate_argnums: tuple[int, ...], compile: str | None, cache_size: int,  # noqa: A002
                 donate_argnames: tuple[str, ...] = ()) -> None:
        self.f = f
        self.static_argnums = static_argnums
        self.static_argnames = static_argnames
        self.donate_argnums = donate_argnums
        self.donate_argnames = donate_argnames
        self._donate_given = donate_argnums  # (jit() replaces this by the argnums the caller gave)
        self._donate_by_name: dict[int, str] = {}  # donated position -> its parameter's name (may come by keyword)
        self.compile = compile
        self.cache_size = cache_size
        self._cache: collections.OrderedDict[Any, _Entry] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._tracing: dict[Any, threading.Lock] = {}  # signature -> held while it is traced
        self._traces = 0
        self._name = getattr(f, "__name__", type(f).__name__)
        # calls whose arguments are all raw arrays (no Tensor, Module, keyword or static argument):
        # a key of their types, shapes, dtypes (strides, devices) -> an entry with nothing to write back
        self._fast: dict[Any, _Entry] = {}
        self._fast_ok = not static_argnums and not static_argnames
        functools.update_wrapper(self, f)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else types.MethodType(self, obj)

    # ---------------------------------------------------------------- the cache
    def clear_cache(self) -> None:
        """Forget every traced program (the next call traces again)."""
        with self._lock:
            self._cache.clear()
            self._fast.clear()

    def cache_info(self) -> CacheInfo:
        """``(hits, traces, maxsize, currsize)``: calls replayed, traces made (retraces included), the bound, the size now."""
        return CacheInfo(self._hits, self._traces, self.cache_size, len(self._cache))

    # ---------------------------------------------------------------- calling
    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[_Flat, Any, Any]:
        flat = _Flat()
        who = f"jit({self._name})"
        given = tuple(i for i in self._donate_given if self._donate_by_name.get(i) not in kwargs)
        for label, nums in (("static_argnums", self.static_argnums), ("donate_argnums", given)):
            if nums and max(nums) >= len(args):
                msg = (f"{who}: {label} {nums} names argument {max(nums)}, but the call has {len(args)} "
                       "positional arguments")
                raise XpgradValueError(msg)
        targs: list[Any] = []
        for i, a in enumerate(args):
            if i in self.static_argnums:
                flat.key.append(("static", _freeze(a, who)))
                targs.append(a)
            else:
                targs.append(_flatten(a, flat, who))
        tkw: dict[str, Any] = {}
        for k in sorted(kwargs):  # (the order tree_util flattens a dict in: _tensors_of's)
            v = kwargs[k]
            flat.key.append(("kw", k))
            if k in self.static_argnames:
                flat.key.append(("static", _freeze(v, who)))
                tkw[k] = v
            else:
                tkw[k] = _flatten(v, flat, who)
        flat.key.append(self._guards(flat, targs, tkw))
        return flat, targs, tkw

    def _guards(self, flat: _Flat, targs: Any, tkw: Any) -> Any:
        """The guard of a call (see `_Guards`): what its arguments' objects and ``f``'s
        closures and globals hold; their Tensors join ``flat.tensors``."""
        g = _Guards(flat)
        g.walk(targs)
        g.walk(tkw)
        g.state = False
        g.walk(self.f)
        if g.state:  # (f reads state of its own: every call checks it)
            self._fast_ok = False
        return ("guards", tuple(g.key), tuple(g.objects))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fk = None
        if self._fast_ok and not kwargs and not _tracing.ACTIVE[0] and not ANOMALY.get():
            fk = _fast_key(args)
            if fk is not None:
                p = current_policy()
                fk = (fk, id(p.xp), p.device, p.dtype, p.seed, GRAD_ENABLED.get())
                entry = self._fast.get(fk)
                if entry is not None:
                    self._hits += 1
                    try:
                        self._cache.move_to_end(entry.key)  # (least recently used first out; one C call)
                    except KeyError:
                        pass
                    return _build_out(entry.out_tmpl, entry.run(*args), _NOTHING)
        if TRACE.get() is not None or _core._vmap_open or ANOMALY.get():
            # inside another jit (it is inlined into the outer program), vmap, or detect_anomaly
            # (whose checks read values after each op): f itself
            return self.f(*args, **kwargs)
        try:
            flat, targs, tkw = self._split(args, kwargs)
        except _Eager:
            return self.f(*args, **kwargs)
        cells = _Cells(flat)
        p = current_policy()
        key = (tuple(flat.key), cells.key(), id(p.xp), p.device, p.dtype, p.seed, GRAD_ENABLED.get(), ANOMALY.get())
        res: tuple[Any, ...] | None = None
        entry = self._lookup(key)
        if entry is None and cells.grad_tensors:
            entry = self._lookup_blind(key, cells)
        if entry is not None and not entry.n_grads and cells.grad_tensors:
            cells.grad_tensors = []  # (an entry of the state with no .grad, which it never reads: see _lookup_blind)
        # (the generator's state before a call that draws: a recomputation for create_graph replays it)
        rng = _rng_now() if GRAD_ENABLED.get() and (entry is None or (entry.linear is not None and entry.linear.stateful)) \
            else None
        if entry is None:
            # one trace per signature: a thread that finds another tracing it waits, then replays
            with self._lock:
                lock = self._tracing.setdefault(key, threading.Lock())
            try:
                with lock:
                    entry = self._lookup(key)
                    if entry is None:
                        entry, res = self._trace_call(key, flat, cells, targs, tkw, keep=True)
            finally:
                with self._lock:
                    self._tracing.pop(key, None)
        if res is None:
            res = _replay(entry, flat, cells)
        if fk is not None and entry.simple and not entry.donated:
            if len(self._fast) >= self.cache_size:
                self._fast.clear()
            self._fast[fk] = entry
        return self._results(entry, res, cells, args, kwargs, rng)

    def _lookup(self, key: Any) -> _Entry | None:
        """The cached entry of a signature (counted as a hit, made the most recently used), or None."""
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None:
                self._cache.move_to_end(key)
                self._hits += 1
            return entry

    def _lookup_blind(self, key: Any, cells: _Cells) -> _Entry | None:
        """The entry traced in the same state with no ``.grad`` held, where ``f`` sets each of these
        gradients before it reads it (``zero_grad()`` first) or never touches it: the gradients that
        appeared after the first step change nothing it computes. Cached under ``key`` too."""
        held = {i for i, t in enumerate(cells.tensors) if t.grad is not None}
        if len(cells.grad_tensors) != len(held):  # (a gradient that is also an argument: traced apart)
            return None
        entry = self._lookup((key[0], cells.key(blind=True), *key[2:]))
        if entry is None or entry.n_grads or not held <= entry.grad_blind:
            return None
        self._store(key, entry)
        return entry

    def _results(self, entry: _Entry, res: tuple[Any, ...], cells: _Cells, args: Any, kwargs: Any, rng: Any) -> Any:
        """The call's result; outputs that depend on Tensors requiring grad get one node, whose VJP is
        the backward program, run on the residuals this call's forward program returned."""
        made: dict[int, Tensor] = {}
        lin = entry.linear
        if lin is not None and GRAD_ENABLED.get():
            outs = [res[s] for s in entry.grad_outputs]
            call = _Call(self, lin, res[entry.n_out:], args, kwargs, rng, outs)
            made = dict(zip(entry.grad_outputs, _record_call(call, cells, outs)))
        return _build_out(entry.out_tmpl, res, made)

    def trace(self, *args: Any, **kwargs: Any) -> Program:
        """Trace ``f`` on these arguments and return its [`Program`][xpgrad.Program] (nothing is cached; arguments are not changed).

        Examples:
            >>> import numpy as np, xpgrad as xg
            >>> prog = xg.jit(lambda x: xg.sum(xg.sin(x) * 2.0)).trace(np.ones(3))
            >>> print(prog)  # doctest: +ELLIPSIS
            program <lambda>(a0): 3 calls
              v1 = numpy.sin(a0:float64[3])    # frees a0...
              ...
        """
        try:
            flat, targs, tkw = self._split(args, kwargs)
        except _Eager:
            msg = f"jit({self._name}).trace: cannot trace inside vmap or forward mode"
            raise XpgradValueError(msg) from None
        cells = _Cells(flat)
        snap = _snapshot(cells)
        # the trace is an eager run, which updates state in place (an optimizer step, running
        # statistics): it runs on copies, and the state dicts of optimizers are put back after
        optimizers: list[Any] = [o for o in flat.objects if isinstance(getattr(o, "state", None), dict)]
        states = [(o, {k: dict(v) for k, v in o.state.items()}) for o in optimizers]
        for t in (*cells.tensors, *cells.grad_tensors):
            t.data = backend_namespace(t.data).asarray(t.data, copy=True)
        try:
            return self._trace_call(None, flat, cells, targs, tkw, keep=False)[0].program
        finally:
            _restore(cells, snap)
            for o, st in states:
                o.state.clear()
                o.state.update(st)

    lower = trace

    def _trace_call(self, key: Any, flat: _Flat, cells: _Cells, targs: Any, tkw: Any, *,
                    keep: bool) -> tuple[_Entry, tuple[Any, ...]]:
        """Trace a call whose signature (`_split`: arguments and guards) is ``key``: run ``f`` on
        tracers (`_Capture`), build its entry (the partial-evaluation split, the passes, the
        program and its runner: `_Entry`), and cache it where ``keep`` and the call left the
        Python state it reads as it was. Returns the entry and the call's result."""
        self._check_compile(flat, cells)
        traced = self._trace_jax(key, flat, cells, targs, tkw) if keep and self.compile is None else None
        if traced is None:
            cap = _Capture(self._name, flat, cells)
            cap.run(self.f, targs, tkw)
            entry = _Entry(key, cap, self._name, self.compile, self._donated(flat, targs, tkw, cap.leaf_tracers))
            result = cap.first_result()
        else:
            cap, entry, result = traced
        with self._lock:
            self._traces += 1
        cap.trace.forget()  # (the program keeps no value of the first call: only shapes and dtypes)
        if keep and key is not None and self._unchanged(cap, targs, tkw):
            self._store(key, entry)
        return entry, result

    def _trace_jax(self, key: Any, flat: _Flat, cells: _Cells, targs: Any,
                   tkw: Any) -> tuple[_Capture, _Entry, tuple[Any, ...]] | None:
        """A trace of a call on JAX arrays, run inside one ``jax.jit`` trace: the witnesses are JAX's
        abstract values, so no operation is compiled on its own (JAX compiles each eager operation
        apart: seconds for a training step). The first call's results are those of the whole call,
        compiled once; the entry replays that compiled function where its outputs are the program's.

        Where Python reads a constant (a value no input reaches) or a call the trace does not record
        makes one, the trace runs again with the constants computed (``jax.ensure_compile_time_eval``).
        None where the arrays are not all JAX's, or where that fails too (``f`` raised, or read a
        value): the call's state is put back as it was, and the trace is made eagerly (which raises
        as ``f`` raises)."""
        arrays = [*flat.leaves, *(t.data for t in cells.tensors), *(g.data for g in cells.grad_tensors)]
        if not arrays or not all(_jax_array(a) for a in arrays) \
                or not all(_jax_array(like.data) for _, _, like in cells.numbers):
            return None
        import jax

        saved = _saved_state(flat, cells)
        for constants in (False, True):
            # (the constants, values no input reaches, are first staged too; where Python reads one, or one
            # is made by a call the trace does not record, again with them computed: each compiled apart)
            cap = _Capture(self._name, flat, cells)
            done: list[Any] = []
            try:
                compiled, ins = self._compile_whole(key, cap, targs, tkw, done, constants)
                outs = compiled(*ins)
                break
            except (jax.errors.JAXTypeError, _Abstract):
                _put_back(flat, cells, saved)
            except BaseException:  # noqa: BLE001 - (f raised: the eager trace raises it, leaving the state as f left it)
                _put_back(flat, cells, saved)
                return None
        else:
            return None
        entry, slots, n_extra = done[0]
        vals = dict(zip(slots, outs, strict=True))
        cap._restore(lambda tr: vals[tr._i])
        if not n_extra and not entry.donated and not entry.program.stateful \
                and all(isinstance(o, int) for o in cap.outputs) and entry.run is not entry.program.fn:
            entry.run = _compiled_runner(compiled, entry.run)  # (the program is the one just compiled)
        return cap, entry, tuple(vals[o] if isinstance(o, int) else o[1] for o in cap.outputs)

    def _compile_whole(self, key: Any, cap: _Capture, targs: Any, tkw: Any, done: list[Any],
                       constants: bool) -> tuple[Any, list[Any]]:
        """`_trace_jax`'s ``jax.jit`` of the whole call, lowered and compiled: its trace runs ``f`` (`_Capture.run`)
        and builds the entry; it returns the program's outputs, then the state's other values (appended to
        ``done`` with the entry). Returns the compiled function and its inputs."""
        import contextlib

        import jax

        flat = cap.flat

        def whole(*ws: Any) -> tuple[Any, ...]:
            with jax.ensure_compile_time_eval() if constants else contextlib.nullcontext():
                cap.run(self.f, targs, tkw, witnesses=ws)
                entry = _Entry(key, cap, self._name, None, self._donated(flat, targs, tkw, cap.leaf_tracers))
            if _leaks(cap, entry):
                msg = "a constant of the program is an abstract value"
                raise _Abstract(msg)
            outs = [o for o in cap.outputs if isinstance(o, int)]
            extra = [x for x in dict.fromkeys(cap.state_slots()) if x not in set(outs)]
            done.append((entry, [*outs, *extra], len(extra)))
            return tuple(cap.trace.witness[x] for x in (*outs, *extra))

        cap._inputs()
        ins = [cap.trace.witness[tr._i] for tr in cap.input_tracers()]
        return jax.jit(whole).lower(*ins).compile(), ins

    def _check_compile(self, flat: _Flat, cells: _Cells) -> None:
        """Refuse ``compile="torch"`` of arrays that are not torch's (before ``f`` runs: torch.compile takes torch tensors only)."""
        if self.compile == "torch":
            libs = {type(a).__module__.split(".")[0] for a in (*flat.leaves, *(t.data for t in cells.tensors))}
            if libs - {"torch"}:
                msg = f"jit({self._name}, compile='torch'): the arguments are {sorted(libs)} arrays; torch.compile takes torch tensors"
                raise XpgradValueError(msg)

    def _donated(self, flat: _Flat, targs: Any, tkw: Any, leaf_tracers: list[Tracer]) -> set[int]:
        """The trace inputs of the donated arguments (``donate_argnums`` and ``donate_argnames``)."""
        donated = {s for i in self.donate_argnums for s in _donated_slots(i, flat, targs, leaf_tracers)}
        donated |= {s for k in self.donate_argnames if k in tkw for s in _donated_slots(k, flat, tkw, leaf_tracers)}
        return donated

    def _unchanged(self, cap: _Capture, targs: Any, tkw: Any) -> bool:
        """Whether the call left the Python state it reads as it found it. (A call that changes it, a
        counter it increments, is not replayed: it traces again, as its Python runs at every eager call.)"""
        if cap.structure != [o._jit_structure() for o in cap.flat.objects]:
            return False
        try:
            return bool(self._guards(_Flat(), targs, tkw)[1] == cap.flat.key[-1][1])
        except _Eager:  # (f left a Tensor with a graph where it reads: the next call runs f as it is)
            return False

    def _store(self, key: Any, entry: _Entry) -> None:
        """Cache ``entry`` (the least recently used entry beyond ``cache_size`` goes)."""
        with self._lock:
            self._cache[key] = entry
            while len(self._cache) > self.cache_size:
                old = self._cache.popitem(last=False)[1]
                self._fast = {k: e for k, e in self._fast.items() if e is not old}


def _compiled_runner(compiled: Any, program: Callable[..., Any]) -> Callable[..., Any]:
    """The replay of a program that `Jitted._trace_jax` compiled whole (its outputs are the program's):
    arrays the compiled function refuses (another weak type: the signature does not see it) run the
    program under its own ``jax.jit``."""
    def run(*ins: Any) -> Any:
        try:
            return compiled(*ins)
        except TypeError:
            return program(*ins)

    return run


class _Abstract(Exception):  # noqa: N818 - (a signal: the trace on abstract values cannot make this program)
    pass


def _jax_array(a: Any) -> bool:
    t = type(a)
    return t.__module__.split(".")[0] in ("jax", "jaxlib") and "Tracer" not in t.__name__ and hasattr(a, "shape")


def _leaks(cap: _Capture, entry: _Entry) -> bool:
    """Whether an abstract value (a JAX tracer of `Jitted._trace_jax`'s run) is a constant of the programs
    or of the results (made by a call the trace does not record, which cannot be replayed)."""
    from jax.core import Tracer as JaxTracer

    consts = [*entry.program._const.values(), *(o[1] for o in cap.outputs if not isinstance(o, int))]
    lin = entry.linear
    if lin is not None and lin.program is not None:
        consts += lin.program._const.values()
    return any(isinstance(v, JaxTracer) for v in tree_leaves(consts))


def _saved_state(flat: _Flat, cells: _Cells) -> Any:
    """What a call may change besides its Python (see `_put_back`)."""
    # (each state dict with its items: put back in place, as the call's number cells are its entries)
    opts = [(o, {k: (v, dict(v)) for k, v in o.state.items()}, getattr(o, "_steps", None))  # type: ignore[attr-defined]
            for o in flat.objects if isinstance(getattr(o, "state", None), dict)]
    return _snapshot(cells), opts, _rng_now()


def _put_back(flat: _Flat, cells: _Cells, saved: Any) -> None:
    """The state before a call: its Tensors' data and gradients, its numbers, the optimizers' state and
    step counts, the random generator's state."""
    snap, opts, (gen, rng) = saved
    _restore(cells, snap)
    for o, st, steps in opts:
        o.state.clear()
        for k, (d, items) in st.items():
            d.clear()
            d.update(items)
            o.state[k] = d
        if steps is not None:
            o._steps = steps
    with gen._lock:
        gen._np.bit_generator.state = rng


def _slot(v: Any, outputs: list[Any]) -> int:
    """Add ``v`` (a traced value, or a constant: made with no traced input) to the outputs; its position."""
    if type(v) is Tracer:
        v._t.keep(v)  # (the first call returns its value)
    outputs.append(v._i if type(v) is Tracer else ("const", v))
    return len(outputs) - 1


def _donated_slots(i: int | str, flat: _Flat, targs: Any, leaf_tracers: list[Tracer]) -> list[int]:
    """The trace inputs of positional argument ``i`` (of ``targs``) or keyword argument ``i`` (of a dict)."""
    if isinstance(i, int) and i >= len(targs):
        return []
    t = targs[i]
    items = t.items if type(t) is _Tree else [t]
    return [leaf_tracers[x.i]._i for x in items if type(x) is _Leaf]


def _out_template(out: Any, outputs: list[Any], tensors: dict[int, Tensor]) -> Any:
    """``(treedef, one entry per leaf, whether the result is one leaf)`` of the result; an entry is
    ``("same", t)`` (an argument Tensor), ``("tensor", slot, requires_grad)``, ``("raw", slot)``
    or ``("const", value)``."""
    leaves, treedef = tree_flatten(out)
    return (treedef, [_out_leaf(o, outputs, tensors) for o in leaves], treedef.num_nodes == 1 and len(leaves) == 1)


def _out_leaf(out: Any, outputs: list[Any], tensors: dict[int, Tensor]) -> Any:
    if isinstance(out, Tensor):
        if id(out) in tensors:
            return ("same", out)
        return ("tensor", _slot(out.data, outputs), out._requires_grad)
    if type(out) is Tracer:
        return ("raw", _slot(out, outputs))
    if not isinstance(out, _SCALARS) and _holds_traced(out, 4, set()):
        trace = TRACE.get()
        name = trace.func if trace is not None else "f"
        kind = "dataclass" if dataclasses.is_dataclass(out) else "class"
        msg = (
            f"jit({name}): {name} returned a {type(out).__qualname__} ({kind}) holding traced arrays, which jit "
            f"cannot see inside: every call would return that same object with the first call's values; register "
            f"{type(out).__qualname__} with xg.tree_util.register_dataclass or xg.tree_util.register_pytree_node "
            "so that jit flattens it"
        )
        raise XpgradTypeError(msg)
    return ("const", out)


def _holds_traced(obj: Any, depth: int, seen: set[int]) -> bool:
    """Whether an object jit does not flatten holds a traced value in its attributes."""
    if depth == 0 or id(obj) in seen or getattr(obj, "_jit_state", None) is not None or isinstance(obj, type):
        return False
    seen.add(id(obj))
    try:
        attrs = list(vars(obj).values())
    except TypeError:
        attrs = [getattr(obj, n, None) for c in type(obj).__mro__ for n in getattr(c, "__slots__", ())
                 if isinstance(n, str)]
    for v in tree_leaves(attrs):
        if type(v) is Tracer or (isinstance(v, Tensor) and type(v.data) is Tracer):
            return True
        if not isinstance(v, (*_SCALARS, Tensor)) and _holds_traced(v, depth - 1, seen):
            return True
    return False


_NOTHING: dict[int, Tensor] = {}


def _fast_key(args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The signature of arguments that are all raw arrays (their `_array_key`), or None."""
    ks = []
    for a in args:
        k = _array_key(a)
        if k is None:
            return None
        ks.append(k)
    return tuple(ks)


def _build_out(tmpl: Any, res: tuple[Any, ...], made: dict[int, Tensor]) -> Any:
    treedef, items, single = tmpl
    if single and items[0][0] == "raw":  # (one raw array: the common result, no tree to build)
        return res[items[0][1]]
    vals = []
    for x in items:
        kind = x[0]
        if kind == "raw":
            vals.append(res[x[1]])
        elif kind == "tensor":
            t = made.get(x[1])
            vals.append(Tensor(res[x[1]]) if t is None else t)
        else:  # "same", "const"
            vals.append(x[1])
    return treedef.unflatten(vals)


def _grad_outputs(tmpl: Any) -> list[int]:
    """The outputs (in template order) that were Tensors requiring grad when traced."""
    return [x[1] for x in tmpl[1] if x[0] == "tensor" and x[2]]


def _tensors_of(obj: Any, found: dict[int, Tensor] | None = None) -> dict[int, Tensor]:
    """The Tensors of a call's arguments (Modules' and optimizers' included), in `_flatten`'s order."""
    found = {} if found is None else found
    for x in tree_leaves(obj):
        if isinstance(x, Tensor):
            found.setdefault(id(x), x)
        elif getattr(x, "_jit_state", None) is not None:
            for t in x._jit_state()[1]:
                found.setdefault(id(t), t)
    return found


def _call_tensors(f: Any, args: Any, kwargs: Any) -> dict[int, Tensor]:
    """The Tensors a call of ``f`` reads, in the order of a jitted call's: its arguments', then those
    `_Guards` finds (closures, globals, objects' attributes)."""
    flat = _Flat()
    flat.tensors = _tensors_of((args, kwargs))
    g = _Guards(flat, eager=False)
    g.walk(args)
    g.walk(kwargs)
    g.walk(f)
    return flat.tensors


def _grad_leaves(out: Any, tensors: dict[int, Tensor]) -> list[Tensor]:
    """The Tensors of ``out`` that require grad, in `_grad_outputs`' order (``f``'s own arguments excluded)."""
    return [t for t in tree_leaves(out) if isinstance(t, Tensor) and t._requires_grad and id(t) not in tensors]


class _Linear:
    """The backward of a traced call whose results require grad, split from its forward (partial evaluation).

    The trace runs ``f``, then the backward pass of its results requiring grad from
    cotangents that are inputs of the trace (the gradients of the Tensors requiring grad
    are its outputs). The instructions recorded by ``f`` make the forward program, which also
    returns the *residuals*: its values that the backward instructions read. Those make the
    backward program, of (residuals, cotangents). So a backward through the call never runs
    ``f`` again: no second draw of its random numbers, no second update of its state
    (running statistics, writes in place), as ``jax.vjp`` of a jitted function.
    """

    def __init__(self, start: int, nslots: int, n_inputs: int, cts: list[int], grads: list[Any],
                 error: BaseException | None) -> None:
        self.start = start  # the first instruction of the backward
        self.nslots = nslots  # the slots below are values of the forward
        self.n_inputs = n_inputs  # the forward's inputs: the trace's first ones
        self.cts = cts  # the cotangents' slots
        self.grads = grads  # per Tensor requiring grad: its gradient's slot, or ("const", value)
        self.error = error  # what tracing the backward raised: raised again by a backward through the call
        self.run: Callable[..., tuple[Any, ...]] | None = None
        self.program: Program | None = None
        self.stateful = False  # the forward draws random numbers (a recomputation must replay them)
        self.residuals: set[int] = set()  # the residuals' slots
        self.kept: list[int] = []  # the Tensors (by index) that require no grad and whose arrays are residuals
        self.changes_state = False  # the forward writes state back (a recomputation would do it again)

    def split(self, trace: Trace, outputs: list[Any], name: str, compile: str | None,  # noqa: A002
              reuse: bool) -> Trace:
        """Build the backward program; append the residuals to ``outputs``; return the forward's trace."""
        n = self.nslots
        bwd = trace.instructions[self.start:]
        res: dict[int, None] = {}
        for x in bwd:
            for t in _tracing._tracers_in((x.args, x.kwargs)):
                if t._i < n:
                    res[t._i] = None
            if x.writes is not None and x.writes < n:
                res[x.writes] = None
        for g in self.grads:
            if isinstance(g, int) and g < n:
                res[g] = None
        residuals = list(res)
        self.residuals = set(residuals)
        outputs.extend(residuals)
        fwd = copy.copy(trace)
        fwd.instructions = trace.instructions[:self.start]
        fwd.inputs = trace.inputs[:self.n_inputs]
        self.stateful = trace.stateful
        if self.error is None:
            back = copy.copy(trace)
            back.instructions = bwd
            back.inputs = residuals + self.cts
            back.stateful = any(getattr(x.fn, "_xg_stateful", False) for x in bwd)
            self.program = Program(back, list(self.grads), set(), f"vjp_{name}", reuse)
            self.run = _backend_runner(self.program, back, compile, set())
        return fwd


def _trace_backward(trace: Trace, req: list[Tensor], leaves: list[Tensor]) -> _Linear:
    """Trace the backward pass of ``leaves`` (results requiring grad) to ``req`` from new cotangent inputs."""
    start, nslots, n_inputs = len(trace.instructions), len(trace.witness), len(trace.inputs)
    trace.keep_below = nslots  # (the forward's values the backward reads are the first call's residuals)
    cts = []
    for t in leaves:
        d = t.data
        w = d._w if type(d) is Tracer else d
        xp = backend_namespace(w)
        xp = _tracing.base_namespace(xp) or xp
        cts.append(trace.input(xp.ones_like(w), xp, "a cotangent"))
    grads: list[Any] = []
    error = None
    hooks = _drop_hooks(req)
    try:
        with enable_grad():
            gs = _autograd_grad(leaves, req, grad_outputs=[Tensor(c) for c in cts], allow_unused=True)
        for g in gs:
            d = None if g is None else g.data
            if type(d) is Tracer:
                trace.keep(d)  # (an output of the backward program: the passes compare constants with it)
            grads.append(d._i if type(d) is Tracer else ("const", d))
    except Exception as e:  # noqa: BLE001 - (raised again by a backward through the call, not by the call)
        error = e
        del trace.instructions[start:]
    finally:
        _put_hooks(hooks)
    return _Linear(start, nslots, n_inputs, [c._i for c in cts], grads, error)


def _drop_hooks(req: list[Tensor]) -> list[tuple[Tensor, Any]]:
    """The hooks of the call's Tensors that require grad, taken off them while the call's VJP is
    traced or run (`_put_hooks` puts them back): the backward that reaches the call's node runs
    them on the gradients the node gives, once, as eagerly."""
    saved = [(t, t._hooks) for t in req if t._hooks]
    for t, _ in saved:
        t._hooks = None
    return saved


def _put_hooks(saved: list[tuple[Tensor, Any]]) -> None:
    for t, h in saved:
        t._hooks = h


def _writes_inputs(trace: Trace) -> bool:
    """Whether the program writes in place into one of its inputs (or a view of one)."""
    ins = set(trace.inputs)
    ws = [trace.witness[s] for s in trace.inputs]
    may_alias = _tracing._MAY_ALIAS[0]
    for x in trace.instructions:
        s = x.writes
        # (a value the trace dropped is an array the program made, owning its memory: no input's)
        if s is not None and (s in ins or (_tracing.held(trace.witness[s]) and any(may_alias(trace.witness[s], w) for w in ws))):
            return True
    return False


def _rng_now() -> tuple[Any, Any]:
    gen = _current_generator()
    with gen._lock:
        return gen, gen._np.bit_generator.state


class _Call:
    """One differentiable call of a jitted function: its residuals, for the backward program (see `_Linear`)."""

    def __init__(self, owner: Jitted, lin: _Linear, residuals: tuple[Any, ...], args: Any, kwargs: Any,
                 rng: Any, outs: list[Any]) -> None:
        self.owner, self.lin, self.residuals, self.args, self.kwargs, self.rng = owner, lin, residuals, args, kwargs, rng
        # (the outputs' shapes, dtypes, namespaces and devices: the zero cotangent of an output backward did not reach)
        self.outs = [(tuple(o.shape), o.dtype, backend_namespace(o), array_api_compat.device(o)) for o in outs]
        self.g: Any = None
        self.result: list[Any] = []

    def cotangents(self, xp: Any, g: Any) -> list[Any]:
        if self.g is g:
            return self.result
        gs = list(g) if isinstance(g, (tuple, list)) else [g]
        gs = [ns.zeros(shape, dtype=dt, device=dev) if gi is None else gi
              for gi, (shape, dt, ns, dev) in zip(gs, self.outs, strict=True)]
        if any(isinstance(x, Tensor) for x in gs):  # create_graph: the VJP is recorded, so it runs eagerly
            res = self._recompute(gs)
        else:
            lin = self.lin
            if lin.error is not None:
                raise lin.error
            res = lin.run(*self.residuals, *gs)  # type: ignore[misc]
        self.g, self.result = g, list(res)
        return self.result

    def _recompute(self, gs: list[Any]) -> Any:
        """The VJP under create_graph: ``f`` again, eagerly and recorded, drawing the forward's random numbers."""
        if self.lin.changes_state:
            name = self.owner._name
            msg = (f"jit({name}): a gradient of a gradient (create_graph) through a jitted call that changes "
                   "state (a buffer, a parameter, an optimizer or an argument updated in place) would run "
                   f"{name} again and change it twice; take the gradients inside the jitted function "
                   "(xg.jit(xg.grad(...))) or call the function without jit")
            raise XpgradRuntimeError(msg)
        with enable_grad():
            if self.rng is None:
                out = self.owner.f(*self.args, **self.kwargs)
            else:
                gen, state = self.rng
                with gen._lock:
                    now = gen._np.bit_generator.state
                    gen._np.bit_generator.state = state
                try:
                    out = self.owner.f(*self.args, **self.kwargs)
                finally:
                    with gen._lock:
                        gen._np.bit_generator.state = now
            ts = _call_tensors(self.owner.f, self.args, self.kwargs)
            req = [t for t in ts.values() if t._requires_grad]
            hooks = _drop_hooks(req)
            try:
                return _autograd_grad(_grad_leaves(out, ts), req, grad_outputs=gs, allow_unused=True, create_graph=True)
            finally:
                _put_hooks(hooks)


def _rule(xp: Any, g: Any, ans: Any, i: int, *args: Any) -> Any:
    return args[-1].cotangents(xp, g)[i]


def _record_call(call: _Call, cells: _Cells, outs: list[Any]) -> list[Tensor]:
    """One node for the outputs, its parents the Tensors that require grad; its VJP the backward program.

    Tensors whose arrays are residuals are inputs of the node too (with no gradient): as for
    any node, backward refuses them modified in place after the call (InPlaceModificationError)."""
    req = [t for t in cells.tensors if t._requires_grad]
    kept = [cells.tensors[i] for i in call.lin.kept]
    return _core.record_opaque(f"jit({call.owner._name})", (*req, *kept), outs, call, _rule)


def _replay(entry: _Entry, flat: _Flat, cells: _Cells) -> Any:
    ins = list(flat.leaves)
    ins += [t.data for t in cells.tensors]
    ins += [g.data for g in cells.grad_tensors]
    for (d, n, _), nk in zip(cells.numbers, entry.number_kinds):
        ins.append(_number_input(d[n], nk))
    for k in entry.donated:
        # a donated buffer that another input shares (f(x, x), overlapping views) is copied: the
        # program would overwrite a value it still reads (JAX refuses a buffer donated and passed again)
        a = ins[k]
        if (type(a) is np.ndarray and not a.flags.writeable) or any(
                j != k and (b is a or (type(a) is np.ndarray and type(b) is np.ndarray and np.may_share_memory(a, b)))
                for j, b in enumerate(ins)):  # (a read-only NumPy array is copied too: the program writes into it)
            ins[k] = a.copy() if type(a) is np.ndarray else backend_namespace(a).asarray(a, copy=True)
    res = entry.run(*ins)
    for (kind, i), s in entry.rebind:
        (cells.tensors if kind == 0 else cells.grad_tensors)[i].data = res[s]
    for i, s in entry.new_grads:
        t = cells.tensors[i]
        t.grad = None if s is None else Tensor(res[s])
    for i, s in entry.number_cells:
        d, n, _ = cells.numbers[i]
        d[n] = res[s]
    for i, b in entry.bumps:
        cells.tensors[i]._version[0] += b
    for o, c in zip(flat.objects, entry.counts):
        if c:
            o._jit_replayed(c)
    return res



def _backend_runner(program: Program, trace: Trace, compile: str | None, donated: set[int]) -> Callable[..., Any]:  # noqa: A002
    """How the program runs: under jax.jit on JAX arrays, torch.compile when asked, else replayed."""
    fn = program.fn
    ws = [trace.witness[s] for s in trace.inputs]
    libs = {type(w).__module__.split(".")[0] for w in ws if hasattr(w, "shape")}
    if libs <= {"jax", "jaxlib"} and libs and not program.stateful:
        import jax

        pos = [k for k, s in enumerate(trace.inputs) if s in donated]
        return jax.jit(fn, donate_argnums=tuple(pos))  # type: ignore[no-any-return]
    if compile == "torch":  # (jit() checked the option, the call that its arrays are torch's)
        import torch

        return torch.compile(fn, dynamic=False)  # type: ignore[no-any-return]
    return fn


def _snapshot(cells: _Cells) -> Any:
    return ([t.data for t in cells.tensors], [t.grad for t in cells.tensors], [g.data for g in cells.grad_tensors],
            [d[n] for d, n, _ in cells.numbers], [t._version[0] for t in cells.tensors])


def _restore(cells: _Cells, snap: Any) -> None:
    datas, grads, gdatas, nums, vers = snap
    for t, d, g, v in zip(cells.tensors, datas, grads, vers):
        t.data = d
        t.grad = g
        t._version[0] = v
    for g, d in zip(cells.grad_tensors, gdatas):
        g.data = d
    for (d, n, _), v in zip(cells.numbers, nums):
        d[n] = v


def jit(f: Callable[..., Any] | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        donate_argnames: str | Sequence[str] = (), compile: str | None = None,  # noqa: A002
        cache_size: int = 64) -> Any:
    """Trace ``f`` once per signature, then replay its program of backend calls with no tape.

    What ``f`` may call, and what is state or static: see [`Jitted`][xpgrad.Jitted].

    Args:
        f: the function (``jit`` also works as a decorator, with or without arguments).
        static_argnums: positions of arguments that are static: hashed into the signature
            and passed to ``f`` as they are (a new value traces again).
        static_argnames: names of keyword arguments that are static.
        donate_argnums: positions of array arguments the program may overwrite (NumPy:
            their buffers hold intermediate results; JAX: ``jax.jit``'s donation).
        donate_argnames: names of arguments to donate, as ``jax.jit``: a keyword argument
            of that name is donated, and so is a positional one whose parameter has that
            name. As in JAX, given alone either of ``donate_argnums``/``donate_argnames``
            implies the other through ``f``'s signature, and a name ``f`` does not take
            (with no ``**kwargs``) raises here.
        compile: ``"torch"`` hands the program of torch arrays to ``torch.compile``;
            None replays it (JAX arrays always run under ``jax.jit``).
        cache_size: how many signatures are kept (least recently used dropped first).

    Returns:
        A [`Jitted`][xpgrad.Jitted] callable with ``trace(*args)`` (the [`Program`][xpgrad.Program]),
        ``clear_cache()`` and ``cache_info()``.

    Raises:
        ConcretizationError: ``f`` reads a traced value in Python (``if``, ``float``,
            ``item``...) or asks for a shape that depends on values; the message names the
            operation and the line.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> def loss(w, x):
        ...     return xg.sum(xg.tanh(x @ w) ** 2)
        >>> step = xg.jit(xg.grad(loss))
        >>> w, x = np.ones((3, 2)), np.full((4, 3), 0.1)
        >>> bool(np.allclose(step(w, x), xg.grad(loss)(w, x)))
        True
        >>> step(w, x).shape, step.cache_info().traces
        ((3, 2), 1)
    """
    if f is None:
        return lambda g: jit(g, static_argnums=static_argnums, static_argnames=static_argnames, donate_argnums=donate_argnums,
                             donate_argnames=donate_argnames, compile=compile, cache_size=cache_size)
    if not callable(f):
        msg = f"jit: expected a function, got {type(f).__name__} {f!r}"
        raise XpgradTypeError(msg)
    nums = _positions("static_argnums", static_argnums)
    given = _positions("donate_argnums", donate_argnums)
    names = _names("static_argnames", static_argnames)
    donate, donate_names = _donation(f, given, _names("donate_argnames", donate_argnames))
    _check_options(nums, names, donate, donate_names, cache_size, compile)
    jitted = Jitted(f, nums, names, donate, compile, cache_size, donate_names)
    jitted._donate_given = given  # (positions inferred from donate_argnames may be passed by keyword)
    jitted._donate_by_name = _param_names(f, donate)
    return jitted


def _check_options(nums: tuple[int, ...], names: tuple[str, ...], donate: tuple[int, ...], donate_names: tuple[str, ...],
                   cache_size: Any, compile: Any) -> None:  # noqa: A002
    """Refuse `jit`'s options that clash (static and donated) or are bad (``cache_size``, ``compile``)."""
    if set(nums) & set(donate):
        msg = f"jit: an argument cannot be both static and donated: {sorted(set(nums) & set(donate))}"
        raise XpgradValueError(msg)
    if set(names) & set(donate_names):
        msg = f"jit: an argument cannot be both static and donated: {sorted(set(names) & set(donate_names))}"
        raise XpgradValueError(msg)
    if not isinstance(cache_size, int) or isinstance(cache_size, bool):
        msg = f"jit: cache_size must be a positive int, got {type(cache_size).__name__} {cache_size!r}"
        raise XpgradTypeError(msg)
    if cache_size < 1:
        msg = f"jit: cache_size must be a positive int, got {cache_size!r}"
        raise XpgradValueError(msg)
    if compile not in (None, "torch"):
        msg = f"jit: compile must be None or 'torch', got {compile!r}"
        raise XpgradValueError(msg)


def _param_names(f: Callable[..., Any], nums: tuple[int, ...]) -> dict[int, str]:
    """The names of ``f``'s positional-or-keyword parameters at positions ``nums``."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return {}
    return {k: p.name for k, p in enumerate(params)
            if k in nums and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD}


def _names(label: str, value: Any) -> tuple[str, ...]:
    """``static_argnames``/``donate_argnames`` as a tuple of str; a clear error otherwise."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (tuple, list)) and all(isinstance(n, str) for n in value):
        return tuple(value)
    msg = f"jit: {label} must be a str or a sequence of str, got {type(value).__name__} {value!r}"
    raise XpgradTypeError(msg)


def _donation(f: Callable[..., Any], nums: tuple[int, ...], names: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``(donate_argnums, donate_argnames)`` completed from ``f``'s signature as ``jax.jit`` does: given
    alone, each implies the other (positional-or-keyword parameters); a name ``f`` cannot take raises."""
    if not nums and not names:
        return nums, names
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):  # (no signature: a builtin) the arguments are taken as given
        return nums, names
    if names:
        by_name = {p.name: p for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            bad = sorted(set(names) - set(by_name))
            if bad:
                name = getattr(f, "__name__", type(f).__name__)
                msg = (f"jit: donate_argnames names {bad}, which {name} does not take (its parameters: "
                       f"{[p.name for p in params]})")
                raise XpgradValueError(msg)
    positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                    inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    if names and not nums:
        nums = tuple(k for k, p in enumerate(positional) if p.name in names)
    elif nums and not names:
        names = tuple(p.name for k, p in enumerate(positional)
                      if k in nums and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return nums, names


def _positions(label: str, value: Any) -> tuple[int, ...]:
    """``static_argnums``/``donate_argnums`` as a tuple of non-negative ints; a clear error otherwise."""
    vals = (value,) if isinstance(value, int) else value
    if not isinstance(vals, (tuple, list)):
        msg = f"jit: {label} must be an int or a sequence of ints, got {type(value).__name__} {value!r}"
        raise XpgradTypeError(msg)
    for v in vals:
        if not isinstance(v, int) or isinstance(v, bool):
            msg = f"jit: {label} must hold non-negative ints, got {type(v).__name__} {v!r}"
            raise XpgradTypeError(msg)
        if v < 0:
            msg = f"jit: {label} must hold non-negative ints, got {v!r}"
            raise XpgradValueError(msg)
    return tuple(vals)
