// Mamba-1's conv folded into the decode GEMV's epilogue (GemmParams::conv,
// conv_epilogue.cuh) on the CUDA emulation: in_proj with its folded
// pre-norm and the conv gives the same bits as the GEMV followed by the
// conv kernel (y, conv outputs and the slots' states after several decode
// steps), at Mamba 130M's and 1.4B's in_proj, batches 1..16 with padding
// segments, fp32 / bf16 / fp8 weights, with and without column splits and
// conv bias; the CPU backend's fold is its two ops (the same bits), and the
// emulation stays within the GEMV's tolerance of it. The fold is one launch
// fewer; calls with prefill chunks run the GEMV then the conv kernel.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "kernels/cuda/emu/dense_emulation.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/gemv_kernels.h"
#include "kernels/cuda/mamba_kernels.h"
#include "kernels/cuda/testing/gemv_conv_cases.h"

namespace seqboat::emu_test {
namespace {

namespace conv_fold = parity::conv_fold;
using cuda::Storage;

constexpr Storage kStorages[] = {Storage::kF32, Storage::kBf16,
                                 Storage::kFp8E4m3};

const char* Name(Storage s) {
  return s == Storage::kF32 ? "fp32" : s == Storage::kBf16 ? "bf16" : "fp8";
}

// The CUDA backend's dense ops and its conv kernel, on the emulation.
class ConvEmulation : public DenseEmulation {
 public:
  using DenseEmulation::DenseEmulation;
  void MambaConv(const MambaConvParams& p) override {
    cuda::LaunchMambaConv(p, nullptr);
  }
};

// The block's weights on one backend.
struct OnBackend {
  OnBackend(Backend& be, const conv_fold::ConvInputs& in, bool conv_bias)
      : norm_w(be, in.norm_w), conv_w(be, in.conv_w), conv_b(be, in.conv_b) {
    cw.norm_w = norm_w.get();
    cw.conv_w = conv_w.get();
    cw.conv_b = conv_bias ? conv_b.get() : nullptr;
  }
  Array norm_w, conv_w, conv_b;
  conv_fold::ConvWeights cw;
};

// Runs `calls` (each call's rows <= 16) both ways on the CPU backend and on
// the emulation, for every storage: fused equals unfused bit for bit on
// each, and the emulation is within `tol` of the CPU (y and the states; 3
// tol for the conv outputs, sums of 4 taps under 0.5 through SiLU).
void ExpectConvFoldMatches(const conv_fold::ConvShape& s,
                           const std::vector<std::vector<Segment>>& calls,
                           bool conv_bias, float tol,
                           const std::vector<Storage>& storages = {
                               std::begin(kStorages), std::end(kStorages)}) {
  int rows = 0;
  for (const auto& segs : calls) rows = std::max(rows, RowsOf(segs));
  const conv_fold::ConvInputs in =
      conv_fold::MakeConvInputs(s, rows, static_cast<int>(calls.size()));
  for (const Storage st : storages) {
    SCOPED_TRACE(testing::Message()
                 << s.name << " e=" << s.e << " d=" << s.d << " " << Name(st)
                 << " rows=" << rows << " conv_bias=" << conv_bias);
    auto cpu = MakeCpuBackend(1);
    ConvEmulation emu(st);
    const std::vector<float> wr = StoredValues(st, in.w, 2 * s.e, s.d);
    auto cm = cpu->UploadMatrix(wr.data(), 2 * s.e, s.d);
    ASSERT_TRUE(cm.ok());
    const Matrix em = emu.UploadAt(in.w.data(), 2 * s.e, s.d, st, 0);
    OnBackend cb(*cpu, in, conv_bias), eb(emu, in, conv_bias);
    const conv_fold::ConvFoldRun want =
        conv_fold::RunConvFold(*cpu, s, *cm, cb.cw, in.resid, in.state0, calls);
    const conv_fold::ConvFoldRun got =
        conv_fold::RunConvFold(emu, s, em, eb.cw, in.resid, in.state0, calls);
    EXPECT_TRUE(SameBits(want.y_unfused, want.y_fused));
    EXPECT_TRUE(SameBits(want.x_unfused, want.x_fused));
    EXPECT_TRUE(SameBits(want.state_unfused, want.state_fused));
    EXPECT_TRUE(SameBits(got.y_unfused, got.y_fused));
    EXPECT_TRUE(SameBits(got.x_unfused, got.x_fused));
    EXPECT_TRUE(SameBits(got.state_unfused, got.state_fused));
    EXPECT_LE(MaxAbsDiff(want.y_fused, got.y_fused), tol);
    EXPECT_LE(MaxAbsDiff(want.x_fused, got.x_fused), 3 * tol);
    EXPECT_LE(MaxAbsDiff(want.state_fused, got.state_fused), tol);
    // The steps did move the states, and wrote conv outputs.
    EXPECT_FALSE(SameBits(got.state_fused, in.state0));
    EXPECT_NE(std::count(got.x_fused.begin(), got.x_fused.end(),
                         conv_fold::kUnwritten),
              static_cast<std::ptrdiff_t>(got.x_fused.size()));
  }
}

// `steps` decode steps of each batch in ns (padding from 2 on).
void ExpectDecodeFoldMatches(const conv_fold::ConvShape& s, bool conv_bias,
                             float tol, const std::vector<int>& ns,
                             const std::vector<Storage>& storages =
                                 {std::begin(kStorages), std::end(kStorages)},
                             int steps = 3) {
  for (const int n : ns) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    ExpectConvFoldMatches(s, conv_fold::DecodeSteps(n, steps), conv_bias, tol,
                          storages);
  }
}

std::vector<int> AllBatches() {
  std::vector<int> ns;
  for (int n = 1; n <= cuda::kGemvMaxRows; ++n) ns.push_back(n);
  return ns;
}

// The shape's d_model with 64 channels (in_proj's first 128 rows): every
// storage and batch at a cost the emulation affords. The GEMV's plan for
// it (more warps per row group) differs from the whole matrix's, which the
// bf16 runs (two steps; batches 1 and 16 at 130M, 16 at 1.4B) check.
// Neither has column splits.
conv_fold::ConvShape Narrow(const conv_fold::ConvShape& s) {
  return {s.name, 64, s.d, s.k};
}

// Bounds as gemv_fusion_emu_test's for the same projections.
TEST(GemvConvEmuTest, FoldedConvAtMamba130mShape) {
  const conv_fold::ConvShape s = conv_fold::kMamba130m;
  ASSERT_EQ(cuda::GemvColumnSplits(2 * s.e, s.d, Storage::kBf16), 1);
  ExpectDecodeFoldMatches(Narrow(s), true, 1e-4f, AllBatches());
  ExpectDecodeFoldMatches(Narrow(s), false, 1e-4f, {1, 6, 16});
  ExpectDecodeFoldMatches(s, true, 1e-4f, {1, 16}, {Storage::kBf16}, 2);
}

TEST(GemvConvEmuTest, FoldedConvAtMamba1b4Shape) {
  const conv_fold::ConvShape s = conv_fold::kMamba1b4;
  ASSERT_EQ(cuda::GemvColumnSplits(2 * s.e, s.d, Storage::kBf16), 1);
  ExpectDecodeFoldMatches(Narrow(s), true, 2e-4f, AllBatches());
  ExpectDecodeFoldMatches(Narrow(s), false, 2e-4f, {1, 11, 16});
  ExpectDecodeFoldMatches(s, true, 2e-4f, {16}, {Storage::kBf16}, 2);
}

// Columns split across blocks: the reduction kernel applies the conv. A
// 3-tap conv too (the conv kernel's other register instance).
TEST(GemvConvEmuTest, FoldedConvWithColumnSplits) {
  const conv_fold::ConvShape s{"e 32 x d 8192 (column splits)", 32, 8192};
  for (const Storage st : kStorages) {
    ASSERT_GT(cuda::GemvColumnSplits(2 * s.e, s.d, st), 1) << Name(st);
  }
  ExpectDecodeFoldMatches(s, true, 4e-4f, {1, 2, 7, 9, 16});
  ExpectDecodeFoldMatches(s, false, 4e-4f, {5});
  ExpectDecodeFoldMatches({"e 32 x d 8192, 3 taps", 32, 8192, 3}, true, 4e-4f,
                          {4}, {Storage::kBf16});
}

// Prefill chunks, then decode steps over them padded to buckets: the calls
// with chunks run the GEMV then the conv kernel, the decode calls after
// them fold it, and the states carry over between the two.
TEST(GemvConvEmuTest, PrefillCallsRunTheConvKernelAndDecodeFollows) {
  ExpectConvFoldMatches(Narrow(conv_fold::kMamba130m),
                        parity::PrefillThenDecodeCalls(), true, 1e-4f);
}

// Launches of one decode call each way, and of a call with a prefill chunk.
int64_t Launches(ConvEmulation& emu, const conv_fold::ConvShape& s,
                 const Matrix& w, const conv_fold::ConvWeights& cw,
                 const std::vector<Segment>& segs, bool fused, Array& state,
                 Array& resid, Array& y, Array& u, Array& x) {
  GemmParams g =
      conv_fold::InProj(s, w, cw, resid.get(), RowsOf(segs), u.get(), y.get());
  const GemmConv conv = conv_fold::ConvOf(s, cw, segs, state.get(), x.get());
  const int64_t before = emu::State().launches;
  if (fused) {
    g.conv = conv;
    emu.Gemm(g);
  } else {
    emu.Gemm(g);
    g.conv = conv;
    emu.MambaConv(ConvOfGemm(g));
  }
  return emu::State().launches - before;
}

TEST(GemvConvEmuTest, FoldedConvIsOneLaunchFewer) {
  const conv_fold::ConvShape narrow = Narrow(conv_fold::kMamba130m);
  const conv_fold::ConvShape split{"column splits", 32, 8192};
  for (const conv_fold::ConvShape& s : {narrow, split}) {
    SCOPED_TRACE(s.name);
    const conv_fold::ConvInputs in = conv_fold::MakeConvInputs(s, 8, 1);
    ConvEmulation emu(Storage::kBf16);
    const Matrix w = emu.UploadAt(in.w.data(), 2 * s.e, s.d, Storage::kBf16, 0);
    OnBackend b(emu, in, true);
    Array state(emu, in.state0), resid(emu, in.resid), y(emu, 8 * 2 * s.e),
        u(emu, 8 * s.d), x(emu, 8 * s.e);
    const std::vector<Segment> decode = conv_fold::DecodeStep(8, 0);
    const int64_t unfused =
        Launches(emu, s, w, b.cw, decode, false, state, resid, y, u, x);
    EXPECT_EQ(Launches(emu, s, w, b.cw, decode, true, state, resid, y, u, x),
              unfused - 1);
    const std::vector<Segment> prefill = {{0, 0, 5}, {1, 5, 1}, {0, 6, 0}};
    EXPECT_EQ(Launches(emu, s, w, b.cw, prefill, true, state, resid, y, u, x),
              unfused);
    EXPECT_TRUE(emu.TakeError().ok());
  }
}

}  // namespace
}  // namespace seqboat::emu_test
