#include "engine/layers/pre_norm.h"

#include <numeric>

#include "base/status_macros.h"

namespace seqboat {

absl::Status PreNorm::Bind(const std::optional<NormConfig>& norm,
                           const std::string& prefix, int d_model,
                           WeightStore& ws, Backend& be) {
  norm_ = norm;
  d_ = d_model;
  if (!norm.has_value() || !norm->affine) return absl::OkStatus();
  auto upload = [&](const float* host, const float** out) -> absl::Status {
    auto dev = be.UploadVector(host, d_model);
    if (!dev.ok()) return dev.status();
    *out = *dev;
    return absl::OkStatus();
  };
  if (norm->type == NormType::kScaleNorm) {
    // ScaleNorm is an RMS norm with one learned gain for every feature.
    auto g = ws.F32(prefix + "norm.scalar", {1});
    if (!g.ok()) return g.status();
    const std::vector<float> gains(d_model, **g);
    return upload(gains.data(), &weight_);
  }
  auto w = ws.F32(prefix + "norm.weight", {d_model});
  if (!w.ok()) return w.status();
  RETURN_IF_ERROR(upload(*w, &weight_));
  if (norm->type == NormType::kLayerNorm) {
    auto b = ws.F32(prefix + "norm.bias", {d_model});
    if (!b.ok()) return b.status();
    RETURN_IF_ERROR(upload(*b, &bias_));
  }
  return absl::OkStatus();
}

void PreNorm::Apply(Backend& be, const float* x, int n, float* out) {
  const float eps = norm_.has_value() ? static_cast<float>(norm_->eps) : 0.0f;
  if (!norm_.has_value()) {
    if (static_cast<int>(identity_rows_.size()) < n) {
      identity_rows_.resize(n);
      std::iota(identity_rows_.begin(), identity_rows_.end(), 0);
    }
    GatherRowsParams gather;
    gather.x = x;
    gather.d = d_;
    gather.rows = identity_rows_.data();
    gather.m = n;
    gather.out = out;
    be.GatherRows(gather);
    return;
  }
  NormParams norm;
  norm.x = x;
  norm.ldx = d_;
  norm.n = n;
  norm.d = d_;
  norm.w = weight_;
  norm.b = bias_;
  norm.eps = eps;
  norm.out = out;
  norm.ldo = d_;
  // rmsnorm and rmsnorm_t5 differ only in where a low-precision model
  // rounds; in fp32 they are the same op. scalenorm uses the gain vector.
  if (norm_->type == NormType::kLayerNorm) {
    be.LayerNorm(norm);
  } else {
    be.RmsNorm(norm);
  }
}

void PreNorm::Fold(Backend& be, const float* x, int n, float* out,
                   GemmParams* first) {
  if (!Folded(out, &first->norm)) {
    Apply(be, x, n, out);
    first->x = out;
    first->ldx = d_;
    return;
  }
  first->x = x;
  first->ldx = d_;
}

bool PreNorm::Folded(float* out, GemmNorm* fold) const {
  if (!norm_.has_value()) return false;
  // The same op as Apply's: rmsnorm, rmsnorm_t5 and scalenorm are RmsNorm.
  fold->kind =
      norm_->type == NormType::kLayerNorm ? NormKind::kLayer : NormKind::kRms;
  fold->w = weight_;
  fold->b = bias_;
  fold->eps = static_cast<float>(norm_->eps);
  fold->out = out;
  fold->ldo = d_;
  return true;
}

}  // namespace seqboat
