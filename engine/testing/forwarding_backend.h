// A backend that hands every call to another one. Tests derive from it and
// override the few members they change (claiming device sampling, refusing a
// shape, counting calls) while the inner backend does the work.
#ifndef SEQBOAT_ENGINE_TESTING_FORWARDING_BACKEND_H_
#define SEQBOAT_ENGINE_TESTING_FORWARDING_BACKEND_H_

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
  absl::Status SampleRows(const float* logits, int m, int vocab,
                          float logit_scale, const SampleRow* rows,
                          const int32_t* seen_ids, int32_t* tokens) override {
    return inner_->SampleRows(logits, m, vocab, logit_scale, rows, seen_ids,
                              tokens);
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
  void Embed(const int32_t* ids, int n, const Matrix& table, float scale,
             float* out) override {
    inner_->Embed(ids, n, table, scale, out);
  }
  void RmsNorm(const float* x, int n, int d, const float* w, float eps,
               float* out) override {
    inner_->RmsNorm(x, n, d, w, eps, out);
  }
  void RmsNormStrided(const float* x, int ldx, int n, int d, const float* w,
                      float eps, float* out, int ldo) override {
    inner_->RmsNormStrided(x, ldx, n, d, w, eps, out, ldo);
  }
  void LayerNorm(const float* x, int n, int d, const float* w, const float* b,
                 float eps, float* out) override {
    inner_->LayerNorm(x, n, d, w, b, eps, out);
  }
  void Gemm(const float* x, int ldx, int n, const Matrix& w, const float* bias,
            float* y, int ldy, bool accumulate) override {
    inner_->Gemm(x, ldx, n, w, bias, y, ldy, accumulate);
  }
  void GatherRows(const float* x, int d, const int32_t* rows, int m,
                  float* out) override {
    inner_->GatherRows(x, d, rows, m, out);
  }
  void MambaConv(const MambaConvParams& p) override { inner_->MambaConv(p); }
  void MambaScan(const MambaScanParams& p) override { inner_->MambaScan(p); }
  void Mamba2Scan(const Mamba2ScanParams& p) override { inner_->Mamba2Scan(p); }
  void GatedRmsNorm(const GatedRmsNormParams& p) override {
    inner_->GatedRmsNorm(p);
  }
  void SinkAttention(const SinkAttentionParams& p) override {
    inner_->SinkAttention(p);
  }
  void SinkCacheAppend(const SinkAppendParams& p) override {
    inner_->SinkCacheAppend(p);
  }
  void SeqBoatEma(const SeqBoatEmaParams& p) override { inner_->SeqBoatEma(p); }
  void SeqBoatRoute(const float* u, int ldu, int n, const float* temperature,
                    float* conf, int32_t* compact, int32_t* active) override {
    inner_->SeqBoatRoute(u, ldu, n, temperature, conf, compact, active);
  }
  void SeqBoatAttend(const SeqBoatAttendParams& p) override {
    inner_->SeqBoatAttend(p);
  }
  void SeqBoatMix(const float* s, const float* g, int ldg, const float* y,
                  const float* conf, const int32_t* compact, int n, int d,
                  float* out) override {
    inner_->SeqBoatMix(s, g, ldg, y, conf, compact, n, d, out);
  }
  void ActivateMul(const float* a, int lda, const float* b, int ldb, int n,
                   int f, Activation act, float* out, int ldo,
                   bool accumulate) override {
    inner_->ActivateMul(a, lda, b, ldb, n, f, act, out, ldo, accumulate);
  }
  void AddBias(float* y, int ldy, int n, int d, const float* v) override {
    inner_->AddBias(y, ldy, n, d, v);
  }
  void MoeRoute(const float* logits, int n, int x, MoeRouting routing,
                int top_k, bool renormalize, int32_t* experts,
                float* gates) override {
    inner_->MoeRoute(logits, n, x, routing, top_k, renormalize, experts, gates);
  }
  void ScatterAddScaled(const float* src, int d, const int32_t* rows,
                        const float* scales, int m, float* dst,
                        int lddst) override {
    inner_->ScatterAddScaled(src, d, rows, scales, m, dst, lddst);
  }
  void S4dScan(const S4dScanParams& p) override { inner_->S4dScan(p); }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TESTING_FORWARDING_BACKEND_H_
