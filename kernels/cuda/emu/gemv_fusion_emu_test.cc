// The fused decode GEMV (gemv_kernels.cu) on the CUDA emulation: a pre-norm
// folded into the GEMV's prologue (GemmParams::norm) gives the same bits
// as the norm kernel followed by the plain GEMV, normed rows included, and
// stays within the unfused GEMV's tolerance of the CPU backend, which runs
// the two ops in turn and so is unchanged by the fold (checked bit for bit
// too). At the decode input projections of Mamba 130M and 1.4B and Mamba-2
// 130M, batches 1..16, fp32 / bf16 / fp8 weights; LayerNorm with weight and
// bias on the vector path, the scalar path and a column-split shape; the
// other block kinds' first projections (attention, GDN, MLP, MoE router)
// likewise, one launch fewer than the two ops. The out projection's
// residual add, the GEMV's epilogue, is checked to be exactly the separate
// add, and at a residual scale exactly the GEMM then ScatterAddScaled.
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <vector>

#include "kernels/cuda/emu/dense_emulation.h"
#include "kernels/cuda/emu/emu_test_util.h"
#include "kernels/cuda/gemv_kernels.h"
#include "kernels/cuda/testing/gemv_fusion_cases.h"

namespace seqboat::emu_test {
namespace {

namespace fusion = parity::fusion;
using cuda::Storage;

constexpr Storage kStorages[] = {Storage::kF32, Storage::kBf16,
                                 Storage::kFp8E4m3};

const char* Name(Storage s) {
  return s == Storage::kF32 ? "fp32" : s == Storage::kBf16 ? "bf16" : "fp8";
}

// Folds `kind` into a [rows, cols] GEMV for every batch in `ns` on every
// storage and checks it against the unfused ops on the emulation (same
// bits), against the CPU backend (within `tol`, the unfused GEMV's own
// difference from the CPU's GEMM, since the products and the norm are the
// same), and across batch sizes (row i of every batch the same bits).
void ExpectFoldMatches(const fusion::FoldShape& shape, NormKind kind,
                       bool with_bias, const std::vector<int>& ns, float tol,
                       const std::vector<Storage>& storages = {
                           std::begin(kStorages), std::end(kStorages)}) {
  const int rows = shape.rows, cols = shape.cols, top = ns.back();
  const std::vector<float> w = Random(int64_t{rows} * cols, 31 + cols),
                           x = Random(int64_t{top} * cols, 32 + cols, -3, 3),
                           nw = Random(cols, 33, 0.5f, 1.5f),
                           nb = Random(cols, 34), bias = Random(rows, 35);
  for (const Storage s : storages) {
    SCOPED_TRACE(testing::Message()
                 << shape.name << " " << Name(s) << " kind=" << int(kind));
    auto cpu = MakeCpuBackend(1);
    DenseEmulation emu(s);
    const std::vector<float> wr = StoredValues(s, w, rows, cols);
    auto cm = cpu->UploadMatrix(wr.data(), rows, cols);
    ASSERT_TRUE(cm.ok());
    const Matrix em = emu.UploadAt(w.data(), rows, cols, s, 0);
    Array cw(*cpu, nw), cb(*cpu, nb), cbias(*cpu, bias);
    fusion::FoldNorm norm;
    norm.kind = kind;
    norm.w = cw.get();
    norm.b = cb.get();
    std::vector<float> top_y;
    for (auto it = ns.rbegin(); it != ns.rend(); ++it) {
      const int n = *it;
      SCOPED_TRACE(testing::Message() << "n=" << n);
      const float* b = with_bias ? cbias.get() : nullptr;
      const fusion::FoldRun want = fusion::RunFold(*cpu, *cm, norm, x, n, b);
      const fusion::FoldRun got = fusion::RunFold(emu, em, norm, x, n, b);
      EXPECT_TRUE(SameBits(want.y_unfused, want.y_fused));
      EXPECT_TRUE(SameBits(want.u_unfused, want.u_fused));
      EXPECT_TRUE(SameBits(got.y_unfused, got.y_fused));
      EXPECT_TRUE(SameBits(got.u_unfused, got.u_fused));
      EXPECT_LE(MaxAbsDiff(want.y_fused, got.y_fused), tol);
      if (n == top) top_y = got.y_fused;
      EXPECT_TRUE(SameBits(got.y_fused, fusion::Head(top_y, n, rows)));
    }
  }
}

std::vector<int> AllBatches() {
  std::vector<int> ns;
  for (int n = 1; n <= cuda::kGemvMaxRows; ++n) ns.push_back(n);
  return ns;
}

// The first 64 rows of a projection: the norm over the full shape's
// columns, on every storage and batch size, at a cost the emulation can
// afford (fewer row groups: the warps split the columns more finely than
// for the whole matrix, whose own plan the bf16 runs below check).
fusion::FoldShape FirstRows(const fusion::FoldShape& s) {
  return {s.name, 64, s.cols};
}

// Normalised inputs (up to ~3 times the norm weight) against weights ~1:
// outputs a few times those of dense_kernels_emu_test's GEMV cases, whose
// bounds against the CPU's other summation order (2e-5 at 768 columns, 5e-5
// at 2048) are scaled by that much.
// Then the whole projection (every row group, the full shape's warp split)
// with bf16 weights, at both ends of the batch: 1 and 16 (the other kernel
// instances are the first test's).
TEST(GemvFusionEmuTest, FoldedRmsNormAtMamba130mShape) {
  ExpectFoldMatches(FirstRows(fusion::kMamba130m), NormKind::kRms, false,
                    AllBatches(), 1e-4f);
  ExpectFoldMatches(fusion::kMamba130m, NormKind::kRms, false, {1, 16}, 1e-4f,
                    {Storage::kBf16});
}

TEST(GemvFusionEmuTest, FoldedRmsNormAtMamba1b4Shape) {
  ExpectFoldMatches(FirstRows(fusion::kMamba1b4), NormKind::kRms, false,
                    AllBatches(), 2e-4f);
  ExpectFoldMatches(fusion::kMamba1b4, NormKind::kRms, false, {1, 16}, 2e-4f,
                    {Storage::kBf16});
}

TEST(GemvFusionEmuTest, FoldedRmsNormAtMamba2Shape) {
  ExpectFoldMatches(FirstRows(fusion::kMamba2_130m), NormKind::kRms, true,
                    AllBatches(), 1e-4f);
  ExpectFoldMatches(fusion::kMamba2_130m, NormKind::kRms, true, {1, 16}, 1e-4f,
                    {Storage::kBf16});
}

// LayerNorm (a block of the norm types MODELS.md §6.1 allows) with weight
// and bias: the vector path; 1031 columns, the scalar path; 5 x 16384, the
// columns split across blocks, whose chunks each normalise and write their
// own columns of the normed rows.
TEST(GemvFusionEmuTest, FoldedLayerNormOnEveryPath) {
  ExpectFoldMatches({"layernorm 67x768", 67, 768}, NormKind::kLayer, true,
                    AllBatches(), 1e-4f);
  ExpectFoldMatches({"layernorm 67x1031 (scalar)", 67, 1031}, NormKind::kLayer,
                    true, AllBatches(), 1e-4f);
  ASSERT_GT(cuda::GemvColumnSplits(5, 16384, Storage::kBf16), 1);
  ExpectFoldMatches({"layernorm 5x16384 (column splits)", 5, 16384},
                    NormKind::kLayer, true, {1, 7, 9, 16}, 4e-4f);
}

// The out projection's residual add is the GEMV's epilogue: a Gemm with
// accumulate (what Mamba-1's out_proj and ResidualOut at scale 1 issue) is
// one GEMV launch, no add kernel, and its result is exactly residual +
// (x wᵀ + bias) added after the fact (one fp32 addition either way, so the
// same bits), at the Mamba 130M / 1.4B out_proj shapes (Mamba-2 130M's is
// 130M's: 768 x 1536).
void ExpectResidualEpilogue(int rows, int cols, Storage s,
                            const std::vector<int>& ns) {
  SCOPED_TRACE(testing::Message() << rows << "x" << cols << " " << Name(s));
  const int top = ns.back();
  const std::vector<float> w = Random(int64_t{rows} * cols, 71 + cols),
                           x = Random(int64_t{top} * cols, 72),
                           r = Random(int64_t{top} * rows, 73, -4, 4),
                           bias = Random(rows, 74);
  DenseEmulation emu(s);
  const Matrix em = emu.UploadAt(w.data(), rows, cols, s, 0);
  Array xa(emu, x), ba(emu, bias);
  ASSERT_EQ(cuda::GemvColumnSplits(rows, cols, s), 1);
  for (const int n : ns) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    Array added(emu, r), plain(emu, int64_t{n} * rows);
    GemmParams g;
    g.x = xa.get();
    g.ldx = cols;
    g.n = n;
    g.w = em;
    g.bias = ba.get();
    g.ldy = rows;
    g.y = plain.get();
    emu.Gemm(g);
    const int64_t before = emu::State().launches;
    g.y = added.get();
    g.accumulate = true;
    emu.Gemm(g);
    EXPECT_EQ(emu::State().launches - before, 1);
    std::vector<float> want = plain.Read();
    for (size_t i = 0; i < want.size(); ++i) want[i] = r[i] + want[i];
    const std::vector<float> got = added.Read();
    EXPECT_TRUE(SameBits(
        want, std::vector<float>(got.begin(), got.begin() + want.size())));
  }
}

TEST(GemvFusionEmuTest, ResidualAddIsTheOutProjectionsEpilogue) {
  for (const Storage s : kStorages) {
    ExpectResidualEpilogue(768, 1536, s, {1, 5, 9, 16});
  }
  ExpectResidualEpilogue(2048, 4096, Storage::kBf16, {1, 16});
}

// The other block kinds' first projections (attention's q, GDN's in_proj,
// an MLP's up, a MoE router) at a Qwen3.5-like layer's sizes: the first 64
// rows on every storage and batch, the whole projection with bf16 weights
// at batches 1 and 16 (the MLP's 8192 x 2048 is Mamba-1.4B's in_proj,
// checked whole above); the router, 128 rows, whole on every storage. The
// blocks' layer norms (attention and MLP allow one) take
// FoldedLayerNormOnEveryPath's kernel paths.
TEST(GemvFusionEmuTest, FoldedRmsNormAtTheOtherBlocksShapes) {
  for (const fusion::FoldShape& shape :
       {fusion::kQwenAttentionQ, fusion::kQwenGdnInProj, fusion::kMlpUp}) {
    ExpectFoldMatches(FirstRows(shape), NormKind::kRms, false, AllBatches(),
                      2e-4f);
  }
  for (const fusion::FoldShape& shape :
       {fusion::kQwenAttentionQ, fusion::kQwenGdnInProj}) {
    ExpectFoldMatches(shape, NormKind::kRms, false, {1, 16}, 2e-4f,
                      {Storage::kBf16});
  }
  ExpectFoldMatches(fusion::kMoeRouter, NormKind::kRms, true, AllBatches(),
                    2e-4f);
}

// y[n, w.rows] = x[n, w.cols] · wᵀ + bias over contiguous rows.
GemmParams Plain(const float* x, int n, const Matrix& w, const float* bias,
                 float* y) {
  GemmParams g;
  g.x = x;
  g.ldx = static_cast<int>(w.cols);
  g.n = n;
  g.w = w;
  g.bias = bias;
  g.y = y;
  g.ldy = static_cast<int>(w.rows);
  return g;
}

// Launches of a GEMM whose pre-norm folds: one fewer than the norm kernel
// then the GEMV (the GEMV and, where columns split, its reduction).
int64_t LaunchesOf(const std::function<void()>& run) {
  const int64_t before = emu::State().launches;
  run();
  return emu::State().launches - before;
}

TEST(GemvFusionEmuTest, FoldedNormIsOneLaunchFewer) {
  for (const fusion::FoldShape& shape :
       {fusion::kMamba130m, fusion::kQwenAttentionQ, fusion::kQwenGdnInProj,
        fusion::kMlpUp, fusion::kMoeRouter}) {
    SCOPED_TRACE(shape.name);
    const int rows = 64, cols = shape.cols, n = 3;
    DenseEmulation emu(Storage::kBf16);
    const std::vector<float> w = Random(int64_t{rows} * cols, 61);
    const Matrix em = emu.UploadAt(w.data(), rows, cols, Storage::kBf16, 0);
    Array x(emu, Random(int64_t{n} * cols, 62)), nw(emu, Random(cols, 63)),
        u(emu, int64_t{n} * cols), y(emu, int64_t{n} * rows);
    GemmParams g = Plain(x.get(), n, em, nullptr, y.get());
    NormParams norm;
    norm.x = x.get();
    norm.ldx = cols;
    norm.n = n;
    norm.d = cols;
    norm.w = nw.get();
    norm.eps = 1e-6f;
    norm.out = u.get();
    norm.ldo = cols;
    const int64_t unfused = LaunchesOf([&] {
      emu.RmsNorm(norm);
      GemmParams plain = g;
      plain.x = u.get();
      emu.Gemm(plain);
    });
    g.norm.kind = NormKind::kRms;
    g.norm.w = nw.get();
    g.norm.eps = 1e-6f;
    g.norm.out = u.get();
    g.norm.ldo = cols;
    EXPECT_EQ(LaunchesOf([&] { emu.Gemm(g); }), unfused - 1);
  }
}

// A scaled residual add (Granite-4.0-H's residual_multiplier 0.22) as the
// GEMV's epilogue: one launch (two where the columns split and the
// reduction kernel finishes), the same bits as the GEMM into rows of its
// own then ScatterAddScaled, on the emulation and on the CPU backend, and
// the emulation within the GEMV's tolerance of the CPU; at the out
// projections of Mamba 130M and 1.4B and a column-split shape.
void ExpectScaledEpilogue(int rows, int cols, Storage s,
                          const std::vector<int>& ns, float tol) {
  SCOPED_TRACE(testing::Message() << rows << "x" << cols << " " << Name(s));
  constexpr float kScale = 0.22f;
  const int top = ns.back();
  const std::vector<float> w = Random(int64_t{rows} * cols, 81 + cols),
                           x = Random(int64_t{top} * cols, 82),
                           r = Random(int64_t{top} * rows, 83, -4, 4),
                           bias = Random(rows, 84);
  auto cpu = MakeCpuBackend(1);
  DenseEmulation emu(s);
  const std::vector<float> wr = StoredValues(s, w, rows, cols);
  auto cm = cpu->UploadMatrix(wr.data(), rows, cols);
  ASSERT_TRUE(cm.ok());
  const Matrix em = emu.UploadAt(w.data(), rows, cols, s, 0);
  Array cb(*cpu, bias), eb(emu, bias);
  const int64_t kernels = cuda::GemvColumnSplits(rows, cols, s) > 1 ? 2 : 1;
  for (const int n : ns) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const fusion::ScaledRun want =
        fusion::RunScaledAdd(*cpu, *cm, x, r, n, cb.get(), kScale);
    const fusion::ScaledRun got =
        fusion::RunScaledAdd(emu, em, x, r, n, eb.get(), kScale);
    EXPECT_TRUE(SameBits(want.unfused, want.fused));
    EXPECT_TRUE(SameBits(got.unfused, got.fused));
    EXPECT_LE(MaxAbsDiff(want.fused, got.fused), tol);
    if (n != ns.front()) continue;
    Array xa(emu, x), ra(emu, r);
    GemmParams g = Plain(xa.get(), n, em, eb.get(), ra.get());
    g.accumulate = true;
    g.residual_scale = kScale;
    EXPECT_EQ(LaunchesOf([&] { emu.Gemm(g); }), kernels);
  }
}

TEST(GemvFusionEmuTest, ScaledResidualAddIsTheOutProjectionsEpilogue) {
  for (const Storage s : kStorages) {
    ExpectScaledEpilogue(768, 1536, s, {1, 5, 9, 16}, 2e-5f);
  }
  ExpectScaledEpilogue(2048, 4096, Storage::kBf16, {1, 16}, 5e-5f);
  ASSERT_GT(cuda::GemvColumnSplits(5, 16384, Storage::kBf16), 1);
  ExpectScaledEpilogue(5, 16384, Storage::kBf16, {1, 7, 9, 16}, 1e-4f);
}

}  // namespace
}  // namespace seqboat::emu_test
