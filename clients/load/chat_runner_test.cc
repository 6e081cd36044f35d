// The chat driver against an in-process fake server that answers with ids
// derived from the prompt and plays a prefix cache: it reports as cached the
// longest earlier prompt of the same conversation that starts this one.
#include "clients/load/chat_runner.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "seqboat/v1/generate.grpc.pb.h"

namespace seqboat {
namespace load {
namespace {

struct Seen {
  std::string request_id;
  std::vector<int32_t> prompt;
  std::vector<int32_t> answer;
};

class FakeServer final : public v1::TextGeneration::Service {
 public:
  // Requests whose id is here fail with INVALID_ARGUMENT after one token.
  std::vector<std::string> fail_ids;
  // Requests whose id contains this take 60 ms instead of 5.
  std::string slow;

  grpc::Status Generate(
      grpc::ServerContext*, const v1::GenerateRequest* request,
      grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    Seen seen;
    seen.request_id = request->request_id();
    seen.prompt.assign(request->token_ids().ids().begin(),
                       request->token_ids().ids().end());
    const uint32_t n = request->stopping().max_new_tokens();
    for (uint32_t i = 0; i < n; ++i) {
      seen.answer.push_back(
          static_cast<int32_t>(1000 + (seen.prompt.size() * 7 + i) % 100));
    }
    int64_t cached = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++running_;
      max_running_ = std::max(max_running_, running_);
      for (const Seen& s : seen_) {
        if (s.prompt.size() <= seen.prompt.size() &&
            std::equal(s.prompt.begin(), s.prompt.end(), seen.prompt.begin())) {
          cached = std::max<int64_t>(cached, s.prompt.size());
        }
      }
      seen_.push_back(seen);
    }
    // Long enough for the driver's conversations to overlap.
    const bool is_slow =
        !slow.empty() && seen.request_id.find(slow) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(is_slow ? 60 : 5));
    const bool fail = std::find(fail_ids.begin(), fail_ids.end(),
                                seen.request_id) != fail_ids.end();
    // Two messages: the first token, then the rest with the usage.
    v1::GenerateResponse first;
    first.add_token_ids(seen.answer[0]);
    writer->Write(first);
    grpc::Status status = grpc::Status::OK;
    if (fail) {
      status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "fake");
    } else {
      v1::GenerateResponse last;
      for (size_t i = 1; i < seen.answer.size(); ++i) {
        last.add_token_ids(seen.answer[i]);
      }
      last.set_finish_reason(v1::FINISH_REASON_LENGTH);
      last.mutable_usage()->set_prompt_tokens(
          static_cast<uint32_t>(seen.prompt.size()));
      last.mutable_usage()->set_generated_tokens(n);
      last.mutable_usage()->set_cached_prompt_tokens(
          static_cast<uint32_t>(cached));
      writer->Write(last);
    }
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
    return status;
  }

  // Request ids in the order they arrived.
  std::vector<std::string> Arrivals() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const Seen& s : seen_) out.push_back(s.request_id);
    return out;
  }

  std::map<std::string, Seen> ById() {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, Seen> out;
    for (const Seen& s : seen_) out[s.request_id] = s;
    return out;
  }
  int max_running() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_running_;
  }

 private:
  std::mutex mu_;
  std::vector<Seen> seen_;
  int running_ = 0;
  int max_running_ = 0;
};

class ChatRunnerTest : public ::testing::Test {
 protected:
  void Start() {
    grpc::ServerBuilder builder;
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channels_ = {server_->InProcessChannel({})};
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  ChatRunOptions Options() {
    ChatRunOptions o;
    o.spec.conversations = 5;
    o.spec.turns = 3;
    o.spec.history_len = 20;
    o.spec.user_len = 4;
    o.spec.output_len = 6;
    o.spec.vocab_size = 50;
    o.spec.seed = 3;
    o.concurrency = 2;
    o.request_timeout_s = 30;
    o.request_id_prefix = "t";
    return o;
  }

  FakeServer fake_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
};

std::string Id(int c, int t) {
  return "t-c" + std::to_string(c) + "-t" + std::to_string(t);
}

TEST_F(ChatRunnerTest, EachTurnSendsThePreviousPromptAnswerAndUserMessage) {
  Start();
  const ChatRunOptions options = Options();
  auto result = RunChat(channels_, options, nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->turns.size(), 15u);  // 5 conversations x 3 turns
  EXPECT_GT(result->duration_s, 0);

  const std::map<std::string, Seen> seen = fake_.ById();
  ASSERT_EQ(seen.size(), 15u);
  for (int c = 0; c < 5; ++c) {
    std::vector<int32_t> expected = ChatHistory(options.spec, c);
    for (int t = 0; t < 3; ++t) {
      const Seen& s = seen.at(Id(c, t));
      EXPECT_EQ(s.prompt, expected) << Id(c, t);
      ASSERT_EQ(s.answer.size(), 6u);
      if (t + 1 < 3) {
        expected = NextChatPrompt(expected, s.answer,
                                  ChatUserMessage(options.spec, c, t + 1));
      }
    }
  }
  // No more conversations in flight than asked for.
  EXPECT_LE(fake_.max_running(), 2);
  EXPECT_GE(fake_.max_running(), 1);

  // The fake cache hits each later turn on the whole previous prompt:
  // turn 1 caches 20 of 30 tokens, turn 2 caches 30 of 40.
  const std::vector<TurnSummary> turns = SummarizeTurns(result->turns, 3);
  ASSERT_EQ(turns.size(), 3u);
  const double prompt[] = {20, 30, 40};
  const double cached[] = {0, 20, 30};
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(turns[t].completed, 5) << t;
    EXPECT_EQ(turns[t].failed, 0) << t;
    EXPECT_EQ(turns[t].ttft_s.count, 5) << t;
    EXPECT_DOUBLE_EQ(turns[t].prompt_tokens.min, prompt[t]) << t;
    EXPECT_DOUBLE_EQ(turns[t].prompt_tokens.max, prompt[t]) << t;
    EXPECT_DOUBLE_EQ(turns[t].cached_prompt_tokens.min, cached[t]) << t;
    EXPECT_DOUBLE_EQ(turns[t].cached_prompt_tokens.max, cached[t]) << t;
  }
  for (const ChatTurnRecord& r : result->turns) {
    EXPECT_EQ(r.request.request_id, Id(r.conversation, r.turn));
    EXPECT_EQ(r.request.output_tokens, 6);
    EXPECT_EQ(r.request.chunk_tokens, (std::vector<int64_t>{1, 5}));
  }
}

// Conversation 0 is slow. Free-running, conversation 1 goes through all its
// turns meanwhile; in lockstep its turn t + 1 waits for conversation 0's
// turn t, so arrivals come in turn order within each pair.
TEST_F(ChatRunnerTest, LockstepStartsATurnOnlyWhenTheOneBeforeEndedEverywhere) {
  fake_.slow = "-c0-";
  Start();
  ChatRunOptions options = Options();
  options.spec.conversations = 4;
  auto turn_of = [](const std::string& id) { return id.back() - '0'; };

  auto free_running = RunChat(channels_, options, nullptr);
  ASSERT_TRUE(free_running.ok()) << free_running.status();
  std::vector<std::string> arrivals = fake_.Arrivals();
  ASSERT_EQ(arrivals.size(), 12u);
  // c1's last turn arrived before c0's second.
  const auto pos = [&](const std::string& id) {
    return std::find(arrivals.begin(), arrivals.end(), id) - arrivals.begin();
  };
  EXPECT_LT(pos(Id(1, 2)), pos(Id(0, 1)));

  options.lockstep = true;
  options.request_id_prefix = "l";
  auto lockstep = RunChat(channels_, options, nullptr);
  ASSERT_TRUE(lockstep.ok()) << lockstep.status();
  ASSERT_EQ(lockstep->turns.size(), 12u);
  arrivals = fake_.Arrivals();
  arrivals.erase(arrivals.begin(), arrivals.begin() + 12);
  ASSERT_EQ(arrivals.size(), 12u);
  // Two conversations at a time, three turns each: 0 0 1 1 2 2 | 0 0 1 1 2 2.
  for (size_t i = 0; i < arrivals.size(); ++i) {
    EXPECT_EQ(turn_of(arrivals[i]), static_cast<int>((i % 6) / 2))
        << arrivals[i];
  }
  EXPECT_LE(fake_.max_running(), 2);
}

TEST_F(ChatRunnerTest, AFailedTurnEndsOnlyItsConversation) {
  fake_.fail_ids = {Id(1, 1)};
  Start();
  auto result = RunChat(channels_, Options(), nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  // Conversation 1 stops after its failed turn 1: 15 - 1 turns sent.
  EXPECT_EQ(result->turns.size(), 14u);
  EXPECT_EQ(fake_.ById().count(Id(1, 2)), 0u);
  const std::vector<TurnSummary> turns = SummarizeTurns(result->turns, 3);
  EXPECT_EQ(turns[0].completed, 5);
  EXPECT_EQ(turns[1].completed, 4);
  EXPECT_EQ(turns[1].failed, 1);
  EXPECT_EQ(turns[2].completed, 4);
  for (const ChatTurnRecord& r : result->turns) {
    if (r.conversation == 1 && r.turn == 1) {
      EXPECT_EQ(r.request.status, "INVALID_ARGUMENT");
    }
  }
}

TEST_F(ChatRunnerTest, Validation) {
  ChatRunOptions o = Options();
  o.concurrency = 0;
  EXPECT_FALSE(ValidateChatRunOptions(o).ok());
  o = Options();
  o.spec.turns = 0;
  EXPECT_FALSE(ValidateChatRunOptions(o).ok());
  EXPECT_FALSE(RunChat({}, Options(), nullptr).ok());
}

}  // namespace
}  // namespace load
}  // namespace seqboat
