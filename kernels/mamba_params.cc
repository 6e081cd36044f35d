#include "kernels/mamba_params.h"

#include <cstddef>

namespace seqboat::cuda {
namespace {

// The kernels read the staged Segment array as MambaSegment.
static_assert(sizeof(Segment) == sizeof(MambaSegment));
static_assert(offsetof(Segment, slot) == offsetof(MambaSegment, slot));
static_assert(offsetof(Segment, start) == offsetof(MambaSegment, start));
static_assert(offsetof(Segment, len) == offsetof(MambaSegment, len));

}  // namespace

MambaConvParams MambaConvParamsFor(const Segment* dev_segs, int nsegs,
                                   const float* x, int ldx, float* state,
                                   int64_t state_stride, const float* w,
                                   const float* bias, int e, int k,
                                   float* out) {
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
  return p;
}

MambaScanParams MambaScanParamsFor(const Segment* dev_segs, int nsegs,
                                   const float* x, const float* dt,
                                   const float* bc, int ldbc, const float* z,
                                   int ldz, const float* a, const float* d,
                                   const float* dt_bias, float* state,
                                   int64_t state_stride, int e, int n_state,
                                   float* out) {
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
  return p;
}

}  // namespace seqboat::cuda
