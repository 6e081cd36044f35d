// config.json parsing of the `attention` block kind (MODELS.md §6.1).
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "engine/layers/attention.h"
#include "engine/model/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

json Base() {
  return json::parse(R"({
    "format": "seqboat-canonical", "version": 1,
    "vocab_size": 264, "d_model": 32, "tie_embeddings": true,
    "final_norm": {"type": "rmsnorm", "eps": 1e-5},
    "blocks": [
      {"kind": "attention", "norm": {"type": "rmsnorm", "eps": 1e-5},
       "n_heads": 8, "n_kv_heads": 2, "head_dim": 4, "qkv_bias": false,
       "o_bias": true, "pos": "rope_half", "rope_theta": 500000.0,
       "rope_scaling": null, "sinks": 4, "window": 2000, "rel_bias": null}
    ]
  })");
}

// The error message after `mutate` of block 0, "" if it parsed.
std::string ErrorAfter(const std::function<void(json&)>& mutate) {
  json j = Base();
  mutate(j["blocks"][0]);
  auto config = ParseModelConfig(j.dump());
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

TEST(AttentionConfigTest, ParsesEveryField) {
  auto c = ParseModelConfig(Base().dump());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->blocks.size(), 1u);
  EXPECT_EQ(c->blocks[0].kind, &kAttentionBlock);
  const AttentionConfig* a = c->blocks[0].As<AttentionConfig>();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->n_heads, 8);
  EXPECT_EQ(a->n_kv_heads, 2);
  EXPECT_EQ(a->head_dim, 4);
  EXPECT_FALSE(a->qkv_bias);
  EXPECT_TRUE(a->o_bias);
  EXPECT_EQ(a->pos, AttentionPos::kRopeHalf);
  EXPECT_DOUBLE_EQ(a->rope_theta, 500000.0);
  EXPECT_EQ(a->sinks, 4);
  EXPECT_EQ(a->window, 2000);
  EXPECT_EQ(a->rotary_dim, 4);  // absent: every channel
  EXPECT_TRUE(c->warnings.empty());
}

TEST(AttentionConfigTest, SoftmaxScaleAndResidualScale) {
  auto c = ParseModelConfig(Base().dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->blocks[0].As<AttentionConfig>()->scale, 0.0);  // 1/sqrt(d_h)
  EXPECT_EQ(c->blocks[0].residual_scale, 1.0);
  json j = Base();
  j["blocks"][0]["scale"] = 0.015625;
  j["blocks"][0]["residual_scale"] = 0.22;
  c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->blocks[0].As<AttentionConfig>()->scale, 0.015625);
  EXPECT_EQ(c->blocks[0].residual_scale, 0.22);
  EXPECT_TRUE(c->warnings.empty());
  for (const json& bad : {json(0), json(-1.0), json("0.1")}) {
    EXPECT_THAT(ErrorAfter([&](json& b) { b["scale"] = bad; }),
                HasSubstr("field \"scale\" must be a positive"));
    EXPECT_THAT(ErrorAfter([&](json& b) { b["residual_scale"] = bad; }),
                HasSubstr("field \"residual_scale\" must be a positive"));
  }
}

TEST(AttentionConfigTest, RotaryDimRotatesPartOfEachHead) {
  json j = Base();
  j["blocks"][0]["head_dim"] = 16;
  j["blocks"][0]["rotary_dim"] = 8;
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->blocks[0].As<AttentionConfig>()->rotary_dim, 8);
  j["blocks"][0]["rotary_dim"] = nullptr;
  c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->blocks[0].As<AttentionConfig>()->rotary_dim, 16);

  for (const json& bad : {json(0), json(3), json(18), json(-2), json(8.0),
                          json("8"), json(1ull << 63)}) {
    EXPECT_THAT(ErrorAfter([&](json& b) {
                  b["head_dim"] = 16;
                  b["rotary_dim"] = bad;
                }),
                AllOf(HasSubstr("field \"rotary_dim\""),
                      HasSubstr("an even integer in [2, head_dim = 16]")))
        << bad.dump();
  }
  EXPECT_THAT(
      ErrorAfter([](json& b) {
        b["pos"] = "none";
        b["rope_scaling"] = nullptr;
        b["rotary_dim"] = 2;
      }),
      AllOf(HasSubstr("field \"rotary_dim\""), HasSubstr("there is no RoPE")));
}

TEST(AttentionConfigTest, SlidingWindowWithoutPositionsOrSinks) {
  EXPECT_EQ(ErrorAfter([](json& b) {
              b["pos"] = "none";
              b.erase("rope_theta");
              b.erase("rope_scaling");
              b.erase("rel_bias");
              b["sinks"] = 0;
              b["window"] = 511;
              b["head_dim"] = 5;  // odd is fine without RoPE
            }),
            "");
  // Sinks alone (no recent window) keep a non-empty cache.
  EXPECT_EQ(ErrorAfter([](json& b) {
              b["sinks"] = 4;
              b["window"] = 0;
            }),
            "");
}

struct BadCase {
  const char* field;
  json value;
  const char* says;
};

TEST(AttentionConfigTest, BadFieldsAreNamed) {
  const BadCase cases[] = {
      {"n_heads", 0, "a positive integer"},
      {"n_kv_heads", 3, "a divisor of n_heads = 8"},
      {"n_kv_heads", -2, "a positive integer"},
      {"head_dim", 3, "even for pos \"rope_half\""},
      {"head_dim", 1u << 30, "at most"},
      {"qkv_bias", "yes", "true or false"},
      {"pos", "rope_interleaved", "not supported for attention blocks"},
      {"pos", "t5_bucket", "not supported for attention blocks"},
      {"pos", "alibi", "\"rope_half\" or \"none\""},
      {"rope_theta", 0, "a positive finite number"},
      {"rope_scaling", "linear", "null or a rope_scaling object"},
      {"rel_bias", json{{"buckets", 32}}, "relative-position bias"},
      {"sinks", -1, "an integer in [0, "},
      {"sinks", 1.5, "an integer in [0, "},
      {"window", "2000", "an integer in [0, "},
      {"window", 1ll << 40, "an integer in [0, "},
  };
  for (const BadCase& c : cases) {
    const std::string error =
        ErrorAfter([&](json& b) { b[c.field] = c.value; });
    EXPECT_THAT(error, AllOf(HasSubstr("blocks[0] (attention)"),
                             HasSubstr(std::string("\"") + c.field + "\""),
                             HasSubstr(c.says)))
        << c.field << " = " << c.value.dump();
  }
}

TEST(AttentionConfigTest, ParsesEveryRopeScalingType) {
  const json cases[] = {
      {{"type", "linear"}, {"factor", 4}},
      {{"type", "dynamic"}, {"factor", 2.0}, {"max_position_embeddings", 4096}},
      {{"type", "llama3"},
       {"factor", 8.0},
       {"low_freq_factor", 1.0},
       {"high_freq_factor", 4.0},
       {"original_max_position_embeddings", 8192}},
      {{"type", "yarn"},
       {"factor", 4.0},
       {"original_max_position_embeddings", 32768},
       {"beta_fast", 32.0},
       {"beta_slow", 1.0},
       {"attention_factor", 1.25}},
  };
  const RopeScalingType types[] = {
      RopeScalingType::kLinear, RopeScalingType::kDynamic,
      RopeScalingType::kLlama3, RopeScalingType::kYarn};
  for (int i = 0; i < 4; ++i) {
    json j = Base();
    j["blocks"][0]["rope_scaling"] = cases[i];
    auto c = ParseModelConfig(j.dump());
    ASSERT_TRUE(c.ok()) << c.status();
    const RopeScaling& s = c->blocks[0].As<AttentionConfig>()->rope_scaling;
    EXPECT_EQ(s.type, types[i]);
    EXPECT_DOUBLE_EQ(s.factor, cases[i]["factor"].get<double>());
  }
  json j = Base();
  j["blocks"][0]["rope_scaling"] = cases[3];
  const RopeScaling s =
      ParseModelConfig(j.dump())->blocks[0].As<AttentionConfig>()->rope_scaling;
  EXPECT_EQ(s.original_max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(s.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(s.beta_slow, 1.0);
  EXPECT_DOUBLE_EQ(s.attention_factor, 1.25);
}

struct BadScaling {
  json value;
  const char* says;
};

TEST(AttentionConfigTest, BadRopeScalingIsNamed) {
  const json llama3 = {{"type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  const json yarn = {{"type", "yarn"},
                     {"factor", 4.0},
                     {"original_max_position_embeddings", 32768},
                     {"beta_fast", 32.0},
                     {"beta_slow", 1.0},
                     {"attention_factor", 1.25}};
  auto with = [](json base, const char* key, json value) {
    base[key] = std::move(value);
    return base;
  };
  auto without = [](json base, const char* key) {
    base.erase(key);
    return base;
  };
  const BadScaling cases[] = {
      {json{{"type", "longrope"}, {"factor", 2.0}},
       "rope_scaling: field \"type\" must be one of \"linear\", "
       "\"dynamic\", \"llama3\", \"yarn\", got \"longrope\""},
      {json{{"factor", 2.0}}, "rope_scaling: missing field \"type\""},
      {json{{"type", "linear"}}, "rope_scaling: missing field \"factor\""},
      {json{{"type", "linear"}, {"factor", 0.5}},
       "rope_scaling: field \"factor\" must be a finite number >= 1, got 0.5"},
      {json{{"type", "linear"}, {"factor", "2"}},
       "field \"factor\" must be a finite number >= 1"},
      {json{{"type", "linear"}, {"factor", 2.0}, {"rope_type", "linear"}},
       "rope_scaling: field \"rope_type\" is not used by type \"linear\""},
      {json{{"type", "dynamic"}, {"factor", 2.0}},
       "rope_scaling: missing field \"max_position_embeddings\""},
      {without(llama3, "low_freq_factor"),
       "rope_scaling: missing field \"low_freq_factor\""},
      {with(llama3, "high_freq_factor", 1.0),
       "field \"high_freq_factor\" must be greater than low_freq_factor"},
      {with(llama3, "original_max_position_embeddings", 0),
       "field \"original_max_position_embeddings\" must be"},
      {with(yarn, "mscale", 0.7),
       "field \"mscale\" is not used by type \"yarn\""},
      {without(yarn, "attention_factor"), "missing field \"attention_factor\""},
      {with(yarn, "beta_slow", 64.0),
       "field \"beta_slow\" must be at most beta_fast"},
      {with(yarn, "beta_fast", -1), "field \"beta_fast\" must be"},
  };
  for (const BadScaling& c : cases) {
    const std::string error =
        ErrorAfter([&](json& b) { b["rope_scaling"] = c.value; });
    EXPECT_THAT(error,
                AllOf(HasSubstr("blocks[0] (attention)"), HasSubstr(c.says)))
        << c.value.dump();
  }
}

TEST(AttentionConfigTest, RopeScalingNeedsRope) {
  EXPECT_THAT(ErrorAfter([](json& b) {
                b["pos"] = "none";
                b["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
              }),
              AllOf(HasSubstr("field \"rope_scaling\""),
                    HasSubstr("there is no RoPE to scale")));
  EXPECT_THAT(
      ErrorAfter([](json& b) {
        b["rope_theta"] = 1.0;
        b["rope_scaling"] = {{"type", "yarn"},
                             {"factor", 4.0},
                             {"original_max_position_embeddings", 64},
                             {"beta_fast", 32.0},
                             {"beta_slow", 1.0},
                             {"attention_factor", 1.1}};
      }),
      AllOf(HasSubstr("field \"rope_theta\""), HasSubstr("greater than 1")));
}

// Cache positions reach sinks + window; dynamic NTK must never engage there.
TEST(AttentionConfigTest, DynamicScalingBoundsTheCache) {
  auto dynamic = [](int64_t window) {
    return [window](json& b) {
      b["rope_scaling"] = {{"type", "dynamic"},
                           {"factor", 2.0},
                           {"max_position_embeddings", 2048}};
      b["window"] = window;
    };
  };
  EXPECT_EQ(ErrorAfter(dynamic(2043)), "");
  EXPECT_THAT(ErrorAfter(dynamic(2044)),
              AllOf(HasSubstr("field \"window\""), HasSubstr("= 2043"),
                    HasSubstr("dynamic")));
}

TEST(AttentionConfigTest, EmptyCacheIsRejected) {
  EXPECT_THAT(ErrorAfter([](json& b) {
                b["sinks"] = 0;
                b["window"] = 0;
              }),
              AllOf(HasSubstr("field \"window\""), HasSubstr("no token")));
}

TEST(AttentionConfigTest, HugeCacheIsRejected) {
  EXPECT_THAT(ErrorAfter([](json& b) {
                b["n_kv_heads"] = 8;
                b["head_dim"] = 1024;
                b["window"] = 1 << 30;
              }),
              AllOf(HasSubstr("field \"window\""), HasSubstr("2^36")));
}

TEST(AttentionConfigTest, MissingRequiredFields) {
  for (const char* key : {"n_heads", "n_kv_heads", "head_dim", "qkv_bias",
                          "o_bias", "pos", "rope_theta", "sinks", "window"}) {
    EXPECT_THAT(ErrorAfter([&](json& b) { b.erase(key); }),
                HasSubstr(std::string("missing field \"") + key + "\""))
        << key;
  }
}

}  // namespace
}  // namespace seqboat
