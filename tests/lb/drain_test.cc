// SIGTERM during a run: in-flight streams finish, new ones are refused with
// UNAVAILABLE, the gRPC health service and /readyz report not serving, and
// the server exits 0 within its grace period.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "seqboat/v1/generate.grpc.pb.h"
#include "tests/lb/child_process.h"
#include "tests/lb/cluster.h"

namespace seqboat {
namespace {

constexpr int kGraceSeconds = 20;
constexpr uint32_t kTokens = 3000;
constexpr int kStreams = 3;

using HealthStatus = grpc::health::v1::HealthCheckResponse;

std::string TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl =
      absl::StrCat(base != nullptr ? base : "/tmp", "/drain_XXXXXX");
  return mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
}

// One Generate call read to its end on its own thread.
class Stream {
 public:
  Stream(v1::TextGeneration::Stub* stub, int index) {
    thread_ = std::thread([this, stub, index] {
      v1::GenerateRequest request;
      request.set_request_id(absl::StrCat("drain-", index));
      request.set_text("The quick brown fox");
      request.mutable_stopping()->set_max_new_tokens(kTokens);
      request.mutable_stopping()->set_ignore_eos(true);
      context_.set_deadline(std::chrono::system_clock::now() +
                            std::chrono::seconds(120));
      auto reader = stub->Generate(&context_, request);
      v1::GenerateResponse msg;
      while (reader->Read(&msg)) {
        tokens_ += msg.token_ids_size();
        if (msg.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
          finish_ = msg.finish_reason();
        }
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
  int tokens() const { return tokens_.load(); }
  bool WaitDone(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
  }
  grpc::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  v1::FinishReason finish() const { return finish_.load(); }

 private:
  grpc::ClientContext context_;
  std::thread thread_;
  std::atomic<int> tokens_{0};
  std::atomic<v1::FinishReason> finish_{v1::FINISH_REASON_UNSPECIFIED};
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

HealthStatus::ServingStatus Check(grpc::health::v1::Health::Stub& health,
                                  const std::string& service) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = health.Check(&context, request, &response);
  return status.ok() ? response.status() : HealthStatus::UNKNOWN;
}

TEST(DrainTest, SigtermFinishesInFlightRefusesNewAndReportsNotServing) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  auto server =
      StartReplica(dir, 0,
                   {absl::StrCat("--drain_grace_seconds=", kGraceSeconds),
                    "--max_new_tokens_limit=100000"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel(server->grpc_address,
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::TextGeneration::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);

  ASSERT_EQ(Check(*health, ""), HealthStatus::SERVING);
  ASSERT_EQ(Check(*health, "seqboat.v1.TextGeneration"), HealthStatus::SERVING);
  auto ready = HttpGet(*server, "/readyz");
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->first, 200);

  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(std::make_unique<Stream>(stub.get(), i));
  }
  // SIGTERM once every stream is producing tokens.
  for (const absl::Time end = absl::Now() + absl::Seconds(30);
       absl::Now() < end;) {
    bool all = true;
    for (auto& s : streams) all = all && s->tokens() > 0;
    if (all) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  for (auto& s : streams) ASSERT_GT(s->tokens(), 0);
  const absl::Time signalled = absl::Now();
  server->process->Signal(SIGTERM);

  // Signal delivery is asynchronous: poll until the drain is visible.
  HealthStatus::ServingStatus overall = HealthStatus::SERVING;
  for (const absl::Time end = absl::Now() + absl::Seconds(10);
       overall == HealthStatus::SERVING && absl::Now() < end;) {
    overall = Check(*health, "");
    if (overall == HealthStatus::SERVING) absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(overall, HealthStatus::NOT_SERVING);
  EXPECT_EQ(Check(*health, "seqboat.v1.TextGeneration"),
            HealthStatus::NOT_SERVING);
  auto draining = HttpGet(*server, "/readyz");
  ASSERT_TRUE(draining.ok()) << draining.status();
  EXPECT_EQ(draining->first, 503);
  auto live = HttpGet(*server, "/healthz");
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(live->first, 200);

  // New work is refused while the old streams are still running.
  bool still_running = false;
  for (auto& s : streams)
    still_running = still_running || s->tokens() < kTokens;
  EXPECT_TRUE(still_running) << "streams ended before the drain was checked; "
                                "raise kTokens";
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    v1::GenerateRequest request;
    request.set_text("late");
    request.mutable_stopping()->set_max_new_tokens(4);
    auto reader = stub->Generate(&context, request);
    v1::GenerateResponse msg;
    int messages = 0;
    while (reader->Read(&msg)) ++messages;
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(messages, 0);
  }

  // Every in-flight stream runs to its full length.
  for (auto& s : streams) {
    ASSERT_TRUE(s->WaitDone(absl::Seconds(kGraceSeconds + 10)));
    EXPECT_TRUE(s->status().ok()) << s->status().error_message();
    EXPECT_EQ(s->tokens(), static_cast<int>(kTokens));
    EXPECT_EQ(s->finish(), v1::FINISH_REASON_LENGTH);
  }
  std::optional<int> code =
      server->process->WaitForExit(absl::Seconds(kGraceSeconds + 10));
  EXPECT_EQ(code, 0);
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(kGraceSeconds + 5));
}

}  // namespace
}  // namespace seqboat
