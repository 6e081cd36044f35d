// The SeqBoat block's ops on CUDA (MODELS.md §2): stage the host
// descriptors and launch the seqboat kernels with the ops' own parameters. The
// layer reads the active count back mid-step, so these steps are never
// recorded; they still stage before checking launching(), like every op, so a
// replay would stage the same bytes.
#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/seqboat_math.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/seqboat_kernels.h"

namespace seqboat::cuda {

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

void CudaBackend::SeqBoatEma(const SeqBoatEmaParams& p) {
  SeqBoatEmaParams dev = p;
  dev.segs = Stage(p.segs, p.nsegs);
  // A null copy means staging failed (already recorded): launching would
  // read through it and fault the whole context.
  if (!launching() || p.nsegs <= 0 || dev.segs == nullptr) return;
  LaunchSeqBoatEma(dev, queue());
  CheckLaunch("SeqBoatEma");
}

void CudaBackend::SeqBoatRoute(const SeqBoatRouteParams& p) {
  if (!launching()) return;
  LaunchSeqBoatRoute(p, queue());
  CheckLaunch("SeqBoatRoute");
}

void CudaBackend::SeqBoatAttend(const SeqBoatAttendParams& p) {
  SeqBoatAttendParams dev = p;
  dev.segs = Stage(p.segs, p.nsegs);
  // Null ranges select the decode form (rows' activity from p.compact).
  const bool decode = p.ranges == nullptr;
  dev.ranges = decode ? nullptr : Stage(p.ranges, p.nsegs);
  const std::vector<double> inv_freq = op_math::SeqBoatRopeInvFreq(p.shape);
  const double* dev_inv_freq = Stage(inv_freq.data(), inv_freq.size());
  // A null copy means staging failed (already recorded); inv_freq is null
  // by design when it is empty.
  if (!launching() || p.nsegs <= 0 || dev.segs == nullptr ||
      (!decode && dev.ranges == nullptr) || (decode && p.compact == nullptr) ||
      (!inv_freq.empty() && dev_inv_freq == nullptr)) {
    return;
  }
  LaunchSeqBoatAttend(dev, dev_inv_freq, queue());
  CheckLaunch("SeqBoatAttend");
}

void CudaBackend::SeqBoatMix(const SeqBoatMixParams& p) {
  if (!launching()) return;
  LaunchSeqBoatMix(p, queue());
  CheckLaunch("SeqBoatMix");
}

}  // namespace seqboat::cuda
