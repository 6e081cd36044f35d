// The SeqBoat block's ops on CUDA (MODELS.md §2): stage the host
// descriptors, launch the seqboat kernels. The layer reads the active count
// back mid-step, so these steps are never recorded; they still stage before
// checking launching(), like every op, so a replay would stage the same bytes.
#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/seqboat_math.h"
#include "kernels/cuda_backend_impl.h"
#include "kernels/cuda_check.h"
#include "kernels/seqboat_kernels.h"

namespace seqboat::cuda {

static_assert(sizeof(SeqBoatSeg) == sizeof(Segment) &&
                  offsetof(SeqBoatSeg, slot) == offsetof(Segment, slot) &&
                  offsetof(SeqBoatSeg, start) == offsetof(Segment, start) &&
                  offsetof(SeqBoatSeg, len) == offsetof(Segment, len),
              "the kernels read staged Segments as SeqBoatSeg");

absl::Status CudaBackend::CheckSeqBoat(const SeqBoatShape& shape) const {
  const size_t need = SeqBoatAttendSharedBytes(shape);
  int limit = 0;
  const cudaError_t e = cudaDeviceGetAttribute(
      &limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, options_.device);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(e, "cudaDeviceGetAttribute (shared memory per block)");
  }
  if (need <= static_cast<size_t>(limit)) return absl::OkStatus();
  // The attention keeps a block's whole working memory in shared memory.
  return absl::FailedPreconditionError(absl::StrCat(
      "working memory window ", shape.w, " (z_dim ", shape.z, ") needs ",
      need / 1024, " KiB of shared memory per block; ", DeviceName(),
      " allows ", limit / 1024,
      " KiB. Convert with a smaller window or serve with --backend=cpu"));
}

void CudaBackend::SeqBoatEma(const Segment* segs, int nsegs, const float* x,
                             void* state, int64_t state_stride,
                             const SeqBoatShape& shape, const float* in_coef,
                             const float* decay, const float* out_coef,
                             const float* skip, float* h) {
  const Segment* dev_segs = Stage(segs, nsegs);
  // A null copy means staging failed (already recorded): launching would
  // read through it and fault the whole context.
  if (!launching() || nsegs <= 0 || dev_segs == nullptr) return;
  SeqBoatEmaParams p;
  p.segs = reinterpret_cast<const SeqBoatSeg*>(dev_segs);
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
  LaunchSeqBoatEma(p, stream_);
  CheckLaunch("SeqBoatEma");
}

void CudaBackend::SeqBoatRoute(const float* u, int ldu, int n,
                               const float* temperature, float* conf,
                               int32_t* compact, int32_t* active) {
  if (!launching()) return;
  LaunchSeqBoatRoute(u, ldu, n, temperature, conf, compact, active, stream_);
  CheckLaunch("SeqBoatRoute");
}

void CudaBackend::SeqBoatAttend(const Segment* segs, int nsegs,
                                const SeqBoatActiveRange* ranges,
                                const int32_t* active_rows, const float* zrv,
                                int ldzrv, void* state, int64_t state_stride,
                                const SeqBoatShape& shape,
                                const float* qk_gamma, const float* qk_beta,
                                const float* rel_bias, float* out) {
  const Segment* dev_segs = Stage(segs, nsegs);
  const SeqBoatActiveRange* dev_ranges = Stage(ranges, nsegs);
  // The CPU's angles to the bit: the same host pow for θ_i.
  const bool rope = shape.pos == SeqBoatPos::kRopeInterleaved;
  std::vector<double> inv_freq(rope ? shape.z / 2 : 0);
  for (int i = 0; i < static_cast<int>(inv_freq.size()); ++i) {
    inv_freq[i] = op_math::RopeInvFreq(i, shape.z, shape.rope_theta);
  }
  const double* dev_inv_freq = Stage(inv_freq.data(), inv_freq.size());
  // A null copy means staging failed (already recorded); inv_freq is null
  // by design when it is empty.
  if (!launching() || nsegs <= 0 || dev_segs == nullptr ||
      dev_ranges == nullptr || (!inv_freq.empty() && dev_inv_freq == nullptr)) {
    return;
  }
  SeqBoatAttendParams p;
  p.segs = reinterpret_cast<const SeqBoatSeg*>(dev_segs);
  p.ranges = dev_ranges;
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
  p.inv_freq = dev_inv_freq;
  p.scale = op_math::SeqBoatScoreScale(shape);
  p.out = out;
  LaunchSeqBoatAttend(p, stream_);
  CheckLaunch("SeqBoatAttend");
}

void CudaBackend::SeqBoatMix(const float* s, const float* g, int ldg,
                             const float* y, const float* conf,
                             const int32_t* compact, int n, int d, float* out) {
  if (!launching()) return;
  LaunchSeqBoatMix(s, g, ldg, y, conf, compact, n, d, out, stream_);
  CheckLaunch("SeqBoatMix");
}

}  // namespace seqboat::cuda
