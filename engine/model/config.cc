#include "engine/model/config.h"

#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_text.h"
#include "base/json_reader.h"
#include "base/status_macros.h"
#include "engine/layers/block_registry.h"
#include "engine/model_dir/model_dir.h"

namespace seqboat {
namespace {

using nlohmann::json;

absl::Status ParseBlock(const json& value, size_t index,
                        const std::string& source,
                        std::vector<std::string>* warnings, BlockConfig* out) {
  const std::string where = absl::StrCat("blocks[", index, "]");
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", where, " must be an object, got ", BriefJson(value)));
  }
  auto kind_it = value.find("kind");
  if (kind_it == value.end() || !kind_it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", where, ": field \"kind\" must be a string, got ",
        kind_it == value.end() ? "nothing" : BriefJson(*kind_it)));
  }
  const std::string kind = kind_it->get<std::string>();
  const BlockKind* k = FindBlockKind(kind);
  if (k == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", where, ": ",
        IsKnownUnsupportedBlockKind(kind)
            ? absl::StrCat("kind '", kind, "' is not supported by this build")
            : absl::StrCat("unknown kind '", kind, "'")));
  }
  ObjectReader reader(value, source, absl::StrCat(where, " (", kind, ")"));
  reader.Get("kind");
  out->kind = k;
  RETURN_IF_ERROR(ParseNorm(reader, "norm", warnings, &out->norm));
  RETURN_IF_ERROR(reader.OptionalPositiveNumber("residual_scale", 1.0,
                                                &out->residual_scale));
  if (out->residual_scale != 1.0 && !k->residual_scale) {
    return reader.Error(
        "residual_scale",
        absl::StrCat("must be 1 for kind '", kind,
                     "' (this build scales the residual add "
                     "of mamba2, attention, mlp and moe blocks)"));
  }
  RETURN_IF_ERROR(k->parse(reader, warnings, &out->params));
  reader.ReportUnknown(warnings);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text,
                                             std::string_view source_view) {
  const std::string source(source_view);
  json root;
  RETURN_IF_ERROR(ParseJson(json_text, source, &root));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": top level must be an object"));
  }
  ObjectReader r(root, source, "");
  ModelConfig config;

  std::string format;
  RETURN_IF_ERROR(r.String("format", &format));
  if (format != "seqboat-canonical") {
    return r.Invalid("format", "\"seqboat-canonical\"", *r.Get("format"));
  }
  const json* version = r.Get("version");
  if (version == nullptr) return r.Missing("version", "1");
  if (!version->is_number_integer() || version->get<int64_t>() != 1) {
    return r.Invalid("version", "1", *version);
  }
  if (const json* name = r.Get("name"); name != nullptr) {
    RETURN_IF_ERROR(r.String("name", &config.name));
  }
  RETURN_IF_ERROR(r.PositiveInt("vocab_size", &config.vocab_size));
  RETURN_IF_ERROR(r.PositiveInt("d_model", &config.d_model));

  if (const json* embed = r.Get("embed"); embed != nullptr) {
    if (!embed->is_object()) return r.Invalid("embed", "an object", *embed);
    ObjectReader e(*embed, source, "embed");
    RETURN_IF_ERROR(
        e.OptionalPositiveNumber("scale", 1.0, &config.embed.scale));
    RETURN_IF_ERROR(e.OptionalIndex("padding_idx", config.vocab_size,
                                    "vocab_size", &config.embed.padding_idx));
    e.ReportUnknown(&config.warnings);
  }

  RETURN_IF_ERROR(r.Bool("tie_embeddings", &config.tie_embeddings));
  RETURN_IF_ERROR(
      r.OptionalPositiveNumber("logit_scale", 1.0, &config.logit_scale));
  RETURN_IF_ERROR(
      ParseNorm(r, "final_norm", &config.warnings, &config.final_norm));
  if (const json* dtype = r.Get("residual_dtype"); dtype != nullptr) {
    // Only fp32 residuals are implemented; the field exists so a model that
    // needs another one fails here rather than running with the wrong one.
    if (!dtype->is_string() || dtype->get<std::string>() != "float32") {
      return r.Invalid("residual_dtype", "\"float32\"", *dtype);
    }
  }
  RETURN_IF_ERROR(r.OptionalIndex("eos_token_id", config.vocab_size,
                                  "vocab_size", &config.eos_token_id));
  RETURN_IF_ERROR(r.OptionalIndex("bos_token_id", config.vocab_size,
                                  "vocab_size", &config.bos_token_id));

  // A head the checkpoint ships for speculative decoding (Qwen3.5's
  // multi-token prediction), kept in its own file and never run here.
  if (const json* mtp = r.Get("mtp"); mtp != nullptr) {
    if (!mtp->is_object() || !mtp->contains("run") ||
        mtp->at("run") != json(false)) {
      return r.Invalid("mtp",
                       "an object with \"run\": false (this build keeps the "
                       "multi-token-prediction head but does not run it)",
                       *mtp);
    }
  }

  const json* blocks = r.Get("blocks");
  if (blocks == nullptr) return r.Missing("blocks", "a non-empty array");
  if (!blocks->is_array() || blocks->empty()) {
    return r.Invalid("blocks", "a non-empty array", *blocks);
  }
  config.blocks.resize(blocks->size());
  for (size_t i = 0; i < blocks->size(); ++i) {
    RETURN_IF_ERROR(ParseBlock((*blocks)[i], i, source, &config.warnings,
                               &config.blocks[i]));
  }
  r.ReportUnknown(&config.warnings);
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text,
                   ReadFileText(path, ModelDir::kMaxConfigBytes));
  return ParseModelConfig(text, path);
}

}  // namespace seqboat
