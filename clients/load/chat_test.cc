// The chat workload's prompts and per-turn statistics, on hand-made answers
// and timings whose expected values are worked out in the comments.
#include "clients/load/chat.h"

#include <algorithm>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace load {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kTol = 1e-12;

ChatSpec Spec() {
  ChatSpec spec;
  spec.conversations = 4;
  spec.turns = 3;
  spec.history_len = 32;
  spec.user_len = 8;
  spec.output_len = 5;
  spec.vocab_size = 1000;
  spec.seed = 11;
  return spec;
}

TEST(ChatPromptTest, HistoryHasTheLengthAndIdsInTheVocabulary) {
  ChatSpec spec = Spec();
  spec.vocab_size = 7;
  const std::vector<int32_t> h = ChatHistory(spec, 2);
  ASSERT_EQ(h.size(), 32u);
  std::set<int32_t> seen(h.begin(), h.end());
  EXPECT_GE(*seen.begin(), 0);
  EXPECT_LT(*seen.rbegin(), 7);
  // 32 draws from 7 ids: not all the same (a broken generator would be).
  EXPECT_GT(seen.size(), 1u);
}

TEST(ChatPromptTest, RepeatsForASeedAndDiffersAcrossSeedsAndConversations) {
  const ChatSpec spec = Spec();
  EXPECT_EQ(ChatHistory(spec, 1), ChatHistory(spec, 1));
  EXPECT_NE(ChatHistory(spec, 1), ChatHistory(spec, 2));
  EXPECT_EQ(ChatUserMessage(spec, 1, 2), ChatUserMessage(spec, 1, 2));
  EXPECT_NE(ChatUserMessage(spec, 1, 2), ChatUserMessage(spec, 1, 1));
  EXPECT_NE(ChatUserMessage(spec, 1, 2), ChatUserMessage(spec, 2, 2));
  ChatSpec other = spec;
  other.seed = 12;
  EXPECT_NE(ChatHistory(spec, 1), ChatHistory(other, 1));
  EXPECT_NE(ChatUserMessage(spec, 1, 1), ChatUserMessage(other, 1, 1));
  EXPECT_EQ(ChatTurnSeed(spec, 1, 1), ChatTurnSeed(spec, 1, 1));
  EXPECT_NE(ChatTurnSeed(spec, 1, 1), ChatTurnSeed(spec, 1, 2));
  EXPECT_NE(ChatTurnSeed(spec, 1, 1), ChatTurnSeed(other, 1, 1));
}

TEST(ChatPromptTest, UserMessagesDoNotDependOnTheHistoryLength) {
  // A 1k and a 16k run send the same user messages, so they differ only in
  // the history.
  ChatSpec short_history = Spec();
  ChatSpec long_history = Spec();
  long_history.history_len = 4096;
  const std::vector<int32_t> m = ChatUserMessage(short_history, 3, 1);
  EXPECT_EQ(m.size(), 8u);
  EXPECT_EQ(m, ChatUserMessage(long_history, 3, 1));
}

TEST(ChatPromptTest, NextPromptIsPromptThenAnswerThenUserMessage) {
  EXPECT_THAT(NextChatPrompt({1, 2, 3}, {40, 41}, {7, 8, 9}),
              ElementsAre(1, 2, 3, 40, 41, 7, 8, 9));
  EXPECT_THAT(NextChatPrompt({1}, {}, {7}), ElementsAre(1, 7));
  EXPECT_THAT(NextChatPrompt({1}, {5}, {}), ElementsAre(1, 5));
}

TEST(ChatPromptTest, EachTurnExtendsThePreviousPrompt) {
  // A conversation driven with answers of output_len tokens: every prompt
  // starts with the previous one (what a prefix cache needs) and grows by
  // output_len + user_len; the last one is LongestChatPrompt long.
  const ChatSpec spec = Spec();
  std::vector<int32_t> prompt = ChatHistory(spec, 0);
  EXPECT_EQ(prompt.size(), 32u);
  for (int32_t turn = 1; turn < spec.turns; ++turn) {
    const std::vector<int32_t> answer(5, 900 + turn);
    const std::vector<int32_t> user = ChatUserMessage(spec, 0, turn);
    const std::vector<int32_t> next = NextChatPrompt(prompt, answer, user);
    ASSERT_EQ(next.size(), prompt.size() + 5 + 8);
    EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), next.begin()));
    EXPECT_EQ(std::vector<int32_t>(next.end() - 8, next.end()), user);
    EXPECT_EQ(next[prompt.size()], 900 + turn);
    prompt = next;
  }
  // 32 + 2 * (5 + 8)
  EXPECT_EQ(prompt.size(), 58u);
  EXPECT_EQ(LongestChatPrompt(spec), 58);
}

TEST(ChatPromptTest, Validation) {
  EXPECT_TRUE(ValidateChatSpec(Spec()).ok());
  ChatSpec s = Spec();
  s.turns = 0;
  EXPECT_THAT(ValidateChatSpec(s).message(), HasSubstr("--chat_turns"));
  s = Spec();
  s.history_len = 0;
  EXPECT_THAT(ValidateChatSpec(s).message(), HasSubstr("--chat_history_len"));
  s = Spec();
  s.user_len = -1;
  EXPECT_FALSE(ValidateChatSpec(s).ok());
  s.user_len = 0;  // turns may add only the answer
  EXPECT_TRUE(ValidateChatSpec(s).ok());
  s = Spec();
  s.output_len = 0;
  EXPECT_FALSE(ValidateChatSpec(s).ok());
  s = Spec();
  s.conversations = 0;
  EXPECT_FALSE(ValidateChatSpec(s).ok());
  s = Spec();
  // 2147000000 + 99999 * (5 + 8) > 2^31 - 1.
  s.history_len = 2147000000;
  s.turns = 100000;
  EXPECT_THAT(ValidateChatSpec(s).message(), HasSubstr("int32"));
}

ChatTurnRecord Turn(int32_t conversation, int32_t turn, double start,
                    double first_token, double end, int64_t prompt,
                    int64_t cached) {
  ChatTurnRecord r;
  r.conversation = conversation;
  r.turn = turn;
  r.request.status = "OK";
  r.request.start = start;
  r.request.end = end;
  r.request.chunk_times = {first_token, end};
  r.request.chunk_tokens = {1, 4};
  r.request.output_tokens = 5;
  r.request.prompt_tokens = prompt;
  r.request.cached_prompt_tokens = cached;
  return r;
}

TEST(SummarizeTurnsTest, PerTurnDistributionsOverConversations) {
  std::vector<ChatTurnRecord> records;
  // Turn 0, three conversations, nothing cached: TTFT {0.4, 0.2, 0.3},
  // E2E {1.0, 0.8, 0.6}, prompt 32 each.
  records.push_back(Turn(0, 0, 0.0, 0.4, 1.0, 32, 0));
  records.push_back(Turn(1, 0, 0.0, 0.2, 0.8, 32, 0));
  records.push_back(Turn(2, 0, 0.0, 0.3, 0.6, 32, 0));
  // Turn 1: conversation 2 failed; the other two: TTFT {0.05, 0.15},
  // E2E {0.5, 0.7}, prompt 45, cached 36 and 0.
  records.push_back(Turn(0, 1, 1.0, 1.05, 1.5, 45, 36));
  records.push_back(Turn(1, 1, 0.8, 0.95, 1.5, 45, 0));
  ChatTurnRecord failed = Turn(2, 1, 0.6, 0.7, 9.0, 999, 999);
  failed.request.status = "DEADLINE_EXCEEDED";
  records.push_back(failed);

  const std::vector<TurnSummary> turns = SummarizeTurns(records, 3);
  ASSERT_EQ(turns.size(), 3u);

  const TurnSummary& t0 = turns[0];
  EXPECT_EQ(t0.turn, 0);
  EXPECT_EQ(t0.completed, 3);
  EXPECT_EQ(t0.failed, 0);
  // TTFT sorted {0.2, 0.3, 0.4}: median 0.3, mean 0.3, p90 rank 1.8 ->
  // 0.3 + 0.8 * 0.1 = 0.38.
  EXPECT_EQ(t0.ttft_s.count, 3);
  EXPECT_NEAR(t0.ttft_s.p50, 0.3, kTol);
  EXPECT_NEAR(t0.ttft_s.mean, 0.3, kTol);
  EXPECT_NEAR(t0.ttft_s.p90, 0.38, kTol);
  EXPECT_NEAR(t0.e2el_s.p50, 0.8, kTol);
  EXPECT_NEAR(t0.e2el_s.mean, 0.8, kTol);
  EXPECT_DOUBLE_EQ(t0.prompt_tokens.mean, 32);
  EXPECT_DOUBLE_EQ(t0.cached_prompt_tokens.max, 0);
  EXPECT_DOUBLE_EQ(t0.cached_fraction, 0);

  const TurnSummary& t1 = turns[1];
  EXPECT_EQ(t1.turn, 1);
  EXPECT_EQ(t1.completed, 2);
  EXPECT_EQ(t1.failed, 1);
  // The failed turn's 8.4 s and 999 tokens are in no figure.
  // TTFT {0.05, 0.15}: median 0.1, p90 rank 0.9 -> 0.05 + 0.9 * 0.1 = 0.14.
  EXPECT_EQ(t1.ttft_s.count, 2);
  EXPECT_NEAR(t1.ttft_s.p50, 0.1, kTol);
  EXPECT_NEAR(t1.ttft_s.p90, 0.14, kTol);
  EXPECT_NEAR(t1.ttft_s.mean, 0.1, kTol);
  EXPECT_NEAR(t1.e2el_s.max, 0.7, kTol);
  EXPECT_DOUBLE_EQ(t1.prompt_tokens.max, 45);
  EXPECT_DOUBLE_EQ(t1.cached_prompt_tokens.mean, 18);
  EXPECT_DOUBLE_EQ(t1.cached_prompt_tokens.min, 0);
  EXPECT_DOUBLE_EQ(t1.cached_prompt_tokens.max, 36);
  // 36 of 90 prompt tokens.
  EXPECT_DOUBLE_EQ(t1.cached_fraction, 0.4);

  // No conversation reached turn 2: an empty row, not a missing one.
  EXPECT_EQ(turns[2].turn, 2);
  EXPECT_EQ(turns[2].completed, 0);
  EXPECT_EQ(turns[2].failed, 0);
  EXPECT_EQ(turns[2].ttft_s.count, 0);
}

TEST(SummarizeTurnsTest, TurnWithoutTokensCountsForE2EButNotTtft) {
  ChatTurnRecord r = Turn(0, 0, 0.0, 0.1, 0.5, 10, 0);
  r.request.chunk_times.clear();
  r.request.chunk_tokens.clear();
  const std::vector<TurnSummary> turns = SummarizeTurns({r}, 1);
  ASSERT_EQ(turns.size(), 1u);
  EXPECT_EQ(turns[0].completed, 1);
  EXPECT_EQ(turns[0].ttft_s.count, 0);
  EXPECT_EQ(turns[0].e2el_s.count, 1);
  EXPECT_NEAR(turns[0].e2el_s.p50, 0.5, kTol);
}

TEST(SummarizeTurnsTest, RowsCoverTheLargestTurnSeen) {
  const std::vector<TurnSummary> turns =
      SummarizeTurns({Turn(0, 4, 0, 0.1, 0.2, 1, 0)}, 2);
  ASSERT_EQ(turns.size(), 5u);
  EXPECT_EQ(turns[4].completed, 1);
  EXPECT_EQ(turns[1].completed, 0);
}

}  // namespace
}  // namespace load
}  // namespace seqboat
