#include "engine/tokenizer/tokenizer.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kGpt2Style[] = R"({
  "version": "1.0",
  "model": {"type": "Bytes"},
  "added_tokens": [{"id": 256, "content": "<|endoftext|>", "special": true}]
})";

TEST(ByteTokenizerTest, ParsesTheCanonicalFile) {
  auto tok = ParseTokenizerJson(kGpt2Style);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 257);
  EXPECT_EQ((*tok)->eos_token_id(), 256);
  EXPECT_TRUE((*tok)->IsSpecial(256));
  EXPECT_FALSE((*tok)->IsSpecial(65));
  EXPECT_EQ((*tok)->TokenBytes(256), "<|endoftext|>");
  EXPECT_EQ((*tok)->TokenBytes(65), "A");
  EXPECT_EQ((*tok)->TokenBytes(0xE2), std::string(1, '\xE2'));
}

TEST(ByteTokenizerTest, EncodesBytesAndNeverSpecials) {
  auto tok = ParseTokenizerJson(kGpt2Style);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->Encode("hi\xC3\xA9"), ElementsAre(104, 105, 0xC3, 0xA9));
  // The special token's text in user input stays plain bytes.
  const std::vector<int32_t> ids = (*tok)->Encode("a<|endoftext|>");
  EXPECT_EQ(ids.size(), 14u);
  for (int32_t id : ids) EXPECT_LT(id, 256);
  EXPECT_TRUE((*tok)->Encode("").empty());
}

TEST(ByteTokenizerTest, EncodeChatParsesSpecialsOutsideLiteralRanges) {
  auto tok = ParseTokenizerJson(kGpt2Style);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_THAT((*tok)->EncodeChat("a<|endoftext|>b", {}),
              ElementsAre(97, 256, 98));
  const std::vector<int32_t> literal =
      (*tok)->EncodeChat("a<|endoftext|>b", {{1, 14}});
  EXPECT_EQ(literal, (*tok)->Encode("a<|endoftext|>b"));
}

TEST(ByteTokenizerTest, RoundTripsAllBytes) {
  auto tok = ParseTokenizerJson(kGpt2Style);
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  for (int32_t id : (*tok)->Encode(all)) back += (*tok)->TokenBytes(id);
  EXPECT_EQ(back, all);
}

TEST(ByteTokenizerTest, GapsAndOutOfRangeIdsAreHarmless) {
  auto tok = ParseTokenizerJson(R"({"model": {"type": "Bytes"},
    "added_tokens": [{"id": 300, "content": "<pad>", "special": true},
                     {"id": 258, "content": "</s>", "special": true}]})");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 301);
  EXPECT_EQ((*tok)->eos_token_id(), 258);
  EXPECT_EQ((*tok)->TokenBytes(280), "");
  EXPECT_FALSE((*tok)->IsSpecial(280));
  EXPECT_EQ((*tok)->TokenBytes(-1), "");
  EXPECT_EQ((*tok)->TokenBytes(301), "");
  EXPECT_FALSE((*tok)->IsSpecial(-5));
  EXPECT_FALSE((*tok)->IsSpecial(1 << 30));
}

TEST(ByteTokenizerTest, EosIsFirstSpecialWithKnownContent) {
  auto tok = ParseTokenizerJson(R"({"model": {"type": "Bytes"},
    "added_tokens": [{"id": 256, "content": "<eos>", "special": false},
                     {"id": 257, "content": "<bos>", "special": true},
                     {"id": 258, "content": "<eos>", "special": true},
                     {"id": 259, "content": "</s>", "special": true}]})");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->eos_token_id(), 258);
  EXPECT_FALSE((*tok)->IsSpecial(256));
  EXPECT_EQ((*tok)->TokenBytes(256), "<eos>");
}

TEST(ByteTokenizerTest, NoAddedTokensMeansNoEos) {
  auto tok = ParseTokenizerJson(R"({"model": {"type": "Bytes"}})");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 256);
  EXPECT_EQ((*tok)->eos_token_id(), -1);
}

struct BadCase {
  const char* json;
  const char* field;
};

TEST(ParseTokenizerJsonTest, RejectsBadInputNamingTheField) {
  const BadCase cases[] = {
      {"{not json", "JSON"},
      {"[1, 2]", "top level"},
      {R"({"added_tokens": []})", "model"},
      {R"({"model": 3})", "model"},
      {R"({"model": {}})", "model.type"},
      {R"({"model": {"type": 7}})", "model.type"},
      {R"({"model": {"type": "WordPiece"}})", "model.type"},
      {R"({"model": {"type": "Bytes"}, "added_tokens": {}})", "added_tokens"},
      {R"({"model": {"type": "Bytes"}, "added_tokens": [5]})",
       "added_tokens[0]"},
      {R"({"model": {"type": "Bytes"}, "added_tokens": [{"content": "x"}]})",
       "added_tokens[0].id"},
      {R"({"model": {"type": "Bytes"},
           "added_tokens": [{"id": "256", "content": "x"}]})",
       "added_tokens[0].id"},
      {R"({"model": {"type": "Bytes"},
           "added_tokens": [{"id": 256.5, "content": "x"}]})",
       "added_tokens[0].id"},
      {R"({"model": {"type": "Bytes"},
           "added_tokens": [{"id": 99999999999, "content": "x"}]})",
       "added_tokens[0].id"},
      {R"({"model": {"type": "Bytes"},
           "added_tokens": [{"id": -3, "content": "x"}]})",
       "added_tokens[0].id"},
      {R"({"model": {"type": "Bytes"},
           "added_tokens": [{"id": 256, "content": "x"},
                            {"id": 65, "content": "y"}]})",
       "added_tokens[1].id"},
      {R"({"model": {"type": "Bytes"},
           "added_tokens": [{"id": 256, "content": "x"},
                            {"id": 256, "content": "y"}]})",
       "added_tokens[1].id"},
      {R"({"model": {"type": "Bytes"},
           "added_tokens": [{"id": 256, "content": 1}]})",
       "added_tokens[0].content"},
      {R"({"model": {"type": "Bytes"},
           "added_tokens": [{"id": 256, "content": ""}]})",
       "added_tokens[0].content"},
      {R"({"model": {"type": "Bytes"},
           "added_tokens": [{"id": 256, "content": "x", "special": "yes"}]})",
       "added_tokens[0].special"},
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

// Sequences of Sequences are read by recursion: nested 200,000 deep, a 7 MB
// file used to exhaust the stack.
TEST(ParseTokenizerJsonTest, DeeplyNestedSequencesAreRefused) {
  constexpr int kDepth = 200000;
  std::string normalizer;
  for (int i = 0; i < kDepth; ++i) {
    normalizer += R"({"type": "Sequence", "normalizers": [)";
  }
  normalizer += R"({"type": "NFC"})";
  for (int i = 0; i < kDepth; ++i) normalizer += "]}";
  auto tok = ParseTokenizerJson(
      R"({"model": {"type": "Bytes"}, "normalizer": )" + normalizer + "}");
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(std::string(tok.status().message()),
              HasSubstr("nest deeper than 64"));
}

TEST(ParseTokenizerJsonTest, UnknownModelTypeNamesIt) {
  auto tok = ParseTokenizerJson(R"({"model": {"type": "Unigram"}})");
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(std::string(tok.status().message()), HasSubstr("Unigram"));
}

TEST(LoadTokenizerTest, ReadsFileAndNamesItInErrors) {
  const std::string dir =
      getenv("TEST_TMPDIR") != nullptr ? getenv("TEST_TMPDIR") : "/tmp";
  const std::string good = dir + "/good_tokenizer.json";
  const std::string bad = dir + "/bad_tokenizer.json";
  std::ofstream(good) << kGpt2Style;
  std::ofstream(bad) << R"({"model": {"type": "Bytes"}, "added_tokens": 1})";

  auto tok = LoadTokenizer(good);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->eos_token_id(), 256);

  auto err = LoadTokenizer(bad);
  ASSERT_FALSE(err.ok());
  EXPECT_THAT(std::string(err.status().message()), HasSubstr(bad));
  EXPECT_THAT(std::string(err.status().message()), HasSubstr("added_tokens"));

  auto missing = LoadTokenizer(dir + "/does_not_exist.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("does_not_exist.json"));
}

}  // namespace
}  // namespace seqboat
