"""Utilities, PyTorch style: `xpgrad.utils.data` (datasets and minibatches)."""

from __future__ import annotations

from . import data

__all__ = ["data"]
