#include "engine/round_threshold.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace seqboat {
namespace {

double MedianMs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Milliseconds `run` takes, `reps` times after one warm-up, as their median.
absl::StatusOr<double> TimeMs(int reps,
                              const std::function<absl::Status()>& run) {
  std::vector<double> ms;
  for (int r = 0; r <= reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(run());
    const std::chrono::duration<double, std::milli> took =
        std::chrono::steady_clock::now() - start;
    if (r > 0) ms.push_back(took.count());
  }
  return MedianMs(std::move(ms));
}

}  // namespace

double ExpectedRoundTokens(double acceptance, int32_t drafts) {
  double tokens = 0, taken = 1;
  for (int32_t i = 0; i <= drafts; ++i) {
    tokens += taken;
    taken *= acceptance;
  }
  return tokens;
}

std::string RoundThreshold::Describe() const {
  std::string out =
      absl::StrCat("speculation off above ", max_batch, " running sequences");
  for (const RoundTiming& t : timings) {
    absl::StrAppendFormat(&out,
                          "%s step at batch %d = %.3f ms, round of %d drafts "
                          "= %.3f ms (%.2fx)",
                          &t == &timings.front() ? ":" : ";", t.batch,
                          t.step_ms, drafts, t.round_ms,
                          t.step_ms > 0 ? t.round_ms / t.step_ms : 0.0);
  }
  absl::StrAppendFormat(&out, "; a round pays below %.2fx", expected_tokens);
  if (!cut_short.empty())
    absl::StrAppend(&out, "; not timed further: ", cut_short);
  return out;
}

RoundThreshold FindRoundThreshold(
    int32_t max_batch, int32_t drafts, double acceptance,
    const std::function<absl::StatusOr<RoundTiming>(int32_t batch)>& time) {
  RoundThreshold result;
  result.drafts = drafts;
  result.expected_tokens = ExpectedRoundTokens(acceptance, drafts);
  if (drafts <= 0) return result;
  for (int32_t b = 1; b <= max_batch; b *= 2) {
    absl::StatusOr<RoundTiming> t = time(b);
    if (!t.ok()) {
      result.cut_short = std::string(t.status().message());
      break;
    }
    result.timings.push_back(*t);
    if (t->round_ms >= result.expected_tokens * t->step_ms) break;
    result.max_batch = b;
  }
  return result;
}

absl::StatusOr<RoundTiming> TimeRounds(Model& model, int32_t batch,
                                       int32_t drafts, int reps) {
  SlotArena& arena = model.arena();
  if (arena.free_slots() < 2 * batch) {
    return absl::FailedPreconditionError(
        absl::StrCat("timing rounds at batch ", batch, " needs ", 2 * batch,
                     " free slots, ", arena.free_slots(), " are"));
  }
  std::vector<int> slots, spares;
  for (int32_t i = 0; i < batch; ++i) {
    slots.push_back(*arena.Acquire());
    spares.push_back(*arena.Acquire());
  }
  // Any ids the embedding has: the cost of a row does not depend on them.
  const int32_t vocab = model.vocab_size();
  auto id = [vocab](int32_t i) { return (i * 7 + 1) % vocab; };
  StepRows plain, round;
  for (int32_t i = 0; i < batch; ++i) {
    plain.logit_rows.push_back(plain.n());
    plain.segs.push_back({slots[i], plain.n(), 1});
    plain.ids.push_back(id(i));
    round.segs.push_back({slots[i], round.n(), 1});
    round.ids.push_back(id(i));
    round.segs.push_back({spares[i], round.n(), 1 + drafts});
    for (int32_t d = 0; d <= drafts; ++d) {
      round.logit_rows.push_back(round.n());
      round.ids.push_back(id(i + d));
    }
  }
  std::vector<float> logits(static_cast<size_t>(round.m()) * vocab);
  RoundTiming timing;
  timing.batch = batch;
  absl::StatusOr<double> step_ms =
      TimeMs(reps, [&] { return model.Forward(plain, logits.data()); });
  absl::StatusOr<double> round_ms = TimeMs(reps, [&] {
    for (int32_t i = 0; i < batch; ++i) arena.CopySlot(spares[i], slots[i]);
    return model.Forward(round, logits.data());
  });
  for (int32_t i = 0; i < batch; ++i) {
    arena.Release(slots[i]);
    arena.Release(spares[i]);
  }
  if (!step_ms.ok()) return step_ms.status();
  if (!round_ms.ok()) return round_ms.status();
  timing.step_ms = *step_ms;
  timing.round_ms = *round_ms;
  return timing;
}

RoundThreshold MeasureRoundThreshold(const EngineOptions& options,
                                     Model& model) {
  const int32_t drafts =
      std::min(options.speculative_auto_draft_tokens, options.max_draft_tokens);
  const int32_t most =
      std::min(kAutoSpeculativeMaxBatch, model.arena().free_slots() / 2);
  const auto start = std::chrono::steady_clock::now();
  return FindRoundThreshold(
      most, drafts, options.speculative_auto_acceptance,
      [&](int32_t batch) -> absl::StatusOr<RoundTiming> {
        const std::chrono::duration<double, std::milli> spent =
            std::chrono::steady_clock::now() - start;
        if (spent.count() > kRoundProbeBudgetMs) {
          return absl::DeadlineExceededError(
              absl::StrFormat("batch %d, the probe's %.0f s spent", batch,
                              kRoundProbeBudgetMs / 1000));
        }
        return TimeRounds(model, batch, drafts, 5);
      });
}

}  // namespace seqboat
