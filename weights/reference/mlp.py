"""PyTorch reference of the dense `mlp` block (MODELS.md 3.1, 6.2).

    r + down(act(up(x)))                 gated: false
    r + down(act(gate(x)) * up(x))       gated: true (HF Llama: the activation
                                         is on gate_proj, SwiGLU with silu)
with x = Norm(r). Biases when the block's `bias` is true.
"""

import torch.nn.functional as F

from weights.reference.ffn import activation
from weights.reference.norms import apply_norm


def mlp_block(r, p, blk, cfg):
    x = apply_norm(r, p, blk["norm"])
    act = activation(blk["act"])
    h = F.linear(x, p["mlp.up.weight"], p.get("mlp.up.bias"))
    if blk["gated"]:
        h = act(F.linear(x, p["mlp.gate.weight"], p.get("mlp.gate.bias"))) * h
    else:
        h = act(h)
    return r + F.linear(h, p["mlp.down.weight"], p.get("mlp.down.bias"))
