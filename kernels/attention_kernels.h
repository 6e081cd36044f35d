// Launchers of the sink + rolling-window attention kernels
// (attention_kernels.cu). Key set, cache positions, slot layout and RoPE come
// from engine/backend/attention_math.h; these kernels add indexing, memory,
// reductions and launch. Pointers are device memory; every launcher enqueues
// on `stream` and returns at once.
#ifndef SEQBOAT_KERNELS_ATTENTION_KERNELS_H_
#define SEQBOAT_KERNELS_ATTENTION_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

namespace seqboat::cuda {

// Same layout as seqboat::Segment (backend.h, which nvcc cannot include):
// the staged segment array is read through this type.
struct SinkSegment {
  int32_t slot;
  int32_t start;
  int32_t len;
};

// One unit of work: row `i` of segment `seg`. The host lists one item per
// segment row and one (i = 0) per zero-length segment, so a padded decode
// batch always has one item per segment; items with i >= len do nothing.
struct SinkRow {
  int32_t seg;
  int32_t i;
};

// Largest head_dim the kernels handle.
constexpr int kSinkMaxHeadDim = 512;

// How SinkAttention spreads each (row, KV head) over blocks. Depends only on
// host-known sizes, never on a slot's token count.
struct SinkAttentionPlan {
  // Key-range parts per (row, head); > 1 writes partial softmax states to
  // the workspace and a combine kernel finishes them.
  int splits = 1;
  int64_t keys_per_split = 1;
  // fp32 workspace the split path needs (0 when splits == 1).
  int64_t workspace_floats = 0;
};
// nitems: SinkRow items; every query sees at most sinks + window + 1 keys.
SinkAttentionPlan PlanSinkAttention(int nitems, int n_heads, int n_kv_heads,
                                    int head_dim, int sinks, int window);

// out[row, h, :] for every item of a non-empty segment; other rows of `out`
// are left alone. The cache is only read (counts included).
struct SinkAttentionParams {
  const SinkSegment* segs = nullptr;
  const SinkRow* items = nullptr;
  int nitems = 0;
  const float* q = nullptr;  // [n, H_q * d], row stride ldq, un-rotated
  int ldq = 0;
  const float* k = nullptr;  // [n, H_kv * d], row stride ldk, un-rotated
  int ldk = 0;
  const float* v = nullptr;
  int ldv = 0;
  const void* cache = nullptr;  // slot s at cache + s * slot_bytes
  int64_t slot_bytes = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // 1 .. kSinkMaxHeadDim; even with RoPE
  int sinks = 0;
  int window = 0;
  float scale = 1.0f;
  const float* rope_cos = nullptr;  // [S + W + 1, d/2] or null (no RoPE)
  const float* rope_sin = nullptr;
  float* out = nullptr;  // [n, H_q * d]
  // From PlanSinkAttention; workspace of plan.workspace_floats when split.
  int splits = 1;
  int64_t keys_per_split = 1;
  float* workspace = nullptr;
};
void LaunchSinkAttention(const SinkAttentionParams& p, cudaStream_t stream);

// Stores the k, v rows of each non-empty segment that stay cached, then
// advances each such slot's count by the segment length (two kernels, so
// every store reads the count before it moves). Zero-length segments touch
// nothing; non-empty segments must have distinct slots.
struct SinkAppendParams {
  const SinkSegment* segs = nullptr;
  int nsegs = 0;
  const SinkRow* items = nullptr;
  int nitems = 0;
  const float* k = nullptr;
  int ldk = 0;
  const float* v = nullptr;
  int ldv = 0;
  void* cache = nullptr;
  int64_t slot_bytes = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int sinks = 0;
  int window = 0;
};
void LaunchSinkCacheAppend(const SinkAppendParams& p, cudaStream_t stream);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_ATTENTION_KERNELS_H_
