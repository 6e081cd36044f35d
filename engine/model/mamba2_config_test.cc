#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/mamba2.h"
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
          "final_norm": {"type": "rmsnorm", "eps": 1e-5},
          "blocks": [{"kind": "mamba2",
                      "norm": {"type": "rmsnorm", "eps": 1e-5}, )",
      block_fields, "}]}");
}

constexpr char kFields[] =
    R"("n_heads": 6, "head_dim": 4, "d_state": 9, "n_groups": 2,
       "d_conv": 4, "in_proj_bias": false, "out_proj_bias": true,
       "conv_bias": true, "gated_norm_eps": 1e-6)";

TEST(Mamba2ConfigTest, ParsesTheCanonicalFields) {
  auto cfg = ParseModelConfig(
      Config(absl::StrCat(kFields, R"(, "dt_min": 0.0, "dt_max": null)")));
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_TRUE(cfg->warnings.empty());
  const Mamba2Config* c = cfg->blocks[0].As<Mamba2Config>();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->d_inner(), 24);
  EXPECT_EQ(c->conv_channels(), 24 + 2 * 2 * 9);
  EXPECT_EQ(c->in_proj_rows(), 24 + 60 + 6);
  EXPECT_FALSE(c->in_proj_bias);
  EXPECT_TRUE(c->out_proj_bias);
  EXPECT_DOUBLE_EQ(c->gated_norm_eps, 1e-6);
  EXPECT_FALSE(c->dt_max.has_value());
  auto clamped = ParseModelConfig(
      Config(absl::StrCat(kFields, R"(, "dt_min": 0.001, "dt_max": 0.1)")));
  ASSERT_TRUE(clamped.ok()) << clamped.status();
  EXPECT_DOUBLE_EQ(clamped->blocks[0].As<Mamba2Config>()->dt_min, 0.001);
  EXPECT_DOUBLE_EQ(*clamped->blocks[0].As<Mamba2Config>()->dt_max, 0.1);
}

TEST(Mamba2ConfigTest, BadFieldsAreNamed) {
  const std::string limits = R"(, "dt_min": 0.0, "dt_max": null)";
  auto with = [&](const std::string& key, const std::string& value) {
    nlohmann::json j =
        nlohmann::json::parse(absl::StrCat("{", kFields, limits, "}"));
    if (value.empty()) {
      j.erase(key);
    } else {
      j[key] = nlohmann::json::parse(value);
    }
    std::string fields = j.dump();
    return fields.substr(1, fields.size() - 2);
  };
  const std::pair<std::string, std::string> cases[] = {
      {with("n_groups", "4"), "field \"n_groups\" must divide n_heads 6"},
      {with("head_dim", "0"), "field \"head_dim\" must be a positive integer"},
      {with("d_state", ""), "missing field \"d_state\""},
      {with("dt_min", "-0.1"), "field \"dt_min\" must be a finite number >= 0"},
      {with("dt_max", ""), "missing field \"dt_max\""},
      {with("dt_max", "\"inf\""), "field \"dt_max\" must be null (unbounded)"},
      {with("gated_norm_eps", "0"), "field \"gated_norm_eps\""},
      {with("conv_bias", "1"), "field \"conv_bias\" must be true or false"},
      {with("head_dim", "1000000000"), "field \"head_dim\" times n_heads"},
      {with("gate", "\"before\""), "field \"gate\" must be one of"},
      {with("gate", "null"), "field \"gate\""},
  };
  for (const auto& [fields, want] : cases) {
    auto cfg = ParseModelConfig(Config(fields));
    ASSERT_FALSE(cfg.ok()) << fields;
    EXPECT_THAT(std::string(cfg.status().message()),
                AllOf(HasSubstr("blocks[0] (mamba2)"), HasSubstr(want)));
  }
}

// "gate" is optional: configs written before it keep the gate-then-norm
// order of mamba_ssm's Mamba-2.
TEST(Mamba2ConfigTest, GateSpellings) {
  const std::string limits = R"(, "dt_min": 0.0, "dt_max": null)";
  const std::pair<const char*, Mamba2Config::Gate> cases[] = {
      {"", Mamba2Config::Gate::kNormAfterGate},
      {R"(, "gate": "norm_after_gate")", Mamba2Config::Gate::kNormAfterGate},
      {R"(, "gate": "norm_before_gate")", Mamba2Config::Gate::kNormBeforeGate},
      {R"(, "gate": "silu")", Mamba2Config::Gate::kSilu},
  };
  for (const auto& [field, want] : cases) {
    auto cfg = ParseModelConfig(Config(absl::StrCat(kFields, limits, field)));
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    EXPECT_TRUE(cfg->warnings.empty()) << field;
    EXPECT_EQ(cfg->blocks[0].As<Mamba2Config>()->gate, want) << field;
  }
}

}  // namespace
}  // namespace seqboat
