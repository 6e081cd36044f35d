// The drafter proposes exactly the draft model's greedy continuation of each
// context, whatever came before: after catching up on a long prompt in
// pieces, after a draft the target rejected part-way, for several sequences
// at once; it gives its slots back and refuses another tokenizer.
#include "engine/speculative/model_drafter.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/model_dir/model_dir.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

constexpr char kTinyHybrid[] = "tests/data/tiny_hybrid";
constexpr char kTinyMamba[] = "tests/data/tiny_mamba";

std::vector<int32_t> Prompt(int salt, int len) {
  std::vector<int32_t> p;
  for (int i = 0; i < len; ++i) p.push_back((i * 37 + salt * 11 + 5) % 251);
  return p;
}

// The model's greedy continuation of `context`, k tokens, from a fresh slot
// of its own model, one token a step.
std::vector<int32_t> Greedy(const std::string& dir,
                            const std::vector<int32_t>& context, int k) {
  auto backend = MakeCpuBackend(1);
  auto loaded = Model::Load(dir, *backend, ModelLimits{1, 256, {}, 1});
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  Model& m = **loaded;
  const int slot = *m.arena().Acquire();
  const int v = m.vocab_size();
  std::vector<float> logits(v);
  const int n = static_cast<int>(context.size());
  EXPECT_TRUE(
      m.Forward(StepRows{context, {{slot, 0, n}}, {n - 1}}, logits.data())
          .ok());
  std::vector<int32_t> out;
  for (int i = 0; i < k; ++i) {
    // The drafter draws among the tokenizer's 257 ids (of 264 rows).
    out.push_back(static_cast<int32_t>(
        std::max_element(logits.begin(), logits.begin() + 257) -
        logits.begin()));
    if (i + 1 < k) {
      EXPECT_TRUE(
          m.Forward(StepRows{{out.back()}, {{slot, 0, 1}}, {0}}, logits.data())
              .ok());
    }
  }
  return out;
}

class ModelDrafterTest : public ::testing::Test {
 protected:
  void Load(const std::string& dir, ModelDrafterOptions o) {
    backend_ = MakeCpuBackend(1);
    auto target_dir = ModelDir::Open(kTinyHybrid);
    ASSERT_TRUE(target_dir.ok()) << target_dir.status();
    auto tok = ParseTokenizerFile((*target_dir)->tokenizer_json(), "target");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = *std::move(tok);
    auto d = ModelDir::Open(dir);
    ASSERT_TRUE(d.ok()) << d.status();
    auto drafter = ModelDrafter::Load(**d, *backend_, *tokenizer_, o);
    ASSERT_TRUE(drafter.ok()) << drafter.status();
    drafter_ = *std::move(drafter);
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ModelDrafter> drafter_;
};

TEST_F(ModelDrafterTest, DraftsTheGreedyContinuationAfterRejections) {
  ModelDrafterOptions o;
  o.max_sequences = 3;
  o.max_draft_tokens = 4;
  Load(kTinyMamba, o);
  // Three sequences at once, each with its own prompt and output so far.
  std::vector<std::vector<int32_t>> prompts = {Prompt(0, 20), Prompt(1, 7),
                                               Prompt(2, 1)};
  std::vector<std::vector<int32_t>> outputs(3);
  const int seq_keys[3] = {0, 1, 2};
  for (int round = 0; round < 5; ++round) {
    std::vector<ModelDrafter::Ask> asks;
    for (int s = 0; s < 3; ++s) {
      // The output grows by the target's tokens: the draft's first one or
      // two, then one of its own (a rejection), or nothing new yet.
      asks.push_back(
          {&seq_keys[s], &prompts[s], &outputs[s], 1 + (s + round) % 4, {}});
      if (outputs[s].empty()) outputs[s].push_back(200 + s);
    }
    // The first round's outputs hold one token each.
    ASSERT_TRUE(drafter_->Propose(asks).ok());
    for (int s = 0; s < 3; ++s) {
      SCOPED_TRACE(testing::Message() << "round " << round << " seq " << s);
      std::vector<int32_t> context = prompts[s];
      context.insert(context.end(), outputs[s].begin(), outputs[s].end());
      EXPECT_EQ(asks[s].draft, Greedy(kTinyMamba, context, asks[s].max_tokens));
      // Take part of the draft, then a token of the target's own.
      const int take = (round + s) % 2;
      for (int i = 0; i < take && i < static_cast<int>(asks[s].draft.size());
           ++i)
        outputs[s].push_back(asks[s].draft[i]);
      outputs[s].push_back((round * 31 + s * 7 + 3) % 251);
    }
  }
  EXPECT_EQ(drafter_->sequences(), 3);
  for (const int& key : seq_keys) drafter_->Forget(&key);
  EXPECT_EQ(drafter_->sequences(), 0);
}

TEST_F(ModelDrafterTest, ALongPromptIsReadInPiecesBeforeItDrafts) {
  ModelDrafterOptions o;
  o.max_sequences = 1;
  o.max_draft_tokens = 3;
  o.catch_up_rows = 16;
  Load(kTinyHybrid, o);
  const std::vector<int32_t> prompt = Prompt(4, 50);
  const std::vector<int32_t> output = {9};
  int key = 0;
  int empty = 0;
  for (;;) {
    std::vector<ModelDrafter::Ask> asks = {{&key, &prompt, &output, 3, {}}};
    ASSERT_TRUE(drafter_->Propose(asks).ok());
    if (!asks[0].draft.empty()) {
      std::vector<int32_t> context = prompt;
      context.push_back(9);
      EXPECT_EQ(asks[0].draft, Greedy(kTinyHybrid, context, 3));
      break;
    }
    ASSERT_LT(++empty, 10);
  }
  // 50 context tokens before the last, 16 a call: three calls catch up.
  EXPECT_EQ(empty, 3);
}

TEST_F(ModelDrafterTest, NoFreeSlotsMeansNoDraft) {
  ModelDrafterOptions o;
  o.max_sequences = 1;
  o.max_draft_tokens = 2;
  Load(kTinyMamba, o);
  const std::vector<int32_t> prompt = Prompt(0, 5), output = {};
  int a = 0, b = 0;
  std::vector<ModelDrafter::Ask> asks = {{&a, &prompt, &output, 2, {}}};
  ASSERT_TRUE(drafter_->Propose(asks).ok());
  EXPECT_EQ(asks[0].draft.size(), 2u);
  asks = {{&b, &prompt, &output, 2, {}}};
  ASSERT_TRUE(drafter_->Propose(asks).ok());
  EXPECT_TRUE(asks[0].draft.empty());
  drafter_->Forget(&a);
  ASSERT_TRUE(drafter_->Propose(asks).ok());
  EXPECT_EQ(asks[0].draft, Greedy(kTinyMamba, prompt, 2));
}

TEST(ModelDrafterLoadTest, AnotherTokenizerIsRefused) {
  auto backend = MakeCpuBackend(1);
  auto tok = LoadTokenizer("tests/data/tokenizers/qwen2_bpe.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto d = ModelDir::Open(kTinyMamba);
  ASSERT_TRUE(d.ok());
  auto drafter = ModelDrafter::Load(**d, *backend, **tok, {});
  ASSERT_FALSE(drafter.ok());
  EXPECT_NE(drafter.status().message().find("is not the served model's"),
            std::string::npos)
      << drafter.status();
  EXPECT_NE(drafter.status().message().find("257 ids"), std::string::npos)
      << drafter.status();
}

}  // namespace
}  // namespace seqboat
