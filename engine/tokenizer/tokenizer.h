// The tokenizer interface the engine programs against, and the loader that
// builds one from a Hugging Face style tokenizer.json. The `model.type` field
// selects the implementation; every implementation shares the `added_tokens`
// handling parsed here.
#ifndef SEQBOAT_ENGINE_TOKENIZER_TOKENIZER_H_
#define SEQBOAT_ENGINE_TOKENIZER_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace seqboat {

// A byte range [begin, end) of a text.
struct TextRange {
  size_t begin = 0;
  size_t end = 0;
};

// Thread-safe for concurrent const use once built (implementations hold no
// unsynchronised mutable state), so the server's threads can share one
// instance.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;
  // Encodes a prompt rendered from a chat template as transformers
  // tokenizes one (add_special_tokens=False: the template writes BOS
  // itself): special tokens written in `text` become their ids, whatever
  // TokenizerOptions::parse_special says, except inside the `literal` ranges
  // (sorted, disjoint: text from the client, which must not become control
  // tokens); no post-processor tokens are added. The default, for tokenizers
  // without special-token text, is Encode.
  virtual std::vector<int32_t> EncodeChat(
      std::string_view text, const std::vector<TextRange>& literal) const {
    return Encode(text);
  }
  // The raw bytes a token stands for (may be partial UTF-8). Special tokens
  // return their content. Ids the tokenizer does not define return "".
  virtual std::string TokenBytes(int32_t id) const = 0;
  virtual int32_t vocab_size()
      const = 0;  // ids the tokenizer defines (0..vocab_size-1)
  virtual int32_t eos_token_id() const = 0;  // -1 if none
  virtual bool IsSpecial(int32_t id) const = 0;
  // The bytes the token contributes when it is (at_text_start) or is not the
  // first non-special token of a text. They differ only for tokenizers whose
  // decoder strips the text's first space (SentencePiece-style "▁Hello" is
  // "Hello" at the start, " Hello" later); TokenBytes is the later form.
  virtual std::string DecodeToken(int32_t id, bool at_text_start) const {
    return TokenBytes(id);
  }
};

// One entry of tokenizer.json's "added_tokens" array.
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  // Hugging Face matching options. Absent `normalized` means !special.
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

struct TokenizerOptions {
  // Whether special added tokens written in the text ("<|endoftext|>",
  // "</s>") become their ids. Off by default: the server tokenizes user
  // text, which must not be able to inject control tokens; such text is
  // tokenized as ordinary characters (Hugging Face's encode_special_tokens).
  // Non-special added tokens are always matched.
  bool parse_special = false;
  // When >= 0, replaces the EOS id found among the special tokens (a model's
  // config.json may name a different one). Must be < vocab_size().
  int32_t eos_token_id = -1;
};

// The largest tokenizer.json read (the largest vocabularies' files are tens
// of megabytes).
inline constexpr int64_t kMaxTokenizerJsonBytes = int64_t{256} << 20;

// Reads a tokenizer.json. Errors name the file and the field at fault.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    const std::string& path, const TokenizerOptions& options = {});
// A tokenizer.json's text read elsewhere; errors start with `source`.
absl::StatusOr<std::unique_ptr<Tokenizer>> ParseTokenizerFile(
    std::string_view json_text, const std::string& source,
    const TokenizerOptions& options = {});
// Same, from the file's text; errors name the field at fault.
absl::StatusOr<std::unique_ptr<Tokenizer>> ParseTokenizerJson(
    std::string_view json_text, const TokenizerOptions& options = {});

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_TOKENIZER_H_
