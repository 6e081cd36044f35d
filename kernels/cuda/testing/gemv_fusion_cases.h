// The fused decode GEMMs (a pre-norm folded into the input projection,
// GemmParams::norm; a scaled residual add, GemmParams::residual_scale), run by
// the emulation test (kernels/cuda/emu) and the GPU test alike: the same
// backend computes Norm(x) then the GEMM as two ops and as one, and the two
// must agree bit for bit (the folded norm uses the norm kernel's arithmetic),
// normed rows included; the shapes are the decode input projections of the
// models served.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_GEMV_FUSION_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_GEMV_FUSION_CASES_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity::fusion {

// A projection [rows, cols] whose input is a pre-normed residual of width
// cols.
struct FoldShape {
  const char* name;
  int rows;
  int cols;
};

// in_proj of Mamba 130M (d_model 768, d_inner 1536) and 1.4B (2048, 4096),
// and of Mamba-2 130M (d_inner 1536, 1 group of d_state 128, 24 heads:
// 2 x 1536 + 2 x 128 + 24 rows).
inline constexpr FoldShape kMamba130m{"mamba-130m in_proj", 3072, 768};
inline constexpr FoldShape kMamba1b4{"mamba-1.4b in_proj", 8192, 2048};
inline constexpr FoldShape kMamba2_130m{"mamba2-130m in_proj", 3352, 768};

// The first projections of the other block kinds at a Qwen3.5-like layer's
// sizes (d_model 2048): attention's q (16 heads of 256; k, v and the output
// gate then read the normed rows), GDN's stacked in_proj (q/k/v channels
// 2 x 16 x 128 + 32 x 128, z 32 x 128, b and a 32 each), an MLP's up
// projection (d_ff 8192) and a MoE router over 128 experts.
inline constexpr FoldShape kQwenAttentionQ{"qwen3.5-like attention q", 4096,
                                           2048};
inline constexpr FoldShape kQwenGdnInProj{"qwen3.5-like gdn in_proj", 12352,
                                          2048};
inline constexpr FoldShape kMlpUp{"mlp up (d_ff 8192)", 8192, 2048};
inline constexpr FoldShape kMoeRouter{"moe router (128 experts)", 128, 2048};

// One backend's two ways of computing Gemm(Norm(x)).
struct FoldRun {
  std::vector<float> y_unfused, u_unfused;  // norm op, then the GEMM
  std::vector<float> y_fused, u_fused;      // GemmParams::norm
};

// The norm's parameters on `be`: weight (and bias for kLayer).
struct FoldNorm {
  NormKind kind = NormKind::kRms;
  const float* w = nullptr;
  const float* b = nullptr;
  float eps = 1e-5f;
};

// x: n rows of cols floats (row stride cols). The GEMM adds a bias when
// `bias` is non-null and overwrites y otherwise; u's stale contents are
// NaN, so that a column the fused op fails to write shows.
inline FoldRun RunFold(Backend& be, const Matrix& w, const FoldNorm& norm,
                       const std::vector<float>& x, int n, const float* bias) {
  const int rows = static_cast<int>(w.rows), cols = static_cast<int>(w.cols);
  const std::vector<float> stale(static_cast<size_t>(n) * cols, NAN);
  Array xa(be, x), u1(be, stale), u2(be, stale), y1(be, n * rows),
      y2(be, n * rows);
  GemmParams g;
  g.ldx = cols;
  g.n = n;
  g.w = w;
  g.bias = bias;
  g.ldy = rows;
  NormParams np;
  np.x = xa.get();
  np.ldx = cols;
  np.n = n;
  np.d = cols;
  np.w = norm.w;
  np.b = norm.kind == NormKind::kLayer ? norm.b : nullptr;
  np.eps = norm.eps;
  np.out = u1.get();
  np.ldo = cols;
  if (norm.kind == NormKind::kLayer) {
    be.LayerNorm(np);
  } else {
    be.RmsNorm(np);
  }
  g.x = u1.get();
  g.y = y1.get();
  be.Gemm(g);
  g.x = xa.get();
  g.y = y2.get();
  g.norm.kind = norm.kind;
  g.norm.w = norm.w;
  g.norm.b = norm.b;
  g.norm.eps = norm.eps;
  g.norm.out = u2.get();
  g.norm.ldo = cols;
  be.Gemm(g);
  EXPECT_TRUE(be.TakeError().ok());
  return FoldRun{y1.Read(), u1.Read(), y2.Read(), u2.Read()};
}

// One backend's two ways of r + s·(x wᵀ + bias) for the n rows of r (n x
// w.rows, contiguous): the GEMM into rows of its own then ScatterAddScaled
// (what a scaled residual add issued before GemmParams::residual_scale),
// and the GEMM accumulating at the scale.
struct ScaledRun {
  std::vector<float> unfused, fused;
};

inline ScaledRun RunScaledAdd(Backend& be, const Matrix& w,
                              const std::vector<float>& x,
                              const std::vector<float>& r, int n,
                              const float* bias, float scale) {
  const int rows = static_cast<int>(w.rows), cols = static_cast<int>(w.cols);
  const std::vector<float> head(r.begin(), r.begin() + int64_t{n} * rows);
  Array xa(be, x), f(be, int64_t{n} * rows), r1(be, head), r2(be, head);
  GemmParams g;
  g.x = xa.get();
  g.ldx = cols;
  g.n = n;
  g.w = w;
  g.bias = bias;
  g.ldy = rows;
  g.y = f.get();
  be.Gemm(g);
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i;
  const std::vector<float> scales(n, scale);
  ScatterAddParams add;
  add.src = f.get();
  add.d = rows;
  add.rows = ids.data();
  add.scales = scales.data();
  add.m = n;
  add.dst = r1.get();
  add.lddst = rows;
  be.ScatterAddScaled(add);
  g.y = r2.get();
  g.accumulate = true;
  g.residual_scale = scale;
  be.Gemm(g);
  EXPECT_TRUE(be.TakeError().ok());
  return ScaledRun{r1.Read(), r2.Read()};
}

// The first `n` rows of `rows`-wide results of a batch of `top`.
inline std::vector<float> Head(const std::vector<float>& v, int n, int rows) {
  return std::vector<float>(v.begin(), v.begin() + int64_t{n} * rows);
}

}  // namespace seqboat::parity::fusion

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_GEMV_FUSION_CASES_H_
