// The 16-bit GEMM inputs that ops write beside their fp32 rows
// (engine/backend/half_rows.h), on the CUDA emulation at the 130M models'
// sizes and decode batches 17, 64 and 256 (past the GEMV's 16 rows, where
// cuBLAS reads 16-bit input): each producer's copy equals ConvertRows of its
// fp32 output bit for bit, in bf16 and fp16, with the fp32 output and the
// state as without the copy and no launch added; the folded pre-norm writes
// its GEMM's rows in the norm's launch; a GEMM handed the copy converts
// nothing and yields the converting GEMM's bits (cuBLAS itself is a host
// stand-in here, dense_emulation.h: the GPU tests compare it on a device).
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/emu/model_emulation.h"

namespace seqboat::emu_test {
namespace {

constexpr int kBatches[] = {17, 64, 256};
constexpr HalfFormat kFormats[] = {HalfFormat::kBf16, HalfFormat::kF16};
// Mamba 130M: d_model 768, d_inner 1536, d_state 16, 4 taps, dt_rank 48.
constexpr int kD = 768, kE = 1536, kN = 16, kTaps = 4, kRank = 48;

cuda::Storage StorageFor(HalfFormat f) {
  return f == HalfFormat::kBf16 ? cuda::Storage::kBf16 : cuda::Storage::kF16;
}

// ConvertRows of rows [n, d] (stride ld): the conversion the copy replaces.
std::vector<uint16_t> Converted(const float* x, int ld, int n, int d,
                                HalfFormat f) {
  std::vector<uint16_t> out(static_cast<size_t>(n) * d);
  cuda::LaunchConvertRows(x, ld, n, d, out.data(), StorageFor(f), nullptr);
  return out;
}

// A decode step: row i is slot i's one token.
std::vector<Segment> DecodeSegments(int batch) {
  std::vector<Segment> segs;
  for (int i = 0; i < batch; ++i) segs.push_back(Segment{i, i, 1});
  return segs;
}

HalfRows Rows16(std::vector<uint16_t>* buf, int ld, HalfFormat f) {
  return HalfRows{buf->data(), ld, f};
}

bool Same16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * 2) == 0;
}

TEST(HalfRowsEmuTest, MambaConvWritesXProjInput) {
  for (const int batch : kBatches) {
    for (const HalfFormat f : kFormats) {
      const std::vector<Segment> segs = DecodeSegments(batch);
      const std::vector<float> xz = Random(size_t{2} * batch * kE, 1);
      const std::vector<float> w = Random(size_t{kE} * kTaps, 2);
      const std::vector<float> bias = Random(kE, 3);
      std::vector<float> state_a =
          Random(static_cast<size_t>(batch) * kE * (kTaps - 1), 4);
      std::vector<float> state_b = state_a;
      std::vector<float> out_a(static_cast<size_t>(batch) * kE),
          out_b(out_a.size());
      std::vector<uint16_t> out16(out_a.size());
      MambaConvParams p;
      p.segs = segs.data();
      p.nsegs = batch;
      p.x = xz.data();
      p.ldx = 2 * kE;
      p.state_stride = kE * (kTaps - 1);
      p.w = w.data();
      p.bias = bias.data();
      p.e = kE;
      p.k = kTaps;
      p.state = state_a.data();
      p.out = out_a.data();
      cuda::LaunchMambaConv(p, nullptr);
      p.state = state_b.data();
      p.out = out_b.data();
      p.out16 = Rows16(&out16, kE, f);
      const int64_t launches = emu::State().launches;
      cuda::LaunchMambaConv(p, nullptr);
      EXPECT_EQ(emu::State().launches - launches, 1);
      EXPECT_EQ(emu::TakeFailures(), "");
      EXPECT_TRUE(SameBits(out_a, out_b)) << batch;
      EXPECT_TRUE(SameBits(state_a, state_b)) << batch;
      EXPECT_TRUE(Same16(out16, Converted(out_b.data(), kE, batch, kE, f)))
          << "batch " << batch << " format " << static_cast<int>(f);
      // Rounded to nearest even, as the weights are on upload.
      size_t rounded = 0;
      for (size_t i = 0; i < out_b.size(); ++i) {
        rounded += out16[i] == Bits16(StorageFor(f), out_b[i]);
      }
      EXPECT_EQ(rounded, out_b.size());
    }
  }
}

// The decode kernel (decode steps) and the thread-per-channel one (prefill).
TEST(HalfRowsEmuTest, MambaScanWritesOutProjInput) {
  for (const int batch : kBatches) {
    for (const bool decode : {true, false}) {
      const HalfFormat f = decode ? HalfFormat::kBf16 : HalfFormat::kF16;
      const std::vector<Segment> segs = DecodeSegments(batch);
      const size_t rows = static_cast<size_t>(batch);
      const std::vector<float> x = Random(rows * kE, 11);
      const std::vector<float> dt = Random(rows * kE, 12);
      const std::vector<float> bc = Random(rows * 2 * kN, 13);
      const std::vector<float> z = Random(rows * kE, 14);
      const std::vector<float> a = Random(size_t{kE} * kN, 15, -2.0f, -0.1f);
      const std::vector<float> d = Random(kE, 16);
      const std::vector<float> dt_bias = Random(kE, 17);
      std::vector<float> state_a = Random(rows * kE * kN, 18);
      std::vector<float> state_b = state_a;
      std::vector<float> out_a(rows * kE), out_b(out_a.size());
      std::vector<uint16_t> out16(out_a.size());
      MambaScanParams p;
      p.segs = segs.data();
      p.nsegs = batch;
      p.x = x.data();
      p.dt = dt.data();
      p.bc = bc.data();
      p.ldbc = 2 * kN;
      p.z = z.data();
      p.ldz = kE;
      p.a = a.data();
      p.d = d.data();
      p.dt_bias = dt_bias.data();
      p.state_stride = int64_t{kE} * kN;
      p.e = kE;
      p.n_state = kN;
      const auto launch = [&] {
        if (decode) {
          cuda::LaunchMambaScanDecode(p, cuda::Storage::kF32, nullptr);
        } else {
          cuda::LaunchMambaScan(p, nullptr);
        }
      };
      p.state = state_a.data();
      p.out = out_a.data();
      launch();
      p.state = state_b.data();
      p.out = out_b.data();
      p.out16 = Rows16(&out16, kE, f);
      const int64_t launches = emu::State().launches;
      launch();
      EXPECT_EQ(emu::State().launches - launches, 1);
      EXPECT_EQ(emu::TakeFailures(), "");
      EXPECT_TRUE(SameBits(out_a, out_b)) << batch;
      EXPECT_TRUE(SameBits(state_a, state_b)) << batch;
      EXPECT_TRUE(Same16(out16, Converted(out_b.data(), kE, batch, kE, f)))
          << "batch " << batch << (decode ? " decode" : " prefill");
    }
  }
}

// Mamba-2 130M: d_inner 1536 in 24 heads of 64, d_state 128, one group, the
// fused decode step writing out_proj's input from its norm kernel; and the
// gated norm and the gate's ActivateMul of the op-by-op path.
TEST(HalfRowsEmuTest, Mamba2StepWritesOutProjInput) {
  constexpr int kHeads = 24, kHeadDim = 64, kState = 128;
  constexpr int kCc = kE + 2 * kState, kW = kE + kCc + kHeads;
  for (const int batch : kBatches) {
    const std::vector<Segment> segs = DecodeSegments(batch);
    const size_t rows = static_cast<size_t>(batch);
    const std::vector<float> zxbcdt = Random(rows * kW, 21);
    const std::vector<float> conv_w = Random(size_t{kCc} * kTaps, 22);
    const std::vector<float> a = Random(kHeads, 23, -2.0f, -0.1f);
    const std::vector<float> d = Random(kHeads, 24);
    const std::vector<float> dt_bias = Random(kHeads, 25);
    const std::vector<float> norm_w = Random(kE, 26);
    const int64_t slot = int64_t{kCc} * (kTaps - 1) + int64_t{kE} * kState;
    std::vector<float> state_a = Random(rows * slot, 27, -0.1f, 0.1f);
    std::vector<float> state_b = state_a;
    std::vector<float> xbc(rows * kCc), y_a(rows * kE), y_b(rows * kE);
    std::vector<uint16_t> y16(rows * kE);
    Mamba2StepParams p;
    p.conv.segs = segs.data();
    p.conv.nsegs = batch;
    p.conv.x = zxbcdt.data() + kE;
    p.conv.ldx = kW;
    p.conv.state_stride = slot;
    p.conv.w = conv_w.data();
    p.conv.e = kCc;
    p.conv.k = kTaps;
    p.conv.out = xbc.data();
    p.scan.segs = segs.data();
    p.scan.nsegs = batch;
    p.scan.x = xbc.data();
    p.scan.b = xbc.data() + kE;
    p.scan.c = xbc.data() + kE + kState;
    p.scan.ldxbc = kCc;
    p.scan.dt = zxbcdt.data() + kE + kCc;
    p.scan.lddt = kW;
    p.scan.dt_bias = dt_bias.data();
    p.scan.a = a.data();
    p.scan.d = d.data();
    p.scan.dt_max = 1e30f;
    p.scan.state_stride = slot;
    p.scan.heads = kHeads;
    p.scan.head_dim = kHeadDim;
    p.scan.n_state = kState;
    p.scan.groups = 1;
    p.scan.ldo = kE;
    p.norm.ldy = kE;
    p.norm.z = zxbcdt.data();
    p.norm.ldz = kW;
    p.norm.w = norm_w.data();
    p.norm.n = batch;
    p.norm.d = kE;
    p.norm.groups = 1;
    p.norm.eps = 1e-5f;
    p.norm.ldo = kE;
    ASSERT_TRUE(cuda::Mamba2StepFuses(p));
    const auto run = [&](std::vector<float>* state, std::vector<float>* y) {
      p.conv.state = state->data();
      p.scan.state = state->data() + int64_t{kCc} * (kTaps - 1);
      p.scan.out = y->data();
      p.norm.y = y->data();
      p.norm.out = y->data();
      const int64_t launches = emu::State().launches;
      cuda::LaunchMamba2Step(p, nullptr);
      EXPECT_EQ(emu::State().launches - launches, 2);
    };
    run(&state_a, &y_a);
    p.norm.out16 = Rows16(&y16, kE, HalfFormat::kBf16);
    run(&state_b, &y_b);
    EXPECT_EQ(emu::TakeFailures(), "");
    EXPECT_TRUE(SameBits(y_a, y_b)) << batch;
    EXPECT_TRUE(SameBits(state_a, state_b)) << batch;
    EXPECT_TRUE(
        Same16(y16, Converted(y_b.data(), kE, batch, kE, HalfFormat::kBf16)))
        << batch;

    // The op-by-op gates: the gated norm (a prefill step's) and SiLU(z) y.
    GatedRmsNormParams norm = p.norm;
    norm.y = y_a.data();
    std::vector<float> normed(rows * kE);
    norm.out = normed.data();
    norm.out16 = Rows16(&y16, kE, HalfFormat::kF16);
    cuda::LaunchGatedRmsNorm(norm, nullptr);
    EXPECT_TRUE(
        Same16(y16, Converted(normed.data(), kE, batch, kE, HalfFormat::kF16)));
    ActivateMulParams gate;
    gate.a = zxbcdt.data();
    gate.lda = kW;
    gate.b = y_a.data();
    gate.ldb = kE;
    gate.n = batch;
    gate.f = kE;
    gate.act = Activation::kSilu;
    std::vector<float> gated_a(rows * kE), gated_b(rows * kE);
    gate.out = gated_a.data();
    gate.ldo = kE;
    cuda::LaunchActivateMul(gate, nullptr);
    gate.out = gated_b.data();
    gate.out16 = Rows16(&y16, kE, HalfFormat::kBf16);
    cuda::LaunchActivateMul(gate, nullptr);
    EXPECT_TRUE(SameBits(gated_a, gated_b));
    EXPECT_TRUE(Same16(
        y16, Converted(gated_b.data(), kE, batch, kE, HalfFormat::kBf16)));
  }
}

// in_proj with its folded RmsNorm (768 -> 3072): the fused path launches the
// norm alone, which writes the rows cuBLAS reads; the path before it
// launched the norm and then ConvertRows. y and the normed rows are the same
// bits; the GEMM itself is the same stand-in on both sides.
TEST(HalfRowsEmuTest, FoldedNormWritesTheGemmInputInItsLaunch) {
  const std::vector<float> w_host =
      Random(size_t{2} * kE * kD, 31, -0.05f, 0.05f);
  const std::vector<float> norm_w = Random(kD, 32);
  for (const int batch : kBatches) {
    const size_t rows = static_cast<size_t>(batch);
    const std::vector<float> x = Random(rows * kD, 33);
    std::vector<float> results[2], normed[2];
    int64_t launches[2], converts[2];
    for (const bool fused : {false, true}) {
      ModelEmulation be(cuda::Storage::kBf16, fused);
      const Matrix w =
          be.UploadAt(w_host.data(), 2 * kE, kD, cuda::Storage::kBf16, 0);
      std::vector<float>& y = results[fused];
      std::vector<float>& u = normed[fused];
      y.assign(rows * 2 * kE, 0.0f);
      u.assign(rows * kD, 0.0f);
      GemmParams p;
      p.x = x.data();
      p.ldx = kD;
      p.n = batch;
      p.w = w;
      p.y = y.data();
      p.ldy = 2 * kE;
      p.norm.kind = NormKind::kRms;
      p.norm.w = norm_w.data();
      p.norm.eps = 1e-5f;
      p.norm.out = u.data();
      p.norm.ldo = kD;
      const int64_t before = emu::State().launches;
      be.Gemm(p);
      launches[fused] = emu::State().launches - before;
      converts[fused] = be.converts();
      EXPECT_TRUE(be.TakeError().ok());
    }
    EXPECT_TRUE(SameBits(results[0], results[1])) << batch;
    EXPECT_TRUE(SameBits(normed[0], normed[1])) << batch;
    EXPECT_EQ(launches[0], 2);  // the norm, ConvertRows
    EXPECT_EQ(launches[1], 1);  // the norm writing both
    EXPECT_EQ(converts[0], 1);
    EXPECT_EQ(converts[1], 0);
  }
}

// x_proj (1536 -> 80) reading the conv's copy (x16) equals x_proj converting
// the conv's fp32 rows; a copy in another format than the GEMM's, or at the
// GEMV's rows, is not read.
TEST(HalfRowsEmuTest, GemmReadsTheProducersCopy) {
  const int xc = kRank + 2 * kN;
  const std::vector<float> w_host = Random(size_t{xc} * kE, 41, -0.05f, 0.05f);
  for (const int batch : kBatches) {
    const size_t rows = static_cast<size_t>(batch);
    const std::vector<float> x = Random(rows * kE, 42);
    ModelEmulation be(cuda::Storage::kBf16, true);
    const Matrix w = be.UploadMatrix(w_host.data(), xc, kE).value();
    ASSERT_EQ(be.GemmInputFormat(w, batch), HalfFormat::kBf16);
    ASSERT_EQ(be.GemmInputFormat(w, cuda::kGemvMaxRows), HalfFormat::kNone);
    std::vector<uint16_t> x16 =
        Converted(x.data(), kE, batch, kE, HalfFormat::kBf16);
    std::vector<float> y_converted(rows * xc), y_copy(rows * xc);
    GemmParams p;
    p.x = x.data();
    p.ldx = kE;
    p.n = batch;
    p.w = w;
    p.ldy = xc;
    p.y = y_converted.data();
    be.Gemm(p);
    EXPECT_EQ(be.converts(), 1);
    p.y = y_copy.data();
    p.x16 = Rows16(&x16, kE, HalfFormat::kBf16);
    be.Gemm(p);
    EXPECT_EQ(be.converts(), 1);  // the copy was read
    EXPECT_TRUE(SameBits(y_converted, y_copy)) << batch;
    p.x16.format = HalfFormat::kF16;
    be.Gemm(p);
    EXPECT_EQ(be.converts(), 2);  // not the GEMM's format: converted
    EXPECT_TRUE(be.TakeError().ok());
  }
}

}  // namespace
}  // namespace seqboat::emu_test
