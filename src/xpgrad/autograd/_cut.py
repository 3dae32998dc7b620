"""Cut graphs: conversions of traced Tensors to Python numbers or NumPy, noted while a
transform runs, so that a gradient that would silently be zero raises instead.

``float(x)``, ``int(x)``, ``complex(x)``, ``x.item()``, ``x.tolist()``, ``math.exp(x)``
(which calls ``float``) and ``np.asarray(x)`` all leave the tape: what they return
carries no gradient. That is fine for logging (``print(float(loss)); return loss``
still has the right gradient, as in PyTorch), and a silent wrong answer when the
differentiated function's result was computed from it (``return math.exp(x)`` would get
a zero gradient). So each transform of [`xpgrad.functional`][xpgrad.functional] opens a *window* (a
context-local `Window`), the conversion methods of a traced Tensor (one that
requires grad or carries a forward-mode tangent) append a `Cut` to it, and the
transform checks its cuts only where a gradient came out structurally zero:

- reverse mode (``grad``, ``vjp``): an input whose gradient is None (no path from the
  output) while a cut value depends on that input;
- forward mode (``jvp``): an output without a tangent of the transform's level while a
  cut value carries that level's tangent.

Then it raises [`CutGraphError`][xpgrad.CutGraphError], naming the conversion, the value's
shape and dtype and the line of code (captured when the conversion happens, as a few
``(code, line)`` pairs; the text is read only for the message). A function that is
constant in its input and converts nothing still gets zeros, as in JAX.

Cost: a conversion of a Tensor that is not traced pays two attribute loads; a traced
one outside any transform (``float(loss)`` in a training loop) adds one ContextVar
get. The operations' hot path ([`apply`][xpgrad.autograd.apply]) is untouched.

Windows nest: an inner transform's window appends to its outer window's list, so a
conversion inside ``grad(grad(f))`` is seen by both, and each checks it against its own
inputs. The cuts hold the converted value's node (or the leaf Tensor), for the check;
they live until the outermost transform returns.
"""

from __future__ import annotations

import contextvars
import linecache
import os
import sys
from typing import Any

from .._dtypes import dtype_name
from .._exceptions import CutGraphError
from ._core import Node

__all__ = ["WINDOW", "Cut", "Window", "check_forward", "check_reverse", "close", "note", "number_output", "open_window",
           "refuse_numpy"]

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # .../xpgrad/
# the modules that call the user's functions: the walk up the stack stops there
_CALLERS = (os.path.join(_PKG, "functional.py"), os.path.join(_PKG, "_custom.py"))
_MAX_FRAMES = 8

#: what a conversion of each kind is reported as
WHAT = {
    "float": "float()",
    "int": "int()",
    "complex": "complex()",
    "item": ".item()",
    "tolist": ".tolist()",
    "numpy": ".numpy()",
    "array": "__array__() (a conversion to NumPy: np.asarray, or a NumPy function given a Tensor)",
    "dlpack": "__dlpack__() (a conversion to another library through DLPack)",
}

_HINT = (
    "A Python number, or a NumPy array, carries no gradient. To keep the graph:\n"
    "  - compute with the array-API functions of xp = xg.array_namespace(x): xp.exp(x), not math.exp(x); "
    "xp.sum(x), not sum(x.tolist()); no float(), .item() or NumPy on the value;\n"
    "  - to log a value, return it as an auxiliary output (has_aux=True), or convert it outside the function;\n"
    "  - to use it as a constant on purpose, convert xg.stop_gradient(x) instead"
)


class Cut:
    """One conversion of a traced Tensor: what, of which value, and where."""

    __slots__ = ("dtype", "frames", "graph", "levels", "shape", "what")

    def __init__(self, what: str, t: Any, frames: tuple[tuple[Any, int], ...]) -> None:
        self.what = what
        data = t.data
        self.shape = data.shape
        self.dtype = data.dtype
        # the node that produced the value (or the leaf Tensor itself): what the reverse
        # check walks from; the forward levels whose tangent it carried
        self.graph = t._node if t._node is not None else (t if t._requires_grad else None)
        self.levels = tuple(t._fw) if t._fw else ()
        self.frames = frames

    def describe(self) -> str:
        try:
            dt = dtype_name(self.dtype)
        except Exception:  # noqa: BLE001 - a dtype we cannot name: show it as the library does
            dt = str(self.dtype)
        shape = tuple(None if (d is None or d != d) else int(d) for d in self.shape)
        return f"{WHAT[self.what]} of a traced array of shape {shape} and dtype {dt}"

    def where(self) -> str:
        """The line of the conversion, and the line of the differentiated function that led there."""
        if not self.frames:
            return ""
        lines = [_line(*self.frames[0])]
        if len(self.frames) > 1:
            lines.append("called from " + _line(*self.frames[-1]))
        return "\n    " + "\n    ".join(lines)


def _line(code: Any, lineno: int) -> str:
    text = linecache.getline(code.co_filename, lineno).strip()
    return f'File "{code.co_filename}", line {lineno}, in {code.co_name}' + (f": {text}" if text else "")


class Window:
    """One running transform: its name, and the list its conversions go to (shared with
    the windows around it) from position ``start``; ``cuts`` is its part once closed."""

    __slots__ = ("cuts", "name", "rec", "start", "token")

    def __init__(self, name: str, rec: list[Cut]) -> None:
        self.name = name
        self.rec = rec
        self.start = len(rec)
        self.cuts: list[Cut] = []
        self.token: contextvars.Token[Window | None] | None = None


#: the innermost running transform of this context (None: no transform is running)
WINDOW: contextvars.ContextVar[Window | None] = contextvars.ContextVar("xpgrad_cut_window", default=None)


def open_window(name: str) -> Window:
    """Start noting conversions for transform ``name``; pair with `close`."""
    outer = WINDOW.get()
    w = Window(name, [] if outer is None else outer.rec)
    w.token = WINDOW.set(w)
    return w


def close(w: Window) -> None:
    """Stop noting for ``w``; its cuts stay readable in ``w.cuts``."""
    if w.token is not None:
        WINDOW.reset(w.token)
    rec = w.rec
    if len(rec) > w.start:
        w.cuts = rec[w.start:]
    w.rec = []  # the list may live on in an outer window; this one needs only its part


def note(t: Any, what: str) -> None:
    """Note a conversion of traced Tensor ``t`` (kind ``what``, a key of `WHAT`) when a
    transform is running. Called by the Tensor's conversion methods only for traced Tensors."""
    w = WINDOW.get()
    if w is None:
        return
    w.rec.append(Cut(what, t, _frames()))


def _frames() -> tuple[tuple[Any, int], ...]:
    """(code, line) of the frames from the conversion up to the differentiated function:
    xpgrad's own frames are skipped, and the walk stops where a transform called it."""
    f: Any = sys._getframe(1)  # (xpgrad's own frames are skipped below)
    out: list[tuple[Any, int]] = []
    while f is not None and len(out) < _MAX_FRAMES:
        code = f.f_code
        fn = code.co_filename
        if fn.startswith(_PKG):
            if out and fn in _CALLERS:
                break
        else:
            out.append((code, f.f_lineno))
        f = f.f_back
    return tuple(out)


def refuse_numpy(t: Any, what: str) -> None:
    """Raise for a conversion of a Tensor that requires grad to NumPy inside a transform
    (outside one the caller raises its own error); a no-op when no transform is running."""
    w = WINDOW.get()
    if w is None:
        return
    cut = Cut(what, t, ())
    msg = (
        f"{w.name}: {cut.describe()} inside {w.name}: NumPy cannot carry the gradient, so the graph "
        f"would be cut here, and the derivative silently wrong.\n{_HINT}."
    )
    raise CutGraphError(msg)


def _message(name: str, head: str, cuts: list[Cut], shown: Cut | None, why: str = "") -> str:
    lines = [f"{name}: {head}{why}."]
    if shown is not None:
        others = len(cuts) - 1
        more = f" (one of {len(cuts)} conversions of traced values)" if others else ""
        lines.append(f"The graph was cut by {shown.describe()}{more}, at{shown.where()}")
    lines.append(_HINT + ".")
    return "\n".join(lines)


def number_output(name: str, func: str, out: Any, cuts: list[Cut], what: str = "returned") -> None:
    """Raise for a Python number where the transform needs an array (``what`` says which output)."""
    head = f"{func} {what} a Python {type(out).__name__}, not an array, so its derivative would be silently zero"
    if not cuts:
        head += " (a constant is returned as an array: xp.asarray(value))"
    raise CutGraphError(_message(name, head, cuts, cuts[-1] if cuts else None))


def _reached(cuts: list[Cut], targets: dict[int, int]) -> tuple[Cut, int] | None:
    """The last cut whose value depends on a target (id of a node or leaf Tensor -> index)."""
    for cut in reversed(cuts):
        if cut.graph is None:
            continue
        stack = [cut.graph]
        seen: set[int] = set()
        while stack:
            h = stack.pop()
            k = targets.get(id(h))
            if k is not None:
                return cut, k
            if isinstance(h, Node):
                for p in h.parents:
                    if p is not None and id(p) not in seen:
                        seen.add(id(p))
                        stack.append(p)
    return None


def check_reverse(name: str, func: str, cuts: list[Cut], inputs: list[Any], grads: list[Any],
                  label: Any = None, why: str = "") -> None:
    """Raise when an input whose gradient is None had a value depending on it converted.

    ``inputs``: the transform's input Tensors; ``grads``: their gradients (None: no path);
    ``label(k)``: how to name input ``k`` in the message (default: "input k"); ``why``:
    appended to the message's first sentence.
    """
    targets = {}
    for k, (t, g) in enumerate(zip(inputs, grads)):
        if g is None:
            targets[id(t._node if t._node is not None else t)] = k
    if not targets:
        return
    hit = _reached(cuts, targets)
    if hit is None:
        return
    cut, k = hit
    arg = label(k) if label is not None else f"input {k}"
    head = f"the gradient of {func} with respect to {arg} would be silently zero"
    raise CutGraphError(_message(name, head, cuts, cut, why))


def check_forward(name: str, func: str, cuts: list[Cut], level: int, output: str) -> None:
    """Raise when ``output`` has no tangent of ``level`` and a value carrying one was converted."""
    for cut in reversed(cuts):
        if level in cut.levels:
            head = f"the tangent of {output} of {func} would be silently zero"
            raise CutGraphError(_message(name, head, cuts, cut))
