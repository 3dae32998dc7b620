"""xpgrad.random: policy-following, reproducible across backends and threads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import random as xr

from ._util import to_numpy


def ref(seed: int) -> np.random.Generator:
    """The documented host generator: NumPy's PCG64."""
    return np.random.Generator(np.random.PCG64(seed))


def host(t: Any) -> np.ndarray:
    assert isinstance(t, xg.Tensor)
    return to_numpy(t)


# ----------------------------------------------------------------- same seed, same numbers
def test_same_seed_same_numbers() -> None:
    with xg.default_device(seed=3):
        a = [xr.normal((4,)), xr.uniform(3), xr.integers(5, 9, (3,)), xr.permutation(6), xr.bernoulli(0.3, 5),
             xr.choice(4, (3,))]
    with xg.default_device(seed=3):
        b = [xr.normal((4,)), xr.uniform(3), xr.integers(5, 9, (3,)), xr.permutation(6), xr.bernoulli(0.3, 5),
             xr.choice(4, (3,))]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(host(x), host(y))
    with xg.default_device(seed=4):
        c = xr.normal((4,))
    assert not np.array_equal(host(a[0]), host(c))


def test_values_are_numpys_pcg64_stream() -> None:
    with xg.default_device(seed=7):
        n = xr.normal((2, 3), mean=1.0, std=2.0)
        u = xr.uniform(4, low=-1.0, high=1.0)
        i = xr.integers(-5, 5, (6,))
        p = xr.permutation(8)
    g = ref(7)
    np.testing.assert_array_equal(host(n), g.normal(1.0, 2.0, (2, 3)))
    np.testing.assert_array_equal(host(u), g.uniform(-1.0, 1.0, 4))
    np.testing.assert_array_equal(host(i), g.integers(-5, 5, 6))
    np.testing.assert_array_equal(host(p), g.permutation(8))


def test_float32_is_the_float64_draw_rounded() -> None:
    with xg.default_device(seed=0):
        a = xr.normal(5, dtype="float32")
    with xg.default_device(seed=0, dtype="float32"):
        b = xr.normal(5)
    assert a.dtype == xg.float32 and b.dtype == xg.float32
    expect = ref(0).standard_normal(5).astype(np.float32)
    np.testing.assert_array_equal(host(a), expect)
    np.testing.assert_array_equal(host(b), expect)


def test_same_numbers_on_every_backend(backend: Any) -> None:
    with backend.policy(seed=11):
        n = xr.normal((3, 2))
        n32 = xr.normal(4, dtype="float32")
        u = xr.uniform(3)
        i = xr.integers(100, shape=(5,))
        p = xr.permutation(7)
        b = xr.bernoulli(0.5, 6)
        c = xr.choice(10, (2, 2), replace=False)
    assert xg.array_namespace(n.data).__name__ == xg.array_namespace(backend.asarray(np.zeros(1))).__name__
    g = ref(11)
    fdt = xg.dtype_name(n.data.dtype)
    assert fdt == xg.dtype_name(backend.xp.asarray(1.0).dtype)  # the backend's default float dtype
    np.testing.assert_array_equal(host(n), g.normal(size=(3, 2)).astype(fdt))
    assert n32.dtype == xg.float32
    np.testing.assert_array_equal(host(n32), g.normal(size=4).astype(np.float32))
    np.testing.assert_array_equal(host(u), g.uniform(size=3).astype(fdt))
    assert i.dtype == xg.int64 and p.dtype == xg.int64 and c.dtype == xg.int64
    np.testing.assert_array_equal(host(i), g.integers(0, 100, 5))
    np.testing.assert_array_equal(host(p), g.permutation(7))
    np.testing.assert_array_equal(host(b), (g.random(6) < 0.5).astype(fdt))
    np.testing.assert_array_equal(host(c), g.choice(10, (2, 2), replace=False))


def test_cross_backend_float32_identical() -> None:
    out = {}
    for lib in ("numpy", "array_api_strict", "torch", "jax"):
        pytest.importorskip({"numpy": "numpy", "array_api_strict": "array_api_strict",
                             "torch": "torch", "jax": "jax"}[lib])
        with xg.default_device(lib, seed=5, dtype="float32"):
            out[lib] = (host(xr.normal((3, 3))), host(xr.uniform(4)), host(xr.integers(7, shape=6)))
    for lib, vals in out.items():
        for a, b in zip(vals, out["numpy"], strict=True):
            np.testing.assert_array_equal(a, b, err_msg=lib)
        assert vals[0].dtype == vals[1].dtype == np.float32, lib
        # the namespace's default integer dtype: int64, or int32 for JAX without jax_enable_x64
        assert vals[2].dtype.name in ({"int64", "int32"} if lib == "jax" else {"int64"}), lib


# ----------------------------------------------------------------- policy: namespace, device, dtype
def test_follows_policy_namespace_device_dtype() -> None:
    import array_api_strict as xps

    dev = xps.Device("device1")
    with xg.default_device(xps, device="device1", dtype="float32", seed=0):
        x = xr.normal((2,))
        k = xr.integers(3, shape=(2,))
        y = xr.uniform(2, device="device2")
    assert type(x.data) is type(xps.asarray(1.0))
    assert x.device == dev and k.device == dev
    assert y.device == xps.Device("device2")
    assert x.dtype == xg.float32 and y.dtype == xg.float32
    assert k.dtype == xg.int64


def test_default_float_dtype_is_backends() -> None:
    pytest.importorskip("torch")
    with xg.default_device("torch", seed=0):
        assert xr.normal(2).dtype == xg.float32
        assert xr.normal(2, dtype=xg.float64).dtype == xg.float64
    with xg.default_device("numpy", seed=0):
        assert xr.normal(2).dtype == xg.float64


def test_no_float64_device_gets_float32_by_default() -> None:
    with xg.default_device("array_api_strict", device="no_float64", seed=0):
        x = xr.normal(3)
        assert x.dtype == xg.float32
        with pytest.raises(ValueError, match="no_float64"):
            xr.normal(3, dtype="float64")


def test_complex_policy_dtype_draws_real_counterpart() -> None:
    with xg.default_device(dtype="complex64", seed=0):
        assert xr.normal(2).dtype == xg.float32


def test_outputs_are_tensors_without_grad() -> None:
    t = xr.Generator(0).normal((2, 2))
    assert isinstance(t, xg.Tensor) and not t.requires_grad and t.shape == (2, 2)
    assert xr.Generator(0).normal().shape == ()
    assert xr.Generator(0).integers(3).shape == ()


# ----------------------------------------------------------------- seed(): definition
def test_seed_reseeds_the_policy_generator_inside_a_seeded_block() -> None:
    with xg.default_device(seed=1):
        xr.normal(3)
        xr.seed(0)
        a = xr.normal(3)
        assert xg.current_policy().seed == 1  # the policy keeps its seed
    np.testing.assert_array_equal(host(a), ref(0).standard_normal(3))
    with xg.default_device(seed=1):  # a new block starts again from its own seed
        np.testing.assert_array_equal(host(xr.normal(3)), ref(1).standard_normal(3))


def test_seed_without_policy_seed_reseeds_process_generator() -> None:
    try:
        xr.seed(5)
        a = xr.normal(3)
        b = xr.uniform(2)
        xr.seed(5)
        np.testing.assert_array_equal(host(xr.normal(3)), host(a))
        np.testing.assert_array_equal(host(xr.uniform(2)), host(b))
        np.testing.assert_array_equal(host(a), ref(5).standard_normal(3))
        # another thread without a seeded policy shares the process generator
        xr.seed(5)
        box: list[Any] = []
        th = threading.Thread(target=lambda: box.append(host(xr.normal(3))))
        th.start()
        th.join()
        np.testing.assert_array_equal(box[0], host(a))
        # seeding inside a seeded block does not touch the process generator
        xr.seed(5)
        with xg.default_device(seed=9):
            xr.seed(1)
        np.testing.assert_array_equal(host(xr.normal(3)), host(a))
    finally:
        xr.seed()


def test_unseeded_process_generator_is_entropy_seeded() -> None:
    xr.seed()
    a, b = host(xr.normal(8)), host(xr.normal(8))
    assert not np.array_equal(a, b)
    xr.seed()
    assert not np.array_equal(host(xr.normal(8)), a)


def test_nested_dtype_block_shares_parent_stream() -> None:
    # whichever draws first, parent and dtype-only child continue one stream
    with xg.default_device(seed=0):
        with xg.default_device(dtype="float32"):
            first = xr.normal(2)
        second = xr.normal(2)
    g = ref(0).standard_normal(4)
    np.testing.assert_array_equal(host(first), g[:2].astype(np.float32))
    np.testing.assert_array_equal(host(second), g[2:])


def test_nested_seed_or_namespace_change_starts_fresh_stream() -> None:
    with xg.default_device(seed=0):
        a = xr.normal(2)
        with xg.default_device(seed=0):
            b = xr.normal(2)
        with xg.default_device("array_api_strict"):
            c = xr.normal(2)
        d = xr.normal(2)
    g = ref(0).standard_normal(4)
    np.testing.assert_array_equal(host(a), g[:2])
    np.testing.assert_array_equal(host(b), g[:2])
    np.testing.assert_array_equal(host(c), g[:2])
    np.testing.assert_array_equal(host(d), g[2:])


def test_set_default_policy_seed_is_reproducible() -> None:
    try:
        xg.set_default_policy(seed=2)
        a = xr.normal(3)
        np.testing.assert_array_equal(host(a), ref(2).standard_normal(3))
        xg.set_default_policy(seed=2)  # a new process default: a fresh generator
        np.testing.assert_array_equal(host(xr.normal(3)), host(a))
    finally:
        xg.reset_policy()


def test_generator_is_created_once_per_policy() -> None:
    with xg.default_device(seed=0) as p:
        assert p.rng is None
        xr.normal(1)
        g = p.rng
        assert isinstance(g, xr.Generator)
        xr.uniform(1)
        assert p.rng is g


def test_lazy_creation_is_thread_safe() -> None:
    with xg.default_device(seed=0) as p:
        barrier = threading.Barrier(4)
        seen: list[Any] = []

        def work() -> None:
            barrier.wait()
            seen.append(xr.policy_generator(p))

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len({id(g) for g in seen}) == 1


# ----------------------------------------------------------------- threads
def test_threads_under_different_seeded_policies_are_independent() -> None:
    def run(seed: int) -> list[np.ndarray]:
        with xg.default_device(seed=seed):
            out = []
            for _ in range(30):
                out.append(host(xr.normal(16)))
            return out

    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(run, [0, 1, 2, 3, 0, 1, 2, 3]))
    for seed, res in zip([0, 1, 2, 3, 0, 1, 2, 3], results, strict=True):
        expect = ref(seed).standard_normal(30 * 16).reshape(30, 16)
        np.testing.assert_array_equal(np.stack(res), expect)


def test_shared_generator_across_threads_loses_no_draws() -> None:
    g = xr.Generator(0)
    with ThreadPoolExecutor(4) as ex:
        parts = list(ex.map(lambda _: host(g.integers(1 << 62, shape=50)), range(8)))
    allv = np.sort(np.concatenate(parts))
    np.testing.assert_array_equal(allv, np.sort(ref(0).integers(0, 1 << 62, 400)))


# ----------------------------------------------------------------- Generator explicitly
def test_explicit_generator_methods() -> None:
    g = xr.Generator(42)
    r = ref(42)
    np.testing.assert_array_equal(host(g.normal(3)), r.normal(size=3))
    np.testing.assert_array_equal(host(g.uniform((2,), low=2.0, high=3.0)), r.uniform(2.0, 3.0, 2))
    np.testing.assert_array_equal(host(g.integers(10, 20, 4)), r.integers(10, 20, 4))
    np.testing.assert_array_equal(host(g.permutation(5)), r.permutation(5))
    np.testing.assert_array_equal(host(g.bernoulli(0.25, 6, dtype=xg.bool)), r.random(6) < 0.25)
    np.testing.assert_array_equal(host(g.choice(6, 3, p=[0.1, 0.1, 0.1, 0.1, 0.1, 0.5])),
                                  r.choice(6, 3, p=[0.1, 0.1, 0.1, 0.1, 0.1, 0.5]))
    g.seed(42)
    np.testing.assert_array_equal(host(g.normal(3)), ref(42).normal(size=3))
    assert "PCG64" in repr(g)


def test_explicit_generator_ignores_policy_seed_but_follows_namespace() -> None:
    with xg.default_device("array_api_strict", seed=99, dtype="float32"):
        t = xr.Generator(0).normal(3)
    assert t.dtype == xg.float32
    np.testing.assert_array_equal(host(t), ref(0).standard_normal(3).astype(np.float32))


def test_permutation_and_choice_of_arrays_stay_on_their_backend() -> None:
    import array_api_strict as xps

    x = xps.asarray([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], device=xps.Device("device1"))
    perm = xr.Generator(0).permutation(x)
    order = ref(0).permutation(3)
    assert perm.device == xps.Device("device1")
    np.testing.assert_array_equal(host(perm), np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])[order])
    cols = xr.Generator(0).permutation(x, axis=1)
    np.testing.assert_array_equal(host(cols), np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])[:, ref(0).permutation(2)])
    v = xps.asarray([10, 20, 30, 40])
    ch = xr.Generator(1).choice(v, (2, 2))
    np.testing.assert_array_equal(host(ch), np.array([10, 20, 30, 40])[ref(1).choice(4, (2, 2))])
    assert xr.Generator(1).choice(v).shape == ()


def test_choice_probabilities_from_any_library_and_device() -> None:
    """``p`` may live on a device (read on the host) and be float32 (checked to float32's
    tolerance, then normalised: NumPy's own float64 check would refuse it)."""
    import array_api_strict as xps

    want = ref(3).choice(3, 5, p=[0.2, 0.3, 0.5])
    on_device = xps.asarray([0.2, 0.3, 0.5], device=xps.Device("device1"))
    np.testing.assert_array_equal(host(xr.Generator(3).choice(3, 5, p=on_device)), want)
    np.testing.assert_array_equal(host(xr.Generator(3).choice(3, 5, p=xg.asarray(on_device))), want)
    p32 = np.asarray([0.1, 0.2, 0.7], dtype=np.float32)  # float64 sum: 1 + 1.5e-8
    got = host(xr.Generator(3).choice(3, 5, p=p32))
    np.testing.assert_array_equal(got, ref(3).choice(3, 5, p=p32.astype(np.float64) / p32.astype(np.float64).sum()))
    for bad in ([0.5, 0.4, 0.2], [0.5, 0.6, -0.1], [0.5, 0.5], ["a", "b", "c"], np.asarray([0.5, 0.5, 1e-3], np.float32)):
        with pytest.raises(xg.XpgradValueError, match=r"random\.choice: p must be 3 non-negative"):
            xr.Generator(3).choice(3, 5, p=bad)


def test_permutation_of_tensor_records_gradient() -> None:
    x = xg.asarray([1.0, 2.0, 3.0], requires_grad=True)
    y = xr.Generator(0).permutation(x)
    w = xg.asarray([1.0, 10.0, 100.0])
    (y * w).sum().backward()
    order = ref(0).permutation(3)
    expect = np.zeros(3)
    expect[order] = [1.0, 10.0, 100.0]
    np.testing.assert_array_equal(host(x.grad), expect)


# ----------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: xr.normal((2, -1)), xg.XpgradTypeError, r"random.normal: shape"),
        (lambda: xr.normal(2.5), xg.XpgradTypeError, r"shape"),
        (lambda: xr.normal(2, std=-1.0), xg.XpgradValueError, r"std must be >= 0"),
        (lambda: xr.normal(2, mean="a"), xg.XpgradTypeError, r"mean must be"),
        (lambda: xr.normal(2, dtype="int32"), xg.XpgradTypeError, r"real floating.*int32"),
        (lambda: xr.uniform(2, low=1.0, high=0.0), xg.XpgradValueError, r"low must be <= high"),
        (lambda: xr.integers(3, 3), xg.XpgradValueError, r"low < high"),
        (lambda: xr.integers(1.5), xg.XpgradTypeError, r"low must be a Python int"),
        (lambda: xr.integers(0, 300, dtype="uint8"), xg.XpgradValueError, r"does not fit in uint8"),
        (lambda: xr.integers(3, dtype="float32"), xg.XpgradTypeError, r"integer dtype"),
        (lambda: xr.permutation("abc"), xg.XpgradTypeError, r"random.permutation"),
        (lambda: xr.permutation(np.zeros(3), device="cpu"), xg.XpgradTypeError, r"device="),
        (lambda: xr.bernoulli(1.5), xg.XpgradValueError, r"p must be in \[0, 1\]"),
        (lambda: xr.choice(0), xg.XpgradTypeError, r"positive int"),
        (lambda: xr.choice(3, 4, replace=False), xg.XpgradValueError, r"without replacement"),
        (lambda: xr.choice(3, p=[0.5, 0.5]), xg.XpgradValueError, r"probabilities"),
        (lambda: xr.choice(np.zeros((2, 2))), xg.XpgradValueError, r"1-D"),
        (lambda: xr.seed(-1), xg.XpgradTypeError, r"random.seed"),
        (lambda: xr.Generator("x"), xg.XpgradTypeError, r"random.seed"),
        (lambda: xr.normal(2, device="device9"), xg.UnknownNameError, r"available devices"),
    ],
)
def test_errors(call: Any, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        call()
