"""The Tensor: a backend array in ``.data`` plus what the tape needs.

A Tensor does not subclass any library's array; its ``__array_namespace__`` is
the ``xpgrad`` module, so array-API code handed a Tensor records gradients.
Operators dispatch to the primitives registered in `PRIMITIVES`.
"""

from __future__ import annotations

import copy
import math
import operator
import sys
from collections.abc import Callable, Iterator
from typing import Any

import array_api_compat
import numpy as np

from .._backends import _device_text as _text_of_device
from .._backends import resolve_device
from .._dispatch import backend_namespace, set_tensor_type, tensor_namespace
from .._dlpack import dlpack_kwargs
from .._dtypes import DTYPES, dtype_name, fast_name, is_float, kind
from .._exceptions import InPlaceModificationError, XpgradRuntimeError, XpgradTypeError, XpgradValueError
from .._tracing import Tracer as _Tracer
from .._tracing import untraced_write as _untraced_write
from . import _core
from ._alias import may_alias
from ._core import PRIMITIVES, apply, apply1, apply2
from ._cut import note as _note_cut
from ._cut import refuse_numpy as _refuse_numpy
from ._grad_mode import GRAD_ENABLED, graph_namespace

__all__ = ["Tensor"]

_NOKW: dict[str, Any] = {}
_SUPPORTED_API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12")


def _op(name: str, *args: Any, **kw: Any) -> Any:
    return apply(PRIMITIVES[name], args, kw or _NOKW)


def _wrap(data: Any, node: Any = None, oidx: int = 0, version: list[int] | None = None) -> Tensor:
    t = _new(Tensor)
    t.data = data
    t._node = node
    t._oidx = oidx
    t._requires_grad = node is not None
    t.grad = None
    t._version = [0] if version is None else version
    t._hooks = None
    t._fw = None
    return t


_new = object.__new__


def _check_grad_dtype(data: Any, func: str) -> None:
    name = dtype_name(data.dtype)
    if not is_float(name):
        msg = (
            f"{func}: only floating-point and complex tensors can require grad, "
            f"got dtype {name}"
        )
        raise XpgradTypeError(msg)


def _batched_key(key: Any) -> bool:
    """Whether a key holds a value batched by vmap (its index arrays differ per example)."""
    if isinstance(key, tuple):
        return any(isinstance(k, _core.Batched) for k in key)
    return isinstance(key, _core.Batched)


def _unwrap_key(key: Any) -> Any:
    if isinstance(key, Tensor):
        return key.data
    if isinstance(key, tuple):
        return tuple(k.data if isinstance(k, Tensor) else k for k in key)
    return key


class Tensor:
    """An array of any array API library, with gradient tracking.

    Create one with [`xpgrad.asarray`][xpgrad.ops.creation.asarray] / [`xpgrad.tensor`][xpgrad.ops.creation.tensor], or
    ``Tensor(backend_array, requires_grad=...)``.

    Attributes:
        data: the backend array (NumPy, CuPy, torch, JAX, Dask, array-api-strict...).
        requires_grad: whether gradients are computed for this tensor.
        grad: the accumulated gradient (a Tensor) after ``backward()``, or None.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([1.0, 2.0], requires_grad=True)
        >>> y = (x * x).sum()
        >>> y.backward()
        >>> x.grad
        Tensor([2., 4.], dtype=float64, device=cpu)
    """

    # _fw: forward-mode tangents, {level: tangent} or None (see autograd._core)
    # _base: (base Tensor, primitive, kw, output index, argument position) on a view only
    # (see autograd._core._wrap_view); unset elsewhere, so read with getattr(t, "_base", None)
    # _inner, _levels: a batched value's (autograd._batched.Batched), Tensor's slots so that a
    # Tensor written with a batched value inside vmap can become one (its __class__ changes);
    # on a Tensor made inside vmap, _levels holds the vmap levels open when it was made
    # (autograd._batched.write_into), else it is unset, as _inner is
    # _views: on a tensor that views were made of, weak references to those views (see
    # autograd._core._wrap_view), so that a recorded write into it regenerates them; unset elsewhere
    __slots__ = ("__weakref__", "_base", "_fw", "_hooks", "_inner", "_levels", "_node", "_oidx", "_requires_grad",
                 "_version", "_views", "data", "grad")
    __hash__ = object.__hash__
    __array_priority__ = 1000  # NumPy arrays on the left defer to our reflected operators

    data: Any
    _base: tuple[Any, ...]

    def __init__(self, data: Any, requires_grad: bool = False) -> None:
        if isinstance(data, Tensor):
            data = data.data
        if not hasattr(data, "shape") or not hasattr(data, "dtype"):
            msg = (
                f"Tensor: expected a backend array, got {type(data).__name__}; "
                "use xpgrad.asarray() for lists and scalars"
            )
            raise XpgradTypeError(msg)
        if getattr(data, "requires_grad", False):
            # another tape's tracking (a torch tensor with requires_grad): xpgrad's tape
            # replaces it, so no torch graph is built through xpgrad's forward or backward
            data = data.detach()
        self.data = data
        self._node = None
        self._oidx = 0
        self._version = [0]
        self._hooks: list[Callable[..., Any]] | None = None
        self._fw: dict[int, Any] | None = None
        self.grad: Tensor | None = None
        self._requires_grad = False
        if _core._vmap_open:  # (made inside vmap: a batched value may be written into it, see _batched)
            self._levels = _core._vmap_stack.get()
        if requires_grad:
            self.requires_grad_(True)

    # ------------------------------------------------------------------ attributes
    @property
    def dtype(self) -> Any:
        """The dtype, as an xpgrad dtype (``xpgrad.float32``)."""
        dt = self.data.dtype
        name = fast_name(dt)
        return DTYPES[name if name is not None else dtype_name(dt)]

    @property
    def device(self) -> Any:
        """The backend's device object."""
        return array_api_compat.device(self.data)

    @property
    def shape(self) -> tuple[int | None, ...]:
        """The shape; unknown (data-dependent) sizes are None."""
        s = self.data.shape
        if type(s) is tuple:
            return s
        return tuple(None if (d is None or d != d) else int(d) for d in s)

    @property
    def ndim(self) -> int:
        return len(self.data.shape)

    @property
    def size(self) -> int | None:
        """Number of elements, None when a size is unknown."""
        s = self.shape
        if any(d is None for d in s):
            return None
        return math.prod(s)  # type: ignore[arg-type]

    @property
    def T(self) -> Tensor:
        """Transpose of a 2-D tensor."""
        if self.ndim != 2:
            msg = f"Tensor.T: only defined for 2-D tensors, got {self.ndim}-D; use mT or permute_dims"
            raise XpgradValueError(msg)
        return _op("permute_dims", self, axes=(1, 0))

    @property
    def mT(self) -> Tensor:
        """Transpose of the last two axes."""
        return apply1(PRIMITIVES["matrix_transpose"], self, _NOKW)

    @property
    def grad_fn(self) -> Any:
        """The Node that produced this tensor, None for leaves."""
        return self._node

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    # ------------------------------------------------------------------ autograd
    @property
    def requires_grad(self) -> bool:
        """Whether gradients flow to this tensor. Assigning it checks what
        [`requires_grad_`][xpgrad.autograd.Tensor.requires_grad_] checks (a floating dtype; leaves only when turning it off).

        Examples:
            >>> import xpgrad as xg
            >>> x = xg.asarray([1.0])
            >>> x.requires_grad = True
            >>> x.requires_grad
            True
        """
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._set_requires_grad(value, "requires_grad")

    def _set_requires_grad(self, requires_grad: bool, func: str) -> None:
        if requires_grad:
            _check_grad_dtype(self.data, func)
        elif self._node is not None:
            msg = f"{func}: cannot turn off requires_grad on a non-leaf tensor; use detach()"
            raise XpgradRuntimeError(msg)
        self._requires_grad = bool(requires_grad)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` in place (leaves only); returns self.

        Examples:
            >>> import xpgrad as xg
            >>> xg.zeros(2).requires_grad_().requires_grad
            True
        """
        self._set_requires_grad(requires_grad, "requires_grad_")
        return self

    def detach(self) -> Tensor:
        """A tensor sharing the data (and version counter) with no gradient history.

        Forward-mode tangents are dropped too (as [`xpgrad.stop_gradient`][xpgrad.functional.stop_gradient] does).

        Examples:
            >>> import xpgrad as xg
            >>> x = xg.asarray([1.0], requires_grad=True)
            >>> (x * 2).detach().requires_grad
            False
        """
        if not may_alias(self.data, self.data):  # JAX: an update replaces one Tensor's data only
            return _wrap(self.data)
        t = _wrap(self.data, None, 0, self._version)
        t._base = (self, None, _NOKW, 0, 0)  # a view no recorded write can be carried back through
        return t

    def backward(self, gradient: Any = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """Accumulate d(self)/d(leaf) into the ``.grad`` of every leaf that requires grad.

        Args:
            gradient: upstream gradient, same shape as self; required unless self
                has one element.
            retain_graph: keep saved values for another backward (default: create_graph).
            create_graph: record the backward pass, for higher-order gradients.
            inputs: accumulate only into these leaves.

        Examples:
            >>> import xpgrad as xg
            >>> x = xg.asarray([3.0], requires_grad=True)
            >>> (x ** 2).sum().backward()
            >>> x.grad
            Tensor([6.], dtype=float64, device=cpu)
        """
        _backward([self], None if gradient is None else [gradient], retain_graph=retain_graph,
                 create_graph=create_graph, inputs=inputs)

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> _HookHandle:
        """Call ``hook(grad)`` when this tensor's gradient is computed; it may return a new one.

        A non-None result replaces the gradient and must match it, as in PyTorch ("hook
        has changed the size/type of value"): another shape raises XpgradValueError,
        another dtype (or something that is not an array) XpgradTypeError, another
        array library NamespaceMismatchError, another device DeviceMismatchError, each
        naming the hook and the expected and given values. A leaf's hooks run once per
        backward pass on its summed gradient, for ``backward()``, ``backward(inputs=...)``
        and ``xg.autograd.grad`` alike; with ``create_graph=True`` the hook sees a Tensor
        on the tape.

        Returns a handle whose ``remove()`` unregisters the hook.

        Examples:
            >>> import xpgrad as xg
            >>> x = xg.asarray([1.0], requires_grad=True)
            >>> h = x.register_hook(lambda g: g * 10)
            >>> (x * 1).sum().backward(); x.grad
            Tensor([10.], dtype=float64, device=cpu)
        """
        if not self._requires_grad:
            msg = "register_hook: cannot register a hook on a tensor that doesn't require grad"
            raise XpgradRuntimeError(msg)
        if self._node is None:
            if self._hooks is None:
                self._hooks = []
            hooks = self._hooks
        else:
            node = self._node
            if node.hooks is None:
                node.hooks = {}
            hooks = node.hooks.setdefault(self._oidx, [])
        hooks.append(hook)
        return _HookHandle(hooks, hook)

    def retain_grad(self) -> None:
        """Make a non-leaf tensor keep its ``.grad`` after backward (no-op on leaves)."""
        if self._node is None:
            return

        def keep(g: Tensor) -> None:
            self.grad = g if self.grad is None else self.grad + g

        self.register_hook(keep)

    # ------------------------------------------------------------------ conversion
    # Conversions to Python numbers and to NumPy leave the tape. A traced Tensor's (one
    # that requires grad or carries a tangent) is noted for the running transform, which
    # raises CutGraphError if its gradient then comes out zero (see autograd._cut).
    def numpy(self) -> Any:
        """The values as a NumPy array (copied to the host when needed).

        Refused for a Tensor that requires grad (``detach()`` it first): the array would
        carry no gradient. Inside a transform (``grad``, ``jvp``...) that is a
        [`CutGraphError`][xpgrad.CutGraphError] naming the value.

        Examples:
            >>> import xpgrad as xg
            >>> xg.asarray([1.0, 2.0]).numpy()
            array([1., 2.])
        """
        return self._to_host("numpy")

    def _leave(self, what: str) -> None:
        """Note a conversion (kind ``what``) that leaves the tape, if this Tensor is traced."""
        if self._requires_grad or self._fw:
            _note_cut(self, what)

    def _to_host(self, what: str) -> Any:
        if self._requires_grad:
            _refuse_numpy(self, what)  # raises inside a transform
            if what == "numpy":  # t.numpy(), called by the user: detach() is the cure
                msg = "numpy: the tensor requires grad; call detach().numpy() to leave the graph"
            else:
                msg = _left_the_array_api(self)
            raise XpgradRuntimeError(msg)
        if self._fw:
            _note_cut(self, what)
        return _to_numpy(self.data)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Refuse a torch function given an xpgrad Tensor, naming xpgrad's function (torch would
        say "must be Tensor, not Tensor"). ``torch_tensor + xg_tensor`` still works: torch's
        operators turn this TypeError into NotImplemented, and Python calls the Tensor's ``__radd__``."""
        xpgrad = graph_namespace()
        name = getattr(func, "__name__", repr(func))
        qual = getattr(func, "__qualname__", name)
        mod = getattr(func, "__module__", None) or "torch"
        shown = qual if qual.startswith("Tensor.") else f"{mod if mod.startswith('torch.') else 'torch'}.{name}"
        ours = xpgrad.nn.functional if mod == "torch.nn.functional" else xpgrad
        where = "xg.nn.functional" if ours is not xpgrad else "xg"
        cure = f"{where}.{name}" if not name.startswith("_") and callable(getattr(ours, name, None)) else "xpgrad's functions (xg.*)"
        msg = (f"{shown} was given an xpgrad Tensor; use {cure} (or xg_tensor.data for the raw torch tensor, "
               f"without the gradient)")
        raise XpgradTypeError(msg)

    @property
    def __jax_array__(self) -> Callable[[], Any]:
        """Refuse a JAX function given an xpgrad Tensor (``jnp.sin(t)``), naming xpgrad's function,
        as ``__torch_function__`` does for torch (JAX would say "Error interpreting argument to
        <function sin> as an abstract array", a message about ``jax.jit``'s static arguments).

        JAX asks every argument for this attribute; the answer depends on who asks:
        ``jax_array + t`` gets a Tensor back, so JAX's operator returns NotImplemented and
        Python calls the Tensor's ``__radd__`` (as before); ``jnp.asarray(t)`` converts as
        ``np.asarray(t)`` does; any other JAX function raises XpgradValueError (a TypeError
        would be replaced by JAX's own message); anyone else finds no attribute.
        """
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller == "jax._src.numpy.array_methods":  # an operator: NotImplemented, then our reflected one
            return lambda: self
        if caller == "jax._src.numpy.array_constructors":  # jnp.asarray, jnp.array: as np.asarray
            return self._as_jax
        if caller.startswith(("jax.", "jaxlib.")):
            raise XpgradValueError(_jax_refusal(sys._getframe(1)))
        msg = "__jax_array__"
        raise AttributeError(msg)

    def _as_jax(self) -> Any:
        data = self.data
        if type(data).__module__.startswith(("jax", "jaxlib")) and not self._requires_grad:
            return data
        return self._to_host("array")

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        out = self._to_host("array")
        return out if dtype is None else np.asarray(out, dtype=dtype)

    # PyTorch-style conveniences (not part of the standard; they call the namespace)
    # np.sum(t) and np.mean(t) call t.sum(axis=, dtype=, out=): refused with a message
    # naming the cure, as PyTorch's tensors refuse them (torch 2.x: "unexpected keyword
    # argument 'axis'"); a NumPy function returns NumPy, never a Tensor with a gradient.
    def sum(self, axis: Any = None, keepdims: bool = False, **numpy_kwargs: Any) -> Tensor:
        """``xpgrad.sum(self, axis=axis, keepdims=keepdims)``.

        ``np.sum(tensor)`` is refused (it passes ``out=``): use ``xg.sum(tensor)``.
        """
        if numpy_kwargs:
            _refuse_numpy_reduction("sum", numpy_kwargs)
        return _op("sum", self, axis=axis, dtype=None, keepdims=keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False, **numpy_kwargs: Any) -> Tensor:
        """``xpgrad.mean(self, axis=axis, keepdims=keepdims)``.

        ``np.mean(tensor)`` is refused (it passes ``out=``): use ``xg.mean(tensor)``.
        """
        if numpy_kwargs:
            _refuse_numpy_reduction("mean", numpy_kwargs)
        return graph_namespace().mean(self, axis=axis, keepdims=keepdims)

    def reshape(self, *shape: Any) -> Tensor:
        """``xpgrad.reshape(self, shape)``; accepts ``t.reshape(2, 3)`` or ``t.reshape((2, 3))``."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return graph_namespace().reshape(self, shape)

    def item(self) -> Any:
        """The single element as a Python scalar (which carries no gradient).

        Examples:
            >>> import xpgrad as xg
            >>> xg.asarray([2.5]).item()
            2.5
        """
        self._leave("item")
        return _to_numpy(self.data).item()

    def tolist(self) -> Any:
        """The values as nested Python lists of Python scalars (which carry no gradient).

        Examples:
            >>> import xpgrad as xg
            >>> xg.asarray([1.0, 2.0]).tolist()
            [1.0, 2.0]
        """
        self._leave("tolist")
        return _to_numpy(self.data).tolist()

    def to_device(self, device: Any, /, *, stream: Any = None) -> Tensor:
        """Copy to another device (differentiable); device strings like ``"cpu"`` work."""
        dev = resolve_device(backend_namespace(self), device, func="to_device")
        # the source device rides along in the kwargs: the VJP moves the gradient back there
        return _op("to_device", self, device=dev, stream=stream, source=self.device)

    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        if api_version is not None and api_version not in _SUPPORTED_API_VERSIONS:
            msg = f"__array_namespace__: unsupported api_version {api_version!r}; supported: {_SUPPORTED_API_VERSIONS}"
            raise XpgradValueError(msg)
        return tensor_namespace(self.data)

    def __dlpack__(
        self,
        /,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[Any, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Export the data as a DLPack capsule (the standard's signature; see ``xg.from_dlpack``).

        The keywords go to the backend array's ``__dlpack__``; one that an older backend
        lacks is left out where the standard allows it (see ``xpgrad._dlpack``).

        Examples:
            >>> import numpy as np, xpgrad as xg
            >>> t = xg.asarray(np.arange(3.0))
            >>> np.from_dlpack(t).tolist()
            [0.0, 1.0, 2.0]
        """
        self._leave("dlpack")
        data, kw = dlpack_kwargs(self.data, stream, max_version, dl_device, copy)
        return data.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self.data.__dlpack_device__()

    def __bool__(self) -> bool:
        return bool(self.data)

    def __int__(self) -> int:
        self._leave("int")
        return int(self.data)

    def __float__(self) -> float:
        self._leave("float")
        return float(self.data)

    def __complex__(self) -> complex:
        self._leave("complex")
        return complex(self.data)

    def __index__(self) -> int:
        return operator.index(self.data)

    def __len__(self) -> int:
        if self.ndim == 0:
            msg = "len: a 0-D tensor has no length"
            raise XpgradTypeError(msg)
        return int(self.data.shape[0])

    def __iter__(self) -> Iterator[Tensor]:
        if self.ndim == 0:
            msg = "iter: iteration over a 0-D tensor"
            raise XpgradTypeError(msg)
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        if array_api_compat.is_lazy_array(self.data):
            body = repr(self.data)
        else:
            try:
                body = np.array2string(_to_numpy(self.data), separator=", ", prefix="Tensor(")
            except Exception:  # noqa: BLE001 - a backend we cannot copy to the host: show its repr
                body = repr(self.data)
        parts = [body, f"dtype={self.dtype.name}", f"device={_device_text(self.data)}"]
        if self._node is not None:
            parts.append(f"grad_fn=<{self._node.prim.name}>")
        elif self._requires_grad:
            parts.append("requires_grad=True")
        return "Tensor(" + ", ".join(parts) + ")"

    __str__ = __repr__

    # ------------------------------------------------------------------ operators
    def __add__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["add"], self, o, _NOKW)

    def __radd__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["add"], o, self, _NOKW)

    def __sub__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["subtract"], self, o, _NOKW)

    def __rsub__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["subtract"], o, self, _NOKW)

    def __mul__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["multiply"], self, o, _NOKW)

    def __rmul__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["multiply"], o, self, _NOKW)

    def __truediv__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["divide"], self, o, _NOKW)

    def __rtruediv__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["divide"], o, self, _NOKW)

    def __floordiv__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["floor_divide"], self, o, _NOKW)

    def __rfloordiv__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["floor_divide"], o, self, _NOKW)

    def __mod__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["remainder"], self, o, _NOKW)

    def __rmod__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["remainder"], o, self, _NOKW)

    def __pow__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["pow"], self, o, _NOKW)

    def __rpow__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["pow"], o, self, _NOKW)

    def __matmul__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["matmul"], self, o, _NOKW)

    def __rmatmul__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["matmul"], o, self, _NOKW)

    def __and__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["bitwise_and"], self, o, _NOKW)

    def __rand__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["bitwise_and"], o, self, _NOKW)

    def __or__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["bitwise_or"], self, o, _NOKW)

    def __ror__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["bitwise_or"], o, self, _NOKW)

    def __xor__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["bitwise_xor"], self, o, _NOKW)

    def __rxor__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["bitwise_xor"], o, self, _NOKW)

    def __lshift__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["bitwise_left_shift"], self, o, _NOKW)

    def __rlshift__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["bitwise_left_shift"], o, self, _NOKW)

    def __rshift__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["bitwise_right_shift"], self, o, _NOKW)

    def __rrshift__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["bitwise_right_shift"], o, self, _NOKW)

    def __neg__(self) -> Tensor:
        return apply1(PRIMITIVES["negative"], self, _NOKW)

    def __pos__(self) -> Tensor:
        return apply1(PRIMITIVES["positive"], self, _NOKW)

    def __abs__(self) -> Tensor:
        return apply1(PRIMITIVES["abs"], self, _NOKW)

    def __invert__(self) -> Tensor:
        return apply1(PRIMITIVES["bitwise_invert"], self, _NOKW)

    def __eq__(self, o: Any) -> Tensor:  # type: ignore[override]
        return apply2(PRIMITIVES["equal"], self, o, _NOKW)

    def __ne__(self, o: Any) -> Tensor:  # type: ignore[override]
        return apply2(PRIMITIVES["not_equal"], self, o, _NOKW)

    def __lt__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["less"], self, o, _NOKW)

    def __le__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["less_equal"], self, o, _NOKW)

    def __gt__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["greater"], self, o, _NOKW)

    def __ge__(self, o: Any) -> Tensor:
        return apply2(PRIMITIVES["greater_equal"], self, o, _NOKW)

    def __getitem__(self, key: Any) -> Tensor:
        if _core._vmap_open and _batched_key(key):  # (a batched index array: each example its own)
            return _core._vmap_getitem(self, key)
        return _op("getitem", self, key=_unwrap_key(key))

    # ------------------------------------------------------------------ in place
    def __setitem__(self, key: Any, value: Any) -> None:
        if not (_core._vmap_open and _batched_key(key)):
            key = _unwrap_key(key)
        self._inplace("setitem", value, key)

    def _inplace(self, name: str, other: Any, key: Any = None) -> Tensor:
        """In-place update: a functional update on the tape when recording, else in place.

        When the update is recorded (self or ``other`` requires grad in grad mode)
        the tensor is rebound to the result of the out-of-place primitive; values
        saved earlier keep the old data, so their gradients stay right. A tensor that
        is a view of another (``t = y[1:]``) carries the write back to its base, as
        PyTorch does: the base is rebound to the base with the view's part replaced,
        and the view to the same view of the new base. Otherwise the backend array is
        mutated where the backend allows it, and the version counter is bumped so that
        a saved copy of the old value is detected. Either way an update that would
        change the tensor's shape or kind of dtype is refused, with nothing changed.
        """
        if _core._vmap_open and (isinstance(other, _core.Batched) or (name == "setitem" and _batched_key(key))):
            # a batched value (or key) written into a value that vmap does not batch: the
            # tensor becomes batched (as jax.vmap's x.at[...].set(batched) is)
            return _core._vmap_write(self, name, other, key)  # type: ignore[no-any-return]
        # a value that requires grad written into an integer tensor (t[i] = v) is cast,
        # and the tensor stays a constant, as in PyTorch
        other_rg = isinstance(other, Tensor) and other._requires_grad and (name != "setitem" or is_float(self.data.dtype))
        o = other.data if isinstance(other, Tensor) else other
        if GRAD_ENABLED.get() and (self._requires_grad or other_rg):
            return self._inplace_recorded(name, other, key, o)
        fw = None
        if _core._fwd_open and (self._fw or (isinstance(other, Tensor) and other._fw)):
            # forward mode: the result's tangent, from the out-of-place primitive
            fw = (_op("setitem", self, other, key=key) if name == "setitem" else _op(name, self, other))._fw
        if type(o) is _Tracer and type(self.data) is not _Tracer:
            err = _untraced_write(_INPLACE_NAMES.get(name, name), tuple(self.shape), "a traced value is written into")
            raise err
        if isinstance(other, Tensor) and other._version is self._version:
            # an update by a view of this memory (``y += y[0]``, ``y[idx] = y[1]``): by a copy of it,
            # NumPy's result (torch refuses some overlaps and computes others element by element)
            o = backend_namespace(o).asarray(o, copy=True)
        if name == "setitem":
            self._write_item(key, other, o)
        else:
            self._write_raw(name, o)
        self._version[0] += 1
        if fw is not None or self._fw:
            self._fw = fw
        if _core._fwd_open:
            # the memory is shared: the bases this view writes into, and every other view of
            # them, take their tangents from the new value
            self._carry_tangent()._refresh_views(recorded=False)
        return self

    def _inplace_recorded(self, name: str, other: Any, key: Any, o: Any) -> Tensor:
        """`_inplace` when recorded: this Tensor (and the bases it is a view of, and their other
        views) rebound to the out-of-place primitive's result; ``o``: ``other``'s data."""
        chain = self._write_chain(name)
        if name == "setitem":
            new = _op("setitem", self, other, key=key)
        else:
            try:
                new = _op(name, self, other)
            except Exception:  # (array-api-strict refuses int with float itself): say why
                _precheck_update(name, self.data, o)
                raise
            _check_update(name, self.data, new.data, o)
            if new.data.dtype != self.data.dtype:
                new = _op("astype", new, dtype=self.data.dtype, copy=False)
        for t in chain:
            info = t._base
            new = _writer(t, info)(info[0], new, info)  # type: ignore[misc]
        # the base takes the new value; each view then reads the new base as it read the old
        last = chain[-1]._base[0] if chain else self
        last._rebind(new)
        for t in reversed(chain):
            info = t._base
            view = apply(info[1], (info[0],), info[2])
            t._rebind(view[info[3]] if info[1].multi else view)
        # the other views of the base, made before, read the new base too (PyTorch's view rebase)
        last._refresh_views(recorded=True)
        return self

    def _write_item(self, key: Any, other: Any, o: Any) -> None:
        """`_inplace`'s unrecorded ``self[key] = other`` (``o``: its data), into the array where the
        backend allows it, else as the setitem primitive's functional update."""
        if isinstance(other, Tensor) and o.dtype != self.data.dtype:
            # the value is cast to the tensor's dtype first (as PyTorch and NumPy do; JAX
            # warns about an unsafe cast inside its scatter)
            o = backend_namespace(o).astype(o, self.data.dtype)
        data = self.data
        try:
            if type(data) is _Tracer:  # (traced JAX refuses: this Tensor alone takes the update below)
                data._setitem(key, o, functional=False)
            else:
                data[key] = o
        except (TypeError, ValueError, IndexError, NotImplementedError):
            # immutable backends (JAX) and index kinds the backend cannot assign through
            # (integer arrays on array-api-strict, negative steps on PyTorch): the
            # functional update of the setitem primitive
            prim = PRIMITIVES["setitem"]
            self.data = prim.fwd(backend_namespace(self.data), self.data, o, key=key)

    def _write_raw(self, name: str, o: Any) -> None:
        """`_inplace`'s unrecorded arithmetic update (``+=``...) by ``o``: in place where the
        backend allows it (NumPy, torch, CuPy), else this Tensor takes the new array."""
        before = self.data
        try:
            after = _INPLACE_RAW[name](before, o)
        except Exception:  # re-raised, or as a clearer error: a shape or dtype change, two devices
            _precheck_update(name, before, o)
            _core.check_devices(before, o, func=_INPLACE_NAMES[name])
            raise
        if after is not before:  # (NumPy, torch, CuPy: the same array, updated; JAX, Dask: a new one)
            _check_update(name, before, after, o, exact=True)
        self.data = after

    def _carry_tangent(self) -> Tensor:
        """Carry this view's new tangents back to each base it is still a view of; the last base.

        After an unrecorded write into a view (which reached the bases' memory), each base's
        tangent becomes its old tangent with the view's part replaced by the view's new tangent
        (the view function's writer, as a recorded write carries the value).
        """
        t = self
        while True:
            info = getattr(t, "_base", None)
            if info is None or info[0]._version is not t._version:
                return t
            writer = _writer(t, info)
            if writer is None:
                return t
            base = info[0]
            if t._fw or base._fw:
                v = _wrap(t.data)
                v._fw = t._fw
                base._fw = writer(base, v, info)._fw or None
            t = base

    def _refresh_views(self, *, recorded: bool) -> None:
        """After a write into this tensor: its live views (and theirs, recursively) read it again.

        A recorded write gave this tensor a new array and node: a view made before it takes
        the same view of the new value (value, graph, version counter), as PyTorch regenerates
        a view's ``grad_fn`` after an in-place update of its base. An unrecorded write changed
        the shared memory, which the views see already: they take the new tangents only.
        """
        views = getattr(self, "_views", None)
        if not views:
            return
        for ref in list(views):
            v = ref()
            if v is None or v._base[0] is not self:
                continue
            prim, kw, j = v._base[1], v._base[2], v._base[3]
            if recorded:
                if v._version is not self._version:
                    new = apply(prim, (self,), kw)
                    v._rebind(new[j] if prim.multi else new)
            elif v._fw or self._fw:
                new = apply(prim, (self,), kw)
                v._fw = (new[j] if prim.multi else new)._fw
            v._refresh_views(recorded=recorded)

    def _write_chain(self, name: str) -> list[Tensor]:
        """The views a recorded write into ``self`` passes through, ``self`` first, checked.

        ``self`` and each base it is still a view of (sharing its version counter: a base
        rebound since is another array, which the write does not reach), up to the first
        tensor that is no view. Raises, before anything changes, where the write cannot
        be recorded: the tensor it lands in is a leaf that requires grad, or a view was
        made by a function no write can be carried back through (``broadcast_to``,
        ``diagonal``, ``detach``).
        """
        op = _INPLACE_NAMES.get(name, name)
        chain: list[Tensor] = []
        t = self
        while True:
            info = getattr(t, "_base", None)
            if info is None or info[0]._version is not t._version:
                break
            prim = info[1]
            if _writer(t, info) is None:
                made = "detach()" if prim is None else prim.name
                msg = (
                    f"{op}: cannot record a write into this tensor: it is a view of another tensor "
                    f"(made by {made}) and xpgrad cannot carry a write through {made} back to that "
                    "tensor; write into the base tensor itself, or into a copy "
                    "(xpgrad.asarray(view, copy=True))"
                )
                raise InPlaceModificationError(msg)
            chain.append(t)
            t = info[0]
        if t._node is None and t._requires_grad:
            what = "a leaf tensor that requires grad" if not chain else "a view of a leaf tensor that requires grad"
            msg = (
                f"{op}: {what} cannot be modified in place while recording; use "
                "`with xpgrad.no_grad():` or an out-of-place operation"
            )
            raise InPlaceModificationError(msg)
        return chain

    def _rebind(self, new: Tensor) -> None:
        """Make this tensor the recorded result ``new`` (same Python object, new array and node)."""
        self.data = new.data
        self._node = new._node
        self._oidx = new._oidx
        self._requires_grad = new._requires_grad
        self._version = new._version
        self._fw = new._fw

    def __iadd__(self, o: Any) -> Tensor:
        return self._inplace("add", o)

    def __isub__(self, o: Any) -> Tensor:
        return self._inplace("subtract", o)

    def __imul__(self, o: Any) -> Tensor:
        return self._inplace("multiply", o)

    def __itruediv__(self, o: Any) -> Tensor:
        return self._inplace("divide", o)

    def __ifloordiv__(self, o: Any) -> Tensor:
        return self._inplace("floor_divide", o)

    def __imod__(self, o: Any) -> Tensor:
        return self._inplace("remainder", o)

    def __ipow__(self, o: Any) -> Tensor:
        return self._inplace("pow", o)

    def __imatmul__(self, o: Any) -> Tensor:
        return self._inplace("matmul", o)

    def __iand__(self, o: Any) -> Tensor:
        return self._inplace("bitwise_and", o)

    def __ior__(self, o: Any) -> Tensor:
        return self._inplace("bitwise_or", o)

    def __ixor__(self, o: Any) -> Tensor:
        return self._inplace("bitwise_xor", o)

    def __ilshift__(self, o: Any) -> Tensor:
        return self._inplace("bitwise_left_shift", o)

    def __irshift__(self, o: Any) -> Tensor:
        return self._inplace("bitwise_right_shift", o)

    # ------------------------------------------------------------------ copying and pickling
    def __copy__(self) -> Tensor:
        """``copy.copy``: a second object for the same tensor (same data, version counter, graph)."""
        new = _new(type(self))
        for name in ("_fw", "_hooks", "_node", "_oidx", "_requires_grad", "_version", "data", "grad"):
            setattr(new, name, getattr(self, name))
        return new

    def __deepcopy__(self, memo: dict[Any, Any]) -> Tensor:
        """``copy.deepcopy`` of a leaf, as PyTorch does it: a new leaf with a deep copy of the data.

        ``requires_grad`` and a deep copy of ``.grad`` are kept; hooks and
        forward-mode tangents are not. As in PyTorch, a tensor with gradient
        history (a non-leaf) is refused: deep-copy ``t.detach()`` instead. The
        data is copied through ``memo`` by its library, so tensors copied together
        (``copy.deepcopy((base, view))``) share a version counter exactly when
        their copies share memory (PyTorch keeps views' aliasing, NumPy does not).

        Raises:
            XpgradRuntimeError: the tensor is not a leaf.

        Examples:
            >>> import copy, xpgrad as xg
            >>> x = xg.asarray([1.0, 2.0], requires_grad=True)
            >>> y = copy.deepcopy(x)
            >>> y.requires_grad, y.is_leaf, y.data is x.data
            (True, True, False)
        """
        if self._node is not None:
            msg = (
                "deepcopy: only tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol, as in PyTorch; this tensor has gradient history "
                f"(grad_fn={self._node!r}); deep-copy t.detach() instead"
            )
            raise XpgradRuntimeError(msg)
        data = copy.deepcopy(self.data, memo)
        new = _leaf(type(self), data, _copied_version(self._version, data, memo))
        new._requires_grad = self._requires_grad
        memo[id(self)] = new
        extra = getattr(self, "__dict__", None)  # a subclass's own attributes
        if extra:
            new.__dict__.update(copy.deepcopy(extra, memo))
        g = self.grad
        if g is not None:
            new.grad = copy.deepcopy(g if g._node is None else g.detach(), memo)
        return new

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickling, as PyTorch does it: the data and ``requires_grad``; no ``.grad``, hooks or graph.

        A non-leaf pickles too and unpickles as a leaf (with ``requires_grad``, as
        in PyTorch). The data is pickled by its own library.

        Examples:
            >>> import pickle, xpgrad as xg
            >>> x = xg.asarray([1.0, 2.0], requires_grad=True)
            >>> pickle.loads(pickle.dumps(x * 2))
            Tensor([2., 4.], dtype=float64, device=cpu, requires_grad=True)
        """
        extra = getattr(self, "__dict__", None)  # a subclass's own attributes
        return (_rebuild, (type(self), self.data, self._requires_grad), extra or None)


def _imatmul(a: Any, b: Any) -> Any:
    """``a @= b``: the product written into ``a`` where it has ``a``'s shape and ``a`` is writable
    (NumPy's ``@=`` raises its own message otherwise; PyTorch has none)."""
    r = a @ b
    if tuple(r.shape) != tuple(a.shape) or r.dtype != a.dtype:
        return r  # refused by the caller, naming @=
    try:
        a[...] = r
    except (TypeError, ValueError):  # immutable (JAX)
        return r
    return a


_INPLACE_RAW: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.iadd,
    "subtract": operator.isub,
    "multiply": operator.imul,
    "divide": operator.itruediv,
    "floor_divide": operator.ifloordiv,
    "remainder": operator.imod,
    "pow": operator.ipow,
    "matmul": lambda a, b: _imatmul(a, b),
    "bitwise_and": operator.iand,
    "bitwise_or": operator.ior,
    "bitwise_xor": operator.ixor,
    "bitwise_left_shift": operator.ilshift,
    "bitwise_right_shift": operator.irshift,
}
_INPLACE_NAMES = {
    "setitem": "__setitem__", "add": "__iadd__", "subtract": "__isub__", "multiply": "__imul__",
    "divide": "__itruediv__", "floor_divide": "__ifloordiv__", "remainder": "__imod__",
    "pow": "__ipow__", "matmul": "__imatmul__", "bitwise_and": "__iand__", "bitwise_or": "__ior__",
    "bitwise_xor": "__ixor__", "bitwise_left_shift": "__ilshift__", "bitwise_right_shift": "__irshift__",
}


#: the standard's kinds (``_dtypes.kind``) as in-place promotion sees them: one integer kind
_COARSE = {"bool": "bool", "signed integer": "integer", "unsigned integer": "integer",
           "real floating": "real floating", "complex floating": "complex"}


def _kind(dt: Any) -> str:
    return _COARSE[kind(dt)]


_KINDS = ("bool", "integer", "real floating", "complex")


def _kind_of(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "real floating"
    if isinstance(v, complex):
        return "complex"
    return _kind(v.dtype)


def _precheck_update(name: str, before: Any, other: Any) -> None:
    """Refuse an update whose result would have another shape or kind (from the operands).

    Called where the backend refused the update itself (its own message names neither the
    operator nor the rule) or gave a result of another shape or dtype (`_check_update`),
    so that every backend says the same; never on the way of an update that works.

    The kind of the result is the larger of the two operands' kinds (bool < integer < real
    floating < complex; ``/`` of integers is real floating); its shape is the broadcast of
    both (``@=``'s is checked on the result).
    """
    if not hasattr(other, "dtype") and not isinstance(other, (bool, int, float, complex)):
        return  # the backend refuses it, with its own message
    mine = _kind(before.dtype)
    theirs = _kind_of(other)
    result = max(mine, theirs, key=_KINDS.index)
    if name == "divide" and result in ("bool", "integer"):
        result = "real floating"
    if _KINDS.index(result) > _KINDS.index(mine):
        msg = (
            f"{_INPLACE_NAMES[name]}: the result of {_INPLACE_NAMES[name]} of a {mine} tensor with a {theirs} "
            f"value is {result}, which the tensor's dtype {dtype_name(before.dtype)} cannot hold; an "
            "in-place operation cannot change a tensor's dtype (write it out of place: t = t + u)"
        )
        raise XpgradTypeError(msg)
    if name != "matmul" and hasattr(other, "shape"):
        mine_shape, theirs_shape = tuple(before.shape), tuple(other.shape)
        if all(isinstance(n, int) for n in (*mine_shape, *theirs_shape)):
            try:
                shape = tuple(np.broadcast_shapes(mine_shape, theirs_shape))
            except ValueError:
                shape = None
            if shape != mine_shape:
                got = "no shape (they do not broadcast)" if shape is None else f"the shape {shape}"
                msg = (
                    f"{_INPLACE_NAMES[name]}: a tensor of shape {mine_shape} updated with a value of shape "
                    f"{theirs_shape} gives {got}, not the tensor's shape; an in-place operation cannot "
                    "change a tensor's shape (write it out of place: t = t + u)"
                )
                raise XpgradValueError(msg)


def _check_update(name: str, before: Any, after: Any, other: Any, exact: bool = False) -> None:
    """Refuse an in-place update whose result has another shape, or another kind of dtype.

    ``exact``: the dtype must be the same (the backend did the update itself); otherwise
    only the kind must (a recorded float32 += float64 casts back, as PyTorch and NumPy do).
    The message is `_precheck_update`'s, from the operands, where it can tell.
    """
    op = _INPLACE_NAMES[name]
    shape_changed = tuple(after.shape) != tuple(before.shape)
    dtype_changed = after.dtype != before.dtype and (exact or _kind(after.dtype) != _kind(before.dtype))
    if shape_changed or dtype_changed:
        _precheck_update(name, before, other)
    if shape_changed:
        msg = (
            f"{op}: the result's shape {tuple(after.shape)} differs from the tensor's shape "
            f"{tuple(before.shape)}; an in-place operation cannot change a tensor's shape "
            "(write it out of place: t = t + u)"
        )
        raise XpgradValueError(msg)
    if dtype_changed:
        msg = (
            f"{op}: the result dtype {dtype_name(after.dtype)} cannot be stored in the tensor's dtype "
            f"{dtype_name(before.dtype)}; an in-place operation cannot change a tensor's dtype "
            "(write it out of place: t = t + u)"
        )
        raise XpgradTypeError(msg)


def _unstack_index(info: Any, ndim: int) -> tuple[Any, ...]:
    kw, j = info[2], info[3]
    axis = kw.get("axis", 0) % ndim
    return (*((slice(None),) * axis), j, Ellipsis)


def _same(base: Tensor, new: Tensor, info: Any) -> Tensor:
    return new


#: primitive name -> how a new value of its view gives the new base:
#: ``writer(base, new_view, info)`` with info = the view's ``_base``
_VIEW_WRITERS: dict[str, Callable[[Tensor, Tensor, Any], Tensor]] = {
    "getitem": lambda b, v, info: _op("setitem", b, v, key=info[2]["key"]),
    "reshape": lambda b, v, info: _op("reshape", v, shape=tuple(b.shape)),
    "squeeze": lambda b, v, info: _op("reshape", v, shape=tuple(b.shape)),
    "expand_dims": lambda b, v, info: _op("reshape", v, shape=tuple(b.shape)),
    "permute_dims": lambda b, v, info: _op("permute_dims", v, axes=tuple(
        sorted(range(len(info[2]["axes"])), key=lambda i: info[2]["axes"][i] % len(info[2]["axes"])))),
    "matrix_transpose": lambda b, v, info: _op("matrix_transpose", v),
    "moveaxis": lambda b, v, info: _op("moveaxis", v, source=info[2]["destination"], destination=info[2]["source"]),
    "flip": lambda b, v, info: _op("flip", v, **info[2]),
    "unstack": lambda b, v, info: _op("setitem", b, v, key=_unstack_index(info, b.ndim)),
    "conj": lambda b, v, info: _op("conj", v),
}


def _writer(t: Tensor, info: Any) -> Callable[[Tensor, Tensor, Any], Tensor] | None:
    """How a new value of view ``t`` (of ``info[0]``) gives the new base; None: it cannot.

    A result that is its argument itself (``real`` or ``+x`` of a real torch tensor,
    ``astype(copy=False)`` to its own dtype, ``tile`` by ones on Dask) takes the value as it
    is; a true view needs its function's writer; ``detach()`` is cut from the base's graph by
    definition, and ``real``/``imag`` of a complex array, ``broadcast_to``, ``diagonal``
    and the other views without a writer cannot carry a write back.
    """
    if info[1] is None:
        return None
    if t.data is info[0].data:
        return _same
    return _VIEW_WRITERS.get(info[1].name)


class _HookHandle:
    __slots__ = ("_hook", "_hooks")

    def __init__(self, hooks: list[Callable[..., Any]], hook: Callable[..., Any]) -> None:
        self._hooks = hooks
        self._hook = hook

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def _refuse_numpy_reduction(name: str, kwargs: dict[str, Any]) -> None:
    """Raise for ``Tensor.sum``/``mean`` called with keywords beyond ``axis``/``keepdims``
    (NumPy's ``np.sum(t)`` passes ``dtype=`` and ``out=``)."""
    keys = ", ".join(f"{k}=" for k in kwargs)
    msg = (
        f"{name}: Tensor.{name} takes axis= and keepdims= only, got {keys}. If this is np.{name}(tensor): "
        f"NumPy's functions do not take xpgrad Tensors (as PyTorch's tensors, they are refused); use "
        f"xg.{name}(tensor, axis=...) or tensor.{name}(axis=...), which keep the gradient"
    )
    raise XpgradTypeError(msg)


def _jax_refusal(frame: Any) -> str:
    """The message for a JAX function given an xpgrad Tensor; ``frame`` is JAX's, asking for ``__jax_array__``.

    The function named is the outermost ``jax.numpy`` one the user called (``jnp.sum``, the ufunc
    ``jnp.add``), else the one ``jax.jit`` was tracing (``jnp.sin`` is a jitted function, whose
    body has not run yet), else the transform (``jax.grad``), else "a JAX function".
    """
    fun = None  # (name, module) of each kind found, innermost first
    public = None
    transform = None
    f = frame
    while f is not None and f.f_globals.get("__name__", "").startswith(("jax.", "jaxlib.")):
        mod, code = f.f_globals["__name__"], f.f_code.co_name
        if code == "_infer_input_type" and callable(f.f_locals.get("fun")):
            fun = (getattr(f.f_locals["fun"], "__name__", "<function>"), getattr(f.f_locals["fun"], "__module__", "") or "")
        if mod.startswith("jax._src.numpy"):
            if code == "__call__" and isinstance(getattr(f.f_locals.get("self"), "__name__", None), str):
                public = (f.f_locals["self"].__name__, mod)  # a ufunc object (jnp.add)
            elif not code.startswith(("_", "<")):
                public = (code, mod)
        if mod == "jax._src.api" and code.endswith("_f"):  # jax.grad's grad_f, jax.vmap's vmap_f
            transform = (code[:-2], "jax")
        f = f.f_back
    name, mod = public or fun or transform or ("", "")
    if not name:
        shown = "a JAX function"
    elif mod == "jax":
        shown = f"jax.{name}"
    elif mod.startswith("jax._src.numpy.linalg"):
        shown = f"jax.numpy.linalg.{name}"
    elif mod.startswith("jax._src.numpy"):
        shown = f"jax.numpy.{name}"
    elif mod.startswith("jax._src.lax"):
        shown = f"jax.lax.{name}"
    else:
        shown = f"jax.jit({name})"  # (the user's own function, jitted)
    ours = graph_namespace()
    where = "xg"
    if mod.startswith("jax._src.numpy.linalg"):
        ours, where = ours.linalg, "xg.linalg"
    cure = f"{where}.{name}" if name and not name.startswith(("_", "<")) and callable(getattr(ours, name, None)) \
        else "xpgrad's functions (xg.*)"
    return (f"{shown} was given an xpgrad Tensor; use {cure} (xpgrad's namespace: it takes Tensors of any library, "
            "JAX's included, and records the gradient), or xg_tensor.data for the raw array, without the gradient")


def _left_the_array_api(t: Tensor) -> str:
    """The message for ``__array__`` of a Tensor that requires grad: ``np.asarray(t)`` in the
    caller's code, or a library function (SciPy, scikit-learn...) that converts its input to
    NumPy inside. ``detach().numpy()`` is advice only for the first; the message covers both,
    and names the first caller outside xpgrad and NumPy (a library, when it is installed
    code; a NumPy ufunc such as ``scipy.special.i0`` converts in C, so there it is the
    caller's own module)."""
    f: Any = sys._getframe(2)
    caller, where = "?", ""
    while f is not None:
        name = f.f_globals.get("__name__", "?")
        if not (name == "xpgrad" or name.startswith(("xpgrad.", "numpy.", "numpy"))):
            caller, where = name, f.f_code.co_filename
            break
        f = f.f_back
    installed = any(d in where for d in ("site-packages", "dist-packages"))
    by = f" inside {caller.split('.')[0]} ({caller})" if installed else f" (called from {caller})"
    shape = tuple(t.shape)
    return (
        f"array: a Tensor of shape {shape} that requires grad was converted to NumPy{by}: np.asarray(tensor), "
        "np.array(tensor), or a function that converts its input to NumPy (SciPy's scipy.special, scipy.signal, "
        "scipy.spatial, scipy.linalg, scikit-learn, ...). The result leaves the array API and cannot carry a "
        "gradient. If you meant to leave the graph, call tensor.detach() first. If a library function did "
        "this, that function is not array-API generic for xpgrad Tensors: its result cannot be differentiated; "
        "compute it with xpgrad's functions (xg.special, xg.linalg, xg.fft, ...) or give it a gradient "
        "with xg.custom_vjp."
    )


def _to_numpy(data: Any) -> Any:
    """A NumPy array (on the host) from any library's array on any device."""
    try:
        return np.asarray(data)
    except (TypeError, ValueError, RuntimeError):
        pass
    get = getattr(data, "get", None)  # device arrays (CuPy) copy to the host with .get()
    if callable(get):
        return get()
    if array_api_compat.is_torch_array(data):
        # torch on a GPU: NumPy's conversion and DLPack both refuse a CUDA tensor; NumPy has
        # no bfloat16: float32 holds each of its values exactly
        data = data.detach().cpu()
        return (data.float() if data.dtype == _torch_bfloat16() else data).numpy()
    return np.from_dlpack(data)  # other DLPack producers (array-api-strict's fake devices)


def _torch_bfloat16() -> Any:
    import torch

    return torch.bfloat16


def _device_text(data: Any) -> str:
    try:
        return _text_of_device(array_api_compat.device(data))
    except Exception:  # noqa: BLE001 - a backend without device info
        return "?"


def _batches_self(name: str, k: int) -> XpgradValueError:
    """The error of an in-place update, at vmap level ``k``, that would batch the updated value."""
    name = _INPLACE_NAMES.get(name, name)
    return XpgradValueError(
        f"{name}: an in-place update of a value that does not vary along a vmap level, by one that "
        "does, would make the updated value batched; vmap does that only for a value made inside the "
        "vmapped function (not one it closes over or is given, nor a view that cannot carry the write): "
        "write it out of place (x = x + y), into a copy made inside, or give x in_axes along that level"
    )


def _no_engine(*args: Any, **kw: Any) -> None:
    msg = "backward: xpgrad.autograd._engine is not imported yet: import xpgrad (its package) first"
    raise XpgradRuntimeError(msg)


# the backward engine (``_engine``, which imports this module): the autograd package hands it down
_backward: Callable[..., None] = _no_engine


def set_backward(fn: Callable[..., None]) -> None:
    """Hand down the engine's ``backward`` (``xpgrad/autograd/__init__.py`` calls this when it is imported)."""
    global _backward
    _backward = fn


_core._bind(Tensor, _wrap)
set_tensor_type(Tensor)  # (_dispatch, a lower layer, unwraps Tensors)


# ---------------------------------------------------------------------- copying and pickling
def _rebuild(cls: type[Tensor], data: Any, requires_grad: bool) -> Tensor:
    """A leaf of class ``cls`` from pickled data (the reconstructor of `Tensor.__reduce_ex__`)."""
    t = _leaf(cls, data, [0])
    if requires_grad:
        t.requires_grad_(True)
    return t


def _leaf(cls: type[Tensor], data: Any, version: list[int]) -> Tensor:
    t = _new(cls)
    t.data = data
    t._node = None
    t._oidx = 0
    t._requires_grad = False
    t.grad = None
    t._version = version
    t._hooks = None
    t._fw = None
    return t


def _copied_version(version: list[int], data: Any, memo: dict[Any, Any]) -> list[int]:
    """The version counter of a deep copy whose data is ``data``.

    Copies of tensors that shared ``version`` share one new counter when their
    copied data may share memory, and get their own otherwise.
    """
    key = ("xpgrad.Tensor._version", id(version))
    entry: tuple[list[int], list[tuple[Any, list[int]]]] | None = memo.get(key)
    if entry is None:
        entry = memo[key] = (version, [])  # (the original is kept alive while its id is a key)
    for other, counter in entry[1]:
        if may_alias(other, data):
            return counter
    counter = [version[0]]
    entry[1].append((data, counter))
    return counter

