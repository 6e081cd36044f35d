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

void CudaBackend::SinkAttention(const Segment* segs, int nsegs, const float* q,
                                int ldq, const float* k, int ldk,
                                const float* v, int ldv, const void* cache,
                                int64_t slot_bytes, const SinkCacheDims& dims,
                                const float* rope_cos, const float* rope_sin,
                                float* out) {
  const Segment* dev_segs = Stage(segs, nsegs);
  const std::vector<SinkRow> items = SinkWorkItems(segs, nsegs);
  const SinkRow* dev_items = Stage(items.data(), items.size());
  // A null copy means staging failed, and that failure is already recorded.
  if (!launching() || items.empty() || dev_segs == nullptr ||
      dev_items == nullptr) {
    return;
  }
  absl::StatusOr<SinkAttentionLaunch> launch = PlanSinkAttentionLaunch(
      dev_segs, dev_items, static_cast<int>(items.size()), q, ldq, k, ldk, v,
      ldv, cache, slot_bytes, dims, rope_cos, rope_sin, out);
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
  const Segment* dev_segs = Stage(segs, nsegs);
  const std::vector<SinkRow> items = SinkWorkItems(segs, nsegs);
  const SinkRow* dev_items = Stage(items.data(), items.size());
  if (!launching() || items.empty() || dev_segs == nullptr ||
      dev_items == nullptr) {
    return;
  }
  LaunchSinkCacheAppend(SinkAppendLaunch(dev_segs, nsegs, dev_items,
                                         static_cast<int>(items.size()), k, ldk,
                                         v, ldv, cache, slot_bytes, dims),
                        stream_);
  CheckLaunch("SinkCacheAppend");
}

}  // namespace seqboat::cuda
