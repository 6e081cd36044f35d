// The dense kernels (kernels/cuda/dense_kernels.cu) and the GEMV
// (gemv_kernels.cu), run on the CUDA emulation, equal the CPU backend's ops:
// Embed from fp32 / bf16 / fp16 / fp8 tables, the norms (RmsNorm, the
// strided in-place slice, LayerNorm with and without weight and bias), the
// small-batch GEMV (n = 1..16, every storage type, the vector path and the
// scalar one for odd columns or a misaligned matrix, bias, accumulate, row
// strides, columns split across blocks) against the CPU GEMM on weights
// stored the same way, and batch invariance of the GEMV bit for bit; the
// host's e4m3 conversions against the toolkit's; the input conversion of
// the cuBLAS path, AddBias, GatherRows / ScatterAddScaled, ActivateMul for
// every activation, and MoeRoute. The cases the GPU test
// (kernels/cuda/dense_ops_gpu_test.cc) runs too are
// kernels/cuda/testing/dense_cases.h, here on more shapes; the GEMV's follow
// the GPU test's, with fewer weight rows.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend/ffn_math.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/dense_params.h"
#include "kernels/cuda/emu/dense_emulation.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/testing/dense_cases.h"

namespace seqboat::emu_test {
namespace {

namespace dense = parity::dense;
using cuda::Storage;
using parity::Bound;
using parity::ExpectNoError;

const char* Name(Storage s) {
  switch (s) {
    case Storage::kBf16:
      return "bf16";
    case Storage::kF16:
      return "fp16";
    case Storage::kFp8E4m3:
      return "fp8";
    default:
      return "fp32";
  }
}

constexpr Storage kStorages[] = {Storage::kF32, Storage::kBf16, Storage::kF16,
                                 Storage::kFp8E4m3};

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() &&
         s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

TEST(DenseKernelsEmuTest, EmbedGathersScaledRowsOfEveryStorage) {
  // d = 70: 96 threads, the last warp partly idle; 300: two passes.
  for (const int d : {70, 300}) {
    const std::vector<float> table =
        Random(dense::kEmbedRows * d, 1 + d, -3.0f, 3.0f);
    for (const Storage s : kStorages) {
      SCOPED_TRACE(testing::Message() << Name(s) << " d=" << d);
      const std::vector<float> rounded =
          StoredValues(s, table, dense::kEmbedRows, d);
      auto cpu = MakeCpuBackend(1);
      DenseEmulation emu(s);
      dense::ExpectEmbedMatches(*cpu, emu, rounded, table, d);
      // Rounding did happen (the comparison is of the storage path).
      if (s != Storage::kF32) {
        EXPECT_NE(rounded, table);
      }
    }
  }
}

TEST(DenseKernelsEmuTest, NormsMatch) {
  // d = 768 (three passes of 256 threads), 300 (a partial second pass), 40
  // (two warps), 16 (one warp, half idle).
  for (const int d : {768, 300, 40, 16}) {
    auto cpu = MakeCpuBackend(1);
    DenseEmulation emu(Storage::kF32);
    // The block reduction sums the squares in another order than the CPU's
    // (vectorised) loop: outputs of magnitude ~2 differ by a few ulp (seen:
    // RmsNorm 2.4e-7, LayerNorm 6.0e-7, whose mean is a second such sum).
    // A wrong row, column or stride is off by O(1).
    dense::ExpectNormsMatch(*cpu, emu, /*n=*/5, d, /*ld=*/800, /*seed=*/2 + d,
                            Bound::AtMost(4e-7f), Bound::AtMost(8e-7f));
  }
}

// The GEMV's results for n = 1..16 on `emu` (uploaded `em`) against the CPU
// GEMM on the stored values (`cm`), within `tol`; row i of every batch is
// the same bits as in the batch of 16 (batch invariance). Returns the
// batch of 16's output.
std::vector<float> ExpectGemvMatches(
    Backend& cpu, const Matrix& cm, DenseEmulation& emu, const Matrix& em,
    const std::vector<float>& x, int ldx, const std::vector<float>& y0, int ldy,
    const std::vector<float>* bias, bool accumulate, const std::vector<int>& ns,
    float tol, const char* kernel_tail) {
  const int rows = static_cast<int>(cm.rows);
  std::vector<std::vector<float>> results(cuda::kGemvMaxRows + 1);
  for (const int n : ns) {
    const std::vector<float> want =
        dense::GemmOn(cpu, cm, x, ldx, n, y0, ldy, bias, accumulate);
    results[n] = dense::GemmOn(emu, em, x, ldx, n, y0, ldy, bias, accumulate);
    ExpectNoError(emu);
    if (kernel_tail != nullptr) {
      EXPECT_TRUE(EndsWith(emu::State().last_kernel, kernel_tail))
          << emu::State().last_kernel;
    }
    EXPECT_LE(MaxAbsDiff(want, results[n]), tol) << "n=" << n;
  }
  const int top = ns.back();
  for (const int n : ns) {
    for (int i = 0; i < n; ++i) {
      const auto row = [&](int batch) {
        return std::vector<float>(results[batch].begin() + i * ldy,
                                  results[batch].begin() + i * ldy + rows);
      };
      EXPECT_TRUE(SameBits(row(n), row(top)))
          << "row " << i << " of n=" << n << " vs n=" << top;
    }
  }
  return results[top];
}

// The GEMV against the CPU GEMM on the same stored weights: the same fp32
// products (fp8: the code's value times x, scaled once at the end, against
// the CPU's dequantised weight times x), summed in another order.
TEST(DenseKernelsEmuTest, GemvMatchesCpuGemmOnRoundedWeights) {
  struct Shape {
    int cols;
    int offset;  // elements the matrix starts into its buffer
    bool vector;
    // x's row stride past cols: 4 keeps its rows 16-byte aligned (16-byte
    // activation loads on the vector path), 9 does not (4-byte loads).
    int ldx_pad;
    // The same products summed per lane and then across the warp, against
    // the CPU's FMA chains over blocks of 256 columns: a few ulp of outputs
    // ~10 (seen, over the four storages: 1.1e-5 at 768 columns, 7.6e-6 at
    // 256). A wrong row, column, stride or weight is off by O(1).
    float tol;
  };
  // 768: the vector path, each row split over two warps of 1.5 strides,
  // with unaligned and aligned activations; 40: vector, most lanes idle
  // (fp8: scalar, 40 is no multiple of 16); 77: odd columns, scalar; 256 at
  // an odd offset: a misaligned matrix falls back to the scalar path; 2048:
  // vector, eight warps a row; 1031: scalar, four warps a row.
  const Shape shapes[] = {
      {768, 0, true, 9, 2e-5f},    {768, 0, true, 4, 2e-5f},
      {40, 0, true, 4, 3e-6f},     {77, 0, false, 9, 4e-6f},
      {256, 1, false, 4, 1.2e-5f}, {2048, 0, true, 4, 5e-5f},
      {1031, 0, false, 9, 3e-5f}};
  // 67 rows: the last block has warps past the last row, which exit (one
  // warp a row) or still meet the block's barrier (split rows).
  const int rows = 67, ldy = rows + 5, nmax = cuda::kGemvMaxRows;
  // Each batch size is its own kernel instance; these cover both rows per
  // warp (4 up to 8, 2 beyond) at both ends and between.
  const std::vector<int> ns = {1, 2, 3, 4, 6, 8, 9, 11, 14, nmax};
  for (const Storage s : kStorages) {
    for (const Shape& shape : shapes) {
      const int cols = shape.cols, ldx = cols + shape.ldx_pad;
      const bool vector =
          shape.vector && (s != Storage::kFp8E4m3 || cols % 16 == 0);
      const std::vector<float> w = Random(rows * cols, 5 + cols),
                               wr = StoredValues(s, w, rows, cols),
                               bias = Random(rows, 6),
                               x = Random(nmax * ldx, 7 + cols),
                               y0 = Random(nmax * ldy, 8);
      ASSERT_EQ(cuda::GemvColumnSplits(rows, cols, s), 1);
      auto cpu = MakeCpuBackend(1);
      DenseEmulation emu(s);
      auto cm = cpu->UploadMatrix(wr.data(), rows, cols);
      ASSERT_TRUE(cm.ok());
      const Matrix em = emu.UploadAt(w.data(), rows, cols, s, shape.offset);
      for (const auto& [with_bias, accumulate] :
           {std::pair{true, true}, std::pair{false, false},
            std::pair{true, false}}) {
        SCOPED_TRACE(testing::Message()
                     << Name(s) << " cols=" << cols << " ldx=" << ldx
                     << " offset=" << shape.offset << " bias=" << with_bias
                     << " accumulate=" << accumulate);
        const std::vector<float>* b = with_bias ? &bias : nullptr;
        const std::vector<float> top = ExpectGemvMatches(
            *cpu, *cm, emu, em, x, ldx, y0, ldy, b, accumulate, ns, shape.tol,
            vector ? "true>" : "false>");
        if (s != Storage::kF32 && cols == 768) {
          // The kernel did read the stored weights: the CPU on the fp32
          // ones is measurably further off.
          auto plain = cpu->UploadMatrix(w.data(), rows, cols);
          ASSERT_TRUE(plain.ok());
          EXPECT_GT(MaxAbsDiff(dense::GemmOn(*cpu, *plain, x, ldx, nmax, y0,
                                             ldy, b, accumulate),
                               top),
                    1e-3f);
        }
      }
    }
  }
}

// Few rows over many columns (a [D, 2D]-ish projection's transpose, a small
// vocabulary): blocks split the columns too, and the reduction kernel adds
// their partial sums in a fixed order. 5 rows: batches up to 8 take 4 rows
// a warp, 9 to 16 take 2, over the same column splits; 16384 columns: the
// vector path in chunks of 2048 columns (fp8's 16-column loads: 4096),
// 16387: the scalar path, the last chunk short.
TEST(DenseKernelsEmuTest, GemvSplitsColumnsAcrossBlocksWhereRowsAreFew) {
  const int rows = 5, ldy = 7, nmax = cuda::kGemvMaxRows;
  const std::vector<int> ns = {1, 4, 8, 9, 13, 16};
  for (const auto& [cols, splits, fp8_splits] :
       {std::tuple{16384, 8, 4}, std::tuple{16387, 5, 3}}) {
    const int ldx = cols + 4;
    const std::vector<float> w = Random(rows * cols, 11 + cols),
                             bias = Random(rows, 12),
                             x = Random(nmax * ldx, 13 + cols),
                             y0 = Random(nmax * ldy, 14);
    for (const Storage s : kStorages) {
      SCOPED_TRACE(testing::Message() << Name(s) << " cols=" << cols);
      ASSERT_EQ(cuda::GemvColumnSplits(rows, cols, s),
                s == Storage::kFp8E4m3 ? fp8_splits : splits);
      const std::vector<float> wr = StoredValues(s, w, rows, cols);
      auto cpu = MakeCpuBackend(1);
      DenseEmulation emu(s);
      auto cm = cpu->UploadMatrix(wr.data(), rows, cols);
      ASSERT_TRUE(cm.ok());
      const Matrix em = emu.UploadAt(w.data(), rows, cols, s, 0);
      const int64_t launches = emu::State().launches;
      // The same products as the unsplit GEMV, summed over ~16k columns
      // (outputs ~40) in another order than the CPU's (seen: 5.3e-5). The
      // reduction is the last launch; it finishes bias and accumulate.
      const std::vector<float> first =
          ExpectGemvMatches(*cpu, *cm, emu, em, x, ldx, y0, ldy, &bias,
                            /*accumulate=*/true, ns, 2e-4f, "GemvReduceKernel");
      EXPECT_EQ(emu::State().launches - launches, 2 * int64_t(ns.size()));
      // Run again: the same bits (no order depends on scheduling).
      const std::vector<float> again =
          dense::GemmOn(emu, em, x, ldx, nmax, y0, ldy, &bias, true);
      EXPECT_TRUE(SameBits(first, again));
    }
  }
}

// A narrow matrix fills the SMs: Mamba-1.4B's x_proj (160 x 4096) ran 40
// blocks (fp8) or 80 (bf16) at four rows a warp, short of 132 SMs, and
// takes one row a warp, for every batch (the plan is the shape's), with
// results within the GEMV's tolerance of the CPU and batch invariant.
TEST(DenseKernelsEmuTest, GemvFillsTheSmsOnANarrowMatrix) {
  const int rows = 160, cols = 4096, ldy = rows, nmax = cuda::kGemvMaxRows;
  const std::vector<float> w = Random(rows * cols, 61),
                           x = Random(nmax * cols, 62),
                           y0 = Random(nmax * ldy, 63), bias = Random(rows, 64);
  for (const Storage s : kStorages) {
    SCOPED_TRACE(Name(s));
    for (int n = 1; n <= nmax; ++n) {
      cuda::GemvParams p;
      p.n = n;
      p.rows = rows;
      p.cols = cols;
      p.storage = s;
      EXPECT_GE(cuda::GemvBlocks(p), 160) << "n=" << n;
    }
    const std::vector<float> wr = StoredValues(s, w, rows, cols);
    auto cpu = MakeCpuBackend(1);
    DenseEmulation emu(s);
    auto cm = cpu->UploadMatrix(wr.data(), rows, cols);
    ASSERT_TRUE(cm.ok());
    const Matrix em = emu.UploadAt(w.data(), rows, cols, s, 0);
    // 4096 products of unit-scale terms (outputs ~40) in another order than
    // the CPU's, as at 2048 columns above.
    ExpectGemvMatches(*cpu, *cm, emu, em, x, cols, y0, ldy, &bias,
                      /*accumulate=*/true, {1, 2, 8, 9, 16}, 1e-4f, nullptr);
  }
}

// The host's e4m3 conversions (base/dtype_convert, which the upload uses)
// against the CUDA toolkit's own: every code decoded, and values across the
// range, the midpoints between codes and past the saturation point encoded.
TEST(DenseKernelsEmuTest, E4m3ConversionsMatchTheToolkits) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    const __half_raw h =
        __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3);
    EXPECT_EQ(E4m3ToF32(static_cast<uint8_t>(c)), __half2float(__half(h))) << c;
  }
  std::vector<float> values = Random(20000, 21, -500.0f, 500.0f);
  for (float& v : Random(20000, 22, -1.0f, 1.0f)) values.push_back(v / 64);
  for (int c = 0; c < 0x7e; ++c) {
    const float a = E4m3ToF32(static_cast<uint8_t>(c)),
                b = E4m3ToF32(static_cast<uint8_t>(c + 1));
    values.push_back((a + b) / 2);
    values.push_back(-(a + b) / 2);
  }
  for (const float v : values) {
    EXPECT_EQ(F32ToE4m3(v), __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3))
        << v;
  }
}

// A router kept in fp32 on a bf16 backend (UploadMatrixFp32) takes the fp32
// GEMV: it matches the CPU on the unrounded weights, the rounded copy not.
TEST(DenseKernelsEmuTest, Fp32MatrixOnBf16BackendKeepsFp32Accuracy) {
  auto cpu = MakeCpuBackend(1);
  DenseEmulation emu(Storage::kBf16);
  for (const int n : {1, 8}) {
    // As the GEMV test's 768 columns (seen: 3.8e-6).
    dense::ExpectFp32MatrixKeepsFp32Accuracy(*cpu, emu, n,
                                             Bound::AtMost(1e-5f));
  }
}

// n == 0 (and a zero-width scatter) launch nothing, as dense_kernels.h says.
TEST(DenseKernelsEmuTest, EmptyCallsLaunchNothing) {
  DenseEmulation emu(Storage::kBf16);
  const std::vector<float> w = Random(8 * 16, 1);
  const Matrix m = emu.UploadAt(w.data(), 8, 16, Storage::kBf16, 0);
  Array x(emu, 16), y(emu, 8);
  const int64_t launches = emu::State().launches;
  emu.Gemm(dense::GemmOf(x.get(), 16, 0, m, y.get(), 8));
  const int32_t row = 0;
  const float scale = 1.0f;
  ScatterAddParams scatter;
  scatter.src = x.get();
  scatter.d = 0;
  scatter.rows = &row;
  scatter.scales = &scale;
  scatter.m = 1;
  scatter.dst = y.get();
  scatter.lddst = 8;
  emu.ScatterAddScaled(scatter);
  emu.RmsNorm(dense::NormOf(x.get(), y.get(), 0, 16, nullptr, 1e-5f));
  MoeRouteParams route;
  route.logits = x.get();
  route.n = 0;
  route.x = 4;
  route.routing = MoeRouting::kSoftmaxTopK;
  route.top_k = 1;
  route.renormalize = false;
  route.experts = reinterpret_cast<int32_t*>(y.get());
  route.gates = y.get();
  emu.MoeRoute(route);
  ExpectNoError(emu);
  EXPECT_EQ(emu::State().launches, launches);
}

// The cuBLAS path's input conversion: rows of a strided x into contiguous
// bf16 / fp16 (round to nearest even, the host functions' bits) or fp32.
TEST(DenseKernelsEmuTest, ConvertRowsRoundsLikeTheHost) {
  const int n = 5, ldx = 310;
  for (const int d : {77, 300}) {
    // Values beyond fp16's range and below its normals too.
    std::vector<float> x = Random(n * ldx, 30 + d, -4.0f, 4.0f);
    x[1] = 1e5f;
    x[2] = -3e-6f;
    x[ldx + 4] = 1.0f + 1.0f / 512;  // a bf16 tie, to even
    for (const Storage s : {Storage::kF32, Storage::kBf16, Storage::kF16}) {
      SCOPED_TRACE(testing::Message() << Name(s) << " d=" << d);
      const size_t elem = s == Storage::kF32 ? 4 : 2;
      const size_t bytes = n * d * elem, guard = 64;
      std::vector<uint8_t> out(bytes + guard, 0xab), want(bytes + guard, 0xab);
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < d; ++j) {
          const float v = x[i * ldx + j];
          uint8_t* at = want.data() + (i * d + j) * elem;
          if (s == Storage::kF32) {
            std::memcpy(at, &v, 4);
          } else {
            const uint16_t u = Bits16(s, v);
            std::memcpy(at, &u, 2);
          }
        }
      }
      cuda::LaunchConvertRows(x.data(), ldx, n, d, out.data(), s, nullptr);
      EXPECT_EQ(emu::TakeFailures(), "");
      EXPECT_EQ(out, want);
    }
  }
}

TEST(DenseKernelsEmuTest, RowOpsMatch) {
  const int n = 6;
  for (const int d : {33, 300}) {
    dense::RowOpsCase c =
        dense::MakeRowOpsCase(n, d, /*f=*/d + 7, /*ld=*/320, {4, 1, 4, 0},
                              {0.5f, -2.0f, 0.25f, 1.5f}, /*seed=*/9 + d);
    c.dst = Random(n * (d + 3), 13);
    c.lddst = d + 3;
    for (const Activation act : dense::kActivations) {
      auto cpu = MakeCpuBackend(1);
      DenseEmulation emu(Storage::kF32);
      // Both sides evaluate op_math::Activate per element with the same
      // scalar libm calls; only the tanh GELU differs, whose cubic the CPU
      // build's -ffast-math may reassociate (seen: 2.4e-7 on outputs up to
      // ~5, 1 ulp). Everything else, the copies and the in-order scatter
      // included, is bit for bit the same.
      dense::ExpectRowOpsMatch(*cpu, emu, c, act,
                               act == Activation::kGeluTanh
                                   ? Bound::AtMost(5e-7f)
                                   : Bound::Bitwise(),
                               Bound::Bitwise());
    }
  }
}

TEST(DenseKernelsEmuTest, MoeRouteMatches) {
  // 37 rows: one partial block; 200: a second block of 128 threads.
  for (const int n : {37, 200}) {
    for (const dense::MoeRouteCase& c :
         {dense::MoeRouteCase{8, MoeRouting::kSoftmaxTopK, 1},
          dense::MoeRouteCase{8, MoeRouting::kSoftmaxTopK, 2,
                              /*renormalize=*/true},
          dense::MoeRouteCase{5, MoeRouting::kSoftmaxTopK, 3},
          dense::MoeRouteCase{8, MoeRouting::kReluDynamic, 8},
          // Nemotron-H: 4 groups of 4, the best 2 searched, 3 experts, the
          // correction bias steering the choice, renormalised and scaled.
          dense::MoeRouteCase{16, MoeRouting::kSigmoidGroupTopK, 3, true, 4, 2,
                              Random(16, 5, -0.5f, 0.5f), 2.5f},
          dense::MoeRouteCase{
              6, MoeRouting::kSigmoidGroupTopK, 2, false, 1, 1, {}, 1.0f}}) {
      std::vector<float> logits = Random(n * c.x, 13 + n, -3.0f, 3.0f);
      // Ties (to the lower expert) and rows with no positive logit.
      for (int e = 0; e < c.x; ++e) logits[e] = 0.5f;
      for (int e = 0; e < c.x; ++e) logits[c.x + e] = -1.0f - e;
      auto cpu = MakeCpuBackend(1);
      DenseEmulation emu(Storage::kF32);
      // The same decisions; the CPU build's -ffast-math may reorder the
      // softmax's sum and turn its divisions into reciprocal products, so
      // gates below 1 differ by up to 2 ulp (seen: 1.2e-7).
      dense::ExpectMoeRouteMatches(*cpu, emu, logits, n, c,
                                   Bound::AtMost(2e-7f));
    }
  }
}

}  // namespace
}  // namespace seqboat::emu_test
