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
    EmbedParams embed;
    embed.ids = ids;
    embed.n = n;
    embed.table = *m;
    embed.scale = 1.5f;
    embed.out = out.get();
    be->Embed(embed);
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
    norm2.x = o2.get() + 8;
    norm2.ldx = ld;
    norm2.n = n;
    norm2.d = 16;
    norm2.w = wa.get();
    norm2.eps = 1e-6f;
    norm2.out = o2.get() + 8;
    norm2.ldo = ld;
    be->RmsNorm(norm2);
    NormParams norm3;
    norm3.x = xa.get();
    norm3.ldx = d;
    norm3.n = n;
    norm3.d = d;
    norm3.w = wa.get();
    norm3.b = ba.get();
    norm3.eps = 1e-5f;
    norm3.out = o3.get();
    norm3.ldo = d;
    be->LayerNorm(norm3);
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
        GemmParams m2;
        m2.x = xa.get();
        m2.ldx = ld;
        m2.n = n;
        m2.w = *m;
        m2.bias = ba.get();
        m2.y = ya.get();
        m2.ldy = rows;
        m2.accumulate = true;
        be->Gemm(m2);
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
  GemmParams m3;
  m3.x = xa.get();
  m3.ldx = cols;
  m3.n = 1;
  m3.w = *m;
  m3.y = one.get();
  m3.ldy = rows;
  be->Gemm(m3);
  GemmParams m4;
  m4.x = xa.get();
  m4.ldx = cols;
  m4.n = 8;
  m4.w = *m;
  m4.y = eight.get();
  m4.ldy = rows;
  be->Gemm(m4);
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
      GemmParams m5;
      m5.x = xa.get();
      m5.ldx = cols;
      m5.n = n;
      m5.w = *m;
      m5.y = ya.get();
      m5.ldy = rows;
      be->Gemm(m5);
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
      ActivateMulParams act2;
      act2.a = aa.get();
      act2.lda = 48;
      act2.b = bb.get();
      act2.ldb = 48;
      act2.n = n;
      act2.f = f;
      act2.act = act;
      act2.out = out.get();
      act2.ldo = 48;
      act2.accumulate = true;
      be->ActivateMul(act2);
      GatherRowsParams gather;
      gather.x = aa.get();
      gather.d = d;
      gather.rows = rows;
      gather.m = 3;
      gather.out = g.get();
      be->GatherRows(gather);
      AddBiasParams add_bias;
      add_bias.y = dst.get();
      add_bias.ldy = d;
      add_bias.n = n;
      add_bias.d = d;
      add_bias.v = va.get();
      be->AddBias(add_bias);
      ScatterAddParams scatter;
      scatter.src = sa.get();
      scatter.d = d;
      scatter.rows = rows;
      scatter.scales = scales;
      scatter.m = 3;
      scatter.dst = dst.get();
      scatter.lddst = d;
      be->ScatterAddScaled(scatter);
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
      MoeRouteParams route;
      route.logits = l.get();
      route.n = n;
      route.x = x;
      route.routing = routing;
      route.top_k = k;
      route.renormalize = renorm;
      route.experts = reinterpret_cast<int32_t*>(e.get());
      route.gates = g.get();
      be->MoeRoute(route);
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
                      EmbedParams embed2;
                      embed2.ids = ids;
                      embed2.n = n;
                      embed2.table = *m;
                      embed2.scale = 1.0f;
                      embed2.out = e.get();
                      be->Embed(embed2);
                      NormParams norm4;
                      norm4.x = e.get();
                      norm4.ldx = d;
                      norm4.n = n;
                      norm4.d = d;
                      norm4.w = wa.get();
                      norm4.eps = 1e-5f;
                      norm4.out = h.get();
                      norm4.ldo = d;
                      be->RmsNorm(norm4);
                      GemmParams m6;
                      m6.x = h.get();
                      m6.ldx = d;
                      m6.n = n;
                      m6.w = *m;
                      m6.y = logits.get();
                      m6.ldy = v;
                      be->Gemm(m6);
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
