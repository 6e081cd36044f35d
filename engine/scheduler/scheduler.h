// The engine's bookkeeping apart from its thread and its model, as vLLM keeps
// its Scheduler beside the engine loop: the bounded queue of waiting
// requests, admission into free arena slots, cancel and deadline handling
// for waiting and running requests, draining and the refusal after a device
// fault, slot accounting, and the rows of each step.
//
// Add, BeginDrain, Stop, Counts and WaitForWork may be called from any
// thread; everything else belongs to the one thread that runs the steps
// (the engine's). Nothing here starts a thread, so tests drive it directly.
// Each sequence's final event reaches its request's sink exactly once, never
// under a lock, and a slot is free again before its sequence's final event.
#ifndef SEQBOAT_ENGINE_SCHEDULER_SCHEDULER_H_
#define SEQBOAT_ENGINE_SCHEDULER_SCHEDULER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/backend/backend.h"
#include "engine/backend/step_rows.h"
#include "engine/request.h"
#include "engine/scheduler/event_outbox.h"
#include "engine/scheduler/sequence.h"
#include "engine/scheduler/step_plan.h"
#include "engine/speculative/model_drafter.h"
#include "engine/speculative/mtp_drafter.h"
#include "engine/state/host_block_pool.h"
#include "engine/state/prefix_cache.h"
#include "engine/state/slot_arena.h"
#include "engine/state/snapshot_disk.h"
#include "engine/state/snapshot_peers.h"
#include "engine/tokenizer/tokenizer.h"

namespace seqboat {

struct SchedulerOptions {
  int32_t max_queue = 256;          // waiting requests beyond the free slots
  int32_t step_token_budget = 512;  // prefill rows per step (decodes extra)
  // Speculative decoding runs while at most this many sequences run (past
  // that a step is no longer bound by reading the weights, so verifying a
  // draft costs more than it saves), with at most max_draft_rows draft
  // tokens in one step (the model's logit rows beyond one per slot).
  int32_t speculative_max_batch = 0;
  int32_t max_draft_rows = 0;
  // Each sequence's drafts follow its acceptance (DraftLength).
  bool adaptive_draft_length = false;
};

// Speculative decoding's counts since start (vLLM's spec_decode metrics).
struct SpeculationCounts {
  int64_t drafts = 0;           // rounds that verified a draft
  int64_t draft_tokens = 0;     // tokens drafted
  int64_t accepted_tokens = 0;  // draft tokens the model's draws matched
  // accepted_per_round[a]: rounds that took a draft tokens (a <= the
  // longest draft).
  std::vector<int64_t> accepted_per_round;
};

// What the scheduler publishes of itself (EngineStats' share).
struct SchedulerCounts {
  int32_t running = 0;  // requests with sequences in slots
  int32_t waiting = 0;
  int32_t free_slots = 0;
  bool draining = false;
  std::string fault;              // set once the device is lost
  SpeculationCounts speculation;  // every method's
  // Each method's, by SpeculativeMethodName (every method that drafts).
  std::map<std::string, SpeculationCounts, std::less<>> speculation_by_method;
  PeerFetchStats peer_fetch;
};

// Rows of a step that read context positions pos .. pos+len-1 of a sequence
// drafting with the MTP head (into its slot, or a round's spare).
struct ContextRows {
  const Sequence* seq = nullptr;
  int32_t row = 0;
  int64_t pos = 0;
  int32_t len = 0;
};

// One step: its rows as the model reads them, and whose they are.

struct StepBatch {
  StepRows rows;
  std::vector<Sequence*> logit_seqs;      // the sequence of each logit row
  std::vector<ContextRows> context_rows;  // only with an MTP head
  int32_t sequences = 0;                  // sequences that run in the step
  int64_t step = -1;  // the scheduler's count of planned steps
  // The engine's: the logit rows' tokens, and when the step was launched.
  std::vector<int32_t> tokens;
  absl::Time launched;
};

class Scheduler {
 public:
  // `arena`, `tokenizer`, `cache` (null: no prefix reuse), `outbox` (null:
  // events go straight to their sinks, as tests that drive a scheduler by
  // hand want), `blocks` (the host blocks snapshots are copied into; null
  // only where a slot has no state bytes), `disk` (the cache's disk tier;
  // null: none), `drafter` (the draft model; null: none) and `mtp` (the
  // model's MTP head; null: none) must outlive the scheduler.
  Scheduler(SchedulerOptions options, SlotArena& arena,
            const Tokenizer& tokenizer, PrefixCache* cache = nullptr,
            EventOutbox* outbox = nullptr, HostBlockPool* blocks = nullptr,
            SnapshotDisk* disk = nullptr, ModelDrafter* drafter = nullptr,
            MtpDrafter* mtp = nullptr);
  ~Scheduler();

  // Queues a request. The device fault once lost, UNAVAILABLE while draining
  // or stopped, RESOURCE_EXHAUSTED past the queue bound (counted in slots: a
  // request of n sequences counts n; those about to take free slots do not
  // count against it). request.n must be in [1, the arena's slots].
  absl::Status Add(Request request);
  // Stops admitting new requests; queued and running ones go on.
  void BeginDrain();
  // Wakes WaitForWork for good and refuses later requests.
  void Stop();
  SchedulerCounts Counts() const;
  // Blocks until a request waits or runs, a slot copy is in flight, or
  // Stop(); false once stopped.
  bool WaitForWork();
  // Whether Stop() was called.
  bool stopped() const;
  // Runs `task` on the stepping thread at its next Admit (WaitForWork wakes
  // for it); false, dropping it, once stopped. How other threads reach what
  // that thread owns (the prefix cache) without a lock on the step path.
  bool Post(std::function<void()> task);
  // Runs the posted tasks (the stepping thread; also after it stopped).
  void RunPosted();
  // With `peers`, a request whose prompt extends no snapshot here (memory
  // or disk) within `min_tokens` of its length first waits in the queue
  // while the peers are asked for a longer one; what comes back is checked
  // against `identity` (snapshot_file.h) and enters the cache, as a disk
  // read does. The stepping thread's; `peers` must outlive the scheduler.
  void set_peers(SnapshotPeers* peers, uint64_t identity, int32_t min_tokens);

  // Ends the waiting requests whose client left or whose deadline passed,
  // then moves waiting requests into free slots, tenants in turn (round
  // robin in name order over the tenants waiting, each's oldest first),
  // each once all n of its slots are free; on_admit (if set) hears each one's
  // time in the queue. With a prefix cache, a request starts from the longest
  // snapshot of its cache_scope its prompt extends (restored into its slot) and
  // prefills only the rest. With a disk tier, a request whose prompt
  // extends a snapshot on disk longer than any in memory first waits (in the
  // queue, holding no slot, the others going ahead) while the reader thread
  // reads it into a host block; it enters the cache, and the request is
  // admitted as a memory hit. A request of n > 1 prefills once, in its first
  // sequence; at the prompt but its last token that state is copied into the
  // other n - 1 slots, and each sequence goes on from there with seed + index.
  void Admit(absl::Time now,
             const std::function<void(absl::Duration)>& on_admit);
  // Ends the running sequences whose client left or whose deadline passed.
  void DropCancelled(absl::Time now);
  bool has_running() const { return !running_.empty(); }
  // Slot copies off the op stream (prefix snapshots, restores): a sequence
  // whose slot is being copied sits steps out; a snapshot enters the cache,
  // and a slot that waited for its copy goes back, once the copy is done.
  // Called at each Admit and PlanStep; true while copies (or disk reads)
  // are in flight.
  bool PollCopies();
  // Whether a running sequence wants logprobs (only the host computes them,
  // so its steps do not pipeline).
  bool any_wants_logprobs() const;
  // Whether a running sequence is constrained (its next mask depends on its
  // pending token, so its steps do not pipeline either).
  bool any_constrained() const;
  // Whether the next step may run a speculative round (which the host
  // verifies, so it does not pipeline either).
  bool any_speculating() const;
  // The next step: one decode row per sequence past its prompt, then prompt
  // chunks while the token budget lasts (the prompt progress is recorded).
  //
  // With `pipelined`, the step is launched before the one in flight is read
  // (Backend::PipelinesSteps): a sequence whose token that step samples
  // continues from it on the device (a fed decode row) when nothing of its
  // next row depends on it (Sequence::CanRunAhead), else sits this step out,
  // as does one that waits for its snapshot or fork at its prompt's end.
  // The logit rows' tokens are then pending until Harvest.
  void PlanStep(StepBatch& batch, bool pipelined = false);
  // After a step ran without error, before its events: snapshots the
  // sequences that reached their snapshot point (the prompt but its last
  // token), and forks the other sequences of a request of n off it. Counts
  // the step as read.
  void AfterStep(int64_t step);
  // AfterStep of the last step planned (steps that do not pipeline).
  void AfterStep() { AfterStep(planned_steps_ - 1); }
  // A pipelined step was read: AfterStep, then each logit row's sequence
  // takes its token (one that finished meanwhile drops it) and its event
  // goes out; the slots of sequences that finished while a later step
  // held a row of theirs go back once that step is read.
  void Harvest(const StepBatch& batch, const int32_t* tokens);
  // After a (non-pipelined) step's tokens are delivered and before the next
  // step runs: the MTP head reads the step's rows of its sequences whose
  // next token is now known (the model's residual still holds them).
  void ObserveStep(const StepBatch& batch);
  // Sends a sequence's event; a final one releases its slot first (after a
  // snapshot of prompt and output when it finished normally). Call
  // EraseFinished after the step's events.
  void Deliver(Sequence& seq, GenerationEvent event);
  // The logit rows of a speculating sequence's round (its draft's length
  // plus one, from `logits`, rows of n) through Sequence::AdvanceRound,
  // counted, and its event delivered.
  void DeliverRound(Sequence& seq, const float* logits, int32_t n);
  void EraseFinished();
  // A step failed: every running sequence ends with `status`.
  void FailRunning(const absl::Status& status);
  // The device is lost: queued requests end with `fault`, which every later
  // Add returns.
  void Fault(const absl::Status& fault);
  // Shutdown: everything waiting or running ends as cancelled.
  void CancelAll();

 private:
  // A snapshot read from disk or fetched from a peer for a waiting request.
  struct DiskRead {
    std::shared_ptr<RequestControl> control;  // keeps the key's address
    PrefixSnapshot snapshot;
    absl::Status status;
  };

  // A finished sequence's final event; its slot goes back first unless a
  // step not yet read holds a row of it (then FreeSlots does, later).
  void Release(Sequence& seq, GenerationEvent event);
  // The slot (after its snapshot, when it ended on its own) of a finished
  // sequence no step in flight writes to any more.
  void FreeSlot(Sequence& seq);
  // FreeSlot for every finished sequence whose last step was read.
  void FreeSlots();
  void Send(const SharedSink& sink, GenerationEvent event);
  // The final events of sequences that never ran: indices [first, n) of r.
  void FinishSequences(const Request& r, int32_t first, FinishReason finish,
                       const absl::Status& status);
  // Starts copying the state of `seq`'s slot into a host block for the
  // cache; `release`: the slot goes back to the arena once the copy is done
  // (or at once when nothing is copied). Returns the copy's ticket, 0 when
  // none is in flight.
  CopyTicket TakeSnapshot(const Sequence& seq, bool release);
  // A block for a snapshot, evicting cached ones to free one; null when
  // every block is in flight or held by a restore.
  std::shared_ptr<uint8_t> TakeBlock();
  // Whether a snapshot of exactly `snap`'s tokens and scope is being copied.
  bool Copying(const PrefixSnapshot& snap) const;
  // Waits for the copies of snapshots of `scope` that `prompt` extends (a
  // next turn sent as soon as the last one ended), so the lookup finds them.
  void WaitForPrefixCopies(const std::vector<int32_t>& prompt,
                           const std::string& scope);
  // Starts the other sequences of `first`'s request in its fork slots, each
  // with a copy of its state: restored from `from` when that is where
  // `first` is still being restored from, else copied on the device.
  void Fork(Sequence& first,
            const std::shared_ptr<const PrefixSnapshot>& from = nullptr);
  // Starts a disk read for each newly queued request whose prompt extends a
  // snapshot on disk longer than the cache's longest, and a fetch from the
  // peers for each whose longest snapshot here leaves much to prefill
  // (snapshot_reads.cc).
  void StartDiskReads();
  // The peers' answer to `fetch`, checked and decoded into `read` (the
  // fetcher's thread), then queued for PollDiskReads.
  void FinishPeerFetch(DiskRead read, const PeerFetch& fetch,
                       absl::StatusOr<std::string> answer);
  // Puts the snapshots read from disk into the cache; true while reads are
  // in flight.
  bool PollDiskReads();
  void CountSlots();
  // Drafts for the speculating sequences about to decode (each given a
  // spare slot while one is free and nobody waits); returns the rows the
  // rounds add beyond one per decode.
  int32_t PlanRounds(const std::vector<SequenceView>& views);
  // The draft model's guesses for the sequences that use it, before their
  // rounds are planned.
  void ProposeDrafts(const std::vector<SequenceView>& views);
  // The MTP head's drafts for the sequences due a round that ask for them.
  void ProposeMtp(const std::vector<SequenceView>& views);
  // Notes rows of `seq` reading its context from `pos` for the MTP head.
  void NoteContextRows(const Sequence& seq, StepBatch& batch, int32_t row,
                       int64_t pos, int32_t len) const;
  // Whether this many running sequences still draft (speculative_max_batch).
  bool RoundsRun() const;
  // A decode of a speculating sequence: its round's segments (Sequence).
  void AppendRound(Sequence& seq, StepBatch& batch);
  // A free slot for `seq`'s drafts, counted under mu_ as admission counts;
  // false when none is free or a request waits.
  bool TakeSpareSlot(Sequence& seq);
  // Spare slots go back while requests wait (mu_ held).
  void ReturnSpareSlots();
  // The waiting request whose turn it is (waiting_.end() when none); mu_
  // held.
  std::deque<Request>::iterator NextInTurn();
  // Drops a finished sequence from its request's count.
  void ForgetSequence(const Sequence& seq);

  const SchedulerOptions options_;
  SlotArena& arena_;
  const Tokenizer& tokenizer_;
  PrefixCache* const cache_;  // null or disabled: no prefix reuse
  EventOutbox* const outbox_;
  HostBlockPool* const blocks_;
  SnapshotDisk* const disk_;     // null unless the cache has a disk tier
  ModelDrafter* const drafter_;  // null: no draft model
  MtpDrafter* const mtp_;        // null: the model has no MTP head

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> waiting_;    // guarded by mu_
  bool draining_ = false;          // guarded by mu_
  bool stopping_ = false;          // guarded by mu_
  absl::Status fault_;             // guarded by mu_; set once, for good
  int32_t free_slots_ = 0;         // guarded by mu_
  int32_t running_count_ = 0;      // guarded by mu_
  std::string last_tenant_;        // guarded by mu_: admitted last
  SpeculationCounts speculation_;  // guarded by mu_
  std::map<std::string, SpeculationCounts, std::less<>>
      speculation_by_method_;  // guarded by mu_
  // Waiting requests whose disk reads and peer fetches (how many) are in
  // flight: not admitted until they are done. Guarded by mu_ (NextInTurn
  // reads it).
  absl::flat_hash_map<const RequestControl*, int> disk_reading_;
  std::vector<std::function<void()>> posted_;  // guarded by mu_

  // Disk reads and peer fetches done, from the reader thread and the
  // peers' client.
  mutable std::mutex disk_mu_;
  std::condition_variable disk_cv_;
  std::vector<DiskRead> disk_done_;  // guarded by disk_mu_
  PeerFetchStats peer_stats_;        // guarded by disk_mu_
  // The stepping thread's (set_peers).
  SnapshotPeers* peers_ = nullptr;
  uint64_t identity_ = 0;
  int32_t peer_min_tokens_ = 0;

  // The stepping thread's.
  std::vector<std::unique_ptr<Sequence>> running_;
  // Unfinished sequences per request (by its control): the running requests
  // are its keys.
  absl::flat_hash_map<const RequestControl*, int32_t> live_sequences_;
  // Copies in flight whose completion the scheduler acts on, in ticket
  // order: a snapshot to insert into the cache, and/or a slot to release
  // (its source, a restore's block, kept until then).
  struct InFlightCopy {
    CopyTicket ticket = 0;
    PrefixSnapshot snapshot;  // tokens empty: nothing to insert
    int release_slot = -1;
    std::shared_ptr<const void> keep;
  };
  std::deque<InFlightCopy> copying_;
  // Waiting requests already looked up on disk; with a disk tier, only
  // these are admitted.
  absl::flat_hash_set<const RequestControl*> disk_checked_;
  int disk_reads_ = 0;  // in flight
  int64_t planned_steps_ = 0;
  int64_t read_step_ = -1;  // the last step whose results were read
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SCHEDULER_SCHEDULER_H_
