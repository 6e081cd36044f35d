// Launchers of the Mamba-1 kernels (mamba_kernels.cu): the causal depthwise
// conv and the selective scan, one thread per (segment, channel), tokens of a
// segment in order. Pointers are device memory; each launcher enqueues on
// `stream` and returns at once. nsegs == 0 or e == 0 launches nothing.
//
// Segments of one call have distinct slots, except zero-length segments
// (decode padding), which may share a slot with a real one: those threads
// neither read nor write state.
#ifndef SEQBOAT_KERNELS_MAMBA_KERNELS_H_
#define SEQBOAT_KERNELS_MAMBA_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

namespace seqboat::cuda {

// seqboat::Segment as the kernels read it (the .cu files cannot include
// backend.h); mamba_ops.cc checks that the layouts agree.
struct MambaSegment {
  int32_t slot;
  int32_t start;
  int32_t len;
};

// Backend::MambaConv; state: slot s's [e, k-1] windows at
// state + s * state_stride.
struct MambaConvParams {
  const MambaSegment* segs = nullptr;
  int nsegs = 0;
  const float* x = nullptr;
  int ldx = 0;
  float* state = nullptr;
  int64_t state_stride = 0;
  const float* w = nullptr;
  const float* bias = nullptr;  // may be null
  int e = 0;
  int k = 0;
  float* out = nullptr;
};
// Window in registers for k in {2, 3, 4}, in global memory otherwise.
void LaunchMambaConv(const MambaConvParams& p, cudaStream_t stream);

// Backend::MambaScan; state: slot s's [e, n_state] at
// state + s * state_stride.
struct MambaScanParams {
  const MambaSegment* segs = nullptr;
  int nsegs = 0;
  const float* x = nullptr;
  const float* dt = nullptr;
  const float* bc = nullptr;
  int ldbc = 0;
  const float* z = nullptr;
  int ldz = 0;
  const float* a = nullptr;
  const float* d = nullptr;
  const float* dt_bias = nullptr;
  float* state = nullptr;
  int64_t state_stride = 0;
  int e = 0;
  int n_state = 0;
  float* out = nullptr;
};
// State and A rows in registers for n_state in {4, 8, 16, 32}, the state in
// global memory otherwise.
void LaunchMambaScan(const MambaScanParams& p, cudaStream_t stream);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_MAMBA_KERNELS_H_
