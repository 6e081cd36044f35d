#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/backend/backend.h"
#include "engine/backend/penalty_table.h"
#include "engine/grammar/grammar.h"
#include "engine/model/model.h"
#include "engine/round_threshold.h"
#include "engine/scheduler/mask_filler.h"
#include "engine/scheduler/scheduler.h"
#include "engine/snapshot_exchange.h"
#include "engine/speculative/drafters.h"
#include "engine/state/host_block_pool.h"
#include "engine/state/snapshot_file.h"
#include "spdlog/spdlog.h"

namespace seqboat {
namespace {

// Sequences that may speculate at once: never more than there are slots
// (the model's buffers are sized by the same figure; auto's by its ceiling).
int32_t SpeculativeBatch(const EngineOptions& o) {
  return std::min(o.speculative_max_batch == kSpeculativeMaxBatchAuto
                      ? kAutoSpeculativeMaxBatch
                      : o.speculative_max_batch,
                  o.max_slots);
}

// The engine thread and its loop: wait for work, admit, drop the cancelled,
// run one step, deliver its events. What to run is the Scheduler's.
class EngineImpl final : public Engine {
 public:
  EngineImpl(EngineOptions options, std::unique_ptr<Backend> backend,
             std::unique_ptr<Tokenizer> tokenizer, std::unique_ptr<Model> model,
             HostBlockPool snapshot_blocks, std::unique_ptr<SnapshotDisk> disk,
             Drafters drafters,
             absl::StatusOr<std::unique_ptr<GrammarCompiler>> grammars,
             uint64_t snapshot_identity)
      : options_(std::move(options)),
        backend_(std::move(backend)),
        tokenizer_(std::move(tokenizer)),
        model_(std::move(model)),
        drafter_(std::move(drafters.model)),
        mtp_(std::move(drafters.mtp)),
        snapshot_blocks_(std::move(snapshot_blocks)),
        disk_(std::move(disk)),
        grammars_(std::move(grammars)),
        mask_filler_(options_.grammar_mask_threads),
        prefix_cache_(options_.prefix_cache_bytes),
        scheduler_(
            SchedulerOptions{
                options_.max_queue, options_.step_token_budget,
                SpeculativeBatch(options_),
                SpeculativeBatch(options_) * options_.max_draft_tokens,
                options_.adaptive_draft_length},
            model_->arena(), *tokenizer_, &prefix_cache_, &outbox_,
            &snapshot_blocks_, disk_.get(), drafter_.get(), mtp_.get()) {
    if (disk_ != nullptr) {
      // Off the step path: the writer thread takes it from here (or drops
      // it when its queue is full).
      prefix_cache_.set_on_evict(
          [disk = disk_.get()](std::shared_ptr<const PrefixSnapshot> snap) {
            disk->Write(std::move(snap));
          });
      if (options_.prefix_cache_disk_write_through) {
        prefix_cache_.set_on_insert(
            [disk = disk_.get()](std::shared_ptr<const PrefixSnapshot> snap) {
              disk->Write(std::move(snap));
            });
      }
    }
    const ModelConfig& cfg = model_->config();
    summary_.name = cfg.name;
    for (const auto& layer : model_->layers())
      summary_.layer_kinds.push_back(layer->kind());
    summary_.vocab_size = cfg.vocab_size;
    summary_.eos_token_id = tokenizer_->eos_token_id();
    summary_.state_bytes_per_slot = model_->arena().bytes_per_slot();
    summary_.backend = backend_->name();
    summary_.mtp_head = mtp_ != nullptr;
    summary_.snapshot_identity = snapshot_identity;
    summary_.prompt_rules.vocab_limit =
        std::min(tokenizer_->vocab_size(), model_->vocab_size());
    if (cfg.embed.padding_idx.has_value()) {
      summary_.prompt_rules.padding_id =
          static_cast<int32_t>(*cfg.embed.padding_idx);
    }
    PublishStats();  // block counters exist (at zero) before the first step
    thread_ = std::thread([this] { Loop(); });
  }

  ~EngineImpl() override { Shutdown(); }

  absl::Status Submit(Request request) override {
    // The server validated the request (request_validation); these hold
    // the invariants the model and the scheduler rely on for any caller.
    if (request.prompt.empty())
      return absl::InvalidArgumentError("prompt is empty");
    for (size_t i = 0; i < request.prompt.size(); ++i) {
      const std::string problem =
          PromptIdProblem(summary_.prompt_rules, request.prompt[i]);
      if (!problem.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("prompt token ", i, " ", problem));
      }
    }
    if (!request.sink)
      return absl::InvalidArgumentError("request has no event sink");
    const SpeculativeParams& spec = request.speculative;
    if (spec.num_draft_tokens < 0 ||
        spec.num_draft_tokens > options_.max_draft_tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          "speculative num_draft_tokens must be in [0, ",
          options_.max_draft_tokens, "], got ", spec.num_draft_tokens));
    }
    if (const std::string problem = NgramSizesProblem(spec); !problem.empty())
      return absl::InvalidArgumentError("speculative " + problem);
    if (spec.method == SpeculativeMethod::kDraftModel &&
        spec.num_draft_tokens > 0 && drafter_ == nullptr) {
      return absl::InvalidArgumentError(
          "speculative method draft_model needs a server started with a "
          "draft model (--speculative_draft_model_dir)");
    }
    if (spec.method == SpeculativeMethod::kMtp && spec.num_draft_tokens > 0 &&
        mtp_ == nullptr) {
      return absl::InvalidArgumentError(
          "speculative method mtp needs a model with a multi-token-prediction "
          "head (config.json \"mtp\"); the served model has none");
    }
    request.grammar = nullptr;
    if (request.constraint.has_value()) {
      // On the caller's thread: a slow compilation holds up its own
      // request only.
      if (!grammars_.ok()) return grammars_.status();
      absl::StatusOr<std::shared_ptr<const Grammar>> grammar =
          (*grammars_)->Compile(*request.constraint);
      if (!grammar.ok()) return grammar.status();
      request.grammar = *std::move(grammar);
    }
    return scheduler_.Add(std::move(request));
  }

  void BeginDrain() override {
    scheduler_.BeginDrain();
    if (disk_ == nullptr) return;
    // The hot snapshots go to disk before the drain waits for anything:
    // a replica killed at the end of its grace period keeps them.
    auto snaps = OnEngineThread([this] { return prefix_cache_.Snapshots(); },
                                absl::Seconds(30));
    if (snaps.ok()) WriteToDisk(*snaps, "drain");
  }

  absl::StatusOr<std::string> ExportSnapshot(const std::string& scope,
                                             const std::vector<int32_t>& tokens,
                                             int64_t min_tokens,
                                             absl::Duration timeout) override {
    if (!prefix_cache_.enabled()) {
      return absl::FailedPreconditionError("this replica has no prefix cache");
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const PrefixSnapshot> snap,
                     OnEngineThread(
                         [this, scope, tokens] {
                           return prefix_cache_.Peek(tokens, tokens.size(),
                                                     scope);
                         },
                         timeout));
    return EncodeExport(std::move(snap), disk_.get(), scope, tokens, min_tokens,
                        summary_.snapshot_identity,
                        summary_.state_bytes_per_slot);
  }

  absl::Status ImportSnapshot(const std::string& bytes,
                              absl::Duration timeout) override {
    if (!prefix_cache_.enabled() || summary_.state_bytes_per_slot == 0) {
      return absl::FailedPreconditionError(
          "this replica has no prefix cache to import into");
    }
    std::shared_ptr<uint8_t> block = snapshot_blocks_.Take();
    if (block == nullptr) {
      // Every block is held: the cache lets go of its least recent one.
      RETURN_IF_ERROR(
          OnEngineThread([this] { return prefix_cache_.EvictLru(); }, timeout)
              .status());
      block = snapshot_blocks_.Take();
    }
    if (block == nullptr) {
      return absl::ResourceExhaustedError(
          "every snapshot block is in use; try again");
    }
    ASSIGN_OR_RETURN(
        std::shared_ptr<const PrefixSnapshot> snap,
        DecodeImport(bytes, summary_.snapshot_identity,
                     summary_.state_bytes_per_slot, std::move(block)));
    ASSIGN_OR_RETURN(
        const bool held,
        OnEngineThread([this, snap] { return prefix_cache_.Insert(*snap); },
                       timeout));
    if (!held) {
      return absl::ResourceExhaustedError(
          "the snapshot is larger than the prefix cache's budget");
    }
    return absl::OkStatus();
  }

  absl::Status SetSnapshotPeers(std::shared_ptr<SnapshotPeers> peers,
                                int32_t min_tokens) override {
    if (!prefix_cache_.enabled()) {
      return absl::FailedPreconditionError(
          "asking peers for snapshots needs a prefix cache");
    }
    SnapshotPeers* raw = peers.get();
    {
      std::lock_guard<std::mutex> lock(mu_);
      peers_.push_back(std::move(peers));  // kept until the engine goes
    }
    return OnEngineThread(
               [this, raw, min_tokens] {
                 scheduler_.set_peers(raw, summary_.snapshot_identity,
                                      min_tokens);
                 return true;
               },
               absl::Seconds(30))
        .status();
  }

  void Shutdown() override {
    scheduler_.Stop();
    std::call_once(joined_, [this] {
      thread_.join();
      // Everything the loop sent, its last cancellations included, is
      // delivered before Shutdown returns.
      outbox_.Stop();
      // Tasks posted before the stop: the cache is this thread's now.
      scheduler_.RunPosted();
      PersistSnapshots();
    });
  }

  EngineStats Stats() const override {
    EngineStats stats;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats = stats_;
    }
    const SchedulerCounts c = scheduler_.Counts();
    stats.running = c.running;
    stats.waiting = c.waiting;
    stats.free_slots = c.free_slots;
    stats.draining = c.draining;
    stats.fault = c.fault;
    stats.speculation = c.speculation;
    stats.speculation_by_method = c.speculation_by_method;
    stats.speculative_max_batch = SpeculativeBatch(options_);
    stats.prefix_cache = prefix_cache_.Stats();
    stats.peer_fetch = c.peer_fetch;
    stats.grammar_masks = mask_filler_.masks_filled();
    stats.grammar_mask_ns = mask_filler_.fill_ns();
    stats.grammar_mask_wait_ns = mask_wait_ns_.load();
    if (disk_ != nullptr) {
      stats.prefix_cache_disk = true;
      stats.prefix_cache_disk_stats = disk_->Stats();
    }
    return stats;
  }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  const ModelSummary& summary() const override { return summary_; }
  const EngineOptions& options() const override { return options_; }

 private:
  // A drain's last act: the snapshots in memory go to the disk tier, least
  // recently used first so the most recent are the last evicted there. The
  // engine thread has stopped, so the cache is this thread's.
  void PersistSnapshots() {
    if (disk_ == nullptr) return;
    WriteToDisk(prefix_cache_.Snapshots(), "shutdown");
  }

  // Writes `snaps` (most recently used first) to the disk tier, least
  // recently used first so the most recent are the last evicted there, and
  // waits for the writes; a snapshot already there is only marked used.
  void WriteToDisk(
      const std::vector<std::shared_ptr<const PrefixSnapshot>>& snaps,
      const char* why) {
    const absl::Time start = absl::Now();
    for (auto it = snaps.rbegin(); it != snaps.rend(); ++it) {
      disk_->Write(*it, /*wait=*/true);
    }
    disk_->Flush();
    spdlog::info("{}: wrote {} prefix snapshots to {} in {}", why, snaps.size(),
                 options_.prefix_cache_dir,
                 absl::FormatDuration(absl::Now() - start));
  }

  // Runs `f` on the engine thread at its next turn and returns its result;
  // DEADLINE_EXCEEDED after `timeout` (it may still run later: it holds
  // only copies), UNAVAILABLE once the engine stopped.
  template <typename F>
  auto OnEngineThread(F f, absl::Duration timeout)
      -> absl::StatusOr<decltype(f())> {
    using T = decltype(f());
    auto result = std::make_shared<std::promise<T>>();
    std::future<T> done = result->get_future();
    if (!scheduler_.Post(
            [result, f = std::move(f)]() mutable { result->set_value(f()); })) {
      return absl::UnavailableError("the engine has stopped");
    }
    if (done.wait_for(absl::ToChronoMilliseconds(timeout)) !=
        std::future_status::ready) {
      return absl::DeadlineExceededError(
          "the engine thread did not get to it in time");
    }
    return done.get();
  }

  // One turn: admit and drop, then either pipeline (launch the next step,
  // then read the one in flight while the device runs the new one) or run a
  // step synchronously; deliver the turn's events.
  void Loop() {
    for (;;) {
      if (!in_flight_) {
        if (!scheduler_.WaitForWork()) break;
      } else if (scheduler_.stopped()) {
        break;
      }
      scheduler_.Admit(absl::Now(), options_.on_admit);
      scheduler_.DropCancelled(absl::Now());
      // Only the host computes logprobs; a backend that samples on the host
      // needs each step's tokens before it can plan the next.
      const bool pipeline =
          backend_->PipelinesSteps() && backend_->SamplesOnDevice() &&
          !scheduler_.any_wants_logprobs() && !scheduler_.any_speculating() &&
          !scheduler_.any_constrained();
      bool launched = false;
      if (pipeline && scheduler_.has_running()) {
        scheduler_.PlanStep(next_, /*pipelined=*/true);
        if (next_.rows.n() > 0) launched = Launch(next_);
      }
      if (in_flight_) {
        in_flight_ = false;
        Harvest(current_, launched);
      }
      bool ran = launched;
      if (launched) {
        std::swap(current_, next_);
        in_flight_ = true;
      } else if (!pipeline && scheduler_.has_running()) {
        ran = RunStep();
      }
      if (!ran && !in_flight_ && scheduler_.PollCopies()) {
        // Everything waits for slot copies: microseconds on the device.
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      scheduler_.EraseFinished();
      outbox_.Flush();
      MaybePublishStats();
    }
    // Shutdown: a step in flight is waited for and dropped; everything still
    // running ends as cancelled.
    if (in_flight_) {
      model_->WaitStep().IgnoreError();
      in_flight_ = false;
    }
    scheduler_.CancelAll();
    outbox_.Flush();
    PublishStats();
  }

  // The block counters build strings: at most every 50 ms under load, and
  // whenever the engine falls idle, so readers see final values.
  void MaybePublishStats() {
    const absl::Time now = absl::Now();
    if (!scheduler_.has_running() ||
        now - last_published_ > absl::Milliseconds(50)) {
      PublishStats();
      last_published_ = now;
    }
  }

  // The rows each logit row samples with, for the backend; a constrained
  // row's mask is the next of StartMasks' (the same order).
  // Penalised ids go to the backend's penalty table, only what changed
  // since each sequence's last row.
  void DescribeSampling(const StepBatch& batch) {
    sample_rows_.clear();
    penalty_tables_.BeginLaunch();
    int32_t masked = 0;
    for (Sequence* seq : batch.logit_seqs) {
      sample_rows_.push_back(seq->NextSampleRow(&penalty_tables_));
      if (seq->constrained()) sample_rows_.back().mask_row = masked++;
    }
  }

  // Starts filling the masks of the step's constrained rows on the filler
  // while the step runs (MaskFiller); FinishMasks waits for them.
  void StartMasks(const StepBatch& batch) {
    constrained_.clear();
    for (Sequence* seq : batch.logit_seqs) {
      if (seq->constrained()) constrained_.push_back(seq);
    }
    if (constrained_.empty()) return;
    mask_words_ = constrained_.front()->mask_words();
    masks_.resize(constrained_.size() * static_cast<size_t>(mask_words_));
    mask_filler_.Start(constrained_, masks_.data(), mask_words_);
  }
  void FinishMasks() {
    if (constrained_.empty()) return;
    const auto start = std::chrono::steady_clock::now();
    mask_filler_.Wait();
    mask_wait_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  }

  // Launches a planned pipelined step; false (its requests failed) if the
  // launch did.
  bool Launch(StepBatch& batch) {
    DescribeSampling(batch);
    batch.tokens.resize(static_cast<size_t>(batch.rows.m()));
    batch.launched = absl::Now();
    const absl::Status s =
        model_->LaunchStep(batch.rows, sample_rows_.data(), nullptr,
                           batch.tokens.data(), penalty_tables_.update());
    if (s.ok()) return true;
    // What is in flight is waited for and dropped with the failed step.
    if (in_flight_) {
      model_->WaitStep().IgnoreError();
      in_flight_ = false;
    }
    Fail(s);
    return false;
  }

  // Reads the step in flight and delivers its tokens. `then_launched`: a
  // step launched after it is outstanding too.
  void Harvest(StepBatch& batch, bool& then_launched) {
    const absl::Status s = model_->WaitStep();
    CountStep(batch, absl::Now() - batch.launched);
    if (!s.ok()) {
      if (then_launched) {
        model_->WaitStep().IgnoreError();
        then_launched = false;
      }
      Fail(s);
      return;
    }
    scheduler_.Harvest(batch, batch.tokens.data());
  }

  void CountStep(const StepBatch& batch, absl::Duration time) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.steps;
      stats_.last_step_batch = batch.sequences;
    }
    if (options_.on_step) options_.on_step(time, batch.sequences);
  }

  // A failed step fails the requests running; a lost device fails
  // everything, now and later.
  void Fail(const absl::Status& s) {
    spdlog::error("engine step failed: {}", s.ToString());
    scheduler_.FailRunning(s);
    if (absl::Status health = backend_->Health(); !health.ok()) {
      spdlog::critical("backend lost its device; refusing all work: {}",
                       health.ToString());
      scheduler_.Fault(health);
    }
  }

  // One step, its tokens read before anything else is planned; false when
  // nothing could run (every sequence waits for a slot copy).
  bool RunStep() {
    StepBatch& batch = next_;
    scheduler_.PlanStep(batch);
    if (batch.rows.n() == 0) {
      scheduler_.AfterStep();
      return false;
    }
    const int m = batch.rows.m();
    // The backend samples when it can and no row wants logprobs, which only
    // the host computes; then no logits leave the device.
    bool on_device = backend_->SamplesOnDevice() && m > 0;
    // The host verifies speculative rounds.
    for (Sequence* seq : batch.logit_seqs)
      on_device &= !seq->wants_logprobs() && !seq->speculates();
    const int vocab = model_->vocab_size();
    const absl::Time step_start = absl::Now();
    absl::Status s;
    StartMasks(batch);
    if (on_device) {
      DescribeSampling(batch);
      batch.tokens.resize(static_cast<size_t>(m));
      s = model_->ForwardSample(
          batch.rows, sample_rows_.data(), nullptr, batch.tokens.data(),
          {masks_.data(), mask_words_, [this] { FinishMasks(); }},
          penalty_tables_.update());
    } else {
      logits_.resize(static_cast<size_t>(m) * vocab);
      s = model_->Forward(batch.rows, logits_.data());
      FinishMasks();
    }
    CountStep(batch, absl::Now() - step_start);
    if (!s.ok()) {
      // A failed step alone fails only its own requests: the next one may
      // well run.
      Fail(s);
      return true;
    }
    scheduler_.AfterStep();
    for (int j = 0; j < m;) {
      Sequence& seq = *batch.logit_seqs[j];
      const float* row = logits_.data() + int64_t{j} * vocab;
      if (seq.speculates()) {
        // A round's rows lie together: its draft's length plus one.
        j += static_cast<int>(seq.round_draft().size()) + 1;
        scheduler_.DeliverRound(seq, row, vocab);
        continue;
      }
      scheduler_.Deliver(seq, on_device ? seq.Accept(batch.tokens[j])
                                        : seq.Advance(row, vocab));
      ++j;
    }
    scheduler_.ObserveStep(batch);
    return true;
  }

  void PublishStats() {
    const bool settled = !in_flight_ && !scheduler_.has_running();
    std::vector<BlockCounter> counters;
    for (size_t i = 0; i < model_->layers().size(); ++i) {
      std::vector<LayerStat> layer_stats;
      model_->layers()[i]->AppendStats(&layer_stats, settled);
      for (LayerStat& st : layer_stats) {
        counters.push_back(
            {static_cast<int32_t>(i), std::move(st.name), st.value});
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.block_counters = std::move(counters);
  }

  const EngineOptions options_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<ModelDrafter> drafter_;  // null: no draft model
  std::unique_ptr<MtpDrafter> mtp_;        // null: the model has no head
  ModelSummary summary_;
  HostBlockPool snapshot_blocks_;  // the prefix cache's memory
  // The cache's disk tier, or null; declared before the cache and the
  // scheduler, which use it, and after the blocks its queue holds.
  std::unique_ptr<SnapshotDisk> disk_;
  // Compiles Submit's constraints (thread-safe); the error when the
  // tokenizer's vocabulary could not be read for grammars.
  const absl::StatusOr<std::unique_ptr<GrammarCompiler>> grammars_;
  // Fills constrained masks while steps run (idle whenever the engine
  // thread is not inside a step: it waits for each fill it starts).
  MaskFiller mask_filler_;
  PrefixCache prefix_cache_;  // the engine thread's; Stats() from any
  EventOutbox outbox_;        // before the scheduler, which sends into it
  // The peers the scheduler asks (SetSnapshotPeers), guarded by mu_; before
  // the scheduler, whose last fetches they answer.
  std::vector<std::shared_ptr<SnapshotPeers>> peers_;
  // The book of the backend's penalty table (engine thread); before the
  // scheduler, whose sequences' samplers hold rooms in it.
  PenaltyTables penalty_tables_;
  Scheduler scheduler_;

  mutable std::mutex mu_;
  EngineStats stats_;  // guarded by mu_: steps and block counters

  // Engine thread only.
  absl::Time last_published_ = absl::InfinitePast();
  // The step in flight (pipelined) and the one being planned; they trade
  // places at each launch, so their buffers are reused.
  StepBatch current_, next_;
  bool in_flight_ = false;
  std::vector<float> logits_;
  // Device sampling: one row per logit row.
  std::vector<SampleRow> sample_rows_;
  // Constrained decoding: the step's constrained sequences, in logit-row
  // order, and their masks, mask_words_ words each, which mask_filler_
  // fills while the step runs (engine thread's, but the filler's between
  // StartMasks and FinishMasks).
  std::vector<Sequence*> constrained_;
  std::vector<uint32_t> masks_;
  int32_t mask_words_ = 0;
  std::atomic<int64_t> mask_wait_ns_{0};  // written by the engine thread
  std::thread thread_;
  std::once_flag joined_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    const EngineOptions& options, std::unique_ptr<Backend> backend) {
  absl::StatusOr<std::unique_ptr<ModelDir>> dir =
      ModelDir::Open(options.model_dir);
  if (!dir.ok()) return dir.status();
  return Create(options, std::move(backend), **dir);
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    const EngineOptions& options, std::unique_ptr<Backend> backend,
    ModelDir& dir) {
  if (absl::Status s = CheckEngineOptions(options); !s.ok()) return s;
  if (backend == nullptr) return absl::InvalidArgumentError("no backend");
  ModelLimits limits;
  limits.max_slots = options.max_slots;
  // A speculating sequence's round: its unfed tokens (at most a draft and
  // one) in its slot, and again with the draft in its spare.
  const int32_t draft_rows =
      SpeculativeBatch(options) * options.max_draft_tokens;
  limits.max_rows_per_step = options.step_token_budget + options.max_slots +
                             draft_rows * 3 + options.max_slots;
  limits.max_logit_rows = options.max_slots + draft_rows;
  auto model = Model::Load(dir, *backend, limits);
  if (!model.ok()) return model.status();
  std::set<std::string> logged;
  for (const std::string& warning : (*model)->config().warnings) {
    if (logged.insert(warning).second) {
      spdlog::warn("{}: {}", dir.FilePath("config.json"), warning);
    }
  }
  // The model's config.json names its EOS; it wins over the tokenizer's guess.
  TokenizerOptions tokenizer_options;
  if ((*model)->config().eos_token_id.has_value()) {
    tokenizer_options.eos_token_id =
        static_cast<int32_t>(*(*model)->config().eos_token_id);
  }
  auto tokenizer = ParseTokenizerFile(
      dir.tokenizer_json(), dir.FilePath("tokenizer.json"), tokenizer_options);
  if (!tokenizer.ok()) return tokenizer.status();
  if ((*tokenizer)->vocab_size() > (*model)->vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer defines ", (*tokenizer)->vocab_size(),
        " ids but the model has ", (*model)->vocab_size(), " embedding rows"));
  }
  // The cache's budget in host blocks of one slot's state, allocated now so
  // that no snapshot pins memory on the step path.
  const int64_t slot_bytes = (*model)->arena().bytes_per_slot();
  std::unique_ptr<SnapshotDisk> disk;
  int64_t writer_blocks = 0;
  const uint64_t identity =
      options.prefix_cache_bytes > 0
          ? SnapshotIdentity(dir, **model, backend->name())
          : 0;
  if (!options.prefix_cache_dir.empty()) {
    SnapshotDiskOptions d;
    d.dir = options.prefix_cache_dir;
    d.budget_bytes = options.prefix_cache_disk_bytes;
    d.identity = identity;
    d.state_bytes = slot_bytes;
    auto opened = SnapshotDisk::Open(d);
    if (!opened.ok()) return opened.status();
    disk = *std::move(opened);
    // The writer's queue holds evicted snapshots' blocks until written.
    if (slot_bytes > 0) writer_blocks = d.queue_depth;
  }
  auto blocks = HostBlockPool::Create(
      *backend, slot_bytes,
      slot_bytes > 0 ? options.prefix_cache_bytes / slot_bytes + writer_blocks
                     : 0);
  if (!blocks.ok()) return blocks.status();
  // A tokenizer whose vocabulary grammars cannot read does not stop the
  // engine: only constrained requests are refused, with the reason.
  absl::StatusOr<std::unique_ptr<GrammarCompiler>> grammars =
      GrammarCompiler::ForTokenizer(
          **tokenizer, (*model)->vocab_size(),
          {options.constraint_limits, options.grammar_cache_size,
           options.grammar_compile_threads});
  if (!grammars.ok()) spdlog::warn("{}", grammars.status().ToString());
  EngineOptions resolved = options;
  if (options.speculative_max_batch == kSpeculativeMaxBatchAuto) {
    // Before the engine thread starts: the probe has the model to itself.
    const RoundThreshold threshold = MeasureRoundThreshold(options, **model);
    resolved.speculative_max_batch = threshold.max_batch;
    spdlog::info("{}", threshold.Describe());
  }
  auto drafters =
      LoadDrafters({options.draft_model_dir, SpeculativeBatch(resolved),
                    options.max_draft_tokens, options.step_token_budget},
                   dir, **model, **tokenizer);
  if (!drafters.ok()) return drafters.status();
  return std::unique_ptr<Engine>(
      new EngineImpl(resolved, std::move(backend), *std::move(tokenizer),
                     *std::move(model), *std::move(blocks), std::move(disk),
                     *std::move(drafters), std::move(grammars), identity));
}

}  // namespace seqboat
