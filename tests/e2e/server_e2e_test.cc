// End-to-end: the real seqboat_server binary with the tiny Mamba model,
// driven over gRPC by concurrent clients.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "seqboat/v1/generate.grpc.pb.h"
#include "tests/e2e/server_process.h"

namespace seqboat {
namespace {

using ::testing::HasSubstr;

constexpr int kSlots = 4;
constexpr int kQueue = 4;
// Long enough that a stream outlives everything a test does meanwhile; such
// streams are always cancelled, never run to the end.
constexpr uint32_t kEndless = 1000000;

std::unique_ptr<ServerProcess> StartServer(int drain_grace_seconds = 20) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      "server/seqboat_server",
      {"--model_dir=tests/data/tiny_mamba", "--host=127.0.0.1", "--port=0",
       absl::StrCat("--max_slots=", kSlots),
       absl::StrCat("--max_queue=", kQueue),
       absl::StrCat("--max_new_tokens_limit=", kEndless),
       absl::StrCat("--drain_grace_seconds=", drain_grace_seconds)},
      absl::Seconds(60));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::unique_ptr<v1::TextGeneration::Stub> Connect(const ServerProcess& server) {
  return v1::TextGeneration::NewStub(grpc::CreateChannel(
      server.address(), grpc::InsecureChannelCredentials()));
}

v1::GenerateRequest Prompt(uint32_t max_new_tokens) {
  v1::GenerateRequest request;
  request.set_text("The quick brown fox");
  request.mutable_stopping()->set_max_new_tokens(max_new_tokens);
  request.mutable_stopping()->set_ignore_eos(true);
  return request;
}

// One Generate call read on its own thread, recording what arrives.
class Stream {
 public:
  Stream(v1::TextGeneration::Stub* stub, v1::GenerateRequest request) {
    thread_ = std::thread([this, stub, request] {
      auto reader = stub->Generate(&context_, request);
      v1::GenerateResponse msg;
      while (reader->Read(&msg)) {
        absl::MutexLock lock(&mu_);
        messages_.push_back(msg);
      }
      grpc::Status status = reader->Finish();
      absl::MutexLock lock(&mu_);
      status_ = status;
      done_ = true;
    });
  }
  ~Stream() {
    context_.TryCancel();
    thread_.join();
  }

  void Cancel() { context_.TryCancel(); }

  // Waits until at least `n` messages arrived or the call ended.
  bool WaitForMessages(size_t n, absl::Duration timeout = absl::Seconds(30)) {
    absl::MutexLock lock(&mu_);
    auto ready = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return messages_.size() >= n || done_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    return messages_.size() >= n;
  }
  bool WaitForEnd(absl::Duration timeout = absl::Seconds(60)) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
    return done_;
  }

  bool done() {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  size_t message_count() {
    absl::MutexLock lock(&mu_);
    return messages_.size();
  }
  grpc::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  std::vector<v1::GenerateResponse> messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }

 private:
  grpc::ClientContext context_;
  absl::Mutex mu_;
  std::vector<v1::GenerateResponse> messages_ ABSL_GUARDED_BY(mu_);
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

size_t TokenCount(const std::vector<v1::GenerateResponse>& messages) {
  size_t n = 0;
  for (const auto& m : messages) n += m.token_ids_size();
  return n;
}

TEST(ServerE2eTest, ConcurrentStreamsArriveIncrementallyAndBadRequestFails) {
  std::unique_ptr<ServerProcess> server = StartServer();
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);

  constexpr uint32_t kTokens = 500;
  std::vector<std::unique_ptr<Stream>> streams;
  // The engine counts requests not yet moved into a free slot against the
  // queue bound, so the second half starts once the first half holds slots.
  for (int i = 0; i < kSlots; ++i) {
    streams.push_back(std::make_unique<Stream>(stub.get(), Prompt(kTokens)));
  }
  for (auto& s : streams) ASSERT_TRUE(s->WaitForMessages(1));
  for (int i = 0; i < kQueue; ++i) {
    streams.push_back(std::make_unique<Stream>(stub.get(), Prompt(kTokens)));
  }
  // Once something streams, a malformed request is refused at once, naming
  // the field, without disturbing the running streams.
  v1::GenerateRequest bad = Prompt(10);
  bad.mutable_sampling()->set_top_p(2.0f);
  Stream rejected(stub.get(), bad);
  ASSERT_TRUE(rejected.WaitForEnd());
  EXPECT_EQ(rejected.status().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(rejected.status().error_message(), HasSubstr("sampling.top_p"));
  EXPECT_EQ(rejected.message_count(), 0u);
  int unfinished_at_reject = 0;
  for (auto& s : streams) unfinished_at_reject += s->done() ? 0 : 1;
  EXPECT_GT(unfinished_at_reject, 0);

  for (size_t i = 0; i < streams.size(); ++i) {
    Stream& s = *streams[i];
    ASSERT_TRUE(s.WaitForEnd()) << "stream " << i;
    ASSERT_TRUE(s.status().ok()) << i << ": " << s.status().error_message();
    std::vector<v1::GenerateResponse> messages = s.messages();
    // Incremental: several messages, the first long before the last token.
    EXPECT_GE(messages.size(), 2u) << i;
    EXPECT_LT(static_cast<size_t>(messages.front().token_ids_size()),
              static_cast<size_t>(kTokens) / 2)
        << i;
    for (size_t m = 0; m + 1 < messages.size(); ++m) {
      EXPECT_EQ(messages[m].finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
      EXPECT_FALSE(messages[m].has_usage());
    }
    const v1::GenerateResponse& last = messages.back();
    EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_LENGTH) << i;
    EXPECT_EQ(last.usage().generated_tokens(), kTokens) << i;
    EXPECT_GT(last.usage().prompt_tokens(), 0u) << i;
    EXPECT_EQ(TokenCount(messages), kTokens) << i;
    EXPECT_FALSE(last.request_id().empty());
  }
}

// With every slot busy a new request waits in the queue; cancelling one
// running stream must free its slot so the queued request starts while the
// other streams are still running.
TEST(ServerE2eTest, CancelledStreamFreesItsSlot) {
  std::unique_ptr<ServerProcess> server = StartServer();
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);

  std::vector<std::unique_ptr<Stream>> running;
  for (int i = 0; i < kSlots; ++i) {
    running.push_back(std::make_unique<Stream>(stub.get(), Prompt(kEndless)));
  }
  for (auto& s : running) ASSERT_TRUE(s->WaitForMessages(1));

  Stream queued(stub.get(), Prompt(kEndless));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(queued.message_count(), 0u) << "started without a free slot";

  running[0]->Cancel();
  ASSERT_TRUE(running[0]->WaitForEnd());
  EXPECT_EQ(running[0]->status().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(queued.WaitForMessages(1)) << "the cancelled slot was not freed";
  for (int i = 1; i < kSlots; ++i) {
    EXPECT_FALSE(running[i]->done()) << "stream " << i << " ended early";
  }
}

TEST(ServerE2eTest, FloodBeyondSlotsAndQueueIsResourceExhausted) {
  std::unique_ptr<ServerProcess> server = StartServer();
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);

  std::vector<std::unique_ptr<Stream>> running;
  for (int i = 0; i < kSlots; ++i) {
    running.push_back(std::make_unique<Stream>(stub.get(), Prompt(kEndless)));
  }
  for (auto& s : running) ASSERT_TRUE(s->WaitForMessages(1));

  constexpr int kExtra = 4;
  std::vector<std::unique_ptr<Stream>> more;
  for (int i = 0; i < kQueue + kExtra; ++i) {
    more.push_back(std::make_unique<Stream>(stub.get(), Prompt(kEndless)));
  }
  // Exactly the excess is refused; the queued ones keep waiting.
  const absl::Time end = absl::Now() + absl::Seconds(30);
  int exhausted = 0;
  while (absl::Now() < end) {
    exhausted = 0;
    for (auto& s : more) {
      if (s->done() &&
          s->status().error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        ++exhausted;
      }
    }
    if (exhausted >= kExtra) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(exhausted, kExtra);
  absl::SleepFor(absl::Milliseconds(200));
  int waiting = 0;
  for (auto& s : more) waiting += s->done() ? 0 : 1;
  EXPECT_EQ(waiting, kQueue);
  for (auto& s : running) EXPECT_FALSE(s->done());
}

TEST(ServerE2eTest, TokenizeAndModelInfoAnswer) {
  std::unique_ptr<ServerProcess> server = StartServer();
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);

  v1::ModelInfo info;
  {
    grpc::ClientContext ctx;
    grpc::Status status =
        stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_FALSE(info.name().empty());
  EXPECT_FALSE(info.layer_kinds().empty());
  EXPECT_GT(info.vocab_size(), 0);
  EXPECT_EQ(info.max_slots(), kSlots);
  EXPECT_EQ(info.max_queue(), kQueue);
  EXPECT_EQ(info.max_new_tokens_limit(), kEndless);
  EXPECT_EQ(info.backend(), "cpu");
  EXPECT_GT(info.state_bytes_per_slot(), 0);
  EXPECT_EQ(info.prefix_cache_bytes(), int64_t{1} << 30);  // the default

  v1::TokenizeRequest request;
  request.set_text("Hello, world");
  v1::TokenizeResponse response;
  grpc::ClientContext ctx;
  grpc::Status status = stub->Tokenize(&ctx, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_GT(response.token_ids_size(), 0);
  ASSERT_EQ(response.pieces_size(), response.token_ids_size());
  std::string joined;
  for (const std::string& piece : response.pieces()) joined += piece;
  EXPECT_EQ(joined, "Hello, world");
  for (int32_t id : response.token_ids()) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, info.vocab_size());
  }

  // Bounded before tokenizing (16 bytes per token of --max_prompt_tokens):
  // a huge input is refused, not tokenized into a reply no client takes.
  {
    v1::TokenizeRequest huge;
    huge.set_text(std::string(16 * 32768 + 1, 'a'));
    v1::TokenizeResponse ignored;
    grpc::ClientContext huge_ctx;
    grpc::Status refused = stub->Tokenize(&huge_ctx, huge, &ignored);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(refused.error_message(), HasSubstr("bytes, the limit is"));
  }

  // The ids Tokenize returns are accepted as a prompt.
  v1::GenerateRequest generate = Prompt(8);
  generate.mutable_token_ids()->mutable_ids()->CopyFrom(response.token_ids());
  Stream stream(stub.get(), generate);
  ASSERT_TRUE(stream.WaitForEnd());
  EXPECT_TRUE(stream.status().ok()) << stream.status().error_message();
  EXPECT_EQ(TokenCount(stream.messages()), 8u);
}

// A conversation's second turn resumes from the state the first one ended
// with: its usage says so, and its tokens are those of a cold start.
TEST(ServerE2eTest, SecondTurnResumesFromTheFirstTurnsState) {
  std::unique_ptr<ServerProcess> server = StartServer();
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);
  auto run = [&](const std::vector<int32_t>& ids) {
    v1::GenerateRequest request = Prompt(8);
    request.mutable_sampling()->set_temperature(0);
    for (int32_t id : ids) request.mutable_token_ids()->add_ids(id);
    Stream stream(stub.get(), request);
    EXPECT_TRUE(stream.WaitForEnd());
    EXPECT_TRUE(stream.status().ok()) << stream.status().error_message();
    return stream.messages();
  };
  auto tokens_of = [](const std::vector<v1::GenerateResponse>& messages) {
    std::vector<int32_t> out;
    for (const auto& m : messages) {
      out.insert(out.end(), m.token_ids().begin(), m.token_ids().end());
    }
    return out;
  };
  std::vector<int32_t> turn1;
  for (int i = 0; i < 30; ++i) turn1.push_back(32 + (i * 7) % 90);
  const auto first = run(turn1);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first.back().usage().cached_prompt_tokens(), 0u);
  std::vector<int32_t> turn2 = turn1;
  const std::vector<int32_t> answer = tokens_of(first);
  ASSERT_EQ(answer.size(), 8u);
  turn2.insert(turn2.end(), answer.begin(), answer.end());
  for (int i = 0; i < 10; ++i) turn2.push_back(40 + i);
  const auto second = run(turn2);
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(second.back().usage().prompt_tokens(), turn2.size());
  EXPECT_EQ(second.back().usage().cached_prompt_tokens(), 30u + 8u - 1u);

  // The same prompt on a server without the cache: the same tokens.
  absl::StatusOr<std::unique_ptr<ServerProcess>> cold = ServerProcess::Start(
      "server/seqboat_server",
      {"--model_dir=tests/data/tiny_mamba", "--host=127.0.0.1", "--port=0",
       "--prefix_cache_bytes=0"},
      absl::Seconds(60));
  ASSERT_TRUE(cold.ok()) << cold.status();
  stub = Connect(**cold);
  const auto fresh = run(turn2);
  ASSERT_FALSE(fresh.empty());
  EXPECT_EQ(fresh.back().usage().cached_prompt_tokens(), 0u);
  EXPECT_EQ(tokens_of(fresh), tokens_of(second));
}

// SIGTERM: new work is refused with UNAVAILABLE, a short stream finishes
// normally, one that outlives the grace period ends CANCELLED, and the
// process exits 0.
TEST(ServerE2eTest, SigtermDrainsAndExitsZero) {
  std::unique_ptr<ServerProcess> server =
      StartServer(/*drain_grace_seconds=*/5);
  ASSERT_NE(server, nullptr);
  auto stub = Connect(*server);

  Stream endless(stub.get(), Prompt(kEndless));
  ASSERT_TRUE(endless.WaitForMessages(1));
  Stream short_one(stub.get(), Prompt(200));
  ASSERT_TRUE(short_one.WaitForMessages(1));

  server->Signal(SIGTERM);
  // Signal delivery is asynchronous: retry until the drain is visible.
  grpc::StatusCode code = grpc::StatusCode::OK;
  const absl::Time end = absl::Now() + absl::Seconds(2);
  while (absl::Now() < end) {
    Stream probe(stub.get(), Prompt(1));
    ASSERT_TRUE(probe.WaitForEnd());
    code = probe.status().error_code();
    if (code != grpc::StatusCode::OK) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(code, grpc::StatusCode::UNAVAILABLE);

  ASSERT_TRUE(short_one.WaitForEnd());
  ASSERT_TRUE(short_one.status().ok()) << short_one.status().error_message();
  EXPECT_EQ(short_one.messages().back().finish_reason(),
            v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(TokenCount(short_one.messages()), 200u);

  ASSERT_TRUE(endless.WaitForEnd());
  ASSERT_TRUE(endless.status().ok()) << endless.status().error_message();
  EXPECT_EQ(endless.messages().back().finish_reason(),
            v1::FINISH_REASON_CANCELLED);
  EXPECT_TRUE(endless.messages().back().has_usage());

  EXPECT_EQ(server->WaitForExit(absl::Seconds(30)), std::optional<int>(0));
}

}  // namespace
}  // namespace seqboat
