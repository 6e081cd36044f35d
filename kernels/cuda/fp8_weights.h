// fp8 weights on the host: a matrix quantised to the device image the
// kernels read (dense_kernels.h Storage::kFp8E4m3). Each row is scaled on
// its own (scale = max |w| / 448, e4m3's largest finite value), so that a
// row of small weights keeps its precision beside rows of large ones, and
// each weight is w / scale rounded to nearest even (base/dtype_convert.h).
// The CUDA backend's upload and the emulation tests share it.
#ifndef SEQBOAT_KERNELS_CUDA_FP8_WEIGHTS_H_
#define SEQBOAT_KERNELS_CUDA_FP8_WEIGHTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace seqboat::cuda {

// `image` becomes StoredMatrixBytes(kFp8E4m3, rows, cols) bytes: the codes,
// zero padding, the row scales. InvalidArgument, naming the row, for a
// non-finite weight (e4m3 has no infinity, and a NaN would poison its row).
absl::Status QuantizeFp8Matrix(const float* w, int64_t rows, int64_t cols,
                               std::vector<uint8_t>* image);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_FP8_WEIGHTS_H_
