// StreamTracker: Wait returns only once every stream registered with it is
// freed, and streams cut off by a server that goes away end and are freed.
#include "clients/load/stream.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "gtest/gtest.h"

namespace seqboat {
namespace load {
namespace {

TEST(StreamTrackerTest, WaitReturnsAtOnceWithNoStreams) {
  StreamTracker tracker;
  tracker.Wait();
}

TEST(StreamTrackerTest, WaitReturnsOnlyOnceEveryRegistrationIsGone) {
  StreamTracker tracker;
  std::optional<StreamTracker::Registration> a(std::in_place, tracker);
  std::optional<StreamTracker::Registration> b(std::in_place, tracker);
  std::atomic<bool> waited{false};
  std::thread waiter([&] {
    tracker.Wait();
    waited = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(waited);
  a.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(waited);
  b.reset();
  waiter.join();
  EXPECT_TRUE(waited);
}

// Streams one token, then holds the call open until the server shuts down.
class HangingServer final : public v1::TextGeneration::Service {
 public:
  grpc::Status Generate(
      grpc::ServerContext* context, const v1::GenerateRequest*,
      grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    v1::GenerateResponse r;
    r.add_token_ids(7);
    writer->Write(r);
    ++started;
    while (!context->IsCancelled() && !stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "going away");
  }
  std::atomic<int> started{0};
  std::atomic<bool> stop{false};
};

TEST(StreamTrackerTest, StreamsCutOffByAServerGoingAwayEndAndAreFreed) {
  HangingServer service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto stub = v1::TextGeneration::NewStub(channel);

  constexpr int kStreams = 8;
  std::atomic<int> done{0}, tokens{0};
  std::atomic<int> failed{0};
  {
    StreamTracker tracker;
    for (int i = 0; i < kStreams; ++i) {
      StreamCallbacks callbacks;
      callbacks.on_tokens = [&](int64_t n) { tokens += static_cast<int>(n); };
      callbacks.on_done = [&](StreamOutcome outcome) {
        if (!outcome.record.ok()) ++failed;
        ++done;
      };
      v1::GenerateRequest request;
      request.set_request_id("r" + std::to_string(i));
      StartGenerateStream(stub.get(), request, Clock::now(), 60.0, false,
                          std::move(callbacks), tracker);
    }
    while (service.started < kStreams) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    service.stop = true;
    server->Shutdown(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(100));
    tracker.Wait();
    // Everything the streams touch was still here until now.
    EXPECT_EQ(done, kStreams);
  }
  EXPECT_EQ(tokens, kStreams);
  EXPECT_EQ(failed, kStreams);
  stub.reset();
  channel.reset();
}

}  // namespace
}  // namespace load
}  // namespace seqboat
