"""Hugging Face `FalconH1ForCausalLM` -> canonical parallel_mamba2_attention + mlp
blocks (MODELS.md 16).

Decoder layer j becomes two blocks:
  2j:   `parallel_mamba2_attention`: input_layernorm, then the Mamba-2 mixer
        (tensors under mamba.) and Llama attention (attn.) on the same normed
        rows, both outputs added to the residual;
  2j+1: `mlp` (gated SiLU) behind pre_ff_layernorm.

Every µP multiplier (MODELS.md 16.2) is folded into the weights in fp32 before
the one cast to the output dtype: attention_in into q, k and v (not their
biases), key_multiplier into k (and its bias), attention_out into o (+bias),
ssm_in into in_proj's weight, ssm_multipliers into in_proj's [z; x; B; C; dt]
rows (+bias; before the conv and the softplus, where transformers applies
them), ssm_out into out_proj (+bias), mlp_multipliers into gate (+bias) and
down (+bias). embedding_multiplier becomes the canonical embed.scale (it scales
the input embedding only, so a tied head stays unscaled) and
lm_head_multiplier the canonical logit_scale.

The Mamba width is mamba_d_ssm, whose class default is 1024, not mamba_expand x
hidden_size (which applies only when mamba_d_ssm is null). The gated norm
follows mamba_rms_norm and mamba_norm_before_gate: none (y ⊙ SiLU(z)), the
norm before the gate (Falcon-H1's default), or after it, grouped over
mamba_n_groups as transformers 5 computes it, at rms_norm_eps.

Attention is full causal attention in transformers; the engine keeps `sinks`
first tokens plus a `window` of recent ones (default 4 + 4092, shortened to fit
max_position_embeddings), exact while a stream is at most S + W + 1 tokens
long and StreamingLLM beyond (MODELS.md 3.4), as hf-bamba.

A time_step_limit other than (0, inf) converts with a warning: the engine
clamps dt in prefill and decode, transformers clamps it in prefill only.

Refused, naming the field or tensor: another architecture, a non-silu
hidden_act, rope types other than default or a partial rotary factor,
mamba_n_heads x mamba_d_head other than the Mamba width, groups that do not
divide the heads, multipliers that are not finite numbers (lists of 2 and 5
where lists are due), and any tensor that is missing, unknown or mis-shaped.
"""

import json
import math

import torch

from weights import canonical
from weights.converters import hf_layers, hf_mamba2, sink_cache
from weights.converters.convert_error import ConvertError
from weights.converters.hf_checkpoint import check_tensors, load_tensors, map_ends, matrices
from weights.converters.hf_config import (attention_heads, boolean, canonical_config,
                                          check_architecture, check_silu, load_config,
                                          positive_number)
from weights.converters.mamba_common import positive_int
from weights.lazy_tensor import Lazy

NAME = "hf-falcon-h1"
DEFAULT_WINDOW = 4092
SERVING_OPTIONS = sink_cache.OPTIONS
EMBED = "model.embed_tokens.weight"

# FalconH1Config's defaults (transformers 5.23 configuration_falcon_h1.py).
DEFAULTS = {"vocab_size": 128000, "hidden_size": 4096, "intermediate_size": 14336,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "rms_norm_eps": 1e-5, "max_position_embeddings": 8192, "pad_token_id": 0,
            "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False,
            "mamba_d_ssm": 1024, "mamba_n_heads": 128, "mamba_d_head": "auto",
            "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2,
            "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_proj_bias": False,
            "mamba_norm_before_gate": True, "mamba_rms_norm": False,
            "projectors_bias": False, "attention_bias": False, "mlp_bias": False,
            "lm_head_multiplier": 1.0, "embedding_multiplier": 1.0, "key_multiplier": 1.0,
            "attention_out_multiplier": 1.0, "attention_in_multiplier": 1.0,
            "ssm_in_multiplier": 1.0, "ssm_out_multiplier": 1.0,
            "mlp_multipliers": None, "ssm_multipliers": None}


def _number(v, field):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConvertError(f"config: field {field!r} must be a finite number, got {v!r}")
    return float(v)


def _multipliers(cfg, key, n):
    """cfg[key] as n floats (null: n ones, as FalconH1Config sets it)."""
    v = cfg[key]
    if v is None:
        return [1.0] * n
    if not isinstance(v, (list, tuple)) or len(v) != n:
        raise ConvertError(f"config: field {key!r} must be a list of {n} numbers, got {v!r}")
    return [_number(x, key) for x in v]


def _time_step_limit(v):
    """transformers writes the default (0, inf) as [0.0, {"__float__": "Infinity"}]."""
    if isinstance(v, (list, tuple)):
        v = [float(x["__float__"]) if isinstance(x, dict) and isinstance(x.get("__float__"), str)
             else x for x in v]
    return hf_mamba2.time_step_limit(v)


def _rope_theta(cfg):
    rp = cfg.get("rope_parameters") or {}
    if not isinstance(rp, dict):
        raise ConvertError("config: field 'rope_parameters' must be an object")
    rp = dict(rp)
    for key in ("rope_theta", "partial_rotary_factor", "rope_scaling"):
        if cfg.get(key) is not None:
            rp.setdefault(key, cfg[key])
    kind = rp.get("rope_type", rp.get("type", "default"))
    if kind != "default" or rp.get("rope_scaling") is not None:
        raise ConvertError(f"config: rope_parameters.rope_type {kind!r} unsupported (only "
                           "\"default\")")
    if positive_number(rp, "partial_rotary_factor", 1.0) != 1.0:
        raise ConvertError(f"config: rope_parameters.partial_rotary_factor "
                           f"{rp['partial_rotary_factor']!r} unsupported (Falcon-H1 rotates "
                           "whole heads)")
    return positive_number(rp, "rope_theta", 10000.0)


def _mamba_dims(cfg, D):
    """The Mamba-2 mixer's sizes, in hf_mamba2's terms."""
    if cfg["mamba_d_ssm"] is None:
        E = positive_int(cfg, "mamba_expand") * D
    else:
        E = positive_int(cfg, "mamba_d_ssm")
    H = positive_int(cfg, "mamba_n_heads")
    P = E // H if cfg["mamba_d_head"] == "auto" else positive_int(cfg, "mamba_d_head")
    if H * P != E:
        raise ConvertError(f"config: fields 'mamba_n_heads' {H} x 'mamba_d_head' "
                           f"{cfg['mamba_d_head']!r} must equal the Mamba width {E} "
                           "(mamba_d_ssm, or mamba_expand x hidden_size when it is null)")
    G = positive_int(cfg, "mamba_n_groups")
    if H % G:
        raise ConvertError(f"config: field 'mamba_n_groups' {G} does not divide "
                           f"mamba_n_heads {H}")
    positive_int(cfg, "mamba_chunk_size")     # only rounding depends on it (MODELS.md 7.13)
    dt_min, dt_max = _time_step_limit(cfg.get("time_step_limit", [0.0, math.inf]))
    if not boolean(cfg, "mamba_rms_norm", False):
        gate = "silu"
    elif boolean(cfg, "mamba_norm_before_gate", True):
        gate = "norm_before_gate"
    else:
        gate = "norm_after_gate"
    return {"n_heads": H, "head_dim": P, "d_state": positive_int(cfg, "mamba_d_state"),
            "n_groups": G, "d_conv": positive_int(cfg, "mamba_d_conv"),
            "in_proj_bias": boolean(cfg, "mamba_proj_bias", False),
            "out_proj_bias": boolean(cfg, "projectors_bias", False),
            "conv_bias": boolean(cfg, "mamba_conv_bias", True), "dt_min": dt_min,
            "dt_max": dt_max, "gate": gate}


def read_dims(cfg):
    """Canonical dimensions, the multipliers and the plan from an HF Falcon-H1 config dict."""
    check_architecture(cfg, "falcon_h1", "FalconH1ForCausalLM")
    check_silu(cfg, ": the Mamba mixer and the MLP use it")
    cfg = {**DEFAULTS, **cfg}
    D = positive_int(cfg, "hidden_size")
    Hq, Hkv, dh = attention_heads(cfg, D, explicit_head_dim=True)
    if dh % 2:
        raise ConvertError(f"config: field 'head_dim' {dh} must be even (RoPE pairs channels)")
    mult = {k: _number(cfg[k], k) for k in (
        "lm_head_multiplier", "embedding_multiplier", "key_multiplier",
        "attention_out_multiplier", "attention_in_multiplier", "ssm_in_multiplier",
        "ssm_out_multiplier")}
    if mult["embedding_multiplier"] <= 0 or mult["lm_head_multiplier"] <= 0:
        raise ConvertError("config: fields 'embedding_multiplier' and 'lm_head_multiplier' "
                           "must be positive (the canonical embed.scale and logit_scale), got "
                           f"{mult['embedding_multiplier']!r}, {mult['lm_head_multiplier']!r}")
    mult["mlp"] = _multipliers(cfg, "mlp_multipliers", 2)
    mult["ssm"] = _multipliers(cfg, "ssm_multipliers", 5)
    eps = positive_number(cfg, "rms_norm_eps", DEFAULTS["rms_norm_eps"])
    max_pos = sink_cache.max_positions(cfg)
    return {"vocab_size": positive_int(cfg, "vocab_size"), "d_model": D,
            "n_layers": positive_int(cfg, "num_hidden_layers"),
            "d_ff": positive_int(cfg, "intermediate_size"),
            "n_heads_attn": Hq, "n_kv_heads": Hkv, "attn_head_dim": dh,
            "rope_theta": _rope_theta(cfg), "attn_bias": boolean(cfg, "attention_bias", False),
            "mlp_bias": boolean(cfg, "mlp_bias", False), **_mamba_dims(cfg, D),
            "mult": mult, "eps": eps, "max_pos": max_pos,
            "tied": boolean(cfg, "tie_word_embeddings", False), "defaults": cfg}


def _mixer_shapes(p, dims):
    s = hf_mamba2.mixer_shapes(p, dims)
    if dims["gate"] == "silu":
        del s[p + "norm.weight"]
    return s


def source_shapes(dims):
    """{source tensor name: shape} the checkpoint must hold (lm_head.weight apart)."""
    V, D, F_ = dims["vocab_size"], dims["d_model"], dims["d_ff"]
    qd = dims["n_heads_attn"] * dims["attn_head_dim"]
    kd = dims["n_kv_heads"] * dims["attn_head_dim"]
    s = {EMBED: (V, D), "model.final_layernorm.weight": (D,)}
    for j in range(dims["n_layers"]):
        p = f"model.layers.{j}."
        s[p + "input_layernorm.weight"] = (D,)
        s[p + "pre_ff_layernorm.weight"] = (D,)
        s.update(hf_layers.attention_shapes(p + "self_attn.", D, qd, kd,
                                            lambda n: dims["attn_bias"]))
        s.update(_mixer_shapes(p + "mamba.", dims))
        s.update(hf_layers.mlp_shapes(p + "feed_forward.", D, F_, dims["mlp_bias"]))
    return s


def _ssm_row_scale(dims):
    """in_proj's per-row factor: ssm_multipliers over [z (E); x (E); B (GN); C (GN); dt (H)]."""
    E, GN = dims["n_heads"] * dims["head_dim"], dims["n_groups"] * dims["d_state"]
    m = dims["mult"]["ssm"]
    return torch.cat([torch.full((n,), f, dtype=torch.float32)
                      for n, f in zip((E, E, GN, GN, dims["n_heads"]), m)])


def _map_mixer(f32, s, c, dims):
    """The canonical Mamba-2 tensors of one mixer, multipliers folded, in fp32."""
    mult = dims["mult"]
    in_proj = f32(s + "in_proj.weight")
    rows = _ssm_row_scale(dims).to(in_proj.device)   # meta while shapes are planned
    out = {c + "in_proj.weight": in_proj * (rows[:, None] * mult["ssm_in_multiplier"]),
           c + "conv.weight": f32(s + "conv1d.weight").squeeze(1),
           c + "dt_bias": f32(s + "dt_bias"), c + "A": -torch.exp(f32(s + "A_log")),
           c + "D": f32(s + "D"),
           c + "out_proj.weight": f32(s + "out_proj.weight") * mult["ssm_out_multiplier"]}
    if dims["in_proj_bias"]:
        out[c + "in_proj.bias"] = f32(s + "in_proj.bias") * rows
    if dims["conv_bias"]:
        out[c + "conv.bias"] = f32(s + "conv1d.bias")
    if dims["gate"] != "silu":
        out[c + "gated_norm.weight"] = f32(s + "norm.weight")
    if dims["out_proj_bias"]:
        out[c + "out_proj.bias"] = f32(s + "out_proj.bias") * mult["ssm_out_multiplier"]
    return out


def _map_attention(f32, s, c, dims):
    """attn.{q,k,v,o} with attention_in, key and attention_out folded, in fp32."""
    m = dims["mult"]
    a_in, key, a_out = (m["attention_in_multiplier"], m["key_multiplier"],
                        m["attention_out_multiplier"])
    w = {"q": a_in, "k": a_in * key, "v": a_in, "o": a_out}
    b = {"q": 1.0, "k": key, "v": 1.0, "o": a_out}
    out = {}
    for n in ("q", "k", "v", "o"):
        out[c + f"attn.{n}.weight"] = f32(s + f"{n}_proj.weight") * w[n]
        if dims["attn_bias"]:
            out[c + f"attn.{n}.bias"] = f32(s + f"{n}_proj.bias") * b[n]
    return out


def _map_mlp(f32, s, c, dims):
    g, d = dims["mult"]["mlp"]
    scale = {"gate": g, "up": 1.0, "down": d}
    out = {}
    for n in ("gate", "up", "down"):
        out[c + f"mlp.{n}.weight"] = f32(s + f"{n}_proj.weight") * scale[n]
        if dims["mlp_bias"]:
            out[c + f"mlp.{n}.bias"] = f32(s + f"{n}_proj.bias") * scale[n]
    return out


def map_tensors(tensors, dims, tied, dtype):
    """Source tensors -> canonical tensors (matrices in `dtype`, multipliers folded in
    fp32 first; A, D, dt_bias fp32)."""
    check_tensors(tensors, source_shapes(dims), EMBED, tied)
    out = map_ends(matrices(tensors, dtype), EMBED, "model.final_layernorm.weight", tied)

    def fold(j, f32):
        s, a, m = f"model.layers.{j}.", f"blocks.{2 * j}.", f"blocks.{2 * j + 1}."
        folded = {a + "norm.weight": f32(s + "input_layernorm.weight"),
                  m + "norm.weight": f32(s + "pre_ff_layernorm.weight")}
        folded.update(_map_attention(f32, s + "self_attn.", a, dims))
        folded.update(_map_mixer(f32, s + "mamba.", a + "mamba.", dims))
        folded.update(_map_mlp(f32, s + "feed_forward.", m, dims))
        return {name: t.to(canonical.stored_dtype(name, dtype)).contiguous()
                for name, t in folded.items()}

    # The folding runs once on meta tensors for the shapes, then per layer when
    # the writer asks for one of its tensors: memory holds one layer at a time
    # (the last one folded is kept, since a layer's tensors are written
    # close together).
    last = {}

    def layer(j):
        if last.get("j") != j:
            last.clear()
            last.update(j=j, tensors=fold(j, lambda n: tensors[n]().float()))
        return last["tensors"]

    def meta(name):
        return torch.empty(tensors[name].shape, dtype=torch.float32, device="meta")

    for j in range(dims["n_layers"]):
        for name, t in fold(j, meta).items():
            out[name] = Lazy(lambda j=j, name=name: layer(j)[name], t)
    return out


def blocks(dims, sinks, window):
    """The canonical block dicts: parallel mixers then mlp for every decoder layer."""
    norm = {"type": "rmsnorm", "eps": dims["eps"]}
    mamba2 = canonical.mamba2_block(
        n_heads=dims["n_heads"], head_dim=dims["head_dim"], d_state=dims["d_state"],
        n_groups=dims["n_groups"], d_conv=dims["d_conv"], eps=dims["eps"],
        in_proj_bias=dims["in_proj_bias"], out_proj_bias=dims["out_proj_bias"],
        conv_bias=dims["conv_bias"], dt_min=dims["dt_min"], dt_max=dims["dt_max"],
        gated_norm_eps=dims["eps"])
    mamba2 = {k: v for k, v in mamba2.items() if k not in ("kind", "norm")}
    mamba2["gate"] = dims["gate"]
    attention = {"n_heads": dims["n_heads_attn"], "n_kv_heads": dims["n_kv_heads"],
                 "head_dim": dims["attn_head_dim"], "qkv_bias": dims["attn_bias"],
                 "o_bias": dims["attn_bias"], "pos": "rope_half",
                 "rope_theta": dims["rope_theta"], "rope_scaling": None, "sinks": sinks,
                 "window": window, "rel_bias": None}
    layer = {"kind": "parallel_mamba2_attention", "norm": norm, "mamba2": mamba2,
             "attention": attention}
    mlp = {"kind": "mlp", "norm": norm, "d_ff": dims["d_ff"], "act": "silu", "gated": True,
           "bias": dims["mlp_bias"]}
    out = []
    for _ in range(dims["n_layers"]):
        out += [json.loads(json.dumps(layer)), json.loads(json.dumps(mlp))]
    return out


def convert(src, dtype, sinks=None, window=None):
    """Return (canonical config, canonical tensors) for an HF Falcon-H1 directory."""
    cfg = load_config(src)
    dims = read_dims(cfg)
    S, W = sink_cache.cache_size(dims["max_pos"], DEFAULT_WINDOW, sinks, window,
                                 bound_explicit_window=True)
    tensors = map_tensors(load_tensors(src), dims, dims["tied"], dtype)
    config = canonical_config(dims["defaults"], src, dims, dims["tied"], blocks(dims, S, W))
    config["embed"]["scale"] = dims["mult"]["embedding_multiplier"]
    config["logit_scale"] = dims["mult"]["lm_head_multiplier"]
    return config, tensors
