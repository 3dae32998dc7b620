"""Jacobians and hessians in one batched pass: ``vmap`` of one VJP (``jacrev``) or one JVP
(``jacfwd``) over the one-hot basis, as JAX and torch.func build them.

``jacrev`` runs the forward pass once and pulls the whole basis of output
cotangents back through one batched backward pass; ``jacfwd`` pushes the basis of
input tangents forward in one forward pass in which only the tangents are batched
(the primal is computed once, unbatched, as ``jax.linearize`` pushes a batch of
tangents: ``A @ x`` is one matrix-vector product, not one per direction);
``hessian`` is ``jacfwd`` of ``jacrev``, so it too evaluates ``f`` once.
``chunk_size`` bounds how many basis vectors go through at once (the primal is then
computed once a chunk).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import array_api_compat

from ._dispatch import backend_namespace, raw_array
from ._dtypes import dtype_name
from ._exceptions import CutGraphError, XpgradTypeError, XpgradValueError
from ._vmap import vmap
from .autograd._batched import STACK, Batched, ConcretizationError
from .autograd._core import raw_dtype
from .autograd._tensor import Tensor, _wrap
from .functional import (
    _DEPTH,
    _as_tensor,
    _check_repeats,
    _is_array,
    _is_int_leaf,
    _jvp,
    _ns,
    _unwrap,
    _vjp,
    _zeros_like_any,
    check_argnums,
    check_fun,
)
from .ops._common import is_complex
from .ops.creation import asarray
from .tree_util import tree_flatten, tree_leaves, tree_map, tree_structure

__all__ = ["hessian", "jacfwd", "jacobian", "jacrev"]


def jacobian(
    f: Callable[..., Any],
    argnums: int | Sequence[int] = 0,
    mode: str = "rev",
    has_aux: bool = False,
    holomorphic: bool = False,
    allow_int: bool = False,
    *,
    chunk_size: int | None = None,
) -> Callable[..., Any]:
    """Make a function returning the Jacobian of ``f`` with respect to ``args[argnums]``.

    For an output of shape ``S`` and an argument of shape ``T`` the Jacobian has shape
    ``S + T`` (as in JAX); for pytrees it is nested: output structure, then (a tuple
    over ``argnums`` when a sequence, then) argument structure.

    As under [`xpgrad.grad`][xpgrad.functional.grad], the positional arguments not in ``argnums`` are
    constants (raw arrays among them reach ``f`` as constant Tensors, so ``f`` may take
    its namespace from any of them), and each block comes back as its argument's type:
    a Tensor for a Tensor, the caller's array for a raw array.

    Args:
        f: a function of arrays returning an array or a list/tuple/dict of arrays.
        argnums: an int, or a sequence of ints.
        mode: ``"rev"`` (one forward pass, then one batched backward pass over every
            output element; best for few outputs) or ``"fwd"`` (one batched forward pass
            over every input element; best for few inputs).
        has_aux: ``f`` returns ``(out, aux)``; the result is ``(jacobian, aux)``.
        holomorphic: ``f`` is complex-differentiable; allows complex inputs in
            ``"fwd"`` mode and complex outputs in ``"rev"`` mode, and gives the plain
            derivative ``df/dz`` in both (as in JAX).
        allow_int: accept integer and bool arguments (leaves) in ``argnums``, as
            ``jax.jacrev``: their blocks are zeros of shape ``S + T`` in the argument's
            own integer dtype (as JAX returns them). Without it they raise.
        chunk_size: push at most this many basis vectors through at once (less memory,
            more passes), as ``torch.func.jacrev``'s ``chunk_size``.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> f = lambda x: x[:2] * x[1:]
        >>> xg.jacobian(f)(np.array([1.0, 2.0, 3.0]))
        array([[2., 1., 0.],
               [0., 3., 2.]])
        >>> xg.jacfwd(f)(np.array([1.0, 2.0, 3.0]))
        array([[2., 1., 0.],
               [0., 3., 2.]])
    """
    if mode not in ("rev", "fwd"):
        msg = f"jacobian: mode must be 'rev' or 'fwd', got {mode!r}"
        raise XpgradValueError(msg)
    return _jacobian(f, argnums, mode, has_aux, holomorphic, "jacrev" if mode == "rev" else "jacfwd", chunk_size,
                     allow_int)


def _jacobian(f: Callable[..., Any], argnums: int | Sequence[int], mode: str, has_aux: bool, holomorphic: bool,
              name: str, chunk_size: int | None = None, allow_int: bool = False) -> Callable[..., Any]:
    """[`jacobian`][xpgrad.jacobian], with ``name`` (the transform the user called) in error messages."""
    check_fun(f, name)
    single = isinstance(argnums, int)
    nums = check_argnums(argnums, name)
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1):
        msg = f"{name}: chunk_size must be a positive int, got {chunk_size!r}"
        raise XpgradValueError(msg)

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for n in nums:
            if not -len(args) <= n < len(args):
                msg = f"{name}: argnums {argnums!r} out of range for {len(args)} positional arguments"
                raise XpgradValueError(msg)
        idx = [n % len(args) for n in nums]
        _check_repeats(idx, argnums, name)
        top = _DEPTH.get() == 0 and not STACK.get()  # (inside a transform, results stay Tensors)
        # the arguments not differentiated: raw arrays become constant Tensors, as under grad
        # (code that takes its namespace from them then records on the differentiated ones)
        const = [a if k in idx else tree_map(_as_tensor, a) for k, a in enumerate(args)]

        def g(*diff: Any) -> Any:
            full = list(const)
            for i, d in zip(idx, diff):
                full[i] = d
            return f(*full, **kwargs)

        fname = getattr(f, "__name__", "f")
        g.__name__ = fname  # (messages name the user's function)
        diff_args = [args[i] for i in idx]
        for k, a in zip(idx, diff_args):  # (refused here, where argument k is known by its position in args)
            for leaf in tree_leaves(a):
                if not allow_int and _is_int_leaf(leaf):
                    dt = f"is a Python {type(leaf).__name__}" if isinstance(leaf, (bool, int)) else \
                        f"has dtype {dtype_name(raw_dtype(leaf) if isinstance(leaf, Tensor) else leaf.dtype)}"
                    msg = (f"{name}: argument {k} {dt}; only floating-point and complex arguments can be "
                           "differentiated (cast it, or leave it out of argnums)")
                    raise XpgradTypeError(msg)
        # (a Python float or complex: a 0-d array, where the arguments' first floating array lives, of its
        # dtype, as JAX's weak types; its block is an array too)
        like = next((raw_array(x) for x in tree_leaves(list(args)) if hasattr(x, "shape") and not _is_int_leaf(x)), None)
        diff_args = [tree_map(lambda x: _scalar_leaf(x, like), a) for a in diff_args]
        ints = [_is_int_leaf(x) for x in tree_leaves(diff_args)] if allow_int else []
        g_diff, d_args = g, diff_args
        if any(ints):  # integer leaves ride along as constants: differentiate the float ones alone
            leaves, tdef = tree_flatten(diff_args)

            def g_diff(*floats: Any) -> Any:
                it = iter(floats)
                full = [_as_tensor(x) if i else next(it) for x, i in zip(leaves, ints)]
                return g(*tdef.unflatten(full))

            g_diff.__name__ = fname
            d_args = [x for x, i in zip(leaves, ints) if not i]
        try:
            if mode == "rev":
                blocks, out, aux = _jacrev(g_diff, d_args, has_aux, holomorphic, name, chunk_size)
            else:
                blocks, out, aux = _jacfwd(g_diff, d_args, has_aux, holomorphic, name, chunk_size)
        except ConcretizationError as e:
            msg = (
                f"{name}: {fname} converted a value it differentiates to a Python value ({e}); {name} "
                f"evaluates {fname} on the whole basis of directions at once (vmap), so that value has no "
                "single Python value: keep the computation in array functions"
            )
            raise CutGraphError(msg) from e
        if any(ints):
            out_leaves = tree_leaves(out)
            blocks = [_with_int_blocks(o, blks, tree_leaves(diff_args), ints) for o, blks in zip(out_leaves, blocks)]
        if top:  # as grad: a Tensor argument gets Tensor blocks, a raw array raw ones
            in_leaves = tree_leaves(diff_args)
            blocks = [[_like_input(x, blk) for x, blk in zip(in_leaves, blks)] for blks in blocks]
        rows = []
        for oi in range(len(blocks)):
            row = list(blocks[oi])
            per_arg = []
            for tree in diff_args:
                n = len(tree_leaves(tree))
                per_arg.append(tree_structure(tree).unflatten(row[:n]))
                row = row[n:]
            rows.append(per_arg[0] if single else tuple(per_arg))
        result = tree_structure(out).unflatten(rows)
        return (result, aux) if has_aux else result

    return wrapper


def jacrev(f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False, *, chunk_size: int | None = None) -> Callable[..., Any]:
    """``jacobian(f, argnums, mode="rev")``: one forward pass, one batched backward pass.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.jacrev(lambda x: xg.sin(x))(np.array([0.0, 0.0]))
        array([[1., 0.],
               [0., 1.]])
    """
    return jacobian(f, argnums, mode="rev", has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int,
                    chunk_size=chunk_size)


def jacfwd(f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, *, chunk_size: int | None = None) -> Callable[..., Any]:
    """``jacobian(f, argnums, mode="fwd")``: one batched forward pass over the input basis.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.jacfwd(lambda x: xg.sum(x * x))(np.array([1.0, 2.0]))
        array([2., 4.])
    """
    return jacobian(f, argnums, mode="fwd", has_aux=has_aux, holomorphic=holomorphic, chunk_size=chunk_size)


def hessian(f: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False, *, chunk_size: int | None = None) -> Callable[..., Any]:
    """Make a function returning the Hessian of scalar-valued ``f``: forward over reverse,
    ``jacfwd(jacrev(f))``, in one batched pass over the input basis.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> xg.hessian(lambda x: xg.sum(x ** 3))(np.array([1.0, 2.0]))
        array([[ 6.,  0.],
               [ 0., 12.]])
    """
    inner = _jacobian(f, argnums, "rev", has_aux, holomorphic, "hessian")
    return _jacobian(inner, argnums, "fwd", has_aux, holomorphic, "hessian", chunk_size)


def _with_int_blocks(o: Any, blks: list[Any], leaves: list[Any], ints: list[bool]) -> list[Any]:
    """The blocks of output ``o`` over all input ``leaves``: zeros (the leaf's dtype, shape
    ``o.shape + x.shape``, as ``jax.jacrev(allow_int=True)``) for the integer ones."""
    it = iter(blks)
    out = []
    for x, i in zip(leaves, ints):
        if not i:
            out.append(next(it))
            continue
        raw = raw_array(x) if hasattr(x, "shape") else raw_array(o)
        xp = backend_namespace(raw)
        dt = raw.dtype if hasattr(x, "shape") else (xp.bool if isinstance(x, bool) else xp.int64)
        shape = (*tuple(o.shape), *tuple(getattr(x, "shape", ())))
        z = xp.zeros(shape, dtype=dt, device=array_api_compat.device(raw))
        out.append(_wrap(z) if isinstance(o, Tensor) or isinstance(x, Tensor) else z)
    return out


def _scalar_leaf(x: Any, like: Any) -> Any:
    """A Python float or complex argument as a 0-d array: of ``like``'s library, device and dtype (a
    complex number into a real one: its library's complex dtype), else of the policy's; anything else as it is."""
    if not isinstance(x, (float, complex)):
        return x
    if like is None:
        return asarray(x).data
    xp = backend_namespace(like)
    dt = like.dtype
    if isinstance(x, complex) and not is_complex(like):
        dt = xp.complex128 if dtype_name(dt) == "float64" else xp.complex64
    return xp.asarray(x, dtype=dt, device=array_api_compat.device(like))


def _like_input(x: Any, blk: Any) -> Any:
    """Jacobian block ``blk`` of input leaf ``x`` at top level: a Tensor (that does not require grad) for a
    Tensor input, the backend array for a raw one (as [`xpgrad.grad`][xpgrad.functional.grad] returns gradients)."""
    if isinstance(x, Tensor):  # (no graph, as grad's result at top level: an input that requires grad recorded one)
        return _wrap(blk.data) if isinstance(blk, Tensor) and (blk._node is not None or blk._fw) else (
            blk if isinstance(blk, Tensor) else _wrap(blk))
    return blk.data if type(blk) is Tensor else blk


def _size(x: Any) -> int:
    n = 1
    for s in x.shape:
        n *= int(s)
    return n


def _basis(leaves: list[Any]) -> list[Any]:
    """One batch of one-hot arrays per leaf: row ``k`` of the identity over all the leaves'
    elements, cut and shaped like each leaf (the leaf's namespace, dtype and device)."""
    total = sum(_size(x) for x in leaves)
    out = []
    off = 0
    for x in leaves:
        raw = raw_array(x)
        xp = backend_namespace(raw)
        n = _size(x)
        eye = xp.eye(total, n, k=-off, dtype=raw.dtype, device=array_api_compat.device(raw))
        out.append(xp.reshape(eye, (total, *tuple(x.shape))))
        off += n
    return out


def _rows(g: Any, off: int, n: int, shape: tuple[int, ...]) -> Any:
    """Rows ``off:off + n`` of a batched result ``g``, shaped ``shape``."""
    ns = _ns(g)
    return ns.reshape(g[off:off + n, ...], shape)


def _empty_block(o: Any, x: Any) -> Any:
    """A zero-size Jacobian block of shape ``o.shape + x.shape``."""
    raw = raw_array(x)
    xp = backend_namespace(raw)
    z = xp.zeros((*tuple(o.shape), *tuple(x.shape)), dtype=raw.dtype, device=array_api_compat.device(raw))
    return _wrap(z) if isinstance(o, Tensor) or isinstance(x, Tensor) else z


def _check_complex(leaves: list[Any], holomorphic: bool, name: str, what: str) -> None:
    if not holomorphic and any(hasattr(a, "dtype") and is_complex(a) for a in leaves):
        msg = (
            f"{name}: complex {what} need holomorphic=True (the Jacobian of a non-holomorphic function "
            "is not a complex matrix); split real and imaginary parts otherwise"
        )
        raise XpgradTypeError(msg)


def _conj(g: Any) -> Any:
    return _ns(g).conj(g)


def _jacrev(g: Callable[..., Any], diff_args: list[Any], has_aux: bool, holomorphic: bool, name: str,
            chunk_size: int | None) -> tuple[list[list[Any]], Any, Any]:
    res = _vjp(g, diff_args, has_aux, name)
    out, pull = res[0], res[1]
    aux = res[2] if has_aux else None
    out_leaves, out_def = tree_flatten(out)
    _check_complex(out_leaves, holomorphic, name, "outputs")
    in_leaves = tree_leaves(diff_args)
    total = sum(_size(o) for o in out_leaves)
    if total == 0:
        return [[_empty_block(o, x) for x in in_leaves] for o in out_leaves], out, aux
    if total == 1:  # one output element (a gradient): one plain backward pass
        ones = [b[0] for b in _basis(out_leaves)]
        gs = [_ns(x).reshape(gk, (1, *tuple(x.shape))) for gk, x in zip(tree_leaves(pull(out_def.unflatten(ones))), in_leaves)]
    else:
        gs = tree_leaves(vmap(lambda *cts: pull(out_def.unflatten(list(cts))), chunk_size=chunk_size,
                                   randomness="same")(*_basis(out_leaves)))
    if holomorphic:
        gs = [_conj(gk) for gk in gs]
    blocks = []
    off = 0
    for o in out_leaves:
        n = _size(o)
        blocks.append([_rows(gk, off, n, (*tuple(o.shape), *tuple(x.shape))) if n else _empty_block(o, x)
                       for gk, x in zip(gs, in_leaves)])
        off += n
    return blocks, out, aux


def _aux_leaf(a: Any, raw_in: bool) -> Any:
    """An aux leaf as ``jvp`` returns it: raw for the caller's raw arrays, a Tensor otherwise."""
    if raw_in:
        return _unwrap(a)
    return _wrap(a) if _is_array(a) and not isinstance(a, Tensor) else a


def _jacfwd(g: Callable[..., Any], diff_args: list[Any], has_aux: bool, holomorphic: bool, name: str,
            chunk_size: int | None) -> tuple[list[list[Any]], Any, Any]:
    in_leaves, in_def = tree_flatten(diff_args)
    _check_complex(in_leaves, holomorphic, name, "inputs")
    total = sum(_size(x) for x in in_leaves)
    if total == 0:  # the output's structure (and aux): one plain evaluation
        zeros = [_zeros_like_any(x) for x in in_leaves]
        res = _jvp(g, tuple(diff_args), tuple(in_def.unflatten(zeros)), has_aux, name)
        out, aux = res[0], (res[2] if has_aux else None)
        return [[_empty_block(o, x) for x in in_leaves] for o in tree_leaves(out)], out, aux
    raw_in = _DEPTH.get() == 0 and not STACK.get() and not any(isinstance(x, Tensor) for x in in_leaves)
    aux_box: list[Any] = []

    def push(*tans: Any) -> Any:
        # the primals stay unbatched along this vmap's level: f's primal computation runs
        # once, and only the tangents are batched (as jax.linearize pushes them)
        STACK.get()[-1].tangents_only = True  # (see Level)
        r = _jvp(g, tuple(diff_args), tuple(in_def.unflatten(list(tans))), has_aux, name, True)
        if not has_aux:
            return r[1], r[0], []
        leaves, tdef = tree_flatten(r[2])
        if not aux_box:  # (the first chunk's: with chunk_size, f runs once a chunk)
            aux_box.append((leaves, tdef))
        return r[1], r[0], [a for a in leaves if isinstance(a, Batched)]  # (these leave through vmap)

    # (one function for every direction: a random draw inside is shared by them)
    tan_out, prim_out, aux_out = vmap(push, chunk_size=chunk_size, randomness="same")(*_basis(in_leaves))
    # (the same for every basis vector: the first one's)
    out = tree_structure(prim_out).unflatten([p[0, ...] for p in tree_leaves(prim_out)])
    aux = None
    if has_aux:
        leaves, tdef = aux_box[0]
        it = iter(aux_out)
        aux = tdef.unflatten([_aux_leaf(next(it)[0, ...] if isinstance(a, Batched) else a, raw_in) for a in leaves])
    blocks = []
    for o, t in zip(tree_leaves(out), tree_leaves(tan_out)):
        # t: (total, *o.shape) -> (*o.shape, total) -> per input leaf (*o.shape, *x.shape)
        ns = _ns(t)
        tt = ns.moveaxis(t, 0, -1) if t.ndim > 1 else t
        row = []
        off = 0
        for x in in_leaves:
            n = _size(x)
            piece = tt[..., off:off + n]
            row.append(ns.reshape(piece, (*tuple(o.shape), *tuple(x.shape))))
            off += n
        blocks.append(row)
    return blocks, out, aux
