// Per-element math of the S4D diagonal recurrence (MODELS.md §4.3), shared by
// the CPU loop and the CUDA kernel. Complex numbers are (re, im) float pairs,
// the canonical [..., 2] layout.
#ifndef SEQBOAT_ENGINE_BACKEND_S4D_MATH_H_
#define SEQBOAT_ENGINE_BACKEND_S4D_MATH_H_

#include "engine/backend/ffn_math.h"
#include "engine/backend/hd.h"

namespace seqboat::op_math {

// One channel h at one token: ζ ← dA ⊙ ζ + u over its m modes (B is folded
// into C, so the input enters unscaled).
//   zeta: [m, 2] state, updated in place;  da: [m, 2].
SEQBOAT_HD void S4dUpdate(float* zeta, const float* da, float u, int m) {
  for (int i = 0; i < m; ++i) {
    const float zr = zeta[2 * i], zi = zeta[2 * i + 1];
    const float ar = da[2 * i], ai = da[2 * i + 1];
    zeta[2 * i] = ar * zr - ai * zi + u;
    zeta[2 * i + 1] = ar * zi + ai * zr;
  }
}

// One output channel of channel h after the update:
//   scale · Re(Σ_i C_i ζ_i) + D u,   scale = 2 (conj_half) or 1 (full).
//   c: [m, 2] for this (output channel, h).
SEQBOAT_HD float S4dReadout(const float* zeta, const float* c, float scale,
                            float d, float u, int m) {
  float acc = 0.0f;
  for (int i = 0; i < m; ++i) {
    acc += c[2 * i] * zeta[2 * i] - c[2 * i + 1] * zeta[2 * i + 1];
  }
  return scale * acc + d * u;
}

// Where a readout goes: act(y), added to *out with accumulate, in the
// rounding of the ActivateMul it replaces (the same bits).
SEQBOAT_HD void S4dStore(float* out, float y, Activation act, bool accumulate) {
  const float v = Activate(act, y);
  *out = accumulate ? *out + v : v;
}

}  // namespace seqboat::op_math

#endif  // SEQBOAT_ENGINE_BACKEND_S4D_MATH_H_
