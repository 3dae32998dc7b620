"""Module hooks against torch's (issue #31): full backward hooks and state_dict hooks.

The same module is built in xpgrad (on every backend) and in torch (CPU float64), with
the same hooks; what the hooks receive, what they return and the gradients that result
are compared over a loop of training steps in which hooks come and go. One documented
difference: where torch hands a backward hook zeros for a Tensor argument that does not
require grad (or got no gradient), xpgrad hands None, as it does without the hook
(`_same` accepts exactly that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import XpgradTypeError, XpgradValueError, nn

from ._util import to_numpy

torch = pytest.importorskip("torch")
TNN = torch.nn
RNG = np.random.default_rng(31)


def _same(ours: Any, theirs: Any, what: str) -> None:
    """``ours`` (an xpgrad value or None) equals torch's ``theirs``; None matches torch's None or zeros."""
    if ours is None:
        assert theirs is None or not bool(torch.any(theirs != 0)), f"{what}: xpgrad None, torch {theirs}"
        return
    assert theirs is not None, f"{what}: torch None, xpgrad {ours}"
    np.testing.assert_allclose(to_numpy(ours), theirs.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=what)


def _same_tuple(ours: tuple[Any, ...], theirs: tuple[Any, ...], what: str) -> None:
    assert isinstance(ours, tuple) and len(ours) == len(theirs), (what, ours, theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        _same(a, b, f"{what}[{k}]")


# ---------------------------------------------------------------------------- the module, in both libraries
class Ours(nn.Module):
    """Three positional inputs (a Tensor that requires grad, one that does not, another that
    does), a Python number, a keyword Tensor; three outputs, one of them no Tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3, dtype=xg.float64)

    def forward(self, a: Any, b: Any, c: Any, k: float, *, d: Any = None) -> Any:
        h = self.lin(a) * b + k
        out2 = xg.tanh(h) * c if d is None else xg.tanh(h) * c + d
        return h, out2, 3


class Theirs(TNN.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = TNN.Linear(3, 3, dtype=torch.float64)

    def forward(self, a: Any, b: Any, c: Any, k: float, *, d: Any = None) -> Any:
        h = self.lin(a) * b + k
        out2 = torch.tanh(h) * c if d is None else torch.tanh(h) * c + d
        return h, out2, 3


def _pair(backend: Any) -> tuple[Ours, Theirs]:
    ours, theirs = Ours(), Theirs()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return backend.to(ours), theirs


def _inputs(backend: Any) -> tuple[list[Any], list[Any]]:
    """(a, b, c, d) as xpgrad Tensors and as torch tensors; a and c require grad."""
    arrays = [RNG.standard_normal((2, 3)) for _ in range(4)]
    ours = [xg.asarray(backend.asarray(x), requires_grad=i in (0, 2)) for i, x in enumerate(arrays)]
    theirs = [torch.tensor(x, requires_grad=i in (0, 2)) for i, x in enumerate(arrays)]
    return ours, theirs


class Log:
    """The calls of the hooks of one library: (hook name, grad_input or None, grad_output)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Any]] = []

    def full(self, name: str, replace: Callable[[Any], Any] | None = None) -> Callable[..., Any]:
        def hook(mod: Any, gi: Any, go: Any) -> Any:
            self.calls.append((name, gi, go))
            if replace is None:
                return None
            return tuple(None if g is None else replace(g) for g in gi)
        return hook

    def pre(self, name: str, replace: Callable[[Any], Any] | None = None) -> Callable[..., Any]:
        def hook(mod: Any, go: Any) -> Any:
            self.calls.append((name, None, go))
            if replace is None:
                return None
            return tuple(None if g is None else replace(g) for g in go)
        return hook


def _compare_logs(ours: Log, theirs: Log, step: int) -> None:
    assert [c[0] for c in ours.calls] == [c[0] for c in theirs.calls], (step, ours.calls, theirs.calls)
    for (name, gi, go), (_, tgi, tgo) in zip(ours.calls, theirs.calls):
        if tgi is not None:
            _same_tuple(gi, tgi, f"step {step} {name} grad_input")
        else:
            assert gi is None
        _same_tuple(go, tgo, f"step {step} {name} grad_output")
    ours.calls.clear()
    theirs.calls.clear()


# the hooks of the loop: name -> (ours, theirs) makers, and the steps at which each is registered and removed
def _hooks(lo: Log, lt: Log) -> dict[str, tuple[Callable[[], Any], Callable[[], Any]]]:
    return {
        "watch": (lambda: lo.full("watch"), lambda: lt.full("watch")),
        "halve_inputs": (lambda: lo.full("halve_inputs", lambda g: g * 0.5), lambda: lt.full("halve_inputs", lambda g: g * 0.5)),
        "pre_watch": (lambda: lo.pre("pre_watch"), lambda: lt.pre("pre_watch")),
        "pre_triple": (lambda: lo.pre("pre_triple", lambda g: g * 3.0), lambda: lt.pre("pre_triple", lambda g: g * 3.0)),
    }


_SCHEDULE = {  # step -> (register, remove)
    0: (["watch"], []),
    2: (["pre_triple"], []),
    4: (["halve_inputs", "pre_watch"], []),
    6: ([], ["watch"]),
    8: ([], ["pre_triple", "halve_inputs"]),
    10: (["watch"], ["pre_watch"]),
    12: ([], ["watch"]),
}


def test_full_backward_hooks_against_torch_in_a_training_loop(backend: Any) -> None:
    ours, theirs = _pair(backend)
    opt_o, opt_t = xg.optim.SGD(ours.parameters(), lr=0.1), torch.optim.SGD(theirs.parameters(), lr=0.1)
    lo, lt = Log(), Log()
    makers = _hooks(lo, lt)
    handles: dict[str, tuple[Any, Any]] = {}
    steps = 8 if backend.name == "dask" else 14
    for step in range(steps):
        add, remove = _SCHEDULE.get(step, ([], []))
        for name in remove:
            for h in handles.pop(name):
                h.remove()
        for name in add:
            mo, mt = makers[name]
            reg = "register_full_backward_pre_hook" if name.startswith("pre") else "register_full_backward_hook"
            handles[name] = (getattr(ours, reg)(mo()), getattr(theirs, reg)(mt()))
        (a, b, c, d), (ta, tb, tc, td) = _inputs(backend)
        kw = {"d": d} if step % 3 == 0 else {}
        tkw = {"d": td} if step % 3 == 0 else {}
        h, out2, three = ours(a, b, c, 0.5, **kw)
        th, tout2, _ = theirs(ta, tb, tc, 0.5, **tkw)
        assert three == 3
        # odd steps use only the first output: the second's grad_output is None, c gets no gradient
        loss = xg.sum(h * h) if step % 2 else xg.sum(h * h) + xg.sum(out2)
        tloss = (th * th).sum() if step % 2 else (th * th).sum() + tout2.sum()
        opt_o.zero_grad()
        opt_t.zero_grad()
        loss.backward()
        tloss.backward()
        _compare_logs(lo, lt, step)
        for name, x, tx in (("a", a, ta), ("c", c, tc), ("d", d, td)):
            _same(x.grad, tx.grad, f"step {step} {name}.grad")
        for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
            _same(p.grad, tp.grad, f"step {step} {name}.grad")
        opt_o.step()
        opt_t.step()
    for hs in handles.values():
        for hh in hs:
            hh.remove()
    assert not ours._backward_hooks and not ours._backward_pre_hooks


def test_full_backward_hook_fires_once_per_backward_and_once_per_call(backend: Any) -> None:
    counts = {"ours": 0, "theirs": 0}

    def counter(key: str) -> Callable[..., None]:
        def hook(mod: Any, gi: Any, go: Any) -> None:
            counts[key] += 1
        return hook

    m, tm = backend.to(nn.Tanh()), TNN.Tanh()
    m.register_full_backward_hook(counter("ours"))
    tm.register_full_backward_hook(counter("theirs"))
    for step in range(6):
        x = xg.asarray(backend.asarray(RNG.standard_normal(4)), requires_grad=True)
        tx = torch.tensor(to_numpy(x), requires_grad=True)
        calls = 1 + step % 3  # the module called 1, 2, 3 times in one forward
        y, ty = x, tx
        for _ in range(calls):
            y, ty = m(y), tm(ty)
        loss, tloss = xg.sum(y), ty.sum()
        loss.backward(retain_graph=True)
        tloss.backward(retain_graph=True)
        loss.backward()  # a second pass through the same graph: the hooks fire again
        tloss.backward()
        assert counts["ours"] == counts["theirs"] == 2 * calls, (step, counts)
        _same(x.grad, tx.grad, f"step {step} x.grad")
        counts["ours"] = counts["theirs"] = 0


def test_no_input_requires_grad_fires_at_the_outputs_with_grad_input_none(backend: Any) -> None:
    seen: dict[str, list[Any]] = {"ours": [], "theirs": []}
    m, tm = backend.to(nn.Linear(3, 2, dtype=xg.float64)), TNN.Linear(3, 2, dtype=torch.float64)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    m.register_full_backward_hook(lambda mod, gi, go: seen["ours"].append((gi, go)))
    tm.register_full_backward_hook(lambda mod, gi, go: seen["theirs"].append((gi, go)))
    for _ in range(3):
        x = RNG.standard_normal((4, 3))
        with pytest.warns(UserWarning, match="grad_input all None"):
            xg.sum(m(xg.asarray(backend.asarray(x))) ** 2).backward()
        with pytest.warns(UserWarning, match="Full backward hook is firing"):
            (tm(torch.tensor(x)) ** 2).sum().backward()
        (gi, go), (tgi, tgo) = seen["ours"].pop(), seen["theirs"].pop()
        assert gi == tgi == (None,)
        _same_tuple(go, tgo, "grad_output")
        _same(m.weight.grad, tm.weight.grad, "weight.grad")


def test_backward_hooks_under_create_graph_against_torch(backend: Any) -> None:
    class Cube(nn.Module):
        def forward(self, x: Any) -> Any:
            return x * x * x

    class TCube(TNN.Module):
        def forward(self, x: Any) -> Any:
            return x * x * x

    m, tm = Cube(), TCube()
    for mod in (m, tm):
        mod.register_full_backward_hook(lambda mod, gi, go: (gi[0] * go[0],))
        mod.register_full_backward_pre_hook(lambda mod, go: (go[0] * 2.0,))
    for _ in range(3):
        x0 = RNG.standard_normal(5)
        x = xg.asarray(backend.asarray(x0), requires_grad=True)
        tx = torch.tensor(x0, requires_grad=True)
        (g,) = xg.autograd.grad(xg.sum(m(x)), x, create_graph=True)
        (tg,) = torch.autograd.grad(tm(tx).sum(), tx, create_graph=True)
        _same(g, tg, "first derivative")
        (gg,) = xg.autograd.grad(xg.sum(g), x)
        (tgg,) = torch.autograd.grad(tg.sum(), tx)
        _same(gg, tgg, "second derivative")


def test_backward_hook_results_are_checked(backend: Any) -> None:
    m = backend.to(nn.Linear(3, 2, dtype=xg.float64))
    x = xg.asarray(backend.asarray(RNG.standard_normal((4, 3))), requires_grad=True)
    bad: list[tuple[str, Callable[..., Any], type[Exception], str]] = [
        ("full", lambda mod, gi, go: (gi[0], gi[0]), XpgradValueError, r"returned 2 entries; it must return None or a tuple of 1"),
        ("full", lambda mod, gi, go: gi[0], XpgradTypeError, r"must return None or a tuple of 1 grad_input"),
        ("full", lambda mod, gi, go: (xg.sum(gi[0]),), XpgradValueError, r"changed the size of value: expected shape \(4, 3\)"),
        ("pre", lambda mod, go: (go[0], go[0]), XpgradValueError, r"backward pre-hook .* returned 2 entries"),
        ("pre", lambda mod, go: (xg.astype(go[0], xg.float32),), XpgradTypeError, r"changed the type of value"),
    ]
    for kind, hook, exc, match in bad:
        reg = m.register_full_backward_hook if kind == "full" else m.register_full_backward_pre_hook
        with reg(hook), pytest.raises(exc, match=match):
            xg.sum(m(x)).backward()
        x.grad = None
    for p in m.parameters():  # nothing left registered: the step works
        p.grad = None
    xg.sum(m(x)).backward()
    assert x.grad is not None and not m._backward_hooks and not m._backward_pre_hooks


def test_hook_prepend_orders_like_torch() -> None:
    order: dict[str, list[str]] = {"ours": [], "theirs": []}
    m, tm = nn.Tanh(), TNN.Tanh()
    for key, mod in (("ours", m), ("theirs", tm)):
        mod.register_full_backward_hook(lambda mod, gi, go, key=key: order[key].append("first"))
        mod.register_full_backward_hook(lambda mod, gi, go, key=key: order[key].append("prepended"), prepend=True)
        mod.register_full_backward_pre_hook(lambda mod, go, key=key: order[key].append("pre"))
    xg.sum(m(xg.asarray(np.ones(2), requires_grad=True))).backward()
    tm(torch.ones(2, requires_grad=True)).sum().backward()
    assert order["ours"] == order["theirs"] == ["pre", "prepended", "first"]


def test_jitted_step_with_a_backward_hook_refuses_then_works_without(backend: Any) -> None:
    m = backend.to(nn.Linear(3, 2, dtype=xg.float64))
    twin = backend.to(nn.Linear(3, 2, dtype=xg.float64))
    twin.load_state_dict(m.state_dict())

    def step(model: Any, x: Any) -> Any:
        model.zero_grad()
        loss = xg.sum(model(x) ** 2)
        loss.backward()
        return model.weight.grad

    f = xg.jit(step)
    x = xg.asarray(backend.asarray(RNG.standard_normal((4, 3))))
    for i in range(6):
        if i % 3 == 1:
            h = m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 2.0,))
            with pytest.raises(XpgradValueError, match=r"Linear: its backward hooks .* cannot run inside xg.jit"):
                f(m, x)
            with xg.no_grad():  # no backward: the hooks are not set up, the jitted forward runs
                np.testing.assert_allclose(to_numpy(xg.jit(lambda mm, xx: mm(xx))(m, x)), to_numpy(twin(x)), rtol=1e-12)
            eager = to_numpy(step(m, x))  # eagerly, the hook doubles the gradient
            np.testing.assert_allclose(eager, 2 * to_numpy(step(twin, x)), rtol=1e-12)
            h.remove()
        np.testing.assert_allclose(to_numpy(f(m, x)), to_numpy(step(twin, x)), rtol=1e-12)


def test_backward_hooks_refuse_vmap() -> None:
    m = nn.Tanh()
    m.register_full_backward_hook(lambda mod, gi, go: None)
    w = xg.asarray(np.ones(3), requires_grad=True)
    with pytest.raises(XpgradValueError, match=r"Tanh: its backward hooks .* cannot run inside xg.vmap"):
        xg.vmap(lambda x: m(x * w))(xg.asarray(np.ones((2, 3))))


def test_output_of_a_hooked_module_shares_the_version_of_the_real_output() -> None:
    """A write into the output of a hooked module is seen by backward, as without the hook."""
    m = nn.ReLU()
    m.register_full_backward_hook(lambda mod, gi, go: None)
    x = xg.asarray(np.array([1.0, -2.0]), requires_grad=True)
    y = m(x)
    with xg.no_grad():
        y += 1.0
    with pytest.raises(Exception, match="modified in place"):
        xg.sum(y * y).backward()


# ---------------------------------------------------------------------------- state_dict hooks
def _trees() -> tuple[Any, Any]:
    ours = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 1), nn.BatchNorm1d(1)))
    theirs = TNN.Sequential(TNN.Linear(2, 3), TNN.Sequential(TNN.Linear(3, 1), TNN.BatchNorm1d(1)))
    return ours, theirs


def _drop_running_var(mod: Any, sd: Any, prefix: str, meta: Any) -> None:
    del sd[prefix + "1.running_var"]


def test_state_dict_hooks_against_torch() -> None:
    ours, theirs = _trees()
    logs: dict[str, list[Any]] = {"ours": [], "theirs": []}
    handles = []
    for key, tree in (("ours", ours), ("theirs", theirs)):
        log = logs[key]
        for name, mod in tree.named_modules():
            handles.append(mod.register_state_dict_pre_hook(
                lambda mod, prefix, keep, name=name, log=log: log.append(("pre", name, prefix, keep))))
            handles.append(mod.register_state_dict_post_hook(
                lambda mod, sd, prefix, meta, name=name, log=log: log.append(("post", name, prefix, list(sd)))))
    for step in range(4):
        keep = bool(step % 2)
        assert list(ours.state_dict(keep_vars=keep)) == list(theirs.state_dict(keep_vars=keep))
        assert logs["ours"] == logs["theirs"] and logs["ours"], (logs["ours"], logs["theirs"])
        logs["ours"].clear()
        logs["theirs"].clear()
        if step == 1:  # a public post-hook that drops a key, in place
            for tree in (ours, theirs):
                handles.append(tree[1].register_state_dict_post_hook(_drop_running_var))
    for h in handles:
        h.remove()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert "1.1.running_var" in ours.state_dict()
    assert not any(m._state_dict_hooks or m._state_dict_pre_hooks for m in ours.modules())


def test_state_dict_post_hook_results() -> None:
    ours, theirs = _trees()
    for tree in (ours, theirs):  # the older private hook: its result replaces the dict at the top only
        tree._register_state_dict_hook(lambda mod, sd, prefix, meta: {"only": 1})
        tree[1]._register_state_dict_hook(lambda mod, sd, prefix, meta: {"ignored": 2})
    assert ours.state_dict() == theirs.state_dict() == {"only": 1}
    child = nn.Linear(2, 2)
    child.register_state_dict_post_hook(lambda mod, sd, prefix, meta: {"new": 1})
    with pytest.raises(XpgradTypeError, match=r"post-hook .* of Linear returned dict; .* must return None"):
        child.state_dict()
    tchild = TNN.Linear(2, 2)
    tchild.register_state_dict_post_hook(lambda mod, sd, prefix, meta: {"new": 1})
    with pytest.raises(RuntimeError, match="must return None"):
        tchild.state_dict()


def test_load_state_dict_hooks_against_torch() -> None:
    """A pre-hook renames an old checkpoint's keys under its module's prefix; a post-hook forgives
    a missing key; both see what torch's see, in the same order."""
    ours, theirs = _trees()
    logs: dict[str, list[Any]] = {"ours": [], "theirs": []}
    for key, tree in (("ours", ours), ("theirs", theirs)):
        log = logs[key]

        def rename(mod: Any, sd: Any, prefix: str, meta: Any, strict: bool, missing: list[str], unexpected: list[str],
                   errors: list[str], log: list[Any] = log) -> None:
            log.append(("pre", prefix, sorted(sd), strict))
            for k in list(sd):
                if k.startswith(prefix) and k.endswith(".w"):
                    sd[k[:-2] + ".weight"] = sd.pop(k)

        def forgive(mod: Any, keys: Any, log: list[Any] = log) -> None:
            log.append(("post", type(mod).__name__, sorted(keys.missing_keys), sorted(keys.unexpected_keys)))
            if "1.1.bias" in keys.missing_keys:
                keys.missing_keys.remove("1.1.bias")

        tree[1].register_load_state_dict_pre_hook(rename)
        tree[1][0].register_load_state_dict_post_hook(forgive)
        tree.register_load_state_dict_post_hook(forgive)
    for step in range(4):
        src = {k: RNG.standard_normal(tuple(v.shape)) for k, v in theirs.state_dict().items() if k != "1.1.bias"}
        src["1.1.num_batches_tracked"] = np.asarray(step)
        src["1.0.w"] = src.pop("1.0.weight")  # the old name
        src_copy = dict(src)
        got = ours.load_state_dict(src, strict=step % 2 == 0)
        tgot = theirs.load_state_dict({k: torch.tensor(v) for k, v in src.items()}, strict=step % 2 == 0)
        assert src == src_copy  # the caller's mapping is not changed
        assert (got.missing_keys, got.unexpected_keys) == (tgot.missing_keys, tgot.unexpected_keys) == ([], [])
        assert logs["ours"] == logs["theirs"], (logs["ours"], logs["theirs"])
        logs["ours"].clear()
        logs["theirs"].clear()
        for k, v in theirs.state_dict().items():
            _same(ours.state_dict()[k], v, k)


def test_load_state_dict_post_hook_errors_leave_the_module_unchanged(backend: Any) -> None:
    m = backend.to(nn.Linear(2, 2, dtype=xg.float64))
    before = {k: to_numpy(v).copy() for k, v in m.state_dict().items()}
    seen: list[Any] = []
    m.register_load_state_dict_post_hook(lambda mod, keys: seen.append(list(keys.unexpected_keys)))
    for _ in range(3):  # an unexpected key the hook leaves: strict raises after the hook, the values are put back
        with pytest.raises(XpgradValueError, match=r"unexpected keys \['extra'\] \(after its load_state_dict post-hooks\)"):
            m.load_state_dict({"weight": np.zeros((2, 2)), "bias": np.zeros(2), "extra": np.zeros(1)})
        for k, v in m.state_dict().items():
            np.testing.assert_array_equal(to_numpy(v), before[k])
    assert seen == [["extra"]] * 3
    h = m.register_load_state_dict_pre_hook(lambda mod, sd, *rest: rest[-1].append("bad checkpoint"))
    with pytest.raises(XpgradValueError, match="bad checkpoint"):
        m.load_state_dict({"weight": np.zeros((2, 2)), "bias": np.zeros(2)})
    h.remove()
    m.register_load_state_dict_post_hook(lambda mod, keys: 1)
    with pytest.raises(XpgradTypeError, match=r"post-hook .* must return None"):
        m.load_state_dict({"weight": np.zeros((2, 2)), "bias": np.zeros(2)})


def test_hooks_must_be_callable() -> None:
    m = nn.Linear(2, 2)
    for reg in (m.register_full_backward_hook, m.register_full_backward_pre_hook, m.register_state_dict_pre_hook,
                m.register_state_dict_post_hook, m.register_load_state_dict_pre_hook, m.register_load_state_dict_post_hook):
        with pytest.raises(XpgradTypeError, match=rf"{reg.__name__}: expected a callable hook, got int 3"):
            reg(3)
