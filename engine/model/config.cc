#include "engine/model/config.h"

#include <cerrno>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/json_reader.h"
#include "base/status_macros.h"

namespace seqboat {
namespace {

using nlohmann::json;

// A config is a few kilobytes; refuse to slurp anything huge.
constexpr long kMaxConfigBytes = 16l << 20;

constexpr struct {
  NormType type;
  std::string_view name;
} kNormTypes[] = {
    {NormType::kRmsNorm, "rmsnorm"},
    {NormType::kLayerNorm, "layernorm"},
    {NormType::kRmsNormT5, "rmsnorm_t5"},
    {NormType::kScaleNorm, "scalenorm"},
};

// `parent.key` is a norm object or null.
absl::Status ParseNorm(ObjectReader& parent, const char* key,
                       const std::string& source,
                       std::vector<std::string>* warnings,
                       std::optional<NormConfig>* out) {
  const json* value = parent.Get(key);
  if (value == nullptr) return parent.Missing(key, "a norm object or null");
  out->reset();
  if (value->is_null()) return absl::OkStatus();
  if (!value->is_object()) {
    return parent.Invalid(key, "a norm object or null", *value);
  }
  ObjectReader reader(*value, source,
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

absl::Status ParseMamba1(ObjectReader& r, std::vector<std::string>* warnings,
                         BlockParams* params) {
  Mamba1Config c;
  for (auto [key, field] :
       {std::pair{"d_inner", &c.d_inner}, std::pair{"d_state", &c.d_state},
        std::pair{"d_conv", &c.d_conv}, std::pair{"dt_rank", &c.dt_rank}}) {
    RETURN_IF_ERROR(r.PositiveInt(key, field));
  }
  for (auto [key, field] : {std::pair{"in_proj_bias", &c.in_proj_bias},
                            std::pair{"out_proj_bias", &c.out_proj_bias},
                            std::pair{"conv_bias", &c.conv_bias}}) {
    RETURN_IF_ERROR(r.Bool(key, field));
  }
  if (r.Get("dt_bc_norm") != nullptr) {
    RETURN_IF_ERROR(
        ParseNorm(r, "dt_bc_norm", r.source(), warnings, &c.dt_bc_norm));
    // Jamba's JambaRMSNorm is the Llama rounding; no source uses another
    // norm here, and a layernorm would need bias tensors.
    if (c.dt_bc_norm.has_value() && c.dt_bc_norm->type != NormType::kRmsNorm) {
      return r.Error(
          "dt_bc_norm",
          absl::StrCat("must be null or a norm of type "
                       "\"rmsnorm\", got type \"",
                       AbslView(NormTypeName(c.dt_bc_norm->type)), "\""));
    }
  }
  *params = c;
  return absl::OkStatus();
}

// --- seqboat ---------------------------------------------------------------

// null / absent, or a positive integer.
absl::Status SeqBoatOptionalSize(ObjectReader& r, const char* key,
                                 std::optional<int64_t>* out) {
  out->reset();
  const json* v = r.Get(key);
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  int64_t value = 0;
  if (absl::Status s = r.PositiveInt(key, &value); !s.ok()) {
    return r.Invalid(key, "null or a positive integer", *v);
  }
  *out = value;
  return absl::OkStatus();
}

absl::Status ParseSeqBoat(ObjectReader& r,
                          std::vector<std::string>* /*warnings*/,
                          BlockParams* params) {
  SeqBoatConfig c;
  RETURN_IF_ERROR(r.OptionalBool("prenorm", true, &c.prenorm));
  for (auto [key, field] :
       {std::pair{"ema_dim", &c.ema_dim}, std::pair{"z_dim", &c.z_dim},
        std::pair{"v_dim", &c.v_dim}, std::pair{"window", &c.window}}) {
    RETURN_IF_ERROR(r.PositiveInt(key, field));
  }
  std::string attn_fn, pos;
  RETURN_IF_ERROR(r.String("attn_fn", &attn_fn));
  if (attn_fn == "softmax") {
    c.attn_fn = SeqBoatAttnFn::kSoftmax;
  } else if (attn_fn == "relu2") {
    c.attn_fn = SeqBoatAttnFn::kRelu2;
  } else if (attn_fn == "laplace") {
    return r.Error("attn_fn", "\"laplace\" is not supported by this build");
  } else {
    return r.Invalid("attn_fn", "one of \"softmax\", \"relu2\"",
                     *r.Get("attn_fn"));
  }
  RETURN_IF_ERROR(r.String("pos", &pos));
  if (pos == "rope_interleaved") {
    c.pos = SeqBoatPos::kRopeInterleaved;
  } else if (pos == "simple_bias") {
    c.pos = SeqBoatPos::kSimpleBias;
  } else {
    return r.Invalid("pos", "one of \"rope_interleaved\", \"simple_bias\"",
                     *r.Get("pos"));
  }
  RETURN_IF_ERROR(
      r.OptionalPositiveNumber("rope_theta", 10000.0, &c.rope_theta));
  RETURN_IF_ERROR(SeqBoatOptionalSize(r, "rel_pos_max", &c.rel_pos_max));
  RETURN_IF_ERROR(SeqBoatOptionalSize(r, "ema_truncation", &c.ema_truncation));
  if (c.pos == SeqBoatPos::kRopeInterleaved && c.z_dim % 2 != 0) {
    return r.Error("z_dim",
                   absl::StrCat("must be even for pos ",
                                "\"rope_interleaved\", got ", c.z_dim));
  }
  if (c.pos == SeqBoatPos::kSimpleBias && !c.rel_pos_max) {
    return r.Error("rel_pos_max",
                   "must be a positive integer for pos \"simple_bias\"");
  }
  *params = c;
  return absl::OkStatus();
}

// --- mlp, moe, s4d ----------------------------------------------------------

// `key` must be one of the listed spellings; returns its index.
absl::Status FfnChoice(ObjectReader& r, const char* key,
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

absl::Status ParseFfnAct(ObjectReader& r, Activation* out) {
  int i = 0;
  RETURN_IF_ERROR(
      FfnChoice(r, "act", {"gelu", "gelu_tanh", "relu", "silu"}, &i));
  constexpr Activation kActs[] = {Activation::kGelu, Activation::kGeluTanh,
                                  Activation::kRelu, Activation::kSilu};
  *out = kActs[i];
  return absl::OkStatus();
}

absl::Status ParseMlp(ObjectReader& r, std::vector<std::string>* /*warnings*/,
                      BlockParams* params) {
  MlpConfig c;
  RETURN_IF_ERROR(r.PositiveInt("d_ff", &c.d_ff));
  RETURN_IF_ERROR(ParseFfnAct(r, &c.act));
  RETURN_IF_ERROR(r.Bool("gated", &c.gated));
  RETURN_IF_ERROR(r.Bool("bias", &c.bias));
  *params = c;
  return absl::OkStatus();
}

absl::Status ParseMoe(ObjectReader& r, std::vector<std::string>* /*warnings*/,
                      BlockParams* params) {
  MoeConfig c;
  int routing = 0;
  RETURN_IF_ERROR(
      FfnChoice(r, "routing", {"top1_softmax", "relu_dynamic"}, &routing));
  c.routing =
      routing == 0 ? MoeRouting::kSoftmaxTopK : MoeRouting::kReluDynamic;
  RETURN_IF_ERROR(r.PositiveInt("n_experts", &c.n_experts));
  RETURN_IF_ERROR(r.PositiveInt("d_ff", &c.d_ff));
  RETURN_IF_ERROR(ParseFfnAct(r, &c.act));
  RETURN_IF_ERROR(r.Bool("gated", &c.gated));
  RETURN_IF_ERROR(r.Bool("router_bias", &c.router_bias));
  RETURN_IF_ERROR(r.Bool("expert_bias", &c.expert_bias));
  // Capacity is a training-time device; running dropless under a config that
  // names a capacity would silently change results on long prefills.
  if (const json* cap = r.Get("capacity"); cap != nullptr && !cap->is_null()) {
    return r.Invalid("capacity", "null (the engine is dropless)", *cap);
  }
  const bool softmax = c.routing == MoeRouting::kSoftmaxTopK;
  if (r.Get("top_k") != nullptr) {
    if (!softmax) {
      return r.Error("top_k", "applies only to routing \"top1_softmax\"");
    }
    RETURN_IF_ERROR(r.PositiveInt("top_k", &c.top_k));
    if (c.top_k > c.n_experts) {
      return r.Invalid("top_k",
                       absl::StrCat("at most n_experts = ", c.n_experts),
                       *r.Get("top_k"));
    }
  }
  if (r.Get("renormalize") != nullptr) {
    if (!softmax) {
      return r.Error("renormalize", "applies only to routing \"top1_softmax\"");
    }
    RETURN_IF_ERROR(r.Bool("renormalize", &c.renormalize));
  }
  if (softmax) {
    if (r.Get("router_hidden") != nullptr) {
      return r.Error("router_hidden",
                     "applies only to routing \"relu_dynamic\"");
    }
  } else {
    RETURN_IF_ERROR(r.PositiveInt("router_hidden", &c.router_hidden));
  }
  *params = c;
  return absl::OkStatus();
}

absl::Status ParseS4d(ObjectReader& r, std::vector<std::string>* /*warnings*/,
                      BlockParams* params) {
  S4dConfig c;
  RETURN_IF_ERROR(r.PositiveInt("channels", &c.channels));
  // The block's output must be d_model wide and s4d.out.weight is [2H, H]:
  // a multi-channel output would need a mixing layer §6 does not define.
  if (c.channels != 1) {
    return r.Invalid("channels", "1 (multi-channel S4D is not supported)",
                     *r.Get("channels"));
  }
  RETURN_IF_ERROR(r.PositiveInt("modes", &c.modes));
  int i = 0;
  RETURN_IF_ERROR(FfnChoice(r, "state_layout", {"conj_half", "full"}, &i));
  c.conj_half = i == 0;
  RETURN_IF_ERROR(FfnChoice(r, "output", {"none", "gelu_glu"}, &i));
  c.gelu_glu = i == 1;
  *params = c;
  return absl::OkStatus();
}

// --- attention ---------------------------------------------------------------

// An integer in [0, kMaxJsonSize].
absl::Status AttentionCount(ObjectReader& r, const char* key, int64_t* out) {
  const json* v = r.Get(key);
  if (v == nullptr) return r.Missing(key, "a non-negative integer");
  if (!v->is_number_integer() ||
      (!v->is_number_unsigned() && v->get<int64_t>() < 0) ||
      v->get<uint64_t>() > static_cast<uint64_t>(kMaxJsonSize)) {
    return r.Invalid(key, absl::StrCat("an integer in [0, ", kMaxJsonSize, "]"),
                     *v);
  }
  *out = v->get<int64_t>();
  return absl::OkStatus();
}

// Fields this build accepts only as null (or absent): a value would change
// the math in a way that is not implemented.
absl::Status AttentionNullOnly(ObjectReader& r, const char* key,
                               absl::string_view why) {
  const json* v = r.Get(key);
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  return r.Invalid(key, absl::StrCat("null (", why, ")"), *v);
}

absl::Status ParseAttention(ObjectReader& r,
                            std::vector<std::string>* /*warnings*/,
                            BlockParams* params) {
  AttentionConfig c;
  RETURN_IF_ERROR(r.PositiveInt("n_heads", &c.n_heads));
  RETURN_IF_ERROR(r.PositiveInt("n_kv_heads", &c.n_kv_heads));
  if (c.n_heads % c.n_kv_heads != 0) {
    return r.Invalid(
        "n_kv_heads",
        absl::StrCat("a divisor of n_heads = ", c.n_heads,
                     " (grouped-query attention shares each KV head among "
                     "n_heads / n_kv_heads query heads)"),
        *r.Get("n_kv_heads"));
  }
  RETURN_IF_ERROR(r.PositiveInt("head_dim", &c.head_dim));
  if (c.n_heads * c.head_dim > kMaxJsonSize) {
    return r.Invalid("head_dim",
                     absl::StrCat("at most ", kMaxJsonSize / c.n_heads,
                                  " with n_heads = ", c.n_heads),
                     *r.Get("head_dim"));
  }
  RETURN_IF_ERROR(r.Bool("qkv_bias", &c.qkv_bias));
  RETURN_IF_ERROR(r.Bool("o_bias", &c.o_bias));

  std::string pos;
  RETURN_IF_ERROR(r.String("pos", &pos));
  if (pos == "rope_half") {
    c.pos = AttentionPos::kRopeHalf;
  } else if (pos == "none") {
    c.pos = AttentionPos::kNone;
  } else if (pos == "rope_interleaved" || pos == "t5_bucket" ||
             pos == "simple_bias") {
    return r.Error("pos", absl::StrCat("\"", pos,
                                       "\" is not supported for attention "
                                       "blocks by this build (supported: "
                                       "\"rope_half\", \"none\")"));
  } else {
    return r.Invalid("pos", "\"rope_half\" or \"none\"", *r.Get("pos"));
  }
  if (c.pos == AttentionPos::kRopeHalf) {
    RETURN_IF_ERROR(r.PositiveNumber("rope_theta", &c.rope_theta));
    if (c.head_dim % 2 != 0) {
      return r.Invalid("head_dim", "even for pos \"rope_half\"",
                       *r.Get("head_dim"));
    }
  } else if (r.Get("rope_theta") != nullptr &&
             !r.Get("rope_theta")->is_null()) {
    // Informational without RoPE; still reject garbage.
    RETURN_IF_ERROR(r.PositiveNumber("rope_theta", &c.rope_theta));
  }
  RETURN_IF_ERROR(AttentionNullOnly(
      r, "rope_scaling", "RoPE scaling is not supported by this build"));
  RETURN_IF_ERROR(AttentionNullOnly(
      r, "rel_bias", "relative-position bias is not supported by this build"));

  RETURN_IF_ERROR(AttentionCount(r, "sinks", &c.sinks));
  RETURN_IF_ERROR(AttentionCount(r, "window", &c.window));
  if (c.sinks + c.window < 1) {
    return r.Invalid("window",
                     ">= 1 when sinks is 0 (the cache would hold no token)",
                     *r.Get("window"));
  }
  // One slot's K and V must stay addressable; far beyond any real model.
  constexpr int64_t kMaxCacheFloats = int64_t{1} << 36;
  const int64_t rows = c.sinks + c.window;
  if (rows > kMaxJsonSize ||
      rows > kMaxCacheFloats / (c.n_kv_heads * c.head_dim)) {
    return r.Invalid(
        "window",
        absl::StrCat("small enough that sinks + window times n_kv_heads * "
                     "head_dim = ",
                     c.n_kv_heads * c.head_dim, " stays within 2^36 floats"),
        *r.Get("window"));
  }
  *params = c;
  return absl::OkStatus();
}

// Reads the kind-specific fields of a block (the common "kind" and "norm"
// are handled by the caller); unknown fields of nested objects go to
// `warnings`.
using ParseBlockFn = absl::Status (*)(ObjectReader& reader,
                                      std::vector<std::string>* warnings,
                                      BlockParams* out);

// Every kind of MODELS.md §6.1. A null parser means the kind is known but
// this build cannot run it yet.
constexpr struct {
  BlockKind kind;
  std::string_view name;
  ParseBlockFn parse;
} kBlockKinds[] = {
    {BlockKind::kMamba1, "mamba1", ParseMamba1},
    {BlockKind::kSeqBoat, "seqboat", ParseSeqBoat},
    {BlockKind::kAttention, "attention", ParseAttention},
    {BlockKind::kMlp, "mlp", ParseMlp},
    {BlockKind::kMoe, "moe", ParseMoe},
    {BlockKind::kS4d, "s4d", ParseS4d},
    {BlockKind::kS4Local, "s4_local", nullptr},
};

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
  for (const auto& k : kBlockKinds) {
    if (k.name != kind) continue;
    if (k.parse == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", where, ": kind '", kind,
                       "' is not supported by this build"));
    }
    ObjectReader reader(value, source, absl::StrCat(where, " (", kind, ")"));
    reader.Get("kind");
    out->kind = k.kind;
    RETURN_IF_ERROR(ParseNorm(reader, "norm", source, warnings, &out->norm));
    RETURN_IF_ERROR(k.parse(reader, warnings, &out->params));
    reader.ReportUnknown(warnings);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": ", where, ": unknown kind '", kind, "'"));
}

}  // namespace

std::string_view BlockKindName(BlockKind kind) {
  for (const auto& k : kBlockKinds) {
    if (k.kind == kind) return k.name;
  }
  return "?";
}

std::string_view NormTypeName(NormType type) {
  for (const auto& t : kNormTypes) {
    if (t.type == type) return t.name;
  }
  return "?";
}

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
      ParseNorm(r, "final_norm", source, &config.warnings, &config.final_norm));
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
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"),
                                             &std::fclose);
  if (file == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  }
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
    text.append(buffer, n);
    if (text.size() > static_cast<size_t>(kMaxConfigBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": larger than ", kMaxConfigBytes, " bytes; not a config"));
    }
  }
  if (std::ferror(file.get())) {
    return absl::DataLossError(absl::StrCat(path, ": read error"));
  }
  return ParseModelConfig(text, path);
}

}  // namespace seqboat
