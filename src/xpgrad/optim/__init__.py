"""Optimizers and learning-rate schedules, PyTorch style (``xpgrad.optim``).

Each optimizer updates its parameters in place under ``no_grad``, on their own
backend; ``state_dict()`` / ``load_state_dict()`` use PyTorch's layout.
"""

from __future__ import annotations

from . import lr_scheduler
from .algorithms import SGD, Adagrad, Adam, AdamW, RMSprop
from .optimizer import Optimizer

__all__ = ["SGD", "Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
