// GPT-2's reversible byte <-> printable-character mapping, which byte-level
// BPE vocabularies are written in: every byte becomes one visible Unicode
// character (the space byte is "Ġ", newline "Ċ"), so token strings never hold
// raw whitespace or control bytes.
#ifndef SEQBOAT_ENGINE_TOKENIZER_BYTE_LEVEL_H_
#define SEQBOAT_ENGINE_TOKENIZER_BYTE_LEVEL_H_

#include <string>
#include <string_view>

namespace seqboat {

// Appends the mapped form of every byte of `bytes` to *out.
void ByteLevelEncode(std::string_view bytes, std::string* out);

// Maps a token string back to bytes. Returns false (out untouched) when some
// character is not one of the 256 mapped characters; Hugging Face's ByteLevel
// decoder then uses the token's own UTF-8 text, and so do callers.
bool ByteLevelDecode(std::string_view text, std::string* out);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_BYTE_LEVEL_H_
