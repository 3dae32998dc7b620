"""Helpers shared by the nn test modules: functional cases compared with torch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import xpgrad as xg


@dataclass
class Case:
    name: str
    ours: Callable[..., Any]
    theirs: Callable[..., Any]
    make: Callable[[np.random.Generator], list[np.ndarray]]
    diff: tuple[int, ...] = (0,)
    grad_check: bool = True
    kw: dict[str, Any] = field(default_factory=dict)


def _x(*shape: int, lo: float = -2.0, hi: float = 2.0) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.uniform(lo, hi, shape)


def _mk(*parts: Callable[[np.random.Generator], np.ndarray]) -> Callable[[np.random.Generator], list[np.ndarray]]:
    return lambda rng: [p(rng) for p in parts]


def _ours_args(backend: Any, arrays: list[np.ndarray], diff: tuple[int, ...]) -> list[Any]:
    out = []
    for i, a in enumerate(arrays):
        t = xg.Tensor(backend.asarray(a))
        if i in diff:
            t.requires_grad_()
        out.append(t)
    return out
