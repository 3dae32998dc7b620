"""User-defined derivative rules, in the JAX style: [`custom_vjp`][xpgrad.custom_vjp] and [`custom_jvp`][xpgrad.custom_jvp].

A decorated function runs as written until something differentiates it. Then:

- ``custom_vjp``: reverse mode records one node whose VJP calls the user's
  ``bwd(residuals, cotangent)``; ``fwd`` runs with recording on, so residuals that
  depend on the inputs keep their history and ``bwd`` itself can be differentiated
  (``grad`` of ``grad``). Forward mode differentiates ``fwd``'s own operations, and
  raises NonDifferentiableError when they are invisible to xpgrad (no tangent comes out).
- ``custom_jvp``: forward mode calls the user's ``jvp(primals, tangents)`` for the
  innermost level (the primals still carry the outer levels, so the rule itself is
  differentiated for those); reverse mode *transposes* that rule: the VJP is the
  gradient of ``<g, jvp(primals, t)[1]>`` with respect to ``t``, taken on the tape.

What a rule returns is checked (count, structure, shape, dtype, device) and a
mismatch raises an error that names the rule.

As in JAX, a rule may call the decorated function itself (``return f(x), residuals``,
``return f(x), cos(x) * t``): inside ``custom_vjp``'s ``fwd`` the call evaluates the
primal function; inside a ``custom_jvp`` rule it is the function one differentiation
level down. ``nondiff_argnums`` (JAX's: non-array arguments such as functions, passed
first to ``bwd`` and to the jvp rule) and ``custom_jvp.defjvps`` are supported; arguments,
outputs, residuals and cotangents are pytrees (`xpgrad.tree_util`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any, cast

import array_api_compat

from ._dispatch import backend_namespace, check_devices, raw_array
from ._dtypes import dtype_name, is_float
from ._exceptions import NonDifferentiableError, XpgradRuntimeError, XpgradTypeError, XpgradValueError
from .autograd import _cut
from .autograd._batched import STACK, Batched, from_phys, lift, to_phys, use_stack
from .autograd._core import FWD_LEVELS, PRIMITIVES, apply, record_opaque
from .autograd._engine import _engine_call, _seed
from .autograd._grad_mode import GRAD_ENABLED, enable_grad, no_grad
from .autograd._tensor import Tensor, _wrap
from .functional import _one_copy, attach_tangent, logical_tangent, note_private
from .ops._common import is_xpgrad
from .ops.statistical import sum as xsum
from .tree_util import leaves_up_to, map2, tree_flatten, tree_leaves, tree_map, tree_structure

__all__ = ["custom_jvp", "custom_vjp"]

# the custom_vjp functions whose fwd rule is running: calling one of them inside its own
# fwd evaluates the primal function (JAX's f_fwd writes `return f(x), residuals`)
_IN_FWD: ContextVar[frozenset[int]] = ContextVar("xpgrad_custom_vjp_in_fwd", default=frozenset())


def _fname(f: Any) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _is_array(x: Any) -> bool:
    return isinstance(x, Tensor) or (hasattr(x, "shape") and hasattr(x, "dtype"))


def _data(x: Any) -> Any:
    return x.data if isinstance(x, Tensor) else x


def _check_leaf(got: Any, like: Any, who: str, what: str) -> None:
    """``got`` must be an array with ``like``'s shape, dtype and device."""
    if not _is_array(got):
        msg = f"{who} returned {type(got).__name__} for {what}; expected an array like {_fmt(like)}"
        raise XpgradTypeError(msg)
    if tuple(got.shape) != tuple(like.shape):  # (inside vmap: the examples' shapes)
        msg = f"{who} returned shape {tuple(got.shape)} for {what}; expected shape {tuple(like.shape)}"
        raise XpgradValueError(msg)
    g, l_ = _raw(got), _raw(like)
    if type(g) is not type(l_):
        backend_namespace(g, l_, func=f"{who} ({what})")  # raises NamespaceMismatchError for two libraries
    if g.dtype != l_.dtype:
        msg = f"{who} returned dtype {dtype_name(g.dtype)} for {what}; expected dtype {dtype_name(l_.dtype)}"
        raise XpgradTypeError(msg)
    check_devices(g, l_, func=who)


def _fmt(x: Any) -> str:
    return f"of shape {tuple(x.shape)} and dtype {dtype_name(_raw(x).dtype)}"


def _device(d: Any) -> Any:
    return array_api_compat.device(d)


_raw = raw_array  # the backend array behind x (a batched value's physical one)


def _zeros(like: Any, tensor: bool) -> Any:
    if isinstance(like, Batched):  # (zeros of the example's shape: unbatched)
        d = _raw(like)
        z = backend_namespace(d).zeros(tuple(like.shape), dtype=d.dtype, device=_device(d))
        return _wrap(z) if tensor else z
    d = _data(like)
    z = backend_namespace(d).zeros_like(d)
    return _wrap(z) if tensor else z


def _fw_of(a: Any) -> Any:
    """The forward-mode tangents of ``a`` (a batched value's live on its physical value)."""
    if isinstance(a, Batched):
        return a._inner._fw
    return a._fw if isinstance(a, Tensor) else None


def _batch_axes_last(p: Any, first: int, second: int) -> Any:
    """Physical ``p`` with batch axes (``first`` axes, ``second`` axes, ...) as (``second``, ``first``, ...)."""
    if not first or not second:
        return p
    perm = (*range(first, first + second), *range(first), *range(first + second, p.ndim))
    return apply(PRIMITIVES["permute_dims"], (p,), {"axes": perm})


def _records(leaves: list[Any]) -> bool:
    return GRAD_ENABLED.get() and any(isinstance(a, Tensor) and a.requires_grad for a in leaves)


def _argnums(who: str, nondiff_argnums: Sequence[int]) -> tuple[int, ...]:
    try:
        nums = tuple(sorted({int(i) for i in nondiff_argnums}))
    except TypeError:
        msg = f"{who}: nondiff_argnums must be a sequence of ints, got {nondiff_argnums!r}"
        raise XpgradTypeError(msg) from None
    if any(i < 0 for i in nums):
        msg = f"{who}: nondiff_argnums must be non-negative positions, got {nondiff_argnums!r}"
        raise XpgradValueError(msg)
    return nums


def _argnames(who: str, fun: Callable[..., Any], nums: tuple[int, ...], names: Sequence[str]) -> tuple[int, ...]:
    """``nondiff_argnums`` joined by the positions of the parameters ``nondiff_argnames`` names, as JAX
    infers them from ``fun``'s signature (JAX drops a name that is no positional parameter silently;
    here it raises)."""
    if isinstance(names, str):
        names = (names,)
    if not isinstance(names, (tuple, list)) or not all(isinstance(n, str) for n in names):
        msg = f"{who}: nondiff_argnames must be a sequence of str, got {names!r}"
        raise XpgradTypeError(msg)
    if not names:
        return nums
    params = list(inspect.signature(fun).parameters.values())
    pos = {p.name: k for k, p in enumerate(params) if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD}
    bad = [n for n in names if n not in pos]
    if bad:
        msg = (f"{who}: nondiff_argnames names {bad}, which are not positional parameters of "
               f"{_fname(fun)} (its parameters: {[p.name for p in params]})")
        raise XpgradValueError(msg)
    return tuple(sorted(set(nums) | {pos[n] for n in names}))


def _split(owner: Any, args: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """(the non-differentiable arguments, the others), as JAX's ``nondiff_argnums`` splits them."""
    nums = owner.nondiff_argnums
    if not nums:
        return (), args
    if nums[-1] >= len(args):
        msg = f"{owner.kind} {owner.__name__}: nondiff_argnums {nums} but the call has {len(args)} arguments"
        raise XpgradValueError(msg)
    nd = tuple(args[i] for i in nums)
    for k, a in zip(nums, nd):
        for leaf in tree_leaves(a):
            if isinstance(leaf, Tensor) and (leaf.requires_grad or leaf._fw):
                msg = (f"{owner.kind} {owner.__name__}: argument {k} is in nondiff_argnums but is being "
                       "differentiated (a traced Tensor); pass arrays as ordinary arguments (a None cotangent "
                       "makes them non-differentiable) and keep nondiff_argnums for functions, strings and the like")
                raise XpgradTypeError(msg)
    return nd, tuple(a for i, a in enumerate(args) if i not in nums)


def _merge(owner: Any, nd: tuple[Any, ...], diff: tuple[Any, ...]) -> tuple[Any, ...]:
    """The full argument tuple from the non-differentiable and the differentiable ones."""
    if not nd:
        return diff
    out: list[Any] = []
    nds, diffs = iter(nd), iter(diff)
    for i in range(len(nd) + len(diff)):
        out.append(next(nds) if i in owner.nondiff_argnums else next(diffs))
    return tuple(out)


class _Call:
    """What one recorded call keeps for its backward: residuals or primals, and a cache
    so that the user's rule runs once per backward pass, not once per argument."""

    __slots__ = ("args", "g", "leaves", "levels", "nd", "owner", "phys", "pos", "res", "result", "struct")

    def __init__(self, owner: Any, args: tuple[Any, ...], leaves: list[Any], pos: list[int], struct: Any,
                 res: Any = None, nd: tuple[Any, ...] = ()) -> None:
        self.owner = owner
        self.args = args  # the differentiable arguments
        self.nd = nd  # the nondiff_argnums arguments
        self.leaves = leaves
        self.pos = pos  # which argument leaves are the node's inputs (the Tensors)
        self.struct = struct  # the output's structure
        self.res = res
        self.g: Any = None
        self.result: Any = None
        self.levels: tuple[Any, ...] = ()  # the vmap levels of a call recorded inside vmap
        self.phys: list[Any] = []  # (then) the physical shapes of the node's inputs

    def cotangents(self, xp: Any, g: Any, node_args: tuple[Any, ...]) -> list[Any]:
        if self.result is not None and self.g is g:
            return self.result
        graph = is_xpgrad(xp)
        # a backward pass under vmaps opened since the call (vmap of a vjp function, jacrev):
        # the cotangents are batched along those levels
        extra = STACK.get() if any(isinstance(gi, Batched) for gi in (g if isinstance(g, tuple) else (g,))) else ()
        if self.levels or extra:
            result = self._batched_cotangents(g, graph, extra)
        else:
            outs = tree_leaves(self.struct)
            gs = list(g) if isinstance(g, tuple) else [g]
            gs = [_zeros(o, True) if gi is None else (gi if isinstance(gi, Tensor) else _wrap(gi))
                  for gi, o in zip(gs, outs)]
            ct = tree_structure(self.struct).unflatten(gs)
            result = self.owner._pullback(self, ct, node_args, graph)
        if not graph:
            result = [None if r is None else _data(r) for r in result]
        self.g, self.result = g, result
        return result

    def _batched_cotangents(self, g: Any, graph: bool, extra: tuple[Any, ...]) -> list[Any]:
        """A call recorded inside vmap, or a backward pass with batched cotangents: the user's rule
        runs on the logical, batched values (as JAX batches custom rules), under the call's levels
        and then the ``extra`` levels opened since (whose cotangents are Batched values of them
        alone, their example the node's physical value: batch axes of the call's levels in front)."""
        rec = self.levels
        st = (*rec, *extra)
        R, E = len(rec), len(extra)
        outs = tree_leaves(self.struct)
        gs = list(g) if isinstance(g, tuple) else [g]
        with use_stack(st):
            bgs = []
            for gi, o in zip(gs, outs):
                if gi is None:
                    bgs.append(_zeros(o, True))
                    continue
                p = gi if isinstance(gi, Tensor) else _wrap(gi)
                if E:  # (extra axes, call's axes, example) -> (call's axes, extra axes, example)
                    p = _batch_axes_last(lift(p, extra), E, R)
                bgs.append(from_phys(p, st))
            ct = tree_structure(self.struct).unflatten(bgs)
            node_args = tuple(self.leaves[j] for j in self.pos)
            res = self.owner._pullback(self, ct, node_args, graph, st)
            out: list[Any] = []
            for r, shape in zip(res, self.phys or [()] * len(res)):
                if r is None:
                    out.append(None)
                    continue
                p = lift(r, st)
                p = p if isinstance(p, Tensor) else _wrap(p)
                # an input not varying along a level of the call (size 1 there) gets the sum over it
                axes = tuple(i for i in range(R) if shape[i] == 1 and p.shape[i] != 1)
                if axes:
                    p = xsum(p, axis=axes, keepdims=True)
                if E:  # back to (extra axes, call's axes, example), a Batched value of the extra levels
                    p = from_phys(_batch_axes_last(p, R, E), extra)
                out.append(p)
        return out


def _rule(xp: Any, g: Any, ans: Any, i: int, *args: Any) -> Any:
    # the last argument is the call: saved like an argument, so backward frees it (residuals too)
    return args[-1].cotangents(xp, g, args[:-1])[i]


def _record_call(owner: Any, call: _Call, out_leaves: list[Any], fw: list[Any] | None) -> Any:
    """Record one node for the call: inputs the Tensor leaves, outputs ``out_leaves``' data."""
    ins = tuple(call.leaves[j] for j in call.pos)
    st = STACK.get()
    batched = bool(st) and any(isinstance(a, Batched) for a in (*ins, *out_leaves))
    if batched:  # recorded on the physical values, every open level in front (see _Call._batched_cotangents)
        call.levels = st
        ins = tuple(lift(a, st) for a in ins)
        call.phys = [tuple(a.shape) for a in ins]
        out_leaves = [lift(o if isinstance(o, Tensor) else _wrap(o), st) for o in out_leaves]
        fw = None
    outs = [_data(o) for o in out_leaves]
    res_leaves = record_opaque(f"{owner.kind}({owner.__name__})", ins, outs, call, _rule, save=owner.save)
    if batched:
        res_leaves = [from_phys(r, st) for r in res_leaves]
    if fw is not None:
        for r, f in zip(res_leaves, fw):
            r._fw = f
    return tree_structure(call.struct).unflatten(res_leaves)



def _resolve_kwargs(who: str, fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Keyword arguments of a call turned into positions (with the defaults filled in), as JAX
    does: the rules receive every argument positionally, as ``fun``'s signature orders them."""
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as e:
        msg = f"{who}: {e}"
        raise XpgradTypeError(msg) from None
    bound.apply_defaults()
    if bound.kwargs:
        msg = (f"{who}: keyword arguments {sorted(bound.kwargs)} could not be resolved to positions "
               "(the rules receive arguments by position; give the function named parameters)")
        raise XpgradTypeError(msg)
    return tuple(bound.args)

class custom_vjp:  # noqa: N801 - a decorator, named as in JAX
    """A function with a user-defined VJP: ``f.defvjp(fwd, bwd)``.

    ``fwd(*args)`` returns ``(out, residuals)``; ``bwd(residuals, cotangent)`` returns
    a tuple with one cotangent per argument of ``f`` (None for a zero, or for a
    non-array argument), each with its argument's structure, shape and dtype.
    Residuals may be any pytree (lists, tuples, namedtuples, dicts of arrays).
    Complex cotangents follow PyTorch's convention (``g * conj(f'(z))``).

    ``fwd`` may call ``f`` itself, as JAX's documentation writes it
    (``return f(x, y), (cos(x), y)``): inside ``fwd`` that call evaluates the primal
    function (recorded as its operations, so residuals computed from it keep their
    history for ``grad`` of ``grad``).

    ``nondiff_argnums`` (``functools.partial(xg.custom_vjp, nondiff_argnums=(0,))``)
    names arguments that are not arrays (a function, a string): ``fwd`` takes all the
    arguments, ``bwd(*nondiff_args, residuals, g)`` returns cotangents for the others.
    An array that is being differentiated there raises XpgradTypeError.
    ``nondiff_argnames`` names them by parameter name instead, as JAX (turned into
    positions by ``fun``'s signature and joined to ``nondiff_argnums``; a name that is
    no positional parameter raises, where JAX ignores it).

    Unlike JAX, ``jvp`` of a custom_vjp function differentiates ``fwd``'s operations
    (where they are xpgrad operations) instead of raising.

    Keyword arguments of a call are turned into positions by ``f``'s signature, its
    defaults filled in, as JAX does: ``fwd`` and ``bwd`` see every argument positionally.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> @xg.custom_vjp
        ... def clip_gradient(x):
        ...     return x
        >>> def fwd(x):
        ...     return x, None
        >>> def bwd(res, g):
        ...     xp = xg.array_namespace(g)
        ...     return (xp.clip(g, -1.0, 1.0),)
        >>> clip_gradient.defvjp(fwd, bwd)
        >>> xg.grad(lambda x: xg.sum(clip_gradient(x) * 5.0))(np.array([1.0, 2.0]))
        array([1., 1.])
    """

    kind = "custom_vjp"
    save = ()

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = (),
                 nondiff_argnames: Sequence[str] = ()) -> None:
        functools.update_wrapper(self, fun)
        self.__name__: str = _fname(fun)
        self.fun = fun
        who = f"custom_vjp {self.__name__}"
        self.nondiff_argnums = _argnames(who, fun, _argnums(who, nondiff_argnums), nondiff_argnames)
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any]) -> None:
        """Set the rules: ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, g) -> tuple``."""
        self.fwd = fwd
        self.bwd = bwd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fwd is None or self.bwd is None:
            msg = f"custom_vjp {self.__name__}: no rule defined; call {self.__name__}.defvjp(fwd, bwd) first"
            raise XpgradRuntimeError(msg)
        if kwargs:
            args = _resolve_kwargs(f"custom_vjp {self.__name__}", self.fun, args, kwargs)
        nd, diff = _split(self, args)
        leaves = tree_leaves(diff)
        running = _IN_FWD.get()
        if not _records(leaves) or id(self) in running:
            # not differentiated, or called by its own fwd rule: the primal function (recorded
            # as its operations, so residuals computed from it keep their history)
            out = self.fun(*args)
            self._check_tangents(leaves, tree_leaves(out), _fname(self.fun))
            return out
        who = f"custom_vjp {self.__name__}: the fwd rule {_fname(self.fwd)}"
        token = _IN_FWD.set(running | {id(self)})
        try:
            res = self.fwd(*args)
        finally:
            _IN_FWD.reset(token)
        if not (isinstance(res, tuple) and len(res) == 2):
            msg = f"{who} must return an (output, residuals) pair, got {type(res).__name__}"
            raise XpgradTypeError(msg)
        out, residuals = res
        out_leaves = tree_leaves(out)
        for k, o in enumerate(out_leaves):
            if not _is_array(o):
                msg = f"{who} returned {type(o).__name__} as output {k}; expected arrays"
                raise XpgradTypeError(msg)
        self._check_tangents(leaves, out_leaves, _fname(self.fwd))
        pos = [j for j, a in enumerate(leaves) if isinstance(a, Tensor)]
        call = _Call(self, diff, leaves, pos, out, residuals, nd)
        fw = [o._fw if isinstance(o, Tensor) else None for o in out_leaves]
        return _record_call(self, call, out_leaves, fw)

    def _check_tangents(self, leaves: list[Any], out_leaves: list[Any], ran: str) -> None:
        """Forward mode reaches a custom_vjp function through its own operations (``fwd``'s);
        refuse when inputs carry tangents but no floating output does: the computation was
        invisible to xpgrad (a call into NumPy or SciPy), and a zero tangent would be wrong."""
        active = FWD_LEVELS.get()
        if not active:
            return

        def carries(a: Any) -> bool:
            fw = a._fw if isinstance(a, Tensor) else None
            return fw is not None and any(lv in active for lv in fw)

        if not any(carries(a) for a in leaves):
            return
        floats = [o for o in out_leaves if _is_array(o) and is_float(getattr(o, "dtype", None))]
        if floats and not any(carries(o) for o in floats):
            msg = (
                f"custom_vjp {self.__name__}: forward mode (jvp) reached this function, but {ran}'s "
                "output carries no tangent: its computation is invisible to xpgrad (a call into "
                "another library?), so its forward-mode derivative is unknown; define the rule "
                "with custom_jvp (which serves both modes), or use reverse mode"
            )
            raise NonDifferentiableError(msg)

    def _pullback(self, call: _Call, ct: Any, node_args: tuple[Any, ...], graph: bool,
                  st: tuple[Any, ...] = ()) -> list[Any]:
        bwd = cast("Callable[..., Any]", self.bwd)  # set: checked in __call__
        who = f"custom_vjp {self.__name__}: the bwd rule {_fname(bwd)}"
        if graph:
            got = bwd(*call.nd, call.res, ct)
        else:
            with no_grad():
                got = bwd(*call.nd, call.res, ct)
        return _check_cotangents(got, call, who)


def _check_cotangents(got: Any, call: _Call, who: str) -> list[Any]:
    """Validate a per-argument tuple of cotangents; return those of the node's inputs."""
    args = call.args
    if not isinstance(got, (tuple, list)) or len(got) != len(args):
        n = len(got) if isinstance(got, (tuple, list)) else type(got).__name__
        msg = f"{who} must return a tuple with one cotangent per argument ({len(args)}), got {n}"
        raise XpgradTypeError(msg)
    flat: list[Any] = []
    for k, (a, g) in enumerate(zip(args, got)):
        al, adef = tree_flatten(a)
        n = len(al)
        if g is None:
            flat.extend([None] * n)
            continue
        gl = leaves_up_to(adef, g, who, f"argument {k} and its cotangent", a)
        for j, (x, y) in enumerate(zip(al, gl)):
            if y is None or not _is_array(x):
                flat.append(None)
                continue
            _check_leaf(y, x, who, f"argument {k}" + (f" (leaf {j})" if n > 1 else ""))
            flat.append(y)
    return [flat[j] for j in call.pos]


def _attach_batched(o: Any, d: Any, level: int, st: tuple[Any, ...]) -> Any:
    """Output ``o`` with tangent ``d`` at ``level`` inside vmap: on the physical value, the two
    broadcast to one shape (an output shared by the examples whose tangent is not becomes batched)."""
    K = len(st)
    po = lift(o if isinstance(o, Tensor) else _wrap(o), st)
    pd = lift(d if isinstance(d, Tensor) else _wrap(d), st)
    full = tuple(max(a, b) for a, b in zip(po.shape[:K], pd.shape[:K])) + tuple(po.shape[K:])
    if tuple(po.shape) != full:
        po = apply(PRIMITIVES["broadcast_to"], (po,), {"shape": full})
    if tuple(pd.shape) != full:
        pd = apply(PRIMITIVES["broadcast_to"], (pd,), {"shape": full})
    r = _wrap(po.data, po._node, po._oidx, po._version)
    r._requires_grad = po._requires_grad
    if is_float(po.data.dtype):
        r._fw = {**(po._fw or {}), level: pd}
    return from_phys(r, st)


def _detached(a: Any) -> Any:
    if isinstance(a, Batched):
        return a.detach()
    return _wrap(a.data) if isinstance(a, Tensor) else a


class custom_jvp:  # noqa: N801 - a decorator, named as in JAX
    """A function with a user-defined JVP: ``@f.defjvp`` on ``jvp(primals, tangents)``.

    The rule receives the tuple of arguments and the tuple of their tangents (zeros
    for arguments without one) and returns ``(out, tangent_out)``, ``tangent_out``
    with ``out``'s structure, shapes and dtypes and linear in the tangents. Reverse
    mode uses the transposed rule, so one rule serves ``jvp``, ``grad`` and their
    compositions. The rule may call the function itself for ``out`` (as below);
    ``grad(grad(f))`` then uses the rule at both orders, as in JAX.

    ``f.defjvps(jvp_0, jvp_1, ...)`` gives one rule per argument instead (see
    `defjvps`). ``nondiff_argnums`` names arguments that are not arrays: they
    come first in the rule's signature, ``jvp(*nondiff_args, primals, tangents)``;
    ``nondiff_argnames`` names them by parameter name, as in `custom_vjp`.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> @xg.custom_jvp
        ... def log1pexp(x):
        ...     xp = xg.array_namespace(x)
        ...     return xp.log(1.0 + xp.exp(x))
        >>> @log1pexp.defjvp
        ... def log1pexp_jvp(primals, tangents):
        ...     (x,), (t,) = primals, tangents
        ...     xp = xg.array_namespace(x)
        ...     return log1pexp(x), t * (1.0 - 1.0 / (1.0 + xp.exp(x)))
        >>> xg.grad(lambda x: xg.sum(log1pexp(x)))(np.array([0.0]))
        array([0.5])
        >>> xg.jvp(log1pexp, (np.array([0.0]),), (np.array([2.0]),))[1]
        array([1.])
    """

    kind = "custom_jvp"
    save = None  # the transposed rule needs the primals

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = (),
                 nondiff_argnames: Sequence[str] = ()) -> None:
        functools.update_wrapper(self, fun)
        self.__name__: str = _fname(fun)
        self.fun = fun
        who = f"custom_jvp {self.__name__}"
        self.nondiff_argnums = _argnames(who, fun, _argnums(who, nondiff_argnums), nondiff_argnames)
        self.jvp: Callable[..., Any] | None = None

    def defjvp(self, jvp: Callable[..., Any]) -> Callable[..., Any]:
        """Set the rule ``jvp(*nondiff_args, primals, tangents) -> (out, tangent_out)``; usable as a decorator."""
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """Set the rule as one function per argument, as JAX's ``defjvps``.

        ``jvps[i](t_i, primal_out, *primals)`` is the tangent of the output due to argument
        ``i``'s tangent ``t_i`` (None: that argument has no effect on the derivative); the
        tangents of the arguments are summed.

        Examples:
            >>> import xpgrad as xg
            >>> @xg.custom_jvp
            ... def f(x, y):
            ...     return x ** 2 * y
            >>> f.defjvps(lambda x_dot, ans, x, y: 2 * x * y * x_dot, None)
            >>> [float(g) for g in xg.grad(f, (0, 1))(2.0, 3.0)]
            [12.0, 0.0]
        """
        if self.nondiff_argnums:
            msg = f"custom_jvp {self.__name__}: defjvps cannot be used with nondiff_argnums; use defjvp"
            raise XpgradTypeError(msg)
        rules = tuple(jvps)

        def jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
            if len(rules) != len(primals):
                msg = (f"custom_jvp {self.__name__}: defjvps got {len(rules)} rules for a call "
                       f"with {len(primals)} arguments")
                raise XpgradTypeError(msg)
            out = self(*primals)
            total: Any = None
            for r, tan in zip(rules, tangents):
                if r is None:
                    continue
                part = r(tan, out, *primals)
                total = part if total is None else map2(lambda a, b: a + b, total, part, f"custom_jvp {self.__name__}",
                                                        "the tangents of defjvps' rules")
            if total is None:
                total = tree_map(lambda o: _zeros(o, isinstance(o, Tensor)), out)
            return out, total

        jvp.__name__ = f"defjvps({', '.join(_fname(r) for r in rules)})"
        self.jvp = jvp

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.jvp is None:
            msg = f"custom_jvp {self.__name__}: no rule defined; decorate one with @{self.__name__}.defjvp first"
            raise XpgradRuntimeError(msg)
        if kwargs:
            args = _resolve_kwargs(f"custom_jvp {self.__name__}", self.fun, args, kwargs)
        nd, diff = _split(self, args)
        leaves = tree_leaves(diff)
        active = FWD_LEVELS.get()
        levels = {lv for a in leaves for lv in (_fw_of(a) or ()) if lv in active}
        if levels:
            return self._forward(nd, diff, leaves, max(levels), active)
        if not _records(leaves):
            return self.fun(*args)
        with no_grad():
            out = self.fun(*_merge(self, nd, tuple(
                tree_map(_detached, x) for x in diff)))
        out_leaves = tree_leaves(out)
        pos = [j for j, a in enumerate(leaves) if isinstance(a, Tensor)]
        call = _Call(self, diff, leaves, pos, out, None, nd)
        return _record_call(self, call, out_leaves, None)

    def _run_rule(self, nd: tuple[Any, ...], primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any, str]:
        jvp = cast("Callable[..., Any]", self.jvp)  # set: checked in __call__
        who = f"custom_jvp {self.__name__}: the jvp rule {_fname(jvp)}"
        res = jvp(*nd, primals, tangents)
        if not (isinstance(res, tuple) and len(res) == 2):
            msg = f"{who} must return an (output, tangent_out) pair, got {type(res).__name__}"
            raise XpgradTypeError(msg)
        out, tout = res
        out_leaves, out_def = tree_flatten(out)
        pairs = list(zip(out_leaves, leaves_up_to(out_def, tout, who, "the output and its tangent", out)))
        for k, (o, d) in enumerate(pairs):
            if not _is_array(o):
                msg = f"{who} returned {type(o).__name__} as output {k}; expected arrays"
                raise XpgradTypeError(msg)
            _check_leaf(d, o, who, f"the tangent of output {k}")
        return out, tout, who

    def _forward(self, nd: tuple[Any, ...], args: tuple[Any, ...], leaves: list[Any], level: int, active: tuple[int, ...]) -> Any:
        """Apply the rule for ``level``; the outer levels differentiate the rule itself."""

        def tangent(a: Any) -> Any:
            if isinstance(a, Tensor):
                fw = _fw_of(a)
                v = fw.get(level) if fw else None
                if v is None:
                    return _zeros(a, True)
                v = v if isinstance(v, Tensor) else _wrap(v)
                # (inside vmap: the tangent of the physical value, batched as its primal)
                return logical_tangent(v, a._levels) if isinstance(a, Batched) else v
            return _zeros(a, False) if _is_array(a) else 0.0

        tangents = tuple(tree_map(tangent, a) for a in args)
        token = FWD_LEVELS.set(tuple(lv for lv in active if lv < level))
        try:
            out, tout, _ = self._run_rule(nd, tuple(args), tangents)
        finally:
            FWD_LEVELS.reset(token)

        st = STACK.get()

        def attach(pair: Any) -> Any:
            o, d = pair
            if st and isinstance(d, Batched) and any(lv.tangents_only for lv in st):
                return attach_tangent(o, d, level)  # (jacfwd: the tangents alone are batched)
            if st and (isinstance(o, Batched) or isinstance(d, Batched)):
                return _attach_batched(o, d, level, st)
            o = o if isinstance(o, Tensor) else _wrap(o)
            r = _wrap(o.data, o._node, o._oidx, o._version)
            r._requires_grad = o._requires_grad
            if is_float(o.data.dtype):
                r._fw = {**(o._fw or {}), level: d}
            return r

        return map2(lambda o, d: attach((o, d)), out, tout, "custom_jvp", "outputs")

    def _pullback(self, call: _Call, ct: Any, node_args: tuple[Any, ...], graph: bool,
                  st: tuple[Any, ...] = ()) -> list[Any]:
        """The transposed JVP rule: d<ct, jvp(primals, t)[1]>/dt, on the tape (``st``: the vmap levels
        of a batched backward pass, see `_Call._batched_cotangents`)."""
        leaves = list(call.leaves)
        for j, a in zip(call.pos, node_args):
            a = a if isinstance(a, Tensor) else _wrap(a)
            # (a first-order pass needs no history of the primals: the inner pass below would walk,
            # and free, the caller's graph behind them, which its own backward still needs)
            leaves[j] = a if graph else _detached(a)
        primals = tree_structure(call.args).unflatten(leaves)
        if st:  # inside vmap: each example its own tangent (a physical leaf, the batch axes in front)
            sizes = tuple(1 if lv.tangents_only else lv.size for lv in st)  # (see Level)

            def dummy(a: Any) -> Any:
                d = _raw(a)
                z = backend_namespace(d).zeros(sizes + tuple(a.shape), dtype=d.dtype, device=_device(d))
                return _wrap(z).requires_grad_()

            dummies = [dummy(a) if isinstance(a, Tensor) and is_float(_raw(a).dtype) else
                       (_zeros(a, True) if _is_array(a) else 0.0) for a in leaves]
            tangents = tree_structure(call.args).unflatten([from_phys(d, st) if isinstance(d, Tensor) and d.requires_grad else d
                                               for d in dummies])
        else:
            dummies = [
                _wrap(_zeros(a, False)).requires_grad_() if isinstance(a, Tensor) and is_float(a.data.dtype) else
                (_zeros(a, True) if _is_array(a) else 0.0)
                for a in leaves
            ]
            tangents = tree_structure(call.args).unflatten(dummies)
        for d in dummies:
            if isinstance(d, Tensor) and d.requires_grad:
                note_private(d)
        # a tangent converted to a Python number (t.item()) leaves the tape: forward mode
        # still gets the right value, but the transposed rule a zero; refuse that
        window = _cut.open_window(f"custom_jvp {self.__name__}")
        try:
            with enable_grad():
                _, tout, _who = self._run_rule(call.nd, tuple(primals), tuple(tangents))
        finally:
            _cut.close(window)
        touts = tree_leaves(tout)
        cts = tree_leaves(ct)
        live = [(o if isinstance(o, Tensor) else _wrap(o), c) for o, c in zip(touts, cts)]
        live = [(o, c) for o, c in live if o.requires_grad]
        if st:  # (the physical outputs and cotangents, every level at full size)
            live = [(_one_copy(to_phys(o, st, "custom_jvp"), st), _one_copy(to_phys(c, st, "custom_jvp"), st))
                    for o, c in live]
        targets = [dummies[j] for j in call.pos]
        diff = [d for d in targets if isinstance(d, Tensor) and d.requires_grad]
        if not diff:
            return [None] * len(call.pos)
        res: Any = [None] * len(diff)
        if live:
            seeds = [_seed(o, c, "custom_jvp") for o, c in live]
            res = _engine_call([o for o, _ in live], seeds, graph, graph, diff, "custom_jvp")
        if window.cuts:
            _cut.check_reverse(
                window.name, f"the jvp rule {_fname(self.jvp)}", window.cuts, diff, list(res),
                lambda k: f"tangent {k}", " (reverse mode transposes the rule on the tape, so tangent_out must "
                "be computed from the tangents with array operations)")
        if not live:
            return [None] * len(call.pos)
        it = iter(res)
        out = []
        for d in targets:
            if isinstance(d, Tensor) and d.requires_grad:
                r = next(it)
                r = None if r is None else (r if isinstance(r, Tensor) else _wrap(r))
                out.append(from_phys(r, st) if st and r is not None else r)
            else:
                out.append(None)
        return out
