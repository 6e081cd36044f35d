// An Engine for the front ends' tests: Submit queues what it accepts for the
// test to drive by hand (Take, then the request's sink), or answers with a
// status the test chooses. Its tokenizer is the byte tokenizer with one
// special token, <|endoftext|> (id 256).
#ifndef SEQBOAT_SERVER_TESTING_FAKE_ENGINE_H_
#define SEQBOAT_SERVER_TESTING_FAKE_ENGINE_H_

#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace seqboat {

class FakeEngine final : public Engine {
 public:
  // A model named "fake" of the tokenizer's 257 tokens, EOS 256.
  FakeEngine();
  FakeEngine(ModelSummary summary, EngineOptions options);

  absl::Status Submit(Request request) override;
  void BeginDrain() override {}
  void Shutdown() override {}
  EngineStats Stats() const override { return {}; }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  const ModelSummary& summary() const override { return summary_; }
  const EngineOptions& options() const override { return options_; }

  // What Submit answers from now on; OK accepts.
  void set_submit_status(absl::Status status);
  // Submit calls so far, accepted or not.
  int submits();
  // Waits (up to 10 s) for the next accepted request; an empty one, with a
  // test failure, when none comes.
  Request Take();

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
  ModelSummary summary_;
  EngineOptions options_;
  absl::Mutex mu_;
  absl::Status submit_status_ ABSL_GUARDED_BY(mu_);
  int submits_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Request> accepted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_TESTING_FAKE_ENGINE_H_
