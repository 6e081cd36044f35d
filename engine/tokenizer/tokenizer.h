// The tokenizer interface the engine programs against, and the loader that
// builds one from a Hugging Face style tokenizer.json. The `model.type` field
// selects the implementation; every implementation shares the `added_tokens`
// handling parsed here.
#ifndef SEQBOAT_ENGINE_TOKENIZER_TOKENIZER_H_
#define SEQBOAT_ENGINE_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace seqboat {

// Thread-safe for concurrent const use once built (implementations hold no
// mutable state), so the server's threads can share one instance.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;
  // The raw bytes a token stands for (may be partial UTF-8). Special tokens
  // return their content. Ids the tokenizer does not define return "".
  virtual std::string TokenBytes(int32_t id) const = 0;
  virtual int32_t vocab_size()
      const = 0;  // ids the tokenizer defines (0..vocab_size-1)
  virtual int32_t eos_token_id() const = 0;  // -1 if none
  virtual bool IsSpecial(int32_t id) const = 0;
};

// One entry of tokenizer.json's "added_tokens" array.
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
};

// Reads a tokenizer.json. Errors name the file and the field at fault.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    const std::string& path);
// Same, from the file's text; errors name the field at fault.
absl::StatusOr<std::unique_ptr<Tokenizer>> ParseTokenizerJson(
    std::string_view json_text);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_TOKENIZER_H_
