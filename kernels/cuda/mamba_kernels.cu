// Mamba-1 kernels. Channels of a segment are independent and tokens of a
// segment are sequential, so a thread owns one (segment, channel) pair for the
// whole segment: its state row lives in registers across the tokens and goes
// back to memory once. blockIdx.y picks the segment, adjacent threads take
// adjacent channels, so x, dt, z and out accesses are coalesced and B/C (one
// row per token, the same for every channel) are warp-wide broadcasts.
#include <stdint.h>

#include "engine/backend/op_math.h"
#include "kernels/cuda/half_rows.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mamba_kernels.h"
#include "kernels/cuda/register_rows.cuh"

namespace seqboat::cuda {
namespace {

// Small blocks: a decode step of one sequence has only e threads, and more
// blocks spread its state reads over more SMs.
constexpr int kThreads = 64;
constexpr int kMaxGridY = 65535;

// --- conv --------------------------------------------------------------------

// K >= 2 taps; the window (K-1 floats) and taps in registers.
template <int K>
__global__ void __launch_bounds__(kThreads)
    MambaConvRegKernel(MambaConvParams p) {
  LetDependentsLaunch();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.e) return;
  float w[K];
#pragma unroll
  for (int i = 0; i < K; ++i) w[i] = p.w[static_cast<int64_t>(c) * K + i];
  const float bias = p.bias != nullptr ? p.bias[c] : 0.0f;
  for (int s = blockIdx.y; s < p.nsegs; s += gridDim.y) {
    const Segment seg = p.segs[s];
    // Padding segments may share a real segment's slot: no state access.
    if (seg.len <= 0) continue;
    float* window =
        p.state + seg.slot * p.state_stride + static_cast<int64_t>(c) * (K - 1);
    float win[K - 1];
#pragma unroll
    for (int i = 0; i < K - 1; ++i) win[i] = window[i];
    const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
    for (int64_t t = seg.start; t < end; ++t) {
      const float v = op_math::ConvStep(win, w, bias, p.x[t * p.ldx + c], K);
      p.out[t * p.e + c] = v;
      StoreHalf(p.out16, t, c, v);
    }
#pragma unroll
    for (int i = 0; i < K - 1; ++i) window[i] = win[i];
  }
}

// Any k: the window is updated in place in global memory, as on the CPU.
__global__ void __launch_bounds__(kThreads)
    MambaConvGlobalKernel(MambaConvParams p) {
  LetDependentsLaunch();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.e) return;
  const float* w = p.w + static_cast<int64_t>(c) * p.k;
  const float bias = p.bias != nullptr ? p.bias[c] : 0.0f;
  for (int s = blockIdx.y; s < p.nsegs; s += gridDim.y) {
    const Segment seg = p.segs[s];
    if (seg.len <= 0) continue;
    float* window = p.state + seg.slot * p.state_stride +
                    static_cast<int64_t>(c) * (p.k - 1);
    const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
    for (int64_t t = seg.start; t < end; ++t) {
      const float v =
          op_math::ConvStep(window, w, bias, p.x[t * p.ldx + c], p.k);
      p.out[t * p.e + c] = v;
      StoreHalf(p.out16, t, c, v);
    }
  }
}

// --- scan --------------------------------------------------------------------

// N = n_state: the state row and the row of A in registers (the loops of
// ScanStep unroll over the compile-time N). Stops at 32: nvcc does not fully
// unroll ScanStep's loop at 64, which would put both rows in local memory.
template <int N>
__global__ void __launch_bounds__(kThreads)
    MambaScanRegKernel(MambaScanParams p) {
  LetDependentsLaunch();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.e) return;
  float a[N];
  LoadRow(a, p.a + static_cast<int64_t>(c) * N);
  const float dt_bias = p.dt_bias[c];
  const float d = p.d[c];
  for (int s = blockIdx.y; s < p.nsegs; s += gridDim.y) {
    const Segment seg = p.segs[s];
    // Padding segments may share a real segment's slot: no state access.
    if (seg.len <= 0) continue;
    float* state =
        p.state + seg.slot * p.state_stride + static_cast<int64_t>(c) * N;
    float h[N];
    LoadRow(h, state);
    const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
    for (int64_t t = seg.start; t < end; ++t) {
      const float* b = p.bc + t * p.ldbc;
      const int64_t i = t * p.e + c;
      const float y = op_math::ScanStep(h, a, b, b + N, p.dt[i], dt_bias,
                                        p.x[i], d, p.z[t * p.ldz + c], N);
      p.out[i] = y;
      StoreHalf(p.out16, t, c, y);
    }
    StoreRow(state, h);
  }
}

// Any n_state: the state is updated in place in global memory, as on the CPU.
__global__ void __launch_bounds__(kThreads)
    MambaScanGlobalKernel(MambaScanParams p) {
  LetDependentsLaunch();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.e) return;
  const int n = p.n_state;
  const float* a = p.a + static_cast<int64_t>(c) * n;
  const float dt_bias = p.dt_bias[c];
  const float d = p.d[c];
  for (int s = blockIdx.y; s < p.nsegs; s += gridDim.y) {
    const Segment seg = p.segs[s];
    if (seg.len <= 0) continue;
    float* h =
        p.state + seg.slot * p.state_stride + static_cast<int64_t>(c) * n;
    const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
    for (int64_t t = seg.start; t < end; ++t) {
      const float* b = p.bc + t * p.ldbc;
      const int64_t i = t * p.e + c;
      const float y = op_math::ScanStep(h, a, b, b + n, p.dt[i], dt_bias,
                                        p.x[i], d, p.z[t * p.ldz + c], n);
      p.out[i] = y;
      StoreHalf(p.out16, t, c, y);
    }
  }
}

// --- decode scan -------------------------------------------------------------

// A decode step has one token per segment, so a thread per channel leaves
// most SMs idle at small batch (e / 64 blocks) and reads its state row as N
// strided floats. Here N lanes share a channel, one state entry each: a warp
// reads 32 consecutive floats of the slot's [e, N] state at a time, a block of
// kDecodeThreads covers kDecodeThreads / N channels, and C·h is a tree of
// shuffles within the N lanes. Every lane computes the channel's scalars
// (Δ, the gate) from the same loads, so no broadcast is needed. Tokens of a
// longer segment are looped, so any call is computed correctly; the backend
// takes this kernel for decode calls only (AllDecodeRows).
constexpr int kDecodeThreads = 128;
constexpr unsigned kFullMask = 0xffffffffu;

template <int N>
__global__ void __launch_bounds__(kDecodeThreads)
    MambaScanDecodeKernel(MambaScanParams p) {
  LetDependentsLaunch();
  const int i = threadIdx.x % N;
  const int c = (blockIdx.x * kDecodeThreads + threadIdx.x) / N;
  // Lanes of channels past e stay for the shuffles and write nothing; their
  // loads read channel 0's row.
  const bool valid = c < p.e;
  const int cv = valid ? c : 0;
  const float a = p.a[static_cast<int64_t>(cv) * N + i];
  const float dt_bias = p.dt_bias[cv];
  const float d = p.d[cv];
  for (int s = blockIdx.y; s < p.nsegs; s += gridDim.y) {
    const Segment seg = p.segs[s];
    // Padding segments may share a real segment's slot: no state access
    // (uniform over the block, which serves one segment).
    if (seg.len <= 0) continue;
    float* state =
        p.state + seg.slot * p.state_stride + static_cast<int64_t>(cv) * N + i;
    float h = *state;
    const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
    for (int64_t t = seg.start; t < end; ++t) {
      const float* b = p.bc + t * p.ldbc;
      const int64_t at = t * p.e + cv;
      const float x = p.x[at];
      const float delta = op_math::ScanDelta(p.dt[at], dt_bias);
      h = op_math::ScanEntry(h, a, b[i], delta * op_math::kLog2e, delta * x);
      float ch = b[N + i] * h;
#pragma unroll
      for (int o = N / 2; o > 0; o >>= 1) {
        ch += __shfl_xor_sync(kFullMask, ch, o, N);
      }
      if (valid && i == 0) {
        const float y = op_math::ScanOutput(
            ch, d, x, op_math::SiluByExp(p.z[t * p.ldz + cv]));
        p.out[at] = y;
        StoreHalf(p.out16, t, cv, y);
      }
    }
    if (valid) *state = h;
  }
}

dim3 GridFor(int e, int nsegs) {
  return dim3((e + kThreads - 1) / kThreads,
              nsegs < kMaxGridY ? nsegs : kMaxGridY);
}

}  // namespace

void LaunchMambaConv(const MambaConvParams& p, cudaStream_t stream) {
  if (p.nsegs <= 0 || p.e <= 0 || p.k <= 0) return;
  const dim3 grid = GridFor(p.e, p.nsegs);
  switch (p.k) {
    case 2:
      SEQBOAT_LAUNCH(grid, kThreads, 0, stream, MambaConvRegKernel<2>)(p);
      break;
    case 3:
      SEQBOAT_LAUNCH(grid, kThreads, 0, stream, MambaConvRegKernel<3>)(p);
      break;
    case 4:
      SEQBOAT_LAUNCH(grid, kThreads, 0, stream, MambaConvRegKernel<4>)(p);
      break;
    default:
      SEQBOAT_LAUNCH(grid, kThreads, 0, stream, MambaConvGlobalKernel)(p);
      break;
  }
}

void LaunchMambaScan(const MambaScanParams& p, cudaStream_t stream) {
  if (p.nsegs <= 0 || p.e <= 0 || p.n_state < 0) return;
  const dim3 grid = GridFor(p.e, p.nsegs);
  switch (p.n_state) {
    case 4:
      SEQBOAT_LAUNCH(grid, kThreads, 0, stream, MambaScanRegKernel<4>)(p);
      break;
    case 8:
      SEQBOAT_LAUNCH(grid, kThreads, 0, stream, MambaScanRegKernel<8>)(p);
      break;
    case 16:
      SEQBOAT_LAUNCH(grid, kThreads, 0, stream, MambaScanRegKernel<16>)(p);
      break;
    case 32:
      SEQBOAT_LAUNCH(grid, kThreads, 0, stream, MambaScanRegKernel<32>)(p);
      break;
    default:
      SEQBOAT_LAUNCH(grid, kThreads, 0, stream, MambaScanGlobalKernel)(p);
      break;
  }
}

void LaunchMambaScanDecode(const MambaScanParams& p, cudaStream_t stream) {
  if (p.nsegs <= 0 || p.e <= 0 || p.n_state < 0) return;
  const int n = p.n_state;
  if (n != 4 && n != 8 && n != 16 && n != 32) {
    LaunchMambaScan(p, stream);
    return;
  }
  const int channels_per_block = kDecodeThreads / n;
  const dim3 grid((p.e + channels_per_block - 1) / channels_per_block,
                  p.nsegs < kMaxGridY ? p.nsegs : kMaxGridY);
  switch (n) {
    case 4:
      SEQBOAT_LAUNCH(grid, kDecodeThreads, 0, stream, MambaScanDecodeKernel<4>)
      (p);
      break;
    case 8:
      SEQBOAT_LAUNCH(grid, kDecodeThreads, 0, stream, MambaScanDecodeKernel<8>)
      (p);
      break;
    case 16:
      SEQBOAT_LAUNCH(grid, kDecodeThreads, 0, stream, MambaScanDecodeKernel<16>)
      (p);
      break;
    default:
      SEQBOAT_LAUNCH(grid, kDecodeThreads, 0, stream, MambaScanDecodeKernel<32>)
      (p);
      break;
  }
}

}  // namespace seqboat::cuda
