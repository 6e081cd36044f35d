// Host-side planning of the sink-attention ops, shared by the CUDA backend
// (attention_ops.cc) and the emulation tests (kernels/emu), so that the tests
// run the production work items, split plan and parameters. Pure host code:
// no CUDA runtime call; PlanSinkAttention comes from whichever build of
// attention_kernels.cu the binary links (nvcc's or the emulation's).
//
// Contract: SinkWorkItems(segs) lists the work items; the caller stages segs
// and those items (same order, same sizes) and passes the staged copies,
// whose layout the builders do not read. The builders only fill the
// launcher's params; the caller provides the split workspace.
#ifndef SEQBOAT_KERNELS_ATTENTION_PLAN_H_
#define SEQBOAT_KERNELS_ATTENTION_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "kernels/attention_kernels.h"

namespace seqboat::cuda {

// One item per segment row, and one per zero-length segment: a padded decode
// batch then stages the same sizes however many of its rows are real, so its
// recording replays.
std::vector<SinkRow> SinkWorkItems(const Segment* segs, int nsegs);

struct SinkAttentionLaunch {
  // Everything but `workspace`, which stays null.
  SinkAttentionParams params;
  // fp32 workspace the launch needs at params.workspace (0: none).
  int64_t workspace_floats = 0;
};

// SinkAttention's launch over `nitems` staged items (nitems > 0), with the
// key splits planned from host-known sizes; Unimplemented for head sizes the
// kernels do not handle. Pointers are passed through unread.
absl::StatusOr<SinkAttentionLaunch> PlanSinkAttentionLaunch(
    const Segment* staged_segs, const SinkRow* staged_items, int nitems,
    const float* q, int ldq, const float* k, int ldk, const float* v, int ldv,
    const void* cache, int64_t slot_bytes, const SinkCacheDims& dims,
    const float* rope_cos, const float* rope_sin, float* out);

// SinkCacheAppend's launch over `nitems` staged items.
SinkAppendParams SinkAppendLaunch(const Segment* staged_segs, int nsegs,
                                  const SinkRow* staged_items, int nitems,
                                  const float* k, int ldk, const float* v,
                                  int ldv, void* cache, int64_t slot_bytes,
                                  const SinkCacheDims& dims);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_ATTENTION_PLAN_H_
