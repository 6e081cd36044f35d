// The CPU backend's class, shared by the files that define its ops: one .cc
// per op family (dense ops here in cpu_backend.cc, mamba_ops.cc, ...), so a
// new layer kind adds a file instead of growing one.
#ifndef SEQBOAT_KERNELS_CPU_CPU_BACKEND_IMPL_H_
#define SEQBOAT_KERNELS_CPU_CPU_BACKEND_IMPL_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/packed_matrix.h"

namespace seqboat::cpu {

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, WeightType weights, Isa isa);

  std::string name() const override { return "cpu"; }
  // "cpu (avx512, bf16 weights)"
  std::string DeviceName() const override;
  int64_t WeightBytes() const override { return weight_bytes_; }

  // Memory (cpu_backend.cc).
  bool MemoryIsHost() const override { return true; }
  absl::StatusOr<DeviceBuffer> Alloc(size_t bytes) override;
  void Zero(void* dst, size_t bytes) override;
  void CopyToDevice(void* dst, const void* host_src, size_t bytes) override;
  void CopyToHost(void* host_dst, const void* src, size_t bytes) override;
  absl::StatusOr<const float*> UploadVector(const float* host,
                                            int64_t n) override;
  absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                      int64_t cols) override;
  absl::StatusOr<Matrix> UploadMatrixFp32(const float* host, int64_t rows,
                                          int64_t cols) override;

  // Dense ops (cpu_backend.cc).
  void Embed(const int32_t* ids, int n, const Matrix& table, float scale,
             float* out) override;
  void RmsNorm(const float* x, int n, int d, const float* w, float eps,
               float* out) override;
  void RmsNormStrided(const float* x, int ldx, int n, int d, const float* w,
                      float eps, float* out, int ldo) override;
  void LayerNorm(const float* x, int n, int d, const float* w, const float* b,
                 float eps, float* out) override;
  void Gemm(const float* x, int ldx, int n, const Matrix& w, const float* bias,
            float* y, int ldy, bool accumulate) override;
  void GatherRows(const float* x, int d, const int32_t* rows, int m,
                  float* out) override;

  // Mamba-1 (mamba_ops.cc).
  void MambaConv(const MambaConvParams& p) override;
  void MambaScan(const MambaScanParams& p) override;

  // Mamba-2 (mamba2_ops.cc).
  void Mamba2Scan(const Mamba2ScanParams& p) override;
  void GatedRmsNorm(const GatedRmsNormParams& p) override;

  // Attention over a sink + rolling-window KV cache (attention_ops.cc).
  void SinkAttention(const SinkAttentionParams& p) override;
  void SinkCacheAppend(const SinkAppendParams& p) override;

  // SeqBoat (seqboat_ops.cc).
  void SeqBoatEma(const SeqBoatEmaParams& p) override;
  void SeqBoatRoute(const float* u, int ldu, int n, const float* temperature,
                    float* conf, int32_t* compact, int32_t* active) override;
  void SeqBoatAttend(const SeqBoatAttendParams& p) override;
  void SeqBoatMix(const float* s, const float* g, int ldg, const float* y,
                  const float* conf, const int32_t* compact, int n, int d,
                  float* out) override;

  // mlp / moe (ffn_ops.cc) and S4D (s4d_ops.cc).
  void ActivateMul(const float* a, int lda, const float* b, int ldb, int n,
                   int f, Activation act, float* out, int ldo,
                   bool accumulate) override;
  void AddBias(float* y, int ldy, int n, int d, const float* v) override;
  void MoeRoute(const float* logits, int n, int x, MoeRouting routing,
                int top_k, bool renormalize, int32_t* experts,
                float* gates) override;
  void ScatterAddScaled(const float* src, int d, const int32_t* rows,
                        const float* scales, int m, float* dst,
                        int lddst) override;
  void S4dScan(const S4dScanParams& p) override;

  // The host Sampler over rows already in host memory (sampling_ops.cc).
  // SamplesOnDevice stays false: the engine samples these logits itself,
  // with logprobs when asked; this is the reference the GPU is held to.
  absl::Status SampleRows(const float* logits, int m, int vocab,
                          float logit_scale, const SampleRow* rows,
                          const int32_t* seen_ids, int32_t* tokens) override;

 private:
  absl::StatusOr<Matrix> UploadAs(const float* host, int64_t rows, int64_t cols,
                                  WeightType type);
  // A Matrix's data on this backend is the PackedMatrix it names.
  static const PackedMatrix& Packed(const Matrix& m) {
    return *static_cast<const PackedMatrix*>(m.data);
  }

  const WeightType weights_;
  const Isa isa_;
  std::vector<DeviceBuffer> owned_;  // uploaded vectors
  std::vector<std::unique_ptr<PackedMatrix>> matrices_;
  int64_t weight_bytes_ = 0;
};

}  // namespace seqboat::cpu

#endif  // SEQBOAT_KERNELS_CPU_CPU_BACKEND_IMPL_H_
