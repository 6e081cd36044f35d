// The residual add that ends a block, r ← r + s·(x wᵀ + b), with config.json's
// block field "residual_scale" s (Granite's residual_multiplier, MODELS.md
// §15.1; 1 elsewhere). At s = 1 the output GEMM accumulates into r, as every
// block did before the field existed. Otherwise the GEMM writes rows the
// caller no longer needs and one ScatterAddScaled adds s times them into r:
// the source's r + s·f rounding, with ops both backends already have.
#ifndef SEQBOAT_ENGINE_LAYERS_RESIDUAL_OUT_H_
#define SEQBOAT_ENGINE_LAYERS_RESIDUAL_OUT_H_

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"

namespace seqboat {

class ResidualOut {
 public:
  explicit ResidualOut(float scale) : scale_(scale) {}

  // proj.y is the residual (proj.ldy its stride); `spare` holds proj.n rows
  // of proj.w.rows floats that the block has finished with.
  void Add(Backend& be, GemmParams proj, float* spare);

 private:
  float scale_;
  std::vector<int32_t> rows_;  // host: 0 .. n-1
  std::vector<float> scales_;  // host: scale_ per row
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_RESIDUAL_OUT_H_
