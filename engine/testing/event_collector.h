// Test helper: gathers the events an engine sends one request, and resolves
// `done` with the final one (a finish reason or an error).
#ifndef SEQBOAT_ENGINE_TESTING_EVENT_COLLECTOR_H_
#define SEQBOAT_ENGINE_TESTING_EVENT_COLLECTOR_H_

#include <future>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/request.h"

namespace seqboat {

struct EventCollector {
  std::mutex mu;  // guards everything but `done`, for readers on other threads
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  int events = 0;
  std::promise<GenerationEvent> done;

  // The sink to put in the Request; `this` must outlive the request.
  EventSink Sink() {
    return [this](GenerationEvent e) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++events;
        tokens.insert(tokens.end(), e.token_ids.begin(), e.token_ids.end());
        text += e.text;
        for (TokenLogprobs& lp : e.logprobs) logprobs.push_back(std::move(lp));
      }
      // Outside the lock: once `done` is set the waiter may destroy this
      // collector, mutex included.
      if (e.finish != FinishReason::kNone || !e.status.ok()) {
        done.set_value(std::move(e));
      }
    };
  }
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TESTING_EVENT_COLLECTOR_H_
