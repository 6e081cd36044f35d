// SampleRows on CUDA picks the host Sampler's token (the CPU backend's
// SampleRows) for greedy rows always, and for seeded rows with every filter
// whenever no decision of the row lies within rounding of a boundary: weights
// may differ by an ulp between glibc's and CUDA's exp, and sums run in
// another order, so rows that close to a top-p, min-p or draw boundary are
// counted, not compared. The cases and the comparison are
// kernels/testing/sampling_cases.h, which the emulation test runs too.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/sample_row.h"
#include "engine/backend/sampler.h"
#include "engine/backend/sampling_math.h"
#include "engine/backend/sampling_params.h"
#include "engine/backend/testing/penalty_generation.h"
#include "kernels/cuda/testing/gpu_test_util.h"
#include "kernels/cuda/testing/sampling_cases.h"

namespace seqboat::gpu_test {
namespace {

using parity::sampling_cases::CheckBatch;
using parity::sampling_cases::CheckPenalisedBatch;
using parity::sampling_cases::ExpectFewSkipped;
using parity::sampling_cases::NearBoundary;
using parity::sampling_cases::RowLogits;
using parity::sampling_cases::SampleOn;
using parity::sampling_cases::Tally;

TEST(SamplingOpsGpuTest, LargeVocabularyMatchesTheHostSampler) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  std::mt19937 rng(1);
  Tally t;
  // Batches of changing size: the scratch grows and is reused.
  for (int m : {1, 16, 7, 33, 16, 64, 2, 16}) {
    CheckBatch(*p.cpu, *p.cuda, rng, 50280, m, 1.0f, &t);
    CheckBatch(*p.cpu, *p.cuda, rng, 50280, m, 0.7f, &t);
  }
  ExpectFewSkipped(t);
}

TEST(SamplingOpsGpuTest, SmallOddVocabularyMatchesOverManySeeds) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  std::mt19937 rng(2);
  Tally t;
  for (int rep = 0; rep < 150; ++rep) {
    CheckBatch(*p.cpu, *p.cuda, rng, 1001, 1 + rep % 24,
               rep % 3 == 0 ? 1.9f : 1.0f, &t);
  }
  for (int rep = 0; rep < 40; ++rep)
    CheckBatch(*p.cpu, *p.cuda, rng, 37, 9, 1.0f, &t, 20);
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
      absl::StatusOr<std::vector<int32_t>> tokens =
          SampleOn(*be, tiled, vocab, 1.0f, rows, seen);
      ASSERT_TRUE(tokens.ok());
      got.push_back(*std::move(tokens));
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
  // About 30k distinct ids a row: 3 MB, over the quarter of the 8 MiB
  // staging buffer that SampleRows stages.
  ExpectFewSkipped(CheckPenalisedBatch(
      *p.cpu, *p.cuda, 50280, 24, 120000,
      [](const SamplingParams& s) { return s.repetition_penalty != 1.0f; },
      /*skip_near_boundary=*/true));
}

// The device penalty table: long penalised generations whose rows read it,
// patched each step in stream order with only what changed (the table grows
// and keeps its values; rooms freed by a cancel are reused at once), draw as
// the host Sampler does from the full lists, greedy and seeded, with rows
// run ahead of their pending token and forks. A small vocabulary and a
// large one (whose lists move to larger rooms many times).
TEST(SamplingOpsGpuTest, PenaltyTableGenerationsMatchTheFullLists) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  for (int vocab : {1000, 50280}) {
    penalty_generation::Options o;
    o.vocab = vocab;
    o.slots = 12;
    o.steps = 300;
    o.seed = static_cast<uint32_t>(vocab);
    o.near_boundary = [](const float* raw, int v, const SampleRow& row,
                         const int32_t* ids) {
      return NearBoundary(raw, v, 1.0f, row, ids);
    };
    const penalty_generation::Tally t =
        penalty_generation::Run(*p.cpu, *p.cuda, o);
    EXPECT_EQ(t.mismatched, 0) << "vocab " << vocab;
    EXPECT_LE(t.skipped * 10, t.compared + t.skipped);
    EXPECT_GT(t.ahead_rows, 0);
    EXPECT_GT(t.restarts, 0);
    EXPECT_LT(t.table_writes * 10, t.flat_ids);
  }
}

}  // namespace
}  // namespace seqboat::gpu_test
