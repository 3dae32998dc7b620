"""Neural-network building blocks, PyTorch style: ``Module``, ``Parameter``, layers, losses.

Layers create their parameters on the current policy (:func:`xpgrad.default_device`):
its namespace, device and dtype (float32 when the policy names none, as PyTorch
does), initialized from :mod:`xpgrad.random`. Everything is composed of xpgrad's
namespace functions, so models run and differentiate on every backend.
"""

from __future__ import annotations

from . import functional, init, utils
from .activation import ELU, GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Softplus, Tanh
from .containers import ModuleDict, ModuleList, Sequential
from .layers import Dropout, Embedding, Flatten, Identity, LayerNorm, Linear, Unflatten
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import IncompatibleKeys, Module
from .parameter import Parameter

__all__ = [
    "Module", "Parameter", "IncompatibleKeys", "Sequential", "ModuleList", "ModuleDict",
    "Identity", "Linear", "Flatten", "Unflatten", "Dropout", "Embedding", "LayerNorm",
    "ReLU", "LeakyReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softplus", "ELU", "Softmax", "LogSoftmax",
    "MSELoss", "L1Loss", "HuberLoss", "SmoothL1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss",
    "functional", "init", "utils",
]
