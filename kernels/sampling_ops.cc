// Sampling on the GPU: stage the rows and their penalised ids, launch the
// sampling kernels on the step's logits, read back one token per row.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cuda_backend_impl.h"
#include "kernels/sampling_kernels.h"

namespace seqboat::cuda {
namespace {

size_t AlignUp(size_t bytes) { return (bytes + 255) & ~size_t{255}; }

}  // namespace

absl::Status CudaBackend::SampleRows(const float* logits, int m, int vocab,
                                     float logit_scale, const SampleRow* rows,
                                     const int32_t* seen_ids, int32_t* tokens) {
  if (m <= 0) return absl::OkStatus();
  if (capturing_ || replaying_) {
    return absl::FailedPreconditionError(
        "SampleRows inside a captured step (it reads back to the host)");
  }
  size_t seen = 0;
  bool any_ranked = false;
  for (int j = 0; j < m; ++j) {
    const SampleRow& r = rows[j];
    if (r.seen_offset < 0 || r.seen_count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample row ", j, " has a negative seen range"));
    }
    seen = std::max(seen, static_cast<size_t>(r.seen_offset) +
                              static_cast<size_t>(r.seen_count));
    any_ranked |= SampleRowMayRank(r);
  }

  // Tokens first, then the kernels' workspace. Room for the next power of
  // two of rows, so a batch that grows one sequence at a time reallocates
  // only a few times.
  const size_t need = AlignUp(static_cast<size_t>(m) * sizeof(int32_t)) +
                      SampleRowsWorkspaceBytes(m, vocab);
  if (need == AlignUp(static_cast<size_t>(m) * sizeof(int32_t))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot sample ", m, " rows of ", vocab, " logits on the device"));
  }
  if (need > sample_scratch_bytes_) {
    int rows_cap = 1;
    while (rows_cap < m) rows_cap *= 2;
    size_t want = AlignUp(static_cast<size_t>(rows_cap) * sizeof(int32_t)) +
                  SampleRowsWorkspaceBytes(rows_cap, vocab);
    if (want < need) want = need;  // rows_cap * vocab past CUB's int range
    sample_scratch_.reset();
    sample_scratch_bytes_ = 0;
    auto buf = Alloc(want);
    if (!buf.ok()) return buf.status();
    sample_scratch_ = *buf;
    sample_scratch_bytes_ = want;
  }
  auto* scratch = static_cast<uint8_t*>(sample_scratch_.get());
  auto* dev_tokens = reinterpret_cast<int32_t*>(scratch);
  const size_t tokens_bytes = AlignUp(static_cast<size_t>(m) * sizeof(int32_t));

  // The ids of long contexts can outgrow the staging buffer; they then take
  // a buffer of their own.
  const int32_t* dev_seen = nullptr;
  const size_t seen_bytes = seen * sizeof(int32_t);
  if (seen_bytes > 0 && seen_bytes <= staging_.capacity() / 4) {
    dev_seen = Stage(seen_ids, seen);
  } else if (seen_bytes > 0) {
    if (seen_bytes > sample_seen_bytes_) {
      sample_seen_.reset();
      sample_seen_bytes_ = 0;
      auto buf = Alloc(seen_bytes * 2);
      if (!buf.ok()) return buf.status();
      sample_seen_ = *buf;
      sample_seen_bytes_ = seen_bytes * 2;
    }
    CopyToDevice(sample_seen_.get(), seen_ids, seen_bytes);
    dev_seen = static_cast<const int32_t*>(sample_seen_.get());
  }

  SampleRowsParams p;
  p.logits = logits;
  p.m = m;
  p.vocab = vocab;
  p.logit_scale = logit_scale;
  p.rows = Stage(rows, static_cast<size_t>(m));
  if (p.rows == nullptr) return TakeError();
  p.seen_ids = dev_seen;
  p.any_ranked = any_ranked;
  p.workspace = scratch + tokens_bytes;
  p.workspace_bytes = sample_scratch_bytes_ - tokens_bytes;
  p.tokens = dev_tokens;
  Check(LaunchSampleRows(p, stream_), "SampleRows");
  // Waits for the kernels and rewinds the staging buffer.
  CopyToHost(tokens, dev_tokens, static_cast<size_t>(m) * sizeof(int32_t));
  return TakeError();
}

}  // namespace seqboat::cuda
