#include "engine/model/config.h"

#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/layers/block_registry.h"
#include "engine/layers/mamba1.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// The bundled tests/data/tiny_mamba/config.json, verbatim.
constexpr char kTinyMamba[] = R"({
  "format": "seqboat-canonical",
  "version": 1,
  "name": "tiny-mamba",
  "vocab_size": 264,
  "d_model": 32,
  "embed": {"scale": 1.0, "padding_idx": null},
  "tie_embeddings": true,
  "logit_scale": 1.0,
  "final_norm": {"type": "rmsnorm", "eps": 1e-05, "affine": true},
  "residual_dtype": "float32",
  "eos_token_id": 256,
  "bos_token_id": null,
  "blocks": [
    {"kind": "mamba1", "norm": {"type": "rmsnorm", "eps": 1e-05},
     "d_inner": 64, "d_state": 8, "d_conv": 4, "dt_rank": 4,
     "in_proj_bias": false, "out_proj_bias": false, "conv_bias": true},
    {"kind": "mamba1", "norm": {"type": "rmsnorm", "eps": 1e-05},
     "d_inner": 64, "d_state": 8, "d_conv": 4, "dt_rank": 4,
     "in_proj_bias": false, "out_proj_bias": false, "conv_bias": true}
  ]
})";

json Base() { return json::parse(kTinyMamba); }

// The error message for the tiny config after `mutate`, "" if it parsed.
std::string ErrorAfter(const std::function<void(json&)>& mutate) {
  json j = Base();
  mutate(j);
  auto config = ParseModelConfig(j.dump());
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

TEST(ModelConfigTest, ParsesTinyMamba) {
  auto config_or = ParseModelConfig(kTinyMamba);
  ASSERT_TRUE(config_or.ok()) << config_or.status();
  const ModelConfig& c = *config_or;
  EXPECT_EQ(c.name, "tiny-mamba");
  EXPECT_EQ(c.vocab_size, 264);
  EXPECT_EQ(c.d_model, 32);
  EXPECT_EQ(c.embed.scale, 1.0);
  EXPECT_FALSE(c.embed.padding_idx.has_value());
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.logit_scale, 1.0);
  ASSERT_TRUE(c.final_norm.has_value());
  EXPECT_EQ(c.final_norm->type, NormType::kRmsNorm);
  EXPECT_DOUBLE_EQ(c.final_norm->eps, 1e-5);
  EXPECT_TRUE(c.final_norm->affine);
  EXPECT_EQ(c.residual_dtype, "float32");
  EXPECT_EQ(c.eos_token_id, 256);
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_TRUE(c.warnings.empty());
  ASSERT_EQ(c.blocks.size(), 2u);
  for (const BlockConfig& b : c.blocks) {
    EXPECT_EQ(b.kind, &kMamba1Block);
    ASSERT_TRUE(b.norm.has_value());
    EXPECT_EQ(b.norm->type, NormType::kRmsNorm);
    EXPECT_TRUE(b.norm->affine);  // defaulted
    const Mamba1Config* m = b.As<Mamba1Config>();
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->d_inner, 64);
    EXPECT_EQ(m->d_state, 8);
    EXPECT_EQ(m->d_conv, 4);
    EXPECT_EQ(m->dt_rank, 4);
    EXPECT_FALSE(m->in_proj_bias);
    EXPECT_FALSE(m->out_proj_bias);
    EXPECT_TRUE(m->conv_bias);
  }
}

TEST(ModelConfigTest, OptionalFieldsTakeDefaults) {
  json j = Base();
  for (const char* key : {"name", "embed", "logit_scale", "residual_dtype",
                          "eos_token_id", "bos_token_id"}) {
    j.erase(key);
  }
  j["final_norm"] = nullptr;
  j["blocks"][0]["norm"] = nullptr;
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "");
  EXPECT_EQ(c->embed.scale, 1.0);
  EXPECT_EQ(c->logit_scale, 1.0);
  EXPECT_EQ(c->residual_dtype, "float32");
  EXPECT_FALSE(c->eos_token_id.has_value());
  EXPECT_FALSE(c->final_norm.has_value());
  EXPECT_FALSE(c->blocks[0].norm.has_value());
  EXPECT_TRUE(c->blocks[1].norm.has_value());
}

TEST(ModelConfigTest, ReadsNonDefaultValues) {
  json j = Base();
  j["embed"] = {{"scale", 5.5}, {"padding_idx", 3}};
  j["logit_scale"] = 0.5;
  j["tie_embeddings"] = false;
  j["bos_token_id"] = 0;
  j["final_norm"] = {{"type", "layernorm"}, {"eps", 1e-6}, {"affine", false}};
  j["blocks"][1]["norm"] = {{"type", "rmsnorm_t5"}, {"eps", 1e-6}};
  j["blocks"][0]["norm"]["type"] = "scalenorm";
  j["blocks"][1]["in_proj_bias"] = true;
  j["blocks"][1]["conv_bias"] = false;
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->embed.scale, 5.5);
  EXPECT_EQ(c->embed.padding_idx, 3);
  EXPECT_EQ(c->logit_scale, 0.5);
  EXPECT_FALSE(c->tie_embeddings);
  EXPECT_EQ(c->bos_token_id, 0);
  EXPECT_EQ(c->final_norm->type, NormType::kLayerNorm);
  EXPECT_FALSE(c->final_norm->affine);
  EXPECT_EQ(c->blocks[0].norm->type, NormType::kScaleNorm);
  EXPECT_EQ(c->blocks[1].norm->type, NormType::kRmsNormT5);
  EXPECT_TRUE(c->blocks[1].As<Mamba1Config>()->in_proj_bias);
  EXPECT_FALSE(c->blocks[1].As<Mamba1Config>()->conv_bias);
}

TEST(ModelConfigTest, UnknownFieldsBecomeWarnings) {
  json j = Base();
  j["architectures"] = {"x"};
  j["embed"]["extra"] = 1;
  j["final_norm"]["bias"] = true;
  j["blocks"][1]["expand"] = 2;
  j["blocks"][1]["norm"]["center"] = false;
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->warnings, UnorderedElementsAre(
                               "unknown field \"architectures\"",
                               "embed: unknown field \"extra\"",
                               "final_norm: unknown field \"bias\"",
                               "blocks[1] (mamba1): unknown field \"expand\"",
                               "blocks[1] (mamba1): norm: unknown field "
                               "\"center\""));
}

TEST(ModelConfigTest, ErrorNamesTheFieldPath) {
  EXPECT_EQ(ErrorAfter([](json& j) { j["blocks"][1]["d_state"] = -1; }),
            "config.json: blocks[1] (mamba1): field \"d_state\" must be a "
            "positive integer, got -1");
  EXPECT_EQ(ErrorAfter([](json& j) { j["vocab_size"] = 0; }),
            "config.json: field \"vocab_size\" must be a positive integer, "
            "got 0");
  EXPECT_EQ(ErrorAfter([](json& j) { j["blocks"][0]["norm"]["eps"] = 0; }),
            "config.json: blocks[0] (mamba1): norm: field \"eps\" must be a "
            "positive finite number, got 0");
}

// The error for a field of the wrong type quotes its value; quoting a value
// nested a million levels deep used to exhaust the stack.
TEST(ModelConfigTest, DeeplyNestedValueIsRefused) {
  const std::string deep =
      std::string(1000000, '[') + std::string(1000000, ']');
  auto config = ParseModelConfig("{\"format\": " + deep + "}");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "config.json: arrays and objects nest deeper than 64 levels");
}

TEST(ModelConfigTest, TopLevelErrors) {
  struct Case {
    std::function<void(json&)> mutate;
    std::string expected;
  };
  const Case cases[] = {
      {[](json& j) { j["format"] = "hf"; },
       "field \"format\" must be \"seqboat-canonical\", got \"hf\""},
      {[](json& j) { j.erase("format"); }, "missing field \"format\""},
      {[](json& j) { j["version"] = 2; }, "field \"version\" must be 1, got 2"},
      {[](json& j) { j["version"] = "1"; }, "field \"version\" must be 1"},
      {[](json& j) { j.erase("version"); }, "missing field \"version\""},
      {[](json& j) { j["name"] = 7; },
       "field \"name\" must be a string, got 7"},
      {[](json& j) { j["vocab_size"] = -5; },
       "field \"vocab_size\" must be a positive integer, got -5"},
      {[](json& j) { j["vocab_size"] = 1.5; },
       "field \"vocab_size\" must be a positive integer, got 1.5"},
      {[](json& j) { j["vocab_size"] = "264"; },
       "field \"vocab_size\" must be a positive integer"},
      {[](json& j) { j.erase("vocab_size"); }, "missing field \"vocab_size\""},
      {[](json& j) { j["d_model"] = 10000000000ll; },
       "field \"d_model\" must be at most 2147483647, got 10000000000"},
      {[](json& j) { j["d_model"] = nullptr; },
       "field \"d_model\" must be a positive integer, got null"},
      {[](json& j) { j["embed"] = 1; }, "field \"embed\" must be an object"},
      {[](json& j) { j["embed"]["scale"] = -1.0; },
       "embed: field \"scale\" must be a positive finite number"},
      {[](json& j) { j["embed"]["padding_idx"] = 264; },
       "embed: field \"padding_idx\" must be null or an integer in [0, "
       "vocab_size = 264), got 264"},
      {[](json& j) { j["tie_embeddings"] = "yes"; },
       "field \"tie_embeddings\" must be true or false, got \"yes\""},
      {[](json& j) { j.erase("tie_embeddings"); },
       "missing field \"tie_embeddings\""},
      {[](json& j) { j["logit_scale"] = 0; },
       "field \"logit_scale\" must be a positive finite number, got 0"},
      {[](json& j) { j.erase("final_norm"); }, "missing field \"final_norm\""},
      {[](json& j) { j["final_norm"] = "rmsnorm"; },
       "field \"final_norm\" must be a norm object or null"},
      {[](json& j) { j["final_norm"]["type"] = "batchnorm"; },
       "final_norm: field \"type\" must be one of \"rmsnorm\", \"layernorm\", "
       "\"rmsnorm_t5\", \"scalenorm\", got \"batchnorm\""},
      {[](json& j) { j["final_norm"].erase("eps"); },
       "final_norm: missing field \"eps\""},
      {[](json& j) { j["final_norm"]["affine"] = 1; },
       "final_norm: field \"affine\" must be true or false, got 1"},
      {[](json& j) { j["residual_dtype"] = "bfloat16"; },
       "field \"residual_dtype\" must be \"float32\", got \"bfloat16\""},
      {[](json& j) { j["eos_token_id"] = 264; },
       "field \"eos_token_id\" must be null or an integer in [0, vocab_size "
       "= 264), got 264"},
      {[](json& j) { j["eos_token_id"] = -1; },
       "field \"eos_token_id\" must be null or an integer"},
      {[](json& j) { j["bos_token_id"] = 2.0; },
       "field \"bos_token_id\" must be null or an integer"},
      {[](json& j) { j.erase("blocks"); }, "missing field \"blocks\""},
      {[](json& j) { j["blocks"] = json::array(); },
       "field \"blocks\" must be a non-empty array, got []"},
      {[](json& j) { j["blocks"] = json::object(); },
       "field \"blocks\" must be a non-empty array"},
  };
  for (const Case& c : cases) {
    const std::string error = ErrorAfter(c.mutate);
    EXPECT_THAT(error, HasSubstr(c.expected));
    EXPECT_THAT(error, HasSubstr("config.json: "));
  }
}

TEST(ModelConfigTest, BlockErrors) {
  struct Case {
    std::function<void(json&)> mutate;
    std::string expected;
  };
  const Case cases[] = {
      {[](json& j) { j["blocks"][1] = 3; },
       "config.json: blocks[1] must be an object, got 3"},
      {[](json& j) { j["blocks"][1].erase("kind"); },
       "blocks[1]: field \"kind\" must be a string, got nothing"},
      {[](json& j) { j["blocks"][1]["kind"] = "mamba3"; },
       "blocks[1]: unknown kind 'mamba3'"},
      {[](json& j) { j["blocks"][0]["d_conv"] = 0; },
       "blocks[0] (mamba1): field \"d_conv\" must be a positive integer, got "
       "0"},
      {[](json& j) { j["blocks"][0]["dt_rank"] = 0; },
       "blocks[0] (mamba1): field \"dt_rank\" must be a positive integer"},
      {[](json& j) { j["blocks"][0].erase("d_inner"); },
       "blocks[0] (mamba1): missing field \"d_inner\" (a positive integer)"},
      {[](json& j) { j["blocks"][0]["d_inner"] = "64"; },
       "blocks[0] (mamba1): field \"d_inner\" must be a positive integer, got "
       "\"64\""},
      {[](json& j) { j["blocks"][0]["conv_bias"] = 1; },
       "blocks[0] (mamba1): field \"conv_bias\" must be true or false, got 1"},
      {[](json& j) { j["blocks"][0].erase("out_proj_bias"); },
       "blocks[0] (mamba1): missing field \"out_proj_bias\""},
      {[](json& j) { j["blocks"][0].erase("norm"); },
       "blocks[0] (mamba1): missing field \"norm\""},
      {[](json& j) { j["blocks"][0]["norm"] = 5; },
       "blocks[0] (mamba1): field \"norm\" must be a norm object or null"},
      {[](json& j) { j["blocks"][0]["norm"].erase("type"); },
       "blocks[0] (mamba1): norm: missing field \"type\""},
      // Only the kinds whose layer scales its residual add take one.
      {[](json& j) { j["blocks"][0]["residual_scale"] = 0.5; },
       "blocks[0] (mamba1): field \"residual_scale\" must be 1 for kind "
       "'mamba1'"},
      {[](json& j) { j["blocks"][0]["residual_scale"] = -1; },
       "blocks[0] (mamba1): field \"residual_scale\" must be a positive"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ErrorAfter(c.mutate), HasSubstr(c.expected));
  }
}

TEST(ModelConfigTest, Mamba1DtBcNormIsOptional) {
  auto plain = ParseModelConfig(kTinyMamba);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->blocks[0].As<Mamba1Config>()->dt_bc_norm.has_value());

  json j = Base();
  j["blocks"][0]["dt_bc_norm"] = {{"type", "rmsnorm"}, {"eps", 1e-6}};
  j["blocks"][1]["dt_bc_norm"] = nullptr;
  auto c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->warnings.empty());
  const std::optional<NormConfig>& norm =
      c->blocks[0].As<Mamba1Config>()->dt_bc_norm;
  ASSERT_TRUE(norm.has_value());
  EXPECT_EQ(norm->type, NormType::kRmsNorm);
  EXPECT_DOUBLE_EQ(norm->eps, 1e-6);
  EXPECT_TRUE(norm->affine);
  EXPECT_FALSE(c->blocks[1].As<Mamba1Config>()->dt_bc_norm.has_value());

  j["blocks"][0]["dt_bc_norm"]["affine"] = false;
  j["blocks"][0]["dt_bc_norm"]["center"] = true;
  c = ParseModelConfig(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->blocks[0].As<Mamba1Config>()->dt_bc_norm->affine);
  EXPECT_THAT(c->warnings,
              UnorderedElementsAre("blocks[0] (mamba1): dt_bc_norm: unknown "
                                   "field \"center\""));
}

TEST(ModelConfigTest, Mamba1DtBcNormErrorsNameTheField) {
  struct Case {
    std::function<void(json&)> mutate;
    std::string expected;
  };
  const Case cases[] = {
      {[](json& j) { j["blocks"][1]["dt_bc_norm"] = true; },
       "config.json: blocks[1] (mamba1): field \"dt_bc_norm\" must be a norm "
       "object or null, got true"},
      {[](json& j) {
         j["blocks"][1]["dt_bc_norm"] = {{"type", "layernorm"}, {"eps", 1e-6}};
       },
       "config.json: blocks[1] (mamba1): field \"dt_bc_norm\" must be null or "
       "a norm of type \"rmsnorm\", got type \"layernorm\""},
      {[](json& j) {
         j["blocks"][1]["dt_bc_norm"] = {{"type", "rmsnorm"}, {"eps", -1}};
       },
       "config.json: blocks[1] (mamba1): dt_bc_norm: field \"eps\" must be a "
       "positive finite number, got -1"},
      {[](json& j) {
         j["blocks"][1]["dt_bc_norm"] = {{"type", "rmsnorm"}};
       },
       "config.json: blocks[1] (mamba1): dt_bc_norm: missing field \"eps\" (a "
       "positive number)"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ErrorAfter(c.mutate), c.expected);
  }
}

TEST(ModelConfigTest, KnownKindsWithoutParserAreRejectedByName) {
  for (const char* kind : {"s4_local"}) {
    EXPECT_EQ(ErrorAfter([kind](json& j) { j["blocks"][1]["kind"] = kind; }),
              absl::StrCat("config.json: blocks[1]: kind '", kind,
                           "' is not supported by this build"));
  }
}

TEST(ModelConfigTest, MalformedJson) {
  EXPECT_THAT(std::string(ParseModelConfig("{\"format\": ").status().message()),
              HasSubstr("config.json: not valid JSON"));
  EXPECT_THAT(std::string(ParseModelConfig("[1]").status().message()),
              HasSubstr("top level must be an object"));
  EXPECT_THAT(std::string(ParseModelConfig("").status().message()),
              HasSubstr("not valid JSON"));
  // A repeated key would otherwise silently keep the last value.
  std::string text = kTinyMamba;
  text.replace(text.find("\"d_state\": 8"), 12,
               "\"d_state\": 8, \"d_state\": 9");
  EXPECT_THAT(std::string(ParseModelConfig(text).status().message()),
              HasSubstr("duplicate key \"d_state\""));
}

TEST(ModelConfigTest, LoadFromFile) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/model_config.json");
  {
    std::ofstream out(path);
    out << kTinyMamba;
  }
  auto c = LoadModelConfig(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->blocks.size(), 2u);

  {
    json j = Base();
    j["d_model"] = -3;
    std::ofstream out(path, std::ios::trunc);
    out << j.dump();
  }
  auto bad = LoadModelConfig(path);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr(absl::StrCat(path, ": field \"d_model\"")));

  auto missing = LoadModelConfig(path + ".absent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(".absent"));
}

TEST(ModelConfigTest, Names) {
  for (std::string_view name :
       {"mamba1", "mamba2", "seqboat", "attention", "mlp", "moe", "s4d"}) {
    const BlockKind* kind = FindBlockKind(name);
    ASSERT_NE(kind, nullptr) << name;
    EXPECT_EQ(kind->name, name);
  }
  EXPECT_EQ(FindBlockKind("s4_local"), nullptr);
  EXPECT_TRUE(IsKnownUnsupportedBlockKind("s4_local"));
  EXPECT_FALSE(IsKnownUnsupportedBlockKind("mamba1"));
  EXPECT_EQ(FindBlockKind("mamba3"), nullptr);
  EXPECT_EQ(NormTypeName(NormType::kRmsNormT5), "rmsnorm_t5");
  EXPECT_EQ(NormTypeName(NormType::kLayerNorm), "layernorm");
}

}  // namespace
}  // namespace seqboat
