"""Fixtures of the conformance suite: the backend under test and hypothesis profiles.

``XPGRAD_BACKENDS`` selects the CPU backends (default: all installed);
``HYPOTHESIS_PROFILE`` is ``ci`` (default: few examples, derandomized),
``debug`` (ci without shrinking) or ``thorough``.
"""

from __future__ import annotations

import importlib
import os
import warnings
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
             HealthCheck.function_scoped_fixture]
settings.register_profile("ci", max_examples=6, deadline=None, derandomize=True, suppress_health_check=_SUPPRESS)
settings.register_profile("debug", settings.get_profile("ci"), phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.register_profile("thorough", max_examples=150, deadline=None, suppress_health_check=_SUPPRESS)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

MODULES = {
    "numpy": "array_api_compat.numpy",
    "array_api_strict": "array_api_strict",
    "torch": "array_api_compat.torch",
    "jax": "jax.numpy",
    "dask": "array_api_compat.dask.array",
}


@dataclass(frozen=True)
class Backend:
    """A backend as the conformance tests see it: its namespace and its strategies."""

    name: str
    xp: Any
    xps: Any


def _load(name: str) -> Backend:
    if name not in MODULES:
        pytest.skip(f"{name}: not a CPU backend of the conformance suite ({sorted(MODULES)})")
    try:
        xp = importlib.import_module(MODULES[name])
    except ImportError as e:
        pytest.skip(f"{name} is not installed ({e}); install xpgrad[{name}]")
    if name == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
    from hypothesis.extra.array_api import make_strategies_namespace

    with warnings.catch_warnings():
        # hypothesis cannot tell that the array-api-compat wrappers are array API libraries
        warnings.simplefilter("ignore")
        xps = make_strategies_namespace(xp, api_version="2024.12")
    return Backend(name, xp, xps)


def _selected() -> list[str]:
    env = os.environ.get("XPGRAD_BACKENDS")
    names = [b.strip() for b in env.split(",") if b.strip()] if env else list(MODULES)
    return [n for n in names if n != "cupy"]


@pytest.fixture(params=_selected(), scope="session")
def backend(request: pytest.FixtureRequest) -> Backend:
    """Every selected CPU backend."""
    return _load(request.param)


@pytest.fixture(scope="session")
def strict() -> Any:
    """array-api-strict, the reference implementation."""
    return pytest.importorskip("array_api_strict")
