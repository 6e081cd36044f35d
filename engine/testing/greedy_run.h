// Test helper: one greedy request through an engine, waited for, with the
// tokens it generated and the prompt tokens it restored from a snapshot.
#ifndef SEQBOAT_ENGINE_TESTING_GREEDY_RUN_H_
#define SEQBOAT_ENGINE_TESTING_GREEDY_RUN_H_

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/event_collector.h"
#include "gtest/gtest.h"

namespace seqboat {

struct GreedyResult {
  std::vector<int32_t> tokens;
  int32_t cached = 0;
};

// `max_new` tokens, EOS ignored; a refused submission or a failed request
// fails the calling test.
inline GreedyResult RunGreedy(Engine& engine, std::vector<int32_t> prompt,
                              int max_new) {
  EventCollector c;
  Request r;
  r.prompt = std::move(prompt);
  r.stopping.max_new_tokens = max_new;
  r.stopping.ignore_eos = true;
  r.sink = c.Sink();
  EXPECT_TRUE(engine.Submit(std::move(r)).ok());
  const GenerationEvent last = c.done.get_future().get();
  EXPECT_TRUE(last.status.ok()) << last.status;
  std::lock_guard<std::mutex> lock(c.mu);
  return {c.tokens, last.cached_prompt_tokens};
}

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TESTING_GREEDY_RUN_H_
