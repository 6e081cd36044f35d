// Mamba-1 kernels. Channels of a segment are independent and tokens of a
// segment are sequential, so a thread owns one (segment, channel) pair for the
// whole segment: its state row lives in registers across the tokens and goes
// back to memory once. blockIdx.y picks the segment, adjacent threads take
// adjacent channels, so x, dt, z and out accesses are coalesced and B/C (one
// row per token, the same for every channel) are warp-wide broadcasts.
#include <stdint.h>

#include <algorithm>

#include "engine/backend/op_math.h"
#include "kernels/cuda/half_rows.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mamba_kernels.h"
#include "kernels/cuda/register_rows.cuh"
#include "kernels/cuda/stored_weights.cuh"

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
  JoinLaunchChain();
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
  JoinLaunchChain();
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
  JoinLaunchChain();
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
  JoinLaunchChain();
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
//
// A block serves its channels for several segments (blockIdx.y, + gridDim.y,
// ...): enough blocks to fill the device, and a folded dt_proj's weight rows
// are staged once per block rather than once per segment.
constexpr int kDecodeThreads = 128;
constexpr unsigned kFullMask = 0xffffffffu;
// Blocks of kDecodeThreads that fill an H100 / H200 (132 SMs x 16).
constexpr int kDecodeTargetBlocks = 132 * 16;
// Above this a block's dt_proj rows do not fit the default shared memory;
// the backend then runs dt_proj as a GEMM (MambaScanDecodeFoldsDtProj).
constexpr int kMaxDtRowsBytes = 48 * 1024;

// Floats of shared memory a staged dt_proj row takes: its columns rounded up
// to whole float4s (zeros past the last).
__host__ __device__ int64_t DtRowFloats(int64_t cols) {
  return (cols + 3) / 4 * 4;
}

// A folded dt_proj (MambaDtProj) as a block's lanes compute it. The block's
// weight rows are widened to fp32 in shared memory once; then, per token,
// lane i of a channel sums the columns 4q..4q+3 for q = i, i + N, ... in
// order (fmaf, one float4 of weights and of δ̃ a step) and the N lane sums
// meet in a butterfly of shuffles; fp8's row scale multiplies the finished
// sum, as in the GEMV.
//
// Rounding: the unfolded GEMM (the CPU's packed GEMM, CUDA's GEMV or
// cuBLAS) adds the same dt_rank products in an order of its own, so dt
// differs from it by the rounding of that sum (a few ulp of |dt|), which
// softplus and exp carry into Δ, the state and the output; the order here
// depends on dt_rank, N and the storage only, never on the batch, so a
// graph replay gives the eager bits. cuBLAS (batches over 16) also rounded
// δ̃ to the 16-bit weight type; the fold keeps it fp32.
struct DtFold {
  const float4* row = nullptr;  // this channel's staged row
  int quads = 0;                // float4s a row
  float factor = 1.0f;
  bool x_vector = false;  // δ̃ rows readable as float4s
};

// Stages rows c0 .. c0 + channels of p.dt_proj.w (zero rows past e, zero
// columns past dt_rank) into `rows`, 16-byte loads where the block's rows
// start 16-byte aligned. Every thread of the block calls it.
__device__ void StageDtRows(const MambaScanParams& p, Storage storage, int c0,
                            int channels, int quads, float* rows) {
  const MambaDtProj& f = p.dt_proj;
  const int cols = static_cast<int>(f.w.cols);
  const int stride = quads * 4;
  const int real = min(channels, p.e - c0);
  for (int k = threadIdx.x; k < channels * stride; k += blockDim.x) {
    if (k / stride >= real || k % stride >= cols) rows[k] = 0.0f;
  }
  const int64_t begin = static_cast<int64_t>(c0) * cols;
  const int count = real * cols;
  const int per = WeightsPer16Bytes(storage);
  const int elem = 16 / per;
  const bool vector = (reinterpret_cast<uintptr_t>(f.w.data) & 15) == 0 &&
                      (static_cast<int64_t>(channels) * cols * elem) % 16 == 0;
  int done = 0;
  if (vector) {
    done = count / per * per;
    for (int k = threadIdx.x * per; k < done; k += blockDim.x * per) {
      float v[16];
      StoredWeights16(f.w.data, storage, begin + k, v);
      for (int j = 0; j < per; ++j) {
        rows[(k + j) / cols * stride + (k + j) % cols] = v[j];
      }
    }
  }
  for (int k = done + threadIdx.x; k < count; k += blockDim.x) {
    rows[k / cols * stride + k % cols] =
        StoredWeight(f.w.data, storage, begin + k);
  }
  __syncthreads();
}

// Token t's dt for the lane's channel, the same bits on its N lanes. Every
// lane of the warp calls it.
template <int N>
__device__ __forceinline__ float FoldedDt(const MambaDtProj& f,
                                          const DtFold& fold, int i,
                                          int64_t t) {
  const float* x = f.low + t * f.ldlow;
  const int cols = static_cast<int>(f.w.cols);
  float sum = 0.0f;
  for (int q = i; q < fold.quads; q += N) {
    const float4 w = fold.row[q];
    float4 v;
    if (fold.x_vector) {
      v = __ldg(reinterpret_cast<const float4*>(x) + q);
    } else {
      const int j = 4 * q;
      v.x = x[j];  // j < cols: q < quads
      v.y = j + 1 < cols ? x[j + 1] : 0.0f;
      v.z = j + 2 < cols ? x[j + 2] : 0.0f;
      v.w = j + 3 < cols ? x[j + 3] : 0.0f;
    }
    sum = fmaf(w.x, v.x, sum);
    sum = fmaf(w.y, v.y, sum);
    sum = fmaf(w.z, v.z, sum);
    sum = fmaf(w.w, v.w, sum);
  }
#pragma unroll
  for (int o = N / 2; o > 0; o >>= 1) {
    sum += __shfl_xor_sync(kFullMask, sum, o, N);
  }
  return sum * fold.factor;
}

template <int N>
__global__ void __launch_bounds__(kDecodeThreads)
    MambaScanDecodeKernel(MambaScanParams p, Storage dt_storage) {
  JoinLaunchChain();
  const int i = threadIdx.x % N;
  const int c = (blockIdx.x * kDecodeThreads + threadIdx.x) / N;
  // Lanes of channels past e stay for the shuffles and write nothing; their
  // loads read channel 0's row.
  const bool valid = c < p.e;
  const int cv = valid ? c : 0;
  const float a = p.a[static_cast<int64_t>(cv) * N + i];
  const float dt_bias = p.dt_bias[cv];
  const float d = p.d[cv];
  DtFold fold;
  if (FoldsDtProj(p)) {  // uniform: every thread stages
    SEQBOAT_DYNAMIC_SHARED(float4, dt_rows);
    const MambaDtProj& f = p.dt_proj;
    constexpr int kChannels = kDecodeThreads / N;
    fold.quads = static_cast<int>(DtRowFloats(f.w.cols) / 4);
    StageDtRows(p, dt_storage, blockIdx.x * kChannels, kChannels, fold.quads,
                reinterpret_cast<float*>(dt_rows));
    fold.row = dt_rows + (threadIdx.x / N) * fold.quads;
    fold.factor = Fp8RowFactor(f.w.data, dt_storage, f.w.rows, f.w.cols, cv);
    fold.x_vector = (reinterpret_cast<uintptr_t>(f.low) & 15) == 0 &&
                    (f.ldlow & 3) == 0 && (f.w.cols & 3) == 0;
  }
  for (int s = blockIdx.y; s < p.nsegs; s += gridDim.y) {
    const Segment seg = p.segs[s];
    // Padding segments may share a real segment's slot: no state access
    // (uniform over the block, which serves one segment at a time).
    if (seg.len <= 0) continue;
    float* state =
        p.state + seg.slot * p.state_stride + static_cast<int64_t>(cv) * N + i;
    float h = *state;
    const int64_t end = static_cast<int64_t>(seg.start) + seg.len;
    for (int64_t t = seg.start; t < end; ++t) {
      const float* b = p.bc + t * p.ldbc;
      const int64_t at = t * p.e + cv;
      const float x = p.x[at];
      const float dt =
          fold.row != nullptr ? FoldedDt<N>(p.dt_proj, fold, i, t) : p.dt[at];
      const float delta = op_math::ScanDelta(dt, dt_bias);
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

bool DecodeLanes(int n) { return n == 4 || n == 8 || n == 16 || n == 32; }

// Shared memory of the decode kernel: the block's dt_proj rows, if folded.
int64_t DecodeSharedBytes(const MambaScanParams& p) {
  if (!FoldsDtProj(p)) return 0;
  return int64_t{kDecodeThreads / p.n_state} * DtRowFloats(p.dt_proj.w.cols) *
         4;
}

dim3 GridFor(int e, int nsegs) {
  return dim3((e + kThreads - 1) / kThreads,
              nsegs < kMaxGridY ? nsegs : kMaxGridY);
}

}  // namespace

void LaunchMambaConv(const MambaConvParams& p, LaunchQueue queue) {
  if (p.nsegs <= 0 || p.e <= 0 || p.k <= 0) return;
  const dim3 grid = GridFor(p.e, p.nsegs);
  switch (p.k) {
    case 2:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, MambaConvRegKernel<2>)(p);
      break;
    case 3:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, MambaConvRegKernel<3>)(p);
      break;
    case 4:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, MambaConvRegKernel<4>)(p);
      break;
    default:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, MambaConvGlobalKernel)(p);
      break;
  }
}

void LaunchMambaScan(const MambaScanParams& p, LaunchQueue queue) {
  if (p.nsegs <= 0 || p.e <= 0 || p.n_state < 0) return;
  const dim3 grid = GridFor(p.e, p.nsegs);
  switch (p.n_state) {
    case 4:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, MambaScanRegKernel<4>)(p);
      break;
    case 8:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, MambaScanRegKernel<8>)(p);
      break;
    case 16:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, MambaScanRegKernel<16>)(p);
      break;
    case 32:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, MambaScanRegKernel<32>)(p);
      break;
    default:
      SEQBOAT_LAUNCH_ON(grid, kThreads, 0, queue, MambaScanGlobalKernel)(p);
      break;
  }
}

bool MambaScanDecodeFoldsDtProj(const MambaScanParams& p) {
  return DecodeLanes(p.n_state) && p.dt_proj.w.cols > 0 &&
         DecodeSharedBytes(p) <= kMaxDtRowsBytes;
}

void LaunchMambaScanDecode(const MambaScanParams& p, Storage dt_storage,
                           LaunchQueue queue) {
  if (p.nsegs <= 0 || p.e <= 0 || p.n_state < 0) return;
  const int n = p.n_state;
  if (!DecodeLanes(n)) {
    LaunchMambaScan(p, queue);
    return;
  }
  const int channels_per_block = kDecodeThreads / n;
  const int blocks_x = (p.e + channels_per_block - 1) / channels_per_block;
  const int want_y = std::max(1, kDecodeTargetBlocks / blocks_x);
  const dim3 grid(blocks_x, std::min({p.nsegs, want_y, kMaxGridY}));
  const size_t shared = static_cast<size_t>(DecodeSharedBytes(p));
  switch (n) {
    case 4:
      SEQBOAT_LAUNCH_ON(grid, kDecodeThreads, shared, queue,
                        MambaScanDecodeKernel<4>)
      (p, dt_storage);
      break;
    case 8:
      SEQBOAT_LAUNCH_ON(grid, kDecodeThreads, shared, queue,
                        MambaScanDecodeKernel<8>)
      (p, dt_storage);
      break;
    case 16:
      SEQBOAT_LAUNCH_ON(grid, kDecodeThreads, shared, queue,
                        MambaScanDecodeKernel<16>)
      (p, dt_storage);
      break;
    default:
      SEQBOAT_LAUNCH_ON(grid, kDecodeThreads, shared, queue,
                        MambaScanDecodeKernel<32>)
      (p, dt_storage);
      break;
  }
}

}  // namespace seqboat::cuda
