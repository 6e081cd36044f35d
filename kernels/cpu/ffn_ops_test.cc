// The mlp/moe/s4d ops of the CPU backend against their definitions.
#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

TEST(FfnOpsTest, SoftmaxTopKTiesGoToTheLowerExpertAndRenormalize) {
  auto be = MakeCpuBackend(1);
  // Row 0: experts 1 and 3 tie for first; row 1: a clear order 2 > 0 > 1.
  const std::vector<float> logits = {0.0f, 2.0f, -1.0f, 2.0f,
                                     1.0f, 0.0f, 3.0f,  -5.0f};
  std::vector<int32_t> experts(4);
  std::vector<float> gates(4);
  MoeRouteParams route;
  route.logits = logits.data();
  route.n = 2;
  route.x = 4;
  route.routing = MoeRouting::kSoftmaxTopK;
  route.top_k = 2;
  route.renormalize = false;
  route.experts = experts.data();
  route.gates = gates.data();
  be->MoeRoute(route);
  EXPECT_EQ(experts, (std::vector<int32_t>{1, 3, 2, 0}));
  const double z0 = 1 + 2 * std::exp(2.0) + std::exp(-1.0);
  EXPECT_NEAR(gates[0], std::exp(2.0) / z0, 1e-6);
  EXPECT_NEAR(gates[1], std::exp(2.0) / z0, 1e-6);
  MoeRouteParams route2;
  route2.logits = logits.data();
  route2.n = 2;
  route2.x = 4;
  route2.routing = MoeRouting::kSoftmaxTopK;
  route2.top_k = 2;
  route2.renormalize = true;
  route2.experts = experts.data();
  route2.gates = gates.data();
  be->MoeRoute(route2);
  EXPECT_NEAR(gates[0], 0.5, 1e-6);
  EXPECT_NEAR(gates[2] + gates[3], 1.0, 1e-6);
  EXPECT_NEAR(gates[2] / gates[3], std::exp(2.0), 1e-4);
}

TEST(FfnOpsTest, ReluDynamicKeepsPositiveLogitsInExpertOrder) {
  auto be = MakeCpuBackend(1);
  const std::vector<float> logits = {-1.0f, 0.5f, 0.0f, 2.0f};
  std::vector<int32_t> experts(4);
  std::vector<float> gates(4);
  MoeRouteParams route3;
  route3.logits = logits.data();
  route3.n = 1;
  route3.x = 4;
  route3.routing = MoeRouting::kReluDynamic;
  route3.top_k = 1;
  route3.renormalize = false;
  route3.experts = experts.data();
  route3.gates = gates.data();
  be->MoeRoute(route3);
  EXPECT_EQ(experts, (std::vector<int32_t>{1, 3, -1, -1}));
  EXPECT_EQ(gates, (std::vector<float>{0.5f, 2.0f, 0.0f, 0.0f}));
}

TEST(FfnOpsTest, ActivateMulAndScatter) {
  auto be = MakeCpuBackend(1);
  const std::vector<float> a = {-1.0f, 0.5f, 2.0f, -3.0f};
  const std::vector<float> b = {2.0f, 2.0f, 3.0f, 3.0f};
  std::vector<float> out(4, 1.0f);
  ActivateMulParams act;
  act.a = a.data();
  act.lda = 2;
  act.b = b.data();
  act.ldb = 2;
  act.n = 2;
  act.f = 2;
  act.act = Activation::kRelu;
  act.out = out.data();
  act.ldo = 2;
  act.accumulate = true;
  be->ActivateMul(act);
  EXPECT_EQ(out, (std::vector<float>{1.0f, 2.0f, 7.0f, 1.0f}));
  ActivateMulParams act2;
  act2.a = a.data();
  act2.lda = 2;
  act2.ldb = 0;
  act2.n = 2;
  act2.f = 2;
  act2.act = Activation::kGelu;
  act2.out = out.data();
  act2.ldo = 2;
  be->ActivateMul(act2);
  EXPECT_NEAR(out[2], 2.0 * 0.5 * (1 + std::erf(2.0 / std::sqrt(2.0))), 1e-6);
  // Squared ReLU: negatives give 0, not their square.
  ActivateMulParams act3 = act2;
  act3.act = Activation::kRelu2;
  be->ActivateMul(act3);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.25f, 4.0f, 0.0f}));
  // Row 1 is hit twice: contributions add in list order.
  std::vector<float> dst(6, 0.0f);
  const std::vector<float> src = {1, 2, 3, 4, 5, 6};
  const int32_t rows[3] = {1, 0, 1};
  const float scales[3] = {1.0f, 2.0f, 0.5f};
  ScatterAddParams scatter;
  scatter.src = src.data();
  scatter.d = 2;
  scatter.rows = rows;
  scatter.scales = scales;
  scatter.m = 3;
  scatter.dst = dst.data();
  scatter.lddst = 3;
  be->ScatterAddScaled(scatter);
  EXPECT_EQ(dst, (std::vector<float>{6, 8, 0, 3.5f, 5, 0}));
}

// The scan's folded step is the ActivateMul the layer ran after it, to the
// bit: GELU in place, and the add into a residual.
TEST(FfnOpsTest, S4dScanFoldsTheNextElementwiseStep) {
  auto be = MakeCpuBackend(1);
  const int h = 5, m = 4, n = 7;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto random = [&](size_t size) {
    std::vector<float> v(size);
    for (float& x : v) x = uni(rng);
    return v;
  };
  std::vector<float> da = random(h * m * 2);
  for (float& x : da) x *= 0.7f;
  const std::vector<float> c = random(h * m * 2), d = random(h),
                           u = random(n * h), state0 = random(2 * h * m * 2),
                           residual0 = random(n * h);
  const Segment segs[2] = {{1, 0, 3}, {0, 3, 4}};
  // The scan with `act` / `accumulate` into out, from state0.
  auto scan = [&](Activation act, bool accumulate, std::vector<float>* out) {
    std::vector<float> state = state0;
    S4dScanParams p;
    p.segs = segs;
    p.nsegs = 2;
    p.u = u.data();
    p.ldu = h;
    p.da = da.data();
    p.c = c.data();
    p.d = d.data();
    p.state = state.data();
    p.state_stride = h * m * 2;
    p.h = h;
    p.m = m;
    p.ch = 1;
    p.scale = 2.0f;
    p.out = out->data();
    p.act = act;
    p.accumulate = accumulate;
    be->S4dScan(p);
  };
  auto activate = [&](const std::vector<float>& a, Activation act,
                      bool accumulate, std::vector<float>* out) {
    ActivateMulParams p;
    p.a = a.data();
    p.lda = h;
    p.n = n;
    p.f = h;
    p.act = act;
    p.out = out->data();
    p.ldo = h;
    p.accumulate = accumulate;
    be->ActivateMul(p);
  };
  std::vector<float> plain(n * h), separate(n * h), folded(n * h);
  scan(Activation::kIdentity, false, &plain);
  activate(plain, Activation::kGelu, false, &separate);
  scan(Activation::kGelu, false, &folded);
  EXPECT_EQ(folded, separate);
  separate = residual0;
  activate(plain, Activation::kIdentity, true, &separate);
  folded = residual0;
  scan(Activation::kIdentity, true, &folded);
  EXPECT_EQ(folded, separate);
  EXPECT_NE(folded, residual0);
}

// Two sequences in one step (one decode row after a 5-token prefill, one
// prefill of 4) with two output channels: each output equals the causal
// convolution with K_l = s Re(Σ C dA^l) over that sequence's own tokens.
TEST(FfnOpsTest, S4dScanEqualsTheConvolutionKernel) {
  auto be = MakeCpuBackend(1);
  const int h = 3, m = 4, ch = 2;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> da(h * m * 2), c(ch * h * m * 2), d(ch * h);
  for (int i = 0; i < h * m; ++i) {
    const std::complex<double> z =
        std::polar(0.6 + 0.35 * (uni(rng) + 1) / 2, 3.0 * uni(rng));
    da[2 * i] = static_cast<float>(z.real());
    da[2 * i + 1] = static_cast<float>(z.imag());
  }
  for (float& v : c) v = uni(rng);
  for (float& v : d) v = uni(rng);
  const int slots = 3;
  const int64_t per_slot = h * m * 2;
  std::vector<float> state(slots * per_slot, 0.0f);
  // Sequence A in slot 2: 5 tokens first, then 1 more in the shared step.
  // Sequence B in slot 0: 4 tokens in the shared step.
  std::vector<float> ua(6 * h), ub(4 * h);
  for (float& v : ua) v = uni(rng);
  for (float& v : ub) v = uni(rng);
  const float scale = 2.0f;
  std::vector<float> out_a(5 * ch * h);
  Segment first{2, 0, 5};
  S4dScanParams p;
  p.u = ua.data();
  p.ldu = h;
  p.da = da.data();
  p.c = c.data();
  p.d = d.data();
  p.state = state.data();
  p.state_stride = per_slot;
  p.h = h;
  p.m = m;
  p.ch = ch;
  p.scale = scale;
  p.segs = &first;
  p.nsegs = 1;
  p.out = out_a.data();
  be->S4dScan(p);
  std::vector<float> step_u(5 * h), step_out(5 * ch * h);
  std::copy(ua.begin() + 5 * h, ua.end(), step_u.begin());
  std::copy(ub.begin(), ub.end(), step_u.begin() + h);
  const Segment segs[2] = {{2, 0, 1}, {0, 1, 4}};
  p.segs = segs;
  p.nsegs = 2;
  p.u = step_u.data();
  p.out = step_out.data();
  be->S4dScan(p);

  auto expect = [&](const std::vector<float>& u, int t, int cc, int k) {
    double y = d[cc * h + k] * u[t * h + k];
    for (int l = 0; l <= t; ++l) {
      std::complex<double> kl = 0;
      for (int i = 0; i < m; ++i) {
        const int di = (k * m + i) * 2, ci = ((cc * h + k) * m + i) * 2;
        kl += std::complex<double>(c[ci], c[ci + 1]) *
              std::pow(std::complex<double>(da[di], da[di + 1]), l);
      }
      y += scale * kl.real() * u[(t - l) * h + k];
    }
    return y;
  };
  for (int cc = 0; cc < ch; ++cc) {
    for (int k = 0; k < h; ++k) {
      for (int t = 0; t < 5; ++t) {
        EXPECT_NEAR(out_a[t * ch * h + cc * h + k], expect(ua, t, cc, k), 1e-5);
      }
      EXPECT_NEAR(step_out[cc * h + k], expect(ua, 5, cc, k), 1e-5);
      for (int t = 0; t < 4; ++t) {
        EXPECT_NEAR(step_out[(1 + t) * ch * h + cc * h + k],
                    expect(ub, t, cc, k), 1e-5);
      }
    }
  }
  // Slot 1 was never touched.
  for (int64_t i = per_slot; i < 2 * per_slot; ++i) EXPECT_EQ(state[i], 0.0f);
}

}  // namespace
}  // namespace seqboat
