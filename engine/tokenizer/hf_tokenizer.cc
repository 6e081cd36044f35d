#include "engine/tokenizer/hf_tokenizer.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/word_level_model.h"

namespace seqboat {
namespace {

using json = nlohmann::json;

constexpr std::array<std::string_view, 5> kEosPreference = {
    "<|endoftext|>", "</s>", "<|end_of_text|>", "<|eot_id|>", "<eos>"};

const json& FieldOrNull(const json& root, const char* key) {
  static const json* const kNull = new json(nullptr);
  auto it = root.find(key);
  return it == root.end() ? *kNull : *it;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Create(
    const json& root, std::vector<AddedToken> added,
    const TokenizerOptions& options) {
  auto tok = std::unique_ptr<HfTokenizer>(new HfTokenizer());
  const json& model_json = root["model"];
  const bool word_level = model_json.value("type", "") == "WordLevel";
  if (word_level) {
    absl::StatusOr<std::unique_ptr<WordLevelModel>> model =
        WordLevelModel::Parse(model_json);
    if (!model.ok()) return model.status();
    tok->model_ = *std::move(model);
  } else {
    absl::StatusOr<std::unique_ptr<BpeModel>> model =
        BpeModel::Parse(model_json);
    if (!model.ok()) return model.status();
    tok->model_ = *std::move(model);
  }

  absl::StatusOr<Normalizer> normalizer =
      Normalizer::Parse(FieldOrNull(root, "normalizer"), "normalizer");
  if (!normalizer.ok()) return normalizer.status();
  tok->normalizer_ = *std::move(normalizer);
  absl::StatusOr<std::unique_ptr<PreTokenizer>> pre =
      PreTokenizer::Parse(FieldOrNull(root, "pre_tokenizer"), "pre_tokenizer");
  if (!pre.ok()) return pre.status();
  tok->pre_tokenizer_ = *std::move(pre);
  absl::StatusOr<TokenDecoder> decoder =
      TokenDecoder::Parse(FieldOrNull(root, "decoder"), "decoder",
                          /*null_joins_words=*/word_level);
  if (!decoder.ok()) return decoder.status();
  tok->decoder_ = *std::move(decoder);
  absl::StatusOr<SpecialAffixes> affixes =
      ParsePostProcessor(FieldOrNull(root, "post_processor"), "post_processor");
  if (!affixes.ok()) return affixes.status();
  tok->affixes_ = *std::move(affixes);

  // Ids: the vocabulary's, then added tokens (which may reuse vocabulary ids,
  // as Llama's <unk> <s> </s> do, or extend past them).
  int32_t limit = tok->model_->id_limit();
  for (size_t i = 0; i < added.size(); ++i) {
    const std::string where = absl::StrCat("added_tokens[", i, "]");
    if (added[i].id < 0 || added[i].id > kMaxTokenId) {
      return FieldError(
          absl::StrCat(where, ".id"),
          absl::StrCat(added[i].id, " is outside [0, ", kMaxTokenId, "]"));
    }
    if (added[i].single_word) {
      return FieldError(absl::StrCat(where, ".single_word"),
                        "true is not supported");
    }
    limit = std::max(limit, added[i].id + 1);
  }
  tok->vocab_size_ = limit;
  tok->token_text_.resize(static_cast<size_t>(limit));
  tok->special_.assign(static_cast<size_t>(limit), false);
  for (int32_t id = 0; id < tok->model_->id_limit(); ++id) {
    tok->token_text_[id] = tok->model_->IdToToken(id);
  }
  std::vector<bool> added_seen(static_cast<size_t>(limit), false);
  for (size_t i = 0; i < added.size(); ++i) {
    AddedToken& a = added[i];
    if (added_seen[a.id]) {
      return FieldError(absl::StrCat("added_tokens[", i, "].id"),
                        absl::StrCat(a.id, " appears more than once"));
    }
    added_seen[a.id] = true;
    tok->token_text_[a.id] = a.content;
    tok->special_[a.id] = a.special;
    if (a.special && !a.content.empty()) {
      tok->special_matcher_.Add(a.content, a.id, a.lstrip, a.rstrip);
    }
    if (a.special && !options.parse_special) continue;
    if (a.normalized) {
      // Hugging Face matches these in normalized text, so it normalizes
      // their content too (Llama's Prepend turns "[x]" into "▁[x]").
      std::string content = tok->normalizer_.Normalize(a.content);
      if (!content.empty()) {
        tok->normalized_matcher_.Add(std::move(content), a.id, a.lstrip,
                                     a.rstrip);
      }
    } else {
      tok->raw_matcher_.Add(a.content, a.id, a.lstrip, a.rstrip);
    }
  }
  for (int32_t id : tok->affixes_.prefix) {
    if (id >= limit) {
      return FieldError(
          "post_processor",
          absl::StrCat("special token id ", id, " is outside the vocabulary"));
    }
  }
  for (int32_t id : tok->affixes_.suffix) {
    if (id >= limit) {
      return FieldError(
          "post_processor",
          absl::StrCat("special token id ", id, " is outside the vocabulary"));
    }
  }

  tok->token_bytes_.resize(static_cast<size_t>(limit));
  for (int32_t id = 0; id < limit; ++id) {
    // Special tokens are control, not text: their content as it stands,
    // without the space a word-joining decoder would put before a word.
    tok->token_bytes_[id] = tok->special_[id]
                                ? tok->token_text_[id]
                                : tok->decoder_.Decode(tok->token_text_[id],
                                                       /*at_text_start=*/false);
  }
  for (std::string_view eos : kEosPreference) {
    for (const AddedToken& a : added) {
      if (a.special && a.content == eos && tok->eos_token_id_ < 0) {
        tok->eos_token_id_ = a.id;
      }
    }
  }
  return tok;
}

void HfTokenizer::EncodeNormalized(std::string_view text, bool at_text_start,
                                   std::vector<int32_t>* ids) const {
  std::vector<std::string> words;
  pre_tokenizer_->Split(text, at_text_start, &words);
  for (const std::string& word : words) model_->EncodeWord(word, ids);
}

std::vector<int32_t> HfTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids(affixes_.prefix);
  EncodeText(text, text, &ids);
  ids.insert(ids.end(), affixes_.suffix.begin(), affixes_.suffix.end());
  return ids;
}

std::vector<int32_t> HfTokenizer::EncodeChat(
    std::string_view text, const std::vector<TextRange>& literal) const {
  std::vector<std::pair<size_t, size_t>> skip;
  skip.reserve(literal.size());
  for (const TextRange& r : literal) skip.emplace_back(r.begin, r.end);
  std::vector<AddedTokenMatcher::Piece> pieces;
  special_matcher_.SplitOutside(text, skip, &pieces);
  std::vector<int32_t> ids;
  for (const AddedTokenMatcher::Piece& piece : pieces) {
    if (piece.id >= 0) {
      ids.push_back(piece.id);
    } else {
      EncodeText(text, piece.text, &ids);
    }
  }
  return ids;
}

void HfTokenizer::EncodeText(std::string_view whole, std::string_view text,
                             std::vector<int32_t>* out) const {
  std::vector<int32_t>& ids = *out;
  std::vector<AddedTokenMatcher::Piece> raw;
  raw_matcher_.Split(text, &raw);
  std::vector<AddedTokenMatcher::Piece> pieces;
  for (const AddedTokenMatcher::Piece& piece : raw) {
    if (piece.id >= 0) {
      ids.push_back(piece.id);
      continue;
    }
    const std::string normalized = normalizer_.Normalize(piece.text);
    pieces.clear();
    normalized_matcher_.Split(normalized, &pieces);
    for (const AddedTokenMatcher::Piece& sub : pieces) {
      if (sub.id >= 0) {
        ids.push_back(sub.id);
      } else {
        const bool at_start = piece.text.data() == whole.data() &&
                              sub.text.data() == normalized.data();
        EncodeNormalized(sub.text, at_start, &ids);
      }
    }
  }
}

std::string HfTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return "";
  return token_bytes_[id];
}

std::string HfTokenizer::DecodeToken(int32_t id, bool at_text_start) const {
  if (id < 0 || id >= vocab_size_) return "";
  if (!at_text_start) return token_bytes_[id];
  return decoder_.Decode(token_text_[id], /*at_text_start=*/true);
}

bool HfTokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < vocab_size_ && special_[id];
}

}  // namespace seqboat
