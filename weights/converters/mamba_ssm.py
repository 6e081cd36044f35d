"""Original `state-spaces/mamba` checkpoint (config.json + pytorch_model.bin) -> canonical.

Field set per MODELS.md 1.6. Only pure Mamba-1 or Mamba-2 stacks convert (a
Mamba-2 config, ssm_cfg.layer "Mamba2", goes to mamba2_ssm.py): another
ssm_cfg.layer, d_intermediate > 0 (gated MLP per block) and attention layers
are rejected, as are non-RMSNorm models.
"""

import json
import math
import os

from weights.converters import mamba2_ssm
from weights.converters.convert_error import ConvertError
from weights.converters.hf_checkpoint import load_bin
from weights.converters.mamba_common import canonical_config, map_tensors, positive_int

NAME = "mamba-ssm"
EMBED = "backbone.embedding.weight"

# ssm_cfg keys that only affect initialisation or kernel choice, not the function.
_INIT_ONLY = {"dt_min", "dt_max", "dt_init", "dt_scale", "dt_init_floor", "use_fast_path",
              "layer_idx", "device", "dtype"}
_MATH = {"d_state", "d_conv", "expand", "dt_rank", "conv_bias", "bias", "layer"}


def read_dims(cfg):
    for key in ("d_model", "n_layer", "vocab_size"):
        if key not in cfg:
            raise ConvertError(f"config: missing field {key!r} (not a mamba_ssm config: "
                               "unknown architecture)")
    ssm = cfg.get("ssm_cfg") or {}
    unknown = sorted(set(ssm) - _INIT_ONLY - _MATH)
    if unknown:
        raise ConvertError(f"config: unknown ssm_cfg fields {unknown}")
    if ssm.get("layer", "Mamba1") != "Mamba1":
        raise ConvertError(f"config: ssm_cfg.layer {ssm['layer']!r} unsupported (only Mamba1 "
                           "and Mamba2)")
    if cfg.get("d_intermediate", 0):
        raise ConvertError("config: d_intermediate > 0 (gated MLP blocks) is unsupported")
    if cfg.get("attn_layer_idx"):
        raise ConvertError("config: attn_layer_idx (attention layers) is unsupported")
    if not cfg.get("rms_norm", True):
        raise ConvertError("config: rms_norm=false (LayerNorm) is unsupported for mamba1")
    D = positive_int(cfg, "d_model")
    mult = cfg.get("pad_vocab_size_multiple", 1) or 1
    V = positive_int(cfg, "vocab_size")
    V = math.ceil(V / mult) * mult          # mamba_ssm pads the embedding at construction
    rank = ssm.get("dt_rank", "auto")
    R = math.ceil(D / 16) if rank == "auto" else positive_int(ssm, "dt_rank", "ssm_cfg")
    bias = bool(ssm.get("bias", False))
    return {"vocab_size": V, "d_model": D, "n_layers": positive_int(cfg, "n_layer"),
            "d_inner": int(ssm.get("expand", 2) * D), "d_state": int(ssm.get("d_state", 16)),
            "d_conv": int(ssm.get("d_conv", 4)), "dt_rank": R, "in_proj_bias": bias,
            "out_proj_bias": bias, "conv_bias": bool(ssm.get("conv_bias", True))}


def load_tensors(src):
    """The state dict of src/pytorch_model.bin, the one file mamba_ssm saves."""
    path = os.path.join(src, "pytorch_model.bin")
    if not os.path.exists(path):
        raise ConvertError(f"{src}: no pytorch_model.bin found")
    return load_bin(path)


def convert(src, dtype):
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    if isinstance(cfg.get("ssm_cfg"), dict) and cfg["ssm_cfg"].get("layer") == "Mamba2":
        return mamba2_ssm.convert(cfg, src, load_tensors(src), dtype)
    dims = read_dims(cfg)
    tied = bool(cfg.get("tie_embeddings", True))
    eps = float(cfg.get("norm_epsilon", 1e-5))   # mamba_ssm's MixerModel default
    tensors = map_tensors(load_tensors(src), dims, EMBED, tied, dtype)
    config = canonical_config(dims, os.path.basename(os.path.normpath(src)), tied, eps,
                              cfg.get("eos_token_id"), cfg.get("bos_token_id"))
    return config, tensors
