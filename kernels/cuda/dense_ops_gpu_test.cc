// Dense ops on CUDA equal the CPU backend's; GEMMs within 1e-4 with fp32
// weights and within bf16 rounding with bf16 weights; a recorded step replays
// with fresh descriptors.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/testing/gpu_test_util.h"

namespace seqboat::gpu_test {
namespace {

TEST(DenseOpsGpuTest, EmbedGathersScaledRows) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  const int v = 50, d = 70, n = 9;
  const std::vector<float> table = Random(v * d, 1);
  const int32_t ids[n] = {0, 49, 3, 3, 17, 2, 48, 0, 25};
  std::vector<std::vector<float>> got;
  for (Backend* be : {p.cpu.get(), p.cuda.get()}) {
    auto m = be->UploadMatrix(table.data(), v, d);
    ASSERT_TRUE(m.ok()) << m.status();
    Array out(*be, n * d);
    be->Embed(ids, n, *m, 1.5f, out.get());
    got.push_back(out.Read());
  }
  EXPECT_EQ(MaxAbsDiff(got[0], got[1]), 0.0f);
}

TEST(DenseOpsGpuTest, NormsMatch) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  const int n = 5, d = 768, ld = 800;
  const std::vector<float> x = Random(n * ld, 2, -3, 3), w = Random(d, 3),
                           b = Random(d, 4);
  std::vector<std::vector<float>> rms, strided, ln;
  for (Backend* be : {p.cpu.get(), p.cuda.get()}) {
    Array xa(*be, x), wa(*be, w), ba(*be, b), o1(*be, n * d), o2(*be, x),
        o3(*be, n * d);
    be->RmsNorm(xa.get(), n, d, wa.get(), 1e-5f, o1.get());
    be->RmsNormStrided(o2.get() + 8, ld, n, 16, wa.get(), 1e-6f, o2.get() + 8,
                       ld);
    be->LayerNorm(xa.get(), n, d, wa.get(), ba.get(), 1e-5f, o3.get());
    rms.push_back(o1.Read());
    strided.push_back(o2.Read());
    ln.push_back(o3.Read());
  }
  EXPECT_LT(MaxAbsDiff(rms[0], rms[1]), 1e-5f);
  EXPECT_LT(MaxAbsDiff(strided[0], strided[1]), 1e-5f);
  EXPECT_LT(MaxAbsDiff(ln[0], ln[1]), 1e-5f);
}

// fp32 weights: the same sums in another order, 1e-4. bf16 weights: each
// product carries the rounding of W and of x (2^-9 relative each), so the
// error of a k-term dot product of unit-scale terms grows like 2^-8 sqrt(k).
TEST(DenseOpsGpuTest, GemmWithinTheStatedTolerance) {
  // cols 768 takes the vector GEMV path for n <= 8; 77 the scalar one.
  for (const int cols : {768, 77}) {
    const int rows = 300, ld = 800;
    const std::vector<float> w = Random(rows * cols, 5), bias = Random(rows, 6);
    for (int n : {1, 3, 8, 9, 64}) {
      const std::vector<float> x = Random(n * ld, 7 + n),
                               y0 = Random(n * rows, 8);
      std::vector<std::vector<float>> got;
      auto cpu = MakeCpuBackend(1);
      for (CudaWeights wt :
           {CudaWeights::kF32, CudaWeights::kF32, CudaWeights::kBf16}) {
        std::unique_ptr<Backend> owned;
        Backend* be = cpu.get();
        if (got.size() > 0) {
          owned = MakeCuda(wt);
          ASSERT_NE(owned, nullptr);
          be = owned.get();
        }
        auto m = be->UploadMatrix(w.data(), rows, cols);
        ASSERT_TRUE(m.ok());
        Array xa(*be, x), ba(*be, bias), ya(*be, y0);
        be->Gemm(xa.get(), ld, n, *m, ba.get(), ya.get(), rows, true);
        got.push_back(ya.Read());
      }
      EXPECT_LT(MaxAbsDiff(got[0], got[1]), 1e-4f) << "fp32, n=" << n;
      EXPECT_LT(MaxAbsDiff(got[0], got[2]),
                std::ldexp(1.0f, -8) * std::sqrt(float(cols)) * 4)
          << "bf16, n=" << n << ", cols=" << cols;
    }
  }
}

// The GEMV path sums each input row in an order that does not depend on how
// many rows are in the batch, so padding a decode batch changes nothing.
TEST(DenseOpsGpuTest, SmallBatchGemmIsBatchInvariant) {
  auto be = MakeCuda(CudaWeights::kBf16);
  ASSERT_NE(be, nullptr);
  const int rows = 513, cols = 1024;
  const std::vector<float> w = Random(rows * cols, 21),
                           x = Random(8 * cols, 22);
  auto m = be->UploadMatrix(w.data(), rows, cols);
  ASSERT_TRUE(m.ok());
  Array xa(*be, x), one(*be, rows), eight(*be, 8 * rows);
  be->Gemm(xa.get(), cols, 1, *m, nullptr, one.get(), rows, false);
  be->Gemm(xa.get(), cols, 8, *m, nullptr, eight.get(), rows, false);
  const std::vector<float> a = one.Read(), b = eight.Read();
  EXPECT_EQ(a, std::vector<float>(b.begin(), b.begin() + rows));
}

// A router kept in fp32 on a bf16 backend multiplies like the fp32 backend,
// on the GEMV (n <= 8) and cuBLAS paths alike.
TEST(DenseOpsGpuTest, Fp32MatrixOnBf16BackendKeepsFp32Accuracy) {
  const int rows = 16, cols = 768;
  const std::vector<float> w = Random(rows * cols, 21);
  for (int n : {1, 8, 40}) {
    const std::vector<float> x = Random(n * cols, 22 + n);
    std::vector<std::vector<float>> got;
    auto cpu = MakeCpuBackend(1);
    auto bf16 = MakeCuda(CudaWeights::kBf16);
    ASSERT_NE(bf16, nullptr);
    for (int i = 0; i < 3; ++i) {
      Backend* be = i == 0 ? cpu.get() : bf16.get();
      auto m = i == 2 ? be->UploadMatrix(w.data(), rows, cols)
                      : be->UploadMatrixFp32(w.data(), rows, cols);
      ASSERT_TRUE(m.ok()) << m.status();
      EXPECT_EQ(m->fp32, i == 1);
      Array xa(*be, x), ya(*be, n * rows);
      be->Gemm(xa.get(), cols, n, *m, nullptr, ya.get(), rows, false);
      got.push_back(ya.Read());
    }
    EXPECT_LT(MaxAbsDiff(got[0], got[1]), 1e-4f) << "n=" << n;
    // The rounded copy is measurably further off: the flag took effect.
    EXPECT_GT(MaxAbsDiff(got[0], got[2]), 1e-3f) << "n=" << n;
  }
}

TEST(DenseOpsGpuTest, RowOpsMatch) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  const int n = 6, d = 33, f = 40;
  const std::vector<float> a = Random(n * 48, 9, -4, 4), b = Random(n * 48, 10),
                           v = Random(d, 11), src = Random(3 * d, 12);
  const int32_t rows[3] = {4, 1, 4};
  const float scales[3] = {0.5f, -2.0f, 0.25f};
  for (Activation act :
       {Activation::kGelu, Activation::kGeluTanh, Activation::kRelu,
        Activation::kSilu, Activation::kSigmoid, Activation::kIdentity}) {
    std::vector<std::vector<float>> got;
    for (Backend* be : {p.cpu.get(), p.cuda.get()}) {
      Array aa(*be, a), bb(*be, b), out(*be, b), g(*be, 3 * d),
          dst(*be, std::vector<float>(n * d, 1.0f)), sa(*be, src), va(*be, v);
      be->ActivateMul(aa.get(), 48, bb.get(), 48, n, f, act, out.get(), 48,
                      true);
      be->GatherRows(aa.get(), d, rows, 3, g.get());
      be->AddBias(dst.get(), d, n, d, va.get());
      be->ScatterAddScaled(sa.get(), d, rows, scales, 3, dst.get(), d);
      std::vector<float> all = out.Read(), gg = g.Read(), dd = dst.Read();
      all.insert(all.end(), gg.begin(), gg.end());
      all.insert(all.end(), dd.begin(), dd.end());
      got.push_back(all);
    }
    // Outputs reach about 5; CUDA's expf/erff/tanhf are within 2 ulp and
    // glibc's within 1, so a few ulp of 5 (4.8e-7 each) may separate them.
    // A wrong formula is off by far more than 1e-5.
    EXPECT_LT(MaxAbsDiff(got[0], got[1]), 1e-5f) << static_cast<int>(act);
  }
}

TEST(DenseOpsGpuTest, MoeRouteMatches) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  const int n = 37, x = 8;
  const std::vector<float> logits = Random(n * x, 13, -3, 3);
  for (auto [routing, k, renorm] :
       {std::tuple{MoeRouting::kSoftmaxTopK, 1, false},
        std::tuple{MoeRouting::kSoftmaxTopK, 2, true},
        std::tuple{MoeRouting::kReluDynamic, x, false}}) {
    std::vector<std::vector<float>> gates;
    std::vector<std::vector<uint8_t>> experts;
    for (Backend* be : {p.cpu.get(), p.cuda.get()}) {
      Array l(*be, logits), e(*be, n * k), g(*be, n * k);
      be->MoeRoute(l.get(), n, x, routing, k, renorm,
                   reinterpret_cast<int32_t*>(e.get()), g.get());
      experts.push_back(e.ReadBytes());
      gates.push_back(g.Read());
    }
    EXPECT_EQ(experts[0], experts[1]);
    EXPECT_LT(MaxAbsDiff(gates[0], gates[1]), 1e-6f);
  }
}

// The same recorded step replayed with other token ids gives what running it
// eagerly gives: descriptors are re-read from staging on every replay.
TEST(DenseOpsGpuTest, ReplayedStepRereadsItsDescriptors) {
  auto rec = MakeCuda(CudaWeights::kF32, /*graphs=*/true);
  auto eager = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  ASSERT_NE(rec, nullptr);
  ASSERT_NE(eager, nullptr);
  const int v = 64, d = 96, n = 4;
  const std::vector<float> table = Random(v * d, 14), w = Random(d, 15);
  std::vector<std::vector<float>> outs[2];
  int which = 0;
  for (Backend* be : {rec.get(), eager.get()}) {
    auto m = be->UploadMatrix(table.data(), v, d);
    ASSERT_TRUE(m.ok());
    Array wa(*be, w), e(*be, n * d), h(*be, n * d), logits(*be, n * v);
    for (int step = 0; step < 4; ++step) {
      int32_t ids[n];
      for (int i = 0; i < n; ++i) ids[i] = (step * 11 + i * 5) % v;
      ASSERT_TRUE(be->RunCaptured(n, [&] {
                      be->Embed(ids, n, *m, 1.0f, e.get());
                      be->RmsNorm(e.get(), n, d, wa.get(), 1e-5f, h.get());
                      be->Gemm(h.get(), d, n, *m, nullptr, logits.get(), v,
                               false);
                      return absl::OkStatus();
                    }).ok());
      outs[which].push_back(logits.Read());
      ASSERT_TRUE(be->TakeError().ok());
    }
    ++which;
  }
  for (int step = 0; step < 4; ++step) {
    EXPECT_LT(MaxAbsDiff(outs[0][step], outs[1][step]), 1e-5f) << step;
  }
  EXPECT_GT(MaxAbsDiff(outs[1][0], outs[1][1]), 0.0f);  // inputs did change
}

}  // namespace
}  // namespace seqboat::gpu_test
