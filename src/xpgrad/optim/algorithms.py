"""The update rules: SGD, Adam, AdamW, RMSprop, Adagrad (PyTorch's definitions and defaults).

Each ``_update`` runs under ``no_grad`` on one parameter. It computes on the raw
backend arrays and updates the parameter and its state with Tensor in-place
operators (which mutate the backend array where the library allows it and rebind
it where it does not, as on JAX), so the arithmetic matches ``torch.optim`` step
for step. No full-size temporary is made that the math does not need: a sign
(``maximize``) is folded into a scalar, a temporary the update owns is reused in
place, and each is dropped before the next is made. The array API has no
``out=`` and no fused ``addcdiv``, so where PyTorch divides into the parameter
in place we hold the quotient as one more temporary. Peak extra memory of a
``step()`` on NumPy, as multiples of the parameter's size (measured with
tracemalloc in tests/test_optim.py): SGD 1 (2 with Nesterov momentum and weight
decay), Adam/AdamW 2, RMSprop 2 (3 centered with weight decay), Adagrad 2.

Every optimizer also takes ``persist_every`` (keyword only; see
[`Optimizer`][xpgrad.optim.Optimizer]): on Dask, ``step()`` persists the parameters and
the state every that many steps (default 1), so a loop's graphs stay flat.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

from .._dispatch import backend_namespace
from .._exceptions import XpgradValueError
from ..autograd._tensor import Tensor
from .optimizer import Optimizer

__all__ = ["SGD", "Adagrad", "Adam", "AdamW", "RMSprop"]


def _nonneg(name: str, value: float, who: str) -> None:
    # (a NumPy scalar is a number too: np.float32(0.1); step() reads it as a Python float)
    if not isinstance(value, numbers.Real) or value < 0:
        msg = f"{who}: {name} must be a non-negative number, got {value!r}"
        raise XpgradValueError(msg)


def _decayed(g: Any, p: Tensor, wd: float, sign: float) -> Any:
    """``sign * g + wd * p`` as a new array (the update owns it and may change it in place)."""
    d = p.data * wd
    if sign < 0:
        d -= g
    else:
        d += g
    return d


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov momentum and weight decay.

    Examples:
        >>> import xpgrad as xg
        >>> w = xg.nn.Parameter(xg.asarray([1.0, 2.0]))
        >>> opt = xg.optim.SGD([w], lr=0.1)
        >>> (w * w).sum().backward(); opt.step()
        >>> w
        Parameter containing:
        Tensor([0.8, 1.6], dtype=float64, device=cpu, requires_grad=True)
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 persist_every: int | None = 1) -> None:
        for name, v in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay)):
            _nonneg(name, v, "SGD")
        if nesterov and (momentum <= 0 or dampening != 0):
            msg = (f"SGD: nesterov momentum needs momentum > 0 and dampening = 0, "
                   f"got momentum={momentum}, dampening={dampening}")
            raise XpgradValueError(msg)
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize},
                         persist_every=persist_every)

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor, state: dict[str, Any]) -> None:
        # d = sign * g (+ wd * p); `own` says whether d is a temporary of this update
        lr, wd, mom = group["lr"], group["weight_decay"], group["momentum"]
        sign = -1.0 if group["maximize"] else 1.0
        d, own = grad.data, False
        if wd:
            d, own, sign = _decayed(d, p, wd, sign), True, 1.0
        if not mom:
            if own:
                d *= _as_factor(lr, p.data)
                p -= d
            else:
                p -= d * _as_factor(sign * lr, p.data)
            return
        buf = state.get("momentum_buffer")
        if buf is None:
            xp = backend_namespace(d)
            buf = state["momentum_buffer"] = Tensor(d if own and not group["nesterov"] else xp.asarray(d, copy=True))
            if sign < 0:
                buf *= -1.0
        else:
            buf *= mom
            keep = 1.0 - group["dampening"]
            if keep == 1.0:
                if sign < 0:
                    buf -= d
                else:
                    buf += d
            else:
                buf += d * (sign * keep)
        if group["nesterov"]:  # the step is d + mom * buf
            t = buf.data * mom
            if sign < 0:
                t -= d
            else:
                t += d
            del d
            t *= _as_factor(lr, p.data)
            p -= t
        else:
            del d
            p -= buf.data * _as_factor(lr, p.data)


class Adam(Optimizer):
    """Adam (Kingma and Ba), with L2 ``weight_decay`` added to the gradient and optional AMSGrad.

    Examples:
        >>> import xpgrad as xg
        >>> w = xg.nn.Parameter(xg.asarray([1.0, -1.0]))
        >>> opt = xg.optim.Adam([w], lr=0.1)
        >>> (w * w).sum().backward(); opt.step()
        >>> w.detach()
        Tensor([ 0.9, -0.9], dtype=float64, device=cpu)
    """

    _decoupled = False

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False, persist_every: int | None = 1) -> None:
        who = type(self).__name__
        for name, v in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            _nonneg(name, v, who)
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            msg = f"{who}: betas must be in [0, 1), got {betas!r}"
            raise XpgradValueError(msg)
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "amsgrad": amsgrad, "maximize": maximize}, persist_every=persist_every)

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor, state: dict[str, Any]) -> None:
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        sign = -1.0 if group["maximize"] else 1.0
        if not state:
            state["step"] = 0
            state["exp_avg"] = self._zeros_like(p)
            state["exp_avg_sq"] = self._zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = self._zeros_like(p)
        state["step"] += 1
        step = state["step"]
        g = grad.data
        if wd:
            if self._decoupled:
                p *= _as_factor(1.0 - lr * wd, p.data)
            else:
                g, sign = _decayed(g, p, wd, sign), 1.0
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m *= b1
        m += g * (sign * (1.0 - b1))
        v *= b2
        t = g * g
        del g
        t *= 1.0 - b2
        v += t
        del t
        xp = backend_namespace(p.data)
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]
            vmax[...] = xp.maximum(vmax.data, v.data)
            v = vmax
        denom = xp.sqrt(v.data)
        step = _count(step)
        denom /= _as_factor(_sqrt(1.0 - b2**step), p.data)
        denom += eps
        q = m.data / denom
        del denom
        q *= _as_factor(lr / (1.0 - b1**step), p.data)
        p -= q


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter): ``p *= 1 - lr * weight_decay`` each step.

    Examples:
        >>> import xpgrad as xg
        >>> opt = xg.optim.AdamW([xg.nn.Parameter(xg.zeros(2))])
        >>> opt.param_groups[0]["weight_decay"]
        0.01
    """

    _decoupled = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, persist_every: int | None = 1) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, persist_every=persist_every)


class RMSprop(Optimizer):
    """RMSprop (Hinton), optionally centered and with momentum.

    Examples:
        >>> import xpgrad as xg
        >>> xg.optim.RMSprop([xg.nn.Parameter(xg.zeros(1))]).defaults["alpha"]
        0.99
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False, *,
                 maximize: bool = False, persist_every: int | None = 1) -> None:
        for name, v in (("lr", lr), ("alpha", alpha), ("eps", eps), ("weight_decay", weight_decay),
                        ("momentum", momentum)):
            _nonneg(name, v, "RMSprop")
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
                                  "momentum": momentum, "centered": centered, "maximize": maximize},
                         persist_every=persist_every)

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor, state: dict[str, Any]) -> None:
        lr, alpha, eps, wd, mom = group["lr"], group["alpha"], group["eps"], group["weight_decay"], group["momentum"]
        sign = -1.0 if group["maximize"] else 1.0
        if not state:
            state["step"] = 0
            state["square_avg"] = self._zeros_like(p)
            if mom > 0:
                state["momentum_buffer"] = self._zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = self._zeros_like(p)
        state["step"] += 1
        g, own = grad.data, False
        if wd:
            g, own, sign = _decayed(g, p, wd, sign), True, 1.0
        sq = state["square_avg"]
        sq *= alpha
        t = g * g
        t *= 1.0 - alpha
        sq += t
        del t
        xp = backend_namespace(p.data)
        if group["centered"]:
            ga = state["grad_avg"]
            ga *= alpha
            ga += g * (sign * (1.0 - alpha))
            t = ga.data * ga.data
            t *= -1.0
            t += sq.data  # sq - ga * ga
            avg = xp.sqrt(t)
            del t
        else:
            avg = xp.sqrt(sq.data)
        avg += eps
        # q = sign * g / avg, in g's own buffer when the update owns it
        if own:
            g /= avg
            q = g
        else:
            q = g / avg
            if sign < 0:
                q *= -1.0
        del g, avg
        if mom > 0:
            buf = state["momentum_buffer"]
            buf *= mom
            buf += q
            del q
            p -= buf.data * _as_factor(lr, p.data)
        else:
            q *= _as_factor(lr, p.data)
            p -= q


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.), with learning-rate decay and L2 weight decay.

    Examples:
        >>> import xpgrad as xg
        >>> xg.optim.Adagrad([xg.nn.Parameter(xg.zeros(1))]).defaults["eps"]
        1e-10
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, *, maximize: bool = False,
                 persist_every: int | None = 1) -> None:
        for name, v in (("lr", lr), ("lr_decay", lr_decay), ("weight_decay", weight_decay),
                        ("initial_accumulator_value", initial_accumulator_value), ("eps", eps)):
            _nonneg(name, v, "Adagrad")
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value, "eps": eps,
                                  "maximize": maximize}, persist_every=persist_every)
        for g in self.param_groups:
            for p in g["params"]:
                s = self._zeros_like(p)
                if g["initial_accumulator_value"]:
                    s += g["initial_accumulator_value"]
                self.state[id(p)] = {"step": 0, "sum": s}

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor, state: dict[str, Any]) -> None:
        sign = -1.0 if group["maximize"] else 1.0
        if not state:
            state["step"] = 0
            state["sum"] = self._zeros_like(p) + group["initial_accumulator_value"]
        state["step"] += 1
        g, own = grad.data, False
        if group["weight_decay"]:
            g, own, sign = _decayed(g, p, group["weight_decay"], sign), True, 1.0
        clr = group["lr"] / (1.0 + (_count(state["step"]) - 1) * group["lr_decay"])
        s = state["sum"]
        s += g * g
        std = backend_namespace(p.data).sqrt(s.data)
        std += group["eps"]
        if own:
            g /= std
            q = g
        else:
            q = g / std
        del g, std
        q *= _as_factor(sign * clr, p.data)
        p -= q


def _count(v: Any) -> Any:
    """A step count for float arithmetic: a Python int as it is; a 0-d integer array (a step
    count xg.jit traces) as float64, which every library raises a Python float to (array-api-strict
    refuses ``0.9 ** int_array``; torch would compute it in float32). ``[()]`` makes it a NumPy
    scalar on NumPy, whose power is Python's (libm's ``pow``; NumPy's power of arrays may differ
    by an ulp), so that the program's bias corrections are the eager step's bit for bit."""
    if isinstance(v, int):
        return v
    xp = backend_namespace(v)
    return xp.astype(v, xp.float64)[()]


def _sqrt(v: Any) -> Any:
    """``math.sqrt`` of a Python number; ``xp.sqrt`` of a 0-d array (a step count xg.jit traces)."""
    if isinstance(v, float):
        return math.sqrt(v)
    return backend_namespace(v).sqrt(v)


def _as_factor(v: Any, like: Any) -> Any:
    """A scalar factor for ``like``'s dtype: a Python float as it is; a 0-d array cast to
    ``like``'s dtype (as the float would be), so that the update keeps its dtype and values."""
    if isinstance(v, float):
        return v
    return backend_namespace(v).astype(v, like.dtype)
