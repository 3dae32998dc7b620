"""Random numbers (placeholder module; filled in by the random-number work)."""
