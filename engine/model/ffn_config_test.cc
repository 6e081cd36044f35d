// config.json parsing of the mlp, moe and s4d block kinds: accepted fields,
// defaults, and errors that name the block and the field.
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/layers/mlp.h"
#include "engine/layers/moe.h"
#include "engine/layers/s4d.h"
#include "engine/model/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json Model(json block) {
  return {{"format", "seqboat-canonical"},
          {"version", 1},
          {"vocab_size", 264},
          {"d_model", 32},
          {"tie_embeddings", true},
          {"final_norm", {{"type", "rmsnorm"}, {"eps", 1e-5}}},
          {"blocks", json::array({block})}};
}

json Mlp() {
  return {{"kind", "mlp"}, {"norm", {{"type", "rmsnorm"}, {"eps", 1e-5}}},
          {"d_ff", 64},    {"act", "silu"},
          {"gated", true}, {"bias", false}};
}

json Moe() {
  return {{"kind", "moe"},
          {"norm", {{"type", "rmsnorm_t5"}, {"eps", 1e-6}}},
          {"routing", "top1_softmax"},
          {"n_experts", 8},
          {"d_ff", 48},
          {"act", "relu"},
          {"gated", false},
          {"router_bias", false},
          {"expert_bias", false},
          {"capacity", nullptr}};
}

json S4d() {
  return {{"kind", "s4d"},
          {"norm", {{"type", "layernorm"}, {"eps", 1e-5}}},
          {"channels", 1},
          {"modes", 32},
          {"state_layout", "conj_half"},
          {"output", "none"}};
}

absl::StatusOr<ModelConfig> Parse(const json& block) {
  return ParseModelConfig(Model(block).dump());
}

// The error mentions the block and every word in `words`.
void ExpectError(const json& block, std::initializer_list<const char*> words) {
  auto c = Parse(block);
  ASSERT_FALSE(c.ok()) << block.dump();
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(c.status().message());
  EXPECT_THAT(msg, HasSubstr(absl::StrCat(
                       "blocks[0] (", block["kind"].get<std::string>(), ")")));
  for (const char* w : words) EXPECT_THAT(msg, HasSubstr(w)) << msg;
}

json With(json block, const char* key, json value) {
  block[key] = std::move(value);
  return block;
}

TEST(FfnConfigTest, ValidBlocksParseWithDefaults) {
  auto mlp = Parse(Mlp());
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  const MlpConfig* m = mlp->blocks[0].As<MlpConfig>();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->d_ff, 64);
  EXPECT_EQ(m->act, Activation::kSilu);
  EXPECT_TRUE(m->gated);
  auto relu2 = Parse(With(With(Mlp(), "act", "relu2"), "gated", false));
  ASSERT_TRUE(relu2.ok()) << relu2.status();
  EXPECT_EQ(relu2->blocks[0].As<MlpConfig>()->act, Activation::kRelu2);

  auto moe = Parse(Moe());
  ASSERT_TRUE(moe.ok()) << moe.status();
  const MoeConfig* e = moe->blocks[0].As<MoeConfig>();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->routing, MoeRouting::kSoftmaxTopK);
  EXPECT_EQ(e->n_experts, 8);
  EXPECT_EQ(e->top_k, 1);
  EXPECT_FALSE(e->renormalize);
  EXPECT_TRUE(moe->warnings.empty());

  json top2 = With(With(Moe(), "top_k", 2), "renormalize", true);
  auto moe2 = Parse(top2);
  ASSERT_TRUE(moe2.ok()) << moe2.status();
  EXPECT_EQ(moe2->blocks[0].As<MoeConfig>()->top_k, 2);
  EXPECT_TRUE(moe2->blocks[0].As<MoeConfig>()->renormalize);

  json relu = With(With(Moe(), "routing", "relu_dynamic"), "router_hidden", 16);
  auto rem = Parse(relu);
  ASSERT_TRUE(rem.ok()) << rem.status();
  EXPECT_EQ(rem->blocks[0].As<MoeConfig>()->routing, MoeRouting::kReluDynamic);
  EXPECT_EQ(rem->blocks[0].As<MoeConfig>()->router_hidden, 16);

  auto s4d =
      Parse(With(With(S4d(), "state_layout", "full"), "output", "gelu_glu"));
  ASSERT_TRUE(s4d.ok()) << s4d.status();
  const S4dConfig* s = s4d->blocks[0].As<S4dConfig>();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->modes, 32);
  EXPECT_FALSE(s->conj_half);
  EXPECT_TRUE(s->gelu_glu);
}

TEST(FfnConfigTest, BadMlpFieldsAreNamed) {
  ExpectError(With(Mlp(), "act", "tanh"), {"\"act\"", "gelu_tanh"});
  ExpectError(With(Mlp(), "d_ff", 0), {"\"d_ff\"", "positive integer"});
  ExpectError(With(Mlp(), "d_ff", -4), {"\"d_ff\""});
  json no_gated = Mlp();
  no_gated.erase("gated");
  ExpectError(no_gated, {"missing field \"gated\""});
}

TEST(FfnConfigTest, BadMoeFieldsAreNamed) {
  ExpectError(With(Moe(), "routing", "top2_sinkhorn"),
              {"\"routing\"", "relu_dynamic"});
  ExpectError(With(Moe(), "act", "swish"), {"\"act\""});
  ExpectError(With(Moe(), "top_k", 9), {"\"top_k\"", "n_experts = 8"});
  ExpectError(With(Moe(), "top_k", 0), {"\"top_k\""});
  ExpectError(With(Moe(), "d_ff", 0), {"\"d_ff\""});
  ExpectError(With(Moe(), "n_experts", 0), {"\"n_experts\""});
  // The device grouping's bound (moe_params.h kMoeMaxExperts).
  ExpectError(With(Moe(), "n_experts", 4097),
              {"\"n_experts\"", "at most 4096"});
  ExpectError(With(Moe(), "capacity", 64), {"\"capacity\"", "dropless"});
  ExpectError(With(Moe(), "router_hidden", 4), {"\"router_hidden\""});
  json relu = With(Moe(), "routing", "relu_dynamic");
  ExpectError(relu, {"missing field \"router_hidden\""});
  ExpectError(With(With(relu, "router_hidden", 4), "top_k", 2),
              {"\"top_k\"", "top1_softmax"});
}

json Nemotron() {
  json b = With(With(Moe(), "routing", "sigmoid_group_topk"), "top_k", 3);
  b["n_group"] = 4;
  b["topk_group"] = 2;
  b["renormalize"] = true;
  b["routed_scale"] = 2.5;
  b["latent"] = 24;
  b["act"] = "relu2";
  b["shared"] = {{"d_ff", 40}, {"gate", nullptr}};
  return b;
}

TEST(FfnConfigTest, SigmoidGroupRoutingParses) {
  auto c = Parse(Nemotron());
  ASSERT_TRUE(c.ok()) << c.status();
  const MoeConfig* e = c->blocks[0].As<MoeConfig>();
  EXPECT_EQ(e->routing, MoeRouting::kSigmoidGroupTopK);
  EXPECT_EQ(e->top_k, 3);
  EXPECT_EQ(e->n_group, 4);
  EXPECT_EQ(e->topk_group, 2);
  EXPECT_DOUBLE_EQ(e->routed_scale, 2.5);
  EXPECT_EQ(e->latent, 24);
  EXPECT_EQ(e->shared_d_ff, 40);
  EXPECT_TRUE(c->warnings.empty());
  // A moe block takes a residual_scale (Granite-4.0-H's experts).
  auto granite = Parse(With(With(Moe(), "top_k", 2), "residual_scale", 0.6));
  ASSERT_TRUE(granite.ok()) << granite.status();
  EXPECT_DOUBLE_EQ(granite->blocks[0].residual_scale, 0.6);
}

TEST(FfnConfigTest, BadGroupRoutingFieldsAreNamed) {
  ExpectError(With(Moe(), "n_group", 2), {"\"n_group\"", "sigmoid_group_topk"});
  ExpectError(With(Moe(), "topk_group", 1),
              {"\"topk_group\"", "sigmoid_group_topk"});
  ExpectError(With(Nemotron(), "n_group", 3),
              {"\"n_group\"", "3 must divide n_experts 8"});
  ExpectError(With(Nemotron(), "topk_group", 5),
              {"\"topk_group\"", "5 must be in [1, n_group = 4]"});
  ExpectError(With(Nemotron(), "topk_group", 1),
              {"\"top_k\"", "3 exceeds", "topk_group 1"});
  ExpectError(With(Nemotron(), "routed_scale", 0), {"\"routed_scale\""});
  ExpectError(With(Nemotron(), "latent", 0), {"\"latent\""});
}

TEST(FfnConfigTest, BadS4dFieldsAreNamed) {
  ExpectError(With(S4d(), "state_layout", "half"), {"\"state_layout\""});
  ExpectError(With(S4d(), "output", "glu"), {"\"output\"", "gelu_glu"});
  ExpectError(With(S4d(), "channels", 2), {"\"channels\""});
  ExpectError(With(S4d(), "modes", 0), {"\"modes\""});
}

}  // namespace
}  // namespace seqboat
