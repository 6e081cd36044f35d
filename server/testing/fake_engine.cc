#include "server/testing/fake_engine.h"

#include <utility>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

ModelSummary DefaultSummary() {
  ModelSummary summary;
  summary.name = "fake";
  summary.vocab_size = 257;
  summary.eos_token_id = 256;
  summary.prompt_rules.vocab_limit = 257;
  return summary;
}

}  // namespace

FakeEngine::FakeEngine() : FakeEngine(DefaultSummary(), EngineOptions()) {}

FakeEngine::FakeEngine(ModelSummary summary, EngineOptions options)
    : summary_(std::move(summary)), options_(std::move(options)) {
  auto tokenizer = ParseTokenizerJson(R"({"model": {"type": "Bytes"},
      "added_tokens": [{"id": 256, "content": "<|endoftext|>",
                        "special": true}]})");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  tokenizer_ = *std::move(tokenizer);
}

absl::Status FakeEngine::Submit(Request request) {
  absl::MutexLock lock(&mu_);
  ++submits_;
  if (!submit_status_.ok()) return submit_status_;
  accepted_.push_back(std::move(request));
  return absl::OkStatus();
}

void FakeEngine::set_submit_status(absl::Status status) {
  absl::MutexLock lock(&mu_);
  submit_status_ = std::move(status);
}

int FakeEngine::submits() {
  absl::MutexLock lock(&mu_);
  return submits_;
}

Request FakeEngine::Take() {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(
      absl::Condition(
          +[](std::deque<Request>* q) { return !q->empty(); }, &accepted_),
      absl::Seconds(10));
  EXPECT_FALSE(accepted_.empty()) << "no request reached the engine";
  if (accepted_.empty()) return Request();
  Request r = std::move(accepted_.front());
  accepted_.pop_front();
  return r;
}

}  // namespace seqboat
