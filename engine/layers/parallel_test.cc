// The parallel_mamba2_attention block against its two parts built as blocks
// of their own: with the same norm and weights, its update of the residual is
// the sum of a mamba2 block's and an attention block's (both read the same
// normed rows), over a prefill step and a decode step that carries both
// states; Mamba-2's gate variants change the result; config errors name the
// field and the operator.
#include "engine/layers/parallel.h"

#include <algorithm>
#include <any>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "engine/layers/attention.h"
#include "engine/layers/mamba2.h"
#include "engine/testing/layer_harness.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace seqboat {
namespace {

using ::testing::HasSubstr;
using Tensors = LayerHarness::Tensors;

constexpr int kD = 8;

const char* kConfig = R"({
  "mamba2": {"n_heads": 2, "head_dim": 4, "d_state": 4, "n_groups": 2,
             "d_conv": 4, "in_proj_bias": true, "out_proj_bias": true,
             "conv_bias": true, "dt_min": 0.0, "dt_max": null,
             "gated_norm_eps": 1e-5, "gate": "norm_before_gate"},
  "attention": {"n_heads": 2, "n_kv_heads": 1, "head_dim": 6,
                "qkv_bias": true, "o_bias": true, "pos": "rope_half",
                "rope_theta": 10000.0, "rope_scaling": null, "sinks": 2,
                "window": 16}})";

absl::StatusOr<ParallelConfig> Parse(const nlohmann::json& j) {
  ObjectReader r(j, "config.json", "blocks[0] (parallel_mamba2_attention)");
  std::vector<std::string> warnings;
  std::any params;
  RETURN_IF_ERROR(kParallelMamba2AttentionBlock.parse(r, &warnings, &params));
  return std::any_cast<ParallelConfig>(params);
}

// Tensors named as the parallel block names them ("b.mamba.*", "b.attn.*").
Tensors RandomWeights(const ParallelConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](std::vector<int64_t> shape, float scale, float offset) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    F32Tensor t{shape, std::vector<float>(n)};
    for (float& x : t.data) x = offset + scale * u(rng);
    return t;
  };
  const Mamba2Config& m = c.mamba2;
  const int64_t e = m.d_inner(), h = m.n_heads, cc = m.conv_channels(),
                w = m.in_proj_rows();
  const int64_t qd = c.attention.n_heads * c.attention.head_dim,
                kd = c.attention.n_kv_heads * c.attention.head_dim;
  Tensors t;
  t["b.norm.weight"] = fill({kD}, 0.2f, 1.0f);
  t["b.mamba.in_proj.weight"] = fill({w, kD}, 0.6f, 0.0f);
  t["b.mamba.in_proj.bias"] = fill({w}, 0.2f, 0.0f);
  t["b.mamba.conv.weight"] = fill({cc, m.d_conv}, 0.5f, 0.0f);
  t["b.mamba.conv.bias"] = fill({cc}, 0.3f, 0.0f);
  t["b.mamba.dt_bias"] = fill({h}, 1.0f, -3.5f);
  t["b.mamba.A"] = fill({h}, 1.75f, -2.25f);
  t["b.mamba.D"] = fill({h}, 0.5f, 1.0f);
  t["b.mamba.gated_norm.weight"] = fill({e}, 0.3f, 1.0f);
  t["b.mamba.out_proj.weight"] = fill({kD, e}, 0.4f, 0.0f);
  t["b.mamba.out_proj.bias"] = fill({kD}, 0.2f, 0.0f);
  for (auto [n, rows] :
       {std::pair{"q", qd}, std::pair{"k", kd}, std::pair{"v", kd}}) {
    t[std::string("b.attn.") + n + ".weight"] = fill({rows, kD}, 0.5f, 0.0f);
    t[std::string("b.attn.") + n + ".bias"] = fill({rows}, 0.2f, 0.0f);
  }
  t["b.attn.o.weight"] = fill({kD, qd}, 0.5f, 0.0f);
  t["b.attn.o.bias"] = fill({kD}, 0.2f, 0.0f);
  return t;
}

// The tensors whose names start with `from`, renamed to start with `to`,
// plus the norm.
Tensors Part(const Tensors& all, const std::string& from,
             const std::string& to) {
  Tensors out;
  out["b.norm.weight"] = all.at("b.norm.weight");
  for (const auto& [name, t] : all) {
    if (name.rfind(from, 0) == 0) out[to + name.substr(from.size())] = t;
  }
  return out;
}

std::vector<float> Rows(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n) * kD);
  for (float& v : x) v = g(rng);
  return x;
}

std::optional<NormConfig> RmsNorm() { return NormConfig{}; }

TEST(ParallelTest, UpdateIsTheSumOfItsTwoBlocksAcrossSteps) {
  auto c = Parse(nlohmann::json::parse(kConfig));
  ASSERT_TRUE(c.ok()) << c.status();
  const Tensors w = RandomWeights(*c, 7);
  LayerHarness both, mamba, attention;
  BlockConfig block;
  block.kind = &kParallelMamba2AttentionBlock;
  block.norm = RmsNorm();
  block.params = *c;
  ASSERT_TRUE(both.Init(
                      [&](const BlockSite& s) {
                        return kParallelMamba2AttentionBlock.build(block, s);
                      },
                      "blocks[0] (parallel_mamba2_attention)", kD, w, 2)
                  .ok());
  ASSERT_TRUE(mamba
                  .Init(
                      [&](const BlockSite& s) {
                        return MakeMamba2(c->mamba2, RmsNorm(), s);
                      },
                      "m", kD, Part(w, "b.mamba.", "b."), 2)
                  .ok());
  ASSERT_TRUE(attention
                  .Init(
                      [&](const BlockSite& s) {
                        return MakeAttention(c->attention, RmsNorm(), s);
                      },
                      "a", kD, Part(w, "b.attn.", "b.attn."), 2)
                  .ok());
  // A prefill of 5 rows in slot 0 and 3 in slot 1, then one decode row each.
  const std::vector<std::vector<Segment>> steps = {
      {Segment{0, 0, 5}, Segment{1, 5, 3}},
      {Segment{0, 0, 1}, Segment{1, 1, 1}}};
  uint32_t seed = 11;
  for (const auto& segs : steps) {
    int n = 0;
    for (const Segment& s : segs) n += s.len;
    const std::vector<float> x = Rows(n, seed++);
    const std::vector<float> got = both.Step(x, segs, kD);
    const std::vector<float> m = mamba.Step(x, segs, kD);
    const std::vector<float> a = attention.Step(x, segs, kD);
    double max_update = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = static_cast<double>(m[i]) + a[i] - x[i];
      EXPECT_NEAR(got[i], want, 1e-5) << i;
      max_update = std::max(max_update, std::abs(want - x[i]));
    }
    EXPECT_GT(max_update, 0.1);  // both parts moved the residual
  }
}

TEST(ParallelTest, GateVariantsDiffer) {
  std::vector<std::vector<float>> outs;
  for (const char* gate : {"norm_after_gate", "norm_before_gate", "silu"}) {
    nlohmann::json j = nlohmann::json::parse(kConfig);
    j["mamba2"]["gate"] = gate;
    auto c = Parse(j);
    ASSERT_TRUE(c.ok()) << c.status();
    Tensors w = RandomWeights(*c, 7);
    if (std::string(gate) == "silu") w.erase("b.mamba.gated_norm.weight");
    BlockConfig block;
    block.kind = &kParallelMamba2AttentionBlock;
    block.norm = RmsNorm();
    block.params = *c;
    LayerHarness h;
    ASSERT_TRUE(h.Init(
                     [&](const BlockSite& s) {
                       return kParallelMamba2AttentionBlock.build(block, s);
                     },
                     "p", kD, w, 1)
                    .ok())
        << gate;
    outs.push_back(h.Step(Rows(4, 3), {Segment{0, 0, 4}}, kD));
  }
  for (int i = 0; i < 3; ++i) {
    for (int j = i + 1; j < 3; ++j) {
      double diff = 0;
      for (size_t k = 0; k < outs[i].size(); ++k) {
        diff = std::max(diff,
                        static_cast<double>(std::abs(outs[i][k] - outs[j][k])));
      }
      EXPECT_GT(diff, 1e-3) << i << " vs " << j;
    }
  }
}

TEST(ParallelTest, ConfigErrorsNameTheField) {
  const nlohmann::json base = nlohmann::json::parse(kConfig);
  auto expect = [&](nlohmann::json j, const char* needle) {
    auto c = Parse(j);
    ASSERT_FALSE(c.ok());
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(needle));
  };
  nlohmann::json j = base;
  j.erase("attention");
  expect(j, "missing field \"attention\"");
  j = base;
  j["mamba2"]["norm"] = nullptr;
  expect(j, "field \"mamba2\" must not have a \"norm\"");
  j = base;
  j["mamba2"]["gate"] = "before";
  expect(j, "mamba2: field \"gate\"");
  j = base;
  j["attention"].erase("n_kv_heads");
  expect(j, "attention: missing field \"n_kv_heads\"");
  j = base;
  j["mamba2"] = 3;
  expect(j, "field \"mamba2\" must be an object");
}

}  // namespace
}  // namespace seqboat
