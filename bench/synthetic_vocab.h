// A synthetic vocabulary shaped like a large byte-level BPE one, for the
// constrained-decoding benchmarks (a real 248k tokenizer is not in the tree).
#ifndef SEQBOAT_BENCH_SYNTHETIC_VOCAB_H_
#define SEQBOAT_BENCH_SYNTHETIC_VOCAB_H_

#include <cstdint>
#include <string>
#include <vector>

namespace seqboat::bench {

struct Vocab {
  std::string name;
  std::vector<std::string> tokens;  // the last is the stop token ("")
};

// `size` tokens: every byte, then distinct pieces of 2-12 characters: words
// with and without a leading space, digits, JSON punctuation runs and
// multi-byte UTF-8, roughly the mix of a large byte-level BPE vocabulary;
// the last is the stop token. Sorted (but the stop), so ids are not the
// bytes' values. Deterministic per size.
Vocab Synthetic(int32_t size);

// tokenizer.json of a byte-level BPE tokenizer over `vocab`'s tokens (no
// merges: ids are given, never encoded from text), the 256 bytes first in
// byte order, then EOS at id 256 (special, "<|endoftext|>", as
// bench/random_model's configs name it), then the other tokens.
std::string SyntheticTokenizerJson(const Vocab& vocab);

}  // namespace seqboat::bench

#endif  // SEQBOAT_BENCH_SYNTHETIC_VOCAB_H_
