"""PyTorch reference of the Mamba-1 block, full-sequence (parallel) form.

Written from MODELS.md 1.2 and 1.4, plus Jamba's optional RMSNorms over the
dt, B and C slices of x_proj's output (block field `dt_bc_norm`). The selective
scan is a plain loop over time on the whole sequence; it deliberately shares
nothing with the training scan (weights/training/train_scan.py), the test-only step form
or the engine's step, so that agreement between them is evidence, not
tautology.
"""

import torch
import torch.nn.functional as F

from weights.reference.norms import apply_norm, rmsnorm  # noqa: F401 (rmsnorm re-exported)


def mamba1_mixer(u, p, blk):
    """One Mamba-1 mixer over a whole sequence from a fresh state.

    u: [T, D] normed residual; p: this block's tensors by short name; blk: its config.
    Returns [T, D].
    """
    E, N, K, R = blk["d_inner"], blk["d_state"], blk["d_conv"], blk["dt_rank"]
    T = u.shape[0]
    xz = F.linear(u, p["in_proj.weight"], p.get("in_proj.bias"))       # [T, 2E]
    x_pre, z = xz[:, :E], xz[:, E:]
    # Causal depthwise conv: left-pad K-1 zeros; tap K-1 multiplies the current input.
    xc = F.pad(x_pre.t().unsqueeze(0), (K - 1, 0))                      # [1, E, T+K-1]
    xc = F.conv1d(xc, p["conv.weight"].unsqueeze(1), p.get("conv.bias"), groups=E)
    x = F.silu(xc.squeeze(0).t())                                       # [T, E]
    dbc = F.linear(x, p["x_proj.weight"])                               # [T, R+2N]
    dt_low, Bm, Cm = dbc[:, :R], dbc[:, R:R + N], dbc[:, R + N:]
    norm = blk.get("dt_bc_norm")
    if norm is not None:
        # Jamba: each slice normalised on its own before dt_proj and the scan.
        dt_low = apply_norm(dt_low, p, norm, prefix="dt_norm.")
        Bm = apply_norm(Bm, p, norm, prefix="b_norm.")
        Cm = apply_norm(Cm, p, norm, prefix="c_norm.")
    delta = F.softplus(F.linear(dt_low, p["dt_proj.weight"], p["dt_proj.bias"]))  # [T, E]
    A = p["A"]                                                          # [E, N]
    h = torch.zeros(E, N, dtype=u.dtype)
    ys = []
    for t in range(T):
        a_t = torch.exp(delta[t, :, None] * A)                          # [E, N]
        b_t = (delta[t] * x[t])[:, None] * Bm[t][None, :]               # [E, N]
        h = a_t * h + b_t
        ys.append(h @ Cm[t])                                            # [E]
    y = torch.stack(ys) if T else x.new_zeros(0, E)
    y = y + p["D"] * x
    return F.linear(y * F.silu(z), p["out_proj.weight"], p.get("out_proj.bias"))


def mamba1_block(r, p, blk, cfg):
    """A mamba1 block: r + Mixer(Norm(r))."""
    return r + mamba1_mixer(apply_norm(r, p, blk["norm"]), p, blk)

