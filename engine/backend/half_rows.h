// A 16-bit copy of an op's fp32 output rows, written beside them for a GEMM
// that reads its input in 16 bits (the CUDA backend's cuBLAS path), so that
// the GEMM needs no conversion pass of its own. Plain data: nvcc includes
// this header.
//
// The rules, each with one owner:
// - Backend::GemmInputFormat(w, n) says which format, if any, a GEMM on w at
//   n rows reads (kNone on the CPU backend, and on CUDA's GEMV and fp32
//   paths).
// - A layer sets a producer's out16 (MambaConvParams, MambaScanParams,
//   GatedRmsNormParams, ActivateMulParams, SinkAttentionParams) to that
//   format only, and hands the same rows to the GEMM as GemmParams::x16; a
//   backend writes out16 only in formats its GemmInputFormat returns, so
//   the CPU ignores the field.
// - The copy is each fp32 value rounded to nearest even, the conversion the
//   GEMM would otherwise run, so results are the same bits either way.
#ifndef SEQBOAT_ENGINE_BACKEND_HALF_ROWS_H_
#define SEQBOAT_ENGINE_BACKEND_HALF_ROWS_H_

#include <stdint.h>

namespace seqboat {

enum class HalfFormat : int8_t { kNone, kBf16, kF16 };

// Rows of 2-byte values, row i at data + i * ld elements; format kNone (or
// null data): no copy.
struct HalfRows {
  void* data = nullptr;
  int ld = 0;
  HalfFormat format = HalfFormat::kNone;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_HALF_ROWS_H_
