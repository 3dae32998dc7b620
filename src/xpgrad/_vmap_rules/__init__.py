"""Batching rules: one per primitive, registered into `xpgrad.autograd._batched.RULES`.

Each rule receives the primitive, its physical arguments (batched ones lifted to ``K``
leading batch axes, see `xpgrad.autograd._batched`), which of them are batched,
the keyword parameters and ``K``, and returns the physical output with ``K`` leading
batch axes. Rules call primitives on physical values, so what they do is on the tape.
"""

from . import (  # noqa: F401 - they register rules
    creation,
    elementwise,
    fft,
    indexing,
    linalg,
    manipulation,
    matmul,
    nn,
    reductions,
    searching,
    set_functions,
)
