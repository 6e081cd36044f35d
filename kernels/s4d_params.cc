#include "kernels/s4d_params.h"

#include <cstddef>

namespace seqboat::cuda {
namespace {

// The kernel reads the staged Segment array as S4dSegment.
static_assert(sizeof(Segment) == sizeof(S4dSegment));
static_assert(offsetof(Segment, slot) == offsetof(S4dSegment, slot));
static_assert(offsetof(Segment, start) == offsetof(S4dSegment, start));
static_assert(offsetof(Segment, len) == offsetof(S4dSegment, len));

}  // namespace

S4dScanParams S4dScanParamsFor(const Segment* dev_segs, int nsegs,
                               const float* u, int ldu, const float* da,
                               const float* c, const float* d, float* state,
                               int64_t state_stride, int h, int m, int ch,
                               float scale, float* out) {
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
  return p;
}

}  // namespace seqboat::cuda
