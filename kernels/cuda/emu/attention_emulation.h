// attention_ops.cc's planning and launch of SinkAttention on host memory,
// the emulation's device memory, for the tests that run the attention
// kernels emulated: the split keys' workspace is this call's, filled with
// NaN so that a partial the combine reads but no block wrote shows.
#ifndef SEQBOAT_KERNELS_CUDA_EMU_ATTENTION_EMULATION_H_
#define SEQBOAT_KERNELS_CUDA_EMU_ATTENTION_EMULATION_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/attention_params.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/launch_queue.h"

namespace seqboat::emu_test {

// The key splits the call planned (0: no rows, nothing launched), or the
// planning's error.
inline absl::StatusOr<int> EmulateSinkAttention(const SinkAttentionParams& p,
                                                cuda::LaunchQueue queue) {
  const std::vector<cuda::SinkRow> items = cuda::SinkWorkItems(p.segs, p.nsegs);
  if (items.empty()) return 0;
  int64_t workspace_floats = 0;
  absl::StatusOr<cuda::SinkWork> work = cuda::PlanSinkAttentionWork(
      p, items.data(), static_cast<int>(items.size()), &workspace_floats);
  if (!work.ok()) return work.status();
  std::vector<float> workspace(workspace_floats, NAN);
  if (!workspace.empty()) work->workspace = workspace.data();
  cuda::LaunchSinkAttention(p, *work, queue);
  return work->splits;
}

}  // namespace seqboat::emu_test

#endif  // SEQBOAT_KERNELS_CUDA_EMU_ATTENTION_EMULATION_H_
