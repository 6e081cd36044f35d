// Token-level constrained decoding: a Constraint (JSON schema, any JSON,
// regex, choice list or EBNF grammar) compiled against one tokenizer's
// vocabulary into a Grammar, and a GrammarMatcher per sequence that gives
// the bitmask of token ids allowed next and follows the tokens accepted.
// Built on xgrammar's C++ core, whose types stay inside grammar.cc; none of
// its exceptions leave this unit (each becomes a Status).
//
// Sharing: a GrammarVocab and a compiled Grammar are immutable and shared
// (shared_ptr) by every matcher made from them; GrammarCompiler is
// thread-safe; a GrammarMatcher belongs to one sequence and one thread.
#ifndef SEQBOAT_ENGINE_GRAMMAR_GRAMMAR_H_
#define SEQBOAT_ENGINE_GRAMMAR_GRAMMAR_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/grammar/constraint.h"
#include "engine/tokenizer/tokenizer.h"

namespace xgrammar {
class CompiledGrammar;
class GrammarMatcher;
class TokenizerInfo;
}  // namespace xgrammar

namespace seqboat {

// The vocabulary as a grammar sees it: the bytes each id stands for.
class GrammarVocab {
 public:
  // token_bytes[id]: the bytes `id` adds to a text after its start; "" for
  // ids a grammar never allows (special tokens, unused ids). vocab_size
  // (>= token_bytes.size()) is the model's logits row: ids past the
  // tokenizer's are never allowed. stop_ids end the text: allowed exactly
  // when the grammar is complete.
  static absl::StatusOr<std::shared_ptr<const GrammarVocab>> FromTokenBytes(
      const std::vector<std::string>& token_bytes, int32_t vocab_size,
      std::vector<int32_t> stop_ids);
  // The tokenizer's TokenBytes for its ids, special ones left out. Tokens
  // are taken in their mid-text form: constrained output follows a prompt.
  static absl::StatusOr<std::shared_ptr<const GrammarVocab>> FromTokenizer(
      const Tokenizer& tokenizer, int32_t vocab_size,
      std::vector<int32_t> stop_ids);

  ~GrammarVocab();
  int32_t vocab_size() const { return vocab_size_; }
  int32_t bitmask_words() const;
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  // Whether a grammar may ever allow `id` (it has bytes or stops the text).
  bool MayAllow(int32_t id) const { return may_allow_[id] != 0; }

 private:
  GrammarVocab() = default;
  friend class GrammarCompiler;

  int32_t vocab_size_ = 0;
  std::vector<int32_t> stop_ids_;
  std::vector<uint8_t> may_allow_;  // per id of vocab_size
  std::unique_ptr<xgrammar::TokenizerInfo> info_;
};

// A constraint compiled for one vocabulary.
class Grammar {
 public:
  ~Grammar();
  ConstraintKind kind() const { return kind_; }
  const std::shared_ptr<const GrammarVocab>& vocab() const { return vocab_; }
  // Wall time the compilation took, for logs and benchmarks.
  double compile_ms() const { return compile_ms_; }

 private:
  Grammar() = default;
  friend class GrammarCompiler;
  friend class GrammarMatcher;

  ConstraintKind kind_ = ConstraintKind::kAnyJson;
  std::shared_ptr<const GrammarVocab> vocab_;
  double compile_ms_ = 0;
  std::unique_ptr<xgrammar::CompiledGrammar> compiled_;
};

struct GrammarCompilerOptions {
  ConstraintLimits limits;
  // Compiled grammars kept, least recently used dropped first.
  int32_t max_cached = 64;
  // Threads one compilation may use (xgrammar splits the vocabulary).
  int32_t compile_threads = 1;
};

// Compiles constraints for one vocabulary, caching the results by the
// constraint's kind and text.
class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const GrammarVocab> vocab,
                           GrammarCompilerOptions options = {});
  // The compiler for a model's vocabulary (vocab_size logits) under
  // `tokenizer`, EOS its stop: a request's stop ids are allowed beside it
  // per sequence, so one compiled grammar serves every request.
  // FAILED_PRECONDITION saying why when the vocabulary cannot be read.
  static absl::StatusOr<std::unique_ptr<GrammarCompiler>> ForTokenizer(
      const Tokenizer& tokenizer, int32_t vocab_size,
      GrammarCompilerOptions options);
  ~GrammarCompiler();

  // InvalidArgument naming the kind and the fault for a constraint that
  // breaks the limits, is malformed or uses what is not supported.
  // Two threads compiling the same new constraint may both compile it.
  absl::StatusOr<std::shared_ptr<const Grammar>> Compile(
      const Constraint& constraint);

  int64_t cache_hits() const;
  int64_t cache_misses() const;

 private:
  absl::StatusOr<std::shared_ptr<const Grammar>> CompileUncached(
      const Constraint& constraint);

  std::shared_ptr<const GrammarVocab> vocab_;
  GrammarCompilerOptions options_;

  mutable absl::Mutex mu_;
  // Most recently used first; the map points into the list.
  using Entry = std::pair<std::string, std::shared_ptr<const Grammar>>;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::list<Entry>::iterator> index_
      ABSL_GUARDED_BY(mu_);
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

// One sequence's position in a grammar.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  int32_t bitmask_words() const { return grammar_->vocab()->bitmask_words(); }

  // Writes the ids allowed next into words[0, bitmask_words()) (see
  // engine/backend/token_bitmask.h). Once terminated only the stop ids
  // are allowed. Returns false when every id is allowed (nothing to mask).
  // An error (xgrammar's internal check failing) leaves `words` allowing
  // only the stop ids.
  absl::StatusOr<bool> FillNextTokenBitmask(uint32_t* words);

  // Advances by `token`. InvalidArgument, state unchanged, when the grammar
  // does not allow it here; FailedPrecondition once terminated.
  absl::Status Accept(int32_t token);

  // Undoes the last n accepted tokens (speculative decoding's rejected
  // drafts); a stop token undone lifts termination. n <= num_accepted().
  absl::Status Rollback(int32_t n);

  // A stop token was accepted: the text is complete.
  bool IsTerminated() const;
  // The text so far is complete (a stop token would be accepted).
  bool CanStop() const;
  int32_t num_accepted() const { return num_accepted_; }

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::unique_ptr<xgrammar::GrammarMatcher> matcher_;
  int32_t num_accepted_ = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_GRAMMAR_GRAMMAR_H_
