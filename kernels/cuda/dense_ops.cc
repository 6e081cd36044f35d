// Dense ops and the mlp/moe helpers: stage the host descriptors, launch.
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/dense_params.h"

namespace seqboat::cuda {

void CudaBackend::Embed(const EmbedParams& p) {
  // Every step starts here, on whichever thread runs the engine.
  UseDevice();
  EmbedParams dev = p;
  dev.ids = Stage(p.ids, p.n);
  FedMapFor(p, &fed_map_);
  const int32_t* dev_map = Stage(fed_map_.data(), fed_map_.size());
  if (!launching() || p.n <= 0 || dev.ids == nullptr || dev_map == nullptr) {
    return;
  }
  LaunchEmbed(dev, StorageOf(p.table), dev_map, queue());
  CheckLaunch("Embed");
}

void CudaBackend::RmsNorm(const NormParams& p) {
  if (!launching()) return;
  LaunchRmsNorm(p, queue());
  CheckLaunch("RmsNorm");
}

void CudaBackend::LayerNorm(const NormParams& p) {
  if (!launching()) return;
  LaunchLayerNorm(p, queue());
  CheckLaunch("LayerNorm");
}

void CudaBackend::GatherRows(const GatherRowsParams& p) {
  GatherRowsParams dev = p;
  dev.rows = Stage(p.rows, p.m);
  // Null: nothing to gather, or a staging failure already recorded.
  if (!launching() || dev.rows == nullptr) return;
  LaunchGatherRows(dev, queue());
  CheckLaunch("GatherRows");
}

void CudaBackend::ActivateMul(const ActivateMulParams& p) {
  if (!launching()) return;
  LaunchActivateMul(p, queue());
  CheckLaunch("ActivateMul");
}

void CudaBackend::AddBias(const AddBiasParams& p) {
  if (!launching()) return;
  LaunchAddBias(p, queue());
  CheckLaunch("AddBias");
}

void CudaBackend::MoeRoute(const MoeRouteParams& p) {
  if (!launching()) return;
  LaunchMoeRoute(p, queue());
  CheckLaunch("MoeRoute");
}

void CudaBackend::ScatterAddScaled(const ScatterAddParams& p) {
  ScatterAddParams dev = p;
  dev.rows = Stage(p.rows, p.m);
  dev.scales = Stage(p.scales, p.m);
  if (!launching() || dev.rows == nullptr || dev.scales == nullptr) return;
  LaunchScatterAddScaled(dev, queue());
  CheckLaunch("ScatterAddScaled");
}

}  // namespace seqboat::cuda
