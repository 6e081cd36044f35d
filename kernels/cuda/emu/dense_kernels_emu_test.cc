// The dense kernels (kernels/dense_kernels.cu), run on the CUDA emulation,
// equal the CPU backend's ops: Embed from fp32 / bf16 / fp16 tables, the
// norms (RmsNorm, the strided in-place slice, LayerNorm with and without
// weight and bias), the small-batch GEMV (n = 1..8, every storage type, the
// vector path and the scalar one for odd columns or a misaligned matrix,
// bias, accumulate, row strides) against the CPU GEMM on weights rounded to
// the same storage, and batch invariance of the GEMV bit for bit; the input
// conversion of the cuBLAS path, AddBias, GatherRows / ScatterAddScaled,
// ActivateMul for every activation, and MoeRoute. The shapes follow
// kernels/dense_ops_gpu_test.cc, with fewer weight rows.
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

namespace seqboat::emu_test {
namespace {

using cuda::Storage;

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
    cuda::LaunchEmbed(p, StorageOf(p.table), nullptr);
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

void ExpectNoError(Backend& be) {
  const absl::Status status = be.TakeError();
  EXPECT_TRUE(status.ok()) << status;
}

// A copy is a copy: the same float product on both sides.
TEST(DenseKernelsEmuTest, EmbedGathersScaledRowsOfEveryStorage) {
  const int v = 50;
  const int32_t ids[] = {0, 49, 3, 3, 17, 2, 48, 0, 25};
  const int n = 9;
  // d = 70: 96 threads, the last warp partly idle; 300: two passes.
  for (const int d : {70, 300}) {
    const std::vector<float> table = Random(v * d, 1 + d, -3.0f, 3.0f);
    for (const Storage s : {Storage::kF32, Storage::kBf16, Storage::kF16}) {
      SCOPED_TRACE(testing::Message() << Name(s) << " d=" << d);
      const std::vector<float> rounded = RoundAll(s, table);
      auto cpu = MakeCpuBackend(1);
      DenseEmulation emu(s);
      std::vector<std::vector<float>> got;
      for (Backend* be :
           {static_cast<Backend*>(cpu.get()), static_cast<Backend*>(&emu)}) {
        auto m = be->UploadMatrix(
            be == cpu.get() ? rounded.data() : table.data(), v, d);
        ASSERT_TRUE(m.ok()) << m.status();
        Array out(*be, std::vector<float>(n * d, 7.0f));
        EmbedParams embed;
        embed.ids = ids;
        embed.n = n;
        embed.table = *m;
        embed.scale = 1.5f;
        embed.out = out.get();
        be->Embed(embed);
        ExpectNoError(*be);
        got.push_back(out.Read());
      }
      EXPECT_TRUE(SameBits(got[0], got[1]));
      // Rounding did happen (the comparison is of the storage path).
      if (s != Storage::kF32) {
        EXPECT_NE(rounded, table);
      }
    }
  }
}

TEST(DenseKernelsEmuTest, NormsMatch) {
  const int n = 5, ld = 800;
  // d = 768 (three passes of 256 threads), 300 (a partial second pass), 40
  // (two warps), 16 (one warp, half idle).
  for (const int d : {768, 300, 40, 16}) {
    SCOPED_TRACE(testing::Message() << "d=" << d);
    const std::vector<float> x = Random(n * ld, 2 + d, -3.0f, 3.0f),
                             w = Random(d, 3 + d), b = Random(d, 4 + d);
    // A mean far from zero, which LayerNorm's two passes must remove.
    std::vector<float> shifted = x;
    for (float& v : shifted) v += 5.0f;
    std::vector<std::vector<std::vector<float>>> got(2);
    auto cpu = MakeCpuBackend(1);
    DenseEmulation emu(Storage::kF32);
    int side = 0;
    for (Backend* be :
         {static_cast<Backend*>(cpu.get()), static_cast<Backend*>(&emu)}) {
      Array xa(*be, x), sa(*be, shifted), wa(*be, w), ba(*be, b),
          o1(*be, std::vector<float>(n * d, 7.0f)),
          o2(*be, std::vector<float>(n * d, 7.0f)), o3(*be, x),
          o4(*be, std::vector<float>(n * 50, 7.0f)),
          o5(*be, std::vector<float>(n * d, 7.0f)),
          o6(*be, std::vector<float>(n * d, 7.0f)),
          o7(*be, std::vector<float>(n * d, 7.0f));
      NormParams norm;
      norm.x = xa.get();
      norm.ldx = d;
      norm.n = n;
      norm.d = d;
      norm.w = wa.get();
      norm.eps = 1e-5f;
      norm.out = o1.get();
      norm.ldo = d;
      be->RmsNorm(norm);
      NormParams norm2;
      norm2.x = xa.get();
      norm2.ldx = d;
      norm2.n = n;
      norm2.d = d;
      norm2.w = nullptr;
      norm2.eps = 1e-5f;
      norm2.out = o2.get();
      norm2.ldo = d;
      be->RmsNorm(norm2);
      // In place on a column slice, as Jamba's dt/B/C norms.
      NormParams norm3;
      norm3.x = o3.get() + 8;
      norm3.ldx = ld;
      norm3.n = n;
      norm3.d = 16;
      norm3.w = wa.get();
      norm3.eps = 1e-6f;
      norm3.out = o3.get() + 8;
      norm3.ldo = ld;
      be->RmsNorm(norm3);
      // Out of place between different strides.
      NormParams norm4;
      norm4.x = xa.get() + 3;
      norm4.ldx = ld;
      norm4.n = n;
      norm4.d = std::min(d, 40);
      norm4.w = wa.get();
      norm4.eps = 1e-6f;
      norm4.out = o4.get() + 1;
      norm4.ldo = 50;
      be->RmsNorm(norm4);
      NormParams norm5;
      norm5.x = sa.get();
      norm5.ldx = d;
      norm5.n = n;
      norm5.d = d;
      norm5.w = wa.get();
      norm5.b = ba.get();
      norm5.eps = 1e-5f;
      norm5.out = o5.get();
      norm5.ldo = d;
      be->LayerNorm(norm5);
      NormParams norm6;
      norm6.x = xa.get();
      norm6.ldx = d;
      norm6.n = n;
      norm6.d = d;
      norm6.w = wa.get();
      norm6.eps = 1e-5f;
      norm6.out = o6.get();
      norm6.ldo = d;
      be->LayerNorm(norm6);
      NormParams norm7;
      norm7.x = sa.get();
      norm7.ldx = d;
      norm7.n = n;
      norm7.d = d;
      norm7.w = nullptr;
      norm7.eps = 1e-5f;
      norm7.out = o7.get();
      norm7.ldo = d;
      be->LayerNorm(norm7);
      ExpectNoError(*be);
      for (Array* a : {&o1, &o2, &o3, &o4, &o5, &o6, &o7}) {
        got[side].push_back(a->Read());
      }
      ++side;
    }
    // The block reduction sums the squares in another order than the CPU's
    // (vectorised) loop: outputs of magnitude ~2 differ by a few ulp (seen:
    // RmsNorm 2.4e-7, LayerNorm 6.0e-7, whose mean is a second such sum).
    // A wrong row, column or stride is off by O(1).
    const char* what[] = {"rms",    "rms no w", "strided in place", "strided",
                          "ln w b", "ln w",     "ln plain"};
    for (size_t i = 0; i < got[0].size(); ++i) {
      const float tol = i < 4 ? 4e-7f : 8e-7f;
      EXPECT_LE(MaxAbsDiff(got[0][i], got[1][i]), tol) << what[i];
    }
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
        std::vector<std::vector<float>> results(9);
        for (int n = 1; n <= 8; ++n) {
          Array xc(*cpu, x), bc(*cpu, bias), yc(*cpu, y0);
          Array xe(emu, x), be(emu, bias), ye(emu, y0);
          GemmParams cm2;
          cm2.x = xc.get();
          cm2.ldx = ldx;
          cm2.n = n;
          cm2.w = *cm;
          cm2.bias = with_bias ? bc.get() : nullptr;
          cm2.y = yc.get();
          cm2.ldy = ldy;
          cm2.accumulate = accumulate;
          cpu->Gemm(cm2);
          GemmParams em2;
          em2.x = xe.get();
          em2.ldx = ldx;
          em2.n = n;
          em2.w = em;
          em2.bias = with_bias ? be.get() : nullptr;
          em2.y = ye.get();
          em2.ldy = ldy;
          em2.accumulate = accumulate;
          emu.Gemm(em2);
          ExpectNoError(emu);
          EXPECT_TRUE(EndsWith(emu::State().last_kernel,
                               shape.vector ? "true>" : "false>"))
              << emu::State().last_kernel;
          results[n] = ye.Read();
          EXPECT_LE(MaxAbsDiff(yc.Read(), results[n]), shape.tol) << "n=" << n;
        }
        if (s != Storage::kF32 && cols == 768) {
          // The kernel did read the rounded weights: the CPU on the fp32
          // ones is measurably further off.
          auto plain = cpu->UploadMatrix(w.data(), rows, cols);
          ASSERT_TRUE(plain.ok());
          Array xc(*cpu, x), bc(*cpu, bias), yc(*cpu, y0);
          GemmParams plain2;
          plain2.x = xc.get();
          plain2.ldx = ldx;
          plain2.n = 8;
          plain2.w = *plain;
          plain2.bias = with_bias ? bc.get() : nullptr;
          plain2.y = yc.get();
          plain2.ldy = ldy;
          plain2.accumulate = accumulate;
          cpu->Gemm(plain2);
          EXPECT_GT(MaxAbsDiff(yc.Read(), results[8]), 1e-3f);
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
  const int rows = 16, cols = 768;
  const std::vector<float> w = Random(rows * cols, 21);
  auto cpu = MakeCpuBackend(1);
  DenseEmulation emu(Storage::kBf16);
  auto cm = cpu->UploadMatrix(w.data(), rows, cols);
  auto fp32 = emu.UploadMatrixFp32(w.data(), rows, cols);
  auto bf16 = emu.UploadMatrix(w.data(), rows, cols);
  ASSERT_TRUE(cm.ok() && fp32.ok() && bf16.ok());
  EXPECT_TRUE(fp32->fp32);
  EXPECT_FALSE(bf16->fp32);
  for (const int n : {1, 8}) {
    const std::vector<float> x = Random(n * cols, 22 + n);
    std::vector<std::vector<float>> got;
    for (const auto& [be, m] :
         {std::pair<Backend*, const Matrix*>{cpu.get(), &*cm},
          {&emu, &*fp32},
          {&emu, &*bf16}}) {
      Array xa(*be, x), ya(*be, n * rows);
      GemmParams m2;
      m2.x = xa.get();
      m2.ldx = cols;
      m2.n = n;
      m2.w = *m;
      m2.y = ya.get();
      m2.ldy = rows;
      be->Gemm(m2);
      ExpectNoError(*be);
      got.push_back(ya.Read());
    }
    // As the GEMV test's 768 columns (seen: 3.8e-6).
    EXPECT_LE(MaxAbsDiff(got[0], got[1]), 1e-5f) << "n=" << n;
    EXPECT_GT(MaxAbsDiff(got[0], got[2]), 1e-3f) << "n=" << n;
  }
}

// n == 0 (and a zero-width scatter) launch nothing, as dense_kernels.h says.
TEST(DenseKernelsEmuTest, EmptyCallsLaunchNothing) {
  DenseEmulation emu(Storage::kBf16);
  const std::vector<float> w = Random(8 * 16, 1);
  const Matrix m = emu.UploadAt(w.data(), 8, 16, Storage::kBf16, 0);
  Array x(emu, 16), y(emu, 8);
  const int64_t launches = emu::State().launches;
  GemmParams m3;
  m3.x = x.get();
  m3.ldx = 16;
  m3.n = 0;
  m3.w = m;
  m3.y = y.get();
  m3.ldy = 8;
  emu.Gemm(m3);
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
  NormParams norm8;
  norm8.x = x.get();
  norm8.ldx = 16;
  norm8.n = 0;
  norm8.d = 16;
  norm8.w = nullptr;
  norm8.eps = 1e-5f;
  norm8.out = y.get();
  norm8.ldo = 16;
  emu.RmsNorm(norm8);
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
  const int n = 6, lda = 320;
  const int32_t rows[] = {4, 1, 4, 0};
  const float scales[] = {0.5f, -2.0f, 0.25f, 1.5f};
  const int m = 4;
  for (const int d : {33, 300}) {
    const int f = d + 7;  // ActivateMul's width
    const std::vector<float> a = Random(n * lda, 9 + d, -4.0f, 4.0f),
                             b = Random(n * lda, 10 + d), v = Random(d, 11 + d),
                             src = Random(m * d, 12 + d);
    for (const Activation act :
         {Activation::kGelu, Activation::kGeluTanh, Activation::kRelu,
          Activation::kSilu, Activation::kSigmoid, Activation::kIdentity}) {
      SCOPED_TRACE(testing::Message()
                   << "act=" << static_cast<int>(act) << " d=" << d);
      std::vector<std::vector<std::vector<float>>> got(2);
      auto cpu = MakeCpuBackend(1);
      DenseEmulation emu(Storage::kF32);
      int side = 0;
      for (Backend* be :
           {static_cast<Backend*>(cpu.get()), static_cast<Backend*>(&emu)}) {
        Array aa(*be, a), bb(*be, b), o1(*be, b), o2(*be, b), o3(*be, a),
            o4(*be, a), g(*be, m * d), dst(*be, Random(n * (d + 3), 13)),
            sa(*be, src), va(*be, v);
        // With b, accumulating; without b, overwriting.
        ActivateMulParams act2;
        act2.a = aa.get();
        act2.lda = lda;
        act2.b = bb.get();
        act2.ldb = lda;
        act2.n = n;
        act2.f = f;
        act2.act = act;
        act2.out = o1.get();
        act2.ldo = lda;
        act2.accumulate = true;
        be->ActivateMul(act2);
        ActivateMulParams act3;
        act3.a = aa.get();
        act3.lda = lda;
        act3.ldb = 0;
        act3.n = n;
        act3.f = f;
        act3.act = act;
        act3.out = o2.get();
        act3.ldo = lda;
        be->ActivateMul(act3);
        // In place (out aliases a), with and without accumulation.
        ActivateMulParams act4;
        act4.a = o3.get();
        act4.lda = lda;
        act4.b = bb.get();
        act4.ldb = lda;
        act4.n = n;
        act4.f = f;
        act4.act = act;
        act4.out = o3.get();
        act4.ldo = lda;
        be->ActivateMul(act4);
        ActivateMulParams act5;
        act5.a = o4.get();
        act5.lda = lda;
        act5.ldb = 0;
        act5.n = n;
        act5.f = f;
        act5.act = act;
        act5.out = o4.get();
        act5.ldo = lda;
        act5.accumulate = true;
        be->ActivateMul(act5);
        GatherRowsParams gather;
        gather.x = aa.get();
        gather.d = d;
        gather.rows = rows;
        gather.m = m;
        gather.out = g.get();
        be->GatherRows(gather);
        AddBiasParams add_bias;
        add_bias.y = dst.get();
        add_bias.ldy = d + 3;
        add_bias.n = n;
        add_bias.d = d;
        add_bias.v = va.get();
        be->AddBias(add_bias);
        ScatterAddParams scatter2;
        scatter2.src = sa.get();
        scatter2.d = d;
        scatter2.rows = rows;
        scatter2.scales = scales;
        scatter2.m = m;
        scatter2.dst = dst.get();
        scatter2.lddst = d + 3;
        be->ScatterAddScaled(scatter2);
        ExpectNoError(*be);
        for (Array* arr : {&o1, &o2, &o3, &o4, &g, &dst}) {
          got[side].push_back(arr->Read());
        }
        ++side;
      }
      // Both sides evaluate op_math::Activate per element with the same
      // scalar libm calls; only the tanh GELU differs, whose cubic the CPU
      // build's -ffast-math may reassociate (seen: 2.4e-7 on outputs up to
      // ~5, 1 ulp). Everything else, the copies and the in-order scatter
      // included, is bit for bit the same.
      const char* what[] = {"act*b acc",        "act",    "act*b in place",
                            "act acc in place", "gather", "bias+scatter"};
      for (size_t i = 0; i < got[0].size(); ++i) {
        if (i < 4 && act == Activation::kGeluTanh) {
          EXPECT_LE(MaxAbsDiff(got[0][i], got[1][i]), 5e-7f) << what[i];
        } else {
          EXPECT_TRUE(SameBits(got[0][i], got[1][i]))
              << what[i] << ": " << MaxAbsDiff(got[0][i], got[1][i]);
        }
      }
    }
  }
}

TEST(DenseKernelsEmuTest, MoeRouteMatches) {
  // 37 rows: one partial block; 200: a second block of 128 threads.
  for (const int n : {37, 200}) {
    for (const auto& [x, routing, k, renorm] :
         {std::tuple{8, MoeRouting::kSoftmaxTopK, 1, false},
          std::tuple{8, MoeRouting::kSoftmaxTopK, 2, true},
          std::tuple{5, MoeRouting::kSoftmaxTopK, 3, false},
          std::tuple{8, MoeRouting::kReluDynamic, 8, false}}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " x=" << x << " k=" << k
                                      << " renorm=" << renorm);
      std::vector<float> logits = Random(n * x, 13 + n, -3.0f, 3.0f);
      // Ties (to the lower expert) and rows with no positive logit.
      for (int e = 0; e < x; ++e) logits[e] = 0.5f;
      for (int e = 0; e < x; ++e) logits[x + e] = -1.0f - e;
      std::vector<std::vector<float>> gates;
      std::vector<std::vector<uint8_t>> experts;
      auto cpu = MakeCpuBackend(1);
      DenseEmulation emu(Storage::kF32);
      for (Backend* be :
           {static_cast<Backend*>(cpu.get()), static_cast<Backend*>(&emu)}) {
        Array l(*be, logits), e(*be, std::vector<float>(n * k, 7.0f)),
            g(*be, std::vector<float>(n * k, 7.0f));
        MoeRouteParams route2;
        route2.logits = l.get();
        route2.n = n;
        route2.x = x;
        route2.routing = routing;
        route2.top_k = k;
        route2.renormalize = renorm;
        route2.experts = reinterpret_cast<int32_t*>(e.get());
        route2.gates = g.get();
        be->MoeRoute(route2);
        ExpectNoError(*be);
        experts.push_back(e.ReadBytes());
        gates.push_back(g.Read());
      }
      // The same decisions; the CPU build's -ffast-math may reorder the
      // softmax's sum and turn its divisions into reciprocal products, so
      // gates below 1 differ by up to 2 ulp (seen: 1.2e-7).
      EXPECT_EQ(experts[0], experts[1]);
      EXPECT_LE(MaxAbsDiff(gates[0], gates[1]), 2e-7f);
    }
  }
}

}  // namespace
}  // namespace seqboat::emu_test
