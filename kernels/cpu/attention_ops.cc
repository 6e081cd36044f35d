// Sink + rolling-window attention on the CPU (MODELS.md §3.4): one (row, KV
// head) pair per loop iteration, the query heads of that KV group together so
// each key is rotated once per group; key set, positions and the softmax
// update come from attention_math.h.
#include <math.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/backend/attention_math.h"
#include "kernels/cpu/cpu_backend_impl.h"
#include "kernels/cpu/parallel.h"

namespace seqboat::cpu {
namespace {

namespace am = attention_math;

int64_t SlotCount(const void* cache, int64_t slot_bytes, int slot) {
  int64_t count;
  std::memcpy(&count, static_cast<const char*>(cache) + slot * slot_bytes,
              sizeof(count));
  return count;
}

const float* SlotK(const void* cache, int64_t slot_bytes, int slot) {
  return reinterpret_cast<const float*>(static_cast<const char*>(cache) +
                                        slot * slot_bytes +
                                        am::kCacheHeaderBytes);
}

int RowsOf(const Segment* segs, int nsegs) {
  int n_rows = 0;
  for (int s = 0; s < nsegs; ++s) {
    n_rows = std::max(n_rows, segs[s].start + segs[s].len);
  }
  return n_rows;
}

// Rows [n_rows, heads * dh] of x (row stride ldx) with each head RMS-normed
// by the RmsNorm op: attention and the append norm k through this one
// function, so a key has the same bits read from the rows or the cache.
std::vector<float> NormedHeads(Backend& be, const float* x, int ldx, int n_rows,
                               int heads, int dh, const float* w, float eps) {
  const int64_t width = static_cast<int64_t>(heads) * dh;
  std::vector<float> out(static_cast<size_t>(n_rows) * width);
  for (int r = 0; r < n_rows; ++r) {
    NormParams norm;
    norm.x = x + static_cast<int64_t>(r) * ldx;
    norm.ldx = dh;
    norm.n = heads;
    norm.d = dh;
    norm.w = w;
    norm.eps = eps;
    norm.out = out.data() + r * width;
    norm.ldo = dh;
    be.RmsNorm(norm);
  }
  return out;
}

}  // namespace

void CpuBackend::SinkAttention(const SinkAttentionParams& p) {
  const Segment* segs = p.segs;
  const int nsegs = p.nsegs;
  const float *q = p.q, *k = p.k, *v = p.v;
  int ldq = p.ldq, ldk = p.ldk;
  const int ldv = p.ldv;
  std::vector<float> qn, kn;
  if (p.norms.q_w != nullptr) {
    qn = NormedHeads(*this, q, ldq, RowsOf(segs, nsegs), p.dims.n_heads,
                     p.dims.head_dim, p.norms.q_w, p.norms.eps);
    q = qn.data();
    ldq = p.dims.n_heads * p.dims.head_dim;
  }
  if (p.norms.k_w != nullptr) {
    kn = NormedHeads(*this, k, ldk, RowsOf(segs, nsegs), p.dims.n_kv_heads,
                     p.dims.head_dim, p.norms.k_w, p.norms.eps);
    k = kn.data();
    ldk = p.dims.n_kv_heads * p.dims.head_dim;
  }
  const void* cache = p.cache;
  const int64_t slot_bytes = p.slot_bytes;
  const SinkCacheDims& dims = p.dims;
  const float *rope_cos = p.rope_cos, *rope_sin = p.rope_sin;
  const float* gate = p.gate;
  const int64_t ldgate = p.ldgate;
  float* out = p.out;
  const int dh = dims.head_dim, hkv = dims.n_kv_heads,
            group = dims.n_heads / dims.n_kv_heads, s_ = dims.sinks,
            w_ = dims.window, half = dh / 2;
  const int64_t rows_per_head = am::CacheRows(s_, w_);
  const int64_t cache_floats = am::CacheFloats(hkv, dh, s_, w_);
  // Host-side map from packed row to its segment (-1: row in no segment).
  const int n_rows = RowsOf(segs, nsegs);
  std::vector<int> row_seg(n_rows, -1);
  for (int s = 0; s < nsegs; ++s) {
    for (int i = 0; i < segs[s].len; ++i) row_seg[segs[s].start + i] = s;
  }

#pragma omp parallel if (WorthThreads(int64_t{n_rows} * hkv * group * dh * \
                                      (s_ + w_ + 1)))
  {
    // Per-thread: rotated queries, rotated key, softmax states of the group.
    std::vector<float> qr(static_cast<size_t>(group) * dh), kr(dh),
        acc(static_cast<size_t>(group) * dh), m(group), l(group);
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (int row = 0; row < n_rows; ++row) {
      for (int g = 0; g < hkv; ++g) {
        const int si = row_seg[row];
        if (si < 0) continue;
        const Segment& seg = segs[si];
        const int64_t t0 = SlotCount(cache, slot_bytes, seg.slot);
        const int64_t t = t0 + (row - seg.start);
        const float* kc = SlotK(cache, slot_bytes, seg.slot) +
                          static_cast<int64_t>(g) * rows_per_head * dh;
        const float* vc = kc + cache_floats;
        const int64_t pq = am::QueryPosition(t, s_, w_);
        for (int j = 0; j < group; ++j) {
          const float* qh = q + static_cast<int64_t>(row) * ldq +
                            static_cast<int64_t>(g * group + j) * dh;
          float* dst = &qr[static_cast<size_t>(j) * dh];
          if (rope_cos != nullptr) {
            am::RopeHalf(qh, rope_cos + pq * half, rope_sin + pq * half, dh,
                         dst);
          } else {
            std::memcpy(dst, qh, sizeof(float) * dh);
          }
          m[j] = -INFINITY;
          l[j] = 0.0f;
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        const int64_t nk = am::NumKeys(t, s_, w_);
        for (int64_t u = 0; u < nk; ++u) {
          const int64_t tk = am::KeyStreamIndex(t, u, s_, w_);
          // Keys of earlier steps come from the cache, this step's from the
          // rows of the segment (not yet stored).
          const float *key, *val;
          if (tk < t0) {
            const int64_t r = am::CacheRowOf(tk, s_, w_);
            key = kc + r * dh;
            val = vc + r * dh;
          } else {
            const int64_t r = seg.start + (tk - t0);
            key = k + r * ldk + static_cast<int64_t>(g) * dh;
            val = v + r * ldv + static_cast<int64_t>(g) * dh;
          }
          if (rope_cos != nullptr) {
            const int64_t pk = am::KeyPosition(t, tk, s_, w_);
            am::RopeHalf(key, rope_cos + pk * half, rope_sin + pk * half, dh,
                         kr.data());
            key = kr.data();
          }
          for (int j = 0; j < group; ++j) {
            const float score =
                am::Dot(&qr[static_cast<size_t>(j) * dh], key, dh) * dims.scale;
            am::OnlineSoftmaxAdd(&m[j], &l[j],
                                 &acc[static_cast<size_t>(j) * dh], score, val,
                                 dh);
          }
        }
        for (int j = 0; j < group; ++j) {
          const int64_t head = static_cast<int64_t>(g * group + j) * dh;
          am::OnlineSoftmaxFinish(
              l[j], &acc[static_cast<size_t>(j) * dh],
              gate != nullptr ? gate + row * ldgate + head : nullptr, dh,
              out + static_cast<int64_t>(row) * dims.n_heads * dh + head);
        }
      }
    }
  }
}

void CpuBackend::SinkCacheAppend(const SinkAppendParams& p) {
  const Segment* segs = p.segs;
  const int nsegs = p.nsegs;
  const float *k = p.k, *v = p.v;
  int ldk = p.ldk;
  const int ldv = p.ldv;
  std::vector<float> kn;
  if (p.norms.k_w != nullptr) {
    kn = NormedHeads(*this, k, ldk, RowsOf(p.segs, p.nsegs), p.dims.n_kv_heads,
                     p.dims.head_dim, p.norms.k_w, p.norms.eps);
    k = kn.data();
    ldk = p.dims.n_kv_heads * p.dims.head_dim;
  }
  void* cache = p.cache;
  const int64_t slot_bytes = p.slot_bytes;
  const SinkCacheDims& dims = p.dims;
  const int dh = dims.head_dim, hkv = dims.n_kv_heads, s_ = dims.sinks,
            w_ = dims.window;
  const int64_t rows_per_head = am::CacheRows(s_, w_);
  const int64_t cache_floats = am::CacheFloats(hkv, dh, s_, w_);
  char* base = static_cast<char*>(cache);
#pragma omp parallel for collapse(2) \
    schedule(static) if (WorthThreads(SegmentRows(segs, nsegs) * hkv * dh))
  for (int s = 0; s < nsegs; ++s) {
    for (int g = 0; g < hkv; ++g) {
      const Segment& seg = segs[s];
      const int64_t t0 = SlotCount(cache, slot_bytes, seg.slot);
      float* kc = reinterpret_cast<float*>(base + seg.slot * slot_bytes +
                                           am::kCacheHeaderBytes) +
                  static_cast<int64_t>(g) * rows_per_head * dh;
      float* vc = kc + cache_floats;
      const int64_t end = t0 + seg.len;
      for (int64_t tk = t0; tk < end; ++tk) {
        // Recent tokens that a later row of this segment already pushed out
        // of the window are never stored.
        const bool keep = tk < s_ || (w_ > 0 && tk >= end - w_);
        if (!keep) continue;
        const int64_t r = am::CacheRowOf(tk, s_, w_);
        const int64_t row = seg.start + (tk - t0);
        std::memcpy(kc + r * dh, k + row * ldk + static_cast<int64_t>(g) * dh,
                    sizeof(float) * dh);
        std::memcpy(vc + r * dh, v + row * ldv + static_cast<int64_t>(g) * dh,
                    sizeof(float) * dh);
      }
    }
  }
  // The count moves only after every head has read it.
  for (int s = 0; s < nsegs; ++s) {
    char* slot = base + segs[s].slot * slot_bytes;
    int64_t count;
    std::memcpy(&count, slot, sizeof(count));
    count += segs[s].len;
    std::memcpy(slot, &count, sizeof(count));
  }
}

}  // namespace seqboat::cpu
