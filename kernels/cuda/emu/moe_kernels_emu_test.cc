// The device-grouped expert kernels (moe_kernels.cu) on the emulation
// against the CPU backend's ops: the grouping and the combine bit for bit
// (the same integer work, the same fmas in the same order), the experts'
// GEMV within float rounding of the CPU GEMM on the stored weights, over
// tiles of 1 to 16 pairs, an expert of more than 16 pairs, rows that are
// no pair, and each storage.
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/moe_params.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/emu/dense_emulation.h"

namespace seqboat::emu_test {
namespace {

struct Routing {
  int n, slots, x;
  bool sparse;  // some slots hold no expert (-1), as kReluDynamic leaves them
};

struct Grouped {
  std::vector<int32_t> pair_row, pair_of, tiles;
  std::vector<float> pair_gate;
};

std::vector<int32_t> RandomExperts(const Routing& r, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> e(static_cast<size_t>(r.n) * r.slots);
  for (int i = 0; i < r.n; ++i) {
    for (int j = 0; j < r.slots; ++j) {
      int32_t v = static_cast<int32_t>(gen() % r.x);
      if (r.sparse && gen() % 3 == 0) v = -1;
      e[static_cast<size_t>(i) * r.slots + j] = v;
    }
  }
  return e;
}

Grouped Group(Backend& be, const Routing& r, const std::vector<int32_t>& e,
              const std::vector<float>& gates) {
  const size_t pairs = e.size();
  Grouped g;
  g.pair_row.assign(pairs, 7777);
  g.pair_of.assign(pairs, 7777);
  g.pair_gate.assign(pairs, 7777.0f);
  g.tiles.assign(3 * static_cast<size_t>(MoeTileBound(r.n, r.slots, r.x)),
                 7777);
  MoeGroupParams p;
  p.experts = e.data();
  p.gates = gates.data();
  p.n = r.n;
  p.slots = r.slots;
  p.x = r.x;
  p.pair_row = g.pair_row.data();
  p.pair_gate = g.pair_gate.data();
  p.pair_of = g.pair_of.data();
  p.tiles = g.tiles.data();
  be.MoeGroup(p);
  return g;
}

const Routing kRoutings[] = {{1, 1, 8, false},    {3, 2, 8, false},
                             {16, 2, 8, false},   {40, 1, 2, false},
                             {16, 10, 64, false}, {12, 8, 8, true},
                             {64, 4, 512, false}};

TEST(MoeKernelsEmuTest, GroupingMatchesTheCpu) {
  for (const Routing& r : kRoutings) {
    SCOPED_TRACE(testing::Message() << r.n << "x" << r.slots << " of " << r.x);
    const std::vector<int32_t> e = RandomExperts(r, 11 + r.n);
    const std::vector<float> gates = Random(e.size(), 5);
    auto cpu = MakeCpuBackend(1);
    DenseEmulation emu(cuda::Storage::kBf16);
    const Grouped want = Group(*cpu, r, e, gates);
    const Grouped got = Group(emu, r, e, gates);
    EXPECT_EQ(got.pair_row, want.pair_row);
    EXPECT_EQ(got.pair_of, want.pair_of);
    EXPECT_EQ(got.tiles, want.tiles);
    EXPECT_TRUE(SameBits(got.pair_gate, want.pair_gate));
    // Every routed (row, slot) has its pair, with its row and gate.
    for (size_t i = 0; i < e.size(); ++i) {
      if (e[i] < 0) {
        EXPECT_EQ(want.pair_of[i], -1);
        continue;
      }
      const int q = want.pair_of[i];
      ASSERT_GE(q, 0);
      EXPECT_EQ(want.pair_row[q], static_cast<int>(i) / r.slots);
      EXPECT_EQ(want.pair_gate[q], gates[i]);
    }
    ASSERT_TRUE(emu.TakeError().ok());
  }
}

// The experts' projections through MoeGemm on both backends, the pairs'
// outputs compared (rows of y that are no pair stay as they were).
void ExpectGemmMatches(cuda::Storage s, const Routing& r, int rows, int cols,
                       bool gathered) {
  SCOPED_TRACE(testing::Message()
               << "storage " << static_cast<int>(s) << " " << r.n << "x"
               << r.slots << " of " << r.x << " " << rows << "x" << cols
               << (gathered ? " gathered" : " per pair"));
  auto cpu = MakeCpuBackend(1);
  DenseEmulation emu(s);
  std::vector<Matrix> cm, em;
  for (int e = 0; e < r.x; ++e) {
    const std::vector<float> w =
        Random(static_cast<size_t>(rows) * cols, 100 + e, -0.5f, 0.5f);
    cm.push_back(
        *cpu->UploadMatrix(StoredValues(s, w, rows, cols).data(), rows, cols));
    em.push_back(*emu.UploadMatrix(w.data(), rows, cols));
  }
  const std::vector<int32_t> experts = RandomExperts(r, 3 + rows);
  const std::vector<float> gates = Random(experts.size(), 9);
  const Grouped g = Group(*cpu, r, experts, gates);
  const int pairs = r.n * r.slots;
  const std::vector<float> x =
      Random(static_cast<size_t>(gathered ? r.n : pairs) * (cols + 3), 17);
  const std::vector<float> bias = Random(static_cast<size_t>(r.x) * rows, 23);
  std::vector<float> ys[2];
  int side = 0;
  for (Backend* be :
       {static_cast<Backend*>(cpu.get()), static_cast<Backend*>(&emu)}) {
    ys[side].assign(static_cast<size_t>(pairs) * rows, -99.0f);
    MoeGemmParams p;
    p.x = x.data();
    p.ldx = cols + 3;
    p.x_rows = gathered ? g.pair_row.data() : nullptr;
    p.experts = side == 0 ? cm.data() : em.data();
    p.shape = side == 0 ? cm[0] : em[0];
    p.bias = bias.data();
    p.tiles = g.tiles.data();
    p.ntiles = MoeTileBound(r.n, r.slots, r.x);
    p.y = ys[side].data();
    p.ldy = rows;
    be->MoeGemm(p);
    ++side;
  }
  ASSERT_TRUE(emu.TakeError().ok());
  float worst = 0.0f;
  for (int q = 0; q < pairs; ++q) {
    for (int o = 0; o < rows; ++o) {
      const float a = ys[0][static_cast<size_t>(q) * rows + o],
                  b = ys[1][static_cast<size_t>(q) * rows + o];
      if (g.pair_row[q] < 0) {
        ASSERT_EQ(a, -99.0f);
        ASSERT_EQ(b, -99.0f);
        continue;
      }
      worst = std::max(worst, std::fabs(a - b));
    }
  }
  // Sums of up to a few hundred products of magnitude <= 0.5: float
  // rounding of the two summation orders, far below a wrong row or pair.
  EXPECT_LT(worst, 2e-5f);
}

TEST(MoeKernelsEmuTest, ExpertGemvMatchesTheCpuGemm) {
  for (const cuda::Storage s :
       {cuda::Storage::kF32, cuda::Storage::kBf16, cuda::Storage::kFp8E4m3}) {
    for (const Routing& r : kRoutings) {
      if (r.x > 64) continue;  // the 512-expert routing is grouping-only
      ExpectGemmMatches(s, r, 40, 64, /*gathered=*/true);
      ExpectGemmMatches(s, r, 24, 48, /*gathered=*/false);
    }
  }
  // Columns that are no multiple of a 16-byte load: the scalar path.
  ExpectGemmMatches(cuda::Storage::kBf16, {16, 2, 8, false}, 33, 37, true);
}

TEST(MoeKernelsEmuTest, CombineMatchesTheCpuBitForBit) {
  for (const Routing& r : kRoutings) {
    SCOPED_TRACE(testing::Message() << r.n << "x" << r.slots << " of " << r.x);
    const int d = 40;
    auto cpu = MakeCpuBackend(1);
    DenseEmulation emu(cuda::Storage::kBf16);
    const std::vector<int32_t> experts = RandomExperts(r, 31 + r.n);
    const Grouped g = Group(*cpu, r, experts, Random(experts.size(), 3));
    const std::vector<float> src =
        Random(static_cast<size_t>(r.n) * r.slots * d, 41);
    const std::vector<float> logits = Random(r.n, 43, -4.0f, 4.0f);
    const std::vector<float> dst0 = Random(static_cast<size_t>(r.n) * d, 47);
    std::vector<float> got[2][2];
    int side = 0;
    for (Backend* be :
         {static_cast<Backend*>(cpu.get()), static_cast<Backend*>(&emu)}) {
      MoeCombineParams p;
      p.src = src.data();
      p.ldsrc = d;
      p.pair_of = g.pair_of.data();
      p.pair_gate = g.pair_gate.data();
      p.slots = r.slots;
      p.n = r.n;
      p.d = d;
      p.lddst = d;
      got[side][0] = dst0;
      p.dst = got[side][0].data();
      be->MoeCombine(p);
      // A shared expert's sigmoid gate over every row.
      p.pair_of = nullptr;
      p.gate_logits = logits.data();
      p.scale = 1.7f;
      got[side][1] = dst0;
      p.dst = got[side][1].data();
      be->MoeCombine(p);
      ++side;
    }
    ASSERT_TRUE(emu.TakeError().ok());
    EXPECT_TRUE(SameBits(got[0][0], got[1][0]));
    EXPECT_TRUE(SameBits(got[0][1], got[1][1]));
    EXPECT_FALSE(SameBits(got[0][1], dst0));
  }
}

}  // namespace
}  // namespace seqboat::emu_test
