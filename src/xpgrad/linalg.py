"""The array API ``linalg`` extension over Tensors: ``xpgrad.linalg.inv(x)`` and so on.

Like ``array_api_strict.linalg``, a namespace module over the implementation
(``ops/linalg.py``, where each primitive sits with its VJP and JVP rules);
``matmul``, ``matrix_transpose``, ``tensordot`` and ``vecdot`` are the main
namespace's own functions.
"""

from __future__ import annotations

from .ops.linalg import (
    EighResult,
    EigResult,
    QRResult,
    SlogdetResult,
    SVDResult,
    cholesky,
    cross,
    det,
    diagonal,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    inv,
    matmul,
    matrix_norm,
    matrix_power,
    matrix_rank,
    matrix_transpose,
    outer,
    pinv,
    qr,
    slogdet,
    solve,
    svd,
    svdvals,
    tensordot,
    trace,
    vecdot,
    vector_norm,
)

__all__ = [
    "EigResult", "EighResult", "QRResult", "SVDResult", "SlogdetResult",
    "cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "matmul",
    "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr",
    "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
]
