"""Hugging Face `MambaForCausalLM` checkpoint (save_pretrained layout) -> canonical.

Reads config.json (MODELS.md 1.7) and the weights in any layout save_pretrained
writes: model.safetensors or pytorch_model.bin, single or sharded
(weights/converters/hf_checkpoint.py). `use_bias` is taken from the file; its
absence means the HF class default (true), which the tensor check then enforces.
"""

import math
import os

from weights.converters.convert_error import ConvertError
from weights.converters.hf_checkpoint import load_tensors
from weights.converters.hf_config import check_architecture, load_config
from weights.converters.mamba_common import canonical_config, map_tensors, positive_int

NAME = "hf-mamba"
EMBED = "backbone.embeddings.weight"


def read_dims(cfg):
    """Canonical dimensions from an HF Mamba config dict."""
    check_architecture(cfg, "mamba", "MambaForCausalLM")
    if cfg.get("hidden_act", "silu") != "silu":
        raise ConvertError(f"config: hidden_act {cfg['hidden_act']!r} unsupported (only silu)")
    D = positive_int(cfg, "hidden_size")
    if "intermediate_size" in cfg:
        E = positive_int(cfg, "intermediate_size")
    else:
        E = positive_int(cfg, "expand") * D
    rank = cfg.get("time_step_rank", "auto")
    R = math.ceil(D / 16) if rank == "auto" else positive_int(cfg, "time_step_rank")
    use_bias = cfg.get("use_bias", True)
    return {"vocab_size": positive_int(cfg, "vocab_size"), "d_model": D,
            "n_layers": positive_int(cfg, "num_hidden_layers"), "d_inner": E,
            "d_state": positive_int(cfg, "state_size"), "d_conv": positive_int(cfg, "conv_kernel"),
            "dt_rank": R, "in_proj_bias": bool(use_bias), "out_proj_bias": bool(use_bias),
            "conv_bias": bool(cfg.get("use_conv_bias", True))}


def convert(src, dtype):
    """Return (canonical config, canonical tensors) for an HF Mamba directory."""
    cfg = load_config(src)
    dims = read_dims(cfg)
    tied = bool(cfg.get("tie_word_embeddings", True))
    # Absent field: MambaConfig's default, 1e-5 (transformers configuration_mamba.py);
    # MambaRMSNorm's own 1e-6 default is always overridden by the config value.
    eps = float(cfg.get("layer_norm_epsilon", 1e-5))
    tensors = map_tensors(load_tensors(src), dims, EMBED, tied, dtype)
    config = canonical_config(dims, os.path.basename(os.path.normpath(src)), tied, eps,
                              cfg.get("eos_token_id"), cfg.get("bos_token_id"))
    return config, tensors
