#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "engine/tokenizer/hf_tokenizer.h"
#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace seqboat {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Tokenizer> MustParse(const std::string& json,
                                     const TokenizerOptions& options = {}) {
  auto tok = ParseTokenizerJson(json, options);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

// A byte-level vocabulary over "abc" and the space ("Ġ"), merges given
// either as "a b" strings or as pairs.
std::string ByteLevelJson(const std::string& merges) {
  return R"({"model": {"type": "BPE",
    "vocab": {"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "bc": 5, "abc": 6,
              "Ġa": 7, "<|endoftext|>": 8},
    "merges": )" +
         merges + R"(},
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
    "decoder": {"type": "ByteLevel"},
    "added_tokens": [
      {"id": 8, "content": "<|endoftext|>", "special": true},
      {"id": 9, "content": "<tool>", "special": false},
      {"id": 10, "content": "<tool_long>", "special": false}]})";
}

TEST(HfBpeTokenizerTest, MergesApplyByRankNotPosition) {
  // "bc" outranks "ab", so "abc" is a + bc, never ab + c; "abc" itself is
  // only reachable from "ab" + "c", which never forms.
  auto tok = MustParse(ByteLevelJson(R"(["b c", "a b", "ab c", "Ġ a"])"));
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("abc"), ElementsAre(0, 5));
  // With "a b" first, ab forms, then ab + c.
  auto tok2 = MustParse(ByteLevelJson(R"(["a b", "b c", "ab c"])"));
  ASSERT_NE(tok2, nullptr);
  EXPECT_THAT(tok2->Encode("abc"), ElementsAre(6));
  EXPECT_THAT(tok2->Encode("abcab"), ElementsAre(6, 4));
}

TEST(HfBpeTokenizerTest, StringAndPairMergesAgree) {
  auto strings = MustParse(ByteLevelJson(R"(["a b", "ab c", "Ġ a"])"));
  auto pairs =
      MustParse(ByteLevelJson(R"([["a", "b"], ["ab", "c"], ["Ġ", "a"]])"));
  ASSERT_NE(strings, nullptr);
  ASSERT_NE(pairs, nullptr);
  for (const char* text : {"abc", "a abc", "cab  a", "ba"}) {
    EXPECT_EQ(strings->Encode(text), pairs->Encode(text)) << text;
  }
  // The space joins the following word ("Ġa"), as GPT-2 splits " a".
  EXPECT_THAT(strings->Encode("c a"), ElementsAre(2, 7));
}

TEST(HfBpeTokenizerTest, AddedTokensSplitTextAndSpecialsNeedParseSpecial) {
  const std::string json = ByteLevelJson(R"(["a b"])");
  auto plain = MustParse(json);
  ASSERT_NE(plain, nullptr);
  // Longest match at the leftmost position.
  EXPECT_THAT(plain->Encode("ab<tool_long>c<tool>"), ElementsAre(4, 10, 2, 9));
  // Special token text is ordinary text by default...
  const std::vector<int32_t> ids = plain->Encode("<|endoftext|>");
  EXPECT_EQ(ids.size(), 0u);  // none of "<|...>" is in this tiny vocabulary
  TokenizerOptions options;
  options.parse_special = true;
  auto parsing = MustParse(json, options);
  ASSERT_NE(parsing, nullptr);
  EXPECT_THAT(parsing->Encode("a<|endoftext|>b"), ElementsAre(0, 8, 1));
  EXPECT_EQ(parsing->eos_token_id(), 8);
  EXPECT_TRUE(parsing->IsSpecial(8));
  EXPECT_FALSE(parsing->IsSpecial(9));
  EXPECT_EQ(parsing->TokenBytes(3), " ");
  EXPECT_EQ(parsing->TokenBytes(7), " a");
  EXPECT_EQ(parsing->TokenBytes(9), "<tool>");
  EXPECT_EQ(parsing->vocab_size(), 11);
}

TEST(HfBpeTokenizerTest, LstripAndRstripSwallowWhitespace) {
  auto tok = MustParse(R"({"model": {"type": "BPE",
    "vocab": {"a": 0, "Ġ": 1}, "merges": []},
    "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
    "added_tokens": [{"id": 2, "content": "<m>", "lstrip": true,
                      "rstrip": true}]})");
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("a  <m>  a"), ElementsAre(0, 2, 0));
  EXPECT_THAT(tok->Encode("a <m>"), ElementsAre(0, 2));
}

TEST(HfBpeTokenizerTest, EosOverrideAndPreference) {
  const std::string json = R"({"model": {"type": "BPE",
    "vocab": {"a": 0}, "merges": []},
    "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
    "added_tokens": [{"id": 1, "content": "<|eot_id|>", "special": true},
                     {"id": 2, "content": "<|end_of_text|>", "special": true}]})";
  auto tok = MustParse(json);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->eos_token_id(), 2);
  TokenizerOptions options;
  options.eos_token_id = 1;
  auto overridden = MustParse(json, options);
  ASSERT_NE(overridden, nullptr);
  EXPECT_EQ(overridden->eos_token_id(), 1);
  EXPECT_THAT(overridden->Encode("aa"), ElementsAre(0, 0));
  options.eos_token_id = 3;
  auto bad = ParseTokenizerJson(json, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("eos_token_id"));
}

// SentencePiece-style: "▁" marks a space, bytes fall back to <0xXX>.
constexpr char kLlamaStyle[] = R"({"model": {"type": "BPE",
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x20>": 3, "<0xC3>": 4,
              "<0xA9>": 5, "▁": 6, "h": 7, "i": 8, "▁h": 9, "▁hi": 10,
              "x": 11},
    "merges": [["▁", "h"], ["▁h", "i"]],
    "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true},
  "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "▁"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "added_tokens": [{"id": 0, "content": "<unk>", "special": true},
                   {"id": 1, "content": "<s>", "special": true},
                   {"id": 2, "content": "</s>", "special": true}]})";

TEST(HfBpeTokenizerTest, EncodeChatParsesTemplateSpecialsOnly) {
  // The server loads tokenizers without parse_special; a rendered chat
  // prompt still gets its template's special tokens, not the client's.
  auto tok = MustParse(ByteLevelJson(R"(["a b"])"));
  ASSERT_NE(tok, nullptr);
  const std::string text = "<|endoftext|>ab<tool><|endoftext|>c";
  EXPECT_THAT(tok->EncodeChat(text, {}), ElementsAre(8, 4, 9, 8, 2));
  // Inside a literal range the same text is plain bytes (none of "<|...|>"
  // is in this vocabulary); a non-special added token still matches.
  EXPECT_THAT(tok->EncodeChat(text, {{13, 33}}), ElementsAre(8, 4, 9, 2));
  // A token cut by a literal range is not matched either.
  EXPECT_THAT(tok->EncodeChat(text, {{25, 26}}), ElementsAre(8, 4, 9, 2));
}

TEST(HfBpeTokenizerTest, EncodeChatAddsNoBos) {
  auto tok = MustParse(kLlamaStyle);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("hi"), ElementsAre(1, 10));
  // The template writes <s>; the post-processor's is not added again, and
  // each piece between special tokens is normalized on its own (Prepend).
  EXPECT_THAT(tok->EncodeChat("<s>hi</s>hi", {}), ElementsAre(1, 10, 2, 10));
  EXPECT_THAT(tok->EncodeChat("hi", {}), ElementsAre(10));
}

TEST(HfBpeTokenizerTest, ByteFallbackAndUnk) {
  auto tok = MustParse(kLlamaStyle);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->eos_token_id(), 2);
  // BOS, "▁hi", then "é" as its two bytes.
  EXPECT_THAT(tok->Encode("hi\xC3\xA9"), ElementsAre(1, 10, 4, 5));
  EXPECT_THAT(tok->Encode("hi hi"), ElementsAre(1, 10, 10));
  // "€" (E2 82 AC) has no byte tokens here: the unk token, fused with the
  // next unknown character.
  EXPECT_THAT(tok->Encode("x\xE2\x82\xAC\xE2\x82\xACx"),
              ElementsAre(1, 6, 11, 0, 11));
  EXPECT_EQ(tok->TokenBytes(4), "\xC3");
  EXPECT_EQ(tok->TokenBytes(3), " ");
  EXPECT_EQ(tok->TokenBytes(10), " hi");
}

TEST(HfBpeTokenizerTest, LeadingSpaceIsStrippedOnlyAtTextStart) {
  auto tok = MustParse(kLlamaStyle);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->DecodeToken(10, /*at_text_start=*/true), "hi");
  EXPECT_EQ(tok->DecodeToken(10, /*at_text_start=*/false), " hi");
  EXPECT_EQ(tok->DecodeToken(3, /*at_text_start=*/true), "");

  const std::vector<int32_t> ids = tok->Encode("hi hi\xC3\xA9");
  IncrementalDetokenizer from_start(*tok, /*at_text_start=*/true);
  std::string text;
  for (int32_t id : ids) text += from_start.Push(id);  // BOS is skipped
  text += from_start.Flush();
  EXPECT_EQ(text, "hi hi\xC3\xA9");

  // A continuation of a prompt keeps the space.
  IncrementalDetokenizer continuation(*tok);
  EXPECT_EQ(continuation.Push(10), " hi");
  EXPECT_EQ(continuation.Push(10), " hi");
}

// GPT-NeoX style: NFC before the byte-level split. "é" is the merged
// token "Ã©"; e U+0301 unnormalized would be "e" then "Ìģ" (the mark is
// not a letter, so the GPT-2 split gives it a word of its own).
constexpr char kNfcByteLevel[] = R"({"model": {"type": "BPE",
    "vocab": {"e": 0, "Ã": 1, "©": 2, "Ì": 3, "ģ": 4, "Ã©": 5, "Ġ": 6,
              "Ġe": 7},
    "merges": ["Ã ©", "Ġ e"]},
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
  "decoder": {"type": "ByteLevel"},
  "added_tokens": [
      {"id": 8, "content": "e\u0301e", "normalized": true},
      {"id": 9, "content": "<|endoftext|>", "special": true}]})";

TEST(HfBpeTokenizerTest, NfcComposesBeforeBpe) {
  auto tok = MustParse(kNfcByteLevel);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(tok->Encode("e\xCC\x81"), ElementsAre(5));
  EXPECT_THAT(tok->Encode("\xC3\xA9"), ElementsAre(5));
  EXPECT_THAT(tok->Encode(" e"), ElementsAre(7));
  // Without the normalizer the same text is three tokens.
  nlohmann::json plain = nlohmann::json::parse(kNfcByteLevel);
  plain["normalizer"] = nullptr;
  auto unnormalized = MustParse(plain.dump());
  ASSERT_NE(unnormalized, nullptr);
  EXPECT_THAT(unnormalized->Encode("e\xCC\x81"), ElementsAre(0, 3, 4));
  // Decoding gives the normalized text.
  IncrementalDetokenizer detok(*tok, /*at_text_start=*/true);
  std::string text;
  for (int32_t id : tok->Encode("e\xCC\x81 e")) text += detok.Push(id);
  text += detok.Flush();
  EXPECT_EQ(text, "\xC3\xA9 e");
}

TEST(HfBpeTokenizerTest, NormalizedAddedTokensMatchTheNormalizedText) {
  auto tok = MustParse(kNfcByteLevel);
  ASSERT_NE(tok, nullptr);
  // The token's own content is normalized to "\u00e9e", so either spelling
  // of the text finds it.
  EXPECT_THAT(tok->Encode("e\xCC\x81"
                          "e"),
              ElementsAre(8));
  EXPECT_THAT(tok->Encode("\xC3\xA9"
                          "e e"),
              ElementsAre(8, 7));
  EXPECT_EQ(tok->TokenBytes(8),
            "e\xCC\x81"
            "e");
}

TEST(HfBpeTokenizerTest, NfcKeepsInvalidBytesAsBytes) {
  auto tok = MustParse(kNfcByteLevel);
  ASSERT_NE(tok, nullptr);
  // A lone 0xC3 still encodes as its byte token, not as U+FFFD, and a
  // following well-formed "e U+0301" still composes.
  EXPECT_THAT(tok->Encode("\xC3"), ElementsAre(1));
  EXPECT_THAT(tok->Encode("\xC3"
                          "e\xCC\x81"),
              ElementsAre(1, 5));
}

TEST(HfBpeTokenizerTest, EncodeIsSafeFromManyThreads) {
  auto tok = MustParse(ByteLevelJson(R"(["a b", "b c", "ab c", "Ġ a"])"));
  ASSERT_NE(tok, nullptr);
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) {
    std::string t;
    for (int j = 0; j <= i; ++j) t += "abc "[(i * 7 + j * 3) % 4];
    texts.push_back(t);
  }
  std::vector<std::vector<int32_t>> want;
  for (const std::string& t : texts) want.push_back(tok->Encode(t));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (int round = 0; round < 200; ++round) {
        const size_t i = (round * 13 + th) % texts.size();
        if (tok->Encode(texts[i]) != want[i]) ++mismatches[th];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

std::vector<std::string> SplitWith(const RegexSplitter& s,
                                   std::string_view text) {
  std::vector<std::string_view> parts;
  s.Split(text, &parts);
  return std::vector<std::string>(parts.begin(), parts.end());
}

TEST(RegexSplitterTest, WhitespaceRunGivesBackItsLastCharacter) {
  auto gpt2 = RegexSplitter::Create(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
      "test");
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  EXPECT_THAT(SplitWith(**gpt2, "a   b"), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(SplitWith(**gpt2, "a \tb"), ElementsAre("a", " ", "\t", "b"));
  EXPECT_THAT(SplitWith(**gpt2, "a  "), ElementsAre("a", "  "));
  EXPECT_THAT(SplitWith(**gpt2, "it's 42!!"),
              ElementsAre("it", "'s", " 42", "!!"));
  // U+3000 is whitespace for Hugging Face's regex (RE2's \s is ASCII
  // only): the run gives back its last character, which, not being " ",
  // cannot join the word. (Hugging Face: ["a", "ãĢĢ", "ãĢĢ", "b"].)
  EXPECT_THAT(SplitWith(**gpt2,
                        "a\xE3\x80\x80\xE3\x80\x80"
                        "b"),
              ElementsAre("a", "\xE3\x80\x80", "\xE3\x80\x80", "b"));
}

TEST(RegexSplitterTest, OtherLookaroundIsRejected) {
  auto bad = RegexSplitter::Create(R"(a(?=b)|\s+)", "pre_tokenizer.pattern");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("pre_tokenizer.pattern"));
}

TEST(HfBpeTokenizerTest, LoadsTheGeneratedFiles) {
  for (const char* name : {"byte_bpe.json", "llama3_bpe.json", "llama_bpe.json",
                           "neox_bpe.json", "qwen2_bpe.json",
                           "qwen3_5_bpe.json"}) {
    auto tok = LoadTokenizer(std::string("tests/data/tokenizers/") + name);
    ASSERT_TRUE(tok.ok()) << tok.status();
    EXPECT_GE((*tok)->vocab_size(), 1000) << name;
    EXPECT_GE((*tok)->eos_token_id(), 0) << name;
    std::string text;
    IncrementalDetokenizer detok(**tok, /*at_text_start=*/true);
    const std::string input =
        "Hello  world,\tcaf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC!";
    for (int32_t id : (*tok)->Encode(input)) text += detok.Push(id);
    text += detok.Flush();
    EXPECT_EQ(text, input) << name;
  }
}

struct BadCase {
  std::string json;
  const char* field;
};

std::string WithModel(const std::string& model, const std::string& rest = "") {
  return R"({"model": )" + model +
         R"(, "pre_tokenizer": {"type": "ByteLevel"},
             "decoder": {"type": "ByteLevel"})" +
         rest + "}";
}

TEST(HfBpeTokenizerTest, RejectsMalformedFilesNamingTheField) {
  const std::string ok_model =
      R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";
  const BadCase cases[] = {
      {WithModel(R"({"type": "Unigram", "vocab": []})"), "model.type"},
      {WithModel(R"({"type": "BPE", "merges": []})"), "model.vocab"},
      {WithModel(R"({"type": "BPE", "vocab": [], "merges": []})"),
       "model.vocab"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": -1}, "merges": []})"),
       "model.vocab[\"a\"]"},
      {WithModel(
           R"({"type": "BPE", "vocab": {"a": 99999999999}, "merges": []})"),
       "model.vocab[\"a\"]"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []})"),
       "model.vocab"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": 0}})"), "model.merges"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                     "merges": ["a b", "ab"]})"),
       "model.merges[1]"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                     "merges": ["a b c"]})"),
       "model.merges[0]"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                     "merges": [["a", 1]]})"),
       "model.merges[0]"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": 0, "b": 1},
                     "merges": ["a b"]})"),
       "model.merges[0]"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                     "merges": ["a z"]})"),
       "model.merges[0]"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": 0}, "merges": [],
                     "unk_token": "<unk>"})"),
       "model.unk_token"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": 0}, "merges": [],
                     "byte_fallback": "yes"})"),
       "model.byte_fallback"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": 0}, "merges": [],
                     "continuing_subword_prefix": "##"})"),
       "model.continuing_subword_prefix"},
      {WithModel(R"({"type": "BPE", "vocab": {"a": 0}, "merges": [],
                     "dropout": 0.1})"),
       "model.dropout"},
      {WithModel(ok_model, R"(, "normalizer": {"type": "Lowercase"})"),
       "normalizer.type"},
      {WithModel(ok_model, R"(, "normalizer": {"type": "Sequence",
          "normalizers": [{"type": "NFKD"}, {"type": "StripAccents"}]})"),
       "normalizer.normalizers[1].type"},
      {WithModel(ok_model, R"(, "normalizer": {"type": "Sequence",
          "normalizers": [{"type": "Replace", "pattern": {"Regex": " +"},
                           "content": " "}]})"),
       "normalizer.normalizers[0].pattern"},
      {R"({"model": )" + ok_model + R"(, "decoder": {"type": "ByteLevel"},
          "pre_tokenizer": {"type": "Whitespace"}})",
       "pre_tokenizer.type"},
      {R"({"model": )" + ok_model + R"j(, "decoder": {"type": "ByteLevel"},
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "a(?=b)"},
             "behavior": "Isolated"}]}})j",
       "pre_tokenizer.pretokenizers[0].pattern"},
      {R"({"model": )" + ok_model + R"(, "decoder": {"type": "ByteLevel"},
          "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"},
                            "behavior": "Removed"}})",
       "pre_tokenizer.behavior"},
      {R"({"model": )" + ok_model + R"(, "pre_tokenizer": null})", "decoder"},
      {WithModel(ok_model, R"(, "decoder": {"type": "Sequence", "decoders": [
          {"type": "Fuse"},
          {"type": "Strip", "content": " ", "start": 1, "stop": 1}]})"),
       "decoder"},
      {WithModel(ok_model, R"(, "post_processor": {"type": "TemplateProcessing",
          "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}}],
          "special_tokens": {}})"),
       "post_processor.special_tokens[\"<s>\"]"},
      {WithModel(ok_model, R"(, "post_processor": {"type": "BertProcessing"})"),
       "post_processor.type"},
      {WithModel(ok_model,
                 R"(, "added_tokens": [{"id": 3, "content": "x",
                                        "single_word": true}])"),
       "added_tokens[0].single_word"},
      {WithModel(ok_model,
                 R"(, "added_tokens": [{"id": 3, "content": "x",
                                        "lstrip": 1}])"),
       "added_tokens[0].lstrip"},
      {WithModel(ok_model,
                 R"(, "added_tokens": [{"id": 3, "content": "x"},
                                       {"id": 3, "content": "y"}])"),
       "added_tokens[1].id"},
      {WithModel(ok_model,
                 R"(, "added_tokens": [{"id": 16777216, "content": "x"}])"),
       "added_tokens[0].id"},
  };
  for (const BadCase& c : cases) {
    auto tok = ParseTokenizerJson(c.json);
    ASSERT_FALSE(tok.ok()) << c.json;
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument)
        << c.json;
    EXPECT_THAT(std::string(tok.status().message()), HasSubstr(c.field))
        << c.json;
  }
}

}  // namespace
}  // namespace seqboat
