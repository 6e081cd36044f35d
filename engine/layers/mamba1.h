// Mamba-1 block (MODELS.md §1): r ← r + Mixer(RMSNorm(r)). Projections run as
// GEMMs over all rows of a step; the conv and the selective scan run per
// segment against the sequence's slot, so decode (1 row) and chunked prefill
// (many rows) are the same code.
#ifndef SEQBOAT_ENGINE_LAYERS_MAMBA1_H_
#define SEQBOAT_ENGINE_LAYERS_MAMBA1_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/layer.h"
#include "engine/model/weight_store.h"

namespace seqboat {

struct Mamba1Dims {
  int d_model = 0;
  int d_inner = 0;  // E
  int d_state = 0;  // N
  int d_conv = 0;   // K
  int dt_rank = 0;  // R
  bool in_proj_bias = false;
  bool out_proj_bias = false;
  bool conv_bias = true;
  float norm_eps = 1e-5f;
  // Jamba: RMSNorm over each of the δ̃, B and C slices of x_proj's output
  // before dt_proj and the scan; affine adds dt_norm.weight [R],
  // b_norm.weight [N], c_norm.weight [N].
  bool dt_bc_norm = false;
  bool dt_bc_norm_affine = true;
  float dt_bc_norm_eps = 1e-6f;
};

// Fetches `prefix` + canonical tensor names (MODELS.md §6.2) from the store.
absl::StatusOr<std::unique_ptr<Layer>> MakeMamba1(const Mamba1Dims& dims,
                                                  const std::string& prefix,
                                                  WeightStore& weights,
                                                  Backend& backend);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_MAMBA1_H_
