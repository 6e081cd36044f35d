#include "engine/tokenizer/token_model.h"

#include "absl/strings/str_cat.h"
#include "base/json_reader.h"

namespace seqboat {

absl::Status ParseVocabObject(const nlohmann::json& model,
                              absl::flat_hash_map<std::string, int32_t>* vocab,
                              std::vector<std::string>* tokens) {
  auto obj = model.find("vocab");
  if (obj == model.end() || !obj->is_object()) {
    return FieldError("model.vocab", "must be an object of token -> id");
  }
  int32_t max_id = -1;
  for (auto it = obj->begin(); it != obj->end(); ++it) {
    int64_t id;
    if (!IntInRange(it.value(), 0, kMaxTokenId, &id)) {
      return FieldError(
          absl::StrCat("model.vocab[\"", it.key(), "\"]"),
          absl::StrCat("id must be an integer in [0, ", kMaxTokenId, "]"));
    }
    if (it.key().empty()) {
      return FieldError("model.vocab", "contains an empty token");
    }
    vocab->emplace(it.key(), static_cast<int32_t>(id));
    if (id > max_id) max_id = static_cast<int32_t>(id);
  }
  tokens->assign(static_cast<size_t>(max_id + 1), std::string());
  std::vector<bool> used(tokens->size(), false);
  for (const auto& [token, id] : *vocab) {
    if (used[id]) {
      return FieldError(
          absl::StrCat("model.vocab[\"", token, "\"]"),
          absl::StrCat("id ", id, " is used by \"", (*tokens)[id], "\" too"));
    }
    used[id] = true;
    (*tokens)[id] = token;
  }
  return absl::OkStatus();
}

}  // namespace seqboat
