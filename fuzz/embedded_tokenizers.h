// tokenizer.json files of the tokenizer_json corpus (fuzz/BUILD names them),
// compiled into the fuzz targets that encode and decode with fixed
// tokenizers.
#ifndef SEQBOAT_FUZZ_EMBEDDED_TOKENIZERS_H_
#define SEQBOAT_FUZZ_EMBEDDED_TOKENIZERS_H_

#include <memory>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace seqboat::fuzz {

struct EmbeddedFile {
  const char* name;
  const char* text;
};

extern const EmbeddedFile kEmbeddedTokenizers[];
extern const int kNumEmbeddedTokenizers;

// Each embedded tokenizer loaded with `options`, in kEmbeddedTokenizers'
// order. Aborts if one does not load: the corpus files are known good.
std::vector<std::unique_ptr<Tokenizer>> LoadEmbeddedTokenizers(
    const TokenizerOptions& options);

}  // namespace seqboat::fuzz

#endif  // SEQBOAT_FUZZ_EMBEDDED_TOKENIZERS_H_
