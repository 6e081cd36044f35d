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

  // Every op, one .cc per family: dense ops in cpu_backend.cc, ffn_ops.cc
  // (mlp, moe), mamba_ops.cc, mamba2_ops.cc, attention_ops.cc,
  // seqboat_ops.cc, s4d_ops.cc.
  SEQBOAT_BACKEND_OPS(SEQBOAT_OVERRIDE_BACKEND_OP)

  // The host Sampler over rows already in host memory (sampling_ops.cc).
  // SamplesOnDevice stays false: the engine samples these logits itself,
  // with logprobs when asked; this is the reference the GPU is held to.
  // Its penalty table (SampleRowsParams::table) is host memory.
  absl::Status SampleRows(const SampleRowsParams& p) override;

 private:
  absl::StatusOr<Matrix> UploadAs(const float* host, int64_t rows, int64_t cols,
                                  WeightType type);
  // A Matrix's data on this backend is the PackedMatrix it names.
  static const PackedMatrix& Packed(const Matrix& m) {
    return *static_cast<const PackedMatrix*>(m.data);
  }

  const WeightType weights_;
  const Isa isa_;
  std::vector<DeviceBuffer> owned_;     // uploaded vectors
  std::vector<int32_t> penalty_table_;  // SampleRows' persistent lists
  std::vector<float> scaled_rows_;      // Gemm's x wᵀ + b before a scaled add
  std::vector<std::unique_ptr<PackedMatrix>> matrices_;
  int64_t weight_bytes_ = 0;
};

}  // namespace seqboat::cpu

#endif  // SEQBOAT_KERNELS_CPU_CPU_BACKEND_IMPL_H_
