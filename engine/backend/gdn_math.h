// Per-element math of Gated DeltaNet (MODELS.md §12.3), shared by the CPU
// loop and the CUDA kernel (β = σ(b) is op_math's Sigmoid); the sums over a
// head are the backends' indexing, both in index order so that they agree.
#ifndef SEQBOAT_ENGINE_BACKEND_GDN_MATH_H_
#define SEQBOAT_ENGINE_BACKEND_GDN_MATH_H_

#include "engine/backend/hd.h"
#include "engine/backend/op_math.h"

namespace seqboat::op_math {

// The key head a value head reads: value heads κr .. κr + r - 1 share key
// head κ (repeat_interleave, not h mod k_heads).
SEQBOAT_HD int GdnKeyHead(int v_head, int v_heads, int k_heads) {
  return v_head / (v_heads / k_heads);
}

// 1 / ‖x‖ with the 1e-6 inside the root (HF's l2norm).
SEQBOAT_HD float GdnInvNorm(float sum_sq) {
  return 1.0f / sqrtf(sum_sq + 1e-6f);
}

// The state's decay at one token, exp(A · softplus(a + dt_bias)) with A < 0.
SEQBOAT_HD float GdnDecay(float a_raw, float dt_bias, float a_coef) {
  return ExpUpTo88(a_coef * Softplus(a_raw + dt_bias));
}

}  // namespace seqboat::op_math

#endif  // SEQBOAT_ENGINE_BACKEND_GDN_MATH_H_
