// A block's optional pre-norm (MODELS.md §6.1 norm types) bound to its
// tensors: the part of `r ← r + f(Norm(r))` every feed-forward-style kind
// shares.
#ifndef SEQBOAT_ENGINE_LAYERS_PRE_NORM_H_
#define SEQBOAT_ENGINE_LAYERS_PRE_NORM_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend/backend.h"
#include "engine/layers/block.h"
#include "engine/model_dir/weight_store.h"

namespace seqboat {

class PreNorm {
 public:
  // Fetches `prefix` + "norm.weight" / "norm.bias" (layernorm) /
  // "norm.scalar" (scalenorm) as the config asks; nothing for a null norm or
  // affine: false.
  absl::Status Bind(const std::optional<NormConfig>& norm,
                    const std::string& prefix, int d_model, WeightStore& ws,
                    Backend& be);

  // out[n, d_model] = Norm(x). With no norm, a copy: callers write the
  // residual while still reading their input.
  void Apply(Backend& be, const float* x, int n, float* out);

  // Readies `first`, the block's first GEMM over Norm(x) (its x, ldx and
  // norm are set here), so that once it has run, out holds Norm(x) as after
  // Apply: a norm folds into the GEMM (GemmParams::norm; scalenorm is the
  // RMS norm of its repeated gain), which CUDA's decode GEMV applies as it
  // loads x; with no norm, Apply's copy runs here and the GEMM reads out.
  void Fold(Backend& be, const float* x, int n, float* out, GemmParams* first);

  // The norm as a GEMM's folded pre-norm writing out (d_model-wide rows);
  // false with no norm, which has nothing to fold.
  bool Folded(float* out, GemmNorm* fold) const;

 private:
  std::optional<NormConfig> norm_;
  int d_ = 0;
  const float* weight_ = nullptr;  // scalenorm: the scalar repeated d times
  const float* bias_ = nullptr;
  std::vector<int32_t> identity_rows_;  // host, for the copy
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_PRE_NORM_H_
