// Gated DeltaNet block (MODELS.md §12; Qwen3.5's and Qwen3-Next's linear
// attention layers): r ← r + Mixer(RMSNorm(r)). One GEMM gives
// [q ; k ; v | z | b | a] for all rows of a step (the four input projections
// are stacked at load); the short conv over q, k, v (Mamba-1's, no bias) and
// the delta-rule scan with its gated norm (GdnScan) run per segment against
// the sequence's slot, so decode and chunked prefill are the same code;
// out_proj is row-wise again.
#ifndef SEQBOAT_ENGINE_LAYERS_GDN_H_
#define SEQBOAT_ENGINE_LAYERS_GDN_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "engine/layers/block.h"

namespace seqboat {

// config.json's "gdn" fields. Sizes >= 1; n_v_heads is a multiple of
// n_k_heads; head_v_dim <= 1024 (a CUDA block covers a value head).
struct GdnConfig {
  int64_t n_k_heads = 0;   // H_k: query and key heads
  int64_t n_v_heads = 0;   // H_v: value (state) heads
  int64_t head_k_dim = 0;  // d_k
  int64_t head_v_dim = 0;  // d_v
  int64_t d_conv = 0;      // K
  double gated_norm_eps = 1e-6;

  int64_t key_dim() const { return n_k_heads * head_k_dim; }
  int64_t value_dim() const { return n_v_heads * head_v_dim; }
  // Channels of [q ; k ; v], which the conv runs over.
  int64_t conv_channels() const { return 2 * key_dim() + value_dim(); }
  // Columns of the stacked projection's output [q ; k ; v | z | b | a].
  int64_t proj_rows() const {
    return conv_channels() + value_dim() + 2 * n_v_heads;
  }
};

extern const BlockKind kGdnBlock;

// `norm` must be an affine rmsnorm. Fetches site.prefix + canonical tensor
// names from the store: norm.weight [D], in_qkv.weight [2HkDk+HvDv, D],
// in_z.weight [HvDv, D], in_b.weight and in_a.weight [Hv, D],
// conv.weight [2HkDk+HvDv, K], A and dt_bias [Hv] (fp32),
// gated_norm.weight [Dv], out_proj.weight [D, HvDv].
absl::StatusOr<std::unique_ptr<Layer>> MakeGdn(
    const GdnConfig& config, const std::optional<NormConfig>& norm,
    const BlockSite& site);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_GDN_H_
