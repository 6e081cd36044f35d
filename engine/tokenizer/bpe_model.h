// tokenizer.json's "model" when its type is "BPE": the vocabulary, the ranked
// merges and the rules for characters outside the vocabulary (byte fallback
// to <0xXX> tokens, or the unk token). Encoding a word follows Hugging Face's
// algorithm exactly: start from one symbol per character, then repeatedly
// apply the lowest-ranked merge present (leftmost first on ties) through a
// priority queue over a linked list of symbols.
//
// Thread-safe: results for short words are kept in a bounded cache behind a
// mutex, so the server's threads can share one model.
#ifndef SEQBOAT_ENGINE_TOKENIZER_BPE_MODEL_H_
#define SEQBOAT_ENGINE_TOKENIZER_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/tokenizer/token_model.h"
#include "nlohmann/json.hpp"

namespace seqboat {

class BpeModel final : public TokenModel {
 public:
  // Words longer than this (bytes) are not cached.
  static constexpr size_t kMaxCachedWordBytes = 256;
  // The cache starts over once it holds this many words.
  static constexpr size_t kCacheCapacity = 10000;

  // `model` is tokenizer.json's "model" object. Errors name the field, as
  // "model.vocab", "model.merges[12]", "model.unk_token".
  static absl::StatusOr<std::unique_ptr<BpeModel>> Parse(
      const nlohmann::json& model);

  void EncodeWord(std::string_view word,
                  std::vector<int32_t>* ids) const override;

  // -1 when `token` is not in the vocabulary.
  int32_t TokenToId(std::string_view token) const;
  const std::string& IdToToken(int32_t id) const override;
  int32_t id_limit() const override {
    return static_cast<int32_t>(tokens_.size());
  }
  bool byte_fallback() const { return byte_fallback_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  BpeModel() = default;
  absl::Status ParseMerges(const nlohmann::json& model);
  std::vector<int32_t> Tokenize(std::string_view word) const;
  const Merge* FindMerge(int32_t left, int32_t right) const;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;              // by id
  absl::flat_hash_map<uint64_t, Merge> merges_;  // key: left << 32 | right
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_;  // <0xXX> ids, -1 if absent

  mutable absl::Mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_
      ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_BPE_MODEL_H_
