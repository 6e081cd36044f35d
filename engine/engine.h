// The engine: owns a model, its state arena and one engine thread that runs
// continuous batching. Thread-safe; the server calls it from any thread.
#ifndef SEQBOAT_ENGINE_ENGINE_H_
#define SEQBOAT_ENGINE_ENGINE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine_options.h"
#include "engine/model_dir/model_dir.h"
#include "engine/request.h"
#include "engine/scheduler/scheduler.h"
#include "engine/state/prefix_cache.h"
#include "engine/state/snapshot_disk.h"
#include "engine/state/snapshot_peers.h"
#include "engine/tokenizer/tokenizer.h"

namespace seqboat {

class Backend;

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
  std::map<std::string, SpeculationCounts, std::less<>> speculation_by_method;
  // Rounds run while at most this many sequences run (measured at start-up
  // for EngineOptions' auto; 0: never).
  int32_t speculative_max_batch = 0;
  bool prefix_cache_disk = false;  // whether there is a disk tier
  SnapshotDiskStats prefix_cache_disk_stats;
  PeerFetchStats peer_fetch;  // snapshots asked of other replicas
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
  // Whether the model carries a multi-token-prediction head (config.json
  // "mtp"): speculative method mtp runs only then.
  bool mtp_head = false;
  // What a snapshot (file or export) must have been taken under to be
  // restored here: the model, layer stack, state size and backend
  // (snapshot_file.h). 0 without a prefix cache.
  uint64_t snapshot_identity = 0;
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
  // With a disk tier, first writes the snapshots in memory there (waiting
  // for the writes), so a replica killed before its drain ends still leaves
  // them behind.
  virtual void BeginDrain() = 0;
  // Cancels everything still in flight (each gets a kCancelled final event),
  // stops the engine thread and writes the prefix cache's snapshots to its
  // disk tier, if it has one. Idempotent.
  virtual void Shutdown() = 0;

  // Snapshot exchange between replicas. The bytes are a snapshot file's
  // (snapshot_file.h); the engine thread owns the prefix cache, so both
  // wait for its next turn (at most `timeout`, else DEADLINE_EXCEEDED) and
  // never lock the step path.
  //
  // The longest snapshot, in memory or on disk, of `scope` whose tokens are
  // a prefix of `tokens` and longer than `min_tokens`; NOT_FOUND when there
  // is none, FAILED_PRECONDITION without a prefix cache.
  virtual absl::StatusOr<std::string> ExportSnapshot(
      const std::string& scope, const std::vector<int32_t>& tokens,
      int64_t min_tokens, absl::Duration timeout) {
    return absl::UnimplementedError("this engine exports no snapshots");
  }
  // Checks `bytes` (identity, state size, length, checksum: INVALID_ARGUMENT
  // naming the refusal) and puts the snapshot into the prefix cache.
  virtual absl::Status ImportSnapshot(const std::string& bytes,
                                      absl::Duration timeout) {
    return absl::UnimplementedError("this engine imports no snapshots");
  }
  // From now on, a request whose prompt extends no snapshot here within
  // `min_tokens` of its length first asks `peers` for one (in the queue,
  // holding no slot; Scheduler::set_peers). FAILED_PRECONDITION without a
  // prefix cache.
  virtual absl::Status SetSnapshotPeers(std::shared_ptr<SnapshotPeers> peers,
                                        int32_t min_tokens) {
    return absl::UnimplementedError("this engine asks no peers");
  }

  virtual EngineStats Stats() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  virtual const ModelSummary& summary() const = 0;
  virtual const EngineOptions& options() const = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_ENGINE_H_
