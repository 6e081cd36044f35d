"""PyTorch reference of a canonical Mamba-1 model, full-sequence (parallel) form.

Written from MODELS.md 1.2 and 1.4 only. The selective scan is a plain loop over
time on the whole sequence; it deliberately shares nothing with the chunked scan
used for training (weights/train_model.py) or with the engine's step, so that
agreement between them is evidence, not tautology.
"""

import torch
import torch.nn.functional as F

from weights import canonical


def rmsnorm(x, weight, eps):
    """y = w * x / sqrt(mean(x^2) + eps), over the last axis."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


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


class MambaReference:
    """A canonical Mamba-1 model held as plain tensors in one compute dtype."""

    def __init__(self, config, tensors, dtype=torch.float32):
        canonical.check_tensors(config, tensors)
        self.config = config
        self.dtype = dtype
        self.t = {k: v.to(dtype) for k, v in tensors.items()}
        self.blocks = []
        for i, _ in enumerate(config["blocks"]):
            prefix = f"blocks.{i}."
            self.blocks.append({k[len(prefix):]: v for k, v in self.t.items() if k.startswith(prefix)})

    @classmethod
    def load(cls, model_dir, dtype=torch.float32):
        config, tensors, _ = canonical.load_model_dir(model_dir)
        return cls(config, tensors, dtype)

    @torch.no_grad()
    def forward(self, tokens):
        """Logits [T, V] for a 1-D sequence of token ids, from a fresh state."""
        cfg = self.config
        tokens = torch.as_tensor(tokens, dtype=torch.long).reshape(-1)
        r = self.t["embed.weight"][tokens] * cfg["embed"]["scale"]
        for blk, p in zip(cfg["blocks"], self.blocks):
            r = r + mamba1_mixer(rmsnorm(r, p["norm.weight"], blk["norm"]["eps"]), p, blk)
        fn = cfg["final_norm"]
        w = self.t["final_norm.weight"] if fn.get("affine", True) else 1.0
        h = rmsnorm(r, w, fn["eps"])
        head = self.t["embed.weight"] if cfg["tie_embeddings"] else self.t["lm_head.weight"]
        return F.linear(h, head) * cfg["logit_scale"]
