// Mamba-1's recurrent ops on the CPU: one (segment, channel) pair per loop
// iteration, tokens of a segment in order, the math from op_math.h.
#include "engine/backend/op_math.h"
#include "engine/cpu/cpu_backend_impl.h"
#include "engine/cpu/parallel.h"

namespace seqboat::cpu {

void CpuBackend::MambaConv(const Segment* segs, int nsegs, const float* x,
                           int ldx, float* state, int64_t per_slot,
                           const float* w, const float* bias, int e, int k,
                           float* out) {
  const int64_t work = SegmentRows(segs, nsegs) * e * k;
#pragma omp parallel for collapse(2) schedule(static) if (WorthThreads(work))
  for (int s = 0; s < nsegs; ++s) {
    for (int c = 0; c < e; ++c) {
      const Segment& seg = segs[s];
      float* window =
          state + seg.slot * per_slot + static_cast<int64_t>(c) * (k - 1);
      const float b = bias != nullptr ? bias[c] : 0.0f;
      for (int t = seg.start; t < seg.start + seg.len; ++t) {
        out[static_cast<int64_t>(t) * e + c] =
            op_math::ConvStep(window, w + static_cast<int64_t>(c) * k, b,
                              x[static_cast<int64_t>(t) * ldx + c], k);
      }
    }
  }
}

void CpuBackend::MambaScan(const Segment* segs, int nsegs, const float* x,
                           const float* dt, const float* bc, int ldbc,
                           const float* z, int ldz, const float* a,
                           const float* d, const float* dt_bias, float* state,
                           int64_t per_slot, int e, int n_state, float* out) {
  const int64_t work = SegmentRows(segs, nsegs) * e * n_state * 4;
#pragma omp parallel for collapse(2) schedule(static) if (WorthThreads(work))
  for (int s = 0; s < nsegs; ++s) {
    for (int c = 0; c < e; ++c) {
      const Segment& seg = segs[s];
      float* h =
          state + seg.slot * per_slot + static_cast<int64_t>(c) * n_state;
      const float* ac = a + static_cast<int64_t>(c) * n_state;
      for (int t = seg.start; t < seg.start + seg.len; ++t) {
        const int64_t row = t;
        const float* b_row = bc + row * ldbc;
        out[row * e + c] = op_math::ScanStep(
            h, ac, b_row, b_row + n_state, dt[row * e + c], dt_bias[c],
            x[row * e + c], d[c], z[row * ldz + c], n_state);
      }
    }
  }
}

}  // namespace seqboat::cpu
