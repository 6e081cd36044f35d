#include "kernels/cuda/sampling_params.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/token_bitmask.h"

namespace seqboat::cuda {
namespace {

size_t AlignUp(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

size_t TokensBytes(int m) {
  return AlignUp(static_cast<size_t>(m) * sizeof(int32_t));
}

}  // namespace

absl::StatusOr<SampleRowsPlan> PlanSampleRows(const SampleRow* rows, int m) {
  SampleRowsPlan plan;
  for (int j = 0; j < m; ++j) {
    const SampleRow& r = rows[j];
    if (r.seen_offset < 0 || r.seen_count < 0 || r.counted_offset < 0 ||
        r.counted_count < 0 || r.suppressed_offset < 0 ||
        r.suppressed_count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample row ", j, " has a negative seen range"));
    }
    plan.seen = std::max(plan.seen, static_cast<size_t>(r.seen_offset) +
                                        static_cast<size_t>(r.seen_count));
    plan.seen =
        std::max(plan.seen, static_cast<size_t>(r.counted_offset) +
                                2 * static_cast<size_t>(r.counted_count));
    plan.seen =
        std::max(plan.seen, static_cast<size_t>(r.suppressed_offset) +
                                static_cast<size_t>(r.suppressed_count));
    plan.any_ranked |= SampleRowMayRank(r);
  }
  return plan;
}

absl::StatusOr<SampleRowsPlan> PlanSampleRows(const SampleRowsParams& op) {
  absl::StatusOr<SampleRowsPlan> plan = PlanSampleRows(op.rows, op.m);
  if (!plan.ok()) return plan;
  int64_t mask_rows = 0;
  for (int j = 0; j < op.m; ++j)
    mask_rows = std::max<int64_t>(mask_rows, int64_t{op.rows[j].mask_row} + 1);
  if (mask_rows == 0) return plan;
  if (op.masks == nullptr || op.mask_words < TokenBitmaskWords(op.vocab)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sample rows read masks of ", TokenBitmaskWords(op.vocab),
        " words, but the call has ", op.masks == nullptr ? 0 : op.mask_words));
  }
  plan->mask_words = static_cast<size_t>(mask_rows * op.mask_words);
  return plan;
}

absl::StatusOr<size_t> SampleScratchBytes(int m, int vocab) {
  const size_t workspace = SampleRowsWorkspaceBytes(m, vocab);
  if (workspace == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot sample ", m, " rows of ", vocab, " logits on the device"));
  }
  return TokensBytes(m) + workspace;
}

size_t SampleScratchGrowth(int m, int vocab, size_t need) {
  int rows_cap = 1;
  while (rows_cap < m) rows_cap *= 2;
  const size_t want =
      TokensBytes(rows_cap) + SampleRowsWorkspaceBytes(rows_cap, vocab);
  // rows_cap * vocab past CUB's int range leaves the workspace at 0.
  return std::max(want, need);
}

SampleLaunchParams SampleLaunchFor(const SampleRowsParams& op,
                                   const SampleRowsPlan& plan, void* scratch,
                                   size_t scratch_bytes) {
  auto* bytes = static_cast<uint8_t*>(scratch);
  const size_t tokens_bytes = TokensBytes(op.m);
  SampleLaunchParams p;
  p.logits = op.logits;
  p.m = op.m;
  p.vocab = op.vocab;
  p.logit_scale = op.logit_scale;
  p.rows = op.rows;
  p.seen_ids = op.seen_ids;
  p.pending_tokens = op.pending_tokens;
  p.masks = plan.mask_words > 0 ? op.masks : nullptr;
  p.mask_words = op.mask_words;
  p.any_ranked = plan.any_ranked;
  p.workspace = bytes + tokens_bytes;
  p.workspace_bytes = scratch_bytes - tokens_bytes;
  p.tokens = reinterpret_cast<int32_t*>(bytes);
  return p;
}

}  // namespace seqboat::cuda
