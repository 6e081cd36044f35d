// What an engine is built with (Engine::Create), and the one statement of
// the rules those options must satisfy.
#ifndef SEQBOAT_ENGINE_ENGINE_OPTIONS_H_
#define SEQBOAT_ENGINE_ENGINE_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/grammar/constraint.h"

namespace seqboat {

// EngineOptions::speculative_max_batch: measured at start-up, at most
// kAutoSpeculativeMaxBatch.
inline constexpr int32_t kSpeculativeMaxBatchAuto = -1;
inline constexpr int32_t kAutoSpeculativeMaxBatch = 32;

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
  // Every snapshot is queued for the disk tier as it enters memory, not
  // only when evicted (the writer's queue bounds it: a full one drops and
  // counts), so a replica that is killed, not drained, leaves its
  // conversations on disk.
  bool prefix_cache_disk_write_through = false;
  int32_t max_new_tokens_limit = 4096;
  // Speculative decoding (SpeculativeParams): a request's num_draft_tokens
  // is at most max_draft_tokens; rounds run while at most
  // speculative_max_batch sequences run (0: never). Each step then has up
  // to speculative_max_batch * max_draft_tokens logit rows beyond one per
  // slot, which the model's buffers are sized for.
  int32_t max_draft_tokens = 8;
  int32_t speculative_max_batch = 8;
  // speculative_max_batch = kSpeculativeMaxBatchAuto: measured by
  // Engine::Create on the loaded model (engine/round_threshold.h) with
  // rounds of speculative_auto_draft_tokens drafts, each taken with
  // probability speculative_auto_acceptance, up to kAutoSpeculativeMaxBatch
  // (which the buffers are sized for) and half the slots, then logged and
  // published in EngineStats.
  int32_t speculative_auto_draft_tokens = 4;
  double speculative_auto_acceptance = 0.8;
  // Each sequence drafts fewer tokens while its drafts are rejected and
  // more while they are taken (engine/scheduler/draft_length.h), within
  // its request's num_draft_tokens; off: always that many.
  bool adaptive_draft_length = true;
  // A draft model's directory (SpeculativeMethod::kDraftModel): a smaller
  // model with the same tokenizer, loaded on the same backend with two
  // slots per sequence that may speculate. Empty: none.
  std::string draft_model_dir;
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

// INVALID_ARGUMENT naming the first option out of its range.
absl::Status CheckEngineOptions(const EngineOptions& options);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_ENGINE_OPTIONS_H_
