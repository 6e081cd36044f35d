// The arithmetic of every recurrent and elementwise op, one definition shared
// by the CPU backend (which loops over it) and the CUDA kernels (which map
// threads to it). A backend may only add indexing, memory and launch around it.
#ifndef SEQBOAT_ENGINE_BACKEND_OP_MATH_H_
#define SEQBOAT_ENGINE_BACKEND_OP_MATH_H_

#include <math.h>
#include <stdint.h>

#include "engine/backend/hd.h"

namespace seqboat::op_math {

// exp(x) from arithmetic alone (Cody-Waite range reduction and Cephes'
// degree-6 polynomial), so the loops over a state vector vectorise on the CPU
// instead of calling expf once per element; the GPU runs the same arithmetic.
// Within one ulp of exp for x in [-87, 88]; 0 below -87 (where expf gives
// subnormals), clamped above 88 (the scan only passes x <= 0).
SEQBOAT_HD float Exp(float x) {
  // Comparisons, not fminf/fmaxf: those carry NaN rules that keep the
  // vectoriser away unless finite math is assumed.
  const float lo = x < -87.0f ? -87.0f : x;
  const float xc = lo > 88.0f ? 88.0f : lo;
  const float k = floorf(xc * 1.44269504088896341f + 0.5f);
  const float r = xc - k * 0.693359375f - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;
#if defined(__CUDA_ARCH__)
  const float scale = __int_as_float(bits);
#else
  // A bit cast the vectoriser sees through (memcpy via the stack it does not).
  const float scale = __builtin_bit_cast(float, bits);
#endif
  return x < -87.0f ? 0.0f : y * scale;
}

SEQBOAT_HD float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

SEQBOAT_HD float Silu(float x) { return x / (1.0f + expf(-x)); }

// Same threshold as torch.nn.functional.softplus and the mamba CUDA scan.
SEQBOAT_HD float Softplus(float x) { return x <= 20.0f ? log1pf(expf(x)) : x; }

// 1 / sqrt(mean(x^2) + eps) given the sum of squares over n elements.
SEQBOAT_HD float RmsScale(float sum_sq, int n, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
}

// One channel of Mamba's causal depthwise conv at one token.
//   window: the channel's K-1 previous pre-conv inputs, oldest first; shifted
//           left and appended with `x` in place.
//   w:      the channel's K taps, w[K-1] multiplies the current input.
// Returns SiLU(conv + bias).
SEQBOAT_HD float ConvStep(float* window, const float* w, float bias, float x,
                          int k) {
  float acc = bias;
  for (int i = 0; i < k - 1; ++i) acc += w[i] * window[i];
  acc += w[k - 1] * x;
  for (int i = 0; i + 1 < k - 1; ++i) window[i] = window[i + 1];
  if (k > 1) window[k - 2] = x;
  return Silu(acc);
}

// One channel e of Mamba's selective scan at one token (MODELS.md §1.3).
//   h:  the channel's N-entry fp32 state, updated in place.
//   a:  row e of A = -exp(A_log), N entries.
//   b, c: the token's B and C vectors, N entries each.
//   dt_raw: (W_dt δ̃)[e] before bias and softplus.
// Returns (C·h + D x) · SiLU(z).
SEQBOAT_HD float ScanStep(float* h, const float* a, const float* b,
                          const float* c, float dt_raw, float dt_bias, float x,
                          float d, float z, int n) {
  const float delta = Softplus(dt_raw + dt_bias);
  const float dx = delta * x;
  float y = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float hi = Exp(delta * a[i]) * h[i] + dx * b[i];
    h[i] = hi;
    y += c[i] * hi;
  }
  return (y + d * x) * Silu(z);
}

}  // namespace seqboat::op_math

#endif  // SEQBOAT_ENGINE_BACKEND_OP_MATH_H_
