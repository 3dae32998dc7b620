"""Per-chapter OpCase tables (see tests/_cases.py)."""
