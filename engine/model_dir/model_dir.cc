#include "engine/model_dir/model_dir.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_text.h"
#include "base/status_macros.h"

namespace seqboat {

absl::StatusOr<std::unique_ptr<ModelDir>> ModelDir::Open(
    const std::string& dir) {
  std::unique_ptr<ModelDir> md(new ModelDir());
  md->path_ = dir;
  ASSIGN_OR_RETURN(md->config_json_,
                   ReadFileText(md->FilePath("config.json"), kMaxConfigBytes));
  ASSIGN_OR_RETURN(md->weights_,
                   WeightStore::Open(md->FilePath("model.safetensors")));
  ASSIGN_OR_RETURN(
      md->tokenizer_json_,
      ReadFileText(md->FilePath("tokenizer.json"), kMaxTokenizerBytes));
  absl::StatusOr<std::string> tokenizer_config =
      ReadFileText(md->FilePath("tokenizer_config.json"), kMaxTokenizerBytes);
  if (tokenizer_config.ok()) {
    md->tokenizer_config_json_ = *std::move(tokenizer_config);
  } else if (tokenizer_config.status().code() != absl::StatusCode::kNotFound) {
    return tokenizer_config.status();
  }
  return md;
}

std::string ModelDir::FilePath(absl::string_view name) const {
  return absl::StrCat(path_, "/", name);
}

absl::StatusOr<std::string> ModelDir::StoredMatrixType() const {
  if (weights_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(FilePath("model.safetensors"), " is closed"));
  }
  const TensorView* embed = weights_->file().Find("embed.weight");
  if (embed == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        FilePath("model.safetensors"), ": missing tensor \"embed.weight\""));
  }
  switch (embed->dtype) {
    case DType::kBF16:
      return std::string("bf16");
    case DType::kF16:
      return std::string("fp16");
    default:
      return std::string("fp32");
  }
}

absl::StatusOr<WeightStore*> ModelDir::weights() {
  if (weights_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(FilePath("model.safetensors"),
                     " is closed: a model was loaded from it"));
  }
  return weights_.get();
}

}  // namespace seqboat
