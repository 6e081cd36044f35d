// Test support for weight types without an exact counterpart (the CPU's
// int8, the CUDA backend's fp8): a model's logits over a fixed prompt, and
// their error against a reference's, stated as the tests bound it.
#ifndef SEQBOAT_ENGINE_MODEL_LOGIT_ERROR_H_
#define SEQBOAT_ENGINE_MODEL_LOGIT_ERROR_H_

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "gtest/gtest.h"

namespace seqboat::testing_logits {

inline constexpr size_t kPositions = 40;

// Logits of every position: a 16-token prefill chunk (the GEMM at n = 16),
// then 24 single-token decode steps (n = 1).
inline std::vector<float> Logits(const std::string& dir, Backend& backend) {
  // 16 logit rows at once: max_slots bounds them.
  auto model = Model::Load(dir, backend, {16, 32});
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  const int v = (*model)->vocab_size();
  const int slot = *(*model)->arena().Acquire();
  std::vector<int32_t> tokens(kPositions);
  for (size_t i = 0; i < kPositions; ++i) tokens[i] = (i * 37 + 11) % 256;
  std::vector<float> out(tokens.size() * v);
  StepRows prefill{{tokens.begin(), tokens.begin() + 16}, {{slot, 0, 16}}, {}};
  prefill.logit_rows.resize(16);
  std::iota(prefill.logit_rows.begin(), prefill.logit_rows.end(), 0);
  EXPECT_TRUE((*model)->Forward(prefill, out.data()).ok());
  for (size_t t = 16; t < kPositions; ++t) {
    const StepRows one{{tokens[t]}, {{slot, 0, 1}}, {0}};
    EXPECT_TRUE(
        (*model)->Forward(one, out.data() + static_cast<size_t>(t) * v).ok());
  }
  return out;
}

// `got`'s logits against `want`'s over kPositions positions.
struct LogitError {
  double mean = 0, max = 0;
  double largest = 0;  // the largest |want| logit
  size_t argmax_agree = 0;
};

inline LogitError Compare(const std::vector<float>& want,
                          const std::vector<float>& got) {
  LogitError e;
  EXPECT_EQ(got.size(), want.size());
  if (got.size() != want.size() || want.empty()) return e;
  const size_t v = want.size() / kPositions;
  double sum = 0;
  for (size_t t = 0; t < kPositions; ++t) {
    const float* a = want.data() + t * v;
    const float* q = got.data() + t * v;
    for (size_t j = 0; j < v; ++j) {
      e.max = std::max(e.max, double(std::fabs(a[j] - q[j])));
      e.largest = std::max(e.largest, double(std::fabs(a[j])));
      sum += std::fabs(a[j] - q[j]);
    }
    e.argmax_agree +=
        std::max_element(a, a + v) - a == std::max_element(q, q + v) - q;
  }
  e.mean = sum / want.size();
  return e;
}

// Prints the error and checks the stated bounds, relative to the largest
// reference logit: mean under 2 %, max under 15 % (a SeqBoat router whose
// reference decision flips on a near tie moves a whole position's logits),
// the same argmax at >= 90 % of positions.
inline void ExpectWithinQuantisedBounds(const std::string& what,
                                        const LogitError& e) {
  std::printf(
      "%s: logit error mean %.4g max %.4g (largest |logit| %.3g), argmax "
      "agrees at %zu/%zu positions\n",
      what.c_str(), e.mean, e.max, e.largest, e.argmax_agree, kPositions);
  EXPECT_LT(e.mean, 0.02 * e.largest) << what;
  EXPECT_LT(e.max, 0.15 * e.largest) << what;
  EXPECT_GE(e.argmax_agree, kPositions * 9 / 10) << what;
}

}  // namespace seqboat::testing_logits

#endif  // SEQBOAT_ENGINE_MODEL_LOGIT_ERROR_H_
