// S4D kernel. Channels of a segment are independent and tokens of a segment
// are sequential, so a thread owns one (segment, channel) pair for the whole
// segment: the channel's m complex modes live in registers across the tokens
// and go back to memory once. blockIdx.y picks the segment, adjacent threads
// take adjacent channels, so u and out accesses are coalesced.
#include <stdint.h>

#include "engine/backend/s4d_math.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/register_rows.cuh"
#include "kernels/cuda/s4d_kernels.h"

namespace seqboat::cuda {
namespace {

// Small blocks: a decode step of one sequence has only h threads, and more
// blocks spread its state reads over more SMs.
constexpr int kThreads = 64;
constexpr int kMaxGridY = 65535;

// M modes: zeta and dA (2M floats each) in registers. Stops at 32: at 64 the
// state alone is 128 registers and ptxas spills.
template <int M>
__global__ void __launch_bounds__(kThreads) S4dScanRegKernel(S4dScanParams p) {
  JoinLaunchChain();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= p.h) return;
  const float* da_row = p.da + static_cast<int64_t>(k) * 2 * M;
  float da[2 * M];
  LoadRow(da, da_row);
  const int64_t ld_out = static_cast<int64_t>(p.ch) * p.h;
  for (int s = blockIdx.y; s < p.nsegs; s += gridDim.y) {
    const Segment seg = p.segs[s];
    // Padding segments may share a real segment's slot: no state access.
    if (seg.len <= 0) continue;
    float* state =
        p.state + seg.slot * p.state_stride + static_cast<int64_t>(k) * 2 * M;
    float zeta[2 * M];
    LoadRow(zeta, state);
    const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
    for (int64_t t = seg.start; t < end; ++t) {
      const float ut = p.u[t * p.ldu + k];
      op_math::S4dUpdate(zeta, da, ut, M);
      for (int cc = 0; cc < p.ch; ++cc) {
        const int64_t ck = static_cast<int64_t>(cc) * p.h + k;
        op_math::S4dStore(&p.out[t * ld_out + ck],
                          op_math::S4dReadout(zeta, p.c + ck * 2 * M, p.scale,
                                              p.d[ck], ut, M),
                          p.act, p.accumulate);
      }
    }
    StoreRow(state, zeta);
  }
}

// Any m: zeta is updated in place in global memory, as on the CPU.
__global__ void __launch_bounds__(kThreads)
    S4dScanGlobalKernel(S4dScanParams p) {
  JoinLaunchChain();
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= p.h) return;
  const int m = p.m;
  const float* da_row = p.da + static_cast<int64_t>(k) * 2 * m;
  const int64_t ld_out = static_cast<int64_t>(p.ch) * p.h;
  for (int s = blockIdx.y; s < p.nsegs; s += gridDim.y) {
    const Segment seg = p.segs[s];
    if (seg.len <= 0) continue;
    float* zeta =
        p.state + seg.slot * p.state_stride + static_cast<int64_t>(k) * 2 * m;
    const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
    for (int64_t t = seg.start; t < end; ++t) {
      const float ut = p.u[t * p.ldu + k];
      op_math::S4dUpdate(zeta, da_row, ut, m);
      for (int cc = 0; cc < p.ch; ++cc) {
        const int64_t ck = static_cast<int64_t>(cc) * p.h + k;
        op_math::S4dStore(&p.out[t * ld_out + ck],
                          op_math::S4dReadout(zeta, p.c + ck * 2 * m, p.scale,
                                              p.d[ck], ut, m),
                          p.act, p.accumulate);
      }
    }
  }
}

}  // namespace

void LaunchS4dScan(const S4dScanParams& p, LaunchQueue queue) {
  if (p.nsegs <= 0 || p.h <= 0 || p.m < 0) return;
  const dim3 grid((p.h + kThreads - 1) / kThreads,
                  p.nsegs < kMaxGridY ? p.nsegs : kMaxGridY);
  switch (p.m) {
    case 4:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, S4dScanRegKernel<4>)(p);
      break;
    case 8:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, S4dScanRegKernel<8>)(p);
      break;
    case 16:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, S4dScanRegKernel<16>)(p);
      break;
    case 32:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, S4dScanRegKernel<32>)(p);
      break;
    default:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, S4dScanGlobalKernel)(p);
      break;
  }
}

}  // namespace seqboat::cuda
