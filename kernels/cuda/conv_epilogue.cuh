// Mamba-1's causal depthwise conv as the GEMV's epilogue (GemvParams::conv,
// dense_params.h GemmConv): the thread that stores output (i, c) of the
// input projection, c < conv.e, is the only one that needs it, and runs
// channel c's conv step for row i's segment right there, so the conv is no
// launch of its own. Decode calls only (the host checks AllDecodeRows): a
// row's segment is the one that starts there with one token; padding rows
// (zero-length segments) and rows of no segment touch no state and write
// nothing, as in the conv kernel.
//
// The step is op_math::ConvStep as the conv kernel that LaunchMambaConv
// picks runs it (mamba_kernels.cu: registers for k <= 4, the window in
// memory otherwise), with the same taps, bias and input bits, so out and
// the shifted window are bit for bit what the plain GEMV followed by that
// kernel leave: the same fp32 operations in the same order, the conv's
// input being the value just stored in y.
#ifndef SEQBOAT_KERNELS_CUDA_CONV_EPILOGUE_CUH_
#define SEQBOAT_KERNELS_CUDA_CONV_EPILOGUE_CUH_

#include <stdint.h>

#include "engine/backend/dense_params.h"
#include "engine/backend/op_math.h"
#include "engine/backend/segment.h"

namespace seqboat::cuda {

// The slot of the decode segment whose one token is row i, or -1. Segments
// are few (a batch of at most kGemvMaxRows and its padding) and the same
// for every thread: the loads hit L1.
__device__ __forceinline__ int DecodeSlotOfRow(const GemmConv& conv, int i) {
  for (int s = 0; s < conv.nsegs; ++s) {
    const Segment seg = conv.segs[s];
    if (seg.len == 1 && seg.start == i) return seg.slot;
  }
  return -1;
}

// The conv kernel's step for k in {2, 3, 4} (MambaConvRegKernel): taps and
// window copied to registers, the step on them, the window stored back.
// Spelled as the kernel spells it, so that the compiler contracts the same
// products into FMAs (a generic loop over a window in memory gave other
// bits under the emulation's host compiler).
template <int K>
__device__ __forceinline__ float ConvStepInRegisters(const GemmConv& conv,
                                                     float* window, int c,
                                                     float bias, float y) {
  float w[K];
#pragma unroll
  for (int i = 0; i < K; ++i) w[i] = conv.w[static_cast<int64_t>(c) * K + i];
  float win[K - 1];
#pragma unroll
  for (int i = 0; i < K - 1; ++i) win[i] = window[i];
  const float out = op_math::ConvStep(win, w, bias, y, K);
#pragma unroll
  for (int i = 0; i < K - 1; ++i) window[i] = win[i];
  return out;
}

// Channel c of row i's conv, given y = the projection's output (i, c) as
// stored: the step of the conv kernel LaunchMambaConv picks for conv.k.
__device__ __forceinline__ void ConvEpilogue(const GemmConv& conv, int i, int c,
                                             float y) {
  if (c >= conv.e) return;
  const int slot = DecodeSlotOfRow(conv, i);
  if (slot < 0) return;
  float* window = conv.state + slot * conv.state_stride +
                  static_cast<int64_t>(c) * (conv.k - 1);
  const float bias = conv.bias != nullptr ? conv.bias[c] : 0.0f;
  float out;
  switch (conv.k) {
    case 2:
      out = ConvStepInRegisters<2>(conv, window, c, bias, y);
      break;
    case 3:
      out = ConvStepInRegisters<3>(conv, window, c, bias, y);
      break;
    case 4:
      out = ConvStepInRegisters<4>(conv, window, c, bias, y);
      break;
    default:  // MambaConvGlobalKernel: the window in place
      out = op_math::ConvStep(window, conv.w + static_cast<int64_t>(c) * conv.k,
                              bias, y, conv.k);
      break;
  }
  conv.out[static_cast<int64_t>(i) * conv.e + c] = out;
}

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_CUDA_CONV_EPILOGUE_CUH_
