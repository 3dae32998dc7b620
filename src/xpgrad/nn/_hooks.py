"""Module hooks: removable handles, and what runs a module's full backward hooks."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from typing import Any, cast

from .. import _tracing
from .._dispatch import backend_namespace
from .._dtypes import dtype_name
from .._exceptions import XpgradTypeError, XpgradValueError
from ..autograd import _core
from ..autograd._core import Primitive
from ..autograd._engine import check_hook_result
from ..autograd._grad_mode import GRAD_ENABLED
from ..autograd._tensor import Tensor, _wrap

__all__ = ["BackwardHook", "RemovableHandle"]

_ids = itertools.count()


class RemovableHandle:
    """Returned by ``register_forward_hook`` and friends; ``remove()`` unregisters the hook.

    Usable as a context manager: the hook is removed when the block exits.
    """

    __slots__ = ("_table", "id")

    def __init__(self, table: dict[int, Any]) -> None:
        self._table = table
        self.id = next(_ids)

    def remove(self) -> None:
        self._table.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


# ---------------------------------------------------------------------------- full backward hooks
def _backward_hook_vjp(xp: Any, g: Any, ans: Any, i: int, *args: Any) -> Any:
    return g[i] if type(g) is tuple else g  # (one output: the engine hands its gradient as it is)


#: the identity a Module's backward hooks hang on (torch's BackwardHookFunction): one node
#: for the call's inputs, one for its outputs; their gradients pass through unchanged
_BACKWARD_HOOK = Primitive("BackwardHookFunction", lambda xp, *xs: xs, save=(), multi=True, chapter="internal")
_BACKWARD_HOOK.defvjp(rest=_backward_hook_vjp)


def _name(hook: Any) -> str:
    return getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or type(hook).__name__


class BackwardHook:
    """The full backward hooks of one call of a module (``torch.utils.hooks.BackwardHook``).

    The call's positional Tensor arguments that require grad go through one identity node
    and its Tensor outputs through another. The outputs' node sees ``grad_output`` and runs
    the backward pre-hooks; the inputs' node sees ``grad_input`` and runs the full backward
    hooks with both. Each may return replacements. The hooks are those registered when the
    module was called (as in torch), and fire once per backward pass through the call.
    """

    __slots__ = ("grad_outputs", "hooks", "input_idx", "module", "n_inputs", "n_outputs", "output_idx",
                 "output_meta", "pre_hooks")

    def __init__(self, module: Any, hooks: list[Callable[..., Any]], pre_hooks: list[Callable[..., Any]]) -> None:
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.grad_outputs: tuple[Any, ...] | None = None
        self.n_inputs = 0
        self.input_idx: list[int] | None = None
        self.n_outputs = 0
        self.output_idx: list[int] | None = None
        self.output_meta: list[tuple[tuple[Any, ...], Any]] = []

    # -------------------------------------------------------------- forward: the two identity nodes
    def setup_input(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """``args`` with its Tensors that require grad replaced by the inputs' node's outputs."""
        self.n_inputs = len(args)
        if not self.hooks:  # (pre-hooks only: nothing to see at the inputs)
            return args
        new, idx = self._through(args, self._input_hook)
        self.input_idx = idx
        return new

    def setup_output(self, out: Any) -> Any:
        """The forward's result (a Tensor, a tuple, anything) with its Tensors that require grad
        replaced by the outputs' node's outputs."""
        one = not isinstance(out, tuple)
        outs = (out,) if one else out
        self.n_outputs = len(outs)
        new, idx = self._through(outs, self._output_hook)
        if idx is None:
            return out
        self.output_idx = idx
        self.output_meta = [(tuple(outs[i].shape), outs[i].data.dtype) for i in idx]
        if one:
            return new[0]
        return new if type(out) is tuple else type(out)(*new)

    def _through(self, args: tuple[Any, ...], hook: Callable[..., Any]) -> tuple[tuple[Any, ...], list[int] | None]:
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a._requires_grad]
        if not idx or not GRAD_ENABLED.get():
            return args, None
        ts = [args[i] for i in idx]
        who = f"{type(self.module).__name__}: its backward hooks (register_full_backward_hook, register_full_backward_pre_hook)"
        if _tracing.ACTIVE[0] and _tracing.TRACE.get() is not None:
            msg = (f"{who} cannot run inside xg.jit: a jitted call replays the recorded array operations, not "
                   "Python hooks, so they would run once, on traced values, at the trace; call the module "
                   "outside xg.jit, or remove the hooks (handle.remove()) before jitting")
            raise XpgradValueError(msg)
        if any(isinstance(t, _core.Batched) for t in ts):
            msg = f"{who} cannot run inside xg.vmap (as torch.func.vmap refuses them); remove the hooks (handle.remove()) first"
            raise XpgradValueError(msg)
        datas = [t.data for t in ts]
        outs = _core._record(_BACKWARD_HOOK, backend_namespace(*datas), ts, datas, {}, tuple(datas))
        node = outs[0]._node
        node.hooks = {-1: [hook]}
        for t, o in zip(ts, outs):
            o._version = t._version  # (the same memory: a write into one is seen by the checks of the other)
            o._fw = t._fw
        new = list(args)
        for i, o in zip(idx, outs):
            new[i] = o
        return tuple(new), idx

    # -------------------------------------------------------------- backward: the nodes' hooks
    def _output_hook(self, buf: list[Any], create_graph: bool) -> list[Any]:
        idx = cast("list[int]", self.output_idx)
        go = _pack(idx, buf, self.n_outputs, create_graph)
        for hook in self.pre_hooks:
            r = hook(self.module, go)
            if r is not None:
                go = self._replaced(hook, "backward pre-hook", "grad_output", r, go, idx, self.output_meta, create_graph)
        self.grad_outputs = go
        if self.input_idx is None and self.hooks:
            # no input requires grad: the full hooks fire here, with grad_input all None (as torch)
            warnings.warn(f"{type(self.module).__name__}: a full backward hook fires with grad_input all None, as no "
                          "input of the module requires grad (torch warns the same)", UserWarning, stacklevel=2)
            none = (None,) * self.n_inputs
            for hook in self.hooks:
                r = hook(self.module, none, go)
                if r is not None and not (isinstance(r, tuple) and all(x is None for x in r)):
                    msg = (f"backward hook {_name(hook)} of {type(self.module).__name__}: no input of the module "
                           "requires grad, so the hook must return None (or None for every gradient)")
                    raise XpgradValueError(msg)
            self.grad_outputs = None
        return [_unwrap(go[i], create_graph) for i in idx]

    def _input_hook(self, buf: list[Any], create_graph: bool) -> list[Any]:
        go = self.grad_outputs
        if go is None:  # (the gradient reached the inputs without passing through the outputs)
            return buf
        idx = cast("list[int]", self.input_idx)
        gi = _pack(idx, buf, self.n_inputs, create_graph)
        for hook in self.hooks:
            r = hook(self.module, gi, go)
            if r is not None:
                gi = self._replaced(hook, "backward hook", "grad_input", r, gi, idx, None, create_graph)
        self.grad_outputs = None
        return [_unwrap(gi[i], create_graph) for i in idx]

    def _replaced(self, hook: Any, what: str, name: str, r: Any, old: tuple[Any, ...], idx: list[int],
                  meta: list[tuple[tuple[Any, ...], Any]] | None, create_graph: bool) -> tuple[Any, ...]:
        """A hook's replacement ``r`` of ``old``: as many entries, each None or like the gradient it replaces."""
        who = f"{what} {_name(hook)} of {type(self.module).__name__}"
        if not isinstance(r, (tuple, list)) or len(r) != len(old):
            got = f"{len(r)} entries" if isinstance(r, (tuple, list)) else type(r).__name__
            msg = f"{who} returned {got}; it must return None or a tuple of {len(old)} {name} entries (each None or a Tensor)"
            raise XpgradValueError(msg) if isinstance(r, (tuple, list)) else XpgradTypeError(msg)
        new = list(r)
        for k, i in enumerate(idx):
            v = new[i]
            if v is None:
                continue
            if old[i] is not None:
                check_hook_result(hook, v, old[i], what)
            elif meta is not None:  # (a gradient where the output had none: its shape and dtype)
                d = v.data if isinstance(v, Tensor) else v
                shape, dt = meta[k]
                if tuple(getattr(d, "shape", ())) != shape or getattr(d, "dtype", None) != dt:
                    msg = f"{who}: {name}[{i}] must have shape {shape} and dtype {dtype_name(dt)}, got {type(v).__name__}"
                    raise XpgradValueError(msg)
            if create_graph and not isinstance(v, Tensor):
                new[i] = _wrap(v)
        for i, v in enumerate(new):
            if i not in idx and v is not None:
                msg = f"{who}: {name}[{i}] must be None (that argument is no Tensor that requires grad), got {type(v).__name__}"
                raise XpgradValueError(msg)
        return tuple(new)


def _pack(idx: list[int], buf: list[Any], n: int, create_graph: bool) -> tuple[Any, ...]:
    """The hooks' view: one entry per argument (or output), Tensors, None where there is no gradient."""
    res: list[Any] = [None] * n
    for i, g in zip(idx, buf):
        if g is not None:
            res[i] = g if create_graph or isinstance(g, Tensor) else _wrap(g)
    return tuple(res)


def _unwrap(g: Any, create_graph: bool) -> Any:
    if g is None or create_graph:
        return g
    return g.data if isinstance(g, Tensor) else g
