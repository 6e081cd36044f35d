#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/scheduler/step_plan.h"

namespace seqboat {
namespace {

// The slots a waiting request asks for.
int64_t SlotsOf(const Request& r) { return std::max(r.n, 1); }

}  // namespace

Scheduler::Scheduler(SchedulerOptions options, SlotArena& arena,
                     const Tokenizer& tokenizer, PrefixCache* cache,
                     EventOutbox* outbox, HostBlockPool* blocks,
                     SnapshotDisk* disk, ModelDrafter* drafter, MtpDrafter* mtp)
    : options_(options),
      arena_(arena),
      tokenizer_(tokenizer),
      cache_(cache != nullptr && cache->enabled() ? cache : nullptr),
      outbox_(outbox),
      blocks_(blocks),
      disk_(cache_ != nullptr ? disk : nullptr),
      drafter_(drafter),
      mtp_(mtp),
      free_slots_(arena.free_slots()) {}

Scheduler::~Scheduler() { CancelAll(); }

absl::Status Scheduler::Add(Request request) {
  // More than the arena holds would wait at the head of the queue forever.
  if (request.n < 1 || request.n > arena_.max_slots()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n is ", request.n, "; there are ", arena_.max_slots(), " slots"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!fault_.ok()) return fault_;
  if (draining_ || stopping_) {
    return absl::UnavailableError("server is draining");
  }
  // Counted in slots: a request of n sequences waits for n of them.
  int64_t waiting_slots = 0;
  for (const Request& r : waiting_) waiting_slots += SlotsOf(r);
  if (waiting_slots >= int64_t{options_.max_queue} + free_slots_) {
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

bool Scheduler::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

SchedulerCounts Scheduler::Counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerCounts c;
  c.running = running_count_;
  c.waiting = static_cast<int32_t>(waiting_.size());
  c.free_slots = free_slots_;
  c.draining = draining_;
  if (!fault_.ok()) c.fault = fault_.ToString();
  c.speculation = speculation_;
  c.speculation_by_method = speculation_by_method_;
  std::lock_guard<std::mutex> peer_lock(disk_mu_);
  c.peer_fetch = peer_stats_;
  return c;
}

bool Scheduler::WaitForWork() {
  std::unique_lock<std::mutex> lock(mu_);
  // copying_ is this thread's own.
  cv_.wait(lock, [&] {
    return stopping_ || !waiting_.empty() || !running_.empty() ||
           !copying_.empty() || disk_reads_ > 0 || !posted_.empty();
  });
  return !stopping_;
}

bool Scheduler::PollCopies() {
  bool pending = false;
  for (auto& seq : running_) {
    if (seq->copy() == 0) continue;
    if (arena_.CopyDone(seq->copy())) {
      seq->set_copy(0);
    } else {
      pending = true;
    }
  }
  bool released = false;
  while (!copying_.empty() && arena_.CopyDone(copying_.front().ticket)) {
    InFlightCopy& c = copying_.front();
    if (!c.snapshot.tokens.empty()) cache_->Insert(std::move(c.snapshot));
    if (c.release_slot >= 0) released |= arena_.Release(c.release_slot);
    copying_.pop_front();
  }
  if (released) CountSlots();
  const bool reading = PollDiskReads();
  return pending || reading || !copying_.empty();
}

void Scheduler::Admit(absl::Time now,
                      const std::function<void(absl::Duration)>& on_admit) {
  RunPosted();
  PollCopies();
  StartDiskReads();
  std::deque<Request> admitted, gone, expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Requests that left while waiting never touch the model.
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->control->cancelled.load() || now > it->deadline) {
        disk_checked_.erase(it->control.get());
        (now > it->deadline ? expired : gone).push_back(std::move(*it));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    // Drafts give way to waiting requests.
    if (!waiting_.empty()) ReturnSpareSlots();
    // Tenants in turn, each's oldest first, each once all its slots are
    // free: a request of n waits as the next to go (holding back the ones
    // after it, which cannot starve it) until running sequences end and
    // free n slots. One tenant's burst queues behind nobody else's turn.
    int64_t free = arena_.free_slots();
    for (auto next = NextInTurn();
         next != waiting_.end() && SlotsOf(*next) <= free;
         next = NextInTurn()) {
      free -= SlotsOf(*next);
      last_tenant_ = next->tenant;
      disk_checked_.erase(next->control.get());
      admitted.push_back(std::move(*next));
      waiting_.erase(next);
    }
    // The slots are taken now, under the lock Add checks the bound under:
    // counted later, a burst would see the queue shorter while the slots
    // still looked free, and get past the bound by up to the slots admitted.
    free_slots_ = static_cast<int32_t>(free);
    running_count_ += static_cast<int32_t>(admitted.size());
  }
  // Sinks run outside the lock: they belong to the server.
  for (Request& r : gone)
    FinishSequences(r, 0, FinishReason::kCancelled, absl::OkStatus());
  for (Request& r : expired) {
    FinishSequences(
        r, 0, FinishReason::kCancelled,
        absl::DeadlineExceededError("deadline passed while queued"));
  }
  for (Request& r : admitted) {
    if (on_admit) on_admit(now - r.arrival);
    const int64_t slots = SlotsOf(r);
    const int slot = *arena_.Acquire();  // counted free above
    auto seq = std::make_unique<Sequence>(std::move(r), slot, tokenizer_);
    seq->set_adaptive_draft_length(options_.adaptive_draft_length);
    for (int64_t i = 1; i < slots; ++i) {
      seq->fork_slots().push_back(*arena_.Acquire());
    }
    // At least the prompt's last token is computed: it gives the logits.
    const int32_t len = seq->prompt_len();
    std::shared_ptr<const PrefixSnapshot> snap;
    if (cache_ != nullptr) {
      const Request& r = seq->request();
      WaitForPrefixCopies(r.prompt, r.cache_scope);
      snap = cache_->Lookup(r.prompt, len - 1, r.cache_scope);
      if (snap != nullptr) {
        if (snap->state != nullptr) {
          // The sequence sits steps out until its state is in.
          seq->set_copy(arena_.RestoreAsync(slot, snap->state.get()),
                        snap->state);
        }
        seq->ResumeFrom(static_cast<int32_t>(snap->tokens.size()));
      }
    }
    // The prompt but its last token: where the prefix cache snapshots and
    // where the other sequences of the request fork off.
    if ((cache_ != nullptr || slots > 1) && len - 1 > seq->cached()) {
      seq->set_snapshot_at(len - 1);
    }
    Sequence& first = *seq;
    ++live_sequences_[first.request().control.get()];
    running_.push_back(std::move(seq));
    if (slots > 1 && first.prefilled() == len - 1) Fork(first, snap);
  }
  CountSlots();
}

std::deque<Request>::iterator Scheduler::NextInTurn() {
  // The oldest request of the first tenant after the last one admitted, in
  // name order, wrapping around; one pass, so a turn costs the queue's length.
  auto after = waiting_.end(), first = waiting_.end();
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    // Its snapshot is on its way from disk or a peer, or it came after this
    // turn's lookups (the next turn looks it up).
    if ((disk_ != nullptr || peers_ != nullptr) &&
        (disk_reading_.contains(it->control.get()) ||
         !disk_checked_.contains(it->control.get()))) {
      continue;
    }
    const std::string& t = it->tenant;
    if (first == waiting_.end() || t < first->tenant) first = it;
    if (t > last_tenant_ && (after == waiting_.end() || t < after->tenant)) {
      after = it;
    }
  }
  return after != waiting_.end() ? after : first;
}

void Scheduler::WaitForPrefixCopies(const std::vector<int32_t>& prompt,
                                    const std::string& scope) {
  CopyTicket wait = 0;
  for (const InFlightCopy& c : copying_) {
    const auto& tokens = c.snapshot.tokens;
    if (!tokens.empty() && tokens.size() < prompt.size() &&
        c.snapshot.scope == scope &&
        std::equal(tokens.begin(), tokens.end(), prompt.begin())) {
      wait = c.ticket;
    }
  }
  if (wait == 0) return;
  arena_.WaitCopy(wait);
  PollCopies();
}

void Scheduler::Fork(Sequence& first,
                     const std::shared_ptr<const PrefixSnapshot>& from) {
  std::vector<int> slots;
  slots.swap(first.fork_slots());
  // A slot holds zeros when acquired, which is the state before any token.
  const bool restoring = from != nullptr && from->state != nullptr;
  for (size_t i = 0; i < slots.size(); ++i) {
    const int32_t index = static_cast<int32_t>(i) + 1;
    Request r = first.request();  // the sink and the control are shared
    r.sampling.seed += static_cast<uint64_t>(index);
    auto seq =
        std::make_unique<Sequence>(std::move(r), slots[i], tokenizer_, index);
    seq->set_adaptive_draft_length(options_.adaptive_draft_length);
    if (restoring) {
      seq->set_copy(arena_.RestoreAsync(slots[i], from->state.get()),
                    from->state);
    } else if (first.prefilled() > 0) {
      // In op order: after the step that computed it, before any of seq's.
      arena_.CopySlot(slots[i], first.slot());
    }
    seq->StartAt(first.prefilled(), first.cached());
    ++live_sequences_[seq->request().control.get()];
    running_.push_back(std::move(seq));
  }
}

void Scheduler::DropCancelled(absl::Time now) {
  for (auto& seq : running_) {
    if (seq->finished()) continue;
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

bool Scheduler::any_wants_logprobs() const {
  for (const auto& seq : running_) {
    if (!seq->finished() && seq->wants_logprobs()) return true;
  }
  return false;
}

bool Scheduler::any_constrained() const {
  for (const auto& seq : running_) {
    if (!seq->finished() && seq->constrained()) return true;
  }
  return false;
}

void Scheduler::PlanStep(StepBatch& batch, bool pipelined) {
  PollCopies();
  std::vector<SequenceView> views;
  views.reserve(running_.size());
  for (auto& seq : running_) {
    SequenceView v{seq->prompt_len(), seq->prefilled(), seq->snapshot_at()};
    // Finished ones (their slot not yet back) never run again. A sequence
    // waits for the step in flight when its next row depends on the token
    // that step samples, or its snapshot or fork is due after that step.
    v.hold = seq->finished() || (seq->pending() && !seq->CanRunAhead()) ||
             (seq->last_step() > read_step_ &&
              seq->prefilled() == seq->snapshot_at()) ||
             seq->copy() != 0 ||
             // A pipelined decode feeds one token; unfed ones wait.
             (pipelined && seq->unfed() > 1);
    views.push_back(v);
  }
  // Speculative rounds' rows come out of the prefill budget.
  const int32_t round_rows = pipelined ? 0 : PlanRounds(views);
  const StepPlan plan = seqboat::PlanStep(
      views, std::max(0, options_.step_token_budget - round_rows));

  StepRows& rows = batch.rows;
  rows.clear();
  batch.logit_seqs.clear();
  batch.context_rows.clear();
  batch.sequences = static_cast<int32_t>(plan.runs.size());
  batch.step = planned_steps_++;
  // A step that does not pipeline is read before anything is planned after
  // it: its sequences' slots are theirs again as soon as they finish.
  if (!pipelined) read_step_ = batch.step;
  for (const PlannedRun& run : plan.runs) {
    Sequence& seq = *running_[run.seq];
    if (run.decode && seq.speculates() && !pipelined) {
      AppendRound(seq, batch);
      continue;
    }
    const int32_t start = rows.n();
    const bool ahead = seq.pending();
    if (!pipelined) {
      const int64_t pos =
          run.decode
              ? seq.prompt_len() + static_cast<int64_t>(seq.output().size()) - 1
              : run.prompt_from;
      NoteContextRows(seq, batch, start, pos, run.len);
    }
    if (run.decode && ahead) {
      // The token is the step in flight's; the device feeds it in.
      rows.fed_rows.push_back(start);
      rows.fed_from.push_back(seq.pending_row());
      rows.ids.push_back(0);
    } else if (run.decode) {
      rows.ids.push_back(seq.last_token());
    } else {
      const auto& p = seq.request().prompt;
      rows.ids.insert(rows.ids.end(), p.begin() + run.prompt_from,
                      p.begin() + run.prompt_from + run.len);
      seq.AddPrefilled(run.len);
    }
    rows.segs.push_back({seq.slot(), start, run.len});
    seq.set_last_step(batch.step);
    if (run.wants_logits) {
      if (pipelined) {
        seq.AddPending(static_cast<int32_t>(batch.logit_seqs.size()), ahead);
      }
      rows.logit_rows.push_back(start + run.len - 1);
      batch.logit_seqs.push_back(&seq);
    }
  }
}

void Scheduler::Harvest(const StepBatch& batch, const int32_t* tokens) {
  AfterStep(batch.step);
  for (size_t j = 0; j < batch.logit_seqs.size(); ++j) {
    Sequence& seq = *batch.logit_seqs[j];
    // Finished while this step was in flight (a stop found one step late,
    // a cancel): the token is one a synchronous loop never drew.
    if (seq.finished()) continue;
    GenerationEvent event = seq.Accept(tokens[j]);
    if (seq.finished() && seq.last_step() > batch.step) {
      // A later step already ran a row past its end.
      seq.set_ran_past_end();
    }
    Deliver(seq, std::move(event));
  }
  FreeSlots();
}

void Scheduler::AfterStep(int64_t step) {
  read_step_ = std::max(read_step_, step);
  // By index: a fork appends to running_.
  for (size_t i = 0, end = running_.size(); i < end; ++i) {
    Sequence& seq = *running_[i];
    if (seq.snapshot_at() < 0 || seq.prefilled() != seq.snapshot_at() ||
        seq.last_step() > step) {
      continue;
    }
    // The snapshot's copy holds the sequence out of steps; the forks' copies
    // run in op order, before any step of theirs.
    if (cache_ != nullptr) seq.set_copy(TakeSnapshot(seq, /*release=*/false));
    if (!seq.fork_slots().empty()) Fork(seq);
    seq.set_snapshot_at(-1);
  }
}

CopyTicket Scheduler::TakeSnapshot(const Sequence& seq, bool release) {
  PrefixSnapshot snap;
  snap.scope = seq.request().cache_scope;
  snap.tokens = seq.ConsumedTokens();
  CopyTicket ticket = 0;
  if (!snap.tokens.empty() && !cache_->Contains(snap.tokens, snap.scope) &&
      !Copying(snap)) {
    const int64_t bytes = arena_.bytes_per_slot();
    std::shared_ptr<uint8_t> block = bytes > 0 ? TakeBlock() : nullptr;
    // Without a free block the snapshot is skipped: the cache is best effort.
    if (bytes == 0 || block != nullptr) {
      if (block != nullptr) {
        ticket = arena_.SnapshotAsync(seq.slot(), block.get());
        snap.state = std::move(block);
        snap.state_bytes = bytes;
      }
      if (ticket == 0) {
        cache_->Insert(std::move(snap));
      } else {
        copying_.push_back(
            {ticket, std::move(snap), release ? seq.slot() : -1, nullptr});
      }
    }
  }
  if (release && ticket == 0) arena_.Release(seq.slot());
  return ticket;
}

std::shared_ptr<uint8_t> Scheduler::TakeBlock() {
  if (blocks_ == nullptr) return nullptr;
  std::shared_ptr<uint8_t> block = blocks_->Take();
  while (block == nullptr && cache_->EvictLru()) block = blocks_->Take();
  return block;
}

bool Scheduler::Copying(const PrefixSnapshot& snap) const {
  for (const InFlightCopy& c : copying_) {
    if (c.snapshot.tokens == snap.tokens && c.snapshot.scope == snap.scope) {
      return true;
    }
  }
  return false;
}

void Scheduler::Deliver(Sequence& seq, GenerationEvent event) {
  if (seq.finished()) {
    Release(seq, std::move(event));
  } else {
    Send(seq.request().sink, std::move(event));
  }
}

void Scheduler::EraseFinished() {
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [](const auto& s) {
                                  return s->finished() && s->released();
                                }),
                 running_.end());
  CountSlots();
}

void Scheduler::ForgetSequence(const Sequence& seq) {
  auto it = live_sequences_.find(seq.request().control.get());
  if (it != live_sequences_.end() && --it->second == 0) {
    live_sequences_.erase(it);
  }
}

void Scheduler::FailRunning(const absl::Status& status) {
  // The failed step and any before it are over: no slot is written to.
  read_step_ = planned_steps_ - 1;
  FreeSlots();
  for (auto& seq : running_) {
    if (!seq->finished()) {
      Release(*seq, seq->Abort(FinishReason::kNone, status));
    }
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
  disk_checked_.clear();
  for (Request& r : queued) FinishSequences(r, 0, FinishReason::kNone, fault);
}

void Scheduler::CancelAll() {
  std::deque<Request> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    left.swap(waiting_);
  }
  for (Request& r : left)
    FinishSequences(r, 0, FinishReason::kCancelled, absl::OkStatus());
  // The engine stops with no step in flight.
  read_step_ = planned_steps_ - 1;
  FreeSlots();
  for (auto& seq : running_) {
    if (!seq->finished()) Release(*seq, seq->Abort(FinishReason::kCancelled));
  }
  running_.clear();
  live_sequences_.clear();
  disk_checked_.clear();
  // A disk read's callback holds this scheduler: every one must be done.
  if (disk_reads_ > 0) {
    std::unique_lock<std::mutex> lock(disk_mu_);
    disk_cv_.wait(lock, [&] {
      return static_cast<int>(disk_done_.size()) >= disk_reads_;
    });
  }
  PollDiskReads();
  // Every copy left is now in copying_; none may outlive the memory it uses.
  if (!copying_.empty()) {
    arena_.WaitCopy(copying_.back().ticket);
    PollCopies();
  }
  CountSlots();
}

void Scheduler::Release(Sequence& seq, GenerationEvent event) {
  // Only a sequence that ended on its own is at a consistent point with
  // nothing in flight; cancelled and failed ones leave nothing behind.
  const bool ended_normally =
      event.status.ok() && (event.finish == FinishReason::kLength ||
                            event.finish == FinishReason::kEos ||
                            event.finish == FinishReason::kStopString);
  if (cache_ != nullptr && ended_normally) seq.set_snapshot_when_freed();
  ForgetSequence(seq);
  if (drafter_ != nullptr) drafter_->Forget(&seq);
  if (mtp_ != nullptr) mtp_->Forget(&seq);
  // A step not yet read may still write the slot: it goes back after it.
  if (seq.last_step() <= read_step_) FreeSlot(seq);
  // The first sequence of a request of n ended before the others forked
  // off it (cancelled, failed): they end with it, never having run.
  std::vector<int> unforked;
  unforked.swap(seq.fork_slots());
  for (int slot : unforked) arena_.Release(slot);
  CountSlots();
  const FinishReason finish = event.finish;
  const absl::Status status = event.status;
  Send(seq.request().sink, std::move(event));
  if (!unforked.empty()) {
    FinishSequences(seq.request(), 1, finish, status);
  }
}

void Scheduler::FreeSlot(Sequence& seq) {
  if (seq.spare_slot() >= 0) {
    arena_.Release(seq.spare_slot());
    seq.set_spare_slot(-1);
  }
  if (seq.copy() != 0) {
    // Ended (cancelled) while its slot was being copied: the slot goes back
    // once the copy is done, and a restore's source stays until then.
    copying_.push_back({seq.copy(), {}, seq.slot(), seq.copy_source()});
    seq.set_copy(0);
  } else if (seq.snapshot_when_freed()) {
    TakeSnapshot(seq, /*release=*/true);
  } else {
    arena_.Release(seq.slot());
  }
  seq.set_released();
}

void Scheduler::FreeSlots() {
  bool freed = false;
  for (auto& seq : running_) {
    if (seq->finished() && !seq->released() && seq->last_step() <= read_step_) {
      FreeSlot(*seq);
      freed = true;
    }
  }
  if (freed) CountSlots();
}

void Scheduler::Send(const SharedSink& sink, GenerationEvent event) {
  if (outbox_ != nullptr) {
    outbox_->Send(sink, std::move(event));
  } else {
    sink(std::move(event));
  }
}

void Scheduler::FinishSequences(const Request& r, int32_t first,
                                FinishReason finish,
                                const absl::Status& status) {
  for (int32_t i = first; i < std::max(r.n, 1); ++i) {
    GenerationEvent event;
    event.index = i;
    event.finish = finish;
    event.prompt_tokens = static_cast<int32_t>(r.prompt.size());
    event.status = status;
    Send(r.sink, std::move(event));
  }
}

void Scheduler::CountSlots() {
  // Requests, not sequences: the sequences of a request of n share its
  // control. A finished sequence counts until it is erased.
  std::lock_guard<std::mutex> lock(mu_);
  free_slots_ = arena_.free_slots();
  running_count_ = static_cast<int32_t>(live_sequences_.size());
}

}  // namespace seqboat
