"""``xpgrad.fft`` beyond the rule table (tests/cases/fft.py): the namespace and its
signatures, the reading of ``s``/``axes``, errors, the frequency helpers, the JVP
rules, the DC/Nyquist gradient convention, and Dask with single-chunk axes."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad._spec import FFT
from xpgrad.autograd._core import DECLARED, PRIMITIVES

NORMS = ("backward", "ortho", "forward")
RNG = np.random.default_rng(0)


def _c(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def test_namespace_names_and_signatures() -> None:
    strict = pytest.importorskip("array_api_strict")
    assert sorted(xg.fft.__all__) == sorted(FFT) == sorted(strict.fft.__all__)
    for name in FFT:
        ours = inspect.signature(getattr(xg.fft, name)).parameters.values()
        theirs = inspect.signature(getattr(strict.fft, name)).parameters.values()
        assert [(p.name, p.kind, p.default) for p in ours] == [(p.name, p.kind, p.default) for p in theirs], name
    bound = xg.array_namespace(xg.asarray([1.0])).fft
    assert bound.fft is xg.fft.fft and bound.rfftn is xg.fft.rfftn
    assert bound.fftfreq(4).shape == (4,)  # the creation functions are bound to the Tensor's library


def test_every_fft_function_is_differentiable_or_declared() -> None:
    for name in FFT:
        p = PRIMITIVES.get(name)
        assert (p is not None and not p.const) or name in DECLARED, name
    assert set(DECLARED) >= {"fftfreq", "rfftfreq"}


def test_s_minus_one_and_defaults() -> None:
    x = _c(3, 4)
    np.testing.assert_allclose(xg.fft.fftn(x, s=(-1, 6), axes=(0, 1)).data, np.fft.fftn(x, s=(3, 6), axes=(0, 1)))
    # irfftn: -1 keeps the whole last axis of the input, so the output has 2 * (m - 1)
    # there (torch's reading; NumPy's trims the input instead)
    y = xg.fft.irfftn(x, s=(2, -1), axes=(0, 1))
    assert tuple(y.shape) == (2, 6)
    np.testing.assert_allclose(y.data, np.fft.irfftn(x, s=(2, 6), axes=(0, 1)))
    np.testing.assert_allclose(xg.fft.fftn(x).data, np.fft.fftn(x, axes=(0, 1)))
    np.testing.assert_allclose(xg.fft.irfftn(x, axes=(-1,)).data, np.fft.irfft(x))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda x: xg.fft.fft(x, norm="none"), "fft: norm must be"),
        (lambda x: xg.fft.ihfft(xg.real(x), norm=None), "ihfft: norm must be"),
        (lambda x: xg.fft.fftn(x, s=(2, 2)), "fftn: s=.* needs axes"),
        (lambda x: xg.fft.rfftn(xg.real(x), s=(2,), axes=(0, 1)), "rfftn: s and axes must have the same length"),
        (lambda x: xg.fft.ifftn(x, axes=(0, -2)), "ifftn: axes must be distinct"),
        (lambda x: xg.fft.irfftn(x, axes=(2,)), "irfftn: axes .* out of range"),
    ],
)
def test_errors_name_the_function_and_value(call: Any, match: str) -> None:
    with pytest.raises(xg.XpgradValueError, match=match):
        call(xg.asarray(_c(2, 3)))


def test_fftfreq_rfftfreq() -> None:
    np.testing.assert_allclose(xg.fft.fftfreq(5, d=0.1).data, np.fft.fftfreq(5, d=0.1))
    np.testing.assert_allclose(xg.fft.rfftfreq(6, d=2.0).data, np.fft.rfftfreq(6, d=2.0))
    f = xg.fft.fftfreq(4, dtype=xg.float32, device="cpu")
    assert f.dtype == xg.float32
    assert not f.requires_grad
    assert xg.fft.rfftfreq(4, dtype="float32").dtype == xg.float32


def test_fftfreq_on_a_torch_device() -> None:
    torch = pytest.importorskip("torch")
    f = xg.fft.fftfreq(4, device=torch.device("cpu"), dtype=xg.float32)
    assert isinstance(f.data, torch.Tensor)
    assert f.data.dtype == torch.float32


_CASES = [
    ("fft", _c(3, 5), {"n": 7, "axis": 0}),
    ("ifft", _c(3, 5), {"n": 2, "axis": -1}),
    ("fftn", _c(3, 5), {"s": (4, 2), "axes": (1, 0)}),
    ("ifftn", _c(3, 5), {}),
    ("rfft", RNG.standard_normal((3, 5)), {"n": 6}),
    ("ihfft", RNG.standard_normal((3, 5)), {"axis": 0}),
    ("rfftn", RNG.standard_normal((3, 5)), {"s": (3, 7), "axes": (0, 1)}),
    ("irfft", _c(3, 5), {"n": 5}),
    ("hfft", _c(3, 5), {"axis": 0}),
    ("irfftn", _c(3, 5), {"s": (2, 4), "axes": (0, 1)}),
    ("fftshift", _c(3, 5), {"axes": 1}),
    ("ifftshift", _c(3, 5), {}),
]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize(("name", "x", "kw"), _CASES, ids=[c[0] for c in _CASES])
def test_jvp_rule_is_the_transform_of_the_tangent(name: str, x: np.ndarray, kw: dict[str, Any], norm: str) -> None:
    """The forward-mode rule, called directly: the transform of the tangent, which for
    a linear map equals the central difference, and <jvp(t), u> = <t, vjp(u)>."""
    if "shift" not in name:
        kw = {**kw, "norm": norm}
    f = getattr(xg.fft, name)
    t = _c(*x.shape) if np.iscomplexobj(x) else RNG.standard_normal(x.shape)
    xt = xg.tensor(x, requires_grad=True)
    y = f(xt, **kw)
    prim = PRIMITIVES[name]
    xp = xg.array_namespace(x)
    tangent = prim.jvp_rule(0)(xp, t, y.data, x, **y._node.kw)
    eps = 1e-6
    numeric = (f(x + eps * t, **kw).data - f(x - eps * t, **kw).data) / (2 * eps)
    np.testing.assert_allclose(np.asarray(tangent), numeric, rtol=1e-6, atol=1e-8)
    u = _c(*y.shape) if np.iscomplexobj(y.data) else RNG.standard_normal(tuple(y.shape))
    g = xg.grad(lambda a: xg.real(xg.sum(f(a, **kw) * xg.asarray(np.conj(u)))))(x)
    lhs = np.real(np.sum(np.asarray(tangent) * np.conj(u)))
    rhs = np.real(np.sum(t * np.conj(g)))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)


@pytest.mark.parametrize("name", ["irfft", "hfft"])
@pytest.mark.parametrize("n", [6, 7])
def test_dc_and_nyquist_imaginary_parts_get_no_gradient(name: str, n: int) -> None:
    x = _c(4)
    w = RNG.standard_normal(n)
    g = xg.grad(lambda a: xg.sum(getattr(xg.fft, name)(a, n=n) * xg.asarray(w)))(x)
    assert g[0].imag == 0
    if n % 2 == 0:
        assert g[n // 2].imag == 0
    assert np.all(g[1:n // 2 if n % 2 == 0 else 4].imag != 0)


def test_second_order_through_the_rules() -> None:
    x = _c(4, 3)
    xg.testing.check_grads(lambda a: xg.fft.irfftn(xg.fft.fft(a, axis=0) ** 2, s=(3, 5), axes=(0, 1)), x, order=2)


def test_dask_with_single_chunk_axes() -> None:
    da = pytest.importorskip("dask.array")
    x = _c(4, 6)
    dx = da.from_array(x, chunks=-1)

    def loss(a: Any) -> Any:
        return xg.sum(xg.abs(xg.fft.rfftn(xg.real(xg.fft.ifft(a, norm="ortho")), axes=(0, 1))) ** 2)

    got = xg.grad(loss)(dx)
    assert isinstance(got, da.Array)
    np.testing.assert_allclose(got.compute(), xg.grad(loss)(x), rtol=1e-10)
