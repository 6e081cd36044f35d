"""Hugging Face `LlamaForCausalLM`, `MistralForCausalLM` and `Qwen2ForCausalLM`
-> canonical `attention` + `mlp` blocks (MODELS.md 3.3, 6.3 and 11).

Decoder layer j becomes blocks 2j (attention, its input_layernorm as the
pre-norm) and 2j+1 (gated SiLU mlp, post_attention_layernorm as the pre-norm).
HF checkpoints already use the half-split RoPE layout, so projections are
copied unchanged (`pos: "rope_half"`). The weights may come in any layout
save_pretrained writes (weights/converters/hf_checkpoint.py). Biases follow
each architecture's code, not a shared flag: Llama has them on q/k/v/o iff
`attention_bias` (and on the MLP iff `mlp_bias`), Qwen2 always on q/k/v and
never on o, Mistral never.

`rope_scaling` (linear, dynamic, llama3, yarn; the legacy `type` key too)
becomes the block's canonical rope_scaling as transformers 4.48.3 computes it
(weights/converters/hf_rope.py).

The attention-sink cache size is a serving choice, not part of the checkpoint
(MODELS.md 3.4): `sinks` (S, default 4) and `window` (W, default 2044, so the
cache holds S + W = 2048 keys) go into every attention block. A query is
rotated at cache position min(t, S + W), so S + W must stay below the model's
`max_position_embeddings`: the default window is shortened to fit, an explicit
one that does not fit is an error.

Mistral's `sliding_window` (W_m; MistralConfig's 4096 when the field is
absent, full attention when null) is the checkpoint's own cache rule: each
query sees itself and the W_m - 1 tokens before it (the eager / SDPA mask of
transformers 4.48.3; flash-attention-2 sees one key more, MODELS.md 11.3).
That is this cache with no sinks and W = W_m - 1, exact because RoPE scores
depend only on the distance (11.4); so the defaults become S = 0 and
W = W_m - 1, a smaller --window is allowed and a larger one refused (keys at
distances the model never attended to). --sinks S > 0 adds the first S tokens
to every query's keys, which the checkpoint never saw: a model change, offered
as StreamingLLM offers it.

Rejected: rope_scaling of other types (longrope, ...) or with keys
transformers 4.48.3 ignores, a non-silu `hidden_act`, `sliding_window` on a
Llama config, Qwen2's `use_sliding_window: true` (4.48.3 applies that window
only under flash-attention-2, from layer max_window_layers up; its default
attention ignores it), and any tensor that is missing, unknown or mis-shaped.
`eos_token_id` given as a list keeps its first entry (the canonical config
holds one EOS).
"""

import json

from weights.converters import hf_layers, sink_cache
from weights.converters.convert_error import ConvertError
from weights.converters.hf_checkpoint import check_tensors, load_tensors, map_ends, matrices
from weights.converters.hf_config import (attention_heads, canonical_config, load_config,
                                          positive_number)
from weights.converters.hf_rope import canonical_rope_scaling
from weights.converters.mamba_common import positive_int

NAME = "hf-llama"
DEFAULT_WINDOW = 2044
SERVING_OPTIONS = sink_cache.OPTIONS
EMBED = "model.embed_tokens.weight"

_ARCHS = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
          "qwen2": "Qwen2ForCausalLM"}
MISTRAL_DEFAULT_SLIDING_WINDOW = 4096      # MistralConfig's default


def _sliding_window(cfg, mtype):
    """The checkpoint's attention window in keys (self included), or None."""
    if mtype == "mistral":
        v = cfg.get("sliding_window", MISTRAL_DEFAULT_SLIDING_WINDOW)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConvertError(f"config: field 'sliding_window' must be a positive integer or "
                               f"null, got {v!r}")
        return v
    if mtype == "qwen2":
        if cfg.get("use_sliding_window", False):
            raise ConvertError(
                "config: use_sliding_window true is not supported (transformers 4.48.3 applies "
                "Qwen2's window only under flash_attention_2 and only from layer "
                "max_window_layers up; its default attention ignores it)")
        return None                # Qwen2Config sets sliding_window to None then
    if cfg.get("sliding_window") is not None:
        raise ConvertError(f"config: sliding_window {cfg['sliding_window']!r} is not supported "
                           "for LlamaForCausalLM (which ignores it); a windowed checkpoint is "
                           "model_type mistral")
    return None


def read_dims(cfg):
    """Canonical dimensions from an HF Llama / Mistral / Qwen2 config dict."""
    mtype = cfg.get("model_type")
    archs = cfg.get("architectures") or []
    if mtype not in _ARCHS or (archs and _ARCHS[mtype] not in archs):
        raise ConvertError(f"config: unknown architecture (model_type={mtype!r}, "
                           f"architectures={archs!r}); expected llama / LlamaForCausalLM, "
                           "mistral / MistralForCausalLM or qwen2 / Qwen2ForCausalLM")
    if cfg.get("hidden_act", "silu") != "silu":
        raise ConvertError(f"config: hidden_act {cfg['hidden_act']!r} unsupported (only silu)")
    D = positive_int(cfg, "hidden_size")
    Hq, Hkv, dh = attention_heads(cfg, D, explicit_head_dim=True)
    if dh % 2:
        raise ConvertError(f"config: head_dim {dh} must be even for RoPE")
    theta = positive_number(cfg, "rope_theta", 10000.0)
    eps = positive_number(cfg, "rms_norm_eps", 1e-6)          # LlamaConfig's default
    max_pos = sink_cache.max_positions(cfg)
    if mtype == "llama":
        qkv_bias = o_bias = bool(cfg.get("attention_bias", False))
        mlp_bias = bool(cfg.get("mlp_bias", False))
    else:
        qkv_bias, o_bias, mlp_bias = mtype == "qwen2", False, False
    return {"vocab_size": positive_int(cfg, "vocab_size"), "d_model": D,
            "n_layers": positive_int(cfg, "num_hidden_layers"),
            "d_ff": positive_int(cfg, "intermediate_size"), "n_heads": Hq, "n_kv_heads": Hkv,
            "head_dim": dh, "rope_theta": theta,
            "rope_scaling": canonical_rope_scaling(cfg, theta, max_pos), "eps": eps,
            "qkv_bias": qkv_bias, "o_bias": o_bias, "mlp_bias": mlp_bias, "max_pos": max_pos,
            "sliding_window": _sliding_window(cfg, mtype)}


def _has_bias(dims, proj):
    return dims["o_bias"] if proj == "o" else dims["qkv_bias"]


def source_shapes(dims):
    """{source tensor name: shape} the checkpoint must hold (lm_head.weight apart)."""
    V, D, F_ = dims["vocab_size"], dims["d_model"], dims["d_ff"]
    qd, kd = dims["n_heads"] * dims["head_dim"], dims["n_kv_heads"] * dims["head_dim"]
    s = {EMBED: (V, D), "model.norm.weight": (D,)}
    for j in range(dims["n_layers"]):
        p = f"model.layers.{j}."
        s[p + "input_layernorm.weight"] = (D,)
        s[p + "post_attention_layernorm.weight"] = (D,)
        s.update(hf_layers.attention_shapes(p + "self_attn.", D, qd, kd,
                                            lambda n: _has_bias(dims, n)))
        s.update(hf_layers.mlp_shapes(p + "mlp.", D, F_, dims["mlp_bias"]))
    return s


def map_tensors(tensors, dims, tied, dtype):
    check_tensors(tensors, source_shapes(dims), EMBED, tied)

    mat = matrices(tensors, dtype)
    out = map_ends(mat, EMBED, "model.norm.weight", tied)
    for j in range(dims["n_layers"]):
        s, a, m = f"model.layers.{j}.", f"blocks.{2 * j}.", f"blocks.{2 * j + 1}."
        out[a + "norm.weight"] = mat(s + "input_layernorm.weight")
        out.update(hf_layers.map_attention(mat, s + "self_attn.", a,
                                           lambda n: _has_bias(dims, n)))
        out[m + "norm.weight"] = mat(s + "post_attention_layernorm.weight")
        out.update(hf_layers.map_mlp(mat, s + "mlp.", m, dims["mlp_bias"]))
    return out


def blocks(dims, sinks, window):
    """The canonical block dicts: attention then mlp for every decoder layer."""
    eps = dims["eps"]
    attn = {"kind": "attention", "norm": {"type": "rmsnorm", "eps": eps},
            "n_heads": dims["n_heads"], "n_kv_heads": dims["n_kv_heads"],
            "head_dim": dims["head_dim"], "qkv_bias": dims["qkv_bias"],
            "o_bias": dims["o_bias"], "pos": "rope_half",
            "rope_theta": dims["rope_theta"], "rope_scaling": dims["rope_scaling"],
            "sinks": sinks, "window": window, "rel_bias": None}
    mlp = {"kind": "mlp", "norm": {"type": "rmsnorm", "eps": eps}, "d_ff": dims["d_ff"],
           "act": "silu", "gated": True, "bias": dims["mlp_bias"]}
    out = []
    for _ in range(dims["n_layers"]):
        out += [json.loads(json.dumps(attn)), json.loads(json.dumps(mlp))]
    return out


def cache_size(dims, sinks=None, window=None):
    """(S, W) of every attention block: StreamingLLM's defaults, or a windowed
    checkpoint's own rule (module docstring)."""
    # RoPE: a query sits at cache position min(t, S + W), which must be a trained position.
    sw = dims["sliding_window"]
    if sw is None:
        return sink_cache.cache_size(dims["max_pos"], DEFAULT_WINDOW, sinks, window,
                                     bound_explicit_window=True)
    if isinstance(window, int) and not isinstance(window, bool) and window > sw - 1:
        raise ConvertError(f"--window {window} exceeds the checkpoint's sliding_window {sw} "
                           f"minus the query itself ({sw - 1}): queries would see keys at "
                           "distances the model never attended to")
    return sink_cache.cache_size(dims["max_pos"], sw - 1, sinks, window,
                                 bound_explicit_window=True, default_sinks=0)


def convert(src, dtype, sinks=None, window=None):
    """Return (canonical config, canonical tensors) for an HF Llama directory."""
    cfg = load_config(src)
    dims = read_dims(cfg)
    S, W = cache_size(dims, sinks, window)
    tied = bool(cfg.get("tie_word_embeddings", False))     # LlamaConfig's default
    tensors = map_tensors(load_tensors(src), dims, tied, dtype)
    return canonical_config(cfg, src, dims, tied, blocks(dims, S, W)), tensors
