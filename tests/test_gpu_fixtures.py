"""The GPU backends of the fixture: a skip with its reason where the machine has no GPU,
a failure where it has one that the installed library cannot use (issue 32: a CuPy for
another CUDA version must not turn a GPU run into a silent skip)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from _pytest.outcomes import Failed, Skipped

from . import conftest


def _fake_cupy(device_count: Any) -> types.ModuleType:
    mod = types.ModuleType("cupy")
    mod.__version__ = "99.0"  # type: ignore[attr-defined]

    def count() -> int:
        if isinstance(device_count, Exception):
            raise device_count
        return int(device_count)

    mod.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=count))  # type: ignore[attr-defined]
    return mod


@pytest.mark.parametrize("count", [RuntimeError("cudaErrorInsufficientDriver"), 0])
def test_cupy_that_cannot_use_the_gpu_fails_loudly(count: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count))
    monkeypatch.setattr(conftest, "_nvidia_gpus", lambda: "1 NVIDIA GPU(s)")
    with pytest.raises(Failed, match="this machine has 1 NVIDIA GPU"):
        conftest._load("cupy")


@pytest.mark.parametrize("count", [RuntimeError("no CUDA-capable device is detected"), 0])
def test_cupy_without_a_gpu_skips_with_the_reason(count: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(count))
    monkeypatch.setattr(conftest, "_nvidia_gpus", lambda: "")
    with pytest.raises(Skipped, match="no CUDA GPU on this machine"):
        conftest._load("cupy")


@pytest.mark.parametrize(("cuda", "gpu", "outcome", "match"), [
    ("12.8", "1 NVIDIA GPU(s)", Failed, "cannot use it"),
    (None, "1 NVIDIA GPU(s)", Skipped, "torch is a CPU build"),
    ("12.8", "", Skipped, "no CUDA device here"),
])
def test_torch_cuda_fixture(cuda: str | None, gpu: str, outcome: type, match: str,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    torch = types.ModuleType("torch")
    torch.__version__ = "2.99"  # type: ignore[attr-defined]
    torch.version = types.SimpleNamespace(cuda=cuda)  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(is_available=lambda: False)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(conftest, "_nvidia_gpus", lambda: gpu)
    with pytest.raises(outcome, match=match):
        conftest._load("torch_cuda")


def test_nvidia_gpus_reads_the_driver() -> None:
    found = conftest._nvidia_gpus()
    assert found == "" or found.endswith("NVIDIA GPU(s)")
