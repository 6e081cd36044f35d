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
// Adding a block kind: a params struct, an alternative in BlockParams, an
// entry in BlockKind, and one parse function registered in config.cc.
#ifndef SEQBOAT_ENGINE_MODEL_CONFIG_H_
#define SEQBOAT_ENGINE_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/ffn_math.h"
#include "engine/backend/seqboat_shape.h"

namespace seqboat {

enum class NormType { kRmsNorm, kLayerNorm, kRmsNormT5, kScaleNorm };

// {"type": ..., "eps": ..., "affine": ...}; a JSON null norm is std::nullopt.
struct NormConfig {
  NormType type = NormType::kRmsNorm;
  double eps = 1e-5;   // > 0
  bool affine = true;  // false: no weight/bias tensors
};

enum class BlockKind {
  kMamba1,
  kSeqBoat,
  kAttention,
  kMlp,
  kMoe,
  kS4d,
  kS4Local
};

// Mamba-1 selective-scan mixer (MODELS.md §1). All sizes >= 1.
struct Mamba1Config {
  int64_t d_inner = 0;  // E
  int64_t d_state = 0;  // N
  int64_t d_conv = 0;   // K
  int64_t dt_rank = 0;  // R
  bool in_proj_bias = false;
  bool out_proj_bias = false;
  bool conv_bias = true;
  // "dt_bc_norm" (null or absent: none): Jamba's RMSNorms over the δ̃, B and
  // C slices of x_proj's output, each normalised on its own before dt_proj
  // and the scan. Type is always kRmsNorm; affine adds the tensors
  // dt_norm.weight [R], b_norm.weight [N], c_norm.weight [N].
  std::optional<NormConfig> dt_bc_norm;
};

// --- seqboat (MODELS.md §2, §6.1) ------------------------------------------
// MD-EMA + latent configurator + GAU over a FIFO working memory.
struct SeqBoatConfig {
  bool prenorm = true;  // false: the norm follows the final SiLU
  int64_t ema_dim = 0;  // N_e >= 1
  int64_t z_dim = 0;    // z >= 1, even for rope_interleaved
  int64_t v_dim = 0;    // v >= 1
  int64_t window = 0;   // w >= 1: earlier active tokens a query sees
  SeqBoatAttnFn attn_fn = SeqBoatAttnFn::kSoftmax;
  SeqBoatPos pos = SeqBoatPos::kRopeInterleaved;
  double rope_theta = 10000.0;         // rope_interleaved only
  std::optional<int64_t> rel_pos_max;  // M, required for simple_bias
  // Informational: the FIR length used in training; the engine runs the IIR.
  std::optional<int64_t> ema_truncation;
};

// --- feed-forward kinds and S4D (MODELS.md §4.3, §5, §6) -------------------
// Activation of an mlp / moe expert ("gelu" is the exact erf form).
// Dense FFN: r ← r + down(act(up(x))), gated: down(act(gate(x)) ⊙ up(x)).
struct MlpConfig {
  int64_t d_ff = 0;                    // F >= 1
  Activation act = Activation::kGelu;  // gelu, gelu_tanh, relu or silu
  bool gated = false;
  bool bias = false;  // .bias on up, gate and down
};

// Mixture of experts (§5). Dropless only: "capacity" must be null.
struct MoeConfig {
  MoeRouting routing = MoeRouting::kSoftmaxTopK;  // "top1_softmax"
  int64_t n_experts = 0;                          // X >= 1
  int64_t d_ff = 0;                               // F >= 1, per expert
  Activation act = Activation::kRelu;  // gelu, gelu_tanh, relu or silu
  bool gated = false;
  bool router_bias = false;  // router.bias (and router_in.bias)
  bool expert_bias = false;  // up.bias [X,F] (+ gate.bias), shared down.bias
  // top1_softmax only: experts per token (default 1, <= n_experts) and
  // whether their softmax probabilities are renormalised to sum to 1.
  int64_t top_k = 1;
  bool renormalize = false;
  int64_t router_hidden = 0;  // relu_dynamic only: h of router_in [h, D]
};

// S4D diagonal SSM over H = d_model channels (§4.3).
struct S4dConfig {
  int64_t channels = 1;   // ch, output copies; this build runs 1
  int64_t modes = 0;      // M, complex modes stored per channel
  bool conj_half = true;  // "conj_half": y = 2 Re(...); "full": Re(...)
  bool gelu_glu = false;  // output "gelu_glu": GLU(W_out GELU(y) + b)
};

// --- attention with a sink + rolling-window KV cache (MODELS.md §3, §4.2) ---
enum class AttentionPos { kNone, kRopeHalf };

// Keys seen by a query: the first `sinks` tokens, the `window` most recent
// earlier tokens, and itself. sinks = 0 is a plain sliding window (SPADE local
// layers: window = local_radius). sinks + window >= 1.
struct AttentionConfig {
  int64_t n_heads = 0;     // H_q, a multiple of n_kv_heads
  int64_t n_kv_heads = 0;  // H_kv
  int64_t head_dim = 0;    // d_h; even for "rope_half"
  bool qkv_bias = false;
  bool o_bias = false;
  AttentionPos pos = AttentionPos::kRopeHalf;
  double rope_theta = 10000.0;  // "rope_half" only
  int64_t sinks = 0;            // S >= 0
  int64_t window = 0;           // W >= 0
};

// One alternative per kind this build can run.
using BlockParams = std::variant<Mamba1Config, SeqBoatConfig, MlpConfig,
                                 MoeConfig, S4dConfig, AttentionConfig>;

struct BlockConfig {
  BlockKind kind = BlockKind::kMamba1;
  std::optional<NormConfig> norm;  // nullopt: no pre-norm
  BlockParams params;              // matches `kind`

  // nullptr unless kind == kMamba1.
  const Mamba1Config* mamba1() const {
    return std::get_if<Mamba1Config>(&params);
  }
  const MlpConfig* mlp() const { return std::get_if<MlpConfig>(&params); }
  const MoeConfig* moe() const { return std::get_if<MoeConfig>(&params); }
  const S4dConfig* s4d() const { return std::get_if<S4dConfig>(&params); }
  const SeqBoatConfig* seqboat() const {
    return std::get_if<SeqBoatConfig>(&params);
  }
  const AttentionConfig* attention() const {
    return std::get_if<AttentionConfig>(&params);
  }
};

struct EmbedConfig {
  double scale = 1.0;                  // embeddings are multiplied by this
  std::optional<int64_t> padding_idx;  // informational; in [0, vocab_size)
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

// "mamba1", "seqboat", ... (the config.json spelling).
std::string_view BlockKindName(BlockKind kind);
// "rmsnorm", "layernorm", "rmsnorm_t5", "scalenorm".
std::string_view NormTypeName(NormType type);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_MODEL_CONFIG_H_
