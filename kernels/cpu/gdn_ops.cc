// Gated DeltaNet's scan on the CPU: one (segment, value head) pair per loop
// iteration, tokens of a segment in order, the state row by row so that each
// pass over it is contiguous; the math from gdn_math.h.
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/backend/gdn_math.h"
#include "kernels/cpu/cpu_backend_impl.h"
#include "kernels/cpu/parallel.h"

namespace seqboat::cpu {

void CpuBackend::GdnScan(const GdnScanParams& p) {
  const int hk = p.k_heads, hv = p.v_heads, dk = p.k_dim, dv = p.v_dim;
  if (p.nsegs <= 0 || hk <= 0 || hv <= 0 || dk <= 0 || dv <= 0) return;
  const int64_t head_floats = static_cast<int64_t>(dk) * dv;
  const int64_t kd = static_cast<int64_t>(hk) * dk;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const int64_t work = SegmentRows(p.segs, p.nsegs) * hv * head_floats * 4;
#pragma omp parallel for collapse(2) schedule(static) if (WorthThreads(work))
  for (int s = 0; s < p.nsegs; ++s) {
    for (int h = 0; h < hv; ++h) {
      const Segment& seg = p.segs[s];
      if (seg.len <= 0) continue;
      // Per thread, reused across iterations and steps.
      thread_local std::vector<float> scratch;
      scratch.resize(2 * static_cast<size_t>(dk) + 2 * static_cast<size_t>(dv));
      float* q = scratch.data();
      float* k = q + dk;
      float* m = k + dk;
      float* o = m + dv;
      float* state = p.state + seg.slot * p.state_stride + h * head_floats;
      const int64_t kh = op_math::GdnKeyHead(h, hv, hk);
      for (int t = seg.start; t < seg.start + seg.len; ++t) {
        const float* row = p.qkv + static_cast<int64_t>(t) * p.ldqkv;
        const float* qr = row + kh * dk;
        const float* kr = row + kd + kh * dk;
        const float* vr = row + 2 * kd + static_cast<int64_t>(h) * dv;
        float sq = 0.0f, sk = 0.0f;
        for (int i = 0; i < dk; ++i) {
          sq += qr[i] * qr[i];
          sk += kr[i] * kr[i];
        }
        const float inv_q = op_math::GdnInvNorm(sq),
                    inv_k = op_math::GdnInvNorm(sk);
        for (int i = 0; i < dk; ++i) {
          q[i] = qr[i] * inv_q * q_scale;
          k[i] = kr[i] * inv_k;
        }
        const int64_t zrow = static_cast<int64_t>(t) * p.ldz;
        const float beta = op_math::Sigmoid(p.b[zrow + h]);
        const float decay =
            op_math::GdnDecay(p.a[zrow + h], p.dt_bias[h], p.a_coef[h]);
        // Decay first, then what the decayed state recalls for k̂.
        for (int j = 0; j < dv; ++j) m[j] = 0.0f;
        for (int i = 0; i < dk; ++i) {
          float* srow = state + static_cast<int64_t>(i) * dv;
          for (int j = 0; j < dv; ++j) {
            srow[j] *= decay;
            m[j] += srow[j] * k[i];
          }
        }
        for (int j = 0; j < dv; ++j) {
          m[j] = beta * (vr[j] - m[j]);  // the delta
          o[j] = 0.0f;
        }
        for (int i = 0; i < dk; ++i) {
          float* srow = state + static_cast<int64_t>(i) * dv;
          for (int j = 0; j < dv; ++j) {
            srow[j] += k[i] * m[j];
            o[j] += srow[j] * q[i];
          }
        }
        float so = 0.0f;
        for (int j = 0; j < dv; ++j) so += o[j] * o[j];
        const float scale = op_math::RmsScale(so, dv, p.norm_eps);
        const float* z = p.z + zrow + static_cast<int64_t>(h) * dv;
        float* out = p.out + static_cast<int64_t>(t) * p.ldo +
                     static_cast<int64_t>(h) * dv;
        for (int j = 0; j < dv; ++j) {
          out[j] = p.norm_w[j] * (o[j] * scale) * op_math::Silu(z[j]);
        }
      }
    }
  }
}

}  // namespace seqboat::cpu
