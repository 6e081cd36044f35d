// Dense-op cases that the GPU parity test (kernels/cuda/dense_ops_gpu_test.cc)
// and the emulation test (kernels/cuda/emu/dense_kernels_emu_test.cc) both
// run, each on its own shapes and within its own bounds: Embed, the norms,
// an fp32 matrix on a 16-bit backend, the row ops (ActivateMul, GatherRows,
// AddBias, ScatterAddScaled) and MoeRoute, compared against a reference
// backend; and the ops' parameters as the cases and the one-sided tests
// fill them.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_DENSE_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_DENSE_CASES_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity::dense {

// Outputs start as this on both backends, so an element an op leaves
// unwritten on one side only shows.
inline constexpr float kUnwritten = 7.0f;

inline std::vector<float> Unwritten(size_t n) {
  return std::vector<float>(n, kUnwritten);
}

inline constexpr Activation kActivations[] = {
    Activation::kGelu,    Activation::kGeluTanh, Activation::kRelu,
    Activation::kRelu2,   Activation::kSilu,     Activation::kSigmoid,
    Activation::kIdentity};

// A norm over n contiguous rows of width d (callers of strided rows set
// ldx and ldo); w may be null.
inline NormParams NormOf(const float* x, float* out, int n, int d,
                         const float* w, float eps) {
  NormParams p;
  p.x = x;
  p.ldx = d;
  p.n = n;
  p.d = d;
  p.w = w;
  p.eps = eps;
  p.out = out;
  p.ldo = d;
  return p;
}

// y (row stride ldy) = x (row stride ldx, n rows) · wᵀ, without bias,
// overwriting y.
inline GemmParams GemmOf(const float* x, int ldx, int n, const Matrix& w,
                         float* y, int ldy) {
  GemmParams p;
  p.x = x;
  p.ldx = ldx;
  p.n = n;
  p.w = w;
  p.y = y;
  p.ldy = ldy;
  return p;
}

// y after a Gemm on `be` of n rows of x (row stride ldx) by w into y, which
// starts as y0 (row stride ldy); with `bias` where given, accumulating into y
// where asked.
inline std::vector<float> GemmOn(Backend& be, const Matrix& w,
                                 const std::vector<float>& x, int ldx, int n,
                                 const std::vector<float>& y0, int ldy,
                                 const std::vector<float>* bias = nullptr,
                                 bool accumulate = false) {
  Array xa(be, x), ya(be, y0);
  Array ba(be, bias != nullptr ? *bias : std::vector<float>());
  GemmParams p = GemmOf(xa.get(), ldx, n, w, ya.get(), ldy);
  p.bias = bias != nullptr ? ba.get() : nullptr;
  p.accumulate = accumulate;
  be.Gemm(p);
  return ya.Read();
}

// out = act(a) * b (b null: act(a)) over n rows of f columns, every row
// stride ld; overwriting out unless the caller sets accumulate.
inline ActivateMulParams ActivateMulOf(Activation act, const float* a,
                                       const float* b, float* out, int n, int f,
                                       int ld) {
  ActivateMulParams p;
  p.a = a;
  p.lda = ld;
  p.b = b;
  p.ldb = b != nullptr ? ld : 0;
  p.n = n;
  p.f = f;
  p.act = act;
  p.out = out;
  p.ldo = ld;
  return p;
}

// Rows of ExpectEmbedMatches' tables.
inline constexpr int kEmbedRows = 50;

// Embed of 9 ids (repeats, both ends of the table) from a table of kEmbedRows
// rows of width d, scaled by 1.5. A copy is a copy: the same float products on
// both sides, bit for bit. The reference reads ref_table, `dut` (the backend
// under test) dut_table: the same table, or the one dut rounds on upload
// with the reference reading it rounded.
inline void ExpectEmbedMatches(Backend& ref, Backend& dut,
                               const std::vector<float>& ref_table,
                               const std::vector<float>& dut_table, int d) {
  const int n = 9;
  const int32_t ids[n] = {0, 49, 3, 3, 17, 2, 48, 0, 25};
  std::vector<std::vector<float>> got;
  for (const auto& [be, table] :
       {std::pair<Backend*, const std::vector<float>*>{&ref, &ref_table},
        {&dut, &dut_table}}) {
    absl::StatusOr<Matrix> m = be->UploadMatrix(table->data(), kEmbedRows, d);
    ASSERT_TRUE(m.ok()) << m.status();
    Array out(*be, Unwritten(n * d));
    EmbedParams embed;
    embed.ids = ids;
    embed.n = n;
    embed.table = *m;
    embed.scale = 1.5f;
    embed.out = out.get();
    be->Embed(embed);
    ExpectNoError(*be);
    got.push_back(out.Read());
    // A pipelined step's rows 1, 4 and 8 take their ids from tokens a step
    // before sampled, in the backend's memory; the others keep theirs.
    Array out_fed(*be, Unwritten(n * d));
    const std::vector<int32_t> sampled = {7, 31, 2, 44};
    DeviceBuffer tokens = *be->Alloc(sampled.size() * sizeof(int32_t));
    be->CopyToDevice(tokens.get(), sampled.data(),
                     sampled.size() * sizeof(int32_t));
    const int32_t fed_rows[3] = {1, 4, 8}, fed_from[3] = {2, 0, 3};
    embed.out = out_fed.get();
    embed.fed_tokens = static_cast<const int32_t*>(tokens.get());
    embed.fed_rows = fed_rows;
    embed.fed_from = fed_from;
    embed.nfed = 3;
    be->Embed(embed);
    ExpectNoError(*be);
    got.push_back(out_fed.Read());
  }
  EXPECT_TRUE(Within(got[0], got[2], Bound::Bitwise()));
  EXPECT_TRUE(Within(got[1], got[3], Bound::Bitwise()));
  // The fed rows are the table's rows of the fed ids, the others unchanged.
  const int32_t fed_ids[n] = {0, 2, 3, 3, 7, 2, 48, 0, 44};
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) {
      const float want = 1.5f * ref_table[fed_ids[i] * d + j];
      ASSERT_EQ(got[1][i * d + j], want) << "row " << i << " col " << j;
    }
  }
}

// The norms over n rows of width d of x (row stride ld, values in [-3, 3)),
// weight w and bias b drawn from seed, seed + 1 and seed + 2: RmsNorm with
// and without weight, in place on a 16-column slice 8 columns in (as
// Jamba's dt/B/C norms), out of place between strides (min(d, 40) columns,
// 3 into x, 1 into a 50-wide output); LayerNorm with weight and bias of x
// and of x + 5 (a mean far from zero, which its two passes must remove),
// with weight alone, and plain on x + 5. The RmsNorm outputs within
// `rms_bound` of the reference's, the LayerNorm ones within `ln_bound`.
inline void ExpectNormsMatch(Backend& ref, Backend& dut, int n, int d, int ld,
                             uint32_t seed, const Bound& rms_bound,
                             const Bound& ln_bound) {
  SCOPED_TRACE(testing::Message() << "d=" << d);
  const std::vector<float> x = Random(n * ld, seed, -3.0f, 3.0f),
                           w = Random(d, seed + 1), b = Random(d, seed + 2);
  std::vector<float> shifted = x;
  for (float& v : shifted) v += 5.0f;
  const char* what[] = {"rms",     "rms no w", "strided in place",
                        "strided", "ln w b",   "ln w b unshifted",
                        "ln w",    "ln plain"};
  std::vector<std::vector<float>> got[2];
  int side = 0;
  for (Backend* be : {&ref, &dut}) {
    Array xa(*be, x), sa(*be, shifted), wa(*be, w), ba(*be, b),
        rms(*be, Unwritten(n * d)), rms_plain(*be, Unwritten(n * d)),
        slice(*be, x), strided(*be, Unwritten(n * 50)),
        ln(*be, Unwritten(n * d)), ln_unshifted(*be, Unwritten(n * d)),
        ln_w(*be, Unwritten(n * d)), ln_plain(*be, Unwritten(n * d));
    be->RmsNorm(NormOf(xa.get(), rms.get(), n, d, wa.get(), 1e-5f));
    be->RmsNorm(NormOf(xa.get(), rms_plain.get(), n, d, nullptr, 1e-5f));
    NormParams in_place =
        NormOf(slice.get() + 8, slice.get() + 8, n, 16, wa.get(), 1e-6f);
    in_place.ldx = in_place.ldo = ld;
    be->RmsNorm(in_place);
    NormParams across = NormOf(xa.get() + 3, strided.get() + 1, n,
                               std::min(d, 40), wa.get(), 1e-6f);
    across.ldx = ld;
    across.ldo = 50;
    be->RmsNorm(across);
    NormParams with_bias = NormOf(sa.get(), ln.get(), n, d, wa.get(), 1e-5f);
    with_bias.b = ba.get();
    be->LayerNorm(with_bias);
    with_bias.x = xa.get();
    with_bias.out = ln_unshifted.get();
    be->LayerNorm(with_bias);
    be->LayerNorm(NormOf(xa.get(), ln_w.get(), n, d, wa.get(), 1e-5f));
    be->LayerNorm(NormOf(sa.get(), ln_plain.get(), n, d, nullptr, 1e-5f));
    ExpectNoError(*be);
    for (Array* a : {&rms, &rms_plain, &slice, &strided, &ln, &ln_unshifted,
                     &ln_w, &ln_plain}) {
      got[side].push_back(a->Read());
    }
    ++side;
  }
  for (size_t i = 0; i < got[0].size(); ++i) {
    EXPECT_TRUE(Within(got[0][i], got[1][i], i < 4 ? rms_bound : ln_bound))
        << what[i];
  }
}

// A router kept in fp32 on a backend of 16-bit weights (`dut`): uploaded
// with UploadMatrixFp32 it multiplies n rows as the fp32 reference does,
// within `bound`, while the same matrix through UploadMatrix is measurably
// further off (the flag took effect).
inline void ExpectFp32MatrixKeepsFp32Accuracy(Backend& ref, Backend& dut, int n,
                                              const Bound& bound) {
  SCOPED_TRACE(testing::Message() << "n=" << n);
  const int rows = 16, cols = 768;
  const std::vector<float> w = Random(rows * cols, 21),
                           x = Random(n * cols, 22 + n);
  std::vector<std::vector<float>> got;
  for (int i = 0; i < 3; ++i) {
    Backend& be = i == 0 ? ref : dut;
    absl::StatusOr<Matrix> m = i == 2
                                   ? be.UploadMatrix(w.data(), rows, cols)
                                   : be.UploadMatrixFp32(w.data(), rows, cols);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->fp32, i < 2);
    got.push_back(
        GemmOn(be, *m, x, cols, n, std::vector<float>(n * rows), rows));
    ExpectNoError(be);
  }
  EXPECT_TRUE(Within(got[0], got[1], bound));
  EXPECT_GT(MaxAbsDiff(got[0], got[2]), 1e-3f);
}

// The row ops' inputs: a and b of n rows (row stride ld, f columns used), the
// bias v and the m = rows.size() source rows src of width d, gathered from
// and scattered (with `scales`) to `rows`, into dst (row stride lddst).
struct RowOpsCase {
  int n = 0, d = 0, f = 0, ld = 0;
  std::vector<float> a, b, v, src;
  std::vector<int32_t> rows;
  std::vector<float> scales;
  std::vector<float> dst;
  int lddst = 0;
};

// a (in [-4, 4)), b, v and src drawn from seed .. seed + 3; dst left to the
// caller.
inline RowOpsCase MakeRowOpsCase(int n, int d, int f, int ld,
                                 std::vector<int32_t> rows,
                                 std::vector<float> scales, uint32_t seed) {
  RowOpsCase c;
  c.n = n;
  c.d = d;
  c.f = f;
  c.ld = ld;
  c.a = Random(static_cast<size_t>(n) * ld, seed, -4.0f, 4.0f);
  c.b = Random(static_cast<size_t>(n) * ld, seed + 1);
  c.v = Random(d, seed + 2);
  c.src = Random(rows.size() * d, seed + 3);
  c.rows = std::move(rows);
  c.scales = std::move(scales);
  return c;
}

// ActivateMul with `act`: with b accumulating, without b overwriting, and
// both in place (out aliases a), with b overwriting and without b
// accumulating; then GatherRows, and AddBias followed by ScatterAddScaled on
// dst. The activations' outputs within `act_bound` of the reference's, the
// gathered rows and dst within `rows_bound`.
inline void ExpectRowOpsMatch(Backend& ref, Backend& dut, const RowOpsCase& c,
                              Activation act, const Bound& act_bound,
                              const Bound& rows_bound) {
  SCOPED_TRACE(testing::Message()
               << "act=" << static_cast<int>(act) << " d=" << c.d);
  const int n = c.n, d = c.d, f = c.f, ld = c.ld;
  const int m = static_cast<int>(c.rows.size());
  const char* what[] = {"act*b acc",        "act",    "act*b in place",
                        "act acc in place", "gather", "bias+scatter"};
  std::vector<std::vector<float>> got[2];
  int side = 0;
  for (Backend* be : {&ref, &dut}) {
    Array aa(*be, c.a), bb(*be, c.b), with_b(*be, c.b), plain(*be, c.b),
        in_place_b(*be, c.a), in_place(*be, c.a), g(*be, m * d),
        dst(*be, c.dst), sa(*be, c.src), va(*be, c.v);
    ActivateMulParams acc =
        ActivateMulOf(act, aa.get(), bb.get(), with_b.get(), n, f, ld);
    acc.accumulate = true;
    be->ActivateMul(acc);
    be->ActivateMul(
        ActivateMulOf(act, aa.get(), nullptr, plain.get(), n, f, ld));
    be->ActivateMul(ActivateMulOf(act, in_place_b.get(), bb.get(),
                                  in_place_b.get(), n, f, ld));
    ActivateMulParams acc_in_place =
        ActivateMulOf(act, in_place.get(), nullptr, in_place.get(), n, f, ld);
    acc_in_place.accumulate = true;
    be->ActivateMul(acc_in_place);
    GatherRowsParams gather;
    gather.x = aa.get();
    gather.d = d;
    gather.rows = c.rows.data();
    gather.m = m;
    gather.out = g.get();
    be->GatherRows(gather);
    AddBiasParams add_bias;
    add_bias.y = dst.get();
    add_bias.ldy = c.lddst;
    add_bias.n = n;
    add_bias.d = d;
    add_bias.v = va.get();
    be->AddBias(add_bias);
    ScatterAddParams scatter;
    scatter.src = sa.get();
    scatter.d = d;
    scatter.rows = c.rows.data();
    scatter.scales = c.scales.data();
    scatter.m = m;
    scatter.dst = dst.get();
    scatter.lddst = c.lddst;
    be->ScatterAddScaled(scatter);
    ExpectNoError(*be);
    for (Array* a : {&with_b, &plain, &in_place_b, &in_place, &g, &dst}) {
      got[side].push_back(a->Read());
    }
    ++side;
  }
  for (size_t i = 0; i < got[0].size(); ++i) {
    EXPECT_TRUE(Within(got[0][i], got[1][i], i < 4 ? act_bound : rows_bound))
        << what[i];
  }
}

// A router's configuration: x experts, k of them a row (x for kReluDynamic).
struct MoeRouteCase {
  int x = 0;
  MoeRouting routing = MoeRouting::kSoftmaxTopK;
  int k = 1;
  bool renormalize = false;
  // kSigmoidGroupTopK: groups, groups kept, a score bias of c.x values
  // (empty: none), and the gates' scale (any routing).
  int n_group = 1;
  int topk_group = 1;
  std::vector<float> score_bias;
  float scale = 1.0f;
};

// MoeRoute of n rows of `logits` ([n, c.x]): the same experts, gates within
// `gates_bound` of the reference's.
inline void ExpectMoeRouteMatches(Backend& ref, Backend& dut,
                                  const std::vector<float>& logits, int n,
                                  const MoeRouteCase& c,
                                  const Bound& gates_bound) {
  SCOPED_TRACE(testing::Message() << "n=" << n << " x=" << c.x << " k=" << c.k
                                  << " renorm=" << c.renormalize);
  std::vector<std::vector<float>> gates;
  std::vector<std::vector<uint8_t>> experts;
  for (Backend* be : {&ref, &dut}) {
    Array l(*be, logits), e(*be, Unwritten(n * c.k)),
        g(*be, Unwritten(n * c.k)),
        bias(*be,
             c.score_bias.empty() ? std::vector<float>(1, 0.0f) : c.score_bias);
    MoeRouteParams route;
    route.logits = l.get();
    route.n = n;
    route.x = c.x;
    route.routing = c.routing;
    route.top_k = c.k;
    route.renormalize = c.renormalize;
    route.scale = c.scale;
    route.group.n_group = c.n_group;
    route.group.topk_group = c.topk_group;
    route.group.score_bias = c.score_bias.empty() ? nullptr : bias.get();
    route.experts = reinterpret_cast<int32_t*>(e.get());
    route.gates = g.get();
    be->MoeRoute(route);
    ExpectNoError(*be);
    experts.push_back(e.ReadBytes());
    gates.push_back(g.Read());
  }
  EXPECT_EQ(experts[0], experts[1]);
  EXPECT_TRUE(Within(gates[0], gates[1], gates_bound));
}

}  // namespace seqboat::parity::dense

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_DENSE_CASES_H_
