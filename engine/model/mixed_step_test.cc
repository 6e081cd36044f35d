// Mixed steps (one-row segments beside prefill chunks) on a model with decode
// buckets run their one-row segments through RunCaptured and the rest
// eagerly; the logits, the sampled tokens and every slot's state must be
// bitwise those of the same steps on a model without buckets, for every
// stack of tests/data and each of their block kinds alone.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/model.h"
#include "engine/testing/block_slices.h"
#include "engine/testing/pipelined_cpu.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

// The CPU as a pipelining device (fed rows work) that logs RunCaptured keys.
class CaptureLog final : public PipelinedCpu {
 public:
  absl::Status RunCaptured(int64_t key,
                           const std::function<absl::Status()>& step) override {
    keys.push_back(key);
    return PipelinedCpu::RunCaptured(key, step);
  }
  std::vector<int64_t> keys;
};

enum class Logits { kNone, kLast, kEvery };

// One segment of a scripted step: `len` rows of sequence `seq`'s token
// stream, or (fed) one row whose id is the previous launch's token at logit
// row `fed_from`.
struct Part {
  int seq;
  int len;
  Logits logits = Logits::kLast;
  int fed_from = -1;
};

struct Step {
  std::vector<Part> parts;
  bool launch = false;          // LaunchStep with greedy rows, not Forward
  bool reverse_logits = false;  // logit rows in reverse row order
};

constexpr int kSeqs = 6;

// Prefill chunks before, between and after one-row segments; a multi-row
// segment with logits on every row (a speculative round's verification);
// a decode-only step whose logit rows are not in row order; a launched
// mixed step and one whose decode rows are fed from it.
std::vector<Step> Script() {
  const Logits none = Logits::kNone, every = Logits::kEvery;
  return {
      {{{0, 6}, {1, 5}, {2, 1}}},
      {{{2, 1}, {3, 7}, {0, 1}, {1, 1}}},
      {{{4, 4, none}, {0, 1}, {1, 1}, {2, 1}, {3, 1}}},
      {{{0, 1}, {1, 1}, {4, 3}, {2, 1}, {3, 1}, {5, 5}}},
      {{{0, 1}, {1, 1}, {5, 3, every}, {2, 1}}},
      {{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}, false, true},
      {{{0, 1}, {1, 1}, {4, 2}, {2, 1}, {3, 1}}, true},
      {{{1, 1, Logits::kLast, 1},
        {5, 2},
        {0, 1, Logits::kLast, 0},
        {4, 1, Logits::kLast, 2},
        {3, 1}}},
  };
}

// What the bucketed model should hand RunCaptured for each step above
// (buckets 1, 2, 4, 8): its one-row segments' bucket, as a split pass.
std::vector<int64_t> SplitKeys() {
  std::vector<int64_t> keys;
  for (int ones : {1, 3, 4, 4, 3, 6, 4, 4}) {
    keys.push_back(Model::SplitPassKey(ones <= 1   ? 1
                                       : ones <= 2 ? 2
                                       : ones <= 4 ? 4
                                                   : 8));
  }
  return keys;
}

struct Outcome {
  std::vector<std::vector<float>> logits;  // per Forward step
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<uint8_t>> states;
};

Outcome Drive(Model& model, CaptureLog& backend) {
  const int v = model.vocab_size();
  std::vector<int> slots, pos(kSeqs, 0);
  for (int s = 0; s < kSeqs; ++s) slots.push_back(*model.arena().Acquire());
  Outcome out;
  for (const Step& step : Script()) {
    StepRows rows;
    for (const Part& p : step.parts) {
      const int start = rows.n();
      rows.segs.push_back({slots[p.seq], start, p.len});
      for (int i = 0; i < p.len; ++i) {
        rows.ids.push_back((pos[p.seq]++ * 37 + p.seq * 11 + 5) % v);
        if (p.logits == Logits::kEvery ||
            (p.logits == Logits::kLast && i == p.len - 1)) {
          rows.logit_rows.push_back(start + i);
        }
      }
      if (p.fed_from >= 0) {
        rows.ids.back() = 0;
        rows.fed_rows.push_back(start);
        rows.fed_from.push_back(p.fed_from);
      }
    }
    if (step.reverse_logits) {
      std::reverse(rows.logit_rows.begin(), rows.logit_rows.end());
    }
    if (step.launch) {
      std::vector<SampleRow> greedy(rows.m());
      for (SampleRow& r : greedy) r.valid_vocab = v;
      std::vector<int32_t> tokens(rows.m(), -1);
      EXPECT_TRUE(
          model.LaunchStep(rows, greedy.data(), nullptr, tokens.data()).ok());
      EXPECT_TRUE(model.WaitStep().ok());
      out.tokens.push_back(tokens);
      continue;
    }
    std::vector<float> logits(static_cast<size_t>(rows.m()) * v);
    EXPECT_TRUE(model.Forward(rows, logits.data()).ok());
    out.logits.push_back(std::move(logits));
  }
  for (int s : slots) out.states.push_back(model.arena().Snapshot(s));
  return out;
}

std::vector<std::pair<std::string, std::string>> Stacks() {
  std::vector<std::pair<std::string, std::string>> stacks = {
      {"tiny_mamba", "tests/data/tiny_mamba"},
      {"tiny_hybrid", kTinyHybrid},
      {"tiny_gdn", kTinyGdn},
      {"tiny_qwen3_5_mtp", "tests/data/tiny_qwen3_5_mtp"}};
  for (auto& kind : EachBlockKind({kTinyHybrid, kTinyGdn})) {
    stacks.push_back(std::move(kind));
  }
  return stacks;
}

TEST(MixedStepTest, SplitStepsEqualOnePassBitwiseOnEveryStack) {
  int split_stacks = 0;
  for (const auto& [name, dir] : Stacks()) {
    SCOPED_TRACE(name);
    CaptureLog split_be, plain_be;
    ModelLimits split{8, 64, std::vector<int>{1, 2, 4, 8}};
    split.mixed_step_graph_rows = 1;
    ModelLimits plain{8, 64, std::vector<int>{}};
    auto a = Model::Load(dir, split_be, split);
    auto b = Model::Load(dir, plain_be, plain);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    const Outcome x = Drive(**a, split_be), y = Drive(**b, plain_be);
    // Stacks that read back mid-step have no buckets and never split.
    if ((*a)->decode_buckets().empty()) {
      EXPECT_TRUE(split_be.keys.empty());
    } else {
      ++split_stacks;
      EXPECT_EQ(split_be.keys, SplitKeys());
    }
    EXPECT_TRUE(plain_be.keys.empty());
    ASSERT_EQ(x.logits.size(), y.logits.size());
    for (size_t i = 0; i < x.logits.size(); ++i) {
      ASSERT_EQ(x.logits[i].size(), y.logits[i].size());
      EXPECT_EQ(std::memcmp(x.logits[i].data(), y.logits[i].data(),
                            x.logits[i].size() * sizeof(float)),
                0)
          << "step " << i;
    }
    EXPECT_EQ(x.tokens, y.tokens);
    ASSERT_EQ(x.states.size(), y.states.size());
    for (size_t i = 0; i < x.states.size(); ++i) {
      EXPECT_TRUE(x.states[i] == y.states[i]) << "sequence " << i;
    }
  }
  // tiny_mamba, tiny_qwen3_5_mtp and the slices of mamba1, mamba2,
  // attention, s4d, mlp, gdn and seqboat at least.
  EXPECT_GE(split_stacks, 7);
}

// A SeqBoat block reads nothing back at decode: a model of it alone gets
// decode buckets and its one-row segments replay through RunCaptured.
TEST(MixedStepTest, SeqBoatAloneRecordsItsDecodeSteps) {
  int seqboats = 0;
  for (const auto& [name, dir] : EachBlockKind({kTinyHybrid})) {
    if (name.rfind("seqboat", 0) != 0) continue;
    SCOPED_TRACE(name);
    ++seqboats;
    CaptureLog be;
    ModelLimits limits{8, 64, std::vector<int>{1, 2, 4, 8}};
    limits.mixed_step_graph_rows = 1;
    auto model = Model::Load(dir, be, limits);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ((*model)->decode_buckets(), (std::vector<int>{1, 2, 4, 8}));
    Drive(**model, be);
    EXPECT_EQ(be.keys, SplitKeys());
  }
  EXPECT_GE(seqboats, 1);
}

// Below the threshold a mixed step stays in one pass.
TEST(MixedStepTest, FewOneRowSegmentsStayInOnePass) {
  CaptureLog be;
  ModelLimits limits{8, 64, std::vector<int>{1, 2, 4, 8}};
  limits.mixed_step_graph_rows = 4;
  auto model = Model::Load("tests/data/tiny_mamba", be, limits);
  ASSERT_TRUE(model.ok()) << model.status();
  Drive(**model, be);
  // Steps 1, 2 and 5 have 1, 3 and 3 one-row segments: no RunCaptured.
  EXPECT_EQ(be.keys, (std::vector<int64_t>{-4, -4, -8, -4, -4}));
}

// A draft model runs on its target's backend: two models there must not
// share recordings, whose replays would run on the first one's weights.
TEST(MixedStepTest, TwoModelsOnOneBackendKeepTheirRecordingsApart) {
  CaptureLog be;
  ModelLimits limits{8, 64, std::vector<int>{1, 2, 4, 8}};
  limits.mixed_step_graph_rows = 4;
  auto first = Model::Load("tests/data/tiny_mamba", be, limits);
  auto second = Model::Load("tests/data/tiny_mamba", be, limits);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  Drive(**first, be);
  const std::vector<int64_t> first_keys = be.keys;
  be.keys.clear();
  Drive(**second, be);
  ASSERT_EQ(be.keys.size(), first_keys.size());
  for (size_t i = 0; i < first_keys.size(); ++i) {
    EXPECT_EQ(be.keys[i] - first_keys[i], Backend::kCaptureScopeKeys);
  }
}

TEST(MixedStepTest, NegativeThresholdIsRejected) {
  CaptureLog be;
  ModelLimits limits{8, 64, std::vector<int>{1, 2, 4, 8}};
  limits.mixed_step_graph_rows = -1;
  auto model = Model::Load("tests/data/tiny_mamba", be, limits);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("mixed_step_graph_rows"),
            std::string::npos)
      << model.status();
}

}  // namespace
}  // namespace seqboat
