// The arithmetic of every recurrent and elementwise op, one definition shared
// by the CPU backend (which loops over it) and the CUDA kernels (which map
// threads to it). A backend may only add indexing, memory and launch around it.
#ifndef SEQBOAT_ENGINE_BACKEND_OP_MATH_H_
#define SEQBOAT_ENGINE_BACKEND_OP_MATH_H_

#include <math.h>
#include <stdint.h>

#include "engine/backend/hd.h"

namespace seqboat::op_math {

// 2^k for an integer k in [-126, 127] given as a float: k + 127 lands in the
// low mantissa bits of k + 1.5 * 2^23 + 127, and a shift moves it into the
// exponent field. Float arithmetic and bit casts only, so any k (even far
// out of int range, where the callers discard the result) is defined
// behaviour.
SEQBOAT_HD float Pow2(float k) {
  const float shifted = k + (12582912.0f + 127.0f);
#if defined(__CUDA_ARCH__)
  return __uint_as_float(__float_as_uint(shifted) << 23);
#else
  // A bit cast the vectoriser sees through (memcpy via the stack it does not).
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, shifted) << 23);
#endif
}

// exp(x) for x <= 88 from arithmetic alone (Cody-Waite range reduction and
// Cephes' degree-6 polynomial), so the loops over a state vector vectorise on
// the CPU instead of calling expf once per element; the GPU runs the same
// arithmetic. Within one ulp of exp for x in [-87, 88]; 0 below -87 (where
// expf gives subnormals). Above 88 the value is meaningless (but defined):
// callers pass arguments bounded there (Mamba-2's Δ·A is never positive,
// Softplus passes -|x|), others call Exp, which clamps. Without a clamp in its
// way the compiler keeps this a straight line of vector arithmetic (a clamp's
// constant gets threaded through the polynomial into compares and blends).
// The reduction's two steps are explicit FMAs, what contracting builds
// (-O2, nvcc) made of x - k c1 - k c2 anyway: written that way, the CPU
// backend's -ffast-math may fold c1 + c2 into one constant (error up to
// |k| 2^-24, 3.7e-6 near x = -72).
SEQBOAT_HD float ExpUpTo88(float x) {
  const float k = floorf(x * 1.44269504088896341f + 0.5f);
  const float r = fmaf(k, 2.12194440e-4f, fmaf(k, -0.693359375f, x));
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  return x < -87.0f ? 0.0f : y * Pow2(k);
}

// exp(x) for any x: ExpUpTo88 with its argument clamped to 88. The clamp is
// a comparison, not fminf: that carries NaN rules that keep the vectoriser
// away unless finite math is assumed.
SEQBOAT_HD float Exp(float x) { return ExpUpTo88(x > 88.0f ? 88.0f : x); }

SEQBOAT_HD float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

SEQBOAT_HD float Silu(float x) { return x / (1.0f + expf(-x)); }

// SiLU through Exp rather than expf: the gates of Mamba-1's conv and scan,
// which the CPU computes for a block of channels in one pass that this form
// lets vectorise. Within a few ulp of Silu (op_math_test).
SEQBOAT_HD float SiluByExp(float x) { return x / (1.0f + Exp(-x)); }

// log1p(exp(x)) as max(x, 0) + log1p(v), v = exp(-|x|) in (0, 1], with
// log1p(v) = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = v / (2 + v) in
// [0, 1/3]: terms to s^15 leave out under 2e-9 relatively, and no 1 + v is
// rounded, so the result keeps its relative accuracy however small it is;
// below x = -87 it is 0 (where ExpUpTo88 gives 0). Above 20 it is x exactly
// (log1p(v) < 2.1e-9 is under half an ulp of x), torch's threshold. From
// arithmetic alone, so that a loop over channels vectorises (the scans'
// step sizes); half the vector operations of exp, a series and a logarithm.
SEQBOAT_HD float Softplus(float x) {
  const float v = ExpUpTo88(-fabsf(x));
  const float s = v / (2.0f + v);
  const float s2 = s * s;
  float p = 1.0f / 15.0f;
  p = p * s2 + 1.0f / 13.0f;
  p = p * s2 + 1.0f / 11.0f;
  p = p * s2 + 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  const float two_s = s + s;
  return (x > 0.0f ? x : 0.0f) + (two_s + two_s * s2 * p);
}

// 1 / sqrt(mean(x^2) + eps) given the sum of squares over n elements.
SEQBOAT_HD float RmsScale(float sum_sq, int n, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
}

// One channel of Mamba's causal depthwise conv at one token, before its
// activation.
//   window: the channel's K-1 previous pre-conv inputs, oldest first; shifted
//           left and appended with `x` in place.
//   w:      the channel's K taps, w[K-1] multiplies the current input.
SEQBOAT_HD float ConvSum(float* window, const float* w, float bias, float x,
                         int k) {
  // Explicit fmas: the fast-math CPU build may not reorder them, so every
  // path that computes a token's sum (a decode row, a longer segment, each
  // instruction set, the GPU) takes this order and rounding.
  float acc = bias;
  for (int i = 0; i < k - 1; ++i) acc = fmaf(w[i], window[i], acc);
  acc = fmaf(w[k - 1], x, acc);
  for (int i = 0; i + 1 < k - 1; ++i) window[i] = window[i + 1];
  if (k > 1) window[k - 2] = x;
  return acc;
}

// SiLU(conv + bias): Mamba-1's conv output.
SEQBOAT_HD float ConvStep(float* window, const float* w, float bias, float x,
                          int k) {
  return SiluByExp(ConvSum(window, w, bias, x, k));
}

// One channel e of Mamba's selective scan at one token (MODELS.md §1.3).
//   h:  the channel's N-entry fp32 state, updated in place.
//   a:  row e of A = -exp(A_log), N entries.
//   b, c: the token's B and C vectors, N entries each.
//   dt_raw: (W_dt δ̃)[e] before bias and softplus.
// Returns (C·h + D x) · SiLU(z).
SEQBOAT_HD float ScanDelta(float dt_raw, float dt_bias) {
  return Softplus(dt_raw + dt_bias);
}

// log2(e): the scans' decays are powers of 2 (Exp2OfProduct).
constexpr float kLog2e = 1.44269504088896341f;

// 2^(u v) for u v <= 127, 0 below -126. The product is never rounded on its
// own: both FMAs take it whole, so with u = delta log2(e) the exponent is off
// by about what an fp32 reference's rounding of delta·A before its exp costs.
// A degree-6 minimax polynomial for 2^r on [-1/2, 1/2] (relative error 2e-9
// before rounding, 1e-7 in fp32: op_math_test). Three vector operations
// fewer than ExpUpTo88 of a product (no multiply before it, one FMA for an
// exact reduction where Cody-Waite takes two, one term fewer), and the
// scan's state update is mostly this.
SEQBOAT_HD float Exp2OfProduct(float u, float v) {
  const float t = fmaf(u, v, 0.5f);
  const float k = floorf(t);
  const float r = fmaf(u, v, -k);
  float p = 1.5353350318e-4f;
  p = p * r + 1.3398875017e-3f;
  p = p * r + 9.6184378490e-3f;
  p = p * r + 5.5503323674e-2f;
  p = p * r + 2.4022647738e-1f;
  p = p * r + 6.9314718246e-1f;
  p = p * r + 1.0f;
  return t < -125.5f ? 0.0f : p * Pow2(k);
}

// One state entry's update: h' = exp(delta a) h + (delta x) b, given
// delta_log2e = delta log2(e) (once per channel) and dx = delta x.
SEQBOAT_HD float ScanEntry(float h, float a, float b, float delta_log2e,
                           float dx) {
  return Exp2OfProduct(delta_log2e, a) * h + dx * b;
}

// The state update of one channel at one token given its step size delta;
// returns Σ c_i h_i. Apart from ScanStep so that the CPU can compute the
// per-channel scalars (softplus, the gate) for many channels at once (and
// the sums for many channels at once: it updates with ScanEntry too).
SEQBOAT_HD float ScanState(float* h, const float* a, const float* b,
                           const float* c, float delta, float x, int n) {
  const float dx = delta * x, delta_log2e = delta * kLog2e;
  float y = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float hi = ScanEntry(h[i], a[i], b[i], delta_log2e, dx);
    h[i] = hi;
    y += c[i] * hi;
  }
  return y;
}

// A channel's output from its C·h, D, input and gate SiLU(z).
SEQBOAT_HD float ScanOutput(float ch, float d, float x, float gate) {
  return (ch + d * x) * gate;
}

SEQBOAT_HD float ScanStep(float* h, const float* a, const float* b,
                          const float* c, float dt_raw, float dt_bias, float x,
                          float d, float z, int n) {
  const float delta = ScanDelta(dt_raw, dt_bias);
  return ScanOutput(ScanState(h, a, b, c, delta, x, n), d, x, SiluByExp(z));
}

}  // namespace seqboat::op_math

#endif  // SEQBOAT_ENGINE_BACKEND_OP_MATH_H_
