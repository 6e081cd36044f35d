"""Random canonical models of any stack: one block config per kind at a given
width, and random tensors for every name canonical.expected_shapes lists, at
scales that keep every recurrence stable (A < 0, |dA| < 1, EMA decay in (0, 1)).

    write_model(out_dir, [block("mamba1", 64), block("seqboat", 64)], d_model=64)

Used by the benchmarks and to make the small test models under tests/data.
"""

import math

import torch

from weights import canonical


def block(kind, d, **over):
    """A block config of `kind` at width d; `over` replaces fields."""
    b = _block(kind, d)
    b.update(over)
    return b


def _block(kind, d):
    norm = {"type": "rmsnorm", "eps": 1e-5}
    if kind == "mamba1":
        return {"kind": kind, "norm": norm, "d_inner": 2 * d, "d_state": 16, "d_conv": 4,
                "dt_rank": math.ceil(d / 16), "in_proj_bias": False, "out_proj_bias": False,
                "conv_bias": True}
    if kind == "mamba2":
        return {"kind": kind, "norm": norm, "n_heads": 2 * d // 64, "head_dim": 64,
                "d_state": 128, "n_groups": 1, "d_conv": 4, "in_proj_bias": False,
                "out_proj_bias": False, "conv_bias": True, "dt_min": 0.0, "dt_max": None,
                "gated_norm_eps": 1e-5}
    if kind == "gdn":
        return canonical.gdn_block(n_k_heads=2, n_v_heads=4, head_k_dim=max(d // 4, 1),
                                   head_v_dim=max(d // 4, 1), d_conv=4)
    if kind == "seqboat":
        return {"kind": kind, "norm": {"type": "layernorm", "eps": 1e-5, "affine": True},
                "prenorm": True, "ema_dim": 16, "z_dim": 128, "v_dim": 2 * d, "window": 1024,
                "attn_fn": "softmax", "pos": "rope_interleaved", "rope_theta": 10000.0,
                "rel_pos_max": None, "ema_truncation": None}
    if kind == "attention":
        return {"kind": kind, "norm": norm, "n_heads": 8, "n_kv_heads": 2, "head_dim": d // 8,
                "qkv_bias": False, "o_bias": False, "pos": "rope_half", "rope_theta": 10000.0,
                "rope_scaling": None, "sinks": 4, "window": 1020, "rel_bias": None}
    if kind == "mlp":
        return {"kind": kind, "norm": norm, "d_ff": 4 * d, "act": "silu", "gated": True,
                "bias": False}
    if kind == "moe":
        return {"kind": kind, "norm": {"type": "rmsnorm_t5", "eps": 1e-6},
                "routing": "top1_softmax", "n_experts": 8, "d_ff": 4 * d, "act": "relu",
                "gated": False, "router_bias": False, "expert_bias": False, "capacity": None}
    if kind == "s4d":
        return {"kind": kind, "norm": {"type": "layernorm", "eps": 1e-5, "affine": True},
                "channels": 1, "modes": 32, "state_layout": "conj_half", "output": "gelu_glu"}
    raise ValueError(kind)


def tensor_for(name, shape, g, kind=None):
    """Random values at scales that keep every recurrence stable; `kind` is the
    block kind of a blocks.* tensor (gdn's A and dt_bias differ from mamba2's)."""
    def uniform(bound):
        return (torch.rand(shape, generator=g) * 2 - 1) * bound
    leaf = name.split(".", 2)[-1] if name.startswith("blocks.") else name
    if kind == "gdn" and leaf == "A":          # -exp(A_log): per-token decay exp(g) ~ 0.5-0.98
        return -torch.exp(torch.rand(shape, generator=g) * 2.5 - 3.0)
    if kind == "gdn" and leaf == "dt_bias":
        return uniform(0.5)
    if leaf.endswith("norm.weight") or leaf in ("gau.qk_gamma", "ema.skip", "D", "s4d.D") \
            or leaf.endswith("norm.scalar"):
        return torch.ones(shape)
    if leaf.endswith(".bias") or leaf in ("gau.qk_beta", "gau.rel_pos_bias"):
        return torch.zeros(shape)
    if leaf == "A" and len(shape) == 1:        # mamba2: one per head
        return -torch.linspace(1.0, 16.0, shape[0])
    if leaf == "A":
        return -torch.arange(1, shape[1] + 1, dtype=torch.float32).repeat(shape[0], 1)
    if leaf in ("dt_proj.bias", "dt_bias"):
        return torch.full(shape, math.log(math.expm1(0.01)))
    if leaf == "ema.decay":
        return torch.full(shape, 0.9)
    if leaf in ("ema.in_coef", "ema.out_coef"):
        return uniform(0.1)
    if leaf == "router.temperature":
        return torch.ones(shape)
    if leaf == "s4d.dA":
        angle = torch.rand(shape[:-1], generator=g) * math.pi
        return torch.stack([0.95 * torch.cos(angle), 0.95 * torch.sin(angle)], -1)
    if leaf == "s4d.C":
        return uniform(0.05)
    if leaf == "embed.weight":
        return torch.randn(shape, generator=g) * 0.5
    return uniform(1.0 / math.sqrt(shape[-1]))


RMSNORM = {"type": "rmsnorm", "eps": 1e-5, "affine": True}


def write_model(out, blocks, d, seed=0, router_bias=None, final_norm=RMSNORM,
                vocab_size=canonical.BYTE_VOCAB):
    """Write a canonical dir; router_bias(i) may set seqboat block i's router.bias.

    vocab_size above the byte vocabulary gives a public model's embedding and
    head shape (the byte tokenizer only uses the first ids)."""
    config = {"format": canonical.FORMAT, "version": canonical.VERSION, "name": "bench",
              "vocab_size": vocab_size, "d_model": d,
              "embed": {"scale": 1.0, "padding_idx": None}, "tie_embeddings": True,
              "logit_scale": 1.0, "final_norm": final_norm,
              "residual_dtype": "float32", "eos_token_id": canonical.BYTE_EOS,
              "bos_token_id": None, "blocks": blocks}
    g = torch.Generator().manual_seed(seed)
    def kind_of(name):
        return blocks[int(name.split(".")[1])]["kind"] if name.startswith("blocks.") else None
    tensors = {n: tensor_for(n, s, g, kind_of(n)).float().contiguous()
               for n, s in sorted(canonical.expected_shapes(config).items())}
    if router_bias is not None:
        for i, b in enumerate(blocks):
            if b["kind"] == "seqboat":
                tensors[f"blocks.{i}.router.bias"] = router_bias(i)
    canonical.write_model_dir(out, config, tensors, {"source": "random", "converter": "bench@1"},
                              tokenizer=canonical.byte_tokenizer())


