"""A Hugging Face config's `rope_scaling` -> the canonical attention block's
`rope_scaling` object (documented in engine/layers/rope.h), read as
transformers 4.48.3 reads it (modeling_rope_utils.py; MODELS.md 10).

The canonical object states the math completely: the type under one key,
transformers' defaults resolved (yarn's attention_factor 0.1 ln(factor) + 1,
beta_fast 32, beta_slow 1), and the lengths the formulas read. A key that
transformers 4.48.3 would only warn about and ignore is refused instead: such
a key (DeepSeek's `mscale`, say) means the checkpoint was made for code that
computes something else.
"""

import math

from weights.converters.convert_error import ConvertError

SUPPORTED = ("linear", "dynamic", "llama3", "yarn")

# Keys each type reads besides its type (rope_type / legacy type).
_KEYS = {
    "linear": {"factor"},
    # 4.48.3 accepts original_max_position_embeddings here and never reads it.
    "dynamic": {"factor", "original_max_position_embeddings"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor",
               "original_max_position_embeddings"},
    "yarn": {"factor", "attention_factor", "beta_fast", "beta_slow",
             "original_max_position_embeddings"},
}


def _number(rs, kind, key, minimum=0.0, inclusive=False):
    v = rs.get(key)
    if v is None:
        raise ConvertError(f"config: rope_scaling ({kind!r}) is missing {key!r}")
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) \
        and (v >= minimum if inclusive else v > minimum)
    if not ok:
        bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
        raise ConvertError(f"config: rope_scaling ({kind!r}) field {key!r} must be a finite "
                           f"number {bound}, got {v!r}")
    return float(v)


def _length(rs, kind, key):
    v = rs.get(key)
    if v is None:
        raise ConvertError(f"config: rope_scaling ({kind!r}) is missing {key!r}")
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ConvertError(f"config: rope_scaling ({kind!r}) field {key!r} must be a positive "
                           f"integer, got {v!r}")
    return v


def rope_type(cfg):
    """transformers' rope type of an HF config dict: "default" without scaling."""
    rs = cfg.get("rope_scaling")
    if rs is None:
        return "default"
    if not isinstance(rs, dict):
        raise ConvertError(f"config: rope_scaling must be an object or null, got {rs!r}")
    if "rope_type" in rs and "type" in rs and rs["rope_type"] != rs["type"]:
        raise ConvertError(f"config: rope_scaling gives rope_type {rs['rope_type']!r} and "
                           f"type {rs['type']!r}")
    kind = rs.get("rope_type", rs.get("type"))
    if not isinstance(kind, str):
        raise ConvertError(f"config: rope_scaling {rs!r} names no rope_type")
    return kind


def canonical_rope_scaling(cfg, rope_theta, max_pos):
    """The canonical rope_scaling (None for plain RoPE) of HF config dict `cfg`.

    rope_theta: the config's θ; max_pos: its max_position_embeddings, or None
    when it has none (dynamic and yarn read it, so they then fail).
    """
    kind = rope_type(cfg)
    if kind == "default":
        return None
    if kind not in SUPPORTED:
        raise ConvertError(f"config: rope_scaling type {kind!r} is not supported "
                           f"(supported: {', '.join(SUPPORTED)})")
    rs = cfg["rope_scaling"]
    extra = sorted(set(rs) - {"type", "rope_type"} - _KEYS[kind])
    if extra:
        raise ConvertError(f"config: rope_scaling ({kind!r}) has keys {extra} that transformers "
                           "4.48.3 ignores but the checkpoint's own code may not; remove them "
                           "to convert with transformers' reading")
    factor = _number(rs, kind, "factor", 1.0, inclusive=True)
    if kind == "linear":
        return {"type": "linear", "factor": factor}
    if kind in ("dynamic", "yarn") and max_pos is None:
        raise ConvertError(f"config: rope_scaling ({kind!r}) needs max_position_embeddings")
    if kind == "dynamic":
        return {"type": "dynamic", "factor": factor, "max_position_embeddings": max_pos}
    if kind == "llama3":
        low = _number(rs, kind, "low_freq_factor")
        high = _number(rs, kind, "high_freq_factor")
        if high <= low:
            raise ConvertError(f"config: rope_scaling ('llama3') high_freq_factor {high:g} must "
                               f"exceed low_freq_factor {low:g}")
        return {"type": "llama3", "factor": factor, "low_freq_factor": low,
                "high_freq_factor": high,
                "original_max_position_embeddings":
                    _length(rs, kind, "original_max_position_embeddings")}
    # yarn: 4.48.3 takes the pre-training length from max_position_embeddings.
    orig = rs.get("original_max_position_embeddings")
    if orig is not None and orig != max_pos:
        raise ConvertError(
            f"config: rope_scaling ('yarn') original_max_position_embeddings {orig!r} differs "
            f"from max_position_embeddings {max_pos}: transformers 4.48.3 computes yarn from "
            "max_position_embeddings, later releases from original_max_position_embeddings; "
            "set them equal to choose")
    if not rope_theta > 1:
        raise ConvertError(f"config: rope_theta {rope_theta:g} must exceed 1 for yarn "
                           "rope_scaling")
    out = {"type": "yarn", "factor": factor, "original_max_position_embeddings": max_pos}
    # transformers: `beta_fast or 32`, `beta_slow or 1` (0 means the default too).
    out["beta_fast"] = _number(rs, kind, "beta_fast") if rs.get("beta_fast") else 32.0
    out["beta_slow"] = _number(rs, kind, "beta_slow") if rs.get("beta_slow") else 1.0
    if out["beta_slow"] > out["beta_fast"]:
        raise ConvertError(f"config: rope_scaling ('yarn') beta_slow {out['beta_slow']:g} "
                           f"exceeds beta_fast {out['beta_fast']:g}")
    if rs.get("attention_factor") is None:
        out["attention_factor"] = 0.1 * math.log(factor) + 1.0
    else:
        out["attention_factor"] = _number(rs, kind, "attention_factor")
    return out
