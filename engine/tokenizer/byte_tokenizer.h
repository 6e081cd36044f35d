// Byte-level tokenizer: ids 0..255 are the bytes themselves, added tokens
// (ids >= 256) follow. Encoding never produces added tokens, so user text that
// happens to contain "<|endoftext|>" cannot inject a special token.
#ifndef SEQBOAT_ENGINE_TOKENIZER_BYTE_TOKENIZER_H_
#define SEQBOAT_ENGINE_TOKENIZER_BYTE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/added_token_matcher.h"
#include "engine/tokenizer/tokenizer.h"

namespace seqboat {

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kNumByteTokens = 256;
  // Ids above this are rejected: they would only inflate vocab_size.
  static constexpr int32_t kMaxTokenId = (1 << 24) - 1;

  // Validates the added tokens (ids in [256, kMaxTokenId], unique). Errors
  // name the offending entry as "added_tokens[i]".
  static absl::StatusOr<std::unique_ptr<ByteTokenizer>> Create(
      std::vector<AddedToken> added_tokens);

  std::vector<int32_t> Encode(std::string_view text) const override;
  // Special added tokens written in the text outside `literal` become
  // their ids; every other byte is its own id.
  std::vector<int32_t> EncodeChat(
      std::string_view text,
      const std::vector<TextRange>& literal) const override;
  std::string TokenBytes(int32_t id) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t eos_token_id() const override { return eos_token_id_; }
  bool IsSpecial(int32_t id) const override;

 private:
  struct Entry {
    std::string content;
    bool special = false;
    bool defined = false;  // false for gaps between added ids
  };
  ByteTokenizer() = default;

  // Index = id - kNumByteTokens.
  std::vector<Entry> added_;
  AddedTokenMatcher special_matcher_;
  int32_t vocab_size_ = kNumByteTokens;
  int32_t eos_token_id_ = -1;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_BYTE_TOKENIZER_H_
