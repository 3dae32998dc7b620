"""The update rules: SGD, Adam, AdamW, RMSprop, Adagrad (PyTorch's definitions and defaults).

Each ``_update`` runs under ``no_grad`` on one parameter, with Tensor in-place
operators on the parameter and its state, so the arithmetic matches
``torch.optim`` step for step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import xpgrad as xg

from .._exceptions import XpgradValueError
from ..autograd._tensor import Tensor
from .optimizer import Optimizer

__all__ = ["SGD", "Adagrad", "Adam", "AdamW", "RMSprop"]


def _nonneg(name: str, value: float, who: str) -> None:
    if not isinstance(value, (int, float)) or value < 0:
        msg = f"{who}: {name} must be a non-negative number, got {value!r}"
        raise XpgradValueError(msg)


def _copy(t: Tensor) -> Tensor:
    from .._dispatch import backend_namespace

    return Tensor(backend_namespace(t.data).asarray(t.data, copy=True))


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
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False) -> None:
        for name, v in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay)):
            _nonneg(name, v, "SGD")
        if nesterov and (momentum <= 0 or dampening != 0):
            msg = (f"SGD: nesterov momentum needs momentum > 0 and dampening = 0, "
                   f"got momentum={momentum}, dampening={dampening}")
            raise XpgradValueError(msg)
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize})

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor, state: dict[str, Any]) -> None:
        d = -grad if group["maximize"] else grad
        wd = group["weight_decay"]
        if wd:
            d = d + wd * p
        mom = group["momentum"]
        if mom:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = _copy(d)
            else:
                buf *= mom
                buf += (1.0 - group["dampening"]) * d
            d = d + mom * buf if group["nesterov"] else buf
        p -= group["lr"] * d


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
                 maximize: bool = False) -> None:
        who = type(self).__name__
        for name, v in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            _nonneg(name, v, who)
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            msg = f"{who}: betas must be in [0, 1), got {betas!r}"
            raise XpgradValueError(msg)
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "amsgrad": amsgrad, "maximize": maximize})

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor, state: dict[str, Any]) -> None:
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if group["maximize"]:
            grad = -grad
        if not state:
            state["step"] = 0
            state["exp_avg"] = self._zeros_like(p)
            state["exp_avg_sq"] = self._zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = self._zeros_like(p)
        state["step"] += 1
        step = state["step"]
        if wd:
            if self._decoupled:
                p *= 1.0 - lr * wd
            else:
                grad = grad + wd * p
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m *= b1
        m += (1.0 - b1) * grad
        v *= b2
        v += (1.0 - b2) * (grad * grad)
        bc1 = 1.0 - b1**step
        bc2_sqrt = math.sqrt(1.0 - b2**step)
        if group["amsgrad"]:
            vmax = state["max_exp_avg_sq"]
            vmax[...] = xg.maximum(vmax, v)
            denom = xg.sqrt(vmax) / bc2_sqrt + eps
        else:
            denom = xg.sqrt(v) / bc2_sqrt + eps
        p -= (lr / bc1) * (m / denom)


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
                 maximize: bool = False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class RMSprop(Optimizer):
    """RMSprop (Hinton), optionally centered and with momentum.

    Examples:
        >>> import xpgrad as xg
        >>> xg.optim.RMSprop([xg.nn.Parameter(xg.zeros(1))]).defaults["alpha"]
        0.99
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False, *,
                 maximize: bool = False) -> None:
        for name, v in (("lr", lr), ("alpha", alpha), ("eps", eps), ("weight_decay", weight_decay),
                        ("momentum", momentum)):
            _nonneg(name, v, "RMSprop")
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
                                  "momentum": momentum, "centered": centered, "maximize": maximize})

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor, state: dict[str, Any]) -> None:
        lr, alpha, eps, wd, mom = group["lr"], group["alpha"], group["eps"], group["weight_decay"], group["momentum"]
        if group["maximize"]:
            grad = -grad
        if not state:
            state["step"] = 0
            state["square_avg"] = self._zeros_like(p)
            if mom > 0:
                state["momentum_buffer"] = self._zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = self._zeros_like(p)
        state["step"] += 1
        if wd:
            grad = grad + wd * p
        sq = state["square_avg"]
        sq *= alpha
        sq += (1.0 - alpha) * (grad * grad)
        if group["centered"]:
            ga = state["grad_avg"]
            ga *= alpha
            ga += (1.0 - alpha) * grad
            avg = xg.sqrt(sq - ga * ga) + eps
        else:
            avg = xg.sqrt(sq) + eps
        if mom > 0:
            buf = state["momentum_buffer"]
            buf *= mom
            buf += grad / avg
            p -= lr * buf
        else:
            p -= lr * (grad / avg)


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.), with learning-rate decay and L2 weight decay.

    Examples:
        >>> import xpgrad as xg
        >>> xg.optim.Adagrad([xg.nn.Parameter(xg.zeros(1))]).defaults["eps"]
        1e-10
    """

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, *, maximize: bool = False) -> None:
        for name, v in (("lr", lr), ("lr_decay", lr_decay), ("weight_decay", weight_decay),
                        ("initial_accumulator_value", initial_accumulator_value), ("eps", eps)):
            _nonneg(name, v, "Adagrad")
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value, "eps": eps,
                                  "maximize": maximize})
        for g in self.param_groups:
            for p in g["params"]:
                s = self._zeros_like(p)
                if g["initial_accumulator_value"]:
                    s += g["initial_accumulator_value"]
                self.state[id(p)] = {"step": 0, "sum": s}

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor, state: dict[str, Any]) -> None:
        if group["maximize"]:
            grad = -grad
        if not state:
            state["step"] = 0
            state["sum"] = self._zeros_like(p) + group["initial_accumulator_value"]
        state["step"] += 1
        if group["weight_decay"]:
            grad = grad + group["weight_decay"] * p
        clr = group["lr"] / (1.0 + (state["step"] - 1) * group["lr_decay"])
        s = state["sum"]
        s += grad * grad
        p -= clr * (grad / (xg.sqrt(s) + group["eps"]))
