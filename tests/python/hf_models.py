"""What the tests that build small transformers models share (the converters'
in tests/python/weights, the engine's in tests/python/parity; their conftests
put this folder on sys.path)."""

import types

import torch


def stub_dynamo():
    """transformers' caches mark tensors for torch.compile with torch._dynamo,
    which Debian's torch 1.13 does not have; the mark is only a compiler hint,
    so a no-op stands in for it."""
    if not hasattr(torch, "_dynamo"):
        torch._dynamo = types.SimpleNamespace(mark_static_address=lambda tensor: None)


@torch.no_grad()
def perturb(model, suffixes, scale):
    """Adds scale x N(0, 1) to every parameter whose name ends with one of
    `suffixes`. transformers starts norms and D at 1 and biases at 0: moved,
    a converter that dropped or swapped one of them shows."""
    for name, p in model.named_parameters():
        if name.endswith(suffixes):
            p.add_(scale * torch.randn_like(p))


@torch.no_grad()
def scale(model, suffixes, factor):
    """Multiplies every parameter whose name ends with one of `suffixes` by factor."""
    for name, p in model.named_parameters():
        if name.endswith(suffixes):
            p.mul_(factor)
