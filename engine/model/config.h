// The model's config.json in the canonical format (MODELS.md §6.1), parsed
// and checked before anything is allocated.
//
// Every error names the offending field by path, e.g.
//   config.json: blocks[3] (mamba1): field "d_state" must be a positive
//   integer, got -1
// Unknown fields are not errors (converters may add informational ones); they
// are collected in ModelConfig::warnings for the loader to log. Duplicate keys
// are errors. Block kinds this build cannot run are rejected by name.
//
// Each block's own fields are parsed by its kind's unit (engine/layers, found
// through the block registry); this file reads the model-wide fields.
#ifndef SEQBOAT_ENGINE_MODEL_CONFIG_H_
#define SEQBOAT_ENGINE_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/layers/block.h"

namespace seqboat {

struct EmbedConfig {
  double scale = 1.0;  // embeddings are multiplied by this
  // In [0, vocab_size): the id fairseq pads batches with, whose embedding row
  // training never read; Engine::Submit refuses it in a prompt.
  std::optional<int64_t> padding_idx;
};

struct ModelConfig {
  std::string name;  // "" when absent
  int64_t vocab_size = 0;
  int64_t d_model = 0;
  EmbedConfig embed;
  bool tie_embeddings = true;
  double logit_scale = 1.0;
  std::optional<NormConfig> final_norm;  // nullopt: no final norm
  std::string residual_dtype = "float32";
  std::optional<int64_t> eos_token_id;  // in [0, vocab_size)
  std::optional<int64_t> bos_token_id;  // in [0, vocab_size)
  std::vector<BlockConfig> blocks;      // non-empty
  // Unknown fields, by path ("blocks[0] (mamba1): unknown field \"x\"").
  std::vector<std::string> warnings;
};

// `source` prefixes every error message (the file name).
absl::StatusOr<ModelConfig> ParseModelConfig(
    std::string_view json_text, std::string_view source = "config.json");
// Reads and parses the file; errors are prefixed with `path`.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_MODEL_CONFIG_H_
