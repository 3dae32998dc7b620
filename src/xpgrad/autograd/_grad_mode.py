"""Grad mode: whether ops record onto the tape. Context-local (a ContextVar).

``no_grad()``, ``enable_grad()`` and ``set_grad_enabled(mode)`` are context managers
and decorators; each restores the previous mode through its token, also when the
block raises. A new thread starts with recording enabled.

Also the namespace that recorded rules run on (`graph_namespace`): the ``xpgrad``
package hands itself down once, as it is imported.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from .._exceptions import XpgradRuntimeError

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled"]

F = TypeVar("F", bound=Callable[..., Any])

GRAD_ENABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("xpgrad_grad_enabled", default=True)
#: True while ``checkpoint`` recomputes its function in backward: state the forward updated
#: already (BatchNorm's running statistics and ``num_batches_tracked``) is left alone
RECOMPUTING: contextvars.ContextVar[bool] = contextvars.ContextVar("xpgrad_recomputing", default=False)


def is_grad_enabled() -> bool:
    """Whether operations are being recorded in this context.

    Examples:
        >>> import xpgrad as xg
        >>> with xg.no_grad():
        ...     xg.is_grad_enabled()
        False
    """
    return GRAD_ENABLED.get()


class set_grad_enabled:  # noqa: N801 - context manager used like a function
    """Enable or disable recording for a block or a decorated function.

    Unlike PyTorch, calling it without ``with`` does nothing: the mode is
    context-local and is only changed inside a block.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([1.0], requires_grad=True)
        >>> with xg.set_grad_enabled(False):
        ...     (x * 2).requires_grad
        False
    """

    def __init__(self, mode: bool) -> None:
        self._mode = bool(mode)
        self._tokens: list[contextvars.Token[bool]] = []

    def __enter__(self) -> None:
        self._tokens.append(GRAD_ENABLED.set(self._mode))

    def __exit__(self, *exc: object) -> None:
        # the newest token made in THIS context: one instance may be entered by several
        # threads or asyncio tasks at once (a shared module-level instance); each resets its own
        tokens = self._tokens
        for tok in tokens[::-1]:
            try:
                GRAD_ENABLED.reset(tok)
            except ValueError:  # made in another thread's or task's context
                continue
            tokens.remove(tok)
            return

    def __call__(self, fn: F) -> F:
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            token = GRAD_ENABLED.set(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                GRAD_ENABLED.reset(token)

        return wrapper  # type: ignore[return-value]


class no_grad(set_grad_enabled):  # noqa: N801
    """Disable recording in a block: results do not require grad.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([1.0], requires_grad=True)
        >>> with xg.no_grad():
        ...     y = x * 2
        >>> y.requires_grad
        False
    """

    def __init__(self) -> None:
        super().__init__(False)


class enable_grad(set_grad_enabled):  # noqa: N801
    """Enable recording in a block, e.g. inside a ``no_grad`` block.

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([1.0], requires_grad=True)
        >>> with xg.no_grad():
        ...     with xg.enable_grad():
        ...         (x * 2).requires_grad
        True
    """

    def __init__(self) -> None:
        super().__init__(True)


#: the namespace that gradient rules run on when the backward pass is itself recorded
#: (``create_graph``; forward-mode tangents on the tape): the ``xpgrad`` package, which
#: registers itself as it is imported (`set_graph_namespace`), so that the autograd
#: core, which sits below it, never imports it
_GRAPH_NS: ModuleType | None = None


def set_graph_namespace(ns: ModuleType) -> None:
    """Register ``ns`` (the ``xpgrad`` package) as the namespace of recorded rules."""
    global _GRAPH_NS  # (set once, by the package's __init__)
    _GRAPH_NS = ns


def graph_namespace() -> ModuleType:
    """The namespace the rules run on under ``create_graph`` (see `set_graph_namespace`)."""
    if _GRAPH_NS is None:
        msg = "xpgrad's autograd core is used before the xpgrad package registered its namespace"
        raise XpgradRuntimeError(msg)
    return _GRAPH_NS
