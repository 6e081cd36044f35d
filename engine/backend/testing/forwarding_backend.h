// A backend that hands every call to another one. Tests derive from it and
// override the few members they change (claiming device sampling, refusing a
// shape, counting calls) while the inner backend does the work.
#ifndef SEQBOAT_ENGINE_BACKEND_TESTING_FORWARDING_BACKEND_H_
#define SEQBOAT_ENGINE_BACKEND_TESTING_FORWARDING_BACKEND_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"

namespace seqboat {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner)
      : inner_(std::move(inner)) {}

  Backend& inner() { return *inner_; }

  std::string name() const override { return inner_->name(); }
  std::string DeviceName() const override { return inner_->DeviceName(); }
  int64_t FreeBytes() const override { return inner_->FreeBytes(); }
  int64_t WeightBytes() const override { return inner_->WeightBytes(); }
  std::vector<int> CaptureBuckets(int max_slots) const override {
    return inner_->CaptureBuckets(max_slots);
  }
  int MixedStepGraphRows() const override {
    return inner_->MixedStepGraphRows();
  }
  absl::Status RunCaptured(int64_t key,
                           const std::function<absl::Status()>& step) override {
    return inner_->RunCaptured(key, step);
  }
  absl::Status TakeError() override { return inner_->TakeError(); }
  absl::Status Health() const override { return inner_->Health(); }
  absl::Status CheckSeqBoat(const SeqBoatShape& shape) const override {
    return inner_->CheckSeqBoat(shape);
  }
  bool SamplesOnDevice() const override { return inner_->SamplesOnDevice(); }
  absl::Status SampleRows(const SampleRowsParams& p) override {
    return inner_->SampleRows(p);
  }

  HalfFormat GemmInputFormat(const Matrix& w, int n) const override {
    return inner_->GemmInputFormat(w, n);
  }
  bool MemoryIsHost() const override { return inner_->MemoryIsHost(); }
  absl::StatusOr<DeviceBuffer> Alloc(size_t bytes) override {
    return inner_->Alloc(bytes);
  }
  void Zero(void* dst, size_t bytes) override { inner_->Zero(dst, bytes); }
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    inner_->CopyToDevice(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    inner_->CopyToHost(dst, src, bytes);
  }
  void CopyOnDevice(void* dst, const void* src, size_t bytes) override {
    inner_->CopyOnDevice(dst, src, bytes);
  }
  absl::StatusOr<HostBuffer> AllocHost(size_t bytes) override {
    return inner_->AllocHost(bytes);
  }
  CopyTicket CopyToHostAsync(void* dst, const void* src,
                             size_t bytes) override {
    return inner_->CopyToHostAsync(dst, src, bytes);
  }
  CopyTicket CopyToDeviceAsync(void* dst, const void* src,
                               size_t bytes) override {
    return inner_->CopyToDeviceAsync(dst, src, bytes);
  }
  bool CopyDone(CopyTicket ticket) override { return inner_->CopyDone(ticket); }
  void WaitCopy(CopyTicket ticket) override { inner_->WaitCopy(ticket); }
  absl::StatusOr<const float*> UploadVector(const float* host,
                                            int64_t n) override {
    return inner_->UploadVector(host, n);
  }
  absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                      int64_t cols) override {
    return inner_->UploadMatrix(host, rows, cols);
  }
  absl::StatusOr<Matrix> UploadMatrixFp32(const float* host, int64_t rows,
                                          int64_t cols) override {
    return inner_->UploadMatrixFp32(host, rows, cols);
  }
#define SEQBOAT_FORWARD_BACKEND_OP(Name, Params) \
  void Name(const Params& p) override { inner_->Name(p); }
  SEQBOAT_BACKEND_OPS(SEQBOAT_FORWARD_BACKEND_OP)
#undef SEQBOAT_FORWARD_BACKEND_OP

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_TESTING_FORWARDING_BACKEND_H_
