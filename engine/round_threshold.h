// The batch above which speculative rounds stop paying, measured on the
// loaded model (EngineOptions::speculative_max_batch = auto). A round of k
// drafts at batch b runs b unfed rows in the slots and b segments of 1 + k
// rows in spare slots; on a device bound by reading the weights that costs
// about what a plain step does, and less than the 1 + a + ... + a^k tokens
// it yields at acceptance a. Once the extra rows make the step bound by
// compute, the round costs more than those tokens and speculation is off.
#ifndef SEQBOAT_ENGINE_ROUND_THRESHOLD_H_
#define SEQBOAT_ENGINE_ROUND_THRESHOLD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine_options.h"
#include "engine/model/model.h"

namespace seqboat {

// One batch's medians: a plain decode step and a round of `drafts` drafts
// for every sequence.
struct RoundTiming {
  int32_t batch = 0;
  double step_ms = 0;
  double round_ms = 0;
};

struct RoundThreshold {
  int32_t max_batch = 0;             // rounds run while at most this many run
  int32_t drafts = 0;                // the round probed
  double expected_tokens = 0;        // what it yields at the assumed acceptance
  std::vector<RoundTiming> timings;  // each batch measured, in order
  std::string cut_short;  // why a batch could not be timed ("": none was)
  // "speculation off above N running sequences: step at batch b = x ms,
  // round of k = y ms (r x) ..." for the log.
  std::string Describe() const;
};

// Tokens a round of `drafts` yields when each draft token is taken with
// probability `acceptance` given the ones before it were: the round's own
// draw plus the expected run of matches.
double ExpectedRoundTokens(double acceptance, int32_t drafts);

// Times batches 1, 2, 4, ... up to `max_batch` with `time` and stops at the
// first whose round costs at least expected_tokens plain steps; max_batch of
// the result is the largest batch before it (0 when batch 1 already fails).
// A batch `time` cannot measure ends the search there too.
RoundThreshold FindRoundThreshold(
    int32_t max_batch, int32_t drafts, double acceptance,
    const std::function<absl::StatusOr<RoundTiming>(int32_t batch)>& time);

// Medians of `reps` plain steps and rounds of `drafts` at `batch` on the
// model's own free slots (2 * batch of them, acquired zeroed and released
// after), after a warm-up of each. For the engine before it serves:
// nothing else may use the model meanwhile.
absl::StatusOr<RoundTiming> TimeRounds(Model& model, int32_t batch,
                                       int32_t drafts, int reps);

// What the auto probe may spend at start-up: batches past it are not timed
// (a large model on the CPU takes seconds a batch), and the threshold is the
// largest batch timed that paid.
inline constexpr double kRoundProbeBudgetMs = 5000;

// The threshold for speculative_max_batch = auto: FindRoundThreshold over
// TimeRounds (five of each) with the options' auto draft tokens (at most
// max_draft_tokens) and acceptance, up to kAutoSpeculativeMaxBatch and
// half the slots (a speculating sequence holds two). max_draft_tokens = 0
// measures nothing: speculation is off.
RoundThreshold MeasureRoundThreshold(const EngineOptions& options,
                                     Model& model);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_ROUND_THRESHOLD_H_
