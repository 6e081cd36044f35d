"""The parallel_mamba2_attention block (Falcon-H1's layer, MODELS.md 16.1) in the
reference: one pre-norm, the Mamba-2 mixer and the attention mixer on the same
normed rows, r + Mamba2(u) + Attn(u)."""

from weights.reference import attention, mamba2
from weights.reference.norms import apply_norm


def parallel_mamba2_attention_block(r, p, blk, cfg):
    """r + Mamba2(Norm(r)) + Attn(Norm(r)); the mamba2 operator's tensors are under mamba."""
    u = apply_norm(r, p, blk["norm"])
    m = {k[len("mamba."):]: v for k, v in p.items() if k.startswith("mamba.")}
    return r + (mamba2.mamba2_mixer(u, m, blk["mamba2"])
                + attention.attention_mixer(u, p, blk["attention"]))
