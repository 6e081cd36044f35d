// The residual add that ends a block, r ← r + s·(x wᵀ + b), with config.json's
// block field "residual_scale" s (Granite's residual_multiplier, MODELS.md
// §15.1; 1 elsewhere): the output GEMM accumulates into r at that scale
// (GemmParams::residual_scale), the source's r + s·f rounding with f
// rounded first. On CUDA's decode GEMV the scaled add is the GEMV's
// epilogue; every backend gives the bits of the GEMM then ScatterAddScaled.
#ifndef SEQBOAT_ENGINE_LAYERS_RESIDUAL_OUT_H_
#define SEQBOAT_ENGINE_LAYERS_RESIDUAL_OUT_H_

#include "engine/backend/backend.h"

namespace seqboat {

class ResidualOut {
 public:
  explicit ResidualOut(float scale) : scale_(scale) {}

  // proj.y is the residual (proj.ldy its stride).
  void Add(Backend& be, GemmParams proj) const;

 private:
  float scale_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_RESIDUAL_OUT_H_
