"""OpCases for the creation chapter (``tril``, ``triu``, ``meshgrid``) and ``astype``.

``meshgrid`` returns several arrays; the cases stack them, so every output's
gradient reaches its input. ``astype`` is checked through a float -> complex -> real
round trip (the harness wants a real output of the input's precision); casts
between float64 and float32 are pinned down in tests/test_data_type.py, since
central differences through a float32 rounding are meaningless.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests._cases import OpCase

Draw = Any


def _matrices(draw: Draw) -> list[tuple[int, ...]]:
    """One stack of (possibly non-square) matrices."""
    return [draw(hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=4))]


def _k(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    return {"k": draw(st.integers(-3, 3))}


def _vectors(n: int) -> Any:
    def draw(draw_: Draw) -> list[tuple[int, ...]]:
        return [(draw_(st.integers(1, 4)),) for _ in range(n)]

    return draw


def _indexing(draw: Draw, shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    return {"indexing": draw(st.sampled_from(["xy", "ij"]))}


def _complex_of(xp: Any, x: Any) -> Any:
    return xp.complex64 if x.dtype == xp.float32 else xp.complex128


def _two_matrices(draw: Draw) -> list[tuple[int, ...]]:
    return _matrices(draw) * 2


def _on_complex(tri: str) -> Any:
    """``tri`` of the complex matrix x + iy, seen through a real output (the harness keeps
    real outputs for the float32 check), so complex inputs are tested where the backend
    allows them."""

    def fn(xp: Any, x: Any, y: Any, k: int) -> Any:
        z = getattr(xp, tri)(xp.astype(x, _complex_of(xp, x)) + y * 1j, k=k)
        return xp.real(z * xp.conj(z) * (1 + 2j) + z)

    def torch_fn(torch: Any, x: Any, y: Any, k: int) -> Any:
        z = getattr(torch, tri)(x + y * 1j, diagonal=k)
        return torch.real(z * torch.conj(z) * (1 + 2j) + z)

    return OpCase(f"{tri}_complex", fn, nargs=2, shapes=_two_matrices, params=_k, covers=(tri,), torch_fn=torch_fn,
                  xfail={"dask": "dask.array.tril/triu of a complex array warns ComplexWarning (dask's tri casts)"})


CASES = [
    OpCase("tril", lambda xp, x, k: xp.tril(x, k=k), shapes=_matrices, params=_k,
           torch_fn=lambda torch, x, k: torch.tril(x, diagonal=k)),
    OpCase("triu", lambda xp, x, k: xp.triu(x, k=k), shapes=_matrices, params=_k,
           torch_fn=lambda torch, x, k: torch.triu(x, diagonal=k)),
    _on_complex("tril"),
    _on_complex("triu"),
    OpCase("meshgrid", lambda xp, a, b, indexing: xp.stack(xp.meshgrid(a, b, indexing=indexing)), nargs=2,
           shapes=_vectors(2), params=_indexing, complex=True,
           torch_fn=lambda torch, a, b, indexing: torch.stack(torch.meshgrid(a, b, indexing=indexing))),
    OpCase("meshgrid_3", lambda xp, a, b, c, indexing: xp.stack(xp.meshgrid(a, b, c, indexing=indexing)) ** 2,
           nargs=3, shapes=_vectors(3), params=_indexing, covers=("meshgrid",),
           torch_fn=lambda torch, a, b, c, indexing: torch.stack(torch.meshgrid(a, b, c, indexing=indexing)) ** 2),
    OpCase("meshgrid_one_used", lambda xp, a, b: xp.meshgrid(a, b)[1] * 3.0, nargs=2, shapes=_vectors(2),
           covers=("meshgrid",), torch_fn=lambda torch, a, b: torch.meshgrid(a, b, indexing="xy")[1] * 3.0),
    OpCase("astype", lambda xp, x: xp.real(xp.astype(x, _complex_of(xp, x)) ** 2 * (1 + 2j)),
           torch_fn=lambda torch, x: torch.real(x.to(torch.complex128) ** 2 * (1 + 2j))),
]
