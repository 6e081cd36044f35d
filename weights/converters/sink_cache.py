"""The attention-sink cache size that the HF attention converters (hf_llama,
hf_jamba, hf_bamba) write into every attention block: `sinks` S first tokens plus the
`window` W most recent ones. It is a serving choice, not part of the checkpoint
(MODELS.md 3.4), so it comes from the --sinks / --window options.
"""

from weights.converters.convert_error import ConvertError
from weights.converters.mamba_common import positive_int

OPTIONS = ("sinks", "window")     # the converters' SERVING_OPTIONS
DEFAULT_SINKS = 4


def max_positions(cfg):
    """max_position_embeddings of an HF config dict, or None when it has none."""
    if cfg.get("max_position_embeddings") is None:
        return None
    return positive_int(cfg, "max_position_embeddings")


def cache_size(max_pos, default_window, sinks=None, window=None, bound_explicit_window=False,
               default_sinks=DEFAULT_SINKS):
    """(S, W): S defaults to default_sinks; W to default_window, shortened so that
    S + W + 1 <= max_pos (a query never sees more keys than the model was trained
    on). bound_explicit_window: an explicit window must meet the same bound, for
    models that rotate a query at cache position min(t, S + W), which must stay a
    trained position; otherwise an explicit window is taken as given."""
    S = default_sinks if sinks is None else sinks
    if isinstance(S, bool) or not isinstance(S, int) or S < 0:
        raise ConvertError(f"--sinks must be a non-negative integer, got {S!r}")
    if window is None:
        W = default_window if max_pos is None else min(default_window, max_pos - 1 - S)
        if W < 0:
            raise ConvertError(f"--sinks {S} leaves no room for a window within "
                               f"max_position_embeddings {max_pos}")
    else:
        W = window
        if isinstance(W, bool) or not isinstance(W, int) or W < 0:
            raise ConvertError(f"--window must be a non-negative integer, got {W!r}")
        if bound_explicit_window and max_pos is not None and S + W + 1 > max_pos:
            raise ConvertError(f"--sinks {S} + --window {W} puts the query at cache position "
                               f"{S + W}, beyond max_position_embeddings {max_pos}")
    if S + W < 1:
        raise ConvertError("--sinks + --window must be at least 1")
    return S, W
