// Mamba-2's scan and gated norm on the CPU: one (segment, head) pair per loop
// iteration for the scan, tokens of a segment in order, and one row per
// iteration for the norm; the math from mamba2_math.h. Mamba2Step is the
// conv, the scan and the norm in turn.
#include <cstdint>

#include "engine/backend/mamba2_math.h"
#include "kernels/cpu/cpu_backend_impl.h"
#include "kernels/cpu/parallel.h"

namespace seqboat::cpu {

void CpuBackend::Mamba2Scan(const Mamba2ScanParams& p) {
  const int heads = p.heads, hd = p.head_dim, ns = p.n_state;
  const int64_t row_floats = static_cast<int64_t>(hd) * ns;
  const int64_t work = SegmentRows(p.segs, p.nsegs) * heads * row_floats * 4;
#pragma omp parallel for collapse(2) schedule(static) if (WorthThreads(work))
  for (int s = 0; s < p.nsegs; ++s) {
    for (int h = 0; h < heads; ++h) {
      const Segment& seg = p.segs[s];
      float* state = p.state + seg.slot * p.state_stride + h * row_floats;
      const int64_t group =
          static_cast<int64_t>(op_math::Mamba2Group(h, heads, p.groups)) * ns;
      for (int t = seg.start; t < seg.start + seg.len; ++t) {
        const int64_t row = t;
        const float delta = op_math::Mamba2Delta(
            p.dt[row * p.lddt + h], p.dt_bias[h], p.dt_min, p.dt_max);
        const float decay = op_math::Mamba2Decay(delta, p.a[h]);
        const float* b = p.b + row * p.ldxbc + group;
        const float* c = p.c + row * p.ldxbc + group;
        const float* x = p.x + row * p.ldxbc + static_cast<int64_t>(h) * hd;
        float* out = p.out + row * p.ldo + static_cast<int64_t>(h) * hd;
        for (int q = 0; q < hd; ++q) {
          out[q] = op_math::Mamba2StateRow(state + q * ns, decay, delta * x[q],
                                           b, c, ns) +
                   p.d[h] * x[q];
        }
      }
    }
  }
}

void CpuBackend::GatedRmsNorm(const GatedRmsNormParams& p) {
  const int gs = p.d / p.groups;
#pragma omp parallel for schedule( \
    static) if (WorthThreads(int64_t{p.n} * p.d * 4))
  for (int i = 0; i < p.n; ++i) {
    const float* y = p.y + static_cast<int64_t>(i) * p.ldy;
    const float* z = p.z + static_cast<int64_t>(i) * p.ldz;
    float* out = p.out + static_cast<int64_t>(i) * p.ldo;
    for (int g = 0; g < p.groups; ++g) {
      const int lo = g * gs;
      // v goes to `out` first: it may alias y, and each column is read once
      // before its own write.
      float sq = 0.0f;
      for (int j = lo; j < lo + gs; ++j) {
        const float v = op_math::GatedValue(y[j], z[j]);
        out[j] = v;
        sq += v * v;
      }
      const float scale = op_math::RmsScale(sq, gs, p.eps);
      for (int j = lo; j < lo + gs; ++j) out[j] = out[j] * scale * p.w[j];
    }
  }
}

// The op's definition: its three ops in order (the CUDA backend fuses them).
void CpuBackend::Mamba2Step(const Mamba2StepParams& p) {
  MambaConv(p.conv);
  Mamba2Scan(p.scan);
  GatedRmsNorm(p.norm);
}

}  // namespace seqboat::cpu
