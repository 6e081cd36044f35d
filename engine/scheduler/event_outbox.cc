#include "engine/scheduler/event_outbox.h"

namespace seqboat {

EventOutbox::EventOutbox() : thread_([this] { Deliver(); }) {}

EventOutbox::~EventOutbox() { Stop(); }

void EventOutbox::Send(const SharedSink& sink, GenerationEvent event) {
  sent_.emplace_back(sink, std::move(event));
}

void EventOutbox::Flush() {
  if (sent_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.empty()) {
      // The vectors trade places, so their capacity is reused.
      pending_.swap(sent_);
    } else {
      for (auto& item : sent_) pending_.push_back(std::move(item));
      sent_.clear();
    }
  }
  cv_.notify_one();
}

void EventOutbox::Stop() {
  std::call_once(stopped_, [this] {
    Flush();
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  });
}

void EventOutbox::Deliver() {
  Batch batch, joined;
  absl::flat_hash_map<std::pair<const void*, int32_t>, size_t> last;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !pending_.empty() || stopping_; });
      if (pending_.empty()) return;
      batch.swap(pending_);
    }
    Join(batch, &joined, &last);
    for (auto& [sink, event] : joined) sink(std::move(event));
    batch.clear();
    joined.clear();
    last.clear();
  }
}

void EventOutbox::Join(
    Batch& batch, Batch* out,
    absl::flat_hash_map<std::pair<const void*, int32_t>, size_t>* last) {
  for (auto& [sink, event] : batch) {
    const std::pair<const void*, int32_t> key{sink.id(), event.index};
    auto it = last->find(key);
    if (it != last->end()) {
      GenerationEvent& into = (*out)[it->second].second;
      // Errors stay apart: tokens before one go out before it.
      if (into.finish == FinishReason::kNone && into.status.ok() &&
          event.status.ok()) {
        into.token_ids.insert(into.token_ids.end(), event.token_ids.begin(),
                              event.token_ids.end());
        into.text += event.text;
        for (TokenLogprobs& lp : event.logprobs) {
          into.logprobs.push_back(std::move(lp));
        }
        into.finish = event.finish;
        into.matched_stop = std::move(event.matched_stop);
        into.prompt_tokens = event.prompt_tokens;
        into.cached_prompt_tokens = event.cached_prompt_tokens;
        into.generated_tokens = event.generated_tokens;
        continue;
      }
    }
    (*last)[key] = out->size();
    out->emplace_back(std::move(sink), std::move(event));
  }
}

}  // namespace seqboat
