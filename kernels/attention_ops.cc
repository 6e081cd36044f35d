// Sink + rolling-window attention ops: stage the segments and their work
// items, plan the key splits from host-known sizes, launch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/attention_kernels.h"
#include "kernels/cuda_backend_impl.h"

namespace seqboat::cuda {
namespace {

static_assert(sizeof(SinkSegment) == sizeof(Segment) &&
                  offsetof(SinkSegment, slot) == offsetof(Segment, slot) &&
                  offsetof(SinkSegment, start) == offsetof(Segment, start) &&
                  offsetof(SinkSegment, len) == offsetof(Segment, len),
              "staged Segments are read as SinkSegments");

// One item per segment row, and one per zero-length segment: a padded decode
// batch then stages the same sizes however many of its rows are real, so its
// recording replays.
std::vector<SinkRow> WorkItems(const Segment* segs, int nsegs) {
  std::vector<SinkRow> items;
  for (int s = 0; s < nsegs; ++s) {
    const int rows = std::max(segs[s].len, 1);
    for (int i = 0; i < rows; ++i) items.push_back({s, i});
  }
  return items;
}

}  // namespace

void CudaBackend::SinkAttention(const Segment* segs, int nsegs, const float* q,
                                int ldq, const float* k, int ldk,
                                const float* v, int ldv, const void* cache,
                                int64_t slot_bytes, const SinkCacheDims& dims,
                                const float* rope_cos, const float* rope_sin,
                                float* out) {
  const Segment* dev_segs = Stage(segs, nsegs);
  const std::vector<SinkRow> items = WorkItems(segs, nsegs);
  const SinkRow* dev_items = Stage(items.data(), items.size());
  // A null copy means staging failed, and that failure is already recorded.
  if (!launching() || items.empty() || dev_segs == nullptr ||
      dev_items == nullptr) {
    return;
  }
  // RoPE rotates pairs (i, i + d/2), so it needs an even head_dim.
  if (dims.head_dim < 1 || dims.head_dim > kSinkMaxHeadDim ||
      (rope_cos != nullptr && dims.head_dim % 2 != 0) || dims.n_kv_heads < 1 ||
      dims.n_heads % dims.n_kv_heads != 0) {
    if (error_.ok()) {
      error_ = absl::UnimplementedError(absl::StrCat(
          "CUDA SinkAttention: head_dim ", dims.head_dim, " (at most ",
          kSinkMaxHeadDim, ", even with RoPE), ", dims.n_heads,
          " query heads over ", dims.n_kv_heads, " KV heads"));
    }
    return;
  }
  const int nitems = static_cast<int>(items.size());
  const SinkAttentionPlan plan =
      PlanSinkAttention(nitems, dims.n_heads, dims.n_kv_heads, dims.head_dim,
                        dims.sinks, dims.window);

  float* workspace = nullptr;
  if (plan.workspace_floats > 0) {
    const size_t bytes =
        static_cast<size_t>(plan.workspace_floats) * sizeof(float);
    workspace = static_cast<float*>(
        Scratch(kSinkAttentionSplits, bytes, "SinkAttention split"));
    if (workspace == nullptr) return;
  }

  SinkAttentionParams p;
  p.segs = reinterpret_cast<const SinkSegment*>(dev_segs);
  p.items = dev_items;
  p.nitems = nitems;
  p.q = q;
  p.ldq = ldq;
  p.k = k;
  p.ldk = ldk;
  p.v = v;
  p.ldv = ldv;
  p.cache = cache;
  p.slot_bytes = slot_bytes;
  p.n_heads = dims.n_heads;
  p.n_kv_heads = dims.n_kv_heads;
  p.head_dim = dims.head_dim;
  p.sinks = dims.sinks;
  p.window = dims.window;
  p.scale = dims.scale;
  p.rope_cos = rope_cos;
  p.rope_sin = rope_cos != nullptr ? rope_sin : nullptr;
  p.out = out;
  p.splits = plan.splits;
  p.keys_per_split = plan.keys_per_split;
  p.workspace = workspace;
  LaunchSinkAttention(p, stream_);
  CheckLaunch("SinkAttention");
}

void CudaBackend::SinkCacheAppend(const Segment* segs, int nsegs,
                                  const float* k, int ldk, const float* v,
                                  int ldv, void* cache, int64_t slot_bytes,
                                  const SinkCacheDims& dims) {
  const Segment* dev_segs = Stage(segs, nsegs);
  const std::vector<SinkRow> items = WorkItems(segs, nsegs);
  const SinkRow* dev_items = Stage(items.data(), items.size());
  if (!launching() || items.empty() || dev_segs == nullptr ||
      dev_items == nullptr) {
    return;
  }
  SinkAppendParams p;
  p.segs = reinterpret_cast<const SinkSegment*>(dev_segs);
  p.nsegs = nsegs;
  p.items = dev_items;
  p.nitems = static_cast<int>(items.size());
  p.k = k;
  p.ldk = ldk;
  p.v = v;
  p.ldv = ldv;
  p.cache = cache;
  p.slot_bytes = slot_bytes;
  p.n_kv_heads = dims.n_kv_heads;
  p.head_dim = dims.head_dim;
  p.sinks = dims.sinks;
  p.window = dims.window;
  LaunchSinkCacheAppend(p, stream_);
  CheckLaunch("SinkCacheAppend");
}

}  // namespace seqboat::cuda
