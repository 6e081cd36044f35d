// Launchers of the dense kernels (dense_kernels.cu): embedding gather, norms,
// row gather/scatter, activations, bias, weight-dtype conversion and the MoE
// router (the GEMV: gemv_kernels.h). They take the ops' own params
// (engine/backend/dense_params.h), with every pointer device memory (the
// backend stages the ops' host descriptors first); each launcher enqueues on
// `queue` and returns at once. n == 0 launches nothing.
#ifndef SEQBOAT_KERNELS_CUDA_DENSE_KERNELS_H_
#define SEQBOAT_KERNELS_CUDA_DENSE_KERNELS_H_

#include <stdint.h>

#include "engine/backend/dense_params.h"
#include "engine/backend/half_rows.h"
#include "engine/backend/hd.h"
#include "kernels/cuda/launch_queue.h"

namespace seqboat::cuda {

// How a weight matrix is stored on the device. kFp8E4m3: one e4m3 code a
// weight (base/dtype_convert.h), then one fp32 scale per row (max |w| /
// 448) from Fp8ScalesOffset on, in the same allocation, so that a Matrix
// handle stays a single pointer.
enum class Storage : int32_t { kF32, kBf16, kF16, kFp8E4m3 };

// Where an fp8 matrix's scales start: its codes rounded up to 16 bytes.
SEQBOAT_HD int64_t Fp8ScalesOffset(int64_t rows, int64_t cols) {
  return (rows * cols + 15) / 16 * 16;
}
SEQBOAT_HD const float* Fp8RowScales(const void* w, int64_t rows,
                                     int64_t cols) {
  return reinterpret_cast<const float*>(static_cast<const uint8_t*>(w) +
                                        Fp8ScalesOffset(rows, cols));
}
// Bytes of one weight stored as `s` (an fp8 matrix's row scales apart).
SEQBOAT_HD int64_t WeightBytes(Storage s) {
  return s == Storage::kF32 ? 4 : s == Storage::kFp8E4m3 ? 1 : 2;
}
// Device bytes of a [rows, cols] matrix stored as `s`.
SEQBOAT_HD int64_t StoredMatrixBytes(Storage s, int64_t rows, int64_t cols) {
  switch (s) {
    case Storage::kFp8E4m3:
      return Fp8ScalesOffset(rows, cols) + rows * 4;
    case Storage::kF32:
      return rows * cols * 4;
    default:
      return rows * cols * 2;
  }
}

// The 16-bit format cuBLAS reads a GEMM's input in for a matrix stored as
// `s`: the weights' own, with fp8 widened to bf16 first (CudaBackend::Gemm);
// fp32 weights take fp32 input.
SEQBOAT_HD HalfFormat CublasInputFormat(Storage s) {
  switch (s) {
    case Storage::kBf16:
    case Storage::kFp8E4m3:
      return HalfFormat::kBf16;
    case Storage::kF16:
      return HalfFormat::kF16;
    default:
      return HalfFormat::kNone;
  }
}

// The table's rows in fp32; `storage` is how p.table is stored. fed_map
// (device, [n], from FedMapFor) says which rows take their id from
// p.fed_tokens instead of p.ids; null: none.
void LaunchEmbed(const EmbedParams& p, Storage storage, const int32_t* fed_map,
                 LaunchQueue queue);

// One block per row. out16: the normed rows in 16 bits too (a folded
// pre-norm's rows for cuBLAS, CudaBackend::Gemm), in the same launch.
void LaunchRmsNorm(const NormParams& p, LaunchQueue queue,
                   const HalfRows& out16 = HalfRows());
void LaunchLayerNorm(const NormParams& p, LaunchQueue queue,
                     const HalfRows& out16 = HalfRows());

void LaunchGatherRows(const GatherRowsParams& p, LaunchQueue queue);

// out [n, d] contiguous = x [n, d] (row stride ldx) in `storage` (a GEMM's
// input in the weights' type), rounded as half_rows.cuh's StoreHalf.
void LaunchConvertRows(const float* x, int ldx, int n, int d, void* out,
                       Storage storage, LaunchQueue queue);

// The cuBLAS path of an fp8 matrix: out [rows, cols] bf16 = each code
// times its row's scale, rounded to nearest even.
void LaunchDequantizeFp8(const void* w, int rows, int cols, void* out,
                         LaunchQueue queue);

void LaunchAddBias(const AddBiasParams& p, LaunchQueue queue);

void LaunchActivateMul(const ActivateMulParams& p, LaunchQueue queue);

// Rows may repeat (a token routed to two experts appears twice), so one
// thread owns a column and walks j in order: no atomics, the CPU's
// summation order.
void LaunchScatterAddScaled(const ScatterAddParams& p, LaunchQueue queue);

// One router row per thread (op_math::RouteRow).
void LaunchMoeRoute(const MoeRouteParams& p, LaunchQueue queue);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_DENSE_KERNELS_H_
