"""Hugging Face `FalconMambaForCausalLM` checkpoint -> canonical `mamba1` blocks.

FalconMamba is Mamba-1 (MODELS.md section 1) plus one change: the dt, B and C
slices of x_proj's output are RMS-normalised without weights before dt_proj
and the scan (MODELS.md 8.1), with `mixer_rms_eps` (FalconMambaConfig's
default 1e-6), not the block norms' `layer_norm_epsilon` (default 1e-5). The
canonical block says so with `dt_bc_norm: {"type": "rmsnorm", "eps":
mixer_rms_eps, "affine": false}`; no tensor exists for those norms, in the
checkpoint or in the canonical file. transformers' inference paths normalise
the rank-R dt before dt_proj, and so does the engine; its training kernel
normalises after dt_proj instead (MODELS.md 8.1), which no checkpoint can tell.

Tensor names and shapes are HF Mamba's (MODELS.md 8.2), read from every layout
save_pretrained writes (weights/converters/hf_checkpoint.py). Absent config
fields take FalconMambaConfig's defaults (transformers 4.48.3): use_bias false,
use_conv_bias true, tie_word_embeddings true, time_step_rank "auto" =
ceil(hidden_size / 16). `intermediate_size` wins over `expand`: the released
7B says expand 16 beside intermediate_size 8192, and transformers keeps the
latter (MODELS.md 8.3).

Rejected: another model_type or architecture (a plain `mamba` config would
silently lose the norms; hf-mamba converts those), a non-silu hidden_act, and
any tensor that is missing, unknown or mis-shaped.
"""

import math
import os

from weights import canonical
from weights.converters.hf_checkpoint import load_tensors
from weights.converters.hf_config import (boolean, check_architecture, check_silu,
                                          load_config, positive_number, token_id)
from weights.converters.mamba_common import map_tensors, positive_int

NAME = "falcon-mamba"
EMBED = "backbone.embeddings.weight"

# FalconMambaConfig's defaults for the fields read here (transformers 4.48.3).
DEFAULTS = {"vocab_size": 50280, "hidden_size": 768, "state_size": 16, "num_hidden_layers": 32,
            "conv_kernel": 4, "expand": 2}


def _int(cfg, key):
    """cfg[key], or FalconMambaConfig's default when absent, as a positive integer."""
    return positive_int({key: cfg.get(key, DEFAULTS[key])}, key)


def read_dims(cfg):
    """Canonical dimensions and epsilons from an HF FalconMamba config dict."""
    check_architecture(cfg, "falcon_mamba", "FalconMambaForCausalLM")
    check_silu(cfg)
    D = _int(cfg, "hidden_size")
    if "intermediate_size" in cfg:
        E = positive_int(cfg, "intermediate_size")
    else:
        E = _int(cfg, "expand") * D
    rank = cfg.get("time_step_rank", "auto")
    R = math.ceil(D / 16) if rank == "auto" else positive_int(cfg, "time_step_rank")
    use_bias = boolean(cfg, "use_bias", False)
    return {"vocab_size": _int(cfg, "vocab_size"), "d_model": D,
            "n_layers": _int(cfg, "num_hidden_layers"), "d_inner": E,
            "d_state": _int(cfg, "state_size"), "d_conv": _int(cfg, "conv_kernel"),
            "dt_rank": R, "in_proj_bias": use_bias, "out_proj_bias": use_bias,
            "conv_bias": boolean(cfg, "use_conv_bias", True),
            "eps": positive_number(cfg, "layer_norm_epsilon", 1e-5),
            "mixer_eps": positive_number(cfg, "mixer_rms_eps", 1e-6)}


def convert(src, dtype):
    """Return (canonical config, canonical tensors) for an HF FalconMamba directory."""
    cfg = load_config(src)
    dims = read_dims(cfg)
    tied = boolean(cfg, "tie_word_embeddings", True)
    tensors = map_tensors(load_tensors(src), dims, EMBED, tied, dtype)
    V = dims["vocab_size"]
    config = canonical.mamba_config(
        name=os.path.basename(os.path.normpath(src)), vocab_size=V, d_model=dims["d_model"],
        n_layers=dims["n_layers"], d_inner=dims["d_inner"], d_state=dims["d_state"],
        d_conv=dims["d_conv"], dt_rank=dims["dt_rank"], eps=dims["eps"], tie_embeddings=tied,
        in_proj_bias=dims["in_proj_bias"], out_proj_bias=dims["out_proj_bias"],
        conv_bias=dims["conv_bias"],
        dt_bc_norm={"type": "rmsnorm", "eps": dims["mixer_eps"], "affine": False},
        eos_token_id=token_id(cfg, "eos_token_id", V),
        bos_token_id=token_id(cfg, "bos_token_id", V))
    return config, tensors
