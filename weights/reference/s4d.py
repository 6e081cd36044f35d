"""PyTorch reference of the `s4d` block (MODELS.md 4.3, 6.2), convolution form.

No recurrence: the kernel K[k, l] = s * Re(sum_i C[k, i] dA[k, i]^l) (s = 2 for
"conj_half", 1 for "full") is materialised for l < T and applied as a causal
convolution, y[t] = sum_{l<=t} K[l] u[t-l] + D u[t] per channel; the engine's
step recursion zeta <- dA zeta + u must reproduce it.
Output "none": r + y. "gelu_glu": r + GLU(W_out GELU(y) + b_out), GLU = first
half * sigmoid(second half) (the minimal S4D block's output layer).
"""

import torch
import torch.nn.functional as F

from weights.reference.norms import apply_norm


def _complex(t):
    return torch.view_as_complex(t.to(torch.float64).contiguous())


def s4d_kernel(dA, C, T, scale):
    """K [ch, H, T] from dA [H, M, 2] and C [ch, H, M, 2] (real views)."""
    dA, C = _complex(dA), _complex(C)                         # [H, M], [ch, H, M]
    l = torch.arange(T, dtype=torch.float64)
    powers = torch.exp(l[:, None, None] * torch.log(dA)[None])  # [T, H, M]
    K = torch.einsum("chm,thm->cht", C, powers)
    return scale * K.real


def causal_conv(u, K):
    """y[t, c, k] = sum_{l <= t} K[c, k, l] u[t - l, k] for u [T, H], K [ch, H, T]."""
    T = u.shape[0]
    idx = torch.arange(T)
    lag = idx[:, None] - idx[None, :]                          # [t, s] = t - s
    mask = lag >= 0
    Kt = K[:, :, lag.clamp(min=0)] * mask                      # [ch, H, T, T]
    return torch.einsum("chts,sh->tch", Kt, u)


def s4d_block(r, p, blk, cfg):
    u = apply_norm(r, p, blk["norm"])
    T, H = u.shape
    scale = 2.0 if blk["state_layout"] == "conj_half" else 1.0
    K = s4d_kernel(p["s4d.dA"], p["s4d.C"], T, scale).to(u.dtype)
    y = causal_conv(u, K) + p["s4d.D"][None] * u[:, None, :]   # [T, ch, H]
    y = y.reshape(T, -1)                                       # S4's "(c h)" order
    if blk["output"] == "gelu_glu":
        z = F.linear(F.gelu(y), p["s4d.out.weight"], p["s4d.out.bias"])
        y = F.glu(z, dim=-1)
    return r + y
