// Dense feed-forward block (MODELS.md §3.1, §6.2 `mlp`):
//   r ← r + down(act(up(Norm(r))))                       (gated: false)
//   r ← r + down(act(gate(Norm(r))) ⊙ up(Norm(r)))       (gated: true, Llama
//                                                        SwiGLU with silu)
// Three (two) GEMMs over all rows of a step; no state.
#ifndef SEQBOAT_ENGINE_LAYERS_MLP_H_
#define SEQBOAT_ENGINE_LAYERS_MLP_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/block.h"

namespace seqboat {

// config.json's "mlp" fields ("gelu" is the exact erf form).
struct MlpConfig {
  int64_t d_ff = 0;                    // F >= 1
  Activation act = Activation::kGelu;  // gelu, gelu_tanh, relu, relu2, silu
  bool gated = false;
  bool bias = false;  // .bias on up, gate and down
};

extern const BlockKind kMlpBlock;

// Fetches `prefix` + "mlp.{up,gate,down}.{weight,bias}" and the norm;
// residual_scale is the block's (BlockSite).
absl::StatusOr<std::unique_ptr<Layer>> MakeMlp(
    const MlpConfig& config, const std::optional<NormConfig>& norm, int d_model,
    const std::string& prefix, WeightStore& weights, Backend& backend,
    float residual_scale);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_MLP_H_
