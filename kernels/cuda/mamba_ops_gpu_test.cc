// Mamba-1's conv and scan on CUDA equal the CPU backend's: the outputs and the
// whole state arena after each of several calls that mix decode, prefill and
// zero-length padding segments (on a slot a real segment also uses), for the
// register-resident sizes and the global-memory fallbacks; decode after
// prefill (the decode scan); and a recorded decode step replayed with new
// inputs and segments equals running it eagerly. dt_proj folded into the
// decode scan (MambaScanParams::dt_proj) at the 130M and 1.4B shapes, on
// fp32, bf16 and fp8 weights, stays within rounding of the CPU's GEMM and
// scan, and its recorded step replays to the eager bits.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/dtype_convert.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/fp8_weights.h"
#include "kernels/cuda/testing/gpu_test_util.h"
#include "kernels/cuda/testing/mamba_cases.h"
#include "kernels/cuda/testing/mamba_dt_fold_cases.h"
#include "kernels/cuda/testing/stored_values.h"

namespace seqboat::gpu_test {
namespace {

constexpr float kTol = 1e-5f;

using parity::Bound;
using parity::FixedMixedCalls;
using parity::PaddedDecodeCalls;
using parity::mamba::DeviceLayer;
using parity::mamba::DeviceStep;
using parity::mamba::Dims;
using parity::mamba::ExpectMatchOverCalls;
using parity::mamba::HostLayer;
using parity::mamba::HostStep;
using parity::mamba::MakeLayer;
using parity::mamba::MakeStep;
using parity::mamba::RunOps;
using parity::mamba::Trace;

TEST(MambaOpsGpuTest, MatchesCpuOverMixedSegments) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  // Realistic; odd sizes (scalar state rows, unaligned slots); every register
  // specialisation; and the global-memory fallbacks (k = 6, n = 3, n = 64).
  for (const Dims& dims :
       {Dims{1536, 16, 4, 0}, Dims{37, 5, 4, 0}, Dims{37, 5, 3, 1},
        Dims{40, 32, 2, 0}, Dims{72, 8, 4, 3}, Dims{64, 4, 4, 0},
        Dims{33, 3, 6, 0}, Dims{96, 64, 4, 0}}) {
    ExpectMatchOverCalls(*p.cpu, *p.cuda, dims, FixedMixedCalls(),
                         Bound::Below(kTol));
  }
}

// Decode after prefill (the decode scan, mamba_ops.cc's choice for decode
// calls) at the 130M and 1.4B models' d_inner and at odd sizes.
TEST(MambaOpsGpuTest, DecodeScanMatchesCpuAfterPrefill) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  for (const Dims& dims :
       {Dims{1536, 16, 4, 0}, Dims{4096, 16, 4, 0}, Dims{37, 4, 4, 1},
        Dims{45, 8, 3, 0}, Dims{23, 32, 4, 2}}) {
    ExpectMatchOverCalls(*p.cpu, *p.cuda, dims,
                         parity::PrefillThenDecodeCalls(), Bound::Below(kTol));
  }
}

// A decode step padded to a bucket, recorded once and replayed with new
// inputs and a new slot assignment, equals the same step run eagerly (and the
// CPU's); the state carries across the steps.
TEST(MambaOpsGpuTest, ReplayedStepMatchesEager) {
  auto cpu = MakeCpuBackend(1);
  auto eager = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  ASSERT_NE(eager, nullptr);
  for (const Dims& dims : {Dims{1536, 16, 4, 0}, Dims{37, 5, 4, 0}}) {
    // A recording belongs to one model's buffers: the next layer size gets a
    // backend of its own rather than replaying the last one's graph.
    auto rec = MakeCuda(CudaWeights::kF32, /*graphs=*/true);
    ASSERT_NE(rec, nullptr);
    SCOPED_TRACE(testing::Message() << "e=" << dims.e << " n=" << dims.n);
    const HostLayer layer = MakeLayer(dims, 4, 300 + dims.e);
    const std::vector<std::vector<Segment>> calls = PaddedDecodeCalls();
    std::vector<HostStep> steps;
    for (size_t i = 0; i < calls.size(); ++i) {
      steps.push_back(
          MakeStep(dims, calls[i], 400 + 10 * static_cast<uint32_t>(i)));
    }
    Trace got[3];
    int which = 0;
    for (Backend* be : {cpu.get(), eager.get(), rec.get()}) {
      DeviceLayer l(*be, layer);
      // One set of buffers: a replay reuses the recorded addresses.
      DeviceStep s(*be, dims, 4);
      for (const HostStep& step : steps) {
        s.Load(*be, step);
        ASSERT_TRUE(be->RunCaptured(4, [&] {
                        RunOps(*be, l, s, step.segs);
                        return absl::OkStatus();
                      }).ok());
        got[which].x.push_back(s.x.Read());
        got[which].y.push_back(s.y.Read());
        got[which].arena.push_back(l.arena.Read());
        ASSERT_TRUE(be->TakeError().ok());
      }
      ++which;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      // The same kernels on the same inputs: bit for bit.
      EXPECT_EQ(MaxAbsDiff(got[1].y[i], got[2].y[i]), 0.0f) << "step " << i;
      EXPECT_EQ(MaxAbsDiff(got[1].x[i], got[2].x[i]), 0.0f) << "step " << i;
      EXPECT_EQ(MaxAbsDiff(got[1].arena[i], got[2].arena[i]), 0.0f)
          << "step " << i;
      EXPECT_LT(MaxAbsDiff(got[0].y[i], got[2].y[i]), kTol) << "step " << i;
      EXPECT_LT(MaxAbsDiff(got[0].arena[i], got[2].arena[i]), kTol)
          << "step " << i;
    }
    EXPECT_GT(MaxAbsDiff(got[1].y[0], got[1].y[1]), 0.0f);  // inputs changed
  }
}

namespace fold = parity::dt_fold;

// What a [rows, cols] matrix becomes on a CUDA backend of `weights`.
std::vector<float> StoredAs(CudaWeights weights, std::vector<float> v,
                            int64_t rows, int64_t cols) {
  const cuda::Storage s = weights == CudaWeights::kFp8 ? cuda::Storage::kFp8E4m3
                          : weights == CudaWeights::kBf16 ? cuda::Storage::kBf16
                                                          : cuda::Storage::kF32;
  return parity::StoredValues(s, std::move(v), rows, cols);
}

// Decode batches up to 256 (the folded kernel; cuBLAS for the unfolded GEMM
// beyond 16 rows) against the CPU's GEMM of the stored matrix and scan.
TEST(MambaOpsGpuTest, FoldedDtProjMatchesCpu) {
  for (const CudaWeights weights :
       {CudaWeights::kF32, CudaWeights::kBf16, CudaWeights::kFp8}) {
    auto cpu = MakeCpuBackend(1);
    auto cuda = MakeCuda(weights);
    ASSERT_NE(cuda, nullptr);
    for (fold::FoldShape shape : {fold::kMamba130m, fold::kMamba1b4}) {
      shape.slots = 257;
      SCOPED_TRACE(testing::Message()
                   << shape.name << " weights " << static_cast<int>(weights));
      const fold::FoldInputs in = fold::MakeFoldInputs(shape, 257, 21);
      const std::vector<float> stored =
          StoredAs(weights, in.w, shape.e, shape.r);
      auto cw = cpu->UploadMatrix(stored.data(), shape.e, shape.r);
      auto gw = cuda->UploadMatrix(in.w.data(), shape.e, shape.r);
      ASSERT_TRUE(cw.ok() && gw.ok());
      for (const int b : {1, 7, 15, 64, 256}) {
        SCOPED_TRACE(testing::Message() << "batch " << b);
        const std::vector<Segment> segs = fold::DecodeSegments(b);
        const fold::FoldRun want = fold::RunFold(*cpu, *cw, in, segs, true);
        const fold::FoldRun got = fold::RunFold(*cuda, *gw, in, segs, true);
        EXPECT_LT(MaxAbsDiff(want.y, got.y), kTol);
        EXPECT_LT(MaxAbsDiff(want.state, got.state), kTol);
      }
    }
  }
}

// A folded decode step recorded once and replayed with new inputs equals
// the same step run eagerly, bit for bit (the same kernel both ways).
TEST(MambaOpsGpuTest, FoldedDtProjReplaysToTheEagerBits) {
  const fold::FoldShape shape = fold::kMamba130m;
  const std::vector<Segment> segs = fold::DecodeSegments(7);
  const int rows = parity::RowsOf(segs);
  std::vector<fold::FoldInputs> steps;
  for (uint32_t i = 0; i < 3; ++i) {
    steps.push_back(fold::MakeFoldInputs(shape, rows, 500 + 10 * i));
  }
  const int64_t e = shape.e;
  std::vector<float> got[2][3];
  for (int graphs = 0; graphs < 2; ++graphs) {
    auto be = MakeCuda(CudaWeights::kBf16, graphs == 1);
    ASSERT_NE(be, nullptr);
    const fold::FoldInputs& first = steps[0];
    auto w = be->UploadMatrix(first.w.data(), e, shape.r);
    ASSERT_TRUE(w.ok());
    Array x(*be, first.x), xz(*be, first.xz), xdbl(*be, first.xdbl),
        a(*be, first.a), d(*be, first.d), dt_bias(*be, first.dt_bias),
        state(*be, first.state), dt(*be, rows * e), y(*be, rows * e);
    MambaScanParams p;
    p.segs = segs.data();
    p.nsegs = static_cast<int>(segs.size());
    p.x = x.get();
    p.bc = xdbl.get() + shape.r;
    p.ldbc = shape.Cols();
    p.z = xz.get() + e;
    p.ldz = 2 * shape.e;
    p.a = a.get();
    p.d = d.get();
    p.dt_bias = dt_bias.get();
    p.state = state.get();
    p.state_stride = e * shape.n;
    p.e = shape.e;
    p.n_state = shape.n;
    p.out = y.get();
    p.dt_proj = {xdbl.get(), shape.Cols(), rows, *w, dt.get()};
    for (int i = 0; i < 3; ++i) {
      const fold::FoldInputs& in = steps[i];
      be->CopyToDevice(x.get(), in.x.data(), in.x.size() * 4);
      be->CopyToDevice(xz.get(), in.xz.data(), in.xz.size() * 4);
      be->CopyToDevice(xdbl.get(), in.xdbl.data(), in.xdbl.size() * 4);
      ASSERT_TRUE(be->RunCaptured(8, [&] {
                      be->MambaScan(p);
                      return absl::OkStatus();
                    }).ok());
      ASSERT_TRUE(be->TakeError().ok());
      got[graphs][i] = y.Read();
      const std::vector<float> s = state.Read();
      got[graphs][i].insert(got[graphs][i].end(), s.begin(), s.end());
    }
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(MaxAbsDiff(got[0][i], got[1][i]), 0.0f) << "step " << i;
  }
  EXPECT_GT(MaxAbsDiff(got[0][0], got[0][1]), 0.0f);  // inputs changed
}

}  // namespace
}  // namespace seqboat::gpu_test
