"""``python -m xpgrad demo`` in its short mode (one epoch): accuracy, JSON, plot, errors.

One epoch of the MLP on the 80% split reaches about 90% test accuracy; the
thresholds below leave room for other seeds and float32 rounding, not for a broken
training loop (an untrained model scores about 10%).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import xpgrad as xg
from xpgrad.__main__ import main

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sklearn") is None,
    reason='scikit-learn is not installed (the demo extra: pip install "xpgrad[demo]")',
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _backends() -> list[str]:
    env = os.environ.get("XPGRAD_BACKENDS")
    return [b.strip() for b in env.split(",")] if env else ["numpy", "torch"]


def test_one_epoch_mlp_learns_and_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (the demo extra)")
    from xpgrad._demo import train

    png = tmp_path / "curves.png"
    r = train("numpy", "mlp", epochs=1, progress=False, plot=png)
    assert r.accuracy > 0.8, r
    assert (r.backend, r.model, r.epochs, r.seed) == ("numpy", "mlp", 1, 0)
    assert len(r.history) == 1 and set(r.history[0]) == {"loss", "train_accuracy", "test_accuracy"}
    assert r.history[0]["test_accuracy"] == r.accuracy and r.history[0]["loss"] < 2.3  # below chance: log(10)
    assert png.read_bytes()[:8] == PNG_MAGIC


def test_cli_json_in_a_subprocess() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "xpgrad", "demo", "--epochs", "1", "--json"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert {"accuracy", "seconds", "epochs", "backend", "model"} <= set(r)
    assert (r["epochs"], r["backend"], r["model"]) == (1, "numpy", "mlp")
    assert r["accuracy"] > 0.8 and r["seconds"] > 0
    assert "Traceback" not in proc.stderr and "epoch 1/1" not in proc.stderr  # --json: no progress bars


def test_cli_progress_bar_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("tqdm", reason="tqdm is not installed (the demo extra)")
    assert main(["demo", "--epochs", "1", "--batch-size", "64"]) == 0
    out, err = capsys.readouterr()
    assert "epoch 1/1" in err and "loss=" in err and "acc=" in err and "test_acc=" in err
    assert out.startswith("test accuracy ") and "(mlp, numpy backend, 1 epochs," in out


@pytest.mark.skipif(not hasattr(xg.nn, "Conv2d"), reason="xpgrad.nn has no Conv2d yet")
def test_one_epoch_cnn_learns() -> None:
    from xpgrad._demo import train

    r = train("numpy", "cnn", epochs=1, progress=False)
    assert r.accuracy > 0.75, r


def test_same_seed_same_result_on_torch() -> None:
    if "torch" not in _backends():
        pytest.skip("torch is not in XPGRAD_BACKENDS")
    pytest.importorskip("torch", reason="torch is not installed")
    from xpgrad._demo import train

    a = train("numpy", "mlp", epochs=1, batch_size=64, progress=False)
    b = train("torch", "mlp", epochs=1, batch_size=64, progress=False)
    assert a.accuracy == b.accuracy
    assert a.history[0]["loss"] == pytest.approx(b.history[0]["loss"], rel=1e-4)


def test_a_few_dask_steps_equal_numpy() -> None:
    """The demo on Dask gives NumPy's result (tests/test_dask_loops.py checks that its graphs stay flat).

    (Without the optimizer's persist, each step's parameters held every earlier step and
    the demo's epochs took 30, 95 and 165 s; now each epoch takes the same ~2.5 s.)
    """
    if "dask" not in _backends():
        pytest.skip("dask is not in XPGRAD_BACKENDS")
    pytest.importorskip("dask.array", reason="dask is not installed")
    from xpgrad._demo import train

    # batch 512: 3 steps an epoch; 2 epochs, so the second runs on persisted parameters
    a = train("numpy", "mlp", epochs=2, batch_size=512, progress=False)
    b = train("dask", "mlp", epochs=2, batch_size=512, progress=False)
    assert b.backend == "dask" and a.accuracy == b.accuracy
    for ha, hb in zip(a.history, b.history):
        assert hb["loss"] == pytest.approx(ha["loss"], rel=1e-5)


def test_bad_backend_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(["demo", "--backend", "tensorflow"])
    assert ei.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'tensorflow'" in err and "numpy" in err and "cupy" in err
    from xpgrad._demo import train

    with pytest.raises(xg.XpgradValueError, match=r"demo: unknown backend 'tensorflow'; choose one of numpy, "):
        train("tensorflow", epochs=1, progress=False)


@pytest.mark.parametrize(("kw", "match"), [
    ({"model": "rnn"}, "unknown model 'rnn'"),
    ({"epochs": 0}, "epochs must be a positive integer, got 0"),
    ({"batch_size": -1}, "batch_size must be a positive integer, got -1"),
    ({"lr": float("nan")}, "lr must be a positive number, got nan"),
])
def test_bad_settings_are_clear_errors(kw: dict[str, object], match: str) -> None:
    from xpgrad._demo import train

    with pytest.raises(xg.XpgradValueError, match=match):
        train(progress=False, **kw)  # type: ignore[arg-type]


def test_missing_demo_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # makes `import sklearn.datasets` fail
    assert main(["demo", "--epochs", "1", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m xpgrad demo: error: demo: scikit-learn is not installed")
    assert 'pip install "xpgrad[demo]"' in err and "Traceback" not in err


def test_backend_not_installed_is_a_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("cupy is installed here")
    assert main(["demo", "--backend", "cupy", "--epochs", "1", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "cupy" in err and 'pip install "xpgrad[cupy]"' in err


def test_jit_demo_equals_eager(capsys: pytest.CaptureFixture[str]) -> None:
    """``demo --jit``: the jitted step (model and Adam as state, the scheduled rate as an input)
    reaches the eager run's accuracy and curves, tracing only 3 times: the first step (Adam has
    no state yet), the second (now it has), and the last, shorter batch; never once per step."""
    from xpgrad._demo import train

    eager = train("numpy", "mlp", epochs=2, batch_size=64, progress=False)
    assert main(["demo", "--jit", "--epochs", "2", "--batch-size", "64", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["jit"], r["traces"], r["epochs"]) == (True, 3, 2)
    assert r["accuracy"] == eager.accuracy > 0.8
    for he, hj in zip(eager.history, r["history"], strict=True):
        assert hj["loss"] == pytest.approx(he["loss"], rel=1e-6)
        assert hj["train_accuracy"] == he["train_accuracy"] and hj["test_accuracy"] == he["test_accuracy"]
    # 1437 training images: batches of 479 are all one shape, so 2 traces
    assert main(["demo", "--jit", "--epochs", "1", "--batch-size", "479", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("test accuracy ") and "(mlp, numpy backend, jit: 2 traces, 1 epochs," in out


def test_jit_demo_step_replays_on_torch() -> None:
    """The jitted step on torch: the same accuracy as eager torch after one epoch."""
    if "torch" not in _backends():
        pytest.skip("torch is not in XPGRAD_BACKENDS")
    pytest.importorskip("torch", reason="torch is not installed")
    from xpgrad._demo import train

    a = train("torch", "mlp", epochs=1, batch_size=64, progress=False)
    b = train("torch", "mlp", epochs=1, batch_size=64, progress=False, jit=True)
    assert b.jit and b.traces == 3 and a.accuracy == b.accuracy
    assert b.history[0]["loss"] == pytest.approx(a.history[0]["loss"], rel=1e-4)
