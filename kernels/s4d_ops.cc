// S4D's diagonal recurrence: stage the segments, launch (s4d_kernels.cu).
#include <cstddef>

#include "kernels/cuda_backend_impl.h"
#include "kernels/s4d_kernels.h"

namespace seqboat::cuda {
namespace {

// The kernel reads the staged Segment array as S4dSegment.
static_assert(sizeof(Segment) == sizeof(S4dSegment));
static_assert(offsetof(Segment, slot) == offsetof(S4dSegment, slot));
static_assert(offsetof(Segment, start) == offsetof(S4dSegment, start));
static_assert(offsetof(Segment, len) == offsetof(S4dSegment, len));

}  // namespace

void CudaBackend::S4dScan(const Segment* segs, int nsegs, const float* u,
                          int ldu, const float* da, const float* c,
                          const float* d, float* state, int64_t state_stride,
                          int h, int m, int ch, float scale, float* out) {
  // Staged before the launching() check: a replay must re-read them.
  const Segment* dev_segs = Stage(segs, nsegs);
  if (!launching() || dev_segs == nullptr) return;
  S4dScanParams p;
  p.segs = reinterpret_cast<const S4dSegment*>(dev_segs);
  p.nsegs = nsegs;
  p.u = u;
  p.ldu = ldu;
  p.da = da;
  p.c = c;
  p.d = d;
  p.state = state;
  p.state_stride = state_stride;
  p.h = h;
  p.m = m;
  p.ch = ch;
  p.scale = scale;
  p.out = out;
  LaunchS4dScan(p, stream_);
  CheckLaunch("S4dScan");
}

}  // namespace seqboat::cuda
