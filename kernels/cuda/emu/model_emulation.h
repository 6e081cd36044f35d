// The CUDA backend's dense, Mamba-1, Mamba-2 and attention ops on the
// emulation, each dispatched as its op file dispatches (dense_emulation.h,
// mamba_ops.cc, mamba2_ops.cc, attention_ops.cc), every other op on the CPU
// backend: whole models on the emulated kernels at any batch (cuBLAS:
// dense_emulation.h's stand-in), with the 16-bit GEMM inputs that Mamba,
// dense and attention layers ask for when half_inputs is on.
#ifndef SEQBOAT_KERNELS_CUDA_EMU_MODEL_EMULATION_H_
#define SEQBOAT_KERNELS_CUDA_EMU_MODEL_EMULATION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/segment.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/emu/attention_emulation.h"
#include "kernels/cuda/emu/dense_emulation.h"
#include "kernels/cuda/mamba2_kernels.h"
#include "kernels/cuda/mamba_kernels.h"

namespace seqboat::emu_test {

class ModelEmulation : public DenseEmulation {
 public:
  using DenseEmulation::DenseEmulation;

  // Host memory is device memory here: the segments need no staging. The
  // scan is DenseEmulation's (a folded dt_proj as CUDA folds it).
  void MambaConv(const MambaConvParams& p) override {
    cuda::LaunchMambaConv(p, queue());
  }
  void Mamba2Scan(const Mamba2ScanParams& p) override {
    cuda::LaunchMamba2Scan(p, queue());
  }
  void GatedRmsNorm(const GatedRmsNormParams& p) override {
    cuda::LaunchGatedRmsNorm(p, queue());
  }
  void Mamba2Step(const Mamba2StepParams& p) override {
    if (!AllDecodeRows(p.scan.segs, p.scan.nsegs) ||
        !cuda::Mamba2StepFuses(p)) {
      MambaConv(p.conv);
      Mamba2Scan(p.scan);
      GatedRmsNorm(p.norm);
      return;
    }
    cuda::LaunchMamba2Step(p, queue());
  }
  void SinkAttention(const SinkAttentionParams& p) override {
    const absl::StatusOr<int> splits = EmulateSinkAttention(p, queue());
    EXPECT_TRUE(splits.ok()) << splits.status();
  }
  void SinkCacheAppend(const SinkAppendParams& p) override {
    const std::vector<cuda::SinkRow> items =
        cuda::SinkWorkItems(p.segs, p.nsegs);
    if (items.empty()) return;
    cuda::LaunchSinkCacheAppend(
        p,
        cuda::PlanSinkAppendWork(p.segs, p.nsegs, items.data(),
                                 static_cast<int>(items.size())),
        queue());
  }
};

}  // namespace seqboat::emu_test

#endif  // SEQBOAT_KERNELS_CUDA_EMU_MODEL_EMULATION_H_
