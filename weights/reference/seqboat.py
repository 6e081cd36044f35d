"""PyTorch reference of the SeqBoat block, full-sequence (parallel/training) form.

Written from MODELS.md 2.1-2.5 only, in the form the layer is trained in:
  - MD-EMA as a causal convolution with the kernel k_l = sum_n eta g phi^l,
    evaluated with a length-2L real FFT (the first `ema_truncation` taps only
    when that is set, as in training);
  - the latent configurator's decisions for all tokens at once;
  - compression of the active tokens, block attention over the compressed
    sequence (blocks of w, each attending to itself and the previous block)
    with the exact-window mask rho(t) - w <= rho(t') <= rho(t);
  - RoPE applied to Q and K with their absolute original positions;
  - scatter back into the uncompressed sequence.
There is no recurrent state and no FIFO here, so agreement with the engine's
O(1) step is evidence for it.
"""

import math

import torch
import torch.nn.functional as F

from weights.reference.norms import apply_norm

MASKED = -5e4  # the reference's additive mask value before the softmax (2.4)


def ema(x, p, truncation=None):
    """Causal MD-EMA pre-activation [L, D] of x [L, D] via its convolution kernel."""
    L = x.shape[0]
    taps = L if truncation is None else min(truncation, L)
    g, phi, eta = p["ema.in_coef"], p["ema.decay"], p["ema.out_coef"]      # [D, N]
    l = torch.arange(taps, dtype=x.dtype)
    kernel = ((eta * g)[:, :, None] * phi[:, :, None] ** l).sum(1)          # [D, taps]
    n = 2 * L
    y = torch.fft.irfft(torch.fft.rfft(x.t(), n=n) * torch.fft.rfft(kernel, n=n), n=n)
    return y[:, :L].t() + p["ema.skip"] * x


def rope_interleaved(x, pos, theta):
    """Rotate pairs (2i, 2i+1) of x [m, z] by pos * theta^(-2i/z), positions absolute."""
    z = x.shape[-1]
    inv = theta ** (-2.0 * torch.arange(z // 2, dtype=torch.float64) / z)
    ang = pos.to(torch.float64)[:, None] * inv[None, :]
    c, s = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x0, x1 = x[:, 0::2], x[:, 1::2]
    out = torch.empty_like(x)
    out[:, 0::2] = x0 * c - x1 * s
    out[:, 1::2] = x0 * s + x1 * c
    return out


def window_attention(q, k, v, pos, blk, rel_bias):
    """Exact-window attention over the compressed sequence, block by block.

    q, k [m, z], v [m, v]; pos [m] original positions. Query rho sees keys
    rho - w .. rho. Blocks of w queries see their own block and the previous one,
    which holds every key any of them may see.
    """
    m, z = q.shape
    w = blk["window"]
    nb = (m + w - 1) // w
    pad = nb * w - m

    def padded(t):
        return torch.cat([t, t.new_zeros((pad,) + t.shape[1:])]) if pad else t

    qb = padded(q).reshape(nb, w, z)
    kp, vp, pp = padded(k), padded(v), padded(pos)
    # Keys of block b: block b-1 (zeros before the first) then block b.
    kb = torch.cat([torch.cat([kp.new_zeros(w, z), kp[:-w]]).reshape(nb, w, z),
                    kp.reshape(nb, w, z)], dim=1)                             # [nb, 2w, z]
    vb = torch.cat([torch.cat([vp.new_zeros(w, vp.shape[1]), vp[:-w]]).reshape(nb, w, -1),
                    vp.reshape(nb, w, -1)], dim=1)
    pk = torch.cat([torch.cat([pp.new_zeros(w), pp[:-w]]).reshape(nb, w),
                    pp.reshape(nb, w)], dim=1)                                # [nb, 2w]
    pq = pp.reshape(nb, w)
    rho_q = torch.arange(nb * w).reshape(nb, w, 1)
    rho_k = (torch.arange(nb)[:, None] * w - w + torch.arange(2 * w)[None, :]).reshape(nb, 1, 2 * w)
    valid = (rho_k <= rho_q) & (rho_k >= rho_q - w) & (rho_k >= 0)            # [nb, w, 2w]

    bias = 0.0
    if blk["pos"] == "simple_bias":
        M = blk["rel_pos_max"]
        rel = (pk[:, None, :] - pq[:, :, None]).clamp(-(M - 1), M - 1) + (M - 1)
        bias = rel_bias[rel]
    if blk["attn_fn"] == "softmax":
        scores = torch.einsum("bqz,bkz->bqk", qb, kb) / math.sqrt(z) + bias
        weights = torch.softmax(scores.masked_fill(~valid, MASKED), dim=-1)
    elif blk["attn_fn"] == "relu2":
        scores = torch.einsum("bqz,bkz->bqk", qb / w, kb) + bias
        weights = F.relu(scores).pow(2).masked_fill(~valid, 0.0)
    else:
        raise ValueError(f"attn_fn {blk['attn_fn']!r} unsupported")
    out = torch.einsum("bqk,bkv->bqv", weights, vb).reshape(nb * w, -1)
    return out[:m]


def seqboat_layer(S, p, blk):
    """One SeqBoat layer over S [L, D] from a fresh state.

    Returns (output [L, D], active indices [m] (long), router logits [L, 2]).
    """
    prenorm = blk.get("prenorm", True)
    X = apply_norm(S, p, blk["norm"]) if prenorm else S
    H = F.silu(ema(X, p, blk.get("ema_truncation")))
    u = F.linear(H, p["router.weight"], p["router.bias"])                    # [L, 2]
    G = F.linear(H, p["hx.weight"], p["hx.bias"])
    active = u[:, 1] > u[:, 0]
    conf = torch.softmax(u / p["router.temperature"], dim=-1)[:, 1] * active
    idx = torch.nonzero(active).reshape(-1)

    Y = torch.zeros_like(S)
    if idx.numel():
        z, v = blk["z_dim"], blk["v_dim"]
        zrv = F.silu(F.linear(H[idx], p["gau.in_proj.weight"], p["gau.in_proj.bias"]))
        Z, R, V = zrv[:, :z], zrv[:, z:z + v], zrv[:, z + v:]
        gamma, beta = p["gau.qk_gamma"], p["gau.qk_beta"]
        Q, K = Z * gamma[0] + beta[0], Z * gamma[1] + beta[1]
        if blk["pos"] == "rope_interleaved":
            theta = blk.get("rope_theta", 10000.0)
            Q, K = rope_interleaved(Q, idx, theta), rope_interleaved(K, idx, theta)
        elif blk["pos"] != "simple_bias":
            raise ValueError(f"pos {blk['pos']!r} unsupported")
        O = window_attention(Q, K, V, idx, blk, p.get("gau.rel_pos_bias"))
        Y[idx] = F.linear(O * R, p["gau.out_proj.weight"], p["gau.out_proj.bias"])
    out = F.silu(S + G + conf[:, None] * Y)
    if not prenorm:
        out = apply_norm(out, p, blk["norm"])
    return out, idx, u


def seqboat_block(r, p, blk, cfg):
    """A seqboat block: its residual is internal (the output replaces r)."""
    return seqboat_layer(r, p, blk)[0]
