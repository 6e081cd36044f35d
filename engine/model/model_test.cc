#include "engine/model/model.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "engine/backend/testing/forwarding_backend.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

constexpr char kTinyMamba[] = "tests/data/tiny_mamba";

std::vector<int32_t> Tokens(int n) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 37 + 11) % 256;
  return t;
}

// Feeds `tokens` to `slot` in chunks of `chunk`; returns the logits of every
// position.
std::vector<float> Feed(Model& model, int slot,
                        const std::vector<int32_t>& tokens, int chunk) {
  const int v = model.vocab_size();
  std::vector<float> logits(tokens.size() * v);
  for (size_t start = 0; start < tokens.size(); start += chunk) {
    const int len = std::min<int>(chunk, tokens.size() - start);
    StepRows step;
    step.ids.assign(tokens.begin() + start, tokens.begin() + start + len);
    step.segs = {{slot, 0, len}};
    step.logit_rows.resize(len);
    std::iota(step.logit_rows.begin(), step.logit_rows.end(), 0);
    EXPECT_TRUE(model.Forward(step, logits.data() + start * v).ok());
  }
  return logits;
}

float MaxAbsDiff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(ModelTest, ChunkedPrefillEqualsTokenByTokenDecode) {
  auto backend = MakeCpuBackend();
  auto model = Model::Load(kTinyMamba, *backend,
                           {/*max_slots=*/16, /*max_rows_per_step=*/16});
  ASSERT_TRUE(model.ok()) << model.status();
  SlotArena& arena = (*model)->arena();
  const int a = *arena.Acquire(), b = *arena.Acquire();
  const std::vector<int32_t> tokens = Tokens(64);
  const std::vector<float> stepwise = Feed(**model, a, tokens, 1);
  const std::vector<float> chunked = Feed(**model, b, tokens, 7);
  EXPECT_LT(MaxAbsDiff(stepwise.data(), chunked.data(), stepwise.size()),
            1e-5f);
  const std::vector<uint8_t> sa = arena.Snapshot(a), sb = arena.Snapshot(b);
  ASSERT_EQ(sa.size(), sb.size());
  ASSERT_EQ(sa.size() % 4, 0u);
  EXPECT_LT(
      MaxAbsDiff(reinterpret_cast<const float*>(sa.data()),
                 reinterpret_cast<const float*>(sb.data()), sa.size() / 4),
      1e-5f);
}

TEST(ModelTest, SlotsAreIndependentAndResetOnAcquire) {
  auto backend = MakeCpuBackend();
  auto model = Model::Load(kTinyMamba, *backend, {16, 32});
  ASSERT_TRUE(model.ok()) << model.status();
  SlotArena& arena = (*model)->arena();
  const int a = *arena.Acquire();
  const std::vector<int32_t> tokens = Tokens(20);
  const std::vector<float> first = Feed(**model, a, tokens, 5);
  ASSERT_TRUE(arena.Release(a));
  EXPECT_FALSE(arena.Release(a));  // a double release is refused
  const int again = *arena.Acquire();
  EXPECT_EQ(again, a);  // lowest free slot comes back, zeroed
  const std::vector<float> second = Feed(**model, again, tokens, 5);
  EXPECT_EQ(0.0f, MaxAbsDiff(first.data(), second.data(), first.size()));
}

TEST(ModelTest, PackedSegmentsMatchSeparateRuns) {
  auto backend = MakeCpuBackend();
  auto model = Model::Load(kTinyMamba, *backend, {16, 64});
  ASSERT_TRUE(model.ok()) << model.status();
  SlotArena& arena = (*model)->arena();
  const int a = *arena.Acquire(), b = *arena.Acquire(), c = *arena.Acquire();
  const std::vector<int32_t> ta = Tokens(9), tb = {5, 6, 7, 8};
  const int v = (*model)->vocab_size();
  // Alone.
  const std::vector<float> alone_a = Feed(**model, a, ta, 9);
  const std::vector<float> alone_b = Feed(**model, b, tb, 4);
  // Together in one packed step: c gets ta, and the last row of each has
  // logits.
  const int d = *arena.Acquire();
  std::vector<int32_t> ids(ta);
  ids.insert(ids.end(), tb.begin(), tb.end());
  const StepRows step{ids, {{c, 0, 9}, {d, 9, 4}}, {8, 12}};
  std::vector<float> packed(2 * v);
  ASSERT_TRUE((*model)->Forward(step, packed.data()).ok());
  EXPECT_LT(MaxAbsDiff(packed.data(), alone_a.data() + 8 * v, v), 1e-5f);
  EXPECT_LT(MaxAbsDiff(packed.data() + v, alone_b.data() + 3 * v, v), 1e-5f);
}

// Three sequences decode together; the padded model runs every step at
// bucket 4 with a zero-length segment on slot 0, which a real sequence also
// holds: padding must change neither the logits nor any state.
// tiny_gdn's and tiny_hybrid's MoE and SeqBoat blocks keep a decode step on
// the device, so their stacks are padded and recorded too.
class PaddedDecodeTest : public testing::TestWithParam<const char*> {};

TEST_P(PaddedDecodeTest, DecodeStepsPaddedToABucketEqualUnpaddedOnes) {
  auto backend = MakeCpuBackend();
  ModelLimits plain{8, 16, std::vector<int>{}};
  ModelLimits padded{8, 16, std::vector<int>{1, 2, 4, 8}};
  auto a = Model::Load(GetParam(), *backend, plain);
  auto b = Model::Load(GetParam(), *backend, padded);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE((*a)->decode_buckets().empty());
  EXPECT_EQ((*b)->decode_buckets(), std::vector<int>({1, 2, 4, 8}));
  const int v = (*a)->vocab_size();
  std::vector<int> slots;
  for (Model* m : {a->get(), b->get()}) {
    for (int i = 0; i < 3; ++i) slots.push_back(*m->arena().Acquire());
  }
  ASSERT_EQ(slots[0], 0);
  std::vector<float> la(3 * v), lb(3 * v);
  for (int step = 0; step < 12; ++step) {
    StepRows ra, rb;
    ra.ids = rb.ids = {(step * 7) % 256, (step * 13 + 1) % 256,
                       (step * 29 + 2) % 256};
    ra.logit_rows = rb.logit_rows = {0, 1, 2};
    for (int i = 0; i < 3; ++i) {
      ra.segs.push_back({slots[i], i, 1});
      rb.segs.push_back({slots[3 + i], i, 1});
    }
    ASSERT_TRUE((*a)->Forward(ra, la.data()).ok());
    ASSERT_TRUE((*b)->Forward(rb, lb.data()).ok());
    ASSERT_LT(MaxAbsDiff(la.data(), lb.data(), la.size()), 1e-6f) << step;
  }
  for (int i = 0; i < 3; ++i) {
    const std::vector<uint8_t> x = (*a)->arena().Snapshot(slots[i]);
    const std::vector<uint8_t> y = (*b)->arena().Snapshot(slots[3 + i]);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_LT(
        MaxAbsDiff(reinterpret_cast<const float*>(x.data()),
                   reinterpret_cast<const float*>(y.data()), x.size() / 4),
        1e-6f);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PaddedDecodeTest,
                         testing::Values(kTinyMamba, "tests/data/tiny_gdn",
                                         "tests/data/tiny_hybrid"));

// The CPU backend's head writes into the caller's buffer; a backend whose
// memory is not the host's gets a copy. Both give the same m rows, and
// neither writes past them.
class DeviceMemoryCpu final : public ForwardingBackend {
 public:
  DeviceMemoryCpu() : ForwardingBackend(MakeCpuBackend()) {}
  bool MemoryIsHost() const override { return false; }
};

TEST(ModelTest, LogitsWrittenInPlaceEqualCopiedOnesAndStayInTheirRows) {
  auto host = MakeCpuBackend();
  DeviceMemoryCpu device;
  ASSERT_TRUE(host->MemoryIsHost());
  auto a = Model::Load(kTinyMamba, *host, {4, 16, std::vector<int>{}});
  auto b = Model::Load(kTinyMamba, device, {4, 16, std::vector<int>{}});
  ASSERT_TRUE(a.ok() && b.ok());
  const int v = (*a)->vocab_size();
  const std::vector<int32_t> tokens = Tokens(6);
  constexpr float kGuard = -12345.0f;
  std::vector<float> la(3 * v, kGuard), lb(3 * v, kGuard);
  // Two of the six rows want logits.
  const StepRows ra{tokens, {{*(*a)->arena().Acquire(), 0, 6}}, {2, 5}};
  const StepRows rb{tokens, {{*(*b)->arena().Acquire(), 0, 6}}, {2, 5}};
  ASSERT_TRUE((*a)->Forward(ra, la.data()).ok());
  ASSERT_TRUE((*b)->Forward(rb, lb.data()).ok());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), 2 * v * sizeof(float)), 0);
  for (int j = 2 * v; j < 3 * v; ++j) {
    ASSERT_EQ(la[j], kGuard) << j;
    ASSERT_EQ(lb[j], kGuard) << j;
  }
  // The rows are real logits, not the guard or zeros.
  EXPECT_GT(MaxAbsDiff(la.data(), la.data() + v, v), 0.0f);
}

// A decode step copies nothing to the host but its logits (a padded step's
// head writes its own buffer): every layer kind stays on the device, so the
// step can be recorded and replayed.
class CopyCountingCpu final : public ForwardingBackend {
 public:
  CopyCountingCpu() : ForwardingBackend(MakeCpuBackend()) {}
  // As a device: layers take their device paths.
  bool MemoryIsHost() const override { return false; }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    copies.push_back(bytes);
    ForwardingBackend::CopyToHost(dst, src, bytes);
  }
  std::vector<size_t> copies;
};

TEST(ModelTest, DecodeStepsReadNothingBack) {
  for (const char* dir :
       {"tests/data/tiny_hybrid", "tests/data/tiny_gdn", kTinyMamba}) {
    CopyCountingCpu be;
    ModelLimits limits{8, 16, std::vector<int>{1, 2, 4, 8}};
    auto model = Model::Load(dir, be, limits);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->decode_buckets(), std::vector<int>({1, 2, 4, 8}));
    const int a = *(*model)->arena().Acquire(),
              b = *(*model)->arena().Acquire();
    std::vector<float> logits(2 * static_cast<size_t>((*model)->vocab_size()));
    // A prefill reads back where a block sizes work by its routing.
    const StepRows prefill{{5, 6, 7, 8}, {{a, 0, 4}}, {3}};
    ASSERT_TRUE((*model)->Forward(prefill, logits.data()).ok());
    be.copies.clear();
    for (int step = 0; step < 4; ++step) {
      const StepRows decode{
          {10 + step, 20 + step}, {{a, 0, 1}, {b, 1, 1}}, {0, 1}};
      ASSERT_TRUE((*model)->Forward(decode, logits.data()).ok()) << dir;
    }
    EXPECT_EQ(be.copies, std::vector<size_t>(4, logits.size() * sizeof(float)))
        << dir;
  }
}

TEST(ModelTest, BucketsOutsideTheLimitsAreRejected) {
  auto backend = MakeCpuBackend();
  ModelLimits limits{4, 16, std::vector<int>{1, 8}};
  auto model = Model::Load(kTinyMamba, *backend, limits);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("decode buckets"), std::string::npos)
      << model.status();
}

TEST(ModelTest, MissingDirectoryIsAClearError) {
  auto backend = MakeCpuBackend();
  auto model = Model::Load("/nonexistent/model", *backend, {4, 16});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("config.json"), std::string::npos)
      << model.status();
}

}  // namespace
}  // namespace seqboat
