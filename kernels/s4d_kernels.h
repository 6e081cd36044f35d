// Launcher of the S4D diagonal recurrence (s4d_kernels.cu): one thread per
// (segment, channel), tokens of a segment in order. Pointers are device
// memory; the launcher enqueues on `stream` and returns at once. nsegs == 0
// or h == 0 launches nothing.
//
// Segments of one call have distinct slots, except zero-length segments
// (decode padding), which may share a slot with a real one: those threads
// neither read nor write state.
#ifndef SEQBOAT_KERNELS_S4D_KERNELS_H_
#define SEQBOAT_KERNELS_S4D_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

namespace seqboat::cuda {

// seqboat::Segment as the kernel reads it (the .cu files cannot include
// backend.h); s4d_ops.cc checks that the layouts agree.
struct S4dSegment {
  int32_t slot;
  int32_t start;
  int32_t len;
};

// Backend::S4dScan; state: slot s's zeta [h, m, 2] at
// state + s * state_stride.
struct S4dScanParams {
  const S4dSegment* segs = nullptr;
  int nsegs = 0;
  const float* u = nullptr;
  int ldu = 0;
  const float* da = nullptr;  // [h, m, 2]
  const float* c = nullptr;   // [ch, h, m, 2]
  const float* d = nullptr;   // [ch, h]
  float* state = nullptr;
  int64_t state_stride = 0;
  int h = 0;
  int m = 0;
  int ch = 0;
  float scale = 1.0f;
  float* out = nullptr;  // [n, ch * h]
};
// The channel's zeta in registers for m in {4, 8, 16, 32}, in global memory
// otherwise.
void LaunchS4dScan(const S4dScanParams& p, cudaStream_t stream);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_S4D_KERNELS_H_
