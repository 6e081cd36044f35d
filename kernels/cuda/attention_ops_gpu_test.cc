// Sink + rolling-window attention on CUDA equals the CPU backend's over many
// successive steps: outputs within 1e-5 and the whole cache (counts, stored
// rows) byte for byte after every step. Steps mix decode rows, prefill chunks
// longer than the window (eviction inside the chunk) and zero-length padding
// segments on slot 0 while a real sequence also uses slot 0. A recorded
// decode step replays with fresh inputs and matches eager runs.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/testing/attention_cases.h"
#include "kernels/cuda/testing/gpu_test_util.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::gpu_test {
namespace {

using parity::SinkCacheDiff;
using parity::SinkConfig;
using parity::SinkCount;
using parity::SinkRun;
using parity::SinkSide;
using parity::SinkStepPlan;

// Runs the steps on the CPU and CUDA backends from the same random inputs
// and compares after each one.
void RunAndCompare(const SinkRun& run) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  parity::RunSinkSteps(*p.cpu, *p.cuda, run, 1e-5f);
}

TEST(AttentionOpsGpuTest, SinkAndWindowMatchCpuOverManySteps) {
  for (const SinkRun& run : parity::SinkSweepRuns(24)) {
    RunAndCompare(run);
    if (HasFatalFailure()) return;
  }
}

// A window of thousands: split keys (flash-decoding partials plus combine)
// for decode rows and for short prefill chunks; the decode steps carry slot
// 1 past S + W so its ring wraps.
TEST(AttentionOpsGpuTest, LongWindowSplitsMatchCpu) {
  const SinkConfig configs[] = {
      {8, 2, 64, 4, 2048, true},
      {4, 4, 128, 0, 1024, false, 0, true, true},  // gate in the combine
  };
  for (const SinkConfig& c : configs) {
    // Slot 1 fills to S + W - 40 in chunks of 512; a chunk of 100 rows; 70
    // decode steps.
    RunAndCompare(parity::LongWindowSinkRun(c, /*short_by=*/40, /*chunk=*/512,
                                            /*short_rows=*/100,
                                            /*decodes=*/70));
    if (HasFatalFailure()) return;
  }
}

// A decode step recorded once (bucket of 4 with a zero-length segment on
// slot 0 while slot 0 also decodes) and replayed with fresh q/k/v and other
// slot orders gives what eager runs give, the split path included.
TEST(AttentionOpsGpuTest, RecordedDecodeStepMatchesEager) {
  const SinkConfig c{8, 2, 64, 4, 512, true};
  auto rec = MakeCuda(CudaWeights::kF32, /*graphs=*/true);
  auto eager = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  ASSERT_NE(rec, nullptr);
  ASSERT_NE(eager, nullptr);
  const int slots = 4, rows = 4;
  // No prefill splits its keys: the split workspace is first allocated while
  // the decode step is being recorded.
  const int prefill[slots] = {300, 600, 520, 300};
  SinkSide sr(*rec, c, slots, 600), se(*eager, c, slots, 600);
  // Eager prefill first, so caches hold wrapped windows.
  for (int slot = 0; slot < slots; ++slot) {
    SinkStepPlan s;
    s.Add(slot, prefill[slot]);
    const std::vector<float> qkv =
        Random(static_cast<size_t>(s.rows) * c.Ld(), 40 + slot, -2.0f, 2.0f);
    for (SinkSide* side : {&sr, &se}) {
      side->Upload(qkv);
      side->Step(s.segs);
    }
  }
  ASSERT_TRUE(rec->TakeError().ok());
  ASSERT_TRUE(eager->TakeError().ok());
  std::vector<float> last;
  for (int step = 0; step < 12; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    const int order[2][3] = {{1, 0, 2}, {3, 2, 0}};
    std::vector<Segment> segs;
    for (int i = 0; i < 3; ++i) segs.push_back({order[step % 2][i], i, 1});
    segs.push_back({0, 3, 0});
    const std::vector<float> qkv =
        Random(static_cast<size_t>(rows) * c.Ld(), 500 + step, -2.0f, 2.0f);
    sr.Upload(qkv);
    se.Upload(qkv);
    ASSERT_TRUE(rec->RunCaptured(rows,
                                 [&] {
                                   sr.Step(segs);
                                   return absl::OkStatus();
                                 })
                    .ok());
    se.Step(segs);
    ASSERT_TRUE(rec->TakeError().ok());
    ASSERT_TRUE(eager->TakeError().ok());
    const std::vector<float> out = sr.Out();
    EXPECT_LT(MaxAbsDiff(se.Out(), out), 1e-5f);
    ASSERT_EQ(SinkCacheDiff(se.Cache(), sr.Cache(), c.SlotBytes()), "");
    if (step > 0) {
      EXPECT_GT(MaxAbsDiff(last, out), 0.0f);  // inputs changed
    }
    last = out;
  }
  const std::vector<uint8_t> cache = sr.Cache();
  EXPECT_EQ(SinkCount(cache, c.SlotBytes(), 0), prefill[0] + 12);
  EXPECT_EQ(SinkCount(cache, c.SlotBytes(), 1), prefill[1] + 6);
  EXPECT_EQ(SinkCount(cache, c.SlotBytes(), 3), prefill[3] + 6);
}

}  // namespace
}  // namespace seqboat::gpu_test
