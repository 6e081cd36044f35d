"""PyTorch reference of the Mamba-2 (SSD) block, full-sequence (parallel) form.

Written from MODELS.md 7.3-7.7 with mamba_ssm's semantics where HF 4.48.3
departs from them for n_groups > 1 (7.13): head h reads B/C group
h // (H/G), and the gated RMSNorm normalises each of the G column groups on
its own. The scan is the chunked SSD form of 7.6 (mamba_ssm's
ssd_minimal_discrete: intra-chunk quadratic term, chunk states, state passing,
inter-chunk term), not the per-token recurrence the engine runs, so that
agreement between them is evidence, not tautology. Any chunk length gives the
recurrence's result; the default does not divide the test prompts.
"""

import torch
import torch.nn.functional as F

from weights.reference.norms import apply_norm

CHUNK = 16


def _segsum(a):
    """[..., L] -> [..., L, L]: S[i, j] = sum(a[j+1..i]) for j <= i, -inf above."""
    L = a.shape[-1]
    cs = torch.cumsum(a, dim=-1)
    seg = cs[..., :, None] - cs[..., None, :]
    mask = torch.tril(torch.ones(L, L, dtype=torch.bool))
    return seg.masked_fill(~mask, float("-inf"))


def ssd_scan(x, a, B, C, chunk=CHUNK, h0=None):
    """The SSD recurrence h_t = exp(a_t) h_{t-1} + x_t ⊗ B_t, y_t = h_t · C_t in
    chunks of `chunk` tokens.

    x: [T, H, P] (already Δ·x); a: [T, H] (Δ·A, <= 0); B, C: [T, H, N] (per head);
    h0: [H, P, N] or None (zeros). Returns y [T, H, P] and the final state [H, P, N].
    """
    T, H, P = x.shape
    N = B.shape[-1]
    pad = (-T) % chunk
    # Padding with a = 0, x = 0 adds nothing to any state or output.
    if pad:
        x, a, B, C = (torch.cat([t, t.new_zeros((pad,) + tuple(t.shape[1:]))])
                      for t in (x, a, B, C))
    nc = (T + pad) // chunk
    x = x.reshape(nc, chunk, H, P)
    B = B.reshape(nc, chunk, H, N)
    C = C.reshape(nc, chunk, H, N)
    a = a.reshape(nc, chunk, H).permute(2, 0, 1)                  # [H, c, l]
    a_cum = torch.cumsum(a, dim=-1)                                # [H, c, l]
    # 1. intra-chunk: Y[l] = sum_{s<=l} (C_l . B_s) exp(S_l - S_s) x_s
    L = torch.exp(_segsum(a))                                      # [H, c, l, s]
    y_diag = torch.einsum("clhn,cshn,hcls,cshp->clhp", C, B, L, x)
    # 2. each chunk's own state: sum_s exp(S_last - S_s) x_s ⊗ B_s
    decay_states = torch.exp(a_cum[..., -1:] - a_cum)              # [H, c, l]
    states = torch.einsum("clhn,hcl,clhp->chpn", B, decay_states, x)
    # 3. state passing between chunks, from h0
    if h0 is None:
        h0 = x.new_zeros(H, P, N)
    states = torch.cat([h0[None], states], dim=0)                  # [c+1, H, P, N]
    decay_chunk = torch.exp(_segsum(F.pad(a_cum[..., -1], (1, 0))))  # [H, c+1, c+1]
    passed = torch.einsum("hzc,chpn->zhpn", decay_chunk, states)
    entering, final = passed[:-1], passed[-1]
    # 4. the state entering each chunk, read out at every position
    y_off = torch.einsum("clhn,chpn,hcl->clhp", C, entering, torch.exp(a_cum))
    y = (y_diag + y_off).reshape(nc * chunk, H, P)[:T]
    return y, final


def head_groups(H, G):
    """The B/C group each head reads: consecutive heads share one, h // (H / G)."""
    return torch.arange(H) // (H // G)


def gated_rmsnorm(y, z, weight, groups, eps):
    """w ⊙ v / rms(v), v = y ⊙ SiLU(z), the RMS over each of `groups` column groups."""
    T, E = y.shape
    v = (y * F.silu(z)).reshape(T, groups, E // groups)
    v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps)
    return v.reshape(T, E) * weight


def gate(y, z, p, blk):
    """y met with the gate z as the block's "gate" says (MODELS.md 7.5, 16.3)."""
    kind, G = blk.get("gate", "norm_after_gate"), blk["n_groups"]
    if kind == "norm_after_gate":
        return gated_rmsnorm(y, z, p["gated_norm.weight"], G, blk["gated_norm_eps"])
    if kind == "norm_before_gate":
        T, E = y.shape
        v = y.reshape(T, G, E // G)
        v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + blk["gated_norm_eps"])
        return v.reshape(T, E) * p["gated_norm.weight"] * F.silu(z)
    if kind == "silu":
        return y * F.silu(z)
    raise ValueError(f"mamba2 reference: gate {kind!r} not implemented")


def mamba2_mixer(u, p, blk, chunk=CHUNK):
    """One Mamba-2 mixer over a whole sequence from a fresh state.

    u: [T, D] normed residual; p: this block's tensors by short name; blk: its config.
    Returns [T, D].
    """
    H, P, N, G, K = (blk[k] for k in ("n_heads", "head_dim", "d_state", "n_groups", "d_conv"))
    E, GN = H * P, G * N
    T = u.shape[0]
    zxbcdt = F.linear(u, p["in_proj.weight"], p.get("in_proj.bias"))
    z, xbc, dt = zxbcdt[:, :E], zxbcdt[:, E:2 * E + 2 * GN], zxbcdt[:, 2 * E + 2 * GN:]
    # Causal depthwise conv over all of xBC; tap K-1 multiplies the current input.
    xc = F.pad(xbc.t().unsqueeze(0), (K - 1, 0))
    xc = F.conv1d(xc, p["conv.weight"].unsqueeze(1), p.get("conv.bias"), groups=E + 2 * GN)
    xbc = F.silu(xc.squeeze(0).t())                                   # [T, E+2GN]
    x, Bg, Cg = xbc[:, :E], xbc[:, E:E + GN], xbc[:, E + GN:]
    delta = F.softplus(dt + p["dt_bias"])                             # [T, H]
    hi = blk["dt_max"]
    delta = delta.clamp(min=blk["dt_min"], max=hi if hi is not None else float("inf"))
    group = head_groups(H, G)
    B = Bg.reshape(T, G, N)[:, group]                                 # [T, H, N]
    C = Cg.reshape(T, G, N)[:, group]
    xh = x.reshape(T, H, P)
    y, _ = ssd_scan(xh * delta[:, :, None], delta * p["A"], B, C, chunk)
    y = (y + p["D"][:, None] * xh).reshape(T, E)
    return F.linear(gate(y, z, p, blk), p["out_proj.weight"], p.get("out_proj.bias"))


def mamba2_block(r, p, blk, cfg):
    """A mamba2 block: r + Mixer(Norm(r))."""
    return r + mamba2_mixer(apply_norm(r, p, blk["norm"]), p, blk)
