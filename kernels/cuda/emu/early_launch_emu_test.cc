// The small-batch GEMV launched early (launch.cuh, GemvParams::early) on the
// CUDA emulation: every thread of the main and the reduction kernel waits
// for the kernels before it (the emulation aborts otherwise), the vector
// path's blocks stream each weight of the matrix into L2 exactly once
// before they wait (the recorded prefetches tile it without gaps or
// overlaps), the scalar path prefetches nothing, and the results are the
// bits of the ordinary launch. At the 130M Mamba's in_proj and x_proj, a
// column-split shape and the narrow 1.4B x_proj, in fp32, bf16 and fp8.
// What the emulation cannot show, that the blocks run beside the kernel
// before on a GPU, the GPU test's chains of dependent GEMVs check
// (kernels/cuda/gemv_fusion_gpu_test.cc).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/dense_kernels.h"
#include "kernels/cuda/emu/dense_emulation.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/testing/dense_cases.h"

namespace seqboat::emu_test {
namespace {

using cuda::Storage;

struct Shape {
  const char* name;
  int rows, cols;
};

// The matrix bytes the prefetches since `first` cover, or -1 when they
// leave a gap, overlap, or fall outside [w, w + bytes).
int64_t TiledBytes(const void* w, int64_t bytes, size_t first) {
  std::vector<emu::Emulation::Prefetch> got(
      emu::State().prefetches.begin() + first, emu::State().prefetches.end());
  std::sort(got.begin(), got.end(),
            [](const auto& a, const auto& b) { return a.at < b.at; });
  const char* at = static_cast<const char*>(w);
  for (const auto& p : got) {
    if (p.at != at) return -1;
    at += p.bytes;
  }
  return at - static_cast<const char*>(w) > bytes
             ? -1
             : at - static_cast<const char*>(w);
}

TEST(EarlyLaunchEmuTest, EarlyGemvPrefetchesEachWeightOnceAndKeepsItsBits) {
  const Shape shapes[] = {{"130M in_proj", 3072, 768},
                          {"130M x_proj", 80, 1536},
                          {"column splits", 5, 16384},
                          {"1.4B x_proj", 160, 4096}};
  for (const Shape& sh : shapes) {
    const int rows = sh.rows, cols = sh.cols, nmax = cuda::kGemvMaxRows;
    const std::vector<float> w = Random(int64_t{rows} * cols, 71),
                             x = Random(int64_t{nmax} * cols, 72),
                             y0 = Random(int64_t{nmax} * rows, 73);
    for (const Storage s : {Storage::kF32, Storage::kBf16, Storage::kFp8E4m3}) {
      SCOPED_TRACE(testing::Message() << sh.name << " storage " << int(s));
      DenseEmulation emu(s);
      const Matrix m = emu.UploadAt(w.data(), rows, cols, s, 0);
      for (const int n : {1, 16}) {
        emu.set_early_launch(false);
        const int64_t early_before = emu::State().early_launches;
        const std::vector<float> plain =
            parity::dense::GemmOn(emu, m, x, cols, n, y0, rows);
        EXPECT_EQ(emu::State().early_launches, early_before);
        emu.set_early_launch(true);
        const size_t first = emu::State().prefetches.size();
        const int64_t launches = emu::State().launches;
        const std::vector<float> early =
            parity::dense::GemmOn(emu, m, x, cols, n, y0, rows);
        EXPECT_TRUE(SameBits(plain, early)) << "n=" << n;
        // Every launch of the GEMV (with its reduction) was early.
        EXPECT_EQ(emu::State().early_launches - early_before,
                  emu::State().launches - launches);
        EXPECT_EQ(
            TiledBytes(m.data, int64_t{rows} * cols * cuda::WeightBytes(s),
                       first),
            int64_t{rows} * cols * cuda::WeightBytes(s))
            << "n=" << n;
      }
      EXPECT_TRUE(emu.TakeError().ok());
    }
  }
}

// Columns that no 16-byte load divides take the scalar path, which has no
// aligned rows to prefetch: it still waits, and keeps its bits.
TEST(EarlyLaunchEmuTest, ScalarPathWaitsWithoutPrefetching) {
  const int rows = 5, cols = 16387, n = 3;
  const std::vector<float> w = Random(int64_t{rows} * cols, 81),
                           x = Random(int64_t{n} * cols, 82),
                           y0 = Random(int64_t{n} * rows, 83);
  DenseEmulation emu(Storage::kBf16);
  const Matrix m = emu.UploadAt(w.data(), rows, cols, Storage::kBf16, 0);
  emu.set_early_launch(false);
  const std::vector<float> plain =
      parity::dense::GemmOn(emu, m, x, cols, n, y0, rows);
  emu.set_early_launch(true);
  const size_t first = emu::State().prefetches.size();
  const int64_t early_before = emu::State().early_launches;
  const std::vector<float> early =
      parity::dense::GemmOn(emu, m, x, cols, n, y0, rows);
  EXPECT_TRUE(SameBits(plain, early));
  EXPECT_EQ(emu::State().prefetches.size(), first);
  EXPECT_EQ(emu::State().early_launches - early_before, 2);  // with the sum
  EXPECT_TRUE(emu.TakeError().ok());
}

}  // namespace
}  // namespace seqboat::emu_test
