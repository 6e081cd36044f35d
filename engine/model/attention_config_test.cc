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
  EXPECT_TRUE(c->warnings.empty());
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
      {"rope_scaling", json{{"type", "linear"}, {"factor", 2.0}},
       "RoPE scaling is not supported"},
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
