"""Test helpers shared across modules."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

import xpgrad as xg

#: the repository's root (docs/ and scripts/ sit there in a source checkout)
ROOT = Path(__file__).resolve().parents[1]


def load_script(relpath: str) -> ModuleType:
    """A script of the repository (``"docs/gen_graph.py"``) imported as a module."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        msg = f"load_script: cannot import {path}"
        raise ImportError(msg)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def to_numpy(a: Any) -> np.ndarray:
    """Any backend's array (or a Tensor of one) as a NumPy array, from whatever device.

    Dask is computed, torch detached and copied from its device (``force``: torch
    answers some zero gradients with a ZeroTensor), CuPy copied from the GPU, and
    array-api-strict moved from a fake device to its CPU device (NumPy reads only that).
    """
    if isinstance(a, xg.Tensor):
        a = a.data
    if hasattr(a, "compute"):
        a = a.compute()
    module = type(a).__module__
    if module.startswith("torch"):
        return a.detach().numpy(force=True)  # type: ignore[no-any-return]
    if module.startswith("cupy"):
        return a.get()  # type: ignore[no-any-return]
    if module.startswith("array_api_strict"):
        import array_api_strict

        a = a.to_device(array_api_strict.Device("CPU_DEVICE"))
    return np.asarray(a)
