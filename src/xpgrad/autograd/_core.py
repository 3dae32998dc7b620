"""Primitives and the recording step.

A :class:`Primitive` is a table entry: a name, a forward ``fwd(xp, *arrays, **kw)``
written against a namespace, and one VJP rule ``vjp(xp, g, ans, *args, **kw)`` per
positional argument. :func:`apply` is the per-op hot path: unwrap Tensors, resolve
the backend namespace (cached by types), run the forward on raw arrays, and when
any input requires grad in grad mode, record a :class:`Node` that keeps only what
the rules declared they need.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from .._dispatch import _CACHE, backend_namespace, check_devices
from .._dtypes import is_float
from .._exceptions import NonDifferentiableError
from ._grad_mode import GRAD_ENABLED

__all__ = ["COMPOSITES", "DECLARED", "PRIMITIVES", "Node", "Primitive", "apply", "composite", "declare", "primitive"]

Rule = Callable[..., Any]

#: every primitive by name; the docs' differentiability table is generated from it
PRIMITIVES: dict[str, Primitive] = {}
#: namespace functions without a primitive of their own: name -> what they are composed of
COMPOSITES: dict[str, str] = {}
#: namespace functions that return no differentiable output and need no primitive
#: (queries, creation from shapes): name -> reason
DECLARED: dict[str, str] = {}


def composite(name: str, of: str) -> None:
    """Declare that namespace function ``name`` is differentiable by composition of ``of``."""
    COMPOSITES[name] = of


def declare(name: str, reason: str) -> None:
    """Declare that namespace function ``name`` has no gradient, with the reason."""
    DECLARED[name] = reason
_NOKW: dict[str, Any] = {}


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
        view: the output may share memory with argument 0 (reshape, slicing), so it
            shares argument 0's version counter.
        multi: the forward returns a tuple of arrays (``eigh``, ``unstack``).
        check_dtype: the output dtype may be integer or boolean for some inputs
            (``astype``); such outputs are constants.
        chapter: the standard's chapter, for the docs table.

    Examples:
        >>> from xpgrad.autograd import primitive
        >>> cube = primitive("cube_example", lambda xp, x: x * x * x, save=(0,))
        >>> cube.defvjp(lambda xp, g, ans, x: g * 3 * x * x)
        >>> import xpgrad as xg
        >>> xg.grad(lambda x: xg.sum(cube(x)))(xg.asarray([2.0]).data)
        array([12.])
    """

    __slots__ = (
        "__weakref__",
        "chapter",
        "check_dtype",
        "const",
        "fwd",
        "jvp_rest",
        "jvps",
        "multi",
        "name",
        "nondiff",
        "save",
        "save_ans",
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

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


def primitive(name: str, fwd: Callable[..., Any], **opts: Any) -> Primitive:
    """Create and register a primitive (see :class:`Primitive`)."""
    if name in PRIMITIVES:
        msg = f"primitive: a primitive named {name!r} is already registered"
        raise ValueError(msg)
    p = Primitive(name, fwd, **opts)
    PRIMITIVES[name] = p
    return p


class ArgMeta:
    """What a rule sees of an argument whose data was not saved: shape and dtype."""

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: Any, dtype: Any) -> None:
        self.shape = shape
        self.dtype = dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)


class Node:
    """A recorded application of a primitive: what backward needs, nothing more.

    ``parents[i]`` is None (no gradient wanted), a leaf Tensor (accumulate into its
    ``.grad``) or the Node that produced argument i (output ``pidx[i]``).
    """

    __slots__ = (
        "__weakref__",
        "ans",
        "checks",
        "freed",
        "hooks",
        "kw",
        "meta",
        "n_out",
        "parents",
        "pidx",
        "prim",
        "saved",
        "xp",
    )

    def __init__(self) -> None:
        self.hooks: dict[int, list[Callable[..., Any]]] | None = None
        self.freed = False

    def name(self) -> str:
        return self.prim.name

    def __repr__(self) -> str:
        return f"<{self.prim.name}>"

    def free(self) -> None:
        self.saved = None
        self.ans = None
        self.checks = None
        self.freed = True


def _fail_forward(prim: Primitive, datas: list[Any], err: Exception) -> None:
    """Turn a backend error in a forward into a clear one where we can say more."""
    check_devices(*datas, func=prim.name)  # raises DeviceMismatchError when that is the cause
    raise err


# Bound by _tensor.py when it is imported (it imports this module, so no import here).
Tensor: Any = None
_wrap: Any = None


def _bind(tensor_cls: type, wrap: Any) -> None:
    global Tensor, _wrap
    Tensor = tensor_cls
    _wrap = wrap


def apply(prim: Primitive, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """Run ``prim`` on ``args`` (Tensors, backend arrays, Python scalars); record if needed."""
    rg = False
    datas = []
    for a in args:
        if isinstance(a, Tensor):
            datas.append(a.data)
            if a.requires_grad:
                rg = True
        else:
            datas.append(a)
    key = tuple(map(type, datas))
    xp = _CACHE.get(key)
    if xp is None:
        xp = backend_namespace(*datas, func=prim.name)
    try:
        out = prim.fwd(xp, *datas, **kw)
    except Exception as e:  # noqa: BLE001 - re-raised as is, or as a clearer device error
        _fail_forward(prim, datas, e)
    if not rg or prim.const or not GRAD_ENABLED.get():
        if prim.multi:
            return tuple(_wrap(o) for o in out)
        if prim.view and isinstance(args[0], Tensor):
            return _wrap(out, None, 0, args[0]._version)
        return _wrap(out)
    if prim.check_dtype and not is_float(out.dtype):
        return _wrap(out)
    return _record(prim, xp, args, datas, kw, out)


def _record(prim: Primitive, xp: ModuleType, args: tuple[Any, ...], datas: list[Any],
            kw: dict[str, Any], out: Any) -> Any:
    node = Node()
    node.prim = prim
    node.xp = xp
    node.kw = kw
    save = prim.save
    parents: list[Any] = []
    pidx: list[int] = []
    meta: list[Any] = []
    saved: list[Any] = []
    checks: list[Any] = []
    for i, a in enumerate(args):
        keep = save is None or i in save
        if isinstance(a, Tensor):
            d = datas[i]
            meta.append((d.shape, d.dtype))
            if a.requires_grad:
                if prim.vjp_rule(i) is None:
                    msg = (
                        f"{prim.name}: argument {i} requires grad, but {prim.name} is not "
                        f"differentiable with respect to argument {i}; detach() it or pass "
                        "a constant"
                    )
                    raise NonDifferentiableError(msg)
                n = a._node
                parents.append(a if n is None else n)
                pidx.append(a._oidx)
            else:
                parents.append(None)
                pidx.append(0)
            if keep:
                saved.append(datas[i])
                checks.append((i, a._version, a._version[0]))
            else:
                saved.append(None)
        else:
            parents.append(None)
            pidx.append(0)
            d = datas[i]
            meta.append((d.shape, d.dtype) if hasattr(d, "shape") else None)
            saved.append(d if keep else None)
    node.parents = parents
    node.pidx = pidx
    node.meta = meta
    node.saved = saved
    node.checks = checks
    if prim.multi:
        node.n_out = len(out)
        outs = tuple(_wrap(o, node, j) for j, o in enumerate(out))
        node.ans = out if prim.save_ans else None
        if prim.save_ans:
            node.checks.extend((-1 - j, t._version, 0) for j, t in enumerate(outs))
        return outs
    node.n_out = 1
    version = args[0]._version if prim.view and isinstance(args[0], Tensor) else None
    t = _wrap(out, node, 0, version)
    if prim.save_ans:
        node.ans = out
        node.checks.append((-1, t._version, t._version[0]))
    else:
        node.ans = None
    return t
