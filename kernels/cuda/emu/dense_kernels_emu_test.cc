// The dense kernels (kernels/dense_kernels.cu), run on the CUDA emulation,
// equal the CPU backend's ops: Embed from fp32 / bf16 / fp16 tables, the
// norms (RmsNorm, the strided in-place slice, LayerNorm with and without
// weight and bias), the small-batch GEMV (n = 1..8, every storage type, the
// vector path and the scalar one for odd columns or a misaligned matrix,
// bias, accumulate, row strides) against the CPU GEMM on weights rounded to
// the same storage, and batch invariance of the GEMV bit for bit; the input
// conversion of the cuBLAS path, AddBias, GatherRows / ScatterAddScaled,
// ActivateMul for every activation, and MoeRoute. The cases the GPU test
// (kernels/cuda/dense_ops_gpu_test.cc) runs too are
// kernels/cuda/testing/dense_cases.h, here on more shapes; the GEMV's follow
// the GPU test's, with fewer weight rows.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend/ffn_math.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/dense_params.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/testing/dense_cases.h"

namespace seqboat::emu_test {
namespace {

namespace dense = parity::dense;
using cuda::Storage;
using parity::Bound;
using parity::ExpectNoError;

// What a weight becomes in `s`: the CUDA backend rounds on the host to
// nearest even (kernels/cuda_backend.cc UploadAs), so the same functions here.
float RoundTo(Storage s, float v) {
  switch (s) {
    case Storage::kBf16:
      return __bfloat162float(__float2bfloat16_rn(v));
    case Storage::kF16:
      return __half2float(__float2half_rn(v));
    default:
      return v;
  }
}

std::vector<float> RoundAll(Storage s, std::vector<float> v) {
  for (float& x : v) x = RoundTo(s, x);
  return v;
}

uint16_t Bits16(Storage s, float v) {
  uint16_t u = 0;
  if (s == Storage::kBf16) {
    const __nv_bfloat16 b = __float2bfloat16_rn(v);
    std::memcpy(&u, &b, 2);
  } else {
    const __half h = __float2half_rn(v);
    std::memcpy(&u, &h, 2);
  }
  return u;
}

const char* Name(Storage s) {
  return s == Storage::kBf16 ? "bf16" : s == Storage::kF16 ? "fp16" : "fp32";
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() &&
         s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// kernels/dense_ops.cc's launches and cuda_backend.cc's matrix storage and
// GEMV dispatch, on host memory. Matrices are stored as the CUDA backend
// stores them (rounded to `storage` unless uploaded as fp32).
class DenseEmulation : public EmulatedBackend {
 public:
  explicit DenseEmulation(Storage storage) : storage_(storage) {}

  absl::StatusOr<Matrix> UploadMatrix(const float* host, int64_t rows,
                                      int64_t cols) override {
    return UploadAt(host, rows, cols, storage_, 0);
  }
  absl::StatusOr<Matrix> UploadMatrixFp32(const float* host, int64_t rows,
                                          int64_t cols) override {
    return UploadAt(host, rows, cols, Storage::kF32, 0);
  }
  // The matrix starts `offset` elements into a 64-byte aligned buffer, so an
  // odd offset misaligns it for the GEMV's 16-byte loads.
  Matrix UploadAt(const float* host, int64_t rows, int64_t cols,
                  Storage storage, int offset) {
    const size_t elem = storage == Storage::kF32 ? 4 : 2;
    const int64_t count = rows * cols;
    auto buf = Alloc((count + offset) * elem);
    EXPECT_TRUE(buf.ok()) << buf.status();
    owned_.push_back(*buf);
    uint8_t* at = static_cast<uint8_t*>(buf->get()) + offset * elem;
    for (int64_t i = 0; i < count; ++i) {
      if (storage == Storage::kF32) {
        std::memcpy(at + i * 4, &host[i], 4);
      } else {
        const uint16_t u = Bits16(storage, host[i]);
        std::memcpy(at + i * 2, &u, 2);
      }
    }
    return Matrix{at, rows, cols, storage == Storage::kF32};
  }

  // Host memory is device memory here: the ids and row lists need no
  // staging.
  void Embed(const EmbedParams& p) override {
    std::vector<int32_t> map;
    cuda::FedMapFor(p, &map);
    cuda::LaunchEmbed(p, StorageOf(p.table), map.data(), nullptr);
  }
  void RmsNorm(const NormParams& p) override {
    cuda::LaunchRmsNorm(p, nullptr);
  }
  void LayerNorm(const NormParams& p) override {
    cuda::LaunchLayerNorm(p, nullptr);
  }
  // The GEMV branch of CudaBackend::Gemm; larger batches go to cuBLAS there,
  // which has no emulation.
  void Gemm(const GemmParams& p) override {
    if (p.n > cuda::kGemvMaxRows) {
      ADD_FAILURE() << "n = " << p.n << " takes cuBLAS, not the GEMV";
      return;
    }
    cuda::LaunchGemv(cuda::GemvParamsFor(p, StorageOf(p.w)), nullptr);
  }
  void GatherRows(const GatherRowsParams& p) override {
    cuda::LaunchGatherRows(p, nullptr);
  }
  void ActivateMul(const ActivateMulParams& p) override {
    cuda::LaunchActivateMul(p, nullptr);
  }
  void AddBias(const AddBiasParams& p) override {
    cuda::LaunchAddBias(p, nullptr);
  }
  void MoeRoute(const MoeRouteParams& p) override {
    cuda::LaunchMoeRoute(p, nullptr);
  }
  void ScatterAddScaled(const ScatterAddParams& p) override {
    cuda::LaunchScatterAddScaled(p, nullptr);
  }

 private:
  Storage StorageOf(const Matrix& w) const {
    return w.fp32 ? Storage::kF32 : storage_;
  }

  Storage storage_;
  std::vector<DeviceBuffer> owned_;
};

TEST(DenseKernelsEmuTest, EmbedGathersScaledRowsOfEveryStorage) {
  // d = 70: 96 threads, the last warp partly idle; 300: two passes.
  for (const int d : {70, 300}) {
    const std::vector<float> table =
        Random(dense::kEmbedRows * d, 1 + d, -3.0f, 3.0f);
    for (const Storage s : {Storage::kF32, Storage::kBf16, Storage::kF16}) {
      SCOPED_TRACE(testing::Message() << Name(s) << " d=" << d);
      const std::vector<float> rounded = RoundAll(s, table);
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

// The GEMV against the CPU GEMM on the same rounded weights: the same fp32
// products, summed in another order.
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
    // ~10 (seen, over the three storages: 1.1e-5 at 768 columns, 7.6e-6 at
    // 256). A wrong
    // row, column, stride or weight is off by O(1).
    float tol;
  };
  // 768: the vector path, each row split over two warps of 1.5 strides,
  // with unaligned and aligned activations; 40: vector, most lanes idle; 77:
  // odd columns, scalar; 256 at an odd offset: a misaligned matrix falls back
  // to the scalar path; 2048: vector, eight warps a row; 1031: scalar, four
  // warps a row.
  const Shape shapes[] = {
      {768, 0, true, 9, 2e-5f},    {768, 0, true, 4, 2e-5f},
      {40, 0, true, 4, 3e-6f},     {77, 0, false, 9, 4e-6f},
      {256, 1, false, 4, 1.2e-5f}, {2048, 0, true, 4, 5e-5f},
      {1031, 0, false, 9, 3e-5f}};
  // 67 rows: the last block has warps past the last row, which exit (one
  // warp a row) or still meet the block's barrier (split rows).
  const int rows = 67, ldy = rows + 5;
  for (const Storage s : {Storage::kF32, Storage::kBf16, Storage::kF16}) {
    for (const Shape& shape : shapes) {
      const int cols = shape.cols, ldx = cols + shape.ldx_pad;
      const std::vector<float> w = Random(rows * cols, 5 + cols),
                               wr = RoundAll(s, w), bias = Random(rows, 6),
                               x = Random(8 * ldx, 7 + cols),
                               y0 = Random(8 * ldy, 8);
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
        std::vector<std::vector<float>> results(9);
        for (int n = 1; n <= 8; ++n) {
          const std::vector<float> want =
              dense::GemmOn(*cpu, *cm, x, ldx, n, y0, ldy, b, accumulate);
          results[n] =
              dense::GemmOn(emu, em, x, ldx, n, y0, ldy, b, accumulate);
          ExpectNoError(emu);
          EXPECT_TRUE(EndsWith(emu::State().last_kernel,
                               shape.vector ? "true>" : "false>"))
              << emu::State().last_kernel;
          EXPECT_LE(MaxAbsDiff(want, results[n]), shape.tol) << "n=" << n;
        }
        if (s != Storage::kF32 && cols == 768) {
          // The kernel did read the rounded weights: the CPU on the fp32
          // ones is measurably further off.
          auto plain = cpu->UploadMatrix(w.data(), rows, cols);
          ASSERT_TRUE(plain.ok());
          EXPECT_GT(MaxAbsDiff(dense::GemmOn(*cpu, *plain, x, ldx, 8, y0, ldy,
                                             b, accumulate),
                               results[8]),
                    1e-3f);
        }
        // Batch invariance: row i is the same bits in every batch of n > i.
        for (int n = 1; n < 8; ++n) {
          for (int i = 0; i < n; ++i) {
            const auto row = [&](int batch) {
              return std::vector<float>(
                  results[batch].begin() + i * ldy,
                  results[batch].begin() + i * ldy + rows);
            };
            EXPECT_TRUE(SameBits(row(n), row(8)))
                << "row " << i << " of n=" << n << " vs n=8";
          }
        }
      }
    }
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
