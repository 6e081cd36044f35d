#include "kernels/attention_plan.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace seqboat::cuda {

static_assert(sizeof(SinkSegment) == sizeof(Segment) &&
                  offsetof(SinkSegment, slot) == offsetof(Segment, slot) &&
                  offsetof(SinkSegment, start) == offsetof(Segment, start) &&
                  offsetof(SinkSegment, len) == offsetof(Segment, len),
              "staged Segments are read as SinkSegments");

namespace {

// The fields both launches take alike: the new keys and values, the cache
// and its geometry.
template <typename Params, typename Cache>
void SetKeysAndCache(const float* k, int ldk, const float* v, int ldv,
                     Cache* cache, int64_t slot_bytes,
                     const SinkCacheDims& dims, Params* p) {
  p->k = k;
  p->ldk = ldk;
  p->v = v;
  p->ldv = ldv;
  p->cache = cache;
  p->slot_bytes = slot_bytes;
  p->n_kv_heads = dims.n_kv_heads;
  p->head_dim = dims.head_dim;
  p->sinks = dims.sinks;
  p->window = dims.window;
}

}  // namespace

std::vector<SinkRow> SinkWorkItems(const Segment* segs, int nsegs) {
  std::vector<SinkRow> items;
  for (int s = 0; s < nsegs; ++s) {
    const int rows = std::max(segs[s].len, 1);
    for (int i = 0; i < rows; ++i) items.push_back({s, i});
  }
  return items;
}

absl::StatusOr<SinkAttentionLaunch> PlanSinkAttentionLaunch(
    const Segment* staged_segs, const SinkRow* staged_items, int nitems,
    const float* q, int ldq, const float* k, int ldk, const float* v, int ldv,
    const void* cache, int64_t slot_bytes, const SinkCacheDims& dims,
    const float* rope_cos, const float* rope_sin, float* out) {
  // RoPE rotates pairs (i, i + d/2), so it needs an even head_dim.
  if (dims.head_dim < 1 || dims.head_dim > kSinkMaxHeadDim ||
      (rope_cos != nullptr && dims.head_dim % 2 != 0) || dims.n_kv_heads < 1 ||
      dims.n_heads % dims.n_kv_heads != 0) {
    return absl::UnimplementedError(absl::StrCat(
        "CUDA SinkAttention: head_dim ", dims.head_dim, " (at most ",
        kSinkMaxHeadDim, ", even with RoPE), ", dims.n_heads,
        " query heads over ", dims.n_kv_heads, " KV heads"));
  }
  const SinkAttentionPlan plan =
      PlanSinkAttention(nitems, dims.n_heads, dims.n_kv_heads, dims.head_dim,
                        dims.sinks, dims.window);
  SinkAttentionLaunch launch;
  launch.workspace_floats = plan.workspace_floats;
  SinkAttentionParams& p = launch.params;
  p.segs = reinterpret_cast<const SinkSegment*>(staged_segs);
  p.items = staged_items;
  p.nitems = nitems;
  p.q = q;
  p.ldq = ldq;
  SetKeysAndCache(k, ldk, v, ldv, cache, slot_bytes, dims, &p);
  p.n_heads = dims.n_heads;
  p.scale = dims.scale;
  p.rope_cos = rope_cos;
  p.rope_sin = rope_cos != nullptr ? rope_sin : nullptr;
  p.out = out;
  p.splits = plan.splits;
  p.keys_per_split = plan.keys_per_split;
  return launch;
}

SinkAppendParams SinkAppendLaunch(const Segment* staged_segs, int nsegs,
                                  const SinkRow* staged_items, int nitems,
                                  const float* k, int ldk, const float* v,
                                  int ldv, void* cache, int64_t slot_bytes,
                                  const SinkCacheDims& dims) {
  SinkAppendParams p;
  p.segs = reinterpret_cast<const SinkSegment*>(staged_segs);
  p.nsegs = nsegs;
  p.items = staged_items;
  p.nitems = nitems;
  SetKeysAndCache(k, ldk, v, ldv, cache, slot_bytes, dims, &p);
  return p;
}

}  // namespace seqboat::cuda
