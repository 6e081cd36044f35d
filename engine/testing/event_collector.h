// Test helper: gathers the events an engine sends one request, and resolves
// `done` with the final one (a finish reason or an error); for a request of
// n sequences (set `n` before submitting), with the last of their n final
// events, each sequence's tokens and final event kept apart too.
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
  int n = 1;      // sequences of the request: final events to wait for
  std::mutex mu;  // guards everything but `done`, for readers on other threads
  std::vector<int32_t> tokens;  // of every sequence, in arrival order
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  int events = 0;
  // Per sequence index: its tokens, its text and its final event.
  std::vector<std::vector<int32_t>> tokens_of;
  std::vector<std::string> text_of;
  std::vector<GenerationEvent> final_of;
  int finals = 0;
  bool bad_index = false;    // an index outside [0, n), or a second final
  bool after_final = false;  // an event of a sequence already ended
  std::promise<GenerationEvent> done;

  // The sink to put in the Request; `this` must outlive the request.
  EventSink Sink() {
    return [this](GenerationEvent e) {
      const bool final_event =
          e.finish != FinishReason::kNone || !e.status.ok();
      bool all_done = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        ++events;
        tokens.insert(tokens.end(), e.token_ids.begin(), e.token_ids.end());
        text += e.text;
        for (TokenLogprobs& lp : e.logprobs) logprobs.push_back(std::move(lp));
        if (tokens_of.empty()) {
          tokens_of.resize(n);
          text_of.resize(n);
          final_of.resize(n);
        }
        const bool in_range = e.index >= 0 && e.index < n;
        bad_index |= !in_range;
        if (in_range) {
          const GenerationEvent& ended = final_of[e.index];
          after_final |=
              ended.finish != FinishReason::kNone || !ended.status.ok();
          auto& mine = tokens_of[e.index];
          mine.insert(mine.end(), e.token_ids.begin(), e.token_ids.end());
          text_of[e.index] += e.text;
        }
        if (final_event) {
          if (in_range) {
            const GenerationEvent& before = final_of[e.index];
            bad_index |=
                before.finish != FinishReason::kNone || !before.status.ok();
            final_of[e.index] = e;
          }
          // Counted either way, so that a bad index fails a test rather
          // than leaving it waiting.
          all_done = ++finals == n;
        }
      }
      // Outside the lock: once `done` is set the waiter may destroy this
      // collector, mutex included.
      if (all_done) done.set_value(std::move(e));
    };
  }
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TESTING_EVENT_COLLECTOR_H_
