// The arguments of the sink + rolling-window attention ops (MODELS.md §3.4),
// defined once for the Backend virtuals, the CPU loops and the CUDA kernels,
// which receive them by value. Plain data, no absl: nvcc includes this
// header. Key set, cache positions and the slot layout ([count | K | V]) are
// in attention_math.h.
#ifndef SEQBOAT_ENGINE_BACKEND_ATTENTION_PARAMS_H_
#define SEQBOAT_ENGINE_BACKEND_ATTENTION_PARAMS_H_

#include <stdint.h>

#include "engine/backend/half_rows.h"
#include "engine/backend/segment.h"

namespace seqboat {

// The cache's geometry, the same for every slot.
struct SinkCacheDims {
  int n_heads = 0;     // H_q, a multiple of n_kv_heads
  int n_kv_heads = 0;  // H_kv
  int head_dim = 0;    // d_h
  int sinks = 0;       // S: first tokens kept forever
  int window = 0;      // W: most recent earlier tokens kept
  float scale = 1.0f;  // score multiplier, 1/sqrt(d_h)
};

// Per-head RMS norms of q and k (Qwen3's q_norm and k_norm), applied to a
// call's rows before RoPE and before k is cached: each head's d_h channels
// times op_math::RmsScale, times the weight. Null weights: no norm.
struct SinkHeadNorms {
  const float* q_w = nullptr;  // [d_h]
  const float* k_w = nullptr;  // [d_h]
  float eps = 0.0f;
};

// Rows of a segment attend causally to the slot's cache and to earlier rows
// of the same segment, with the eviction of token-by-token decode, so any
// chunking gives the same result. Reads the cache only (counts included);
// rows of zero-length segments are left alone.
struct SinkAttentionParams {
  const Segment* segs = nullptr;
  int nsegs = 0;
  const float* q = nullptr;  // [n, H_q·d_h], row stride ldq, un-rotated
  int ldq = 0;
  const float* k = nullptr;  // [n, H_kv·d_h], row stride ldk, un-rotated
  int ldk = 0;
  const float* v = nullptr;  // [n, H_kv·d_h], row stride ldv
  int ldv = 0;
  const void* cache = nullptr;  // slot s at cache + s * slot_bytes
  int64_t slot_bytes = 0;
  SinkCacheDims dims;
  // [S + W + 1, d_h/2] indexed by cache position, or null for no RoPE.
  const float* rope_cos = nullptr;
  const float* rope_sin = nullptr;
  SinkHeadNorms norms;
  // [n, H_q·d_h], row stride ldgate, or null: the output gate (Qwen3.5's
  // attn_output_gate), out = σ(gate) · attention.
  const float* gate = nullptr;
  int ldgate = 0;
  float* out = nullptr;  // [n, H_q·d_h]; softmax in fp32, scale dims.scale
  // A 16-bit copy of out for the o-projection (half_rows.h), or none.
  HalfRows out16;
};

// Stores each segment's k, v rows that stay cached (sinks and the last W)
// and advances the slot's token count by the segment length. Zero-length
// segments touch nothing; non-empty ones have distinct slots.
struct SinkAppendParams {
  const Segment* segs = nullptr;
  int nsegs = 0;
  const float* k = nullptr;
  int ldk = 0;
  const float* v = nullptr;
  int ldv = 0;
  void* cache = nullptr;
  int64_t slot_bytes = 0;
  SinkCacheDims dims;
  SinkHeadNorms norms;  // k_w only: k is cached normed
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_ATTENTION_PARAMS_H_
