#include "kernels/cpu/packed_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/dtype_convert.h"

namespace seqboat::cpu {
namespace {

constexpr size_t kAlign = 64;

void* AlignedZeroed(size_t bytes) {
  const size_t rounded =
      (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p != nullptr) std::memset(p, 0, rounded);
  return p;
}

}  // namespace

const char* WeightTypeName(WeightType type) {
  switch (type) {
    case WeightType::kF32:
      return "fp32";
    case WeightType::kBf16:
      return "bf16";
    case WeightType::kF16:
      return "fp16";
    case WeightType::kInt8:
      return "int8";
  }
  return "?";
}

absl::StatusOr<WeightType> ParseWeightType(absl::string_view name) {
  if (name == "fp32" || name == "f32") return WeightType::kF32;
  if (name == "bf16") return WeightType::kBf16;
  if (name == "fp16" || name == "f16") return WeightType::kF16;
  if (name == "int8") return WeightType::kInt8;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown CPU weight type '", name, "' (fp32, bf16, fp16 or int8)"));
}

size_t ElementBytes(WeightType type) {
  switch (type) {
    case WeightType::kF32:
      return 4;
    case WeightType::kBf16:
    case WeightType::kF16:
      return 2;
    case WeightType::kInt8:
      return 1;
  }
  return 4;
}

void PackedMatrix::FreeDeleter::operator()(void* p) const { std::free(p); }

absl::StatusOr<std::unique_ptr<PackedMatrix>> PackedMatrix::Pack(
    const float* host, int64_t rows, int64_t cols, WeightType type) {
  std::unique_ptr<PackedMatrix> m(new PackedMatrix());
  m->type_ = type;
  m->rows_ = rows;
  m->cols_ = cols;
  const int64_t padded_rows = m->panels() * kPanel;
  const size_t elem = ElementBytes(type);
  m->data_.reset(static_cast<uint8_t*>(
      AlignedZeroed(static_cast<size_t>(padded_rows * cols) * elem)));
  if (m->data_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cpu: cannot allocate a packed ", rows, "x", cols, " ",
                     WeightTypeName(type), " matrix"));
  }
  if (type == WeightType::kInt8) {
    m->scales_.reset(static_cast<float*>(
        AlignedZeroed(static_cast<size_t>(padded_rows) * sizeof(float))));
    if (m->scales_ == nullptr) {
      return absl::ResourceExhaustedError("cpu: cannot allocate int8 scales");
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = host + r * cols;
    uint8_t* base = m->data_.get() + (r / kPanel) * cols * kPanel * elem;
    const int64_t lane = r % kPanel;
    float inv = 0.0f;
    if (type == WeightType::kInt8) {
      float amax = 0.0f;
      for (int64_t c = 0; c < cols; ++c) {
        if (!std::isfinite(src[c])) {
          return absl::InvalidArgumentError(
              absl::StrCat("cannot quantize to int8: row ", r, " column ", c,
                           " holds ", src[c]));
        }
        amax = std::max(amax, std::fabs(src[c]));
      }
      const float scale = amax / 127.0f;
      m->scales_[r] = scale;
      inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    }
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t at = c * kPanel + lane;
      switch (type) {
        case WeightType::kF32:
          reinterpret_cast<float*>(base)[at] = src[c];
          break;
        case WeightType::kBf16:
          reinterpret_cast<uint16_t*>(base)[at] = F32ToBf16(src[c]);
          break;
        case WeightType::kF16:
          reinterpret_cast<uint16_t*>(base)[at] = F32ToF16(src[c]);
          break;
        case WeightType::kInt8: {
          const float q = std::nearbyint(src[c] * inv);
          reinterpret_cast<int8_t*>(base)[at] =
              static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
          break;
        }
      }
    }
  }
  return m;
}

size_t PackedMatrix::bytes() const {
  const int64_t padded_rows = panels() * kPanel;
  return static_cast<size_t>(padded_rows * cols_) * ElementBytes(type_) +
         (scales_ != nullptr ? static_cast<size_t>(padded_rows) * 4 : 0);
}

void PackedMatrix::ReadRow(int64_t r, float scale, float* out) const {
  const uint8_t* base = static_cast<const uint8_t*>(panel(r / kPanel));
  const int64_t lane = r % kPanel;
  switch (type_) {
    case WeightType::kF32:
      for (int64_t c = 0; c < cols_; ++c)
        out[c] =
            scale * reinterpret_cast<const float*>(base)[c * kPanel + lane];
      break;
    case WeightType::kBf16:
      for (int64_t c = 0; c < cols_; ++c)
        out[c] = scale * Bf16ToF32(reinterpret_cast<const uint16_t*>(
                             base)[c * kPanel + lane]);
      break;
    case WeightType::kF16:
      for (int64_t c = 0; c < cols_; ++c)
        out[c] = scale * F16ToF32(reinterpret_cast<const uint16_t*>(
                             base)[c * kPanel + lane]);
      break;
    case WeightType::kInt8: {
      const float s = scales_[r];
      for (int64_t c = 0; c < cols_; ++c)
        out[c] = scale *
                 (s * reinterpret_cast<const int8_t*>(base)[c * kPanel + lane]);
      break;
    }
  }
}

}  // namespace seqboat::cpu
