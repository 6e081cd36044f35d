// tokenizer.json files with a WordLevel model, as the fairseq-seqboat
// converter writes them for a checkpoint's dict.txt: fairseq's ids (<s> 0,
// <pad> 1, </s> 2, <unk> 3, then the dictionary's lines), words split on
// whitespace, a newline read as </s> (fairseq ends every training line with
// it) and </s> first (fairseq's language-model inference prepends it).
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Id 1, <pad>, is left out of the vocabulary and the added tokens alike, so
// no text can produce it.
constexpr char kFairseqJson[] = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 0, "content": "<s>", "special": true},
    {"id": 2, "content": "</s>", "special": true},
    {"id": 3, "content": "<unk>", "special": true}],
  "normalizer": {"type": "Replace", "pattern": {"String": "\n"},
                 "content": " </s> "},
  "pre_tokenizer": {"type": "WhitespaceSplit"},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "</s>", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}},
             {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
  "decoder": null,
  "model": {"type": "WordLevel", "unk_token": "<unk>",
    "vocab": {"<s>": 0, "</s>": 2, "<unk>": 3, "the": 4, "72": 5, "101": 6,
              "é": 7, "madeupword0000": 8}}})";

std::unique_ptr<Tokenizer> MustParse(const std::string& json,
                                     const TokenizerOptions& options = {}) {
  auto tok = ParseTokenizerJson(json, options);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

TEST(WordLevelTokenizerTest, WordsGetTheDictionaryIdsAfterTheLeadingEos) {
  auto tok = MustParse(kFairseqJson);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("72 101 the"), ElementsAre(2, 5, 6, 4));
  // Runs of any Unicode White_Space separate words and are dropped.
  EXPECT_THAT(tok->Encode("  the\t72\xE3\x80\x80"
                          "101\xC2\xA0 é "),
              ElementsAre(2, 4, 5, 6, 7));
  EXPECT_THAT(tok->Encode("The cat"), ElementsAre(2, 3, 3));
  EXPECT_THAT(tok->Encode(""), ElementsAre(2));
  EXPECT_EQ(tok->vocab_size(), 9);
  EXPECT_EQ(tok->eos_token_id(), 2);
}

TEST(WordLevelTokenizerTest, NewlinesAreTheEosFairseqEndsEveryLineWith) {
  auto tok = MustParse(kFairseqJson);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("72 101\nthe\n"), ElementsAre(2, 5, 6, 2, 4, 2));
  EXPECT_THAT(tok->Encode("the</s>"), ElementsAre(2, 3));
}

TEST(WordLevelTokenizerTest, TextNeverBecomesThePaddingId) {
  for (bool parse_special : {false, true}) {
    TokenizerOptions options;
    options.parse_special = parse_special;
    auto tok = MustParse(kFairseqJson, options);
    ASSERT_NE(tok, nullptr);
    EXPECT_THAT(tok->Encode("<pad> the <pad>"), ElementsAre(2, 3, 4, 3))
        << parse_special;
    // Special tokens written out still name their ids when asked to.
    if (parse_special) {
      EXPECT_THAT(tok->Encode("</s>the"), ElementsAre(2, 2, 4));
    } else {
      EXPECT_THAT(tok->Encode("</s>the"), ElementsAre(2, 3));
    }
  }
}

TEST(WordLevelTokenizerTest, WordsDecodeJoinedWithSpaces) {
  auto tok = MustParse(kFairseqJson);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->TokenBytes(5), " 72");
  EXPECT_EQ(tok->DecodeToken(5, /*at_text_start=*/true), "72");
  EXPECT_EQ(tok->TokenBytes(2), "</s>");
  EXPECT_EQ(tok->TokenBytes(1), "");
  for (int32_t id : {0, 2, 3}) EXPECT_TRUE(tok->IsSpecial(id)) << id;
  EXPECT_FALSE(tok->IsSpecial(4));

  IncrementalDetokenizer fresh(*tok, /*at_text_start=*/true);
  std::string text;
  for (int32_t id : {2, 4, 7, 2, 1, 5}) text += fresh.Push(id);
  text += fresh.Flush();
  EXPECT_EQ(text, "the é 72");
  // A continuation of a prompt starts with its separating space.
  IncrementalDetokenizer continued(*tok);
  EXPECT_EQ(continued.Push(6), " 101");
}

TEST(WordLevelTokenizerTest, MalformedModelsNameTheField) {
  const std::string model_only =
      R"({"pre_tokenizer": {"type": "WhitespaceSplit"}, "model": )";
  struct Case {
    std::string json;
    std::string field;
  };
  const std::vector<Case> cases = {
      {model_only + R"({"type": "WordLevel", "vocab": {"a": 0}}})",
       "model.unk_token"},
      {model_only +
           R"({"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "<unk>"}})",
       "model.unk_token"},
      {model_only + R"({"type": "WordLevel", "vocab": {"a": 0, "b": 0},
                        "unk_token": "a"}})",
       "is used by"},
      {model_only + R"({"type": "WordLevel", "vocab": {"a": -1},
                        "unk_token": "a"}})",
       "model.vocab[\"a\"]"},
      {model_only + R"({"type": "WordLevel", "vocab": [], "unk_token": "a"}})",
       "model.vocab"},
      {R"({"pre_tokenizer": {"type": "Whitespace"}, "model": {"type":
          "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}})",
       "WhitespaceSplit"},
  };
  for (const Case& c : cases) {
    auto tok = ParseTokenizerJson(c.json);
    ASSERT_FALSE(tok.ok()) << c.json;
    EXPECT_THAT(std::string(tok.status().message()), HasSubstr(c.field))
        << c.json;
  }
  // Only word-level models may leave the decoder null: BPE tokens are not
  // words, and joining them with spaces would garble the text.
  auto bpe = ParseTokenizerJson(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  ASSERT_FALSE(bpe.ok());
  EXPECT_THAT(std::string(bpe.status().message()), HasSubstr("decoder"));
}

}  // namespace
}  // namespace seqboat
