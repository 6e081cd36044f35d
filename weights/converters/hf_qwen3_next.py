"""Hugging Face `Qwen3NextForCausalLM` -> canonical `gdn` / gated `attention` +
`moe` or `mlp` blocks (MODELS.md 12, 13): hf_qwen3_5's conversion with
Qwen3-Next's differences, which it reads from the config and the tensors:

- a flat config (no text_config), model_type "qwen3_next", weights under model.;
- the GDN input projections fused and interleaved per key-head group
  (in_proj_qkvz, in_proj_ba), de-interleaved into Qwen3.5's separate layout
  (12.2; the conv weight is already in that order);
- layer i is MoE iff num_experts > 0, (i + 1) % decoder_sparse_step == 0 and i is
  not in mlp_only_layers, else a dense SwiGLU of intermediate_size; the top k are
  renormalised only if norm_topk_prob.

transformers' own Qwen3-Next restarts a multi-token forward from a zero state
(MODELS.md 12.6); the engine continues from the cached state, as Qwen3.5 does,
so a chunked prefill equals a whole one.
"""

from weights.converters import hf_qwen3_5, sink_cache

NAME = "hf-qwen3-next"
DEFAULT_WINDOW = hf_qwen3_5.DEFAULT_WINDOW
SERVING_OPTIONS = sink_cache.OPTIONS


def convert(src, dtype, sinks=None, window=None):
    """Return (canonical config, canonical tensors) for an HF Qwen3-Next directory."""
    return hf_qwen3_5.convert(src, dtype, sinks, window, layouts=hf_qwen3_5.NEXT_LAYOUTS)
