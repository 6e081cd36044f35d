// S4D block (MODELS.md §4.3, §6.2 `s4d`): r ← r + f(Norm(r)) with, per
// channel k < H = d_model and complex mode i < M,
//   ζ[k,i] ← dA[k,i] ζ[k,i] + u[k]        (B folded into C, input unscaled)
//   y[k]    = s · Re(Σ_i C[k,i] ζ[k,i]) + D[k] u[k],   s = 2 (conj_half) or 1
//   f = y (output "none"), or GLU(W_out GELU(y) + b_out) ("gelu_glu": first H
//       rows ⊙ σ(last H rows), the minimal S4D block's output).
// State: zeta [H, M, 2] fp32 per slot; the scan runs per segment, so decode and
// chunked prefill are one code path.
#ifndef SEQBOAT_ENGINE_LAYERS_S4D_H_
#define SEQBOAT_ENGINE_LAYERS_S4D_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/block.h"

namespace seqboat {

// S4D diagonal SSM over H = d_model channels (§4.3).
struct S4dConfig {
  int64_t channels = 1;   // ch, output copies; this build runs 1
  int64_t modes = 0;      // M, complex modes stored per channel
  bool conj_half = true;  // "conj_half": y = 2 Re(...); "full": Re(...)
  bool gelu_glu = false;  // output "gelu_glu": GLU(W_out GELU(y) + b)
};

extern const BlockKind kS4dBlock;

// Fetches `prefix` + "s4d.{dA,C,D}" (and "s4d.out.*" for gelu_glu).
absl::StatusOr<std::unique_ptr<Layer>> MakeS4d(
    const S4dConfig& config, const std::optional<NormConfig>& norm, int d_model,
    const std::string& prefix, WeightStore& weights, Backend& backend);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_S4D_H_
