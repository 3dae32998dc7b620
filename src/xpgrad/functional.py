"""Function transforms on raw arrays: ``grad``, ``value_and_grad``, ``vjp``, ``jvp``,
``hvp``, ``linearize`` and
``stop_gradient`` (``custom_vjp``/``custom_jvp`` live in `xpgrad._custom`).

They take and return the caller's own arrays (NumPy in, NumPy out): array
arguments are wrapped as Tensors for the duration of the call. Calls nest to any
order (``grad(grad(f))``, ``jacfwd(jacrev(f))``, ``jvp`` of ``grad``, ``grad`` of
``jvp``): an inner transform that runs inside an outer one keeps its results on
the tape (and their forward tangents), so the outer one can differentiate them.
Arguments and results may be arrays or pytrees of them (`xpgrad.tree_util`: lists,
tuples, dicts, named tuples, ``None``, registered dataclasses and classes), which keep
their types.

Reverse mode (``grad``, ``vjp``, ``jacrev``) runs the tape's backward pass;
forward mode (``jvp``, ``jacfwd``) opens a forward level (see
`xpgrad.autograd._core`) and reads the outputs' tangents; ``hessian`` is
forward over reverse.
"""

from __future__ import annotations

import contextvars
import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import array_api_compat
import numpy as np

from ._dispatch import backend_namespace, check_devices
from ._dtypes import dtype_name, is_float
from ._exceptions import XpgradTypeError, XpgradValueError
from .autograd import _cut
from .autograd._batched import STACK, Batched, from_phys, to_phys, use_stack
from .autograd._batching_util import pointwise
from .autograd._core import FWD_LEVELS, apply, forward_level, primitive, raw_dtype
from .autograd._core import PRIMITIVES as PRIMITIVES_
from .autograd._engine import _engine_call, _seed
from .autograd._grad_mode import GRAD_ENABLED, graph_namespace
from .autograd._tensor import Tensor, _wrap
from .ops._common import is_complex
from .ops.creation import asarray, zeros_like
from .ops.data_type import astype
from .ops.elementwise import conj
from .tree_util import describe, leaves_up_to, tree_flatten, tree_leaves, tree_map

__all__ = ["grad", "hvp", "jvp", "linearize", "stop_gradient", "value_and_grad", "vjp"]

# how many transforms are running around this call (>0: record backward passes)
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("xpgrad_transform_depth", default=0)
#: the leaves that transforms made for their own use (their inputs' copies), which no caller
#: can differentiate: a vmap of raw arrays whose output is on the graph of these alone returns
#: the caller's array (see ``xpgrad._vmap``)
#: (by id: a Tensor's == is elementwise)
PRIVATE_LEAVES: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()


def note_private(t: Tensor) -> None:
    """Note leaf ``t``, made by a transform for its own use, in `PRIVATE_LEAVES`."""
    PRIVATE_LEAVES[id(t)] = t

_identity = primitive("identity", lambda xp, x: x, save=(), chapter="internal", batch=pointwise)
_identity.defvjp(lambda xp, g, ans, x: g)
_identity.defjvp(lambda xp, t, ans, x: t)

# the identity with zero derivative: neither recorded nor given a tangent
_stop = primitive("stop_gradient", lambda xp, x: x, zero_grad=True, view=True, chapter="internal", batch=pointwise)

_SCALARS = (int, float, complex)


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, Tensor)


def check_fun(f: Any, name: str) -> None:
    """Refuse a transform of something that is not callable, naming the transform and the value."""
    if not callable(f):
        msg = f"{name}: expected a function to transform, got {type(f).__name__} {f!r}"
        raise XpgradTypeError(msg)


def check_argnums(argnums: Any, name: str) -> tuple[int, ...]:
    """``argnums`` (an int or a sequence of ints) as a tuple; refuses other types and repeats."""
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        return (argnums,)
    if isinstance(argnums, (tuple, list)) and all(isinstance(n, int) and not isinstance(n, bool) for n in argnums):
        nums = tuple(argnums)
        _check_repeats(nums, nums, name)
        return nums
    msg = f"{name}: argnums must be an int or a sequence of ints, got {type(argnums).__name__} {argnums!r}"
    raise XpgradTypeError(msg)


def _check_repeats(idx: Sequence[int], argnums: Any, name: str) -> None:
    if len(set(idx)) != len(idx):
        dup = next(n for k, n in enumerate(idx) if n in idx[:k])
        msg = (f"{name}: argnums {argnums!r} names argument {dup} more than once; each argument may be "
               "differentiated once (as in torch.func)")
        raise XpgradValueError(msg)


def _as_tensor(x: Any) -> Any:
    """Wrap raw arrays as constant Tensors; leave everything else."""
    if _is_array(x):
        return Tensor(x)
    return x


def _diff_input(x: Any, func: str, argnum: int) -> Tensor:
    """A Tensor that requires grad, standing for argument ``x`` of the transform.

    Inside vmap it is Batched, with one copy of ``x`` per example (see
    `xpgrad.autograd._batched`): each example's output then depends on its own copy
    only, so the physical backward pass gives each example its own gradient.
    """
    st = STACK.get()
    if st:
        if not (isinstance(x, Tensor) or _is_array(x) or isinstance(x, _SCALARS)):
            _diff_leaf(x, func, argnum)  # raises
        return from_phys(_diff_leaf(to_phys(x, st, func), func, argnum), st)  # type: ignore[no-any-return]
    return _diff_leaf(x, func, argnum)


def _diff_leaf(x: Any, func: str, argnum: int) -> Tensor:
    if isinstance(x, Tensor):
        if x.requires_grad and GRAD_ENABLED.get():
            return apply(_identity, (x,), {})  # stays connected to the outer graph (and its tangents)
        t = _wrap(x.data, None, 0, x._version)
        t._fw = x._fw  # forward tangents of an outer jvp ride along (fwd-over-rev)
    elif _is_array(x):
        t = Tensor(x)
    elif isinstance(x, _SCALARS) and not isinstance(x, bool):
        t = asarray(float(x) if not isinstance(x, complex) else x)
    else:
        msg = (
            f"{func}: argument {argnum} must be an array (or a list/tuple/dict of arrays) to "
            f"differentiate with respect to it, got {type(x).__name__}"
        )
        raise XpgradTypeError(msg)
    if not is_float(t.data.dtype):
        msg = (
            f"{func}: argument {argnum} has dtype {dtype_name(t.data.dtype)}; only floating-point "
            "and complex arguments can be differentiated (cast it, or leave it out of argnums)"
        )
        raise XpgradTypeError(msg)
    t.requires_grad = True
    note_private(t)
    return t


def _record_backward(depth: int) -> bool:
    """Whether a backward pass must be recorded: an outer transform may differentiate it."""
    return depth > 0 and (GRAD_ENABLED.get() or bool(FWD_LEVELS.get()))


def _like(orig: Any, g: Tensor, depth: int) -> Any:
    return g if isinstance(orig, Tensor) or depth > 0 or isinstance(g, Batched) else g.data


def _unwrap(x: Any) -> Any:
    return x.data if isinstance(x, Tensor) and not isinstance(x, Batched) else x


def _phys(t: Any) -> Any:
    """The physical Tensor of a leaf made by `_diff_input` (itself outside vmap)."""
    return t._inner if isinstance(t, Batched) else t


def _check_output(out: Any, func: str, fname: str, cuts: list[Any]) -> Tensor:
    if isinstance(out, Tensor):
        t = out
    elif _is_array(out):
        t = Tensor(out)
    elif isinstance(out, _SCALARS):
        _cut.number_output(func, fname, out, cuts)  # raises: a Python number carries no gradient
    elif isinstance(out, (tuple, list)) and out:  # (loss, aux), as JAX's has_aux takes it
        msg = (f"{func}: the function must return a scalar array, got {type(out).__name__} of {len(out)} from "
               f"{fname}; if it returns (loss, aux), pass has_aux=True ({func}({fname}, has_aux=True)) to "
               "differentiate the loss and get aux back as is; else return the scalar loss alone")
        raise XpgradTypeError(msg)
    else:
        msg = f"{func}: the function must return a scalar array, got {type(out).__name__}"
        raise XpgradTypeError(msg)
    shape = tuple(t.shape)
    if len(shape) != 0 and not all(s == 1 for s in shape):
        msg = (
            f"{func}: the function must return a scalar (0-d or one-element) array, got shape "
            f"{shape}; reduce it (e.g. with sum) or use vjp/jacobian"
        )
        raise XpgradValueError(msg)
    if not is_float(raw_dtype(t)):
        msg = f"{func}: the function returned dtype {dtype_name(raw_dtype(t))}, which is not differentiable"
        raise XpgradTypeError(msg)
    return t


def value_and_grad(
    f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False,
    allow_int: bool = False,
) -> Callable[..., Any]:
    """Make a function returning ``(f(*args), gradient of f w.r.t. args[argnums])``.

    Args:
        f: a scalar-valued function of arrays, written against the array API
            (``xp = xpgrad.array_namespace(x)`` inside it works).
        argnums: an int, or a sequence of ints (then the gradient is a tuple).
        has_aux: ``f`` returns ``(value, aux)``; the result is ``((value, aux), grad)``.
        holomorphic: ``f`` is complex-differentiable with complex inputs and a complex
            output; the result is the complex derivative ``f'(z)`` (as JAX). Without it
            a complex output is refused, as in JAX and PyTorch: take ``xg.real`` or
            ``xg.abs`` of it to differentiate a real quantity.
        allow_int: accept integer and bool arguments (leaves) in ``argnums``, as JAX:
            each gets a NumPy array of dtype ``float0``
            (JAX's ``jax.dtypes.float0``, a zero-size void dtype) with its shape as
            gradient, whatever the argument's array type. Without it such an argument
            raises.

    Gradients come back as the argument's own array type. An output array that does
    not depend on an argument gives zeros, as in JAX. A result that is a Python number,
    or that was computed from a value converted to one (``float``, ``.item()``,
    ``math.exp``) or to NumPy, raises [`CutGraphError`][xpgrad.CutGraphError] instead of
    returning a zero gradient; converting only to log a value is fine.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> def loss(w, x):
        ...     xp = xg.array_namespace(w, x)
        ...     return xp.sum((x * w) ** 2)
        >>> v, g = xg.value_and_grad(loss)(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
        >>> float(v), g
        (73.0, array([18., 64.]))
    """
    return _value_and_grad(f, argnums, has_aux, "value_and_grad", holomorphic, allow_int)


#: The dtype of the gradient of an integer or bool argument under ``allow_int=True``:
#: NumPy's zero-size void dtype that JAX calls ``jax.dtypes.float0`` (equal to it).
float0 = np.dtype([("float0", "V")])


def _is_int_leaf(x: Any) -> bool:
    """An integer or bool argument leaf (a Python int/bool, or an array of such a dtype)."""
    if isinstance(x, (bool, int)):
        return True
    return (isinstance(x, Tensor) or _is_array(x)) and not is_float(raw_dtype(x) if isinstance(x, Tensor) else x.dtype)


def _float0_zeros(x: Any) -> Any:
    """The gradient of integer leaf ``x`` under ``allow_int``: float0 zeros of its shape."""
    return np.zeros(tuple(int(s) for s in getattr(x, "shape", ())), dtype=float0)


def _value_and_grad(f: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool, name: str,
                    holomorphic: bool = False, allow_int: bool = False) -> Callable[..., Any]:
    """[`value_and_grad`][xpgrad.functional.value_and_grad], with ``name`` (the transform the user called) in error messages."""
    check_fun(f, name)
    func = getattr(f, "__name__", "f")
    single = isinstance(argnums, int)
    nums = check_argnums(argnums, name)

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for n in nums:
            if not -len(args) <= n < len(args):
                msg = f"{name}: argnums {argnums!r} out of range for {len(args)} positional arguments of {func}"
                raise XpgradValueError(msg)
        idx = [n % len(args) for n in nums]
        _check_repeats(idx, argnums, name)
        depth = _DEPTH.get()
        # unwrap results only at top level: inside an outer transform a result may
        # depend on the outer variables (through a closure) and must stay on the tape
        st = STACK.get()
        raw_in = depth == 0 and not st and not any(isinstance(a, Tensor) for a in tree_leaves(args))
        wrapped = list(args)
        diff_leaves: list[list[Tensor]] = []
        int_leaves: list[bool] = []
        in_trees = []
        for n in idx:
            leaves, treedef = tree_flatten(args[n])
            if allow_int:  # integer leaves ride along as constants; their gradient is float0
                ints = [_is_int_leaf(x) for x in leaves]
                full = [_as_tensor(x) if i else _diff_input(x, name, n) for x, i in zip(leaves, ints)]
                int_leaves.extend(ints)
                wrapped[n] = treedef.unflatten(full)
                diff_leaves.append([t for t, i in zip(full, ints) if not i])
                in_trees.append((leaves, treedef))
                continue
            dl = [_diff_input(x, name, n) for x in leaves]
            int_leaves.extend([False] * len(dl))
            wrapped[n] = treedef.unflatten(dl)
            diff_leaves.append(dl)
            in_trees.append((leaves, treedef))
        for k, a in enumerate(args):
            if k not in idx:
                wrapped[k] = tree_map(_as_tensor, a)
        token = _DEPTH.set(depth + 1)
        gtoken = GRAD_ENABLED.set(True)
        window = _cut.open_window(name)
        try:
            out = f(*wrapped, **kwargs)
        finally:
            _cut.close(window)
            GRAD_ENABLED.reset(gtoken)
            _DEPTH.reset(token)
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                msg = f"{name}: has_aux=True requires {func} to return a (value, aux) pair"
                raise XpgradTypeError(msg)
            out, aux = out
        value = _check_output(out, name, func, window.cuts)
        flat = [t for leaves in diff_leaves for t in leaves]
        _check_holomorphic(value, flat, holomorphic, name, func)
        create_graph = _record_backward(depth)
        vphys = _one_copy(to_phys(value, st, name), st) if st else value
        flat_phys = [_phys(t) for t in flat]
        if vphys.requires_grad:
            seed = _seed(vphys, None, name) if not st else _ones(vphys)
            res = _engine_call([vphys], [seed], create_graph, create_graph, flat_phys, name)
        else:
            res = [None] * len(flat)
        if window.cuts:  # a gradient that is None (structurally zero): was the graph cut?
            _cut.check_reverse(name, func, window.cuts, flat, res, functools.partial(_arg_label, idx, diff_leaves))
        grads = []
        for t, g in zip(flat_phys, res):
            if g is None:
                xp = backend_namespace(t.data)
                g = xp.zeros(t.data.shape, dtype=t.data.dtype, device=t.device)
            g = g if isinstance(g, Tensor) else _wrap(g)
            if st:
                g = from_phys(g, st)
            if holomorphic:  # the gradient of Re f is conj(f'(z)) (PyTorch's convention)
                g = conj(g)
            grads.append(g)
        # rebuild each argument's tree with its gradients; raw leaves get raw gradients
        it = iter(grads)
        ints_it = iter(int_leaves)
        trees = [treedef.unflatten([_float0_zeros(orig) if next(ints_it) else _like(orig, next(it), depth)
                                    for orig in leaves]) for leaves, treedef in in_trees]
        g_out = trees[0] if single else tuple(trees)
        v_out: Any = value
        if raw_in:
            v_out = _unwrap(v_out)
        if has_aux:
            aux_out = tree_map(_unwrap, aux) if raw_in else aux
            return (v_out, aux_out), g_out
        return v_out, g_out

    return wrapper


def _arg_label(idx: list[int], diff_leaves: list[list[Tensor]], k: int) -> str:
    """How to name flat input ``k`` of a transform over arguments ``idx`` (for messages)."""
    for n, leaves in zip(idx, diff_leaves):
        if k < len(leaves):
            return f"argument {n}" + (f" (leaf {k} of its tree)" if len(leaves) > 1 else "")
        k -= len(leaves)
    return f"input {k}"


def _check_holomorphic(value: Tensor, flat: list[Tensor], holomorphic: bool, name: str, func: str) -> None:
    """A complex output needs holomorphic=True, and holomorphic=True needs complex inputs (as JAX)."""
    if not holomorphic and is_complex(value):
        msg = (
            f"{name}: {func} returned a complex output ({value.dtype}); {name} differentiates a real "
            "scalar: take xg.real(...) or xg.abs(...) of it, or pass holomorphic=True for the complex "
            "derivative f'(z)"
        )
        raise XpgradTypeError(msg)
    if holomorphic and not all(is_complex(t) for t in flat):
        bad = next(t for t in flat if not is_complex(t.data))
        msg = f"{name}: holomorphic=True needs complex inputs, got {bad.dtype}"
        raise XpgradTypeError(msg)


def grad(f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False) -> Callable[..., Any]:
    """Make a function returning the gradient of scalar-valued ``f`` w.r.t. ``args[argnums]``.

    See [`value_and_grad`][xpgrad.functional.value_and_grad]. Transforms compose: ``grad(grad(f))`` works.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.grad(lambda x: xg.sum(xg.sin(x)))(np.array([0.0]))
        array([1.])
        >>> d2 = xg.grad(xg.grad(lambda x: xg.sum(x * x * x)))
        >>> float(d2(np.array(2.0)))
        12.0
    """
    return _grad(f, argnums, has_aux, holomorphic, "grad", allow_int)


def _grad(f: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool, holomorphic: bool,
          name: str, allow_int: bool = False) -> Callable[..., Any]:
    """[`grad`][xpgrad.functional.grad], with ``name`` (the transform the user called) in error messages."""
    vg = _value_and_grad(f, argnums, has_aux, name, holomorphic, allow_int)

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    return wrapper


def _bxp(x: Any) -> Any:
    return backend_namespace(x.data if isinstance(x, Tensor) else x)


def _ns(x: Any) -> Any:
    """The namespace to compute with on ``x``: xpgrad for Tensors, the backend for raw arrays."""
    if isinstance(x, Tensor):
        return graph_namespace()
    return _bxp(x)


def _ones(t: Tensor) -> Any:
    """Ones like physical Tensor ``t`` (the seed of a batch of scalar outputs)."""
    return _bxp(t.data).ones_like(t.data)


def _zeros_for(x: Any, as_tensor: bool) -> Any:
    if isinstance(x, Batched):
        return zeros_like(x)
    data = x.data if isinstance(x, Tensor) else x
    z = _bxp(data).zeros_like(data)
    return _wrap(z) if as_tensor else z


def _is_float_dtype(dt: Any) -> bool:
    return is_float(dt)


# ---------------------------------------------------------------------- stop_gradient
def stop_gradient(x: Any) -> Any:
    """``x`` as a constant: no gradient flows back through it, and its tangent is zero.

    Works on Tensors, raw arrays (returned as they are) and lists/tuples/dicts of them.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.grad(lambda x: xg.sum(x * xg.stop_gradient(x)))(np.array([3.0]))
        array([3.])
        >>> xg.jvp(lambda x: x * xg.stop_gradient(x), (np.array([3.0]),), (np.array([1.0]),))[1]
        array([3.])
    """
    return tree_map(lambda a: apply(_stop, (a,), {}) if isinstance(a, Tensor) else a, x)


# ---------------------------------------------------------------------- vjp
def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """Evaluate ``f(*primals)`` and return ``(out, vjp_fn)``; ``vjp_fn(cotangents)`` pulls back.

    ``vjp_fn`` takes output cotangents with the structure, shapes and dtypes of
    ``out`` (the "output gradients" of manual-gradient frameworks) and returns a tuple
    with one input cotangent per primal. It may be called many times. Complex
    numbers follow PyTorch's convention (``g * conj(f'(z))``).

    Args:
        f: a function of arrays returning an array or a list/tuple/dict of arrays.
        primals: the arguments (arrays, or lists/tuples/dicts of arrays).
        has_aux: ``f`` returns ``(out, aux)``; the result is then ``(out, vjp_fn, aux)``.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> out, pull = xg.vjp(lambda x, y: x * y, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
        >>> out
        array([3., 8.])
        >>> pull(np.array([1.0, 10.0]))
        (array([ 3., 40.]), array([ 1., 20.]))
    """
    return _vjp(f, primals, has_aux, "vjp")


def _vjp(f: Callable[..., Any], primals: Sequence[Any], has_aux: bool, func: str) -> Any:
    """[`vjp`][xpgrad.functional.vjp], with ``func`` (the transform the user called) in error messages."""
    fname = getattr(f, "__name__", "f")
    depth = _DEPTH.get()
    st_rec = STACK.get()  # the vmap levels open at the forward pass: its physical values have their axes
    raw_in = depth == 0 and not st_rec and not any(isinstance(a, Tensor) for a in tree_leaves(primals))
    in_trees = [tree_flatten(p) for p in primals]
    per = [[_diff_input(x, func, k) for x in leaves] for k, (leaves, _) in enumerate(in_trees)]
    wrapped = [treedef.unflatten(ws) for (_, treedef), ws in zip(in_trees, per)]
    flat = [t for ws in per for t in ws]
    token = _DEPTH.set(depth + 1)
    gtoken = GRAD_ENABLED.set(True)
    window = _cut.open_window(func)
    try:
        out = f(*wrapped)
    finally:
        _cut.close(window)
        GRAD_ENABLED.reset(gtoken)
        _DEPTH.reset(token)
    if has_aux:
        out, aux = _split_aux(out, func, f)
    cuts = window.cuts
    out_leaves, out_def = tree_flatten(out)
    outs = [_output_tensor(o, func, fname, cuts) for o in out_leaves]
    if st_rec:
        outs = [_one_copy(to_phys(o, st_rec, func), st_rec) for o in outs]
    flat_phys = [_phys(t) for t in flat]

    def vjp_fn(cotangents: Any) -> tuple[Any, ...]:
        cts = leaves_up_to(out_def, cotangents, func, "the cotangents and the outputs", out)
        st = STACK.get()
        if st[:len(st_rec)] != st_rec or any(a is not b for a, b in zip(st, st_rec)):
            msg = (
                f"{func}: the vjp function was called outside the vmap its forward pass ran in; call it "
                "inside that vmap (or return the cotangents from it)"
            )
            raise XpgradValueError(msg)
        extra = st[len(st_rec):]  # vmap levels opened since the forward pass: a batch of cotangents
        live, seeds = [], []
        tensor_ct = False
        for o, c in zip(outs, cts):
            if isinstance(c, Tensor):
                tensor_ct = True
            if st:
                seed = _batched_seed(c, o, st, extra, func)
            else:
                seed = _seed(o, c, func)  # checks shape, dtype and device
            if o.requires_grad:
                live.append(o)
                seeds.append(seed)
        create_graph = _record_backward(max(depth, _DEPTH.get(), int(tensor_ct)))
        res: list[Any] = [None] * len(flat)
        if live and extra:
            # the rules run on batched cotangents (Tensors): the tape's values are unbatched for them
            with use_stack(extra):
                res = _engine_call(live, seeds, True, True, flat_phys, func, record=create_graph)
            res = [None if g is None else _from_extra(g, st, len(st_rec)) for g in res]
        elif live:
            res = _engine_call(live, seeds, True, create_graph, flat_phys, func)
            if st:
                res = [None if g is None else from_phys(g, st) for g in res]
        if cuts:  # a cotangent that is None (structurally zero): was the graph cut?
            _cut.check_reverse(func, fname, cuts, flat, res, functools.partial(_arg_label, list(range(len(per))), per))
        as_tensor = not raw_in or tensor_ct or _DEPTH.get() > 0 or bool(st)
        grads = [_zeros_for(t, as_tensor) if g is None else _as(g, as_tensor) for t, g in zip(flat, res)]
        it = iter(grads)
        return tuple(treedef.unflatten([next(it) for _ in leaves]) for leaves, treedef in in_trees)

    out_ret = tree_map(_unwrap, out) if raw_in else out
    if has_aux:
        return out_ret, vjp_fn, (tree_map(_unwrap, aux) if raw_in else aux)
    return out_ret, vjp_fn


def _batched_seed(c: Any, o: Tensor, st: tuple[Any, ...], extra: tuple[Any, ...], func: str) -> Any:
    """Cotangent ``c`` of physical output ``o`` under the vmap levels ``st``: with every level at
    full size, and the levels opened since the forward pass (``extra``) as a Batched value of
    them alone (its example: the output's physical shape)."""
    if not isinstance(c, Tensor) and not hasattr(c, "shape"):
        msg = f"{func}: a cotangent must be an array like its output, got {type(c).__name__}"
        raise XpgradTypeError(msg)
    logical = tuple(c.shape)
    want = tuple(o.shape)[len(st) - len(extra):]
    if logical != want:
        msg = f"{func}: gradient has shape {logical}, but the output has shape {want}"
        raise XpgradValueError(msg)
    p = to_phys(c, st, func)
    if p.dtype != o.dtype:
        p = astype(p, o.dtype)
    if not extra:
        return p
    K, e = len(st), len(extra)
    r = K - e
    # (st_rec axes, extra axes, example) -> (extra axes, st_rec axes, example)
    perm = tuple(range(r, K)) + tuple(range(r)) + tuple(range(K, p.ndim))
    if r:
        p = apply(PRIMITIVES_["permute_dims"], (p,), {"axes": perm})
    return from_phys(p, extra)


def _from_extra(g: Any, st: tuple[Any, ...], r: int) -> Any:
    """A gradient computed under the extra levels only (Batched of them, example = the physical
    value under the forward's ``r`` levels) as a Batched value of every level ``st``."""
    if not isinstance(g, Batched):  # (did not vary along the extra levels)
        g = g if isinstance(g, Tensor) else _wrap(g)
        s = tuple(g.shape)
        e = len(st) - r
        g = apply(PRIMITIVES_["reshape"], (g,), {"shape": s[:r] + (1,) * e + s[r:]})
        return from_phys(g, st)
    p = g._inner
    e = len(g._levels)
    if r:
        perm = tuple(range(e, e + r)) + tuple(range(e)) + tuple(range(e + r, p.ndim))
        p = apply(PRIMITIVES_["permute_dims"], (p,), {"axes": perm})
    return from_phys(p, st)


def _as(g: Any, as_tensor: bool) -> Any:
    if as_tensor:
        return g if isinstance(g, Tensor) else _wrap(g)
    return g.data if isinstance(g, Tensor) else g


def _split_aux(out: Any, func: str, f: Callable[..., Any]) -> tuple[Any, Any]:
    if not (isinstance(out, tuple) and len(out) == 2):
        name = getattr(f, "__name__", "f")
        msg = f"{func}: has_aux=True requires {name} to return an (output, aux) pair, got {describe(out)}"
        raise XpgradTypeError(msg)
    return out


def _output_tensor(o: Any, func: str, fname: str, cuts: list[Any]) -> Tensor:
    if isinstance(o, Tensor):
        return o
    if _is_array(o):
        return Tensor(o)
    if isinstance(o, _SCALARS):
        _cut.number_output(func, fname, o, cuts)  # raises: a Python number carries no gradient
    msg = f"{func}: the function must return arrays (or lists/tuples/dicts of arrays), got {type(o).__name__}"
    raise XpgradTypeError(msg)


# ---------------------------------------------------------------------- jvp
def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False) -> Any:
    """Evaluate ``f(*primals)`` and its directional derivative along ``tangents``, in forward mode.

    Returns ``(out, tangent_out)`` with the structure of ``f``'s output. Each tangent
    has its primal's structure, shape and dtype. Complex inputs follow the plain
    (holomorphic) derivative: ``tangent_out = f'(z) * t``.

    Args:
        f: a function of arrays returning an array or a list/tuple/dict of arrays.
        primals: a tuple (or list) of arguments.
        tangents: a tuple (or list) with one tangent per primal.
        has_aux: ``f`` returns ``(out, aux)``; the result is ``(out, tangent_out, aux)``.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> y, dy = xg.jvp(lambda x: x * x, (np.array([1.0, 3.0]),), (np.array([1.0, 0.5]),))
        >>> y, dy
        (array([1., 9.]), array([2., 3.]))
    """
    return _jvp(f, primals, tangents, has_aux, "jvp")


def _jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool, func: str,
         lin: bool = False) -> Any:
    """[`jvp`][xpgrad.functional.jvp], with ``func`` (the transform the user called) in error messages.

    ``lin``: called inside a vmap over the tangents alone (``jacfwd``): a primal that vmap does
    not batch stays unbatched and carries the batched tangent (see `_dual`), so ``f``'s primal
    computation runs once, on the unbatched values, and only the tangents are batched."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        msg = (
            f"{func}: primals and tangents must be tuples (or lists) with one entry per argument, "
            f"got {type(primals).__name__} and {type(tangents).__name__}"
        )
        raise XpgradTypeError(msg)
    if len(primals) != len(tangents):
        msg = f"{func}: got {len(primals)} primals but {len(tangents)} tangents; give one tangent per primal"
        raise XpgradValueError(msg)
    depth = _DEPTH.get()
    leaves = tree_leaves(list(primals)) + tree_leaves(list(tangents))
    raw_in = depth == 0 and not STACK.get() and not any(isinstance(a, Tensor) for a in leaves)
    with forward_level() as level:
        wrapped = []
        for k, (p, t) in enumerate(zip(primals, tangents)):
            pl, treedef = tree_flatten(p)
            tl = leaves_up_to(treedef, t, func, f"primal {k} and its tangent", p)
            wrapped.append(treedef.unflatten([_dual(x, v, level, func, k, lin) for x, v in zip(pl, tl)]))
        token = _DEPTH.set(depth + 1)
        window = _cut.open_window(func)
        try:
            out = f(*wrapped)
        finally:
            _cut.close(window)
            _DEPTH.reset(token)
        if has_aux:
            out, aux = _split_aux(out, func, f)
        out_leaves, out_def = tree_flatten(out)
        _check_tangents(out_leaves, level, func, getattr(f, "__name__", "f"), window.cuts)
        pairs = [_split_tangent(o, level, func, raw_in) for o in out_leaves]
    primal_out = out_def.unflatten([p[0] for p in pairs])
    tangent_out = out_def.unflatten([p[1] for p in pairs])
    if has_aux:
        return primal_out, tangent_out, (tree_map(_unwrap, aux) if raw_in else aux)
    return primal_out, tangent_out


def _check_tangents(out_leaves: list[Any], level: int, func: str, fname: str, cuts: list[Any]) -> None:
    """Refuse Python numbers among the output leaves, and an output without a tangent of ``level``
    when a value that carried one was converted (the graph was cut: a zero tangent is wrong)."""
    for k, o in enumerate(out_leaves):
        if isinstance(o, _SCALARS):
            _cut.number_output(func, fname, o, cuts)  # raises: a Python number carries no tangent
        if isinstance(o, Batched):
            o = o._inner
        if cuts and not (isinstance(o, Tensor) and o._fw and level in o._fw):
            _cut.check_forward(func, fname, cuts, level, f"output {k}")


def _dual(x: Any, v: Any, level: int, func: str, k: int, lin: bool = False) -> Tensor:
    """The Tensor standing for primal ``x`` with tangent ``v`` at ``level``.

    Inside vmap: Batched, with the primal and the tangent both at full size along every
    level (a tangent lives on the physical value, so they must have one shape). With ``lin``
    (`_jvp`), a primal that is not batched stays as it is and its tangent is the batched ``v``
    itself: a tangent may be a Batched value whose example shape is its primal's physical
    shape (the rules of forward mode then run on Tensors and batch through vmap's rules;
    `_logical_tangent` turns it back into a batched value's tangent)."""
    st = STACK.get()
    if lin and isinstance(x, Batched) and isinstance(v, Batched):
        px = x._inner
        return from_phys(_dual_leaf(px, _physical_tangent(v, x._levels, px), level, func, k), x._levels)  # type: ignore[no-any-return]
    if st and not lin and (isinstance(x, Tensor) or _is_array(x) or isinstance(x, _SCALARS)) and (
            isinstance(v, Tensor) or _is_array(v) or isinstance(v, _SCALARS)):
        xs = tuple(x.shape) if hasattr(x, "shape") else ()
        vs = tuple(v.shape) if hasattr(v, "shape") else xs
        if vs != xs:
            msg = f"{func}: tangent {k} has shape {vs}, but its primal has shape {xs}"
            raise XpgradValueError(msg)
        px = to_phys(x, st, func)
        pv = to_phys(v, st, func) if (isinstance(v, Tensor) or _is_array(v)) else v
        return from_phys(_dual_leaf(px, pv, level, func, k), st)  # type: ignore[no-any-return]
    return _dual_leaf(x, v, level, func, k)


def _dual_leaf(x: Any, v: Any, level: int, func: str, k: int) -> Tensor:
    if isinstance(x, Tensor):
        if x.requires_grad and GRAD_ENABLED.get():
            t = apply(_identity, (x,), {})  # stays on the tape (grad of jvp)
        else:
            t = _wrap(x.data, None, 0, x._version)
            t._fw = x._fw
    elif _is_array(x):
        t = Tensor(x)
    elif isinstance(x, _SCALARS) and not isinstance(x, bool):
        t = asarray(float(x) if not isinstance(x, complex) else x)
    else:
        msg = f"{func}: primal {k} must be an array (or a list/tuple/dict of arrays), got {type(x).__name__}"
        raise XpgradTypeError(msg)
    data = t.data
    if not _is_float_dtype(data.dtype):
        msg = (
            f"{func}: primal {k} has dtype {dtype_name(data.dtype)}; only floating-point and complex "
            "primals have tangents (close over integer arguments instead)"
        )
        raise XpgradTypeError(msg)
    if isinstance(v, Batched):  # (a batched tangent of an unbatched primal: see _dual; checked by its example)
        vd = v._inner.data
        tv: Any = v
    elif isinstance(v, Tensor):
        vd = v.data
        tv = v if (v.requires_grad or v._fw) else vd
    elif _is_array(v):
        vd = tv = v
    elif isinstance(v, _SCALARS) and not isinstance(v, bool):
        vd = tv = _bxp(data).asarray(v, dtype=data.dtype, device=t.device)
    else:
        msg = f"{func}: tangent {k} must be an array like its primal, got {type(v).__name__}"
        raise XpgradTypeError(msg)
    shape = tuple(v.shape) if isinstance(v, Batched) else tuple(vd.shape)
    if shape != tuple(data.shape):
        msg = f"{func}: tangent {k} has shape {shape}, but its primal has shape {tuple(data.shape)}"
        raise XpgradValueError(msg)
    if vd.dtype != data.dtype:
        msg = (
            f"{func}: tangent {k} has dtype {dtype_name(vd.dtype)}, but its primal has dtype "
            f"{dtype_name(data.dtype)}; they must be equal"
        )
        raise XpgradTypeError(msg)
    check_devices(vd, data, func=func)
    t._fw = {level: tv} if not t._fw else {**t._fw, level: tv}
    return t


def _split_tangent(o: Any, level: int, func: str, raw_in: bool) -> tuple[Any, Any]:
    """An output leaf's (primal without the level's tangent, tangent at the level)."""
    if isinstance(o, Batched):
        st = o._levels
        p, tan = _split_tangent(o._inner, level, func, False)
        return from_phys(p, st), logical_tangent(tan, st)
    if isinstance(o, Tensor):
        fw = o._fw
        tan = fw.get(level) if fw else None
        if fw and level in fw:
            rest = {k: v for k, v in fw.items() if k != level}
            p = _wrap(o.data, o._node, o._oidx, o._version)
            p._requires_grad = o._requires_grad
            p._fw = rest or None
        else:
            p = o
    elif _is_array(o) or isinstance(o, _SCALARS):
        p, tan = o, None
    else:
        msg = f"{func}: the function must return arrays (or lists/tuples/dicts of arrays), got {type(o).__name__}"
        raise XpgradTypeError(msg)
    if tan is None:
        tan = _zeros_for(p, False) if hasattr(p, "shape") else type(p)(0)
    if raw_in:
        return _unwrap(p), _unwrap(tan)
    return p, (tan if isinstance(tan, Tensor) or not hasattr(tan, "shape") else _wrap(tan))


def _logical_tangent(tan: Batched, st: tuple[Any, ...]) -> Any:
    """The tangent of a Batched value of levels ``st`` whose physical value has the batched
    tangent ``tan`` (see `_dual`): ``tan``'s examples have the physical shape, the batch axes of
    ``st`` first. Each level's axis of the result joins ``tan``'s axis for it and the physical
    one; where both vary, example ``i`` is the tangent of the physical value's example ``i``."""
    xg = graph_namespace()
    lv = tan._levels
    k2, k = len(lv), len(st)
    kk = max(k, k2)
    phys = tan._inner
    shp: tuple[Any, ...] = tuple(phys.shape)
    tax, pax, rest = shp[:k2], shp[k2:k2 + k], shp[k2 + k:]
    tax += (1,) * (kk - k2)
    pax += (1,) * (kk - k)
    phys = xg.reshape(phys, tax + pax + rest)
    perm = tuple(a for j in range(kk) for a in (j, kk + j)) + tuple(range(2 * kk, 2 * kk + len(rest)))
    if perm != tuple(range(len(perm))):
        phys = xg.permute_dims(phys, perm)
    both = [j for j, (a, b) in enumerate(zip(tax, pax)) if a != 1 and b != 1]
    phys = xg.reshape(phys, tuple(b if a == 1 else (a * b if j in both else a) for j, (a, b) in enumerate(zip(tax, pax)))
                      + rest)
    for j in both:  # (both vary: the diagonal)
        n = int(pax[j])  # type: ignore[arg-type]
        raw = phys.data
        idx = backend_namespace(raw).arange(0, n * n, n + 1, device=array_api_compat.device(raw))
        phys = xg.take(phys, idx, axis=j)
    return from_phys(phys, st if k >= k2 else lv)


def _one_copy(t: Any, st: tuple[Any, ...]) -> Any:
    """Physical ``t`` (batch axes ``st`` first) cut to its first example along each level of
    tangents alone (see `Level`) along which a batching rule copied it (every copy is the same
    value there). Differentiating every copy would sum them into one gradient; differentiating
    the first gives the gradient once."""
    if not any(lv.tangents_only for lv in st):
        return t
    shape = tuple(t.shape)
    key = tuple(slice(0, 1) if lv.tangents_only and shape[i] != 1 else slice(None) for i, lv in enumerate(st))
    if all(k == slice(None) for k in key):
        return t
    index = (*key, Ellipsis)
    return t[index]


def _physical_tangent(d: Batched, st: tuple[Any, ...], phys: Tensor) -> Batched:
    """Batched tangent ``d`` of a value batched along ``st`` whose physical value is ``phys``, as
    the tangent of ``phys``: batched along ``d``'s levels, with ``phys``'s shape as its example
    shape (the inverse of `_logical_tangent`)."""
    xg = graph_namespace()
    k2 = len(d._levels)
    dp = d._inner
    s = tuple(dp.shape)
    dp = xg.reshape(dp, s[:k2] + (1,) * len(st) + s[k2:])
    full = s[:k2] + tuple(phys.shape)
    if tuple(dp.shape) != full:
        dp = xg.broadcast_to(dp, full)
    return from_phys(dp, d._levels)  # type: ignore[no-any-return]


def attach_tangent(o: Any, d: Batched, level: int) -> Any:
    """Output ``o`` with the batched tangent ``d`` at ``level`` (a custom_jvp rule's, inside
    ``jacfwd``: see `_dual`), without copying ``o`` along ``d``'s levels."""
    o = o if isinstance(o, Tensor) else _wrap(o)
    st = o._levels if isinstance(o, Batched) else ()
    p = o._inner if isinstance(o, Batched) else o
    r = _wrap(p.data, p._node, p._oidx, p._version)
    r._requires_grad = p._requires_grad
    r._fw = p._fw
    if is_float(p.data.dtype):
        r._fw = {**(p._fw or {}), level: _physical_tangent(d, st, p) if st else d}
    return from_phys(r, st) if st else r


def logical_tangent(v: Any, st: tuple[Any, ...]) -> Any:
    """The tangent ``v`` of the physical value of a Batched value of levels ``st``, as the
    tangent of that Batched value."""
    return _logical_tangent(v, st) if isinstance(v, Batched) else from_phys(v, st)


def linearize(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(f(*primals), f_jvp)`` where ``f_jvp(*tangents)`` is the JVP of ``f`` at ``primals``.

    With ``has_aux=True``, ``f`` returns ``(out, aux)`` and the result is
    ``(out, f_jvp, aux)``, as ``jax.linearize``. Unlike JAX, ``f_jvp`` re-runs ``f`` in
    forward mode for each call (nothing is stored).

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> y, f_jvp = xg.linearize(lambda x: x ** 3, np.array([2.0]))
        >>> y, f_jvp(np.array([1.0]))
        (array([8.]), array([12.]))
    """
    res = _jvp(f, primals, tuple(tree_map(_zeros_like_any, p) for p in primals), has_aux, "linearize")

    def f_jvp(*tangents: Any) -> Any:
        return _jvp(f, primals, tangents, has_aux, "linearize")[1]

    if has_aux:
        return res[0], f_jvp, res[2]
    return res[0], f_jvp


def _zeros_like_any(x: Any) -> Any:
    if isinstance(x, Tensor) or _is_array(x):
        return _zeros_for(x, isinstance(x, Tensor))
    return 0.0


def hvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """The Hessian of scalar-valued ``f`` at ``primals`` times ``tangents`` (forward over reverse).

    ``jvp(grad(f, argnums), primals, tangents)[1]``: one forward pass through the
    backward pass, never forming the Hessian. With one primal the result has its
    structure; with several, a tuple with one entry per primal.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.hvp(lambda x: xg.sum(x ** 3), (np.array([1.0, 2.0]),), (np.array([1.0, 1.0]),))
        array([ 6., 12.])
    """
    if not isinstance(primals, (tuple, list)):
        msg = f"hvp: primals must be a tuple (or list) of arguments, got {type(primals).__name__}"
        raise XpgradTypeError(msg)
    argnums: int | tuple[int, ...] = 0 if len(primals) == 1 else tuple(range(len(primals)))
    return _jvp(_grad(f, argnums, False, False, "hvp"), primals, tangents, False, "hvp")[1]
