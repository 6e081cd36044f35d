// The events of the engine's turns, handed to their sinks in batches by a
// thread of their own: a sink (a gRPC write, an HTTP chunk) then never runs
// on the engine thread, where it would hold up the next step, and a turn's
// events cost one lock, not one per event. Order is kept: events reach
// sinks in the order they were sent. When delivery falls behind the engine,
// the events of one sequence that piled up reach its sink as one (their
// tokens and text joined), so a slow delivery makes fewer, larger calls
// instead of falling further behind.
//
// Send and Flush belong to one thread (the engine's); Stop may be called
// from any thread once that thread sends no more.
#ifndef SEQBOAT_ENGINE_SCHEDULER_EVENT_OUTBOX_H_
#define SEQBOAT_ENGINE_SCHEDULER_EVENT_OUTBOX_H_

#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/request.h"

namespace seqboat {

class EventOutbox {
 public:
  // Starts the delivery thread.
  EventOutbox();
  // Stop().
  ~EventOutbox();
  EventOutbox(const EventOutbox&) = delete;
  EventOutbox& operator=(const EventOutbox&) = delete;

  // Queues an event for `sink`; nothing is delivered before Flush.
  void Send(const SharedSink& sink, GenerationEvent event);
  // Hands what was sent since the last Flush to the delivery thread.
  void Flush();
  // Flushes, delivers everything queued, and ends the delivery thread.
  void Stop();

 private:
  using Batch = std::vector<std::pair<SharedSink, GenerationEvent>>;
  void Deliver();
  // `batch` into `out`, each sequence's consecutive successful events
  // joined; `last` is scratch (where each sequence's event is in `out`).
  static void Join(
      Batch& batch, Batch* out,
      absl::flat_hash_map<std::pair<const void*, int32_t>, size_t>* last);

  Batch sent_;  // the sending thread's
  std::mutex mu_;
  std::condition_variable cv_;
  Batch pending_;          // guarded by mu_
  bool stopping_ = false;  // guarded by mu_
  std::once_flag stopped_;
  std::thread thread_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SCHEDULER_EVENT_OUTBOX_H_
