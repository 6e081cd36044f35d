// Mamba-1's recurrent ops on the CPU: one (segment, channel) pair per loop
// iteration, tokens of a segment in order, the math from op_math.h.
#include "engine/backend/op_math.h"
#include "engine/cpu/cpu_backend_impl.h"
#include "engine/cpu/parallel.h"

namespace seqboat::cpu {

void CpuBackend::MambaConv(const MambaConvParams& p) {
  const int e = p.e, k = p.k;
  const int64_t work = SegmentRows(p.segs, p.nsegs) * e * k;
#pragma omp parallel for collapse(2) schedule(static) if (WorthThreads(work))
  for (int s = 0; s < p.nsegs; ++s) {
    for (int c = 0; c < e; ++c) {
      const Segment& seg = p.segs[s];
      float* window = p.state + seg.slot * p.state_stride +
                      static_cast<int64_t>(c) * (k - 1);
      const float b = p.bias != nullptr ? p.bias[c] : 0.0f;
      for (int t = seg.start; t < seg.start + seg.len; ++t) {
        p.out[static_cast<int64_t>(t) * e + c] =
            op_math::ConvStep(window, p.w + static_cast<int64_t>(c) * k, b,
                              p.x[static_cast<int64_t>(t) * p.ldx + c], k);
      }
    }
  }
}

void CpuBackend::MambaScan(const MambaScanParams& p) {
  const int e = p.e, n_state = p.n_state;
  const int64_t work = SegmentRows(p.segs, p.nsegs) * e * n_state * 4;
#pragma omp parallel for collapse(2) schedule(static) if (WorthThreads(work))
  for (int s = 0; s < p.nsegs; ++s) {
    for (int c = 0; c < e; ++c) {
      const Segment& seg = p.segs[s];
      float* h = p.state + seg.slot * p.state_stride +
                 static_cast<int64_t>(c) * n_state;
      const float* ac = p.a + static_cast<int64_t>(c) * n_state;
      for (int t = seg.start; t < seg.start + seg.len; ++t) {
        const int64_t row = t;
        const float* b_row = p.bc + row * p.ldbc;
        p.out[row * e + c] = op_math::ScanStep(
            h, ac, b_row, b_row + n_state, p.dt[row * e + c], p.dt_bias[c],
            p.x[row * e + c], p.d[c], p.z[row * p.ldz + c], n_state);
      }
    }
  }
}

}  // namespace seqboat::cpu
