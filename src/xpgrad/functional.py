"""Function transforms on raw arrays: ``grad`` and ``value_and_grad``.

They take and return the caller's own arrays (NumPy in, NumPy out): array
arguments are wrapped as Tensors for the duration of the call, and only those in
``argnums`` require grad. Calls nest (``grad(grad(f))``): an inner transform that
runs inside an outer one records its backward pass so the outer can differentiate
it. Arguments may be arrays or (nested) lists, tuples and dicts of arrays.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Sequence
from typing import Any

from ._exceptions import XpgradTypeError, XpgradValueError
from .autograd._core import apply, primitive
from .autograd._engine import _engine_call, _seed
from .autograd._grad_mode import GRAD_ENABLED
from .autograd._tensor import Tensor, _wrap

__all__ = ["grad", "value_and_grad"]

# how many transforms are running around this call (>0: record backward passes)
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("xpgrad_transform_depth", default=0)

_identity = primitive("identity", lambda xp, x: x, save=(), chapter="internal")
_identity.defvjp(lambda xp, g, ans, x: g)

_SCALARS = (int, float, complex)


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, Tensor)


def _tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    if isinstance(tree, (list, tuple)) and not hasattr(tree, "_fields"):
        return type(tree)(_tree_map(fn, t) for t in tree)
    if isinstance(tree, dict):
        return {k: _tree_map(fn, v) for k, v in tree.items()}
    return fn(tree)


def _leaves(tree: Any) -> list[Any]:
    out: list[Any] = []
    _tree_map(out.append, tree)
    return out


def _as_tensor(x: Any) -> Any:
    """Wrap raw arrays as constant Tensors; leave everything else."""
    if _is_array(x):
        return Tensor(x)
    return x


def _diff_input(x: Any, func: str, argnum: int) -> Tensor:
    """A Tensor that requires grad, standing for argument ``x`` of the transform."""
    if isinstance(x, Tensor):
        if x.requires_grad and GRAD_ENABLED.get():
            return apply(_identity, (x,), {})  # stays connected to the outer graph
        t = _wrap(x.data, None, 0, x._version)
    elif _is_array(x):
        t = Tensor(x)
    elif isinstance(x, _SCALARS) and not isinstance(x, bool):
        from .ops.creation import asarray

        t = asarray(float(x) if not isinstance(x, complex) else x)
    else:
        msg = (
            f"{func}: argument {argnum} must be an array (or a list/tuple/dict of arrays) to "
            f"differentiate with respect to it, got {type(x).__name__}"
        )
        raise XpgradTypeError(msg)
    from ._dtypes import dtype_name, is_float

    if not is_float(t.data.dtype):
        msg = (
            f"{func}: argument {argnum} has dtype {dtype_name(t.data.dtype)}; only floating-point "
            "and complex arguments can be differentiated (cast it, or leave it out of argnums)"
        )
        raise XpgradTypeError(msg)
    t.requires_grad = True
    return t


def _like(orig: Any, g: Tensor, depth: int) -> Any:
    return g if isinstance(orig, Tensor) or depth > 0 else g.data


def _unwrap(x: Any) -> Any:
    return x.data if isinstance(x, Tensor) else x


def _check_output(out: Any, func: str) -> Tensor | None:
    if isinstance(out, Tensor):
        t = out
    elif _is_array(out):
        t = Tensor(out)
    elif isinstance(out, _SCALARS):
        return None
    else:
        msg = f"{func}: the function must return a scalar array, got {type(out).__name__}"
        raise XpgradTypeError(msg)
    shape = tuple(t.data.shape)
    if len(shape) != 0 and not all(s == 1 for s in shape):
        msg = (
            f"{func}: the function must return a scalar (0-d or one-element) array, got shape "
            f"{shape}; reduce it (e.g. with sum) or use vjp/jacobian"
        )
        raise XpgradValueError(msg)
    from ._dtypes import dtype_name, is_float

    if not is_float(t.data.dtype):
        msg = f"{func}: the function returned dtype {dtype_name(t.data.dtype)}, which is not differentiable"
        raise XpgradTypeError(msg)
    return t


def value_and_grad(
    f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """Make a function returning ``(f(*args), gradient of f w.r.t. args[argnums])``.

    Args:
        f: a scalar-valued function of arrays, written against the array API
            (``xp = xpgrad.array_namespace(x)`` inside it works).
        argnums: an int, or a sequence of ints (then the gradient is a tuple).
        has_aux: ``f`` returns ``(value, aux)``; the result is ``((value, aux), grad)``.

    Gradients come back as the argument's own array type. Outputs that do not depend
    on an argument give zeros, as in JAX.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> def loss(w, x):
        ...     xp = xg.array_namespace(w, x)
        ...     return xp.sum((x * w) ** 2)
        >>> v, g = xg.value_and_grad(loss)(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
        >>> float(v), g
        (73.0, array([18., 64.]))
    """
    func = getattr(f, "__name__", "f")
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)  # type: ignore[arg-type]

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        name = "value_and_grad"
        for n in nums:
            if not isinstance(n, int) or not -len(args) <= n < len(args):
                msg = f"{name}: argnums {argnums!r} out of range for {len(args)} positional arguments of {func}"
                raise XpgradValueError(msg)
        idx = [n % len(args) for n in nums]
        depth = _DEPTH.get()
        # unwrap results only at top level: inside an outer transform a result may
        # depend on the outer variables (through a closure) and must stay on the tape
        raw_in = depth == 0 and not any(isinstance(a, Tensor) for a in _leaves(args))
        wrapped = list(args)
        diff_leaves: list[list[Tensor]] = []
        for n in idx:
            tree = _tree_map(lambda x, n=n: _diff_input(x, name, n), args[n])
            wrapped[n] = tree
            diff_leaves.append(_leaves(tree))
        for k, a in enumerate(args):
            if k not in idx:
                wrapped[k] = _tree_map(_as_tensor, a)
        token = _DEPTH.set(depth + 1)
        gtoken = GRAD_ENABLED.set(True)
        try:
            out = f(*wrapped, **kwargs)
        finally:
            GRAD_ENABLED.reset(gtoken)
            _DEPTH.reset(token)
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                msg = f"{name}: has_aux=True requires {func} to return a (value, aux) pair"
                raise XpgradTypeError(msg)
            out, aux = out
        value = _check_output(out, name)
        create_graph = depth > 0 and GRAD_ENABLED.get()
        flat = [t for leaves in diff_leaves for t in leaves]
        if value is not None and value.requires_grad:
            seed = _seed(value, None, name)
            res = _engine_call([value], [seed], create_graph, create_graph, flat, name)
        else:
            res = [None] * len(flat)
        grads = []
        for t, g in zip(flat, res):
            if g is None:
                from ._dispatch import backend_namespace

                xp = backend_namespace(t.data)
                g = xp.zeros(t.data.shape, dtype=t.data.dtype, device=t.device)
            grads.append(g if isinstance(g, Tensor) else _wrap(g))
        # rebuild each argument's tree with its gradients; raw leaves get raw gradients
        it = iter(grads)
        trees = [
            _tree_map(lambda orig: _like(orig, next(it), depth), args[n]) for n in idx
        ]
        g_out = trees[0] if single else tuple(trees)
        v_out: Any = out if value is None else value
        if raw_in:
            v_out = _unwrap(v_out)
        if has_aux:
            aux_out = _tree_map(_unwrap, aux) if raw_in else aux
            return (v_out, aux_out), g_out
        return v_out, g_out

    return wrapper


def grad(f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable[..., Any]:
    """Make a function returning the gradient of scalar-valued ``f`` w.r.t. ``args[argnums]``.

    See :func:`value_and_grad`. Transforms compose: ``grad(grad(f))`` works.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.grad(lambda x: xg.sum(xg.sin(x)))(np.array([0.0]))
        array([1.])
        >>> d2 = xg.grad(xg.grad(lambda x: xg.sum(x * x * x)))
        >>> float(d2(np.array(2.0)))
        12.0
    """
    vg = value_and_grad(f, argnums, has_aux)

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    return wrapper
