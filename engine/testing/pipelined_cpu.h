// The CPU backend dressed as a device that pipelines steps
// (Backend::PipelinesSteps): it samples "on the device" with the host
// Sampler, keeps each launch's tokens in memory of its own for the next
// step's fed rows, and hands them to the host only at WaitSampledTokens.
// Steps still run one at a time, but the engine drives them through its
// overlapped loop, so tests can hold that loop's output to the synchronous
// one's on real models. Slot copies off the op stream (CopyToHostAsync,
// CopyToDeviceAsync) happen late, as a device's would: a copy is made once a
// step was launched after it and CopyDone found it first in line twice (or
// sixteen times, when no step comes), or at WaitCopy, from whatever memory
// then holds, so a step let onto a slot before its copy was done changes
// what is copied.
#ifndef SEQBOAT_ENGINE_TESTING_PIPELINED_CPU_H_
#define SEQBOAT_ENGINE_TESTING_PIPELINED_CPU_H_

#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/testing/forwarding_backend.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {

class PipelinedCpu : public ForwardingBackend {
 public:
  PipelinedCpu() : ForwardingBackend(MakeCpuBackend(1)) {}

  std::string name() const override { return "cpu-pipelined"; }
  bool SamplesOnDevice() const override { return true; }
  bool PipelinesSteps() const override { return true; }

  absl::Status LaunchSampleRows(const SampleRowsParams& p) override {
    ++launches_;
    for (int j = 0; j < p.m; ++j)
      rows_with_pending_ += p.rows[j].pending_from >= 0;
    if (outstanding_.size() >= 2) {
      return absl::FailedPreconditionError("a third launch outstanding");
    }
    // A new buffer each launch: the step after reads this one while the
    // host has not yet read the one before.
    tokens_.emplace_back(static_cast<size_t>(p.m));
    SampleRowsParams device = p;
    device.tokens = tokens_.back().data();
    if (absl::Status s = inner().SampleRows(device); !s.ok()) return s;
    outstanding_.push_back({p.tokens, &tokens_.back()});
    while (tokens_.size() > 3) tokens_.pop_front();
    return absl::OkStatus();
  }

  absl::Status WaitSampledTokens() override {
    if (outstanding_.empty()) {
      return absl::FailedPreconditionError("no launch to wait for");
    }
    const Outstanding o = outstanding_.front();
    outstanding_.pop_front();
    std::memcpy(o.host, o.device->data(), o.device->size() * sizeof(int32_t));
    return absl::OkStatus();
  }

  const int32_t* SampledTokens() const override {
    return tokens_.empty() ? nullptr : tokens_.back().data();
  }

  CopyTicket CopyToHostAsync(void* dst, const void* src,
                             size_t bytes) override {
    return Defer(dst, src, bytes);
  }
  CopyTicket CopyToDeviceAsync(void* dst, const void* src,
                               size_t bytes) override {
    return Defer(dst, src, bytes);
  }
  bool CopyDone(CopyTicket ticket) override {
    if (ticket > done_ && !copies_.empty()) {
      Copy& c = copies_.front();
      ++c.asked;
      if ((launches_ > c.launches_at && c.asked >= 2) || c.asked >= 16) {
        Finish();
      }
    }
    return ticket <= done_;
  }
  void WaitCopy(CopyTicket ticket) override {
    while (ticket > done_ && !copies_.empty()) Finish();
  }

  int64_t launches() const { return launches_; }
  // Rows that ran ahead of a pending token their penalties count.
  int64_t rows_with_pending() const { return rows_with_pending_; }
  int64_t deferred_copies() const { return last_ticket_; }

 private:
  struct Outstanding {
    int32_t* host;
    const std::vector<int32_t>* device;
  };
  struct Copy {
    CopyTicket ticket;
    void* dst;
    const void* src;
    size_t bytes;
    int64_t launches_at;
    int asked = 0;
  };
  CopyTicket Defer(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return 0;
    copies_.push_back({++last_ticket_, dst, src, bytes, launches_});
    return last_ticket_;
  }
  void Finish() {
    const Copy& c = copies_.front();
    std::memcpy(c.dst, c.src, c.bytes);
    done_ = c.ticket;
    copies_.pop_front();
  }
  std::deque<Copy> copies_;
  CopyTicket last_ticket_ = 0;
  CopyTicket done_ = 0;
  std::deque<std::vector<int32_t>> tokens_;
  std::deque<Outstanding> outstanding_;
  int64_t launches_ = 0;
  int64_t rows_with_pending_ = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TESTING_PIPELINED_CPU_H_
