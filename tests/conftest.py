"""Shared fixtures: the backend fixture, hypothesis profiles, state-leak guards, and Dask's
compute counter and LocalCluster client."""

from __future__ import annotations

import importlib
import os
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings

import xpgrad as xg
from xpgrad._policy import _POLICY
from xpgrad.autograd._grad_mode import GRAD_ENABLED

from ._util import to_numpy

settings.register_profile(
    "ci", max_examples=8, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "thorough", max_examples=200, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture],
)
# `HYPOTHESIS_PROFILE=debug`: the ci examples, reported without shrinking (a failing
# case on Dask can take minutes to shrink)
settings.register_profile("debug", settings.get_profile("ci"), phases=[Phase.explicit, Phase.reuse, Phase.generate])
# `HYPOTHESIS_PROFILE=thorough-debug`: the thorough examples without shrinking
settings.register_profile("thorough-debug", settings.get_profile("thorough"),
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Under the ci and debug profiles, the gradient sweep of tests/test_rules.py draws the
# profile's examples on NumPy (the reference backend) and fewer on the others, where an
# example mostly re-checks the same rule through a slower namespace (JAX dispatches each
# op in tens of microseconds, Dask builds a graph): this keeps CI near 20 minutes on
# 2 cores. The thorough profile draws its full count on every backend.
_CI_SHARE = {"numpy": 1.0, "array_api_strict": 0.5, "torch": 0.5, "cupy": 0.5, "jax": 0.25, "dask": 0.25}


def examples_for(backend: str) -> int:
    """How many hypothesis examples a per-backend sweep draws on ``backend``."""
    n = settings().max_examples  # the loaded profile's
    if os.environ.get("HYPOTHESIS_PROFILE", "ci") not in ("ci", "debug"):
        return n
    return max(1, round(n * _CI_SHARE.get(backend, 0.5)))


@dataclass(frozen=True)
class Backend:
    """One array library as the tests see it."""

    name: str
    xp: Any
    #: where the test arrays live, when not the library's default (torch_cuda: "cuda:0")
    device: Any = None

    def asarray(self, a: Any) -> Any:
        """A backend array from a NumPy array (same dtype)."""
        a = np.asarray(a)
        if self.name == "dask":
            import dask.array as da

            return da.from_array(a, chunks=tuple(max(1, (s + 1) // 2) for s in a.shape) or ())
        if self.name == "torch":
            import torch

            return torch.asarray(a.copy(), device=self.device)
        if self.name == "cupy":
            return self.xp.asarray(a)
        return self.xp.asarray(a.copy(), device=self.device)

    def policy(self, **kw: Any) -> Any:
        """``xg.default_device`` for this backend's library and test device."""
        return xg.default_device(self.xp, device=self.device, **kw)

    def to(self, module: Any, **kw: Any) -> Any:
        """``module.to`` this backend's library and test device."""
        return module.to(xp=self.xp, device=self.device, **kw)

    def to_numpy(self, a: Any) -> np.ndarray:
        """A backend array (or Tensor) as NumPy, from whatever device it is on."""
        return to_numpy(a)


_MODULES = {
    "numpy": "array_api_compat.numpy",
    "array_api_strict": "array_api_strict",
    "torch": "array_api_compat.torch",
    "jax": "jax.numpy",
    "dask": "array_api_compat.dask.array",
    "cupy": "array_api_compat.cupy",
    # torch on the GPU: the tests see it as torch (same library, same known limitations),
    # with every test array created on CUDA device 0
    "torch_cuda": "array_api_compat.torch",
    # array-api-strict with every test array on its non-default fake device "device1":
    # the CPU stand-in for a GPU run, where any array made on the default device (a
    # rule's constant, a layer's weight, a test's own array) meets the test arrays and
    # raises instead of passing unnoticed
    "strict_device1": "array_api_strict",
}


def _selected() -> list[str]:
    env = os.environ.get("XPGRAD_BACKENDS")
    if env:
        return [b.strip() for b in env.split(",") if b.strip()]
    return list(_MODULES)


def _nvidia_gpus() -> str:
    """The NVIDIA GPUs the kernel driver reports ("2 NVIDIA GPU(s)"), or "" where there are none.

    Read from the driver's files, not from a CUDA library: a GPU that CuPy or torch cannot
    use (a CuPy for another CUDA version, a driver too old for the build) is still found,
    so the fixtures fail loudly there instead of skipping.
    """
    from pathlib import Path

    gpus = Path("/proc/driver/nvidia/gpus")
    n = len(list(gpus.iterdir())) if gpus.is_dir() else 0
    if n == 0:
        n = len([p for p in Path("/dev").glob("nvidia[0-9]*")]) if Path("/dev").is_dir() else 0
    return f"{n} NVIDIA GPU(s)" if n else ""


def _load(name: str) -> Backend:
    if name == "cupy":
        try:
            import cupy
        except ImportError as e:
            pytest.skip(f"cupy is not installed ({e}); install xpgrad[cupy] (CUDA 12) or xpgrad[cupy13] (CUDA 13)")
        gpu = _nvidia_gpus()
        try:
            n = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # noqa: BLE001 - CUDA's errors have no common base class
            if gpu:  # the machine has a GPU and the installed CuPy cannot use it: loud, not a skip
                pytest.fail(f"cupy: this machine has {gpu} but CuPy {cupy.__version__} cannot use it "
                            f"({type(e).__name__}: {e}); is it the CuPy for this CUDA driver (cupy-cuda12x or "
                            "cupy-cuda13x)?", pytrace=False)
            pytest.skip(f"cupy: no CUDA GPU on this machine ({type(e).__name__}: {e})")
        if n < 1:
            if gpu:
                pytest.fail(f"cupy: this machine has {gpu} but CuPy {cupy.__version__} sees no device", pytrace=False)
            pytest.skip("cupy: no CUDA GPU on this machine")
    if name == "torch_cuda":
        try:
            import torch
        except ImportError as e:
            pytest.skip(f"torch_cuda: torch is not installed ({e}); install xpgrad[torch] with a CUDA build")
        if not torch.cuda.is_available():
            gpu = _nvidia_gpus()
            if gpu and torch.version.cuda is not None:  # a CUDA build on a GPU machine that cannot use it
                pytest.fail(f"torch_cuda: this machine has {gpu} but torch {torch.__version__} (CUDA "
                            f"{torch.version.cuda}) cannot use it (torch.cuda.is_available() is False); "
                            "is the driver older than the build's CUDA?", pytrace=False)
            why = "torch is a CPU build" if torch.version.cuda is None else "no CUDA device here"
            pytest.skip(f"torch_cuda: {why} (torch {torch.__version__}, torch.cuda.is_available() is False)")
        return Backend("torch", importlib.import_module(_MODULES[name]), device="cuda:0")
    if name == "strict_device1":
        import array_api_strict

        return Backend("array_api_strict", array_api_strict, device=array_api_strict.Device("device1"))
    try:
        xp = importlib.import_module(_MODULES[name])
    except ImportError as e:
        pytest.skip(f"{name} is not installed ({e}); install xpgrad[{name}]")
    if name == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
    return Backend(name, xp)


@pytest.fixture(params=_selected(), scope="session")
def backend(request: pytest.FixtureRequest) -> Backend:
    """Every installed backend (restrict with XPGRAD_BACKENDS=numpy,torch)."""
    return _load(request.param)


@pytest.fixture(scope="session")
def np_backend() -> Backend:
    return _load("numpy")


@pytest.fixture(autouse=True)
def _no_leaked_state() -> Any:
    """Fail a test that leaves a policy or grad mode behind."""
    before = (_POLICY.get(), GRAD_ENABLED.get(), xg.current_policy())
    yield
    after = (_POLICY.get(), GRAD_ENABLED.get(), xg.current_policy())
    if before != after:
        xg.reset_policy()
        _POLICY.set(before[0])
        GRAD_ENABLED.set(before[1])
        pytest.fail(f"test leaked global state: {before} -> {after}")


# ====================================================================== Dask (imported inside the fixtures)
class Computes:
    """Counts the Dask computes (and persists) started while its fixture is active, with where each started.

    Counted twice: a scheduler hook (``dask.config.set(scheduler=...)``, which every
    ``compute``/``persist``/``__array__`` without an explicit scheduler goes through) and a
    :class:`dask.callbacks.Callback` (which also sees local schedulers chosen explicitly).
    """

    def __init__(self) -> None:
        self.stacks: list[str] = []
        self.callback_starts = 0

    @property
    def n(self) -> int:
        return max(len(self.stacks), self.callback_starts)

    def assert_none(self, what: str) -> None:
        assert self.n == 0, f"{what}: {self.n} compute(s); the first started at\n{self.stacks[0] if self.stacks else '?'}"


@pytest.fixture
def computes() -> Iterator[Computes]:
    dask = pytest.importorskip("dask", reason="dask is not installed; install xpgrad[dask]")
    from dask.callbacks import Callback

    c = Computes()

    def counting_get(dsk: Any, keys: Any, **kw: Any) -> Any:
        c.stacks.append("".join(traceback.format_stack(limit=16)[:-1]))
        return dask.get(dsk, keys, **kw)

    class Count(Callback):  # type: ignore[misc]
        def _start(self, dsk: Any) -> None:
            c.callback_starts += 1

    with dask.config.set(scheduler=counting_get), Count():
        yield c


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    """A ``dask.distributed`` client of a 2-process LocalCluster, one per test module."""
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed; install xpgrad[dask]")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as c:
        yield c
