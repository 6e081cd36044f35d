#include "engine/layers/attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "engine/backend/attention_math.h"
#include "engine/layers/residual_out.h"
#include "engine/layers/weight_fetch.h"

namespace seqboat {
namespace {

namespace am = attention_math;

absl::Status CheckConfig(const AttentionConfig& c, int d_model) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("attention: ", what));
  };
  if (d_model <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0) {
    return bad("d_model, n_heads, n_kv_heads and head_dim must be positive");
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return bad("n_heads must be a multiple of n_kv_heads");
  }
  const bool rope = c.pos == AttentionPos::kRopeHalf;
  if (rope && c.head_dim % 2 != 0) return bad("RoPE needs an even head_dim");
  if (rope && !(c.rope_theta > 0.0 && std::isfinite(c.rope_theta))) {
    return bad("rope_theta must be a positive finite number");
  }
  if (c.qk_norm && !(c.qk_norm_eps > 0.0))
    return bad("qk_norm eps must be > 0");
  if (c.sinks < 0 || c.window < 0 || c.sinks + c.window < 1) {
    return bad("sinks and window must be >= 0 with sinks + window >= 1");
  }
  if (!rope && c.rope_scaling.type != RopeScalingType::kNone) {
    return bad("rope_scaling needs pos \"rope_half\"");
  }
  if (rope) {
    RETURN_IF_ERROR(CheckRopeScaling(c.rope_scaling, c.rope_theta));
  }
  if (!rope && c.rotary_dim != 0) {
    return bad("rotary_dim needs pos \"rope_half\"");
  }
  if (rope && c.rotary_dim != 0 &&
      (c.rotary_dim < 2 || c.rotary_dim % 2 != 0 ||
       c.rotary_dim > c.head_dim)) {
    return bad("rotary_dim must be even with 2 <= rotary_dim <= head_dim");
  }
  if (rope && c.rope_scaling.type == RopeScalingType::kDynamic &&
      c.sinks + c.window + 1 > c.rope_scaling.max_position_embeddings) {
    return bad(
        "dynamic rope_scaling needs sinks + window + 1 <= "
        "max_position_embeddings");
  }
  return absl::OkStatus();
}

class Attention final : public Mixer {
 public:
  Attention(const AttentionConfig& config,
            const std::optional<NormConfig>& norm, int d_model,
            float residual_scale)
      : c_(config),
        norm_(norm),
        d_model_(d_model),
        rope_(config.pos == AttentionPos::kRopeHalf),
        out_(residual_scale) {
    cache_.n_heads = static_cast<int>(c_.n_heads);
    cache_.n_kv_heads = static_cast<int>(c_.n_kv_heads);
    cache_.head_dim = static_cast<int>(c_.head_dim);
    cache_.sinks = static_cast<int>(c_.sinks);
    cache_.window = static_cast<int>(c_.window);
    cache_.scale = c_.scale > 0.0
                       ? static_cast<float>(c_.scale)
                       : 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
    rotary_dim_ =
        static_cast<int>(c_.rotary_dim == 0 ? c_.head_dim : c_.rotary_dim);
  }

  absl::Status Bind(const std::string& p, WeightStore& ws, Backend& be) {
    const int64_t d = d_model_, qd = QDim();
    auto vec = [&](const std::string& name, int64_t n, const float** out) {
      return FetchVector(ws, be, p + name, {n}, out);
    };
    auto mat = [&](const std::string& name, int64_t rows, int64_t cols,
                   Matrix* out) {
      return FetchMatrix(ws, be, p + name, rows, cols, out);
    };
    if (norm_.has_value() && norm_->affine) {
      RETURN_IF_ERROR(vec("norm.weight", d, &norm_w_));
      if (norm_->type == NormType::kLayerNorm) {
        RETURN_IF_ERROR(vec("norm.bias", d, &norm_b_));
      }
    }
    // q, k, v (and the output gate) read the same rows: one stacked matrix,
    // one GEMM a step. q and k (and their norms' weights) are in RoPE order
    // where the rotation is partial (AppendRopeOrdered).
    const int hq = cache_.n_heads, hk = cache_.n_kv_heads;
    std::vector<float> host;
    host.reserve(static_cast<size_t>(ProjRows() * d));
    RETURN_IF_ERROR(
        AppendRopeOrdered(p + "attn.q.weight", hq, d, true, ws, &host));
    RETURN_IF_ERROR(
        AppendRopeOrdered(p + "attn.k.weight", hk, d, true, ws, &host));
    RETURN_IF_ERROR(
        AppendRopeOrdered(p + "attn.v.weight", hk, d, false, ws, &host));
    if (c_.out_gate) {
      RETURN_IF_ERROR(
          AppendRopeOrdered(p + "attn.gate.weight", hq, d, false, ws, &host));
    }
    auto wqkv = be.UploadMatrix(host.data(), ProjRows(), d);
    if (!wqkv.ok()) return wqkv.status();
    wqkv_ = *wqkv;
    RETURN_IF_ERROR(mat("attn.o.weight", d, qd, &wo_));
    auto upload = [&](const float** out) {
      auto dev =
          be.UploadVector(host.data(), static_cast<int64_t>(host.size()));
      if (!dev.ok()) return dev.status();
      *out = *dev;
      return absl::OkStatus();
    };
    if (c_.qk_norm) {
      host.clear();
      RETURN_IF_ERROR(
          AppendRopeOrdered(p + "attn.q_norm.weight", 1, 0, true, ws, &host));
      RETURN_IF_ERROR(upload(&q_norm_w_));
      host.clear();
      RETURN_IF_ERROR(
          AppendRopeOrdered(p + "attn.k_norm.weight", 1, 0, true, ws, &host));
      RETURN_IF_ERROR(upload(&k_norm_w_));
    }
    if (c_.qkv_bias) {
      host.clear();
      RETURN_IF_ERROR(
          AppendRopeOrdered(p + "attn.q.bias", hq, 0, true, ws, &host));
      RETURN_IF_ERROR(
          AppendRopeOrdered(p + "attn.k.bias", hk, 0, true, ws, &host));
      RETURN_IF_ERROR(
          AppendRopeOrdered(p + "attn.v.bias", hk, 0, false, ws, &host));
      if (c_.out_gate) {
        RETURN_IF_ERROR(
            AppendRopeOrdered(p + "attn.gate.bias", hq, 0, false, ws, &host));
      }
      RETURN_IF_ERROR(upload(&bqkv_));
    }
    if (c_.o_bias) {
      RETURN_IF_ERROR(vec("attn.o.bias", d, &bo_));
    }
    if (rope_) return BuildRopeTable(be);
    return absl::OkStatus();
  }

  std::string kind() const override { return "attention"; }

  int64_t StateBytesPerSlot() const override {
    return am::CacheSlotBytes(cache_.n_kv_heads, cache_.head_dim, cache_.sinks,
                              cache_.window);
  }

  int64_t ScratchFloatsPerRow() const override {
    return d_model_ + ProjRows() + QDim() + HalfInputFloatsPerRow(QDim());
  }

  void BindState(void* base, int64_t slot_stride) override {
    state_ = base;
    slot_stride_ = slot_stride;
  }

  absl::Status Forward(const StepContext& ctx, float* residual) override {
    if (!norm_.has_value()) {
      // The residual is only written by the last GEMM, after q/k/v.
      return MixNormed(ctx, residual, GemmNorm(), residual);
    }
    // The pre-norm folded into the q projection (GemmNorm): the CPU runs the
    // two ops, CUDA's decode GEMV normalises as it loads (the same bits).
    // The first n * d floats of scratch receive the normed rows, which the
    // k, v (and gate) projections read.
    GemmNorm norm;
    norm.kind =
        norm_->type == NormType::kLayerNorm ? NormKind::kLayer : NormKind::kRms;
    norm.w = norm_w_;
    norm.b = norm_b_;
    norm.eps = static_cast<float>(norm_->eps);
    norm.out = ctx.scratch;
    norm.ldo = d_model_;
    return MixNormed(ctx, residual, norm, residual);
  }

  absl::Status Mix(const StepContext& ctx, const float* x,
                   float* residual) override {
    return MixNormed(ctx, x, GemmNorm(), residual);
  }

  absl::Status MixNormed(const StepContext& ctx, const float* x,
                         const GemmNorm& norm, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n(), qd = QDim(), kd = KvDim();
    // The first n * d floats of scratch hold Forward's normed rows; then
    // the stacked projection's rows [q | k | v | gate], then o, then o's
    // 16-bit copy where the o-projection reads one (the CUDA backend's
    // cuBLAS path), which the attention writes beside o.
    const int ld = ProjRows();
    float* q = ctx.scratch + static_cast<int64_t>(n) * d_model_;
    float* k = q + qd;
    float* v = k + kd;
    float* gate = v + kd;  // out_gate only
    float* o = q + static_cast<int64_t>(n) * ld;
    const HalfRows o16 =
        HalfInputAt(be, wo_, n, o + static_cast<int64_t>(n) * qd);
    GemmParams qkv = Projection(x, n, wqkv_, bqkv_, q);
    qkv.norm = norm;
    be.Gemm(qkv);
    SinkHeadNorms norms;
    if (c_.qk_norm) {
      norms.q_w = q_norm_w_;
      norms.k_w = k_norm_w_;
      norms.eps = static_cast<float>(c_.qk_norm_eps);
    }
    const int64_t slot_bytes = slot_stride_;
    SinkAttentionParams attend;
    attend.segs = ctx.segs();
    attend.nsegs = ctx.nsegs();
    attend.q = q;
    attend.ldq = ld;
    attend.k = k;
    attend.ldk = ld;
    attend.v = v;
    attend.ldv = ld;
    attend.cache = state_;
    attend.slot_bytes = slot_bytes;
    attend.dims = cache_;
    attend.rope_cos = rope_cos_;
    attend.rope_sin = rope_sin_;
    attend.norms = norms;
    if (c_.out_gate) {
      attend.gate = gate;
      attend.ldgate = ld;
    }
    attend.out = o;
    attend.out16 = o16;
    be.SinkAttention(attend);
    SinkAppendParams append;
    append.segs = ctx.segs();
    append.nsegs = ctx.nsegs();
    append.k = k;
    append.ldk = ld;
    append.v = v;
    append.ldv = ld;
    append.cache = state_;
    append.slot_bytes = slot_bytes;
    append.dims = cache_;
    append.norms.k_w = norms.k_w;
    append.norms.eps = norms.eps;
    be.SinkCacheAppend(append);
    GemmParams o_proj = Projection(o, n, wo_, bo_, residual);
    o_proj.x16 = o16;
    out_.Add(be, o_proj);
    return absl::OkStatus();
  }

 private:
  int QDim() const { return cache_.n_heads * cache_.head_dim; }
  int KvDim() const { return cache_.n_kv_heads * cache_.head_dim; }
  // The stacked projection's rows: q, k, v and the output gate's.
  int ProjRows() const { return (c_.out_gate ? 2 : 1) * QDim() + 2 * KvDim(); }
  bool PartialRotary() const { return rope_ && rotary_dim_ < cache_.head_dim; }

  // Appends to *out a projection's weight ([heads * head_dim, cols]) or, with
  // cols = 0, its bias or norm weight ([heads * head_dim]). With `rope` and a
  // partial rotation each head's output channels go in the backends' RoPE
  // order (RopeSourceChannel): q and k share the order, so scores are
  // unchanged, and v, gate and o keep the checkpoint's.
  absl::Status AppendRopeOrdered(const std::string& name, int heads,
                                 int64_t cols, bool rope, WeightStore& ws,
                                 std::vector<float>* out) const {
    const int dh = cache_.head_dim;
    const int64_t rows = static_cast<int64_t>(heads) * dh;
    const int64_t width = std::max<int64_t>(cols, 1);
    std::vector<int64_t> shape = {rows};
    if (cols > 0) shape.push_back(cols);
    auto src = ws.F32(name, shape);
    if (!src.ok()) return src.status();
    const size_t at = out->size();
    out->resize(at + static_cast<size_t>(rows * width));
    float* dst = out->data() + at;
    for (int64_t h = 0; h < heads; ++h) {
      for (int e = 0; e < dh; ++e) {
        const int64_t from =
            h * dh + (rope && PartialRotary()
                          ? RopeSourceChannel(e, dh, rotary_dim_)
                          : e);
        std::copy(*src + from * width, *src + (from + 1) * width,
                  dst + (h * dh + e) * width);
      }
    }
    return absl::OkStatus();
  }

  // Every cache position 0 .. S + W (the query's at most). Positions are
  // bounded, so this table is exact for streams of any length.
  absl::Status BuildRopeTable(Backend& be) {
    const int half = cache_.head_dim / 2;
    const int64_t positions = am::CacheRows(cache_.sinks, cache_.window) + 1;
    const RopeTable table =
        MakeRopeTable(c_.rope_scaling, cache_.head_dim, rotary_dim_,
                      c_.rope_theta, positions);
    auto c = be.UploadVector(table.cos.data(), positions * half);
    if (!c.ok()) return c.status();
    auto s = be.UploadVector(table.sin.data(), positions * half);
    if (!s.ok()) return s.status();
    rope_cos_ = *c;
    rope_sin_ = *s;
    return absl::OkStatus();
  }

  const AttentionConfig c_;
  const std::optional<NormConfig> norm_;
  const int d_model_;
  const bool rope_;  // "rope_half"
  ResidualOut out_;
  int rotary_dim_ = 0;
  SinkCacheDims cache_;
  const float *norm_w_ = nullptr, *norm_b_ = nullptr;
  Matrix wqkv_, wo_;  // wqkv_: [q; k; v; gate], ProjRows() rows
  const float *bqkv_ = nullptr, *bo_ = nullptr;
  // qk_norm only: weights in the RoPE order of q and k's channels.
  const float *q_norm_w_ = nullptr, *k_norm_w_ = nullptr;
  const float *rope_cos_ = nullptr, *rope_sin_ = nullptr;
  void* state_ = nullptr;
  int64_t slot_stride_ = 0;  // bytes between slots
};

// An integer in [0, kMaxJsonSize].
absl::Status ParseCount(ObjectReader& r, const char* key, int64_t* out) {
  const nlohmann::json* v = r.Get(key);
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
absl::Status NullOnly(ObjectReader& r, const char* key, absl::string_view why) {
  const nlohmann::json* v = r.Get(key);
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  return r.Invalid(key, absl::StrCat("null (", why, ")"), *v);
}

// A finite number >= 1.
absl::Status ParseFactor(ObjectReader& r, const char* key, double* out) {
  const nlohmann::json* v = r.Get(key);
  if (v == nullptr) return r.Missing(key, "a finite number >= 1");
  if (!v->is_number() || !(v->get<double>() >= 1.0) ||
      !std::isfinite(v->get<double>())) {
    return r.Invalid(key, "a finite number >= 1", *v);
  }
  *out = v->get<double>();
  return absl::OkStatus();
}

// config.json's "rope_scaling" (null or an object; see RopeScaling). Keys the
// type does not use are errors, not warnings: each one would change the
// frequencies in the code that wrote it.
absl::Status ParseRopeScaling(ObjectReader& parent, double rope_theta,
                              RopeScaling* out) {
  *out = RopeScaling();
  const nlohmann::json* value = parent.Get("rope_scaling");
  if (value == nullptr || value->is_null()) return absl::OkStatus();
  if (!value->is_object()) {
    return parent.Invalid("rope_scaling", "null or a rope_scaling object",
                          *value);
  }
  ObjectReader r(*value, parent.source(),
                 absl::StrCat(parent.context(), ": rope_scaling"));
  int type = 0;
  RETURN_IF_ERROR(
      ParseChoice(r, "type", {"linear", "dynamic", "llama3", "yarn"}, &type));
  constexpr RopeScalingType kTypes[] = {
      RopeScalingType::kLinear, RopeScalingType::kDynamic,
      RopeScalingType::kLlama3, RopeScalingType::kYarn};
  RopeScaling s;
  s.type = kTypes[type];
  std::vector<std::string> fields = {"type", "factor"};
  switch (s.type) {
    case RopeScalingType::kDynamic:
      fields.push_back("max_position_embeddings");
      break;
    case RopeScalingType::kLlama3:
      fields.insert(fields.end(), {"low_freq_factor", "high_freq_factor",
                                   "original_max_position_embeddings"});
      break;
    case RopeScalingType::kYarn:
      fields.insert(fields.end(),
                    {"original_max_position_embeddings", "beta_fast",
                     "beta_slow", "attention_factor"});
      break;
    case RopeScalingType::kLinear:
    case RopeScalingType::kNone:
      break;
  }
  for (const auto& item : value->items()) {
    if (std::find(fields.begin(), fields.end(), item.key()) == fields.end()) {
      return r.Error(
          item.key().c_str(),
          absl::StrCat("is not used by type \"", RopeScalingTypeName(s.type),
                       "\" (its fields: ", absl::StrJoin(fields, ", "), ")"));
    }
  }
  RETURN_IF_ERROR(ParseFactor(r, "factor", &s.factor));
  if (s.type == RopeScalingType::kDynamic) {
    RETURN_IF_ERROR(
        r.PositiveInt("max_position_embeddings", &s.max_position_embeddings));
  }
  if (s.type == RopeScalingType::kLlama3) {
    RETURN_IF_ERROR(r.PositiveNumber("low_freq_factor", &s.low_freq_factor));
    RETURN_IF_ERROR(r.PositiveNumber("high_freq_factor", &s.high_freq_factor));
    if (!(s.high_freq_factor > s.low_freq_factor)) {
      return r.Invalid(
          "high_freq_factor",
          absl::StrCat("greater than low_freq_factor = ", s.low_freq_factor),
          *r.Get("high_freq_factor"));
    }
  }
  if (s.type == RopeScalingType::kLlama3 || s.type == RopeScalingType::kYarn) {
    RETURN_IF_ERROR(r.PositiveInt("original_max_position_embeddings",
                                  &s.original_max_position_embeddings));
  }
  if (s.type == RopeScalingType::kYarn) {
    if (!(rope_theta > 1.0)) {
      return parent.Invalid("rope_theta",
                            "greater than 1 with yarn rope_scaling (its "
                            "correction range divides by ln rope_theta)",
                            *parent.Get("rope_theta"));
    }
    RETURN_IF_ERROR(r.PositiveNumber("beta_fast", &s.beta_fast));
    RETURN_IF_ERROR(r.PositiveNumber("beta_slow", &s.beta_slow));
    if (s.beta_slow > s.beta_fast) {
      return r.Invalid("beta_slow",
                       absl::StrCat("at most beta_fast = ", s.beta_fast),
                       *r.Get("beta_slow"));
    }
    RETURN_IF_ERROR(r.PositiveNumber("attention_factor", &s.attention_factor));
  }
  *out = s;
  return absl::OkStatus();
}

// config.json's optional "rotary_dim" (see AttentionConfig); null or absent
// rotates every channel.
absl::Status ParseRotaryDim(ObjectReader& r, int64_t head_dim, int64_t* out) {
  *out = head_dim;
  const nlohmann::json* v = r.Get("rotary_dim");
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  const std::string expected =
      absl::StrCat("an even integer in [2, head_dim = ", head_dim, "] or null");
  if (!v->is_number_integer() ||
      (v->is_number_unsigned() &&
       v->get<uint64_t>() > static_cast<uint64_t>(head_dim))) {
    return r.Invalid("rotary_dim", expected, *v);
  }
  const int64_t rotary_dim = v->get<int64_t>();
  if (rotary_dim < 2 || rotary_dim > head_dim || rotary_dim % 2 != 0) {
    return r.Invalid("rotary_dim", expected, *v);
  }
  *out = rotary_dim;
  return absl::OkStatus();
}

// config.json's optional "qk_norm" and "out_gate" (see AttentionConfig).
absl::Status ParseGating(ObjectReader& r, std::vector<std::string>* warnings,
                         AttentionConfig* c) {
  const nlohmann::json* gate = r.Get("out_gate");
  if (gate != nullptr && !gate->is_null()) {
    if (!gate->is_string() || gate->get<std::string>() != "sigmoid") {
      return r.Invalid("out_gate", "\"sigmoid\" or null", *gate);
    }
    c->out_gate = true;
  }
  const nlohmann::json* norm_json = r.Get("qk_norm");
  if (norm_json == nullptr || norm_json->is_null()) return absl::OkStatus();
  std::optional<NormConfig> norm;
  RETURN_IF_ERROR(ParseNorm(r, "qk_norm", warnings, &norm));
  if (norm->type != NormType::kRmsNorm || !norm->affine) {
    return r.Invalid("qk_norm", "an affine rmsnorm object or null", *norm_json);
  }
  c->qk_norm = true;
  c->qk_norm_eps = norm->eps;
  return absl::OkStatus();
}

absl::Status ParseAttention(ObjectReader& r, std::vector<std::string>* warnings,
                            std::any* params) {
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
  if (c.pos == AttentionPos::kRopeHalf) {
    RETURN_IF_ERROR(ParseRopeScaling(r, c.rope_theta, &c.rope_scaling));
    RETURN_IF_ERROR(ParseRotaryDim(r, c.head_dim, &c.rotary_dim));
  } else {
    RETURN_IF_ERROR(NullOnly(r, "rope_scaling", "there is no RoPE to scale"));
    RETURN_IF_ERROR(NullOnly(r, "rotary_dim", "there is no RoPE"));
  }
  RETURN_IF_ERROR(NullOnly(
      r, "rel_bias", "relative-position bias is not supported by this build"));
  if (const nlohmann::json* scale = r.Get("scale");
      scale != nullptr && !scale->is_null()) {
    RETURN_IF_ERROR(r.PositiveNumber("scale", &c.scale));
  }

  RETURN_IF_ERROR(ParseGating(r, warnings, &c));
  RETURN_IF_ERROR(ParseCount(r, "sinks", &c.sinks));
  RETURN_IF_ERROR(ParseCount(r, "window", &c.window));
  if (c.sinks + c.window < 1) {
    return r.Invalid("window",
                     ">= 1 when sinks is 0 (the cache would hold no token)",
                     *r.Get("window"));
  }
  if (c.rope_scaling.type == RopeScalingType::kDynamic &&
      c.sinks + c.window + 1 > c.rope_scaling.max_position_embeddings) {
    // Past that length transformers would rescale θ by the length of the
    // forward pass, which a rolling cache has no single value for.
    return r.Invalid(
        "window",
        absl::StrCat("at most rope_scaling.max_position_embeddings - sinks - "
                     "1 = ",
                     c.rope_scaling.max_position_embeddings - c.sinks - 1,
                     " with dynamic rope_scaling (queries sit at cache "
                     "positions up to sinks + window, which must stay where "
                     "dynamic NTK leaves RoPE unscaled)"),
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

absl::StatusOr<std::unique_ptr<Layer>> BuildAttention(const BlockConfig& block,
                                                      const BlockSite& site) {
  if (block.norm.has_value() && block.norm->type == NormType::kScaleNorm) {
    return absl::InvalidArgumentError(absl::StrCat(
        site.where,
        ": field \"norm\" must be rmsnorm, rmsnorm_t5, layernorm or null"));
  }
  return MakeAttention(*block.As<AttentionConfig>(), block.norm, site);
}

}  // namespace

const BlockKind kAttentionBlock = {"attention", ParseAttention, BuildAttention,
                                   /*residual_scale=*/true};

absl::StatusOr<std::unique_ptr<Layer>> MakeAttention(
    const AttentionConfig& config, const std::optional<NormConfig>& norm,
    const BlockSite& site) {
  RETURN_IF_ERROR(CheckConfig(config, site.d_model));
  if (norm.has_value() && norm->type == NormType::kScaleNorm) {
    return absl::InvalidArgumentError(
        "attention: the norm must be rmsnorm, rmsnorm_t5, layernorm or none");
  }
  auto layer = std::make_unique<Attention>(config, norm, site.d_model,
                                           site.residual_scale);
  RETURN_IF_ERROR(layer->Bind(site.prefix, *site.weights, *site.backend));
  return layer;
}

absl::StatusOr<std::unique_ptr<Mixer>> MakeAttentionMixer(
    const AttentionConfig& config, const BlockSite& site) {
  RETURN_IF_ERROR(CheckConfig(config, site.d_model));
  auto layer =
      std::make_unique<Attention>(config, std::nullopt, site.d_model, 1.0f);
  RETURN_IF_ERROR(layer->Bind(site.prefix, *site.weights, *site.backend));
  return layer;
}

}  // namespace seqboat
