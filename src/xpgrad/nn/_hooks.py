"""Removable handles for module hooks."""

from __future__ import annotations

import itertools
from typing import Any

__all__ = ["RemovableHandle"]

_ids = itertools.count()


class RemovableHandle:
    """Returned by ``register_forward_hook`` and friends; ``remove()`` unregisters the hook.

    Usable as a context manager: the hook is removed when the block exits.
    """

    __slots__ = ("_table", "id")

    def __init__(self, table: dict[int, Any]) -> None:
        self._table = table
        self.id = next(_ids)

    def remove(self) -> None:
        self._table.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
