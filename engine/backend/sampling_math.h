// Per-element sampling arithmetic shared by the CPU sampler and the CUDA
// sampling kernels (kernels/sampling_kernels.cu), so both pick the same token
// for the same inputs: the repetition, presence and frequency penalties of
// one logit, softmax pieces,
// the min-p test, and the counter-based random numbers (a value depends only
// on (seed, step), never on a generator's hidden state, so a GPU thread can
// compute it directly).
#ifndef SEQBOAT_ENGINE_BACKEND_SAMPLING_MATH_H_
#define SEQBOAT_ENGINE_BACKEND_SAMPLING_MATH_H_

#include <math.h>
#include <stdint.h>

#include "engine/backend/hd.h"

namespace seqboat {
namespace sampling {

// Below this a temperature only amplifies rounding noise; vLLM treats it as
// greedy too.
constexpr float kMinTemperature = 1e-5f;

// Greedy decoding: a (near-)zero or NaN temperature, or top-k 1. Written as
// !(t >= lo) so NaN falls back to greedy.
SEQBOAT_HD bool IsGreedy(float temperature, int32_t top_k) {
  return !(temperature >= kMinTemperature) || top_k == 1;
}

// Hugging Face / vLLM repetition penalty: pushes an already-seen token's
// logit towards "less likely" whatever its sign.
SEQBOAT_HD float PenalizeLogit(float logit, float penalty) {
  return logit > 0.0f ? logit / penalty : logit * penalty;
}

// A product rounded on its own, never fused with what follows into an FMA:
// nvcc fuses by default, and the host build targets x86-64-v3, which has
// FMA, so host and device would otherwise round differently.
SEQBOAT_HD float MulRounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  volatile float product = a * b;
  return product;
#endif
}

// OpenAI / vLLM presence and frequency penalties of a token generated
// `count` times so far: logit - frequency * count - presence when count > 0
// (vLLM's order: the frequency term, then the presence term), unchanged
// otherwise. Negative penalties raise the logit.
SEQBOAT_HD float PenalizeCount(float logit, int32_t count, float presence,
                               float frequency) {
  if (count <= 0) return logit;
  const float l = logit - MulRounded(frequency, static_cast<float>(count));
  return l - presence;
}

// NaN logits (a broken model row) must never win a comparison or poison a
// sum; treat them as impossible tokens.
SEQBOAT_HD float SanitizeLogit(float logit) {
  return logit != logit ? -INFINITY : logit;
}

// Strict "a ranks above b": higher logit, ties to the lower id, so greedy
// decoding and top-k are deterministic.
SEQBOAT_HD bool RanksAbove(float a, int32_t id_a, float b, int32_t id_b) {
  return a > b || (a == b && id_a < id_b);
}

// Unnormalised softmax weight relative to the row maximum (never overflows).
// On the device exp runs in double and rounds once: CUDA's expf may be 2 ulp
// off, while glibc's expf is correctly rounded in all but rare cases, so
// this keeps a GPU's weights, and with them min-p, top-p and the draw, equal
// to the CPU's almost always.
SEQBOAT_HD float SoftmaxWeight(float logit, float max_logit) {
#if defined(__CUDA_ARCH__)
  return static_cast<float>(exp(static_cast<double>(logit - max_logit)));
#else
  return expf(logit - max_logit);
#endif
}

// Log-softmax of one entry given the row's max and sum of SoftmaxWeight.
SEQBOAT_HD float LogSoftmax(float logit, float max_logit, float sum_weights) {
  return logit - max_logit - logf(sum_weights);
}

// Min-p keeps a token iff p / p_max >= min_p, i.e. exp(l - l_max) >= min_p
// in scaled-logit space (no normalisation needed).
SEQBOAT_HD bool PassesMinP(float logit, float max_logit, float min_p) {
  return SoftmaxWeight(logit, max_logit) >= min_p;
}

// SplitMix64's finaliser: a bijective 64-bit mix with good avalanche.
SEQBOAT_HD uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The random bits for sampling step `step` of a request seeded with `seed`.
// The seed is mixed before the step is added so that nearby seeds do not give
// shifted copies of one sequence.
SEQBOAT_HD uint64_t CounterRandom(uint64_t seed, uint64_t step) {
  return Mix64(Mix64(seed ^ 0x5EB0A7C0FFEE1234ull) +
               (step + 1) * 0x9E3779B97F4A7C15ull);
}

// Uniform double in [0, 1) from the top 53 bits.
SEQBOAT_HD double UniformFromBits(uint64_t bits) {
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace sampling
}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_SAMPLING_MATH_H_
