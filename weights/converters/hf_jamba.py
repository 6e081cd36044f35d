"""Hugging Face `JambaForCausalLM` -> canonical mamba1 / attention + mlp / moe blocks.

Decoder layer j becomes two blocks:
  2j:   `mamba1` (with `dt_bc_norm`, Jamba's RMSNorms over the dt, B and C slices
        of x_proj's output) or `attention` (`pos: "none"`: Jamba's attention
        has no positional encoding); its pre-norm is input_layernorm.
  2j+1: `mlp` (gated SiLU) on layers with one expert, `moe` on expert layers
        (softmax router, top_k = num_experts_per_tok, not renormalised, gated
        SiLU experts); its pre-norm is pre_ff_layernorm.
Layer j is attention when j % attn_layer_period == attn_layer_offset, an expert
layer when j % expert_layer_period == expert_layer_offset and num_experts > 1
(transformers' JambaConfig.layers_block_type / layers_num_experts). Every norm,
the dt/B/C norms included, uses rms_norm_eps.

Jamba's attention is full causal attention. The engine keeps a constant-size
cache instead: `sinks` (S, default 4) first tokens plus the `window` (W,
default 4092) most recent ones, 4096 keys per attention layer. Attention is one
layer in eight in the released models, so this costs about as much cache per
sequence as a 512-key cache on every layer. Without positional encoding the
cache is only a choice of which keys a query sees; it is exact while a stream
is at most S + W + 1 tokens long. The default window is shortened so that a
query never sees more keys than max_position_embeddings; an explicit --window
is taken as given.

Rejected: a non-silu `hidden_act`, `sliding_window` (flash-attention-only
windowing, a different cache rule), offsets not below their period, a
num_experts_per_tok above num_experts, and any tensor that is missing, unknown
or mis-shaped.
"""

import json
import math

import torch

from weights.converters import hf_layers, sink_cache
from weights.converters.convert_error import ConvertError
from weights.converters.hf_checkpoint import (check_tensors, fp32, load_tensors, map_ends,
                                              matrices)
from weights.converters.hf_config import (attention_heads, canonical_config, check_architecture,
                                          check_silu, load_config, positive_number)
from weights.converters.mamba_common import positive_int
from weights.lazy_tensor import stack

NAME = "hf-jamba"
DEFAULT_WINDOW = 4092
SERVING_OPTIONS = sink_cache.OPTIONS
EMBED = "model.embed_tokens.weight"


def _int(cfg, key, default, minimum=1):
    """cfg[key] (JambaConfig's `default` when absent), an integer >= minimum."""
    v = cfg.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        kind = "positive" if minimum == 1 else "non-negative"
        raise ConvertError(f"config: field {key!r} must be a {kind} integer, got {v!r}")
    return v


def read_dims(cfg):
    """Canonical dimensions and the per-layer plan from an HF Jamba config dict."""
    check_architecture(cfg, "jamba", "JambaForCausalLM")
    check_silu(cfg, ": the Mamba mixer and the experts use it")
    if cfg.get("sliding_window") is not None:
        raise ConvertError(f"config: field 'sliding_window' {cfg['sliding_window']!r} is not "
                           "supported (only full-attention checkpoints convert)")
    D = positive_int(cfg, "hidden_size")
    L = positive_int(cfg, "num_hidden_layers")
    Hq, Hkv, dh = attention_heads(cfg, D)
    periods = {}
    for kind, default_period, default_offset in (("attn", 8, 4), ("expert", 2, 1)):
        period = _int(cfg, f"{kind}_layer_period", default_period)
        offset = _int(cfg, f"{kind}_layer_offset", default_offset, minimum=0)
        if offset >= period:
            raise ConvertError(f"config: field '{kind}_layer_offset' {offset} must be below "
                               f"{kind}_layer_period {period}")
        periods[kind] = (period, offset)
    X = _int(cfg, "num_experts", 16)
    top_k = _int(cfg, "num_experts_per_tok", 2)
    if X > 1 and top_k > X:
        raise ConvertError(f"config: field 'num_experts_per_tok' {top_k} exceeds "
                           f"num_experts {X}")
    expand = _int(cfg, "mamba_expand", 2)
    rank = cfg.get("mamba_dt_rank", "auto")
    R = math.ceil(D / 16) if rank == "auto" else positive_int(cfg, "mamba_dt_rank")
    eps = positive_number(cfg, "rms_norm_eps", 1e-6)          # JambaConfig's default
    for key in ("mamba_conv_bias", "mamba_proj_bias", "tie_word_embeddings"):
        if key in cfg and not isinstance(cfg[key], bool):
            raise ConvertError(f"config: field {key!r} must be true or false, got {cfg[key]!r}")
    max_pos = sink_cache.max_positions(cfg)
    attn_p, attn_o = periods["attn"]
    exp_p, exp_o = periods["expert"]
    layers = [("attention" if j % attn_p == attn_o else "mamba",
               "moe" if X > 1 and j % exp_p == exp_o else "mlp") for j in range(L)]
    return {"vocab_size": positive_int(cfg, "vocab_size"), "d_model": D, "n_layers": L,
            "layers": layers, "d_ff": positive_int(cfg, "intermediate_size"),
            "n_heads": Hq, "n_kv_heads": Hkv, "head_dim": dh,
            "n_experts": X, "top_k": top_k, "d_inner": expand * D,
            "d_state": _int(cfg, "mamba_d_state", 16), "d_conv": _int(cfg, "mamba_d_conv", 4),
            "dt_rank": R, "conv_bias": cfg.get("mamba_conv_bias", True),
            "proj_bias": cfg.get("mamba_proj_bias", False), "eps": eps,
            "max_pos": max_pos}


def source_shapes(dims):
    """{source tensor name: shape} the checkpoint must hold (lm_head.weight apart)."""
    V, D, F_ = dims["vocab_size"], dims["d_model"], dims["d_ff"]
    E, N, K, R, X = (dims[k] for k in ("d_inner", "d_state", "d_conv", "dt_rank", "n_experts"))
    qd, kd = dims["n_heads"] * dims["head_dim"], dims["n_kv_heads"] * dims["head_dim"]
    s = {EMBED: (V, D), "model.final_layernorm.weight": (D,)}
    for j, (mixer, ffn) in enumerate(dims["layers"]):
        p = f"model.layers.{j}."
        s[p + "input_layernorm.weight"] = (D,)
        s[p + "pre_ff_layernorm.weight"] = (D,)
        if mixer == "attention":
            s.update(hf_layers.attention_shapes(p + "self_attn.", D, qd, kd, lambda n: False))
        else:
            m = p + "mamba."
            s[m + "in_proj.weight"] = (2 * E, D)
            s[m + "conv1d.weight"] = (E, 1, K)
            if dims["conv_bias"]:
                s[m + "conv1d.bias"] = (E,)
            s[m + "x_proj.weight"] = (R + 2 * N, E)
            s[m + "dt_layernorm.weight"] = (R,)
            s[m + "b_layernorm.weight"] = (N,)
            s[m + "c_layernorm.weight"] = (N,)
            s[m + "dt_proj.weight"] = (E, R)
            s[m + "dt_proj.bias"] = (E,)
            s[m + "A_log"] = (E, N)
            s[m + "D"] = (E,)
            s[m + "out_proj.weight"] = (D, E)
            if dims["proj_bias"]:
                s[m + "in_proj.bias"] = (2 * E,)
                s[m + "out_proj.bias"] = (D,)
        f = p + "feed_forward."
        experts = [f + f"experts.{e}." for e in range(X)] if ffn == "moe" else [f]
        if ffn == "moe":
            s[f + "router.weight"] = (X, D)
        for x in experts:
            s.update(hf_layers.mlp_shapes(x, D, F_, False))
    return s


def map_tensors(tensors, dims, tied, dtype):
    """Source tensors -> canonical Lazy tensors (matrices in `dtype`, A/D/dt bias in fp32)."""
    check_tensors(tensors, source_shapes(dims), EMBED, tied)

    mat, f32 = matrices(tensors, dtype), fp32(tensors)

    out = map_ends(mat, EMBED, "model.final_layernorm.weight", tied)
    for j, (mixer, ffn) in enumerate(dims["layers"]):
        s, a, b = f"model.layers.{j}.", f"blocks.{2 * j}.", f"blocks.{2 * j + 1}."
        out[a + "norm.weight"] = mat(s + "input_layernorm.weight")
        if mixer == "attention":
            out.update(hf_layers.map_attention(mat, s + "self_attn.", a, lambda n: False))
        else:
            m = s + "mamba."
            out[a + "in_proj.weight"] = mat(m + "in_proj.weight")
            out[a + "conv.weight"] = mat(m + "conv1d.weight").map(lambda w: w.squeeze(1))
            if dims["conv_bias"]:
                out[a + "conv.bias"] = mat(m + "conv1d.bias")
            out[a + "x_proj.weight"] = mat(m + "x_proj.weight")
            for n in ("dt", "b", "c"):
                out[a + f"{n}_norm.weight"] = mat(m + f"{n}_layernorm.weight")
            out[a + "dt_proj.weight"] = mat(m + "dt_proj.weight")
            # softplus acts on W_dt d + b_dt at run time (MODELS.md 1.8.4).
            out[a + "dt_proj.bias"] = f32(m + "dt_proj.bias")
            out[a + "A"] = f32(m + "A_log").map(lambda a: -torch.exp(a))
            out[a + "D"] = f32(m + "D")
            out[a + "out_proj.weight"] = mat(m + "out_proj.weight")
            if dims["proj_bias"]:
                out[a + "in_proj.bias"] = mat(m + "in_proj.bias")
                out[a + "out_proj.bias"] = mat(m + "out_proj.bias")
        out[b + "norm.weight"] = mat(s + "pre_ff_layernorm.weight")
        f = s + "feed_forward."
        if ffn == "mlp":
            out.update(hf_layers.map_mlp(mat, f, b, False))
        else:
            out[b + "moe.router.weight"] = f32(f + "router.weight")  # canonical.ROUTER_SUFFIXES
            for n in ("gate", "up", "down"):
                out[b + f"moe.{n}.weight"] = stack(
                    [mat(f + f"experts.{e}.{n}_proj.weight") for e in range(dims["n_experts"])])
    return out


def blocks(dims, sinks, window):
    """The canonical block dicts: mixer then feed-forward for every decoder layer."""
    norm = {"type": "rmsnorm", "eps": dims["eps"]}
    mamba = {"kind": "mamba1", "norm": norm, "d_inner": dims["d_inner"],
             "d_state": dims["d_state"], "d_conv": dims["d_conv"], "dt_rank": dims["dt_rank"],
             "in_proj_bias": dims["proj_bias"], "out_proj_bias": dims["proj_bias"],
             "conv_bias": dims["conv_bias"], "dt_bc_norm": norm}
    attn = {"kind": "attention", "norm": norm, "n_heads": dims["n_heads"],
            "n_kv_heads": dims["n_kv_heads"], "head_dim": dims["head_dim"],
            "qkv_bias": False, "o_bias": False, "pos": "none", "rope_theta": None,
            "rope_scaling": None, "sinks": sinks, "window": window, "rel_bias": None}
    mlp = {"kind": "mlp", "norm": norm, "d_ff": dims["d_ff"], "act": "silu", "gated": True,
           "bias": False}
    moe = {"kind": "moe", "norm": norm, "routing": "top1_softmax",
           "n_experts": dims["n_experts"], "top_k": dims["top_k"], "renormalize": False,
           "d_ff": dims["d_ff"], "act": "silu", "gated": True, "router_bias": False,
           "expert_bias": False, "capacity": None}
    kinds = {"mamba": mamba, "attention": attn, "mlp": mlp, "moe": moe}
    return [json.loads(json.dumps(kinds[k])) for layer in dims["layers"] for k in layer]


def convert(src, dtype, sinks=None, window=None):
    """Return (canonical config, canonical tensors) for an HF Jamba directory."""
    cfg = load_config(src)
    dims = read_dims(cfg)
    # No positional encoding: an explicit window need not fit max_position_embeddings.
    S, W = sink_cache.cache_size(dims["max_pos"], DEFAULT_WINDOW, sinks, window)
    tied = cfg.get("tie_word_embeddings", False)           # JambaConfig's default
    tensors = map_tensors(load_tensors(src), dims, tied, dtype)
    return canonical_config(cfg, src, dims, tied, blocks(dims, S, W)), tensors
