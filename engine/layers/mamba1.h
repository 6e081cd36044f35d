// Mamba-1 block (MODELS.md §1): r ← r + Mixer(RMSNorm(r)). Projections run as
// GEMMs over all rows of a step; the conv and the selective scan run per
// segment against the sequence's slot, so decode (1 row) and chunked prefill
// (many rows) are the same code.
#ifndef SEQBOAT_ENGINE_LAYERS_MAMBA1_H_
#define SEQBOAT_ENGINE_LAYERS_MAMBA1_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "engine/layers/block.h"

namespace seqboat {

// config.json's "mamba1" fields. All sizes >= 1.
struct Mamba1Config {
  int64_t d_inner = 0;  // E
  int64_t d_state = 0;  // N
  int64_t d_conv = 0;   // K
  int64_t dt_rank = 0;  // R
  bool in_proj_bias = false;
  bool out_proj_bias = false;
  bool conv_bias = true;
  // "dt_bc_norm" (null or absent: none): Jamba's RMSNorms over the δ̃, B and
  // C slices of x_proj's output, each normalised on its own before dt_proj
  // and the scan. Type is always kRmsNorm; affine adds the tensors
  // dt_norm.weight [R], b_norm.weight [N], c_norm.weight [N].
  std::optional<NormConfig> dt_bc_norm;
};

extern const BlockKind kMamba1Block;

// `norm` must be an affine rmsnorm. Fetches site.prefix + canonical tensor
// names (MODELS.md §6.2) from the store.
absl::StatusOr<std::unique_ptr<Layer>> MakeMamba1(
    const Mamba1Config& config, const std::optional<NormConfig>& norm,
    const BlockSite& site);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_MAMBA1_H_
