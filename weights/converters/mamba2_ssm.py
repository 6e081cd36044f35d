"""Original `state-spaces/mamba` Mamba-2 checkpoints (state-spaces/mamba2-*:
config.json with ssm_cfg.layer "Mamba2" + pytorch_model.bin) -> canonical mamba2
blocks. `--source mamba-ssm` hands these configs here.

Every mixer field absent from ssm_cfg takes mamba_ssm's Mamba2.__init__ default
(MODELS.md 7.9: d_state 128, d_conv 4, expand 2, headdim 64, ngroups 1, no
biases but the conv's, dt_limit (0, inf)); the gated norm's eps is mamba_ssm's
fixed 1e-5 and the block norms' is norm_epsilon. Tensor names are HF's but for
backbone.embedding.weight (singular), so the mapping is hf_mamba2's.

Refused, naming the field: ssm_cfg keys that are not mamba_ssm's, d_ssm below
d_inner (a gated MLP beside the SSM), rmsnorm false, norm_before_gate true,
D_has_hdim true, learnable_init_states, an activation other than silu, headdim
not dividing d_inner, ngroups not dividing the heads, and the model-level
fields the Mamba-1 path refuses (d_intermediate, attention layers, no RMSNorm).
"""

import math

from weights.converters import hf_mamba2
from weights.converters.convert_error import ConvertError
from weights.converters.hf_config import canonical_config
from weights.converters.mamba_common import positive_int

EMBED = "backbone.embedding.weight"

# Mamba2.__init__ arguments that only affect initialisation, kernels or placement.
_INIT_ONLY = {"A_init_range", "dt_min", "dt_max", "dt_init_floor", "conv_init",
              "use_mem_eff_path", "sequence_parallel", "process_group", "layer_idx", "device",
              "dtype"}
_MATH = {"layer", "d_state", "d_conv", "expand", "headdim", "ngroups", "rmsnorm",
         "norm_before_gate", "D_has_hdim", "bias", "conv_bias", "dt_limit", "d_ssm",
         "chunk_size", "activation", "learnable_init_states"}
GATED_NORM_EPS = 1e-5   # mamba_ssm builds RMSNormGated(d_ssm, eps=1e-5)


def _flag(ssm, key, default):
    v = ssm.get(key, default)
    if not isinstance(v, bool):
        raise ConvertError(f"config: ssm_cfg.{key} must be true or false, got {v!r}")
    return v


def read_dims(cfg):
    """Canonical dimensions and block fields from a mamba_ssm Mamba-2 config."""
    ssm = cfg.get("ssm_cfg") or {}
    unknown = sorted(set(ssm) - _INIT_ONLY - _MATH)
    if unknown:
        raise ConvertError(f"config: unknown ssm_cfg fields {unknown} (Mamba2)")
    if cfg.get("d_intermediate", 0):
        raise ConvertError("config: d_intermediate > 0 (gated MLP blocks) is unsupported")
    if cfg.get("attn_layer_idx"):
        raise ConvertError("config: attn_layer_idx (attention layers) is unsupported")
    if not cfg.get("rms_norm", True):
        raise ConvertError("config: rms_norm=false (LayerNorm) is unsupported for mamba2")
    for key, bad in (("rmsnorm", False), ("norm_before_gate", True), ("D_has_hdim", True),
                     ("learnable_init_states", True)):
        default = {"rmsnorm": True}.get(key, False)
        if _flag(ssm, key, default) == bad:
            raise ConvertError(f"config: ssm_cfg.{key}={str(bad).lower()} is unsupported")
    if ssm.get("activation", "swish") not in ("swish", "silu"):
        raise ConvertError(f"config: ssm_cfg.activation {ssm['activation']!r} unsupported "
                           "(only swish / silu)")
    D = positive_int(cfg, "d_model")
    mult = cfg.get("pad_vocab_size_multiple", 1) or 1
    V = math.ceil(positive_int(cfg, "vocab_size") / mult) * mult
    expand = ssm.get("expand", 2)
    if isinstance(expand, bool) or not isinstance(expand, (int, float)) or expand <= 0:
        raise ConvertError(f"config: ssm_cfg.expand must be a positive number, got {expand!r}")
    E = int(expand * D)
    if ssm.get("d_ssm") is not None and ssm["d_ssm"] != E:
        raise ConvertError(f"config: ssm_cfg.d_ssm {ssm['d_ssm']!r} other than d_inner {E} "
                           "(a gated MLP beside the SSM) is unsupported")

    def size(key, default):
        return positive_int({key: ssm.get(key, default)}, key, "ssm_cfg")

    P, G = size("headdim", 64), size("ngroups", 1)
    if E % P:
        raise ConvertError(f"config: ssm_cfg.headdim {P} does not divide d_inner {E}")
    H = E // P
    if H % G:
        raise ConvertError(f"config: ssm_cfg.ngroups {G} does not divide the {H} heads")
    size("chunk_size", 256)         # only rounding depends on it
    dt_min, dt_max = hf_mamba2.time_step_limit(ssm.get("dt_limit", [0.0, math.inf]),
                                               "ssm_cfg.dt_limit")
    bias = _flag(ssm, "bias", False)
    eps = cfg.get("norm_epsilon", 1e-5)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps <= 0:
        raise ConvertError(f"config: field 'norm_epsilon' must be a positive number, got {eps!r}")
    return {"vocab_size": V, "d_model": D, "n_layers": positive_int(cfg, "n_layer"),
            "n_heads": H, "head_dim": P, "d_state": size("d_state", 128), "n_groups": G,
            "d_conv": size("d_conv", 4), "in_proj_bias": bias, "out_proj_bias": bias,
            "conv_bias": _flag(ssm, "conv_bias", True), "dt_min": dt_min, "dt_max": dt_max,
            "eps": float(eps), "gated_norm_eps": GATED_NORM_EPS}


def convert(cfg, src, tensors, dtype):
    """(canonical config, canonical tensors) of a mamba_ssm Mamba-2 checkpoint
    whose config.json is `cfg` and whose state dict is `tensors`."""
    dims = read_dims(cfg)
    tied = bool(cfg.get("tie_embeddings", True))
    out = hf_mamba2.map_tensors(tensors, dims, EMBED, tied, dtype)
    return canonical_config(cfg, src, dims, tied, hf_mamba2.blocks(dims)), out
