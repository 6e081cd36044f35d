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
#include "engine/layers/layer.h"
#include "engine/model/config.h"
#include "engine/model/weight_store.h"

namespace seqboat {

struct AttentionDims {
  int d_model = 0;
  int n_heads = 0;     // H_q, a multiple of n_kv_heads
  int n_kv_heads = 0;  // H_kv
  int head_dim = 0;    // d_h, even when rope
  bool qkv_bias = false;
  bool o_bias = false;
  bool rope = false;  // "rope_half"; false: no positional encoding
  double rope_theta = 10000.0;
  int sinks = 0;   // S
  int window = 0;  // W; S + W >= 1
  // The block's pre-norm as config.json gives it (rmsnorm, rmsnorm_t5 or
  // layernorm; the two RMSNorm roundings are one function in fp32), or
  // nullopt for none.
  std::optional<NormConfig> norm = NormConfig{};
};

// Fetches `prefix` + canonical tensor names (MODELS.md §6.2) from the store.
// InvalidArgument for dims the block cannot run (checked again here because
// the layer may be built without a parsed config).
absl::StatusOr<std::unique_ptr<Layer>> MakeAttention(const AttentionDims& dims,
                                                     const std::string& prefix,
                                                     WeightStore& weights,
                                                     Backend& backend);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_ATTENTION_H_
