// The Scheduler driven step by step on the test's own thread: the queue
// bound, admission into free slots, cancel and deadline in the queue and
// while running, drain, the device fault, a failed step and shutdown, with
// every request's final event checked and every slot accounted for.
#include "engine/scheduler/scheduler.h"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/state/host_block_pool.h"
#include "engine/state/slot_state.h"
#include "engine/testing/event_collector.h"
#include "engine/testing/pipelined_cpu.h"
#include "engine/tokenizer/byte_tokenizer.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

// A scheduler over an arena of `slots` slots (no layers: slot accounting
// only) and a byte tokenizer.
struct Harness {
  explicit Harness(int slots, int max_queue = 4, int budget = 8,
                   PrefixCache* cache = nullptr) {
    backend = MakeCpuBackend(1);
    arena = *SlotArena::Create(*backend, slots, {});
    tokenizer = *ByteTokenizer::Create({});
    scheduler = std::make_unique<Scheduler>(SchedulerOptions{max_queue, budget},
                                            *arena, *tokenizer, cache);
  }
  std::unique_ptr<Backend> backend;
  std::unique_ptr<SlotArena> arena;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Scheduler> scheduler;
};

Request Greedy(int prompt_len, int max_new, EventCollector& c) {
  Request r;
  for (int i = 0; i < prompt_len; ++i) r.prompt.push_back(65 + i % 26);
  r.sampling.temperature = 0.0f;
  r.stopping.max_new_tokens = max_new;
  r.stopping.ignore_eos = true;
  r.sink = c.Sink();
  return r;
}

// 64 bytes of state a slot, so that snapshots have something to copy.
class SixtyFourBytes final : public SlotState {
 public:
  std::string kind() const override { return "bytes"; }
  int64_t StateBytesPerSlot() const override { return 64; }
  void BindState(void*, int64_t) override {}
};

// On a device whose copies are late (PipelinedCpu), a snapshot's copy keeps
// its sequence out of steps; cancelled meanwhile, its slot goes back only
// once the copy is done, and the snapshot enters the cache only then.
TEST(SchedulerTest, ASlotBeingCopiedSitsOutAndGoesBackOnlyOnceCopied) {
  PipelinedCpu device;
  SixtyFourBytes holder;
  auto arena = SlotArena::Create(device, 2, {&holder});
  ASSERT_TRUE(arena.ok());
  auto tokenizer = ByteTokenizer::Create({});
  PrefixCache cache(1 << 20);
  auto blocks = HostBlockPool::Create(device, (*arena)->bytes_per_slot(), 4);
  ASSERT_TRUE(blocks.ok());
  EventCollector c;
  Scheduler s(SchedulerOptions{4, 8}, **arena, **tokenizer, &cache, nullptr,
              &*blocks);
  Request r = Greedy(5, 4, c);
  std::shared_ptr<RequestControl> control = r.control;
  ASSERT_TRUE(s.Add(std::move(r)).ok());
  s.Admit(absl::Now(), nullptr);
  StepBatch batch;
  s.PlanStep(batch);  // to the snapshot point: the prompt but its last token
  ASSERT_EQ(batch.rows.n(), 4);
  s.AfterStep();
  EXPECT_EQ(cache.Stats().snapshots, 0);  // copying
  EXPECT_EQ(blocks->free_blocks(), 3);
  s.PlanStep(batch);
  EXPECT_EQ(batch.rows.n(), 0);  // sits out while its slot is copied
  control->cancelled = true;
  s.DropCancelled(absl::Now());
  EXPECT_FALSE(s.has_running());
  EXPECT_EQ(s.Counts().free_slots, 1);  // still the copy's
  EXPECT_TRUE(s.PollCopies());
  device.WaitCopy(device.deferred_copies());
  EXPECT_FALSE(s.PollCopies());
  EXPECT_EQ(s.Counts().free_slots, 2);
  EXPECT_EQ(cache.Stats().snapshots, 1);
  EXPECT_EQ(c.done.get_future().get().finish, FinishReason::kCancelled);
}

TEST(SchedulerTest, QueueBoundCountsOnlyRequestsThatMustWait) {
  EventCollector c[4];  // outlive the scheduler, which may still end them
  Harness h(/*slots=*/2, /*max_queue=*/1);
  // Two go to free slots, one may wait, the fourth is refused.
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(h.scheduler->Add(Greedy(3, 1, c[i])).ok());
  const absl::Status full = h.scheduler->Add(Greedy(3, 1, c[3]));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(h.scheduler->Counts().waiting, 3);

  int admitted = 0;
  h.scheduler->Admit(absl::Now(), [&](absl::Duration) { ++admitted; });
  EXPECT_EQ(admitted, 2);
  const SchedulerCounts counts = h.scheduler->Counts();
  EXPECT_EQ(counts.running, 2);
  EXPECT_EQ(counts.waiting, 1);
  EXPECT_EQ(counts.free_slots, 0);
  h.scheduler->CancelAll();
}

TEST(SchedulerTest, StepsPrefillInChunksThenDecodeAndFreeTheSlotFirst) {
  EventCollector c;
  Harness h(/*slots=*/1, 4, /*budget=*/4);
  ASSERT_TRUE(h.scheduler->Add(Greedy(6, 2, c)).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  StepBatch batch;
  // A 6-token prompt under a budget of 4: a chunk of 4 (no logits), then 2.
  h.scheduler->PlanStep(batch);
  ASSERT_EQ(batch.rows.segs.size(), 1u);
  EXPECT_EQ(batch.rows.segs[0].len, 4);
  EXPECT_TRUE(batch.logit_seqs.empty());
  h.scheduler->PlanStep(batch);
  ASSERT_EQ(batch.rows.segs.size(), 1u);
  EXPECT_EQ(batch.rows.segs[0].len, 2);
  ASSERT_EQ(batch.logit_seqs.size(), 1u);
  EXPECT_EQ(batch.rows.logit_rows[0], 1);
  Sequence& seq = *batch.logit_seqs[0];
  h.scheduler->Deliver(seq, seq.Accept(66));
  h.scheduler->EraseFinished();
  EXPECT_EQ(c.events, 1);  // a token, not yet the end
  EXPECT_EQ(h.scheduler->Counts().free_slots, 0);
  // A decode row feeds the token just sampled.
  h.scheduler->PlanStep(batch);
  ASSERT_EQ(batch.rows.ids.size(), 1u);
  EXPECT_EQ(batch.rows.ids[0], 66);
  // The second token ends it: the slot is free before the sink hears so.
  int free_when_done = -1;
  EventSink inner = seq.request().sink;
  const_cast<Request&>(seq.request()).sink = [&](GenerationEvent e) {
    if (e.finish != FinishReason::kNone)
      free_when_done = h.scheduler->Counts().free_slots;
    inner(std::move(e));
  };
  h.scheduler->Deliver(seq, seq.Accept(67));
  h.scheduler->EraseFinished();
  EXPECT_EQ(free_when_done, 1);
  EXPECT_FALSE(h.scheduler->has_running());
  EXPECT_EQ(c.done.get_future().get().finish, FinishReason::kLength);
  EXPECT_EQ(c.tokens, (std::vector<int32_t>{66, 67}));
}

TEST(SchedulerTest, CancelAndDeadlineEndWaitingAndRunningRequests) {
  EventCollector running, cancelled, late;
  Harness h(/*slots=*/1);
  Request r = Greedy(3, 5, running);
  const absl::Time start = absl::Now();
  r.deadline = start + absl::Hours(1);
  ASSERT_TRUE(h.scheduler->Add(std::move(r)).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  Request c = Greedy(3, 5, cancelled);
  auto control = c.control;
  ASSERT_TRUE(h.scheduler->Add(std::move(c)).ok());
  Request l = Greedy(3, 5, late);
  l.deadline = absl::Now() - absl::Seconds(1);
  ASSERT_TRUE(h.scheduler->Add(std::move(l)).ok());
  control->cancelled = true;
  // Both leave the queue without a slot.
  h.scheduler->Admit(absl::Now(), nullptr);
  EXPECT_EQ(cancelled.done.get_future().get().finish, FinishReason::kCancelled);
  const GenerationEvent expired = late.done.get_future().get();
  EXPECT_EQ(expired.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(h.scheduler->Counts().waiting, 0);
  // A running request past its deadline gives its slot back.
  h.scheduler->DropCancelled(start + absl::Minutes(59));
  EXPECT_TRUE(h.scheduler->has_running());
  h.scheduler->DropCancelled(start + absl::Hours(2));
  EXPECT_EQ(running.done.get_future().get().status.code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(h.scheduler->has_running());
  EXPECT_EQ(h.scheduler->Counts().free_slots, 1);
}

TEST(SchedulerTest, DrainRefusesNewWorkAndFaultFailsTheQueue) {
  EventCollector a, b, c, d;
  Harness h(/*slots=*/1);
  ASSERT_TRUE(h.scheduler->Add(Greedy(3, 5, a)).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  ASSERT_TRUE(h.scheduler->Add(Greedy(3, 5, b)).ok());  // waits
  const absl::Status lost = absl::InternalError("illegal address");
  h.scheduler->FailRunning(absl::UnavailableError("step failed"));
  h.scheduler->Fault(lost);
  EXPECT_EQ(a.done.get_future().get().status.code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(b.done.get_future().get().status, lost);
  EXPECT_EQ(h.scheduler->Add(Greedy(3, 5, c)), lost);
  EXPECT_NE(h.scheduler->Counts().fault.find("illegal address"),
            std::string::npos);
  EXPECT_EQ(h.scheduler->Counts().free_slots, 1);

  Harness g(/*slots=*/1);
  g.scheduler->BeginDrain();
  EXPECT_EQ(g.scheduler->Add(Greedy(3, 5, d)).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(g.scheduler->Counts().draining);
}

TEST(SchedulerTest, StopWakesTheWaiterAndCancelAllEndsEverything) {
  EventCollector a, b;
  Harness h(/*slots=*/1);
  ASSERT_TRUE(h.scheduler->Add(Greedy(3, 5, a)).ok());
  EXPECT_TRUE(h.scheduler->WaitForWork());  // a request waits: no block
  h.scheduler->Admit(absl::Now(), nullptr);
  ASSERT_TRUE(h.scheduler->Add(Greedy(3, 5, b)).ok());
  h.scheduler->Stop();
  EXPECT_FALSE(h.scheduler->WaitForWork());
  h.scheduler->CancelAll();
  EXPECT_EQ(a.done.get_future().get().finish, FinishReason::kCancelled);
  EXPECT_EQ(b.done.get_future().get().finish, FinishReason::kCancelled);
  EXPECT_EQ(h.scheduler->Counts().free_slots, 1);
  EXPECT_EQ(h.scheduler->Counts().running, 0);
}

// With a prefix cache: the prompt's last chunk stops one token short so the
// state is snapshotted at (prompt - 1), after the step ran; a request
// cancelled before that point, or a failed step, leaves nothing behind.
TEST(SchedulerTest, PromptSnapshotOnlyAtItsPointAfterASuccessfulStep) {
  PrefixCache cache(1 << 20);
  EventCollector c[3];
  Harness h(/*slots=*/2, 4, /*budget=*/4, &cache);
  ASSERT_TRUE(h.scheduler->Add(Greedy(6, 1, c[0])).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  StepBatch batch;
  h.scheduler->PlanStep(batch);  // 4 rows
  ASSERT_EQ(batch.rows.segs[0].len, 4);
  h.scheduler->AfterStep();
  EXPECT_EQ(cache.Stats().snapshots, 0);
  h.scheduler->PlanStep(batch);  // 1 row: the chunk stops at 5
  ASSERT_EQ(batch.rows.segs[0].len, 1);
  EXPECT_TRUE(batch.logit_seqs.empty());
  h.scheduler->AfterStep();
  std::vector<int32_t> first5;
  for (int i = 0; i < 5; ++i) first5.push_back(65 + i);
  EXPECT_TRUE(cache.Contains(first5));
  h.scheduler->PlanStep(batch);  // the last prompt token, with logits
  ASSERT_EQ(batch.rows.segs[0].len, 1);
  ASSERT_EQ(batch.logit_seqs.size(), 1u);
  Sequence& seq = *batch.logit_seqs[0];
  h.scheduler->Deliver(seq, seq.Accept(90));  // max_new 1: finished
  h.scheduler->EraseFinished();
  // Ended on its own: its whole prompt's state is kept too.
  std::vector<int32_t> all6 = first5;
  all6.push_back(70);
  EXPECT_TRUE(cache.Contains(all6));
  EXPECT_EQ(cache.Stats().snapshots, 2);

  // Cancelled in the middle of its prompt: no snapshot of a partial prompt.
  Request r1 = Greedy(12, 4, c[1]);
  std::shared_ptr<RequestControl> control = r1.control;
  ASSERT_TRUE(h.scheduler->Add(std::move(r1)).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  h.scheduler->PlanStep(batch);  // A..F restored (the longest): G..J
  ASSERT_EQ(batch.rows.segs.size(), 1u);
  EXPECT_EQ(batch.rows.segs[0].len, 4);
  EXPECT_EQ(batch.rows.ids[0], 65 + 6);
  h.scheduler->AfterStep();
  control->cancelled = true;
  h.scheduler->DropCancelled(absl::Now());
  EXPECT_EQ(c[1].done.get_future().get().finish, FinishReason::kCancelled);
  EXPECT_EQ(cache.Stats().snapshots, 2);
  EXPECT_EQ(h.scheduler->Counts().free_slots, 2);

  // A failed step: the chunk that reached the snapshot point never ran.
  ASSERT_TRUE(h.scheduler->Add(Greedy(12, 4, c[2])).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  h.scheduler->PlanStep(batch);  // G..J
  h.scheduler->AfterStep();
  h.scheduler->PlanStep(batch);  // K: up to the snapshot point
  EXPECT_EQ(batch.rows.segs[0].len, 1);
  EXPECT_TRUE(batch.logit_seqs.empty());
  h.scheduler->FailRunning(absl::InternalError("step failed"));
  EXPECT_FALSE(c[2].done.get_future().get().status.ok());
  EXPECT_EQ(cache.Stats().snapshots, 2);
  EXPECT_EQ(h.scheduler->Counts().free_slots, 2);
}

// Drives the planned rows of one step as if the model ran them: every
// sequence that wants logits takes `token`.
void RunStep(Scheduler& s, StepBatch& batch, int32_t token) {
  s.PlanStep(batch);
  s.AfterStep();
  for (Sequence* seq : batch.logit_seqs) s.Deliver(*seq, seq->Accept(token));
  s.EraseFinished();
}

// n = 3: one sequence reads the prompt, pausing at its last token but one
// (without a prefix cache too); then all three run the last token in their
// own slots, with seeds seed, seed + 1, seed + 2, and end one by one.
TEST(SchedulerTest, ARequestOfNPrefillsOnceThenForks) {
  EventCollector c;
  c.n = 3;
  Harness h(/*slots=*/4, 4, /*budget=*/4);
  Request r = Greedy(6, 2, c);
  r.n = 3;
  r.sampling.seed = 40;
  ASSERT_TRUE(h.scheduler->Add(std::move(r)).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  EXPECT_EQ(h.scheduler->Counts().free_slots, 1);  // three held
  StepBatch batch;
  h.scheduler->PlanStep(batch);  // A..D
  ASSERT_EQ(batch.rows.segs.size(), 1u);
  EXPECT_EQ(batch.rows.segs[0].len, 4);
  h.scheduler->AfterStep();
  h.scheduler->PlanStep(batch);  // E: up to the fork point
  ASSERT_EQ(batch.rows.segs.size(), 1u);
  EXPECT_EQ(batch.rows.segs[0].len, 1);
  EXPECT_TRUE(batch.logit_seqs.empty());
  h.scheduler->AfterStep();
  // The last prompt token, F, in three slots, each with logits.
  h.scheduler->PlanStep(batch);
  ASSERT_EQ(batch.rows.segs.size(), 3u);
  ASSERT_EQ(batch.logit_seqs.size(), 3u);
  std::set<int> slots;
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(batch.rows.segs[k].len, 1);
    EXPECT_EQ(batch.rows.ids[batch.rows.segs[k].start], 70);
    slots.insert(batch.rows.segs[k].slot);
    Sequence& seq = *batch.logit_seqs[k];
    EXPECT_EQ(seq.index(), k);
    EXPECT_EQ(seq.prefilled(), 6);
    std::vector<int32_t> ids;
    EXPECT_EQ(seq.NextSampleRow(&ids).seed, 40u + k);
  }
  EXPECT_EQ(slots.size(), 3u);
  h.scheduler->AfterStep();
  for (int k = 0; k < 3; ++k) {
    Sequence& seq = *batch.logit_seqs[k];
    h.scheduler->Deliver(seq, seq.Accept(80 + k));
  }
  h.scheduler->EraseFinished();
  // The second token ends each at its length.
  RunStep(*h.scheduler, batch, 90);
  EXPECT_EQ(c.done.get_future().get().finish, FinishReason::kLength);
  std::lock_guard<std::mutex> lock(c.mu);
  EXPECT_FALSE(c.bad_index);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(c.tokens_of[k], (std::vector<int32_t>{80 + k, 90})) << k;
    EXPECT_EQ(c.final_of[k].generated_tokens, 2);
    EXPECT_EQ(c.final_of[k].prompt_tokens, 6);
  }
  EXPECT_EQ(h.scheduler->Counts().free_slots, 4);
  EXPECT_FALSE(h.scheduler->has_running());
}

// Prompts of one token (nothing to share) and prompts whose snapshot covers
// all but the last token fork at once.
TEST(SchedulerTest, ForksAtAdmissionWhenNothingIsLeftToShare) {
  PrefixCache cache(1 << 20);
  EventCollector one, warm, again;
  one.n = 2;
  again.n = 3;
  Harness h(/*slots=*/4, 4, /*budget=*/8, &cache);
  Request r = Greedy(1, 1, one);
  r.n = 2;
  ASSERT_TRUE(h.scheduler->Add(std::move(r)).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  StepBatch batch;
  h.scheduler->PlanStep(batch);
  EXPECT_EQ(batch.logit_seqs.size(), 2u);
  h.scheduler->AfterStep();
  for (Sequence* seq : batch.logit_seqs) {
    h.scheduler->Deliver(*seq, seq->Accept(66));
  }
  h.scheduler->EraseFinished();
  EXPECT_EQ(one.done.get_future().get().finish, FinishReason::kLength);

  // A first request leaves a snapshot of its prompt but the last token.
  ASSERT_TRUE(h.scheduler->Add(Greedy(5, 1, warm)).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  RunStep(*h.scheduler, batch, 90);  // A..D, paused
  RunStep(*h.scheduler, batch, 90);  // E, one token: done
  EXPECT_EQ(warm.done.get_future().get().finish, FinishReason::kLength);
  Request r3 = Greedy(5, 1, again);
  r3.n = 3;
  ASSERT_TRUE(h.scheduler->Add(std::move(r3)).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  h.scheduler->PlanStep(batch);
  ASSERT_EQ(batch.logit_seqs.size(), 3u);
  for (Sequence* seq : batch.logit_seqs) {
    EXPECT_EQ(seq->cached(), 4);
    h.scheduler->Deliver(*seq, seq->Accept(70));
  }
  h.scheduler->EraseFinished();
  const GenerationEvent last = again.done.get_future().get();
  EXPECT_EQ(last.cached_prompt_tokens, 4);
  EXPECT_EQ(h.scheduler->Counts().free_slots, 4);
}

// A request of n waits at the head of the queue until n slots are free,
// holding back the ones behind it, and starts as soon as they are.
TEST(SchedulerTest, ARequestOfNWaitsForNFreeSlots) {
  EventCollector a, b, c;
  b.n = 3;
  Harness h(/*slots=*/3, /*max_queue=*/8, /*budget=*/8);
  ASSERT_TRUE(h.scheduler->Add(Greedy(2, 2, a)).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  Request rb = Greedy(2, 1, b);
  rb.n = 3;
  ASSERT_TRUE(h.scheduler->Add(std::move(rb)).ok());
  ASSERT_TRUE(h.scheduler->Add(Greedy(2, 1, c)).ok());
  h.scheduler->Admit(absl::Now(), nullptr);
  // Two slots are free, but the head needs three: nothing moves.
  EXPECT_EQ(h.scheduler->Counts().waiting, 2);
  EXPECT_EQ(h.scheduler->Counts().free_slots, 2);
  StepBatch batch;
  RunStep(*h.scheduler, batch, 66);  // a's prompt and first token
  RunStep(*h.scheduler, batch, 67);  // a ends
  EXPECT_EQ(a.done.get_future().get().finish, FinishReason::kLength);
  h.scheduler->Admit(absl::Now(), nullptr);
  EXPECT_EQ(h.scheduler->Counts().waiting, 1);
  EXPECT_EQ(h.scheduler->Counts().free_slots, 0);
  for (int i = 0; i < 4 && h.scheduler->has_running(); ++i) {
    RunStep(*h.scheduler, batch, 68);
  }
  EXPECT_EQ(b.done.get_future().get().finish, FinishReason::kLength);
  h.scheduler->Admit(absl::Now(), nullptr);
  RunStep(*h.scheduler, batch, 69);
  EXPECT_EQ(c.done.get_future().get().finish, FinishReason::kLength);
  EXPECT_EQ(h.scheduler->Counts().free_slots, 3);
}

// Cancel and deadline end all n sequences, queued, before the fork and
// after it, and every slot comes back; so does a failed step.
TEST(SchedulerTest, CancelDeadlineAndFailureEndAllSequencesOfARequest) {
  Harness h(/*slots=*/4, /*max_queue=*/8, /*budget=*/4);
  StepBatch batch;
  const auto add = [&](EventCollector& c, int n) {
    c.n = n;
    Request r = Greedy(10, 50, c);
    r.n = n;
    auto control = r.control;
    EXPECT_TRUE(h.scheduler->Add(std::move(r)).ok());
    return control;
  };
  const auto expect_all = [](EventCollector& c, FinishReason finish,
                             absl::StatusCode code) {
    const GenerationEvent last = c.done.get_future().get();
    std::lock_guard<std::mutex> lock(c.mu);
    EXPECT_FALSE(c.bad_index);
    EXPECT_EQ(c.finals, c.n);
    for (const GenerationEvent& e : c.final_of) {
      EXPECT_EQ(e.finish, finish);
      EXPECT_EQ(e.status.code(), code);
    }
  };
  {
    // Queued behind a request that holds every slot, then cancelled.
    EventCollector holder, queued;
    auto held = add(holder, 4);
    auto control = add(queued, 2);
    h.scheduler->Admit(absl::Now(), nullptr);
    control->cancelled = true;
    h.scheduler->Admit(absl::Now(), nullptr);
    expect_all(queued, FinishReason::kCancelled, absl::StatusCode::kOk);
    // Cancelled before its fork: the held slots come back too.
    RunStep(*h.scheduler, batch, 66);
    held->cancelled = true;
    h.scheduler->DropCancelled(absl::Now());
    expect_all(holder, FinishReason::kCancelled, absl::StatusCode::kOk);
    EXPECT_EQ(h.scheduler->Counts().free_slots, 4);
  }
  {
    // Past its deadline after the fork.
    EventCollector c;
    c.n = 3;
    Request r = Greedy(3, 50, c);
    r.n = 3;
    const absl::Time start = absl::Now();
    r.deadline = start + absl::Minutes(1);
    ASSERT_TRUE(h.scheduler->Add(std::move(r)).ok());
    h.scheduler->Admit(start, nullptr);
    RunStep(*h.scheduler, batch, 66);  // A, B; fork
    RunStep(*h.scheduler, batch, 66);  // C in three slots: first tokens
    EXPECT_EQ(h.scheduler->Counts().free_slots, 1);
    h.scheduler->DropCancelled(start + absl::Minutes(2));
    expect_all(c, FinishReason::kCancelled,
               absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(h.scheduler->Counts().free_slots, 4);
  }
  {
    // A failed step before the fork.
    EventCollector c;
    add(c, 2);
    h.scheduler->Admit(absl::Now(), nullptr);
    h.scheduler->PlanStep(batch);
    h.scheduler->FailRunning(absl::InternalError("step failed"));
    expect_all(c, FinishReason::kNone, absl::StatusCode::kInternal);
    EXPECT_EQ(h.scheduler->Counts().free_slots, 4);
  }
  {
    // Shutdown with one queued and one running request of n.
    EventCollector running, queued;
    add(running, 3);
    h.scheduler->Admit(absl::Now(), nullptr);
    add(queued, 2);
    RunStep(*h.scheduler, batch, 66);
    h.scheduler->CancelAll();
    expect_all(running, FinishReason::kCancelled, absl::StatusCode::kOk);
    expect_all(queued, FinishReason::kCancelled, absl::StatusCode::kOk);
    EXPECT_EQ(h.scheduler->Counts().free_slots, 4);
  }
}

// The queue bound counts slots: a request of n waiting counts n.
TEST(SchedulerTest, QueueBoundCountsTheSlotsWaitingRequestsNeed) {
  EventCollector c[3];
  Harness h(/*slots=*/2, /*max_queue=*/2);
  c[0].n = 2;
  Request big = Greedy(3, 1, c[0]);
  big.n = 2;
  // Slots asked for by those waiting, against max_queue + free slots (4).
  ASSERT_TRUE(h.scheduler->Add(std::move(big)).ok());      // 0 before
  ASSERT_TRUE(h.scheduler->Add(Greedy(3, 1, c[1])).ok());  // 2
  ASSERT_TRUE(h.scheduler->Add(Greedy(3, 1, c[2])).ok());  // 3
  EventCollector d;
  EXPECT_EQ(h.scheduler->Add(Greedy(3, 1, d)).code(),  // 4: full
            absl::StatusCode::kResourceExhausted);
  // More sequences than slots could never start.
  Request huge = Greedy(3, 1, d);
  huge.n = 3;
  EXPECT_EQ(h.scheduler->Add(std::move(huge)).code(),
            absl::StatusCode::kInvalidArgument);
  h.scheduler->CancelAll();
}

// The queue bound holds under a burst: many threads submit long requests at
// once to an idle scheduler while its own thread admits them. Admission
// takes slots under the same lock Add checks them under, so exactly slots +
// queue are accepted, never one more, however the threads interleave.
TEST(SchedulerTest, BurstFromManyThreadsAcceptsExactlySlotsPlusQueue) {
  constexpr int kSlots = 64, kQueue = 256, kRequests = 3000, kThreads = 12;
  for (int round = 0; round < 40; ++round) {
    Harness h(kSlots, kQueue);
    std::atomic<bool> adding{true};
    // As the engine's loop: a turn admits, then a step takes a while.
    std::thread engine([&] {
      while (adding.load()) {
        h.scheduler->Admit(absl::Now(), nullptr);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    std::atomic<int> accepted{0}, refused{0}, next{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < kThreads; ++t) {
      clients.emplace_back([&] {
        while (next.fetch_add(1) < kRequests) {
          Request r;
          r.prompt = {65, 66, 67};
          r.stopping.max_new_tokens = 1000;  // long: nothing ends
          r.sink = [](GenerationEvent) {};
          const absl::Status s = h.scheduler->Add(std::move(r));
          std::this_thread::yield();
          if (s.ok()) {
            ++accepted;
          } else {
            EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
            ++refused;
          }
        }
      });
    }
    for (std::thread& t : clients) t.join();
    adding = false;
    engine.join();
    h.scheduler->Admit(absl::Now(), nullptr);
    ASSERT_EQ(accepted.load(), kSlots + kQueue) << "round " << round;
    EXPECT_EQ(refused.load(), kRequests - kSlots - kQueue);
    const SchedulerCounts counts = h.scheduler->Counts();
    EXPECT_EQ(counts.running, kSlots);
    EXPECT_EQ(counts.waiting, kQueue);
    EXPECT_EQ(counts.free_slots, 0);
    h.scheduler->CancelAll();
  }
}

// Tenants take turns at the free slots: a burst from one queued first does
// not hold back another's requests queued after it; within a tenant, oldest
// first; without tenants (all ""), the queue is one FIFO.
TEST(SchedulerTest, AdmitsTenantsInTurnSoABurstDoesNotStarveAnother) {
  Harness h(/*slots=*/1, /*max_queue=*/16);
  std::mutex mu;
  std::vector<std::string> order;  // ids, as each request ends
  const auto add = [&](const std::string& tenant, const std::string& id) {
    Request r;
    r.id = id;
    r.tenant = tenant;
    r.prompt = {65, 66};
    r.stopping.max_new_tokens = 1;
    r.stopping.ignore_eos = true;
    r.sink = [&, id](GenerationEvent e) {
      if (e.finish == FinishReason::kNone) return;
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(id);
    };
    ASSERT_TRUE(h.scheduler->Add(std::move(r)).ok());
  };
  for (int i = 1; i <= 4; ++i) add("burst", absl::StrCat("burst", i));
  add("calm", "calm1");
  add("calm", "calm2");
  add("", "anon1");
  StepBatch batch;
  for (int i = 0; i < 7; ++i) {
    h.scheduler->Admit(absl::Now(), nullptr);
    RunStep(*h.scheduler, batch, 66);
  }
  // Round robin in name order from the start ("" sorts first, so comes
  // last in the first round): each tenant's oldest, in turn.
  const std::vector<std::string> want = {"burst1", "calm1",  "anon1", "burst2",
                                         "calm2",  "burst3", "burst4"};
  EXPECT_EQ(order, want);

  order.clear();
  for (int i = 1; i <= 3; ++i) add("", absl::StrCat("fifo", i));
  for (int i = 0; i < 3; ++i) {
    h.scheduler->Admit(absl::Now(), nullptr);
    RunStep(*h.scheduler, batch, 66);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"fifo1", "fifo2", "fifo3"}));
}

}  // namespace
}  // namespace seqboat
