// Per-element math of Mamba-2 (MODELS.md §7.4, §7.5), shared by the CPU loops
// and the CUDA kernels; the reductions over a state row or a norm group are
// the backends' indexing.
#ifndef SEQBOAT_ENGINE_BACKEND_MAMBA2_MATH_H_
#define SEQBOAT_ENGINE_BACKEND_MAMBA2_MATH_H_

#include "engine/backend/hd.h"
#include "engine/backend/op_math.h"

namespace seqboat::op_math {

// The B/C group head h reads: consecutive heads share one (mamba_ssm's
// h // (H/G); HF 4.48.3's prefill tiles them as h mod G, which is wrong).
SEQBOAT_HD int Mamba2Group(int head, int heads, int groups) {
  return head / (heads / groups);
}

// Δ of one head at one token: softplus(δ + dt_bias) clamped to
// time_step_limit. Comparisons rather than fminf/fmaxf, so that an unbounded
// hi (INFINITY) passes Δ through unchanged under -ffast-math too.
SEQBOAT_HD float Mamba2Delta(float dt_raw, float dt_bias, float lo, float hi) {
  const float delta = Softplus(dt_raw + dt_bias);
  const float above = delta < lo ? lo : delta;
  return above > hi ? hi : above;
}

// The head's decay exp(Δ A) at one token (A < 0, so the argument is <= 0).
SEQBOAT_HD float Mamba2Decay(float delta, float a) {
  return ExpUpTo88(delta * a);
}

// One state entry h[h, p, n] after a token: decay · h + (Δ x_p) · B_n.
SEQBOAT_HD float Mamba2StateEntry(float h, float decay, float dx, float b) {
  return decay * h + dx * b;
}

// One state row (head h, channel p) at one token, n entries updated in place;
// returns C · h. The caller adds D x.
SEQBOAT_HD float Mamba2StateRow(float* h, float decay, float dx, const float* b,
                                const float* c, int n) {
  float y = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float hi = Mamba2StateEntry(h[i], decay, dx, b[i]);
    h[i] = hi;
    y += c[i] * hi;
  }
  return y;
}

// The gated norm's input v = y · SiLU(z) (norm_before_gate = false).
SEQBOAT_HD float GatedValue(float y, float z) { return y * Silu(z); }

}  // namespace seqboat::op_math

#endif  // SEQBOAT_ENGINE_BACKEND_MAMBA2_MATH_H_
