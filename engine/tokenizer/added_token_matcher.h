// Finds added tokens in text the way Hugging Face's AddedVocabulary does:
// leftmost match first, the longest one at that position, matches never
// overlap; `lstrip`/`rstrip` tokens also swallow the whitespace on that side.
// The text between matches is left for the normalizer and the model.
#ifndef SEQBOAT_ENGINE_TOKENIZER_ADDED_TOKEN_MATCHER_H_
#define SEQBOAT_ENGINE_TOKENIZER_ADDED_TOKEN_MATCHER_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace seqboat {

class AddedTokenMatcher {
 public:
  struct Piece {
    std::string_view text;
    int32_t id;  // -1: plain text between tokens
  };

  // `content` must be non-empty.
  void Add(std::string content, int32_t id, bool lstrip, bool rstrip);
  bool empty() const { return tokens_.empty(); }

  // Appends the pieces of `text` in order; plain pieces are never empty.
  void Split(std::string_view text, std::vector<Piece>* out) const;
  // The same, but a token is matched only outside the byte ranges `skip`
  // (sorted, disjoint [begin, end)): text there stays plain.
  void SplitOutside(std::string_view text,
                    const std::vector<std::pair<size_t, size_t>>& skip,
                    std::vector<Piece>* out) const;

 private:
  struct Token {
    std::string content;
    int32_t id;
    bool lstrip;
    bool rstrip;
  };
  // Index into tokens_ of the longest token matching at text[pos], or -1.
  int Match(std::string_view text, size_t pos) const;

  std::vector<Token> tokens_;
  // Tokens by first byte, longest first.
  std::array<std::vector<int>, 256> by_first_byte_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_ADDED_TOKEN_MATCHER_H_
