// Launchers of the sink + rolling-window attention kernels
// (attention_kernels.cu). Key set, cache positions, slot layout and RoPE come
// from engine/backend/attention_math.h; these kernels add indexing, memory,
// reductions and launch. Pointers are device memory; every launcher enqueues
// on `queue` and returns at once.
#ifndef SEQBOAT_KERNELS_CUDA_ATTENTION_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_ATTENTION_KERNELS_H_

#include <stdint.h>

#include "engine/backend/attention_params.h"
#include "kernels/cuda/launch_queue.h"

namespace seqboat::cuda {

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

// The rows the launches spread over blocks (SinkWorkItems, staged) and, for
// SinkAttention, the key splits from PlanSinkAttention.
struct SinkWork {
  const SinkRow* items = nullptr;
  int nitems = 0;
  int splits = 1;
  int64_t keys_per_split = 1;
  float* workspace = nullptr;  // plan.workspace_floats when split
  // No segment has more than one row (AllDecodeRows on the host segments):
  // each item is its slot's only one, so the append is one kernel.
  bool one_row_per_segment = false;
};

// out[row, h, :] for every item of a non-empty segment; other rows of `out`
// are left alone.
void LaunchSinkAttention(const SinkAttentionParams& p, const SinkWork& work,
                         LaunchQueue queue);

// Stores the k, v rows of each non-empty segment that stay cached, then
// advances each such slot's count by the segment length: two kernels, so
// that every store reads the count before it moves, except where
// work.one_row_per_segment lets each slot's one block do both.
void LaunchSinkCacheAppend(const SinkAppendParams& p, const SinkWork& work,
                           LaunchQueue queue);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_ATTENTION_KERNELS_H_
