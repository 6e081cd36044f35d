// What a [rows, cols] fp32 matrix becomes on the CUDA backend stored as `s`:
// rounded to nearest even (bf16, fp16, as cuda_backend.cc's upload rounds),
// quantised to fp8 e4m3 (each code times its row's scale, fp8_weights.h), or
// left as it is (fp32). A CPU backend given these values holds the device's
// matrix exactly, so a comparison measures the kernels' arithmetic alone.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_STORED_VALUES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_STORED_VALUES_H_

#include <cstdint>
#include <vector>

#include "base/dtype_convert.h"
#include "gtest/gtest.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/fp8_weights.h"

namespace seqboat::parity {

inline std::vector<float> StoredValues(cuda::Storage s, std::vector<float> v,
                                       int64_t rows, int64_t cols) {
  switch (s) {
    case cuda::Storage::kFp8E4m3: {
      std::vector<uint8_t> image;
      EXPECT_TRUE(cuda::QuantizeFp8Matrix(v.data(), rows, cols, &image).ok());
      const float* scales = cuda::Fp8RowScales(image.data(), rows, cols);
      for (int64_t i = 0; i < rows * cols; ++i) {
        v[i] = E4m3ToF32(image[i]) * scales[i / cols];
      }
      break;
    }
    case cuda::Storage::kBf16:
      for (float& x : v) x = Bf16ToF32(F32ToBf16(x));
      break;
    case cuda::Storage::kF16:
      for (float& x : v) x = F16ToF32(F32ToF16(x));
      break;
    case cuda::Storage::kF32:
      break;
  }
  return v;
}

}  // namespace seqboat::parity

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_STORED_VALUES_H_
