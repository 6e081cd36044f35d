#include <memory>
#include <string>
#include <vector>

#include "fuzz/embedded_tokenizers.h"
#include "fuzz/fuzz_check.h"

namespace seqboat::fuzz {

std::vector<std::unique_ptr<Tokenizer>> LoadEmbeddedTokenizers(
    const TokenizerOptions& options) {
  std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  for (int i = 0; i < kNumEmbeddedTokenizers; ++i) {
    auto tokenizer = ParseTokenizerJson(kEmbeddedTokenizers[i].text, options);
    FUZZ_CHECK(tokenizer.ok(), "%s: %s", kEmbeddedTokenizers[i].name,
               std::string(tokenizer.status().message()).c_str());
    tokenizers.push_back(*std::move(tokenizer));
  }
  return tokenizers;
}

}  // namespace seqboat::fuzz
