"""Primitives, one module per chapter of the array API standard.

Each primitive is a table entry: its forward written against a namespace ``xp``
and its VJP rules, also written against ``xp``, side by side. The public function
of the same name carries the standard's signature and calls `apply`.
"""
