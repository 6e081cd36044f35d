// Mamba-1's recurrent ops: stage the segments, launch (mamba_kernels.cu).
#include <cstddef>

#include "kernels/cuda_backend_impl.h"
#include "kernels/mamba_kernels.h"

namespace seqboat::cuda {
namespace {

// The kernels read the staged Segment array as MambaSegment.
static_assert(sizeof(Segment) == sizeof(MambaSegment));
static_assert(offsetof(Segment, slot) == offsetof(MambaSegment, slot));
static_assert(offsetof(Segment, start) == offsetof(MambaSegment, start));
static_assert(offsetof(Segment, len) == offsetof(MambaSegment, len));

}  // namespace

void CudaBackend::MambaConv(const Segment* segs, int nsegs, const float* x,
                            int ldx, float* state, int64_t state_stride,
                            const float* w, const float* bias, int e, int k,
                            float* out) {
  // Staged before the launching() check: a replay must re-read them.
  const Segment* dev_segs = Stage(segs, nsegs);
  if (!launching() || dev_segs == nullptr) return;
  MambaConvParams p;
  p.segs = reinterpret_cast<const MambaSegment*>(dev_segs);
  p.nsegs = nsegs;
  p.x = x;
  p.ldx = ldx;
  p.state = state;
  p.state_stride = state_stride;
  p.w = w;
  p.bias = bias;
  p.e = e;
  p.k = k;
  p.out = out;
  LaunchMambaConv(p, stream_);
  CheckLaunch("MambaConv");
}

void CudaBackend::MambaScan(const Segment* segs, int nsegs, const float* x,
                            const float* dt, const float* bc, int ldbc,
                            const float* z, int ldz, const float* a,
                            const float* d, const float* dt_bias, float* state,
                            int64_t state_stride, int e, int n_state,
                            float* out) {
  const Segment* dev_segs = Stage(segs, nsegs);
  if (!launching() || dev_segs == nullptr) return;
  MambaScanParams p;
  p.segs = reinterpret_cast<const MambaSegment*>(dev_segs);
  p.nsegs = nsegs;
  p.x = x;
  p.dt = dt;
  p.bc = bc;
  p.ldbc = ldbc;
  p.z = z;
  p.ldz = ldz;
  p.a = a;
  p.d = d;
  p.dt_bias = dt_bias;
  p.state = state;
  p.state_stride = state_stride;
  p.e = e;
  p.n_state = n_state;
  p.out = out;
  LaunchMambaScan(p, stream_);
  CheckLaunch("MambaScan");
}

}  // namespace seqboat::cuda
