// The per-element arithmetic of the SeqBoat block (MODELS.md §2.1-2.5),
// shared by the CPU backend's loops and the CUDA kernels: the MD-EMA step,
// the latent configurator's decision, the GAU's scores with RoPE or the simple
// bias, the working-memory FIFO and the slot state layout.
#ifndef SEQBOAT_ENGINE_BACKEND_SEQBOAT_MATH_H_
#define SEQBOAT_ENGINE_BACKEND_SEQBOAT_MATH_H_

#include <math.h>
#include <stdint.h>

#include <vector>

#include "engine/backend/hd.h"
#include "engine/backend/op_math.h"
#include "engine/backend/seqboat_shape.h"

namespace seqboat::op_math {

// --- slot state -------------------------------------------------------------
// One slot is one contiguous byte region, 8-byte fields first so every field
// is naturally aligned:
//   int64 meta[4]  fifo_len, fifo_head (oldest entry), next_pos (tokens of
//                  the stream seen so far), reserved
//   int64 pos[w]   original stream positions of the FIFO entries
//   f32 ema[d, ne] MD-EMA state
//   f32 keys[w, z] un-rotated keys
//   f32 vals[w, v] values
enum SeqBoatMeta { kFifoLen = 0, kFifoHead = 1, kNextPos = 2, kMetaCount = 4 };

struct SeqBoatSlot {
  int64_t* meta;
  int64_t* pos;
  float* ema;
  float* keys;
  float* vals;
};

SEQBOAT_HD int64_t SeqBoatStateBytes(const SeqBoatShape& s) {
  const int64_t bytes =
      8 * (kMetaCount + static_cast<int64_t>(s.w)) +
      4 * (static_cast<int64_t>(s.d) * s.ne + static_cast<int64_t>(s.w) * s.z +
           static_cast<int64_t>(s.w) * s.v);
  return (bytes + 63) / 64 * 64;  // keeps every slot cache-line aligned
}

SEQBOAT_HD SeqBoatSlot SeqBoatSlotAt(void* base, const SeqBoatShape& s) {
  SeqBoatSlot v;
  v.meta = static_cast<int64_t*>(base);
  v.pos = v.meta + kMetaCount;
  v.ema = reinterpret_cast<float*>(v.pos + s.w);
  v.keys = v.ema + static_cast<int64_t>(s.d) * s.ne;
  v.vals = v.keys + static_cast<int64_t>(s.w) * s.z;
  return v;
}

// --- MD-EMA (§2.1) ----------------------------------------------------------
// One channel at one token: s ← φ⊙s + g·x, returns SiLU(Σ η⊙s + ω·x), the
// layer's H (SeqBoat applies the SiLU in the layer; same function).
SEQBOAT_HD float SeqBoatEmaStep(float* s, const float* g, const float* phi,
                                const float* eta, float omega, float x,
                                int ne) {
  float acc = omega * x;
  for (int i = 0; i < ne; ++i) {
    const float si = phi[i] * s[i] + g[i] * x;
    s[i] = si;
    acc += eta[i] * si;
  }
  return Silu(acc);
}

// --- latent configurator (§2.3) ---------------------------------------------
// Decision a = [u1 > u0] (ties → 0, argmax returns the first maximum) and the
// confidence c = a·softmax([u0, u1]/τ)[1] = a·σ((u1 − u0)/τ).
SEQBOAT_HD bool SeqBoatRoute(float u0, float u1, float tau, float* conf) {
  const bool active = u1 > u0;
  *conf = active ? Sigmoid((u1 - u0) / tau) : 0.0f;
  return active;
}

// --- GAU (§2.2, §2.4) -------------------------------------------------------
// Z, R and V are SiLU of the projection; Q = γ0⊙Z + β0, K = γ1⊙Z + β1.
SEQBOAT_HD float SeqBoatAffine(float z, float gamma, float beta) {
  return gamma * z + beta;
}

// θ_i = rope_theta^(−2i/z) in float64: the angle (p − t)·θ_i must stay exact
// for offsets far beyond fp32's integer range of precision.
SEQBOAT_HD double RopeInvFreq(int i, int z, double rope_theta) {
  return pow(rope_theta, -2.0 * i / z);
}

// θ_i for i < z/2, empty without RoPE. Host code: both backends take the
// table from here (the CUDA one stages it), so they rotate by the same angles
// to the bit.
inline std::vector<double> SeqBoatRopeInvFreq(const SeqBoatShape& s) {
  const bool rope = s.pos == SeqBoatPos::kRopeInterleaved;
  std::vector<double> inv_freq(rope ? s.z / 2 : 0);
  for (int i = 0; i < static_cast<int>(inv_freq.size()); ++i) {
    inv_freq[i] = RopeInvFreq(i, s.z, s.rope_theta);
  }
  return inv_freq;
}

// ⟨R(t)q, R(p)k⟩ = ⟨q, R(p − t)k⟩ for interleaved pairs (2i, 2i+1): keys
// stay un-rotated in the FIFO and only the relative offset `delta` = p − t is
// rotated in. The angle is reduced modulo 2π in float64 before the fp32
// sin/cos, so large offsets lose no precision.
SEQBOAT_HD float RopeRelDot(const float* q, const float* k, int z,
                            int64_t delta, const double* inv_freq) {
  const double kTwoPi = 6.283185307179586476925286766559;
  float acc = 0.0f;
  for (int i = 0; i < z / 2; ++i) {
    double ang = static_cast<double>(delta) * inv_freq[i];
    ang -= kTwoPi * rint(ang / kTwoPi);
    const float c = cosf(static_cast<float>(ang));
    const float s = sinf(static_cast<float>(ang));
    const float k0 = k[2 * i], k1 = k[2 * i + 1];
    acc += q[2 * i] * (k0 * c - k1 * s) + q[2 * i + 1] * (k0 * s + k1 * c);
  }
  return acc;
}

SEQBOAT_HD float Dot(const float* a, const float* b, int n) {
  float acc = 0.0f;
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

// rel[M − 1 + clamp(delta, −(M − 1), M − 1)], delta = p_key − p_query.
SEQBOAT_HD float SimpleBias(const float* rel, int m, int64_t delta) {
  const int64_t lim = m - 1;
  const int64_t d = delta < -lim ? -lim : (delta > lim ? lim : delta);
  return rel[lim + d];
}

// Multiplier of q·k: 1/sqrt(z) for softmax; for relu² q is divided by the
// working-memory size w, even when fewer than w keys exist (§2.4).
SEQBOAT_HD float SeqBoatScoreScale(const SeqBoatShape& s) {
  return s.attn_fn == SeqBoatAttnFn::kSoftmax
             ? 1.0f / sqrtf(static_cast<float>(s.z))
             : 1.0f / static_cast<float>(s.w);
}

// The score of one key before normalisation: the raw logit for softmax, the
// final weight relu(x)² for relu².
SEQBOAT_HD float SeqBoatScore(const SeqBoatShape& s, float dot, float scale,
                              float bias) {
  const float x = dot * scale + bias;
  if (s.attn_fn == SeqBoatAttnFn::kSoftmax) return x;
  const float r = x > 0.0f ? x : 0.0f;
  return r * r;
}

// Turns scores[0..n) into attention weights in place (fp32 softmax with the
// maximum subtracted; relu² weights are already final).
SEQBOAT_HD void SeqBoatNormalise(const SeqBoatShape& s, float* scores, int n) {
  if (s.attn_fn != SeqBoatAttnFn::kSoftmax) return;
  float mx = scores[0];
  for (int j = 1; j < n; ++j) mx = scores[j] > mx ? scores[j] : mx;
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) {
    scores[j] = expf(scores[j] - mx);
    sum += scores[j];
  }
  const float inv = 1.0f / sum;
  for (int j = 0; j < n; ++j) scores[j] *= inv;
}

// --- working memory FIFO (§2.5) ---------------------------------------------
// Entry j (0 = oldest) of a ring holding `len` of `w` entries from `head`.
SEQBOAT_HD int FifoIndex(int64_t head, int j, int w) {
  return static_cast<int>((head + j) % w);
}

// Claims the entry for a new token, evicting the oldest when full; returns
// the ring index to write.
SEQBOAT_HD int FifoPush(int64_t* meta, int w) {
  const int64_t len = meta[kFifoLen], head = meta[kFifoHead];
  if (len < w) {
    meta[kFifoLen] = len + 1;
    return static_cast<int>((head + len) % w);
  }
  meta[kFifoHead] = (head + 1) % w;
  return static_cast<int>(head);
}

// --- output (§2.2)
// ------------------------------------------------------------ SiLU(S + G +
// c·Y): the residual itself goes through the SiLU.
SEQBOAT_HD float SeqBoatOut(float s, float g, float c, float y) {
  return Silu(s + g + c * y);
}

}  // namespace seqboat::op_math

#endif  // SEQBOAT_ENGINE_BACKEND_SEQBOAT_MATH_H_
