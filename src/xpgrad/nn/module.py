"""``Module``: the base class of layers, PyTorch style.

Assigning a [`Parameter`][xpgrad.nn.Parameter] or a Module to an attribute registers it;
``register_buffer`` registers non-trained state (running statistics). From the
registry come ``parameters()``, ``state_dict()`` / ``load_state_dict()``,
``to(...)`` (move to another library, device or dtype), ``train()`` / ``eval()``
and the tree ``repr``. Calling a module runs its forward pre-hooks, ``forward``
and its forward hooks.
"""

from __future__ import annotations

import contextvars
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import array_api_compat

from .._backends import library_of, resolve_device
from .._dispatch import backend_namespace
from .._dtypes import DType, dtype_name, is_float
from .._exceptions import NamespaceMismatchError, XpgradTypeError, XpgradValueError
from .._io import move_array
from .._policy import _namespace_of
from ..autograd._grad_mode import no_grad
from ..autograd._tensor import Tensor
from ._hooks import BackwardHook, RemovableHandle
from .parameter import Parameter

__all__ = ["IncompatibleKeys", "Module", "functional_call"]

#: the substitutions of the functional_calls running in this context: id(module) -> (module, {attribute: value})
_OVERRIDES: contextvars.ContextVar[dict[int, tuple[Any, dict[str, Any]]] | None] = contextvars.ContextVar(
    "xpgrad_functional_call", default=None)


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` returns."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def _shape(t: Any) -> tuple[Any, ...]:
    return tuple((t.data if isinstance(t, Tensor) else t).shape)


def _is_raw(x: Any) -> bool:
    """Whether ``x`` is a (nested) Python list or tuple of numbers, not an array."""
    if not isinstance(x, (list, tuple)):
        return False
    while isinstance(x, (list, tuple)) and x:
        x = x[0]
    return isinstance(x, (list, tuple, bool, int, float, complex))


def _refuse_raw_input(module: Module, args: tuple[Any, ...], kwargs: dict[str, Any], err: BaseException) -> None:
    """Raise naming ``module`` where its forward failed on a Python list of numbers (``Linear(3, 2)([1.0, 2.0, 3.0])``).

    Run where forward raised, so a call that works pays nothing; torch says "linear(): argument
    'input' must be Tensor, not list", xpgrad's layers used to say "'list' object has no attribute 'shape'".
    A layer inside a model names the model, the module the user called.
    """
    said = str(err)
    for i, x in enumerate([*args, *kwargs.values()]):
        # only where the error is about the list ("'list' object has no attribute 'shape'", "got list",
        # "can't multiply sequence"): a forward's own bug next to a list argument keeps its error
        if _is_raw(x) and (type(x).__name__ in said or "sequence" in said):
            r = repr(x)
            r = r if len(r) <= 60 else r[:57] + "..."
            msg = (f"{_layer_name(module)}: {_argument(i, args, kwargs)} must be an array or an xpgrad Tensor, "
                   f"not a Python {type(x).__name__} {r}; convert it first with xg.asarray(...)")
            _raise_as_layer(XpgradTypeError(msg), err)


def _layer_name(module: Module) -> str:
    """``Linear(in_features=3, out_features=2, bias=True)``, or the class name where that is long or empty."""
    extra = module.extra_repr()
    return f"{type(module).__name__}({extra})" if extra and len(extra) <= 80 else type(module).__name__


def _argument(i: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return f"argument {i}" if i < len(args) else f"argument {list(kwargs)[i - len(args)]!r}"


def _raise_as_layer(new: Exception, err: BaseException) -> None:
    """Raise ``new``, chained to the backend's error (a layer inside a model: the model, the module called, says it)."""
    cause = err.__cause__ if getattr(err, "_xpgrad_as_layer", False) else err
    new._xpgrad_as_layer = True  # type: ignore[attr-defined]
    raise new from cause


def _refuse_other_library(module: Module, args: tuple[Any, ...], kwargs: dict[str, Any], err: BaseException) -> None:
    """Raise naming ``module`` and ``module.to(xp=...)`` where an input is of another library than its parameters.

    Run where forward raised a NamespaceMismatchError, whose text names the primitive deep inside
    (``matmul``), not the model or the cure.
    """
    first = next(iter([*module.parameters(), *module.buffers()]), None)
    if first is None:
        return
    own = library_of(backend_namespace(first.data))
    for i, x in enumerate([*args, *kwargs.values()]):
        data = x.data if isinstance(x, Tensor) else x
        if not hasattr(data, "shape"):
            continue
        try:
            lib = library_of(backend_namespace(data))
        except Exception:  # noqa: BLE001 - not an array of any library: not this refusal
            continue
        if lib != own:
            dev = getattr(data, "device", None)
            where = f", device={str(dev)!r}" if dev is not None and "cpu" not in str(dev).lower() else ""
            msg = (f"{_layer_name(module)}: its parameters are {own} arrays but {_argument(i, args, kwargs)} is a "
                   f"{lib} array (shape {tuple(data.shape)}); move the model first with "
                   f"model.to(xp={lib!r}{where}), or convert the input to {own}")
            _raise_as_layer(NamespaceMismatchError(msg), err)


class Module:
    """Base class of every layer and model.

    Subclasses set their parameters and submodules as attributes in ``__init__``
    (after calling ``super().__init__()``) and define ``forward``.

    Examples:
        >>> import xpgrad as xg
        >>> class Affine(xg.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.scale = xg.nn.Parameter(xg.ones(2))
        ...     def forward(self, x):
        ...         return x * self.scale
        >>> m = Affine()
        >>> [name for name, _ in m.named_parameters()]
        ['scale']
        >>> m(xg.asarray([1.0, 2.0]))
        Tensor([1., 2.], dtype=float64, device=cpu, grad_fn=<multiply>)
    """

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        msg = f"{type(self).__name__}: the module defines no forward()"
        raise XpgradTypeError(msg)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for hook in list(self._forward_pre_hooks.values()):
            res = hook(self, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
        d = self.__dict__
        bw = None
        if "_backward_hooks" in d or "_backward_pre_hooks" in d:  # (made at the first such hook: no call here)
            full, pre = d.get("_backward_hooks"), d.get("_backward_pre_hooks")
            if full or pre:  # (the hooks of this call: those registered now, as in torch)
                bw = BackwardHook(self, list((full or {}).values()), list((pre or {}).values()))
                args = bw.setup_input(args)
        try:
            out = self.forward(*args, **kwargs)
        except (AttributeError, TypeError) as e:  # a list, or another library's array: say it as the layer
            _refuse_raw_input(self, args, kwargs, e)
            if isinstance(e, NamespaceMismatchError):
                _refuse_other_library(self, args, kwargs, e)
            raise
        for hook in list(self._forward_hooks.values()):
            res = hook(self, args, out)
            if res is not None:
                out = res
        if bw is not None:
            out = bw.setup_output(out)
        return out

    # ------------------------------------------------------------------ registration
    def _check_ready(self, func: str) -> None:
        if "_parameters" not in self.__dict__:
            msg = f"{func}: call super().__init__() in {type(self).__name__}.__init__ before assigning attributes"
            raise XpgradTypeError(msg)

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if isinstance(value, Parameter):
            self._check_ready("__setattr__")
            self._remove_from(name, d["_buffers"], d["_modules"])
            d.pop(name, None)
            d["_parameters"][name] = value
        elif isinstance(value, Module):
            self._check_ready("__setattr__")
            self._remove_from(name, d["_parameters"], d["_buffers"])
            d.pop(name, None)
            d["_modules"][name] = value
        elif "_parameters" in d and name in d["_parameters"]:
            if value is not None:
                msg = (
                    f"{type(self).__name__}.{name}: cannot assign a {type(value).__name__} to a parameter; "
                    "assign an xpgrad.nn.Parameter or None"
                )
                raise XpgradTypeError(msg)
            d["_parameters"][name] = None
        elif "_modules" in d and name in d["_modules"]:
            if value is not None:
                msg = (f"{type(self).__name__}.{name}: cannot assign a {type(value).__name__} to a submodule; "
                       "assign a Module or None")
                raise XpgradTypeError(msg)
            d["_modules"][name] = None
        elif "_buffers" in d and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                msg = (f"{type(self).__name__}.{name}: cannot assign a {type(value).__name__} to a buffer; "
                       "assign a Tensor or None")
                raise XpgradTypeError(msg)
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name: str, *tables: dict[str, Any]) -> None:
        for t in tables:
            t.pop(name, None)

    def __getattr__(self, name: str) -> Any:
        ov = _OVERRIDES.get()
        if ov is not None:  # (inside functional_call)
            mine = ov.get(id(self))
            if mine is not None and name in mine[1]:
                return mine[1][name]
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            t = d.get(table)
            if t is not None and name in t:
                return t[name]
        msg = f"{type(self).__name__!r} object has no attribute {name!r}"
        raise AttributeError(msg)

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            t = d.get(table)
            if t is not None and name in t:
                del t[name]
                d["_non_persistent"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def _check_name(self, name: Any, func: str) -> None:
        self._check_ready(func)
        if not isinstance(name, str) or not name or "." in name:
            msg = f"{func}: the name must be a non-empty str without '.', got {name!r}"
            raise XpgradValueError(msg)
        if hasattr(type(self), name) or (name in self.__dict__ and name not in self._parameters):
            msg = f"{func}: attribute {name!r} already exists on {type(self).__name__}"
            raise XpgradValueError(msg)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register ``param`` (or None, a declared but absent parameter) under ``name``."""
        self._check_name(name, "register_parameter")
        if param is not None and not isinstance(param, Parameter):
            msg = f"register_parameter: {name!r} must be an xpgrad.nn.Parameter or None, got {type(param).__name__}"
            raise XpgradTypeError(msg)
        self._remove_from(name, self._buffers, self._modules)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Register a non-trained tensor (moved by ``to``; in ``state_dict`` when ``persistent``).

        Examples:
            >>> import xpgrad as xg
            >>> m = xg.nn.Module()
            >>> m.register_buffer("count", xg.zeros(1))
            >>> list(m.state_dict())
            ['count']
        """
        self._check_name(name, "register_buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            if hasattr(tensor, "shape") and hasattr(tensor, "dtype"):
                tensor = Tensor(tensor)
            else:
                msg = f"register_buffer: {name!r} must be a Tensor or None, got {type(tensor).__name__}"
                raise XpgradTypeError(msg)
        self._remove_from(name, self._parameters, self._modules)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register a submodule (or None) under ``name``."""
        self._check_ready("add_module")
        if not isinstance(name, str) or not name or "." in name:
            msg = f"add_module: the name must be a non-empty str without '.', got {name!r}"
            raise XpgradValueError(msg)
        if module is not None and not isinstance(module, Module):
            msg = f"add_module: {name!r} must be a Module or None, got {type(module).__name__}"
            raise XpgradTypeError(msg)
        self._remove_from(name, self._parameters, self._buffers)
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The submodule at a dotted path such as ``"encoder.0"`` (``""`` is self)."""
        mod: Module = self
        if target == "":
            return mod
        for part in target.split("."):
            sub = mod._modules.get(part)
            if sub is None:
                msg = f"get_submodule: {type(mod).__name__} has no submodule {part!r} (path {target!r})"
                raise AttributeError(msg)
            mod = sub
        return mod

    # ------------------------------------------------------------------ traversal
    def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` for self and every submodule, depth first; each module once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, mod in self._modules.items():
            if mod is None:
                continue
            yield from mod.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[int] = set()
        for name, mod in self._modules.items():
            if mod is not None and id(mod) not in seen:
                seen.add(id(mod))
                yield name, mod

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, table: str, prefix: str, recurse: bool,
                       remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mprefix, mod in mods:
            for name, v in getattr(mod, table).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield (f"{mprefix}.{name}" if mprefix else name), v

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs; a parameter shared by two modules comes once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter of the module and (with ``recurse``) its submodules."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---------------------------------------- xg.jit's view of a module: the protocol xpgrad._jit.JitStateful
    def _jit_state(self) -> tuple[Any, list[Tensor]]:
        """(static part of xg.jit's signature, the tensors a call reads and may rebind)."""
        mods = list(self.named_modules())  # (one walk of the tree: every call of a jitted function makes it)
        params, buffers = _members(mods, "_parameters"), _members(mods, "_buffers")
        static = (tuple((type(m), m.training) for _, m in mods), (tuple(params), tuple(buffers)))
        return static, [*params.values(), *(b for b in buffers.values() if isinstance(b, Tensor))]

    def _jit_structure(self) -> Any:
        mods = list(self.named_modules())
        return (tuple(_members(mods, "_parameters")), tuple(_members(mods, "_buffers")))

    def _jit_numbers(self) -> list[Any]:
        return []

    def _jit_count(self) -> int:
        return 0

    def _jit_replayed(self, count: int) -> None:
        return None

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every submodule (children first) and on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ modes and grads
    def train(self, mode: bool = True) -> Module:
        """Set training mode (Dropout active) on self and every submodule; returns self."""
        if not isinstance(mode, bool):
            msg = f"train: mode must be a bool, got {type(mode).__name__}"
            raise XpgradTypeError(msg)
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        """Set evaluation mode (``train(False)``); returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set ``requires_grad`` on every parameter (freeze with False); returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter: to None (default), or to zeros in place."""
        for p in self.parameters():
            _zero_grad(p, set_to_none)

    # ------------------------------------------------------------------ state
    def state_dict(self, *, prefix: str = "", keep_vars: bool = False) -> OrderedDict[str, Tensor]:
        """Parameters and persistent buffers by dotted name, sharing memory with the module.

        The tensors are detached unless ``keep_vars``.

        Examples:
            >>> import xpgrad as xg
            >>> list(xg.nn.Linear(2, 3).state_dict())
            ['weight', 'bias']
        """
        out: OrderedDict[str, Tensor] = OrderedDict()
        if not any(m.__dict__.get("_state_dict_pre_hooks") or m.__dict__.get("_state_dict_hooks") for m in self.modules()):
            for mprefix, mod in self.named_modules(prefix=prefix.rstrip(".")):
                mod._save_into(out, f"{mprefix}." if mprefix else "", keep_vars)
            return out
        return self._state_dict_hooked(out, prefix.rstrip("."), keep_vars, set())

    def _save_into(self, out: OrderedDict[str, Tensor], prefix: str, keep_vars: bool) -> None:
        """This module's own parameters and persistent buffers into ``out``, their names after ``prefix``."""
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                out[prefix + name] = b if keep_vars else b.detach()

    def _state_dict_hooked(self, out: Any, mprefix: str, keep_vars: bool, memo: set[int]) -> Any:
        """``state_dict`` with its hooks, as torch runs them: each module's pre-hooks, its entries,
        its submodules', then its post-hooks (whose result, where not public, replaces the dict)."""
        memo.add(id(self))
        prefix = f"{mprefix}." if mprefix else ""  # (torch's: the hooks see "layer.", and "" at the top)
        d = self.__dict__
        for hook in list(d.get("_state_dict_pre_hooks", {}).values()):
            hook(self, prefix, keep_vars)
        self._save_into(out, prefix, keep_vars)
        for name, mod in self._modules.items():
            if mod is not None and id(mod) not in memo:
                mod._state_dict_hooked(out, prefix + name, keep_vars, memo)
        for hook in list(d.get("_state_dict_hooks", {}).values()):
            r = hook(self, out, prefix, {})
            if r is None:
                continue
            if getattr(hook, "_from_public_api", False):
                msg = (f"state_dict: the post-hook {_hook_name(hook)} of {type(self).__name__} returned "
                       f"{type(r).__name__}; a hook registered with register_state_dict_post_hook must return None "
                       "(change the state dict in place)")
                raise XpgradTypeError(msg)
            out = r
        return out

    def _state_slots(self) -> dict[str, tuple[Module, str, Tensor]]:
        slots: dict[str, tuple[Module, str, Tensor]] = {}
        for mprefix, mod in self.named_modules():
            for table in ("_parameters", "_buffers"):
                for name, v in getattr(mod, table).items():
                    if v is None or (table == "_buffers" and name in mod._non_persistent):
                        continue
                    slots[f"{mprefix}.{name}" if mprefix else name] = (mod, name, v)
        return slots

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values from ``state_dict`` into the parameters and buffers.

        Values may be Tensors or arrays of any library; each is converted to the
        namespace, device and dtype of the tensor it replaces. Everything is
        checked before anything is copied: on an error the module is unchanged.

        Args:
            state_dict: name -> tensor, as returned by [`state_dict`][xpgrad.nn.Module.state_dict] or [`xpgrad.load`][xpgrad.load].
            strict: missing and unexpected keys are errors (else they are returned).

        Raises:
            XpgradValueError: lists the missing keys, the unexpected keys and the
                mismatched values: a wrong shape, a non-array, complex into real
                (these are errors even when not strict).

        Examples:
            >>> import xpgrad as xg
            >>> a, b = xg.nn.Linear(2, 2), xg.nn.Linear(2, 2)
            >>> b.load_state_dict(a.state_dict())
            IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        """
        if not isinstance(state_dict, Mapping):
            msg = f"load_state_dict: expected a mapping of name -> tensor, got {type(state_dict).__name__}"
            raise XpgradTypeError(msg)
        slots = self._state_slots()
        mods = list(self.named_modules())
        post = any(m.__dict__.get("_load_state_dict_post_hooks") for _, m in mods)
        errors: list[str] = []
        spans: dict[int, tuple[list[str], list[str]]] = {}
        if post or any(m.__dict__.get("_load_state_dict_pre_hooks") for _, m in mods):
            # (the hooks change a copy: the caller's dict stays as it is, as in torch)
            state_dict, missing, unexpected = self._load_pre_hooks(state_dict, mods, slots, errors, spans)
        else:
            missing = [k for k in slots if k not in state_dict]
            unexpected = [k for k in state_dict if k not in slots]
        mismatched = []
        for k, (_, _, cur) in slots.items():
            if k in state_dict:
                v = state_dict[k]
                if not hasattr(v, "shape"):
                    mismatched.append(f"{k}: expected a tensor, got {type(v).__name__}")
                elif _shape(v) != _shape(cur):
                    mismatched.append(f"{k}: checkpoint shape {_shape(v)}, module shape {_shape(cur)}")
                elif "complex" in str(v.dtype) and "complex" not in str(cur.dtype):
                    mismatched.append(f"{k}: checkpoint dtype {v.dtype} into module dtype {cur.dtype} "
                                      "would discard the imaginary part")
        # (with post-hooks, which may forgive missing or unexpected keys, those are checked after them)
        problems = self._load_problems(strict and not post, missing, unexpected, mismatched, errors)
        if problems:
            msg = (f"load_state_dict: cannot load into {type(self).__name__}: {', '.join(problems)}; "
                   "nothing was changed")
            raise XpgradValueError(msg)
        new: list[tuple[Tensor, Any]] = []
        for k, (_, _, cur) in slots.items():
            if k not in state_dict:
                continue
            data = cur.data
            try:
                arr = move_array(state_dict[k], backend_namespace(data), _device(data), data.dtype, copy=True)
            except Exception as e:
                msg = f"load_state_dict: cannot convert the value of {k!r}: {e}; nothing was changed"
                raise XpgradValueError(msg) from e
            new.append((cur, arr))
        with no_grad():
            old = [cur.data for cur, _ in new]
            for cur, arr in new:
                cur.data = arr
                cur._version[0] += 1
        keys = IncompatibleKeys(missing, unexpected)
        if post:
            keys = IncompatibleKeys([], [])
            self._load_post_hooks(keys, spans, set())
            missing, unexpected = keys.missing_keys, keys.unexpected_keys
            problems = self._load_problems(strict, missing, unexpected, [], [])
            if problems:  # (the module is put back as it was)
                with no_grad():
                    for (cur, _), arr in zip(new, old):
                        cur.data = arr
                        cur._version[0] += 1
                msg = (f"load_state_dict: cannot load into {type(self).__name__}: {', '.join(problems)} (after "
                       "its load_state_dict post-hooks); nothing was changed")
                raise XpgradValueError(msg)
        return keys

    @staticmethod
    def _load_problems(strict: bool, missing: list[str], unexpected: list[str], mismatched: list[str],
                       errors: list[str]) -> list[str]:
        problems = []
        if strict and missing:
            problems.append(f"missing keys {missing}")
        if strict and unexpected:
            problems.append(f"unexpected keys {unexpected}")
        if mismatched:
            problems.append(f"mismatched values [{'; '.join(mismatched)}]")
        problems += errors
        return problems

    def _load_pre_hooks(self, state_dict: Mapping[str, Any], mods: list[tuple[str, Module]],
                        slots: dict[str, tuple[Module, str, Tensor]], errors: list[str],
                        spans: dict[int, tuple[list[str], list[str]]]) -> tuple[OrderedDict[str, Any], list[str], list[str]]:
        """Where there are load_state_dict hooks, as torch runs them: each module in turn (top first)
        runs its pre-hooks, then adds its own missing and unexpected keys to the lists. A
        submodule's pre-hooks see (and may change) the entries under its prefix only.

        Returns a copy of ``state_dict`` after the pre-hooks and the lists; ``spans`` gets what
        each module added, for the post-hooks (`_load_post_hooks`).
        """
        meta = getattr(state_dict, "_metadata", None)
        full: OrderedDict[str, Any] = OrderedDict(state_dict)
        missing: list[str] = []
        unexpected: list[str] = []
        paths = {p for p, _ in mods}
        for mprefix, mod in mods:
            prefix = f"{mprefix}." if mprefix else ""
            m0, u0 = len(missing), len(unexpected)
            hooks = mod.__dict__.get("_load_state_dict_pre_hooks")
            if hooks:
                local = full if not prefix else OrderedDict((k, v) for k, v in full.items() if k.startswith(prefix))
                local_meta = {} if not isinstance(meta, Mapping) else dict(meta.get(prefix[:-1], {}))
                for hook in list(hooks.values()):  # (torch passes strict=True whatever the call's, as here)
                    hook(mod, local, prefix, local_meta, True, missing, unexpected, errors)
                if prefix:  # (the entries under the prefix become the hooks'; others they added are dropped)
                    rest = [(k, v) for k, v in full.items() if not k.startswith(prefix)]
                    full = OrderedDict([*rest, *((k, v) for k, v in local.items() if k.startswith(prefix))])
            missing += [k for k, (owner, _, _) in slots.items() if owner is mod and k not in full]
            unexpected += [k for k in full if k.startswith(prefix) and k not in slots and _owner(k, paths) == mprefix]
            spans[id(mod)] = (missing[m0:], unexpected[u0:])
        return full, missing, unexpected

    def _load_post_hooks(self, keys: IncompatibleKeys, spans: dict[int, tuple[list[str], list[str]]],
                         memo: set[int]) -> None:
        """The load_state_dict post-hooks, as torch runs them: each module adds its missing and
        unexpected keys to ``keys``, its submodules theirs, then its post-hooks run."""
        memo.add(id(self))
        m, u = spans.get(id(self), ([], []))
        keys.missing_keys.extend(m)
        keys.unexpected_keys.extend(u)
        for mod in self._modules.values():
            if mod is not None and id(mod) not in memo:
                mod._load_post_hooks(keys, spans, memo)
        for hook in list(self.__dict__.get("_load_state_dict_post_hooks", {}).values()):
            if hook(self, keys) is not None:
                msg = (f"load_state_dict: the post-hook {_hook_name(hook)} of {type(self).__name__} returned a value; "
                       "it must return None (change incompatible_keys' lists in place)")
                raise XpgradTypeError(msg)

    # ------------------------------------------------------------------ moving
    def to(self, device: Any = None, dtype: Any = None, *, xp: Any = None) -> Module:
        """Move every parameter and buffer to another library, device and/or dtype, in place.

        Args:
            device: a device object or string (``"cpu"``, ``"cuda:0"``); with ``xp``
                it is resolved for the new library. A dtype given here is taken as ``dtype``.
            dtype: a floating dtype (name or object); only floating tensors are cast.
            xp: a library name (``"torch"``), a namespace, or an array of the target library.

        The Parameter objects stay the same (an optimizer built before keeps them),
        and their gradients move with them. Returns self.

        Examples:
            >>> import xpgrad as xg
            >>> m = xg.nn.Linear(2, 2).to(dtype="float64")
            >>> m.weight.dtype
            xpgrad.float64
            >>> m.to(xp="array_api_strict").weight.device
            array_api_strict.Device('CPU_DEVICE')
        """
        if device is not None and _is_dtype(device):
            device, dtype = None, device
        if dtype is not None:
            name = dtype_name(dtype, func="to")
            if not is_float(name):
                msg = f"to: dtype must be a floating dtype, got {name!r}"
                raise XpgradTypeError(msg)
        target_xp, target_dev = (None, None)
        if xp is not None:
            target_xp, target_dev = _namespace_of(xp, "to")
        moves: list[tuple[Tensor, Any, Any]] = []
        for t in [*self.parameters(), *self.buffers()]:
            for holder in (t, t.grad):
                if holder is None:
                    continue
                data = holder.data
                nxp = target_xp if target_xp is not None else backend_namespace(data)
                dev = resolve_device(nxp, device, func="to") if device is not None else (
                    target_dev if target_xp is not None else None)
                dt = dtype_name(dtype) if dtype is not None and is_float(data.dtype) else None
                moves.append((holder, move_array(data, nxp, dev, dt, func="to"), holder is t))
        with no_grad():
            for holder, arr, _ in moves:
                holder.data = arr
                holder._version[0] += 1
        return self

    # ------------------------------------------------------------------ hooks
    def register_forward_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call ``hook(module, args)`` before ``forward``; a non-None result replaces ``args``.

        Examples:
            >>> import xpgrad as xg
            >>> m = xg.nn.Identity()
            >>> h = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
            >>> m(xg.asarray([1.0]))
            Tensor([2.], dtype=float64, device=cpu)
            >>> h.remove()
        """
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    def register_forward_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after ``forward``; a non-None result replaces the output.

        Examples:
            >>> import xpgrad as xg
            >>> seen = []
            >>> m = xg.nn.Identity()
            >>> with m.register_forward_hook(lambda mod, args, out: seen.append(out.shape)):
            ...     _ = m(xg.zeros(3))
            >>> seen
            [(3,)]
        """
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    def _hook_table(self, name: str, hook: Any, func: str, prepend: bool = False) -> RemovableHandle:
        """Add ``hook`` to the table ``name`` (made at the first hook: a module without any costs nothing)."""
        if not callable(hook):
            msg = f"{func}: expected a callable hook, got {type(hook).__name__} {hook!r}"
            raise XpgradTypeError(msg)
        self._check_ready(func)
        table = self.__dict__.get(name)
        if table is None:
            table = OrderedDict()
            object.__setattr__(self, name, table)
        handle = RemovableHandle(table)
        table[handle.id] = hook
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call ``hook(module, prefix, keep_vars)`` as ``state_dict()`` reaches this module, before its entries.

        ``prefix`` is the module's name with a trailing dot (``""`` at the top), as in torch.
        Returns a handle whose ``remove()`` unregisters the hook.
        """
        return self._hook_table("_state_dict_pre_hooks", hook, "register_state_dict_pre_hook")

    def register_state_dict_post_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call ``hook(module, state_dict, prefix, local_metadata)`` after ``state_dict()`` added this module's entries.

        The hook changes ``state_dict`` in place and returns None (a result raises, as in torch).
        ``prefix`` is as for [`register_state_dict_pre_hook`][xpgrad.nn.Module.register_state_dict_pre_hook];
        ``local_metadata`` is a dict (empty: xpgrad modules have no version). Returns a handle
        whose ``remove()`` unregisters the hook.

        Examples:
            >>> import xpgrad as xg
            >>> def drop_bias(mod, sd, prefix, meta):
            ...     del sd[prefix + "bias"]
            >>> m = xg.nn.Linear(2, 2)
            >>> h = m.register_state_dict_post_hook(drop_bias)
            >>> list(m.state_dict())
            ['weight']
        """
        if callable(hook):
            try:  # (as torch marks it: state_dict then refuses a result)
                hook._from_public_api = True  # type: ignore[attr-defined]
            except AttributeError:  # (a bound method, a builtin: a function that calls it carries the mark)
                inner = hook

                def hook(*args: Any) -> Any:
                    return inner(*args)

                hook.__qualname__ = _hook_name(inner)
                hook._from_public_api = True  # type: ignore[attr-defined]
        return self._hook_table("_state_dict_hooks", hook, "register_state_dict_post_hook")

    def _register_state_dict_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """torch's older post-hook: as [`register_state_dict_post_hook`][xpgrad.nn.Module.register_state_dict_post_hook],
        but a non-None result replaces the state dict (where the hook is the top module's)."""
        if getattr(hook, "_from_public_api", False):
            msg = (f"_register_state_dict_hook: {_hook_name(hook)} is already a state_dict hook registered with "
                   "register_state_dict_post_hook (which must return None); register it with one of the two")
            raise XpgradValueError(msg)
        return self._hook_table("_state_dict_hooks", hook, "_register_state_dict_hook")

    def register_load_state_dict_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call ``hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)``
        before ``load_state_dict`` loads.

        As in torch, the hook may change ``state_dict`` in place (rename old keys, convert
        values): it is a copy (the caller's mapping is not changed), and a submodule's hook sees
        the entries under its ``prefix`` (its name and a dot) only. It may append to
        ``missing_keys``, ``unexpected_keys`` (reported, and errors when ``strict``) and
        ``error_msgs`` (errors). ``strict`` is True whatever the call's, as torch passes it.
        Hooks run top module first. Returns a handle whose
        ``remove()`` unregisters the hook.

        Examples:
            >>> import xpgrad as xg
            >>> def rename(mod, sd, prefix, meta, strict, missing, unexpected, errors):
            ...     if prefix + "w" in sd:
            ...         sd[prefix + "weight"] = sd.pop(prefix + "w")
            >>> m = xg.nn.Linear(2, 2, bias=False)
            >>> h = m.register_load_state_dict_pre_hook(rename)
            >>> m.load_state_dict({"w": xg.zeros((2, 2))})
            IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        """
        return self._hook_table("_load_state_dict_pre_hooks", hook, "register_load_state_dict_pre_hook")

    def register_load_state_dict_post_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call ``hook(module, incompatible_keys)`` after ``load_state_dict`` loaded (each module after its submodules).

        ``incompatible_keys`` has the lists ``missing_keys`` and ``unexpected_keys``; the hook
        may change them in place, and ``strict`` is checked after the hooks (clearing them
        avoids the error; where an error remains, the module is put back as it was). The
        hook returns None. Returns a handle whose ``remove()`` unregisters the hook.
        """
        return self._hook_table("_load_state_dict_post_hooks", hook, "register_load_state_dict_post_hook")

    def register_full_backward_pre_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_output)`` when the gradients of the module's outputs are computed.

        ``grad_output`` is a tuple with one entry per output (the forward's tuple, or its one
        result): a Tensor, or None for an output that is no Tensor requiring grad or got no
        gradient. A non-None result (a tuple of as many entries) replaces it, for the rest of
        the backward pass and for the full backward hooks. Hooks run in registration order
        (``prepend=True``: first); those registered when the module is called apply to that
        call. Returns a handle whose ``remove()`` unregisters the hook. Not inside
        [`xg.jit`][xpgrad.jit] or [`xg.vmap`][xpgrad.vmap]: the call raises there.

        Examples:
            >>> import xpgrad as xg
            >>> m = xg.nn.Linear(2, 1)
            >>> h = m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 0.5,))
            >>> x = xg.asarray([[1.0, 2.0]], dtype=xg.float32)
            >>> xg.sum(m(x)).backward()
            >>> m.bias.grad
            Tensor([0.5], dtype=float32, device=cpu)
            >>> h.remove()
        """
        return self._hook_table("_backward_pre_hooks", hook, "register_full_backward_pre_hook", prepend)

    def register_full_backward_hook(self, hook: Callable[..., Any], prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_input, grad_output)`` when the gradients of the module's inputs are computed.

        As torch's: ``grad_input`` has one entry per positional argument of the call (keyword
        arguments are not in it): the gradient of a Tensor that requires grad, else None (where
        torch gives zeros for a Tensor that does not require grad, or got no gradient, xpgrad
        gives None, as it does without the hook). ``grad_output`` is what the backward
        pre-hooks (see [`register_full_backward_pre_hook`][xpgrad.nn.Module.register_full_backward_pre_hook])
        left. A non-None result (a tuple of as many entries) replaces ``grad_input``: that is
        the gradient the inputs get. The hook fires once per backward pass through a call.
        When no input requires grad (the first layer of a model called on data), it fires as the
        outputs' gradients are computed, with ``grad_input`` all None, and warns (as torch).
        Hooks run in registration order (``prepend=True``: first); those registered when the
        module is called apply to that call. Returns a handle whose ``remove()`` unregisters
        the hook. Not inside [`xg.jit`][xpgrad.jit] or [`xg.vmap`][xpgrad.vmap]: the call
        raises there (a jitted program replays array operations, not Python hooks).

        Examples:
            >>> import xpgrad as xg
            >>> seen = []
            >>> m = xg.nn.Linear(2, 1)
            >>> h = m.register_full_backward_hook(lambda mod, gi, go: seen.append(gi[0].shape))
            >>> x = xg.asarray([[1.0, 2.0]], dtype=xg.float32, requires_grad=True)
            >>> xg.sum(m(x)).backward()
            >>> seen
            [(1, 2)]
            >>> h.remove()
        """
        return self._hook_table("_backward_hooks", hook, "register_full_backward_hook", prepend)

    # ------------------------------------------------------------------ repr
    def extra_repr(self) -> str:
        """The text inside the parentheses of this module's repr line (override in layers)."""
        return ""

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, mod in self._modules.items():
            text = repr(mod).replace("\n", "\n  ")
            lines.append(f"({name}): {text}")
        head = type(self).__name__ + "("
        if not lines:
            return head + ")"
        if len(lines) == 1 and not self._modules:
            return head + lines[0] + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def _owner(key: str, paths: set[str]) -> str:
    """The path of the deepest module whose name prefixes ``key`` (``""``: the top one)."""
    parts = key.split(".")
    for j in range(len(parts) - 1, 0, -1):
        p = ".".join(parts[:j])
        if p in paths:
            return p
    return ""


def _hook_name(hook: Any) -> str:
    return getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or type(hook).__name__


def _is_dtype(v: Any) -> bool:
    if isinstance(v, DType):
        return True
    if isinstance(v, str):
        try:
            dtype_name(v)
        except ValueError:
            return False
        return True
    try:
        dtype_name(v)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def _device(data: Any) -> Any:
    return array_api_compat.device(data)


def _members(mods: list[tuple[str, Module]], table: str) -> dict[str, Any]:
    """``named_parameters()``/``named_buffers()`` of the modules ``named_modules()`` gave: dotted name -> value."""
    seen: set[int] = set()
    out: dict[str, Any] = {}
    for prefix, mod in mods:
        for name, v in getattr(mod, table).items():
            if v is None or id(v) in seen:
                continue
            seen.add(id(v))
            out[f"{prefix}.{name}" if prefix else name] = v
    return out


def _zero_grad(p: Tensor, set_to_none: bool) -> None:
    if set_to_none:  # (set without reading it: xg.jit sees a step that never reads the old gradient)
        p.grad = None
        return
    if p.grad is None:
        return
    g = p.grad.data
    p.grad = Tensor(backend_namespace(g).zeros_like(g))


def functional_call(module: Module, params_and_buffers: Mapping[str, Any] | Any, args: Any = (),
                    kwargs: Mapping[str, Any] | None = None, *, strict: bool = False, tie_weights: bool = True) -> Any:
    """Call ``module`` with some of its parameters and buffers replaced by the given values.

    ``torch.func.functional_call``'s semantics: ``module(*args, **kwargs)`` runs (hooks
    included) with each name of ``params_and_buffers`` (as in ``named_parameters()`` /
    ``named_buffers()``, e.g. ``"0.weight"``) standing for the given value (a Tensor, a
    backend array, or a batched value inside [`vmap`][xpgrad.vmap]); the others keep the
    module's own. This makes a module a function of its weights, so the transforms apply
    to them: ``xg.grad(lambda p: loss(functional_call(model, p, (x,))))(params)`` is a
    dict of gradients, and ``xg.vmap`` of that over examples gives per-example gradients
    in one call.

    The module is never modified: the substitution lives in a context variable, read by
    attribute access (``self.weight``) and undone when the call returns or raises. So
    it is thread-safe (other threads, and other asyncio tasks, calling the same module
    meanwhile see its own parameters) and nests (a functional_call inside another).
    Code in ``forward`` that reads ``self._parameters`` directly or iterates
    ``parameters()`` sees the module's own values, not the substitutes.

    Args:
        module: the module to call.
        params_and_buffers: a dict ``name -> value``, or a list/tuple of such dicts
            (their keys must not overlap).
        args: the positional arguments of the call: a tuple, or a single argument.
        kwargs: its keyword arguments.
        strict: require a value for every parameter and buffer.
        tie_weights: a value given for one name of a tensor the module registers under
            several names (tied weights) stands for all of them, as in PyTorch.

    Raises:
        XpgradValueError: a name that is not a parameter or buffer of the module; with
            ``strict``, a missing one; two different values for tied names.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> lin = xg.nn.Linear(2, 1)
        >>> p = {"weight": np.array([[1.0, 2.0]]), "bias": np.array([0.5])}
        >>> xg.nn.functional_call(lin, p, (np.array([[1.0, 1.0]]),))
        Tensor([[3.5]], dtype=float64, device=cpu)
        >>> g = xg.grad(lambda p, x: xg.sum(xg.nn.functional_call(lin, p, (x,))))(p, np.array([[1.0, 1.0]]))
        >>> g["weight"], g["bias"]
        (array([[1., 1.]]), array([1.]))
    """
    func = "functional_call"
    if not isinstance(module, Module):
        msg = f"{func}: module must be an xpgrad.nn.Module, got {type(module).__name__}"
        raise XpgradTypeError(msg)
    given = _merge_dicts(params_and_buffers, func)
    slots: dict[str, tuple[Module, str, Any]] = {}
    for mprefix, mod in module.named_modules(remove_duplicate=False):
        for table in ("_parameters", "_buffers"):
            for name, v in getattr(mod, table).items():
                if v is not None:
                    slots[f"{mprefix}.{name}" if mprefix else name] = (mod, name, v)
    unknown = [k for k in given if k not in slots]
    if unknown:
        known = ", ".join(sorted(slots)[:12]) + (", ..." if len(slots) > 12 else "")
        msg = (f"{func}: {unknown} {'is not a parameter or buffer' if len(unknown) == 1 else 'are not parameters or buffers'}"
               f" of {type(module).__name__} (its names: {known or 'none'})")
        raise XpgradValueError(msg)
    values = dict(given)
    if tie_weights:
        by_id: dict[int, tuple[str, Any]] = {}
        for k, v in given.items():
            orig = slots[k][2]
            prev = by_id.get(id(orig))
            if prev is not None and prev[1] is not v:
                msg = f"{func}: {prev[0]!r} and {k!r} are tied (one tensor) but got different values"
                raise XpgradValueError(msg)
            by_id[id(orig)] = (k, v)
        for k, (_, _, orig) in slots.items():
            if k not in values and id(orig) in by_id:
                values[k] = by_id[id(orig)][1]
    if strict:
        missing = [k for k in slots if k not in values]
        if missing:
            msg = f"{func}: strict=True and no value for {missing}"
            raise XpgradValueError(msg)
    outer = _OVERRIDES.get()
    subs: dict[int, tuple[Any, dict[str, Any]]] = {} if outer is None else {
        i: (m, dict(d)) for i, (m, d) in outer.items()}
    for k, v in values.items():
        mod, name, _ = slots[k]
        if not isinstance(v, Tensor) and hasattr(v, "shape") and hasattr(v, "dtype"):
            v = Tensor(v)
        subs.setdefault(id(mod), (mod, {}))[1][name] = v
    if not isinstance(args, tuple):
        args = (args,)
    token = _OVERRIDES.set(subs)
    try:
        return module(*args, **(kwargs or {}))
    finally:
        _OVERRIDES.reset(token)


def _merge_dicts(pb: Any, func: str) -> dict[str, Any]:
    dicts = list(pb) if isinstance(pb, (list, tuple)) else [pb]
    out: dict[str, Any] = {}
    for d in dicts:
        if not isinstance(d, Mapping):
            msg = f"{func}: params_and_buffers must be a dict of name -> value (or a list of them), got {type(d).__name__}"
            raise XpgradTypeError(msg)
        for k, v in d.items():
            if k in out:
                msg = f"{func}: {k!r} is given more than once"
                raise XpgradValueError(msg)
            out[k] = v
    return out
