"""GPU smoke checks for xpgrad: gradients on CuPy and torch-CUDA agree with NumPy, and the demo trains on CuPy.

Run by ``scripts/gpu_check.sh`` after the test suite. Each check prints one line and
the script exits non-zero if any fails. Without a GPU it stops with exit code 2,
saying so; ``--torch-device cpu --skip-cupy --skip-demo`` runs the same code paths
on torch's CPU device (a dry run of the script itself, not a GPU check).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import xpgrad as xg

RESULTS: list[tuple[str, bool, str]] = []


def check(name: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    def deco(fn: Callable[[], str]) -> Callable[[], str]:
        fn.check_name = name  # type: ignore[attr-defined]
        return fn

    return deco


def run(fn: Callable[[], str]) -> None:
    name = fn.check_name  # type: ignore[attr-defined]
    start = time.perf_counter()
    try:
        detail = fn()
        RESULTS.append((name, True, detail))
        print(f"PASS {name} ({time.perf_counter() - start:.1f} s): {detail}", flush=True)  # noqa: T201
    except Exception as e:  # noqa: BLE001 - report every failure, keep going
        RESULTS.append((name, False, f"{type(e).__name__}: {e}"))
        print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)  # noqa: T201


def loss(w: Any, x: Any, y: Any) -> Any:
    """A small MLP-ish loss touching matmul, tanh, logsumexp-style reductions and indexing."""
    xp = xg.array_namespace(w, x, y)
    h = xp.tanh(x @ w)
    m = xp.max(h, axis=1, keepdims=True)
    lse = m[:, 0] + xp.log(xp.sum(xp.exp(h - m), axis=1))
    return xp.mean(lse - xp.sum(h * y, axis=1)) + 0.01 * xp.sum(w * w)


def data(dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 4)).astype(dtype)
    x = rng.standard_normal((256, 16)).astype(dtype)
    y = np.eye(4, dtype=dtype)[rng.integers(0, 4, 256)]
    return w, x, y


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--torch-device", default="cuda", help="torch device to check (default: cuda)")
    p.add_argument("--skip-cupy", action="store_true")
    p.add_argument("--skip-torch", action="store_true")
    p.add_argument("--skip-demo", action="store_true")
    args = p.parse_args(argv)

    w, x, y = data()
    g_ref = xg.grad(loss)(w, x, y)
    h_ref = xg.hvp(lambda w: loss(w, x, y), (w,), (np.ones_like(w),))

    if not args.skip_cupy:
        try:
            import cupy
        except ImportError as e:
            print(f"cupy is not installed ({e}); install xpgrad[cupy]", file=sys.stderr)  # noqa: T201
            return 2
        n_gpus = cupy.cuda.runtime.getDeviceCount()
        if n_gpus < 1:
            print("no CUDA GPU visible to CuPy: nothing to check", file=sys.stderr)  # noqa: T201
            return 2

        @check("cupy: grad and hvp equal numpy (float64, rtol 1e-10)")
        def cupy_grad() -> str:
            cw, cx, cy = (cupy.asarray(a) for a in (w, x, y))
            g = xg.grad(loss)(cw, cx, cy)
            assert isinstance(g, cupy.ndarray), type(g)  # noqa: S101
            np.testing.assert_allclose(g.get(), g_ref, rtol=1e-10, atol=1e-12)
            h = xg.hvp(lambda w: loss(w, cx, cy), (cw,), (cupy.ones_like(cw),))
            np.testing.assert_allclose(h.get(), h_ref, rtol=1e-10, atol=1e-12)
            return f"gradient on {g.device}"

        @check("cupy: float32 grad stays float32 and equals numpy (rtol 1e-4)")
        def cupy_f32() -> str:
            w32, x32, y32 = data(np.float32)
            g = xg.grad(loss)(*(cupy.asarray(a) for a in (w32, x32, y32)))
            assert g.dtype == cupy.float32, g.dtype  # noqa: S101
            np.testing.assert_allclose(g.get(), g_ref, rtol=1e-4, atol=1e-5)
            return "ok"

        @check("cupy: default_device selects each GPU; Module and step stay there")
        def cupy_devices() -> str:
            seen = []
            for i in range(min(n_gpus, 2)):
                with xg.default_device("cupy", device=f"cuda:{i}", seed=0):
                    net = xg.nn.Sequential(xg.nn.Linear(16, 8), xg.nn.ReLU(), xg.nn.Linear(8, 4))
                    opt = xg.optim.SGD(net.parameters(), lr=0.1)
                    xb = xg.asarray(xg.current_policy().xp.asarray(x.astype(np.float32),
                                                                    device=xg.current_policy().device))
                    out = xg.sum(net(xb) ** 2)
                    out.backward()
                    opt.step()
                    dev = net[0].weight.device
                    assert dev == cupy.cuda.Device(i), dev  # noqa: S101
                    assert net[0].weight.grad is not None  # noqa: S101
                    seen.append(str(dev))
            return f"devices {seen} of {n_gpus}"

        for fn in (cupy_grad, cupy_f32, cupy_devices):
            run(fn)

    if not args.skip_torch:
        import torch

        dev = torch.device(args.torch_device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            print(f"torch {torch.__version__} sees no CUDA GPU (a CPU build?): install a CUDA build of torch",  # noqa: T201
                  file=sys.stderr)
            return 2

        @check(f"torch on {dev}: grad and hvp equal numpy (float64, rtol 1e-10)")
        def torch_grad() -> str:
            tw, tx, ty = (torch.asarray(a, device=dev) for a in (w, x, y))
            g = xg.grad(loss)(tw, tx, ty)
            assert isinstance(g, torch.Tensor) and g.device.type == dev.type, (type(g), g.device)  # noqa: S101
            np.testing.assert_allclose(g.cpu().numpy(), g_ref, rtol=1e-10, atol=1e-12)
            h = xg.hvp(lambda w: loss(w, tx, ty), (tw,), (torch.ones_like(tw),))
            np.testing.assert_allclose(h.cpu().numpy(), h_ref, rtol=1e-10, atol=1e-12)
            return f"gradient on {g.device}"

        @check(f"torch on {dev}: Module.to(xp='torch', device=...) trains there")
        def torch_module() -> str:
            with xg.default_device("numpy", seed=0):
                net = xg.nn.Sequential(xg.nn.Linear(16, 8), xg.nn.ReLU(), xg.nn.Linear(8, 4))
            net.to(xp="torch", device=str(dev))
            opt = xg.optim.Adam(net.parameters(), lr=1e-2)
            xb = xg.asarray(torch.asarray(x.astype(np.float32), device=dev))
            yb = xg.asarray(torch.asarray(np.argmax(y, axis=1), device=dev))
            losses = []
            for _ in range(20):
                out = xg.nn.functional.cross_entropy(net(xb), yb)
                opt.zero_grad()
                out.backward()
                opt.step()
                losses.append(float(out))
            wdev = net[0].weight.data.device
            assert wdev.type == dev.type, wdev  # noqa: S101
            assert losses[-1] < losses[0], losses  # noqa: S101
            return f"parameters on {wdev}, loss {losses[0]:.3f} -> {losses[-1]:.3f}"

        @check(f"torch on {dev}: default_device('torch', device=...) creates there")
        def torch_policy() -> str:
            with xg.default_device("torch", device=str(dev)):
                t = xg.ones((3,))
            assert t.data.device.type == dev.type, t.data.device  # noqa: S101
            return f"xg.ones on {t.data.device}"

        for fn in (torch_grad, torch_module, torch_policy):
            run(fn)

    if not args.skip_demo and not args.skip_cupy:
        @check("demo: the MLP trains on cupy to >= 97% test accuracy")
        def demo() -> str:
            from xpgrad._demo import train

            res = train(backend="cupy", progress=False)
            assert res.accuracy >= 0.97, res.accuracy  # noqa: S101
            return f"test accuracy {res.accuracy:.1%} in {res.seconds:.1f} s"

        run(demo)

    failed = [n for n, ok, _ in RESULTS if not ok]
    print(f"{len(RESULTS) - len(failed)} passed, {len(failed)} failed")  # noqa: T201
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
