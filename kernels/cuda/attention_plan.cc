#include "kernels/cuda/attention_plan.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace seqboat::cuda {

std::vector<SinkRow> SinkWorkItems(const Segment* segs, int nsegs) {
  std::vector<SinkRow> items;
  for (int s = 0; s < nsegs; ++s) {
    const int rows = std::max(segs[s].len, 1);
    for (int i = 0; i < rows; ++i) items.push_back({s, i});
  }
  return items;
}

absl::StatusOr<SinkWork> PlanSinkAttentionWork(const SinkAttentionParams& p,
                                               const SinkRow* items, int nitems,
                                               int64_t* workspace_floats) {
  const SinkCacheDims& dims = p.dims;
  // RoPE rotates pairs (i, i + d/2), so it needs an even head_dim.
  if (dims.head_dim < 1 || dims.head_dim > kSinkMaxHeadDim ||
      (p.rope_cos != nullptr && dims.head_dim % 2 != 0) ||
      dims.n_kv_heads < 1 || dims.n_heads % dims.n_kv_heads != 0) {
    return absl::UnimplementedError(absl::StrCat(
        "CUDA SinkAttention: head_dim ", dims.head_dim, " (at most ",
        kSinkMaxHeadDim, ", even with RoPE), ", dims.n_heads,
        " query heads over ", dims.n_kv_heads, " KV heads"));
  }
  const SinkAttentionPlan plan =
      PlanSinkAttention(nitems, dims.n_heads, dims.n_kv_heads, dims.head_dim,
                        dims.sinks, dims.window);
  SinkWork work;
  work.items = items;
  work.nitems = nitems;
  work.splits = plan.splits;
  work.keys_per_split = plan.keys_per_split;
  *workspace_floats = plan.workspace_floats;
  return work;
}

SinkWork PlanSinkAppendWork(const Segment* segs, int nsegs,
                            const SinkRow* items, int nitems) {
  SinkWork work;
  work.items = items;
  work.nitems = nitems;
  work.one_row_per_segment = AllDecodeRows(segs, nsegs);
  return work;
}

}  // namespace seqboat::cuda
