// Mamba-1's recurrent ops on the CPU: OpenMP over (segment, block of
// channels) pairs, tokens of a segment in order; each pair runs
// mamba_blocks.h compiled for the backend's instruction set.
#include "engine/cpu/cpu_backend_impl.h"
#include "engine/cpu/mamba_blocks.h"
#include "engine/cpu/mamba_ops_isa.h"
#include "engine/cpu/parallel.h"

namespace seqboat::cpu {

void Avx2ConvBlock(const MambaConvParams& p, int s, int blk) {
  mamba_blocks::ConvBlock(p, s, blk);
}

void Avx2ScanBlock(const MambaScanParams& p, int s, int blk) {
  mamba_blocks::ScanBlock(p, s, blk);
}

namespace {

// Every (segment, block of channels) pair of an op, over the OpenMP threads.
template <typename Params>
void ForEachBlock(const Params& p, int64_t work,
                  void (*block)(const Params&, int, int)) {
  const int blocks = (p.e + mamba_blocks::kBlock - 1) / mamba_blocks::kBlock;
#pragma omp parallel for collapse(2) schedule(static) if (WorthThreads(work))
  for (int s = 0; s < p.nsegs; ++s) {
    for (int blk = 0; blk < blocks; ++blk) block(p, s, blk);
  }
}

}  // namespace

void CpuBackend::MambaConv(const MambaConvParams& p) {
  ForEachBlock(p, SegmentRows(p.segs, p.nsegs) * p.e * p.k,
               isa_ == Isa::kAvx512 ? Avx512ConvBlock : Avx2ConvBlock);
}

void CpuBackend::MambaScan(const MambaScanParams& p) {
  ForEachBlock(p, SegmentRows(p.segs, p.nsegs) * p.e * p.n_state * 4,
               isa_ == Isa::kAvx512 ? Avx512ScanBlock : Avx2ScanBlock);
}

}  // namespace seqboat::cpu
