// Attention block with an attention-sink rolling KV cache (MODELS.md §3,
// §4.2, §6): r ← r + W_o Attn(Norm(r)). StreamingLLM's cache for Llama-family
// decoders and, with sinks = 0, SPADE's local window attention. q/k/v/o are
// GEMMs over all rows of a step; the attention itself runs per segment
// against the sequence's slot, so decode (1 row) and chunked prefill (many
// rows) are the same code and give the same result. State per slot is
// constant: K and V of sinks + window tokens and a token count.
#ifndef SEQBOAT_ENGINE_LAYERS_ATTENTION_H_
#define SEQBOAT_ENGINE_LAYERS_ATTENTION_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/block.h"
#include "engine/layers/rope.h"

namespace seqboat {

enum class AttentionPos { kNone, kRopeHalf };

// Keys seen by a query: the first `sinks` tokens, the `window` most recent
// earlier tokens, and itself. sinks = 0 is a plain sliding window (SPADE local
// layers: window = local_radius). sinks + window >= 1.
struct AttentionConfig {
  int64_t n_heads = 0;     // H_q, a multiple of n_kv_heads
  int64_t n_kv_heads = 0;  // H_kv
  int64_t head_dim = 0;    // d_h; even for "rope_half"
  bool qkv_bias = false;
  bool o_bias = false;
  AttentionPos pos = AttentionPos::kRopeHalf;
  double rope_theta = 10000.0;  // "rope_half" only
  RopeScaling rope_scaling;     // "rope_half" only; type kNone for null
  // config.json's optional "rotary_dim" ("rope_half" only; null or absent:
  // head_dim): RoPE rotates channels [0, rotary_dim) of each head, pairing
  // channel j with j + rotary_dim/2 at frequencies θ^(-2j/rotary_dim), and
  // passes the others unchanged (transformers' partial_rotary_factor:
  // rotary_dim = int(head_dim * factor), e.g. Bamba's 64 of 128). Even,
  // 2 <= rotary_dim <= head_dim. 0 here means head_dim.
  int64_t rotary_dim = 0;
  int64_t sinks = 0;   // S >= 0
  int64_t window = 0;  // W >= 0
  // Qwen3.5's gated attention (MODELS.md §13.2), config.json's optional
  // "qk_norm" (an affine rmsnorm object: q and k RMS-normalised per head over
  // head_dim before RoPE, weights attn.{q,k}_norm.weight [head_dim]) and
  // "out_gate" ("sigmoid": each head's output times sigmoid(attn.gate x),
  // attn.gate.weight [n_heads * head_dim, D], its bias with qkv_bias).
  // config.json's optional "scale": the softmax scale of q·k (Granite's
  // attention_multiplier); null or absent (0 here) is 1/sqrt(head_dim).
  double scale = 0.0;
  bool qk_norm = false;
  double qk_norm_eps = 1e-6;  // > 0
  bool out_gate = false;
};

extern const BlockKind kAttentionBlock;

// The norm (rmsnorm, rmsnorm_t5, layernorm or nullopt for none; the two
// RMSNorm roundings are one function in fp32) is config.json's. Fetches
// site.prefix + canonical tensor names (MODELS.md §6.2) from the store.
// InvalidArgument for a config the block cannot run (checked again here
// because the layer may be built without a parsed config).
absl::StatusOr<std::unique_ptr<Layer>> MakeAttention(
    const AttentionConfig& config, const std::optional<NormConfig>& norm,
    const BlockSite& site);

// The block without a pre-norm, for a caller that norms its input.
absl::StatusOr<std::unique_ptr<Mixer>> MakeAttentionMixer(
    const AttentionConfig& config, const BlockSite& site);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_ATTENTION_H_
