#include "kernels/cuda/fp8_weights.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/dtype_convert.h"
#include "kernels/cuda/dense_kernels.h"

namespace seqboat::cuda {

absl::Status QuantizeFp8Matrix(const float* w, int64_t rows, int64_t cols,
                               std::vector<uint8_t>* image) {
  image->assign(
      static_cast<size_t>(StoredMatrixBytes(Storage::kFp8E4m3, rows, cols)), 0);
  uint8_t* scales = image->data() + Fp8ScalesOffset(rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float absmax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      if (!std::isfinite(row[c])) {
        return absl::InvalidArgumentError(
            absl::StrCat("fp8 weights: row ", r, " of a [", rows, ", ", cols,
                         "] matrix holds a non-finite value at column ", c));
      }
      absmax = std::fmax(absmax, std::fabs(row[c]));
    }
    // An all-zero row keeps scale 0 and zero codes.
    const float scale = absmax / 448.0f;
    uint8_t* codes = image->data() + r * cols;
    if (scale > 0.0f) {
      for (int64_t c = 0; c < cols; ++c) codes[c] = F32ToE4m3(row[c] / scale);
    }
    std::memcpy(scales + r * 4, &scale, 4);
  }
  return absl::OkStatus();
}

}  // namespace seqboat::cuda
