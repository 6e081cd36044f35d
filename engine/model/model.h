// A loaded model: the block stack built from config.json on a backend, its
// state arena, and the packed forward pass of one engine step.
// Not thread-safe: the engine thread owns it.
#ifndef SEQBOAT_ENGINE_MODEL_MODEL_H_
#define SEQBOAT_ENGINE_MODEL_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/layers/layer.h"
#include "engine/model/config.h"
#include "engine/model/weight_store.h"
#include "engine/state/slot_arena.h"

namespace seqboat {

struct ModelLimits {
  int max_slots = 64;           // concurrent sequences
  int max_rows_per_step = 576;  // packed tokens in one step
};

class Model {
 public:
  // Reads dir/config.json and dir/model.safetensors; every tensor must be used.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& dir,
                                                     Backend& backend,
                                                     const ModelLimits& limits);

  // Runs one packed step: ids[0..n) (host) split into segments, each segment's
  // state in its slot. Writes logits (host, [m, vocab_size]) for the rows
  // listed in logit_rows (host). Requires n <= max_rows_per_step and
  // m <= max_slots.
  absl::Status Forward(const int32_t* ids, int n, const Segment* segs,
                       int nsegs, const int32_t* logit_rows, int m,
                       float* logits);

  const ModelConfig& config() const { return config_; }
  SlotArena& arena() { return *arena_; }
  const ModelLimits& limits() const { return limits_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  int vocab_size() const { return static_cast<int>(config_.vocab_size); }

 private:
  Model() = default;

  ModelConfig config_;
  ModelLimits limits_;
  Backend* backend_ = nullptr;
  std::unique_ptr<WeightStore> weights_;  // keeps the mmap the matrices alias
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<SlotArena> arena_;
  const float* embed_ = nullptr;       // [V, D], host-side table for the gather
  const float* final_norm_ = nullptr;  // weight, when affine
  const float* final_norm_bias_ = nullptr;  // layernorm's bias
  Matrix head_;
  DeviceBuffer residual_, scratch_, gathered_, normed_, logits_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_MODEL_MODEL_H_
