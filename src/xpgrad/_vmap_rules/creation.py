"""Batching rules (creation): see xpgrad._vmap_rules."""

from __future__ import annotations
