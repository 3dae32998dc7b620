"""OpCases for the primitives of ``xpgrad.nn.functional`` (``nn.relu``).

The rest of ``nn.functional`` is composed of namespace functions and is tested in
tests/test_nn.py; a primitive of its own gets its rules checked here like any other.
"""

from __future__ import annotations

import numpy as np

from tests._cases import OpCase
from xpgrad.nn import functional as F  # noqa: N812

CASES = [
    # values away from the kink at 0 (finite differences straddling it would average the slopes)
    OpCase("nn.relu", lambda xp, x: F.relu(x), domain=(-2.0, 2.0),
           prepare=lambda arrs, p: [np.where(a >= 0, a + 0.05, a - 0.05).astype(a.dtype) for a in arrs],
           torch_fn=lambda t, x: t.relu(x)),
]
