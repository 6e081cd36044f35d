#include "engine/grammar/grammar.h"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "base/status_macros.h"
#include "engine/backend/token_bitmask.h"
#include "xgrammar/xgrammar.h"

namespace seqboat {
namespace {

// xgrammar reports faults by throwing; its messages name the rule, schema
// keyword or regex position at fault.
absl::Status FromException(std::string_view what, const std::exception& e) {
  return absl::InvalidArgumentError(
      absl::StrCat(AbslView(what), ": ", e.what()));
}

DLTensor BitmaskTensor(uint32_t* words, int64_t* shape) {
  DLTensor t{};
  t.data = words;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = xgrammar::GetBitmaskDLType();
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

std::string CacheKey(const Constraint& c) {
  std::string key(ConstraintKindName(c.kind));
  key += '\0';
  key += c.text;
  // Length-prefixed, so that no two choice lists share a key.
  for (const std::string& choice : c.choices)
    absl::StrAppend(&key, "\0", choice.size(), ":", choice);
  return key;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const GrammarVocab>>
GrammarVocab::FromTokenBytes(const std::vector<std::string>& token_bytes,
                             int32_t vocab_size,
                             std::vector<int32_t> stop_ids) {
  if (vocab_size <= 0 || static_cast<int64_t>(token_bytes.size()) > vocab_size)
    return absl::InvalidArgumentError(absl::StrCat(
        "grammar vocabulary: vocab_size ", vocab_size,
        " is not positive or below the ", token_bytes.size(), " tokens given"));
  std::sort(stop_ids.begin(), stop_ids.end());
  stop_ids.erase(std::unique(stop_ids.begin(), stop_ids.end()), stop_ids.end());
  for (int32_t id : stop_ids) {
    if (id < 0 || id >= static_cast<int32_t>(token_bytes.size()))
      return absl::InvalidArgumentError(absl::StrCat(
          "grammar vocabulary: stop id ", id, " is not a token id"));
  }
  auto vocab = std::shared_ptr<GrammarVocab>(new GrammarVocab());
  vocab->vocab_size_ = vocab_size;
  vocab->stop_ids_ = stop_ids;
  vocab->may_allow_.assign(vocab_size, 0);
  for (size_t id = 0; id < token_bytes.size(); ++id)
    vocab->may_allow_[id] = !token_bytes[id].empty();
  for (int32_t id : stop_ids) vocab->may_allow_[id] = 1;
  try {
    // RAW: the strings are the token's bytes already (the tokenizer's
    // decoder undid byte-level and byte-fallback spellings); "" marks a
    // token no grammar allows.
    vocab->info_ = std::make_unique<xgrammar::TokenizerInfo>(
        token_bytes, xgrammar::VocabType::RAW, vocab_size, stop_ids,
        /*add_prefix_space=*/false);
  } catch (const std::exception& e) {
    return FromException("grammar vocabulary", e);
  }
  return std::shared_ptr<const GrammarVocab>(std::move(vocab));
}

absl::StatusOr<std::shared_ptr<const GrammarVocab>> GrammarVocab::FromTokenizer(
    const Tokenizer& tokenizer, int32_t vocab_size,
    std::vector<int32_t> stop_ids) {
  std::vector<std::string> bytes(tokenizer.vocab_size());
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (!tokenizer.IsSpecial(id)) bytes[id] = tokenizer.TokenBytes(id);
  }
  return FromTokenBytes(bytes, vocab_size, std::move(stop_ids));
}

GrammarVocab::~GrammarVocab() = default;

int32_t GrammarVocab::bitmask_words() const {
  return TokenBitmaskWords(vocab_size_);
}

Grammar::~Grammar() = default;

absl::StatusOr<std::unique_ptr<GrammarCompiler>> GrammarCompiler::ForTokenizer(
    const Tokenizer& tokenizer, int32_t vocab_size,
    GrammarCompilerOptions options) {
  std::vector<int32_t> stops;
  if (tokenizer.eos_token_id() >= 0) stops.push_back(tokenizer.eos_token_id());
  absl::StatusOr<std::shared_ptr<const GrammarVocab>> vocab =
      GrammarVocab::FromTokenizer(tokenizer, vocab_size, std::move(stops));
  if (!vocab.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("constrained decoding is unavailable for this tokenizer: ",
                     vocab.status().message()));
  }
  return std::make_unique<GrammarCompiler>(*std::move(vocab), options);
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const GrammarVocab> vocab,
                                 GrammarCompilerOptions options)
    : vocab_(std::move(vocab)), options_(options) {}

GrammarCompiler::~GrammarCompiler() = default;

absl::StatusOr<std::shared_ptr<const Grammar>> GrammarCompiler::Compile(
    const Constraint& constraint) {
  const std::string key = CacheKey(constraint);
  {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
    ++misses_;
  }
  // Compiled outside the lock: other requests' lookups do not wait.
  ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> grammar,
                   CompileUncached(constraint));
  absl::MutexLock lock(&mu_);
  if (index_.contains(key) || options_.max_cached <= 0) return grammar;
  lru_.emplace_front(key, grammar);
  index_[key] = lru_.begin();
  while (static_cast<int32_t>(lru_.size()) > options_.max_cached) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return grammar;
}

absl::StatusOr<std::shared_ptr<const Grammar>> GrammarCompiler::CompileUncached(
    const Constraint& c) {
  RETURN_IF_ERROR(CheckConstraint(c, options_.limits));
  const auto start = std::chrono::steady_clock::now();
  auto grammar = std::shared_ptr<Grammar>(new Grammar());
  grammar->kind_ = c.kind;
  grammar->vocab_ = vocab_;
  try {
    // One compiler per compilation, without xgrammar's own cache (ours is
    // bounded): compilations share no state and run concurrently.
    xgrammar::GrammarCompiler compiler(*vocab_->info_,
                                       std::max(1, options_.compile_threads),
                                       /*cache_enabled=*/false);
    switch (c.kind) {
      case ConstraintKind::kJsonSchema:
        grammar->compiled_ = std::make_unique<xgrammar::CompiledGrammar>(
            // Compact JSON (", " and ": " between items, no other
            // whitespace): with any whitespace allowed, small models
            // wander into runs of spaces and newlines until max_tokens.
            compiler.CompileJSONSchema(c.text, /*any_whitespace=*/false));
        break;
      case ConstraintKind::kAnyJson:
        grammar->compiled_ = std::make_unique<xgrammar::CompiledGrammar>(
            compiler.CompileBuiltinJSONGrammar());
        break;
      case ConstraintKind::kRegex:
        grammar->compiled_ = std::make_unique<xgrammar::CompiledGrammar>(
            compiler.CompileRegex(c.text));
        break;
      case ConstraintKind::kChoice:
        grammar->compiled_ = std::make_unique<xgrammar::CompiledGrammar>(
            compiler.CompileGrammar(ChoicesToEbnf(c.choices)));
        break;
      case ConstraintKind::kGrammar:
        grammar->compiled_ = std::make_unique<xgrammar::CompiledGrammar>(
            compiler.CompileGrammar(c.text, "root"));
        break;
    }
  } catch (const std::exception& e) {
    return FromException(ConstraintKindName(c.kind), e);
  }
  if (grammar->compiled_ == nullptr)
    return absl::InvalidArgumentError("unknown constraint kind");
  grammar->compile_ms_ = std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  return std::shared_ptr<const Grammar>(std::move(grammar));
}

int64_t GrammarCompiler::cache_hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

int64_t GrammarCompiler::cache_misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)),
      matcher_(std::make_unique<xgrammar::GrammarMatcher>(
          *grammar_->compiled_, std::nullopt,
          /*terminate_without_stop_token=*/false)) {}

GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

absl::StatusOr<bool> GrammarMatcher::FillNextTokenBitmask(uint32_t* words) {
  const GrammarVocab& vocab = *grammar_->vocab();
  auto only_stop = [&] {
    std::fill(words, words + vocab.bitmask_words(), 0u);
    for (int32_t id : vocab.stop_ids()) TokenBitmaskSet(words, id);
  };
  if (matcher_->IsTerminated()) {
    only_stop();
    return true;
  }
  int64_t shape[1] = {vocab.bitmask_words()};
  DLTensor tensor = BitmaskTensor(words, shape);
  try {
    return matcher_->FillNextTokenBitmask(&tensor);
  } catch (const std::exception& e) {
    only_stop();
    return absl::InternalError(absl::StrCat("grammar mask: ", e.what()));
  }
}

absl::Status GrammarMatcher::Accept(int32_t token) {
  const GrammarVocab& vocab = *grammar_->vocab();
  if (token < 0 || token >= vocab.vocab_size())
    return absl::InvalidArgumentError(
        absl::StrCat("token ", token, " is outside the vocabulary"));
  if (matcher_->IsTerminated())
    return absl::FailedPreconditionError(
        absl::StrCat("token ", token, " after the grammar's stop token"));
  bool accepted = false;
  // Tokens without bytes are refused here, before xgrammar (which would
  // log a warning for each).
  if (vocab.MayAllow(token)) {
    try {
      accepted = matcher_->AcceptToken(token);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("grammar accept: ", e.what()));
    }
  }
  if (!accepted)
    return absl::InvalidArgumentError(absl::StrCat(
        "token ", token, " is not allowed by the ",
        AbslView(ConstraintKindName(grammar_->kind())), " constraint here"));
  ++num_accepted_;
  return absl::OkStatus();
}

absl::Status GrammarMatcher::Rollback(int32_t n) {
  if (n < 0 || n > num_accepted_)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot roll back ", n, " tokens of ", num_accepted_));
  if (n == 0) return absl::OkStatus();
  try {
    matcher_->Rollback(n);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("grammar rollback: ", e.what()));
  }
  num_accepted_ -= n;
  return absl::OkStatus();
}

bool GrammarMatcher::IsTerminated() const { return matcher_->IsTerminated(); }

bool GrammarMatcher::CanStop() const {
  return matcher_->IsTerminated() || matcher_->IsCompleted();
}

}  // namespace seqboat
