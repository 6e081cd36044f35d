#include "engine/engine.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/backend/backend.h"
#include "engine/model/model.h"
#include "engine/scheduler/sequence.h"
#include "engine/scheduler/step_plan.h"
#include "spdlog/spdlog.h"

namespace seqboat {
namespace {

class EngineImpl final : public Engine {
 public:
  EngineImpl(EngineOptions options, std::unique_ptr<Backend> backend,
             std::unique_ptr<Tokenizer> tokenizer, std::unique_ptr<Model> model)
      : options_(std::move(options)),
        backend_(std::move(backend)),
        tokenizer_(std::move(tokenizer)),
        model_(std::move(model)) {
    const ModelConfig& cfg = model_->config();
    summary_.name = cfg.name;
    for (const auto& layer : model_->layers())
      summary_.layer_kinds.push_back(layer->kind());
    summary_.vocab_size = cfg.vocab_size;
    summary_.eos_token_id = tokenizer_->eos_token_id();
    summary_.state_bytes_per_slot = model_->arena().bytes_per_slot();
    summary_.backend = backend_->name();
    stats_.free_slots = model_->arena().free_slots();
    PublishStats();  // block counters exist (at zero) before the first step
    thread_ = std::thread([this] { Loop(); });
  }

  ~EngineImpl() override { Shutdown(); }

  absl::Status Submit(Request request) override {
    if (request.prompt.empty())
      return absl::InvalidArgumentError("prompt is empty");
    const int32_t limit =
        std::min(tokenizer_->vocab_size(), model_->vocab_size());
    for (size_t i = 0; i < request.prompt.size(); ++i) {
      const int32_t id = request.prompt[i];
      if (id < 0 || id >= limit) {
        return absl::InvalidArgumentError(absl::StrCat(
            "prompt token ", i, " is ", id, ", outside [0, ", limit, ")"));
      }
    }
    if (!request.sink)
      return absl::InvalidArgumentError("request has no event sink");
    std::lock_guard<std::mutex> lock(mu_);
    if (!fault_.ok()) return fault_;
    if (draining_ || stopping_)
      return absl::UnavailableError("server is draining");
    // Requests the engine thread has not yet moved into free slots do not
    // count against the queue bound: only those that will have to wait do.
    if (static_cast<int>(waiting_.size()) >=
        options_.max_queue + stats_.free_slots) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "queue full: ", waiting_.size(), " requests waiting for a slot"));
    }
    waiting_.push_back(std::move(request));
    stats_.waiting = static_cast<int32_t>(waiting_.size());
    cv_.notify_one();
    return absl::OkStatus();
  }

  void BeginDrain() override {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    stats_.draining = true;
  }

  void Shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      draining_ = true;
      stats_.draining = true;
      cv_.notify_one();
    }
    std::call_once(joined_, [this] { thread_.join(); });
  }

  EngineStats Stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  const ModelSummary& summary() const override { return summary_; }
  const EngineOptions& options() const override { return options_; }

 private:
  void Loop() {
    std::vector<float> logits;
    while (true) {
      std::deque<Request> admitted_now, gone, expired;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] {
          return stopping_ || !waiting_.empty() || !running_.empty();
        });
        if (stopping_) break;
        // Admission: requests that left while waiting never touch the model.
        const absl::Time now = absl::Now();
        for (auto it = waiting_.begin(); it != waiting_.end();) {
          if (it->control->cancelled.load() || now > it->deadline) {
            (now > it->deadline ? expired : gone).push_back(std::move(*it));
            it = waiting_.erase(it);
          } else {
            ++it;
          }
        }
        for (int free = model_->arena().free_slots();
             free > 0 && !waiting_.empty(); --free) {
          admitted_now.push_back(std::move(waiting_.front()));
          waiting_.pop_front();
        }
        stats_.waiting = static_cast<int32_t>(waiting_.size());
      }
      // Sinks run outside the lock: they belong to the server.
      for (Request& r : gone) FinishUnadmitted(r, FinishReason::kCancelled);
      for (Request& r : expired) {
        FinishUnadmitted(
            r, FinishReason::kCancelled,
            absl::DeadlineExceededError("deadline passed while queued"));
      }
      for (Request& r : admitted_now) {
        if (options_.on_admit) options_.on_admit(absl::Now() - r.arrival);
        const int slot = *model_->arena().Acquire();  // counted free above
        running_.push_back(
            std::make_unique<Sequence>(std::move(r), slot, *tokenizer_));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.free_slots = model_->arena().free_slots();
      }
      DropCancelled();
      if (!running_.empty()) RunStep(logits);
      PublishStats();
    }
    // Shutdown: everything still in flight ends as cancelled.
    std::deque<Request> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(waiting_);
    }
    for (Request& r : left) FinishUnadmitted(r, FinishReason::kCancelled);
    for (auto& seq : running_)
      Release(*seq, seq->Abort(FinishReason::kCancelled));
    running_.clear();
    PublishStats();
  }

  // The final event of a request that never held a slot.
  static void FinishUnadmitted(Request& r, FinishReason finish,
                               absl::Status status = absl::OkStatus()) {
    GenerationEvent event;
    event.finish = finish;
    event.prompt_tokens = static_cast<int32_t>(r.prompt.size());
    event.status = std::move(status);
    r.sink(std::move(event));
  }

  void DropCancelled() {
    const absl::Time now = absl::Now();
    for (auto& seq : running_) {
      const Request& r = seq->request();
      if (r.control->cancelled.load()) {
        Release(*seq, seq->Abort(FinishReason::kCancelled));
      } else if (now > r.deadline) {
        Release(*seq,
                seq->Abort(FinishReason::kCancelled,
                           absl::DeadlineExceededError("deadline passed")));
      }
    }
    EraseFinished();
  }

  void RunStep(std::vector<float>& logits) {
    std::vector<SequenceView> views;
    views.reserve(running_.size());
    for (auto& seq : running_)
      views.push_back({seq->prompt_len(), seq->prefilled()});
    const StepPlan plan = PlanStep(views, options_.step_token_budget);

    ids_.clear();
    segs_.clear();
    logit_rows_.clear();
    logit_seqs_.clear();
    for (const PlannedRun& run : plan.runs) {
      Sequence& seq = *running_[run.seq];
      const int32_t start = static_cast<int32_t>(ids_.size());
      if (run.decode) {
        ids_.push_back(seq.last_token());
      } else {
        const auto& p = seq.request().prompt;
        ids_.insert(ids_.end(), p.begin() + run.prompt_from,
                    p.begin() + run.prompt_from + run.len);
        seq.AddPrefilled(run.len);
      }
      segs_.push_back({seq.slot(), start, run.len});
      if (run.wants_logits) {
        logit_rows_.push_back(start + run.len - 1);
        logit_seqs_.push_back(run.seq);
      }
    }
    // The backend samples when it can and no row wants logprobs, which only
    // the host computes; then no logits leave the device.
    bool on_device = backend_->SamplesOnDevice() && !logit_seqs_.empty();
    for (int j : logit_seqs_) on_device &= !running_[j]->wants_logprobs();
    const int vocab = model_->vocab_size();
    const int m = static_cast<int>(logit_rows_.size());
    const absl::Time step_start = absl::Now();
    absl::Status s;
    if (on_device) {
      sample_rows_.clear();
      seen_ids_.clear();
      for (int j : logit_seqs_)
        sample_rows_.push_back(running_[j]->NextSampleRow(&seen_ids_));
      tokens_.resize(static_cast<size_t>(m));
      s = model_->ForwardSample(ids_.data(), static_cast<int>(ids_.size()),
                                segs_.data(), static_cast<int>(segs_.size()),
                                logit_rows_.data(), m, sample_rows_.data(),
                                seen_ids_.data(), tokens_.data());
    } else {
      logits.resize(static_cast<size_t>(m) * vocab);
      s = model_->Forward(ids_.data(), static_cast<int>(ids_.size()),
                          segs_.data(), static_cast<int>(segs_.size()),
                          logit_rows_.data(), m, logits.data());
    }
    ++steps_;
    last_batch_ = static_cast<int64_t>(plan.runs.size());
    if (options_.on_step) {
      options_.on_step(absl::Now() - step_start,
                       static_cast<int32_t>(last_batch_));
    }
    if (!s.ok()) {
      spdlog::error("engine step failed: {}", s.ToString());
      for (auto& seq : running_)
        Release(*seq, seq->Abort(FinishReason::kNone, s));
      EraseFinished();
      if (absl::Status health = backend_->Health(); !health.ok()) {
        Fault(health);
      }
      return;
    }
    for (size_t j = 0; j < logit_seqs_.size(); ++j) {
      Sequence& seq = *running_[logit_seqs_[j]];
      GenerationEvent event =
          on_device ? seq.Accept(tokens_[j])
                    : seq.Advance(logits.data() + j * vocab, vocab);
      if (seq.finished()) {
        Release(seq, std::move(event));
      } else {
        seq.request().sink(std::move(event));
      }
    }
    EraseFinished();
  }

  // The device is lost: queued requests fail with `fault`, and so does every
  // later Submit. A failed step alone does not get here: the next one may
  // well run.
  void Fault(const absl::Status& fault) {
    spdlog::critical("backend lost its device; refusing all work: {}",
                     fault.ToString());
    std::deque<Request> queued;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fault_ = fault;
      stats_.fault = fault.ToString();
      queued.swap(waiting_);
      stats_.waiting = 0;
    }
    for (Request& r : queued) FinishUnadmitted(r, FinishReason::kNone, fault);
  }

  // Sends the final event and returns the slot to the arena.
  // The slot is visible as free before the client hears it is done.
  void Release(Sequence& seq, GenerationEvent event) {
    SlotArena& arena = model_->arena();
    arena.Release(seq.slot());
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.free_slots = arena.free_slots();
      stats_.running = arena.max_slots() - arena.free_slots();
    }
    seq.request().sink(std::move(event));
  }

  void EraseFinished() {
    running_.erase(std::remove_if(running_.begin(), running_.end(),
                                  [](const auto& s) { return s->finished(); }),
                   running_.end());
  }

  void PublishStats() {
    std::vector<BlockCounter> counters;
    std::vector<LayerStat> layer_stats;
    for (size_t i = 0; i < model_->layers().size(); ++i) {
      layer_stats.clear();
      model_->layers()[i]->AppendStats(&layer_stats);
      for (LayerStat& st : layer_stats) {
        counters.push_back(
            {static_cast<int32_t>(i), std::move(st.name), st.value});
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.running = static_cast<int32_t>(running_.size());
    stats_.waiting = static_cast<int32_t>(waiting_.size());
    stats_.free_slots = model_->arena().free_slots();
    stats_.steps = steps_;
    stats_.last_step_batch = last_batch_;
    stats_.block_counters = std::move(counters);
  }

  const EngineOptions options_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Model> model_;
  ModelSummary summary_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> waiting_;  // guarded by mu_
  bool draining_ = false;        // guarded by mu_
  bool stopping_ = false;        // guarded by mu_
  absl::Status fault_;           // guarded by mu_; set once, for good
  EngineStats stats_;            // guarded by mu_

  // Engine thread only.
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<int32_t> ids_, logit_rows_;
  std::vector<Segment> segs_;
  // Device sampling: one row per logit row, their penalised ids, the tokens.
  std::vector<SampleRow> sample_rows_;
  std::vector<int32_t> seen_ids_, tokens_;
  std::vector<int> logit_seqs_;
  int64_t steps_ = 0, last_batch_ = 0;
  std::thread thread_;
  std::once_flag joined_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    const EngineOptions& options, std::unique_ptr<Backend> backend) {
  if (options.max_slots <= 0 || options.max_queue < 0 ||
      options.step_token_budget <= 0) {
    return absl::InvalidArgumentError(
        "max_slots and step_token_budget must be > 0");
  }
  if (backend == nullptr) return absl::InvalidArgumentError("no backend");
  ModelLimits limits;
  limits.max_slots = options.max_slots;
  limits.max_rows_per_step = options.step_token_budget + options.max_slots;
  auto model = Model::Load(options.model_dir, *backend, limits);
  if (!model.ok()) return model.status();
  // The model's config.json names its EOS; it wins over the tokenizer's guess.
  TokenizerOptions tokenizer_options;
  if ((*model)->config().eos_token_id.has_value()) {
    tokenizer_options.eos_token_id =
        static_cast<int32_t>(*(*model)->config().eos_token_id);
  }
  auto tokenizer =
      LoadTokenizer(options.model_dir + "/tokenizer.json", tokenizer_options);
  if (!tokenizer.ok()) return tokenizer.status();
  if ((*tokenizer)->vocab_size() > (*model)->vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer defines ", (*tokenizer)->vocab_size(),
        " ids but the model has ", (*model)->vocab_size(), " embedding rows"));
  }
  return std::unique_ptr<Engine>(new EngineImpl(
      options, std::move(backend), *std::move(tokenizer), *std::move(model)));
}

}  // namespace seqboat
