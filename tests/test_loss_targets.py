"""Class labels outside ``[0, C)`` raise in ``cross_entropy`` and ``nll_loss`` (as in PyTorch).

Unchecked, such a label matches no class: the loss counts it as 0 while the gradient
(softmax - 0) is not zero. Every eager backend raises at the call; Dask raises when the
loss is computed and adds no compute of its own; under ``jax.jit`` there are no values to
check.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from tests.conftest import Backend, Computes

F = xg.nn.functional


def _logits(backend: Backend, shape: tuple[int, ...]) -> Any:
    x = np.random.default_rng(0).standard_normal(shape)
    return xg.asarray(backend.asarray(x), requires_grad=True)


def _labels(backend: Backend, labels: Any) -> Any:
    return backend.asarray(np.asarray(labels, dtype=np.int64))


# (logits shape, labels, the bad label the message names)
_BAD = [
    pytest.param((4, 3), [0, 1, 3, 2], 3, id="N-too-large"),
    pytest.param((4, 3), [0, -1, 1, 2], -1, id="N-negative"),
    pytest.param((2, 3, 2, 2), [[[0, 1], [2, 0]], [[1, 1], [0, 7]]], 7, id="N-d1-d2"),
    pytest.param((3,), 5, 5, id="unbatched"),
]

# every way into the label check: the fused primitive, label smoothing, a class weight
# (constant and requiring grad: the composed path), nll_loss, the loss modules
_CALLS = {
    "cross_entropy": lambda x, t, w: F.cross_entropy(x, t),
    "cross_entropy-none": lambda x, t, w: F.cross_entropy(x, t, reduction="none"),
    "label_smoothing": lambda x, t, w: F.cross_entropy(x, t, label_smoothing=0.1),
    "weight": lambda x, t, w: F.cross_entropy(x, t, weight=w),
    "weight-requires-grad": lambda x, t, w: F.cross_entropy(x, t, weight=xg.asarray(w, requires_grad=True), label_smoothing=0.2),
    "nll_loss": lambda x, t, w: F.nll_loss(F.log_softmax(x, axis=0 if x.ndim == 1 else 1), t),
    "CrossEntropyLoss": lambda x, t, w: xg.nn.CrossEntropyLoss()(x, t),
    "NLLLoss": lambda x, t, w: xg.nn.NLLLoss(reduction="sum")(F.log_softmax(x, axis=0 if x.ndim == 1 else 1), t),
}


def _call(backend: Backend, call: str, x: Any, t: Any) -> Any:
    return _CALLS[call](x, t, backend.asarray(np.asarray([1.0, 2.0, 0.5])))


@pytest.mark.parametrize("call", list(_CALLS))
@pytest.mark.parametrize(("shape", "labels", "bad"), _BAD)
def test_out_of_range_label_raises(backend: Backend, call: str, shape: tuple[int, ...], labels: Any, bad: int) -> None:
    x = _logits(backend, shape)
    t = _labels(backend, labels)
    func = "nll_loss" if call in ("nll_loss", "NLLLoss") or call == "weight-requires-grad" else "cross_entropy"
    with pytest.raises(xg.XpgradIndexError, match=rf"{func}: Target {bad} is out of bounds: class labels must be in \[0, 3\)"):
        loss = _call(backend, call, x, t)
        backend.to_numpy(loss)  # Dask: raised here, when the loss is computed


@pytest.mark.parametrize("call", list(_CALLS))
def test_labels_in_range_and_ignore_index_pass(backend: Backend, call: str) -> None:
    x = _logits(backend, (4, 3))
    loss = _call(backend, call, x, _labels(backend, [0, 2, 1, 2]))
    assert np.isfinite(backend.to_numpy(loss)).all()
    # ignore_index (the default -100, or one inside [0, C)) is not out of bounds
    ok = F.cross_entropy(x, _labels(backend, [0, -100, 1, 2]))
    assert np.isfinite(backend.to_numpy(ok))
    ok = F.nll_loss(F.log_softmax(x, axis=1), _labels(backend, [0, 5, 1, 2]), ignore_index=5)
    assert np.isfinite(backend.to_numpy(ok))


def test_the_error_is_an_index_error_as_in_torch(np_backend: Backend) -> None:
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal((4, 3))
    t = np.asarray([0, 1, 3, 2])
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        torch.nn.functional.cross_entropy(torch.asarray(x), torch.asarray(t))
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        F.cross_entropy(xg.asarray(x), xg.asarray(t))
    with pytest.raises(ValueError, match="Target 3 is out of bounds"):  # and a ValueError, as xpgrad's bad values
        F.cross_entropy(xg.asarray(x), xg.asarray(t))


def test_probability_targets_have_no_labels_to_check(backend: Backend) -> None:
    x = _logits(backend, (2, 3))
    p = xg.asarray(backend.asarray(np.asarray([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])))
    loss = F.cross_entropy(x, p, label_smoothing=0.1)
    assert np.isfinite(backend.to_numpy(loss))


def test_dask_checks_when_the_loss_is_computed_without_a_compute_of_its_own(computes: Computes) -> None:
    da = pytest.importorskip("dask.array")
    x = xg.asarray(da.from_array(np.random.default_rng(0).standard_normal((6, 3)), chunks=(3, 3)), requires_grad=True)
    bad = da.from_array(np.asarray([0, 1, 2, 0, 3, 1]), chunks=3)
    good = da.from_array(np.asarray([0, 1, 2, 0, 2, 1]), chunks=3)
    w = da.from_array(np.asarray([1.0, 2.0, 0.5]))
    for call in _CALLS.values():
        loss = xg.sum(call(x, bad, w))
        loss.backward()
    computes.assert_none("building losses and gradients of bad labels")
    with pytest.raises(xg.XpgradIndexError, match="Target 3 is out of bounds"):
        loss.data.compute()
    with pytest.raises(xg.XpgradIndexError, match="Target 3 is out of bounds"):
        x.grad.data.compute()
    n = computes.n
    x.grad = None
    loss = F.cross_entropy(x, good)
    loss.backward()
    assert computes.n == n, "a step of good labels computed"
    float(loss.data.compute())
    assert computes.n == n + 1  # the loss alone: the check is inside that one compute


def test_jax_checks_concrete_labels_and_traces_under_jit(np_backend: Backend) -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.asarray(np.random.default_rng(0).standard_normal((4, 3)), dtype=jnp.float32)
    with pytest.raises(xg.XpgradIndexError, match="Target 3 is out of bounds"):
        F.cross_entropy(xg.asarray(x), jnp.asarray([0, 1, 3, 2]))

    def loss(x: Any, t: Any) -> Any:
        return F.cross_entropy(xg.asarray(x), t).data

    # under jit the labels are tracers without values: not checked (documented), and tracing works
    t = jnp.asarray([0, 1, 2, 2])
    np.testing.assert_allclose(np.asarray(jax.jit(loss)(x, t)), np.asarray(loss(x, t)), rtol=1e-6)


@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_a_captured_target_under_jit_is_the_eager_loss(backend: Backend, ignore_index: int) -> None:
    """``xg.jit(lambda x: cross_entropy(x, t))`` with ``t`` a raw backend array the function
    closes over: the loss is eager's at the trace and at every replay (on array-api-strict the
    captured array's ``==`` refused the traced classes)."""
    rng = np.random.default_rng(0)
    x = backend.asarray(rng.standard_normal((4, 3)))
    t = backend.asarray(np.array([0, 2, 1, 2]))

    def f(x: Any) -> Any:
        return xg.nn.functional.cross_entropy(x, t, ignore_index=ignore_index)

    j = xg.jit(f)
    for _ in range(3):
        np.testing.assert_allclose(float(j(x)), float(f(x)), rtol=1e-12)
