// Mamba-1's recurrent ops on the CPU: one (segment, block of channels) pair
// per loop iteration, tokens of a segment in order, the math from op_math.h.
// A block's per-channel scalars (softplus, the gates, the conv's SiLU) are
// computed in passes over the block that vectorise across channels.
#include <algorithm>

#include "engine/backend/op_math.h"
#include "engine/cpu/cpu_backend_impl.h"
#include "engine/cpu/parallel.h"

namespace seqboat::cpu {
namespace {

// Channels whose per-token scalars are computed together.
constexpr int kScanBlock = 64;

}  // namespace

void CpuBackend::MambaConv(const MambaConvParams& p) {
  const int e = p.e, k = p.k;
  const int64_t work = SegmentRows(p.segs, p.nsegs) * e * k;
  const int blocks = (e + kScanBlock - 1) / kScanBlock;
#pragma omp parallel for collapse(2) schedule(static) if (WorthThreads(work))
  for (int s = 0; s < p.nsegs; ++s) {
    for (int blk = 0; blk < blocks; ++blk) {
      const Segment& seg = p.segs[s];
      const int c0 = blk * kScanBlock;
      const int width = std::min(kScanBlock, e - c0);
      float* windows = p.state + seg.slot * p.state_stride +
                       static_cast<int64_t>(c0) * (k - 1);
      for (int t = seg.start; t < seg.start + seg.len; ++t) {
        const float* x = p.x + static_cast<int64_t>(t) * p.ldx + c0;
        float* out = p.out + static_cast<int64_t>(t) * e + c0;
        for (int j = 0; j < width; ++j) {
          const int c = c0 + j;
          out[j] =
              op_math::ConvSum(windows + static_cast<int64_t>(j) * (k - 1),
                               p.w + static_cast<int64_t>(c) * k,
                               p.bias != nullptr ? p.bias[c] : 0.0f, x[j], k);
        }
        // The activation of the block in one vectorised pass.
        for (int j = 0; j < width; ++j) out[j] = op_math::Silu(out[j]);
      }
    }
  }
}

void CpuBackend::MambaScan(const MambaScanParams& p) {
  const int e = p.e, n_state = p.n_state;
  const int64_t work = SegmentRows(p.segs, p.nsegs) * e * n_state * 4;
  const int blocks = (e + kScanBlock - 1) / kScanBlock;
#pragma omp parallel for collapse(2) schedule(static) if (WorthThreads(work))
  for (int s = 0; s < p.nsegs; ++s) {
    for (int blk = 0; blk < blocks; ++blk) {
      const Segment& seg = p.segs[s];
      const int c0 = blk * kScanBlock;
      const int width = std::min(kScanBlock, e - c0);
      float delta[kScanBlock], gate[kScanBlock];
      for (int t = seg.start; t < seg.start + seg.len; ++t) {
        const int64_t row = t;
        const float* dt = p.dt + row * e + c0;
        const float* z = p.z + row * p.ldz + c0;
        const float* bias = p.dt_bias + c0;
        // The transcendental scalars of a block of channels in one
        // vectorised pass each, rather than three libm calls per channel.
        for (int j = 0; j < width; ++j)
          delta[j] = op_math::ScanDelta(dt[j], bias[j]);
        for (int j = 0; j < width; ++j) gate[j] = op_math::Silu(z[j]);
        const float* b_row = p.bc + row * p.ldbc;
        for (int j = 0; j < width; ++j) {
          const int c = c0 + j;
          float* h = p.state + seg.slot * p.state_stride +
                     static_cast<int64_t>(c) * n_state;
          const float x = p.x[row * e + c];
          const float y =
              op_math::ScanState(h, p.a + static_cast<int64_t>(c) * n_state,
                                 b_row, b_row + n_state, delta[j], x, n_state);
          p.out[row * e + c] = (y + p.d[c] * x) * gate[j];
        }
      }
    }
  }
}

}  // namespace seqboat::cpu
