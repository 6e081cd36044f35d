"""PyTorch reference of Qwen3.5's multi-token-prediction (MTP) head, as the
engine's MTP drafter runs it (engine/speculative/mtp_drafter.h gives the
sources): for each position i of a context t_0..t_{n-1} whose next token is
known,
    x_i  = fc([norm_e(embed(t_{i+1})) ; norm_h(h_i)])     fc: [D, 2D]
    x_i  = the decoder layer (gated attention over x_0..x_i at position i,
           then the gated MLP), as the model's full-attention layers
    g_i  = norm(x_i);  logits_i = head(g_i), a guess at t_{i+2}
where h_i is the target's hidden state after its final norm (what its head
reads) and every norm is the (1 + w) RMSNorm of the stored w. Drafting k tokens
after the context feeds g of the last row back as the next row's hidden, with
the token just drafted, one position further on.

The tensors are mtp.safetensors' verbatim Hugging Face names; mtp_blocks maps
them to the canonical attention and mlp blocks' (q_proj split into per-head
query and gate rows, norms as 1 + w).
"""

import json
import os

import torch
import torch.nn.functional as F

from weights import safetensors_io
from weights.reference.attention import attention_block
from weights.reference.mlp import mlp_block
from weights.reference.norms import rmsnorm


def load_mtp(model_dir, dtype=torch.float64):
    """The model directory's MTP tensors, by their stored names, in `dtype`."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    if "mtp" not in config:
        raise ValueError(f"{model_dir}: config.json has no \"mtp\"")
    tensors, _ = safetensors_io.load_file(os.path.join(model_dir, config["mtp"]["file"]))
    return {k: v.to(dtype) for k, v in tensors.items()}


def mtp_blocks(config, mtp):
    """(attention block config, its tensors, mlp block config, its tensors) of
    the MTP layer: the model's first attention and mlp block configs."""
    kinds = [b["kind"] for b in config["blocks"]]
    attn_cfg = config["blocks"][kinds.index("attention")]
    mlp_cfg = config["blocks"][kinds.index("mlp")]
    H, dh = attn_cfg["n_heads"], attn_cfg["head_dim"]
    s = "mtp.layers.0."
    q = mtp[s + "self_attn.q_proj.weight"].reshape(H, 2, dh, -1)
    attn = {
        "norm.weight": 1.0 + mtp[s + "input_layernorm.weight"],
        "attn.q.weight": q[:, 0].reshape(H * dh, -1),
        "attn.gate.weight": q[:, 1].reshape(H * dh, -1),
        "attn.k.weight": mtp[s + "self_attn.k_proj.weight"],
        "attn.v.weight": mtp[s + "self_attn.v_proj.weight"],
        "attn.o.weight": mtp[s + "self_attn.o_proj.weight"],
        "attn.q_norm.weight": 1.0 + mtp[s + "self_attn.q_norm.weight"],
        "attn.k_norm.weight": 1.0 + mtp[s + "self_attn.k_norm.weight"],
    }
    mlp = {"norm.weight": 1.0 + mtp[s + "post_attention_layernorm.weight"]}
    for n in ("gate", "up", "down"):
        mlp[f"mlp.{n}.weight"] = mtp[s + f"mlp.{n}_proj.weight"]
    return attn_cfg, attn, mlp_cfg, mlp


class ReferenceMtp:
    """The MTP head of a ReferenceModel (its embedding, final norm and head)."""

    def __init__(self, model, mtp):
        self.model = model
        self.t = {k: v.to(model.dtype) for k, v in mtp.items()}
        self.eps = model.config["final_norm"]["eps"]
        self.blocks = mtp_blocks(model.config, self.t)

    @torch.no_grad()
    def run(self, hidden, next_tokens):
        """(logits [T, V], g [T, D]) of rows (hidden[i], next_tokens[i]) at
        positions 0..T-1, each attending to the rows before it."""
        m, t = self.model, self.t
        e = m._embed(next_tokens)
        a = rmsnorm(e, 1.0 + t["mtp.pre_fc_norm_embedding.weight"], self.eps)
        b = rmsnorm(hidden, 1.0 + t["mtp.pre_fc_norm_hidden.weight"], self.eps)
        x = F.linear(torch.cat([a, b], dim=-1), t["mtp.fc.weight"])
        attn_cfg, attn, mlp_cfg, mlp = self.blocks
        x = attention_block(x, attn, attn_cfg, m.config)
        x = mlp_block(x, mlp, mlp_cfg, m.config)
        g = rmsnorm(x, 1.0 + t["mtp.norm.weight"], self.eps)
        cfg = m.config
        head = m.t["embed.weight"] if cfg["tie_embeddings"] else m.t["lm_head.weight"]
        return F.linear(g, head) * cfg["logit_scale"], g

    @torch.no_grad()
    def context_logits(self, tokens):
        """The MTP's logits [n-1, V] over a context of n tokens: row i guesses
        token i+2."""
        h = self.model.hidden(tokens)
        tokens = torch.as_tensor(tokens, dtype=torch.long).reshape(-1)
        return self.run(h[:-1], tokens[1:])[0]

    @torch.no_grad()
    def drafts(self, tokens, k, vocab_limit=None):
        """k greedy drafts (ties to the lower id) after the context `tokens`
        (n >= 2) and its next token tokens[-1] as the target chose it: the
        guesses for the k tokens after the whole context."""
        h = self.model.hidden(tokens)[:-1]
        ids = list(torch.as_tensor(tokens, dtype=torch.long).reshape(-1)[1:].tolist())
        out = []
        for _ in range(k):
            logits, g = self.run(h, ids)
            row = logits[-1] if vocab_limit is None else logits[-1][:vocab_limit]
            d = int(torch.argmax(row))
            out.append(d)
            h = torch.cat([h, g[-1:]], dim=0)
            ids.append(d)
        return out
