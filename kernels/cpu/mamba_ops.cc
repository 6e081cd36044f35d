// Mamba's recurrent ops on the CPU: OpenMP over (segment, block of channels)
// pairs for the scan and (group of segments, block) pairs for the conv,
// tokens of a segment in order, and over one-token segments for the conv of
// decode rows; each runs mamba_blocks.h compiled for the backend's
// instruction set.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_backend_impl.h"
#include "kernels/cpu/mamba_blocks.h"
#include "kernels/cpu/mamba_ops_isa.h"
#include "kernels/cpu/parallel.h"

namespace seqboat::cpu {

namespace {

struct Avx2Vec {
  // out[j] = Σ_i c[i] h[16 j + i] for 16 rows: each row's two halves are
  // added, then 8 rows at a time go through a tree of unpacks and shuffles
  // that leaves row j's sum in lane j (Avx512Vec's tree on 8 lanes).
  static void DotRows16(const float* h, const float* c, float* out) {
    const __m256 c_lo = _mm256_loadu_ps(c), c_hi = _mm256_loadu_ps(c + 8);
    for (int g = 0; g < 2; ++g) {
      __m256 q[8];
      for (int j = 0; j < 8; ++j) {
        const float* r = h + 16 * (8 * g + j);
        q[j] = _mm256_fmadd_ps(_mm256_loadu_ps(r + 8), c_hi,
                               _mm256_mul_ps(_mm256_loadu_ps(r), c_lo));
      }
      __m256 s[4];
      for (int j = 0; j < 4; ++j) {
        s[j] = _mm256_add_ps(_mm256_unpacklo_ps(q[2 * j], q[2 * j + 1]),
                             _mm256_unpackhi_ps(q[2 * j], q[2 * j + 1]));
      }
      __m256 v[2];
      for (int j = 0; j < 2; ++j) {
        v[j] = _mm256_add_ps(_mm256_shuffle_ps(s[2 * j], s[2 * j + 1], 0x44),
                             _mm256_shuffle_ps(s[2 * j], s[2 * j + 1], 0xee));
      }
      _mm256_storeu_ps(out + 8 * g,
                       _mm256_add_ps(_mm256_permute2f128_ps(v[0], v[1], 0x20),
                                     _mm256_permute2f128_ps(v[0], v[1], 0x31)));
    }
  }
};

}  // namespace

void Avx2ConvBlock(const MambaConvParams& p, int s0, int s1, int blk,
                   const float* taps) {
  mamba_blocks::ConvBlock(p, s0, s1, blk, taps);
}

void Avx2ConvOneToken(const MambaConvParams& p, int s, const float* taps) {
  mamba_blocks::ConvSegmentOneToken(p, s, taps);
}

void Avx2ScanBlock(const MambaScanParams& p, int s, int blk) {
  mamba_blocks::ScanBlock<Avx2Vec>(p, s, blk);
}

void CpuBackend::MambaConv(const MambaConvParams& p) {
  // With d_conv 4, one-token segments (decode rows) take a pass of their own
  // over whole slots (ConvSegmentOneToken); the block loop skips them.
  int64_t ones = 0, longer = 0;
  for (int s = 0; s < p.nsegs; ++s) {
    ones += p.segs[s].len == 1;
    longer += p.segs[s].len > 1;
  }
  // Zero-length segments (padding) touch nothing.
  if (ones + longer == 0) return;
  // With d_conv 4, the taps tap-major, [k][e], for all the call's segments.
  std::vector<float> turned;
  if (p.k == 4) {
    turned.resize(static_cast<size_t>(p.k) * p.e);
    for (int c = 0; c < p.e; ++c) {
      for (int i = 0; i < p.k; ++i) {
        turned[static_cast<size_t>(i) * p.e + c] = p.w[c * p.k + i];
      }
    }
  }
  const float* taps = turned.data();
  if (p.k == 4 && ones > 0) {
    void (*one)(const MambaConvParams&, int, const float*) =
        isa_ == Isa::kAvx512 ? Avx512ConvOneToken : Avx2ConvOneToken;
#pragma omp parallel for schedule(static) if (WorthThreads(ones * p.e * p.k))
    for (int s = 0; s < p.nsegs; ++s) {
      if (p.segs[s].len == 1) one(p, s, taps);
    }
    if (longer == 0) return;
  }
  void (*block)(const MambaConvParams&, int, int, int, const float*) =
      isa_ == Isa::kAvx512 ? Avx512ConvBlock : Avx2ConvBlock;
  // Segments in groups of 16, each group over every block of channels.
  constexpr int kGroup = 16;
  const int groups = (p.nsegs + kGroup - 1) / kGroup;
  const int blocks = (p.e + mamba_blocks::kBlock - 1) / mamba_blocks::kBlock;
  const int64_t work = SegmentRows(p.segs, p.nsegs) * p.e * p.k;
#pragma omp parallel for collapse(2) schedule(static) if (WorthThreads(work))
  for (int g = 0; g < groups; ++g) {
    for (int blk = 0; blk < blocks; ++blk) {
      block(p, g * kGroup, std::min(p.nsegs, (g + 1) * kGroup), blk, taps);
    }
  }
}

void CpuBackend::MambaScan(const MambaScanParams& p) {
  // A folded dt_proj is its GEMM then the plain scan: the unfolded ops' bits.
  if (FoldsDtProj(p)) {
    Gemm(GemmOfDtProj(p));
    MambaScan(ScanAfterDtProj(p));
    return;
  }
  void (*block)(const MambaScanParams&, int, int) =
      isa_ == Isa::kAvx512 ? Avx512ScanBlock : Avx2ScanBlock;
  const int blocks = (p.e + mamba_blocks::kBlock - 1) / mamba_blocks::kBlock;
  const int64_t work = SegmentRows(p.segs, p.nsegs) * p.e * p.n_state * 4;
#pragma omp parallel for collapse(2) schedule(static) if (WorthThreads(work))
  for (int s = 0; s < p.nsegs; ++s) {
    for (int blk = 0; blk < blocks; ++blk) block(p, s, blk);
  }
}

}  // namespace seqboat::cpu
