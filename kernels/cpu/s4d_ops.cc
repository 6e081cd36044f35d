// S4D's diagonal recurrence on the CPU: one (segment, channel) pair per loop
// iteration, tokens of a segment in order, the math from s4d_math.h.
#include <cstdint>

#include "engine/backend/s4d_math.h"
#include "kernels/cpu/cpu_backend_impl.h"
#include "kernels/cpu/parallel.h"

namespace seqboat::cpu {

void CpuBackend::S4dScan(const S4dScanParams& p) {
  const int h = p.h, m = p.m, ch = p.ch;
  const int64_t ld_out = static_cast<int64_t>(ch) * h;
#pragma omp parallel for collapse(2) schedule( \
    static) if (WorthThreads(SegmentRows(p.segs, p.nsegs) * h * m * ch * 4))
  for (int s = 0; s < p.nsegs; ++s) {
    for (int k = 0; k < h; ++k) {
      const Segment& seg = p.segs[s];
      float* zeta =
          p.state + seg.slot * p.state_stride + static_cast<int64_t>(k) * m * 2;
      const float* dak = p.da + static_cast<int64_t>(k) * m * 2;
      for (int t = seg.start; t < seg.start + seg.len; ++t) {
        const float ut = p.u[static_cast<int64_t>(t) * p.ldu + k];
        op_math::S4dUpdate(zeta, dak, ut, m);
        for (int cc = 0; cc < ch; ++cc) {
          const int64_t ck = static_cast<int64_t>(cc) * h + k;
          op_math::S4dStore(&p.out[t * ld_out + ck],
                            op_math::S4dReadout(zeta, p.c + ck * m * 2, p.scale,
                                                p.d[ck], ut, m),
                            p.act, p.accumulate);
        }
      }
    }
  }
}

}  // namespace seqboat::cpu
