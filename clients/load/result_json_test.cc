// The result file's per-turn block and table for chat runs.
#include "clients/load/result_json.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace load {
namespace {

using ::testing::HasSubstr;

TurnSummary Turn1() {
  TurnSummary t;
  t.turn = 1;
  t.completed = 3;
  t.failed = 1;
  t.ttft_s = Describe({0.010, 0.030, 0.020});
  t.e2el_s = Describe({0.5, 0.7});
  t.prompt_tokens = Describe({1216, 1216, 1216});
  t.cached_prompt_tokens = Describe({1024, 0, 1024});
  t.cached_fraction = 2048.0 / 3648.0;
  return t;
}

TEST(TurnsJsonTest, OneObjectPerTurnInMillisecondsAndTokens) {
  TurnSummary t0;
  const nlohmann::json j = TurnsJson({t0, Turn1()});
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["turn"], 0);
  EXPECT_EQ(j[0]["completed"], 0);
  const nlohmann::json& t = j[1];
  EXPECT_EQ(t["turn"], 1);
  EXPECT_EQ(t["completed"], 3);
  EXPECT_EQ(t["failed"], 1);
  EXPECT_NEAR(t["median_ttft_ms"].get<double>(), 20, 1e-9);
  EXPECT_NEAR(t["mean_ttft_ms"].get<double>(), 20, 1e-9);
  // p90 of {10, 20, 30} ms: rank 1.8 -> 28.
  EXPECT_NEAR(t["p90_ttft_ms"].get<double>(), 28, 1e-9);
  EXPECT_EQ(t["count_ttft"], 3);
  EXPECT_NEAR(t["median_e2el_ms"].get<double>(), 600, 1e-9);
  EXPECT_EQ(t["min_prompt_tokens"], 1216);
  EXPECT_EQ(t["max_prompt_tokens"], 1216);
  EXPECT_TRUE(t["max_prompt_tokens"].is_number_integer());
  EXPECT_NEAR(t["mean_cached_prompt_tokens"].get<double>(), 2048.0 / 3, 1e-9);
  EXPECT_EQ(t["min_cached_prompt_tokens"], 0);
  EXPECT_EQ(t["max_cached_prompt_tokens"], 1024);
  EXPECT_NEAR(t["cached_fraction"].get<double>(), 2048.0 / 3648.0, 1e-12);
}

TEST(TurnTableTest, ARowPerTurn) {
  const std::string table = TurnTable({Turn1()});
  // turn, ok, fail, mean prompt, mean cached, TTFT p50 / p90 / mean ms.
  EXPECT_THAT(table, HasSubstr("   1     3     1       1216        683     "
                               "20.00     28.00     20.00"));
}

TEST(ResultJsonTest, PerRequestEntriesCarryCachedPromptTokens) {
  RequestRecord r;
  r.request_id = "x";
  r.status = "OK";
  r.prompt_tokens = 10;
  r.cached_prompt_tokens = 7;
  const std::vector<RequestRecord> records = {r};
  const nlohmann::json j =
      ResultJson({{"mode", "closed"}}, Summarize(records, 1.0), &records);
  EXPECT_EQ(j["config"]["mode"], "closed");
  EXPECT_EQ(j["completed"], 1);
  EXPECT_EQ(j["requests"][0]["prompt_tokens"], 10);
  EXPECT_EQ(j["requests"][0]["cached_prompt_tokens"], 7);
  EXPECT_FALSE(j.contains("turns"));
}

}  // namespace
}  // namespace load
}  // namespace seqboat
