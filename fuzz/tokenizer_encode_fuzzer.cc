// Encode on arbitrary text with each tokenizer embedded from the
// tokenizer_json corpus (byte-level BPE as GPT-2, GPT-NeoX and Llama 3 have
// it, SentencePiece-style BPE with byte fallback, WordLevel, raw bytes, and
// small ones with the other normalizers, pre-tokenizers and decoders the
// loader reads). The first input byte picks
// the tokenizer (low 7 bits) and whether special tokens are parsed (high
// bit); the rest is the text. Every id is in the vocabulary, the ids
// detokenize incrementally as they do at once, and where the tokenizer is
// lossless on the text, decoding gives the text back.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/embedded_tokenizers.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/tokenizer_checks.h"

namespace {

using seqboat::fuzz::kEmbeddedTokenizers;

bool IsAscii(std::string_view text) {
  for (unsigned char c : text) {
    if (c >= 0x80) return false;
  }
  return true;
}

// Whether decoding Encode(text) must give `text` back with special tokens
// written as text. WordLevel drops whitespace and maps unknown words to
// <unk>; NFC (neox) may change non-ASCII text; the SentencePiece style
// (llama) moves spaces around added tokens and reads a literal U+2581 as a
// space, as Hugging Face's tokenizers does.
bool RoundTrips(std::string_view tokenizer, std::string_view text) {
  if (tokenizer == "byte_bpe.json" || tokenizer == "llama3_bpe.json" ||
      tokenizer == "bytes.json") {
    return true;
  }
  return tokenizer == "neox_bpe.json" && IsAscii(text);
}

using Tokenizers = std::vector<std::unique_ptr<seqboat::Tokenizer>>;

const Tokenizers* Load(bool parse_special) {
  seqboat::TokenizerOptions options;
  options.parse_special = parse_special;
  return new Tokenizers(seqboat::fuzz::LoadEmbeddedTokenizers(options));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const auto* const plain = Load(/*parse_special=*/false);
  static const auto* const parsing_special = Load(/*parse_special=*/true);
  const int which = (data[0] & 0x7f) % seqboat::fuzz::kNumEmbeddedTokenizers;
  const bool parse_special = (data[0] & 0x80) != 0;
  const seqboat::Tokenizer& tokenizer =
      *(parse_special ? *parsing_special : *plain)[which];
  const std::string_view text(reinterpret_cast<const char*>(data + 1),
                              size - 1);

  const std::vector<int32_t> ids =
      seqboat::fuzz::CheckedEncode(tokenizer, text);
  const std::string decoded =
      seqboat::fuzz::CheckedDetokenize(tokenizer, ids, /*at_text_start=*/true);
  if (!parse_special && seqboat::fuzz::IsValidUtf8(text) &&
      RoundTrips(kEmbeddedTokenizers[which].name, text)) {
    FUZZ_CHECK(decoded == text, "%s: \"%s\" decodes to \"%s\"",
               kEmbeddedTokenizers[which].name, std::string(text).c_str(),
               decoded.c_str());
  }
  return 0;
}
