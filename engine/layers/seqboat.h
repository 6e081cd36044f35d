// SeqBoat block (MODELS.md §2.1-2.5): MD-EMA → SiLU → latent configurator →
// a gated attention unit evaluated only for the tokens the configurator
// activates, against a FIFO working memory of the last `w` active tokens →
// SiLU(S + G + c·Y). The residual is internal (the output replaces the
// stream), with the norm before the EMA (pre-norm) or after the SiLU.
//
// Projections are GEMMs over all rows of a step (EMA output, router, G) and,
// for the GAU, over only the gathered active rows: a token the configurator
// skips costs no Z/R/V projection and no attention.
#ifndef SEQBOAT_ENGINE_LAYERS_SEQBOAT_H_
#define SEQBOAT_ENGINE_LAYERS_SEQBOAT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend/seqboat_shape.h"
#include "engine/layers/layer.h"
#include "engine/model/config.h"
#include "engine/model/weight_store.h"

namespace seqboat {

struct SeqBoatDims {
  SeqBoatShape shape;  // d, ne, z, v, w, attn_fn, pos, rope_theta, M
  bool prenorm = true;
  // The block's norm as config.json gives it; nullopt: none. In fp32 the two
  // RMSNorm roundings (rmsnorm, rmsnorm_t5; MODELS.md §6.1) are one function.
  std::optional<NormConfig> norm = NormConfig{NormType::kLayerNorm};
};

// Names of the counters AppendStats reports: tokens seen, and tokens whose
// GAU was evaluated (activation rate = activated / tokens).
inline constexpr char kSeqBoatTokensStat[] = "seqboat.tokens";
inline constexpr char kSeqBoatActivatedStat[] = "seqboat.gau_activated";

// Fetches `prefix` + canonical tensor names (MODELS.md §6.2) from the store.
// Errors name `where` (e.g. "blocks[2] (seqboat)") and the bad field.
absl::StatusOr<std::unique_ptr<Layer>> MakeSeqBoat(const SeqBoatDims& dims,
                                                   const std::string& where,
                                                   const std::string& prefix,
                                                   WeightStore& weights,
                                                   Backend& backend);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_SEQBOAT_H_
