#include "engine/tokenizer/word_level_model.h"

#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "base/status_macros.h"

namespace seqboat {

absl::StatusOr<std::unique_ptr<WordLevelModel>> WordLevelModel::Parse(
    const nlohmann::json& model) {
  auto m = std::unique_ptr<WordLevelModel>(new WordLevelModel());
  RETURN_IF_ERROR(ParseVocabObject(model, &m->vocab_, &m->tokens_));
  std::string unk;
  RETURN_IF_ERROR(RequiredString(model, "unk_token", "model", &unk));
  auto it = m->vocab_.find(unk);
  if (it == m->vocab_.end()) {
    return FieldError("model.unk_token",
                      absl::StrCat("\"", unk, "\" is not in model.vocab"));
  }
  m->unk_id_ = it->second;
  return m;
}

void WordLevelModel::EncodeWord(std::string_view word,
                                std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  auto it = vocab_.find(AbslView(word));
  ids->push_back(it == vocab_.end() ? unk_id_ : it->second);
}

const std::string& WordLevelModel::IdToToken(int32_t id) const {
  static const std::string* const kEmpty = new std::string();
  if (id < 0 || id >= id_limit()) return *kEmpty;
  return tokens_[id];
}

}  // namespace seqboat
