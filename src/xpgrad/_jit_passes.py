"""Passes over a traced program (`xpgrad._jit`).

Each pass reads the recorded `Instruction` list and the trace's
witnesses: the first call's values, or what the trace kept of those it dropped (a
`xpgrad._tracing._Meta`: type, shape, dtype, layout, a sample of each end), which say
each value's type, shape, dtype and layout; ``trace.bases`` says which NumPy results are
views of which. `optimize` runs them in order: dead code
on every backend; on a program of NumPy arrays also `fold_constants`,
`elide_copies`, `fuse_mask_casts`, `direct_calls` and
`fuse_elementwise`, each of which keeps every value bit for bit (never a rewrite that
NumPy might round differently). The passes share one `PassState`, which `optimize`
makes and hands through them (there is no module state). Then `xpgrad._jit` plans buffer reuse
(`reuse_plan`), the liveness (`last_uses`) and the generated source's
variables (`variables`). tests/test_jit_passes.py checks each pass.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from . import _fast_adapter as fa
from . import _tracing
from ._tracing import Instruction, Trace, Tracer
from .tree_util import is_leaf, tree_map

_Meta = _tracing._Meta

__all__ = ["PassState", "dead_code", "direct_calls", "elide_copies", "fold_constants", "frees_at", "fuse_elementwise", "fuse_mask_casts",
           "last_uses", "optimize", "reuse_plan", "variables"]


class PassState:
    """What the passes share while `optimize` runs them, handed through them (no module state):
    each instruction's traced arguments, computed once. Each entry keeps its instruction, so a
    recycled ``id()`` is never mistaken for it. A pass called alone (``state=None``) caches nothing."""

    __slots__ = ("reads",)

    def __init__(self) -> None:
        self.reads: dict[int, tuple[Instruction, list[Tracer]]] = {}

    def tracers_of(self, x: Instruction) -> list[Tracer]:
        """``x``'s traced arguments (in its args, then its kwargs)."""
        return _tracers_of(x, self)


def _tracers_of(x: Instruction, state: PassState | None) -> list[Tracer]:
    if state is None:
        return _tracing._tracers_in((x.args, x.kwargs))
    reads = state.reads  # (the cache, here rather than in a method: one call per lookup, as many as passes make)
    hit = reads.get(id(x))
    if hit is not None and hit[0] is x:
        return hit[1]
    ts = _tracing._tracers_in((x.args, x.kwargs))
    reads[id(x)] = (x, ts)
    return ts


def _nd(v: Any) -> bool:
    """Whether a witness (or what the trace kept of it) is exactly a NumPy ndarray."""
    return type(v) is np.ndarray or (type(v) is _Meta and v.cls is np.ndarray)


def _isnd(v: Any) -> bool:
    """Whether a witness (or what the trace kept of it) is a NumPy ndarray or of a subclass (a memmap)."""
    return isinstance(v, np.ndarray) or (type(v) is _Meta and issubclass(v.cls, np.ndarray))


def dead_code(ins: list[Instruction], outputs: list[Any], state: PassState | None = None) -> list[Instruction]:
    live = {o for o in outputs if isinstance(o, int)}
    kept: list[Instruction] = []
    for x in reversed(ins):
        if x.writes is None and not getattr(x.fn, "_xg_stateful", False) and not any(o in live for o in x.outs):
            continue
        kept.append(x)
        for t in _tracers_of(x, state):
            live.add(t._i)
    kept.reverse()
    return kept


def last_uses(ins: list[Instruction], outputs: list[Any], state: PassState | None = None) -> dict[int, int]:
    """slot -> index of the instruction that reads it last (slots returned are never freed)."""
    last: dict[int, int] = {}
    for i, x in enumerate(ins):
        for t in _tracers_of(x, state):
            last[t._i] = i
        for o in x.outs:
            last.setdefault(o, i)  # (a result nobody reads: freed at once)
    for o in outputs:
        if isinstance(o, int):
            last.pop(o, None)
    return last


# NumPy's elementwise functions that allocate a fresh result unless given out=
_OP_UFUNC = {operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
             operator.truediv: np.true_divide, operator.pow: np.power, operator.neg: np.negative}


def reuse_plan(trace: Trace, ins: list[Instruction], outputs: list[Any], donated: set[int]) -> dict[int, int]:
    """NumPy only: instruction index -> a dead buffer its result is written into (out=)."""
    w = trace.witness
    n_in = set(trace.inputs)
    # buffers the program owns outright: fresh results of ufuncs, never viewed
    owned: set[int] = set()
    viewed: set[int] = set()
    bases = trace.bases
    for x in ins:
        for o in x.outs:
            wo = w[o]
            viewed.update(bases.get(o, ()))
            if _nd(wo) and wo.base is None and (isinstance(x.fn, np.ufunc) or x.fn in _OP_UFUNC):
                owned.add(o)
        if x.writes is not None:
            viewed.add(x.writes)  # (written in place: keep it simple, never reused)
    owned |= {s for s in donated if _nd(w[s]) and w[s].base is None}
    out_slots = {o for o in outputs if isinstance(o, int)}
    last = last_uses(ins, outputs)
    plan: dict[int, int] = {}
    for i, x in enumerate(ins):
        if x.kwargs or len(x.outs) != 1 or x.writes is not None:
            continue
        uf = x.fn if isinstance(x.fn, np.ufunc) else _OP_UFUNC.get(x.fn)
        # (not a generalized ufunc: matmul into one of its own operands overlaps, and NumPy would copy)
        if uf is None or uf.nout != 1 or len(x.args) != uf.nin or uf.signature is not None or _fast_power(x, w):
            continue
        wo = w[x.outs[0]]
        # (one element gains nothing from a reused buffer, and NumPy's complex multiply and
        # square take another loop for it in place, which differs in the last bit)
        if not _nd(wo) or wo.size <= 1:
            continue
        for a in x.args:
            if type(a) is not Tracer:
                continue
            s = a._i
            if (s in owned and s not in viewed and s not in out_slots and last.get(s) == i
                    and (s not in n_in or s in donated) and w[s].shape == wo.shape and w[s].dtype == wo.dtype
                    # (and its memory layout: a fresh result follows its inputs' (order K), and a
                    # reduction's summation order follows the layout, so another one changes the last bits)
                    and w[s].strides == wo.strides):
                plan[i] = s
                break
        if i in plan:
            x.fn = uf  # (operator.add on two ndarrays is np.add: same values, and it takes out=)
    return plan


def frees_at(last: dict[int, int]) -> dict[int, list[int]]:
    """instruction index -> the slots it reads last (sorted): `last_uses` inverted, once."""
    out: dict[int, list[int]] = {}
    for s, i in sorted(last.items()):
        out.setdefault(i, []).append(s)
    return out


# ---------------------------------------------------------------- NumPy programs: rewrites that keep every bit
def optimize(trace: Trace, ins: list[Instruction], outputs: list[Any], numpy_only: bool) -> tuple[list[Instruction], list[Any]]:
    """The passes in order: dead code; on a program of NumPy arrays only, also constant folding,
    copy elision, mask-cast fusion and direct calls (each keeps the values bit for bit).

    Returns the instructions and the outputs (a slot may be renamed by copy elision).
    """
    state = PassState()
    ins = dead_code(ins, outputs, state)
    if not numpy_only or trace.stateful:
        return ins, outputs
    n = len(ins)
    ins = fold_constants(trace, ins, outputs, state)
    if len(ins) != n:
        ins = dead_code(ins, outputs, state)  # (what fed a folded ones_like only)
    ins, outputs = elide_copies(trace, ins, outputs, state)
    ins = fuse_mask_casts(trace, ins, outputs, state)
    ins = direct_calls(trace, ins)
    ins = fuse_elementwise(trace, ins, outputs, state)
    return ins, outputs


def _subst(obj: Any, fn: Any) -> Any:
    """``obj`` with each Tracer ``t`` replaced by ``fn(t)`` (in tuples, lists, dicts and slices)."""
    t = type(obj)
    if t is Tracer:
        return fn(obj)
    if t is tuple or t is list:
        return t(_subst(o, fn) for o in obj)
    if t is dict:
        return {k: _subst(v, fn) for k, v in obj.items()}
    if t is slice:
        return slice(_subst(obj.start, fn), _subst(obj.stop, fn), _subst(obj.step, fn))
    if t in _tracing._LEAF_TYPES or is_leaf(obj):
        return obj
    return tree_map(lambda v: _subst(v, fn), obj)  # (another container: a deque, a registered dataclass)


def _rewrite(x: Instruction, fn: Any = None, args: Any = None, kwargs: Any = None) -> Instruction:
    return Instruction(x.fn if fn is None else fn, x.name, x.args if args is None else args,
                       x.kwargs if kwargs is None else kwargs, x.outs, x.unpack, x.writes)


def _reads(x: Instruction, state: PassState | None) -> list[int]:
    return [t._i for t in _tracers_of(x, state)]


FOLD_MAX_BYTES = _tracing.KEEP_CONSTANT_BYTES  # a larger constant is made by each call (not held by the program between calls)
# creation functions whose values do not depend on the values of their first argument (only its shape and dtype)
_LIKE = _tracing._LIKE


def _guarded(trace: Trace, ins: list[Instruction], outputs: list[Any]) -> list[Any] | None:
    """The witnesses a replay hands out or writes into: a constant must share no memory with them.
    (The trace keeps them, except arrays written in place that own their memory, which only a
    view of them could share, and a constant made from one is kept too: `Trace._keep_written`.
    None where it dropped another.)"""
    w = trace.witness
    slots = {o for o in outputs if isinstance(o, int)} | {x.writes for x in ins if x.writes is not None}
    if any(not _tracing.held(w[s]) and w[s].base is not None for s in slots):
        return None
    return [w[s] for s in slots if isinstance(w[s], np.ndarray)]


def fold_constants(trace: Trace, ins: list[Instruction], outputs: list[Any],
                   state: PassState | None = None) -> list[Instruction]:
    """Calls with no traced input (``arange``, ``zeros`` of a shape, ``asarray`` of Python numbers), and
    ``ones_like``/``zeros_like``/``full_like`` of a traced array (only its shape and dtype are read),
    become constants of the program: their trace values, computed once.

    Only where the replay can never change such a value: no output, no value written in
    place, shares memory with it (a constant returned or updated in place would carry one
    call's changes into the next). Random draws (stateful calls) are never folded, nor a
    value over ``FOLD_MAX_BYTES`` (the program would hold it between calls), nor one whose value
    the trace did not keep (`xpgrad._tracing.Trace.release` keeps the constants up to that size).
    """
    w = trace.witness
    guard = _guarded(trace, ins, outputs)
    if guard is None:
        return ins
    const: set[int] = set()
    out: list[Instruction] = []
    for x in ins:
        reads = _tracers_of(x, state)
        like = getattr(x.fn, "__name__", "") in _LIKE and x.args and type(x.args[0]) is Tracer
        free = [t for t in (reads[1:] if like else reads) if t._i not in const]
        if (not free and x.outs and x.writes is None and not getattr(x.fn, "_xg_stateful", False)
                and all(getattr(w[o], "nbytes", 0) <= FOLD_MAX_BYTES and _tracing.held(w[o]) for o in x.outs)
                and not any(isinstance(w[o], np.ndarray) and any(np.may_share_memory(w[o], g) for g in guard)
                            for o in x.outs)):
            const.update(x.outs)
            continue
        if reads and any(t._i in const for t in reads):
            x = _rewrite(x, args=_subst(x.args, lambda t: w[t._i] if t._i in const else t),
                         kwargs=_subst(x.kwargs, lambda t: w[t._i] if t._i in const else t))
        out.append(x)
    return out


def _views(trace: Trace, ins: list[Instruction]) -> set[int]:
    """Slots whose buffer another value of the program views (by the witnesses' ``base``, ``trace.bases``)."""
    bases = trace.bases
    viewed: set[int] = set()
    for x in ins:
        for o in x.outs:
            viewed.update(bases.get(o, ()))
    return viewed


def _is_asarray_copy(x: Instruction) -> bool:
    return (getattr(x.fn, "__name__", "") == "asarray" and len(x.args) == 1 and type(x.args[0]) is Tracer
            and x.kwargs == {"copy": True} and len(x.outs) == 1 and x.writes is None)


def elide_copies(trace: Trace, ins: list[Instruction], outputs: list[Any],
                 state: PassState | None = None) -> tuple[list[Instruction], list[Any]]:
    """``r = asarray(v, copy=True)`` where ``v`` is read by nothing after: ``r`` is ``v`` itself.

    Only where the copy is indistinguishable from ``v``: ``v`` is a fresh, C-contiguous
    NumPy array the program made (no input, no view, viewed by nothing, not returned) and
    ``r`` has its dtype, shape and strides.
    """
    if not any(_is_asarray_copy(x) for x in ins):
        return ins, outputs
    w = trace.witness
    inputs = set(trace.inputs)
    out_slots = {o for o in outputs if isinstance(o, int)}
    viewed = _views(trace, ins)
    last = last_uses(ins, outputs, state)
    rename: dict[int, Tracer] = {}
    kept: list[Instruction] = []
    for i, x in enumerate(ins):
        if rename:
            x = _rewrite(x, args=_subst(x.args, lambda t: rename.get(t._i, t)),
                         kwargs=_subst(x.kwargs, lambda t: rename.get(t._i, t)))
            if x.writes in rename:
                x.writes = rename[x.writes]._i
        if _is_asarray_copy(x):
            src = x.args[0]
            s, r = src._i, x.outs[0]
            ws, wr = w[s], w[r]
            if (_nd(ws) and _nd(wr) and ws.base is None and wr.base is None
                    and ws.flags.c_contiguous and ws.flags.writeable and ws.dtype == wr.dtype and ws.shape == wr.shape
                    and ws.strides == wr.strides and s not in inputs and s not in out_slots and s not in viewed
                    and last.get(s) == i):
                rename[r] = src
                continue
        kept.append(x)
    if rename:
        outputs = [rename[o]._i if isinstance(o, int) and o in rename else o for o in outputs]
    return kept, outputs


_MULTIPLY = (np.multiply, operator.mul, operator.imul)


def fuse_mask_casts(trace: Trace, ins: list[Instruction], outputs: list[Any],
                    state: PassState | None = None) -> list[Instruction]:
    """``c = astype(m, T); x * c`` (or ``x *= c``) with a boolean ``m`` and ``x`` of dtype ``T``:
    ``x * m``. NumPy casts ``m`` to ``T`` inside the multiply (``True`` is 1, ``False`` 0,
    exactly), so the values are the same and one pass over memory and one array are saved
    (a ReLU's backward). Only where ``c`` is read by that multiply alone.
    """
    if not any(getattr(x.fn, "__name__", "") == "astype" for x in ins):
        return ins
    w = trace.witness
    out_slots = {o for o in outputs if isinstance(o, int)}
    uses: dict[int, list[int]] = {}
    for i, x in enumerate(ins):
        for s in _reads(x, state):
            uses.setdefault(s, []).append(i)
    drop: dict[int, Tracer] = {}  # astype instruction index -> the mask it casts
    fixed: dict[int, Instruction] = {}
    for k, x in enumerate(ins):
        if (getattr(x.fn, "__name__", "") != "astype" or len(x.outs) != 1 or x.writes is not None
                or len(x.args) != 2 or type(x.args[0]) is not Tracer or type(x.args[1]) is Tracer
                or set(x.kwargs) - {"copy"}):
            continue
        m, c = x.args[0], x.outs[0]
        wm, wc = w[m._i], w[c]
        if not _nd(wm) or wm.dtype != np.bool_ or not _nd(wc) or wc.dtype.kind != "f":
            continue
        u = uses.get(c, [])
        if c in out_slots or len(u) != 1 or u[0] in fixed:
            continue
        j = u[0]
        y = ins[j]
        if y.fn not in _MULTIPLY or y.kwargs or len(y.args) != 2 or y.writes not in (None, *(
                a._i for a in y.args if type(a) is Tracer and a._i != c)):
            continue
        a, b = y.args
        other = b if type(a) is Tracer and a._i == c else a
        if type(other) is not Tracer or other._i == c or not _nd(w[other._i]):
            continue
        wo = w[other._i]
        if wo.dtype != wc.dtype or np.result_type(wo.dtype, np.bool_) != wc.dtype:
            continue
        if y.writes is None and (len(y.outs) != 1 or w[y.outs[0]].dtype != wc.dtype):
            continue
        drop[k] = m
        fixed[j] = _rewrite(y, args=tuple(m if type(v) is Tracer and v._i == c else v for v in y.args))
    if not drop:
        return ins
    return [fixed.get(i, x) for i, x in enumerate(ins) if i not in drop]


def direct_calls(trace: Trace, ins: list[Instruction]) -> list[Instruction]:
    """Calls of xpgrad's fast-path adapter on plain NumPy arrays become the NumPy call the adapter
    makes on that path (``np.matmul``, ``ndarray.swapaxes``, ``np.add.reduce``, ``ndarray.astype``,
    ``ndarray.reshape``): no Python frame per call. The replay's arrays have the trace's
    types, so the adapter would take the same path every call."""
    w = trace.witness
    out: list[Instruction] = []
    for x in ins:
        f, a, kw = x.fn, x.args, x.kwargs
        first: Any = w[a[0]._i] if a and type(a[0]) is Tracer else None
        nd = _nd(first)
        if f is fa.matmul and not kw and len(a) == 2:
            x = _rewrite(x, fn=np.matmul)
        elif f is fa.matrix_transpose and nd and first.ndim >= 2 and len(a) == 1 and not kw:
            x = _rewrite(x, fn=np.ndarray.swapaxes, args=(a[0], -1, -2))
        elif f in (fa.sum, fa.max, fa.min) and nd and len(a) == 1 and set(kw) <= {"axis", "dtype", "keepdims"} \
                and not (f is not fa.sum and "dtype" in kw):
            red = {fa.sum: np.add.reduce, fa.max: np.maximum.reduce, fa.min: np.minimum.reduce}[f]
            k2 = {"axis": kw.get("axis"), "keepdims": kw.get("keepdims", False)}
            if f is fa.sum:
                k2["dtype"] = kw.get("dtype")
            x = _rewrite(x, fn=red, kwargs=k2)
        elif f is fa.astype and nd and len(a) == 2 and set(kw) <= {"copy"} and type(a[1]) is not Tracer:
            x = _rewrite(x, fn=np.ndarray.astype, kwargs={"dtype": a[1], "copy": kw.get("copy", True)}, args=(a[0],))
        elif f is fa.reshape and nd and len(a) == 2 and not kw and type(a[1]) is not Tracer:
            x = _rewrite(x, fn=np.ndarray.reshape)
        out.append(x)
    return out


def variables(ins: list[Instruction], outputs: list[Any], names: dict[int, str]) -> tuple[dict[int, str], dict[int, list[str]]]:
    """The generated source's variables: slot -> variable, and instruction index -> variables to ``del`` after it.

    ``names`` holds the inputs' variables. A result takes over the variable of a value
    read for the last time by the same call (``v2 = add(v2, a1, out=v2)``): rebinding the
    variable frees the old value just as the ``del`` after the call would, and the source
    is about half as long (Python compiles it twice as fast: the trace's largest cost on
    a long program).
    """
    var = dict(names)
    dels: dict[int, list[str]] = {}
    frees = frees_at(last_uses(ins, outputs))
    for i, x in enumerate(ins):
        outs = set(x.outs)
        dying = [var.get(s) or f"v{s}" for s in frees.get(i, ()) if s not in outs]
        gone: list[str] = []
        for o in x.outs:
            if o in var:
                continue
            var[o] = dying.pop() if dying else f"v{o}"
            if o in frees.get(i, ()):  # (a result nobody reads)
                gone.append(var[o])
        if dying or gone:
            dels[i] = dying + gone
    return var, dels


# ---------------------------------------------------------------- elementwise chains over large arrays, chunk by chunk
CHUNK = 8192  # elements per chunk: a chunk of each intermediate stays in the CPU's cache
_MIN_FUSE = 8 * CHUNK  # arrays smaller than this run whole (the chunk loop's calls would cost more)
_tracing.SAMPLE_MIN = _MIN_FUSE  # (the arrays whose ends a trace keeps when it drops them: a run's check reads them)
_INPLACE_UFUNC = {operator.iadd: np.add, operator.isub: np.subtract, operator.imul: np.multiply,
                  operator.itruediv: np.true_divide}


def _fast_power(x: Instruction, w: list[Any]) -> bool:
    """Whether ``x`` is a ``a ** b`` that ``np.power`` might not reproduce: NumPy's ``**`` computes
    ``a ** 0.5`` as ``sqrt(a)``, ``a ** 2`` as ``square(a)``..., which differ from ``np.power`` in the
    last bits for complex and long double arrays. Only ``**`` on float32/float64 arrays (with
    real scalars) is rewritten as ``np.power``."""
    if x.fn is not operator.pow and x.fn is not operator.ipow:
        return False
    for a in x.args:
        v = w[a._i] if type(a) is Tracer else a
        dt = getattr(v, "dtype", None)
        if dt is None:
            if type(v) not in (int, float):
                return True
        elif dt not in (np.float32, np.float64):
            return True
    return False


def _elementwise_ufunc(x: Instruction, w: list[Any]) -> Any:
    """The ufunc an elementwise call runs (None if it is not one: a reduction, a gufunc, keywords...)."""
    if x.kwargs or _fast_power(x, w):
        return None
    f = x.fn
    uf = f if isinstance(f, np.ufunc) else _OP_UFUNC.get(f) or _INPLACE_UFUNC.get(f)
    if uf is None or uf.nout != 1 or uf.signature is not None or len(x.args) != uf.nin:
        return None
    return uf


def fuse_elementwise(trace: Trace, ins: list[Instruction], outputs: list[Any],
                     state: PassState | None = None) -> list[Instruction]:
    """A run of elementwise calls over arrays of one large shape runs chunk by chunk: each chunk of
    every intermediate lives in a small buffer (in the cache), and only the values read after the
    run, or returned, are whole arrays. ``sum(exp(sin(x)) * x)``'s gradient then holds one array
    (the result) besides ``x`` instead of three, and reads memory once per chunk.

    Each element is computed by the same ufunc calls in the same order, so the values are those
    of the unfused program. Only where that cannot be in doubt: every array operand has the
    run's shape and is C-contiguous (a chunk is a plain slice), a run writes in place only into
    values it made, and the fused run, tried on the trace's values, gives the trace's values
    bit for bit (otherwise the calls are kept as they are): on the whole arrays where the trace
    kept them, else on the first and last ``_tracing.SAMPLE`` elements it kept of each.
    """
    w = trace.witness
    out_slots = {o for o in outputs if isinstance(o, int)}
    written_at: dict[int, list[int]] = {}
    for i, x in enumerate(ins):
        if x.writes is not None:
            written_at.setdefault(x.writes, []).append(i)
    last = last_uses(ins, outputs, state)

    def shape_of(x: Instruction) -> Any:
        uf = _elementwise_ufunc(x, w)
        if uf is None:
            return None
        target = x.outs[0] if x.outs else x.writes
        if target is None or len(x.outs) > 1:
            return None
        wt = w[target]
        if not _nd(wt) or wt.size < _MIN_FUSE or not wt.flags.c_contiguous:
            return None
        for a in x.args:
            if type(a) is Tracer:
                wa = w[a._i]
                if _isnd(wa) and wa.ndim and not (wa.shape == wt.shape and wa.flags.c_contiguous):
                    return None
            elif isinstance(a, np.ndarray) and a.ndim:
                return None
        return wt.shape

    out: list[Instruction] = []
    i = 0
    while i < len(ins):
        s = shape_of(ins[i])
        j = i
        while j < len(ins) and s is not None and shape_of(ins[j]) == s:
            j += 1
        group = _fuse(trace, ins, i, j, s, out_slots, written_at, last) if j - i >= 2 else None
        if group is None:
            out.append(ins[i])
            i += 1
        else:
            out.append(group)
            i = j
    return out


def _fuse(trace: Trace, ins: list[Instruction], i: int, j: int, shape: Any, out_slots: set[int],
          written_at: dict[int, list[int]], last: dict[int, int]) -> Instruction | None:
    w = trace.witness
    made: list[int] = []  # slots made in the run, in order
    ext: list[Tracer] = []  # whole arrays read by the run (made before it)
    ext_slots: set[int] = set()
    steps: list[tuple[Any, list[Any], int]] = []  # (ufunc, operands, target slot)
    for x in ins[i:j]:
        ops: list[Any] = []
        for a in x.args:
            if type(a) is Tracer:
                if a._i not in made and a._i not in ext_slots:
                    ext.append(a)
                    ext_slots.add(a._i)
                ops.append(("slot", a._i))
            else:
                ops.append(("const", a))
        if x.writes is not None:
            if x.writes not in made:
                return None  # (writes into an array made before the run: left alone)
            target = x.writes
        else:
            target = x.outs[0]
            made.append(target)
        steps.append((_elementwise_ufunc(x, w), ops, target))
    # the run's results: what is read after it or returned; the rest lives in chunk buffers
    keep = [s for s in made if s in out_slots or last.get(s, -1) >= j or any(k >= j for k in written_at.get(s, ()))]
    if len(keep) == len(made) or any(any(k >= j for k in written_at.get(s, ())) for s in (*made, *ext_slots)):
        return None
    dtypes = {s: w[s].dtype for s in made}
    names = [x.name for x in ins[i:j]]
    # (an operand made before the run is sliced chunk by chunk, or passed whole where it is 0-d)
    chunked = [_isnd(w[a._i]) and w[a._i].ndim > 0 for a in ext]
    fn = _chunked(steps, [a._i for a in ext], chunked, keep, dtypes, shape)
    # the safety net: on the trace's own values, the fused run must give the trace's values
    if not _same_run(fn, steps, [w[a._i] for a in ext], [a._i for a in ext], chunked, [w[s] for s in keep], keep, dtypes):
        return None
    name = f"fused[{', '.join(n.split('.')[-1] for n in names)}]"
    return Instruction(fn, name, tuple(ext), {}, keep, True, None)


def _same_run(fn: Any, steps: list[tuple[Any, list[Any], int]], args: list[Any], ext: list[int], chunked: list[bool],
              refs: list[Any], keep: list[int], dtypes: dict[int, Any]) -> bool:
    """Whether the fused run ``fn`` gives the trace's values ``refs`` from its operands ``args``:
    on the whole arrays where the trace kept them all; else the run, over one chunk, on the
    first and on the last ``_tracing.SAMPLE`` elements the trace kept of each."""
    if all(_tracing.held(v) for v in (*args, *refs)):
        tries = [(fn, args, refs)]
    else:
        if any(not _tracing.held(v) for v, c in zip(args, chunked, strict=True) if not c):
            return False
        tries = []
        for end in ("head", "tail"):
            ops = [_end(v, end) if c else v for v, c in zip(args, chunked, strict=True)]
            want = [_end(r, end) for r in refs]
            if any(v is None for v in (*ops, *want)):
                return False
            tries.append((_chunked(steps, ext, chunked, keep, dtypes, (_tracing.SAMPLE,)), ops, want))
    for run, ops, want in tries:
        try:
            with np.errstate(all="ignore"):
                got = run(*ops)
        except Exception:  # noqa: BLE001 - (an operand the chunked run cannot take: keep the calls)
            return False
        for g, ref in zip(got, want, strict=True):
            if g.dtype != ref.dtype or g.shape != ref.shape or g.tobytes() != ref.tobytes():
                return False
    return True


def _end(v: Any, end: str) -> Any:
    """The first or last ``_tracing.SAMPLE`` elements of a large C-contiguous array (held or sampled)."""
    if type(v) is _Meta:
        return v.head if end == "head" else v.tail
    flat = v.reshape(-1)
    return flat[:_tracing.SAMPLE] if end == "head" else flat[-_tracing.SAMPLE:]


def _chunked(steps: list[tuple[Any, list[Any], int]], ext: list[int], chunked: list[bool], keep: list[int],
             dtypes: dict[int, Any], shape: Any) -> Any:
    """The function running ``steps`` chunk by chunk: ``fn(*operands made before) -> the kept arrays``."""
    n = 1
    for d in shape:
        n *= d
    temps = [s for s in dtypes if s not in keep]
    sliced = [s for s, c in zip(ext, chunked, strict=True) if c]

    def fused(*arrays: Any) -> tuple[Any, ...]:
        env: dict[int, Any] = {}
        flat = []
        for s, a, c in zip(ext, arrays, chunked, strict=True):
            if c:
                flat.append(a.reshape(-1))
            else:
                env[s] = a
        whole = [np.empty(shape, dtypes[s]) for s in keep]
        flat += [a.reshape(-1) for a in whole]
        bufs = [np.empty(min(CHUNK, n), dtypes[s]) for s in temps]
        views = sliced + keep
        for lo in range(0, n, CHUNK):
            hi = min(lo + CHUNK, n)
            for s, f in zip(views, flat):
                env[s] = f[lo:hi]
            m = hi - lo
            for s, b in zip(temps, bufs):
                env[s] = b[:m]
            for uf, ops, target in steps:
                uf(*[env[v] if kind == "slot" else v for kind, v in ops], out=env[target])
        return tuple(whole)

    return fused
