// SeqBoat block (MODELS.md §2.1-2.5): MD-EMA → SiLU → latent configurator →
// a gated attention unit evaluated only for the tokens the configurator
// activates, against a FIFO working memory of the last `w` active tokens →
// SiLU(S + G + c·Y). The residual is internal (the output replaces the
// stream), with the norm before the EMA (pre-norm) or after the SiLU.
//
// Projections are GEMMs over all rows of a step (EMA output, router, G). For
// the GAU, a prefill or mixed call gathers the active rows (read back once):
// a token the configurator skips costs no Z/R/V projection and no attention.
// A decode call (every segment one row or none) reads nothing back: the GAU's
// GEMMs cover all rows (weight-bound, so no dearer) and the attention skips
// inactive rows on the device, so a bucket's step can be recorded once.
// The activated-token counter lives in backend memory, read when published.
#ifndef SEQBOAT_ENGINE_LAYERS_SEQBOAT_H_
#define SEQBOAT_ENGINE_LAYERS_SEQBOAT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend/seqboat_shape.h"
#include "engine/layers/block.h"

namespace seqboat {

// config.json's "seqboat" fields (MODELS.md §2, §6.1).
struct SeqBoatConfig {
  bool prenorm = true;  // false: the norm follows the final SiLU
  int64_t ema_dim = 0;  // N_e >= 1
  int64_t z_dim = 0;    // z >= 1, even for rope_interleaved
  int64_t v_dim = 0;    // v >= 1
  int64_t window = 0;   // w >= 1: earlier active tokens a query sees
  SeqBoatAttnFn attn_fn = SeqBoatAttnFn::kSoftmax;
  SeqBoatPos pos = SeqBoatPos::kRopeInterleaved;
  double rope_theta = 10000.0;         // rope_interleaved only
  std::optional<int64_t> rel_pos_max;  // M, required for simple_bias
  // The FIR length used in training; the engine runs the IIR, and parsing
  // leaves a warning saying so.
  std::optional<int64_t> ema_truncation;
};

extern const BlockKind kSeqBoatBlock;

// The kernels' view of the block: the config's sizes for a d_model stream.
SeqBoatShape SeqBoatShapeOf(const SeqBoatConfig& config, int d_model);

// Names of the counters AppendStats reports: tokens seen, and tokens whose
// GAU was evaluated (activation rate = activated / tokens).
inline constexpr char kSeqBoatTokensStat[] = "seqboat.tokens";
inline constexpr char kSeqBoatActivatedStat[] = "seqboat.gau_activated";

// The norm is config.json's (nullopt: none; in fp32 the two RMSNorm
// roundings rmsnorm and rmsnorm_t5 of MODELS.md §6.1 are one function).
// Fetches site.prefix + canonical tensor names (MODELS.md §6.2) from the
// store. Errors name site.where (e.g. "blocks[2] (seqboat)") and the field.
absl::StatusOr<std::unique_ptr<Layer>> MakeSeqBoat(
    const SeqBoatConfig& config, const std::optional<NormConfig>& norm,
    const BlockSite& site);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_SEQBOAT_H_
