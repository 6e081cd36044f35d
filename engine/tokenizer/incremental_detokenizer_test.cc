#include "engine/tokenizer/incremental_detokenizer.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

// A tokenizer whose tokens are arbitrary byte strings, so that multi-byte
// characters can be split across tokens in every possible way.
class TableTokenizer : public Tokenizer {
 public:
  TableTokenizer(std::vector<std::string> tokens, int32_t first_special)
      : tokens_(std::move(tokens)), first_special_(first_special) {}
  std::vector<int32_t> Encode(std::string_view) const override { return {}; }
  std::string TokenBytes(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? tokens_[id] : "";
  }
  int32_t vocab_size() const override {
    return static_cast<int32_t>(tokens_.size());
  }
  int32_t eos_token_id() const override { return first_special_; }
  bool IsSpecial(int32_t id) const override {
    return id >= first_special_ && id < vocab_size();
  }

 private:
  std::vector<std::string> tokens_;
  int32_t first_special_;
};

std::unique_ptr<Tokenizer> Bytes() {
  auto tok = ParseTokenizerJson(R"({"model": {"type": "Bytes"},
      "added_tokens": [{"id": 256, "content": "<|endoftext|>",
                        "special": true}]})");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

TEST(IncrementalDetokenizerTest, HoldsBackSplitCharacterUntilComplete) {
  auto tok = Bytes();
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.Push('h'), "h");
  EXPECT_EQ(detok.Push(0xF0), "");
  EXPECT_EQ(detok.Push(0x9F), "");
  EXPECT_EQ(detok.Push(0x98), "");
  EXPECT_EQ(detok.Push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(detok.Push('!'), "!");
  EXPECT_EQ(detok.Flush(), "");
}

TEST(IncrementalDetokenizerTest, SkipsSpecialTokens) {
  auto tok = Bytes();
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.Push('a'), "a");
  EXPECT_EQ(detok.Push(256), "");
  EXPECT_EQ(detok.Push('b'), "b");
}

TEST(IncrementalDetokenizerTest, InvalidBytesReplacedAsSoonAsKnown) {
  auto tok = Bytes();
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.Push(0xFF), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.Push(0xE2), "");
  // 'x' cannot continue E2: the held byte becomes U+FFFD right away.
  EXPECT_EQ(detok.Push('x'), "\xEF\xBF\xBDx");
}

TEST(IncrementalDetokenizerTest, FlushReplacesIncompleteTail) {
  auto tok = Bytes();
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.Push('a'), "a");
  EXPECT_EQ(detok.Push(0xE2), "");
  EXPECT_EQ(detok.Push(0x82), "");
  EXPECT_EQ(detok.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.Flush(), "");
}

// Tokens as SentencePiece decoders see them: a leading space that the start
// of the text drops.
class LeadingSpaceTokenizer : public TableTokenizer {
 public:
  LeadingSpaceTokenizer() : TableTokenizer({" hi", " ", "<s>"}, 2) {}
  std::string DecodeToken(int32_t id, bool at_text_start) const override {
    std::string bytes = TokenBytes(id);
    if (at_text_start && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
    return bytes;
  }
};

TEST(IncrementalDetokenizerTest, OnlyTheFirstTextTokenIsDecodedAtTextStart) {
  LeadingSpaceTokenizer tok;
  IncrementalDetokenizer from_start(tok, /*at_text_start=*/true);
  EXPECT_EQ(from_start.Push(2), "");  // a special token does not start text
  EXPECT_EQ(from_start.Push(0), "hi");
  EXPECT_EQ(from_start.Push(0), " hi");
  IncrementalDetokenizer space_first(tok, /*at_text_start=*/true);
  EXPECT_EQ(space_first.Push(1), "");
  EXPECT_EQ(space_first.Push(0), " hi");
  IncrementalDetokenizer continuation(tok);
  EXPECT_EQ(continuation.Push(0), " hi");
}

// Streams of random tokens: mostly valid characters of every length cut at
// random places, plus stray and invalid bytes and special tokens.
TEST(IncrementalDetokenizerTest, StreamingEqualsOneShotOnRandomStreams) {
  std::mt19937 rng(1234);
  const std::vector<std::string> pieces = {"a",
                                           "Z",
                                           " ",
                                           "\xC3\xA9",
                                           "\xE2\x82\xAC",
                                           "\xF0\x9F\x98\x80",
                                           "\xED\x9F\xBF",
                                           "\xF4\x8F\xBF\xBF",
                                           "\x80",
                                           "\xFF",
                                           "\xC0",
                                           "\xED\xA0",
                                           "\xE0\x80",
                                           "\xF5"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string stream;
    const int n_pieces = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n_pieces; ++i) {
      // Mostly valid characters, some pure random bytes.
      if (rng() % 5 == 0) {
        stream.push_back(static_cast<char>(rng() % 256));
      } else {
        stream += pieces[rng() % pieces.size()];
      }
    }
    // Cut the stream into tokens of 1..4 bytes; add a special token now and
    // then (id = first_special).
    std::vector<std::string> table;
    std::vector<int32_t> ids;
    for (size_t pos = 0; pos < stream.size();) {
      const size_t len = std::min<size_t>(1 + rng() % 4, stream.size() - pos);
      ids.push_back(static_cast<int32_t>(table.size()));
      table.push_back(stream.substr(pos, len));
      pos += len;
      if (rng() % 7 == 0) ids.push_back(-2);  // placeholder for a special
    }
    const int32_t special = static_cast<int32_t>(table.size());
    table.push_back("<|endoftext|>");
    for (int32_t& id : ids) {
      if (id == -2) id = special;
    }
    TableTokenizer tok(table, special);
    IncrementalDetokenizer detok(tok);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = detok.Push(id);
      // Every piece on its own is valid UTF-8.
      EXPECT_EQ(Utf8Lossy(piece), piece);
      streamed += piece;
    }
    streamed += detok.Flush();
    ASSERT_EQ(streamed, Utf8Lossy(stream)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace seqboat
