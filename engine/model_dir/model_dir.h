// A model directory in the canonical format (MODELS.md §6), opened once:
// config.json and tokenizer.json as text, tokenizer_config.json's text when
// the directory has one, and model.safetensors mapped behind the WeightStore
// layers fetch their tensors from. The one unit that knows the files' names:
// the server asks it how the weights are stored and for the chat template's
// source, the model parses its config and builds its layers from it, the
// engine its tokenizer. Errors name the file at fault.
#ifndef SEQBOAT_ENGINE_MODEL_DIR_MODEL_DIR_H_
#define SEQBOAT_ENGINE_MODEL_DIR_MODEL_DIR_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model_dir/weight_store.h"

namespace seqboat {

class ModelDir {
 public:
  // Bounds on the text files, so that a wrong path cannot exhaust memory.
  static constexpr int64_t kMaxConfigBytes = int64_t{16} << 20;
  static constexpr int64_t kMaxTokenizerBytes = int64_t{256} << 20;

  // Reads config.json and tokenizer.json (both required),
  // tokenizer_config.json (optional) and maps model.safetensors.
  static absl::StatusOr<std::unique_ptr<ModelDir>> Open(const std::string& dir);

  const std::string& path() const { return path_; }
  // `dir`/`name`, for messages.
  std::string FilePath(absl::string_view name) const;

  const std::string& config_json() const { return config_json_; }
  const std::string& tokenizer_json() const { return tokenizer_json_; }
  // nullopt when the directory has no tokenizer_config.json (no chat
  // template, no special-token strings).
  const std::optional<std::string>& tokenizer_config_json() const {
    return tokenizer_config_json_;
  }

  // How model.safetensors stores its matrices: "fp32", "bf16" or "fp16",
  // read from the embedding's dtype (what a backend keeps them in by
  // default). NOT_FOUND, naming the file, without an embedding.
  absl::StatusOr<std::string> StoredMatrixType() const;

  // The tensors; FAILED_PRECONDITION once closed.
  absl::StatusOr<WeightStore*> weights();
  // Drops the file's mapping and its fp32 conversions: backends copy what
  // they upload, so a loaded model no longer needs them.
  void CloseWeights() { weights_.reset(); }

 private:
  ModelDir() = default;

  std::string path_;
  std::string config_json_;
  std::string tokenizer_json_;
  std::optional<std::string> tokenizer_config_json_;
  std::unique_ptr<WeightStore> weights_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_MODEL_DIR_MODEL_DIR_H_
