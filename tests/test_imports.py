"""Importing xpgrad, and using it on NumPy arrays, imports no optional backend."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

OPTIONAL = ("torch", "jax", "jaxlib", "cupy", "dask", "array_api_strict")


def run_isolated(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; it prints a JSON object as its last line."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_pulls_in_no_backend() -> None:
    out = run_isolated(
        f"""
        import json, sys
        import xpgrad
        print(json.dumps({{m: m in sys.modules for m in {OPTIONAL!r}}}))
        """
    )
    assert not any(out.values()), out


def test_numpy_path_pulls_in_no_backend() -> None:
    out = run_isolated(
        f"""
        import json, sys
        import numpy as np
        import xpgrad as xg

        def loss(w, x):
            xp = xg.array_namespace(w, x)
            return xp.sum(xp.exp(w) * x)

        g = xg.grad(loss)(np.ones(3), np.arange(3.0))
        assert type(g) is np.ndarray
        t = xg.asarray([1.0, 2.0], requires_grad=True)
        (t * t).sum().backward()
        with xg.default_device("numpy", dtype="float32", seed=0):
            z = xg.zeros(2) + xg.random.normal(2) + xg.random.uniform(2)
        xg.random.seed(1)
        xg.random.permutation(np.ones(3))
        print(json.dumps({{m: m in sys.modules for m in {OPTIONAL!r}}}))
        """
    )
    assert not any(out.values()), out


def test_imports_only_what_is_asked() -> None:
    # asking for one backend by name imports that one, not the others
    out = run_isolated(
        """
        import json, sys
        import xpgrad as xg
        with xg.default_device("array_api_strict"):
            xg.zeros(1)
        print(json.dumps({m: m in sys.modules for m in ("array_api_strict", "torch", "jax", "dask", "cupy")}))
        """
    )
    assert out == {"array_api_strict": True, "torch": False, "jax": False, "dask": False, "cupy": False}
