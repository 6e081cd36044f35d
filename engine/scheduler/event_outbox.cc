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
  Batch batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !pending_.empty() || stopping_; });
      if (pending_.empty()) return;
      batch.swap(pending_);
    }
    for (auto& [sink, event] : batch) sink(std::move(event));
    batch.clear();
  }
}

}  // namespace seqboat
