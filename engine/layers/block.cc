#include "engine/layers/block.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace seqboat {
namespace {

constexpr struct {
  NormType type;
  std::string_view name;
} kNormTypes[] = {
    {NormType::kRmsNorm, "rmsnorm"},
    {NormType::kLayerNorm, "layernorm"},
    {NormType::kRmsNormT5, "rmsnorm_t5"},
    {NormType::kScaleNorm, "scalenorm"},
};

}  // namespace

std::string_view NormTypeName(NormType type) {
  for (const auto& t : kNormTypes) {
    if (t.type == type) return t.name;
  }
  return "?";
}

absl::Status ParseNorm(ObjectReader& parent, const char* key,
                       std::vector<std::string>* warnings,
                       std::optional<NormConfig>* out) {
  const nlohmann::json* value = parent.Get(key);
  if (value == nullptr) return parent.Missing(key, "a norm object or null");
  out->reset();
  if (value->is_null()) return absl::OkStatus();
  if (!value->is_object()) {
    return parent.Invalid(key, "a norm object or null", *value);
  }
  ObjectReader reader(*value, parent.source(),
                      parent.context().empty()
                          ? key
                          : absl::StrCat(parent.context(), ": ", key));
  NormConfig norm;
  std::string type;
  RETURN_IF_ERROR(reader.String("type", &type));
  bool found = false;
  for (const auto& t : kNormTypes) {
    if (t.name == type) {
      norm.type = t.type;
      found = true;
    }
  }
  if (!found) {
    return reader.Invalid(
        "type",
        "one of \"rmsnorm\", \"layernorm\", \"rmsnorm_t5\", \"scalenorm\"",
        *reader.Get("type"));
  }
  RETURN_IF_ERROR(reader.PositiveNumber("eps", &norm.eps));
  RETURN_IF_ERROR(reader.OptionalBool("affine", true, &norm.affine));
  reader.ReportUnknown(warnings);
  *out = norm;
  return absl::OkStatus();
}

absl::Status ParseChoice(ObjectReader& r, const char* key,
                         std::initializer_list<std::string_view> names,
                         int* out) {
  std::string value;
  RETURN_IF_ERROR(r.String(key, &value));
  std::string expected = "one of";
  int i = 0;
  for (std::string_view name : names) {
    if (name == value) {
      *out = i;
      return absl::OkStatus();
    }
    absl::StrAppend(&expected, i == 0 ? " \"" : ", \"", AbslView(name), "\"");
    ++i;
  }
  return r.Invalid(key, expected, *r.Get(key));
}

absl::Status ParseActivation(ObjectReader& r, Activation* out) {
  int i = 0;
  RETURN_IF_ERROR(ParseChoice(
      r, "act", {"gelu", "gelu_tanh", "relu", "relu2", "silu"}, &i));
  constexpr Activation kActs[] = {Activation::kGelu, Activation::kGeluTanh,
                                  Activation::kRelu, Activation::kRelu2,
                                  Activation::kSilu};
  *out = kActs[i];
  return absl::OkStatus();
}

absl::StatusOr<float> AffineRmsNormEps(const std::optional<NormConfig>& norm,
                                       const BlockSite& site) {
  if (!norm.has_value() || norm->type != NormType::kRmsNorm || !norm->affine) {
    return absl::InvalidArgumentError(
        absl::StrCat(site.where, ": field \"norm\" must be an affine rmsnorm"));
  }
  return static_cast<float>(norm->eps);
}

}  // namespace seqboat
