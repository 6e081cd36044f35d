"""Random canonical models whose stack mixes `attention` and `mamba1` blocks.

Deterministic for a seed. Mamba blocks reuse make_random_model's initialisation
(drawn per block from a one-block config, then renamed into place). Attention
projections are uniform(+-c/sqrt(D)) with c = 2.5 for q and k, so scores spread
over a few units and the softmax depends visibly on which keys are present and
at which positions; v and o use c = 1. Norm weights and biases are perturbed so
that a parity test notices any that is ignored.
"""

import math

import torch

from weights import canonical
from weights.reference.make_random_model import random_mamba_tensors


def attention_block(*, n_heads, n_kv_heads, head_dim, sinks, window, pos="rope_half",
                    rope_theta=10000.0, rope_scaling=None, qkv_bias=False, o_bias=False,
                    norm="rmsnorm", eps=1e-5, rotary_dim=None, qk_norm=None, out_gate=None,
                    scale=None, residual_scale=None):
    """A canonical attention block config (MODELS.md 6.1; rope_scaling as
    engine/layers/rope.h documents it, rotary_dim, qk_norm, out_gate and scale
    as engine/layers/attention.h does, residual_scale as engine/layers/block.h
    does: written only when given)."""
    blk = {"kind": "attention", "norm": {"type": norm, "eps": eps},
           "n_heads": n_heads, "n_kv_heads": n_kv_heads, "head_dim": head_dim,
           "qkv_bias": qkv_bias, "o_bias": o_bias, "pos": pos, "rope_theta": rope_theta,
           "rope_scaling": rope_scaling, "sinks": sinks, "window": window, "rel_bias": None}
    if rotary_dim is not None:
        blk["rotary_dim"] = rotary_dim
    if qk_norm is not None:
        blk["qk_norm"] = qk_norm
    if out_gate is not None:
        blk["out_gate"] = out_gate
    if scale is not None:
        blk["scale"] = scale
    if residual_scale is not None:
        blk["residual_scale"] = residual_scale
    return blk


def mamba_block(*, d_inner=64, d_state=8, d_conv=4, dt_rank=4, eps=1e-5):
    return {"kind": "mamba1", "norm": {"type": "rmsnorm", "eps": eps},
            "d_inner": d_inner, "d_state": d_state, "d_conv": d_conv, "dt_rank": dt_rank,
            "in_proj_bias": False, "out_proj_bias": False, "conv_bias": True}


def stack_config(blocks, *, d_model=32, vocab_size=canonical.BYTE_VOCAB, tie_embeddings=True,
                 name="random-attention"):
    return {"format": canonical.FORMAT, "version": canonical.VERSION, "name": name,
            "vocab_size": vocab_size, "d_model": d_model,
            "embed": {"scale": 1.0, "padding_idx": None}, "tie_embeddings": tie_embeddings,
            "logit_scale": 1.0, "final_norm": {"type": "rmsnorm", "eps": 1e-5, "affine": True},
            "residual_dtype": "float32", "eos_token_id": canonical.BYTE_EOS,
            "bos_token_id": None, "blocks": blocks}


def random_attention_tensors(prefix, blk, d_model, g):
    """Tensors of one attention block (norm included) from generator g, float64."""
    def uniform(shape, bound):
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * bound

    D = d_model
    qd, kd = blk["n_heads"] * blk["head_dim"], blk["n_kv_heads"] * blk["head_dim"]
    t = {}
    norm = blk["norm"]
    if norm is not None and norm.get("affine", True):
        t[prefix + "norm.weight"] = 1 + torch.randn(D, generator=g, dtype=torch.float64) * 0.1
        if norm["type"] == "layernorm":
            t[prefix + "norm.bias"] = torch.randn(D, generator=g, dtype=torch.float64) * 0.1
    t[prefix + "attn.q.weight"] = uniform((qd, D), 2.5 / math.sqrt(D))
    t[prefix + "attn.k.weight"] = uniform((kd, D), 2.5 / math.sqrt(D))
    t[prefix + "attn.v.weight"] = uniform((kd, D), 1 / math.sqrt(D))
    t[prefix + "attn.o.weight"] = uniform((D, qd), 1 / math.sqrt(qd))
    if blk["qkv_bias"]:
        for n, size in (("q", qd), ("k", kd), ("v", kd)):
            t[prefix + f"attn.{n}.bias"] = uniform((size,), 0.5)
    if blk["o_bias"]:
        t[prefix + "attn.o.bias"] = uniform((D,), 0.5)
    if blk.get("out_gate") is not None:
        t[prefix + "attn.gate.weight"] = uniform((qd, D), 2.5 / math.sqrt(D))
        if blk["qkv_bias"]:
            t[prefix + "attn.gate.bias"] = uniform((qd,), 0.5)
    if blk.get("qk_norm") is not None:
        # Moved from 1 and different per channel, so a norm weight applied in
        # the wrong channel order (the engine's RoPE order) shows.
        for n in ("q", "k"):
            t[prefix + f"attn.{n}_norm.weight"] = (
                1 + torch.randn(blk["head_dim"], generator=g, dtype=torch.float64) * 0.3)
    return t


def random_stack_tensors(config, seed=0):
    """Canonical float32 tensors for a config of attention and mamba1 blocks."""
    g = torch.Generator().manual_seed(seed)
    V, D = config["vocab_size"], config["d_model"]
    t = {"embed.weight": torch.randn((V, D), generator=g, dtype=torch.float64) * 0.5,
         "final_norm.weight": 1 + torch.randn(D, generator=g, dtype=torch.float64) * 0.1}
    if not config["tie_embeddings"]:
        t["lm_head.weight"] = torch.randn((V, D), generator=g, dtype=torch.float64) * 0.5
    for i, blk in enumerate(config["blocks"]):
        p = f"blocks.{i}."
        if blk["kind"] == "attention":
            t.update(random_attention_tensors(p, blk, D, g))
        elif blk["kind"] == "mamba1":
            one = dict(config, blocks=[blk], tie_embeddings=True)
            sub = random_mamba_tensors(one, seed=seed * 1000 + i)
            t.update({p + k[len("blocks.0."):]: v for k, v in sub.items()
                      if k.startswith("blocks.0.")})
        else:
            raise ValueError(f"blocks[{i}]: kind {blk['kind']!r} not handled here")
    return {k: v.to(torch.float32) for k, v in t.items()}


def make_random_stack(out_dir, blocks, seed=0, **model):
    """Write a random canonical model for `blocks` with a byte tokenizer to out_dir."""
    config = stack_config(blocks, **model)
    tensors = random_stack_tensors(config, seed)
    canonical.write_model_dir(out_dir, config, tensors,
                              {"source": f"random seed={seed}",
                               "converter": "random_attention@1"},
                              tokenizer=canonical.byte_tokenizer())
    return config, tensors
