// Mamba-1's dt_proj folded into the scan (MambaScanParams::dt_proj) on the
// CUDA emulation, against the CPU backend, at the 130M (d_inner 1536,
// dt_rank 48) and 1.4B (4096, 128) shapes, d_state 16: the CPU's fold is its
// GEMM then the plain scan, bit for bit, on each of its weight types; the
// decode kernel's fold stays within rounding of the CPU for batches 1..16
// and 64 on every CUDA weight storage, with one launch where the unfolded
// ops take two (the GEMV, the scan); a row's result does not depend on the
// batch; and the calls the decode kernel does not fold (prefill, odd
// shapes) take the GEMM and match too.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/emu/dense_emulation.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/mamba_kernels.h"
#include "kernels/cuda/testing/mamba_dt_fold_cases.h"

namespace seqboat::emu_test {
namespace {

namespace fold = parity::dt_fold;
using cuda::Storage;

constexpr Storage kStorages[] = {Storage::kF32, Storage::kBf16, Storage::kF16,
                                 Storage::kFp8E4m3};

const char* Name(Storage s) {
  switch (s) {
    case Storage::kF32:
      return "fp32";
    case Storage::kBf16:
      return "bf16";
    case Storage::kF16:
      return "fp16";
    default:
      return "fp8";
  }
}

// dt differs from the CPU's GEMM by the rounding of dt_rank products summed
// in another order (a few ulp of |dt| <~ 2); through softplus and exp that
// moves outputs and states of magnitude ~1 by an ulp or a few (seen: 4.8e-7
// at both shapes, 7.2e-7 with fp8 at 1.4B): mamba_kernels_emu_test's bound.
// An indexing or staging error is O(0.1) or more.
constexpr float kTol = 1e-6f;

std::unique_ptr<Backend> Cpu(const std::string& weights) {
  CpuBackendOptions o;
  o.threads = 1;
  o.weights = weights;
  auto be = MakeCpuBackend(o);
  EXPECT_TRUE(be.ok()) << be.status();
  return *std::move(be);
}

TEST(MambaDtFoldEmuTest, CpuFoldIsTheGemmThenTheScan) {
  const fold::FoldInputs in = fold::MakeFoldInputs(fold::kMamba130m, 65, 1);
  std::vector<Segment> prefill = {{0, 0, 5}, {3, 5, 1}, {2, 6, 0}};
  for (const std::string type : {"fp32", "bf16", "fp16"}) {
    auto cpu = Cpu(type);
    auto w = cpu->UploadMatrix(in.w.data(), in.shape.e, in.shape.r);
    ASSERT_TRUE(w.ok());
    for (const std::vector<Segment>& segs :
         {fold::DecodeSegments(1), fold::DecodeSegments(16),
          fold::DecodeSegments(64), prefill}) {
      SCOPED_TRACE(testing::Message() << type << " segments " << segs.size());
      const fold::FoldRun folded = fold::RunFold(*cpu, *w, in, segs, true);
      const fold::FoldRun plain = fold::RunFold(*cpu, *w, in, segs, false);
      EXPECT_TRUE(SameBits(folded.y, plain.y));
      EXPECT_TRUE(SameBits(folded.state, plain.state));
    }
  }
}

// Batches 1..16 and 64 of decode rows (plus a padding row) at `shape` on
// every storage: within kTol of the CPU (fp32 GEMM of the stored matrix), one
// launch against the unfolded ops' two (up to 16 rows, where the GEMV is
// emulated; beyond, cuBLAS and a conversion), and each batch's rows the same
// bits as the batch of 64's.
void ExpectDecodeFoldMatches(const fold::FoldShape& shape) {
  const fold::FoldInputs in = fold::MakeFoldInputs(shape, 65, 7);
  std::vector<int> batches = {64};
  for (int b = 1; b <= 16; ++b) batches.push_back(b);
  const int64_t e = shape.e, n = shape.n;
  for (const Storage s : kStorages) {
    SCOPED_TRACE(testing::Message() << shape.name << " " << Name(s));
    auto cpu = MakeCpuBackend(1);
    const std::vector<float> stored = StoredValues(s, in.w, e, shape.r);
    auto cw = cpu->UploadMatrix(stored.data(), e, shape.r);
    ASSERT_TRUE(cw.ok());
    DenseEmulation emu(s);
    const Matrix ew = emu.UploadAt(in.w.data(), e, shape.r, s, 0);
    std::vector<float> y64, state64;
    float worst = 0.0f;
    for (const int b : batches) {
      SCOPED_TRACE(testing::Message() << "batch " << b);
      const std::vector<Segment> segs = fold::DecodeSegments(b);
      const fold::FoldRun want = fold::RunFold(*cpu, *cw, in, segs, true);
      const int64_t before = emu::State().launches;
      const fold::FoldRun got = fold::RunFold(emu, ew, in, segs, true);
      const int64_t launches = emu::State().launches - before;
      EXPECT_EQ(launches, 1);
      if (parity::RowsOf(segs) <= cuda::kGemvMaxRows) {
        const int64_t at = emu::State().launches;
        const fold::FoldRun plain = fold::RunFold(emu, ew, in, segs, false);
        EXPECT_EQ(emu::State().launches - at, launches + 1);
        EXPECT_LE(MaxAbsDiff(plain.y, got.y), kTol);
      }
      EXPECT_LE(MaxAbsDiff(want.y, got.y), kTol);
      EXPECT_LE(MaxAbsDiff(want.state, got.state), kTol);
      worst = std::max({worst, MaxAbsDiff(want.y, got.y),
                        MaxAbsDiff(want.state, got.state)});
      if (b == 64) {
        y64 = got.y;
        state64 = got.state;
        continue;
      }
      // Row i and slot i of any batch: the batch of 64's bits.
      EXPECT_TRUE(
          SameBits(std::vector<float>(got.y.begin(), got.y.begin() + b * e),
                   std::vector<float>(y64.begin(), y64.begin() + b * e)));
      EXPECT_TRUE(SameBits(
          std::vector<float>(got.state.begin(), got.state.begin() + b * e * n),
          std::vector<float>(state64.begin(), state64.begin() + b * e * n)));
    }
    std::printf("%s %s: max |folded - cpu| %.3g\n", shape.name, Name(s), worst);
  }
}

TEST(MambaDtFoldEmuTest, DecodeFoldMatchesCpuAtMamba130mShape) {
  ExpectDecodeFoldMatches(fold::kMamba130m);
}

TEST(MambaDtFoldEmuTest, DecodeFoldMatchesCpuAtMamba1b4Shape) {
  ExpectDecodeFoldMatches(fold::kMamba1b4);
}

// What the decode kernel does not fold runs the GEMM (emulated GEMV) then
// the plain scan: a prefill chunk; d_state 3 (no lane kernel); dt_rank 2000
// (rows past the shared memory). And what it folds on its scalar paths: an
// odd dt_rank (δ̃ and weights one at a time), a misaligned matrix.
TEST(MambaDtFoldEmuTest, OtherCallsAndShapesMatchCpu) {
  struct Case {
    fold::FoldShape shape;
    std::vector<Segment> segs;
    int offset;  // elements the matrix is misaligned by
    bool folds;  // by the decode kernel
  };
  const std::vector<Segment> prefill = {{0, 0, 5}, {3, 5, 1}, {2, 6, 0}};
  const std::vector<Case> cases = {
      {{"prefill", 96, 8, 16, 5}, prefill, 0, false},
      {{"d_state 3", 40, 8, 3, 5}, fold::DecodeSegments(3), 0, false},
      {{"dt_rank 2000", 16, 2000, 16, 5}, fold::DecodeSegments(2), 0, false},
      {{"dt_rank 5", 72, 5, 8, 5}, fold::DecodeSegments(4), 0, true},
      {{"misaligned", 64, 48, 4, 5}, fold::DecodeSegments(3), 1, true},
      {{"dt_rank 37, n 32", 45, 37, 32, 5}, fold::DecodeSegments(4), 0, true}};
  for (const Case& c : cases) {
    const fold::FoldInputs in = fold::MakeFoldInputs(c.shape, 8, 11);
    for (const Storage s : kStorages) {
      SCOPED_TRACE(testing::Message() << c.shape.name << " " << Name(s));
      auto cpu = MakeCpuBackend(1);
      const std::vector<float> stored =
          StoredValues(s, in.w, c.shape.e, c.shape.r);
      auto cw = cpu->UploadMatrix(stored.data(), c.shape.e, c.shape.r);
      ASSERT_TRUE(cw.ok());
      DenseEmulation emu(s);
      const Matrix ew =
          emu.UploadAt(in.w.data(), c.shape.e, c.shape.r, s, c.offset);
      MambaScanParams probe;
      probe.n_state = c.shape.n;
      probe.dt_proj.w = ew;
      EXPECT_EQ(cuda::MambaScanDecodeFoldsDtProj(probe),
                c.folds || c.shape.name == std::string("prefill"));
      const fold::FoldRun want = fold::RunFold(*cpu, *cw, in, c.segs, true);
      const int64_t before = emu::State().launches;
      const fold::FoldRun got = fold::RunFold(emu, ew, in, c.segs, true);
      EXPECT_EQ(emu::State().launches - before, c.folds ? 1 : 2);
      // dt_rank 2000 sums 40x the products of the model shapes.
      const float tol = c.shape.r > 1000 ? 4 * kTol : kTol;
      EXPECT_LE(MaxAbsDiff(want.y, got.y), tol);
      EXPECT_LE(MaxAbsDiff(want.state, got.state), tol);
    }
  }
}

}  // namespace
}  // namespace seqboat::emu_test
