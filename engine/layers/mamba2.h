// Mamba-2 block (MODELS.md §7): r ← r + Mixer(RMSNorm(r)). One in_proj GEMM
// gives [z ; xBC ; δ] for all rows of a step; the conv over xBC and the
// multi-head scan run per segment against the sequence's slot, so decode
// (1 row) and chunked prefill (many rows) are the same code; the gated norm
// and out_proj are row-wise again.
#ifndef SEQBOAT_ENGINE_LAYERS_MAMBA2_H_
#define SEQBOAT_ENGINE_LAYERS_MAMBA2_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "engine/layers/block.h"

namespace seqboat {

// config.json's "mamba2" fields. Sizes >= 1; n_groups divides n_heads.
struct Mamba2Config {
  int64_t n_heads = 0;   // H
  int64_t head_dim = 0;  // P; d_inner E = H * P
  int64_t d_state = 0;   // N
  int64_t n_groups = 0;  // G: B/C groups, also the gated norm's groups
  int64_t d_conv = 0;    // K
  bool in_proj_bias = false;
  bool out_proj_bias = false;
  bool conv_bias = true;
  // time_step_limit: Δ is clamped to [dt_min, dt_max]; dt_max nullopt is
  // unbounded (the default (0, ∞) of both references, a no-op).
  double dt_min = 0.0;
  std::optional<double> dt_max;
  double gated_norm_eps = 1e-5;
  // config.json's optional "gate" (absent: "norm_after_gate"), how y meets
  // the gate z before out_proj (MODELS.md §7.5, §16.3):
  //   "norm_after_gate"   w ⊙ groupRMS(y ⊙ SiLU(z))   (mamba_ssm, Mamba-2)
  //   "norm_before_gate"  (w ⊙ groupRMS(y)) ⊙ SiLU(z) (Falcon-H1's norm)
  //   "silu"              y ⊙ SiLU(z), no norm and no gated_norm.weight
  enum class Gate { kNormAfterGate, kNormBeforeGate, kSilu };
  Gate gate = Gate::kNormAfterGate;

  int64_t d_inner() const { return n_heads * head_dim; }
  // Channels of xBC, which the conv runs over: E + 2 G N.
  int64_t conv_channels() const { return d_inner() + 2 * n_groups * d_state; }
  // Columns of in_proj's output [z ; xBC ; δ]: 2 E + 2 G N + H.
  int64_t in_proj_rows() const { return d_inner() + conv_channels() + n_heads; }
};

extern const BlockKind kMamba2Block;

// `norm` must be an affine rmsnorm. Fetches site.prefix + canonical tensor
// names from the store: norm.weight [D], in_proj.weight [2E+2GN+H, D]
// (+ .bias), conv.weight [E+2GN, K] (+ conv.bias), dt_bias [H], A [H], D [H]
// (all three fp32), gated_norm.weight [E], out_proj.weight [D, E] (+ .bias).
absl::StatusOr<std::unique_ptr<Layer>> MakeMamba2(
    const Mamba2Config& config, const std::optional<NormConfig>& norm,
    const BlockSite& site);

// The block without its pre-norm (no norm.weight), for a caller that norms.
absl::StatusOr<std::unique_ptr<Mixer>> MakeMamba2Mixer(
    const Mamba2Config& config, const BlockSite& site);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_MAMBA2_H_
