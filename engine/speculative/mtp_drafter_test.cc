// The MTP head gives the float64 reference's logits (weights/reference/mtp.py,
// mtp_reference.json) over a context the target read in chunks and one token
// at a time, and its greedy drafts after it; it skips rows it has read,
// drafts nothing while behind, gives its slots back and is refused for a
// model without a head.
#include "engine/speculative/mtp_drafter.h"

#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/model_dir/model_dir.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

constexpr char kDir[] = "tests/data/tiny_qwen3_5_mtp";

struct Reference {
  std::vector<int32_t> context;
  std::vector<std::vector<float>> logits;  // row i guesses context[i + 2]
  std::vector<int32_t> drafts;
};

Reference ReadReference() {
  std::ifstream in(std::string(kDir) + "/mtp_reference.json");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str());
  return {j.at("context").get<std::vector<int32_t>>(),
          j.at("logits").get<std::vector<std::vector<float>>>(),
          j.at("drafts").get<std::vector<int32_t>>()};
}

class MtpDrafterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = MakeCpuBackend(1);
    auto dir = ModelDir::Open(kDir);
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *std::move(dir);
    auto model = Model::Load(*dir_, *backend_, ModelLimits{4, 64, {}, 4});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    MtpDrafterOptions o;
    o.max_sequences = 2;
    o.max_draft_tokens = 4;
    o.vocab_limit = 257;
    auto mtp = MtpDrafter::Load(*dir_, *model_, o);
    ASSERT_TRUE(mtp.ok()) << mtp.status();
    mtp_ = *std::move(mtp);
    slot_ = *model_->arena().Acquire();
  }

  // The target reads context[from, to) in one step; the head observes the
  // rows whose next token the context holds.
  void Step(const void* key, int from, int to) {
    StepRows rows;
    rows.ids.assign(ref_.context.begin() + from, ref_.context.begin() + to);
    rows.segs.push_back({slot_, 0, to - from});
    rows.logit_rows.push_back(to - from - 1);
    std::vector<float> logits(model_->vocab_size());
    ASSERT_TRUE(model_->Forward(rows, logits.data()).ok());
    const int n = static_cast<int>(ref_.context.size());
    MtpDrafter::Feed feed{key, 0, from, std::min(to, n - 1) - from, {}};
    for (int i = from; i < from + feed.len; ++i)
      feed.next.push_back(ref_.context[i + 1]);
    std::vector<MtpDrafter::Feed> feeds{feed};
    ASSERT_TRUE(mtp_->Observe(feeds).ok());
  }

  void ExpectLogits(int row) {
    const float* got = mtp_->observed_logits(0);
    ASSERT_NE(got, nullptr);
    float worst = 0;
    for (int v = 0; v < model_->vocab_size(); ++v)
      worst = std::max(worst, std::abs(got[v] - ref_.logits[row][v]));
    EXPECT_LE(worst, 1e-4) << "row " << row;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ModelDir> dir_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<MtpDrafter> mtp_;
  int slot_ = -1;
  Reference ref_ = ReadReference();
};

TEST_F(MtpDrafterTest, LogitsMatchTheReferenceInChunksAndTokens) {
  const int n = static_cast<int>(ref_.context.size());
  ASSERT_EQ(static_cast<int>(ref_.logits.size()), n - 1);
  int key = 0;
  Step(&key, 0, 9);
  ExpectLogits(8);
  for (int i = 9; i < n - 1; ++i) {
    Step(&key, i, i + 1);
    ExpectLogits(i);
  }
}

TEST_F(MtpDrafterTest, DraftsAreTheReferencesGreedyOnes) {
  const int n = static_cast<int>(ref_.context.size());
  int key = 0;
  std::vector<MtpDrafter::Ask> asks{{&key, n, 4, {}}};
  // Nothing while the head has not read the context.
  ASSERT_TRUE(mtp_->Propose(asks).ok());
  EXPECT_TRUE(asks[0].draft.empty());
  Step(&key, 0, 20);
  Step(&key, 20, n);  // the last row's next token is not known: not fed
  ASSERT_TRUE(mtp_->Propose(asks).ok());
  EXPECT_EQ(asks[0].draft, ref_.drafts);
  // Again, and shorter: the spare, not the slot, read the drafts.
  asks[0].max_tokens = 2;
  ASSERT_TRUE(mtp_->Propose(asks).ok());
  EXPECT_EQ(asks[0].draft,
            std::vector<int32_t>(ref_.drafts.begin(), ref_.drafts.begin() + 2));
  // A longer context than the head has read: no draft.
  asks[0].context = n + 1;
  ASSERT_TRUE(mtp_->Propose(asks).ok());
  EXPECT_TRUE(asks[0].draft.empty());
}

TEST_F(MtpDrafterTest, RowsReadAgainAreSkipped) {
  const int n = static_cast<int>(ref_.context.size());
  int key = 0;
  Step(&key, 0, 30);
  // A round's accepted tokens, fed again with the ones after them.
  Step(&key, 25, n);
  std::vector<MtpDrafter::Ask> asks{{&key, n, 4, {}}};
  ASSERT_TRUE(mtp_->Propose(asks).ok());
  EXPECT_EQ(asks[0].draft, ref_.drafts);
}

TEST_F(MtpDrafterTest, SlotsGoBack) {
  int a = 0, b = 0, c = 0;
  Step(&a, 0, 4);
  Step(&b, 0, 4);
  EXPECT_EQ(mtp_->sequences(), 2);
  Step(&c, 0, 4);  // no slots: skipped
  EXPECT_EQ(mtp_->sequences(), 2);
  EXPECT_EQ(mtp_->observed_logits(0), nullptr);
  mtp_->Forget(&a);
  Step(&c, 0, 4);
  EXPECT_EQ(mtp_->sequences(), 2);
  EXPECT_NE(mtp_->observed_logits(0), nullptr);
}

TEST(MtpDrafterLoadTest, AModelWithoutAHeadIsRefused) {
  auto backend = MakeCpuBackend(1);
  auto dir = ModelDir::Open("tests/data/tiny_gdn");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto has = MtpDrafter::HasHead(**dir);
  ASSERT_TRUE(has.ok());
  EXPECT_FALSE(*has);
  auto model = Model::Load(**dir, *backend, ModelLimits{2, 16, {}, 2});
  ASSERT_TRUE(model.ok()) << model.status();
  auto mtp = MtpDrafter::Load(**dir, **model, {});
  EXPECT_EQ(mtp.status().code(), absl::StatusCode::kFailedPrecondition)
      << mtp.status();
  EXPECT_NE(mtp.status().message().find("no multi-token-prediction head"),
            std::string::npos);
}

}  // namespace
}  // namespace seqboat
