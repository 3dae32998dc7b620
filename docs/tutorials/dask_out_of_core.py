"""Fit a logistic regression on a dataset larger than this process may hold: xpgrad on Dask.

The data are generated lazily, chunk by chunk, from a seeded NumPy generator per
chunk, so nothing is stored anywhere: every pass of the optimizer regenerates each
chunk, uses it for the loss and the gradient, and drops it. The process caps its own
address space (``resource.setrlimit(RLIMIT_AS)``, ``--memory-limit``) below the size
of the dataset, so it provably cannot hold it. SciPy's L-BFGS-B drives the fit; each
step asks xpgrad for the loss and its gradient as one lazy Dask graph.

Afterwards the script checks the result two ways:

- the gradient at the solution against a hand-written NumPy loop over the same
  chunks (the closed-form gradient ``X.T @ (sigmoid(X w) - y) / n``);
- with ``--compare`` (only for sizes that fit in memory), the whole fit against the
  same fit on the materialised NumPy arrays.

Usage (from the repository root; needs ``pip install "xpgrad[dask]" scipy``)::

    python docs/tutorials/dask_out_of_core.py --rows 2_000_000 --chunk 500_000 --compare
    python docs/tutorials/dask_out_of_core.py --rows 100_000_000 --chunk 500_000 --memory-limit 1GiB

``--workers N`` runs on a ``dask.distributed.LocalCluster`` of N single-threaded
worker processes instead of the threaded scheduler, each with ``--memory-limit``
as its Dask memory limit; the script then reports each worker's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from typing import Any

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_bytes(s: str) -> int:
    """``"2GiB"`` -> 2147483648."""
    s = s.strip().upper().replace("_", "")
    num = s.rstrip("KMGIB")
    unit = s[len(num):]
    if unit not in _UNITS:
        msg = f"--memory-limit: unknown unit in {s!r}; use e.g. 2GiB or 512MiB"
        raise ValueError(msg)
    return int(float(num) * _UNITS[unit])


def make_chunk(i: int, rows: int, d: int, seed: int) -> Any:
    """Chunk ``i`` of the dataset as one NumPy array: ``d`` feature columns, then the label.

    Features are uniform on [-1, 1]; the label is 1 with probability
    ``sigmoid(x @ w_true)``. The generator is seeded by ``(seed, i)``, so a chunk is
    the same every time it is made, on any worker.
    """
    import numpy as np

    rng = np.random.default_rng([seed, i])
    a = rng.random((rows, d + 1))  # one contiguous draw; the last column becomes the label
    a *= 2.0
    a -= 1.0
    z = a[:, :d] @ true_weights(d)
    u = a[:, d]  # uniform on [-1, 1]: (u + 1) / 2 < sigmoid(z)  <=>  u < tanh(z / 2)
    np.less(u, np.tanh(0.5 * z), out=u)
    return a


def true_weights(d: int) -> Any:
    import numpy as np

    return np.linspace(-1.0, 1.0, d)


def chunk_sizes(n: int, chunk: int) -> tuple[int, ...]:
    full, rest = divmod(n, chunk)
    return (chunk,) * full + ((rest,) if rest else ())


def dataset(n: int, d: int, chunk: int, seed: int = 0) -> tuple[Any, Any]:
    """``(X, y)`` as lazy Dask arrays of ``n`` rows in chunks of ``chunk`` rows; nothing is computed."""
    import dask.array as da
    import numpy as np

    sizes = chunk_sizes(n, chunk)

    def block(block_id: tuple[int, int] | None = None) -> Any:
        assert block_id is not None  # noqa: S101 - dask passes it
        return make_chunk(block_id[0], sizes[block_id[0]], d, seed)

    a = da.map_blocks(block, chunks=(sizes, (d + 1,)), dtype=np.float64, meta=np.empty((0, 0)))
    return a[:, :d], a[:, d]


def loss(w: Any, x: Any, y: Any) -> Any:
    """The mean logistic loss, log(1 + exp(z)) - y z with z = x w.

    The backward pass of the mean broadcasts its scalar cotangent back to ``n`` rows,
    chunked like the data (xpgrad passes the argument's chunks to Dask's
    ``broadcast_to``), so it streams chunk by chunk like the forward pass.
    """
    import xpgrad as xg

    xp = xg.array_namespace(w, x, y)
    z = x @ w
    return xp.mean(xp.logaddexp(0.0, z) - y * z)


def fit(x: Any, y: Any, gtol: float) -> tuple[Any, Any, int]:
    """L-BFGS-B from zero; works on NumPy arrays and on Dask arrays alike."""
    import dask
    import dask.array as da
    import numpy as np
    from scipy.optimize import minimize

    import xpgrad as xg

    lazy = isinstance(x, da.Array)
    passes = 0

    def fun(w: Any) -> tuple[float, Any]:
        nonlocal passes
        passes += 1
        if lazy:
            v, g = xg.value_and_grad(loss)(da.from_array(w), x, y)  # a lazy graph
            v, g = dask.compute(v, g)  # one pass over the data for both
        else:
            v, g = xg.value_and_grad(loss)(w, x, y)
        return float(v), np.asarray(g, dtype=np.float64)

    res = minimize(fun, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B", options={"gtol": gtol})
    return res, res.x, passes


def numpy_gradient_loop(w: Any, n: int, d: int, chunk: int, seed: int) -> tuple[float, Any]:
    """Loss and gradient by hand, chunk by chunk in plain NumPy: the reference."""
    import numpy as np

    total, grad = 0.0, np.zeros(d)
    for i, rows in enumerate(chunk_sizes(n, chunk)):
        a = make_chunk(i, rows, d, seed)
        x, yy = a[:, :d], a[:, d]
        z = x @ w
        total += float(np.sum(np.logaddexp(0.0, z) - yy * z))
        grad += x.T @ (1.0 / (1.0 + np.exp(-z)) - yy)
    return total / n, grad / n


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=lambda s: int(s.replace("_", "")), default=1_000_000)
    p.add_argument("--features", type=int, default=10)
    p.add_argument("--chunk", type=lambda s: int(s.replace("_", "")), default=500_000, help="rows per chunk")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gtol", type=float, default=1e-8)
    p.add_argument("--memory-limit", default=None,
                   help="cap this process's address space (threaded scheduler) or each worker's memory (--workers)")
    p.add_argument("--workers", type=int, default=0, help="run on a LocalCluster with this many worker processes")
    p.add_argument("--compare", action="store_true", help="also fit on the materialised NumPy arrays (small sizes)")
    args = p.parse_args(argv)

    import numpy as np

    n, d, chunk = args.rows, args.features, args.chunk
    limit = parse_bytes(args.memory_limit) if args.memory_limit else None
    report: dict[str, Any] = {
        "rows": n, "features": d, "chunk_rows": chunk, "chunks": len(chunk_sizes(n, chunk)),
        "dataset_bytes": n * (d + 1) * 8, "X_bytes": n * d * 8, "chunk_bytes": chunk * (d + 1) * 8,
        "memory_limit_bytes": limit, "scheduler": f"LocalCluster({args.workers} workers)" if args.workers else "threads",
    }
    client = cluster = None
    if args.workers:
        from dask.distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               memory_limit=limit or "auto", dashboard_address=":0")
        client = Client(cluster)
    elif limit is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    X, y = dataset(n, d, chunk, args.seed)
    start = time.perf_counter()
    res, w, passes = fit(X, y, args.gtol)
    report["fit_seconds"] = round(time.perf_counter() - start, 1)
    report.update(passes=passes, iterations=int(res.nit), converged=bool(res.success), message=str(res.message),
                  loss=float(res.fun), w=w.tolist(),
                  max_abs_w_minus_w_true=float(np.max(np.abs(w - true_weights(d)))))

    # the reference: the same gradient by hand, chunk by chunk, at the solution
    start = time.perf_counter()
    v_ref, g_ref = numpy_gradient_loop(w, n, d, chunk, args.seed)
    report["numpy_loop_seconds"] = round(time.perf_counter() - start, 1)
    g = res.jac  # xpgrad's gradient at res.x, from the optimizer's last pass
    v = res.fun
    report["max_abs_grad_at_solution"] = float(np.max(np.abs(g)))
    report["grad_vs_numpy_loop_max_abs_diff"] = float(np.max(np.abs(g - g_ref)))
    report["loss_vs_numpy_loop_abs_diff"] = abs(float(v) - v_ref)

    if args.compare:
        import dask

        Xn, yn = dask.compute(X, y)
        _, w_np, _ = fit(Xn, yn, args.gtol)
        report["w_vs_in_memory_numpy_fit_max_abs_diff"] = float(np.max(np.abs(w - w_np)))

    report["peak_rss_mib"] = {"main process": round(_peak_rss_mib())}
    if client is not None:
        rss = client.run(_peak_rss_mib)
        report["peak_rss_mib"].update({f"worker {i}": round(v) for i, v in enumerate(rss.values())})
        client.close()
        cluster.close()
    json.dump(report, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return report


if __name__ == "__main__":
    main()
