"""Neural-network building blocks, PyTorch style: ``Module``, ``Parameter``, layers, losses.

Layers create their parameters on the current policy ([`xpgrad.default_device`][xpgrad.default_device]):
its namespace, device and dtype (float32 when the policy names none, as PyTorch
does), initialized from [`xpgrad.random`][xpgrad.random]. Everything is composed of xpgrad's
namespace functions, so models run and differentiate on every backend.
"""

from __future__ import annotations

from . import functional, init, utils
from .activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    RReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from .attention import MultiheadAttention
from .containers import ModuleDict, ModuleList, Sequential
from .layers import (
    AdaptiveAvgPool2d,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Bilinear,
    Conv1d,
    Conv2d,
    ConvTranspose2d,
    Dropout,
    Embedding,
    Flatten,
    GroupNorm,
    Identity,
    LayerNorm,
    Linear,
    MaxPool2d,
    Unflatten,
)
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
from .module import IncompatibleKeys, Module, functional_call
from .parameter import Parameter

__all__ = [
    "Module", "Parameter", "IncompatibleKeys", "functional_call", "Sequential", "ModuleList", "ModuleDict",
    "Identity", "Linear", "Bilinear", "Flatten", "Unflatten", "Dropout", "Embedding", "LayerNorm",
    "Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d",
    "BatchNorm1d", "BatchNorm2d", "GroupNorm", "MultiheadAttention",
    "ReLU", "LeakyReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softplus", "ELU", "Softmax", "LogSoftmax",
    "CELU", "SELU", "ReLU6", "Hardtanh", "Hardswish", "Hardsigmoid", "Softshrink", "Hardshrink", "Tanhshrink",
    "GLU", "Mish", "LogSigmoid", "Softsign", "Threshold", "PReLU", "RReLU",
    "MSELoss", "L1Loss", "HuberLoss", "SmoothL1Loss", "CrossEntropyLoss", "NLLLoss", "BCELoss",
    "BCEWithLogitsLoss", "KLDivLoss",
    "functional", "init", "utils",
]
