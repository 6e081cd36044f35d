// The 16-bit GEMM inputs written by the ops before the GEMMs
// (engine/backend/half_rows.h) on a GPU, where cuBLAS reads them: at the
// Mamba 130M sizes and decode batches 17, 64 and 256, bf16 / fp16 / fp8
// weights, the folded pre-norm (its norm kernel writing cuBLAS's rows)
// equals the norm op then the converting GEMM bit for bit, and a Mamba-1
// block's conv -> x_proj -> scan -> out_proj with the copies equals the same
// ops converting each GEMM's input, outputs and states; a recorded step with
// the copies replays to the eager bits.
#include <cstdint>
#include <vector>

#include "kernels/cuda/testing/gemv_fusion_cases.h"
#include "kernels/cuda/testing/gpu_test_util.h"

namespace seqboat::gpu_test {
namespace {

namespace fusion = parity::fusion;
using parity::SameBits;

constexpr int kBatches[] = {17, 64, 256};
constexpr CudaWeights kWeights[] = {CudaWeights::kBf16, CudaWeights::kF16,
                                    CudaWeights::kFp8};
// Mamba 130M: d_model 768, d_inner 1536, d_state 16, 4 taps, dt_rank 48.
constexpr int kD = 768, kE = 1536, kN = 16, kTaps = 4, kRank = 48;
constexpr int kXc = kRank + 2 * kN;

TEST(HalfRowsGpuTest, FoldedNormWritesCublasInputBitForBit) {
  const fusion::FoldShape shape = fusion::kMamba130m;
  const int rows = shape.rows, cols = shape.cols;
  const std::vector<float> w = Random(int64_t{rows} * cols, 61),
                           x = Random(256 * cols, 62, -3, 3),
                           nw = Random(cols, 63, 0.5f, 1.5f),
                           nb = Random(cols, 64);
  for (const CudaWeights wt : kWeights) {
    auto be = MakeCuda(wt);
    ASSERT_NE(be, nullptr);
    auto m = be->UploadMatrix(w.data(), rows, cols);
    ASSERT_TRUE(m.ok());
    Array gw(*be, nw), gb(*be, nb);
    for (const NormKind kind : {NormKind::kRms, NormKind::kLayer}) {
      const fusion::FoldNorm norm{kind, gw.get(), gb.get(), 1e-5f};
      for (const int batch : kBatches) {
        SCOPED_TRACE(testing::Message() << "weights=" << int(wt) << " kind="
                                        << int(kind) << " n=" << batch);
        EXPECT_NE(be->GemmInputFormat(*m, batch), HalfFormat::kNone);
        const fusion::FoldRun got =
            fusion::RunFold(*be, *m, norm, x, batch, nullptr);
        EXPECT_TRUE(SameBits(got.y_unfused, got.y_fused));
        EXPECT_TRUE(SameBits(got.u_unfused, got.u_fused));
      }
    }
  }
}

// A Mamba-1 block's ops between in_proj and the residual, as
// engine/layers/mamba1.cc runs them (dt stands in for dt_proj's output).
struct Block {
  Block(Backend& be, int batch)
      : xz(be, Random(size_t{2} * batch * kE, 71)),
        conv_w(be, Random(size_t{kE} * kTaps, 72)),
        conv_b(be, Random(kE, 73)),
        dt(be, Random(static_cast<size_t>(batch) * kE, 74)),
        a(be, Random(size_t{kE} * kN, 75, -2.0f, -0.1f)),
        d(be, Random(kE, 76)),
        dt_bias(be, Random(kE, 77)),
        conv_init(be,
                  Random(static_cast<size_t>(batch) * kE * (kTaps - 1), 78)),
        ssm_init(be, Random(static_cast<size_t>(batch) * kE * kN, 79)),
        residual_init(be, Random(static_cast<size_t>(batch) * kD, 80)),
        conv_state(be, static_cast<size_t>(batch) * kE * (kTaps - 1)),
        ssm_state(be, static_cast<size_t>(batch) * kE * kN),
        x(be, static_cast<size_t>(batch) * kE),
        xdbl(be, static_cast<size_t>(batch) * kXc),
        y(be, static_cast<size_t>(batch) * kE),
        residual(be, static_cast<size_t>(batch) * kD),
        batch(batch) {
    for (int i = 0; i < batch; ++i) segs.push_back(Segment{i, i, 1});
    auto b16 = be.Alloc(static_cast<size_t>(batch) * kE * 2);
    EXPECT_TRUE(b16.ok());
    x16 = *b16;
    b16 = be.Alloc(static_cast<size_t>(batch) * kE * 2);
    EXPECT_TRUE(b16.ok());
    y16 = *b16;
  }

  // The states and the residual as they started.
  void Reset(Backend& be) {
    be.CopyOnDevice(conv_state.get(), conv_init.get(),
                    static_cast<size_t>(batch) * kE * (kTaps - 1) * 4);
    be.CopyOnDevice(ssm_state.get(), ssm_init.get(),
                    static_cast<size_t>(batch) * kE * kN * 4);
    be.CopyOnDevice(residual.get(), residual_init.get(),
                    static_cast<size_t>(batch) * kD * 4);
  }

  // With `copies`, the conv and the scan write the GEMMs' 16-bit input
  // where the backend's GEMM reads one, and the GEMMs read it.
  void Run(Backend& be, const Matrix& x_proj, const Matrix& out_proj,
           bool copies) {
    HalfRows xh, yh;
    if (copies) {
      xh = HalfRows{x16.get(), kE, be.GemmInputFormat(x_proj, batch)};
      yh = HalfRows{y16.get(), kE, be.GemmInputFormat(out_proj, batch)};
    }
    MambaConvParams conv;
    conv.segs = segs.data();
    conv.nsegs = batch;
    conv.x = xz.get();
    conv.ldx = 2 * kE;
    conv.state = conv_state.get();
    conv.state_stride = kE * (kTaps - 1);
    conv.w = conv_w.get();
    conv.bias = conv_b.get();
    conv.e = kE;
    conv.k = kTaps;
    conv.out = x.get();
    conv.out16 = xh;
    be.MambaConv(conv);
    GemmParams g;
    g.x = x.get();
    g.ldx = kE;
    g.n = batch;
    g.w = x_proj;
    g.y = xdbl.get();
    g.ldy = kXc;
    g.x16 = xh;
    be.Gemm(g);
    MambaScanParams scan;
    scan.segs = segs.data();
    scan.nsegs = batch;
    scan.x = x.get();
    scan.dt = dt.get();
    scan.bc = xdbl.get() + kRank;
    scan.ldbc = kXc;
    scan.z = xz.get() + kE;
    scan.ldz = 2 * kE;
    scan.a = a.get();
    scan.d = d.get();
    scan.dt_bias = dt_bias.get();
    scan.state = ssm_state.get();
    scan.state_stride = int64_t{kE} * kN;
    scan.e = kE;
    scan.n_state = kN;
    scan.out = y.get();
    scan.out16 = yh;
    be.MambaScan(scan);
    GemmParams o;
    o.x = y.get();
    o.ldx = kE;
    o.n = batch;
    o.w = out_proj;
    o.y = residual.get();
    o.ldy = kD;
    o.accumulate = true;
    o.x16 = yh;
    be.Gemm(o);
  }

  // Everything the block wrote.
  std::vector<std::vector<float>> Outputs() const {
    return {x.Read(),        xdbl.Read(),       y.Read(),
            residual.Read(), conv_state.Read(), ssm_state.Read()};
  }

  Array xz, conv_w, conv_b, dt, a, d, dt_bias, conv_init, ssm_init,
      residual_init, conv_state, ssm_state, x, xdbl, y, residual;
  int batch;
  std::vector<Segment> segs;
  DeviceBuffer x16, y16;
};

void ExpectSameOutputs(const std::vector<std::vector<float>>& want,
                       const std::vector<std::vector<float>>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(SameBits(want[i], got[i])) << "output " << i;
  }
}

TEST(HalfRowsGpuTest, MambaBlockWithCopiesEqualsConvertingGemms) {
  const std::vector<float> wx = Random(size_t{kXc} * kE, 81, -0.05f, 0.05f),
                           wo = Random(size_t{kD} * kE, 82, -0.05f, 0.05f);
  for (const CudaWeights wt : kWeights) {
    auto be = MakeCuda(wt, /*graphs=*/false);
    ASSERT_NE(be, nullptr);
    auto x_proj = be->UploadMatrix(wx.data(), kXc, kE);
    auto out_proj = be->UploadMatrix(wo.data(), kD, kE);
    ASSERT_TRUE(x_proj.ok() && out_proj.ok());
    for (const int batch : kBatches) {
      SCOPED_TRACE(testing::Message()
                   << "weights=" << int(wt) << " n=" << batch);
      Block block(*be, batch);
      block.Reset(*be);
      block.Run(*be, *x_proj, *out_proj, false);
      const auto converting = block.Outputs();
      block.Reset(*be);
      block.Run(*be, *x_proj, *out_proj, true);
      ASSERT_TRUE(be->TakeError().ok());
      ExpectSameOutputs(converting, block.Outputs());
    }
  }
}

TEST(HalfRowsGpuTest, RecordedBlockWithCopiesReplaysToTheEagerBits) {
  const int batch = 256;
  auto be = MakeCuda(CudaWeights::kBf16, /*graphs=*/true);
  ASSERT_NE(be, nullptr);
  const std::vector<float> wx = Random(size_t{kXc} * kE, 91, -0.05f, 0.05f),
                           wo = Random(size_t{kD} * kE, 92, -0.05f, 0.05f);
  auto x_proj = be->UploadMatrix(wx.data(), kXc, kE);
  auto out_proj = be->UploadMatrix(wo.data(), kD, kE);
  ASSERT_TRUE(x_proj.ok() && out_proj.ok());
  Block block(*be, batch);
  block.Reset(*be);
  block.Run(*be, *x_proj, *out_proj, true);
  const auto eager = block.Outputs();
  // Recorded on the first pass, replayed on the others.
  for (int pass = 0; pass < 3; ++pass) {
    block.Reset(*be);
    ASSERT_TRUE(be->RunCaptured(batch, [&] {
                    block.Run(*be, *x_proj, *out_proj, true);
                    return absl::OkStatus();
                  }).ok());
  }
  ASSERT_TRUE(be->TakeError().ok());
  ExpectSameOutputs(eager, block.Outputs());
}

}  // namespace
}  // namespace seqboat::gpu_test
