#include "server/generate_stream.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/sanitizers.h"
#include "gtest/gtest.h"
#include "seqboat/v1/generate.grpc.pb.h"
#include "server/testing/read_stream.h"

namespace seqboat {
namespace {

// What the engine would receive: the sink and the cancel flag of one call.
struct Accepted {
  v1::GenerateRequest proto;
  EventSink sink;
  std::shared_ptr<RequestControl> control;
};

// Stands in for the engine: each Generate call's sink is queued for the test
// to drive by hand. request_id "reject" fails the call up front instead.
class HandoffService final
    : public v1::TextGeneration::WithRawCallbackMethod_Generate<
          v1::TextGeneration::CallbackService> {
 public:
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(
      grpc::CallbackServerContext* /*context*/,
      const grpc::ByteBuffer* bytes) override {
    auto parsed = std::make_unique<v1::GenerateRequest>();
    EXPECT_TRUE(ParseFromByteBuffer(*bytes, parsed.get()));
    const v1::GenerateRequest* request = parsed.get();
    auto control = std::make_shared<RequestControl>();
    auto* stream = new GenerateStream(request->request_id(), control);
    if (request->request_id() == "reject") {
      stream->Fail(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "full"));
      return stream;
    }
    absl::MutexLock lock(&mu_);
    accepted_.push_back({*request,
                         stream->sink(request->has_n() ? request->n() : 1),
                         std::move(control)});
    return stream;
  }

  // Waits for the next accepted call.
  Accepted Take() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::deque<Accepted>* q) { return !q->empty(); }, &accepted_),
        absl::Seconds(10));
    EXPECT_FALSE(accepted_.empty()) << "no call reached the service";
    if (accepted_.empty()) return {};
    Accepted a = std::move(accepted_.front());
    accepted_.pop_front();
    return a;
  }

 private:
  absl::Mutex mu_;
  std::deque<Accepted> accepted_ ABSL_GUARDED_BY(mu_);
};

GenerationEvent Tokens(std::vector<int32_t> ids, std::string text) {
  GenerationEvent e;
  e.token_ids = std::move(ids);
  e.text = std::move(text);
  return e;
}

GenerationEvent Final(FinishReason reason, int32_t prompt, int32_t generated) {
  GenerationEvent e;
  e.finish = reason;
  e.prompt_tokens = prompt;
  e.generated_tokens = generated;
  return e;
}

bool WaitFor(const std::function<bool()>& condition) {
  for (int i = 0; i < 1000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

class GenerateStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    stub_ = v1::TextGeneration::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                            grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Shutdown(); }

  v1::GenerateRequest Request(const std::string& id) {
    v1::GenerateRequest r;
    r.set_request_id(id);
    r.set_text("hi");
    return r;
  }

  HandoffService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::TextGeneration::Stub> stub_;
};

TEST_F(GenerateStreamTest, StreamsEachEventAsItArrives) {
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, Request("r1"));
  Accepted call = service_.Take();

  v1::GenerateResponse msg;
  call.sink(Tokens({5}, "a"));
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(msg.request_id(), "r1");
  ASSERT_EQ(msg.token_ids_size(), 1);
  EXPECT_EQ(msg.token_ids(0), 5);
  EXPECT_EQ(msg.text(), "a");
  EXPECT_EQ(msg.finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_FALSE(msg.has_usage());

  call.sink(Tokens({6}, "b"));
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(msg.text(), "b");

  GenerationEvent last = Tokens({7}, "c");
  last.finish = FinishReason::kStopString;
  last.matched_stop = "\n";
  last.prompt_tokens = 2;
  last.generated_tokens = 3;
  call.sink(std::move(last));
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(msg.text(), "c");
  EXPECT_EQ(msg.finish_reason(), v1::FINISH_REASON_STOP_STRING);
  EXPECT_EQ(msg.matched_stop(), "\n");
  EXPECT_EQ(msg.usage().prompt_tokens(), 2u);
  EXPECT_EQ(msg.usage().generated_tokens(), 3u);
  EXPECT_FALSE(reader->Read(&msg));
  grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(call.control->cancelled.load());
}

// n = 3: each message holds one sequence's tokens and says which; each
// sequence's last message has its finish and usage; the call ends after the
// third sequence's, and only then.
TEST_F(GenerateStreamTest, SequencesOfARequestOfNKeepTheirIndex) {
  grpc::ClientContext ctx;
  v1::GenerateRequest request = Request("n3");
  request.set_n(3);
  auto reader = stub_->Generate(&ctx, request);
  Accepted call = service_.Take();
  const auto at = [](int32_t index, GenerationEvent e) {
    e.index = index;
    return e;
  };
  for (int step = 0; step < 4; ++step) {
    for (int32_t i = 0; i < 3; ++i) {
      if (i == 1 && step == 3) continue;  // sequence 1 ended at step 2
      GenerationEvent e = Tokens({10 * i + step}, std::string(1, 'a' + i));
      if (i == 1 && step == 2) {
        e.finish = FinishReason::kEos;
        e.prompt_tokens = 2;
        e.generated_tokens = 3;
      }
      call.sink(at(i, std::move(e)));
    }
  }
  call.sink(at(0, Final(FinishReason::kLength, 2, 4)));
  std::vector<std::vector<int32_t>> ids(3);
  std::vector<std::string> text(3);
  std::vector<v1::GenerateResponse> finals(3);
  int finished = 0;
  v1::GenerateResponse msg;
  // Sequence 2 has not ended: the stream stays open.
  while (finished < 2 && reader->Read(&msg)) {
    ASSERT_LT(msg.index(), 3u);
    EXPECT_EQ(finals[msg.index()].finish_reason(),
              v1::FINISH_REASON_UNSPECIFIED)
        << "a message after its sequence's last";
    ids[msg.index()].insert(ids[msg.index()].end(), msg.token_ids().begin(),
                            msg.token_ids().end());
    text[msg.index()] += msg.text();
    if (msg.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      finals[msg.index()] = msg;
      ++finished;
    } else {
      EXPECT_FALSE(msg.has_usage());
    }
  }
  ASSERT_EQ(finished, 2);
  call.sink(at(2, Final(FinishReason::kStopString, 2, 4)));
  while (reader->Read(&msg)) {
    ASSERT_EQ(msg.index(), 2u);
    ids[2].insert(ids[2].end(), msg.token_ids().begin(), msg.token_ids().end());
    text[2] += msg.text();
    if (msg.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      finals[2] = msg;
    }
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(ids[0], (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(ids[1], (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(ids[2], (std::vector<int32_t>{20, 21, 22, 23}));
  EXPECT_EQ(text[1], "bbb");
  EXPECT_EQ(finals[0].finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(finals[1].finish_reason(), v1::FINISH_REASON_EOS);
  EXPECT_EQ(finals[1].usage().generated_tokens(), 3u);
  EXPECT_EQ(finals[1].usage().prompt_tokens(), 2u);
  EXPECT_EQ(finals[2].finish_reason(), v1::FINISH_REASON_STOP_STRING);
}

// An error in any sequence ends the call with it.
TEST_F(GenerateStreamTest, AnErrorInOneSequenceEndsTheCall) {
  grpc::ClientContext ctx;
  v1::GenerateRequest request = Request("n2");
  request.set_n(2);
  auto reader = stub_->Generate(&ctx, request);
  Accepted call = service_.Take();
  GenerationEvent first = Tokens({1}, "a");
  first.index = 1;
  call.sink(std::move(first));
  GenerationEvent failed;
  failed.index = 0;
  failed.status = absl::InternalError("step failed");
  call.sink(std::move(failed));
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INTERNAL);
}

TEST_F(GenerateStreamTest, LogprobsAreCarried) {
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, Request("lp"));
  Accepted call = service_.Take();
  GenerationEvent e = Tokens({9}, "x");
  TokenLogprobs lp;
  lp.chosen = {9, -0.5f};
  lp.top = {{9, -0.5f}, {3, -1.5f}};
  e.logprobs.push_back(lp);
  e.finish = FinishReason::kLength;
  call.sink(std::move(e));
  v1::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  ASSERT_EQ(msg.logprobs_size(), 1);
  EXPECT_EQ(msg.logprobs(0).chosen().token_id(), 9);
  EXPECT_FLOAT_EQ(msg.logprobs(0).chosen().logprob(), -0.5f);
  ASSERT_EQ(msg.logprobs(0).top_size(), 2);
  EXPECT_EQ(msg.logprobs(0).top(1).token_id(), 3);
  EXPECT_EQ(msg.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_TRUE(reader->Finish().ok());
}

// A client that does not read lets HTTP/2 flow control stall the write in
// flight; everything the engine produces meanwhile must pile up without
// blocking the engine and then arrive, in order, in fewer messages.
TEST_F(GenerateStreamTest, SlowReaderGetsEverythingCoalesced) {
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, Request("slow"));
  Accepted call = service_.Take();

  constexpr int kEvents = 200;
  const std::string chunk(8 * 1024, 'z');  // fills the flow-control window
  std::string expected_text;
  for (int i = 0; i < kEvents; ++i) {
    std::string text = std::to_string(i) + ":" + chunk;
    expected_text += text;
    call.sink(Tokens({i}, std::move(text)));  // would hang here if it blocked
  }
  call.sink(Final(FinishReason::kLength, 1, kEvents));

  const StreamRead read = ReadStream(*reader);
  ASSERT_TRUE(read.status.ok());
  ASSERT_EQ(read.ids.size(), static_cast<size_t>(kEvents));
  for (int i = 0; i < kEvents; ++i) EXPECT_EQ(read.ids[i], i);
  EXPECT_TRUE(read.text == expected_text) << "text lost or reordered";
  EXPECT_EQ(read.last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(read.last.usage().generated_tokens(),
            static_cast<uint32_t>(kEvents));
  // A sanitizer slows the producer here below the writer's pace, so how many
  // events share a message says nothing there.
  if (!kSanitizerBuild) {
    EXPECT_LT(read.messages, kEvents / 2) << "events were not coalesced";
  }
  EXPECT_GE(read.messages, 2);
}

TEST_F(GenerateStreamTest, ClientCancelSetsFlagAndLateEventsAreSafe) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  auto reader = stub_->Generate(ctx.get(), Request("c"));
  Accepted call = service_.Take();
  call.sink(Tokens({1}, "a"));
  v1::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));

  ctx->TryCancel();
  EXPECT_TRUE(WaitFor([&] { return call.control->cancelled.load(); }));
  while (reader->Read(&msg)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  // The reactor is gone once the server has finished the call; the state
  // stays alive through the sink (the test holds control too).
  EXPECT_TRUE(WaitFor([&] { return call.control.use_count() == 2; }));
  call.sink(Tokens({2}, "b"));
  call.sink(Final(FinishReason::kCancelled, 1, 2));
  call.sink(Tokens({3}, "after final"));
  // Dropping the engine's sink releases the last reference once the reactor
  // has let go of the state (it may still be finishing on a gRPC thread):
  // nothing leaks.
  call.sink = nullptr;
  EXPECT_TRUE(WaitFor([&] { return call.control.use_count() == 1; }));
}

TEST_F(GenerateStreamTest, DeadlineCancelsTheRequest) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(300));
  auto reader = stub_->Generate(&ctx, Request("d"));
  Accepted call = service_.Take();
  call.sink(Tokens({1}, "a"));
  v1::GenerateResponse msg;
  EXPECT_TRUE(reader->Read(&msg));
  EXPECT_FALSE(reader->Read(&msg));  // the engine never finishes
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(WaitFor([&] { return call.control->cancelled.load(); }));
  call.sink(Final(FinishReason::kCancelled, 1, 1));
}

TEST_F(GenerateStreamTest, ErrorEventEndsCallAfterEarlierTokens) {
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, Request("e"));
  Accepted call = service_.Take();
  call.sink(Tokens({4}, "ok"));
  GenerationEvent error;
  error.status = absl::InternalError("backend fault");
  call.sink(std::move(error));

  std::string text;
  v1::GenerateResponse msg;
  while (reader->Read(&msg)) text += msg.text();
  EXPECT_EQ(text, "ok");
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(status.error_message(), "backend fault");
}

TEST_F(GenerateStreamTest, ErrorAloneMapsCode) {
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, Request("e2"));
  Accepted call = service_.Take();
  GenerationEvent error;
  error.status = absl::UnavailableError("draining");
  call.sink(std::move(error));
  v1::GenerateResponse msg;
  EXPECT_FALSE(reader->Read(&msg));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(GenerateStreamTest, FailBeforeEngineReturnsStatus) {
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, Request("reject"));
  v1::GenerateResponse msg;
  EXPECT_FALSE(reader->Read(&msg));
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(), "full");
}

// Many streams fed from one "engine" thread at once, half of them cancelled
// midway: every stream ends exactly once and all state is released.
TEST_F(GenerateStreamTest, ManyConcurrentStreams) {
  constexpr int kStreams = 16;
  constexpr int kTokens = 50;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>>
      readers;
  std::vector<Accepted> calls;
  for (int s = 0; s < kStreams; ++s) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(
        stub_->Generate(contexts.back().get(), Request(std::to_string(s))));
    calls.push_back(service_.Take());
  }
  std::thread engine([&] {
    for (int t = 0; t < kTokens; ++t) {
      for (Accepted& c : calls) {
        if (c.control->cancelled.load()) continue;
        c.sink(Tokens({t}, "t"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (Accepted& c : calls) {
      c.sink(Final(c.control->cancelled.load() ? FinishReason::kCancelled
                                               : FinishReason::kLength,
                   1, kTokens));
      c.sink = nullptr;
    }
  });
  std::vector<std::thread> clients;
  std::vector<int> received(kStreams, 0);
  std::vector<grpc::Status> statuses(kStreams);
  for (int s = 0; s < kStreams; ++s) {
    clients.emplace_back([&, s] {
      v1::GenerateResponse msg;
      while (readers[s]->Read(&msg)) {
        received[s] += msg.token_ids_size();
        if (s % 2 == 1 && received[s] >= 5) contexts[s]->TryCancel();
      }
      statuses[s] = readers[s]->Finish();
    });
  }
  for (auto& t : clients) t.join();
  engine.join();
  for (int s = 0; s < kStreams; ++s) {
    if (s % 2 == 0) {
      EXPECT_TRUE(statuses[s].ok()) << s << ": " << statuses[s].error_message();
      EXPECT_EQ(received[s], kTokens) << s;
    } else {
      EXPECT_EQ(statuses[s].error_code(), grpc::StatusCode::CANCELLED) << s;
    }
    EXPECT_TRUE(WaitFor([&] { return calls[s].control.use_count() == 1; }))
        << "state of stream " << s << " still referenced";
  }
}

}  // namespace
}  // namespace seqboat
