#include "engine/layers/gdn.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/layers/weight_fetch.h"

namespace seqboat {
namespace {

// The widest value head the CUDA kernel covers (kernels/cuda/gdn_kernels.h).
constexpr int64_t kMaxHeadVDim = 1024;

class Gdn final : public Layer {
 public:
  Gdn(const GdnConfig& config, int d_model, float norm_eps)
      : c_(config), d_model_(d_model), norm_eps_(norm_eps) {}

  absl::Status Bind(const std::string& p, WeightStore& ws, Backend& be) {
    const int64_t d = d_model_, cc = c_.conv_channels(), vd = c_.value_dim(),
                  hv = c_.n_v_heads;
    auto vec = [&](const std::string& name, std::vector<int64_t> shape,
                   const float** out) {
      return FetchVector(ws, be, p + name, shape, out);
    };
    RETURN_IF_ERROR(vec("norm.weight", {d}, &norm_w_));
    // The four input projections as one matrix: one GEMM a step.
    RETURN_IF_ERROR(FetchStackedMatrix(ws, be,
                                       {{p + "in_qkv.weight", cc},
                                        {p + "in_z.weight", vd},
                                        {p + "in_b.weight", hv},
                                        {p + "in_a.weight", hv}},
                                       d, &in_proj_));
    RETURN_IF_ERROR(vec("conv.weight", {cc, c_.d_conv}, &conv_w_));
    RETURN_IF_ERROR(vec("A", {hv}, &a_));
    RETURN_IF_ERROR(vec("dt_bias", {hv}, &dt_bias_));
    RETURN_IF_ERROR(vec("gated_norm.weight", {c_.head_v_dim}, &gated_w_));
    return FetchMatrix(ws, be, p + "out_proj.weight", d, vd, &out_proj_);
  }

  std::string kind() const override { return "gdn"; }

  int64_t StateBytesPerSlot() const override {
    return (ConvFloats() + DeltaFloats()) * static_cast<int64_t>(sizeof(float));
  }

  int64_t ScratchFloatsPerRow() const override {
    return d_model_ + c_.proj_rows() + c_.conv_channels() + c_.value_dim();
  }

  void BindState(void* base, int64_t slot_stride) override {
    state_ = static_cast<float*>(base);
    slot_floats_ = slot_stride / static_cast<int64_t>(sizeof(float));
  }

  absl::Status Forward(const StepContext& ctx, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n(), d = d_model_,
              cc = static_cast<int>(c_.conv_channels()),
              vd = static_cast<int>(c_.value_dim()),
              hv = static_cast<int>(c_.n_v_heads),
              w = static_cast<int>(c_.proj_rows());
    float* u = ctx.scratch;
    float* proj = u + static_cast<int64_t>(n) * d;
    float* qkv = proj + static_cast<int64_t>(n) * w;
    float* y = qkv + static_cast<int64_t>(n) * cc;

    // The pre-norm folded into the stacked input projection (GemmNorm): the
    // CPU runs the two ops, CUDA's decode GEMV normalises as it loads (the
    // same bits); u holds the normed rows either way. The conv over its
    // first cc channels (q, k, v) follows the GEMM (GemmConv): CUDA's decode
    // GEMV runs each channel's step as it stores it, as for Mamba-1. A slot
    // is [conv window | delta-rule state], one contiguous region.
    GemmParams in_proj = Projection(residual, n, in_proj_, nullptr, proj);
    in_proj.norm.kind = NormKind::kRms;
    in_proj.norm.w = norm_w_;
    in_proj.norm.eps = norm_eps_;
    in_proj.norm.out = u;
    in_proj.norm.ldo = d;
    in_proj.conv.segs = ctx.segs();
    in_proj.conv.nsegs = ctx.nsegs();
    in_proj.conv.state = state_;
    in_proj.conv.state_stride = slot_floats_;
    in_proj.conv.w = conv_w_;
    in_proj.conv.e = cc;
    in_proj.conv.k = static_cast<int>(c_.d_conv);
    in_proj.conv.out = qkv;
    be.Gemm(in_proj);
    GdnScanParams scan;
    scan.segs = ctx.segs();
    scan.nsegs = ctx.nsegs();
    scan.qkv = qkv;
    scan.ldqkv = cc;
    scan.z = proj + cc;
    scan.b = proj + cc + vd;
    scan.a = proj + cc + vd + hv;
    scan.ldz = w;
    scan.a_coef = a_;
    scan.dt_bias = dt_bias_;
    scan.norm_w = gated_w_;
    scan.norm_eps = static_cast<float>(c_.gated_norm_eps);
    scan.state = state_ + ConvFloats();
    scan.state_stride = slot_floats_;
    scan.k_heads = static_cast<int>(c_.n_k_heads);
    scan.v_heads = hv;
    scan.k_dim = static_cast<int>(c_.head_k_dim);
    scan.v_dim = static_cast<int>(c_.head_v_dim);
    scan.out = y;
    scan.ldo = vd;
    be.GdnScan(scan);
    GemmParams out_proj = Projection(y, n, out_proj_, nullptr, residual);
    out_proj.accumulate = true;
    be.Gemm(out_proj);
    return absl::OkStatus();
  }

 private:
  int64_t ConvFloats() const { return c_.conv_channels() * (c_.d_conv - 1); }
  int64_t DeltaFloats() const {
    return c_.n_v_heads * c_.head_k_dim * c_.head_v_dim;
  }

  const GdnConfig c_;
  const int d_model_;
  const float norm_eps_;
  const float* norm_w_ = nullptr;
  Matrix in_proj_, out_proj_;
  const float *conv_w_ = nullptr, *a_ = nullptr, *dt_bias_ = nullptr,
              *gated_w_ = nullptr;
  float* state_ = nullptr;
  int64_t slot_floats_ = 0;  // floats between slots
};

absl::Status ParseGdn(ObjectReader& r, std::vector<std::string>* /*warnings*/,
                      std::any* params) {
  GdnConfig c;
  for (auto [key, field] : {std::pair{"n_k_heads", &c.n_k_heads},
                            std::pair{"n_v_heads", &c.n_v_heads},
                            std::pair{"head_k_dim", &c.head_k_dim},
                            std::pair{"head_v_dim", &c.head_v_dim},
                            std::pair{"d_conv", &c.d_conv}}) {
    RETURN_IF_ERROR(r.PositiveInt(key, field));
  }
  if (c.n_v_heads % c.n_k_heads != 0) {
    return r.Error("n_v_heads",
                   absl::StrCat("must be a multiple of n_k_heads ", c.n_k_heads,
                                ", got ", c.n_v_heads));
  }
  if (c.head_v_dim > kMaxHeadVDim) {
    return r.Error("head_v_dim", absl::StrCat("must be <= ", kMaxHeadVDim,
                                              ", got ", c.head_v_dim));
  }
  // Sizes fit int (the kernels index channels with it), each product
  // checked on its own so that it stays inside int64.
  for (auto [key, heads, dim] :
       {std::tuple{"head_k_dim", c.n_k_heads, c.head_k_dim},
        std::tuple{"head_v_dim", c.n_v_heads, c.head_v_dim}}) {
    if (heads * dim > kMaxJsonSize / 8) {
      return r.Error(key, absl::StrCat("times its heads is ", heads * dim,
                                       ", above ", kMaxJsonSize / 8));
    }
  }
  if (c.n_v_heads * c.head_k_dim > kMaxJsonSize / 8 ||
      c.n_v_heads * c.head_k_dim * c.head_v_dim > kMaxJsonSize) {
    return r.Error("head_k_dim",
                   absl::StrCat("gives a state of ",
                                c.n_v_heads * c.head_k_dim * c.head_v_dim,
                                " floats a sequence, above ", kMaxJsonSize));
  }
  RETURN_IF_ERROR(r.PositiveNumber("gated_norm_eps", &c.gated_norm_eps));
  *params = c;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Layer>> BuildGdn(const BlockConfig& block,
                                                const BlockSite& site) {
  return MakeGdn(*block.As<GdnConfig>(), block.norm, site);
}

}  // namespace

const BlockKind kGdnBlock = {"gdn", ParseGdn, BuildGdn};

absl::StatusOr<std::unique_ptr<Layer>> MakeGdn(
    const GdnConfig& config, const std::optional<NormConfig>& norm,
    const BlockSite& site) {
  ASSIGN_OR_RETURN(const float eps, AffineRmsNormEps(norm, site));
  auto layer = std::make_unique<Gdn>(config, site.d_model, eps);
  RETURN_IF_ERROR(layer->Bind(site.prefix, *site.weights, *site.backend));
  return layer;
}

}  // namespace seqboat
