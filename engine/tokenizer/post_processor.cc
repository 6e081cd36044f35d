#include "engine/tokenizer/post_processor.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/json_reader.h"

namespace seqboat {
namespace {

using json = nlohmann::json;

// The ids of special token `name` from the template's "special_tokens" map.
absl::Status SpecialIds(const json& processor, const std::string& name,
                        const std::string& where, std::vector<int32_t>* out) {
  auto specials = processor.find("special_tokens");
  const std::string field =
      absl::StrCat(where, ".special_tokens[\"", name, "\"].ids");
  if (specials == processor.end() || !specials->is_object() ||
      !specials->contains(name) || !(*specials)[name].is_object()) {
    return FieldError(field, "missing");
  }
  auto ids = (*specials)[name].find("ids");
  if (ids == (*specials)[name].end() || !ids->is_array()) {
    return FieldError(field, "must be an array of ids");
  }
  for (const json& id : *ids) {
    int64_t value;
    if (!IntInRange(id, 0, (1 << 24) - 1, &value)) {
      return FieldError(field, "must hold integer ids in [0, 2^24)");
    }
    out->push_back(static_cast<int32_t>(value));
  }
  return absl::OkStatus();
}

absl::Status ParseInto(const json& value, const std::string& where,
                       SpecialAffixes* out) {
  if (value.is_null()) return absl::OkStatus();
  std::string type;
  RETURN_IF_ERROR(TypeOf(value, where, &type));
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence") {
    auto list = value.find("processors");
    if (list == value.end() || !list->is_array()) {
      return FieldError(absl::StrCat(where, ".processors"), "must be an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      absl::Status s = ParseInto(
          (*list)[i], absl::StrCat(where, ".processors[", i, "]"), out);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") {
    return FieldError(absl::StrCat(where, ".type"),
                      absl::StrCat("unsupported post-processor \"", type,
                                   "\" (supported: TemplateProcessing, "
                                   "ByteLevel, Sequence)"));
  }
  const std::string single_where = absl::StrCat(where, ".single");
  auto single = value.find("single");
  if (single == value.end() || !single->is_array()) {
    return FieldError(single_where, "must be an array");
  }
  // A later template wraps what the earlier ones produced.
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
  bool seen_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& item = (*single)[i];
    const std::string item_where = absl::StrCat(single_where, "[", i, "]");
    if (item.is_object() && item.contains("Sequence")) {
      const json& seq = item["Sequence"];
      if (!seq.is_object() || seq.value("id", "") != "A" || seen_sequence) {
        return FieldError(item_where, "only one Sequence \"A\" is supported");
      }
      seen_sequence = true;
    } else if (item.is_object() && item.contains("SpecialToken") &&
               item["SpecialToken"].is_object() &&
               item["SpecialToken"].contains("id") &&
               item["SpecialToken"]["id"].is_string()) {
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      absl::Status s =
          SpecialIds(value, name, where, seen_sequence ? &suffix : &prefix);
      if (!s.ok()) return s;
    } else {
      return FieldError(item_where,
                        "must be {\"SpecialToken\": {\"id\": ...}} or "
                        "{\"Sequence\": {\"id\": \"A\"}}");
    }
  }
  if (!seen_sequence) {
    return FieldError(single_where, "has no Sequence \"A\"");
  }
  prefix.insert(prefix.end(), out->prefix.begin(), out->prefix.end());
  out->prefix = std::move(prefix);
  out->suffix.insert(out->suffix.end(), suffix.begin(), suffix.end());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SpecialAffixes> ParsePostProcessor(const json& value,
                                                  const std::string& where) {
  SpecialAffixes out;
  RETURN_IF_ERROR(ParseInto(value, where, &out));
  return out;
}

}  // namespace seqboat
