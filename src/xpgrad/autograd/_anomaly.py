"""Anomaly mode: find the operation that produced a NaN, like PyTorch's ``detect_anomaly``.

While [`detect_anomaly`][xpgrad.autograd.detect_anomaly] is on (context-local, a ``ContextVar`` like grad
mode), every recorded node keeps the user-code stack where it was created
(xpgrad's own frames left out), and with ``check_nan`` (the default):

- a primitive whose forward output holds a NaN that none of its inputs held raises
  [`AnomalyError`][xpgrad.AnomalyError] at once;
- in backward, a rule whose gradient holds a NaN that neither the upstream gradient
  nor the values the rule read held raises, naming the primitive, the argument and
  where the op was created;
- in forward mode, likewise for a tangent.

The check is ``bool(xp.any(xp.isnan(v)))`` on every floating result, so on a lazy
backend (Dask) anomaly mode computes every intermediate. When no block is open
anywhere in the process, the hot path pays one int test (`depth`).
"""

from __future__ import annotations

import cmath
import contextvars
import functools
import os
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import array_api_compat

from .._dispatch import raw_array
from .._dtypes import is_float
from .._exceptions import AnomalyError

__all__ = ["ANOMALY", "detect_anomaly", "is_anomaly_check_nan_enabled", "is_anomaly_enabled"]

F = TypeVar("F", bound=Callable[..., Any])

#: None: anomaly mode off in this context; else the mode's ``check_nan``
ANOMALY: contextvars.ContextVar[bool | None] = contextvars.ContextVar("xpgrad_anomaly", default=None)
#: how many anomaly blocks are open in the whole process: the hot path's one test
depth = 0
_lock = threading.Lock()
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # .../xpgrad/


def is_anomaly_enabled() -> bool:
    """Whether anomaly mode is on in this context.

    Examples:
        >>> import xpgrad as xg
        >>> from xpgrad.autograd import is_anomaly_enabled
        >>> with xg.detect_anomaly():
        ...     is_anomaly_enabled()
        True
        >>> is_anomaly_enabled()
        False
    """
    return ANOMALY.get() is not None


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly mode is on in this context and checks for NaNs."""
    return ANOMALY.get() is True


class detect_anomaly:  # noqa: N801 - context manager used like a function, as in PyTorch
    """Record where each op was created, and raise where a NaN first appears.

    A context manager and a decorator; context-local (threads and asyncio tasks
    each see their own mode) and restored when the block raises. Every op recorded
    inside keeps the user-code stack where it was created. With ``check_nan``
    (default True), a NaN appearing in a primitive's forward output, in a gradient
    returned by a rule during a backward run inside the block, or in a forward-mode
    tangent raises [`AnomalyError`][xpgrad.AnomalyError] naming the primitive, the phase,
    the argument, and that stack. A NaN already present in an op's inputs (or in
    its upstream gradient) is passed along without error: only the op that creates
    it is blamed.

    Anomaly mode is slow: it captures a stack per op and tests every result, which
    on a lazy backend (Dask) computes each intermediate. Use it to debug.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> x = xg.asarray([1.0, -1.0], requires_grad=True)
        >>> with np.errstate(invalid="ignore"), xg.detect_anomaly():
        ...     y = xg.sqrt(x)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        xpgrad._exceptions.AnomalyError: sqrt: the forward output contains NaN ...
    """

    def __init__(self, check_nan: bool = True) -> None:
        self._check_nan = bool(check_nan)
        self._tokens: list[contextvars.Token[bool | None]] = []

    def __enter__(self) -> None:
        _open(1)
        self._tokens.append(ANOMALY.set(self._check_nan))

    def __exit__(self, *exc: object) -> None:
        # the newest token made in THIS context: one instance may be entered by several
        # threads or asyncio tasks at once (a shared module-level instance); each resets its own
        tokens = self._tokens
        for tok in tokens[::-1]:
            try:
                ANOMALY.reset(tok)
            except ValueError:  # made in another thread's or task's context
                continue
            tokens.remove(tok)
            break
        _open(-1)

    def __call__(self, fn: F) -> F:
        check_nan = self._check_nan

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _open(1)
            token = ANOMALY.set(check_nan)
            try:
                return fn(*args, **kwargs)
            finally:
                ANOMALY.reset(token)
                _open(-1)

        return wrapper  # type: ignore[return-value]


def _open(delta: int) -> None:
    global depth
    with _lock:
        depth += delta


def user_stack() -> traceback.StackSummary:
    """The calling stack, outermost first, without xpgrad's own frames (lines read lazily)."""
    frames = []
    f: Any = sys._getframe(1)
    while f is not None:
        code = f.f_code
        if not code.co_filename.startswith(_PKG):
            frames.append(traceback.FrameSummary(code.co_filename, f.f_lineno, code.co_name, lookup_line=False))
        f = f.f_back
    frames.reverse()
    return traceback.StackSummary.from_list(frames)


def _where(name: str, stack: traceback.StackSummary | None) -> str:
    if stack is None:
        return f"op {name!r} was recorded outside detect_anomaly(), so where it was created is unknown"
    return f"op {name!r} was created at:\n" + "".join(stack.format()).rstrip("\n")


def has_nan(xp: Any, v: Any) -> bool:
    """Whether ``v`` (a backend array, a Tensor or a Python number) holds a NaN; forces lazy arrays."""
    if isinstance(v, (float, complex)):
        return cmath.isnan(v)
    v = raw_array(v)  # a Tensor's data (create_graph, higher-order forward mode)
    # (None, or the ArgMeta of an argument the rule sees by shape only, is no array)
    if not array_api_compat.is_array_api_obj(v) or not is_float(v.dtype):
        return False
    return bool(xp.any(xp.isnan(v)))


def check_forward(name: str, xp: Any, datas: list[Any], out: Any, multi: bool) -> None:
    """Raise if a forward output holds a NaN that no input held."""
    outs = out if multi else (out,)
    for j, o in enumerate(outs):
        if has_nan(xp, o):
            if any(has_nan(xp, d) for d in datas):
                return
            which = f"output {j}" if multi else "output"
            msg = (
                f"{name}: the forward {which} contains NaN (its inputs did not) while "
                f"detect_anomaly() is on\n{_where(name, user_stack())}"
            )
            raise AnomalyError(msg)


def check_backward(node: Any, i: int, xp: Any, g: Any, gi: Any) -> None:
    """Raise if the gradient ``gi`` for argument ``i`` holds a NaN that neither the upstream
    ``g`` nor the values the rule read (saved arguments, output) held."""
    if not has_nan(xp, gi):
        return
    seen = [*(g if isinstance(g, tuple) else (g,)), *(node.saved or ())]
    seen.extend(node.ans if node.n_out > 1 and node.ans is not None else (node.ans,))
    if any(has_nan(xp, v) for v in seen):
        return
    name = node.prim.name
    msg = (
        f"{name}: the backward rule for argument {i} returned a gradient containing NaN "
        f"(neither the upstream gradient nor its inputs did) while detect_anomaly() is on\n"
        f"{_where(name, getattr(node, 'stack', None))}"
    )
    raise AnomalyError(msg)


def check_tangents(name: str, xp: Any, level: int, args: Sequence[Any], outs: tuple[Any, ...]) -> None:
    """Raise if an output's tangent of ``level`` holds a NaN that no input's tangent held."""
    for o in outs:
        if o._fw and has_nan(xp, o._fw.get(level)):
            if any(has_nan(xp, a._fw.get(level)) for a in args if getattr(a, "_fw", None)):
                return
            msg = (
                f"{name}: the forward-mode (JVP) tangent of its output contains NaN (the input "
                f"tangents did not) while detect_anomaly() is on\n{_where(name, user_stack())}"
            )
            raise AnomalyError(msg)
