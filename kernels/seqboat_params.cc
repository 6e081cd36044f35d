#include "kernels/seqboat_params.h"

#include <cstddef>
#include <vector>

#include "engine/backend/seqboat_math.h"

namespace seqboat::cuda {

static_assert(sizeof(SeqBoatSeg) == sizeof(Segment) &&
                  offsetof(SeqBoatSeg, slot) == offsetof(Segment, slot) &&
                  offsetof(SeqBoatSeg, start) == offsetof(Segment, start) &&
                  offsetof(SeqBoatSeg, len) == offsetof(Segment, len),
              "the kernels read staged Segments as SeqBoatSeg");

SeqBoatEmaParams SeqBoatEmaLaunch(
    const Segment* staged_segs, int nsegs, const float* x, void* state,
    int64_t state_stride, const SeqBoatShape& shape, const float* in_coef,
    const float* decay, const float* out_coef, const float* skip, float* h) {
  SeqBoatEmaParams p;
  p.segs = reinterpret_cast<const SeqBoatSeg*>(staged_segs);
  p.nsegs = nsegs;
  p.x = x;
  p.state = state;
  p.state_stride = state_stride;
  p.shape = shape;
  p.in_coef = in_coef;
  p.decay = decay;
  p.out_coef = out_coef;
  p.skip = skip;
  p.h = h;
  return p;
}

std::vector<double> SeqBoatRopeInvFreq(const SeqBoatShape& shape) {
  const bool rope = shape.pos == SeqBoatPos::kRopeInterleaved;
  std::vector<double> inv_freq(rope ? shape.z / 2 : 0);
  for (int i = 0; i < static_cast<int>(inv_freq.size()); ++i) {
    inv_freq[i] = op_math::RopeInvFreq(i, shape.z, shape.rope_theta);
  }
  return inv_freq;
}

SeqBoatAttendParams SeqBoatAttendLaunch(
    const Segment* staged_segs, int nsegs,
    const SeqBoatActiveRange* staged_ranges, const double* staged_inv_freq,
    const int32_t* active_rows, const float* zrv, int ldzrv, void* state,
    int64_t state_stride, const SeqBoatShape& shape, const float* qk_gamma,
    const float* qk_beta, const float* rel_bias, float* out) {
  SeqBoatAttendParams p;
  p.segs = reinterpret_cast<const SeqBoatSeg*>(staged_segs);
  p.ranges = staged_ranges;
  p.nsegs = nsegs;
  p.active_rows = active_rows;
  p.zrv = zrv;
  p.ldzrv = ldzrv;
  p.state = state;
  p.state_stride = state_stride;
  p.shape = shape;
  p.qk_gamma = qk_gamma;
  p.qk_beta = qk_beta;
  p.rel_bias = rel_bias;
  p.inv_freq = staged_inv_freq;
  p.scale = op_math::SeqBoatScoreScale(shape);
  p.out = out;
  return p;
}

}  // namespace seqboat::cuda
