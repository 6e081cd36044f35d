// Whole models on the CUDA backend's kernels at decode batches past the
// GEMV's 16 rows, on the CPU: the dense, Mamba-1 and Mamba-2 ops run on the
// CUDA emulation (kernels/cuda/emu model_emulation.h, cuBLAS a host
// stand-in), every other op on the CPU backend. With the 16-bit GEMM inputs
// written by the ops before the GEMMs (engine/backend/half_rows.h) the
// logits are the bits of the path that converts every GEMM's input, with
// ConvertRows launched only where no op wrote the copy, and they stay within
// bf16's rounding of the fp32 CPU backend. With early launches on, every
// kernel of those ops is launched early, at any batch, with the bits of
// plain launches.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/emu/model_emulation.h"
#include "tools/cuda_emu/emulator.h"

namespace seqboat {
namespace {

constexpr int kSteps = 3;

// Logits of kSteps decode steps of `batch` sequences from fresh state, one
// row a sequence, each on its own slot.
std::vector<float> DecodeLogits(const std::string& dir, Backend& backend,
                                int batch) {
  ModelLimits limits;
  limits.max_slots = batch;
  limits.max_rows_per_step = std::max(batch, 64);
  limits.decode_buckets = std::vector<int>{batch};
  auto model = Model::Load(dir, backend, limits);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  const int v = (*model)->vocab_size();
  StepRows step;
  for (int i = 0; i < batch; ++i) {
    step.segs.push_back(Segment{*(*model)->arena().Acquire(), i, 1});
    step.logit_rows.push_back(i);
  }
  std::vector<float> out(static_cast<size_t>(kSteps) * batch * v);
  for (int s = 0; s < kSteps; ++s) {
    step.ids.clear();
    for (int i = 0; i < batch; ++i) step.ids.push_back((i * 37 + s * 11) % 256);
    EXPECT_TRUE(
        (*model)
            ->Forward(step, out.data() + static_cast<size_t>(s) * batch * v)
            .ok());
  }
  return out;
}

struct EmulatedRun {
  std::vector<float> logits;
  int64_t launches = 0;
  int64_t converts = 0;
};

EmulatedRun Emulated(const std::string& dir, int batch, bool half_inputs) {
  emu_test::ModelEmulation be(cuda::Storage::kBf16, half_inputs);
  EmulatedRun run;
  const int64_t before = emu::State().launches;
  run.logits = DecodeLogits(dir, be, batch);
  run.launches = emu::State().launches - before;
  run.converts = be.converts();
  EXPECT_TRUE(be.TakeError().ok());
  return run;
}

// routed: the model has blocks with discrete choices (MoE experts, the
// SeqBoat router). tiny_hybrid's bf16 logits have rows off by far more than
// rounding (max 5.3 of 11 here, on the converting path alike): bf16 rounding
// flips a top-1 MoE near-tie (model_gpu_test's
// Bf16WeightsStayWithinRoundingOfTheCpu says which), so only the mean is
// bounded for it.
void ExpectNearFp32(const std::string& what, const std::vector<float>& want,
                    const std::vector<float>& got, bool routed) {
  ASSERT_EQ(want.size(), got.size()) << what;
  double largest = 0, max_err = 0, sum = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    largest = std::max(largest, double(std::fabs(want[i])));
    max_err = std::max(max_err, double(std::fabs(want[i] - got[i])));
    sum += std::fabs(want[i] - got[i]);
  }
  const double mean = sum / want.size();
  std::printf(
      "%s: bf16 vs fp32 logit error mean %.4g max %.4g (largest %.3g)\n",
      what.c_str(), mean, max_err, largest);
  // bf16 weights and GEMM inputs (8 mantissa bits) through a few layers.
  EXPECT_LT(mean, 0.02 * largest) << what;
  if (!routed) EXPECT_LT(max_err, 0.1 * largest) << what;
}

TEST(CudaHalfInputEmuTest, CopiesAreTheConvertedBitsWithFewerLaunches) {
  struct Case {
    const char* dir;
    // ConvertRows launches a step saves: Mamba-1's in_proj (its folded
    // norm), x_proj and out_proj per block; -1 where blocks of other kinds
    // make the count the test's own (only a decrease is asserted).
    int saved_per_step;
    bool routed;  // ExpectNearFp32's
  };
  // weights/models/mamba-baseline: 8 Mamba-1 blocks. tests/data/tiny_hybrid:
  // every block kind, Mamba-2 and MLPs included.
  for (const Case& c : {Case{"weights/models/mamba-baseline", 3 * 8, false},
                        Case{"tests/data/tiny_hybrid", -1, true}}) {
    for (const int batch : {17, 64, 256}) {
      const std::string what =
          std::string(c.dir) + " batch " + std::to_string(batch);
      const EmulatedRun converting = Emulated(c.dir, batch, false);
      const EmulatedRun fused = Emulated(c.dir, batch, true);
      ASSERT_EQ(converting.logits.size(), fused.logits.size()) << what;
      EXPECT_EQ(std::memcmp(converting.logits.data(), fused.logits.data(),
                            fused.logits.size() * sizeof(float)),
                0)
          << what;
      EXPECT_EQ(converting.launches - fused.launches,
                converting.converts - fused.converts)
          << what;
      std::printf(
          "%s: %lld launches, %lld of them ConvertRows (%lld, %lld "
          "converting every input)\n",
          what.c_str(), static_cast<long long>(fused.launches),
          static_cast<long long>(fused.converts),
          static_cast<long long>(converting.launches),
          static_cast<long long>(converting.converts));
      if (c.saved_per_step >= 0) {
        EXPECT_EQ(converting.converts - fused.converts,
                  int64_t{c.saved_per_step} * kSteps)
            << what;
      } else {
        EXPECT_LT(fused.converts, converting.converts) << what;
      }
      auto cpu = MakeCpuBackend(1);
      ExpectNearFp32(what, DecodeLogits(c.dir, *cpu, batch), fused.logits,
                     c.routed);
    }
  }
}

// The option on (CudaBackendOptions::early_launch's default), every kernel
// the emulated ops launch is early: the GEMVs, and the norms, scans, convs,
// row copies and MoE kernels on their LaunchQueue. The emulation aborts a
// thread of one that returns without waiting for the kernel before; the
// logits are the bits of the option off, which launches none early.
TEST(EarlyLaunchModelEmuTest, EveryKernelLaunchesEarlyWithThePlainBits) {
  for (const char* dir :
       {"weights/models/mamba-baseline", "tests/data/tiny_hybrid"}) {
    for (const int batch : {1, 17}) {
      const std::string what =
          std::string(dir) + " batch " + std::to_string(batch);
      std::vector<float> logits[2];
      for (const bool early : {false, true}) {
        emu_test::ModelEmulation be(cuda::Storage::kBf16,
                                    /*half_inputs=*/true);
        be.set_early_launch(early);
        const int64_t launches = emu::State().launches;
        const int64_t earlies = emu::State().early_launches;
        logits[early] = DecodeLogits(dir, be, batch);
        EXPECT_TRUE(be.TakeError().ok()) << what;
        const int64_t made = emu::State().launches - launches;
        EXPECT_GT(made, 0) << what;
        EXPECT_EQ(emu::State().early_launches - earlies, early ? made : 0)
            << what << " early " << early;
      }
      ASSERT_EQ(logits[0].size(), logits[1].size()) << what;
      EXPECT_EQ(std::memcmp(logits[0].data(), logits[1].data(),
                            logits[0].size() * sizeof(float)),
                0)
          << what;
    }
  }
}

}  // namespace
}  // namespace seqboat
