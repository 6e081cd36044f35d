// The small-batch GEMV (gemv_kernels.cu): y[i, r] (+)= x[i, :] · W[r, :] +
// bias[r] for n <= kGemvMaxRows rows of x, straight from W's storage type
// (no conversion pass), so that decode batches run at the speed of reading
// the weights: W is read once per call for all n inputs, 16 bytes a load.
//
// Work is spread to fill the device whatever the shape: a warp owns a few
// output rows, up to 8 warps of a block split a row's columns, and where
// rows are still too few the columns are split across blocks too
// (GemvColumnSplits > 1), whose partial sums land in `partials` and are
// added in a fixed order by a second kernel: no atomics. A matrix too narrow
// to fill the SMs even so (few rows, few column passes) takes one output row
// a warp instead of four. The order of every
// sum depends on the matrix only (shape, storage), never on n, so padding a
// batch does not change its results and graph replays equal eager runs bit for
// bit.
//
// fp8 (Storage::kFp8E4m3) sums code values times x in fp32 and applies the
// row's scale (dense_kernels.h Fp8RowScales) once, to the finished sum.
#ifndef SEQBOAT_KERNELS_CUDA_GEMV_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_GEMV_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernels/cuda/dense_kernels.h"

namespace seqboat::cuda {

inline constexpr int kGemvMaxRows = 16;

struct GemvParams {
  const float* x = nullptr;
  int ldx = 0;
  int n = 0;
  const void* w = nullptr;
  Storage storage = Storage::kF32;
  int rows = 0;
  int cols = 0;
  const float* bias = nullptr;  // [rows] or null
  float* y = nullptr;
  int ldy = 0;
  bool accumulate = false;
  float residual_scale = 1.0f;  // with accumulate (GemmParams)
  // Device scratch of GemvPartialFloats(*this) floats when that is > 0;
  // unused (may be null) otherwise.
  float* partials = nullptr;
  // A pre-norm folded into the prologue (dense_params.h GemmNorm): x is
  // normalised over its cols columns as it is loaded, with the norm
  // kernels' arithmetic (norm_rows.cuh), so the result is bit for bit the
  // norm kernel's then the plain GEMV's; norm.out receives Norm(x) too.
  GemmNorm norm;
  // Launched early behind the kernel before (launch.cuh): the blocks stream
  // their slice of W into L2 while that one finishes, then wait for it.
  bool early = false;
  // Mamba-1's conv folded into the epilogue (dense_params.h GemmConv), for
  // decode calls only (every segment at most one token; segs in device
  // memory): the thread that stores output (i, c), c < conv.e, also runs
  // channel c's conv step for row i's segment from the stored value, with
  // the conv kernel's arithmetic (op_math::ConvStep), so that the result
  // is bit for bit the plain GEMV's then the conv kernel's. With column
  // splits that thread is the reduction kernel's. conv.e == 0: none.
  GemmConv conv;
};

// Blocks that split each row's columns: a function of the matrix alone
// (its shape and storage), never of the batch.
int GemvColumnSplits(int rows, int cols, Storage storage);

// The floats `partials` must hold: splits x n x rows, or 0 for one split.
int64_t GemvPartialFloats(const GemvParams& p);

// Blocks of the GEMV's main kernel for p (for tests and figures).
int64_t GemvBlocks(const GemvParams& p);

void LaunchGemv(const GemvParams& p, cudaStream_t stream);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_GEMV_KERNELS_H_
