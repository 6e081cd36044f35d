"""Original `state-spaces/mamba` checkpoint (config.json + pytorch_model.bin) -> canonical.

Field set per MODELS.md 1.6. Only pure Mamba-1 or Mamba-2 stacks convert (a
Mamba-2 config, ssm_cfg.layer "Mamba2", goes to mamba2_ssm.py): another
ssm_cfg.layer, d_intermediate > 0 (gated MLP per block) and attention layers
are rejected, as are non-RMSNorm models.

A directory with params.json and no config.json is a Mistral-format Mamba-2
checkpoint (mistralai/Mamba-Codestral-7B-v0.1 as mistral-inference loads it,
MODELS.md 7.9): params.json holds mistral-inference's MambaArgs, from which it
builds mamba_ssm's MambaConfig with ssm_cfg {"ngroups": n_groups, "layer":
"Mamba2"}, every other mixer field at mamba_ssm's default; the weights are
consolidated.safetensors, mamba_ssm's names under the wrapper's `model.`.
"""

import json
import math
import os

from weights import safetensors_io
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


# mistral-inference's MambaArgs: every field required but model_type.
_MISTRAL_ARGS = ("dim", "n_layers", "vocab_size", "n_groups", "rms_norm", "residual_in_fp32",
                 "fused_add_norm", "pad_vocab_size_multiple", "tie_embeddings")
MISTRAL_WEIGHTS = "consolidated.safetensors"
MISTRAL_PREFIX = "model."


def mistral_config(params):
    """The mamba_ssm config.json that mistral-inference's Mamba builds from a
    params.json dict."""
    where = "params.json"
    if not isinstance(params, dict):
        raise ConvertError(f"{where}: not a JSON object")
    if params.get("model_type", "mamba") != "mamba":
        raise ConvertError(f"{where}: model_type {params['model_type']!r} is not a Mamba "
                           "model (unknown architecture)")
    missing = [k for k in _MISTRAL_ARGS if k not in params]
    if missing:
        raise ConvertError(f"{where}: missing fields {missing}")
    unknown = sorted(set(params) - set(_MISTRAL_ARGS) - {"model_type"})
    if unknown:
        raise ConvertError(f"{where}: unknown fields {unknown} (MambaArgs has "
                           f"{', '.join(_MISTRAL_ARGS)}, model_type)")
    for key in ("rms_norm", "residual_in_fp32", "fused_add_norm", "tie_embeddings"):
        if not isinstance(params[key], bool):
            raise ConvertError(f"{where}: field {key!r} must be true or false, "
                               f"got {params[key]!r}")
    positive_int(params, "pad_vocab_size_multiple", where)
    return {"d_model": positive_int(params, "dim", where),
            "n_layer": positive_int(params, "n_layers", where),
            "vocab_size": positive_int(params, "vocab_size", where),
            "ssm_cfg": {"ngroups": positive_int(params, "n_groups", where), "layer": "Mamba2"},
            "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": params["rms_norm"],
            "residual_in_fp32": params["residual_in_fp32"],
            "fused_add_norm": params["fused_add_norm"],
            "pad_vocab_size_multiple": params["pad_vocab_size_multiple"],
            "tie_embeddings": params["tie_embeddings"]}


def load_mistral_tensors(src):
    """consolidated.safetensors' tensors (Lazy) with the wrapper's `model.` removed."""
    path = os.path.join(src, MISTRAL_WEIGHTS)
    if not os.path.exists(path):
        raise ConvertError(f"{src}: params.json but no {MISTRAL_WEIGHTS} found")
    tensors = {}
    f = safetensors_io.open_file(path)
    for name in f.names():
        if not name.startswith(MISTRAL_PREFIX):
            raise ConvertError(f"unknown tensor {name!r} in {MISTRAL_WEIGHTS} (mistral-inference "
                               f"names every tensor {MISTRAL_PREFIX}...)")
        tensors[name[len(MISTRAL_PREFIX):]] = f.lazy(name)
    return tensors


def convert(src, dtype):
    config_path, params_path = (os.path.join(src, n) for n in ("config.json", "params.json"))
    if not os.path.exists(config_path) and os.path.exists(params_path):
        with open(params_path) as f:
            cfg = mistral_config(json.load(f))
        return mamba2_ssm.convert(cfg, src, load_mistral_tensors(src), dtype)
    if not os.path.exists(config_path):
        raise ConvertError(f"{src}: no config.json (mamba_ssm) or params.json "
                           "(mistral-inference) found")
    with open(config_path) as f:
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
