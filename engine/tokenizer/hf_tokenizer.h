// A Hugging Face tokenizer.json with a BPE or WordLevel model behind the
// Tokenizer interface: byte-level BPE (GPT-2, GPT-NeoX, Llama 3),
// SentencePiece-style BPE with byte fallback (Llama 1/2, Mistral), and the
// word-level vocabularies of fairseq dictionaries. Encode follows Hugging
// Face's pipeline: added tokens split the text, each remaining piece is
// normalized, added tokens marked `normalized` are matched in the normalized
// text, the rest is pre-tokenized into words and each word is merged by the
// model; the post-processor's special tokens (BOS) go around the result.
#ifndef SEQBOAT_ENGINE_TOKENIZER_HF_TOKENIZER_H_
#define SEQBOAT_ENGINE_TOKENIZER_HF_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/added_token_matcher.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/post_processor.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/token_decoder.h"
#include "engine/tokenizer/token_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace seqboat {

class HfTokenizer : public Tokenizer {
 public:
  // `root` is the whole tokenizer.json, its model.type "BPE" or
  // "WordLevel"; `added` its parsed added_tokens. A WordLevel file may leave
  // "decoder" null: the words are then joined with spaces, as Hugging Face
  // joins them.
  // EOS is the first special token among "<|endoftext|>", "</s>",
  // "<|end_of_text|>", "<|eot_id|>", "<eos>" (in that order of preference).
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Create(
      const nlohmann::json& root, std::vector<AddedToken> added,
      const TokenizerOptions& options);

  std::vector<int32_t> Encode(std::string_view text) const override;
  std::vector<int32_t> EncodeChat(
      std::string_view text,
      const std::vector<TextRange>& literal) const override;
  std::string TokenBytes(int32_t id) const override;
  std::string DecodeToken(int32_t id, bool at_text_start) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t eos_token_id() const override { return eos_token_id_; }
  bool IsSpecial(int32_t id) const override;

 private:
  HfTokenizer() = default;
  void EncodeNormalized(std::string_view text, bool at_text_start,
                        std::vector<int32_t>* ids) const;
  // `text`, a part of `whole` between special tokens, through the added
  // tokens, the normalizer, the pre-tokenizer and the model.
  void EncodeText(std::string_view whole, std::string_view text,
                  std::vector<int32_t>* ids) const;

  std::unique_ptr<TokenModel> model_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  Normalizer normalizer_;
  TokenDecoder decoder_;
  SpecialAffixes affixes_;
  AddedTokenMatcher raw_matcher_;         // matched before normalization
  AddedTokenMatcher normalized_matcher_;  // matched in normalized text
  AddedTokenMatcher special_matcher_;     // every special token, for chat
  std::vector<std::string> token_text_;   // token string by id
  std::vector<std::string> token_bytes_;  // decoded bytes by id
  std::vector<bool> special_;
  int32_t vocab_size_ = 0;
  int32_t eos_token_id_ = -1;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_HF_TOKENIZER_H_
