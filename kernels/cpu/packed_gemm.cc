#include "kernels/cpu/packed_gemm.h"

#include <omp.h>

#include <algorithm>

#include "kernels/cpu/parallel.h"

namespace seqboat::cpu {
namespace {

// A thread's panels are taken in chunks that stay in L2 (about 256 KiB of
// weights) while every row tile of a block passes over them; a chunk is at
// least a few panels so that the widest tiles still fit in it.
constexpr int64_t kChunkBytes = 256 << 10;
constexpr int64_t kMinChunkPanels = 8;
// Rows of x per block: their k columns (kRowBytes at most) stay in L2 across
// the chunks; at decode batch sizes that is every row, so each weight is read
// from memory once per call.
constexpr int64_t kRowBytes = 512 << 10;

}  // namespace

void PackedGemm(Isa isa, const float* x, int64_t ldx, int n,
                const PackedMatrix& w, const float* bias, float* y, int64_t ldy,
                bool accumulate) {
  if (n <= 0 || w.rows() == 0) return;
  void (*block)(const GemmBlock&) =
      isa == Isa::kAvx512 ? Avx512GemmBlock : Avx2GemmBlock;
  const int64_t k = std::max<int64_t>(w.cols(), 1);
  const int64_t panels = w.panels();
  const int64_t panel_bytes = k * kPanel * ElementBytes(w.type());
  const int64_t tile =
      isa == Isa::kAvx512 ? Avx512TilePanels(n) : Avx2TilePanels(n);
  const int64_t chunk =
      std::max(kMinChunkPanels,
               kChunkBytes / std::max<int64_t>(panel_bytes, 1) + tile / 2) /
      tile * tile;
  const int64_t row_block = std::max<int64_t>(8, kRowBytes / (4 * k)) / 8 * 8;
  const bool threads = WorthThreads(int64_t{n} * w.rows() * k) && panels > 1;
#pragma omp parallel if (threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t q0 = panels * t / nt, q1 = panels * (t + 1) / nt;
    for (int64_t i0 = 0; i0 < n; i0 += row_block) {
      for (int64_t c0 = q0; c0 < q1; c0 += chunk) {
        GemmBlock b;
        b.x = x + i0 * ldx;
        b.ldx = ldx;
        b.n = static_cast<int>(std::min<int64_t>(row_block, n - i0));
        b.w = &w;
        b.p0 = c0;
        b.p1 = std::min(c0 + chunk, q1);
        b.bias = bias;
        b.y = y + i0 * ldy;
        b.ldy = ldy;
        b.accumulate = accumulate;
        block(b);
      }
    }
  }
}

}  // namespace seqboat::cpu
