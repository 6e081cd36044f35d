// Sampling cases that the GPU parity test (kernels/sampling_ops_gpu_test.cc)
// and the emulation test (kernels/emu/sampling_kernels_emu_test.cc) both run:
// parameter sets, rows of logits of several shapes, random batches of rows
// as Samplers describe them, and the comparison of SampleRows' tokens with
// the host Sampler's (the CPU backend), which may skip rows that lie within
// rounding of a decision boundary: weights may differ by an ulp between
// glibc's and CUDA's exp, and sums run in another order.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_SAMPLING_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_SAMPLING_CASES_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/backend/sample_row.h"
#include "engine/backend/sampler.h"
#include "engine/backend/sampling_math.h"
#include "engine/backend/sampling_params.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity::sampling_cases {

// Two weights may differ by an ulp (2^-23 relative), so no partial sum can
// move by more than that fraction of itself; twice that, with room to spare.
inline constexpr double kMargin = 4e-7;

// Whether some decision of the host Sampler on this row (top-p cut, min-p
// test, the draw) lies within kMargin of flipping. Mirrors sampler.cc; the
// rankings themselves compare identical floats and cannot flip.
inline bool NearBoundary(const float* raw, int vocab, float logit_scale,
                         const SampleRow& row, const int32_t* seen_ids) {
  if (sampling::IsGreedy(row.temperature, row.top_k)) return false;
  const int v = std::min(row.valid_vocab, vocab);
  if (v <= 0) return false;
  std::vector<float> pen(static_cast<size_t>(v));
  for (int i = 0; i < v; ++i) {
    const float l = logit_scale != 1.0f ? raw[i] * logit_scale : raw[i];
    pen[i] = sampling::SanitizeLogit(l);
  }
  if (row.repetition_penalty != 1.0f) {
    for (int j = 0; j < row.seen_count; ++j) {
      const int32_t id = seen_ids[row.seen_offset + j];
      if (id >= 0 && id < v) {
        pen[id] = sampling::PenalizeLogit(pen[id], row.repetition_penalty);
      }
    }
  }
  if (row.presence_penalty != 0.0f || row.frequency_penalty != 0.0f) {
    for (int j = 0; j < row.counted_count; ++j) {
      const int32_t* pair = seen_ids + row.counted_offset + 2 * j;
      if (pair[0] >= 0 && pair[0] < v) {
        pen[pair[0]] = sampling::PenalizeCount(
            pen[pair[0]], pair[1], row.presence_penalty, row.frequency_penalty);
      }
    }
  }
  for (int j = 0; j < row.suppressed_count; ++j) {
    const int32_t id = seen_ids[row.suppressed_offset + j];
    if (id >= 0 && id < v) pen[id] = -INFINITY;
  }
  struct C {
    float l;
    int32_t id;
  };
  const auto ranks_above = [](const C& a, const C& b) {
    return sampling::RanksAbove(a.l, a.id, b.l, b.id);
  };
  const float inv_t = 1.0f / row.temperature;
  std::vector<C> c;
  for (int i = 0; i < v; ++i) {
    const float l = pen[i] * inv_t;
    if (l > -INFINITY) c.push_back({l, i});
  }
  if (c.empty()) return false;
  bool ranked = false;
  if (row.top_k > 0 && static_cast<size_t>(row.top_k) < c.size()) {
    std::partial_sort(c.begin(), c.begin() + row.top_k, c.end(), ranks_above);
    c.resize(static_cast<size_t>(row.top_k));
    ranked = true;
  }
  float max_l = c[0].l;
  for (const C& x : c) max_l = std::max(max_l, x.l);
  const auto w = [&](const C& x) {
    return static_cast<double>(sampling::SoftmaxWeight(x.l, max_l));
  };
  if (row.top_p < 1.0f) {
    if (!ranked) std::sort(c.begin(), c.end(), ranks_above);
    double total = 0.0;
    for (const C& x : c) total += w(x);
    const double target = static_cast<double>(row.top_p) * total;
    double cum = 0.0;
    size_t keep = c.size();
    for (size_t j = 0; j < c.size(); ++j) {
      cum += w(c[j]);
      if (std::fabs(cum - target) <= kMargin * total) return true;
      if (cum >= target) {
        keep = j + 1;
        break;
      }
    }
    c.resize(keep);
  }
  if (row.min_p > 0.0f) {
    std::vector<C> kept;
    for (const C& x : c) {
      const double wx = w(x);
      if (std::fabs(wx - row.min_p) <= kMargin * row.min_p) return true;
      if (wx >= row.min_p) kept.push_back(x);
    }
    c = kept;
  }
  double total = 0.0;
  for (const C& x : c) total += w(x);
  const double target =
      sampling::UniformFromBits(sampling::CounterRandom(row.seed, row.step)) *
      total;
  double cum = 0.0;
  for (const C& x : c) {
    cum += w(x);
    if (std::fabs(cum - target) <= kMargin * total) return true;
    if (cum > target) break;
  }
  return false;
}

// A parameter set: temperature, top-k, top-p, min-p and the repetition,
// presence and frequency penalties.
inline SamplingParams Params(float t, int k, float p, float min_p,
                             float penalty, float presence = 0.0f,
                             float frequency = 0.0f) {
  SamplingParams s;
  s.temperature = t;
  s.top_k = k;
  s.top_p = p;
  s.min_p = min_p;
  s.repetition_penalty = penalty;
  s.presence_penalty = presence;
  s.frequency_penalty = frequency;
  return s;
}

inline std::vector<SamplingParams> ParamSets() {
  std::vector<SamplingParams> sets;
  const auto add = [&](auto... args) { sets.push_back(Params(args...)); };
  add(0.0f, 0, 1.0f, 0.0f, 1.0f);   // greedy
  add(0.0f, 0, 1.0f, 0.0f, 1.5f);   // greedy with a penalty
  add(1.0f, 1, 1.0f, 0.0f, 1.0f);   // top-k 1 is greedy
  add(1.0f, 0, 1.0f, 0.0f, 1.0f);   // temperature only
  add(1e-3f, 0, 1.0f, 0.0f, 1.0f);  // sharp but sampled
  add(0.6f, 5, 1.0f, 0.0f, 1.0f);   // top-k
  add(1.0f, 64, 1.0f, 0.0f, 1.0f);
  add(1.3f, 2000, 1.0f, 0.0f, 1.0f);  // top-k beyond a small vocabulary
  add(1.0f, 0, 0.5f, 0.0f, 1.0f);     // top-p
  add(0.8f, 0, 0.9f, 0.0f, 1.0f);
  add(1.0f, 0, 0.99f, 0.0f, 1.0f);
  add(1.0f, 0, 1.0f, 0.05f, 1.0f);  // min-p
  add(1.5f, 0, 1.0f, 0.3f, 1.0f);
  add(1.0f, 0, 1.0f, 0.0f, 1.3f);     // penalty
  add(0.9f, 40, 0.9f, 0.02f, 0.8f);   // everything, penalty below 1
  add(1.1f, 300, 0.95f, 0.0f, 1.2f);  // top-k then top-p
  // Presence and frequency penalties (over the generated ids), alone, with
  // the repetition penalty, negative, greedy.
  add(1.0f, 0, 1.0f, 0.0f, 1.0f, 0.5f, 0.3f);
  add(0.0f, 0, 1.0f, 0.0f, 1.0f, 1.5f, 0.0f);
  add(0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.7f);
  add(0.8f, 20, 0.9f, 0.0f, 1.2f, -0.5f, 0.7f);
  add(1.2f, 0, 1.0f, 0.05f, 1.0f, 0.0f, -1.0f);
  add(0.9f, 0, 0.8f, 0.0f, 1.0f, 2.0f, 2.0f);
  return sets;
}

// A row of logits of one of several shapes: smooth, many exact ties, ties
// among the best, impossible (-inf) and NaN entries, padding ids with huge
// logits.
inline std::vector<float> RowLogits(std::mt19937& rng, int vocab, int kind,
                                    int valid) {
  std::normal_distribution<float> normal(0.0f, kind % 2 == 0 ? 1.0f : 3.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> l(static_cast<size_t>(vocab));
  for (float& x : l) x = normal(rng);
  if (kind == 2 || kind == 3) {
    for (float& x : l) x = std::round(x * 4.0f) / 4.0f;  // ties everywhere
  }
  if (kind == 4) {
    for (float& x : l) {
      if (unit(rng) < 0.1f) x = -INFINITY;
    }
    l[static_cast<size_t>(vocab / 3)] = NAN;
  }
  if (kind == 5) {
    // Exact ties among the best: the ranking breaks them by id.
    std::uniform_int_distribution<int> id(0, vocab - 1);
    for (int i = 0; i < 8; ++i) l[id(rng)] = 4.0f;
    for (int i = 0; i < 30; ++i) l[id(rng)] = 2.5f;
  }
  for (int i = valid; i < vocab; ++i) l[i] = 50.0f;
  return l;
}

struct Tally {
  int compared = 0;
  int skipped = 0;
  int mismatched = 0;
};

// One SampleRows call's inputs.
struct Batch {
  int vocab = 0;
  std::vector<float> logits;  // [rows.size(), vocab]
  std::vector<SampleRow> rows;
  std::vector<int32_t> seen;
  // The launch before's tokens, which rows run ahead name (pending_from).
  std::vector<int32_t> pending;
  // The same rows as the host describes them once it observed the pending
  // tokens (complete lists, no pending_from): what the rows above must draw.
  std::vector<SampleRow> full_rows;
  std::vector<int32_t> full_seen;
  // Constrained rows' bitmasks (SampleRow::mask_row), mask_words each.
  std::vector<uint32_t> masks;
  int32_t mask_words = 0;
  int m() const { return static_cast<int>(rows.size()); }
};

// m random rows: parameters from `sets` with random seeds and steps, logits
// of every RowLogits kind, padding ids on every fourth row, an empty row 5,
// up to max_seen observed prompt ids (some out of range, repeats) a row,
// up to max_seen / 2 generated ids, many of them generated many times, and
// on every third row a few suppressed ids (min_new_tokens' EOS and stop
// ids), among them the row's best. Every other row runs ahead of a pending
// token (SampleRow::pending_from): one of its best ids, likely counted
// already, or any id of the row.
inline Batch MakeBatch(std::mt19937& rng, int vocab, int m, int max_seen = 300,
                       const std::vector<SamplingParams>& sets = ParamSets()) {
  std::uniform_int_distribution<int> pick(0, static_cast<int>(sets.size()) - 1);
  std::uniform_int_distribution<int> kind(0, 5);
  std::uniform_int_distribution<uint64_t> any;
  Batch b;
  b.vocab = vocab;
  for (int j = 0; j < m; ++j) {
    SamplingParams params = sets[pick(rng)];
    params.seed = any(rng);
    int valid = vocab;
    if (j % 4 == 3) valid = vocab - 17;  // padding ids
    if (j == 5) valid = 0;               // an empty row
    const std::vector<float> row_logits =
        RowLogits(rng, vocab, kind(rng), std::max(valid, 0));
    b.logits.insert(b.logits.end(), row_logits.begin(), row_logits.end());
    Sampler sampler(params, valid, false, 0);
    std::uniform_int_distribution<int> count(0, max_seen);
    std::uniform_int_distribution<int32_t> id(-3, vocab + 3);
    for (int s = count(rng); s > 0; --s) sampler.Observe(id(rng));
    std::uniform_int_distribution<int32_t> few(-2, std::min(vocab, 40));
    for (int s = count(rng) / 2; s > 0; --s) {
      sampler.ObserveGenerated(s % 2 == 0 ? few(rng) : id(rng));
    }
    // A model's output repeats its likeliest tokens: some of the row's best
    // ids were generated a few times, so the penalties decide draws.
    int32_t pending = -1;
    if (valid > 0) {
      std::vector<int32_t> best(static_cast<size_t>(valid));
      for (int32_t i = 0; i < valid; ++i) best[i] = i;
      const size_t top = std::min<size_t>(6, best.size());
      std::partial_sort(best.begin(), best.begin() + top, best.end(),
                        [&](int32_t a, int32_t b) {
                          return sampling::RanksAbove(
                              sampling::SanitizeLogit(row_logits[a]), a,
                              sampling::SanitizeLogit(row_logits[b]), b);
                        });
      std::uniform_int_distribution<int> times(0, 3);
      for (size_t i = 0; i < top; ++i) {
        for (int t = times(rng); t > 0; --t) sampler.ObserveGenerated(best[i]);
      }
      if (j % 3 == 1) {
        std::vector<int32_t> held = {best[0], id(rng), id(rng), best[0]};
        if (top > 2) held.push_back(best[2]);
        sampler.Suppress(held);
      }
      if (j % 2 == 0) {
        std::uniform_int_distribution<int32_t> in_row(0, valid - 1);
        pending = (j / 2) % 2 == 0 ? best[times(rng) % top] : in_row(rng);
      }
    }
    SampleRow row = sampler.DescribeNext(&b.seen);
    row.step = any(rng) % 1000000;
    Sampler full = sampler;
    if (pending >= 0) {
      row.pending_from = static_cast<int32_t>(b.pending.size());
      b.pending.push_back(pending);
      full.ObserveGenerated(pending);
    }
    SampleRow complete = full.DescribeNext(&b.full_seen);
    complete.step = row.step;
    b.rows.push_back(row);
    b.full_rows.push_back(complete);
  }
  return b;
}

// The tokens one SampleRows call on `be` picks for `rows` of `logits`
// ([rows.size(), vocab]) with the ids `seen` their rows refer to and the
// `pending` tokens (copied to the backend's memory) rows run ahead of.
inline absl::StatusOr<std::vector<int32_t>> SampleOn(
    Backend& be, const std::vector<float>& logits, int vocab, float logit_scale,
    const std::vector<SampleRow>& rows, const std::vector<int32_t>& seen,
    const std::vector<int32_t>& pending = {},
    const std::vector<uint32_t>& masks = {}, int32_t mask_words = 0) {
  Array a(be, logits);
  DeviceBuffer pending_dev;
  if (!pending.empty()) {
    const size_t bytes = pending.size() * sizeof(int32_t);
    absl::StatusOr<DeviceBuffer> buf = be.Alloc(bytes);
    if (!buf.ok()) return buf.status();
    pending_dev = *std::move(buf);
    be.CopyToDevice(pending_dev.get(), pending.data(), bytes);
  }
  std::vector<int32_t> tokens(rows.size(), -1);
  SampleRowsParams sample;
  sample.logits = a.get();
  sample.m = static_cast<int>(rows.size());
  sample.vocab = vocab;
  sample.logit_scale = logit_scale;
  sample.rows = rows.data();
  sample.seen_ids = seen.data();
  sample.pending_tokens = static_cast<const int32_t*>(pending_dev.get());
  sample.tokens = tokens.data();
  sample.masks = masks.empty() ? nullptr : masks.data();
  sample.mask_words = mask_words;
  const absl::Status s = be.SampleRows(sample);
  if (!s.ok()) return s;
  return tokens;
}

// One SampleRows call of the batch on both backends; rows whose tokens
// differ fail the test, apart from rows NearBoundary skips when
// skip_near_boundary (counted in the tally).
inline void CompareBatch(Backend& host, Backend& device, const Batch& b,
                         float logit_scale, Tally* tally,
                         bool skip_near_boundary = true) {
  const int m = b.m();
  const int vocab = b.vocab;
  std::vector<std::vector<int32_t>> got;
  for (Backend* be : {&host, &device}) {
    absl::StatusOr<std::vector<int32_t>> tokens =
        SampleOn(*be, b.logits, vocab, logit_scale, b.rows, b.seen, b.pending,
                 b.masks, b.mask_words);
    ASSERT_TRUE(tokens.ok()) << be->name() << ": " << tokens.status();
    got.push_back(*std::move(tokens));
  }
  // A row run ahead draws what the complete row draws, on the host exactly.
  // (Batches made by hand have only complete rows.)
  const bool by_hand = b.full_rows.empty();
  const std::vector<SampleRow>& full_rows = by_hand ? b.rows : b.full_rows;
  const std::vector<int32_t>& full_seen = by_hand ? b.seen : b.full_seen;
  absl::StatusOr<std::vector<int32_t>> complete =
      SampleOn(host, b.logits, vocab, logit_scale, full_rows, full_seen, {},
               b.masks, b.mask_words);
  ASSERT_TRUE(complete.ok()) << complete.status();
  EXPECT_EQ(got[0], *complete) << "rows with a pending token";
  for (int j = 0; j < m; ++j) {
    const SampleRow& r = b.rows[j];
    const int v = std::min(r.valid_vocab, vocab);
    EXPECT_TRUE(got[1][j] == 0 || (got[1][j] >= 0 && got[1][j] < v))
        << "row " << j << " token " << got[1][j];
    if (skip_near_boundary &&
        NearBoundary(b.logits.data() + static_cast<size_t>(j) * vocab, vocab,
                     logit_scale, full_rows[j], full_seen.data())) {
      ++tally->skipped;
      continue;
    }
    ++tally->compared;
    if (got[0][j] != got[1][j]) {
      ++tally->mismatched;
      ADD_FAILURE() << "vocab " << vocab << " row " << j << ": host "
                    << got[0][j] << ", " << device.name() << " " << got[1][j]
                    << " (t " << r.temperature << ", k " << r.top_k << ", p "
                    << r.top_p << ", min_p " << r.min_p << ", penalty "
                    << r.repetition_penalty << ", presence "
                    << r.presence_penalty << ", frequency "
                    << r.frequency_penalty << ", seen " << r.seen_count
                    << ", counted " << r.counted_count << ", suppressed "
                    << r.suppressed_count << ", pending "
                    << (r.pending_from >= 0 ? b.pending[r.pending_from] : -1)
                    << ", seed " << r.seed << ", step " << r.step << ")";
    }
  }
}

// One SampleRows call of m random rows (MakeBatch) on both backends.
inline void CheckBatch(Backend& host, Backend& device, std::mt19937& rng,
                       int vocab, int m, float logit_scale, Tally* tally,
                       int max_seen = 300,
                       const std::vector<SamplingParams>& sets = ParamSets(),
                       bool skip_near_boundary = true) {
  const Batch b = MakeBatch(rng, vocab, m, max_seen, sets);
  CompareBatch(host, device, b, logit_scale, tally, skip_near_boundary);
}

// Penalised ids by the thousand, as long contexts have them: one batch of m
// rows whose parameter sets are those of ParamSets that `penalised` keeps,
// with up to max_seen observed ids a row, on both backends.
inline Tally CheckPenalisedBatch(
    Backend& host, Backend& device, int vocab, int m, int max_seen,
    const std::function<bool(const SamplingParams&)>& penalised,
    bool skip_near_boundary) {
  std::mt19937 rng(4);
  std::vector<SamplingParams> sets;
  for (const SamplingParams& s : ParamSets()) {
    if (penalised(s)) sets.push_back(s);
  }
  Tally t;
  CheckBatch(host, device, rng, vocab, m, 1.0f, &t, max_seen, sets,
             skip_near_boundary);
  return t;
}

inline void ExpectFewSkipped(const Tally& t) {
  EXPECT_EQ(t.mismatched, 0);
  EXPECT_GT(t.compared, 0);
  // Near-boundary rows are a few percent (mostly flat rows of the large
  // vocabulary, whose draw intervals are narrow); many more would mean the
  // check hides a bug.
  EXPECT_LE(t.skipped * 10, t.compared + t.skipped)
      << t.skipped << " skipped of " << t.compared + t.skipped;
}

}  // namespace seqboat::parity::sampling_cases

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_SAMPLING_CASES_H_
