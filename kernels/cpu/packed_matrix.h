// A weight matrix as the CPU GEMM reads it: packed once at load into panels of
// kPanel output rows, in the weight type it is kept in (fp32, bf16, fp16, or
// int8 with one fp32 scale per output row).
//
// Panel p holds rows [16p, 16p + 16) column by column: element (r, c) is at
// panel r / 16, offset c * 16 + r % 16. The micro-kernel then streams one
// panel linearly, 16 outputs' weights per column, and no call re-packs (what
// makes a BLAS sgemm pay at decode batch sizes). Rows past `rows` in the last
// panel are zero, with scale 0.
//
// 16-bit types round to nearest even (as torch's .to() and the CUDA backend's
// upload); int8 is symmetric per row: scale = max|w| / 127, q = round(w /
// scale). Widening happens in registers, accumulation is fp32.
#ifndef SEQBOAT_KERNELS_CPU_PACKED_MATRIX_H_
#define SEQBOAT_KERNELS_CPU_PACKED_MATRIX_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace seqboat::cpu {

enum class WeightType { kF32, kBf16, kF16, kInt8 };

const char* WeightTypeName(WeightType type);
// "fp32" (or "f32"), "bf16", "fp16" (or "f16"), "int8".
absl::StatusOr<WeightType> ParseWeightType(absl::string_view name);
size_t ElementBytes(WeightType type);

inline constexpr int kPanel = 16;

class PackedMatrix {
 public:
  // InvalidArgument for an int8 row holding a non-finite value (it has no
  // scale), ResourceExhausted when memory runs out.
  static absl::StatusOr<std::unique_ptr<PackedMatrix>> Pack(const float* host,
                                                            int64_t rows,
                                                            int64_t cols,
                                                            WeightType type);

  WeightType type() const { return type_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t panels() const { return (rows_ + kPanel - 1) / kPanel; }
  // First byte of panel p: cols * kPanel elements.
  const void* panel(int64_t p) const {
    return data_.get() + p * cols_ * kPanel * ElementBytes(type_);
  }
  // int8: one scale per row, padded to whole panels; null otherwise.
  const float* scales() const { return scales_.get(); }
  // Memory the matrix holds.
  size_t bytes() const;

  // out[c] = scale * W[r, c] as the kernels see it (widened, dequantized).
  void ReadRow(int64_t r, float scale, float* out) const;

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };

  PackedMatrix() = default;

  WeightType type_ = WeightType::kF32;
  int64_t rows_ = 0, cols_ = 0;
  std::unique_ptr<uint8_t[], FreeDeleter> data_;
  std::unique_ptr<float[], FreeDeleter> scales_;
};

}  // namespace seqboat::cpu

#endif  // SEQBOAT_KERNELS_CPU_PACKED_MATRIX_H_
