// The moe block's grouped dispatch against a per-token dense evaluation of the
// chosen experts, computed here in double from the same weights.
#include "engine/layers/moe.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/testing/matrix_upload_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "weights/safetensors_writer.h"

namespace seqboat {
namespace {

using ::testing::HasSubstr;

constexpr int kD = 16;

using Tensor = F32Tensor;
using Tensors = std::map<std::string, Tensor>;

std::string WriteSafetensors(const std::string& name, const Tensors& ts) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, ".safetensors");
  EXPECT_TRUE(WriteF32Safetensors(path, ts).ok()) << path;
  return path;
}

// Random tensors of the canonical moe layout (MODELS.md §6.2), prefix "m.".
Tensors RandomMoe(const MoeConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensors ts;
  auto add = [&](const std::string& name, std::vector<int64_t> shape,
                 float scale, float offset = 0.0f) {
    Tensor t{shape, {}};
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    for (int64_t i = 0; i < n; ++i)
      t.data.push_back(offset + scale * normal(rng));
    ts["m." + name] = t;
  };
  const int64_t x = c.n_experts, f = c.d_ff, h = c.router_hidden;
  const bool relu = c.routing == MoeRouting::kReluDynamic;
  add("norm.weight", {kD}, 0.1f, 1.0f);
  if (relu) {
    add("moe.router_in.weight", {h, kD}, 0.5f);
    if (c.router_bias) add("moe.router_in.bias", {h}, 0.5f);
  }
  add("moe.router.weight", {x, relu ? h : kD}, 0.5f);
  if (c.router_bias) add("moe.router.bias", {x}, 0.5f);
  if (c.routing == MoeRouting::kSigmoidGroupTopK) {
    add("moe.router.score_bias", {x}, 0.3f);
  }
  const int64_t di = c.latent > 0 ? c.latent : kD;
  if (c.latent > 0) {
    add("moe.latent_in.weight", {di, kD}, 0.3f);
    add("moe.latent_out.weight", {kD, di}, 0.3f);
  }
  add("moe.up.weight", {x, f, di}, 0.25f);
  if (c.gated) add("moe.gate.weight", {x, f, di}, 0.25f);
  add("moe.down.weight", {x, di, f}, 0.2f);
  if (const int64_t fs = c.shared_d_ff; fs > 0) {
    add("moe.shared.up.weight", {fs, kD}, 0.25f);
    if (c.gated) add("moe.shared.gate.weight", {fs, kD}, 0.25f);
    add("moe.shared.down.weight", {kD, fs}, 0.2f);
    if (c.shared_gate) add("moe.shared_gate.weight", {1, kD}, 0.5f);
  }
  if (c.expert_bias) {
    add("moe.up.bias", {x, f}, 0.1f);
    if (c.gated) add("moe.gate.bias", {x, f}, 0.1f);
    add("moe.down.bias", {kD}, 0.1f);
  }
  return ts;
}

double Act(Activation a, double v) {
  switch (a) {
    case Activation::kRelu:
      return v > 0 ? v : 0;
    case Activation::kRelu2:
      return v > 0 ? v * v : 0;
    case Activation::kSilu:
      return v / (1 + std::exp(-v));
    case Activation::kGelu:
      return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * v *
             (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    case Activation::kSigmoid:  // never an FFN's `act`
    case Activation::kIdentity:
      break;
  }
  return v;
}

// y = W x + b for W [rows, cols] stored row-major at w.
std::vector<double> Linear(const float* w, const float* b, int rows, int cols,
                           const std::vector<double>& x) {
  std::vector<double> y(rows);
  for (int i = 0; i < rows; ++i) {
    double acc = b != nullptr ? b[i] : 0.0;
    for (int j = 0; j < cols; ++j) acc += double(w[i * cols + j]) * x[j];
    y[i] = acc;
  }
  return y;
}

struct Expected {
  std::vector<float> residual;
  std::vector<std::vector<int>> experts;  // per row
};

double Sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// Nemotron-H's routing of one row (MODELS.md §14.3), written as transformers
// writes it: the top_k of the biased scores inside the topk_group groups
// whose best two sum highest; gates the unbiased scores.
std::vector<std::pair<int, double>> SigmoidGroupRoute(const MoeConfig& c,
                                                      const float* score_bias,
                                                      std::vector<double> lg) {
  const int x = c.n_experts, g = c.n_group, size = x / g;
  std::vector<double> choice(x);
  for (int e = 0; e < x; ++e) {
    lg[e] = Sigmoid(lg[e]);
    choice[e] = lg[e] + score_bias[e];
  }
  std::vector<double> group(g);
  for (int k = 0; k < g; ++k) {
    std::vector<double> in(choice.begin() + k * size,
                           choice.begin() + (k + 1) * size);
    std::sort(in.rbegin(), in.rend());
    group[k] = in[0] + in[1];
  }
  std::vector<int> order(g);
  for (int k = 0; k < g; ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return group[a] > group[b]; });
  std::vector<int> experts;
  for (int k = 0; k < c.topk_group; ++k)
    for (int e = order[k] * size; e < (order[k] + 1) * size; ++e)
      experts.push_back(e);
  std::stable_sort(experts.begin(), experts.end(),
                   [&](int a, int b) { return choice[a] > choice[b]; });
  std::vector<std::pair<int, double>> chosen;
  double sum = 0;
  for (int j = 0; j < c.top_k; ++j) {
    chosen.push_back({experts[j], lg[experts[j]]});
    sum += lg[experts[j]];
  }
  for (auto& [e, w] : chosen) {
    if (c.renormalize) w /= sum + 1e-20;
    w *= c.routed_scale;
  }
  return chosen;
}

// One token at a time: its route, then each chosen expert densely, then the
// shared expert, the whole addition times residual_scale.
Expected DenseReference(const MoeConfig& c, const Tensors& ts,
                        const std::vector<float>& r0, int n,
                        double residual_scale = 1.0) {
  auto T = [&](const std::string& name) -> const float* {
    auto it = ts.find("m." + name);
    return it == ts.end() ? nullptr : it->second.data.data();
  };
  const int x = c.n_experts, f = c.d_ff, h = c.router_hidden;
  Expected out{r0, std::vector<std::vector<int>>(n)};
  for (int t = 0; t < n; ++t) {
    std::vector<double> u(kD);
    double ss = 0;
    for (int j = 0; j < kD; ++j) ss += double(r0[t * kD + j]) * r0[t * kD + j];
    const double s = 1 / std::sqrt(ss / kD + 1e-6);
    for (int j = 0; j < kD; ++j)
      u[j] = r0[t * kD + j] * s * T("norm.weight")[j];
    std::vector<std::pair<int, double>> chosen;
    if (c.routing == MoeRouting::kReluDynamic) {
      std::vector<double> hid =
          Linear(T("moe.router_in.weight"), T("moe.router_in.bias"), h, kD, u);
      for (double& v : hid) v = v / (1 + std::exp(-v));
      std::vector<double> m =
          Linear(T("moe.router.weight"), T("moe.router.bias"), x, h, hid);
      for (int e = 0; e < x; ++e)
        if (m[e] > 0) chosen.push_back({e, m[e]});
    } else if (c.routing == MoeRouting::kSigmoidGroupTopK) {
      chosen =
          SigmoidGroupRoute(c, T("moe.router.score_bias"),
                            Linear(T("moe.router.weight"), nullptr, x, kD, u));
    } else {
      std::vector<double> lg =
          Linear(T("moe.router.weight"), T("moe.router.bias"), x, kD, u);
      const double mx = *std::max_element(lg.begin(), lg.end());
      double sum = 0;
      for (double& v : lg) sum += (v = std::exp(v - mx));
      std::vector<int> order(x);
      for (int e = 0; e < x; ++e) order[e] = e;
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return lg[a] > lg[b]; });
      double picked = 0;
      for (int j = 0; j < c.top_k; ++j) {
        chosen.push_back({order[j], lg[order[j]] / sum});
        picked += lg[order[j]] / sum;
      }
      if (c.renormalize)
        for (auto& [e, g] : chosen) g /= picked;
    }
    const int di = c.latent > 0 ? c.latent : kD;
    const std::vector<double> xe =
        c.latent > 0 ? Linear(T("moe.latent_in.weight"), nullptr, di, kD, u)
                     : u;
    std::vector<double> sum(di, 0.0), add(kD, 0.0);
    for (auto [e, g] : chosen) {
      out.experts[t].push_back(e);
      const float* ub = T("moe.up.bias") ? T("moe.up.bias") + e * f : nullptr;
      std::vector<double> hu =
          Linear(T("moe.up.weight") + int64_t(e) * f * di, ub, f, di, xe);
      if (c.gated) {
        const float* gb =
            T("moe.gate.bias") ? T("moe.gate.bias") + e * f : nullptr;
        std::vector<double> hg =
            Linear(T("moe.gate.weight") + int64_t(e) * f * di, gb, f, di, xe);
        for (int j = 0; j < f; ++j) hu[j] *= Act(c.act, hg[j]);
      } else {
        for (double& v : hu) v = Act(c.act, v);
      }
      std::vector<double> y = Linear(T("moe.down.weight") + int64_t(e) * di * f,
                                     nullptr, di, f, hu);
      for (int j = 0; j < di; ++j) sum[j] += g * y[j];
    }
    add = c.latent > 0
              ? Linear(T("moe.latent_out.weight"), nullptr, kD, di, sum)
              : sum;
    if (const int fs = c.shared_d_ff; fs > 0) {
      std::vector<double> hs =
          Linear(T("moe.shared.up.weight"), nullptr, fs, kD, u);
      if (c.gated) {
        std::vector<double> hg =
            Linear(T("moe.shared.gate.weight"), nullptr, fs, kD, u);
        for (int j = 0; j < fs; ++j) hs[j] *= Act(c.act, hg[j]);
      } else {
        for (double& v : hs) v = Act(c.act, v);
      }
      std::vector<double> y =
          Linear(T("moe.shared.down.weight"), nullptr, kD, fs, hs);
      const double gate = c.shared_gate
                              ? Sigmoid(Linear(T("moe.shared_gate.weight"),
                                               nullptr, 1, kD, u)[0])
                              : 1.0;
      for (int j = 0; j < kD; ++j) add[j] += gate * y[j];
    }
    for (int j = 0; j < kD; ++j)
      out.residual[t * kD + j] += residual_scale * add[j];
    if (const float* db = T("moe.down.bias"))
      for (int j = 0; j < kD; ++j) out.residual[t * kD + j] += db[j];
  }
  return out;
}

struct Built {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<WeightStore> store;
  std::unique_ptr<MoeLayer> layer;
};

absl::StatusOr<Built> Build(const MoeConfig& c, const Tensors& ts,
                            const std::string& file,
                            std::unique_ptr<Backend> backend = nullptr,
                            float residual_scale = 1.0f) {
  Built b;
  b.backend = backend != nullptr ? std::move(backend) : MakeCpuBackend(1);
  auto store = WeightStore::Open(WriteSafetensors(file, ts));
  if (!store.ok()) return store.status();
  b.store = *std::move(store);
  NormConfig norm{NormType::kRmsNormT5, 1e-6, true};
  auto layer = MakeMoe(c, norm, kD, "m.", *b.store, *b.backend, residual_scale);
  if (!layer.ok()) return layer.status();
  b.layer = *std::move(layer);
  if (absl::Status s = b.store->CheckAllUsed(); !s.ok()) return s;
  return b;
}

// Runs rows [0, n) of `r` through the layer in one step; returns the result.
// Rows first.. first + n - 1 of r through the layer, as n decode rows (the
// device-grouped path) or, with decode false, as one segment of n tokens
// (the host-grouped path: n > 1).
std::vector<float> Step(Built& b, std::vector<float> r, int first, int n,
                        bool decode = true) {
  std::vector<float> scratch(b.layer->ScratchFloatsPerRow() * n);
  StepRows rows;
  rows.ids.assign(n, 0);  // a block reads the row count and the segments
  if (decode) {
    for (int i = 0; i < n; ++i) rows.segs.push_back({i, i, 1});
  } else {
    rows.segs.push_back({0, 0, n});
  }
  const StepContext ctx{b.backend.get(), &rows, scratch.data()};
  EXPECT_TRUE(b.layer->Forward(ctx, r.data() + first * kD).ok());
  return r;
}

MoeConfig Config(MoeRouting routing, int top_k, bool renorm, bool gated,
                 bool biases) {
  MoeConfig c;
  c.routing = routing;
  c.n_experts = 8;
  c.d_ff = 12;
  c.act = gated ? Activation::kSilu : Activation::kRelu;
  c.gated = gated;
  c.router_bias = biases;
  c.expert_bias = biases;
  c.top_k = top_k;
  c.renormalize = renorm;
  c.router_hidden = routing == MoeRouting::kReluDynamic ? 6 : 0;
  return c;
}

// Nemotron-H's MoE: sigmoid scores, the correction bias, 4 groups of 2
// searched 2 at a time, 3 experts of them renormalised and scaled, squared
// ReLU experts without a gate in a latent space of 10, a shared expert.
MoeConfig NemotronConfig() {
  MoeConfig c = Config(MoeRouting::kSigmoidGroupTopK, 3, true, false, false);
  c.act = Activation::kRelu2;
  c.n_group = 4;
  c.topk_group = 2;
  c.routed_scale = 2.5;
  c.latent = 10;
  c.shared_d_ff = 20;
  return c;
}

// Granite-4.0-H's: the top 2 renormalised, SwiGLU experts and an ungated
// shared SwiGLU expert.
MoeConfig GraniteConfig() {
  MoeConfig c = Config(MoeRouting::kSoftmaxTopK, 2, true, true, false);
  c.shared_d_ff = 20;
  return c;
}

// Qwen3-Next's: softmax top-k renormalised, gated experts and a shared
// expert behind a sigmoid gate.
MoeConfig QwenNextConfig() {
  MoeConfig c = GraniteConfig();
  c.top_k = 3;
  c.shared_gate = true;
  return c;
}

struct Case {
  const char* name;
  MoeConfig config;
  float residual_scale = 1.0f;
};

class MoeDispatchTest : public ::testing::TestWithParam<Case> {};

TEST_P(MoeDispatchTest, GroupedDispatchEqualsPerTokenDenseExperts) {
  const MoeConfig& c = GetParam().config;
  const Tensors ts = RandomMoe(c, 7);
  auto built =
      Build(c, ts, GetParam().name, nullptr, GetParam().residual_scale);
  ASSERT_TRUE(built.ok()) << built.status();
  const int n = 40;
  std::vector<float> r0(n * kD);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : r0) v = normal(rng);

  const Expected want = DenseReference(c, ts, r0, n, GetParam().residual_scale);
  const std::vector<float> got = Step(*built, r0, 0, n, /*decode=*/false);
  const MoeLayer::StepStats st = built->layer->last_step();
  EXPECT_FALSE(st.grouped_on_device);
  for (int i = 0; i < n * kD; ++i) {
    ASSERT_NEAR(got[i], want.residual[i], 1e-4) << "row " << i / kD;
  }
  // One GEMM per projection per expert hit, never one per token.
  std::set<int> hit;
  int pairs = 0;
  for (const auto& row : want.experts) {
    hit.insert(row.begin(), row.end());
    pairs += static_cast<int>(row.size());
  }
  EXPECT_EQ(st.experts_hit, static_cast<int>(hit.size()));
  // Gated: up and gate are one stacked matrix.
  EXPECT_EQ(st.expert_gemms, st.experts_hit * 2);
  EXPECT_EQ(st.routed_rows, pairs);
  EXPECT_GE(st.experts_hit, 4);           // the routing really spreads
  EXPECT_GT(pairs, st.expert_gemms / 3);  // and groups rows

  // The same rows as decode rows, grouped on the device: the host path's
  // bits (the same GEMMs per row, the same order of adds).
  const std::vector<float> device = Step(*built, r0, 0, n);
  EXPECT_TRUE(built->layer->last_step().grouped_on_device);
  EXPECT_EQ(built->layer->last_step().experts_hit, 0);
  ASSERT_EQ(std::memcmp(device.data(), got.data(), got.size() * sizeof(float)),
            0);

  // A row's result does not depend on which rows share its step.
  for (int t : {0, 17, n - 1}) {
    const std::vector<float> alone = Step(*built, r0, t, 1);
    for (int j = 0; j < kD; ++j) {
      EXPECT_NEAR(alone[t * kD + j], got[t * kD + j], 1e-6) << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Routings, MoeDispatchTest,
    ::testing::Values(
        Case{"top1", Config(MoeRouting::kSoftmaxTopK, 1, false, false, false)},
        Case{"top2", Config(MoeRouting::kSoftmaxTopK, 2, false, false, true)},
        Case{"top2_renorm_gated",
             Config(MoeRouting::kSoftmaxTopK, 2, true, true, true)},
        Case{"relu_dynamic",
             Config(MoeRouting::kReluDynamic, 1, false, false, true)},
        Case{"relu_dynamic_gated",
             Config(MoeRouting::kReluDynamic, 1, false, true, false)},
        Case{"sigmoid_group_latent_shared", NemotronConfig()},
        Case{"sigmoid_group_scaled", NemotronConfig(), 0.6f},
        Case{"granite_shared_scaled", GraniteConfig(), 1.8f},
        Case{"qwen_next_shared_gate", QwenNextConfig()}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(MoeLoadTest, RoutersAndOnlyRoutersAreKeptInFp32) {
  for (bool relu : {false, true}) {
    const MoeConfig c =
        relu ? Config(MoeRouting::kReluDynamic, 1, false, true, true)
             : Config(MoeRouting::kSoftmaxTopK, 2, false, true, true);
    MatrixUploadLog::Shapes fp32, other;
    auto built = Build(
        c, RandomMoe(c, 2), relu ? "fp32_relu" : "fp32_top2",
        std::make_unique<MatrixUploadLog>(MakeCpuBackend(1), &fp32, &other));
    ASSERT_TRUE(built.ok()) << built.status();
    const MatrixUploadLog::Shapes want_fp32 =
        relu ? MatrixUploadLog::Shapes{{6, kD}, {8, 6}}
             : MatrixUploadLog::Shapes{{8, kD}};
    EXPECT_EQ(fp32, want_fp32);
    // Expert matrices: [up; gate] and down for each of the 8 experts.
    EXPECT_EQ(other.size(), 2u * 8u);
  }
}

TEST(MoeLoadTest, ExpertCountMismatchNamesTheTensor) {
  MoeConfig c = Config(MoeRouting::kSoftmaxTopK, 1, false, false, false);
  const Tensors ts = RandomMoe(c, 1);
  c.n_experts = 6;  // the weights hold 8
  auto built = Build(c, ts, "mismatch");
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(std::string(built.status().message()),
              HasSubstr("m.moe.router.weight"));
}

TEST(MoeLoadTest, GroupsThatCannotHoldTopKAreRefused) {
  MoeConfig c = NemotronConfig();
  const Tensors ts = RandomMoe(c, 1);
  c.topk_group = 1;  // 2 experts reachable, 3 wanted
  auto built = Build(c, ts, "groups");
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(std::string(built.status().message()), HasSubstr("topk_group"));
  c = NemotronConfig();
  c.n_group = 3;  // does not divide 8
  built = Build(c, ts, "groups3");
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(std::string(built.status().message()),
              HasSubstr("n_group 3 must divide"));
}

TEST(MoeLoadTest, ScaledResidualWithSharedDownBiasIsRefused) {
  const MoeConfig c = Config(MoeRouting::kSoftmaxTopK, 2, false, false, true);
  auto built = Build(c, RandomMoe(c, 1), "scaled_bias", nullptr, 2.0f);
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(std::string(built.status().message()),
              HasSubstr("residual_scale"));
}

TEST(MoeLoadTest, TopKAboveExpertCountIsRefused) {
  MoeConfig c = Config(MoeRouting::kSoftmaxTopK, 1, false, false, false);
  const Tensors ts = RandomMoe(c, 1);
  c.top_k = 9;
  auto built = Build(c, ts, "topk");
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(std::string(built.status().message()), HasSubstr("top_k"));
}

}  // namespace
}  // namespace seqboat
