"""Batching rules (set_functions): see xpgrad._vmap_rules."""

from __future__ import annotations
