"""``Optimizer``: parameter groups, per-parameter state, ``zero_grad`` and ``state_dict``.

A subclass implements ``_update(group, p, grad, state)``, called under
``no_grad`` for each parameter with a gradient. Updates use Tensor in-place
operators (``p -= lr * d``), which mutate the parameter's own backend array where
the library allows it and rebind it functionally where it does not (JAX), and bump
the version counter either way.

On a lazy library (Dask) an update computes nothing: the new parameter is a graph
built on the old one, and a loop of ``n`` steps would cost ``O(n^2)``. So ``step()``
ends, every ``persist_every`` steps (default: every step), with [`Optimizer.persist`][xpgrad.optim.Optimizer.persist]:
one ``dask.persist`` of the parameters, their gradients, the optimizer's state and the
running statistics updated since (batch normalization), which computes the step and
leaves graphs that do not grow with the number of steps. Which arrays are lazy is
asked in one place, `xpgrad._lazy`.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import array_api_compat
import numpy as np

from .. import _lazy
from .._dispatch import backend_namespace
from .._dtypes import is_float
from .._exceptions import XpgradTypeError, XpgradValueError
from .._io import move_array
from ..autograd._grad_mode import enable_grad, no_grad
from ..autograd._tensor import Tensor
from ..nn.module import _zero_grad

__all__ = ["Optimizer"]


def _python_number(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, tuple) and any(isinstance(e, np.generic) for e in v):
        return tuple(_python_number(e) for e in v)
    return v


def _plain_numbers(group: dict[str, Any]) -> dict[str, Any]:
    """``group`` with its NumPy scalars (``lr=np.float32(0.1)``, ``betas``) read as Python numbers,
    so that the update keeps Python's float semantics on every backend (no float32 or float64
    scalar promoting the parameter, no NumPy scalar next to another library's array); the group
    itself is left as the user set it."""
    if not any(isinstance(v, (np.generic, tuple)) for v in group.values()):
        return group
    return {k: v if k == "params" else _python_number(v) for k, v in group.items()}


class Optimizer:
    """Base class of the optimizers.

    Args:
        params: an iterable of Parameters (Tensors with ``requires_grad``), or of
            dicts ``{"params": [...], "lr": ...}`` (parameter groups with their own options).
        defaults: the options a group takes when it does not set them.
        persist_every: on a lazy library (Dask), call `persist` after every
            ``persist_every``-th ``step()``, so that the graphs of the parameters and
            of the state do not grow with the number of steps (each persist computes
            the steps since the last one). 1 (the default) persists after each step;
            ``None`` never does, and leaves every step lazy (the graphs then grow by
            one step each: persist yourself, or call `persist`). No effect on
            eager libraries (NumPy, PyTorch, JAX, CuPy).

    Examples:
        >>> import xpgrad as xg
        >>> w = xg.nn.Parameter(xg.asarray([1.0, 2.0]))
        >>> opt = xg.optim.SGD([w], lr=0.1, persist_every=10)  # on Dask: persist every 10 steps
        >>> opt.persist_every
        10
    """

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any], *, persist_every: int | None = 1) -> None:
        if persist_every is not None and (not isinstance(persist_every, int) or isinstance(persist_every, bool)
                                          or persist_every < 1):
            msg = f"{type(self).__name__}: persist_every must be a positive int or None, got {persist_every!r}"
            raise XpgradValueError(msg)
        self.persist_every = persist_every
        self._unpersisted_steps = 0
        self._steps = 0  # step() calls made (xg.jit counts those a traced call makes)
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[int, dict[str, Any]] = {}  # keyed by id(param)
        items = list(params) if not isinstance(params, Tensor) else [params]
        if not items:
            msg = f"{type(self).__name__}: got an empty parameter list"
            raise XpgradValueError(msg)
        groups: list[Any] = items if isinstance(items[0], Mapping) else [{"params": items}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: Mapping[str, Any]) -> None:
        """Add a group of parameters with its own options (e.g. a smaller ``lr`` for a backbone)."""
        name = type(self).__name__
        if not isinstance(group, Mapping) or "params" not in group:
            msg = f"{name}: a parameter group must be a dict with a 'params' entry, got {group!r}"
            raise XpgradTypeError(msg)
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                msg = f"{name}: parameters must be Tensors, got {type(p).__name__}"
                raise XpgradTypeError(msg)
            if not p.is_leaf:
                msg = f"{name}: can only optimize leaf tensors (Parameters), got a tensor with grad_fn"
                raise XpgradValueError(msg)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params) or len({id(p) for p in params}) != len(params):
            msg = f"{name}: a parameter appears in more than one group (or twice in one)"
            raise XpgradValueError(msg)
        unknown = set(group) - set(self.defaults) - {"params", "initial_lr", "max_lr", "min_lr", "base_momentum",
                                                      "max_momentum"}
        if unknown:
            msg = f"{name}: unknown option(s) {sorted(unknown)} in a parameter group; known: {sorted(self.defaults)}"
            raise XpgradValueError(msg)
        full = dict(self.defaults)
        full.update(group)
        full["params"] = params
        self._check_group(full)
        self.param_groups.append(full)

    def _check_group(self, group: dict[str, Any]) -> None:
        lr = group.get("lr")
        if lr is not None and (not isinstance(lr, numbers.Real) or lr < 0):
            msg = f"{type(self).__name__}: lr must be a non-negative number, got {lr!r}"
            raise XpgradValueError(msg)

    # ---------------------------------------- xg.jit's view of an optimizer: the protocol xpgrad._jit.JitStateful
    def _jit_state(self) -> tuple[Any, list[Tensor]]:
        """(static part of xg.jit's signature, the tensors a call reads and may rebind).

        The hyperparameters are static (a new momentum traces again), except the learning
        rate: it and the state's numbers (Adam's step) are 0-d arrays of the program, so that
        a schedule or the step count does not trace again; the state's arrays are read and
        written back by each call.
        """
        groups = tuple(tuple((k, _frozen(v)) for k, v in g.items() if k not in ("params", "lr")) for g in self.param_groups)
        tensors: list[Tensor] = [p for g in self.param_groups for p in g["params"]]
        for st in self.state.values():
            tensors.extend(v for v in st.values() if isinstance(v, Tensor))
        return (type(self), groups, self._jit_structure()), tensors

    def _jit_structure(self) -> Any:
        # (an empty entry, SGD's without momentum after its first step, holds nothing a call reads: state_dict omits it too)
        return tuple((k, tuple((n, "Tensor" if isinstance(v, Tensor) else "number") for n, v in st.items()))
                     for k, st in self.state.items() if st)

    def _jit_numbers(self) -> list[Any]:
        out: list[Any] = []
        for g in self.param_groups:
            # (a NumPy scalar learning rate, np.float32(0.1) or a float32 schedule's, is the Python number
            # eager step() reads (_plain_numbers): the program's float64 input, its dtype plays no part)
            lr = g.get("lr")
            if g["params"] and isinstance(lr, (int, float, np.integer, np.floating)) and not isinstance(lr, bool):
                out.append((g, "lr", g["params"][0]))
            for p in g["params"]:
                st = self.state.get(id(p))
                if st:
                    out.extend((st, n, p) for n, v in st.items()
                               if not isinstance(v, (Tensor, bool)) and (isinstance(v, (int, float)) or hasattr(v, "shape")))
        return out

    def _jit_count(self) -> int:
        return self._steps

    def _jit_replayed(self, count: int) -> None:
        """After a replayed xg.jit call that made ``count`` steps: Dask's persist, as step() does."""
        self._steps += count
        if self.persist_every is not None and _lazy.loaded():
            self._unpersisted_steps += count
            if self._unpersisted_steps >= self.persist_every:
                self.persist()

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (default) or to zeros."""
        for g in self.param_groups:
            for p in g["params"]:
                _zero_grad(p, set_to_none)

    def step(self, closure: Any = None) -> Any:
        """Update every parameter that has a gradient; ``closure`` re-evaluates the loss first.

        On Dask, every ``persist_every``-th step ends with [`persist`][xpgrad.optim.Optimizer.persist] (with the
        loss that ``closure`` returned, so reading it afterwards costs nothing).
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                hp = _plain_numbers(group)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad
                    if grad.requires_grad:
                        grad = grad.detach()
                    self._update(hp, p, grad, self.state.setdefault(id(p), {}))
        self._steps += 1
        if self.persist_every is not None and _lazy.loaded():
            self._unpersisted_steps += 1
            if self._unpersisted_steps >= self.persist_every:
                self.persist(loss)
        return loss

    def persist(self, *extra: Any) -> int:
        """Persist the lazy (Dask) arrays a training loop carries from step to step; return how many.

        One ``dask.persist`` call takes the parameters, their gradients, the
        optimizer's state, the running statistics that batch normalization updated
        in this thread since the last persist, and the Tensors in ``extra`` (a loss
        to log, say); work they share is done once. Each Tensor keeps its identity
        and its version counter (its value does not change); its ``data`` becomes
        the persisted array, whose graph is only its chunks. On the local schedulers
        this computes; under ``dask.distributed`` it submits the work to the cluster
        and returns at once. Arrays of eager libraries are left alone (0 on NumPy).
        ``step()`` calls this every ``persist_every`` steps.

        Examples:
            >>> import xpgrad as xg
            >>> w = xg.nn.Parameter(xg.asarray([1.0, 2.0]))
            >>> opt = xg.optim.SGD([w], lr=0.1, persist_every=None)
            >>> (w * w).sum().backward(); opt.step()
            >>> opt.persist()  # NumPy arrays are not lazy: nothing to persist
            0
        """
        self._unpersisted_steps = 0
        if not _lazy.loaded():
            return 0
        # (holder, key, array): a Tensor's data (key None), or an entry of a state dict
        targets: list[tuple[Any, Any, Any]] = []
        seen: set[int] = set()

        def add(t: Any) -> None:
            if isinstance(t, Tensor) and id(t) not in seen and _lazy.is_lazy(t.data):
                seen.add(id(t))
                targets.append((t, None, t.data))

        for group in self.param_groups:
            for p in group["params"]:
                add(p)
                add(p.grad)
        for st in self.state.values():
            for k, v in st.items():
                if isinstance(v, Tensor):
                    add(v)
                elif _lazy.is_lazy(v):
                    targets.append((st, k, v))
        for t in (*_lazy.take_noted(), *extra):
            add(t)
        if not targets:
            return 0
        done = _lazy.persist_arrays([a for _, _, a in targets])
        for (holder, key, old), new in zip(targets, done):
            # rebind only what nothing changed meanwhile (another thread's update wins)
            if key is None:
                if holder.data is old:
                    holder.data = new
            elif holder.get(key) is old:
                holder[key] = new
        return len(targets)

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor, state: dict[str, Any]) -> None:
        msg = f"{type(self).__name__}: an optimizer must define _update(group, param, grad, state)"
        raise XpgradTypeError(msg)

    @staticmethod
    def _zeros_like(p: Tensor) -> Tensor:
        return Tensor(backend_namespace(p.data).zeros_like(p.data))

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}`` (PyTorch's layout).

        Parameters are numbered in group order; the state's tensors are shared, not copied.
        """
        index: dict[int, int] = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            ids = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {index[k]: dict(v) for k, v in self.state.items() if k in index and v}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Load options and state saved by [`state_dict`][xpgrad.optim.Optimizer.state_dict] (state tensors move to their parameters).

        Raises:
            XpgradValueError: the groups or their sizes differ, or a state array's shape is not
                its parameter's; nothing is changed.
        """
        name = type(self).__name__
        if not isinstance(state_dict, Mapping) or "state" not in state_dict or "param_groups" not in state_dict:
            msg = f"{name}.load_state_dict: expected a dict with 'state' and 'param_groups'"
            raise XpgradValueError(msg)
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            msg = (f"{name}.load_state_dict: the state has {len(saved_groups)} parameter groups, "
                   f"the optimizer {len(self.param_groups)}")
            raise XpgradValueError(msg)
        for i, (sg, g) in enumerate(zip(saved_groups, self.param_groups, strict=True)):
            if len(sg["params"]) != len(g["params"]):
                msg = (f"{name}.load_state_dict: group {i} has {len(sg['params'])} parameters in the state, "
                       f"{len(g['params'])} in the optimizer")
                raise XpgradValueError(msg)
        id_map = {}
        for sg, g in zip(saved_groups, self.param_groups, strict=True):
            for k, p in zip(sg["params"], g["params"], strict=True):
                id_map[int(k)] = p
        new_state: dict[int, dict[str, Any]] = {}
        for k, st in state_dict["state"].items():
            p = id_map.get(int(k))
            if p is None:
                msg = f"{name}.load_state_dict: the state names parameter {k}, which no group holds"
                raise XpgradValueError(msg)
            entry = {}
            for key, v in st.items():
                shape = tuple(v.shape) if hasattr(v, "shape") else ()
                if shape and shape != tuple(p.shape):  # (a 0-d entry is a number: Adam's step)
                    msg = (f"{name}.load_state_dict: the state's {key!r} of parameter {k} has shape {shape}, "
                           f"the parameter {tuple(p.shape)}")
                    raise XpgradValueError(msg)
                if hasattr(v, "shape") and hasattr(v, "dtype"):
                    dt = p.data.dtype if _is_floating(v) else None
                    v = move_array(v, backend_namespace(p.data), array_api_compat.device(p.data), dt, copy=True)
                    if dt is not None or len(v.shape):
                        v = Tensor(v)
                    # (else a count, Adam's step, that xg.jit wrote back as a 0-d array: a number of the state)
                elif isinstance(v, Tensor):
                    v = v.detach()
                entry[key] = v
            new_state[id(p)] = entry
        new_groups = []
        for sg, g in zip(saved_groups, self.param_groups, strict=True):
            ng = copy.deepcopy({k: v for k, v in sg.items() if k != "params"})
            ng["params"] = g["params"]
            new_groups.append(ng)
        self.param_groups = new_groups
        self.state = new_state

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params")
        lines.append(")")
        return "\n".join(lines)


def _is_floating(v: Any) -> bool:
    return is_float((v.data if isinstance(v, Tensor) else v).dtype)


def _frozen(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_frozen(x) for x in v)
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v
