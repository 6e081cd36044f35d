"""PyTorch reference of the Gated DeltaNet block (`gdn`, MODELS.md 12), in two forms.

The recurrent form runs the decode step of 12.3 token by token; the chunked form
runs the UT/WY transform of 12.4 over chunks of C tokens (the last one
zero-padded). Both take the state a sequence has reached and return the one it
leaves, so a prompt can be fed in pieces:

    state = new_state(blk)                                  # (conv [Cc, K-1], S [Hv, dk, dv])
    out, state = gdn_mixer(u, p, blk, state)               # chunked, chunk=CHUNK
    out, state = gdn_mixer(u, p, blk, state, chunk=None)   # token by token

Value head h reads key head h // (Hv / Hk) (repeat_interleave, `key_heads`).
"""

import torch
import torch.nn.functional as F

from weights.reference.norms import apply_norm

CHUNK = 16          # does not divide the test prompts; any chunk gives the recurrence's result
L2_EPS = 1e-6       # inside the sqrt of the sum of squares (MODELS.md 12.6)


def dims(blk):
    """(Hk, Hv, dk, dv, K, conv channels) of a gdn block config."""
    Hk, Hv, dk, dv, K = (blk[k] for k in
                         ("n_k_heads", "n_v_heads", "head_k_dim", "head_v_dim", "d_conv"))
    return Hk, Hv, dk, dv, K, 2 * Hk * dk + Hv * dv


def new_state(blk, dtype=torch.float64):
    """A fresh sequence's state: the conv window [Cc, K-1] (pre-conv inputs, oldest
    first) and S [Hv, dk, dv], both zero."""
    Hk, Hv, dk, dv, K, Cc = dims(blk)
    return torch.zeros(Cc, K - 1, dtype=dtype), torch.zeros(Hv, dk, dv, dtype=dtype)


def key_heads(Hv, Hk):
    """The key head each value head reads: consecutive value heads share one."""
    return torch.arange(Hv) // (Hv // Hk)


def causal_conv(xi, weight, window):
    """Depthwise causal conv of xi [T, Cc] after `window` [Cc, K-1], then SiLU.

    Tap K-1 multiplies the current input. Returns ([T, Cc], the new window: the
    last K-1 pre-conv inputs)."""
    K = weight.shape[1]
    full = torch.cat([window, xi.t()], dim=1)                          # [Cc, K-1+T]
    out = F.conv1d(full.unsqueeze(0), weight.unsqueeze(1), groups=weight.shape[0])
    return F.silu(out.squeeze(0).t()), full[:, full.shape[1] - (K - 1):]


def l2norm(x):
    """x / sqrt(sum(x^2) + 1e-6) over the last axis."""
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + L2_EPS)


def delta_rule_recurrent(q, k, v, g, beta, S):
    """The gated delta rule token by token, per value head (12.3 steps 1-5).

    q, k: [T, H, dk] (normalised, q scaled, already mapped to value heads);
    v: [T, H, dv]; g, beta: [T, H]; S: [H, dk, dv]. Returns o [T, H, dv] and S."""
    out = []
    for t in range(q.shape[0]):
        S = torch.exp(g[t])[:, None, None] * S
        m = torch.einsum("hij,hi->hj", S, k[t])
        delta = beta[t][:, None] * (v[t] - m)
        S = S + k[t][:, :, None] * delta[:, None, :]
        out.append(torch.einsum("hij,hi->hj", S, q[t]))
    return torch.stack(out), S


def delta_rule_chunked(q, k, v, g, beta, S, chunk=CHUNK):
    """The same recurrence in chunks of `chunk` tokens (the UT/WY transform, 12.4).

    Inside a chunk, gam_i = sum_{s<=i} g_s and A_ij = beta_i (k_i.k_j) e^(gam_i-gam_j)
    for j < i; (I+A) U = beta v and (I+A) W = beta k e^gam; v' = U - W S. Padding
    the last chunk with g = beta = k = 0 leaves S unchanged."""
    T, H, dk = q.shape
    pad = (-T) % chunk
    if pad:
        q, k, v, g, beta = (torch.cat([x, x.new_zeros((pad,) + tuple(x.shape[1:]))])
                            for x in (q, k, v, g, beta))
    causal = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool))
    eye = torch.eye(chunk, dtype=q.dtype)
    out = []
    for c0 in range(0, T + pad, chunk):
        qc, kc, vc = (x[c0:c0 + chunk].transpose(0, 1) for x in (q, k, v))  # [H, L, d]
        gc, bc = g[c0:c0 + chunk].t(), beta[c0:c0 + chunk].t()            # [H, L]
        gam = torch.cumsum(gc, dim=-1)
        diff = (gam[:, :, None] - gam[:, None, :]).masked_fill(~causal, float("-inf"))
        decay = torch.exp(diff)                                           # [H, L, L], 0 above
        A = (bc[:, :, None] * (kc @ kc.transpose(1, 2)) * decay).tril(-1)
        rhs = torch.cat([bc[:, :, None] * vc,
                         (bc * torch.exp(gam))[:, :, None] * kc], dim=-1)
        UW = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
        U, W = UW[..., :vc.shape[-1]], UW[..., vc.shape[-1]:]
        vp = U - W @ S                                                     # [H, L, dv]
        o = torch.exp(gam)[:, :, None] * (qc @ S) + ((qc @ kc.transpose(1, 2)) * decay) @ vp
        out.append(o.transpose(0, 1))
        last = gam[:, -1:]
        S = (torch.exp(last)[:, :, None] * S
             + (kc * torch.exp(last - gam)[:, :, None]).transpose(1, 2) @ vp)
    return torch.cat(out)[:T], S


def gated_rmsnorm(o, z, weight, eps):
    """Per value head over dv: normalise first, then gate: w * o / rms(o) * SiLU(z)."""
    return weight * (o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + eps)) * F.silu(z)


def gdn_mixer(u, p, blk, state, chunk=CHUNK):
    """The GDN mixer over a segment u [T, D] (the normed residual) from `state`.

    p: this block's tensors by short name; blk: its config; state: (conv window,
    S) as new_state gives; chunk: the chunked form's chunk length, or None for the
    token-by-token recurrence. Returns (out [T, D], new state)."""
    Hk, Hv, dk, dv, K, Cc = dims(blk)
    T = u.shape[0]
    window, S = state
    xi = F.linear(u, p["in_qkv.weight"])
    z = F.linear(u, p["in_z.weight"]).reshape(T, Hv, dv)
    b = F.linear(u, p["in_b.weight"])
    a = F.linear(u, p["in_a.weight"])
    qkv, window = causal_conv(xi, p["conv.weight"], window)
    q = qkv[:, :Hk * dk].reshape(T, Hk, dk)
    k = qkv[:, Hk * dk:2 * Hk * dk].reshape(T, Hk, dk)
    v = qkv[:, 2 * Hk * dk:].reshape(T, Hv, dv)
    beta = torch.sigmoid(b)
    g = p["A"] * F.softplus(a + p["dt_bias"])                          # [T, Hv], <= 0
    heads = key_heads(Hv, Hk)
    qh = (l2norm(q) * dk ** -0.5)[:, heads]
    kh = l2norm(k)[:, heads]
    if chunk is None:
        o, S = delta_rule_recurrent(qh, kh, v, g, beta, S)
    else:
        o, S = delta_rule_chunked(qh, kh, v, g, beta, S, chunk)
    y = gated_rmsnorm(o, z, p["gated_norm.weight"], blk["gated_norm_eps"])
    return F.linear(y.reshape(T, Hv * dv), p["out_proj.weight"]), (window, S)


def gdn_block_state(r, p, blk, cfg, state, chunk=CHUNK):
    """A gdn block over a segment from `state`: (r + Mixer(Norm(r)), new state)."""
    out, state = gdn_mixer(apply_norm(r, p, blk["norm"]), p, blk, state, chunk)
    return r + out, state


def gdn_block(r, p, blk, cfg):
    """A gdn block over a whole sequence from a fresh state: r + Mixer(Norm(r))."""
    return gdn_block_state(r, p, blk, cfg, new_state(blk, r.dtype))[0]
