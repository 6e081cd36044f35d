// Lossy UTF-8 decoding with the "maximal subpart" replacement policy of the
// Unicode standard (the one Python's errors="replace" and Rust's
// from_utf8_lossy use): each maximal prefix of a well-formed sequence that
// cannot be completed becomes one U+FFFD, and a byte that cannot start a
// sequence becomes one U+FFFD. Because the decision at each position depends
// only on bytes already seen, decoding can be resumed after more bytes arrive
// and gives the same text as a one-shot decode.
#ifndef SEQBOAT_ENGINE_TOKENIZER_UTF8_H_
#define SEQBOAT_ENGINE_TOKENIZER_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace seqboat {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// Appends the decoded text of `bytes` to *out and returns how many bytes were
// consumed. With final=false a trailing sequence that is incomplete but still
// valid so far is left unconsumed (the caller keeps it for later); with
// final=true it is replaced by U+FFFD and everything is consumed.
size_t DecodeUtf8Lossy(std::string_view bytes, bool final, std::string* out);

// One-shot lossy decode of a complete byte string.
std::string Utf8Lossy(std::string_view bytes);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_UTF8_H_
