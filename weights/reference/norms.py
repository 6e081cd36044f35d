"""The norm types of the canonical format (MODELS.md 6.1), full-sequence form."""

import torch
import torch.nn.functional as F


def rmsnorm(x, weight, eps):
    """y = w * x / sqrt(mean(x^2) + eps), over the last axis."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def apply_norm(x, p, norm, prefix="norm."):
    """Apply a norm config (None = identity) with tensors p[prefix + ...]."""
    if norm is None:
        return x
    kind, eps, affine = norm["type"], norm["eps"], norm.get("affine", True)
    if kind in ("rmsnorm", "rmsnorm_t5"):
        return rmsnorm(x, p[prefix + "weight"] if affine else 1.0, eps)
    if kind == "layernorm":
        w = p[prefix + "weight"] if affine else None
        b = p[prefix + "bias"] if affine else None
        return F.layer_norm(x, x.shape[-1:], w, b, eps)
    if kind == "scalenorm":
        s = p[prefix + "scalar"] if affine else 1.0
        return s * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    raise ValueError(f"unknown norm type {kind!r}")
