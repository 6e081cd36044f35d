// The sampling kernels (kernels/sampling_kernels.cu), run on the CUDA
// emulation with sampling_params' scratch and launcher parameters, pick the
// host Sampler's token (the CPU backend's SampleRows) on every row, none
// skipped: glibc's exp serves both sides here, so only the order of the
// double sums differs, which moves no decision of these cases. Covered: the
// GPU test's random batches (kernels/testing/sampling_cases.h: greedy,
// temperature, top-k, top-p, min-p, repetition, presence and frequency
// penalties, seeds, padding ids, empty rows, NaN and -inf logits, exact ties)
// over vocabularies that are not multiples of the block width, many
// penalised ids, and edge rows: all logits equal, all or nearly all -inf,
// top_k beyond the vocabulary, top_p = 1 with min_p = 0, penalties over ids
// observed and generated many times, suppressed ids (the best, all but
// one, all). CUB's sort runs through
// tools/cuda_emu/cub_emulation.h.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend/sample_row.h"
#include "engine/backend/sampler.h"
#include "engine/backend/sampling_params.h"
#include "engine/backend/testing/penalty_generation.h"
#include "engine/backend/token_bitmask.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/sampling_kernels.h"
#include "kernels/cuda/sampling_params.h"
#include "kernels/cuda/testing/sampling_cases.h"

namespace seqboat::emu_test {
namespace {

using parity::sampling_cases::Batch;
using parity::sampling_cases::CheckBatch;
using parity::sampling_cases::CheckPenalisedBatch;
using parity::sampling_cases::CompareBatch;
using parity::sampling_cases::Params;
using parity::sampling_cases::ParamSets;
using parity::sampling_cases::SampleOn;
using parity::sampling_cases::Tally;

// kernels/sampling_ops.cc on host memory: the rows and ids need no staging,
// the scratch grows as the op's does, and its bytes are garbage (0xff, NaN
// floats) at every call, as a reused device buffer's would be.
class SamplingEmulation : public EmulatedBackend {
 public:
  bool SamplesOnDevice() const override { return true; }

  absl::Status SampleRows(const SampleRowsParams& op) override {
    const int m = op.m, vocab = op.vocab;
    if (m <= 0) return absl::OkStatus();
    const absl::StatusOr<cuda::SampleRowsPlan> plan = cuda::PlanSampleRows(op);
    if (!plan.ok()) return plan.status();
    const absl::StatusOr<size_t> need = cuda::SampleScratchBytes(m, vocab);
    if (!need.ok()) return need.status();
    if (*need > scratch_bytes_) {
      scratch_bytes_ = cuda::SampleScratchGrowth(m, vocab, *need);
      scratch_ = std::make_unique<std::max_align_t[]>(
          scratch_bytes_ / sizeof(std::max_align_t) + 1);
    }
    std::memset(scratch_.get(), 0xff, scratch_bytes_);
    SampleRowsParams dev = op;
    if (plan->seen == 0) dev.seen_ids = nullptr;
    if (op.table.size > 0) {
      // The penalty table grows keeping its values, then takes the writes
      // through the kernel the CUDA op launches.
      if (plan->seen > static_cast<size_t>(op.table.size)) {
        return absl::InvalidArgumentError("rows reach past the penalty table");
      }
      if (table_.size() < static_cast<size_t>(op.table.size)) {
        table_.resize(static_cast<size_t>(op.table.size), -7);
      }
      const std::vector<int32_t> writes(
          op.table.writes, op.table.writes + 2 * op.table.write_count);
      const cudaError_t e = cuda::LaunchPenaltyTableWrites(
          table_.data(), writes.data(), op.table.write_count, nullptr);
      if (e != cudaSuccess) return absl::InternalError("table writes");
      dev.seen_ids = table_.data();
    }
    const cuda::SampleLaunchParams p =
        cuda::SampleLaunchFor(dev, *plan, scratch_.get(), scratch_bytes_);
    const cudaError_t e = cuda::LaunchSampleRows(p, nullptr);
    if (e != cudaSuccess) {
      return absl::InternalError(
          absl::StrCat("LaunchSampleRows: error ", static_cast<int>(e)));
    }
    std::memcpy(op.tokens, p.tokens, static_cast<size_t>(m) * sizeof(int32_t));
    return TakeError();
  }

 private:
  std::unique_ptr<std::max_align_t[]> scratch_;
  size_t scratch_bytes_ = 0;
  std::vector<int32_t> table_;  // the penalty table (SampleRowsParams::table)
};

struct Backends {
  std::unique_ptr<Backend> cpu = MakeCpuBackend(1);
  SamplingEmulation emu;
};

TEST(SamplingKernelsEmuTest, RandomBatchesMatchTheHostSampler) {
  Backends b;
  std::mt19937 rng(11);
  Tally t;
  // 1000 and 5003 are not multiples of the 512-thread block, and 5003 spans
  // two scan tiles of 4096; batches of changing size grow the scratch.
  for (int m : {1, 7, 24, 3, 16}) {
    CheckBatch(*b.cpu, b.emu, rng, 1000, m, 1.0f, &t, 300, ParamSets(),
               /*skip_near_boundary=*/false);
  }
  for (int m : {9, 20}) {
    CheckBatch(*b.cpu, b.emu, rng, 5003, m, 0.7f, &t, 300, ParamSets(),
               /*skip_near_boundary=*/false);
  }
  for (int rep = 0; rep < 10; ++rep) {
    CheckBatch(*b.cpu, b.emu, rng, 37, 9, rep % 2 ? 1.9f : 1.0f, &t, 20,
               ParamSets(), /*skip_near_boundary=*/false);
  }
  EXPECT_EQ(t.mismatched, 0);
  EXPECT_EQ(t.skipped, 0);
  EXPECT_GT(t.compared, 150);
}

// Penalised ids by the thousand, as long contexts have them: prompt ids for
// the repetition penalty, generated ids (with counts) for the presence and
// frequency penalties.
TEST(SamplingKernelsEmuTest, ManyPenalisedIdsMatch) {
  Backends b;
  const Tally t = CheckPenalisedBatch(
      *b.cpu, b.emu, 5003, 16, 20000,
      [](const SamplingParams& s) {
        return s.repetition_penalty != 1.0f || s.presence_penalty != 0.0f ||
               s.frequency_penalty != 0.0f;
      },
      /*skip_near_boundary=*/false);
  EXPECT_EQ(t.mismatched, 0);
  EXPECT_EQ(t.compared, 16);
}

// Rows of the edge shapes, each under every parameter set plus top_k past
// the vocabulary, top_p = 1 with min_p = 0 (no filter) and top_p / min_p
// cutting inside runs of equal weights; seeds and steps vary per row.
Batch EdgeBatch(std::mt19937& rng, int vocab) {
  std::vector<SamplingParams> sets = ParamSets();
  sets.push_back(Params(1.0f, vocab + 5, 1.0f, 0.0f, 1.0f));
  sets.push_back(Params(0.7f, 10 * vocab, 0.9f, 0.0f, 1.0f));
  sets.push_back(Params(1.0f, 0, 1.0f, 0.0f, 1.0f));
  sets.push_back(Params(1.0f, 0, 0.5f, 0.0f, 1.0f));
  sets.push_back(Params(1.0f, 0, 0.25f, 0.0f, 1.0f));
  sets.push_back(Params(2.0f, 3, 1.0f, 1.0f, 1.0f));
  sets.push_back(Params(1.0f, 7, 0.3f, 0.5f, 1.7f));
  sets.push_back(Params(0.5f, 0, 1.0f, 0.0f, 0.6f));
  sets.push_back(Params(1.0f, 0, 0.5f, 0.0f, 1.0f, 2.0f, 0.0f));
  sets.push_back(Params(0.7f, 5, 1.0f, 0.1f, 1.3f, -2.0f, 2.0f));
  sets.push_back(Params(0.0f, 0, 1.0f, 0.0f, 1.0f, 0.25f, -0.125f));
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<uint64_t> any;
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  Batch b;
  b.vocab = vocab;
  for (int shape = 0; shape < 6; ++shape) {
    for (const SamplingParams& s : sets) {
      std::vector<float> l(static_cast<size_t>(vocab));
      switch (shape) {
        case 0:  // all equal
          for (float& x : l) x = 0.75f;
          break;
        case 1:  // all -inf: no candidate, the argmax
          for (float& x : l) x = -INFINITY;
          break;
        case 2:  // a few finite logits among -inf, one of them twice
          for (float& x : l) x = -INFINITY;
          for (int i = 0; i < 5; ++i) l[id(rng)] = normal(rng);
          l[vocab - 1] = l[0] = 1.5f;
          break;
        case 3:  // two levels of equal logits, negative ones penalised
          for (float& x : l) x = id(rng) % 3 == 0 ? 1.0f : -1.0f;
          break;
        case 4:  // smooth, with a -inf and one dominant logit
          for (float& x : l) x = normal(rng);
          l[id(rng)] = -INFINITY;
          l[id(rng)] = 60.0f;
          break;
        default:  // +inf logits take all the mass: the best-ranked one
          for (float& x : l) x = normal(rng);
          l[id(rng)] = INFINITY;
          l[id(rng)] = INFINITY;
          break;
      }
      b.logits.insert(b.logits.end(), l.begin(), l.end());
      SamplingParams params = s;
      params.seed = any(rng);
      Sampler sampler(params, vocab, false, 0);
      // Ids observed over and over: each is penalised once by the
      // repetition penalty; generated ones by their count.
      for (int rep = 0; rep < 4; ++rep) {
        for (int i = 0; i < 40; ++i) sampler.Observe((i * 37) % vocab);
        sampler.Observe(vocab - 1);
        sampler.Observe(0);
        for (int i = 0; i <= rep; ++i) sampler.ObserveGenerated(id(rng));
        sampler.ObserveGenerated(vocab - 1);
        sampler.ObserveGenerated(0);
      }
      // Suppressed ids (min_new_tokens): the dominant or infinite logits
      // of shapes 4 and 5 among them on some rows, everything but one id
      // or every id on others.
      const size_t at = b.rows.size();
      if (at % 4 == 1) {
        std::vector<int32_t> held;
        for (int32_t i = 0; i < vocab; ++i) {
          if (l[i] >= 60.0f) held.push_back(i);
        }
        held.push_back(id(rng));
        sampler.Suppress(held);
      } else if (at % 4 == 2) {
        std::vector<int32_t> held;
        for (int32_t i = 0; i < vocab; ++i) {
          if (i != vocab / 2 || at % 8 == 2) held.push_back(i);
        }
        sampler.Suppress(held);
      }
      SampleRow row = sampler.DescribeNext(&b.seen);
      row.step = any(rng) % 1000;
      b.rows.push_back(row);
    }
  }
  return b;
}

// Long penalised generations whose rows read the penalty table, patched
// each step by the table-writes kernel with only what changed, draw as the
// host Sampler does from the full lists: greedy and seeded, rows run ahead
// of their pending token, forks, restarts after a cancel.
TEST(SamplingKernelsEmuTest, PenaltyTableGenerationsMatchTheFullLists) {
  Backends b;
  penalty_generation::Options o;
  o.vocab = 1000;
  o.steps = 250;
  const penalty_generation::Tally t = penalty_generation::Run(*b.cpu, b.emu, o);
  EXPECT_EQ(t.mismatched, 0);
  EXPECT_EQ(t.compared, o.steps * o.slots);
  EXPECT_GT(t.ahead_rows, 0);
  EXPECT_GT(t.restarts, 0);
  EXPECT_LT(t.table_writes * 10, t.flat_ids);
}

TEST(SamplingKernelsEmuTest, EdgeRowsMatchTheHostSampler) {
  Backends b;
  std::mt19937 rng(5);
  Tally t;
  for (int vocab : {1000, 5003}) {
    const Batch batch = EdgeBatch(rng, vocab);
    CompareBatch(*b.cpu, b.emu, batch, 1.0f, &t,
                 /*skip_near_boundary=*/false);
    CompareBatch(*b.cpu, b.emu, batch, 0.5f, &t,
                 /*skip_near_boundary=*/false);
  }
  EXPECT_EQ(t.mismatched, 0);
  EXPECT_GT(t.compared, 200);
}

// Constrained rows (SampleRow::mask_row): the edge batch's rows, each
// under an allowed-id bitmask of its own: a few ids, about half, one id,
// only ids whose logits are -inf (the lowest allowed is drawn), no id at
// all (the unmasked draw stands, as on the host), every id; some rows
// unmasked among them, some sharing a mask.
TEST(SamplingKernelsEmuTest, MaskedRowsMatchTheHostSampler) {
  Backends b;
  std::mt19937 rng(17);
  Tally t;
  for (int vocab : {1000, 5003}) {
    Batch batch = EdgeBatch(rng, vocab);
    const int32_t words = TokenBitmaskWords(vocab);
    batch.mask_words = words + 1;  // more than needed, as a padded vocab has
    std::uniform_int_distribution<int32_t> id(0, vocab - 1);
    std::vector<uint32_t> mask(static_cast<size_t>(batch.mask_words));
    int32_t masks = 0;
    for (int j = 0; j < batch.m(); ++j) {
      const int kind = j % 7;
      if (kind == 6) continue;  // unmasked
      if (kind == 5 && masks > 0) {
        batch.rows[j].mask_row = masks - 1;  // the row before's
        continue;
      }
      std::fill(mask.begin(), mask.end(), 0u);
      const float* l = batch.logits.data() + static_cast<size_t>(j) * vocab;
      for (int32_t i = 0; i < vocab; ++i) {
        bool on = false;
        switch (kind) {
          case 0:
            on = i % 97 == 13;
            break;
          case 1:
            on = id(rng) % 2 == 0;
            break;
          case 2:
            on = i == vocab / 3;
            break;
          case 3:
            on = std::isinf(l[i]) && l[i] < 0;
            break;
          case 4:
            on = j % 2 == 0;
            break;  // none, or every id
        }
        if (on) TokenBitmaskSet(mask.data(), i);
      }
      batch.masks.insert(batch.masks.end(), mask.begin(), mask.end());
      batch.rows[j].mask_row = masks++;
    }
    CompareBatch(*b.cpu, b.emu, batch, 1.0f, &t,
                 /*skip_near_boundary=*/false);
    CompareBatch(*b.cpu, b.emu, batch, 0.5f, &t,
                 /*skip_near_boundary=*/false);
    // Every token of a row with a non-empty mask is allowed.
    absl::StatusOr<std::vector<int32_t>> got =
        SampleOn(b.emu, batch.logits, vocab, 1.0f, batch.rows, batch.seen, {},
                 batch.masks, batch.mask_words);
    ASSERT_TRUE(got.ok()) << got.status();
    for (int j = 0; j < batch.m(); ++j) {
      const int32_t row = batch.rows[j].mask_row;
      if (row < 0) continue;
      const uint32_t* m =
          batch.masks.data() + static_cast<size_t>(row) * batch.mask_words;
      if (std::all_of(m, m + words, [](uint32_t w) { return w == 0; }))
        continue;
      EXPECT_TRUE(TokenBitmaskHas(m, (*got)[j])) << "row " << j;
    }
  }
  EXPECT_EQ(t.mismatched, 0);
  EXPECT_GT(t.compared, 200);
}

// A mask row the call's masks do not hold is refused before any launch.
TEST(SamplingKernelsEmuTest, MaskRowsWithoutMasksAreRefused) {
  SamplingEmulation emu;
  std::vector<float> logits(40, 0.0f);
  SampleRow row;
  row.valid_vocab = 40;
  row.mask_row = 0;
  int32_t token = -1;
  std::vector<uint32_t> masks(2, 0u);
  SampleRowsParams p;
  p.logits = logits.data();
  p.m = 1;
  p.vocab = 40;
  p.rows = &row;
  p.tokens = &token;
  EXPECT_FALSE(emu.SampleRows(p).ok());
  p.masks = masks.data();
  p.mask_words = 1;  // 40 ids need two words
  EXPECT_FALSE(emu.SampleRows(p).ok());
  p.mask_words = 2;
  masks[1] = 1u << (33 - 32);
  ASSERT_TRUE(emu.SampleRows(p).ok());
  EXPECT_EQ(token, 33);
}

// A shape the kernels cannot take is refused as the CUDA op refuses it, and
// rows with a negative seen range are rejected before any launch.
TEST(SamplingKernelsEmuTest, BadCallsAreRefused) {
  SamplingEmulation emu;
  std::vector<float> logits(8, 0.0f);
  SampleRow row;
  row.valid_vocab = 8;
  row.seen_count = -1;
  int32_t token = -1;
  SampleRowsParams p;
  p.logits = logits.data();
  p.m = 1;
  p.vocab = 8;
  p.rows = &row;
  p.tokens = &token;
  EXPECT_FALSE(emu.SampleRows(p).ok());
  row.seen_count = 0;
  p.vocab = 0;
  EXPECT_FALSE(emu.SampleRows(p).ok());
  p.vocab = 8;
  EXPECT_TRUE(emu.SampleRows(p).ok());
  EXPECT_EQ(token, 0);
}

}  // namespace
}  // namespace seqboat::emu_test
