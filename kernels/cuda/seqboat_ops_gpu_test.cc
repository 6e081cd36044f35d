// The SeqBoat ops on CUDA equal the CPU backend's over many successive steps
// of one packed batch: decode and prefill segments on several slots, padding
// segments (len 0 on slot 0, which a real segment also uses, as the model
// pads), 0 %, ~50 % and 100 % active rows, both attention functions and both
// positional variants, until every FIFO has wrapped. After every op the
// outputs (1e-4, relative to the largest output) and the whole state arena
// (floats 1e-5, integers exact) are compared; the router's decisions exactly.
// The cases are kernels/cuda/testing/seqboat_cases.cc, which the emulation
// test runs too. The attention's decode form also replays from a recording
// to the eager bits.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/testing/gpu_test_util.h"
#include "kernels/cuda/testing/seqboat_cases.h"

namespace seqboat::gpu_test {
namespace {

using parity::SeqBoatParityTest;
using parity::SeqBoatRun;

// The large window with prefill chunks longer than the window, so the FIFO
// wraps inside a chunk, and steps of thousands of rows for the router.
SeqBoatRun LargeWindowRun() {
  SeqBoatRun r = parity::SeqBoatLargeWindowRun(/*slots=*/1, /*max_chunk=*/2);
  r.long_chunks = true;
  return r;
}

INSTANTIATE_TEST_SUITE_P(SeqBoatOpsGpuTest, SeqBoatParityTest,
                         testing::Values(parity::SeqBoatTarget{
                             "Cuda",
                             [] { return MakeCuda(); },
                             // A trained block's sizes.
                             {/*v=*/1024, /*w=*/64, /*rel_pos_max=*/48,
                              /*max_chunk=*/80},
                             LargeWindowRun()}),
                         parity::SeqBoatTargetName);

// The load-time check agrees with what the kernel can launch: LargeWindow's
// shape passes, a window beyond any GPU's shared memory is refused by name.
TEST(SeqBoatOpsGpuTest, CheckSeqBoatRefusesWindowsBeyondSharedMemory) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  const SeqBoatShape fits = LargeWindowRun().shape;
  EXPECT_TRUE(p.cuda->CheckSeqBoat(fits).ok());
  SeqBoatShape wide = fits;
  wide.w = 1 << 20;
  const absl::Status s = p.cuda->CheckSeqBoat(wide);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("window 1048576"), std::string::npos) << s;
  EXPECT_TRUE(p.cpu->CheckSeqBoat(wide).ok());
}

// A decode step's Route → Attend (decode form) → Mix recorded once and
// replayed with new inputs equals the same step run eagerly, bit for bit:
// outputs, the whole arena and the activated counter.
TEST(SeqBoatOpsGpuTest, DecodeFormReplaysToTheEagerBits) {
  SeqBoatShape s;
  s.d = 512;
  s.ne = 16;
  s.z = 128;
  s.v = 1024;
  s.w = 8;
  const int d = s.d, z = s.z, v = s.v, slots = 4;
  // Four decode rows, a zero-length segment and a padding row.
  const std::vector<Segment> segs = {
      {0, 0, 1}, {1, 1, 1}, {2, 2, 1}, {0, 3, 0}, {3, 4, 1}};
  const int n = 6, ldzrv = z + 2 * v;
  const int64_t stride = op_math::SeqBoatStateBytes(s);
  std::vector<float> got[2][5];
  for (int graphs = 0; graphs < 2; ++graphs) {
    auto be = MakeCuda(CudaWeights::kF32, graphs == 1);
    ASSERT_NE(be, nullptr);
    Array gamma(*be, parity::Random(2 * z, 1)),
        beta(*be, parity::Random(2 * z, 2)),
        temp(*be, std::vector<float>{0.7f}), arena(*be, stride * slots / 4),
        u(*be, n * 2), zrv(*be, n * ldzrv), conf(*be, n), att(*be, n * v),
        res(*be, n * d), g(*be, n * d), y(*be, parity::Random(n * d, 3)),
        counter(*be, 2);
    auto compact = parity::IntArray(*be, std::vector<int32_t>(n, 0));
    auto active = parity::IntArray(*be, std::vector<int32_t>(n + 1, 0));
    SeqBoatRouteParams route;
    route.u = u.get();
    route.ldu = 2;
    route.n = n;
    route.temperature = temp.get();
    route.conf = conf.get();
    route.compact = reinterpret_cast<int32_t*>(compact->get());
    route.active = reinterpret_cast<int32_t*>(active->get());
    route.activated = reinterpret_cast<int64_t*>(counter.get());
    SeqBoatAttendParams gau;
    gau.segs = segs.data();
    gau.nsegs = static_cast<int>(segs.size());
    gau.compact = route.compact;
    gau.zrv = zrv.get();
    gau.ldzrv = ldzrv;
    gau.state = arena.get();
    gau.state_stride = stride;
    gau.shape = s;
    gau.qk_gamma = gamma.get();
    gau.qk_beta = beta.get();
    gau.out = att.get();
    SeqBoatMixParams mix;
    mix.s = res.get();
    mix.g = g.get();
    mix.ldg = d;
    mix.y = y.get();
    mix.conf = conf.get();
    mix.compact = route.compact;
    mix.n = n;
    mix.d = d;
    mix.out = res.get();
    for (int i = 0; i < 5; ++i) {
      // Some rows on, some off, changing from step to step.
      const std::vector<float> ui = parity::Random(n * 2, 10 + i, -3, 3);
      const std::vector<float> zi = parity::Random(n * ldzrv, 20 + i, -2, 2);
      const std::vector<float> gi = parity::Random(n * d, 30 + i);
      be->CopyToDevice(u.get(), ui.data(), ui.size() * 4);
      be->CopyToDevice(zrv.get(), zi.data(), zi.size() * 4);
      be->CopyToDevice(g.get(), gi.data(), gi.size() * 4);
      ASSERT_TRUE(be->RunCaptured(8, [&] {
                      be->SeqBoatRoute(route);
                      be->SeqBoatAttend(gau);
                      be->SeqBoatMix(mix);
                      return absl::OkStatus();
                    }).ok());
      ASSERT_TRUE(be->TakeError().ok());
      got[graphs][i] = res.Read();
      for (const std::vector<float>& part :
           {arena.Read(), conf.Read(), counter.Read()}) {
        got[graphs][i].insert(got[graphs][i].end(), part.begin(), part.end());
      }
    }
  }
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(got[0][i].size(), got[1][i].size());
    EXPECT_EQ(0, std::memcmp(got[0][i].data(), got[1][i].data(),
                             got[0][i].size() * sizeof(float)))
        << "step " << i;
  }
  EXPECT_NE(got[0][0], got[0][1]);  // inputs changed
}

}  // namespace
}  // namespace seqboat::gpu_test
