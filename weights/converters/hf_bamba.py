"""Hugging Face `BambaForCausalLM` -> canonical mamba2 / attention + mlp blocks
(MODELS.md 9).

Decoder layer j becomes two blocks:
  2j:   `mamba2` (the Mamba-2 mixer of MODELS.md 7, BambaMixer's tensors) or,
        for j in attn_layer_indices, `attention` (RoPE on the first
        rotary_dim = int(head_dim * partial_rotary_factor) channels of each
        head, grouped KV heads); its pre-norm is input_layernorm.
  2j+1: `mlp` (gated SiLU) in every layer, whatever its mixer; its pre-norm is
        pre_ff_layernorm.
Every norm, the Mamba-2 gated norm included, uses rms_norm_eps.

Config fields are read as transformers 4.48.3 reads them: BambaConfig's
defaults for absent fields (note mamba_d_state 256 and vocab_size 128000, not
the released model's values), and the fields BambaConfig sets before calling
its base class (attention_bias, mlp_bias, rope_theta 1e4, rope_scaling null,
partial_rotary_factor 0.5) overridden by config.json, which save_pretrained
always writes them to. The Mamba mixer's dt limit is fixed at (0, inf) by
transformers, so there is nothing to read.

For mamba_n_groups > 1 the engine runs mamba_ssm's Mamba-2, which is what the
checkpoint was trained with (head h reads B/C group h // (H/G), the gated norm
is per group); transformers 4.48.3 tiles heads over groups in prefill and
normalises ungrouped (MODELS.md 7.13). G = 1, Bamba-9B's, is the same under
both.

Bamba's attention is full causal attention; the engine keeps a constant-size
cache instead: `sinks` (S, default 4) first tokens plus the `window` (W,
default 4092) most recent ones, 4096 keys per attention layer (three layers in
Bamba-9B's 32, so about 96 MiB per sequence in fp32 beside 119 MiB of Mamba
state). While a stream is at most S + W + 1 tokens long nothing is evicted and
the engine is exact; beyond that it follows StreamingLLM (MODELS.md 3.4). A
query is rotated at cache position min(t, S + W), which must stay below
max_position_embeddings: the default window is shortened to fit, an explicit
one that does not fit is an error.

Rejected, naming the field or tensor: another architecture, a non-silu
`hidden_act`, attn_layer_indices that are not distinct layer indices, a
rotary dim that is odd or outside [2, head_dim], mamba_d_head x mamba_n_heads
other than mamba_expand x hidden_size, groups that do not divide the heads,
rope_scaling that hf-llama would refuse, and any tensor that is missing,
unknown or mis-shaped.
"""

import json

from weights.converters import hf_layers, hf_mamba2, sink_cache
from weights.converters.convert_error import ConvertError
from weights.converters.hf_checkpoint import check_tensors, load_tensors, map_ends, matrices
from weights.converters.hf_config import (attention_heads, canonical_config, check_architecture,
                                          check_silu, load_config, positive_number)
from weights.converters.hf_rope import canonical_rope_scaling
from weights.converters.mamba_common import positive_int

NAME = "hf-bamba"
DEFAULT_WINDOW = 4092
SERVING_OPTIONS = sink_cache.OPTIONS
EMBED = "model.embed_tokens.weight"

# BambaConfig's defaults (transformers 4.48.3 configuration_bamba.py), the
# hard-coded ones included.
DEFAULTS = {"vocab_size": 128000, "hidden_size": 4096, "intermediate_size": 14336,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "rms_norm_eps": 1e-5, "max_position_embeddings": 262144, "pad_token_id": 0,
            "bos_token_id": 1, "eos_token_id": 2, "attn_layer_indices": None,
            "mamba_n_heads": 128, "mamba_d_head": "auto", "mamba_n_groups": 1,
            "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2,
            "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_proj_bias": False,
            "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
            "rope_theta": 10000.0, "rope_scaling": None, "partial_rotary_factor": 0.5}


def _bool(cfg, key):
    v = cfg[key]
    if not isinstance(v, bool):
        raise ConvertError(f"config: field {key!r} must be true or false, got {v!r}")
    return v


def _attention_layers(cfg, n_layers):
    """The sorted attention layer indices (attn_layer_indices; null: none)."""
    v = cfg["attn_layer_indices"]
    if v is None:
        return []
    ok = isinstance(v, list) and all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n_layers for i in v)
    if not ok or len(set(v)) != len(v):
        raise ConvertError(f"config: field 'attn_layer_indices' must be null or a list of "
                           f"distinct layer indices below num_hidden_layers {n_layers}, "
                           f"got {v!r}")
    return sorted(v)


def _rotary_dim(cfg, head_dim):
    """Channels RoPE rotates per head: transformers' int(head_dim *
    partial_rotary_factor), which must be even (its inv_freq has ceil(d/2)
    entries over d, so an odd d pairs nothing consistently) and within the head."""
    factor = positive_number(cfg, "partial_rotary_factor", DEFAULTS["partial_rotary_factor"])
    d = int(head_dim * factor)
    if d < 2 or d % 2 or d > head_dim:
        raise ConvertError(f"config: field 'partial_rotary_factor' {factor:g} gives rotary "
                           f"dim int({head_dim} x {factor:g}) = {d}; it must be even and "
                           f"within [2, head_dim {head_dim}]")
    return d


def read_dims(cfg):
    """Canonical dimensions and the per-layer plan from an HF Bamba config dict."""
    check_architecture(cfg, "bamba", "BambaForCausalLM")
    check_silu(cfg, ": the Mamba mixer and the MLP use it")
    cfg = {**DEFAULTS, **cfg}
    D = positive_int(cfg, "hidden_size")
    L = positive_int(cfg, "num_hidden_layers")
    attn = _attention_layers(cfg, L)
    Hq, Hkv, dh = attention_heads(cfg, D, explicit_head_dim=True)
    theta = positive_number(cfg, "rope_theta", DEFAULTS["rope_theta"])
    max_pos = sink_cache.max_positions(cfg)
    H, P, G = hf_mamba2.mamba_fields(cfg, D)
    proj_bias = _bool(cfg, "mamba_proj_bias")
    eps = positive_number(cfg, "rms_norm_eps", DEFAULTS["rms_norm_eps"])
    return {"vocab_size": positive_int(cfg, "vocab_size"), "d_model": D, "n_layers": L,
            "layers": ["attention" if j in attn else "mamba" for j in range(L)],
            "d_ff": positive_int(cfg, "intermediate_size"),
            "n_heads_attn": Hq, "n_kv_heads": Hkv, "attn_head_dim": dh,
            "rotary_dim": _rotary_dim(cfg, dh), "rope_theta": theta,
            "rope_scaling": canonical_rope_scaling(cfg, theta, max_pos),
            "attn_bias": _bool(cfg, "attention_bias"), "mlp_bias": _bool(cfg, "mlp_bias"),
            # The Mamba-2 mixer, in hf_mamba2's terms.
            "n_heads": H, "head_dim": P, "d_state": positive_int(cfg, "mamba_d_state"),
            "n_groups": G, "d_conv": positive_int(cfg, "mamba_d_conv"),
            "in_proj_bias": proj_bias, "out_proj_bias": proj_bias,
            "conv_bias": _bool(cfg, "mamba_conv_bias"), "dt_min": 0.0, "dt_max": None,
            "eps": eps, "max_pos": max_pos, "tied": _bool(cfg, "tie_word_embeddings"),
            "defaults": cfg}


def source_shapes(dims):
    """{source tensor name: shape} the checkpoint must hold (lm_head.weight apart)."""
    V, D, F_ = dims["vocab_size"], dims["d_model"], dims["d_ff"]
    qd = dims["n_heads_attn"] * dims["attn_head_dim"]
    kd = dims["n_kv_heads"] * dims["attn_head_dim"]
    s = {EMBED: (V, D), "model.final_layernorm.weight": (D,)}
    for j, mixer in enumerate(dims["layers"]):
        p = f"model.layers.{j}."
        s[p + "input_layernorm.weight"] = (D,)
        s[p + "pre_ff_layernorm.weight"] = (D,)
        if mixer == "attention":
            s.update(hf_layers.attention_shapes(p + "self_attn.", D, qd, kd,
                                                lambda n: dims["attn_bias"]))
        else:
            s.update(hf_mamba2.mixer_shapes(p + "mamba.", dims))
        s.update(hf_layers.mlp_shapes(p + "feed_forward.", D, F_, dims["mlp_bias"]))
    return s


def map_tensors(tensors, dims, tied, dtype):
    """Source tensors -> canonical tensors (matrices in `dtype`; A, D, dt_bias fp32)."""
    check_tensors(tensors, source_shapes(dims), EMBED, tied)

    mat = matrices(tensors, dtype)
    out = map_ends(mat, EMBED, "model.final_layernorm.weight", tied)
    for j, mixer in enumerate(dims["layers"]):
        s, a, m = f"model.layers.{j}.", f"blocks.{2 * j}.", f"blocks.{2 * j + 1}."
        out[a + "norm.weight"] = mat(s + "input_layernorm.weight")
        if mixer == "attention":
            # The half-split layout is the canonical one; the engine reorders
            # channels for partial rotary itself (engine/layers/rope.h).
            out.update(hf_layers.map_attention(mat, s + "self_attn.", a,
                                               lambda n: dims["attn_bias"]))
        else:
            out.update(hf_mamba2.map_mixer(tensors, s + "mamba.", a, dims, dtype))
        out[m + "norm.weight"] = mat(s + "pre_ff_layernorm.weight")
        out.update(hf_layers.map_mlp(mat, s + "feed_forward.", m, dims["mlp_bias"]))
    return out


def blocks(dims, sinks, window):
    """The canonical block dicts: mixer then mlp for every decoder layer."""
    norm = {"type": "rmsnorm", "eps": dims["eps"]}
    attn = {"kind": "attention", "norm": norm, "n_heads": dims["n_heads_attn"],
            "n_kv_heads": dims["n_kv_heads"], "head_dim": dims["attn_head_dim"],
            "qkv_bias": dims["attn_bias"], "o_bias": dims["attn_bias"], "pos": "rope_half",
            "rope_theta": dims["rope_theta"], "rope_scaling": dims["rope_scaling"],
            "rotary_dim": dims["rotary_dim"], "sinks": sinks, "window": window,
            "rel_bias": None}
    mlp = {"kind": "mlp", "norm": norm, "d_ff": dims["d_ff"], "act": "silu", "gated": True,
           "bias": dims["mlp_bias"]}
    kinds = {"attention": attn, "mamba": hf_mamba2.block(dims)}
    out = []
    for mixer in dims["layers"]:
        out += [json.loads(json.dumps(kinds[mixer])), json.loads(json.dumps(mlp))]
    return out


def convert(src, dtype, sinks=None, window=None):
    """Return (canonical config, canonical tensors) for an HF Bamba directory."""
    cfg = load_config(src)
    dims = read_dims(cfg)
    # RoPE: a query sits at cache position min(t, S + W), which must be a trained position.
    S, W = sink_cache.cache_size(dims["max_pos"], DEFAULT_WINDOW, sinks, window,
                                 bound_explicit_window=True)
    tensors = map_tensors(load_tensors(src), dims, dims["tied"], dtype)
    return (canonical_config(dims["defaults"], src, dims, dims["tied"], blocks(dims, S, W)),
            tensors)
