// Sink + rolling-window attention ops: stage the segments and their work
// items, plan the key splits from host-known sizes (attention_plan.h),
// launch.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention_kernels.h"
#include "kernels/attention_plan.h"
#include "kernels/cuda_backend_impl.h"

namespace seqboat::cuda {
namespace {

// The segments and their per-row work items on the device, staged in the
// same order by both ops (a replay compares the staging log).
struct StagedSinkRows {
  const Segment* segs = nullptr;
  const SinkRow* items = nullptr;
  int count = 0;
  // False with no rows, or when staging failed (already recorded).
  bool ready() const {
    return count > 0 && segs != nullptr && items != nullptr;
  }
};

StagedSinkRows StageSinkRows(CudaBackend& be, const Segment* segs, int nsegs) {
  StagedSinkRows rows;
  rows.segs = be.Stage(segs, nsegs);
  const std::vector<SinkRow> items = SinkWorkItems(segs, nsegs);
  rows.items = be.Stage(items.data(), items.size());
  rows.count = static_cast<int>(items.size());
  return rows;
}

}  // namespace

void CudaBackend::SinkAttention(const Segment* segs, int nsegs, const float* q,
                                int ldq, const float* k, int ldk,
                                const float* v, int ldv, const void* cache,
                                int64_t slot_bytes, const SinkCacheDims& dims,
                                const float* rope_cos, const float* rope_sin,
                                float* out) {
  const StagedSinkRows rows = StageSinkRows(*this, segs, nsegs);
  if (!launching() || !rows.ready()) return;
  absl::StatusOr<SinkAttentionLaunch> launch = PlanSinkAttentionLaunch(
      rows.segs, rows.items, rows.count, q, ldq, k, ldk, v, ldv, cache,
      slot_bytes, dims, rope_cos, rope_sin, out);
  if (!launch.ok()) {
    if (error_.ok()) error_ = launch.status();
    return;
  }
  if (launch->workspace_floats > 0) {
    const size_t bytes =
        static_cast<size_t>(launch->workspace_floats) * sizeof(float);
    launch->params.workspace = static_cast<float*>(
        Scratch(kSinkAttentionSplits, bytes, "SinkAttention split"));
    if (launch->params.workspace == nullptr) return;
  }
  LaunchSinkAttention(launch->params, stream_);
  CheckLaunch("SinkAttention");
}

void CudaBackend::SinkCacheAppend(const Segment* segs, int nsegs,
                                  const float* k, int ldk, const float* v,
                                  int ldv, void* cache, int64_t slot_bytes,
                                  const SinkCacheDims& dims) {
  const StagedSinkRows rows = StageSinkRows(*this, segs, nsegs);
  if (!launching() || !rows.ready()) return;
  LaunchSinkCacheAppend(
      SinkAppendLaunch(rows.segs, nsegs, rows.items, rows.count, k, ldk, v, ldv,
                       cache, slot_bytes, dims),
      stream_);
  CheckLaunch("SinkCacheAppend");
}

}  // namespace seqboat::cuda
