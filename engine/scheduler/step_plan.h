// Continuous batching, the packing half: which rows go into the next engine
// step. Every sequence past its prompt decodes one token; prompts still being
// read get chunks, oldest admission first, while the step's token budget
// lasts, so a long prompt never stalls the others.
#ifndef SEQBOAT_ENGINE_SCHEDULER_STEP_PLAN_H_
#define SEQBOAT_ENGINE_SCHEDULER_STEP_PLAN_H_

#include <cstdint>
#include <vector>

namespace seqboat {

// What the planner needs to know of one running sequence.
struct SequenceView {
  int32_t prompt_len = 0;
  int32_t prefilled = 0;  // prompt tokens already run through the model
  // A prefill chunk ends here if it would cross it (-1: nowhere), so the
  // state can be snapshotted at exactly this many prompt tokens.
  int32_t pause_at = -1;
  // Sits this step out (pipelined steps: it waits for a token or a
  // snapshot of the step in flight).
  bool hold = false;
};

struct PlannedRun {
  int seq = 0;                // index into the views
  int32_t prompt_from = 0;    // first prompt position of a prefill chunk
  int32_t len = 0;            // rows; 1 for decode
  bool decode = false;        // feeds the last sampled token
  bool wants_logits = false;  // decode, or a chunk that ends the prompt
};

struct StepPlan {
  std::vector<PlannedRun> runs;  // decodes first, then prefill chunks
  int32_t rows = 0;
};

// token_budget bounds prefill rows; decodes always run (a running sequence is
// never starved), so rows <= token_budget + number of decoding sequences.
StepPlan PlanStep(const std::vector<SequenceView>& seqs, int32_t token_budget);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SCHEDULER_STEP_PLAN_H_
