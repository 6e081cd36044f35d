#include "engine/tokenizer/tokenizer.h"

#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_text.h"
#include "base/json_reader.h"
#include "base/status_macros.h"
#include "engine/tokenizer/byte_tokenizer.h"
#include "engine/tokenizer/eos_override.h"
#include "engine/tokenizer/hf_tokenizer.h"
#include "nlohmann/json.hpp"

namespace seqboat {
namespace {

using json = nlohmann::json;

absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const json& root) {
  std::vector<AddedToken> out;
  auto it = root.find("added_tokens");
  // Absent or null: the tokenizer simply has no added tokens.
  if (it == root.end() || it->is_null()) return out;
  if (!it->is_array()) {
    return absl::InvalidArgumentError("added_tokens: must be an array");
  }
  out.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const json& entry = (*it)[i];
    const std::string where = absl::StrCat("added_tokens[", i, "]");
    if (!entry.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": must be an object"));
    }
    AddedToken token;
    auto id = entry.find("id");
    if (id == entry.end() || !id->is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".id: must be an integer"));
    }
    // nlohmann stores non-negative literals as unsigned; check the range
    // before narrowing so huge values are rejected rather than wrapped.
    const bool in_range =
        id->is_number_unsigned()
            ? id->get<uint64_t>() <=
                  static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
            : (id->get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
               id->get<int64_t>() <= std::numeric_limits<int32_t>::max());
    if (!in_range) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".id: out of range"));
    }
    const int64_t id_value = id->is_number_unsigned()
                                 ? static_cast<int64_t>(id->get<uint64_t>())
                                 : id->get<int64_t>();
    token.id = static_cast<int32_t>(id_value);
    auto content = entry.find("content");
    if (content == entry.end() || !content->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".content: must be a string"));
    }
    token.content = content->get<std::string>();
    if (token.content.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".content: must not be empty"));
    }
    auto special = entry.find("special");
    if (special != entry.end()) {
      if (!special->is_boolean()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".special: must be a boolean"));
      }
      token.special = special->get<bool>();
    }
    token.normalized = !token.special;
    for (auto [key, field] : {std::pair{"normalized", &token.normalized},
                              std::pair{"lstrip", &token.lstrip},
                              std::pair{"rstrip", &token.rstrip},
                              std::pair{"single_word", &token.single_word}}) {
      RETURN_IF_ERROR(OptionalBool(entry, key, where, field));
    }
    out.push_back(std::move(token));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> ParseTokenizerJson(
    std::string_view json_text, const TokenizerOptions& options) {
  RETURN_IF_ERROR(CheckJsonDepth(json_text));
  const json root = json::parse(json_text.begin(), json_text.end(), nullptr,
                                /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError("not valid JSON");
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError("top level: must be a JSON object");
  }
  auto model = root.find("model");
  if (model == root.end() || !model->is_object()) {
    return absl::InvalidArgumentError("model: must be an object");
  }
  auto type = model->find("type");
  if (type == model->end() || !type->is_string()) {
    return absl::InvalidArgumentError("model.type: must be a string");
  }
  absl::StatusOr<std::vector<AddedToken>> added = ParseAddedTokens(root);
  if (!added.ok()) return added.status();

  // One branch per tokenizer model; each implementation validates its own
  // part of `model` and receives the shared added tokens.
  const std::string& type_name = type->get_ref<const std::string&>();
  std::unique_ptr<Tokenizer> result;
  if (type_name == "Bytes") {
    absl::StatusOr<std::unique_ptr<ByteTokenizer>> tok =
        ByteTokenizer::Create(*std::move(added));
    if (!tok.ok()) return tok.status();
    result = *std::move(tok);
  } else if (type_name == "BPE" || type_name == "WordLevel") {
    absl::StatusOr<std::unique_ptr<HfTokenizer>> tok =
        HfTokenizer::Create(root, *std::move(added), options);
    if (!tok.ok()) return tok.status();
    result = *std::move(tok);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("model.type: unsupported tokenizer model \"", type_name,
                     "\" (supported: \"Bytes\", \"BPE\", \"WordLevel\")"));
  }
  if (options.eos_token_id >= 0) {
    return WithEosOverride(std::move(result), options.eos_token_id);
  }
  return result;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    const std::string& path, const TokenizerOptions& options) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadFileText(path, kMaxTokenizerJsonBytes));
  return ParseTokenizerFile(text, path, options);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> ParseTokenizerFile(
    std::string_view json_text, const std::string& source,
    const TokenizerOptions& options) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      ParseTokenizerJson(json_text, options);
  if (!tok.ok()) {
    return absl::Status(tok.status().code(),
                        absl::StrCat(source, ": ", tok.status().message()));
  }
  return tok;
}

}  // namespace seqboat
