// The engine: owns a model, its state arena and one engine thread that runs
// continuous batching. Thread-safe; the server calls it from any thread.
#ifndef SEQBOAT_ENGINE_ENGINE_H_
#define SEQBOAT_ENGINE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/grammar/constraint.h"
#include "engine/model_dir/model_dir.h"
#include "engine/request.h"
#include "engine/scheduler/scheduler.h"
#include "engine/state/prefix_cache.h"
#include "engine/state/snapshot_disk.h"
#include "engine/tokenizer/tokenizer.h"

namespace seqboat {

class Backend;

struct EngineOptions {
  std::string model_dir;    // config.json, model.safetensors, tokenizer.json
  int32_t max_slots = 64;   // concurrent sequences (state slots)
  int32_t max_queue = 256;  // waiting requests before RESOURCE_EXHAUSTED
  int32_t step_token_budget =
      512;  // decode tokens + prefill chunk tokens per step
  int32_t max_prompt_tokens = 1 << 20;
  // Host bytes for prefix-state snapshots (engine/state/prefix_cache.h);
  // 0 disables prefix reuse.
  int64_t prefix_cache_bytes = 0;
  // The prefix cache's disk tier (engine/state/snapshot_disk.h): snapshots
  // evicted from memory are written to this directory, within
  // prefix_cache_disk_bytes, and read back on a later request or by a
  // restarted engine of the same model; Shutdown writes the snapshots in
  // memory there too. Empty: no disk tier. Needs prefix_cache_bytes > 0.
  std::string prefix_cache_dir;
  int64_t prefix_cache_disk_bytes = 0;
  int32_t max_new_tokens_limit = 4096;
  // Speculative decoding (SpeculativeParams): a request's num_draft_tokens
  // is at most max_draft_tokens; rounds run while at most
  // speculative_max_batch sequences run (0: never). Each step then has up
  // to speculative_max_batch * max_draft_tokens logit rows beyond one per
  // slot, which the model's buffers are sized for.
  int32_t max_draft_tokens = 8;
  int32_t speculative_max_batch = 8;
  // Constrained decoding (Request::constraint): what Submit accepts of a
  // constraint, the compiled grammars kept (least recently used dropped),
  // and the threads one compilation may use (on the submitting thread's
  // behalf: compilation never runs on the engine thread).
  ConstraintLimits constraint_limits;
  int32_t grammar_cache_size = 64;
  int32_t grammar_compile_threads = 2;
  // Threads that fill constrained sequences' masks while a step runs
  // (engine/scheduler/mask_filler.h). A JSON mask over 248k ids takes
  // 50-200 us: at batch 64 a GPU step of a few ms hides them only when
  // several threads share them out.
  int32_t grammar_mask_threads = 2;

  // Optional observers for the server's metrics. Both run on the engine
  // thread, so they must be cheap and never block.
  // After each forward step: its wall time and how many sequences it ran.
  std::function<void(absl::Duration step_time, int32_t batch)> on_step;
  // When a queued request gets a slot: how long it waited since arrival.
  std::function<void(absl::Duration queue_time)> on_admit;
};

// A block's running counter, e.g. a SeqBoat block's tokens seen and tokens
// whose attention unit ran ("seqboat.tokens", "seqboat.gau_activated").
struct BlockCounter {
  int32_t block = 0;
  std::string name;
  int64_t value = 0;
};

struct EngineStats {
  int32_t running = 0;  // requests holding slots (n sequences' each)
  int32_t waiting = 0;  // queued, not yet admitted
  int32_t free_slots = 0;
  int64_t steps = 0;
  int64_t last_step_batch = 0;  // sequences in the most recent step
  bool draining = false;
  // Set once the backend reports its device lost (Backend::Health): the
  // engine has failed everything in flight and refuses new work for good.
  std::string fault;
  std::vector<BlockCounter> block_counters;  // since start, every block's
  PrefixCacheStats prefix_cache;
  SpeculationCounts speculation;
  bool prefix_cache_disk = false;  // whether there is a disk tier
  SnapshotDiskStats prefix_cache_disk_stats;
  // Constrained decoding: masks the filler computed and its time doing so
  // (off the engine thread, while steps ran), and the engine thread's time
  // waiting for masks after a step's forward (what they added to steps).
  int64_t grammar_masks = 0;
  int64_t grammar_mask_ns = 0;
  int64_t grammar_mask_wait_ns = 0;
};

struct ModelSummary {
  std::string name;
  std::vector<std::string> layer_kinds;
  int32_t vocab_size = 0;
  int32_t eos_token_id = -1;
  int64_t state_bytes_per_slot = 0;
  std::string backend;
  PromptRules prompt_rules;  // what Submit accepts of a prompt's ids
};

class Engine {
 public:
  // Loads the model of `dir` onto `backend` (chosen by the caller: see
  // server/backend_choice.h), with the tokenizer of `dir`, and starts the
  // engine thread. `dir`'s weights are closed once the model is loaded.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const EngineOptions& options, std::unique_ptr<Backend> backend,
      ModelDir& dir);
  // The same from options.model_dir (ModelDir::Open).
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const EngineOptions& options, std::unique_ptr<Backend> backend);
  virtual ~Engine() = default;

  // Queues a request. RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE
  // while draining or after a device fault, INVALID_ARGUMENT for ids outside
  // the vocabulary or n outside [1, max_slots]. On OK the sink will receive
  // a final event exactly once for each of the request's n sequences.
  virtual absl::Status Submit(Request request) = 0;

  // Stops admitting new requests; running and queued ones go on to finish.
  virtual void BeginDrain() = 0;
  // Cancels everything still in flight (each gets a kCancelled final event),
  // stops the engine thread and writes the prefix cache's snapshots to its
  // disk tier, if it has one. Idempotent.
  virtual void Shutdown() = 0;

  virtual EngineStats Stats() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  virtual const ModelSummary& summary() const = 0;
  virtual const EngineOptions& options() const = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_ENGINE_H_
