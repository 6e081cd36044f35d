// How a mixed step (one-row segments beside longer ones) runs as two passes
// over the blocks: its one-row segments padded to a decode bucket, a pass a
// backend replays from a recording (Backend::RunCaptured), and the rest
// eagerly. The passes write their residual rows to one buffer, the padded
// pass at [0, bucket) and the rest from `bucket` on; `order` then gathers
// them back into the step's row order, so the head and the caller see the
// step as if it had run in one pass.
#ifndef SEQBOAT_ENGINE_MODEL_STEP_SPLIT_H_
#define SEQBOAT_ENGINE_MODEL_STEP_SPLIT_H_

#include <cstdint>
#include <vector>

#include "engine/backend/step_rows.h"

namespace seqboat {

struct StepSplit {
  // The one-row segments, rows renumbered in step order from 0, padded to
  // `bucket` rows with zero-length segments on slot 0; no logit rows (the
  // head runs after both passes).
  StepRows decode;
  // Every other segment, rows renumbered from 0; no logit rows.
  StepRows rest;
  int bucket = 0;
  // [n]: the row of the two passes' buffer that holds step row r.
  std::vector<int32_t> order;
  // Reused by PlanStepSplit: which slots the one-row segments hold.
  std::vector<uint8_t> slot_taken;
};

// Fills `split` for `rows` and returns true when the step is worth two
// passes: `buckets` (ascending) is not empty, at least `min_decode_rows`
// (>= 1) of its segments are one row long and a bucket holds them all, the
// segments tile the rows in order, and no slot holds both a one-row segment
// and another one (the passes would otherwise reorder that slot's updates).
// Fed rows (StepRows::fed_rows) follow their row into its pass.
bool PlanStepSplit(const StepRows& rows, const std::vector<int>& buckets,
                   int min_decode_rows, StepSplit& split);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_MODEL_STEP_SPLIT_H_
