#include "server/openai_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/chat_template.h"
#include "server/metrics.h"
#include "server/serving_metrics.h"
#include "server/testing/fake_engine.h"

namespace seqboat {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

GenerationEvent Tokens(std::vector<int32_t> ids) {
  GenerationEvent e;
  for (int32_t id : ids) e.text += static_cast<char>(id);
  e.token_ids = std::move(ids);
  return e;
}

GenerationEvent Final(FinishReason reason) {
  GenerationEvent e;
  e.finish = reason;
  e.prompt_tokens = 2;
  e.generated_tokens = 2;
  return e;
}

// A raw HTTP/1.1 client, for what httplib hides: reading a stream as it
// comes, and hanging up mid-request.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawClient() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void Send(const std::string& bytes) {
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  void Post(const std::string& body) {
    Send(
        absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: application/json\r\nContent-Length: ",
                     body.size(), "\r\n\r\n", body));
  }
  // Reads until `needle` has arrived (or 10 s pass); everything read so far.
  std::string ReadUntil(const std::string& needle) {
    char buf[4096];
    while (!absl::StrContains(received_, needle)) {
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      received_.append(buf, static_cast<size_t>(n));
    }
    return received_;
  }

 private:
  int fd_ = -1;
  std::string received_;
};

class OpenAiServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }

  void Start(size_t max_body_bytes = 4096,
             absl::Duration idle_timeout = absl::Seconds(5),
             std::shared_ptr<const ChatTemplate> chat_template = nullptr) {
    OpenAiServer::Options options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.model_id = "fake";
    options.limits.max_new_tokens_default = 16;
    options.limits.max_new_tokens_limit = 64;
    options.limits.max_prompt_tokens = 100;
    options.max_body_bytes = max_body_bytes;
    options.threads = 2;
    options.idle_timeout = idle_timeout;
    options.disconnect_poll = absl::Milliseconds(20);
    options.ready = [this] { return ready_.load(); };
    options.metrics = &metrics_;
    options.chat_template = std::move(chat_template);
    options.no_chat_template = "the test gave none";
    server_.reset();
    auto server = OpenAiServer::Start(&engine_, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  httplib::Client Client() {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_connection_timeout(5);
    client.set_read_timeout(10);
    return client;
  }

  httplib::Result Post(const std::string& body) {
    return Client().Post("/v1/completions", body, "application/json");
  }
  httplib::Result PostChat(const std::string& body) {
    return Client().Post("/v1/chat/completions", body, "application/json");
  }

  // Posts `body` and checks the error object that comes back.
  json ExpectError(const std::string& body, int status) {
    auto r = Post(body);
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    json j = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(j.contains("error")) << r->body;
    for (const char* key : {"message", "type", "param", "code"}) {
      EXPECT_TRUE(j["error"].contains(key)) << key << " in " << r->body;
    }
    return j["error"];
  }

  // The value of one sample of /metrics, -1 when absent.
  double Sample(const std::string& series) {
    const std::string text = registry_.Render();
    const std::string prefix = series + " ";
    size_t at = text.find("\n" + prefix);
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + 1 + prefix.size()));
  }
  // Calls are counted once MHD is done with them, which may be just after
  // the client read its answer.
  void WaitForCount(const std::string& code, double n) {
    const std::string series = absl::StrCat("seqboat_requests_total{code=\"",
                                            code, "\",frontend=\"http\"}");
    WaitFor([&] { return Sample(series) == n; });
    EXPECT_EQ(Sample(series), n) << series;
  }

  void WaitFor(const std::function<bool()>& done) {
    const absl::Time end = absl::Now() + absl::Seconds(10);
    while (!done() && absl::Now() < end) absl::SleepFor(absl::Milliseconds(5));
    EXPECT_TRUE(done());
  }

  std::atomic<bool> ready_{true};
  FakeEngine engine_;
  MetricsRegistry registry_;
  ServingMetrics metrics_{&registry_};
  std::unique_ptr<OpenAiServer> server_;
};

TEST_F(OpenAiServerTest, ModelsAndHealth) {
  auto models = Client().Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  json list = json::parse(models->body);
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["data"][0]["id"], "fake");

  auto model = Client().Get("/v1/models/fake");
  ASSERT_TRUE(model);
  EXPECT_EQ(json::parse(model->body)["id"], "fake");
  auto other = Client().Get("/v1/models/gpt-4");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(json::parse(other->body)["error"]["code"], "model_not_found");

  auto health = Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  ready_ = false;
  health = Client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_TRUE(json::parse(health->body).contains("error"));
}

TEST_F(OpenAiServerTest, UnknownPathsAndMethods) {
  auto missing = Client().Get("/v1/embeddings");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(json::parse(missing->body)["error"]["message"],
            "Invalid URL (GET /v1/embeddings)");
  auto get_chat = Client().Get("/v1/chat/completions");
  ASSERT_TRUE(get_chat);
  EXPECT_EQ(get_chat->status, 405);
  auto get = Client().Get("/v1/completions");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  auto post = Client().Post("/v1/models", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
}

TEST_F(OpenAiServerTest, CompletionMapsTheRequestAndAnswersOnce) {
  std::thread client([this] {
    auto r = Post(R"({"model": "fake", "prompt": "Hi", "max_tokens": 5,
                      "temperature": 0, "seed": 7, "stop": "!",
                      "logprobs": 1})");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_THAT(j["id"].get<std::string>(), ::testing::StartsWith("cmpl-"));
    EXPECT_EQ(j["model"], "fake");
    EXPECT_EQ(j["choices"][0]["text"], "ok");
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"],
              json::parse(R"(["o", "k"])"));
    EXPECT_EQ(j["usage"]["total_tokens"], 4);
  });
  Request request = engine_.Take();
  EXPECT_THAT(request.prompt, ElementsAre('H', 'i'));
  EXPECT_EQ(request.stopping.max_new_tokens, 5);
  EXPECT_EQ(request.sampling.temperature, 0.0f);
  EXPECT_EQ(request.sampling.seed, 7u);
  EXPECT_THAT(request.stopping.stop_strings, ElementsAre("!"));
  EXPECT_TRUE(request.logprobs);
  EXPECT_EQ(request.top_logprobs, 1);
  GenerationEvent tokens = Tokens({'o', 'k'});
  tokens.logprobs = {{{'o', -0.5f}, {}}, {{'k', -0.25f}, {}}};
  request.sink(tokens);
  absl::SleepFor(absl::Milliseconds(50));  // the call waits, suspended
  request.sink(Final(FinishReason::kLength));
  client.join();
  WaitForCount("OK", 1);
  EXPECT_EQ(Sample("seqboat_generation_tokens_total{frontend=\"http\"}"), 2);
  EXPECT_EQ(Sample("seqboat_generation_tokens_total{frontend=\"grpc\"}"), 0);
  WaitFor([this] { return server_->active_calls() == 0; });
}

// The conversation key comes back as x-session-id: the header's, else the
// body's `user`, else one derived from the prompt; a bad one is a 400.
TEST_F(OpenAiServerTest, SessionKeyIsEchoedFromHeaderOrUserOrDerived) {
  auto key_of = [this](const std::string& body, httplib::Headers headers) {
    std::string key = "(no answer)";
    std::thread client([&] {
      auto r =
          Client().Post("/v1/completions", headers, body, "application/json");
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 200) << r->body;
      key = r->get_header_value("x-session-id");
    });
    Request request = engine_.Take();
    request.sink(Final(FinishReason::kLength));
    client.join();
    return key;
  };
  const std::string body = R"({"prompt": "Hi", "max_tokens": 1})";
  EXPECT_EQ(key_of(body, {{"X-Session-Id", "conv-1"}}), "conv-1");
  EXPECT_EQ(key_of(R"({"prompt": "Hi", "max_tokens": 1, "user": "alice"})",
                   {{"x-session-id", "conv-2"}}),
            "conv-2");
  EXPECT_EQ(key_of(R"({"prompt": "Hi", "max_tokens": 1, "user": "alice"})", {}),
            "alice");
  const std::string derived = key_of(body, {});
  EXPECT_THAT(derived, ::testing::StartsWith("s-"));
  EXPECT_EQ(key_of(body, {}), derived);

  auto r = Client().Post("/v1/completions",
                         httplib::Headers{{"x-session-id", "two words"}}, body,
                         "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("x-session-id"), std::string::npos) << r->body;
  WaitFor([this] { return server_->active_calls() == 0; });
}

// n = 2: the answer waits for both sequences' final events, the request's
// metrics count it once.
TEST_F(OpenAiServerTest, AnswersOnceEveryChoiceEnded) {
  std::thread client([this] {
    auto r = Post(R"({"prompt": "Hi", "max_tokens": 5, "n": 2})");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    ASSERT_EQ(j["choices"].size(), 2u);
    EXPECT_EQ(j["choices"][0]["text"], "ok");
    EXPECT_EQ(j["choices"][1]["index"], 1);
    EXPECT_EQ(j["choices"][1]["text"], "no");
    EXPECT_EQ(j["usage"]["prompt_tokens"], 2);
    EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  });
  Request request = engine_.Take();
  EXPECT_EQ(request.n, 2);
  GenerationEvent second = Tokens({'n', 'o'});
  second.index = 1;
  request.sink(second);
  request.sink(Tokens({'o', 'k'}));
  request.sink(Final(FinishReason::kLength));
  absl::SleepFor(absl::Milliseconds(50));  // one choice left: still waiting
  EXPECT_EQ(server_->active_calls(), 1);
  GenerationEvent last = Final(FinishReason::kEos);
  last.index = 1;
  request.sink(last);
  client.join();
  WaitForCount("OK", 1);
  EXPECT_EQ(Sample("seqboat_prompt_tokens_total{frontend=\"http\"}"), 2);
  EXPECT_EQ(Sample("seqboat_generation_tokens_total{frontend=\"http\"}"), 4);
  WaitFor([this] { return server_->active_calls() == 0; });
}

TEST_F(OpenAiServerTest, StreamsChunksAsTheEngineProducesThem) {
  RawClient client(server_->port());
  client.Post(R"({"prompt": "Hi", "stream": true,
                  "stream_options": {"include_usage": true}})");
  Request request = engine_.Take();
  request.sink(Tokens({'a'}));
  std::string got = client.ReadUntil("\"a\"");
  EXPECT_THAT(got, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(got, HasSubstr("Content-Type: text/event-stream"));
  EXPECT_THAT(got, HasSubstr("data: {\"id\":\"cmpl-"));
  request.sink(Tokens({'b'}));
  got = client.ReadUntil("\"b\"");
  request.sink(Final(FinishReason::kEos));
  got = client.ReadUntil("data: [DONE]\n\n");
  EXPECT_THAT(got, HasSubstr("\"finish_reason\":\"stop\""));
  EXPECT_THAT(got, HasSubstr("\"choices\":[],\"usage\":{\"prompt_tokens\":2"));
  EXPECT_THAT(got, HasSubstr("data: [DONE]\n\n"));
  // Chunked transfer: the terminating chunk follows.
  EXPECT_THAT(client.ReadUntil("\r\n0\r\n\r\n"), HasSubstr("\r\n0\r\n\r\n"));
}

TEST_F(OpenAiServerTest, ASlowReaderNeverBlocksTheSink) {
  RawClient client(server_->port());
  client.Post(R"({"prompt": "Hi", "stream": true, "max_tokens": 64})");
  Request request = engine_.Take();
  // The client reads nothing while far more than any socket buffer is
  // produced; every sink call returns at once.
  const std::string big(4000, 'x');
  const absl::Time start = absl::Now();
  for (int i = 0; i < 2000; ++i) {
    GenerationEvent e = Tokens({'x'});
    e.text = big;
    request.sink(std::move(e));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  request.sink(Final(FinishReason::kLength));
  const std::string got = client.ReadUntil("data: [DONE]");
  EXPECT_THAT(got, HasSubstr("data: [DONE]"));
}

TEST_F(OpenAiServerTest, ErrorsCarryOpenAisShapeAndStatus) {
  json e = ExpectError("{not json", 400);
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_TRUE(e["param"].is_null());
  e = ExpectError(R"({"model": "gpt-4", "prompt": "a"})", 400);
  EXPECT_EQ(e["param"], "model");
  EXPECT_EQ(e["code"], "model_not_found");
  e = ExpectError(R"({"prompt": "a", "top_p": 2})", 400);
  EXPECT_EQ(e["param"], "top_p");
  EXPECT_EQ(e["message"], "top_p must be in (0, 1], got 2");
  e = ExpectError(R"({"prompt": "a", "n": 17})", 400);
  EXPECT_EQ(e["param"], "n");
  EXPECT_EQ(e["message"], "n must be in [1, 16], got 17");
  e = ExpectError(R"({"prompt": [999]})", 400);
  EXPECT_EQ(e["message"], "prompt[0] must be in [0, 257), got 999");

  engine_.set_submit_status(absl::ResourceExhaustedError("queue is full"));
  e = ExpectError(R"({"prompt": "a"})", 429);
  EXPECT_EQ(e["message"], "queue is full");
  engine_.set_submit_status(absl::UnavailableError("draining"));
  e = ExpectError(R"({"prompt": "a"})", 503);
  EXPECT_EQ(e["message"], "draining");
  WaitForCount("INVALID_ARGUMENT", 5);
  WaitForCount("RESOURCE_EXHAUSTED", 1);
  WaitForCount("UNAVAILABLE", 1);
}

TEST_F(OpenAiServerTest, BodiesAreBounded) {
  // Declared too large: refused before it is read.
  json e = ExpectError(std::string(5000, ' ') + "{}", 413);
  EXPECT_EQ(e["code"], "body_too_large");
  // Too large without a declared length (chunked upload).
  RawClient client(server_->port());
  client.Send(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  for (int i = 0; i < 5; ++i)
    client.Send("3e8\r\n" + std::string(1000, ' ') + "\r\n");
  client.Send("0\r\n\r\n");
  EXPECT_THAT(client.ReadUntil("body_too_large"), HasSubstr("HTTP/1.1 413"));
}

TEST_F(OpenAiServerTest, AClientGoneBeforeItsAnswerCancelsTheRequest) {
  for (bool stream : {false, true}) {
    RawClient client(server_->port());
    client.Post(stream ? R"({"prompt": "Hi", "stream": true})"
                       : R"({"prompt": "Hi"})");
    Request request = engine_.Take();
    if (stream) {
      request.sink(Tokens({'a'}));
      client.ReadUntil("\"a\"");
    }
    EXPECT_FALSE(request.control->cancelled.load());
    client.Close();
    // No event is sent: the watcher notices the closed socket by itself.
    WaitFor([&] { return request.control->cancelled.load(); });
    request.sink(Final(FinishReason::kCancelled));
    WaitFor([this] { return server_->active_calls() == 0; });
  }
  WaitForCount("CANCELLED", 2);
}

TEST_F(OpenAiServerTest, IdleConnectionsAreClosedButWaitingOnesAreNot) {
  Start(4096, absl::Seconds(1));
  RawClient idle(server_->port());
  idle.Send("POST /v1/completions HTTP/1.1\r\n");  // and then nothing
  RawClient waiting(server_->port());
  waiting.Post(R"({"prompt": "Hi"})");
  Request request = engine_.Take();
  // Closed by the server: the read ends without a response.
  const absl::Time start = absl::Now();
  EXPECT_EQ(idle.ReadUntil("HTTP/1.1"), "");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // Waiting on the engine is not idle.
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_FALSE(request.control->cancelled.load());
  request.sink(Tokens({'o', 'k'}));
  request.sink(Final(FinishReason::kLength));
  EXPECT_THAT(waiting.ReadUntil("\"ok\""), HasSubstr("HTTP/1.1 200"));
}

TEST_F(OpenAiServerTest, StoppingWithCallsWaitingClosesThem) {
  RawClient waiting(server_->port());
  waiting.Post(R"({"prompt": "Hi"})");
  RawClient streaming(server_->port());
  streaming.Post(R"({"prompt": "Hi", "stream": true})");
  Request first = engine_.Take();
  Request second = engine_.Take();
  absl::SleepFor(absl::Milliseconds(50));  // both suspended by now
  server_.reset();
  EXPECT_TRUE(first.control->cancelled.load());
  EXPECT_TRUE(second.control->cancelled.load());
  // The engine's late events go nowhere.
  first.sink(Final(FinishReason::kCancelled));
  second.sink(Final(FinishReason::kCancelled));
}

// --- /v1/chat/completions

// A ChatML-like template over the byte tokenizer, whose special token is
// <|endoftext|> (256).
std::shared_ptr<const ChatTemplate> Template(size_t max_output_bytes = 4096) {
  jinja::Limits limits;
  limits.max_output_bytes = max_output_bytes;
  auto t = ChatTemplate::FromTokenizerConfig(
      R"({"chat_template": "{% if messages[0]['role'] == 'assistant' %}{{ raise_exception('Start with a user message') }}{% endif %}{% for m in messages %}<|endoftext|>{{ m.role }}:{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|endoftext|>assistant:{% endif %}",
          "eos_token": "<|endoftext|>"})",
      "tokenizer_config.json", limits);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::shared_ptr<const ChatTemplate>(*std::move(t)) : nullptr;
}

std::vector<int32_t> Bytes(const std::string& text) {
  return std::vector<int32_t>(text.begin(), text.end());
}

TEST_F(OpenAiServerTest, ChatRendersTheTemplateAndOnlyItsSpecialTokens) {
  Start(4096, absl::Seconds(5), Template());
  std::thread client([this] {
    auto r = PostChat(R"({"model": "fake", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi <|endoftext|>"}],
        "max_completion_tokens": 5, "temperature": 0, "seed": 7,
        "logprobs": true, "top_logprobs": 1})");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    EXPECT_EQ(j["object"], "chat.completion");
    EXPECT_THAT(j["id"].get<std::string>(), ::testing::StartsWith("chatcmpl-"));
    EXPECT_EQ(j["choices"][0]["message"],
              json::parse(R"({"role": "assistant", "content": "ok"})"));
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(j["choices"][0]["logprobs"]["content"][1]["token"], "k");
    EXPECT_EQ(j["usage"]["total_tokens"], 4);
  });
  Request request = engine_.Take();
  // The template's <|endoftext|> is the special id; the one the user wrote
  // is its bytes.
  std::vector<int32_t> want = {256};
  for (int32_t id : Bytes("system:Be brief.\n")) want.push_back(id);
  want.push_back(256);
  for (int32_t id : Bytes("user:hi <|endoftext|>\n")) want.push_back(id);
  want.push_back(256);
  for (int32_t id : Bytes("assistant:")) want.push_back(id);
  EXPECT_EQ(request.prompt, want);
  // The template's eos_token ends the turn.
  EXPECT_THAT(request.stopping.stop_token_ids, ElementsAre(256));
  EXPECT_EQ(request.stopping.max_new_tokens, 5);
  EXPECT_EQ(request.sampling.seed, 7u);
  EXPECT_TRUE(request.logprobs);
  EXPECT_EQ(request.top_logprobs, 1);
  GenerationEvent tokens = Tokens({'o', 'k'});
  tokens.logprobs = {{{'o', -0.5f}, {{'o', -0.5f}}}, {{'k', -0.25f}, {}}};
  request.sink(tokens);
  request.sink(Final(FinishReason::kLength));
  client.join();
  WaitForCount("OK", 1);
}

TEST_F(OpenAiServerTest, ChatStreamsTheRoleBeforeTheFirstToken) {
  Start(4096, absl::Seconds(5), Template());
  RawClient client(server_->port());
  const std::string body =
      R"({"messages": [{"role": "user", "content": "hi"}], "stream": true})";
  client.Send(
      absl::StrCat("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                   "Content-Type: application/json\r\nContent-Length: ",
                   body.size(), "\r\n\r\n", body));
  Request request = engine_.Take();
  std::string got = client.ReadUntil("\"role\":\"assistant\"");
  EXPECT_THAT(got, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(got, HasSubstr("\"object\":\"chat.completion.chunk\""));
  EXPECT_THAT(got,
              HasSubstr("\"delta\":{\"role\":\"assistant\",\"content\":\"\"}"));
  request.sink(Tokens({'a'}));
  got = client.ReadUntil("\"delta\":{\"content\":\"a\"}");
  request.sink(Final(FinishReason::kEos));
  got = client.ReadUntil("data: [DONE]\n\n");
  EXPECT_THAT(got, HasSubstr("\"delta\":{},\"logprobs\":null,"
                             "\"finish_reason\":\"stop\""));
  WaitForCount("OK", 1);
}

TEST_F(OpenAiServerTest, ChatErrorsNameTheProblem) {
  // No template: the request is well formed, the model cannot serve it.
  json e = json::parse(
      PostChat(R"({"messages": [{"role": "user", "content": "hi"}]})")->body);
  EXPECT_EQ(e["error"]["code"], "no_chat_template");
  EXPECT_EQ(e["error"]["param"], "messages");
  EXPECT_THAT(e["error"]["message"].get<std::string>(),
              HasSubstr("The model `fake` has no usable chat template: the "
                        "test gave none"));

  Start(4096, absl::Seconds(5), Template(/*max_output_bytes=*/200));
  struct Case {
    std::string body;
    const char* code;  // "" for null
    const char* message;
  };
  const std::string long_content(300, 'x');
  const std::string many_tokens(150, 'y');
  for (const Case& c : {
           Case{R"({"messages": [{"role": "user", "content": "x"}],
                   "max_tokens": 0})",
                "", "max_tokens must be in [1, 64], got 0"},
           Case{R"({"messages": [{"role": "assistant", "content": "x"}]})",
                "chat_template_refused",
                "The model's chat template refused the messages: Start with "
                "a user message"},
           Case{R"({"messages": [{"role": "user", "content": ")" +
                    long_content + R"("}]})",
                "prompt_too_long", "are over the server's limits"},
           Case{R"({"messages": [{"role": "user", "content": ")" + many_tokens +
                    R"("}]})",
                "", "messages has 168 tokens, the limit is 100"},
       }) {
    auto r = PostChat(c.body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    json j = json::parse(r->body);
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    if (*c.code) {
      EXPECT_EQ(j["error"]["code"], c.code) << r->body;
      EXPECT_EQ(j["error"]["param"], "messages") << r->body;
    }
    EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr(c.message))
        << r->body;
  }
  WaitFor([this] { return server_->active_calls() == 0; });
}

}  // namespace
}  // namespace seqboat
