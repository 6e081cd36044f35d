// One engine step's rows, as the scheduler packs them and the model and its
// layers read them: the token ids, their split into segments (one run of
// rows per sequence, on that sequence's slot) and the rows whose logits are
// wanted. Host memory; the scheduler refills one instance every step.
#ifndef SEQBOAT_ENGINE_BACKEND_STEP_ROWS_H_
#define SEQBOAT_ENGINE_BACKEND_STEP_ROWS_H_

#include <cstdint>
#include <vector>

#include "engine/backend/segment.h"

namespace seqboat {

struct StepRows {
  std::vector<int32_t> ids;         // [n]
  std::vector<Segment> segs;        // runs of ids, in order
  std::vector<int32_t> logit_rows;  // [m], indices into ids
  // Pipelined steps: rows whose id the step before sampled and has not yet
  // brought to the host; ids[fed_rows[k]] is a placeholder for the token
  // at index fed_from[k] of that step's logit rows (EmbedParams::fed_*).
  std::vector<int32_t> fed_rows;
  std::vector<int32_t> fed_from;

  int n() const { return static_cast<int>(ids.size()); }
  int nsegs() const { return static_cast<int>(segs.size()); }
  int m() const { return static_cast<int>(logit_rows.size()); }
  void clear() {
    ids.clear();
    segs.clear();
    logit_rows.clear();
    fed_rows.clear();
    fed_from.clear();
  }
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_STEP_ROWS_H_
