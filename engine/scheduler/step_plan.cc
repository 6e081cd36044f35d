#include "engine/scheduler/step_plan.h"

#include <algorithm>

namespace seqboat {

StepPlan PlanStep(const std::vector<SequenceView>& seqs, int32_t token_budget) {
  StepPlan plan;
  for (int i = 0; i < static_cast<int>(seqs.size()); ++i) {
    if (seqs[i].hold) continue;
    if (seqs[i].prefilled >= seqs[i].prompt_len) {
      plan.runs.push_back({i, 0, 1, /*decode=*/true, /*wants_logits=*/true});
      ++plan.rows;
    }
  }
  int32_t budget = std::max<int32_t>(0, token_budget - plan.rows);
  for (int i = 0; i < static_cast<int>(seqs.size()) && budget > 0; ++i) {
    const SequenceView& s = seqs[i];
    if (s.hold || s.prefilled >= s.prompt_len) continue;
    int32_t len = std::min(budget, s.prompt_len - s.prefilled);
    if (s.pause_at > s.prefilled && s.pause_at < s.prefilled + len) {
      len = s.pause_at - s.prefilled;
    }
    plan.runs.push_back(
        {i, s.prefilled, len, false, s.prefilled + len == s.prompt_len});
    plan.rows += len;
    budget -= len;
  }
  return plan;
}

}  // namespace seqboat
