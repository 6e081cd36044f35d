"""Hugging Face `GraniteMoeHybridForCausalLM` (Granite-4.0-H) -> canonical
mamba2 / attention + mlp blocks (MODELS.md 15).

Decoder layer j becomes two blocks:
  2j:   `mamba2` (the Mamba-2 mixer, mamba.*) or, where layer_types[j] is
        "full_attention" ("attention" in older files), `attention` (self_attn.*;
        head_dim = hidden_size / num_attention_heads unless the config names
        one; RoPE over the whole head only if position_embedding_type is
        "rope", else no positions); its pre-norm is input_layernorm.
  2j+1: `mlp`, the shared MLP: input_linear's first shared_intermediate_size
        rows are the gate (SiLU), the rest the up projection; its pre-norm is
        post_attention_layernorm. With num_local_experts > 0 it is a `moe`
        instead (MODELS.md 15.3): the router (block_sparse_moe.router.layer,
        fp32) picks num_experts_per_tok experts, their softmax over the chosen
        logits (the full softmax renormalised over the top k, "top1_softmax"
        with renormalize), SwiGLU experts of intermediate_size split from
        input_linear [X, 2F, D] as the shared MLP's is, and the shared MLP as
        the block's ungated shared expert; residual_multiplier scales their sum.
layer_types absent means every layer is Mamba.

Granite's four scalars: embedding_multiplier is embed.scale;
residual_multiplier is every block's residual_scale (r + m * f(norm(r)), the
engine's residual add, not folded into the weights); attention_multiplier is
the attention's softmax scale in place of 1/sqrt(head_dim); logits_scaling
divides the logits, so logit_scale is its inverse. Every norm, the Mamba-2
gated norm included, uses rms_norm_eps; the gated norm is per B/C group, as
transformers 5.23 and mamba_ssm compute it.

time_step_limit converts as hf-mamba2's does (a warning unless (0, inf));
transformers 5 writes its infinity as {"__float__": "Infinity"}.

Attention keeps a constant-size cache: `sinks` (S, default 4) first tokens plus
the `window` (W, default 4092, shortened to fit max_position_embeddings) most
recent ones; the engine is exact while a stream fits in S + W + 1 tokens and
follows StreamingLLM beyond (MODELS.md 3.4). With RoPE an explicit window must
keep the query's cache position S + W within max_position_embeddings.

Refused, naming the field or tensor: another architecture, a non-silu
hidden_act, num_experts_per_tok above num_local_experts, a
position_embedding_type other than null,
"nope" or "rope", rope types other than "default", layer_types of another
length or kind, mamba_d_head x mamba_n_heads other than mamba_expand x
hidden_size, groups that do not divide the heads, non-positive multipliers,
and any tensor that is missing, unknown or mis-shaped.
"""

import json

from weights.converters import hf_layers, hf_mamba2, sink_cache
from weights.converters.convert_error import ConvertError
from weights.converters.hf_checkpoint import (check_tensors, fp32, load_tensors, map_ends,
                                              matrices)
from weights.converters.hf_config import (attention_heads, boolean, canonical_config,
                                          check_architecture, check_silu, decode_floats,
                                          load_config, positive_number)
from weights.converters.mamba_common import positive_int

NAME = "hf-granite-moe-hybrid"
DEFAULT_WINDOW = 4092
SERVING_OPTIONS = sink_cache.OPTIONS
EMBED = "model.embed_tokens.weight"

# GraniteMoeHybridConfig's defaults (transformers 5.23
# configuration_granitemoehybrid.py).
DEFAULTS = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": None,
            "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
            "attention_bias": False, "embedding_multiplier": 1.0, "logits_scaling": 1.0,
            "residual_multiplier": 1.0, "attention_multiplier": 1.0, "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "shared_intermediate_size": 1024, "position_embedding_type": None,
            "layer_types": None, "mamba_n_heads": 128, "mamba_n_groups": 1,
            "mamba_d_state": 256, "mamba_d_head": "auto", "mamba_d_conv": 4, "mamba_expand": 2,
            "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_proj_bias": False,
            "time_step_limit": [0.0, float("inf")]}
LAYER_TYPES = {"linear_attention": "mamba", "mamba": "mamba",
               "full_attention": "attention", "attention": "attention"}


def _layer_types(cfg, n_layers):
    types = cfg.get("layer_types", cfg.get("layers_block_type"))
    if types is None:
        return ["mamba"] * n_layers
    if (not isinstance(types, list) or len(types) != n_layers
            or any(t not in LAYER_TYPES for t in types)):
        raise ConvertError(f"config: field 'layer_types' must list \"linear_attention\" or "
                           f"\"full_attention\" for each of the {n_layers} layers, got "
                           f"{json.dumps(types)[:80]}")
    return [LAYER_TYPES[t] for t in types]


def _rope(cfg, head_dim):
    """rope_theta when position_embedding_type is "rope", else None (no positions)."""
    kind = cfg["position_embedding_type"]
    if kind in (None, "nope"):
        return None
    if kind != "rope":
        raise ConvertError(f"config: field 'position_embedding_type' {kind!r} unsupported "
                           "(null, \"nope\" or \"rope\")")
    rp = cfg.get("rope_parameters") or {}
    if not isinstance(rp, dict):
        raise ConvertError("config: field 'rope_parameters' must be an object")
    rp = dict(rp)
    if cfg.get("rope_theta") is not None:
        rp.setdefault("rope_theta", cfg["rope_theta"])
    rope_type = rp.get("rope_type", rp.get("type", "default"))
    if rope_type != "default":
        raise ConvertError(f"config: rope_parameters.rope_type {rope_type!r} unsupported "
                           "(only \"default\")")
    if head_dim % 2:
        raise ConvertError(f"config: RoPE needs an even head_dim, got {head_dim}")
    return positive_number(rp, "rope_theta", 10000.0)


def read_dims(cfg):
    """Canonical dimensions, the per-layer plan and the four scalars from an HF
    Granite-4.0-H config dict."""
    check_architecture(cfg, "granitemoehybrid", "GraniteMoeHybridForCausalLM")
    check_silu(cfg, ": the Mamba conv and the shared MLP use it")
    cfg = {**DEFAULTS, **cfg}
    experts = cfg["num_local_experts"]
    if experts is None or isinstance(experts, bool) or not isinstance(experts, int) \
            or experts < 0:
        raise ConvertError(f"config: field 'num_local_experts' must be a non-negative "
                           f"integer, got {experts!r}")
    moe = None
    if experts > 0:
        k = positive_int(cfg, "num_experts_per_tok")
        if k > experts:
            raise ConvertError(f"config: field 'num_experts_per_tok' {k} exceeds "
                               f"num_local_experts {experts}")
        moe = {"n_experts": experts, "top_k": k,
               "d_ff": positive_int(cfg, "intermediate_size")}
    D = positive_int(cfg, "hidden_size")
    L = positive_int(cfg, "num_hidden_layers")
    Hq, Hkv, dh = attention_heads(cfg, D, explicit_head_dim=True)
    H, P, G = hf_mamba2.mamba_fields(cfg, D)
    dt_min, dt_max = hf_mamba2.time_step_limit(decode_floats(cfg["time_step_limit"]))
    proj_bias = boolean(cfg, "mamba_proj_bias", False)
    scalars = {k: positive_number(cfg, k, 1.0) for k in
               ("embedding_multiplier", "residual_multiplier", "attention_multiplier",
                "logits_scaling")}
    return {"vocab_size": positive_int(cfg, "vocab_size"), "d_model": D, "n_layers": L,
            "layers": _layer_types(cfg, L), "moe": moe,
            "d_ff": positive_int(cfg, "shared_intermediate_size"),
            "n_heads_attn": Hq, "n_kv_heads": Hkv, "attn_head_dim": dh,
            "rope_theta": _rope(cfg, dh), "attn_bias": boolean(cfg, "attention_bias", False),
            # The Mamba-2 mixer, in hf_mamba2's terms.
            "n_heads": H, "head_dim": P, "d_state": positive_int(cfg, "mamba_d_state"),
            "n_groups": G, "d_conv": positive_int(cfg, "mamba_d_conv"),
            "in_proj_bias": proj_bias, "out_proj_bias": proj_bias,
            "conv_bias": boolean(cfg, "mamba_conv_bias", True), "dt_min": dt_min,
            "dt_max": dt_max, "eps": positive_number(cfg, "rms_norm_eps", 1e-6),
            "max_pos": sink_cache.max_positions(cfg),
            "tied": boolean(cfg, "tie_word_embeddings", False), **scalars, "defaults": cfg}


def source_shapes(dims):
    """{source tensor name: shape} the checkpoint must hold (lm_head.weight apart)."""
    V, D, Fs = dims["vocab_size"], dims["d_model"], dims["d_ff"]
    qd = dims["n_heads_attn"] * dims["attn_head_dim"]
    kd = dims["n_kv_heads"] * dims["attn_head_dim"]
    s = {EMBED: (V, D), "model.norm.weight": (D,)}
    for j, mixer in enumerate(dims["layers"]):
        p = f"model.layers.{j}."
        s[p + "input_layernorm.weight"] = s[p + "post_attention_layernorm.weight"] = (D,)
        if mixer == "attention":
            s.update(hf_layers.attention_shapes(p + "self_attn.", D, qd, kd,
                                                lambda n: dims["attn_bias"]))
        else:
            s.update(hf_mamba2.mixer_shapes(p + "mamba.", dims))
        s[p + "shared_mlp.input_linear.weight"] = (2 * Fs, D)
        s[p + "shared_mlp.output_linear.weight"] = (D, Fs)
        if dims["moe"] is not None:
            X, F_ = dims["moe"]["n_experts"], dims["moe"]["d_ff"]
            q = p + "block_sparse_moe."
            s[q + "router.layer.weight"] = (X, D)
            s[q + "input_linear.weight"] = (X, 2 * F_, D)
            s[q + "output_linear.weight"] = (X, D, F_)
    return s


def map_tensors(tensors, dims, dtype):
    """Source tensors -> canonical tensors (matrices in `dtype`; A, D, dt_bias fp32)."""
    check_tensors(tensors, source_shapes(dims), EMBED, dims["tied"])
    mat = matrices(tensors, dtype)
    Fs = dims["d_ff"]
    out = map_ends(mat, EMBED, "model.norm.weight", dims["tied"])
    for j, mixer in enumerate(dims["layers"]):
        s, a, m = f"model.layers.{j}.", f"blocks.{2 * j}.", f"blocks.{2 * j + 1}."
        out[a + "norm.weight"] = mat(s + "input_layernorm.weight")
        if mixer == "attention":
            out.update(hf_layers.map_attention(mat, s + "self_attn.", a,
                                               lambda n: dims["attn_bias"]))
        else:
            out.update(hf_mamba2.map_mixer(tensors, s + "mamba.", a, dims, dtype))
        out[m + "norm.weight"] = mat(s + "post_attention_layernorm.weight")
        # The shared MLP is the mlp block, or the moe block's shared expert.
        ffn = m + ("mlp." if dims["moe"] is None else "moe.shared.")
        both = mat(s + "shared_mlp.input_linear.weight")
        # [gate ; up]: the activated half first (MODELS.md 15.5).
        out[ffn + "gate.weight"] = both.map(lambda w: w[:Fs].contiguous())
        out[ffn + "up.weight"] = both.map(lambda w: w[Fs:].contiguous())
        out[ffn + "down.weight"] = mat(s + "shared_mlp.output_linear.weight")
        if dims["moe"] is not None:
            out.update(_map_experts(tensors, mat, s + "block_sparse_moe.", m, dims))
    return out


def _map_experts(tensors, mat, s, c, dims):
    """The router (fp32, canonical.ROUTER_SUFFIXES) and the experts, whose
    input_linear [X, 2F, D] is [gate ; up] per expert like the shared MLP's."""
    F_ = dims["moe"]["d_ff"]
    both = mat(s + "input_linear.weight")
    return {c + "moe.router.weight": fp32(tensors)(s + "router.layer.weight"),
            c + "moe.gate.weight": both.map(lambda w: w[:, :F_].contiguous()),
            c + "moe.up.weight": both.map(lambda w: w[:, F_:].contiguous()),
            c + "moe.down.weight": mat(s + "output_linear.weight")}


def blocks(dims, sinks, window):
    """The canonical block dicts: mixer then shared MLP for every decoder layer,
    each scaling its residual add by residual_multiplier."""
    norm = {"type": "rmsnorm", "eps": dims["eps"]}
    scale = dims["residual_multiplier"]
    rope = dims["rope_theta"] is not None
    attn = {"kind": "attention", "norm": norm, "n_heads": dims["n_heads_attn"],
            "n_kv_heads": dims["n_kv_heads"], "head_dim": dims["attn_head_dim"],
            "qkv_bias": dims["attn_bias"], "o_bias": dims["attn_bias"],
            "pos": "rope_half" if rope else "none", "rope_theta": dims["rope_theta"],
            "rope_scaling": None, "sinks": sinks, "window": window, "rel_bias": None,
            "scale": dims["attention_multiplier"], "residual_scale": scale}
    mamba = {**hf_mamba2.block(dims), "residual_scale": scale}
    mlp = {"kind": "mlp", "norm": norm, "d_ff": dims["d_ff"], "act": "silu", "gated": True,
           "bias": False, "residual_scale": scale}
    if dims["moe"] is not None:
        m = dims["moe"]
        mlp = {"kind": "moe", "norm": norm, "routing": "top1_softmax",
               "n_experts": m["n_experts"], "d_ff": m["d_ff"], "act": "silu", "gated": True,
               "router_bias": False, "expert_bias": False, "capacity": None,
               "top_k": m["top_k"], "renormalize": True,
               "shared": {"d_ff": dims["d_ff"], "gate": None}, "residual_scale": scale}
    kinds = {"attention": attn, "mamba": mamba}
    out = []
    for mixer in dims["layers"]:
        out += [json.loads(json.dumps(kinds[mixer])), json.loads(json.dumps(mlp))]
    return out


def convert(src, dtype, sinks=None, window=None):
    """Return (canonical config, canonical tensors) for an HF Granite-4.0-H directory."""
    cfg = load_config(src)
    dims = read_dims(cfg)
    S, W = sink_cache.cache_size(dims["max_pos"], DEFAULT_WINDOW, sinks, window,
                                 bound_explicit_window=dims["rope_theta"] is not None)
    tensors = map_tensors(load_tensors(src), dims, dtype)
    config = canonical_config(dims["defaults"], src, dims, dims["tied"], blocks(dims, S, W))
    config["embed"]["scale"] = dims["embedding_multiplier"]
    config["logit_scale"] = 1.0 / dims["logits_scaling"]
    return config, tensors
