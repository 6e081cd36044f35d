// The device-grouped expert ops (MoeGroup, MoeGemm, MoeCombine;
// engine/backend/moe_params.h) of a backend under test against a reference:
// the grouping and the combine bit for bit (the same integer work, the same
// fmas in the same order), the experts' GEMV within float rounding of the
// reference's GEMM on the same stored weights, over tiles of 1 to 16 pairs,
// an expert of more than 16 pairs, slots that hold no expert, 512 experts,
// and columns no 16-byte load divides. Every array lives on its backend, so
// the GPU test and the emulation test run the same cases.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_MOE_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_MOE_CASES_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/moe_params.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity::moe {

struct Routing {
  int n, slots, x;
  bool sparse;  // some slots hold no expert (-1), as kReluDynamic leaves them
};

inline constexpr Routing kRoutings[] = {{1, 1, 8, false},    {3, 2, 8, false},
                                        {16, 2, 8, false},   {40, 1, 2, false},
                                        {16, 10, 64, false}, {12, 8, 8, true},
                                        {64, 4, 512, false}};

// A copy of `host` on `be`.
template <class T>
DeviceBuffer Upload(Backend& be, const std::vector<T>& host) {
  auto buf = be.Alloc(std::max<size_t>(host.size(), 1) * sizeof(T));
  EXPECT_TRUE(buf.ok()) << buf.status();
  if (!buf.ok()) return nullptr;
  be.CopyToDevice(buf->get(), host.data(), host.size() * sizeof(T));
  return *buf;
}

template <class T>
std::vector<T> Download(Backend& be, const DeviceBuffer& buf, size_t n) {
  std::vector<T> out(n);
  be.CopyToHost(out.data(), buf.get(), n * sizeof(T));
  return out;
}

inline std::vector<int32_t> RandomExperts(const Routing& r, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> e(static_cast<size_t>(r.n) * r.slots);
  for (int32_t& v : e) {
    v = static_cast<int32_t>(gen() % r.x);
    if (r.sparse && gen() % 3 == 0) v = -1;
  }
  return e;
}

struct Grouped {
  std::vector<int32_t> pair_row, pair_of, tiles;
  std::vector<float> pair_gate;
};

// MoeGroup on `be`, its outputs first filled with a value no output takes.
inline Grouped GroupOn(Backend& be, const Routing& r,
                       const std::vector<int32_t>& experts,
                       const std::vector<float>& gates) {
  const size_t pairs = experts.size();
  const size_t tiles = 3 * static_cast<size_t>(MoeTileBound(r.n, r.slots, r.x));
  DeviceBuffer e = Upload(be, experts), g = Upload(be, gates),
               row = Upload(be, std::vector<int32_t>(pairs, 7777)),
               of = Upload(be, std::vector<int32_t>(pairs, 7777)),
               gate = Upload(be, std::vector<float>(pairs, 7777.0f)),
               tile = Upload(be, std::vector<int32_t>(tiles, 7777));
  MoeGroupParams p;
  p.experts = static_cast<const int32_t*>(e.get());
  p.gates = static_cast<const float*>(g.get());
  p.n = r.n;
  p.slots = r.slots;
  p.x = r.x;
  p.pair_row = static_cast<int32_t*>(row.get());
  p.pair_gate = static_cast<float*>(gate.get());
  p.pair_of = static_cast<int32_t*>(of.get());
  p.tiles = static_cast<int32_t*>(tile.get());
  be.MoeGroup(p);
  ExpectNoError(be);
  return Grouped{
      Download<int32_t>(be, row, pairs), Download<int32_t>(be, of, pairs),
      Download<int32_t>(be, tile, tiles), Download<float>(be, gate, pairs)};
}

// The grouping is the reference's, and every routed (row, slot) has its
// pair, with its row and gate.
inline void ExpectGroupingMatches(Backend& ref, Backend& dut,
                                  const Routing& r) {
  SCOPED_TRACE(testing::Message() << r.n << "x" << r.slots << " of " << r.x);
  const std::vector<int32_t> e = RandomExperts(r, 11 + r.n);
  const std::vector<float> gates = Random(e.size(), 5);
  const Grouped want = GroupOn(ref, r, e, gates);
  const Grouped got = GroupOn(dut, r, e, gates);
  EXPECT_EQ(got.pair_row, want.pair_row);
  EXPECT_EQ(got.pair_of, want.pair_of);
  EXPECT_EQ(got.tiles, want.tiles);
  EXPECT_TRUE(SameBits(got.pair_gate, want.pair_gate));
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
}

// Uploads a [rows, cols] matrix to a backend: the reference gets the values
// the backend under test stores, the backend under test the fp32 ones.
using UploadFn = std::function<Matrix(Backend&, const std::vector<float>&,
                                      int rows, int cols)>;

// MoeGemm on `be` over experts `w` (a device array of Matrix) for the
// grouping g: y [pairs, rows], first filled with -99. x rows are ldx apart;
// gathered: one row per token, read through the pairs' rows; otherwise one
// row per pair.
inline std::vector<float> GemmOn(Backend& be, const std::vector<Matrix>& w,
                                 const Grouped& g, const Routing& r,
                                 const std::vector<float>& x, int ldx,
                                 const std::vector<float>& bias,
                                 bool gathered) {
  const int pairs = r.n * r.slots, rows = w[0].rows;
  DeviceBuffer xb = Upload(be, x), rb = Upload(be, g.pair_row),
               mb = Upload(be, w), bb = Upload(be, bias),
               tb = Upload(be, g.tiles),
               yb = Upload(be, std::vector<float>(
                                   static_cast<size_t>(pairs) * rows, -99.0f));
  MoeGemmParams p;
  p.x = static_cast<const float*>(xb.get());
  p.ldx = ldx;
  p.x_rows = gathered ? static_cast<const int32_t*>(rb.get()) : nullptr;
  p.experts = static_cast<const Matrix*>(mb.get());
  p.shape = w[0];
  p.bias = static_cast<const float*>(bb.get());
  p.tiles = static_cast<const int32_t*>(tb.get());
  p.ntiles = MoeTileBound(r.n, r.slots, r.x);
  p.y = static_cast<float*>(yb.get());
  p.ldy = rows;
  be.MoeGemm(p);
  ExpectNoError(be);
  return Download<float>(be, yb, static_cast<size_t>(pairs) * rows);
}

// The experts' projections through MoeGemm on both backends, the pairs'
// outputs compared within `bound` (rows of y that are no pair stay as they
// were). x rows ldx apart (16-byte aligned or not); gathered: as GemmOn.
inline void ExpectGemmMatches(Backend& ref, Backend& dut,
                              const UploadFn& upload_ref,
                              const UploadFn& upload_dut, const Routing& r,
                              int rows, int cols, int ldx, bool gathered,
                              float bound) {
  SCOPED_TRACE(testing::Message()
               << r.n << "x" << r.slots << " of " << r.x << " " << rows << "x"
               << cols << " ldx " << ldx
               << (gathered ? " gathered" : " per pair"));
  std::vector<Matrix> wr, wd;
  for (int e = 0; e < r.x; ++e) {
    const std::vector<float> w =
        Random(static_cast<size_t>(rows) * cols, 100 + e, -0.5f, 0.5f);
    wr.push_back(upload_ref(ref, w, rows, cols));
    wd.push_back(upload_dut(dut, w, rows, cols));
  }
  const std::vector<int32_t> experts = RandomExperts(r, 3 + rows);
  const Grouped g = GroupOn(ref, r, experts, Random(experts.size(), 9));
  const int pairs = r.n * r.slots;
  const std::vector<float> x =
      Random(static_cast<size_t>(gathered ? r.n : pairs) * ldx, 17);
  const std::vector<float> bias = Random(static_cast<size_t>(r.x) * rows, 23);
  const std::vector<float> want = GemmOn(ref, wr, g, r, x, ldx, bias, gathered);
  const std::vector<float> got = GemmOn(dut, wd, g, r, x, ldx, bias, gathered);
  float worst = 0.0f;
  for (int q = 0; q < pairs; ++q) {
    for (int o = 0; o < rows; ++o) {
      const float a = want[static_cast<size_t>(q) * rows + o],
                  b = got[static_cast<size_t>(q) * rows + o];
      if (g.pair_row[q] < 0) {
        ASSERT_EQ(a, -99.0f);
        ASSERT_EQ(b, -99.0f);
        continue;
      }
      worst = std::max(worst, std::fabs(a - b));
    }
  }
  EXPECT_LT(worst, bound);
}

// Every routing but the 512-expert one (grouping only) at two shapes, x rows
// aligned for 16-byte loads and not, and columns no 16-byte load divides
// (the scalar path).
inline void ExpectGemmsMatch(Backend& ref, Backend& dut,
                             const UploadFn& upload_ref,
                             const UploadFn& upload_dut, float bound) {
  for (const Routing& r : kRoutings) {
    if (r.x > 64) continue;
    ExpectGemmMatches(ref, dut, upload_ref, upload_dut, r, 40, 64, 64,
                      /*gathered=*/true, bound);
    ExpectGemmMatches(ref, dut, upload_ref, upload_dut, r, 24, 48, 51,
                      /*gathered=*/false, bound);
  }
  ExpectGemmMatches(ref, dut, upload_ref, upload_dut, {16, 2, 8, false}, 33, 37,
                    40, /*gathered=*/true, bound);
}

// A token's expert output alone (one tile of one pair) and within a batch
// of `big` (many tiles, the token's pair among others of its expert): the
// same bits, as a decode step's result must not depend on its batch.
inline void ExpectPairIndependentOfBatch(Backend& be, const UploadFn& upload,
                                         const Routing& big, int rows,
                                         int cols) {
  SCOPED_TRACE(testing::Message() << big.n << "x" << big.slots << " of "
                                  << big.x << " " << rows << "x" << cols);
  std::vector<Matrix> w;
  for (int e = 0; e < big.x; ++e) {
    w.push_back(upload(
        be, Random(static_cast<size_t>(rows) * cols, 300 + e, -0.5f, 0.5f),
        rows, cols));
  }
  std::vector<int32_t> experts = RandomExperts(big, 41);
  experts[0] = experts[1];  // token 0 shares its expert's tile
  const std::vector<float> gates = Random(experts.size(), 43);
  const std::vector<float> x = Random(static_cast<size_t>(big.n) * cols, 47);
  const std::vector<float> bias = Random(static_cast<size_t>(big.x) * rows, 53);
  const Routing one{1, 1, big.x, false};
  const std::vector<int32_t> alone_expert = {experts[0]};
  const Grouped ga = GroupOn(be, one, alone_expert, {gates[0]});
  const std::vector<float> alone =
      GemmOn(be, w, ga, one, std::vector<float>(x.begin(), x.begin() + cols),
             cols, bias, /*gathered=*/true);
  const Grouped gb = GroupOn(be, big, experts, gates);
  const std::vector<float> batch =
      GemmOn(be, w, gb, big, x, cols, bias, /*gathered=*/true);
  const int q = gb.pair_of[0];
  ASSERT_GE(q, 0);
  EXPECT_TRUE(SameBits(
      std::vector<float>(alone.begin(), alone.begin() + rows),
      std::vector<float>(batch.begin() + static_cast<size_t>(q) * rows,
                         batch.begin() + static_cast<size_t>(q + 1) * rows)));
}

// A batch whose tiles outnumber the SMs at kIndependentRows rows (the CUDA
// kernel then gives a warp four rows, one alone), at columns 16-byte loads
// divide and not.
inline constexpr Routing kBigBatch = {64, 2, 16, false};
inline constexpr int kIndependentRows = 256;

inline void ExpectPairsIndependentOfBatch(Backend& be, const UploadFn& upload) {
  for (const int cols : {64, 37}) {
    ExpectPairIndependentOfBatch(be, upload, kBigBatch, kIndependentRows, cols);
  }
}

// MoeCombine of routed pairs, then of a shared expert's sigmoid gate over
// every row: the reference's bits both times.
inline void ExpectCombineMatches(Backend& ref, Backend& dut, const Routing& r) {
  SCOPED_TRACE(testing::Message() << r.n << "x" << r.slots << " of " << r.x);
  const int d = 40;
  const std::vector<int32_t> experts = RandomExperts(r, 31 + r.n);
  const Grouped g = GroupOn(ref, r, experts, Random(experts.size(), 3));
  const std::vector<float> src =
      Random(static_cast<size_t>(r.n) * r.slots * d, 41);
  const std::vector<float> logits = Random(r.n, 43, -4.0f, 4.0f);
  const std::vector<float> dst0 = Random(static_cast<size_t>(r.n) * d, 47);
  std::vector<float> got[2][2];
  int side = 0;
  for (Backend* be : {&ref, &dut}) {
    DeviceBuffer sb = Upload(*be, src), ob = Upload(*be, g.pair_of),
                 gb = Upload(*be, g.pair_gate), lb = Upload(*be, logits);
    for (const bool shared : {false, true}) {
      DeviceBuffer db = Upload(*be, dst0);
      MoeCombineParams p;
      p.src = static_cast<const float*>(sb.get());
      p.ldsrc = d;
      p.slots = r.slots;
      p.n = r.n;
      p.d = d;
      p.dst = static_cast<float*>(db.get());
      p.lddst = d;
      if (shared) {
        p.gate_logits = static_cast<const float*>(lb.get());
        p.scale = 1.7f;
      } else {
        p.pair_of = static_cast<const int32_t*>(ob.get());
        p.pair_gate = static_cast<const float*>(gb.get());
      }
      be->MoeCombine(p);
      ExpectNoError(*be);
      got[side][shared] = Download<float>(*be, db, dst0.size());
    }
    ++side;
  }
  EXPECT_TRUE(SameBits(got[0][0], got[1][0]));
  EXPECT_TRUE(SameBits(got[0][1], got[1][1]));
  EXPECT_FALSE(SameBits(got[0][1], dst0));
}

}  // namespace seqboat::parity::moe

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_MOE_CASES_H_
