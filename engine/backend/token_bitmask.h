// A set of token ids as a bitmask over the vocabulary: bit (id % 32) of word
// id / 32 is set when the id is in the set. The form a grammar's allowed
// next tokens take on their way to sampling (on the host, or copied to the
// device beside the suppressed ids), and the one xgrammar fills.
#ifndef SEQBOAT_ENGINE_BACKEND_TOKEN_BITMASK_H_
#define SEQBOAT_ENGINE_BACKEND_TOKEN_BITMASK_H_

#include <cstdint>

namespace seqboat {

// Words a bitmask over `vocab_size` ids takes.
constexpr int32_t TokenBitmaskWords(int32_t vocab_size) {
  return (vocab_size + 31) / 32;
}

inline bool TokenBitmaskHas(const uint32_t* words, int32_t id) {
  return (words[id >> 5] >> (id & 31)) & 1u;
}

inline void TokenBitmaskSet(uint32_t* words, int32_t id) {
  words[id >> 5] |= 1u << (id & 31);
}

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_TOKEN_BITMASK_H_
