"""Batching rules: one per primitive, registered into :data:`xpgrad.autograd._batched.RULES`.

Each rule receives the primitive, its physical arguments (batched ones lifted to ``K``
leading batch axes, see :mod:`xpgrad.autograd._batched`), which of them are batched,
the keyword parameters and ``K``, and returns the physical output with ``K`` leading
batch axes. Rules call primitives on physical values, so what they do is on the tape.
"""

from . import creation, elementwise, fft, indexing, linalg, manipulation, nn, reductions, searching, set_functions  # noqa: F401 - they register rules
from . import matmul  # noqa: F401, I001 - last: its rule replaces linalg's
