// S4D's diagonal recurrence on the CPU: one (segment, channel) pair per loop
// iteration, tokens of a segment in order, the math from s4d_math.h.
#include <cstdint>

#include "engine/backend/s4d_math.h"
#include "engine/cpu/cpu_backend_impl.h"
#include "engine/cpu/parallel.h"

namespace seqboat::cpu {

void CpuBackend::S4dScan(const Segment* segs, int nsegs, const float* u,
                         int ldu, const float* da, const float* c,
                         const float* d, float* state, int64_t per_slot, int h,
                         int m, int ch, float scale, float* out) {
  const int64_t ld_out = static_cast<int64_t>(ch) * h;
#pragma omp parallel for collapse(2) schedule( \
    static) if (WorthThreads(SegmentRows(segs, nsegs) * h * m * ch * 4))
  for (int s = 0; s < nsegs; ++s) {
    for (int k = 0; k < h; ++k) {
      const Segment& seg = segs[s];
      float* zeta =
          state + seg.slot * per_slot + static_cast<int64_t>(k) * m * 2;
      const float* dak = da + static_cast<int64_t>(k) * m * 2;
      for (int t = seg.start; t < seg.start + seg.len; ++t) {
        const float ut = u[static_cast<int64_t>(t) * ldu + k];
        op_math::S4dUpdate(zeta, dak, ut, m);
        for (int cc = 0; cc < ch; ++cc) {
          const int64_t ck = static_cast<int64_t>(cc) * h + k;
          out[t * ld_out + ck] =
              op_math::S4dReadout(zeta, c + ck * m * 2, scale, d[ck], ut, m);
        }
      }
    }
  }
}

}  // namespace seqboat::cpu
