"""Learning-rate schedules: StepLR, CosineAnnealingLR, LinearLR, OneCycleLR (PyTorch's formulas).

A scheduler sets ``group["lr"]`` of its optimizer's parameter groups; call
``scheduler.step()`` once per epoch (or per batch for OneCycleLR) after
``optimizer.step()``. Creating one sets the epoch-0 learning rate.
"""

from __future__ import annotations

import math
from typing import Any

from .._exceptions import XpgradValueError
from .optimizer import Optimizer

__all__ = ["CosineAnnealingLR", "LRScheduler", "LinearLR", "OneCycleLR", "StepLR"]


class LRScheduler:
    """Base class: keeps ``last_epoch`` and the groups' initial learning rates (``base_lrs``)."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            msg = f"{type(self).__name__}: expected an xpgrad.optim optimizer, got {type(optimizer).__name__}"
            raise XpgradValueError(msg)
        self.optimizer = optimizer
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", g["lr"])
        else:
            missing = [i for i, g in enumerate(optimizer.param_groups) if "initial_lr" not in g]
            if missing:
                msg = (f"{type(self).__name__}: resuming (last_epoch={last_epoch}) needs 'initial_lr' "
                       f"in groups {missing}")
                raise XpgradValueError(msg)
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self) -> list[float]:
        """The learning rate of each group at ``last_epoch``."""
        return [g["lr"] for g in self.optimizer.param_groups]

    def step(self) -> None:
        """Advance one epoch and set each group's ``lr``."""
        self.last_epoch += 1
        lrs = self.get_lr()
        for g, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            g["lr"] = lr
        self._last_lr = list(lrs)

    def get_last_lr(self) -> list[float]:
        """The learning rates set by the last ``step``."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs.

    Examples:
        >>> import xpgrad as xg
        >>> opt = xg.optim.SGD([xg.nn.Parameter(xg.zeros(1))], lr=1.0)
        >>> sched = xg.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        >>> lrs = []
        >>> for _ in range(5):
        ...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
        >>> lrs
        [1.0, 1.0, 0.5, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        if not isinstance(step_size, int) or step_size <= 0:
            msg = f"StepLR: step_size must be a positive int, got {step_size!r}"
            raise XpgradValueError(msg)
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine from the initial learning rate down to ``eta_min`` over ``T_max`` epochs (then back up).

    Examples:
        >>> import xpgrad as xg
        >>> opt = xg.optim.SGD([xg.nn.Parameter(xg.zeros(1))], lr=1.0)
        >>> sched = xg.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=2)
        >>> [round(sched.get_last_lr()[0], 6) for _ in range(3) if sched.step() or True]
        [0.5, 0.0, 0.5]
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:  # noqa: N803 - PyTorch's name
        if T_max <= 0:
            msg = f"CosineAnnealingLR: T_max must be positive, got {T_max!r}"
            raise XpgradValueError(msg)
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        c = (1.0 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2.0
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the learning rate linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs.

    Examples:
        >>> import xpgrad as xg
        >>> opt = xg.optim.SGD([xg.nn.Parameter(xg.zeros(1))], lr=1.0)
        >>> sched = xg.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=2)
        >>> [sched.get_last_lr()[0] for _ in range(3) if sched.step() or True]
        [0.75, 1.0, 1.0]
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1) -> None:
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            msg = (f"LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], "
                   f"got {start_factor!r} and {end_factor!r}")
            raise XpgradValueError(msg)
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        frac = min(self.total_iters, self.last_epoch) / self.total_iters if self.total_iters > 0 else 1.0
        factor = self.start_factor + (self.end_factor - self.start_factor) * frac
        return [base * factor for base in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The one-cycle policy (Smith): warm up to ``max_lr``, then anneal far below the start; step per batch.

    Momentum (or Adam's beta1) cycles inversely between ``max_momentum`` and
    ``base_momentum`` when ``cycle_momentum``.

    Examples:
        >>> import xpgrad as xg
        >>> opt = xg.optim.SGD([xg.nn.Parameter(xg.zeros(1))], lr=0.1, momentum=0.9)
        >>> sched = xg.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
        >>> [round(lr, 12) for lr in sched.get_last_lr()]  # max_lr / div_factor
        [0.04]
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | list[float], total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True, base_momentum: float = 0.85,
                 max_momentum: float = 0.95, div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1) -> None:
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                msg = "OneCycleLR: give total_steps, or both epochs and steps_per_epoch"
                raise XpgradValueError(msg)
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0:
            msg = f"OneCycleLR: total_steps must be positive, got {total_steps!r}"
            raise XpgradValueError(msg)
        if not 0 <= pct_start <= 1:
            msg = f"OneCycleLR: pct_start must be in [0, 1], got {pct_start!r}"
            raise XpgradValueError(msg)
        if anneal_strategy not in ("cos", "linear"):
            msg = f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}"
            raise XpgradValueError(msg)
        self.total_steps = total_steps
        self.anneal_strategy = anneal_strategy
        if three_phase:
            self._phases = [
                (float(pct_start * total_steps) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._phases = [
                (float(pct_start * total_steps) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        groups = optimizer.param_groups
        max_lrs = _per_group(max_lr, len(groups), "max_lr")
        if last_epoch == -1:
            for g, m in zip(groups, max_lrs, strict=True):
                g["initial_lr"] = m / div_factor
                g["max_lr"] = m
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                msg = "OneCycleLR: cycle_momentum needs an optimizer with 'momentum' or 'betas'"
                raise XpgradValueError(msg)
            self._use_beta1 = "betas" in optimizer.defaults
            for g, lo, hi in zip(groups, _per_group(base_momentum, len(groups), "base_momentum"),
                                 _per_group(max_momentum, len(groups), "max_momentum"), strict=True):
                if last_epoch == -1:
                    self._set_momentum(g, hi)
                g["base_momentum"] = lo
                g["max_momentum"] = hi
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, g: dict[str, Any], value: float) -> None:
        if self._use_beta1:
            g["betas"] = (value, *g["betas"][1:])
        else:
            g["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            msg = f"OneCycleLR: stepped {step} times, more than total_steps={self.total_steps}"
            raise XpgradValueError(msg)
        lrs = []
        for g in self.optimizer.param_groups:
            start = 0.0
            lr = mom = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(g[lr0], g[lr1], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(g[m0], g[m1], pct)
                    break
                start = end
            lrs.append(lr)
            if self.cycle_momentum:
                self._set_momentum(g, mom)
        return lrs


def _per_group(value: Any, n: int, name: str) -> list[float]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            msg = f"OneCycleLR: {name} has {len(value)} values for {n} parameter groups"
            raise XpgradValueError(msg)
        return list(value)
    return [value] * n
