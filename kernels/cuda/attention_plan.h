// Host-side planning of the sink-attention ops, shared by the CUDA backend
// (attention_ops.cc) and the emulation tests (kernels/emu), so that the tests
// run the production work items and key splits. Pure host code: no CUDA
// runtime call; PlanSinkAttention comes from whichever build of
// attention_kernels.cu the binary links (nvcc's or the emulation's).
#ifndef SEQBOAT_KERNELS_CUDA_ATTENTION_PLAN_H_
#define SEQBOAT_KERNELS_CUDA_ATTENTION_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/attention_params.h"
#include "kernels/cuda/attention_kernels.h"

namespace seqboat::cuda {

// One item per segment row, and one per zero-length segment: a padded decode
// batch then stages the same sizes however many of its rows are real, so its
// recording replays.
std::vector<SinkRow> SinkWorkItems(const Segment* segs, int nsegs);

// SinkAttention's work over `nitems` staged items (> 0), with the key splits
// planned from host-known sizes; Unimplemented for head sizes the kernels do
// not handle. The caller provides `workspace_floats` of workspace (0: none)
// at the result's `workspace`.
absl::StatusOr<SinkWork> PlanSinkAttentionWork(const SinkAttentionParams& p,
                                               const SinkRow* items, int nitems,
                                               int64_t* workspace_floats);

// SinkCacheAppend's work over `nitems` staged items, planned from the host
// segments they were listed from.
SinkWork PlanSinkAppendWork(const Segment* segs, int nsegs,
                            const SinkRow* items, int nitems);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_ATTENTION_PLAN_H_
