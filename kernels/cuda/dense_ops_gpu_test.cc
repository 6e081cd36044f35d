// Dense ops on CUDA equal the CPU backend's; GEMMs within 1e-4 with fp32
// weights, within bf16 rounding with bf16 weights, and fp8 weights against
// the CPU on the same quantised values; the GEMV batch invariant and equal
// under replay; a recorded step replays with fresh descriptors. The cases the
// emulation test runs too are kernels/cuda/testing/dense_cases.h.
#include <cmath>
#include <cstdint>
#include <vector>

#include "base/dtype_convert.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/fp8_weights.h"
#include "kernels/cuda/testing/dense_cases.h"
#include "kernels/cuda/testing/gpu_test_util.h"
#include "kernels/cuda/testing/stored_values.h"

namespace seqboat::gpu_test {
namespace {

namespace dense = parity::dense;
using parity::Bound;

TEST(DenseOpsGpuTest, EmbedGathersScaledRows) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  const int d = 70;
  const std::vector<float> table = Random(dense::kEmbedRows * d, 1);
  dense::ExpectEmbedMatches(*p.cpu, *p.cuda, table, table, d);
}

TEST(DenseOpsGpuTest, NormsMatch) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  dense::ExpectNormsMatch(*p.cpu, *p.cuda, /*n=*/5, /*d=*/768, /*ld=*/800,
                          /*seed=*/2, Bound::Below(1e-5f), Bound::Below(1e-5f));
}

// fp32 weights: the same sums in another order, 1e-4. bf16 weights: each
// product carries the rounding of W and of x (2^-9 relative each), so the
// error of a k-term dot product of unit-scale terms grows like 2^-8 sqrt(k).
TEST(DenseOpsGpuTest, GemmWithinTheStatedTolerance) {
  // cols 768 takes the vector GEMV path for n <= 16; 77 the scalar one;
  // 17 and 64 rows take cuBLAS.
  for (const int cols : {768, 77}) {
    const int rows = 300, ld = 800;
    const std::vector<float> w = Random(rows * cols, 5), bias = Random(rows, 6);
    for (int n : {1, 3, 8, 9, 16, 17, 64}) {
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
        got.push_back(dense::GemmOn(*be, *m, x, ld, n, y0, rows, &bias,
                                    /*accumulate=*/true));
      }
      EXPECT_LT(MaxAbsDiff(got[0], got[1]), 1e-4f) << "fp32, n=" << n;
      EXPECT_LT(MaxAbsDiff(got[0], got[2]),
                std::ldexp(1.0f, -8) * std::sqrt(float(cols)) * 4)
          << "bf16, n=" << n << ", cols=" << cols;
    }
  }
}

// What the fp8 upload makes of w: each code times its row's scale.
std::vector<float> Fp8Values(const std::vector<float>& w, int rows, int cols) {
  return parity::StoredValues(cuda::Storage::kFp8E4m3, w, rows, cols);
}

// fp8 weights against the CPU on the same quantised values: the GEMV (n <=
// 16: 768 columns vector, 77 scalar, 16384 over 5 rows split across blocks)
// multiplies the same products in fp32, so only the order of sums differs;
// cuBLAS (n = 17, 64) widens the matrix to bf16 (the quantised value times
// its scale, rounded) and the inputs too: bf16's bound above.
TEST(DenseOpsGpuTest, Fp8GemmMatchesTheQuantisedMatrix) {
  for (const auto& [rows, cols] :
       {std::pair{300, 768}, std::pair{300, 77}, std::pair{5, 16384}}) {
    const int ld = cols + 32;
    const std::vector<float> w = Random(rows * cols, 31),
                             bias = Random(rows, 32),
                             wq = Fp8Values(w, rows, cols);
    auto cpu = MakeCpuBackend(1);
    auto fp8 = MakeCuda(CudaWeights::kFp8);
    ASSERT_NE(fp8, nullptr);
    auto cm = cpu->UploadMatrix(wq.data(), rows, cols);
    auto gm = fp8->UploadMatrix(w.data(), rows, cols);
    ASSERT_TRUE(cm.ok() && gm.ok());
    for (int n : {1, 9, 16, 17, 64}) {
      const std::vector<float> x = Random(n * ld, 33 + n),
                               y0 = Random(n * rows, 34);
      const std::vector<float> want =
          dense::GemmOn(*cpu, *cm, x, ld, n, y0, rows, &bias, true);
      const std::vector<float> got =
          dense::GemmOn(*fp8, *gm, x, ld, n, y0, rows, &bias, true);
      ASSERT_TRUE(fp8->TakeError().ok());
      const float tol = n <= 16
                            ? 1e-4f * std::sqrt(float(cols))
                            : std::ldexp(1.0f, -8) * std::sqrt(float(cols)) * 4;
      EXPECT_LT(MaxAbsDiff(want, got), tol) << "n=" << n << " cols=" << cols;
    }
  }
}

TEST(DenseOpsGpuTest, Fp8EmbedGathersQuantisedRows) {
  auto cpu = MakeCpuBackend(1);
  auto fp8 = MakeCuda(CudaWeights::kFp8);
  ASSERT_NE(fp8, nullptr);
  const int d = 70;
  const std::vector<float> table = Random(dense::kEmbedRows * d, 1);
  dense::ExpectEmbedMatches(*cpu, *fp8, Fp8Values(table, dense::kEmbedRows, d),
                            table, d);
}

// The GEMV path sums each input row in an order that does not depend on how
// many rows are in the batch, so padding a decode batch changes nothing; a
// recorded step replays to the same bits. For every weight type, with
// columns split across blocks (5 rows) or not (513).
TEST(DenseOpsGpuTest, SmallBatchGemmIsBatchInvariant) {
  for (const CudaWeights wt : {CudaWeights::kBf16, CudaWeights::kFp8}) {
    for (const auto& [rows, cols] :
         {std::pair{513, 1024}, std::pair{5, 16384}}) {
      auto be = MakeCuda(wt, /*graphs=*/true);
      ASSERT_NE(be, nullptr);
      const int top = 16;
      const std::vector<float> w = Random(rows * cols, 21),
                               x = Random(top * cols, 22);
      auto m = be->UploadMatrix(w.data(), rows, cols);
      ASSERT_TRUE(m.ok());
      Array xa(*be, x), one(*be, rows), all(*be, top * rows),
          replayed(*be, top * rows);
      be->Gemm(dense::GemmOf(xa.get(), cols, 1, *m, one.get(), rows));
      be->Gemm(dense::GemmOf(xa.get(), cols, top, *m, all.get(), rows));
      // A recording per staging half, then replays, the last into zeros.
      for (int pass = 0; pass < 4; ++pass) {
        if (pass == 3) be->Zero(replayed.get(), top * rows * sizeof(float));
        ASSERT_TRUE(be->RunCaptured(top, [&] {
                        be->Gemm(dense::GemmOf(xa.get(), cols, top, *m,
                                               replayed.get(), rows));
                        return absl::OkStatus();
                      }).ok());
      }
      ASSERT_TRUE(be->TakeError().ok());
      const std::vector<float> a = one.Read(), b = all.Read();
      EXPECT_EQ(a, std::vector<float>(b.begin(), b.begin() + rows))
          << rows << "x" << cols;
      EXPECT_EQ(b, replayed.Read()) << rows << "x" << cols;
    }
  }
}

// A router kept in fp32 on a bf16 backend multiplies like the fp32 backend,
// on the GEMV (n <= 8) and cuBLAS paths alike.
TEST(DenseOpsGpuTest, Fp32MatrixOnBf16BackendKeepsFp32Accuracy) {
  for (int n : {1, 8, 40}) {
    auto cpu = MakeCpuBackend(1);
    auto bf16 = MakeCuda(CudaWeights::kBf16);
    ASSERT_NE(bf16, nullptr);
    dense::ExpectFp32MatrixKeepsFp32Accuracy(*cpu, *bf16, n,
                                             Bound::Below(1e-4f));
  }
}

TEST(DenseOpsGpuTest, RowOpsMatch) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  const int n = 6, d = 33;
  dense::RowOpsCase c = dense::MakeRowOpsCase(
      n, d, /*f=*/40, /*ld=*/48, {4, 1, 4}, {0.5f, -2.0f, 0.25f}, /*seed=*/9);
  c.dst.assign(n * d, 1.0f);
  c.lddst = d;
  // Outputs reach about 5; CUDA's expf/erff/tanhf are within 2 ulp and
  // glibc's within 1, so a few ulp of 5 (4.8e-7 each) may separate them.
  // A wrong formula is off by far more than 1e-5.
  for (Activation act : dense::kActivations) {
    dense::ExpectRowOpsMatch(*p.cpu, *p.cuda, c, act, Bound::Below(1e-5f),
                             Bound::Below(1e-5f));
  }
}

TEST(DenseOpsGpuTest, MoeRouteMatches) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  const int n = 37, x = 8;
  const std::vector<float> logits = Random(n * x, 13, -3, 3);
  for (const dense::MoeRouteCase& c :
       {dense::MoeRouteCase{x, MoeRouting::kSoftmaxTopK, 1},
        dense::MoeRouteCase{x, MoeRouting::kSoftmaxTopK, 2,
                            /*renormalize=*/true},
        dense::MoeRouteCase{x, MoeRouting::kReluDynamic, x},
        dense::MoeRouteCase{x, MoeRouting::kSigmoidGroupTopK, 3, true, 4, 2,
                            Random(x, 5, -0.5f, 0.5f), 2.5f}}) {
    dense::ExpectMoeRouteMatches(*p.cpu, *p.cuda, logits, n, c,
                                 Bound::Below(1e-6f));
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
      ASSERT_TRUE(
          be->RunCaptured(n, [&] {
              EmbedParams embed;
              embed.ids = ids;
              embed.n = n;
              embed.table = *m;
              embed.out = e.get();
              be->Embed(embed);
              be->RmsNorm(
                  dense::NormOf(e.get(), h.get(), n, d, wa.get(), 1e-5f));
              be->Gemm(dense::GemmOf(h.get(), d, n, *m, logits.get(), v));
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
