// SampleRows on CUDA picks the host Sampler's token (the CPU backend's
// SampleRows) for greedy rows always, and for seeded rows with every filter
// whenever no decision of the row lies within rounding of a boundary: weights
// may differ by an ulp between glibc's and CUDA's exp, and sums run in
// another order, so rows that close to a top-p, min-p or draw boundary are
// counted, not compared.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/sampling/sample_row.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/sampling_math.h"
#include "kernels/gpu_test_util.h"

namespace seqboat::gpu_test {
namespace {

// Two weights may differ by an ulp (2^-23 relative), so no partial sum can
// move by more than that fraction of itself; twice that, with room to spare.
constexpr double kMargin = 4e-7;

// Whether some decision of the host Sampler on this row (top-p cut, min-p
// test, the draw) lies within kMargin of flipping. Mirrors sampler.cc; the
// rankings themselves compare identical floats and cannot flip.
bool NearBoundary(const float* raw, int vocab, float logit_scale,
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

std::vector<SamplingParams> ParamSets() {
  std::vector<SamplingParams> sets;
  const auto add = [&](float t, int k, float p, float min_p, float penalty) {
    SamplingParams s;
    s.temperature = t;
    s.top_k = k;
    s.top_p = p;
    s.min_p = min_p;
    s.repetition_penalty = penalty;
    sets.push_back(s);
  };
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
  return sets;
}

// A row of logits of one of several shapes: smooth, many exact ties, ties
// among the best, impossible (-inf) and NaN entries, padding ids with huge
// logits.
std::vector<float> RowLogits(std::mt19937& rng, int vocab, int kind,
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

// One SampleRows call of m random rows on both backends.
void CheckBatch(Pair& p, std::mt19937& rng, int vocab, int m, float logit_scale,
                Tally* tally, int max_seen = 300,
                const std::vector<SamplingParams>& sets = ParamSets()) {
  std::uniform_int_distribution<int> pick(0, static_cast<int>(sets.size()) - 1);
  std::uniform_int_distribution<int> kind(0, 5);
  std::uniform_int_distribution<uint64_t> any;
  std::vector<float> logits;
  std::vector<SampleRow> rows;
  std::vector<int32_t> seen;
  for (int j = 0; j < m; ++j) {
    SamplingParams params = sets[pick(rng)];
    params.seed = any(rng);
    int valid = vocab;
    if (j % 4 == 3) valid = vocab - 17;  // padding ids
    if (j == 5) valid = 0;               // an empty row
    const std::vector<float> row_logits =
        RowLogits(rng, vocab, kind(rng), std::max(valid, 0));
    logits.insert(logits.end(), row_logits.begin(), row_logits.end());
    Sampler sampler(params, valid, false, 0);
    std::uniform_int_distribution<int> count(0, max_seen);
    std::uniform_int_distribution<int32_t> id(-3, vocab + 3);
    for (int s = count(rng); s > 0; --s) sampler.Observe(id(rng));
    SampleRow row = sampler.DescribeNext(&seen);
    row.step = any(rng) % 1000000;
    rows.push_back(row);
  }
  std::vector<std::vector<int32_t>> got;
  for (Backend* be : {p.cpu.get(), p.cuda.get()}) {
    Array a(*be, logits);
    std::vector<int32_t> tokens(static_cast<size_t>(m), -1);
    const absl::Status s =
        be->SampleRows(a.get(), m, vocab, logit_scale, rows.data(), seen.data(),
                       tokens.data());
    ASSERT_TRUE(s.ok()) << be->name() << ": " << s;
    got.push_back(tokens);
  }
  for (int j = 0; j < m; ++j) {
    const SampleRow& r = rows[j];
    const int v = std::min(r.valid_vocab, vocab);
    EXPECT_TRUE(got[1][j] == 0 || (got[1][j] >= 0 && got[1][j] < v))
        << "row " << j << " token " << got[1][j];
    if (NearBoundary(logits.data() + static_cast<size_t>(j) * vocab, vocab,
                     logit_scale, r, seen.data())) {
      ++tally->skipped;
      continue;
    }
    ++tally->compared;
    if (got[0][j] != got[1][j]) {
      ++tally->mismatched;
      ADD_FAILURE() << "vocab " << vocab << " row " << j << ": host "
                    << got[0][j] << ", cuda " << got[1][j] << " (t "
                    << r.temperature << ", k " << r.top_k << ", p " << r.top_p
                    << ", min_p " << r.min_p << ", penalty "
                    << r.repetition_penalty << ", seen " << r.seen_count
                    << ", seed " << r.seed << ", step " << r.step << ")";
    }
  }
}

void ExpectFewSkipped(const Tally& t) {
  EXPECT_EQ(t.mismatched, 0);
  EXPECT_GT(t.compared, 0);
  // Near-boundary rows are a few percent (mostly flat rows of the large
  // vocabulary, whose draw intervals are narrow); many more would mean the
  // check hides a bug.
  EXPECT_LE(t.skipped * 10, t.compared + t.skipped)
      << t.skipped << " skipped of " << t.compared + t.skipped;
}

TEST(SamplingOpsGpuTest, LargeVocabularyMatchesTheHostSampler) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  std::mt19937 rng(1);
  Tally t;
  // Batches of changing size: the scratch grows and is reused.
  for (int m : {1, 16, 7, 33, 16, 64, 2, 16}) {
    CheckBatch(p, rng, 50280, m, 1.0f, &t);
    CheckBatch(p, rng, 50280, m, 0.7f, &t);
  }
  ExpectFewSkipped(t);
}

TEST(SamplingOpsGpuTest, SmallOddVocabularyMatchesOverManySeeds) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  std::mt19937 rng(2);
  Tally t;
  for (int rep = 0; rep < 150; ++rep) {
    CheckBatch(p, rng, 1001, 1 + rep % 24, rep % 3 == 0 ? 1.9f : 1.0f, &t);
  }
  for (int rep = 0; rep < 40; ++rep) CheckBatch(p, rng, 37, 9, 1.0f, &t, 20);
  ExpectFewSkipped(t);
}

// One row, many steps of one seed: the counter reaches the kernel.
TEST(SamplingOpsGpuTest, SuccessiveStepsOfOneRequestMatch) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  const int vocab = 50280;
  std::mt19937 rng(3);
  const std::vector<float> logits = RowLogits(rng, vocab, 1, vocab);
  for (float top_p : {1.0f, 0.9f}) {
    SamplingParams params;
    params.temperature = 0.9f;
    params.top_p = top_p;
    params.top_k = top_p < 1.0f ? 0 : 50;
    params.seed = 424242;
    Sampler sampler(params, vocab, false, 0);
    std::vector<SampleRow> rows;
    std::vector<int32_t> seen;
    for (int step = 0; step < 48; ++step) {
      rows.push_back(sampler.DescribeNext(&seen));
      sampler.CountDraw();
    }
    std::vector<float> tiled;
    for (size_t j = 0; j < rows.size(); ++j)
      tiled.insert(tiled.end(), logits.begin(), logits.end());
    const int m = static_cast<int>(rows.size());
    std::vector<std::vector<int32_t>> got;
    for (Backend* be : {p.cpu.get(), p.cuda.get()}) {
      Array a(*be, tiled);
      std::vector<int32_t> tokens(rows.size(), -1);
      ASSERT_TRUE(be->SampleRows(a.get(), m, vocab, 1.0f, rows.data(),
                                 seen.data(), tokens.data())
                      .ok());
      got.push_back(tokens);
    }
    int compared = 0;
    for (int j = 0; j < m; ++j) {
      if (NearBoundary(tiled.data(), vocab, 1.0f, rows[j], seen.data()))
        continue;
      ++compared;
      EXPECT_EQ(got[0][j], got[1][j]) << "step " << j << " top_p " << top_p;
    }
    EXPECT_GT(compared, m - 3);
    // Different steps really draw different tokens.
    std::vector<int32_t> distinct = got[1];
    std::sort(distinct.begin(), distinct.end());
    EXPECT_GT(std::unique(distinct.begin(), distinct.end()) - distinct.begin(),
              5);
  }
}

// Penalised ids of long contexts outgrow the descriptor staging buffer and
// take the op's own upload path.
TEST(SamplingOpsGpuTest, ManyPenalisedIdsMatch) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  std::mt19937 rng(4);
  std::vector<SamplingParams> penalised;
  for (const SamplingParams& s : ParamSets()) {
    if (s.repetition_penalty != 1.0f) penalised.push_back(s);
  }
  Tally t;
  // About 30k distinct ids a row: 3 MB, over the quarter of the 8 MiB
  // staging buffer that SampleRows stages.
  CheckBatch(p, rng, 50280, 24, 1.0f, &t, 120000, penalised);
  ExpectFewSkipped(t);
}

}  // namespace
}  // namespace seqboat::gpu_test
