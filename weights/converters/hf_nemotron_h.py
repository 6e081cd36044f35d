"""Hugging Face `NemotronHForCausalLM` (Nemotron-H) -> canonical mamba2 /
attention / mlp blocks (MODELS.md 14).

Layer j is one block, `r <- r + Mixer(RMSNorm(r))`, of the kind its type
names (layers_block_type, or the legacy hybrid_override_pattern's character):
  "linear_attention" / M:  `mamba2`, the Mamba-2 mixer of MODELS.md 7 with
        E = mamba_num_heads x mamba_head_dim (expand is unused) and the gated
        norm per B/C group, as both transformers and mamba_ssm compute it;
  "full_attention" / *:    `attention` with pos "none": Nemotron-H's attention
        gets no positions at all; q/k/v/o have no biases whatever
        attention_bias says;
  "mlp" / -:               `mlp`, down(act(up x)) with mlp_hidden_act (relu2,
        the released models', is max(x, 0)^2), biases if mlp_bias;
  "moe" / E:               `moe` with routing "sigmoid_group_topk" (MODELS.md
        14.3): sigmoid router scores in fp32, e_score_correction_bias (fp32,
        moe.router.score_bias) added for the choice only, the topk_group of
        n_group groups whose best two sum highest, num_experts_per_tok experts
        inside them, gates the unbiased scores (divided by their sum + 1e-20
        when norm_topk_prob) times routed_scaling_factor; ungated experts of
        moe_intermediate_size with mlp_hidden_act, in the moe_latent_size space
        (fc1/fc2_latent_proj as moe.latent_in/out) when that is set; the shared
        expert (moe_shared_expert_intermediate_size, same act) on the layer's
        input, weight 1. Experts are read per expert (the Hub's files) or
        fused (experts.up_proj [X, F, L], experts.down_proj [X, L, F]).
The layer count is the pattern's length (num_hidden_layers is ignored, as
transformers ignores it). Every norm uses layer_norm_epsilon.

Δ is clamped below at time_step_min: transformers 5.23 passes
(time_step_min, inf) to its prefill scan (time_step_limit is not read) and
clamps nothing in decode; the engine clamps in both, which differs only where
softplus(dt + dt_bias) < time_step_min (0.001), dt + dt_bias below about -6.9.

Tensors are read under `backbone.` (the Hub's files and what save_pretrained
writes) or `model.` (transformers' module names). The multi-token-prediction
layers (mtp.*), which transformers drops on load, are skipped.

Attention keeps a constant-size cache: `sinks` (S, default 4) first tokens plus
the `window` (W, default 4092, shortened to fit max_position_embeddings) most
recent ones; the engine is exact while a stream fits in S + W + 1 tokens and
follows StreamingLLM beyond (MODELS.md 3.4). With no positional encoding an
explicit window is not bounded by max_position_embeddings.

Refused, naming the field, layer or tensor: another architecture, a
mamba_hidden_act other than silu, an mlp_hidden_act the engine lacks, layer
types of another name, groups that do not divide the heads, `moe` layers with
mlp_bias (their shared expert and latent projections would carry biases the
moe block does not have), expert groups that do not divide n_routed_experts,
hold fewer than two experts (transformers sums each group's best two), number
more than 64, or cannot hold num_experts_per_tok within topk_group of them,
and any tensor that is missing, unknown or mis-shaped.
"""

import json

from weights.converters import hf_layers, hf_mamba2, sink_cache
from weights.converters.convert_error import ConvertError
from weights.converters.hf_checkpoint import HEAD, check_tensors, fp32, load_tensors, matrices
from weights.converters.hf_config import (attention_heads, boolean, canonical_config,
                                          check_architecture, load_config, positive_number)
from weights.converters.mamba_common import positive_int
from weights.lazy_tensor import stack

NAME = "hf-nemotron-h"
DEFAULT_WINDOW = 4092
SERVING_OPTIONS = sink_cache.OPTIONS
PREFIXES = ("backbone.", "model.")
MTP = "mtp."

# NemotronHConfig's defaults (transformers 5.23 configuration_nemotron_h.py).
DEFAULTS = {"vocab_size": 131072, "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 4096,
            "intermediate_size": 21504, "mlp_hidden_act": "relu2", "mlp_bias": False,
            "ssm_state_size": 128, "mamba_num_heads": 128, "mamba_head_dim": 64,
            "mamba_hidden_act": "silu", "n_groups": 8, "conv_kernel": 4, "chunk_size": 128,
            "time_step_min": 0.001, "use_conv_bias": True, "use_bias": False,
            "layer_norm_epsilon": 1e-5, "tie_word_embeddings": False,
            "n_routed_experts": 8, "moe_intermediate_size": 7688,
            "moe_shared_expert_intermediate_size": 7688, "moe_latent_size": None,
            "num_experts_per_tok": 2, "routed_scaling_factor": 1.0, "n_group": 1,
            "topk_group": 1, "norm_topk_prob": True}
# Legacy spellings NemotronHConfig still accepts; where present they win.
ALIASES = {"mamba_n_groups": "n_groups", "mamba_d_conv": "conv_kernel",
           "mamba_dt_min": "time_step_min", "mamba_conv_bias": "use_conv_bias",
           "mamba_chunk_size": "chunk_size", "num_local_experts": "n_routed_experts"}
MAX_EXPERT_GROUPS = 64     # engine/layers/moe.h
PATTERN = {"M": "linear_attention", "E": "moe", "*": "full_attention", "-": "mlp"}
LEGACY_TYPES = {"mamba": "linear_attention", "attention": "full_attention"}
# transformers' ACT2FN name -> the canonical mlp act.
ACTIVATIONS = {"relu2": "relu2", "relu": "relu", "silu": "silu", "gelu": "gelu"}


def _layer_types(cfg):
    """The per-layer types: layers_block_type (layer_types is its alias), else
    hybrid_override_pattern, else NemotronHConfig's default."""
    types = cfg.get("layers_block_type", cfg.get("layer_types"))
    field = "layers_block_type"
    if types is None and cfg.get("hybrid_override_pattern") is not None:
        pattern, field = cfg["hybrid_override_pattern"], "hybrid_override_pattern"
        if not isinstance(pattern, str) or not pattern or set(pattern) - set(PATTERN):
            raise ConvertError(f"config: field 'hybrid_override_pattern' must be a non-empty "
                               f"string of {''.join(PATTERN)!r} characters, got {pattern!r}")
        types = [PATTERN[c] for c in pattern]
    elif types is None:
        types = ["linear_attention", "moe", "full_attention", "mlp"]
    if not isinstance(types, list) or not types:
        raise ConvertError(f"config: field {field!r} must be a non-empty list, got "
                           f"{json.dumps(types)[:80]}")
    types = [LEGACY_TYPES.get(t, t) if isinstance(t, str) else t for t in types]
    for j, t in enumerate(types):
        if t not in ("linear_attention", "full_attention", "mlp", "moe"):
            raise ConvertError(f"config: {field}[{j}] {t!r} is not a Nemotron-H layer type "
                               "(linear_attention, full_attention, mlp or moe)")
    return types


def read_dims(cfg):
    """Canonical dimensions and the per-layer plan from an HF Nemotron-H config dict."""
    check_architecture(cfg, "nemotron_h", "NemotronHForCausalLM")
    cfg = {**DEFAULTS, **cfg}
    for alias, name in ALIASES.items():
        if alias in cfg:
            cfg[name] = cfg[alias]
    if cfg["mamba_hidden_act"] != "silu":
        raise ConvertError(f"config: field 'mamba_hidden_act' {cfg['mamba_hidden_act']!r} "
                           "unsupported (only silu)")
    if cfg["mlp_hidden_act"] not in ACTIVATIONS:
        raise ConvertError(f"config: field 'mlp_hidden_act' {cfg['mlp_hidden_act']!r} "
                           f"unsupported (one of {sorted(ACTIVATIONS)})")
    layers = _layer_types(cfg)
    D = positive_int(cfg, "hidden_size")
    Hq, Hkv, dh = attention_heads(cfg, D, explicit_head_dim=True)
    H, G = positive_int(cfg, "mamba_num_heads"), positive_int(cfg, "n_groups")
    if H % G:
        raise ConvertError(f"config: field 'n_groups' {G} does not divide mamba_num_heads {H}")
    positive_int(cfg, "chunk_size")       # only rounding depends on it (MODELS.md 7.13)
    bias = boolean(cfg, "use_bias", False)
    mlp_bias = boolean(cfg, "mlp_bias", False)
    moe = _moe_dims(cfg, mlp_bias) if "moe" in layers else None
    return {"moe": moe, "vocab_size": positive_int(cfg, "vocab_size"), "d_model": D,
            "n_layers": len(layers), "layers": layers,
            "d_ff": positive_int(cfg, "intermediate_size"),
            "act": ACTIVATIONS[cfg["mlp_hidden_act"]], "mlp_bias": mlp_bias,
            "n_heads_attn": Hq, "n_kv_heads": Hkv, "attn_head_dim": dh,
            # The Mamba-2 mixer, in hf_mamba2's terms.
            "n_heads": H, "head_dim": positive_int(cfg, "mamba_head_dim"),
            "d_state": positive_int(cfg, "ssm_state_size"), "n_groups": G,
            "d_conv": positive_int(cfg, "conv_kernel"), "in_proj_bias": bias,
            "out_proj_bias": bias, "conv_bias": boolean(cfg, "use_conv_bias", True),
            "dt_min": positive_number(cfg, "time_step_min", DEFAULTS["time_step_min"]),
            "dt_max": None,
            "eps": positive_number(cfg, "layer_norm_epsilon", DEFAULTS["layer_norm_epsilon"]),
            "max_pos": sink_cache.max_positions(cfg),
            "tied": boolean(cfg, "tie_word_embeddings", False), "defaults": cfg}


def _moe_dims(cfg, mlp_bias):
    """The MoE layers' routing and sizes (MODELS.md 14.3), checked as the
    engine's moe block needs them."""
    if mlp_bias:
        raise ConvertError("config: field 'mlp_bias' true with 'moe' layers: their shared "
                           "expert and latent projections would carry biases, which the moe "
                           "block does not have")
    X, k = positive_int(cfg, "n_routed_experts"), positive_int(cfg, "num_experts_per_tok")
    G, TG = positive_int(cfg, "n_group"), positive_int(cfg, "topk_group")
    if X % G or X // G < 2 or G > MAX_EXPERT_GROUPS:
        raise ConvertError(f"config: field 'n_group' {G} must divide n_routed_experts {X} "
                           f"into groups of at least two experts, and be at most "
                           f"{MAX_EXPERT_GROUPS}")
    if TG > G:
        raise ConvertError(f"config: field 'topk_group' {TG} exceeds n_group {G}")
    if k > TG * (X // G):
        raise ConvertError(f"config: field 'num_experts_per_tok' {k} exceeds the "
                           f"{TG * (X // G)} experts of topk_group {TG} groups")
    latent = cfg["moe_latent_size"]
    return {"n_experts": X, "top_k": k, "n_group": G, "topk_group": TG,
            "d_ff": positive_int(cfg, "moe_intermediate_size"),
            "shared_d_ff": positive_int(cfg, "moe_shared_expert_intermediate_size"),
            "latent": None if latent is None else positive_int(cfg, "moe_latent_size"),
            "renormalize": boolean(cfg, "norm_topk_prob", True),
            "scale": positive_number(cfg, "routed_scaling_factor", 1.0)}


def _moe_shapes(s, dims, fused):
    """A MoE mixer's tensors under `s` (P layers.{j}.mixer.)."""
    D, m = dims["d_model"], dims["moe"]
    X, F_, Fs = m["n_experts"], m["d_ff"], m["shared_d_ff"]
    L = m["latent"] or D
    shapes = {s + "gate.weight": (X, D), s + "gate.e_score_correction_bias": (X,),
              s + "shared_experts.up_proj.weight": (Fs, D),
              s + "shared_experts.down_proj.weight": (D, Fs)}
    if m["latent"]:
        shapes[s + "fc1_latent_proj.weight"] = (L, D)
        shapes[s + "fc2_latent_proj.weight"] = (D, L)
    if fused:
        shapes[s + "experts.up_proj"] = (X, F_, L)
        shapes[s + "experts.down_proj"] = (X, L, F_)
    else:
        for e in range(X):
            shapes[s + f"experts.{e}.up_proj.weight"] = (F_, L)
            shapes[s + f"experts.{e}.down_proj.weight"] = (L, F_)
    return shapes


def _map_moe(tensors, mat, s, c, dims, fused):
    f32 = fp32(tensors)
    # canonical.ROUTER_SUFFIXES: the router and its score bias stay fp32.
    out = {c + "moe.router.weight": f32(s + "gate.weight"),
           c + "moe.router.score_bias": f32(s + "gate.e_score_correction_bias"),
           c + "moe.shared.up.weight": mat(s + "shared_experts.up_proj.weight"),
           c + "moe.shared.down.weight": mat(s + "shared_experts.down_proj.weight")}
    if dims["moe"]["latent"]:
        out[c + "moe.latent_in.weight"] = mat(s + "fc1_latent_proj.weight")
        out[c + "moe.latent_out.weight"] = mat(s + "fc2_latent_proj.weight")
    for n in ("up", "down"):
        out[c + f"moe.{n}.weight"] = (
            mat(s + f"experts.{n}_proj") if fused else
            stack([mat(s + f"experts.{e}.{n}_proj.weight")
                   for e in range(dims["moe"]["n_experts"])]))
    return out


def source_shapes(dims, p, fused=False):
    """{source tensor name: shape} under prefix `p` (lm_head.weight apart);
    `fused`: transformers 5's 3-D expert tensors instead of per-expert ones."""
    V, D = dims["vocab_size"], dims["d_model"]
    qd = dims["n_heads_attn"] * dims["attn_head_dim"]
    kd = dims["n_kv_heads"] * dims["attn_head_dim"]
    s = {p + "embeddings.weight": (V, D), p + "norm_f.weight": (D,)}
    for j, kind in enumerate(dims["layers"]):
        lp = f"{p}layers.{j}."
        s[lp + "norm.weight"] = (D,)
        if kind == "linear_attention":
            s.update(hf_mamba2.mixer_shapes(lp + "mixer.", dims))
        elif kind == "full_attention":
            s.update(hf_layers.attention_shapes(lp + "mixer.", D, qd, kd, lambda n: False))
        elif kind == "moe":
            s.update(_moe_shapes(lp + "mixer.", dims, fused))
        else:
            s[lp + "mixer.up_proj.weight"] = (dims["d_ff"], D)
            s[lp + "mixer.down_proj.weight"] = (D, dims["d_ff"])
            if dims["mlp_bias"]:
                s[lp + "mixer.up_proj.bias"] = (dims["d_ff"],)
                s[lp + "mixer.down_proj.bias"] = (D,)
    return s


def prefix(tensors):
    """The prefix the checkpoint's model tensors share."""
    for p in PREFIXES:
        if p + "embeddings.weight" in tensors:
            return p
    raise ConvertError("missing tensor 'backbone.embeddings.weight' (nor "
                       "'model.embeddings.weight')")


def map_tensors(tensors, dims, dtype):
    """Source tensors -> canonical tensors (matrices in `dtype`; A, D, dt_bias fp32)."""
    tensors = {n: t for n, t in tensors.items() if not n.startswith(MTP)}
    p = prefix(tensors)
    fused = any(n.endswith("mixer.experts.up_proj") for n in tensors)
    check_tensors(tensors, source_shapes(dims, p, fused), p + "embeddings.weight",
                  dims["tied"])
    mat = matrices(tensors, dtype)
    out = {"embed.weight": mat(p + "embeddings.weight"),
           "final_norm.weight": mat(p + "norm_f.weight")}
    if not dims["tied"]:
        out["lm_head.weight"] = mat(HEAD)
    for j, kind in enumerate(dims["layers"]):
        s, c = f"{p}layers.{j}.", f"blocks.{j}."
        out[c + "norm.weight"] = mat(s + "norm.weight")
        if kind == "linear_attention":
            out.update(hf_mamba2.map_mixer(tensors, s + "mixer.", c, dims, dtype))
        elif kind == "full_attention":
            out.update(hf_layers.map_attention(mat, s + "mixer.", c, lambda n: False))
        elif kind == "moe":
            out.update(_map_moe(tensors, mat, s + "mixer.", c, dims, fused))
        else:
            for n in ("up", "down"):
                out[c + f"mlp.{n}.weight"] = mat(s + f"mixer.{n}_proj.weight")
                if dims["mlp_bias"]:
                    out[c + f"mlp.{n}.bias"] = mat(s + f"mixer.{n}_proj.bias")
    return out


def blocks(dims, sinks, window):
    """The canonical block dicts, one per layer."""
    norm = {"type": "rmsnorm", "eps": dims["eps"]}
    attn = {"kind": "attention", "norm": norm, "n_heads": dims["n_heads_attn"],
            "n_kv_heads": dims["n_kv_heads"], "head_dim": dims["attn_head_dim"],
            "qkv_bias": False, "o_bias": False, "pos": "none", "rope_theta": None,
            "rope_scaling": None, "sinks": sinks, "window": window, "rel_bias": None}
    mlp = {"kind": "mlp", "norm": norm, "d_ff": dims["d_ff"], "act": dims["act"],
           "gated": False, "bias": dims["mlp_bias"]}
    kinds = {"linear_attention": hf_mamba2.block(dims), "full_attention": attn, "mlp": mlp}
    if dims["moe"] is not None:
        m = dims["moe"]
        kinds["moe"] = {
            "kind": "moe", "norm": norm, "routing": "sigmoid_group_topk",
            "n_experts": m["n_experts"], "d_ff": m["d_ff"], "act": dims["act"], "gated": False,
            "router_bias": False, "expert_bias": False, "capacity": None, "top_k": m["top_k"],
            "renormalize": m["renormalize"], "n_group": m["n_group"],
            "topk_group": m["topk_group"], "routed_scale": m["scale"], "latent": m["latent"],
            "shared": {"d_ff": m["shared_d_ff"], "gate": None}}
    return [json.loads(json.dumps(kinds[t])) for t in dims["layers"]]


def convert(src, dtype, sinks=None, window=None):
    """Return (canonical config, canonical tensors) for an HF Nemotron-H directory."""
    cfg = load_config(src)
    dims = read_dims(cfg)
    S, W = sink_cache.cache_size(dims["max_pos"], DEFAULT_WINDOW, sinks, window)
    tensors = map_tensors(load_tensors(src), dims, dtype)
    return (canonical_config(dims["defaults"], src, dims, dims["tied"], blocks(dims, S, W)),
            tensors)
