#include "server/text_generation_service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "seqboat/v1/generate.grpc.pb.h"
#include "server/testing/fake_engine.h"
#include "server/testing/read_stream.h"

namespace seqboat {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The model GetModelInfo describes.
ModelSummary Summary() {
  ModelSummary summary;
  summary.name = "fake";
  summary.layer_kinds = {"mamba", "mamba"};
  summary.vocab_size = 300;  // padded beyond the tokenizer's 257
  // As the engine publishes them: the ids both tokenizer and model accept.
  summary.prompt_rules.vocab_limit = 257;
  summary.eos_token_id = 256;
  summary.state_bytes_per_slot = 4096;
  summary.backend = "cpu";
  return summary;
}

EngineOptions Options() {
  EngineOptions options;
  options.max_slots = 3;
  options.max_queue = 5;
  return options;
}

GenerationEvent Token(int32_t id, std::string text) {
  GenerationEvent e;
  e.token_ids = {id};
  e.text = std::move(text);
  return e;
}

class TextGenerationServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ValidationLimits limits;
    limits.max_new_tokens_default = 16;
    limits.max_new_tokens_limit = 1000;
    limits.max_prompt_tokens = 64;
    service_ = std::make_unique<TextGenerationService>(&engine_, limits);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::TextGeneration::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                            grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Shutdown(); }

  // Runs a Generate call to the end; returns its status and the messages.
  grpc::Status Collect(const v1::GenerateRequest& request,
                       std::vector<v1::GenerateResponse>* messages) {
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, request);
    v1::GenerateResponse msg;
    while (reader->Read(&msg)) messages->push_back(msg);
    return reader->Finish();
  }

  FakeEngine engine_{Summary(), Options()};
  int port_ = 0;
  std::unique_ptr<TextGenerationService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::TextGeneration::Stub> stub_;
};

TEST_F(TextGenerationServiceTest, GenerateTokenizesSubmitsAndStreams) {
  v1::GenerateRequest request;
  request.set_text("hi");
  request.mutable_sampling()->set_temperature(0.5f);
  request.mutable_stopping()->add_stop("\n");

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto reader = stub_->Generate(&ctx, request);
  Request got = engine_.Take();
  EXPECT_THAT(got.prompt, ElementsAre('h', 'i'));
  EXPECT_FLOAT_EQ(got.sampling.temperature, 0.5f);
  EXPECT_EQ(got.stopping.max_new_tokens, 16);
  EXPECT_THAT(got.stopping.stop_strings, ElementsAre("\n"));
  EXPECT_THAT(got.id, StartsWith("req-"));
  EXPECT_NE(got.control, nullptr);
  ASSERT_TRUE(got.sink);
  // The client's deadline reaches the engine so queued requests can expire.
  EXPECT_GT(got.deadline, absl::Now() + absl::Seconds(20));
  EXPECT_LT(got.deadline, absl::Now() + absl::Seconds(31));

  EXPECT_EQ(service_->active_streams(), 1);
  got.sink(Token('y', "y"));
  v1::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(msg.request_id(), got.id);
  EXPECT_EQ(msg.text(), "y");
  GenerationEvent last = Token('o', "o");
  last.finish = FinishReason::kEos;
  last.prompt_tokens = 2;
  last.generated_tokens = 2;
  got.sink(std::move(last));
  got.sink = nullptr;
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(msg.finish_reason(), v1::FINISH_REASON_EOS);
  EXPECT_EQ(msg.usage().prompt_tokens(), 2u);
  EXPECT_FALSE(reader->Read(&msg));
  EXPECT_TRUE(reader->Finish().ok());
  // The count drops once the server side is done with the call.
  for (int i = 0; i < 500 && service_->active_streams() != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(service_->active_streams(), 0);
}

TEST_F(TextGenerationServiceTest, NoDeadlineMeansInfinite) {
  v1::GenerateRequest request;
  request.set_request_id("mine");
  request.mutable_token_ids()->add_ids('a');
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, request);
  Request got = engine_.Take();
  EXPECT_EQ(got.id, "mine");
  EXPECT_EQ(got.deadline, absl::InfiniteFuture());
  ctx.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(TextGenerationServiceTest, UnsetSeedsAreRandomAndExplicitSeedsKept) {
  std::vector<uint64_t> seeds;
  for (int i = 0; i < 3; ++i) {
    v1::GenerateRequest request;
    request.set_text("x");
    if (i == 2) request.mutable_sampling()->set_seed(1234);
    grpc::ClientContext ctx;
    auto reader = stub_->Generate(&ctx, request);
    Request got = engine_.Take();
    seeds.push_back(got.sampling.seed);
    GenerationEvent last;
    last.finish = FinishReason::kLength;
    got.sink(std::move(last));
    v1::GenerateResponse msg;
    while (reader->Read(&msg)) {
    }
    EXPECT_TRUE(reader->Finish().ok());
  }
  EXPECT_NE(seeds[0], seeds[1]);
  EXPECT_EQ(seeds[2], 1234u);
}

// The conversation key comes back in the initial metadata: the one sent, or
// one derived from the first turn for the client to send with the next.
TEST_F(TextGenerationServiceTest, SessionKeyIsEchoedOrDerived) {
  auto key_of = [&](const char* sent) {
    v1::GenerateRequest request;
    request.set_text("hi");
    grpc::ClientContext ctx;
    if (sent != nullptr) ctx.AddMetadata("x-session-id", sent);
    auto reader = stub_->Generate(&ctx, request);
    Request got = engine_.Take();
    GenerationEvent last = Token('o', "o");
    last.finish = FinishReason::kEos;
    got.sink(std::move(last));
    got.sink = nullptr;
    v1::GenerateResponse msg;
    while (reader->Read(&msg)) {
    }
    EXPECT_TRUE(reader->Finish().ok());
    const auto& md = ctx.GetServerInitialMetadata();
    auto it = md.find("x-session-id");
    return it == md.end() ? std::string("(none)")
                          : std::string(it->second.data(), it->second.size());
  };
  EXPECT_EQ(key_of("conversation-7"), "conversation-7");
  const std::string derived = key_of(nullptr);
  EXPECT_THAT(derived, StartsWith("s-"));
  EXPECT_EQ(key_of(nullptr), derived);  // the same first turn, the same key

  v1::GenerateRequest request;
  request.set_text("hi");
  grpc::ClientContext ctx;
  ctx.AddMetadata("x-session-id", std::string(200, 'k'));
  auto reader = stub_->Generate(&ctx, request);
  v1::GenerateResponse msg;
  EXPECT_FALSE(reader->Read(&msg));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("x-session-id"));
  EXPECT_EQ(engine_.submits(), 3);
}

TEST_F(TextGenerationServiceTest, InvalidRequestNamesFieldAndSkipsEngine) {
  v1::GenerateRequest request;
  request.set_text("hi");
  request.mutable_sampling()->set_top_p(2.0f);
  std::vector<v1::GenerateResponse> messages;
  grpc::Status status = Collect(request, &messages);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("sampling.top_p"));
  EXPECT_TRUE(messages.empty());
  EXPECT_EQ(engine_.submits(), 0);
}

// The model has 300 embedding rows but the tokenizer defines 257 ids.
TEST_F(TextGenerationServiceTest, IdsBeyondTokenizerRejected) {
  v1::GenerateRequest request;
  request.mutable_token_ids()->add_ids(257);
  std::vector<v1::GenerateResponse> messages;
  grpc::Status status = Collect(request, &messages);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("token_ids.ids[0]"));
}

TEST_F(TextGenerationServiceTest, SubmitErrorsKeepTheirCode) {
  const std::vector<std::pair<absl::Status, grpc::StatusCode>> cases = {
      {absl::ResourceExhaustedError("queue full"),
       grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::UnavailableError("server is draining"),
       grpc::StatusCode::UNAVAILABLE},
      {absl::InvalidArgumentError("bad id"),
       grpc::StatusCode::INVALID_ARGUMENT},
  };
  for (const auto& [engine_status, code] : cases) {
    engine_.set_submit_status(engine_status);
    v1::GenerateRequest request;
    request.set_text("hi");
    std::vector<v1::GenerateResponse> messages;
    grpc::Status status = Collect(request, &messages);
    EXPECT_EQ(status.error_code(), code);
    EXPECT_EQ(status.error_message(), engine_status.message());
    EXPECT_TRUE(messages.empty());
  }
}

// The fake engine produces far faster than a client that is not reading: the
// engine thread must never block, and the client later gets every token in
// order, in fewer messages than events.
TEST_F(TextGenerationServiceTest, SlowReaderGetsCoalescedMessages) {
  v1::GenerateRequest request;
  request.set_text("go");
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, request);
  Request got = engine_.Take();

  constexpr int kEvents = 300;
  const std::string filler(4096, '.');
  std::thread engine_thread([&] {
    for (int i = 0; i < kEvents; ++i) {
      got.sink(Token(i % 256, std::to_string(i) + filler));
    }
    GenerationEvent last;
    last.finish = FinishReason::kLength;
    last.prompt_tokens = 2;
    last.generated_tokens = kEvents;
    got.sink(std::move(last));
  });
  // The engine finishes all its work while nobody reads.
  engine_thread.join();

  const StreamRead read = ReadStream(*reader);
  ASSERT_TRUE(read.status.ok());
  ASSERT_EQ(read.ids.size(), static_cast<size_t>(kEvents));
  std::string expected;
  for (int i = 0; i < kEvents; ++i) {
    EXPECT_EQ(read.ids[i], i % 256);
    expected += std::to_string(i) + filler;
  }
  EXPECT_TRUE(read.text == expected);
  EXPECT_EQ(read.last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(read.last.usage().generated_tokens(),
            static_cast<uint32_t>(kEvents));
  EXPECT_LT(read.messages, kEvents / 2);
}

// Bytes that are not a valid request (a string field that is not UTF-8, a
// truncated field) used to be answered UNIMPLEMENTED with no message.
TEST_F(TextGenerationServiceTest, UnparsableRequestsAreInvalidArgument) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                     grpc::InsecureChannelCredentials());
  auto bytes = [](const std::string& wire) {
    grpc::Slice slice(wire);
    return grpc::ByteBuffer(&slice, 1);
  };
  // Field 2 (text) of GenerateRequest / field 1 of TokenizeRequest, holding
  // bytes that are not UTF-8; then a length running past the end.
  const std::string bad_utf8_generate = std::string("\x12\x02\xff\xfe", 4);
  // Apart, since "\x10ab" would be one escape.
  const std::string truncated = std::string("\x12\x10") + "ab";
  for (const std::string& wire : {bad_utf8_generate, truncated}) {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
        grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
            channel.get(),
            grpc::internal::RpcMethod(
                "/seqboat.v1.TextGeneration/Generate",
                grpc::internal::RpcMethod::SERVER_STREAMING),
            &ctx, bytes(wire)));
    grpc::ByteBuffer msg;
    EXPECT_FALSE(reader->Read(&msg));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(),
                HasSubstr("could not be parsed (a malformed field, or a "
                          "string that is not valid UTF-8) as "
                          "seqboat.v1.GenerateRequest"));
  }
  const std::string bad_utf8_tokenize = std::string("\x0a\x02\xc3\x28", 4);
  for (const std::string& wire : {bad_utf8_tokenize, truncated}) {
    grpc::ClientContext ctx;
    grpc::ByteBuffer reply;
    const grpc::Status status =
        grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
            channel.get(),
            grpc::internal::RpcMethod("/seqboat.v1.TextGeneration/Tokenize",
                                      grpc::internal::RpcMethod::NORMAL_RPC),
            &ctx, bytes(wire), &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(),
                HasSubstr("seqboat.v1.TokenizeRequest"));
  }
  // The server goes on serving well-formed calls.
  v1::TokenizeRequest ok;
  ok.set_text("hi");
  v1::TokenizeResponse response;
  grpc::ClientContext ctx;
  EXPECT_TRUE(stub_->Tokenize(&ctx, ok, &response).ok());
  EXPECT_EQ(response.token_ids_size(), 2);
}

TEST_F(TextGenerationServiceTest, TokenizeReturnsIdsAndPieces) {
  v1::TokenizeRequest request;
  request.set_text("h\xC3\xA9");
  v1::TokenizeResponse response;
  grpc::ClientContext ctx;
  grpc::Status status = stub_->Tokenize(&ctx, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(response.token_ids(), ElementsAre('h', 0xC3, 0xA9));
  ASSERT_EQ(response.pieces_size(), 3);
  EXPECT_EQ(response.pieces(0), "h");
  // Pieces are bytes: half a character travels as it is.
  EXPECT_EQ(response.pieces(1), "\xC3");
  EXPECT_EQ(response.pieces(2), "\xA9");
}

TEST_F(TextGenerationServiceTest, GetModelInfoDescribesModelAndLimits) {
  v1::ModelInfo info;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.name(), "fake");
  EXPECT_THAT(info.layer_kinds(), ElementsAre("mamba", "mamba"));
  EXPECT_EQ(info.vocab_size(), 257);  // ids both tokenizer and model accept
  EXPECT_EQ(info.eos_token_id(), 256);
  EXPECT_EQ(info.max_slots(), 3);
  EXPECT_EQ(info.max_queue(), 5);
  EXPECT_EQ(info.max_new_tokens_limit(), 1000u);
  EXPECT_EQ(info.max_prompt_tokens(), 64u);
  EXPECT_EQ(info.backend(), "cpu");
  EXPECT_EQ(info.state_bytes_per_slot(), 4096);
}

}  // namespace
}  // namespace seqboat
