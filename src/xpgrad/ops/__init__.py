"""The operations, one module per chapter of the array API standard.

A module with a ``Chapter`` declares its functions as registry entries
(`xpgrad.ops._registry`): one declaration holds the public function's signature and
docstring, and beside it its primitive's forward (written against a namespace ``xp``),
its VJP and JVP rules and its batching rule, all kept on the primitive. The functions a
declaration cannot express yet (argument checks, named tuple results) are written by
hand beside them, each calling its primitive (`apply`), and listed in the module's
``Chapter(extra=...)``. A module without a ``Chapter`` is written by hand throughout.
"""
