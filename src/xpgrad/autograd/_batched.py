"""Batched values: what [`xpgrad.vmap`][xpgrad.vmap] hands the function it maps.

A `Batched` is a Tensor as the mapped function sees it: one example of a
batch, with the example's (*logical*) shape. It holds a plain Tensor, its *physical*
value, whose leading axes are the batch axes: one per vmap *level* open around it,
outermost first, then the logical axes. A value that does not vary along a level
has a batch axis of size 1 there (it broadcasts), so closing over an unbatched value
costs nothing.

Every primitive applied to a Batched argument goes through its *batching rule*
(``Primitive.batch``, declared beside the operation; `RULES` lists them): the rule receives the physical
arguments, all lifted to the same number ``K`` of batch axes, calls primitives on
them (recorded on the tape as usual, so ``grad`` of ``vmap`` differentiates the
physical program) and returns the physical output, whose leading ``K`` axes are the
batch axes again. A primitive without a rule raises; one whose output shape would
depend on the data (``nonzero``, ``unique_*``, a batched boolean mask) raises too,
as in JAX.

Differentiation started *inside* a vmap (``vmap(grad(f))``) materializes its inputs
along every open level (an unbatched parameter becomes one copy per example): each
example's value then depends only on its own copies, so the physical backward pass
gives each example its own gradient. A ``vjp_fn`` called under vmaps opened after its
``vjp`` (``vmap(vjp_fn)``, how ``jacrev`` builds a jacobian in one pass) runs the
backward pass with batched cotangents: the rules see a batch of cotangents, the
tape's values stay as they are.
"""

from __future__ import annotations

import contextvars
import gc
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .._dispatch import tensor_namespace
from .._dtypes import kind
from .._exceptions import ConcretizationError as _ConcretizationError
from .._exceptions import XpgradIndexError, XpgradTypeError, XpgradValueError
from .._tracing import _user_line, set_primitives
from . import _core
from ._alias import may_alias
from ._core import PRIMITIVES, Primitive, apply
from ._grad_mode import graph_namespace
from ._tensor import _INPLACE_NAMES, _SUPPORTED_API_VERSIONS, Tensor, _batches_self, _wrap, _writer

__all__ = ["RULES", "STACK", "Batched", "ConcretizationError", "Level", "from_phys", "lift", "materialize", "to_phys"]

class _Table(Mapping[str, Any]):
    """A read-only view of the primitives, by name, that have attribute ``attr`` set: the
    batching rules and the refusals are declared on the primitives, this only lists them."""

    def __init__(self, attr: str) -> None:
        self._attr = attr

    def __getitem__(self, name: str) -> Any:
        p = PRIMITIVES.get(name)
        v = None if p is None else getattr(p, self._attr)
        if v is None:
            raise KeyError(name)
        return v

    def __iter__(self) -> Iterator[str]:
        return iter([n for n, p in list(PRIMITIVES.items()) if getattr(p, self._attr) is not None])

    def __len__(self) -> int:
        return sum(1 for p in list(PRIMITIVES.values()) if getattr(p, self._attr) is not None)


#: primitive name -> batching rule ``rule(prim, xs, bs, kw, K)`` (``Primitive.batch``): ``xs``
#: the physical arguments (batched ones lifted to ``K`` batch axes, others as given), ``bs``
#: which are batched; returns the physical output (a tuple for ``multi`` primitives)
RULES: Mapping[str, Callable[..., Any]] = _Table("batch")
#: primitive name -> why it cannot be batched (``Primitive.unbatchable``: its output shape depends on the data)
UNBATCHABLE: Mapping[str, str] = _Table("unbatchable")


class Level:
    """One open vmap: its batch size, and how random functions draw under it (``randomness``:
    ``"same"``, ``"different"`` or ``"error"``; ``rng``, the vmap call's state for them, shared
    by its chunks; ``offset``, the index in the whole batch of this chunk's first example).

    ``tangents_only``: only forward-mode tangents vary along this level (``jacfwd``'s, which
    pushes a batch of tangents through one evaluation of the primal), so `materialize` never
    copies a value along it: every other value is the same for each of its examples."""

    __slots__ = ("__weakref__", "offset", "randomness", "rng", "size", "tangents_only")

    def __init__(self, size: int, randomness: str = "same", rng: Any = None, offset: int = 0) -> None:
        self.size = size
        self.randomness = randomness
        self.rng = rng
        self.offset = offset
        self.tangents_only = False

    def __repr__(self) -> str:
        return f"<vmap level of size {self.size}>"


#: the open vmap levels of this context, outermost first
STACK: contextvars.ContextVar[tuple[Level, ...]] = contextvars.ContextVar("xpgrad_vmap_stack", default=())
_lock = threading.Lock()


class open_level:  # noqa: N801 - used like a function
    """Push a level for a block (and count it in ``_core._vmap_open``, the hot path's test)."""

    __slots__ = ("level", "token")

    def __init__(self, level: Level) -> None:
        self.level = level

    def __enter__(self) -> tuple[Level, ...]:
        st = (*STACK.get(), self.level)
        self.token = STACK.set(st)
        _opened()
        return st

    def __exit__(self, *exc: object) -> None:
        STACK.reset(self.token)
        _closed()


def _wrap_stamped(data: Any, node: Any = None, oidx: int = 0, version: list[int] | None = None) -> Tensor:
    """``_wrap``, the Tensor stamped with the vmap levels open (the primitives' results while a vmap is open)."""
    t = _wrap(data, node, oidx, version)
    t._levels = STACK.get()
    return t


def _opened() -> None:
    with _lock:
        _core._vmap_open += 1
        _core._wrap = _wrap_stamped


def _closed() -> None:
    with _lock:
        _core._vmap_open -= 1
        if not _core._vmap_open:
            _core._wrap = _wrap


class use_stack:  # noqa: N801 - used like a function
    """Run a block under another level stack (a backward pass under the levels opened since its vjp)."""

    __slots__ = ("stack", "token")

    def __init__(self, stack: tuple[Level, ...]) -> None:
        self.stack = stack

    def __enter__(self) -> None:
        self.token = STACK.set(self.stack)
        _opened()

    def __exit__(self, *exc: object) -> None:
        STACK.reset(self.token)
        _closed()


class ConcretizationError(_ConcretizationError):
    """A batched value inside vmap was converted to a Python value (it has none).

    A [`xpgrad.ConcretizationError`][xpgrad.ConcretizationError], as jit's: code that catches one catches both.
    """


def _concrete(what: str) -> XpgradTypeError:
    # (the user's line; "through xpgrad's autograd._batched._concrete" would only name this function)
    line = re.sub(r", through xpgrad's autograd\._batched\.\w+", "", _user_line())
    return ConcretizationError(
        f"{what}: this value is batched by vmap (it stands for one example of a batch, and differs "
        f"from example to example), so it has no single Python value, at {line}; keep the "
        "computation in array functions (xg.where instead of if), or pass the value with in_axes=None"
    )


class Batched(Tensor):
    """One example of a batch inside [`xpgrad.vmap`][xpgrad.vmap] (see the module docstring).

    Its ``shape`` is the example's; ``data`` and conversions to Python values raise,
    since a batched value has no single backend array or number.
    """

    __slots__ = ()  # (_inner and _levels are Tensor's slots: a Tensor can become a Batched, see write_into)

    _inner: Tensor
    _levels: tuple[Level, ...]

    def __init__(self, data: Any, requires_grad: bool = False) -> None:
        msg = "Batched: created only by xpgrad.vmap"
        raise XpgradTypeError(msg)

    # ------------------------------------------------------------------ what it is
    @property  # type: ignore[override]
    def data(self) -> Any:
        msg = ".data"
        raise _concrete(msg)

    @property
    def dtype(self) -> Any:
        return self._inner.dtype

    @property
    def device(self) -> Any:
        return self._inner.device

    @property
    def shape(self) -> tuple[int | None, ...]:
        return self._inner.shape[len(self._levels):]

    @property
    def ndim(self) -> int:
        return self._inner.ndim - len(self._levels)

    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        """The xpgrad namespace bound to the library and device of the batch, as for any Tensor.

        This is how array-API code (SciPy, scikit-learn, array-api-extra) finds its
        namespace; the namespace's functions then go through the batching rules.
        """
        if api_version is not None and api_version not in _SUPPORTED_API_VERSIONS:
            msg = f"__array_namespace__: unsupported api_version {api_version!r}; supported: {_SUPPORTED_API_VERSIONS}"
            raise XpgradValueError(msg)
        return tensor_namespace(self._inner.data)

    @property
    def requires_grad(self) -> bool:
        return self._inner._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        msg = "requires_grad"
        raise _unsupported(msg)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        msg = "requires_grad_"
        raise _unsupported(msg)

    def register_hook(self, hook: Any) -> Any:
        msg = "register_hook"
        raise _unsupported(msg)

    def retain_grad(self) -> None:
        msg = "retain_grad"
        raise _unsupported(msg)

    @property
    def grad_fn(self) -> Any:
        return self._inner._node

    @property
    def is_leaf(self) -> bool:
        return self._inner._node is None

    def detach(self) -> Tensor:
        return _mk(self._inner.detach(), self._levels)

    def backward(self, gradient: Any = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """As many backward passes as examples: the leaves outside the vmap get their sum."""
        st = _check_levels(self, "backward")
        phys = materialize(self._inner, len(self._levels), st)
        if gradient is not None:
            gradient = to_phys(gradient, st, "backward")
        elif self.size != 1:
            msg = (
                f"backward: the output has shape {self.shape}; backward without gradient= works only "
                "for one-element outputs, so pass gradient= (the upstream gradient) explicitly"
            )
            raise XpgradValueError(msg)
        else:
            gradient = graph_namespace().ones_like(phys)
        phys.backward(gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    # ------------------------------------------------------------------ no single value
    def item(self) -> Any:
        msg = "item"
        raise _concrete(msg)

    def tolist(self) -> Any:
        msg = "tolist"
        raise _concrete(msg)

    def numpy(self) -> Any:
        msg = "numpy"
        raise _concrete(msg)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        msg = "__array__"
        raise _concrete(msg)

    def __bool__(self) -> bool:
        msg = "bool"
        raise _concrete(msg)

    def __int__(self) -> int:
        msg = "int"
        raise _concrete(msg)

    def __float__(self) -> float:
        msg = "float"
        raise _concrete(msg)

    def __complex__(self) -> complex:
        msg = "complex"
        raise _concrete(msg)

    def __index__(self) -> int:
        msg = "__index__"
        raise _concrete(msg)

    def __dlpack__(self, *args: Any, **kw: Any) -> Any:
        msg = "__dlpack__"
        raise _concrete(msg)

    def __copy__(self) -> Tensor:
        msg = "copy"
        raise _unsupported(msg)

    def __deepcopy__(self, memo: dict[Any, Any]) -> Tensor:
        msg = "deepcopy"
        raise _unsupported(msg)

    def __reduce_ex__(self, protocol: Any) -> Any:
        msg = "pickle"
        raise _unsupported(msg)

    def __len__(self) -> int:
        s = self.shape
        if not s:
            msg = "len: a 0-D tensor has no length"
            raise XpgradTypeError(msg)
        return int(s[0])  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"Batched(shape={self.shape}, dtype={self.dtype}, batch={tuple(lv.size for lv in self._levels)})"

    __str__ = __repr__  # (Tensor's __str__ is Tensor's __repr__, which prints the values)

    def __dlpack_device__(self) -> Any:
        """The DLPack device of the batch's physical array (where every example lives)."""
        return self._inner.__dlpack_device__()

    # ------------------------------------------------------------------ indexing and in place
    def __getitem__(self, key: Any) -> Tensor:
        return getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._inplace("setitem", value, key)

    def _inplace(self, name: str, other: Any, key: Any = None) -> Tensor:
        """An in-place update of one example: computed out of place, then written over the
        physical value (so views of it see the write, and the tape records it)."""
        st = _check_levels(self, name)
        k = len(self._levels)
        if name == "setitem":
            new = setitem(self, other, key)
        else:
            new = apply(PRIMITIVES[name], (self, other), _core._NOKW)
        if name != "setitem" and kind(new.dtype) != kind(self.dtype) and not (
                kind(self.dtype) == "complex floating" and kind(new.dtype) == "real floating"):
            msg = (
                f"{name}: the result has dtype {new.dtype}, which cannot be cast to {self.dtype} in place "
                "(an in-place update keeps the tensor's kind of dtype)"
            )
            raise XpgradTypeError(msg)
        phys = lift(new, st)
        own = self._inner.shape[:k]
        got = phys.shape[:len(st)]
        if (isinstance(new, Batched) and len(new._levels) > k) or any(o == 1 and g != 1 for o, g in zip(own, got)):
            # the value varies along a level along which self does not: self becomes batched there
            _regrow(self, new, other, name)
            return self
        if len(st) > k:  # (new is not batched along the inner levels: drop their size-1 axes)
            phys = apply(PRIMITIVES["reshape"], (phys,), {"shape": tuple(phys.shape[:k]) + tuple(phys.shape[len(st):])})
        if tuple(phys.shape) != tuple(self._inner.shape):
            phys = apply(PRIMITIVES["broadcast_to"], (phys,), {"shape": tuple(self._inner.shape)})
        self._inner._inplace("setitem", phys, (Ellipsis,))
        return self


def _views_of(t: Tensor, version: list[int]) -> list[Tensor]:
    """The other Tensors sharing ``version`` (views of ``t``'s memory), found only when some
    object besides ``t`` holds the counter (recorded values hold it too)."""
    if sys.getrefcount(version) <= 3:  # (t, the argument, getrefcount's own)
        return []
    return [o for o in gc.get_referrers(version) if isinstance(o, Tensor) and o is not t and o._version is version]


def _morph(t: Tensor, b: Batched) -> None:
    """Make ``t`` (a plain Tensor) the batched value ``b``: the same Python object, so every
    name bound to it sees the write."""
    if getattr(t, "_base", None) is not None:
        del t._base
    _DATA.__delete__(t)  # (the unbatched array: the physical value replaces it)
    t.__class__ = Batched
    t._inner = b._inner  # type: ignore[attr-defined]
    t._levels = b._levels  # type: ignore[attr-defined]
    t._node = None
    t._oidx = 0
    t._requires_grad = b._inner._requires_grad
    t.grad = None
    t._version = b._inner._version
    t._hooks = None
    t._fw = None


_DATA = Tensor.__dict__["data"]


def _made_inside(t: Tensor, k: int) -> bool:
    """Whether plain ``t`` was made inside the ``k`` outer vmap levels open now (so that each
    example has its own ``t``, and a batched value along them may be written into it)."""
    made = getattr(t, "_levels", None)
    st = STACK.get()
    return made is not None and len(made) >= k and len(st) >= k and all(a is b for a, b in zip(made[:k], st[:k]))


def _fresh(new: Batched, other: Any) -> Batched:
    """``new``, its physical value copied if it may share memory with ``other``'s (a later
    in-place write into it must not reach ``other``)."""
    if isinstance(other, Batched) and may_alias(new._inner.data, other._inner.data):
        phys = apply(PRIMITIVES["astype"], (new._inner,), {"dtype": new._inner.data.dtype, "copy": True})
        return _mk(phys, new._levels)
    return new


def _written(t: Tensor, name: str, other: Any, key: Any) -> Batched:
    """``t`` after the update ``name``, computed out of place (t may be plain or batched)."""
    if name == "setitem":
        return setitem(t, other, key)  # type: ignore[return-value]
    new = apply(PRIMITIVES[name], (t, other), _core._NOKW)
    if kind(new.dtype) != kind(t.dtype) and not (
            kind(t.dtype) == "complex floating" and kind(new.dtype) == "real floating"):
        msg = (
            f"{name}: the result has dtype {new.dtype}, which cannot be cast to {t.dtype} in place "
            "(an in-place update keeps the tensor's kind of dtype)"
        )
        raise XpgradTypeError(msg)
    if new.dtype != t.dtype:
        raw = t._inner.data if isinstance(t, Batched) else t.data
        new = apply(PRIMITIVES["astype"], (new,), {"dtype": raw.dtype, "copy": False})
    return new  # type: ignore[no-any-return]


def write_into(t: Tensor, name: str, other: Any, key: Any) -> Tensor:
    """A batched value ``other`` (or a batched ``key``) written in place into ``t``, a Tensor
    that vmap does not batch: ``t`` becomes batched, as ``jax.vmap`` gives a batched
    ``x.at[key].set(v)``.

    The write is computed out of place and carried back through the views ``t`` is a view
    of (as a recorded write is); their base, and every view of it that is alive, then
    become the batched values (the same Python objects, so each name bound to one sees
    the write, as it does in the loop over the examples). The old array is left as it
    was: values the tape saved from it stay right.
    """
    if type(t) is not Tensor:  # (a Parameter, a subclass: its class cannot change)
        raise _batches_self(name, 0)
    chain = t._write_chain(name)  # (refuses a leaf that requires grad, a view no write carries through)
    new: Any = _fresh(_written(t, name, other, key), other)
    for v in chain:
        info = v._base
        new = _writer(v, info)(info[0], new, info)  # type: ignore[misc]
    root = chain[-1]._base[0] if chain else t
    if not isinstance(new, Batched):  # (cannot happen: the value or the key is batched)
        msg = f"{_INPLACE_NAMES.get(name, name)}: internal error: the write gave no batched value"
        raise XpgradTypeError(msg)
    if type(root) is not Tensor or not _made_inside(root, len(new._levels)):
        raise _batches_self(name, 0)
    old = root._version
    _morph(root, new)
    del new, chain
    # every view of the root (t among them) is now that view of the batched root, base first
    pending = _views_of(root, old)
    while pending:
        left: list[Tensor] = []
        for v in pending:
            vinfo = getattr(v, "_base", None)
            if vinfo is None or not isinstance(vinfo[0], Batched):
                left.append(v)
                continue
            nv: Any = vinfo[0].detach() if vinfo[1] is None else apply(vinfo[1], (vinfo[0],), vinfo[2])
            if vinfo[1] is not None and vinfo[1].multi:
                nv = nv[vinfo[3]]
            _morph(v, nv)
        if len(left) == len(pending):
            break  # (views left of an older value of the root: they keep it, as after a recorded write)
        pending = left
    return t


def _regrow(b: Batched, new: Any, other: Any, name: str) -> None:
    """Batched ``b`` updated by a value that varies along levels along which ``b`` does not:
    ``b`` takes the new physical value (refused where ``b`` is a view or has views, which
    would not see it)."""
    inner = b._inner
    info = getattr(inner, "_base", None)
    if (not _made_inside(inner, len(new._levels)) or (info is not None and info[0]._version is inner._version)
            or [v for v in _views_of(inner, inner._version) if v is not b]):
        raise _batches_self(name, len(b._levels))
    if new.dtype != b.dtype:
        new = apply(PRIMITIVES["astype"], (new,), {"dtype": inner.data.dtype, "copy": False})
    new = _fresh(new, other)
    b._inner = new._inner
    b._levels = new._levels
    b._version = new._inner._version
    b._requires_grad = new._inner._requires_grad


def _unsupported(what: str) -> XpgradTypeError:
    return XpgradTypeError(
        f"{what}: not supported on a value batched by vmap; do it outside the vmapped function, "
        "or use xg.grad/xg.vjp inside it"
    )


def _mk(inner: Tensor, levels: tuple[Level, ...]) -> Batched:
    b = _new(Batched)
    b._inner = inner
    b._levels = levels
    b._node = None
    b._oidx = 0
    b._requires_grad = inner._requires_grad
    b.grad = None
    b._version = inner._version
    b._hooks = None
    b._fw = None
    return b


_new = object.__new__


def _check_levels(b: Batched, func: str) -> tuple[Level, ...]:
    """The current stack, checking that ``b``'s levels are a prefix of it (no leaked value)."""
    st = STACK.get()
    lv = b._levels
    if len(lv) > len(st) or any(a is not s for a, s in zip(lv, st)):
        msg = (
            f"{func}: a value batched by a vmap was used outside that vmap (it leaked: stored in a "
            "global or a closure, or returned through a side channel); return it from the vmapped "
            "function instead"
        )
        raise XpgradValueError(msg)
    return st


def _reshape(t: Any, shape: tuple[Any, ...]) -> Any:
    return apply(PRIMITIVES["reshape"], (t,), {"shape": shape})


def lift(x: Any, st: tuple[Level, ...]) -> Any:
    """The physical value of ``x`` with ``len(st)`` batch axes (size 1 where it does not vary).

    A plain array or Tensor gets size-1 axes for every level; a Batched one for the
    levels inside its own. Python scalars pass through.
    """
    K = len(st)
    if isinstance(x, Batched):
        k = len(x._levels)
        inner = x._inner
        if k == K:
            return inner
        s = tuple(inner.shape)
        return _reshape(inner, s[:k] + (1,) * (K - k) + s[k:])
    if isinstance(x, Tensor) or hasattr(x, "shape"):
        return _reshape(x, (1,) * K + tuple(x.shape))
    return x


def materialize(t: Any, k: int, st: tuple[Level, ...]) -> Any:
    """Physical ``t`` (with ``k`` batch axes) broadcast to the full size of every level of ``st``
    (but a level of tangents alone, see `Level`: there ``t`` keeps its size)."""
    K = len(st)
    s = tuple(t.shape)
    if k < K:
        t = _reshape(t, s[:k] + (1,) * (K - k) + s[k:])
        s = tuple(t.shape)
    full = tuple(s[i] if lv.tangents_only else lv.size for i, lv in enumerate(st)) + s[K:]
    if s != full:
        t = apply(PRIMITIVES["broadcast_to"], (t,), {"shape": full})
    return t


def to_phys(x: Any, st: tuple[Level, ...], func: str) -> Tensor:
    """``x`` (Batched, Tensor, array or Python scalar) as a physical Tensor with every level of
    ``st`` at full size: one copy per example (broadcast, not copied)."""
    if isinstance(x, Batched):
        _check_levels(x, func)
        return materialize(x._inner, len(x._levels), st)  # type: ignore[no-any-return]
    if not isinstance(x, Tensor):
        if not hasattr(x, "shape"):
            x = graph_namespace().asarray(x)
        else:
            x = _wrap(x)
    return materialize(x, 0, st)  # type: ignore[no-any-return]


def from_phys(t: Any, st: tuple[Level, ...]) -> Any:
    """The Batched value whose physical value is ``t`` (a Tensor or backend array)."""
    if not st:
        return t
    if not isinstance(t, Tensor):
        t = _wrap(t)
    return _mk(t, st)


def _gather_args(prim: Primitive, args: Sequence[Any]) -> tuple[list[Any], list[bool], tuple[Level, ...]]:
    st = STACK.get()
    K = 0
    for a in args:
        if isinstance(a, Batched):
            _check_levels(a, prim.name)
            K = max(K, len(a._levels))
    st = st[:K]
    xs: list[Any] = []
    bs: list[bool] = []
    for a in args:
        if isinstance(a, Batched):
            xs.append(lift(a, st))
            bs.append(True)
        else:
            xs.append(a)
            bs.append(False)
    return xs, bs, st


def vmap_apply(prim: Primitive, args: Sequence[Any], kw: dict[str, Any]) -> Any:
    """Apply ``prim`` to arguments of which at least one is Batched: through its batching rule."""
    xs, bs, st = _gather_args(prim, args)
    rule = prim.batch
    if rule is None:
        why = prim.unbatchable
        if why is not None:
            msg = f"{prim.name}: cannot be used on a value batched by vmap: {why}"
            raise XpgradValueError(msg)
        msg = f"{prim.name}: has no batching rule, so it cannot be used inside vmap on a batched value"
        raise XpgradTypeError(msg)
    out = rule(prim, xs, bs, kw, len(st))
    if prim.multi:
        return tuple(_mk(o if isinstance(o, Tensor) else _wrap(o), st) for o in out)
    return _mk(out if isinstance(out, Tensor) else _wrap(out), st)


# ---------------------------------------------------------------------- axes
def shift_axis(func: str, axis: int, ndim: int, K: int) -> int:
    """Logical ``axis`` of an ``ndim``-dimensional example as a physical axis (after ``K`` batch axes)."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        msg = f"{func}: axis must be an int, got {axis!r}"
        raise XpgradTypeError(msg)
    if not -ndim <= axis < ndim:
        msg = f"{func}: axis {axis} is out of bounds for an array of dimension {ndim}"
        raise XpgradIndexError(msg)
    return axis % ndim + K


def shift_axes(func: str, axis: Any, ndim: int, K: int) -> Any:
    """``shift_axis`` for None (every logical axis), an int or a tuple of ints."""
    if axis is None:
        return tuple(range(K, K + ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(shift_axis(func, a, ndim, K) for a in axis)
    return shift_axis(func, axis, ndim, K)


# ---------------------------------------------------------------------- getitem / setitem
# The key may hold batched index arrays: ``xpgrad.ops.indexing`` (above this layer) hands
# its functions down when it is imported.
def _no_indexing(*args: Any) -> Tensor:
    msg = "getitem: xpgrad.ops.indexing is not imported yet: import xpgrad (its package) first"
    raise XpgradTypeError(msg)


_getitem: Callable[[Any, Any], Tensor] = _no_indexing
_setitem: Callable[[Any, Any, Any], Tensor] = _no_indexing


def set_indexing(getitem: Callable[[Any, Any], Tensor], setitem: Callable[[Any, Any, Any], Tensor]) -> None:
    """Hand down vmap's getitem and setitem (``ops.indexing`` calls this when it is imported)."""
    global _getitem, _setitem
    _getitem, _setitem = getitem, setitem


def getitem(x: Any, key: Any) -> Tensor:
    return _getitem(x, key)


def setitem(x: Any, value: Any, key: Any) -> Tensor:
    return _setitem(x, value, key)


_core._bind_batched(Batched, vmap_apply, getitem, write_into, STACK)
set_primitives(PRIMITIVES)  # (the tracer reads which are data_dependent_shape)
