// Sink + rolling-window attention kernels (kernels/attention_kernels.cu), run
// on the CUDA emulation, equal the CPU backend's ops over successive steps:
// outputs within a few ulp and the whole cache (counts, stored rows) byte for
// byte after every step, and out's 16-bit copy out's bits rounded. Steps mix
// decode rows, prefill chunks longer than the window (eviction inside the
// chunk) and zero-length padding segments on a slot a real segment also uses;
// long windows split the keys over blocks (partials plus the combine kernel)
// and wrap the ring.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/emu/attention_emulation.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/testing/attention_cases.h"

namespace seqboat::emu_test {
namespace {

// Both sides fold keys with attention_math's online softmax, but in
// different orders: the kernel's warps take keys round-robin and merge (and
// split blocks merge again), its dot products are lane partials summed by a
// butterfly, while the CPU runs keys in order with a sequential dot. fp32
// rounding of that reordering stays within a few ulp of outputs of magnitude
// ~2 (seen: 1.2e-6); a wrong key, position or row is off by O(0.1) or
// more.
constexpr float kTol = 1e-5f;

// kernels/attention_ops.cc's launches, with its host planning
// (attention_plan.h), on host memory: the "staged" copies are the host
// arrays themselves. Every attention call also asks for out's 16-bit copy
// (bf16 and fp16 in turn), and each of its values must be out's rounded to
// nearest even, as ConvertRows would round it (half_rows.h).
class AttentionEmulation : public EmulatedBackend {
 public:
  void SinkAttention(const SinkAttentionParams& p) override {
    const HalfFormat format =
        ++calls_ % 2 == 0 ? HalfFormat::kBf16 : HalfFormat::kF16;
    int rows = 0;
    for (int s = 0; s < p.nsegs; ++s) {
      rows = std::max(rows, p.segs[s].start + p.segs[s].len);
    }
    const int width = p.dims.n_heads * p.dims.head_dim;
    // 0xffff is a NaN in both formats: a value never written shows.
    std::vector<uint16_t> copy(static_cast<size_t>(rows) * width, 0xffff);
    SinkAttentionParams with_copy = p;
    with_copy.out16.data = copy.data();
    with_copy.out16.ld = width;
    with_copy.out16.format = format;
    Launch(with_copy);
    for (int s = 0; s < p.nsegs; ++s) {
      for (int64_t row = p.segs[s].start; row < p.segs[s].start + p.segs[s].len;
           ++row) {
        for (int c = 0; c < width; ++c) {
          const float v = p.out[row * width + c];
          const uint16_t want =
              format == HalfFormat::kBf16
                  ? __bfloat16_as_ushort(__float2bfloat16_rn(v))
                  : __half_as_ushort(__float2half_rn(v));
          ASSERT_EQ(copy[row * width + c], want)
              << "row " << row << " column " << c;
        }
      }
    }
  }

  void Launch(const SinkAttentionParams& p) {
    const absl::StatusOr<int> splits = EmulateSinkAttention(p, nullptr);
    ASSERT_TRUE(splits.ok()) << splits.status();
    max_splits_ = std::max(max_splits_, *splits);
  }

  void SinkCacheAppend(const SinkAppendParams& p) override {
    const std::vector<cuda::SinkRow> items =
        cuda::SinkWorkItems(p.segs, p.nsegs);
    if (items.empty()) return;
    const cuda::SinkWork work = cuda::PlanSinkAppendWork(
        p.segs, p.nsegs, items.data(), static_cast<int>(items.size()));
    const int64_t before = emu::State().launches;
    cuda::LaunchSinkCacheAppend(p, work, nullptr);
    // A decode call stores and counts in one kernel, any other in two.
    const bool decode = AllDecodeRows(p.segs, p.nsegs);
    EXPECT_EQ(emu::State().launches - before, decode ? 1 : 2);
    (decode ? decode_appends_ : chunk_appends_)++;
  }

  int max_splits() const { return max_splits_; }
  int decode_appends() const { return decode_appends_; }
  int chunk_appends() const { return chunk_appends_; }

 private:
  int max_splits_ = 1;
  int decode_appends_ = 0, chunk_appends_ = 0;
  int calls_ = 0;
};

using parity::SinkConfig;
using parity::SinkRun;

// What the emulation's launches took over one run.
struct Taken {
  int max_splits = 1;
  int decode_appends = 0, chunk_appends = 0;
};

// Runs the steps on both backends from the same random inputs, comparing
// after each one.
Taken RunAndCompare(const SinkRun& run) {
  auto cpu_be = MakeCpuBackend(1);
  AttentionEmulation emu;
  parity::RunSinkSteps(*cpu_be, emu, run, kTol);
  return {emu.max_splits(), emu.decode_appends(), emu.chunk_appends()};
}

// The random steps include decode calls, whose append is one kernel (the
// block that stores a row also moves its slot's count), beside prefill
// chunks: the caches stay byte-equal through both.
TEST(AttentionKernelsEmuTest, SinkAndWindowMatchCpuOverManySteps) {
  int decode = 0, chunk = 0;
  for (const SinkRun& run : parity::SinkSweepRuns(8)) {
    const Taken taken = RunAndCompare(run);
    if (HasFatalFailure()) return;
    decode += taken.decode_appends;
    chunk += taken.chunk_appends;
  }
  EXPECT_GT(decode, 0);
  EXPECT_GT(chunk, 0);
}

// Windows long enough that the keys split over blocks (partials plus the
// combine kernel), for decode rows and a short prefill chunk; slot 1 is
// filled past S + W so its ring wraps.
TEST(AttentionKernelsEmuTest, LongWindowSplitsMatchCpu) {
  const SinkConfig configs[] = {
      {6, 2, 80, 2, 300, true},
      {4, 4, 128, 0, 520, false, 0, true, true},  // gate in the combine
  };
  for (const SinkConfig& c : configs) {
    SCOPED_TRACE(c.Name());
    // Slot 1 fills to S + W + 20 in chunks of 128; a chunk of 3 rows; 4
    // decode steps.
    const int max_splits =
        RunAndCompare(parity::LongWindowSinkRun(c, /*short_by=*/-20,
                                                /*chunk=*/128, /*short_rows=*/3,
                                                /*decodes=*/4))
            .max_splits;
    if (HasFatalFailure()) return;
    EXPECT_GT(max_splits, 1) << "no step split its keys";
  }
}

// A chunk's rows read this step's keys from the rows, normed by the
// attention kernel; decode steps read them from the cache, normed by the
// store kernel. Both norm through one function, so a chunk (with eviction
// inside it) gives each row the bits of decoding it alone: keys too few to
// split, so the key order is the same. The CPU backend keeps the same rule.
TEST(AttentionKernelsEmuTest, NormedChunkEqualsDecodesBitwise) {
  const SinkConfig configs[] = {
      {8, 2, 256, 4, 16, true, 64, true, true},
      {6, 3, 96, 1, 5, true, 0, false, true},
  };
  constexpr int kRows = 30;
  AttentionEmulation emu;
  auto cpu_be = MakeCpuBackend(1);
  for (Backend* be : {static_cast<Backend*>(&emu), cpu_be.get()}) {
    for (const SinkConfig& c : configs) {
      SCOPED_TRACE(absl::StrCat(c.Name(), be == &emu ? " emulation" : " cpu"));
      const std::vector<float> qkv =
          parity::Random(static_cast<size_t>(kRows) * c.Ld(), 5, -2.0f, 2.0f);
      parity::SinkSide chunk(*be, c, 1, kRows), decode(*be, c, 1, 1);
      chunk.Upload(qkv);
      chunk.Step({{0, 0, kRows}});
      const std::vector<float> chunked = chunk.Out();
      for (int i = 0; i < kRows; ++i) {
        decode.Upload(std::vector<float>(qkv.begin() + i * c.Ld(),
                                         qkv.begin() + (i + 1) * c.Ld()));
        decode.Step({{0, 0, 1}});
        const std::vector<float> one = decode.Out();
        for (int j = 0; j < c.QDim(); ++j) {
          ASSERT_EQ(one[j], chunked[static_cast<size_t>(i) * c.QDim() + j])
              << "row " << i << " element " << j;
        }
      }
      EXPECT_EQ(
          parity::SinkCacheDiff(chunk.Cache(), decode.Cache(), c.SlotBytes()),
          "");
    }
  }
}

}  // namespace
}  // namespace seqboat::emu_test
