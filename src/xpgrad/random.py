"""Random numbers that follow the default-device policy, reproducible on every backend.

The array API standard has no random number generator, so this module (with
``_backends.py``) is the one place that knows a library by name: it draws every
number on the host with NumPy's PCG64 `numpy.random.Generator` and moves
the result with ``xp.asarray(..., device=...)`` to the namespace and device of
the current policy ([`xpgrad.default_device`][xpgrad.default_device]). So **one seed gives the same
numbers on every backend**: NumPy, array-api-strict, PyTorch, JAX, Dask and CuPy
all see identical values. Floating numbers are always drawn in float64 and then
rounded to the target dtype, so a float32 draw is the float64 draw rounded
(the values do not depend on the dtype either).

The cost, on a GPU backend: each call draws on the CPU and then pays one
host -> device copy of the result (4 MB for 1e6 float32). Measured on the 2-core
x86 development machine: 1e6 float32 normals take about 13 ms on the host (12 ms
for the float64 draw, under 1 ms to round it to float32), 1e6 uniforms about
3 ms, and a small call about 6 us of overhead; for comparison ``torch.randn(10**6)``
takes about 3 ms on the same CPU, and an on-device generator (cuRAND) far less.
So on a GPU, in hot loops where bit-identical streams across backends are not
needed, the library's own generator is faster.

Which generator a call uses:

* a policy with a seed (``with xg.default_device(seed=0):``, or
  ``xg.set_default_policy(seed=0)``) owns one [`Generator`][xpgrad.random.Generator], created once, on
  the first draw under it (or when a nested block that shares it is entered), and
  kept for the policy's lifetime; creation is thread-safe.
  A nested ``with`` that changes only the dtype shares its parent's generator (the
  stream continues); one that sets a seed or changes namespace or device starts a
  fresh generator from the policy's seed.
* a policy without a seed uses one process-wide generator seeded from OS entropy,
  shared by all threads (each draw holds a lock).
* [`seed`][xpgrad.random.seed] re-seeds the generator of the current context: the policy's own
  generator when the current policy has a seed, else the process-wide one.
* [`Generator`][xpgrad.random.Generator] can also be used explicitly; its methods take the namespace,
  device and dtype from the current policy, and the numbers only from itself.

Dtypes: floating outputs use ``dtype=`` if given, else the policy's float dtype,
else the backend's default float dtype (NumPy float64, PyTorch float32). Integer
outputs use ``dtype=`` if given, else the namespace's default integer dtype
(int64 on every supported backend; int32 on JAX without ``jax_enable_x64``).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._backends import resolve_device
from ._dispatch import backend_namespace, check_devices, raw_array
from ._dtypes import DType, dtype_name, kind
from ._dtypes import dtype as _xp_dtype
from ._exceptions import XpgradTypeError, XpgradValueError
from ._policy import DevicePolicy, current_policy, set_generator_factory
from ._tracing import TRACE, base_namespace
from .autograd._batched import STACK, Batched, Level, from_phys
from .autograd._tensor import Tensor, _to_numpy
from .ops import indexing as _indexing
from .ops import manipulation as _manipulation

__all__ = [
    "Generator",
    "bernoulli",
    "choice",
    "integers",
    "normal",
    "permutation",
    "seed",
    "uniform",
]

Shape = int | tuple[int, ...]


def _shape(shape: Any, func: str) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if not isinstance(shape, (tuple, list)) or not all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in shape
    ):
        msg = f"random.{func}: shape must be a non-negative int or a tuple of them, got {shape!r}"
        raise XpgradTypeError(msg)
    return tuple(int(s) for s in shape)


def _target(device: Any) -> tuple[Any, Any]:
    """(namespace, backend device) of the current policy, with ``device=`` resolved."""
    p = current_policy()
    dev = resolve_device(p.xp, device) if device is not None else p.device
    return p.xp, dev


def _float_name(xp: Any, dev: Any, dtype: Any, func: str) -> str:
    if dtype is None:
        name = current_policy().dtype or _default_name(xp, dev, "real floating", "float64")
        # a complex policy dtype: real draws use its real counterpart
        name = {"complex64": "float32", "complex128": "float64"}.get(name, name)
    else:
        name = dtype_name(dtype, func=f"random.{func}")
    if kind(name) != "real floating":
        msg = f"random.{func}: dtype must be a real floating dtype (float32, float64; float16, bfloat16 where the library has them), got {name!r}"
        raise XpgradTypeError(msg)
    _xp_dtype(name, xp, func=f"random.{func}")  # a dtype the library lacks (bfloat16 on NumPy): say so now
    return name


def _host(name: str) -> str:
    """The NumPy dtype a draw is rounded to on the host: NumPy has no bfloat16, so float32,
    rounded again by the library (float64 -> float32 -> bfloat16 is float64 -> bfloat16
    but for ties, which a 24-bit float32 hardly ever lands on)."""
    return "float32" if name == "bfloat16" else name


def _default_name(xp: Any, dev: Any, key: str, fallback: str) -> str:
    info = getattr(xp, "__array_namespace_info__", None)
    if info is None:
        return fallback
    return dtype_name(info().default_dtypes(device=dev)[key])


def _int_name(xp: Any, dev: Any, dtype: Any, func: str) -> str:
    if dtype is None:
        return _default_name(xp, dev, "integral", "int64")
    name = dtype_name(dtype)
    if not kind(name).endswith("integer"):
        msg = f"random.{func}: dtype must be an integer dtype, got {name!r}"
        raise XpgradTypeError(msg)
    return name


def _scalar(v: Any, name: str, func: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        msg = f"random.{func}: {name} must be a Python int or float, got {type(v).__name__} {v!r}"
        raise XpgradTypeError(msg)
    f = float(v)
    if not math.isfinite(f):
        msg = f"random.{func}: {name} must be finite, got {v!r}"
        raise XpgradValueError(msg)
    return f


def _is_array(obj: Any) -> bool:
    return isinstance(obj, Tensor) or (
        hasattr(obj, "shape") and hasattr(obj, "dtype") and not isinstance(obj, (np.generic, DType))
    )


def _host_probabilities(p: Any, n: int) -> np.ndarray:
    """``choice``'s ``p`` as float64 on the host, checked and normalised.

    ``p`` may be a sequence, or an array or Tensor of any library on any device. Its sum
    must be 1 to within the square root of its own dtype's epsilon (NumPy's tolerance
    for float64; 3.5e-4 for float32 probabilities); it is then divided by its sum, so
    that NumPy's stricter float64 check accepts float32 probabilities.
    """
    data = p.detach().data if isinstance(p, Tensor) else p
    if _is_array(data):
        data = _to_numpy(data)
    host = np.asarray(data)
    probs = host.astype(np.float64) if host.dtype.kind in "biuf" else None
    tol = math.sqrt(np.finfo(host.dtype if host.dtype.kind == "f" else np.float64).eps)
    total = float(probs.sum()) if probs is not None else math.nan
    if probs is None or probs.shape != (n,) or not np.all(probs >= 0) or not abs(total - 1.0) <= tol:
        msg = f"random.choice: p must be {n} non-negative probabilities summing to 1, got {p!r}"
        raise XpgradValueError(msg)
    return probs / total


class Generator:
    """A seeded stream of random numbers: NumPy's PCG64 on the host, any backend out.

    The numbers depend only on the seed and the calls made; the namespace, device
    and default dtype of each result come from the current policy
    ([`xpgrad.default_device`][xpgrad.default_device]) or from ``device=`` / ``dtype=``. Thread-safe:
    each draw holds the generator's lock.

    Args:
        seed: an int, or None to seed from OS entropy.

    Examples:
        >>> import xpgrad as xg
        >>> g = xg.random.Generator(0)
        >>> g.normal(3)
        Tensor([ 0.12573022, -0.13210486,  0.64042265], dtype=float64, device=cpu)
        >>> with xg.default_device("array_api_strict", dtype="float32"):
        ...     xg.random.Generator(0).normal(3)
        Tensor([ 0.12573022, -0.13210486,  0.64042264], dtype=float32, device=CPU_DEVICE)
    """

    __slots__ = ("_lock", "_np")

    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._np = np.random.Generator(np.random.PCG64(_seed_value(seed)))

    def __repr__(self) -> str:
        return f"xpgrad.random.Generator(PCG64 state {self._np.bit_generator.state['state']['state']:#x})"

    def seed(self, seed: int | None = None) -> None:
        """Restart this generator from ``seed`` (None: fresh OS entropy), in place.

        Examples:
            >>> import xpgrad as xg
            >>> g = xg.random.Generator(0); a = g.uniform(2)
            >>> g.seed(0); g.uniform(2).tolist() == a.tolist()
            True
        """
        new = np.random.Generator(np.random.PCG64(_seed_value(seed)))
        with self._lock:
            self._np = new

    def _draw(self, draw: Callable[[np.random.Generator], Any], name: str, xp: Any, dev: Any,
              func: str = "random") -> Tensor:
        """``draw`` on the host generator (under the lock), rounded to ``name``, moved to ``xp`` on ``dev``.

        Inside vmap the levels' ``randomness`` decides (see `VmapRandom`): a batched value
        with one draw per example along the ``"different"`` levels."""
        st = STACK.get()
        if st:
            gens, bshape = _vmap_generators(self, st, func)
            if bshape is not None:
                return from_phys(self._batched(gens, bshape, draw, name, xp, dev), st)  # type: ignore[no-any-return]
        trace = TRACE.get()
        if trace is None:
            return Tensor(self._draw_raw(draw, name, xp, dev))
        # inside xg.jit: the draw is a call of the program, made again (with new numbers) by each replay;
        # the policy's generator is the one current at the replay (a new `with default_device(seed=...)`
        # block starts a new one, which a program traced under an earlier block must draw from)
        base = base_namespace(xp) or xp
        fn = functools.partial(_draw_current if self is _current() else self._draw_raw, draw, name, base, dev)
        return Tensor(trace.draw(fn, "random.draw", base))

    @staticmethod
    def _batched(gens: list[Generator], bshape: tuple[int, ...], draw: Callable[[np.random.Generator], Any],
                 name: str, xp: Any, dev: Any) -> Tensor:
        """One draw from each of ``gens`` (the examples' generators, in order), stacked with the
        batch axes ``bshape`` in front: the physical value of a batched draw."""

        def raw(xp: Any) -> Any:
            parts = []
            for g in gens:
                with g._lock:
                    parts.append(np.asarray(draw(g._np), dtype=_host(name)))
            host = np.stack(parts).reshape(bshape + parts[0].shape)
            return xp.asarray(host, dtype=_xp_dtype(name, xp), device=dev)

        trace = TRACE.get()
        if trace is None:
            return Tensor(raw(xp))
        base = base_namespace(xp) or xp
        return Tensor(trace.draw(functools.partial(raw, base), "random.draw", base))

    def _draw_raw(self, draw: Callable[[np.random.Generator], Any], name: str, xp: Any, dev: Any) -> Any:
        with self._lock:
            host = draw(self._np)
        host = np.asarray(host, dtype=_host(name))  # draws are C-contiguous; asarray keeps 0-D shapes
        return xp.asarray(host, dtype=_xp_dtype(name, xp), device=dev)

    def _take_drawn(self, x: Any, draw: Callable[[np.random.Generator], Any], axis: int, func: str) -> Tensor:
        """``x`` indexed along ``axis`` by host-drawn indices, on ``x``'s own namespace and device
        (inside vmap, ``x`` and the indices may be batched: the indexing is then batched too)."""
        if isinstance(x, Tensor):
            idx = self._draw(draw, "int64", backend_namespace(raw_array(x)), x.device, func)
            return _indexing.take(x, idx, axis=axis)  # recorded: gradients flow
        bxp = backend_namespace(x, func="random")
        idx = self._draw(draw, "int64", bxp, check_devices(x), func)
        if isinstance(idx, Batched):
            return _indexing.take(Tensor(x), idx, axis=axis)
        return Tensor(bxp.take(x, idx.data, axis=axis))

    def _draw_float(self, draw: Callable[[np.random.Generator], Any], dtype: Any, device: Any, func: str) -> Tensor:
        """A float64 host draw, on the policy's target with the float dtype of `_float_name`."""
        xp, dev = _target(device)
        return self._draw(draw, _float_name(xp, dev, dtype, func), xp, dev, func)

    def normal(
        self, shape: Shape = (), *, mean: float = 0.0, std: float = 1.0, dtype: Any = None, device: Any = None
    ) -> Tensor:
        """Normal (Gaussian) numbers with the given mean and standard deviation.

        Drawn in float64 on the host, rounded to the float dtype (``dtype=``, else the
        policy's, else the backend's default), then copied to the policy's device.

        Examples:
            >>> import xpgrad as xg
            >>> xg.random.Generator(0).normal((2, 2), mean=10.0, std=0.1)
            Tensor([[10.01257302,  9.98678951],
                    [10.06404227, 10.01049001]], dtype=float64, device=cpu)
        """
        shp = _shape(shape, "normal")
        m = _scalar(mean, "mean", "normal")
        s = _scalar(std, "std", "normal")
        if s < 0:
            msg = f"random.normal: std must be >= 0, got {std!r}"
            raise XpgradValueError(msg)
        return self._draw_float(lambda g: g.normal(m, s, shp), dtype, device, "normal")

    def uniform(
        self, shape: Shape = (), *, low: float = 0.0, high: float = 1.0, dtype: Any = None, device: Any = None
    ) -> Tensor:
        """Uniform numbers in ``[low, high)``, drawn in float64 then rounded to the float dtype.

        (Rounding to float32 can round a value just below ``high`` up to ``high``.)

        Examples:
            >>> import xpgrad as xg
            >>> xg.random.Generator(0).uniform(3, low=-1.0, high=1.0)
            Tensor([ 0.27392337, -0.46042657, -0.91805295], dtype=float64, device=cpu)
        """
        shp = _shape(shape, "uniform")
        lo = _scalar(low, "low", "uniform")
        hi = _scalar(high, "high", "uniform")
        if not lo <= hi:
            msg = f"random.uniform: low must be <= high, got low={low!r}, high={high!r}"
            raise XpgradValueError(msg)
        return self._draw_float(lambda g: g.uniform(lo, hi, shp), dtype, device, "uniform")

    def integers(
        self, low: int, high: int | None = None, shape: Shape = (), *, dtype: Any = None, device: Any = None
    ) -> Tensor:
        """Integers in ``[low, high)`` (``[0, low)`` when ``high`` is None), NumPy's convention.

        The dtype is ``dtype=`` if given, else the namespace's default integer dtype (int64).

        Examples:
            >>> import xpgrad as xg
            >>> xg.random.Generator(0).integers(10, shape=5)
            Tensor([8, 6, 5, 2, 3], dtype=int64, device=cpu)
            >>> xg.random.Generator(0).integers(-3, 3, (2,))
            Tensor([2, 0], dtype=int64, device=cpu)
        """
        for v, label in ((low, "low"), (high, "high")):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
                msg = f"random.integers: {label} must be a Python int, got {type(v).__name__} {v!r}"
                raise XpgradTypeError(msg)
        lo, hi = (0, low) if high is None else (low, high)
        if not lo < hi:
            msg = f"random.integers: need low < high, got low={lo}, high={hi}"
            raise XpgradValueError(msg)
        shp = _shape(shape, "integers")
        xp, dev = _target(device)
        name = _int_name(xp, dev, dtype, "integers")
        info = np.iinfo(name)
        if lo < info.min or hi - 1 > info.max:
            msg = f"random.integers: [{lo}, {hi}) does not fit in {name} ([{info.min}, {info.max}])"
            raise XpgradValueError(msg)
        return self._draw(lambda g: g.integers(int(lo), int(hi), shp, dtype=np.int64), name, xp, dev, "integers")

    def permutation(self, x: Any, /, *, axis: int = 0, device: Any = None) -> Tensor:
        """A random permutation of ``range(x)`` (``x`` an int), or of an array along ``axis``.

        For an int, the result is on the policy's namespace and device (``device=``
        overrides) with the default integer dtype. For an array or Tensor the result
        stays on its namespace and device (``device=`` is not allowed); a Tensor is
        permuted with [`xpgrad.take`][xpgrad.ops.indexing.take], so gradients flow through.

        Examples:
            >>> import numpy as np, xpgrad as xg
            >>> xg.random.Generator(0).permutation(5)
            Tensor([2, 4, 3, 0, 1], dtype=int64, device=cpu)
            >>> xg.random.Generator(0).permutation(np.asarray([10.0, 20.0, 30.0]))
            Tensor([30., 10., 20.], dtype=float64, device=cpu)
        """
        if _is_array(x):
            if device is not None:
                msg = "random.permutation: device= is only for an int argument; an array stays on its device"
                raise XpgradTypeError(msg)
            ndim = len(x.shape)
            if not -ndim <= axis < ndim:
                msg = f"random.permutation: axis {axis} is out of range for a {ndim}-D array"
                raise XpgradValueError(msg)
            n = x.shape[axis]
            if n is None:
                msg = "random.permutation: the length along axis is unknown (a lazy array); compute it first"
                raise XpgradValueError(msg)
            return self._take_drawn(x, lambda g: g.permutation(int(n)), axis, "permutation")
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0:
            msg = f"random.permutation: x must be a non-negative int or an array, got {type(x).__name__} {x!r}"
            raise XpgradTypeError(msg)
        xp, dev = _target(device)
        return self._draw(lambda g: g.permutation(int(x)), _int_name(xp, dev, None, "permutation"), xp, dev,
                          "permutation")

    def bernoulli(self, p: float = 0.5, shape: Shape = (), *, dtype: Any = None, device: Any = None) -> Tensor:
        """1 with probability ``p``, else 0 (``uniform < p`` on the host).

        The dtype is ``dtype=`` if given (any dtype: ``xg.bool`` gives a mask),
        else the float dtype, as in ``torch.bernoulli``, so masks multiply floats.

        Examples:
            >>> import xpgrad as xg
            >>> xg.random.Generator(0).bernoulli(0.5, 4)
            Tensor([0., 1., 1., 1.], dtype=float64, device=cpu)
            >>> xg.random.Generator(0).bernoulli(0.5, 4, dtype=xg.bool)
            Tensor([False,  True,  True,  True], dtype=bool, device=cpu)
        """
        q = _scalar(p, "p", "bernoulli")
        if not 0.0 <= q <= 1.0:
            msg = f"random.bernoulli: p must be in [0, 1], got {p!r}"
            raise XpgradValueError(msg)
        shp = _shape(shape, "bernoulli")
        xp, dev = _target(device)
        name = _float_name(xp, dev, None, "bernoulli") if dtype is None else dtype_name(dtype)
        return self._draw(lambda g: g.random(shp) < q, name, xp, dev, "bernoulli")

    def choice(
        self,
        a: Any,
        shape: Shape = (),
        *,
        replace: bool = True,
        p: Sequence[float] | None = None,
        device: Any = None,
    ) -> Tensor:
        """Draw from ``range(a)`` (``a`` an int) or from the elements of a 1-D array.

        Args:
            a: an int ``n`` (draws integers in ``[0, n)``) or a 1-D array or Tensor
                (draws its elements; the result stays on its namespace and device).
            shape: the output shape.
            replace: draw with replacement (False: all draws distinct).
            p: probabilities of each element, summing to 1 (a sequence of floats,
                or an array or Tensor of any library on any device; read on the
                host), or None for uniform.
            device: for an int ``a`` only: overrides the policy's device.

        Examples:
            >>> import numpy as np, xpgrad as xg
            >>> xg.random.Generator(0).choice(5, 4, replace=False)
            Tensor([4, 3, 1, 2], dtype=int64, device=cpu)
            >>> xg.random.Generator(0).choice(np.asarray([1.0, 2.0]), 3, p=[0.0, 1.0])
            Tensor([2., 2., 2.], dtype=float64, device=cpu)
        """
        shp = _shape(shape, "choice")
        if _is_array(a):
            if device is not None:
                msg = "random.choice: device= is only for an int argument; an array stays on its device"
                raise XpgradTypeError(msg)
            if len(a.shape) != 1 or a.shape[0] is None:
                msg = f"random.choice: a must be a 1-D array of known length, got shape {tuple(a.shape)}"
                raise XpgradValueError(msg)
            n = int(a.shape[0])
        elif isinstance(a, (int, np.integer)) and not isinstance(a, bool) and a > 0:
            n = int(a)
        else:
            msg = f"random.choice: a must be a positive int or a 1-D array, got {type(a).__name__} {a!r}"
            raise XpgradTypeError(msg)
        probs = None
        if p is not None:
            probs = _host_probabilities(p, n)
        if not replace and math.prod(shp) > n:
            msg = f"random.choice: cannot draw {math.prod(shp)} distinct values from {n} without replacement"
            raise XpgradValueError(msg)
        def draw(g: np.random.Generator) -> Any:
            return np.asarray(g.choice(n, shp, replace=replace, p=probs))

        if _is_array(a):
            return _reshape(self._take_drawn(a, lambda g: draw(g).reshape(-1), 0, "choice"), shp)
        xp, dev = _target(device)
        return self._draw(draw, _int_name(xp, dev, None, "choice"), xp, dev, "choice")


def _reshape(t: Tensor, shape: tuple[int, ...]) -> Tensor:
    if t.shape == shape:
        return t
    if t.requires_grad or isinstance(t, Batched):
        return _manipulation.reshape(t, shape)  # recorded: gradients flow
    return Tensor(backend_namespace(t.data).reshape(t.data, shape))


class VmapRandom:
    """How the random functions draw inside one `xpgrad.vmap` call (shared by its chunks).

    ``randomness="same"``: each draw is made once, from the generator itself, and shared by
    the examples; every chunk starts from the generator's state at the call's first draw,
    so chunks see the same numbers (and the generator ends where one unchunked call leaves it).

    ``randomness="different"``: the first draw from a generator ``g`` inside the call takes
    one integer ``s`` from it (``g.integers(2**63, dtype=int64)``); example ``i`` of the batch
    then draws from its own ``Generator(s * 2**32 + i)``: the same numbers whatever the
    chunks, and a loop over the examples under those generators reproduces them.
    """

    __slots__ = ("bases", "children", "seen", "states")

    def __init__(self) -> None:
        self.bases: dict[int, tuple[Generator, int]] = {}  # (the generators are kept: their ids stay theirs)
        self.children: dict[tuple[int, int], Generator] = {}
        self.states: dict[int, tuple[Generator, Any]] = {}
        self.seen: set[tuple[int, int]] = set()

    def same(self, g: Generator, offset: int) -> None:
        """At the first draw from ``g`` in the chunk that starts at ``offset``: rewind ``g`` to
        where the call's first chunk found it (or note that state, in the first chunk)."""
        key = (offset, id(g))
        if key in self.seen:
            return
        self.seen.add(key)
        with g._lock:
            got = self.states.get(id(g))
            if got is None:
                self.states[id(g)] = (g, g._np.bit_generator.state)
            else:
                g._np.bit_generator.state = got[1]

    def different(self, g: Generator, offset: int, size: int) -> list[Generator]:
        """The generators of the examples ``offset, ..., offset + size - 1`` derived from ``g``."""
        got = self.bases.get(id(g))
        if got is None:
            with g._lock:
                s = int(g._np.integers(0, 2**63, dtype=np.int64))
            self.bases[id(g)] = (g, s)
        else:
            s = got[1]
        out = []
        for i in range(offset, offset + size):
            c = self.children.get((id(g), i))
            if c is None:
                c = self.children[id(g), i] = Generator(s * 2**32 + i)
            out.append(c)
        return out


def _vmap_generators(g: Generator, st: tuple[Level, ...], func: str) -> tuple[list[Generator], tuple[int, ...] | None]:
    """The generators a draw from ``g`` uses under the vmap levels ``st`` (one per example along
    the ``"different"`` levels, in order) and the batch shape of the draw (None: one draw, shared)."""
    gens = [g]
    bshape: list[int] = []
    different = False
    for lv in st:
        rng = lv.rng
        if lv.randomness == "error":
            msg = (f"random.{func}: called inside vmap(randomness='error'), which refuses random functions; "
                   "give vmap randomness='same' (one draw shared by the batch) or 'different' (one per example)")
            raise XpgradValueError(msg)
        if lv.randomness == "different" and rng is not None:
            gens = [c for p in gens for c in rng.different(p, lv.offset, lv.size)]
            bshape.append(lv.size)
            different = True
            continue
        if rng is not None:
            for p in gens:
                rng.same(p, lv.offset)
        bshape.append(1)
    return gens, (tuple(bshape) if different else None)


def _seed_value(seed: Any) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        msg = f"random.seed: a seed must be a non-negative int or None, got {type(seed).__name__} {seed!r}"
        raise XpgradTypeError(msg)
    return int(seed)


_create_lock = threading.Lock()
_global: Generator | None = None


def _process_generator() -> Generator:
    """The process-wide generator of policies without a seed (OS entropy until [`seed`][xpgrad.random.seed])."""
    global _global
    if _global is None:
        with _create_lock:
            if _global is None:
                _global = Generator()
    return _global


def policy_generator(policy: DevicePolicy) -> Generator:
    """The generator owned by a policy that has a seed, created on first use (thread-safe)."""
    g = policy.rng
    if g is None:
        with _create_lock:
            g = policy.rng
            if g is None:
                g = Generator(policy.seed)
                # the policy is frozen; its rng slot is filled exactly once, under the lock
                object.__setattr__(policy, "rng", g)
    return g  # type: ignore[no-any-return]


set_generator_factory(policy_generator)  # (_policy, a lower layer, makes a policy's generator with it)


def _current() -> Generator:
    p = current_policy()
    if p.seed is None:
        return _process_generator()
    return policy_generator(p)


def _draw_current(draw: Callable[[np.random.Generator], Any], name: str, xp: Any, dev: Any) -> Any:
    """A jitted program's draw from the generator of the policy current when it runs."""
    return _current()._draw_raw(draw, name, xp, dev)


def seed(seed: int | None = None) -> None:
    """Re-seed the generator of the current context.

    Precisely: when the current policy has a seed (inside ``with
    xg.default_device(seed=...)``, or a process default set with a seed), its own
    generator restarts from ``seed``; this affects every context that shares that
    policy's generator (nested dtype-only blocks; every thread, for a process default),
    and the policy's ``seed`` attribute keeps its original value. Otherwise the
    process-wide generator (used by all policies without a seed, in every thread)
    restarts from ``seed``, like ``numpy.random.seed``. ``None`` re-seeds from OS
    entropy. For per-thread reproducibility, give each thread its own
    ``with xg.default_device(seed=...)`` block.

    Examples:
        >>> import xpgrad as xg
        >>> xg.random.seed(0); a = xg.random.normal(2)
        >>> xg.random.seed(0); b = xg.random.normal(2)
        >>> a.tolist() == b.tolist()
        True
        >>> with xg.default_device(seed=1):
        ...     xg.random.seed(0)
        ...     xg.random.normal(2)
        Tensor([ 0.12573022, -0.13210486], dtype=float64, device=cpu)
        >>> xg.random.seed()
    """
    _current().seed(seed)


def normal(
    shape: Shape = (), *, mean: float = 0.0, std: float = 1.0, dtype: Any = None, device: Any = None
) -> Tensor:
    """Normal numbers from the current context's generator (see [`Generator`][xpgrad.random.Generator]).

    Generated on the host with NumPy's PCG64 in float64, rounded to the float dtype
    (``dtype=``, else the policy's, else the backend's default) and copied to the
    policy's namespace and device: one seed gives the same numbers on every backend;
    on a GPU each call costs one host -> device copy.

    Examples:
        >>> import xpgrad as xg
        >>> with xg.default_device(seed=0):
        ...     xg.random.normal(3)
        Tensor([ 0.12573022, -0.13210486,  0.64042265], dtype=float64, device=cpu)
        >>> with xg.default_device("array_api_strict", device="device1", seed=0):
        ...     xg.random.normal(3, dtype="float32")
        Tensor([ 0.12573022, -0.13210486,  0.64042264], dtype=float32, device=device1)
    """
    return _current().normal(shape, mean=mean, std=std, dtype=dtype, device=device)


def uniform(
    shape: Shape = (), *, low: float = 0.0, high: float = 1.0, dtype: Any = None, device: Any = None
) -> Tensor:
    """Uniform numbers in ``[low, high)`` from the current context's generator.

    Generated on the host (NumPy PCG64, float64), rounded to the float dtype and
    copied to the policy's namespace and device: the same numbers on every backend.

    Examples:
        >>> import xpgrad as xg
        >>> with xg.default_device(seed=0, dtype="float32"):
        ...     xg.random.uniform((2,))
        Tensor([0.6369617 , 0.26978672], dtype=float32, device=cpu)
    """
    return _current().uniform(shape, low=low, high=high, dtype=dtype, device=device)


def integers(low: int, high: int | None = None, shape: Shape = (), *, dtype: Any = None, device: Any = None) -> Tensor:
    """Integers in ``[low, high)`` (``[0, low)`` when ``high`` is None) from the current context's generator.

    Generated on the host (NumPy PCG64) and copied to the policy's namespace and
    device; the dtype is ``dtype=`` or the default integer dtype (int64).

    Examples:
        >>> import xpgrad as xg
        >>> with xg.default_device("array_api_strict", seed=0):
        ...     xg.random.integers(10, shape=(5,))
        Tensor([8, 6, 5, 2, 3], dtype=int64, device=CPU_DEVICE)
    """
    return _current().integers(low, high, shape, dtype=dtype, device=device)


def permutation(x: Any, /, *, axis: int = 0, device: Any = None) -> Tensor:
    """A random permutation of ``range(x)`` or of an array along ``axis`` (current context's generator).

    Indices are drawn on the host (NumPy PCG64) and copied to the target device,
    so the same seed permutes identically on every backend.

    Examples:
        >>> import xpgrad as xg
        >>> with xg.default_device(seed=0):
        ...     xg.random.permutation(5)
        Tensor([2, 4, 3, 0, 1], dtype=int64, device=cpu)
    """
    return _current().permutation(x, axis=axis, device=device)


def bernoulli(p: float = 0.5, shape: Shape = (), *, dtype: Any = None, device: Any = None) -> Tensor:
    """1 with probability ``p``, else 0, in the float dtype (or ``dtype=``), from the current context's generator.

    Drawn on the host (NumPy PCG64) and copied to the policy's namespace and device.

    Examples:
        >>> import xpgrad as xg
        >>> with xg.default_device(seed=0):
        ...     xg.random.bernoulli(0.5, (2, 2))
        Tensor([[0., 1.],
                [1., 1.]], dtype=float64, device=cpu)
    """
    return _current().bernoulli(p, shape, dtype=dtype, device=device)


def choice(
    a: Any, shape: Shape = (), *, replace: bool = True, p: Sequence[float] | None = None, device: Any = None
) -> Tensor:
    """Draw from ``range(a)`` or from a 1-D array's elements with the current context's generator.

    Indices are drawn on the host (NumPy PCG64); see [`Generator.choice`][xpgrad.random.Generator.choice].

    Examples:
        >>> import xpgrad as xg
        >>> with xg.default_device(seed=0):
        ...     xg.random.choice(3, (4,), p=[0.5, 0.5, 0.0])
        Tensor([1, 0, 0, 0], dtype=int64, device=cpu)
    """
    return _current().choice(a, shape, replace=replace, p=p, device=device)
