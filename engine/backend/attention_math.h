// Per-element math of attention over a sink + rolling-window KV cache
// (MODELS.md §3.4, StreamingLLM; with sinks = 0 also SPADE's local window,
// §4.2). Shared by the CPU loops and the CUDA kernels; a backend adds only
// indexing, memory and launch around it.
//
// Which keys a query sees. The token at stream index t (0-based) attends to
//   sinks:   stream 0 .. min(S, t) - 1
//   recent:  stream max(S, t - W) .. t - 1
//   itself:  t
// where S = sinks, W = window. That is exactly the key set of the reference's
// per-token rule "after each token, trim the cache to the first S and the last
// W entries".
//
// Positions are places in the cache, not in the text: the query sits at
// P_q = min(t, S + W) (the number of entries cached before it), sink j at j,
// and a recent key t_k at P_q - (t - t_k). Positions never exceed S + W, so a
// RoPE cos/sin table of S + W + 1 rows covers every angle, in fp32, exactly,
// however long the stream.
//
// Cache storage per slot: K and V of every KV head in [H_kv, S + W, d_h],
// un-rotated. Sink t_k lives in row t_k; recent t_k >= S in ring row
// S + (t_k - S) mod W. The count of tokens seen (int64) heads the slot.
#ifndef SEQBOAT_ENGINE_BACKEND_ATTENTION_MATH_H_
#define SEQBOAT_ENGINE_BACKEND_ATTENTION_MATH_H_

#include <math.h>
#include <stdint.h>

#include "engine/backend/hd.h"
#include "engine/backend/op_math.h"

namespace seqboat::attention_math {

// --- slot layout
// -------------------------------------------------------------- [count int64 |
// pad to 16 bytes | K floats | V floats]; 16 keeps the float arrays 16-byte
// aligned for vector loads whenever the slot base is.
constexpr int64_t kCacheHeaderBytes = 16;

SEQBOAT_HD int64_t CacheRows(int sinks, int window) {
  return static_cast<int64_t>(sinks) + window;
}

// Floats of one of K or V: [H_kv, S + W, d_h].
SEQBOAT_HD int64_t CacheFloats(int n_kv_heads, int head_dim, int sinks,
                               int window) {
  return static_cast<int64_t>(n_kv_heads) * CacheRows(sinks, window) * head_dim;
}

SEQBOAT_HD int64_t CacheSlotBytes(int n_kv_heads, int head_dim, int sinks,
                                  int window) {
  return kCacheHeaderBytes +
         2 * CacheFloats(n_kv_heads, head_dim, sinks, window) *
             static_cast<int64_t>(sizeof(float));
}

// The storage row of stream token t_k (t_k must be cached: a sink or one of
// the last W tokens).
SEQBOAT_HD int64_t CacheRowOf(int64_t tk, int sinks, int window) {
  return tk < sinks ? tk : sinks + (tk - sinks) % window;
}

// --- key set and positions
// ------------------------------------------------------
SEQBOAT_HD int64_t NumSinkKeys(int64_t t, int sinks) {
  return t < sinks ? t : sinks;
}

// First recent key (stream index) of the query at t.
SEQBOAT_HD int64_t FirstRecentKey(int64_t t, int sinks, int window) {
  const int64_t lo = t - window;
  return lo > sinks ? lo : sinks;
}

// Keys seen by the query at t, itself included.
SEQBOAT_HD int64_t NumKeys(int64_t t, int sinks, int window) {
  const int64_t first = FirstRecentKey(t, sinks, window);
  return NumSinkKeys(t, sinks) + (t >= first ? t - first + 1 : 1);
}

// Stream index of the query's u-th key, u in [0, NumKeys): sinks first, then
// recent keys oldest first, itself last. Lets a kernel split the key range.
SEQBOAT_HD int64_t KeyStreamIndex(int64_t t, int64_t u, int sinks, int window) {
  const int64_t ns = NumSinkKeys(t, sinks);
  if (u < ns) return u;
  const int64_t first = FirstRecentKey(t, sinks, window);
  return (t >= first ? first : t) + (u - ns);
}

SEQBOAT_HD int64_t QueryPosition(int64_t t, int sinks, int window) {
  const int64_t cap = CacheRows(sinks, window);
  return t < cap ? t : cap;
}

SEQBOAT_HD int64_t KeyPosition(int64_t t, int64_t tk, int sinks, int window) {
  return tk < sinks ? tk : QueryPosition(t, sinks, window) - (t - tk);
}

// --- RoPE, HF half-split layout (§3.2)
// ------------------------------------------ theta^(2i/d_h) and its inverse
// θ_i in fp32, as HF computes pos_freqs and inv_freq (rope_scaling variants
// start from these; engine/layers/rope.h).
SEQBOAT_HD float RopePosFreq(int i, int head_dim, float theta) {
  return powf(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
}

SEQBOAT_HD float RopeInvFreq(int i, int head_dim, float theta) {
  return 1.0f / RopePosFreq(i, head_dim, theta);
}

// Pair (x[i], x[i + d_h/2]) rotated by the angle whose cos/sin are given.
// cos_row/sin_row hold d_h/2 entries for one position.
SEQBOAT_HD void RopeHalf(const float* x, const float* cos_row,
                         const float* sin_row, int head_dim, float* out) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    out[i] = a * cos_row[i] - b * sin_row[i];
    out[i + half] = b * cos_row[i] + a * sin_row[i];
  }
}

SEQBOAT_HD float Dot(const float* a, const float* b, int n) {
  float acc = 0.0f;
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

// --- online softmax (fp32), one query head
// --------------------------------------- Running max m, running sum l of exp(s
// - m), and acc = Σ exp(s - m) v over the keys seen so far. Start from m =
// -INFINITY, l = 0, acc = 0. A key range split into parts gives one state per
// part; Merge combines them in any order.
SEQBOAT_HD void OnlineSoftmaxAdd(float* m, float* l, float* acc, float score,
                                 const float* v, int d) {
  if (score > *m) {
    // exp(-inf) = 0 covers the first key: nothing accumulated yet.
    const float rescale = expf(*m - score);
    *l *= rescale;
    for (int i = 0; i < d; ++i) acc[i] *= rescale;
    *m = score;
  }
  const float p = expf(score - *m);
  *l += p;
  for (int i = 0; i < d; ++i) acc[i] += p * v[i];
}

// Folds part (m2, l2, acc2) into (m, l, acc).
SEQBOAT_HD void OnlineSoftmaxMerge(float* m, float* l, float* acc, float m2,
                                   float l2, const float* acc2, int d) {
  if (l2 == 0.0f) return;
  if (*l == 0.0f) {
    *m = m2;
    *l = l2;
    for (int i = 0; i < d; ++i) acc[i] = acc2[i];
    return;
  }
  const float mx = *m > m2 ? *m : m2;
  const float a = expf(*m - mx), b = expf(m2 - mx);
  *l = *l * a + l2 * b;
  for (int i = 0; i < d; ++i) acc[i] = acc[i] * a + acc2[i] * b;
  *m = mx;
}

// out[i] = acc[i] / l, times σ(gate[i]) where a gate is given (an output
// gate: the product ActivateMul(kSigmoid) makes, so fusing it changes no
// bits).
SEQBOAT_HD void OnlineSoftmaxFinish(float l, const float* acc,
                                    const float* gate, int d, float* out) {
  const float inv = 1.0f / l;
  for (int i = 0; i < d; ++i) {
    const float o = acc[i] * inv;
    out[i] = gate != nullptr ? op_math::Sigmoid(gate[i]) * o : o;
  }
}

}  // namespace seqboat::attention_math

#endif  // SEQBOAT_ENGINE_BACKEND_ATTENTION_MATH_H_
