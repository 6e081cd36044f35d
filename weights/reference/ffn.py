"""Activations shared by the mlp and moe references (MODELS.md 6.1 `act`)."""

import torch.nn.functional as F

ACTIVATIONS = {
    "gelu": F.gelu,                                          # exact erf form
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "relu2": lambda x: F.relu(x).square(),                   # Nemotron-H's squared ReLU
    "silu": F.silu,
}


def activation(name):
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown act {name!r}")
    return ACTIVATIONS[name]
