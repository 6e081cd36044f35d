// What every block kind shares: the norm config, the parsed block as
// config.json gives it, and BlockKind, the one entry a kind registers in the
// block registry (its parse and its build). Adding a kind is one unit under
// engine/layers (config struct, parse, layer, BlockKind) and one line in
// block_registry.cc.
#ifndef SEQBOAT_ENGINE_LAYERS_BLOCK_H_
#define SEQBOAT_ENGINE_LAYERS_BLOCK_H_

#include <any>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/json_reader.h"
#include "engine/backend/backend.h"
#include "engine/backend/ffn_math.h"
#include "engine/layers/layer.h"
#include "engine/model_dir/weight_store.h"

namespace seqboat {

enum class NormType { kRmsNorm, kLayerNorm, kRmsNormT5, kScaleNorm };

// {"type": ..., "eps": ..., "affine": ...}; a JSON null norm is std::nullopt.
struct NormConfig {
  NormType type = NormType::kRmsNorm;
  double eps = 1e-5;   // > 0
  bool affine = true;  // false: no weight/bias tensors
};

// "rmsnorm", "layernorm", "rmsnorm_t5", "scalenorm".
std::string_view NormTypeName(NormType type);

// `parent.key` must be a norm object or null; unknown fields of the norm go
// to `warnings`.
absl::Status ParseNorm(ObjectReader& parent, const char* key,
                       std::vector<std::string>* warnings,
                       std::optional<NormConfig>* out);

// `key` must be one of the listed spellings; *out is its index.
absl::Status ParseChoice(ObjectReader& r, const char* key,
                         std::initializer_list<std::string_view> names,
                         int* out);
// "act" of a feed-forward kind: gelu, gelu_tanh, relu, relu2 or silu.
absl::Status ParseActivation(ObjectReader& r, Activation* out);

struct BlockKind;

// One entry of config.json's "blocks".
struct BlockConfig {
  const BlockKind* kind = nullptr;
  std::optional<NormConfig> norm;  // nullopt: no norm
  std::any params;                 // the kind's config struct
  // Optional "residual_scale" s > 0: r ← r + s·f(Norm(r)) (Granite's
  // residual_multiplier); only kinds with BlockKind::residual_scale take
  // s ≠ 1.
  double residual_scale = 1.0;

  // The kind's config, or nullptr when the block is of another kind.
  template <typename Config>
  const Config* As() const {
    return std::any_cast<Config>(&params);
  }
};

// Where a block is built: its place in the stack and the model-wide sizes.
struct BlockSite {
  std::string where;   // "blocks[3] (mamba1)": errors name it
  std::string prefix;  // "blocks.3.": its tensors' names start with it
  int d_model = 0;
  WeightStore* weights = nullptr;
  Backend* backend = nullptr;
  float residual_scale = 1.0f;  // the block's; see BlockConfig
};

// The eps of a block's pre-norm that must be an affine rmsnorm (the Mamba
// and Gated DeltaNet mixers), or INVALID_ARGUMENT naming the block.
absl::StatusOr<float> AffineRmsNormEps(const std::optional<NormConfig>& norm,
                                       const BlockSite& site);

struct BlockKind {
  std::string_view name;  // the config.json spelling
  // Reads the kind's own fields (the caller reads "kind" and "norm") into
  // *params, the kind's config struct; unknown fields of nested objects go
  // to `warnings`.
  absl::Status (*parse)(ObjectReader& reader,
                        std::vector<std::string>* warnings, std::any* params);
  // Builds the layer, fetching its tensors; refuses configs it cannot run.
  absl::StatusOr<std::unique_ptr<Layer>> (*build)(const BlockConfig& block,
                                                  const BlockSite& site);
  // The kind's layer honours BlockSite::residual_scale (engine/layers/
  // residual_out.h); config.json's residual_scale ≠ 1 is refused otherwise.
  bool residual_scale = false;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_BLOCK_H_
