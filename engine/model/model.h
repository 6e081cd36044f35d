// A loaded model: the block stack built from config.json on a backend, its
// state arena, and the packed forward pass of one engine step.
// Not thread-safe: the engine thread owns it.
#ifndef SEQBOAT_ENGINE_MODEL_MODEL_H_
#define SEQBOAT_ENGINE_MODEL_MODEL_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/backend/step_rows.h"
#include "engine/layers/layer.h"
#include "engine/layers/pre_norm.h"
#include "engine/model/config.h"
#include "engine/model/step_split.h"
#include "engine/model_dir/model_dir.h"
#include "engine/state/slot_arena.h"

namespace seqboat {

struct ModelLimits {
  int max_slots = 64;           // concurrent sequences
  int max_rows_per_step = 576;  // packed tokens in one step
  // Batch sizes decode-only steps are padded to (ascending, each <=
  // max_slots); nullopt asks the backend (Backend::CaptureBuckets).
  std::optional<std::vector<int>> decode_buckets;
  // Rows whose logits one step computes (0: max_slots); more than max_slots
  // where a sequence verifies a speculative draft.
  int max_logit_rows = 0;
  // The fewest one-row segments for which a mixed step (one that also
  // carries longer segments) runs them as a pass of their own padded to
  // their decode bucket (engine/model/step_split.h); nullopt asks the
  // backend (Backend::MixedStepGraphRows), 0 never splits.
  std::optional<int> mixed_step_graph_rows;
};

// The allowed-id bitmasks of a step's constrained sample rows
// (SampleRowsParams::masks), and what fills them.
struct SampleMasks {
  const uint32_t* words = nullptr;
  int32_t words_per_row = 0;
  std::function<void()> fill;
};

class Model {
 public:
  // Builds the model of `dir`'s config.json from its weights, every tensor
  // used, then closes the weights (the backend holds its own copies).
  static absl::StatusOr<std::unique_ptr<Model>> Load(ModelDir& dir,
                                                     Backend& backend,
                                                     const ModelLimits& limits);
  // The same from a directory's path (ModelDir::Open).
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& dir,
                                                     Backend& backend,
                                                     const ModelLimits& limits);

  // Runs one packed step: the rows' ids split into segments, each segment's
  // state in its slot. Writes logits (host, [m, vocab_size]) for the rows
  // listed in logit_rows. Requires n <= max_rows_per_step and
  // m <= max_slots. A decode-only step (every segment one row that wants
  // logits) of a stack that needs no host round trip mid-step runs padded to
  // a decode bucket through Backend::RunCaptured, under the bucket's key. A
  // mixed step with at least mixed_step_graph_rows one-row segments runs
  // them so too, blocks only, under SplitPassKey(bucket), and its other
  // segments eagerly after; the head then runs over the rows in step order,
  // so the logits are those of one pass.
  absl::Status Forward(const StepRows& rows, float* logits);
  // The RunCaptured key of a mixed step's one-row pass: apart from the
  // decode-only step's, since that recording also runs the head.
  static int64_t SplitPassKey(int bucket) { return -int64_t{bucket}; }
  // Forward's step, then the backend samples the m logit rows itself
  // (Backend::SampleRows with sample_rows and seen_ids, host) instead of
  // copying them out: tokens[j] (host) is logit row j's token. For backends
  // whose SamplesOnDevice() is true. With a penalty `table` update (size >
  // 0) the rows index the backend's penalty table instead of seen_ids.
  //
  // Constrained rows (SampleRow::mask_row) read their bitmasks from
  // `masks`; its `fill` (when set) runs after the step's layers are
  // enqueued and before its sampling, so that on a backend that runs
  // asynchronously the host computes the masks while the device runs.
  absl::Status ForwardSample(const StepRows& rows, const SampleRow* sample_rows,
                             const int32_t* seen_ids, int32_t* tokens,
                             const SampleMasks& masks = {},
                             const PenaltyTableUpdate& table = {});
  // ForwardSample in two halves, for backends that pipeline steps
  // (Backend::PipelinesSteps): LaunchStep enqueues the step and its
  // sampling and returns; the matching WaitStep (in launch order, at most
  // two launches outstanding) returns once `tokens` holds the m tokens.
  // Rows may take their ids from the previous launch's tokens
  // (StepRows::fed_rows).
  absl::Status LaunchStep(const StepRows& rows, const SampleRow* sample_rows,
                          const int32_t* seen_ids, int32_t* tokens,
                          const PenaltyTableUpdate& table = {});
  absl::Status WaitStep();

  const ModelConfig& config() const { return config_; }
  SlotArena& arena() { return *arena_; }
  Backend& backend() const { return *backend_; }
  const ModelLimits& limits() const { return limits_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  int vocab_size() const { return static_cast<int>(config_.vocab_size); }
  // What a drafter that reads the target's hidden state (MtpDrafter) shares
  // with it: the last step's residual rows (device, [n, d_model], the rows of
  // the StepRows it ran, in op order until the next step's blocks write
  // them), the final norm that turns them into what the head reads, the
  // embedding table and the head.
  const float* step_residual() const {
    return static_cast<const float*>(residual_.get());
  }
  PreNorm& final_norm() { return final_norm_; }
  const Matrix& embed() const { return embed_; }
  const Matrix& head() const { return head_; }
  // Decode buckets in use; empty when steps are never padded (the stack has a
  // block that reads back to the host mid-step, or the backend has none).
  const std::vector<int>& decode_buckets() const { return buckets_; }

 private:
  Model() = default;
  // Checks the limits and runs Step, padded and captured when DecodeBucket
  // allows, or split in two passes when PlanStepSplit does; leaves the m
  // logit rows first in logits_, or in `head_out` (m rows, only where the
  // backend's memory is the host's and no step is padded).
  absl::Status Run(const StepRows& rows, float* head_out = nullptr);
  // Blocks, then Head, over residual_.
  absl::Status Step(const StepRows& rows, float* head_out = nullptr);
  // Embedding and blocks for the rows, into residual [n, d_model].
  absl::Status Blocks(const StepRows& rows, float* residual);
  // Final norm and head for the rows' logit rows of residual_; leaves them
  // in head_out, or in logits_ (device) when it is null.
  absl::Status Head(const StepRows& rows, float* head_out);
  // The two passes split_ planned, their rows gathered back into residual_
  // in step order, then Head.
  absl::Status RunSplit(const StepRows& rows, float* head_out);
  // The bucket a decode-only step pads to, or 0 to run it as it is.
  int DecodeBucket(const StepRows& rows) const;

  ModelConfig config_;
  ModelLimits limits_;
  Backend* backend_ = nullptr;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<SlotArena> arena_;
  Matrix embed_;  // [V, D]; the head when tied
  PreNorm final_norm_;
  Matrix head_;
  DeviceBuffer residual_, scratch_, gathered_, normed_, logits_;
  std::vector<int> buckets_;
  int64_t capture_base_ = 0;  // Backend::NewCaptureScope: our RunCaptured keys
  // The rows of a padded step; fixed addresses reused every step.
  StepRows padded_;
  // Mixed steps: the least one-row segments worth a pass (0: never), the
  // passes' rows and their residual rows ([largest bucket + rows, d_model],
  // allocated only with buckets).
  int split_rows_ = 0;
  StepSplit split_;
  DeviceBuffer split_residual_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_MODEL_MODEL_H_
