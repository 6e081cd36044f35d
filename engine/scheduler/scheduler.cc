#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/scheduler/step_plan.h"

namespace seqboat {
namespace {

// The final event of a request that never held a slot.
void FinishUnadmitted(Request& r, FinishReason finish,
                      absl::Status status = absl::OkStatus()) {
  GenerationEvent event;
  event.finish = finish;
  event.prompt_tokens = static_cast<int32_t>(r.prompt.size());
  event.status = std::move(status);
  r.sink(std::move(event));
}

}  // namespace

Scheduler::Scheduler(SchedulerOptions options, SlotArena& arena,
                     const Tokenizer& tokenizer, PrefixCache* cache)
    : options_(options),
      arena_(arena),
      tokenizer_(tokenizer),
      cache_(cache != nullptr && cache->enabled() ? cache : nullptr),
      free_slots_(arena.free_slots()) {}

Scheduler::~Scheduler() { CancelAll(); }

absl::Status Scheduler::Add(Request request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!fault_.ok()) return fault_;
  if (draining_ || stopping_) {
    return absl::UnavailableError("server is draining");
  }
  if (static_cast<int64_t>(waiting_.size()) >=
      int64_t{options_.max_queue} + free_slots_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "queue full: ", waiting_.size(), " requests waiting for a slot"));
  }
  waiting_.push_back(std::move(request));
  cv_.notify_one();
  return absl::OkStatus();
}

void Scheduler::BeginDrain() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
}

void Scheduler::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  draining_ = true;
  cv_.notify_all();
}

SchedulerCounts Scheduler::Counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerCounts c;
  c.running = running_count_;
  c.waiting = static_cast<int32_t>(waiting_.size());
  c.free_slots = free_slots_;
  c.draining = draining_;
  if (!fault_.ok()) c.fault = fault_.ToString();
  return c;
}

bool Scheduler::WaitForWork() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock,
           [&] { return stopping_ || !waiting_.empty() || !running_.empty(); });
  return !stopping_;
}

void Scheduler::Admit(absl::Time now,
                      const std::function<void(absl::Duration)>& on_admit) {
  std::deque<Request> admitted, gone, expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Requests that left while waiting never touch the model.
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->control->cancelled.load() || now > it->deadline) {
        (now > it->deadline ? expired : gone).push_back(std::move(*it));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    for (int free = arena_.free_slots(); free > 0 && !waiting_.empty();
         --free) {
      admitted.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
    }
  }
  // Sinks run outside the lock: they belong to the server.
  for (Request& r : gone) FinishUnadmitted(r, FinishReason::kCancelled);
  for (Request& r : expired) {
    FinishUnadmitted(
        r, FinishReason::kCancelled,
        absl::DeadlineExceededError("deadline passed while queued"));
  }
  for (Request& r : admitted) {
    if (on_admit) on_admit(now - r.arrival);
    const int slot = *arena_.Acquire();  // counted free above
    auto seq = std::make_unique<Sequence>(std::move(r), slot, tokenizer_);
    if (cache_ != nullptr) {
      // At least the prompt's last token is computed: it gives the logits.
      const int32_t len = seq->prompt_len();
      auto snap = cache_->Lookup(seq->request().prompt, len - 1);
      if (snap != nullptr) {
        arena_.Restore(slot, snap->state);
        seq->ResumeFrom(static_cast<int32_t>(snap->tokens.size()));
      }
      if (len - 1 > seq->cached()) seq->set_snapshot_at(len - 1);
    }
    running_.push_back(std::move(seq));
  }
  CountSlots();
}

void Scheduler::DropCancelled(absl::Time now) {
  for (auto& seq : running_) {
    const Request& r = seq->request();
    if (r.control->cancelled.load()) {
      Release(*seq, seq->Abort(FinishReason::kCancelled));
    } else if (now > r.deadline) {
      Release(*seq, seq->Abort(FinishReason::kCancelled,
                               absl::DeadlineExceededError("deadline passed")));
    }
  }
  EraseFinished();
}

void Scheduler::PlanStep(StepBatch& batch) {
  std::vector<SequenceView> views;
  views.reserve(running_.size());
  for (auto& seq : running_)
    views.push_back({seq->prompt_len(), seq->prefilled(), seq->snapshot_at()});
  const StepPlan plan = seqboat::PlanStep(views, options_.step_token_budget);

  batch.ids.clear();
  batch.segs.clear();
  batch.logit_rows.clear();
  batch.logit_seqs.clear();
  batch.sequences = static_cast<int32_t>(plan.runs.size());
  for (const PlannedRun& run : plan.runs) {
    Sequence& seq = *running_[run.seq];
    const int32_t start = static_cast<int32_t>(batch.ids.size());
    if (run.decode) {
      batch.ids.push_back(seq.last_token());
    } else {
      const auto& p = seq.request().prompt;
      batch.ids.insert(batch.ids.end(), p.begin() + run.prompt_from,
                       p.begin() + run.prompt_from + run.len);
      seq.AddPrefilled(run.len);
    }
    batch.segs.push_back({seq.slot(), start, run.len});
    if (run.wants_logits) {
      batch.logit_rows.push_back(start + run.len - 1);
      batch.logit_seqs.push_back(&seq);
    }
  }
}

void Scheduler::AfterStep() {
  if (cache_ == nullptr) return;
  for (auto& seq : running_) {
    if (seq->snapshot_at() >= 0 && seq->prefilled() == seq->snapshot_at()) {
      TakeSnapshot(*seq);
      seq->set_snapshot_at(-1);
    }
  }
}

void Scheduler::TakeSnapshot(const Sequence& seq) {
  PrefixSnapshot snap;
  snap.tokens = seq.ConsumedTokens();
  if (snap.tokens.empty() || cache_->Contains(snap.tokens)) return;
  snap.state = arena_.Snapshot(seq.slot());
  cache_->Insert(std::move(snap));
}

void Scheduler::Deliver(Sequence& seq, GenerationEvent event) {
  if (seq.finished()) {
    Release(seq, std::move(event));
  } else {
    seq.request().sink(std::move(event));
  }
}

void Scheduler::EraseFinished() {
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [](const auto& s) { return s->finished(); }),
                 running_.end());
  CountSlots();
}

void Scheduler::FailRunning(const absl::Status& status) {
  for (auto& seq : running_) {
    Release(*seq, seq->Abort(FinishReason::kNone, status));
  }
  EraseFinished();
}

void Scheduler::Fault(const absl::Status& fault) {
  std::deque<Request> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fault_ = fault;
    queued.swap(waiting_);
  }
  for (Request& r : queued) FinishUnadmitted(r, FinishReason::kNone, fault);
}

void Scheduler::CancelAll() {
  std::deque<Request> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    left.swap(waiting_);
  }
  for (Request& r : left) FinishUnadmitted(r, FinishReason::kCancelled);
  for (auto& seq : running_) {
    if (!seq->finished()) Release(*seq, seq->Abort(FinishReason::kCancelled));
  }
  running_.clear();
  CountSlots();
}

void Scheduler::Release(Sequence& seq, GenerationEvent event) {
  // Only a sequence that ended on its own is at a consistent point with
  // nothing in flight; cancelled and failed ones leave nothing behind.
  const bool ended_normally =
      event.status.ok() && (event.finish == FinishReason::kLength ||
                            event.finish == FinishReason::kEos ||
                            event.finish == FinishReason::kStopString);
  if (cache_ != nullptr && ended_normally) TakeSnapshot(seq);
  arena_.Release(seq.slot());
  CountSlots();
  seq.request().sink(std::move(event));
}

void Scheduler::CountSlots() {
  // Every running sequence holds one slot, so the arena's count is the
  // running count too, also before finished sequences are erased.
  std::lock_guard<std::mutex> lock(mu_);
  free_slots_ = arena_.free_slots();
  running_count_ = arena_.max_slots() - free_slots_;
}

}  // namespace seqboat
