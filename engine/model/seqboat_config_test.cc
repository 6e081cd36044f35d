#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/layers/seqboat.h"
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
          "d_model": 8, "tie_embeddings": true, "final_norm": {"type": "rmsnorm", "eps": 1e-5},
          "blocks": [{"kind": "seqboat",
                      "norm": {"type": "layernorm", "eps": 1e-5}, )",
      block_fields, "}]}");
}

TEST(SeqBoatConfigTest, ParsesTheCanonicalFields) {
  auto cfg = ParseModelConfig(Config(
      R"("prenorm": false, "ema_dim": 2, "z_dim": 4, "v_dim": 6,
         "window": 3, "attn_fn": "relu2", "pos": "simple_bias",
         "rel_pos_max": 5, "ema_truncation": 2048)"));
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const SeqBoatConfig* c = cfg->blocks[0].As<SeqBoatConfig>();
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->prenorm);
  EXPECT_EQ(c->window, 3);
  EXPECT_EQ(c->attn_fn, SeqBoatAttnFn::kRelu2);
  EXPECT_EQ(c->pos, SeqBoatPos::kSimpleBias);
  EXPECT_EQ(c->rel_pos_max, 5);
  EXPECT_EQ(c->ema_truncation, 2048);
  ASSERT_EQ(cfg->warnings.size(), 1u);
  EXPECT_NE(cfg->warnings[0].find("seqboat ema_truncation 2048: trained with "
                                  "EMA kernels cut to 2048 taps"),
            std::string::npos)
      << cfg->warnings[0];
}

TEST(SeqBoatConfigTest, BadFieldsAreNamed) {
  const std::string ok_rest =
      R"("v_dim": 6, "attn_fn": "softmax", "pos": "rope_interleaved")";
  const std::pair<std::string, std::string> cases[] = {
      {R"("ema_dim": 2, "z_dim": 4, "window": 0, )" + ok_rest, "\"window\""},
      {R"("ema_dim": -1, "z_dim": 4, "window": 2, )" + ok_rest, "\"ema_dim\""},
      {R"("ema_dim": 2, "z_dim": 5, "window": 2, )" + ok_rest,
       "\"z_dim\" must be even"},
      {R"("ema_dim": 2, "z_dim": 4, "window": 2, "v_dim": 6,
          "attn_fn": "cosine", "pos": "rope_interleaved")",
       "\"attn_fn\""},
      {R"("ema_dim": 2, "z_dim": 4, "window": 2, "v_dim": 6,
          "attn_fn": "softmax", "pos": "alibi")",
       "\"pos\""},
      {R"("ema_dim": 2, "z_dim": 4, "window": 2, "v_dim": 6,
          "attn_fn": "softmax", "pos": "simple_bias")",
       "\"rel_pos_max\""},
  };
  for (const auto& [fields, want] : cases) {
    auto cfg = ParseModelConfig(Config(fields));
    ASSERT_FALSE(cfg.ok()) << fields;
    EXPECT_THAT(std::string(cfg.status().message()),
                AllOf(HasSubstr("blocks[0] (seqboat)"), HasSubstr(want)));
  }
}

}  // namespace
}  // namespace seqboat
