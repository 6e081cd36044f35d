// The fused decode GEMMs on a GPU (the cases of
// kernels/cuda/testing/gemv_fusion_cases.h, which the emulation test runs
// too): a pre-norm folded into the GEMV equals the norm kernel then the
// GEMV bit for bit, normed rows included, at the Mamba 130M / 1.4B and
// Mamba-2 130M input projections, batches 1..16 and 17 / 40 (the norm
// kernel then cuBLAS), fp32 / bf16 / fp8 weights; fp32 weights within
// the GEMV's tolerance of the CPU backend; the same at the other block
// kinds' first projections (attention, GDN, MLP, MoE router); a scaled
// residual add equals the GEMM then ScatterAddScaled bit for bit; recorded
// steps with the fold or the scaled add replay to the eager bits. GEMVs
// launched early (launch.cuh) wait for the kernel before them: a chain of
// dependent GEMVs gives the bits of ordinary launches, eager and recorded.
// Mamba-1's conv folded into in_proj's epilogue
// (kernels/cuda/testing/gemv_conv_cases.h) likewise: decode steps of the
// GEMV with the conv equal the GEMV then the conv kernel bit for bit (y,
// conv outputs, states), batches 1..16 with padding and 17 / 40 (cuBLAS
// then the conv kernel), with and without column splits, replayed steps
// equal eager ones.
#include <utility>
#include <vector>

#include "kernels/cuda/testing/dense_cases.h"
#include "kernels/cuda/testing/gemv_conv_cases.h"
#include "kernels/cuda/testing/gemv_fusion_cases.h"
#include "kernels/cuda/testing/gpu_test_util.h"

namespace seqboat::gpu_test {
namespace {

namespace fusion = parity::fusion;
using parity::SameBits;

// 1..16 take the GEMV, 17 and 40 the norm kernel then cuBLAS.
std::vector<int> Batches() {
  std::vector<int> ns;
  for (int n = 1; n <= 17; ++n) ns.push_back(n);
  ns.push_back(40);
  return ns;
}

// The fold's bits against the two ops, and fp32 weights against the CPU, at
// each projection shape in `shapes`.
void ExpectFoldedNormEqualsNormThenGemm(
    const std::vector<fusion::FoldShape>& shapes) {
  for (const fusion::FoldShape& shape : shapes) {
    const int rows = shape.rows, cols = shape.cols;
    const std::vector<float> w = Random(int64_t{rows} * cols, 41),
                             x = Random(40 * cols, 42, -3, 3),
                             nw = Random(cols, 43, 0.5f, 1.5f),
                             nb = Random(cols, 44);
    auto cpu = MakeCpuBackend(1);
    auto cm = cpu->UploadMatrix(w.data(), rows, cols);
    ASSERT_TRUE(cm.ok());
    Array cw(*cpu, nw), cb(*cpu, nb);
    for (const CudaWeights wt :
         {CudaWeights::kF32, CudaWeights::kBf16, CudaWeights::kFp8}) {
      auto be = MakeCuda(wt);
      ASSERT_NE(be, nullptr);
      auto m = be->UploadMatrix(w.data(), rows, cols);
      ASSERT_TRUE(m.ok());
      Array gw(*be, nw), gb(*be, nb);
      for (const NormKind kind : {NormKind::kRms, NormKind::kLayer}) {
        fusion::FoldNorm norm{kind, gw.get(), gb.get(), 1e-5f};
        fusion::FoldNorm cpu_norm{kind, cw.get(), cb.get(), 1e-5f};
        for (const int batch : Batches()) {
          SCOPED_TRACE(testing::Message()
                       << shape.name << " weights=" << int(wt)
                       << " kind=" << int(kind) << " n=" << batch);
          const fusion::FoldRun got =
              fusion::RunFold(*be, *m, norm, x, batch, nullptr);
          EXPECT_TRUE(SameBits(got.y_unfused, got.y_fused));
          EXPECT_TRUE(SameBits(got.u_unfused, got.u_fused));
          if (wt == CudaWeights::kF32) {
            const fusion::FoldRun want =
                fusion::RunFold(*cpu, *cm, cpu_norm, x, batch, nullptr);
            EXPECT_LT(MaxAbsDiff(want.y_fused, got.y_fused), 5e-4f);
          }
        }
      }
    }
  }
}

TEST(GemvFusionGpuTest, FoldedNormEqualsNormThenGemm) {
  ExpectFoldedNormEqualsNormThenGemm(
      {fusion::kMamba130m, fusion::kMamba1b4, fusion::kMamba2_130m});
}

// The other block kinds' first projections: attention's q, GDN's in_proj,
// an MLP's up and a MoE router at a Qwen3.5-like layer's sizes.
TEST(GemvFusionGpuTest, FoldedNormAtTheOtherBlocksShapes) {
  ExpectFoldedNormEqualsNormThenGemm({fusion::kQwenAttentionQ,
                                      fusion::kQwenGdnInProj, fusion::kMlpUp,
                                      fusion::kMoeRouter});
}

// A scaled residual add (GemmParams::residual_scale, Granite-4.0-H's 0.22)
// equals the GEMM into rows of its own then ScatterAddScaled bit for bit:
// the GEMV's epilogue at batches 1..16 (a column-split shape through the
// reduction kernel too), cuBLAS then ScatterAddScaled at 17 and 40; fp32
// weights within the GEMV's tolerance of the CPU backend.
TEST(GemvFusionGpuTest, ScaledResidualAddEqualsGemmThenScatterAdd) {
  constexpr float kScale = 0.22f;
  for (const auto& [rows, cols] :
       {std::pair{768, 1536}, std::pair{2048, 4096}, std::pair{5, 16384}}) {
    const std::vector<float> w = Random(int64_t{rows} * cols, 91),
                             x = Random(40 * cols, 92),
                             r = Random(40 * rows, 93, -4, 4),
                             bias = Random(rows, 94);
    auto cpu = MakeCpuBackend(1);
    auto cm = cpu->UploadMatrix(w.data(), rows, cols);
    ASSERT_TRUE(cm.ok());
    Array cb(*cpu, bias);
    for (const CudaWeights wt :
         {CudaWeights::kF32, CudaWeights::kBf16, CudaWeights::kFp8}) {
      auto be = MakeCuda(wt);
      ASSERT_NE(be, nullptr);
      auto m = be->UploadMatrix(w.data(), rows, cols);
      ASSERT_TRUE(m.ok());
      Array gb(*be, bias);
      for (const int batch : Batches()) {
        SCOPED_TRACE(testing::Message() << rows << "x" << cols << " weights="
                                        << int(wt) << " n=" << batch);
        const fusion::ScaledRun got =
            fusion::RunScaledAdd(*be, *m, x, r, batch, gb.get(), kScale);
        EXPECT_TRUE(SameBits(got.unfused, got.fused));
        if (wt == CudaWeights::kF32) {
          const fusion::ScaledRun want =
              fusion::RunScaledAdd(*cpu, *cm, x, r, batch, cb.get(), kScale);
          EXPECT_LT(MaxAbsDiff(want.fused, got.fused), 5e-4f);
        }
      }
    }
  }
}

// A recorded decode step holding the folded GEMV replays to the eager
// result, a batch of 16 to the same bits as a batch of 1 in its first row.
TEST(GemvFusionGpuTest, FoldedGemvReplaysToTheEagerBits) {
  const fusion::FoldShape shape = fusion::kMamba1b4;
  const int rows = shape.rows, cols = shape.cols, top = 16;
  auto be = MakeCuda(CudaWeights::kBf16, /*graphs=*/true);
  ASSERT_NE(be, nullptr);
  const std::vector<float> w = Random(int64_t{rows} * cols, 51),
                           x = Random(top * cols, 52, -3, 3),
                           nw = Random(cols, 53, 0.5f, 1.5f);
  auto m = be->UploadMatrix(w.data(), rows, cols);
  ASSERT_TRUE(m.ok());
  Array xa(*be, x), gw(*be, nw), u(*be, top * cols), eager(*be, top * rows),
      one(*be, rows), replayed(*be, top * rows);
  auto gemm = [&](int n, float* y) {
    GemmParams g;
    g.x = xa.get();
    g.ldx = cols;
    g.n = n;
    g.w = *m;
    g.y = y;
    g.ldy = rows;
    g.norm.kind = NormKind::kRms;
    g.norm.w = gw.get();
    g.norm.eps = 1e-5f;
    g.norm.out = u.get();
    g.norm.ldo = cols;
    be->Gemm(g);
  };
  gemm(top, eager.get());
  gemm(1, one.get());
  for (int pass = 0; pass < 4; ++pass) {
    if (pass == 3) be->Zero(replayed.get(), top * rows * sizeof(float));
    ASSERT_TRUE(be->RunCaptured(top, [&] {
                    gemm(top, replayed.get());
                    return absl::OkStatus();
                  }).ok());
  }
  ASSERT_TRUE(be->TakeError().ok());
  const std::vector<float> e = eager.Read();
  EXPECT_TRUE(SameBits(e, replayed.Read()));
  EXPECT_TRUE(SameBits(one.Read(), fusion::Head(e, 1, rows)));
}

// Each GEMV reads what the one before wrote (an in_proj-like 8192 x 2048
// matrix with its norm folded, then a 2048 x 8192 one adding into the
// residual it read), twelve times over: an early GEMV that read its input
// before the kernel before it finished would see a stale residual. Early
// launches on and off, eager and recorded, give the same bits.
TEST(GemvFusionGpuTest, EarlyGemvChainsEqualOrdinaryLaunches) {
  const int d = 2048, e = 8192, top = 16;
  const std::vector<float> w_in = Random(int64_t{e} * d, 61),
                           w_out = Random(int64_t{d} * e, 62, -0.02f, 0.02f),
                           r0 = Random(top * d, 63, -3, 3),
                           nw = Random(d, 64, 0.5f, 1.5f);
  std::vector<std::vector<float>> results;
  for (const bool early : {false, true}) {
    auto be = MakeCuda(CudaWeights::kBf16, /*graphs=*/true, early);
    ASSERT_NE(be, nullptr);
    auto a = be->UploadMatrix(w_in.data(), e, d);
    auto b = be->UploadMatrix(w_out.data(), d, e);
    ASSERT_TRUE(a.ok() && b.ok());
    Array r(*be, r0), gw(*be, nw), u(*be, top * d), h(*be, top * e);
    auto chain = [&](int n) {
      for (int layer = 0; layer < 12; ++layer) {
        GemmParams in = parity::dense::GemmOf(r.get(), d, n, *a, h.get(), e);
        in.norm.kind = NormKind::kRms;
        in.norm.w = gw.get();
        in.norm.eps = 1e-5f;
        in.norm.out = u.get();
        in.norm.ldo = d;
        be->Gemm(in);
        GemmParams out = parity::dense::GemmOf(h.get(), e, n, *b, r.get(), d);
        out.accumulate = true;
        be->Gemm(out);
      }
    };
    for (const int n : {1, top}) {
      SCOPED_TRACE(testing::Message() << "early=" << early << " n=" << n);
      const size_t bytes = r0.size() * sizeof(float);
      be->CopyToDevice(r.get(), r0.data(), bytes);
      chain(n);
      results.push_back(r.Read());
      // The recording, then replays from each staging half.
      for (int pass = 0; pass < 3; ++pass) {
        be->CopyToDevice(r.get(), r0.data(), bytes);
        ASSERT_TRUE(be->RunCaptured(n, [&] {
                        chain(n);
                        return absl::OkStatus();
                      }).ok());
        EXPECT_TRUE(SameBits(results.back(), r.Read())) << "pass " << pass;
      }
      ASSERT_TRUE(be->TakeError().ok());
    }
  }
  ASSERT_EQ(results.size(), 4u);
  EXPECT_TRUE(SameBits(results[0], results[2])) << "n=1, early vs ordinary";
  EXPECT_TRUE(SameBits(results[1], results[3])) << "n=16, early vs ordinary";
}

// Recorded steps with a scaled residual add replay to the eager bits: the
// GEMV's epilogue at 16 rows, and at 40 cuBLAS then ScatterAddScaled, whose
// rows and scales are staged again on every replay.
TEST(GemvFusionGpuTest, ScaledResidualAddReplaysToTheEagerBits) {
  const int rows = 2048, cols = 4096;
  auto be = MakeCuda(CudaWeights::kBf16, /*graphs=*/true);
  ASSERT_NE(be, nullptr);
  const std::vector<float> w = Random(int64_t{rows} * cols, 95),
                           x = Random(40 * cols, 96),
                           r = Random(40 * rows, 97, -4, 4);
  auto m = be->UploadMatrix(w.data(), rows, cols);
  ASSERT_TRUE(m.ok());
  for (const int n : {16, 40}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    Array xa(*be, x), eager(*be, r), replayed(*be, r);
    auto gemm = [&](float* y) {
      GemmParams g;
      g.x = xa.get();
      g.ldx = cols;
      g.n = n;
      g.w = *m;
      g.y = y;
      g.ldy = rows;
      g.accumulate = true;
      g.residual_scale = 0.22f;
      be->Gemm(g);
    };
    // Eager and recorded alike add three times into their residual.
    for (int pass = 0; pass < 3; ++pass) gemm(eager.get());
    for (int pass = 0; pass < 3; ++pass) {
      ASSERT_TRUE(be->RunCaptured(100 + n, [&] {
                      gemm(replayed.get());
                      return absl::OkStatus();
                    }).ok());
    }
    ASSERT_TRUE(be->TakeError().ok());
    EXPECT_TRUE(SameBits(eager.Read(), replayed.Read()));
  }
}

namespace conv_fold = parity::conv_fold;

// The conv's parameters on one backend.
struct ConvOn {
  ConvOn(Backend& be, const conv_fold::ConvInputs& in, bool conv_bias)
      : norm_w(be, in.norm_w), conv_w(be, in.conv_w), conv_b(be, in.conv_b) {
    cw.norm_w = norm_w.get();
    cw.conv_w = conv_w.get();
    cw.conv_b = conv_bias ? conv_b.get() : nullptr;
  }
  Array norm_w, conv_w, conv_b;
  conv_fold::ConvWeights cw;
};

TEST(GemvFusionGpuTest, FoldedConvEqualsGemvThenConvKernel) {
  for (const conv_fold::ConvShape& s :
       {conv_fold::kMamba130m, conv_fold::kMamba1b4,
        conv_fold::ConvShape{"e 32 x d 8192 (column splits)", 32, 8192}}) {
    const std::vector<int> ns = Batches();
    const conv_fold::ConvInputs in = conv_fold::MakeConvInputs(s, 40, 3);
    auto cpu = MakeCpuBackend(1);
    auto cm = cpu->UploadMatrix(in.w.data(), 2 * s.e, s.d);
    ASSERT_TRUE(cm.ok());
    for (const bool conv_bias : {true, false}) {
      ConvOn cc(*cpu, in, conv_bias);
      for (const CudaWeights wt :
           {CudaWeights::kF32, CudaWeights::kBf16, CudaWeights::kFp8}) {
        auto be = MakeCuda(wt);
        ASSERT_NE(be, nullptr);
        auto m = be->UploadMatrix(in.w.data(), 2 * s.e, s.d);
        ASSERT_TRUE(m.ok());
        ConvOn gc(*be, in, conv_bias);
        for (const int n : ns) {
          SCOPED_TRACE(testing::Message()
                       << s.name << " weights=" << int(wt)
                       << " conv_bias=" << conv_bias << " n=" << n);
          const auto calls = conv_fold::DecodeSteps(n, 3);
          const conv_fold::ConvFoldRun got = conv_fold::RunConvFold(
              *be, s, *m, gc.cw, in.resid, in.state0, calls);
          EXPECT_TRUE(SameBits(got.y_unfused, got.y_fused));
          EXPECT_TRUE(SameBits(got.x_unfused, got.x_fused));
          EXPECT_TRUE(SameBits(got.state_unfused, got.state_fused));
          if (wt == CudaWeights::kF32) {
            const conv_fold::ConvFoldRun want = conv_fold::RunConvFold(
                *cpu, s, *cm, cc.cw, in.resid, in.state0, calls);
            EXPECT_LT(MaxAbsDiff(want.y_fused, got.y_fused), 5e-4f);
            EXPECT_LT(MaxAbsDiff(want.x_fused, got.x_fused), 1.5e-3f);
            EXPECT_LT(MaxAbsDiff(want.state_fused, got.state_fused), 5e-4f);
          }
        }
      }
    }
  }
}

// Decode steps of a bucket of 16 (4 of them padding), their slots rotating
// from step to step, recorded once and replayed: the same bits as the same
// steps run eagerly.
TEST(GemvFusionGpuTest, FoldedConvReplaysToTheEagerBits) {
  const conv_fold::ConvShape s = conv_fold::kMamba1b4;
  const int n = 16, steps = 4;
  const conv_fold::ConvInputs in = conv_fold::MakeConvInputs(s, n, steps);
  auto be = MakeCuda(CudaWeights::kBf16, /*graphs=*/true);
  ASSERT_NE(be, nullptr);
  auto m = be->UploadMatrix(in.w.data(), 2 * s.e, s.d);
  ASSERT_TRUE(m.ok());
  ConvOn gc(*be, in, true);
  const int64_t per_y = int64_t{n} * 2 * s.e, per_x = int64_t{n} * s.e;
  Array resid(*be, in.resid), u(*be, int64_t{n} * s.d),
      st_eager(*be, in.state0), st_replay(*be, in.state0),
      y_eager(*be, steps * per_y), y_replay(*be, steps * per_y),
      x_eager(*be, steps * per_x), x_replay(*be, steps * per_x);
  auto step = [&](int t, Array& st, Array& y, Array& x) {
    const std::vector<Segment> segs = conv_fold::DecodeStep(n, t);
    GemmParams g =
        conv_fold::InProj(s, *m, gc.cw, resid.get() + int64_t{t} * n * s.d, n,
                          u.get(), y.get() + t * per_y);
    g.conv = conv_fold::ConvOf(s, gc.cw, segs, st.get(), x.get() + t * per_x);
    be->Gemm(g);
  };
  for (int t = 0; t < steps; ++t) step(t, st_eager, y_eager, x_eager);
  for (int t = 0; t < steps; ++t) {
    ASSERT_TRUE(be->RunCaptured(n, [&] {
                    step(t, st_replay, y_replay, x_replay);
                    return absl::OkStatus();
                  }).ok());
  }
  ASSERT_TRUE(be->TakeError().ok());
  EXPECT_TRUE(SameBits(y_eager.Read(), y_replay.Read()));
  EXPECT_TRUE(SameBits(x_eager.Read(), x_replay.Read()));
  EXPECT_TRUE(SameBits(st_eager.Read(), st_replay.Read()));
}

}  // namespace
}  // namespace seqboat::gpu_test
