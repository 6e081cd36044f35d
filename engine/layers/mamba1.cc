#include "engine/layers/mamba1.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/layers/weight_fetch.h"

namespace seqboat {
namespace {

class Mamba1 final : public Layer {
 public:
  Mamba1(const Mamba1Config& config, int d_model, float norm_eps)
      : c_(config),
        d_model_(d_model),
        norm_eps_(norm_eps),
        dt_bc_eps_(config.dt_bc_norm.has_value()
                       ? static_cast<float>(config.dt_bc_norm->eps)
                       : 0.0f) {}

  absl::Status Bind(const std::string& p, WeightStore& ws, Backend& be) {
    const int64_t d = d_model_, e = c_.d_inner, n = c_.d_state, k = c_.d_conv,
                  r = c_.dt_rank;
    auto vec = [&](const std::string& name, std::vector<int64_t> shape,
                   const float** out) {
      return FetchVector(ws, be, name, shape, out);
    };
    auto mat = [&](const std::string& name, int64_t rows, int64_t cols,
                   Matrix* out) {
      return FetchMatrix(ws, be, p + name, rows, cols, out);
    };
    RETURN_IF_ERROR(vec(p + "norm.weight", {d}, &norm_w_));
    RETURN_IF_ERROR(mat("in_proj.weight", 2 * e, d, &in_proj_));
    if (c_.in_proj_bias) {
      RETURN_IF_ERROR(vec(p + "in_proj.bias", {2 * e}, &in_bias_));
    }
    // The conv taps and A feed the shared op math directly: plain fp32 arrays.
    RETURN_IF_ERROR(vec(p + "conv.weight", {e, k}, &conv_w_));
    if (c_.conv_bias) {
      RETURN_IF_ERROR(vec(p + "conv.bias", {e}, &conv_b_));
    }
    RETURN_IF_ERROR(mat("x_proj.weight", r + 2 * n, e, &x_proj_));
    if (c_.dt_bc_norm.has_value() && c_.dt_bc_norm->affine) {
      RETURN_IF_ERROR(vec(p + "dt_norm.weight", {r}, &dt_norm_w_));
      RETURN_IF_ERROR(vec(p + "b_norm.weight", {n}, &b_norm_w_));
      RETURN_IF_ERROR(vec(p + "c_norm.weight", {n}, &c_norm_w_));
    }
    RETURN_IF_ERROR(mat("dt_proj.weight", e, r, &dt_proj_));
    RETURN_IF_ERROR(vec(p + "dt_proj.bias", {e}, &dt_bias_));
    RETURN_IF_ERROR(vec(p + "A", {e, n}, &a_));
    RETURN_IF_ERROR(vec(p + "D", {e}, &d_));
    RETURN_IF_ERROR(mat("out_proj.weight", d, e, &out_proj_));
    if (c_.out_proj_bias) {
      RETURN_IF_ERROR(vec(p + "out_proj.bias", {d}, &out_bias_));
    }
    return absl::OkStatus();
  }

  std::string kind() const override { return "mamba1"; }

  int64_t StateBytesPerSlot() const override {
    return (ConvFloats() + SsmFloats()) * static_cast<int64_t>(sizeof(float));
  }

  int64_t ScratchFloatsPerRow() const override {
    const int64_t e = c_.d_inner;
    // Then the 16-bit copies of x_proj's and out_proj's inputs.
    return d_model_ + 2 * e + e + XdblCols() + e + e +
           2 * HalfInputFloatsPerRow(e);
  }

  void BindState(void* base, int64_t slot_stride) override {
    state_ = static_cast<float*>(base);
    slot_floats_ = slot_stride / static_cast<int64_t>(sizeof(float));
  }

  absl::Status Forward(const StepContext& ctx, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n(), d = d_model_, e = c_.d_inner, ns = c_.d_state,
              r = c_.dt_rank, xc = XdblCols();
    float* u = ctx.scratch;
    float* xz = u + static_cast<int64_t>(n) * d;
    float* x = xz + static_cast<int64_t>(n) * 2 * e;
    float* xdbl = x + static_cast<int64_t>(n) * e;
    float* dt = xdbl + static_cast<int64_t>(n) * xc;
    float* y = dt + static_cast<int64_t>(n) * e;
    // Where the GEMMs after the conv and the scan read 16-bit input (the
    // CUDA backend's cuBLAS path), those ops write it beside x and y.
    float* halves = y + static_cast<int64_t>(n) * e;
    const HalfRows x16 = HalfInputAt(be, x_proj_, n, halves);
    const HalfRows y16 =
        HalfInputAt(be, out_proj_, n, halves + n * HalfInputFloatsPerRow(e));

    // The pre-norm folded into in_proj (GemmNorm): the CPU runs the two
    // ops, CUDA's decode GEMV normalises as it loads (the same bits); u
    // holds the normed rows either way. The conv too (GemmConv): the CPU
    // runs it after the GEMM, CUDA's decode GEMV in its epilogue.
    GemmParams in_proj = Projection(residual, n, in_proj_, in_bias_, xz);
    in_proj.norm.kind = NormKind::kRms;
    in_proj.norm.w = norm_w_;
    in_proj.norm.eps = norm_eps_;
    in_proj.norm.out = u;
    in_proj.norm.ldo = d;
    // Conv and scan states are interleaved per slot: [conv | ssm] so one slot
    // is one contiguous region (cheap reset and snapshot).
    const int64_t stride = slot_floats_;
    in_proj.conv.segs = ctx.segs();
    in_proj.conv.nsegs = ctx.nsegs();
    in_proj.conv.state = state_;
    in_proj.conv.state_stride = stride;
    in_proj.conv.w = conv_w_;
    in_proj.conv.bias = conv_b_;
    in_proj.conv.e = e;
    in_proj.conv.k = c_.d_conv;
    in_proj.conv.out = x;
    in_proj.conv.out16 = x16;
    be.Gemm(in_proj);
    GemmParams x_proj = Projection(x, n, x_proj_, nullptr, xdbl);
    x_proj.x16 = x16;
    be.Gemm(x_proj);
    if (c_.dt_bc_norm.has_value()) {
      // In place: the scan (and its folded dt_proj) reads these columns next.
      NormParams dt_norm;
      dt_norm.x = xdbl;
      dt_norm.ldx = xc;
      dt_norm.n = n;
      dt_norm.d = r;
      dt_norm.w = dt_norm_w_;
      dt_norm.eps = dt_bc_eps_;
      dt_norm.out = xdbl;
      dt_norm.ldo = xc;
      be.RmsNorm(dt_norm);
      NormParams b_norm;
      b_norm.x = xdbl + r;
      b_norm.ldx = xc;
      b_norm.n = n;
      b_norm.d = ns;
      b_norm.w = b_norm_w_;
      b_norm.eps = dt_bc_eps_;
      b_norm.out = xdbl + r;
      b_norm.ldo = xc;
      be.RmsNorm(b_norm);
      NormParams c_norm;
      c_norm.x = xdbl + r + ns;
      c_norm.ldx = xc;
      c_norm.n = n;
      c_norm.d = ns;
      c_norm.w = c_norm_w_;
      c_norm.eps = dt_bc_eps_;
      c_norm.out = xdbl + r + ns;
      c_norm.ldo = xc;
      be.RmsNorm(c_norm);
    }
    MambaScanParams scan;
    scan.segs = ctx.segs();
    scan.nsegs = ctx.nsegs();
    scan.x = x;
    // dt_proj folded into the scan (MambaDtProj): CUDA's decode scan computes
    // dt itself; the CPU runs the GEMM into the dt scratch first.
    scan.dt_proj.low = xdbl;
    scan.dt_proj.ldlow = xc;
    scan.dt_proj.n = n;
    scan.dt_proj.w = dt_proj_;
    scan.dt_proj.dt = dt;
    scan.bc = xdbl + r;
    scan.ldbc = xc;
    scan.z = xz + e;
    scan.ldz = 2 * e;
    scan.a = a_;
    scan.d = d_;
    scan.dt_bias = dt_bias_;
    scan.state = state_ + ConvFloats();
    scan.state_stride = stride;
    scan.e = e;
    scan.n_state = ns;
    scan.out = y;
    scan.out16 = y16;
    be.MambaScan(scan);
    GemmParams out_proj = Projection(y, n, out_proj_, out_bias_, residual);
    out_proj.accumulate = true;
    out_proj.x16 = y16;
    be.Gemm(out_proj);
    return absl::OkStatus();
  }

 private:
  int64_t ConvFloats() const { return c_.d_inner * (c_.d_conv - 1); }
  int64_t SsmFloats() const { return c_.d_inner * c_.d_state; }
  int XdblCols() const { return static_cast<int>(c_.dt_rank + 2 * c_.d_state); }

  const Mamba1Config c_;
  const int d_model_;
  const float norm_eps_;
  const float dt_bc_eps_;
  const float* norm_w_ = nullptr;
  Matrix in_proj_, x_proj_, dt_proj_, out_proj_;
  const float *in_bias_ = nullptr, *conv_w_ = nullptr, *conv_b_ = nullptr,
              *dt_bias_ = nullptr, *a_ = nullptr, *d_ = nullptr,
              *out_bias_ = nullptr;
  // Null without dt_bc_norm or when it is not affine.
  const float *dt_norm_w_ = nullptr, *b_norm_w_ = nullptr, *c_norm_w_ = nullptr;
  float* state_ = nullptr;
  int64_t slot_floats_ = 0;  // floats between slots
};

absl::Status ParseMamba1(ObjectReader& r, std::vector<std::string>* warnings,
                         std::any* params) {
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
    RETURN_IF_ERROR(ParseNorm(r, "dt_bc_norm", warnings, &c.dt_bc_norm));
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

absl::StatusOr<std::unique_ptr<Layer>> BuildMamba1(const BlockConfig& block,
                                                   const BlockSite& site) {
  return MakeMamba1(*block.As<Mamba1Config>(), block.norm, site);
}

}  // namespace

const BlockKind kMamba1Block = {"mamba1", ParseMamba1, BuildMamba1};

absl::StatusOr<std::unique_ptr<Layer>> MakeMamba1(
    const Mamba1Config& config, const std::optional<NormConfig>& norm,
    const BlockSite& site) {
  ASSIGN_OR_RETURN(const float eps, AffineRmsNormEps(norm, site));
  auto layer = std::make_unique<Mamba1>(config, site.d_model, eps);
  RETURN_IF_ERROR(layer->Bind(site.prefix, *site.weights, *site.backend));
  return layer;
}

}  // namespace seqboat
