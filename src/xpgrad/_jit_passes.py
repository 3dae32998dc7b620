"""Passes over a traced program (:mod:`xpgrad._jit`): dead code, liveness, buffer reuse.

Each pass reads the recorded :class:`~xpgrad._tracing.Instruction` list and the trace's
witnesses (the first call's values, which say each value's type, shape, dtype and, on
NumPy, which results are views of which).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from . import _tracing
from ._tracing import Instruction, Trace, Tracer

__all__ = ["dead_code", "last_uses", "reuse_plan"]


def dead_code(ins: list[Instruction], outputs: list[Any]) -> list[Instruction]:
    live = {o for o in outputs if isinstance(o, int)}
    kept: list[Instruction] = []
    for x in reversed(ins):
        if x.writes is None and not getattr(x.fn, "_xg_stateful", False) and not any(o in live for o in x.outs):
            continue
        kept.append(x)
        for t in _tracing._tracers_in((x.args, x.kwargs)):
            live.add(t._i)
    kept.reverse()
    return kept


def last_uses(ins: list[Instruction], outputs: list[Any]) -> dict[int, int]:
    """slot -> index of the instruction that reads it last (slots returned are never freed)."""
    last: dict[int, int] = {}
    for i, x in enumerate(ins):
        for t in _tracing._tracers_in((x.args, x.kwargs)):
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
    by_id = {id(x): s for s, x in enumerate(w)}
    for x in ins:
        for o in x.outs:
            wo = w[o]
            if type(wo) is np.ndarray and wo.base is not None:
                b = by_id.get(id(wo.base))
                if b is not None:
                    viewed.add(b)
            if type(wo) is np.ndarray and wo.base is None and (isinstance(x.fn, np.ufunc) or x.fn in _OP_UFUNC):
                owned.add(o)
        if x.writes is not None:
            viewed.add(x.writes)  # (written in place: keep it simple, never reused)
    owned |= {s for s in donated if type(w[s]) is np.ndarray and w[s].base is None}
    out_slots = {o for o in outputs if isinstance(o, int)}
    last = last_uses(ins, outputs)
    plan: dict[int, int] = {}
    for i, x in enumerate(ins):
        if x.kwargs or len(x.outs) != 1 or x.writes is not None:
            continue
        uf = x.fn if isinstance(x.fn, np.ufunc) else _OP_UFUNC.get(x.fn)
        if uf is None or uf.nout != 1 or len(x.args) != uf.nin:
            continue
        wo = w[x.outs[0]]
        # (one element gains nothing from a reused buffer, and NumPy's complex multiply and
        # square take another loop for it in place, which differs in the last bit)
        if type(wo) is not np.ndarray or wo.size <= 1:
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
