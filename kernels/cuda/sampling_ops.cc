// Sampling on the GPU: stage the rows and their penalised ids, launch the
// sampling kernels on the step's logits, read back one token per row. The
// rows' checks, the scratch's sizes and the launcher parameters come from
// sampling_params, which the emulation tests share.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/sampling_kernels.h"
#include "kernels/cuda/sampling_params.h"

namespace seqboat::cuda {

absl::Status CudaBackend::SampleRows(const SampleRowsParams& op) {
  RETURN_IF_ERROR(LaunchSampleRows(op));
  return WaitSampledTokens();
}

absl::Status CudaBackend::LaunchSampleRows(const SampleRowsParams& op) {
  const int m = op.m, vocab = op.vocab;
  if (m <= 0) {
    outstanding_.push_back({0, op.tokens, 0});
    return absl::OkStatus();
  }
  if (capturing_ || replaying_) {
    return absl::FailedPreconditionError(
        "SampleRows inside a captured step (it reads back to the host)");
  }
  if (static_cast<size_t>(m) > kMaxSampledRows || outstanding_.size() >= 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("SampleRows of ", m, " rows with ", outstanding_.size(),
                     " launches outstanding"));
  }
  const absl::StatusOr<SampleRowsPlan> plan = PlanSampleRows(op);
  if (!plan.ok()) return plan.status();
  const size_t seen = plan->seen;

  const absl::StatusOr<size_t> need = SampleScratchBytes(m, vocab);
  if (!need.ok()) return need.status();
  if (*need > sample_scratch_bytes_) {
    // Freeing the old scratch waits for the device, so a launch in flight
    // still has it.
    const size_t want = SampleScratchGrowth(m, vocab, *need);
    sample_scratch_.reset();
    sample_scratch_bytes_ = 0;
    auto buf = Alloc(want);
    if (!buf.ok()) return buf.status();
    sample_scratch_ = *buf;
    sample_scratch_bytes_ = want;
  }

  // The ids of long contexts can outgrow the staging buffer; they then take
  // a buffer of their own.
  const int32_t* dev_seen = nullptr;
  const size_t seen_bytes = seen * sizeof(int32_t);
  if (seen_bytes > 0 && seen_bytes <= staging().capacity() / 4) {
    dev_seen = Stage(op.seen_ids, seen);
  } else if (seen_bytes > 0) {
    if (seen_bytes > sample_seen_bytes_) {
      sample_seen_.reset();
      sample_seen_bytes_ = 0;
      auto buf = Alloc(seen_bytes * 2);
      if (!buf.ok()) return buf.status();
      sample_seen_ = *buf;
      sample_seen_bytes_ = seen_bytes * 2;
    }
    CopyToDevice(sample_seen_.get(), op.seen_ids, seen_bytes);
    dev_seen = static_cast<const int32_t*>(sample_seen_.get());
  }

  // Constrained rows' masks (4 KiB a row at 32k ids, 31 KiB at 248k) go
  // the same way.
  const uint32_t* dev_masks = nullptr;
  const size_t mask_bytes = plan->mask_words * sizeof(uint32_t);
  if (mask_bytes > 0 && mask_bytes <= staging().capacity() / 4) {
    dev_masks = Stage(op.masks, plan->mask_words);
    if (dev_masks == nullptr) return TakeError();
  } else if (mask_bytes > 0) {
    if (mask_bytes > sample_masks_bytes_) {
      sample_masks_.reset();
      sample_masks_bytes_ = 0;
      auto buf = Alloc(mask_bytes * 2);
      if (!buf.ok()) return buf.status();
      sample_masks_ = *buf;
      sample_masks_bytes_ = mask_bytes * 2;
    }
    CopyToDevice(sample_masks_.get(), op.masks, mask_bytes);
    dev_masks = static_cast<const uint32_t*>(sample_masks_.get());
  }

  SampleRowsParams dev = op;
  dev.rows = Stage(op.rows, static_cast<size_t>(m));
  if (dev.rows == nullptr) return TakeError();
  dev.seen_ids = dev_seen;
  dev.masks = dev_masks;
  const SampleLaunchParams p =
      SampleLaunchFor(dev, *plan, sample_scratch_.get(), sample_scratch_bytes_);
  Check(cuda::LaunchSampleRows(p, stream_), "SampleRows");
  // The tokens where the next step's embedding reads its fed ids, and on
  // their way to the host; the step's staging half is done with.
  const size_t bytes = static_cast<size_t>(m) * sizeof(int32_t);
  const int buffer = static_cast<int>(launches_++ % 2);
  Check(cudaMemcpyAsync(sampled_, p.tokens, bytes, cudaMemcpyDeviceToDevice,
                        stream_),
        "cudaMemcpyAsync (sampled tokens)");
  Check(cudaMemcpyAsync(sampled_host_[buffer], sampled_, bytes,
                        cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (sampled tokens to the host)");
  Check(cudaEventRecord(sampled_done_[buffer], stream_), "cudaEventRecord");
  CloseEpoch();
  outstanding_.push_back({buffer, op.tokens, m});
  return TakeError();
}

absl::Status CudaBackend::WaitSampledTokens() {
  if (outstanding_.empty()) {
    return absl::FailedPreconditionError("no SampleRows launch to wait for");
  }
  const Outstanding o = outstanding_.front();
  outstanding_.pop_front();
  if (o.m > 0) {
    Check(cudaEventSynchronize(sampled_done_[o.buffer]),
          "cudaEventSynchronize (sampled tokens)");
    std::memcpy(o.host, sampled_host_[o.buffer],
                static_cast<size_t>(o.m) * sizeof(int32_t));
  }
  return TakeError();
}

}  // namespace seqboat::cuda
