#include "engine/layers/attention.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/backend/attention_math.h"
#include "engine/layers/weight_fetch.h"

namespace seqboat {
namespace {

namespace am = attention_math;

absl::Status CheckDims(const AttentionDims& d) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("attention: ", what));
  };
  if (d.d_model <= 0 || d.n_heads <= 0 || d.n_kv_heads <= 0 ||
      d.head_dim <= 0) {
    return bad("d_model, n_heads, n_kv_heads and head_dim must be positive");
  }
  if (d.n_heads % d.n_kv_heads != 0) {
    return bad("n_heads must be a multiple of n_kv_heads");
  }
  if (d.norm.has_value() && d.norm->type == NormType::kScaleNorm) {
    return bad("the norm must be rmsnorm, rmsnorm_t5, layernorm or none");
  }
  if (d.rope && d.head_dim % 2 != 0) return bad("RoPE needs an even head_dim");
  if (d.rope && !(d.rope_theta > 0.0 && std::isfinite(d.rope_theta))) {
    return bad("rope_theta must be a positive finite number");
  }
  if (d.sinks < 0 || d.window < 0 || d.sinks + d.window < 1) {
    return bad("sinks and window must be >= 0 with sinks + window >= 1");
  }
  return absl::OkStatus();
}

class Attention final : public Layer {
 public:
  explicit Attention(const AttentionDims& dims) : dims_(dims) {
    cache_.n_heads = dims.n_heads;
    cache_.n_kv_heads = dims.n_kv_heads;
    cache_.head_dim = dims.head_dim;
    cache_.sinks = dims.sinks;
    cache_.window = dims.window;
    cache_.scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim));
  }

  absl::Status Bind(const std::string& p, WeightStore& ws, Backend& be) {
    const int64_t d = dims_.d_model, qd = QDim(), kd = KvDim();
    auto vec = [&](const std::string& name, int64_t n, const float** out) {
      return FetchVector(ws, be, p + name, {n}, out);
    };
    auto mat = [&](const std::string& name, int64_t rows, int64_t cols,
                   Matrix* out) {
      return FetchMatrix(ws, be, p + name, rows, cols, out);
    };
    if (dims_.norm.has_value() && dims_.norm->affine) {
      RETURN_IF_ERROR(vec("norm.weight", d, &norm_w_));
      if (dims_.norm->type == NormType::kLayerNorm) {
        RETURN_IF_ERROR(vec("norm.bias", d, &norm_b_));
      }
    }
    RETURN_IF_ERROR(mat("attn.q.weight", qd, d, &wq_));
    RETURN_IF_ERROR(mat("attn.k.weight", kd, d, &wk_));
    RETURN_IF_ERROR(mat("attn.v.weight", kd, d, &wv_));
    RETURN_IF_ERROR(mat("attn.o.weight", d, qd, &wo_));
    if (dims_.qkv_bias) {
      RETURN_IF_ERROR(vec("attn.q.bias", qd, &bq_));
      RETURN_IF_ERROR(vec("attn.k.bias", kd, &bk_));
      RETURN_IF_ERROR(vec("attn.v.bias", kd, &bv_));
    }
    if (dims_.o_bias) {
      RETURN_IF_ERROR(vec("attn.o.bias", d, &bo_));
    }
    if (dims_.rope) return BuildRopeTable(be);
    return absl::OkStatus();
  }

  std::string kind() const override { return "attention"; }

  int64_t StateBytesPerSlot() const override {
    return am::CacheSlotBytes(dims_.n_kv_heads, dims_.head_dim, dims_.sinks,
                              dims_.window);
  }

  int64_t ScratchFloatsPerRow() const override {
    return dims_.d_model + 2 * QDim() + 2 * KvDim();
  }

  void BindState(void* base) override { state_ = base; }

  void ResetSlot(Backend& backend, int slot) override {
    backend.Zero(static_cast<char*>(state_) + slot * StateBytesPerSlot(),
                 StateBytesPerSlot());
  }

  absl::Status Forward(const StepContext& ctx, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n, d = dims_.d_model, qd = QDim(), kd = KvDim();
    float* u = ctx.scratch;
    float* q = u + static_cast<int64_t>(n) * d;
    float* k = q + static_cast<int64_t>(n) * qd;
    float* v = k + static_cast<int64_t>(n) * kd;
    float* o = v + static_cast<int64_t>(n) * kd;
    const float* x = u;
    if (!dims_.norm.has_value()) {
      // The residual is only written by the last GEMM, after q/k/v.
      x = residual;
    } else if (dims_.norm->type == NormType::kLayerNorm) {
      be.LayerNorm(residual, n, d, norm_w_, norm_b_,
                   static_cast<float>(dims_.norm->eps), u);
    } else {
      be.RmsNorm(residual, n, d, norm_w_, static_cast<float>(dims_.norm->eps),
                 u);
    }
    be.Gemm(x, d, n, wq_, bq_, q, qd, /*accumulate=*/false);
    be.Gemm(x, d, n, wk_, bk_, k, kd, false);
    be.Gemm(x, d, n, wv_, bv_, v, kd, false);
    const int64_t slot_bytes = StateBytesPerSlot();
    SinkAttentionParams attend;
    attend.segs = ctx.segs;
    attend.nsegs = ctx.nsegs;
    attend.q = q;
    attend.ldq = qd;
    attend.k = k;
    attend.ldk = kd;
    attend.v = v;
    attend.ldv = kd;
    attend.cache = state_;
    attend.slot_bytes = slot_bytes;
    attend.dims = cache_;
    attend.rope_cos = rope_cos_;
    attend.rope_sin = rope_sin_;
    attend.out = o;
    be.SinkAttention(attend);
    SinkAppendParams append;
    append.segs = ctx.segs;
    append.nsegs = ctx.nsegs;
    append.k = k;
    append.ldk = kd;
    append.v = v;
    append.ldv = kd;
    append.cache = state_;
    append.slot_bytes = slot_bytes;
    append.dims = cache_;
    be.SinkCacheAppend(append);
    be.Gemm(o, qd, n, wo_, bo_, residual, d, /*accumulate=*/true);
    return absl::OkStatus();
  }

 private:
  int QDim() const { return dims_.n_heads * dims_.head_dim; }
  int KvDim() const { return dims_.n_kv_heads * dims_.head_dim; }

  // cos/sin of every cache position 0 .. S + W (the query's at most), angle
  // p·θ_i in fp32 as HF computes it. Positions are bounded, so this table is
  // exact for streams of any length.
  absl::Status BuildRopeTable(Backend& be) {
    const int half = dims_.head_dim / 2;
    const int64_t positions = am::CacheRows(dims_.sinks, dims_.window) + 1;
    std::vector<float> cos_t(positions * half), sin_t(positions * half);
    const float theta = static_cast<float>(dims_.rope_theta);
    for (int64_t p = 0; p < positions; ++p) {
      for (int i = 0; i < half; ++i) {
        const float angle =
            static_cast<float>(p) * am::RopeInvFreq(i, dims_.head_dim, theta);
        cos_t[p * half + i] = std::cos(angle);
        sin_t[p * half + i] = std::sin(angle);
      }
    }
    auto c = be.UploadVector(cos_t.data(), positions * half);
    if (!c.ok()) return c.status();
    auto s = be.UploadVector(sin_t.data(), positions * half);
    if (!s.ok()) return s.status();
    rope_cos_ = *c;
    rope_sin_ = *s;
    return absl::OkStatus();
  }

  AttentionDims dims_;
  SinkCacheDims cache_;
  const float *norm_w_ = nullptr, *norm_b_ = nullptr;
  Matrix wq_, wk_, wv_, wo_;
  const float *bq_ = nullptr, *bk_ = nullptr, *bv_ = nullptr, *bo_ = nullptr;
  const float *rope_cos_ = nullptr, *rope_sin_ = nullptr;
  void* state_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> MakeAttention(const AttentionDims& dims,
                                                     const std::string& prefix,
                                                     WeightStore& weights,
                                                     Backend& backend) {
  RETURN_IF_ERROR(CheckDims(dims));
  auto layer = std::make_unique<Attention>(dims);
  RETURN_IF_ERROR(layer->Bind(prefix, weights, backend));
  return layer;
}

}  // namespace seqboat
