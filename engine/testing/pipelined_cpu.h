// The CPU backend dressed as a device that pipelines steps
// (Backend::PipelinesSteps): it samples "on the device" with the host
// Sampler, keeps each launch's tokens in memory of its own for the next
// step's fed rows, and hands them to the host only at WaitSampledTokens.
// Steps still run one at a time, but the engine drives them through its
// overlapped loop, so tests can hold that loop's output to the synchronous
// one's on real models.
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

  int64_t launches() const { return launches_; }

 private:
  struct Outstanding {
    int32_t* host;
    const std::vector<int32_t>* device;
  };
  std::deque<std::vector<int32_t>> tokens_;
  std::deque<Outstanding> outstanding_;
  int64_t launches_ = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TESTING_PIPELINED_CPU_H_
