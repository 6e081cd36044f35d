// The Mamba-2 block on the CPU backend against a direct float64 computation
// of MODELS.md §7.4-7.5 (the recurrence, grouped B/C with heads mapped
// h // (H/G), the per-group gated norm, the Δ clamp), over steps that mix
// prefill chunks, decode rows and padding; chunked prefill leaves the state
// token-by-token decode leaves; and config errors name the field.
#include "engine/layers/mamba2.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/testing/layer_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "weights/safetensors_writer.h"

namespace seqboat {
namespace {

using ::testing::HasSubstr;

using Tensor = F32Tensor;
using Tensors = LayerHarness::Tensors;

constexpr int kD = 8;

Mamba2Config Dims(int heads, int head_dim, int d_state, int groups) {
  Mamba2Config c;
  c.n_heads = heads;
  c.head_dim = head_dim;
  c.d_state = d_state;
  c.n_groups = groups;
  c.d_conv = 4;
  c.in_proj_bias = true;
  c.out_proj_bias = true;
  c.conv_bias = true;
  return c;
}

Tensors RandomWeights(const Mamba2Config& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](std::vector<int64_t> shape, float scale, float offset) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    Tensor t{shape, std::vector<float>(n)};
    for (float& x : t.data) x = offset + scale * u(rng);
    return t;
  };
  const int64_t e = c.d_inner(), h = c.n_heads, cc = c.conv_channels(),
                w = c.in_proj_rows();
  Tensors t;
  t["b.norm.weight"] = fill({kD}, 0.2f, 1.0f);
  t["b.in_proj.weight"] = fill({w, kD}, 0.6f, 0.0f);
  t["b.in_proj.bias"] = fill({w}, 0.2f, 0.0f);
  t["b.conv.weight"] = fill({cc, c.d_conv}, 0.5f, 0.0f);
  t["b.conv.bias"] = fill({cc}, 0.3f, 0.0f);
  // Δ around softplus⁻¹ of [0.01, 0.1], and decays A in [-4, -0.5].
  t["b.dt_bias"] = fill({h}, 1.0f, -3.5f);
  t["b.A"] = fill({h}, 1.75f, -2.25f);
  t["b.D"] = fill({h}, 0.5f, 1.0f);
  t["b.gated_norm.weight"] = fill({e}, 0.3f, 1.0f);
  t["b.out_proj.weight"] = fill({kD, e}, 0.4f, 0.0f);
  t["b.out_proj.bias"] = fill({kD}, 0.2f, 0.0f);
  return t;
}

// One Mamba-2 block with its own arena.
struct Harness : LayerHarness {
  absl::Status Init(const Mamba2Config& config, const Tensors& w,
                    int nslots = 3) {
    return LayerHarness::Init(
        [&](const BlockSite& site) {
          return MakeMamba2(config, NormConfig{}, site);
        },
        "blocks[0] (mamba2)", kD, w, nslots);
  }
  std::vector<float> Step(std::vector<float> x,
                          const std::vector<Segment>& segs) const {
    return LayerHarness::Step(std::move(x), segs, kD);
  }
  std::vector<float> Slot(int s) const {
    const auto* base = reinterpret_cast<const float*>(SlotBytes(s));
    return std::vector<float>(
        base, base + layer->StateBytesPerSlot() / sizeof(float));
  }
};

double Silu(double x) { return x / (1.0 + std::exp(-x)); }
double Softplus(double x) { return x <= 20.0 ? std::log1p(std::exp(x)) : x; }

// One sequence through the block in float64, token by token, from zeros.
class Reference {
 public:
  Reference(const Mamba2Config& c, const Tensors& t)
      : c_(c),
        t_(t),
        window_(c.conv_channels() * (c.d_conv - 1), 0.0),
        ssm_(c.d_inner() * c.d_state, 0.0) {}

  // The residual after the block for one row.
  std::vector<double> Token(const float* r) {
    const int e = c_.d_inner(), cc = c_.conv_channels(), w = c_.in_proj_rows(),
              k = c_.d_conv, hd = c_.head_dim, ns = c_.d_state,
              heads = c_.n_heads, g = c_.n_groups;
    double sq = 0.0;
    for (int i = 0; i < kD; ++i) sq += double{r[i]} * r[i];
    const double rs = 1.0 / std::sqrt(sq / kD + 1e-5);
    std::vector<double> u(kD);
    for (int i = 0; i < kD; ++i) u[i] = r[i] * rs * W("norm.weight")[i];
    std::vector<double> proj(w);
    for (int o = 0; o < w; ++o) {
      double acc = W("in_proj.bias")[o];
      for (int i = 0; i < kD; ++i)
        acc += W("in_proj.weight")[o * kD + i] * u[i];
      proj[o] = acc;
    }
    std::vector<double> xbc(cc);
    for (int ch = 0; ch < cc; ++ch) {
      double* win = &window_[ch * (k - 1)];
      const float* tap = &W("conv.weight")[ch * k];
      double acc = W("conv.bias")[ch] + tap[k - 1] * proj[e + ch];
      for (int i = 0; i < k - 1; ++i) acc += tap[i] * win[i];
      for (int i = 0; i + 1 < k - 1; ++i) win[i] = win[i + 1];
      win[k - 2] = proj[e + ch];
      xbc[ch] = Silu(acc);
    }
    std::vector<double> y(e);
    for (int h = 0; h < heads; ++h) {
      const int grp = h / (heads / g);
      double delta = Softplus(proj[e + cc + h] + W("dt_bias")[h]);
      delta =
          std::min(std::max(delta, c_.dt_min), c_.dt_max.value_or(INFINITY));
      const double da = std::exp(delta * W("A")[h]);
      for (int p = 0; p < hd; ++p) {
        const double x = xbc[h * hd + p];
        double acc = 0.0;
        for (int n = 0; n < ns; ++n) {
          double& s = ssm_[(h * hd + p) * ns + n];
          s = da * s + delta * x * xbc[e + grp * ns + n];
          acc += s * xbc[e + g * ns + grp * ns + n];
        }
        y[h * hd + p] = acc + W("D")[h] * x;
      }
    }
    const int gs = e / g;
    for (int j = 0; j < g; ++j) {
      double ss = 0.0;
      for (int i = j * gs; i < (j + 1) * gs; ++i) {
        y[i] *= Silu(proj[i]);
        ss += y[i] * y[i];
      }
      const double scale = 1.0 / std::sqrt(ss / gs + c_.gated_norm_eps);
      for (int i = j * gs; i < (j + 1) * gs; ++i) {
        y[i] *= scale * W("gated_norm.weight")[i];
      }
    }
    std::vector<double> out(kD);
    for (int o = 0; o < kD; ++o) {
      double acc = r[o] + W("out_proj.bias")[o];
      for (int i = 0; i < e; ++i) acc += W("out_proj.weight")[o * e + i] * y[i];
      out[o] = acc;
    }
    return out;
  }

  const std::vector<double>& ssm() const { return ssm_; }

 private:
  const std::vector<float>& W(const char* name) const {
    return t_.at(absl::StrCat("b.", name)).data;
  }
  const Mamba2Config c_;
  const Tensors& t_;
  std::vector<double> window_, ssm_;
};

std::vector<float> RandomInput(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n * kD);
  for (float& v : x) v = g(rng);
  return x;
}

// Sequence A (slot 0) prefills in chunks that do not divide its length while
// sequence B (slot 2) decodes a token per step; a padding segment on slot 0
// rides along in one step. Both must equal their float64 references.
void CheckMixedSteps(const Mamba2Config& c, uint32_t seed) {
  const Tensors w = RandomWeights(c, seed);
  Harness h;
  ASSERT_TRUE(h.Init(c, w).ok());
  const std::vector<float> a = RandomInput(11, seed + 1);
  const std::vector<float> b = RandomInput(4, seed + 2);
  Reference ref_a(c, w), ref_b(c, w);
  const int chunks[] = {4, 1, 6};
  int at = 0;
  double worst = 0.0, scale = 0.0;
  for (int i = 0; i < 3; ++i) {
    const int len = chunks[i];
    std::vector<float> rows(a.begin() + at * kD, a.begin() + (at + len) * kD);
    rows.insert(rows.end(), b.begin() + i * kD, b.begin() + (i + 1) * kD);
    std::vector<Segment> segs = {{0, 0, len}, {2, len, 1}};
    if (i == 1) {
      // Padding: one row of garbage that no state may see.
      rows.insert(rows.end(), kD, 100.0f);
      segs.push_back({0, len + 1, 0});
    }
    const std::vector<float> got = h.Step(rows, segs);
    for (int t = 0; t < len; ++t) {
      const std::vector<double> want = ref_a.Token(&a[(at + t) * kD]);
      for (int j = 0; j < kD; ++j) {
        worst = std::max(worst, std::abs(want[j] - got[t * kD + j]));
        scale = std::max(scale, std::abs(want[j] - a[(at + t) * kD + j]));
      }
    }
    const std::vector<double> want_b = ref_b.Token(&b[i * kD]);
    for (int j = 0; j < kD; ++j) {
      worst = std::max(worst, std::abs(want_b[j] - got[len * kD + j]));
    }
    at += len;
  }
  EXPECT_LE(worst, 2e-5);
  EXPECT_GT(scale, 0.1);  // the block changes the residual
  // The SSM part of slot 0 equals the reference's state.
  const std::vector<float> slot = h.Slot(0);
  const size_t conv = slot.size() - ref_a.ssm().size();
  double state_err = 0.0, state_max = 0.0;
  for (size_t i = 0; i < ref_a.ssm().size(); ++i) {
    state_err = std::max(state_err, std::abs(ref_a.ssm()[i] - slot[conv + i]));
    state_max = std::max(state_max, std::abs(ref_a.ssm()[i]));
  }
  EXPECT_LE(state_err, 1e-5);
  EXPECT_GT(state_max, 0.01);
  // Slot 1 was never used.
  const std::vector<float> unused = h.Slot(1);
  EXPECT_TRUE(std::all_of(unused.begin(), unused.end(),
                          [](float v) { return v == 0.0f; }));
}

TEST(Mamba2Test, OneGroupMatchesFloat64Recurrence) {
  CheckMixedSteps(Dims(4, 3, 5, 1), 11);
}

TEST(Mamba2Test, GroupsMapConsecutiveHeadsAndNormalisePerGroup) {
  CheckMixedSteps(Dims(6, 3, 5, 2), 12);
  CheckMixedSteps(Dims(6, 2, 7, 3), 13);
}

TEST(Mamba2Test, DeltaIsClampedToTheTimeStepLimit) {
  Mamba2Config c = Dims(4, 3, 5, 2);
  c.dt_min = 0.02;
  c.dt_max = 0.04;
  CheckMixedSteps(c, 14);
}

TEST(Mamba2Test, ChunkedPrefillLeavesTheStateOfTokenByTokenDecode) {
  const Mamba2Config c = Dims(6, 4, 9, 2);
  const Tensors w = RandomWeights(c, 21);
  const std::vector<float> x = RandomInput(37, 22);
  Harness step, chunked;
  ASSERT_TRUE(step.Init(c, w, 1).ok());
  ASSERT_TRUE(chunked.Init(c, w, 1).ok());
  std::vector<float> out_step, out_chunked;
  for (int t = 0; t < 37; ++t) {
    std::vector<float> row(x.begin() + t * kD, x.begin() + (t + 1) * kD);
    row = step.Step(row, {{0, 0, 1}});
    out_step.insert(out_step.end(), row.begin(), row.end());
  }
  for (int at = 0; at < 37; at += 8) {
    const int len = std::min(8, 37 - at);
    std::vector<float> rows(x.begin() + at * kD, x.begin() + (at + len) * kD);
    rows = chunked.Step(rows, {{0, 0, len}});
    out_chunked.insert(out_chunked.end(), rows.begin(), rows.end());
  }
  float out_err = 0.0f, state_err = 0.0f, state_max = 0.0f;
  for (size_t i = 0; i < out_step.size(); ++i) {
    out_err = std::max(out_err, std::abs(out_step[i] - out_chunked[i]));
  }
  const std::vector<float> a = step.Slot(0), b = chunked.Slot(0);
  for (size_t i = 0; i < a.size(); ++i) {
    state_err = std::max(state_err, std::abs(a[i] - b[i]));
    state_max = std::max(state_max, std::abs(a[i]));
  }
  EXPECT_LE(out_err, 1e-5f);
  EXPECT_LE(state_err, 1e-5f);
  EXPECT_GT(state_max, 0.01f);
}

TEST(Mamba2Test, MisShapedWeightIsNamed) {
  const Mamba2Config c = Dims(4, 3, 5, 1);
  Tensors w = RandomWeights(c, 1);
  w["b.A"].shape = {4, 1};
  Harness h;
  EXPECT_THAT(std::string(h.Init(c, w).message()), HasSubstr("b.A"));
  Tensors no_norm = RandomWeights(c, 1);
  no_norm.erase("b.gated_norm.weight");
  Harness h2;
  EXPECT_THAT(std::string(h2.Init(c, no_norm).message()),
              HasSubstr("gated_norm.weight"));
}

}  // namespace
}  // namespace seqboat
