"""Learning-rate schedules as in PyTorch (``torch.optim.lr_scheduler``), with its formulas.

A scheduler sets ``group["lr"]`` of its optimizer's parameter groups; call
``scheduler.step()`` once per epoch (or per batch for OneCycleLR) after
``optimizer.step()``. Creating one sets the epoch-0 learning rate.
"""

from __future__ import annotations

import math
import types
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from .._exceptions import XpgradValueError
from .optimizer import Optimizer

__all__ = ["CosineAnnealingLR", "CosineAnnealingWarmRestarts", "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR",
           "MultiStepLR", "OneCycleLR", "PolynomialLR", "ReduceLROnPlateau", "SequentialLR", "StepLR"]


class LRScheduler:
    """Base class: keeps ``last_epoch`` and the groups' initial learning rates (``base_lrs``)."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            msg = f"{type(self).__name__}: expected an xpgrad.optim optimizer, got {type(optimizer).__name__}"
            raise XpgradValueError(msg)
        self.optimizer = optimizer
        if last_epoch == -1:
            for g in optimizer.param_groups:
                g.setdefault("initial_lr", _lr(g))
        else:
            missing = [i for i, g in enumerate(optimizer.param_groups) if "initial_lr" not in g]
            if missing:
                msg = (f"{type(self).__name__}: resuming (last_epoch={last_epoch}) needs 'initial_lr' "
                       f"in groups {missing}")
                raise XpgradValueError(msg)
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """The step made on creation: ``_is_initial`` tells a chained schedule to keep the groups' rates."""
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """The learning rate of each group at ``last_epoch``."""
        return _group_lrs(self.optimizer)

    def step(self) -> None:
        """Advance one epoch and set each group's ``lr``."""
        self._update_lr()

    def _update_lr(self, epoch: int | None = None) -> None:
        """Advance one epoch (``epoch`` None) or jump to ``epoch`` (the closed form, as PyTorch)."""
        if epoch is None:
            self.last_epoch += 1
            lrs = self.get_lr()
        else:
            self.last_epoch = epoch
            lrs = self._closed_form_lr()
        for g, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            g["lr"] = lr
        self._last_lr = list(lrs)

    def _closed_form_lr(self) -> list[float]:
        """The learning rates at ``last_epoch`` from ``base_lrs`` alone (``get_lr`` where that is closed already)."""
        return self.get_lr()

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


def _lr(group: dict[str, Any]) -> Any:
    """``group["lr"]`` as a Python number where it is a 0-d array.

    An ``xg.jit`` replay on JAX writes the rate back as a 0-d array; a schedule that
    multiplied that array would hand the next call a rate that is no longer a program
    input (the optimizer takes Python numbers as inputs), so the rate stays a float.
    """
    v = group["lr"]
    return float(v) if hasattr(v, "shape") and not v.shape else v


def _group_lrs(optimizer: Optimizer) -> list[float]:
    return [_lr(g) for g in optimizer.param_groups]


class LambdaLR(LRScheduler):
    """The initial learning rate times ``lr_lambda(epoch)`` (one function, or one per parameter group).

    Examples:
        >>> import xpgrad as xg
        >>> opt = xg.optim.SGD([xg.nn.Parameter(xg.zeros(1))], lr=1.0)
        >>> sched = xg.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1.0 / (epoch + 1))
        >>> lrs = []
        >>> for _ in range(3):
        ...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
        >>> lrs
        [1.0, 0.5, 0.3333333333333333]
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | list[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        n = len(optimizer.param_groups) if isinstance(optimizer, Optimizer) else 0
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                msg = f"LambdaLR: expected {n} lr_lambdas (one per parameter group), got {len(lr_lambda)}"
                raise XpgradValueError(msg)
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for f in self.lr_lambdas:
            if not callable(f):
                msg = f"LambdaLR: lr_lambda must be callable, got {f!r}"
                raise XpgradValueError(msg)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * f(self.last_epoch) for f, base in zip(self.lr_lambdas, self.base_lrs, strict=True)]

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer; of the lambdas, only callable objects' attributes (as PyTorch)."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        out["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else dict(f.__dict__)
                             for f in self.lr_lambdas]
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        lambdas = state.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        self.__dict__.update(state)
        for f, saved in zip(self.lr_lambdas, lambdas, strict=True):
            if saved is not None:
                f.__dict__.update(saved)


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` at each of the ``milestones`` epochs.

    Examples:
        >>> import xpgrad as xg
        >>> opt = xg.optim.SGD([xg.nn.Parameter(xg.zeros(1))], lr=1.0)
        >>> sched = xg.optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 3], gamma=0.5)
        >>> lrs = []
        >>> for _ in range(4):
        ...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
        >>> lrs
        [1.0, 0.5, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return _group_lrs(self.optimizer)
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [_lr(g) * factor for g in self.optimizer.param_groups]

    def _closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch) for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every epoch.

    Examples:
        >>> import xpgrad as xg
        >>> opt = xg.optim.SGD([xg.nn.Parameter(xg.zeros(1))], lr=1.0)
        >>> sched = xg.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
        >>> lrs = []
        >>> for _ in range(3):
        ...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
        >>> lrs
        [1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return _group_lrs(self.optimizer)
        return [_lr(g) * self.gamma for g in self.optimizer.param_groups]

    def _closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the learning rate as ``(1 - epoch / total_iters) ** power``, to 0 at ``total_iters``.

    Examples:
        >>> import xpgrad as xg
        >>> opt = xg.optim.SGD([xg.nn.Parameter(xg.zeros(1))], lr=1.0)
        >>> sched = xg.optim.lr_scheduler.PolynomialLR(opt, total_iters=4, power=1.0)
        >>> lrs = []
        >>> for _ in range(6):
        ...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
        >>> lrs
        [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    """

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1) -> None:
        if not isinstance(total_iters, int) or total_iters <= 0:
            msg = f"PolynomialLR: total_iters must be a positive int, got {total_iters!r}"
            raise XpgradValueError(msg)
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_lrs(self.optimizer)
        decay = ((1.0 - self.last_epoch / self.total_iters)
                 / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [_lr(g) * decay for g in self.optimizer.param_groups]

    def _closed_form_lr(self) -> list[float]:
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (1.0 - frac) ** self.power for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the initial rate to ``eta_min``, restarted after ``T_0`` epochs (then ``T_0 * T_mult``...).

    ``step(epoch)`` accepts a fractional epoch (per-batch stepping), as in PyTorch.

    Examples:
        >>> import xpgrad as xg
        >>> opt = xg.optim.SGD([xg.nn.Parameter(xg.zeros(1))], lr=1.0)
        >>> sched = xg.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
        >>> lrs = []
        >>> for _ in range(5):
        ...     lrs.append(round(sched.get_last_lr()[0], 6)); opt.step(); sched.step()
        >>> lrs
        [1.0, 0.5, 1.0, 0.5, 1.0]
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,  # noqa: N803 - PyTorch's names
                 last_epoch: int = -1) -> None:
        if not isinstance(T_0, int) or T_0 <= 0:
            msg = f"CosineAnnealingWarmRestarts: T_0 must be a positive int, got {T_0!r}"
            raise XpgradValueError(msg)
        if not isinstance(T_mult, int) or T_mult < 1:
            msg = f"CosineAnnealingWarmRestarts: T_mult must be an int >= 1, got {T_mult!r}"
            raise XpgradValueError(msg)
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur: float = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        c = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to ``epoch`` (fractional: within a cycle)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                msg = f"CosineAnnealingWarmRestarts.step: epoch must be non-negative, got {epoch!r}"
                raise XpgradValueError(msg)
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        lrs = self.get_lr()
        for g, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            g["lr"] = lr
        self._last_lr = list(lrs)

    def _update_lr(self, epoch: int | None = None) -> None:
        self.step(epoch)


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another, switching at the ``milestones`` epochs.

    Examples:
        >>> import xpgrad as xg
        >>> from xpgrad.optim import lr_scheduler as ls
        >>> opt = xg.optim.SGD([xg.nn.Parameter(xg.zeros(1))], lr=1.0)
        >>> warm = ls.LinearLR(opt, start_factor=0.5, total_iters=2)
        >>> decay = ls.ExponentialLR(opt, gamma=0.5)
        >>> sched = ls.SequentialLR(opt, [warm, decay], milestones=[2])
        >>> lrs = []
        >>> for _ in range(5):
        ...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
        >>> lrs
        [0.5, 0.75, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, schedulers: list[LRScheduler], milestones: list[int],
                 last_epoch: int = -1) -> None:
        if len(schedulers) < 1:
            msg = "SequentialLR: expected at least one scheduler, got none"
            raise XpgradValueError(msg)
        for i, sched in enumerate(schedulers):
            if isinstance(sched, ReduceLROnPlateau):
                msg = f"SequentialLR: ReduceLROnPlateau (at index {i}) is not supported: its step needs a metric"
                raise XpgradValueError(msg)
            if getattr(sched, "optimizer", None) is not optimizer:
                msg = f"SequentialLR: scheduler {i} ({type(sched).__name__}) belongs to another optimizer"
                raise XpgradValueError(msg)
        if len(milestones) != len(schedulers) - 1:
            msg = (f"SequentialLR: expected {len(schedulers) - 1} milestones for {len(schedulers)} schedulers, "
                   f"got {len(milestones)}")
            raise XpgradValueError(msg)
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"]
        for sched in self._schedulers:  # undo the step each made on creation, as PyTorch
            sched.last_epoch -= 1
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = self._schedulers[idx].get_last_lr()

    def step(self) -> None:
        """Advance one epoch with the scheduler in charge of it (reset to its epoch 0 at a milestone)."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched._update_lr(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer, with each scheduler's own ``state_dict``."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        out["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        scheds = state.pop("_schedulers")
        self.__dict__.update(state)
        for sched, saved in zip(self._schedulers, scheds, strict=True):
            sched.load_state_dict(saved)


class ReduceLROnPlateau(LRScheduler):
    """Multiply the learning rate by ``factor`` once the metric given to ``step`` stops improving for ``patience`` epochs.

    Examples:
        >>> import xpgrad as xg
        >>> opt = xg.optim.SGD([xg.nn.Parameter(xg.zeros(1))], lr=1.0)
        >>> sched = xg.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
        >>> lrs = []
        >>> for loss in [3.0, 2.0, 2.0, 2.0, 2.0, 1.0]:
        ...     opt.step(); sched.step(loss); lrs.append(sched.get_last_lr()[0])
        >>> lrs
        [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr: float | list[float] = 0, eps: float = 1e-8) -> None:
        if not isinstance(optimizer, Optimizer):
            msg = f"ReduceLROnPlateau: expected an xpgrad.optim optimizer, got {type(optimizer).__name__}"
            raise XpgradValueError(msg)
        if factor >= 1.0:
            msg = f"ReduceLROnPlateau: factor must be < 1, got {factor!r}"
            raise XpgradValueError(msg)
        if mode not in ("min", "max"):
            msg = f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}"
            raise XpgradValueError(msg)
        if threshold_mode not in ("rel", "abs"):
            msg = f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}"
            raise XpgradValueError(msg)
        self.optimizer = optimizer
        self.factor = factor
        n = len(optimizer.param_groups)
        self.default_min_lr: float | None
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                msg = f"ReduceLROnPlateau: expected {n} min_lrs (one per parameter group), got {len(min_lr)}"
                raise XpgradValueError(msg)
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * n
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self.last_epoch = 0
        self._last_lr = _group_lrs(optimizer)
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self) -> bool:
        """Whether the epochs after a reduction are still being ignored."""
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return a > (best * (self.threshold + 1.0) if self.threshold_mode == "rel" else best + self.threshold)

    def get_lr(self) -> list[float]:
        return _group_lrs(self.optimizer)

    def step(self, metrics: Any) -> None:  # type: ignore[override]
        """Record one epoch's ``metrics`` (a number, or a 0-d array or Tensor) and reduce the rates if it plateaus."""
        current = float(metrics)
        self.last_epoch += 1
        for g in self.optimizer.param_groups:  # (a Python number again after a jitted step on JAX: see _lr)
            g["lr"] = _lr(g)
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _group_lrs(self.optimizer)

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                msg = (f"ReduceLROnPlateau: the optimizer has {len(groups)} parameter groups, min_lrs "
                       f"{len(self.min_lrs)}; set min_lrs for the new groups")
                raise XpgradValueError(msg)
            self.min_lrs = [self.default_min_lr] * len(groups)
        for g, lo in zip(groups, self.min_lrs, strict=True):
            old = float(g["lr"])
            new = max(old * self.factor, lo)
            if old - new > self.eps:
                g["lr"] = new
