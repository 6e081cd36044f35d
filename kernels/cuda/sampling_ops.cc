// Sampling on the GPU: stage the rows and their penalised ids (or patch the
// penalty table the rows index), launch the sampling kernels on the step's
// logits, read back one token per row. The
// rows' checks, the scratch's sizes and the launcher parameters come from
// sampling_params, which the emulation tests share.
#include <algorithm>
#include <cstring>
#include <limits>

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

  // Penalised ids: the call's own flat array, or the backend's penalty
  // table after this call's writes.
  const int32_t* dev_seen = nullptr;
  if (op.table.size > 0) {
    if (seen > static_cast<size_t>(op.table.size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample rows reach ", seen,
                       " ints of a penalty table of ", op.table.size));
    }
    RETURN_IF_ERROR(UpdatePenaltyTable(op.table));
    dev_seen = static_cast<const int32_t*>(penalty_table_.get());
  } else if (seen > 0) {
    dev_seen = UploadSampleIds(op.seen_ids, seen);
    if (dev_seen == nullptr) return TakeError();
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

const int32_t* CudaBackend::UploadSampleIds(const int32_t* host, size_t count) {
  // The ids of long contexts can outgrow the staging buffer; they then take
  // a buffer of their own.
  const size_t bytes = count * sizeof(int32_t);
  if (bytes <= staging().capacity() / 4) return Stage(host, count);
  if (bytes > sample_seen_bytes_) {
    sample_seen_.reset();
    sample_seen_bytes_ = 0;
    auto buf = Alloc(bytes * 2);
    if (!buf.ok()) {
      if (error_.ok()) error_ = buf.status();
      return nullptr;
    }
    sample_seen_ = *std::move(buf);
    sample_seen_bytes_ = bytes * 2;
  }
  CopyToDevice(sample_seen_.get(), host, bytes);
  return static_cast<const int32_t*>(sample_seen_.get());
}

absl::Status CudaBackend::UpdatePenaltyTable(const PenaltyTableUpdate& update) {
  if (update.write_count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(update.write_count, " penalty table writes"));
  }
  if (update.size > penalty_table_ints_) {
    // Doubling keeps regrowth rare; the old table's values come along in
    // stream order, and freeing it waits for the launches that read it.
    const int64_t ints = std::max<int64_t>(
        update.size, std::min<int64_t>(2 * int64_t{penalty_table_ints_},
                                       std::numeric_limits<int32_t>::max()));
    auto buf = Alloc(static_cast<size_t>(ints) * sizeof(int32_t));
    if (!buf.ok()) return buf.status();
    if (penalty_table_ints_ > 0) {
      Check(cudaMemcpyAsync(
                buf->get(), penalty_table_.get(),
                static_cast<size_t>(penalty_table_ints_) * sizeof(int32_t),
                cudaMemcpyDeviceToDevice, stream_),
            "cudaMemcpyAsync (penalty table)");
    }
    penalty_table_ = *std::move(buf);
    penalty_table_ints_ = static_cast<int32_t>(ints);
  }
  if (update.write_count == 0) return TakeError();
  const int32_t* writes = UploadSampleIds(
      update.writes, 2 * static_cast<size_t>(update.write_count));
  if (writes == nullptr) return TakeError();
  Check(LaunchPenaltyTableWrites(static_cast<int32_t*>(penalty_table_.get()),
                                 writes, update.write_count, stream_),
        "penalty table writes");
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
