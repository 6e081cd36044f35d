"""config.json of a Hugging Face checkpoint directory, and the fields that
several architectures share, read and checked the same way for each (errors
name the field); also the canonical config those fields give around a
converter's blocks.
"""

import json
import os

from weights import canonical
from weights.converters.convert_error import ConvertError
from weights.converters.mamba_common import positive_int


def load_config(src):
    """The config.json dict of directory `src`."""
    path = os.path.join(src, "config.json")
    if not os.path.exists(path):
        raise ConvertError(f"{src}: no config.json found")
    with open(path) as f:
        cfg = json.load(f)
    if not isinstance(cfg, dict):
        raise ConvertError(f"{path}: not a JSON object")
    return cfg


def check_architecture(cfg, model_type, architecture):
    """cfg is of `model_type`, and names `architecture` among its architectures
    where it lists any."""
    archs = cfg.get("architectures") or []
    if cfg.get("model_type") != model_type or (archs and architecture not in archs):
        raise ConvertError(f"config: unknown architecture (model_type={cfg.get('model_type')!r}, "
                           f"architectures={archs!r}); expected {model_type} / {architecture}")


def check_silu(cfg, why=""):
    """hidden_act is silu, as it is when absent; `why` follows "only silu" in the error."""
    if cfg.get("hidden_act", "silu") != "silu":
        raise ConvertError(f"config: field 'hidden_act' {cfg['hidden_act']!r} unsupported "
                           f"(only silu{why})")


# transformers 5 writes non-finite floats of a config as {"__float__": "Infinity"}.
FLOAT_TAGS = {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}


def decode_floats(v):
    """v with transformers 5's tagged non-finite floats turned back into floats."""
    if isinstance(v, dict) and set(v) == {"__float__"} and v["__float__"] in FLOAT_TAGS:
        return FLOAT_TAGS[v["__float__"]]
    if isinstance(v, list):
        return [decode_floats(x) for x in v]
    return v


def boolean(cfg, key, default):
    """cfg[key] (`default`, the HF config class's own, when absent): true or false."""
    v = cfg.get(key, default)
    if not isinstance(v, bool):
        raise ConvertError(f"config: field {key!r} must be true or false, got {v!r}")
    return v


def positive_number(cfg, key, default):
    """cfg[key] (`default`, the HF config class's own, when absent) as a positive float."""
    v = cfg.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise ConvertError(f"config: field {key!r} must be a positive number, got {v!r}")
    return float(v)


def attention_heads(cfg, hidden_size, explicit_head_dim=False):
    """(n_heads, n_kv_heads, head_dim) of an HF attention config.

    num_key_value_heads absent or null means num_attention_heads (plain
    multi-head attention, as the HF configs default it); it must divide
    num_attention_heads so that each KV head serves a whole group of queries.
    head_dim is hidden_size / num_attention_heads, or the config's own
    `head_dim` where the architecture has that field (explicit_head_dim: Llama
    and Mistral do, Jamba does not and ignores one if present).
    """
    Hq = positive_int(cfg, "num_attention_heads")
    if explicit_head_dim and cfg.get("head_dim") is not None:
        dh = positive_int(cfg, "head_dim")
    elif hidden_size % Hq:
        absent = " and head_dim is absent" if explicit_head_dim else ""
        raise ConvertError(f"config: field 'hidden_size' {hidden_size} is not a multiple of "
                           f"num_attention_heads {Hq}{absent}")
    else:
        dh = hidden_size // Hq
    Hkv = Hq if cfg.get("num_key_value_heads") is None \
        else positive_int(cfg, "num_key_value_heads")
    if Hq % Hkv:
        raise ConvertError(f"config: field 'num_key_value_heads' {Hkv} does not divide "
                           f"num_attention_heads {Hq}")
    return Hq, Hkv, dh


def token_id(cfg, key, vocab_size):
    """cfg[key] as one token id below vocab_size, or None; a list keeps its first
    entry, as the canonical config holds one EOS / BOS."""
    v = cfg.get(key)
    if isinstance(v, list):
        v = v[0] if v else None
    if v is not None and (isinstance(v, bool) or not isinstance(v, int)
                          or not 0 <= v < vocab_size):
        raise ConvertError(f"config: field {key!r} must be a token id below vocab_size "
                           f"{vocab_size}, got {cfg.get(key)!r}")
    return v


def canonical_config(cfg, src, dims, tied, blocks):
    """The canonical config.json dict of the HF checkpoint in `src` around `blocks`:
    named after the directory, a final RMSNorm at dims["eps"], EOS / BOS from cfg."""
    V = dims["vocab_size"]
    return canonical.model_config(
        name=os.path.basename(os.path.normpath(src)), vocab_size=V, d_model=dims["d_model"],
        tie_embeddings=tied, final_norm={"type": "rmsnorm", "eps": dims["eps"], "affine": True},
        eos_token_id=token_id(cfg, "eos_token_id", V),
        bos_token_id=token_id(cfg, "bos_token_id", V), blocks=blocks)
