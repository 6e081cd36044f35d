// Sink + rolling-window attention ops: stage the segments and their work
// items, plan the key splits from host-known sizes (attention_plan.h),
// launch.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/cuda_backend_impl.h"

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

void CudaBackend::SinkAttention(const SinkAttentionParams& p) {
  const StagedSinkRows rows = StageSinkRows(*this, p.segs, p.nsegs);
  if (!launching() || !rows.ready()) return;
  int64_t workspace_floats = 0;
  absl::StatusOr<SinkWork> work =
      PlanSinkAttentionWork(p, rows.items, rows.count, &workspace_floats);
  if (!work.ok()) {
    if (error_.ok()) error_ = work.status();
    return;
  }
  if (workspace_floats > 0) {
    const size_t bytes = static_cast<size_t>(workspace_floats) * sizeof(float);
    work->workspace = static_cast<float*>(
        Scratch(kSinkAttentionSplits, bytes, "SinkAttention split"));
    if (work->workspace == nullptr) return;
  }
  SinkAttentionParams dev = p;
  dev.segs = rows.segs;
  LaunchSinkAttention(dev, *work, queue());
  CheckLaunch("SinkAttention");
}

void CudaBackend::SinkCacheAppend(const SinkAppendParams& p) {
  const StagedSinkRows rows = StageSinkRows(*this, p.segs, p.nsegs);
  if (!launching() || !rows.ready()) return;
  SinkAppendParams dev = p;
  dev.segs = rows.segs;
  // The choice holds on replay: captured steps are decode steps.
  LaunchSinkCacheAppend(
      dev, PlanSinkAppendWork(p.segs, p.nsegs, rows.items, rows.count),
      queue());
  CheckLaunch("SinkCacheAppend");
}

}  // namespace seqboat::cuda
