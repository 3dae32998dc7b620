"""Random programs over every differentiable primitive, for differential fuzzing.

A :class:`Program` is straight-line code: a few float64 inputs ``x0, x1, ...``
whose shapes broadcast together, then 1 to 30 steps ``v0, v1, ...``, each an op of
the xpgrad namespace applied to one or two earlier values. Every step is written
twice, as xpgrad source (``import xpgrad as xp``) and as the equivalent PyTorch
source, and the program runs by executing that very source: what a failure prints
(:meth:`Program.to_source`) is what ran, and can be pasted into a file.

Shapes are tracked symbolically while drawing, so every shape-changing op (reshape,
reductions, matmul, concat, indexing, FFTs, ...) gets parameters valid for its
operand. Values are kept away from the singular points of the ops by smooth maps
written into the program itself:

- domain-restricted functions get their argument mapped into the domain
  (``log(0.5 + v * v)``, ``asin(0.9 * tanh(v))``, ``acosh(1.5 + v * v)``), and
  divisors are ``0.5 + v * v``;
- functions with a kink or a jump at a point (``abs``, ``sign``, ``copysign``,
  ``hypot``, the bounds of ``clip``, ``maximum``) get an argument shifted by an odd
  constant, since the values that sit exactly on a kink are the structural zeros
  (``tril``, ``imag`` of a real, ``x - x``), which a shift moves away;
- ``remainder`` jumps where its dividend is a multiple of the divisor (0.7 or more):
  its dividend is shifted too, since a structural zero computed as -1e-17 by one
  library and 0 by another lands on either side of the jump at 0;
- reductions and sorts that select by order (``max``, ``min``, ``sort``, ``std``,
  ``vector_norm``) get distinct offsets ``0.37 * arange(n)`` added, so repeated
  entries (from broadcasting, ``tile``, ``repeat``) are no ties;
- linear algebra runs on ``0.1 * tanh(v) + diag(1, 2, 3)``: singular values and
  (for the square and symmetric cases) eigenvalues stay within 0.3 of 1, 2, 3, so
  the matrices are well conditioned and their spectra well separated; eigenvector
  and singular-vector outputs enter only through gauge-invariant expressions.

Complex-valued ops (FFTs, ``conj``, ``real``, ``imag``, ``eig``) run inside one step
that starts from a real value and ends real (a weighted real part), so every value
between steps is real float64. The loss is ``sum(v * W)`` summed over the values no
later step uses (the last one among them), with fixed random weights ``W``: every
step reaches the loss, so every step's gradient is checked.

``inputs`` and ``W`` are drawn from a seeded generator as full-precision doubles
(no ties, no exact zeros). Sizes stay small (at most :data:`MAX_SIZE` elements per
value), so that a 30-step program runs in milliseconds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

Draw = Callable[[st.SearchStrategy[Any]], Any]
Shape = tuple[int, ...]

#: the largest number of elements a value may have
MAX_SIZE = 48
#: the most steps a program has
MAX_STEPS = 30


@dataclass(frozen=True)
class Val:
    """A value of the program: its variable name and shape."""

    name: str
    shape: Shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass
class Step:
    """One op: the lines computing ``out`` in xpgrad and in torch."""

    op: str
    covers: tuple[str, ...]
    out: Val
    xg: list[str]
    tc: list[str]
    args: tuple[str, ...]


def _lit(a: np.ndarray) -> str:
    """A NumPy array as pasteable source (full precision)."""
    body = repr(a.ravel().tolist())
    return f"np.array({body}).reshape({a.shape!r})"


@dataclass
class Program:
    """A random straight-line program (see the module docstring)."""

    inputs: list[np.ndarray]
    steps: list[Step]
    sinks: list[str]
    weights: list[np.ndarray]
    hvp: str = "none"  # "none", "fwd" (xpgrad.hvp: forward over reverse) or "rev" (grad of grad)
    tangents: list[np.ndarray] = field(default_factory=list)

    @property
    def n_inputs(self) -> int:
        return len(self.inputs)

    def ops(self) -> list[str]:
        return [s.op for s in self.steps]

    def covered(self) -> set[str]:
        return {c for s in self.steps for c in s.covers}

    def _function(self, lib: str) -> str:
        xs = ", ".join([*(f"x{i}" for i in range(self.n_inputs)), *(f"W{i}" for i in range(len(self.sinks)))])
        ns = "xp" if lib == "xpgrad" else "torch"
        lines = [f"def f_{lib}({xs}):"]
        for s in self.steps:
            lines += [f"    {ln}" for ln in (s.xg if lib == "xpgrad" else s.tc)]
        loss = " + ".join(f"{ns}.sum({v} * W{i})" for i, v in enumerate(self.sinks))
        outs = ", ".join(s.out.name for s in self.steps)
        lines.append(f"    return {loss}, ({outs}{',' if len(self.steps) == 1 else ''})")
        return "\n".join(lines)

    def to_source(self) -> str:
        """The program as Python a human can paste and run."""
        head = ["import numpy as np", "import torch", "import xpgrad as xp", "inf = float('inf')", ""]
        data = [f"x{i} = {_lit(a)}" for i, a in enumerate(self.inputs)]
        data += [f"W{i} = {_lit(w)}" for i, w in enumerate(self.weights)]
        if self.hvp != "none":
            data += [f"T{i} = {_lit(t)}  # HVP tangent ({self.hvp})" for i, t in enumerate(self.tangents)]
        xs = ", ".join(f"x{i}" for i in range(self.n_inputs))
        ws = ", ".join(f"W{i}" for i in range(len(self.weights)))
        args = ", ".join(str(i) for i in range(self.n_inputs)) + ("," if self.n_inputs == 1 else "")
        usage = [
            "",
            "# xpgrad (other backends: run under xp.default_device(xp=<namespace>) with converted arrays):",
            f"# (loss, values), grads = xp.value_and_grad(f_xpgrad, argnums=({args}), has_aux=True)({xs}, {ws})",
            "# torch: the same with f_torch on torch.asarray(...) inputs and torch.autograd.grad",
        ]
        return "\n".join([*head, *data, "", "", self._function("xpgrad"), "", "", self._function("torch"), *usage])

    def __repr__(self) -> str:
        return "Program(\n" + self.to_source() + "\n)"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """How hypothesis prints a falsifying example: the source."""
        p.text(repr(self))

    def with_new_inputs(self, seed: int) -> Program:
        """The same program on other inputs of the same shapes (drawn as :func:`programs` draws them)."""
        rng = np.random.default_rng(seed)
        return replace(self, inputs=[np.asarray(rng.uniform(-1.5, 1.5, np.shape(a))) for a in self.inputs])

    def compile(self, lib: str, glb: dict[str, Any]) -> Callable[..., Any]:
        """The program's function for ``lib`` ("xpgrad" or "torch"), with ``glb`` as its globals."""
        ns = dict(glb)
        ns.setdefault("inf", math.inf)
        exec(compile(self._function(lib), f"<fuzz program: {lib}>", "exec"), ns)
        return ns[f"f_{lib}"]  # type: ignore[no-any-return]


# ---------------------------------------------------------------- the step builder
class _Builder:
    """Collects one step's lines; temporaries are named ``t<step>_<n>``."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.xg: list[str] = []
        self.tc: list[str] = []
        self.n = 0

    def let(self, xg: str, tc: str) -> tuple[str, str]:
        """Bind a temporary in both programs; returns its name twice (for symmetry)."""
        self.n += 1
        name = f"t{self.k}_{self.n}"
        self.xg.append(f"{name} = {xg}")
        self.tc.append(f"{name} = {tc}")
        return name, name


def _both(tpl: str, **kw: Any) -> tuple[str, str]:
    """A template with ``{N}`` for the namespace: xpgrad's and torch's spelling."""
    return tpl.format(N="xp", **kw), tpl.format(N="torch", **kw)


def _off(shape: Shape) -> tuple[str, str]:
    """Distinct offsets 0.37 * (0, 1, 2, ...) of ``shape`` (tie-breakers)."""
    n = math.prod(shape)
    return (f"xp.reshape(xp.arange({n}, dtype=xp.float64), {shape!r}) * 0.37",
            f"torch.arange({n}, dtype=torch.float64).reshape({shape!r}) * 0.37")


def _diag(m: int, n: int) -> tuple[str, str]:
    """The m x n matrix with 1, 2, ..., min(m, n) on its diagonal."""
    return (f"xp.eye({m}, {n}, dtype=xp.float64) * xp.arange(1, {n + 1}, dtype=xp.float64)",
            f"torch.eye({m}, {n}, dtype=torch.float64) * torch.arange(1, {n + 1}, dtype=torch.float64)")


def _dims(axis: Any, nd: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(nd))
    return (axis,) if isinstance(axis, int) else tuple(axis)


def _bcast(*shapes: Shape) -> Shape | None:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _ok(shape: Shape | None) -> bool:
    return shape is not None and 0 < math.prod(shape) <= MAX_SIZE


# ---------------------------------------------------------------- drawing helpers
def _axis(d: Draw, nd: int) -> int:
    a = d(st.integers(0, nd - 1))
    return a - nd if d(st.booleans()) else a


def _axes(d: Draw, nd: int) -> Any:
    """None, an int or a tuple of distinct axes."""
    kind = d(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return _axis(d, nd)
    picked = d(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
    return tuple(picked)


def _reduced(shape: Shape, axis: Any, keepdims: bool) -> Shape:
    ax = {a % len(shape) for a in _dims(axis, len(shape))}
    if keepdims:
        return tuple(1 if i in ax else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in ax)


def _count(shape: Shape, axis: Any) -> int:
    return math.prod(shape[a % len(shape)] for a in _dims(axis, len(shape)))


def _pick(d: Draw, pool: list[Val], pred: Callable[[Val], bool], default: Val | None) -> Val | None:
    cands = [v for v in pool if pred(v)]
    if not cands:
        return default
    return d(st.sampled_from(cands))  # type: ignore[no-any-return]


def _partner(d: Draw, pool: list[Val], a: Val) -> Val:
    """A second operand that broadcasts with ``a`` (``a`` itself when none does)."""
    v = _pick(d, pool, lambda v: _ok(_bcast(a.shape, v.shape)), a)
    assert v is not None
    return v


Out = tuple[str, str, Shape] | None
OpFn = Callable[[Draw, _Builder, Val, list[Val]], Out]


@dataclass(frozen=True)
class OpDef:
    """One kind of step: ``fn(draw, builder, a, pool)`` returns the xpgrad and torch
    expressions and the output shape, or None where ``a`` does not suit it."""

    name: str
    fn: OpFn
    covers: tuple[str, ...]


OPS: dict[str, OpDef] = {}


def _op(name: str, *covers: str) -> Callable[[OpFn], OpFn]:
    def deco(fn: OpFn) -> OpFn:
        OPS[name] = OpDef(name, fn, covers or (name,))
        return fn

    return deco


# ---------------------------------------------------------------- elementwise, unary
def _unary(name: str, tpl: str, *covers: str, torch_tpl: str | None = None) -> None:
    """``tpl`` uses ``{N}`` (namespace) and ``{a}``; ``torch_tpl`` when torch's spelling differs."""

    def fn(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
        xg = tpl.format(N="xp", a=a.name)
        tc = (torch_tpl or tpl).format(N="torch", a=a.name)
        return xg, tc, a.shape

    _op(name, *(covers or (name,)))(fn)


_unary("astype", "xp.astype({a}, xp.float64) * 1.5", "astype", torch_tpl="{a}.to(torch.float64) * 1.5")
_unary("to_device", "{a}.to_device({a}.device) * 1.5", "to_device", torch_tpl="{a}.to('cpu') * 1.5")
_unary("nn.relu", "{N}.nn.functional.relu({a} - 0.123)", "nn.relu", "subtract", torch_tpl="torch.relu({a} - 0.123)")


@_op("nn.binary_cross_entropy")
def _bce(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    """Probabilities kept inside (0.05, 0.95) and targets in (0, 1), both from ``a`` (so the
    target's gradient is checked too)."""
    return (f"xp.nn.functional.binary_cross_entropy(0.05 + 0.9 * xp.special.expit({a.name}), xp.special.expit(0.7 * {a.name} + 0.3), "
            "reduction='none')",
            f"torch.nn.functional.binary_cross_entropy(0.05 + 0.9 * torch.sigmoid({a.name}), torch.sigmoid(0.7 * {a.name} + 0.3), "
            "reduction='none')", a.shape)


@_op("nn.cross_entropy", "nn.softmax_cross_entropy")
def _cross_entropy(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    """Class-index cross-entropy of logits ``a`` (class axis 1, or 0 for 1-D), every option drawn."""
    if a.ndim == 0:
        return None
    cax = 0 if a.ndim == 1 else 1
    n_cls = a.shape[cax]
    tshape = a.shape[:cax] + a.shape[cax + 1:]
    ignore = d(st.sampled_from([-100, 0]))
    t = np.array(d(st.lists(st.integers(0, n_cls - 1), min_size=math.prod(tshape), max_size=math.prod(tshape))),
                 dtype=np.int64).reshape(tshape)
    red = d(st.sampled_from(["none", "sum", "mean"]))
    if red == "mean" and not np.any(t != ignore):
        ignore = -100  # (all ignored: 0 / 0)
    eps = d(st.sampled_from([0.0, 0.25]))
    w = d(st.sampled_from([None, [0.5 + 0.25 * i for i in range(n_cls)]]))
    lit = repr(t.tolist())
    opts = f"ignore_index={ignore}, reduction={red!r}, label_smoothing={eps}"
    xg = (f"xp.nn.functional.cross_entropy({a.name}, xp.asarray({lit}), "
          f"{'None' if w is None else f'xp.asarray({w!r})'}, {opts})")
    tc = (f"torch.nn.functional.cross_entropy({a.name}, torch.tensor({lit}), "
          f"{'None' if w is None else f'torch.tensor({w!r}, dtype=torch.float64)'}, {opts})")
    return xg, tc, tshape if red == "none" else ()


@_op("nn.layer_norm")
def _layer_norm(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    """Layer norm of ``a`` over its last axis (the native kernel's primitive; its composition elsewhere)."""
    if a.ndim == 0:
        return None
    tpl = "{N}.nn.functional.layer_norm({a}, ({n},))"
    return (tpl.format(N="xp", a=a.name, n=a.shape[-1]), tpl.format(N="torch", a=a.name, n=a.shape[-1]), a.shape)


@_op("nn.scaled_dot_product_attention")
def _attention(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    """Attention of ``a`` with itself as query, key and value (the last two axes), causal or not."""
    if a.ndim < 2:
        return None
    causal = d(st.booleans())
    tpl = "{N}.nn.functional.scaled_dot_product_attention({a}, {a}, {a}, is_causal={c})"
    return tpl.format(N="xp", a=a.name, c=causal), tpl.format(N="torch", a=a.name, c=causal), a.shape


@_op("nn.embedding")
def _embedding(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    """Rows of the 2-D table ``a`` picked by drawn indices (repeats included: their gradients add)."""
    if a.ndim != 2:
        return None
    idx = d(st.lists(st.integers(0, a.shape[0] - 1), min_size=1, max_size=4))
    return (f"xp.nn.functional.embedding(xp.asarray({idx!r}), {a.name})",
            f"torch.nn.functional.embedding(torch.tensor({idx!r}), {a.name})", (len(idx), a.shape[1]))


def _as_column(a: Val) -> tuple[str, str, int]:
    """``a`` as a one-channel (1, 1, n, 1) image: its xpgrad and torch spellings and ``n``."""
    n = math.prod(a.shape)
    return f"xp.reshape({a.name}, (1, 1, {n}, 1))", f"{a.name}.reshape(1, 1, {n}, 1)", n


def _window(kind: str) -> OpFn:
    """A convolution (``a``'s first two values are the kernel, so the weight's gradient is checked
    too) or a pooling over ``a`` laid out as a column image."""

    def fn(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
        x, tx, n = _as_column(a)
        if n < 2:
            return None
        if kind in ("conv2d", "conv_transpose2d"):
            w, tw = f"xp.reshape(xp.reshape({a.name}, (-1,))[:2], (1, 1, 2, 1))", f"{a.name}.reshape(-1)[:2].reshape(1, 1, 2, 1)"
            out = (1, 1, n - 1 if kind == "conv2d" else n + 1, 1)
            return (f"xp.nn.functional.{kind}({x}, {w})", f"torch.nn.functional.{kind}({tx}, {tw})", out)
        return (f"xp.nn.functional.{kind}({x}, (2, 1))", f"torch.nn.functional.{kind}({tx}, (2, 1))", (1, 1, n // 2, 1))

    return fn


for _kind in ("conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d"):
    _op(f"nn.{_kind}")(_window(_kind))


@_op("nn.scaled_dot_product_attention")
def _attention(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    """Self-attention over ``a``'s values as a sequence of one-feature tokens, causal or not."""
    n = math.prod(a.shape)
    causal = d(st.sampled_from([False, True]))
    q, tq = f"xp.reshape({a.name}, (1, {n}, 1))", f"{a.name}.reshape(1, {n}, 1)"
    return (f"xp.nn.functional.scaled_dot_product_attention({q}, {q}, {q}, is_causal={causal})",
            f"torch.nn.functional.scaled_dot_product_attention({tq}, {tq}, {tq}, is_causal={causal})", (1, n, 1))


@_op("nn.layer_norm")
def _layer_norm(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0 or a.shape[-1] < 2:
        return None
    k = a.shape[-1]
    return (f"xp.nn.functional.layer_norm({a.name}, ({k},))", f"torch.nn.functional.layer_norm({a.name}, ({k},))",
            a.shape)


@_op("nn.embedding")
def _embedding(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    """Rows of ``a`` as a one-column table, picked with a repeat (their gradients add up)."""
    n = math.prod(a.shape)
    if n < 2:
        return None
    return (f"xp.nn.functional.embedding(xp.asarray([[0, {n - 1}, 0]]), xp.reshape({a.name}, ({n}, 1)))",
            f"torch.nn.functional.embedding(torch.tensor([[0, {n - 1}, 0]]), {a.name}.reshape({n}, 1))", (1, 3, 1))


@_op("special.polygamma")
def _polygamma(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    n = d(st.sampled_from([1, 2]))
    xg, tc = _both("{N}.special.polygamma(" + str(n) + ", 0.5 + {a} * {a})", a=a.name)
    return xg, tc, a.shape


# ---------------------------------------------------------------- elementwise, binary
def _binary(name: str, tpl: str, *covers: str, torch_tpl: str | None = None) -> None:
    """``tpl`` uses ``{N}``, ``{a}`` and ``{b}``; ``b`` broadcasts with ``a``; ``torch_tpl``
    when torch's spelling differs."""

    def fn(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
        b = _partner(d, pool, a)
        xg = tpl.format(N="xp", a=a.name, b=b.name)
        tc = (torch_tpl or tpl).format(N="torch", a=a.name, b=b.name)
        return xg, tc, _bcast(a.shape, b.shape)  # type: ignore[return-value]

    _op(name, *(covers or (name,)))(fn)


#: the names of the fuzz ops made from registry entries (by `_from_registry`)
_DERIVED: set[str] = set()


def _from_registry() -> None:
    """The fuzz ops of the registry's entries as they are now (``fuzz=`` templates; a removed
    entry's op goes): binary where the template names ``{b}``, a pair when PyTorch spells it
    differently; they cover their function and the ones the template calls through the namespace."""
    from xpgrad.ops._registry import REGISTRY

    for name in _DERIVED - set(REGISTRY):
        OPS.pop(name, None)
    _DERIVED.intersection_update(REGISTRY)
    for op in REGISTRY.values():
        if op.fuzz is None:
            continue
        tpl, ttpl = (op.fuzz, None) if isinstance(op.fuzz, str) else op.fuzz
        covers = tuple(dict.fromkeys((op.name, *(n for n in re.findall(r"\{N\}\.([\w.]+)\(", tpl) if n in REGISTRY))))
        if "{b}" in tpl:
            _binary(op.name, tpl, *covers, torch_tpl=ttpl)
        else:
            _unary(op.name, tpl, *covers, torch_tpl=ttpl)
        _DERIVED.add(op.name)


_from_registry()


@_op("pow_int", "pow")
def _pow_int(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    e = d(st.sampled_from(["2", "3.0", "-1"]))
    if e == "-1":
        return f"(0.5 + {a.name} * {a.name}) ** -1", f"(0.5 + {a.name} * {a.name}) ** -1", a.shape
    return f"{a.name} ** {e}", f"{a.name} ** {e}", a.shape


@_op("clip")
def _clip(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    kind = d(st.sampled_from(["scalars", "both", "min", "max"]))
    b = _pick(d, pool, lambda v: _bcast(a.shape, v.shape) == a.shape, None)
    if kind == "scalars" or b is None:
        xg, tc = _both("{N}.clip({a}, -0.7, 0.9)", a=a.name)
    elif kind == "both":
        xg, tc = _both("{N}.clip({a}, {b} - 0.6, {b} + 0.6)", a=a.name, b=b.name)
    elif kind == "min":
        xg, tc = _both("{N}.clip({a}, min={b} + 0.31)", a=a.name, b=b.name)
    else:
        xg, tc = _both("{N}.clip({a}, max={b} + 0.31)", a=a.name, b=b.name)
    return xg, tc, a.shape


# ---------------------------------------------------------------- reductions
def _reduction(name: str, xg_fn: str, tc_fn: str, offsets: bool = False, *covers: str) -> None:
    def fn(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
        if a.ndim == 0:
            return None
        axis = _axes(d, a.ndim)
        keep = d(st.booleans())
        x_xg, x_tc = a.name, a.name
        if offsets:
            o_xg, o_tc = _off(a.shape)
            x_xg, x_tc = f"({a.name} + {o_xg})", f"({a.name} + {o_tc})"
        xg = f"{xg_fn}({x_xg}, axis={axis!r}, keepdims={keep})"
        tc = f"{tc_fn}({x_tc}, dim={_dims(axis, a.ndim)!r}, keepdim={keep})"
        return xg, tc, _reduced(a.shape, axis, keep)

    _op(name, *(covers or (name,)))(fn)


_reduction("sum", "xp.sum", "torch.sum")
_reduction("mean", "xp.mean", "torch.mean")
_reduction("max", "xp.max", "torch.amax", True)
_reduction("min", "xp.min", "torch.amin", True)
_reduction("special.logsumexp", "xp.special.logsumexp", "torch.logsumexp")


@_op("prod")
def _prod(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    keep = d(st.booleans())
    if d(st.booleans()):
        axis = _axis(d, a.ndim)
        return (f"xp.prod({a.name}, axis={axis}, keepdims={keep})",
                f"torch.prod({a.name}, dim={axis}, keepdim={keep})", _reduced(a.shape, axis, keep))
    out = _reduced(a.shape, None, keep)
    return f"xp.prod({a.name}, keepdims={keep})", f"torch.prod({a.name}).reshape({out!r})", out


def _var_like(name: str, offsets: bool, corrections: tuple[float, ...]) -> None:
    def fn(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
        if a.ndim == 0:
            return None
        axis = _axes(d, a.ndim)
        corr = d(st.sampled_from(corrections))
        if _count(a.shape, axis) < 2:
            return None
        keep = d(st.booleans())
        # bounded first: of large, nearly equal values (a prod of a constant slice, say, 8437 +-
        # 2) the deviations from the mean cancel catastrophically, and NumPy's and torch's
        # float64 sums then differ by 1e-9 relative, a conditioning fact, not a rule's error
        x_xg, x_tc = f"xp.tanh({a.name})", f"torch.tanh({a.name})"
        if offsets:  # std is singular at constant slices
            o_xg, o_tc = _off(a.shape)
            x_xg, x_tc = f"({x_xg} + {o_xg})", f"({x_tc} + {o_tc})"
        return (f"xp.{name}({x_xg}, axis={axis!r}, correction={corr}, keepdims={keep})",
                f"torch.{name}({x_tc}, dim={_dims(axis, a.ndim)!r}, correction={corr}, keepdim={keep})",
                _reduced(a.shape, axis, keep))

    _op(name, *((name, "std_sqrt") if name == "std" else (name,)))(fn)  # std's root is a primitive of its own


_var_like("var", False, (0.0, 0.5, 1.0))
_var_like("std", True, (0.0, 1.0))


@_op("vector_norm", "vector_norm")
def _vector_norm(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    axis = _axes(d, a.ndim)
    keep = d(st.booleans())
    ord_ = d(st.sampled_from(["2", "1", "inf", "-inf", "3", "0.5", "-1.5"]))
    o_xg, o_tc = _off(a.shape)
    return (f"xp.linalg.vector_norm({a.name} + 0.123 + {o_xg}, axis={axis!r}, keepdims={keep}, ord={ord_})",
            f"torch.linalg.vector_norm({a.name} + 0.123 + {o_tc}, dim={_dims(axis, a.ndim)!r}, keepdim={keep}, "
            f"ord={ord_})",
            _reduced(a.shape, axis, keep))


def _softmax(name: str) -> None:
    def fn(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
        if a.ndim == 0:
            return None
        axis = _axis(d, a.ndim)
        return (f"xp.special.{name}({a.name}, axis={axis})", f"torch.{name}({a.name}, dim={axis})", a.shape)

    _op(f"special.{name}")(fn)


_softmax("softmax")
_softmax("log_softmax")


def _cumulative(name: str, tname: str, init: str) -> None:
    def fn(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
        if a.ndim == 0:
            return None
        axis = _axis(d, a.ndim)
        inc = d(st.booleans())
        shape = list(a.shape)
        xg = f"xp.{name}({a.name}, axis={axis}, include_initial={inc})"
        tc = f"torch.{tname}({a.name}, dim={axis})"
        if inc:
            shape[axis] += 1
            tc = f"torch.cat([torch.{init}_like(torch.narrow({a.name}, {axis}, 0, 1)), {tc}], dim={axis})"
        return xg, tc, tuple(shape)

    _op(name)(fn)


_cumulative("cumulative_sum", "cumsum", "zeros")
_cumulative("cumulative_prod", "cumprod", "ones")


# ---------------------------------------------------------------- manipulation
@_op("reshape")
def _reshape(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    n = a.size
    dims: list[int] = []
    rest = n
    for _ in range(d(st.integers(0, 3))):
        f = d(st.sampled_from([k for k in range(1, rest + 1) if rest % k == 0]))
        dims.append(f)
        rest //= f
    dims.append(rest)
    shape = tuple(d(st.permutations(dims)))
    spelled = list(shape)
    if d(st.booleans()):
        spelled[d(st.integers(0, len(shape) - 1))] = -1
    return f"xp.reshape({a.name}, {tuple(spelled)!r})", f"torch.reshape({a.name}, {tuple(spelled)!r})", shape


@_op("expand_dims")
def _expand_dims(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    axis = d(st.integers(-a.ndim - 1, a.ndim))
    shape = list(a.shape)
    shape.insert(axis % (a.ndim + 1), 1)
    return f"xp.expand_dims({a.name}, axis={axis})", f"torch.unsqueeze({a.name}, {axis})", tuple(shape)


@_op("squeeze")
def _squeeze(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    unit = [i for i, s in enumerate(a.shape) if s == 1]
    if not unit:
        return None
    picked = tuple(d(st.lists(st.sampled_from(unit), min_size=1, max_size=len(unit), unique=True)))
    shape = tuple(s for i, s in enumerate(a.shape) if i not in picked)
    return f"xp.squeeze({a.name}, axis={picked!r})", f"torch.squeeze({a.name}, dim={picked!r})", shape


@_op("permute_dims")
def _permute(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    perm = tuple(d(st.permutations(range(a.ndim))))
    return (f"xp.permute_dims({a.name}, {perm!r})", f"torch.permute({a.name}, {perm!r})",
            tuple(a.shape[p] for p in perm))


@_op("moveaxis")
def _moveaxis(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    src, dst = _axis(d, a.ndim), _axis(d, a.ndim)
    shape = np.moveaxis(np.zeros(a.shape), src, dst).shape
    return f"xp.moveaxis({a.name}, {src}, {dst})", f"torch.moveaxis({a.name}, {src}, {dst})", shape


@_op("matrix_transpose")
def _mT(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim < 2:
        return None
    return f"xp.matrix_transpose({a.name})", f"{a.name}.mT", (*a.shape[:-2], a.shape[-1], a.shape[-2])


@_op("flip")
def _flip(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    axis = _axes(d, a.ndim) if a.ndim else None
    return f"xp.flip({a.name}, axis={axis!r})", f"torch.flip({a.name}, dims={_dims(axis, a.ndim)!r})", a.shape


@_op("roll")
def _roll(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0 or d(st.booleans()):
        shift = d(st.integers(-5, 5))
        return f"xp.roll({a.name}, {shift})", f"torch.roll({a.name}, {shift})", a.shape
    axes = tuple(d(st.lists(st.integers(0, a.ndim - 1), min_size=1, max_size=a.ndim, unique=True)))
    shift = tuple(d(st.integers(-5, 5)) for _ in axes)
    return (f"xp.roll({a.name}, {shift!r}, axis={axes!r})", f"torch.roll({a.name}, {shift!r}, dims={axes!r})",
            a.shape)


@_op("concat")
def _concat(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0 or d(st.integers(0, 3)) == 0:  # axis=None: flattened
        b = _pick(d, pool, lambda v: a.size + v.size <= MAX_SIZE, None)
        if b is None:
            return None
        return (f"xp.concat([{a.name}, {b.name}], axis=None)",
                f"torch.cat([{a.name}.reshape(-1), {b.name}.reshape(-1)])", (a.size + b.size,))
    axis = _axis(d, a.ndim)

    def fits(v: Val) -> bool:
        return v.ndim == a.ndim and all(s == t for i, (s, t) in enumerate(zip(a.shape, v.shape)) if i != axis % a.ndim)

    b = _pick(d, pool, fits, a)
    assert b is not None
    shape = list(a.shape)
    shape[axis] += b.shape[axis]
    return (f"xp.concat([{a.name}, {b.name}], axis={axis})", f"torch.cat([{a.name}, {b.name}], dim={axis})",
            tuple(shape))


@_op("stack")
def _stack(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    b = _pick(d, pool, lambda v: v.shape == a.shape, a)
    assert b is not None
    axis = d(st.integers(-a.ndim - 1, a.ndim))
    shape = list(a.shape)
    shape.insert(axis % (a.ndim + 1), 2)
    return (f"xp.stack([{a.name}, {b.name}], axis={axis})", f"torch.stack([{a.name}, {b.name}], dim={axis})",
            tuple(shape))


@_op("unstack")
def _unstack(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    axis = _axis(d, a.ndim)
    k = d(st.integers(0, a.shape[axis] - 1))
    shape = tuple(s for i, s in enumerate(a.shape) if i != axis % a.ndim)
    return f"xp.unstack({a.name}, axis={axis})[{k}]", f"torch.unbind({a.name}, dim={axis})[{k}]", shape


@_op("repeat")
def _repeat(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    r = d(st.integers(1, 3))
    if a.ndim == 0 or d(st.integers(0, 3)) == 0:
        return (f"xp.repeat({a.name}, {r})", f"torch.repeat_interleave({a.name}.reshape(-1), {r})", (a.size * r,))
    axis = _axis(d, a.ndim)
    shape = list(a.shape)
    shape[axis] *= r
    return (f"xp.repeat({a.name}, {r}, axis={axis})", f"torch.repeat_interleave({a.name}, {r}, dim={axis})",
            tuple(shape))


@_op("tile")
def _tile(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    reps = tuple(d(st.lists(st.integers(1, 2), min_size=0, max_size=a.ndim + 1)))
    shape = np.tile(np.zeros(a.shape), reps).shape
    return f"xp.tile({a.name}, {reps!r})", f"torch.tile({a.name}, {reps!r})", shape


@_op("broadcast_to")
def _broadcast_to(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    target = d(hnp.mutually_broadcastable_shapes(num_shapes=1, base_shape=a.shape, max_dims=a.ndim + 1,
                                                 max_side=3)).result_shape
    return f"xp.broadcast_to({a.name}, {target!r})", f"torch.broadcast_to({a.name}, {target!r})", tuple(target)


@_op("broadcast_arrays", "broadcast_arrays", "multiply", "add")
def _broadcast_arrays(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    b = _partner(d, pool, a)
    k = d(st.sampled_from(["0", "1", "both"]))
    sel = {"0": "{r}[0]", "1": "{r}[1]", "both": "{r}[0] * 2.0 + {r}[1]"}[k]
    return (sel.format(r=f"xp.broadcast_arrays({a.name}, {b.name})"),
            sel.format(r=f"torch.broadcast_tensors({a.name}, {b.name})"), _bcast(a.shape, b.shape))  # type: ignore[return-value]


@_op("meshgrid", "meshgrid", "reshape")
def _meshgrid(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    b = _pick(d, pool, lambda v: a.size * v.size <= MAX_SIZE, None)
    if b is None:
        return None
    indexing = d(st.sampled_from(["xy", "ij"]))
    k = d(st.integers(0, 1))
    shape = (a.size, b.size) if indexing == "ij" else (b.size, a.size)
    return (f"xp.meshgrid(xp.reshape({a.name}, (-1,)), xp.reshape({b.name}, (-1,)), indexing={indexing!r})[{k}]",
            f"torch.meshgrid({a.name}.reshape(-1), {b.name}.reshape(-1), indexing={indexing!r})[{k}]", shape)


def _tri(name: str) -> None:
    def fn(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
        if a.ndim < 2:
            return None
        k = d(st.integers(-2, 2))
        return f"xp.{name}({a.name}, k={k})", f"torch.{name}({a.name}, diagonal={k})", a.shape

    _op(name)(fn)


_tri("tril")
_tri("triu")


@_op("diff")
def _diff(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    axis = _axis(d, a.ndim)
    if a.shape[axis] < 2:
        return None
    n = d(st.integers(1, min(3, a.shape[axis] - 1)))
    shape = list(a.shape)
    shape[axis] -= n
    return f"xp.diff({a.name}, axis={axis}, n={n})", f"torch.diff({a.name}, n={n}, dim={axis})", tuple(shape)


@_op("sort")
def _sort(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    axis = _axis(d, a.ndim)
    desc = d(st.booleans())
    stable = d(st.booleans())
    o_xg, o_tc = _off(a.shape)
    return (f"xp.sort({a.name} + {o_xg}, axis={axis}, descending={desc}, stable={stable})",
            f"torch.sort({a.name} + {o_tc}, dim={axis}, descending={desc}, stable=True).values", a.shape)


# ---------------------------------------------------------------- indexing
def _slice(d: Draw, n: int) -> slice:
    start = d(st.one_of(st.none(), st.integers(-n, n - 1)))
    stop = d(st.one_of(st.none(), st.integers(-n, n)))
    step = d(st.sampled_from([None, 1, 2]))
    return slice(start, stop, step)


def _basic_key(d: Draw, shape: Shape, none: bool) -> tuple[Any, ...]:
    parts: list[Any] = []
    for n in shape:
        parts.append(d(st.integers(-n, n - 1)) if d(st.booleans()) else _slice(d, n))
    if shape and d(st.booleans()):
        a = d(st.integers(0, len(shape)))
        c = d(st.integers(a, len(shape)))
        parts[a:c] = [Ellipsis]
    for _ in range(d(st.integers(0, 1)) if none else 0):
        parts.insert(d(st.integers(0, len(parts))), None)
    return tuple(parts)


def _key_src(key: tuple[Any, ...]) -> str:
    def one(k: Any) -> str:
        if k is Ellipsis:
            return "..."
        if k is None:
            return "None"
        if isinstance(k, slice):
            start = "" if k.start is None else str(k.start)
            stop = "" if k.stop is None else str(k.stop)
            return f"{start}:{stop}" if k.step is None else f"{start}:{stop}:{k.step}"
        return str(k)

    if not key:
        return "..."
    return ", ".join(one(k) for k in key) + ("," if len(key) == 1 else "")


@_op("getitem")
def _getitem(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    key = _basic_key(d, a.shape, none=True)
    shape = np.zeros(a.shape)[key].shape
    if not _ok(shape):
        return None
    src = _key_src(key)
    return f"{a.name}[{src}]", f"{a.name}[{src}]", shape


@_op("getitem_int_array", "getitem")
def _getitem_array(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    """One integer-array index, integers on the other axes (every library reads that alike)."""
    if a.ndim == 0:
        return None
    pos = d(st.integers(0, a.ndim - 1))
    n = a.shape[pos]
    idx = d(st.lists(st.integers(-n, n - 1), min_size=1, max_size=5))
    ints = [d(st.integers(-s, s - 1)) for s in a.shape]
    parts_xg = [str(i) for i in ints]
    parts_tc = list(parts_xg)
    parts_xg[pos] = f"xp.asarray({idx!r})"
    parts_tc[pos] = f"torch.tensor({idx!r})"
    return f"{a.name}[{', '.join(parts_xg)}]", f"{a.name}[{', '.join(parts_tc)}]", (len(idx),)


@_op("setitem")
def _setitem(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    key = _basic_key(d, a.shape, none=False)
    target = np.zeros(a.shape)[key].shape
    v = _pick(d, pool, lambda v: _bcast(v.shape, target) == target, None)
    src = _key_src(key)
    name_xg, _ = bld.let(f"{a.name} * 1.0", f"{a.name}.clone()")
    if v is None:
        val_xg, val_tc = _both("{N}.sum({v})", v=d(st.sampled_from(pool)).name)
    else:
        val_xg = val_tc = v.name
    bld.xg.append(f"{name_xg}[{src}] = {val_xg}")
    bld.tc.append(f"{name_xg}[{src}] = {val_tc}")
    return name_xg, name_xg, a.shape


# In-place updates, and writes through views (issue 17): each step copies a value (``a * 1.0``: a
# fresh array, never an input), updates the copy in place or writes through a view of it, and
# returns the copy. Both libraries carry a write through a view (a slice, an integer index, a
# reshape, a transpose, a view of a view) back to its base and differentiate through it (torch's
# CopySlices; xpgrad's Tensor._inplace). The views drawn are views on NumPy, PyTorch and
# array-api-strict alike; JAX and Dask make copies there (BACKEND_EXCLUDED).
def _update_value(d: Draw, pool: list[Val], target: Shape) -> tuple[str, str]:
    """A value for an update of shape ``target``: a pool value broadcasting to it, else a sum."""
    v = _pick(d, pool, lambda v: _bcast(v.shape, target) == target, None)
    if v is None:
        return _both("0.3 * {N}.sum({v})", v=d(st.sampled_from(pool)).name)
    return f"0.5 * {v.name}", f"0.5 * {v.name}"


@_op("inplace", "add", "subtract", "multiply", "divide")
def _inplace(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    op = d(st.sampled_from(["+=", "-=", "*=", "/="]))
    val_xg, val_tc = _update_value(d, pool, a.shape)
    if op == "/=":
        val_xg, val_tc = f"(1.5 + {val_xg} * {val_xg})", f"(1.5 + {val_tc} * {val_tc})"
    name, _ = bld.let(f"{a.name} * 1.0", f"{a.name} * 1.0")
    bld.xg.append(f"{name} {op} {val_xg}")
    bld.tc.append(f"{name} {op} {val_tc}")
    return name, name, a.shape


@_op("view_write", "getitem", "setitem", "reshape", "matrix_transpose", "multiply", "add")
def _view_write(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    # a C-ordered copy: a NumPy product keeps its operand's layout (a Fortran-ordered FFT
    # output, say), and a reshape of that would be a copy where torch's is a view
    flat_src = f"reshape({a.name}, ({a.size},)) * 1.0, {a.shape!r})"
    name, _ = bld.let(f"xp.reshape(xp.{flat_src}", f"torch.reshape(torch.{flat_src}")
    kind = d(st.sampled_from(["slice", "slice", "flat", "mT"]))
    if kind == "flat":  # a reshape of the copy (a view), then a slice of that
        vx, vt = bld.let(f"xp.reshape({name}, ({a.size},))", f"torch.reshape({name}, ({a.size},))")
        shape: Shape = (a.size,)
    elif kind == "mT" and a.ndim >= 2:
        vx, vt = bld.let(f"xp.matrix_transpose({name})", f"{name}.mT")
        shape = (*a.shape[:-2], a.shape[-1], a.shape[-2])
    else:
        vx, vt, shape = name, name, a.shape
    key = _basic_key(d, shape, none=False)
    if all(isinstance(k, int) for k in key):
        # an integer on every axis is a NumPy scalar (a copy) where torch gives a 0-d view;
        # with a trailing ``...`` both give a 0-d view
        key = (*key, Ellipsis)
    target = np.zeros(shape)[key].shape
    if math.prod(target) == 0:
        return None
    src = _key_src(key)
    wx, wt = bld.let(f"{vx}[{src}]", f"{vt}[{src}]")
    op = d(st.sampled_from(["+=", "*=", "[...] ="]))
    val_xg, val_tc = _update_value(d, pool, target)
    bld.xg.append(f"{wx} {op} {val_xg}")
    bld.tc.append(f"{wt} {op} {val_tc}")
    return name, name, a.shape


@_op("take")
def _take(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    axis = _axis(d, a.ndim)
    n = a.shape[axis]
    idx = d(st.lists(st.integers(0, n - 1), min_size=1, max_size=5))
    shape = list(a.shape)
    shape[axis] = len(idx)
    if not _ok(tuple(shape)):
        return None
    return (f"xp.take({a.name}, xp.asarray({idx!r}), axis={axis})",
            f"torch.index_select({a.name}, {axis % a.ndim}, torch.tensor({idx!r}))", tuple(shape))


@_op("take_along_axis")
def _take_along(d: Draw, b: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    axis = _axis(d, a.ndim)
    shape = list(a.shape)
    shape[axis] = d(st.integers(1, 3))
    if not _ok(tuple(shape)):
        return None
    n = a.shape[axis]
    idx = np.array(d(st.lists(st.integers(0, n - 1), min_size=math.prod(shape), max_size=math.prod(shape))),
                   dtype=np.int64).reshape(shape)
    lit = repr(idx.tolist())
    return (f"xp.take_along_axis({a.name}, xp.asarray({lit}), axis={axis})",
            f"torch.take_along_dim({a.name}, torch.tensor({lit}), dim={axis})", tuple(shape))


# ---------------------------------------------------------------- linear algebra (main namespace)
@_op("matmul")
def _matmul(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    k = a.shape[-1]

    def fits(v: Val) -> bool:
        if v.ndim == 0:
            return False
        if v.ndim == 1:
            return v.shape[0] == k
        return v.shape[-2] == k and (a.ndim == 1 or _bcast(a.shape[:-2], v.shape[:-2]) is not None)

    b = _pick(d, pool, fits, None)
    if b is None:
        if a.ndim == 1:
            b = a
            bx = bt = a.name
            bshape = a.shape
        else:
            bx, bt = f"xp.matrix_transpose({a.name})", f"{a.name}.mT"
            bshape = (*a.shape[:-2], a.shape[-1], a.shape[-2])
    else:
        bx = bt = b.name
        bshape = b.shape
    try:
        shape = np.matmul(np.zeros(a.shape), np.zeros(bshape)).shape
    except ValueError:
        return None
    if not _ok(shape) and shape != ():
        return None
    return f"xp.matmul({a.name}, {bx})", f"torch.matmul({a.name}, {bt})", shape


@_op("vecdot")
def _vecdot(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim == 0:
        return None
    b = _pick(d, pool, lambda v: v.ndim >= 1 and v.shape[-1] == a.shape[-1] and _bcast(a.shape, v.shape) is not None,
              a)
    assert b is not None
    shape = _bcast(a.shape, b.shape)[:-1]  # type: ignore[index]
    return f"xp.vecdot({a.name}, {b.name})", f"torch.linalg.vecdot({a.name}, {b.name})", shape


@_op("tensordot")
def _tensordot(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    b = d(st.sampled_from(pool))
    pairs: list[tuple[int, int]] = []
    free_b = list(range(b.ndim))
    for i in d(st.permutations(range(a.ndim))):
        cands = [j for j in free_b if b.shape[j] == a.shape[i]]
        if cands and d(st.booleans()):
            j = d(st.sampled_from(cands))
            free_b.remove(j)
            pairs.append((i, j))
    ax = ([p[0] for p in pairs], [p[1] for p in pairs])
    shape = np.tensordot(np.zeros(a.shape), np.zeros(b.shape), axes=ax).shape
    if not _ok(shape) and shape != ():
        return None
    return (f"xp.tensordot({a.name}, {b.name}, axes=({ax[0]!r}, {ax[1]!r}))",
            f"torch.tensordot({a.name}, {b.name}, dims=({ax[0]!r}, {ax[1]!r}))", shape)


# ---------------------------------------------------------------- linalg extension
def _cond(bld: _Builder, a: Val, square: bool, sym: bool = False) -> tuple[str, Shape]:
    """A well-conditioned matrix from ``a``'s trailing matrices (see the module docstring)."""
    m, n = a.shape[-2:]
    sl = ""
    if square and m != n:
        m = n = min(m, n)
        sl = f"[..., :{m}, :{n}]"
    dx, dt = _diag(m, n)
    name, _ = bld.let(f"0.1 * xp.tanh({a.name}{sl}) + {dx}", f"0.1 * torch.tanh({a.name}{sl}) + {dt}")
    if sym:
        bld.xg.append(f"{name} = ({name} + xp.matrix_transpose({name})) / 2")
        bld.tc.append(f"{name} = ({name} + {name}.mT) / 2")
    return name, (*a.shape[:-2], m, n)


def _linalg(name: str, *covers: str, square: bool = True, sym: bool = False) -> Callable[[Callable[..., Out]], None]:
    """Ops on a conditioned matrix ``c`` of shape ``shape``: ``fn(d, bld, c, shape, a, pool)``."""

    def deco(fn: Callable[..., Out]) -> None:
        def op(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
            if a.ndim < 2:
                return None
            c, shape = _cond(bld, a, square, sym)
            return fn(d, bld, c, shape, a, pool)  # type: ignore[no-any-return]

        _op(name, *(covers or (name,)))(op)

    return deco


@_linalg("inv")
def _inv(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    return f"xp.linalg.inv({c})", f"torch.linalg.inv({c})", shape


@_linalg("det")
def _det(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    return f"xp.linalg.det({c})", f"torch.linalg.det({c})", shape[:-2]


@_linalg("slogdet")
def _slogdet(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    return (f"xp.linalg.slogdet({c}).logabsdet + xp.linalg.slogdet({c}).sign",
            f"torch.linalg.slogdet({c}).logabsdet + torch.linalg.slogdet({c}).sign", shape[:-2])


@_linalg("solve")
def _solve(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    n = shape[-1]
    batch = shape[:-2]
    b = _pick(d, pool, lambda v: (v.ndim == 1 and v.shape[0] == n) or (
        v.ndim >= 2 and v.shape[-2] == n and _bcast(batch, v.shape[:-2]) is not None), None)
    if b is None:
        return None
    if b.ndim == 1:
        return f"xp.linalg.solve({c}, {b.name})", f"torch.linalg.solve({c}, {b.name})", (*batch, n)
    full = (*_bcast(batch, b.shape[:-2]),)  # type: ignore[misc]
    out = (*full, n, b.shape[-1])
    # torch reads a b of shape a.shape[:-1] as a batch of vectors: expand the batches so it cannot
    return (f"xp.linalg.solve({c}, {b.name})",
            f"torch.linalg.solve({c}.expand({(*full, n, n)!r}), {b.name}.expand({out!r}))", out)


@_linalg("cholesky", sym=True)
def _cholesky(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    upper = d(st.booleans())
    return f"xp.linalg.cholesky({c}, upper={upper})", f"torch.linalg.cholesky({c}, upper={upper})", shape


@_linalg("eigh", sym=True)
def _eigh(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    part = d(st.sampled_from(["values", "vectors", "function"]))
    e, _ = bld.let(f"xp.linalg.eigh({c})", f"torch.linalg.eigh({c})")
    if part == "values":
        return f"{e}.eigenvalues", f"{e}.eigenvalues", shape[:-1]
    if part == "vectors":  # |V|^2 weighted by the eigenvalues: sign-gauge invariant
        return (f"{e}.eigenvectors ** 2 * {e}.eigenvalues[..., None, :]",
                f"{e}.eigenvectors ** 2 * {e}.eigenvalues[..., None, :]", shape)
    return (f"xp.matmul({e}.eigenvectors * xp.exp({e}.eigenvalues / 4)[..., None, :], "
            f"xp.matrix_transpose({e}.eigenvectors))",
            f"({e}.eigenvectors * torch.exp({e}.eigenvalues / 4)[..., None, :]) @ {e}.eigenvectors.mT", shape)


@_linalg("eigvalsh", sym=True)
def _eigvalsh(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    return f"xp.linalg.eigvalsh({c})", f"torch.linalg.eigvalsh({c})", shape[:-1]


# eig returns its eigenpairs in no canonical order (LAPACK's order follows rounding-level
# perturbations of a nearly triangular matrix): the outputs enter order-invariantly
@_linalg("eig", "eig", "real", "imag", "sum")
def _eig(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    e, _ = bld.let(f"xp.linalg.eig({c})", f"torch.linalg.eig({c})")
    z, _ = bld.let(f"xp.sum({e}.eigenvalues[..., None, :] * (xp.real({e}.eigenvectors) ** 2 "
                   f"+ xp.imag({e}.eigenvectors) ** 2), axis=-1)",
                   f"torch.sum({e}.eigenvalues[..., None, :] * ({e}.eigenvectors.real ** 2 "
                   f"+ {e}.eigenvectors.imag ** 2), dim=-1)")
    return f"xp.real({z}) + 0.5 * xp.imag({z})", f"{z}.real + 0.5 * {z}.imag", shape[:-1]


@_linalg("eigvals", "eigvals", "real", "imag", "sort", "sum")
def _eigvals(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    z, _ = bld.let(f"xp.linalg.eigvals({c})", f"torch.linalg.eigvals({c})")
    return (f"xp.sort(xp.real({z}), axis=-1) + 0.5 * xp.sum(xp.imag({z}), axis=-1, keepdims=True)",
            f"torch.sort({z}.real, dim=-1).values + 0.5 * torch.sum({z}.imag, dim=-1, keepdim=True)", shape[:-1])


@_linalg("svd", square=False)
def _svd(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    full = d(st.booleans())
    part = d(st.sampled_from(["S", "U", "Vh", "polar"]))
    k = min(shape[-2:])
    r, _ = bld.let(f"xp.linalg.svd({c}, full_matrices={full})", f"torch.linalg.svd({c}, full_matrices={full})")
    u, s, vh = f"{r}.U[..., :, :{k}]", f"{r}.S", f"{r}.Vh[..., :{k}, :]"
    if part == "S":
        return s, s, (*shape[:-2], k)
    if part == "U":
        return f"{u} ** 2 * {s}[..., None, :]", f"{u} ** 2 * {s}[..., None, :]", (*shape[:-2], shape[-2], k)
    if part == "Vh":
        return f"{vh} ** 2 * {s}[..., :, None]", f"{vh} ** 2 * {s}[..., :, None]", (*shape[:-2], k, shape[-1])
    return f"xp.matmul({u}, {vh})", f"{u} @ {vh}", shape


@_linalg("svdvals", square=False)
def _svdvals(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    return f"xp.linalg.svdvals({c})", f"torch.linalg.svdvals({c})", (*shape[:-2], min(shape[-2:]))


@_linalg("qr", square=False)
def _qr(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    part = d(st.sampled_from(["Q", "R", "both"]))
    r, _ = bld.let(f"xp.linalg.qr({c})", f"torch.linalg.qr({c})")
    m, n = shape[-2:]
    k = min(m, n)
    # the factors with R's diagonal made positive (Q D, D R with D = sign(diag R)): LAPACK's
    # Householder signs flip between libraries where a column is exactly triangular already
    # (a structural zero, 0 in one library and 1e-17 in the other); the thorough fuzz met one
    sg, _ = bld.let(f"xp.sign(xp.linalg.diagonal({r}.R))", f"torch.sign(torch.diagonal({r}.R, dim1=-2, dim2=-1))")
    q, _ = bld.let(f"{r}.Q * {sg}[..., None, :]", f"{r}.Q * {sg}[..., None, :]")
    rr, _ = bld.let(f"{r}.R * {sg}[..., :, None]", f"{r}.R * {sg}[..., :, None]")
    if part == "Q":
        return q, q, (*shape[:-2], m, k)
    if part == "R":
        return rr, rr, (*shape[:-2], k, n)
    return f"xp.matmul({q}, {rr} ** 2)", f"{q} @ {rr} ** 2", shape


@_linalg("pinv", square=False)
def _pinv(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    return f"xp.linalg.pinv({c})", f"torch.linalg.pinv({c})", (*shape[:-2], shape[-1], shape[-2])


@_linalg("matrix_power")
def _matrix_power(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    n = d(st.integers(-3, 4))
    return f"xp.linalg.matrix_power({c}, {n})", f"torch.linalg.matrix_power({c}, {n})", shape


@_linalg("matrix_norm_svd", "matrix_norm", "svdvals", square=False)
def _matrix_norm_svd(d: Draw, bld: _Builder, c: str, shape: Shape, a: Val, pool: list[Val]) -> Out:
    ord_ = d(st.sampled_from(["2", "-2", "'nuc'"]))
    keep = d(st.booleans())
    out = (*shape[:-2], 1, 1) if keep else shape[:-2]
    return (f"xp.linalg.matrix_norm({c}, ord={ord_}, keepdims={keep})",
            f"torch.linalg.matrix_norm({c}, ord={ord_}, keepdim={keep})", out)


@_op("matrix_norm")
def _matrix_norm(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim < 2:
        return None
    ord_ = d(st.sampled_from(["'fro'", "1", "-1", "inf", "-inf"]))
    keep = d(st.booleans())
    o_xg, o_tc = _off(a.shape)
    out = (*a.shape[:-2], 1, 1) if keep else a.shape[:-2]
    return (f"xp.linalg.matrix_norm({a.name} + 0.123 + {o_xg}, ord={ord_}, keepdims={keep})",
            f"torch.linalg.matrix_norm({a.name} + 0.123 + {o_tc}, ord={ord_}, keepdim={keep})", out)


@_op("cross")
def _cross(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    threes = [i - a.ndim for i, s in enumerate(a.shape) if s == 3]
    if not threes:
        return None
    axis = d(st.sampled_from(threes))

    def fits(v: Val) -> bool:
        return v.ndim >= -axis and v.shape[axis] == 3 and _ok(_bcast(a.shape, v.shape))

    b = _pick(d, pool, fits, None)
    if b is None:
        bx, bt, bshape = f"xp.flip({a.name}, axis={axis})", f"torch.flip({a.name}, dims=({axis},))", a.shape
    else:
        bx = bt = b.name
        bshape = b.shape
    shape = _bcast(a.shape, bshape)
    return (f"xp.linalg.cross({a.name}, {bx}, axis={axis})",
            f"torch.linalg.cross(*torch.broadcast_tensors({a.name}, {bt}), dim={axis})", shape)  # type: ignore[return-value]


@_op("outer", "outer", "reshape")
def _outer(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    b = _pick(d, pool, lambda v: a.size * v.size <= MAX_SIZE, None)
    if b is None:
        return None
    return (f"xp.linalg.outer(xp.reshape({a.name}, (-1,)), xp.reshape({b.name}, (-1,)))",
            f"torch.outer({a.name}.reshape(-1), {b.name}.reshape(-1))", (a.size, b.size))


@_op("diagonal")
def _diagonal(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim < 2:
        return None
    m, n = a.shape[-2:]
    off = d(st.integers(-m + 1, n - 1))
    k = len(np.diagonal(np.zeros((m, n)), offset=off))
    return (f"xp.linalg.diagonal({a.name}, offset={off})", f"torch.diagonal({a.name}, {off}, -2, -1)",
            (*a.shape[:-2], k))


@_op("trace")
def _trace(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
    if a.ndim < 2:
        return None
    m, n = a.shape[-2:]
    off = d(st.integers(-m + 1, n - 1))
    return (f"xp.linalg.trace({a.name}, offset={off})", f"torch.diagonal({a.name}, {off}, -2, -1).sum(-1)",
            a.shape[:-2])


# ---------------------------------------------------------------- fft
_NORMS = ["'backward'", "'ortho'", "'forward'"]


def _fft1(name: str, kind: str) -> None:
    """kind: c2c (fft, ifft), r2c (rfft, ihfft), c2r (irfft, hfft)."""

    def fn(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
        if a.ndim == 0:
            return None
        axis = _axis(d, a.ndim)
        m = a.shape[axis]
        ns: list[Any] = list(range(1, 7))
        if kind != "c2r" or m >= 2:
            ns.append(None)
        n = d(st.sampled_from(ns))
        norm = d(st.sampled_from(_NORMS))
        shape = list(a.shape)
        if kind == "c2c":
            shape[axis] = m if n is None else n
        elif kind == "r2c":
            shape[axis] = (m if n is None else n) // 2 + 1
        else:
            shape[axis] = 2 * (m - 1) if n is None else n
        if not _ok(tuple(shape)):
            return None
        x_xg, x_tc = a.name, a.name
        if kind != "r2c":
            x_xg = f"xp.astype({a.name}, xp.complex128) * (0.6 + 0.8j)"
            x_tc = f"{a.name}.to(torch.complex128) * (0.6 + 0.8j)"
        xg = f"xp.fft.{name}({x_xg}, n={n}, axis={axis}, norm={norm})"
        tc = f"torch.fft.{name}({x_tc}, n={n}, dim={axis}, norm={norm})"
        if kind != "c2r":
            z, _ = bld.let(xg, tc)
            xg, tc = f"xp.real({z} * (0.6 - 0.8j))", f"torch.real({z} * (0.6 - 0.8j))"
        return xg, tc, tuple(shape)

    covers = (name, "astype", "real") if kind != "r2c" else (name, "real")
    _op(name, *covers)(fn)


for _n, _k in [("fft", "c2c"), ("ifft", "c2c"), ("rfft", "r2c"), ("ihfft", "r2c"), ("irfft", "c2r"),
               ("hfft", "c2r")]:
    _fft1(_n, _k)


def _fftn(name: str, kind: str) -> None:
    def fn(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
        if a.ndim == 0:
            return None
        nd = a.ndim
        perm = d(st.permutations(range(nd)))
        k = d(st.integers(1, nd))
        axes = tuple(p - nd if d(st.booleans()) else p for p in perm[:k])
        s: Any = None
        if d(st.booleans()) or (kind == "c2r" and a.shape[axes[-1]] < 2):
            s = tuple(d(st.integers(1, 5)) for _ in axes)
        norm = d(st.sampled_from(_NORMS))
        shape = list(a.shape)
        for i, ax in enumerate(axes):
            shape[ax] = a.shape[ax] if s is None else s[i]
        last = axes[-1]
        if kind == "r2c":
            shape[last] = shape[last] // 2 + 1
        elif kind == "c2r" and s is None:
            shape[last] = 2 * (a.shape[last] - 1)
        if not _ok(tuple(shape)):
            return None
        x_xg, x_tc = a.name, a.name
        if kind != "r2c":
            x_xg = f"xp.astype({a.name}, xp.complex128) * (0.6 + 0.8j)"
            x_tc = f"{a.name}.to(torch.complex128) * (0.6 + 0.8j)"
        xg = f"xp.fft.{name}({x_xg}, s={s!r}, axes={axes!r}, norm={norm})"
        tc = f"torch.fft.{name}({x_tc}, s={s!r}, dim={axes!r}, norm={norm})"
        if kind != "c2r":
            z, _ = bld.let(xg, tc)
            xg, tc = f"xp.real({z} * (0.6 - 0.8j))", f"torch.real({z} * (0.6 - 0.8j))"
        return xg, tc, tuple(shape)

    _op(name, name, "real")(fn)


for _n, _k in [("fftn", "c2c"), ("ifftn", "c2c"), ("rfftn", "r2c"), ("irfftn", "c2r")]:
    _fftn(_n, _k)


def _shift(name: str) -> None:
    def fn(d: Draw, bld: _Builder, a: Val, pool: list[Val]) -> Out:
        if a.ndim == 0:
            return None
        axes = _axes(d, a.ndim)
        return (f"xp.fft.{name}({a.name}, axes={axes!r})", f"torch.fft.{name}({a.name}, dim={axes!r})", a.shape)

    _op(name)(fn)


_shift("fftshift")
_shift("ifftshift")


# ---------------------------------------------------------------- programs
_TORCH_TRIGAMMA = ("torch's trigamma (polygamma(1, x), also the derivative of its digamma) has a relative "
                   "error of ~5e-10 (0.5 + 4.8e-10 against SciPy at x = 0.5), which a chain amplifies past "
                   "1e-9; xpgrad's special functions are checked against SciPy in tests/test_special.py and "
                   "on every backend by the backend fuzz")

#: ops left out of the comparison with torch, with the reason (torch's own inaccuracy)
TORCH_EXCLUDED: dict[str, str] = {
    "special.digamma": _TORCH_TRIGAMMA,
    "special.polygamma": _TORCH_TRIGAMMA,
}

#: ops whose second derivative torch gets from its trigamma: programs with them are
#: compared with torch without the HVP (values and gradients only)
TORCH_NO_HVP: dict[str, str] = {"special.gammaln": _TORCH_TRIGAMMA}

#: ops left out of the vmap(grad) comparison with torch.func, with the reason
VMAP_EXCLUDED: dict[str, str] = {
    "inplace": "torch.func.vmap refuses in-place updates of an unbatched tensor by a batched one, which the "
               "programs' updates of their inputs become; xpgrad's in-place updates under vmap are tested in "
               "tests/test_vmap_indexing.py",
    "view_write": "as inplace: writes through views into unbatched bases",
    "roll": "torch.func.vmap's roll of a 0-D example rolls across the batch (torch 2.13: "
            "vmap(lambda r: torch.roll(r, -2))(torch.arange(3.)) gives [2, 0, 1], a loop [0, 1, 2]); "
            "xpgrad's roll under vmap is checked against loops in tests/test_vmap_rules.py",
}

#: ops a backend cannot run (its own limitation), with the reason; the backend fuzz
#: draws programs without them
_DASK_FFT = ("dask.array.fft transforms only along an axis held in one chunk, and the fuzz splits every "
             "axis in two chunks for the raw run; xpgrad's transforms rechunk (tests/test_transform_idioms_bound.py "
             "checks them on such arrays)")
_DASK_CHUNKS = "Dask's linalg decompositions need 2-D arrays with square (or single-column) chunks"
_DASK_SVD = "Dask's svd supports neither full_matrices=True nor batches (svdvals and the 2-norms call it)"


def _dask_missing(name: str) -> str:
    return f"array_api_compat.dask.array.linalg has no {name}"


_COPIES = ("{lib}'s slices and reshapes are copies (its arrays are {why}): a write through one stays "
           "there, as in {lib} itself (docs/concepts/inplace.md), where NumPy's reaches the base")

BACKEND_EXCLUDED: dict[str, dict[str, str]] = {
    "jax": {"view_write": _COPIES.format(lib="JAX", why="immutable")},
    "dask": {
        "view_write": _COPIES.format(lib="Dask", why="task graphs; __setitem__ rebuilds only its own"),
        **{f: _DASK_FFT for f in ("fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft",
                                  "ihfft")},
        **{f: _DASK_CHUNKS for f in ("inv", "solve", "cholesky", "qr")},
        **{f: _dask_missing(f) for f in ("det", "slogdet", "eigh", "eigvalsh", "eig", "eigvals", "pinv",
                                         "matrix_power", "cross")},
        **{f: _DASK_SVD for f in ("svd", "svdvals", "matrix_norm_svd")},
        "take_along_axis": "array_api_compat's Dask namespace has no take_along_axis",
    },
}


def programs(ops: list[str] | None = None, max_steps: int = MAX_STEPS,
             no_hvp: Any = ()) -> st.SearchStrategy[Program]:
    """Random programs using the ops named in ``ops`` (default: all of :data:`OPS`);
    a program with an op in ``no_hvp`` gets no Hessian-vector product."""
    names = sorted(OPS) if ops is None else list(ops)

    @st.composite
    def draw_program(draw: Draw) -> Program:
        n_in = draw(st.integers(1, 3))
        shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=n_in, min_dims=0, max_dims=3, min_side=1,
                                                        max_side=3)).input_shapes
        pool = [Val(f"x{i}", tuple(s)) for i, s in enumerate(shapes)]
        used: set[str] = set()
        steps: list[Step] = []
        for k in range(draw(st.integers(1, max_steps))):
            for _attempt in range(8):
                # mostly the newest value (deep chains), sometimes any earlier one
                a = pool[-1] if draw(st.booleans()) else draw(st.sampled_from(pool))
                op = OPS[draw(st.sampled_from(names))]
                bld = _Builder(k)
                out = op.fn(draw, bld, a, pool)
                if out is None or not _ok(out[2]):
                    continue
                xg, tc, shape = out
                val = Val(f"v{k}", tuple(shape))
                text = " ".join([*bld.xg, xg])
                args = tuple(v.name for v in pool if _uses(text, v.name))
                steps.append(Step(op.name, op.covers, val, [*bld.xg, f"{val.name} = {xg}"],
                                  [*bld.tc, f"{val.name} = {tc}"], args))
                used.update(args)
                pool.append(val)
                break
        if not steps:  # every attempt failed: one elementwise step
            a = pool[-1]
            steps.append(Step("sin", ("sin",), Val("v0", a.shape), [f"v0 = xp.sin({a.name})"],
                              [f"v0 = torch.sin({a.name})"], (a.name,)))
            pool.append(steps[-1].out)
        sinks = [s.out.name for s in steps if s.out.name not in used]
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        inputs = [rng.uniform(-1.5, 1.5, s) for s in shapes]
        shape_of = {s.out.name: s.out.shape for s in steps}
        weights = [rng.standard_normal(shape_of[v]) for v in sinks]
        hvp = draw(st.sampled_from(["none", "none", "fwd", "rev"]))
        if any(s.op in no_hvp for s in steps):
            hvp = "none"
        tangents = [rng.standard_normal(s) for s in shapes] if hvp != "none" else []
        return Program(inputs, steps, sinks, weights, hvp, tangents)

    return draw_program()


def _uses(text: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


def from_source(inputs: list[np.ndarray], xg_src: str, tc_src: str, hvp: str = "none", seed: int = 0) -> Program:
    """A program written by hand (a regression test): steps end at lines ``vK = ...``;
    the loss weighs the last value with weights drawn from ``seed``."""

    def split(src: str) -> list[list[str]]:
        groups: list[list[str]] = [[]]
        for ln in (ln.strip() for ln in src.strip().splitlines()):
            groups[-1].append(ln)
            if re.match(r"^v\d+ = ", ln):
                groups.append([])
        return [g for g in groups if g]

    import xpgrad

    xg_steps, tc_steps = split(xg_src), split(tc_src)
    steps = [Step("source", (), Val(g[-1].split(" = ")[0], ()), g, t, ()) for g, t in zip(xg_steps, tc_steps)]
    prog = Program([np.asarray(a, dtype=np.float64) for a in inputs], steps, [steps[-1].out.name], [np.ones(())])
    _, vals = prog.compile("xpgrad", {"xp": xpgrad})(*prog.inputs, 1.0)
    rng = np.random.default_rng(seed)
    prog.weights = [rng.standard_normal(np.shape(vals[-1].data))]
    prog.hvp = hvp
    prog.tangents = [rng.standard_normal(a.shape) for a in prog.inputs] if hvp != "none" else []
    return prog
