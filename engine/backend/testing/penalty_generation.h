// Long generations with penalties, drawn twice a step: by a reference
// backend from the full flat lists each Sampler writes anew
// (DescribeNext(&ids), complete rows) and by the backend under test from its
// penalty table, which takes only each step's writes (DescribeNext(tables),
// rows run ahead of their pending token as the engine's pipelined loop runs
// them). Slots restart (a cancel, then the slot's reuse by a new request
// with a prompt of its own), fork (a copy of another slot's sampler, as
// n > 1 and a prefix-cache restore start from a state made elsewhere), hold
// back their stop ids until min_new_tokens, and mix greedy and seeded rows
// with every penalty. Both draw from the same logits and the reference's
// token goes on, so the two must agree at every step.
#ifndef SEQBOAT_ENGINE_BACKEND_TESTING_PENALTY_GENERATION_H_
#define SEQBOAT_ENGINE_BACKEND_TESTING_PENALTY_GENERATION_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/penalty_table.h"
#include "engine/backend/sample_row.h"
#include "engine/backend/sampler.h"
#include "engine/backend/sampling_params.h"
#include "gtest/gtest.h"

namespace seqboat::penalty_generation {

struct Options {
  int vocab = 700;
  int slots = 6;
  int steps = 400;
  uint32_t seed = 1;
  // Rows whose decision lies within rounding of a boundary (a device's
  // exp may differ by an ulp) may be skipped: (raw logits, vocab, the
  // complete row, its flat ids).
  std::function<bool(const float*, int, const SampleRow&, const int32_t*)>
      near_boundary;
};

struct Tally {
  int64_t compared = 0, skipped = 0, mismatched = 0;
  int64_t ahead_rows = 0, restarts = 0, forks = 0;
  int64_t flat_ids = 0;      // ids the flat lists carried, all steps
  int64_t table_writes = 0;  // writes the table took, all steps
  int64_t tokens = 0;        // tokens drawn, prompts' ids observed
};

namespace internal {

struct Slot {
  std::unique_ptr<Sampler> sampler;
  int32_t pending = -1;  // drawn, not yet observed
  int32_t generated = 0;
  int32_t min_new = 0;
  int32_t length = 0;  // restarts once this many are generated
};

inline SamplingParams RandomParams(std::mt19937& rng) {
  SamplingParams p;
  p.seed = rng();
  switch (rng() % 5) {
    case 0:  // greedy with the repetition penalty
      p.repetition_penalty = 1.3f;
      break;
    case 1:  // seeded, top-k, frequency
      p.temperature = 0.8f;
      p.top_k = 40;
      p.frequency_penalty = 0.7f;
      break;
    case 2:  // seeded, top-p, all three penalties
      p.temperature = 1.1f;
      p.top_p = 0.9f;
      p.repetition_penalty = 1.2f;
      p.presence_penalty = 0.5f;
      p.frequency_penalty = 0.3f;
      break;
    case 3:  // greedy, presence only
      p.presence_penalty = 1.5f;
      break;
    default:  // no penalty: its rows write nothing
      p.temperature = 0.9f;
      p.min_p = 0.05f;
      break;
  }
  return p;
}

inline void Restart(Slot& s, std::mt19937& rng, int vocab, Tally* t) {
  s.sampler = std::make_unique<Sampler>(RandomParams(rng), vocab, false, 0);
  const int prompt = static_cast<int>(rng() % 300);
  for (int i = 0; i < prompt; ++i) {
    s.sampler->Observe(static_cast<int32_t>(rng() % vocab));
  }
  t->tokens += prompt;
  s.pending = -1;
  s.generated = 0;
  s.min_new = rng() % 3 == 0 ? static_cast<int32_t>(rng() % 20) + 2 : 0;
  if (s.min_new > 0) {
    s.sampler->Suppress({0, static_cast<int32_t>(rng() % vocab),
                         static_cast<int32_t>(rng() % vocab)});
  }
  s.length = 100 + static_cast<int32_t>(rng() % 500);
}

inline void Observe(Slot& s, int32_t token) {
  s.sampler->ObserveGenerated(token);
  s.sampler->CountDraw();
  ++s.generated;
  if (s.generated == s.min_new) s.sampler->Suppress({});
}

// Logits that favour a few ids, so that penalties decide draws.
inline std::vector<float> StepLogits(std::mt19937& rng, int m, int vocab) {
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(static_cast<size_t>(m) * vocab);
  for (float& l : logits) l = normal(rng);
  for (int j = 0; j < m; ++j) {
    for (int k = 0; k < 8; ++k) {
      logits[static_cast<size_t>(j) * vocab + (k * 37 + j) % vocab] += 4.0f;
    }
  }
  return logits;
}

inline std::vector<int32_t> Draw(Backend& be, const std::vector<float>& logits,
                                 int vocab, const std::vector<SampleRow>& rows,
                                 const int32_t* seen,
                                 const std::vector<int32_t>& pending,
                                 const PenaltyTableUpdate& table) {
  std::vector<int32_t> tokens(rows.size(), -1);
  absl::StatusOr<DeviceBuffer> dev_logits =
      be.Alloc(logits.size() * sizeof(float));
  absl::StatusOr<DeviceBuffer> dev_pending =
      be.Alloc(std::max<size_t>(pending.size(), 1) * sizeof(int32_t));
  EXPECT_TRUE(dev_logits.ok() && dev_pending.ok());
  if (!dev_logits.ok() || !dev_pending.ok()) return tokens;
  be.CopyToDevice(dev_logits->get(), logits.data(),
                  logits.size() * sizeof(float));
  if (!pending.empty()) {
    be.CopyToDevice(dev_pending->get(), pending.data(),
                    pending.size() * sizeof(int32_t));
  }
  SampleRowsParams p;
  p.logits = static_cast<const float*>(dev_logits->get());
  p.m = static_cast<int>(rows.size());
  p.vocab = vocab;
  p.rows = rows.data();
  p.seen_ids = seen;
  p.pending_tokens = static_cast<const int32_t*>(dev_pending->get());
  p.tokens = tokens.data();
  p.table = table;
  const absl::Status s = be.SampleRows(p);
  EXPECT_TRUE(s.ok()) << be.name() << ": " << s;
  return tokens;
}

}  // namespace internal

// Runs the generation; every disagreement is a test failure (and counted).
inline Tally Run(Backend& reference, Backend& under_test, const Options& o) {
  using internal::Slot;
  std::mt19937 rng(o.seed);
  Tally t;
  PenaltyTables tables;
  std::vector<Slot> slots(static_cast<size_t>(o.slots));
  for (Slot& s : slots) internal::Restart(s, rng, o.vocab, &t);
  std::vector<SampleRow> full_rows, table_rows;
  std::vector<int32_t> flat, pending;
  std::vector<bool> ahead(slots.size());
  for (int step = 0; step < o.steps; ++step) {
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& s = slots[i];
      if (s.generated >= s.length || rng() % 150 == 0) {
        internal::Restart(s, rng, o.vocab, &t);
        ++t.restarts;
      } else if (rng() % 200 == 0) {
        const Slot& from = slots[rng() % slots.size()];
        if (&from != &s) {
          // The copy goes on from the same state, pending token included.
          s.sampler = std::make_unique<Sampler>(*from.sampler);
          s.generated = from.generated;
          s.min_new = from.min_new;
          s.length = from.length;
          s.pending = from.pending;
          ++t.forks;
        }
      }
    }
    tables.BeginLaunch();
    full_rows.clear();
    table_rows.clear();
    flat.clear();
    pending.clear();
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& s = slots[i];
      // The engine's rule (Sequence::CanRunAhead): not when the pending
      // token lifts the min_new_tokens mask.
      ahead[i] =
          s.pending >= 0 && rng() % 3 != 0 && s.generated + 1 != s.min_new;
      if (s.pending >= 0 && !ahead[i]) {
        internal::Observe(s, s.pending);
        s.pending = -1;
      }
      SampleRow row = s.sampler->DescribeNext(&tables);
      if (ahead[i]) {
        ++row.step;
        if (s.sampler->CountsTokens()) {
          row.pending_from = static_cast<int32_t>(pending.size());
        }
        pending.push_back(s.pending);
        Sampler full = *s.sampler;
        full.ObserveGenerated(s.pending);
        full.CountDraw();
        full_rows.push_back(full.DescribeNext(&flat));
        ++t.ahead_rows;
      } else {
        full_rows.push_back(s.sampler->DescribeNext(&flat));
      }
      table_rows.push_back(row);
    }
    t.flat_ids += static_cast<int64_t>(flat.size());
    t.table_writes += tables.writes();
    const int m = static_cast<int>(slots.size());
    const std::vector<float> logits = internal::StepLogits(rng, m, o.vocab);
    const std::vector<int32_t> want = internal::Draw(
        reference, logits, o.vocab, full_rows, flat.data(), {}, {});
    const std::vector<int32_t> got =
        internal::Draw(under_test, logits, o.vocab, table_rows, nullptr,
                       pending, tables.update());
    for (int j = 0; j < m; ++j) {
      if (o.near_boundary &&
          o.near_boundary(logits.data() + static_cast<size_t>(j) * o.vocab,
                          o.vocab, full_rows[j], flat.data())) {
        ++t.skipped;
      } else {
        ++t.compared;
        if (want[j] != got[j]) {
          ++t.mismatched;
          ADD_FAILURE() << "step " << step << " slot " << j << ": reference "
                        << want[j] << ", " << under_test.name() << " " << got[j]
                        << " (seen " << full_rows[j].seen_count << ", counted "
                        << full_rows[j].counted_count << ", suppressed "
                        << full_rows[j].suppressed_count << ", ahead "
                        << ahead[j] << ")";
        }
      }
      Slot& s = slots[static_cast<size_t>(j)];
      if (ahead[j]) internal::Observe(s, s.pending);
      s.pending = want[j];
      ++t.tokens;
    }
  }
  return t;
}

}  // namespace seqboat::penalty_generation

#endif  // SEQBOAT_ENGINE_BACKEND_TESTING_PENALTY_GENERATION_H_
