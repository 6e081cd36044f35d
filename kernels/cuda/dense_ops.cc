// Dense ops and the mlp/moe helpers: stage the host descriptors, launch.
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/dense_params.h"

namespace seqboat::cuda {

void CudaBackend::Embed(const int32_t* ids, int n, const Matrix& table,
                        float scale, float* out) {
  // Every step starts here, on whichever thread runs the engine.
  UseDevice();
  const int32_t* dev_ids = Stage(ids, n);
  if (!launching() || n <= 0 || dev_ids == nullptr) return;
  LaunchEmbed(EmbedParamsFor(dev_ids, n, table, StorageOf(table), scale, out),
              stream_);
  CheckLaunch("Embed");
}

void CudaBackend::RmsNorm(const float* x, int n, int d, const float* w,
                          float eps, float* out) {
  RmsNormStrided(x, d, n, d, w, eps, out, d);
}

void CudaBackend::RmsNormStrided(const float* x, int ldx, int n, int d,
                                 const float* w, float eps, float* out,
                                 int ldo) {
  if (!launching()) return;
  LaunchRmsNorm(x, ldx, n, d, w, eps, out, ldo, stream_);
  CheckLaunch("RmsNorm");
}

void CudaBackend::LayerNorm(const float* x, int n, int d, const float* w,
                            const float* b, float eps, float* out) {
  if (!launching()) return;
  LaunchLayerNorm(x, n, d, w, b, eps, out, stream_);
  CheckLaunch("LayerNorm");
}

void CudaBackend::GatherRows(const float* x, int d, const int32_t* rows, int m,
                             float* out) {
  const int32_t* dev_rows = Stage(rows, m);
  // Null: nothing to gather, or a staging failure already recorded.
  if (!launching() || dev_rows == nullptr) return;
  LaunchGatherRows(x, d, dev_rows, m, out, stream_);
  CheckLaunch("GatherRows");
}

void CudaBackend::ActivateMul(const float* a, int lda, const float* b, int ldb,
                              int n, int f, Activation act, float* out, int ldo,
                              bool accumulate) {
  if (!launching()) return;
  LaunchActivateMul(
      ActivateMulParamsFor(a, lda, b, ldb, n, f, act, out, ldo, accumulate),
      stream_);
  CheckLaunch("ActivateMul");
}

void CudaBackend::AddBias(float* y, int ldy, int n, int d, const float* v) {
  if (!launching()) return;
  LaunchAddBias(y, ldy, n, d, v, stream_);
  CheckLaunch("AddBias");
}

void CudaBackend::MoeRoute(const float* logits, int n, int x,
                           MoeRouting routing, int top_k, bool renormalize,
                           int32_t* experts, float* gates) {
  if (!launching()) return;
  LaunchMoeRoute(logits, n, x, routing, top_k, renormalize, experts, gates,
                 stream_);
  CheckLaunch("MoeRoute");
}

void CudaBackend::ScatterAddScaled(const float* src, int d, const int32_t* rows,
                                   const float* scales, int m, float* dst,
                                   int lddst) {
  const int32_t* dev_rows = Stage(rows, m);
  const float* dev_scales = Stage(scales, m);
  if (!launching() || dev_rows == nullptr || dev_scales == nullptr) return;
  LaunchScatterAddScaled(src, d, dev_rows, dev_scales, m, dst, lddst, stream_);
  CheckLaunch("ScatterAddScaled");
}

}  // namespace seqboat::cuda
