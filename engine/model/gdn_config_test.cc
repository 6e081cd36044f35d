#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/gdn.h"
#include "engine/model/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Config(const std::string& block_fields) {
  return absl::StrCat(
      R"({"format": "seqboat-canonical", "version": 1, "vocab_size": 16,
          "d_model": 8, "tie_embeddings": true,
          "final_norm": {"type": "rmsnorm", "eps": 1e-6},
          "blocks": [{"kind": "gdn",
                      "norm": {"type": "rmsnorm", "eps": 1e-6}, )",
      block_fields, "}]}");
}

constexpr char kFields[] =
    R"("n_k_heads": 2, "n_v_heads": 6, "head_k_dim": 4, "head_v_dim": 5,
       "d_conv": 4, "gated_norm_eps": 1e-6)";

TEST(GdnConfigTest, ParsesTheCanonicalFields) {
  auto cfg = ParseModelConfig(Config(kFields));
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_TRUE(cfg->warnings.empty());
  const GdnConfig* c = cfg->blocks[0].As<GdnConfig>();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->key_dim(), 8);
  EXPECT_EQ(c->value_dim(), 30);
  EXPECT_EQ(c->conv_channels(), 2 * 8 + 30);
  // [q ; k ; v | z | b | a]
  EXPECT_EQ(c->proj_rows(), 46 + 30 + 2 * 6);
  EXPECT_DOUBLE_EQ(c->gated_norm_eps, 1e-6);
}

TEST(GdnConfigTest, BadFieldsAreNamed) {
  auto with = [&](const std::string& key, const std::string& value) {
    nlohmann::json j = nlohmann::json::parse(absl::StrCat("{", kFields, "}"));
    if (value.empty()) {
      j.erase(key);
    } else {
      j[key] = nlohmann::json::parse(value);
    }
    std::string fields = j.dump();
    return fields.substr(1, fields.size() - 2);
  };
  const std::pair<std::string, std::string> cases[] = {
      {with("n_v_heads", "5"),
       "field \"n_v_heads\" must be a multiple of n_k_heads 2"},
      {with("head_k_dim", "0"),
       "field \"head_k_dim\" must be a positive integer"},
      {with("d_conv", ""), "missing field \"d_conv\""},
      {with("gated_norm_eps", "0"), "field \"gated_norm_eps\""},
      {with("head_v_dim", "2048"), "field \"head_v_dim\" must be <= 1024"},
      {with("head_k_dim", "1000000000"),
       "field \"head_k_dim\" times its heads"},
  };
  for (const auto& [fields, want] : cases) {
    auto cfg = ParseModelConfig(Config(fields));
    ASSERT_FALSE(cfg.ok()) << fields;
    EXPECT_THAT(std::string(cfg.status().message()),
                AllOf(HasSubstr("blocks[0] (gdn)"), HasSubstr(want)));
  }
}

}  // namespace
}  // namespace seqboat
