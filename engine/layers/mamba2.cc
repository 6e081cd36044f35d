#include "engine/layers/mamba2.h"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/layers/residual_out.h"
#include "engine/layers/weight_fetch.h"

namespace seqboat {
namespace {

class Mamba2 final : public Mixer {
 public:
  // norm_eps nullopt: no pre-norm, the block only runs through Mix.
  Mamba2(const Mamba2Config& config, int d_model, std::optional<float> norm_eps,
         float residual_scale)
      : c_(config),
        d_model_(d_model),
        norm_eps_(norm_eps),
        out_(residual_scale) {}

  absl::Status Bind(const std::string& p, WeightStore& ws, Backend& be) {
    const int64_t d = d_model_, e = c_.d_inner(), h = c_.n_heads,
                  cc = c_.conv_channels(), w = c_.in_proj_rows();
    auto vec = [&](const std::string& name, std::vector<int64_t> shape,
                   const float** out) {
      return FetchVector(ws, be, p + name, shape, out);
    };
    auto mat = [&](const std::string& name, int64_t rows, int64_t cols,
                   Matrix* out) {
      return FetchMatrix(ws, be, p + name, rows, cols, out);
    };
    if (norm_eps_.has_value()) {
      RETURN_IF_ERROR(vec("norm.weight", {d}, &norm_w_));
    }
    RETURN_IF_ERROR(mat("in_proj.weight", w, d, &in_proj_));
    if (c_.in_proj_bias) RETURN_IF_ERROR(vec("in_proj.bias", {w}, &in_bias_));
    RETURN_IF_ERROR(vec("conv.weight", {cc, c_.d_conv}, &conv_w_));
    if (c_.conv_bias) RETURN_IF_ERROR(vec("conv.bias", {cc}, &conv_b_));
    RETURN_IF_ERROR(vec("dt_bias", {h}, &dt_bias_));
    RETURN_IF_ERROR(vec("A", {h}, &a_));
    RETURN_IF_ERROR(vec("D", {h}, &d_));
    if (c_.gate != Mamba2Config::Gate::kSilu) {
      RETURN_IF_ERROR(vec("gated_norm.weight", {e}, &gated_w_));
    }
    RETURN_IF_ERROR(mat("out_proj.weight", d, e, &out_proj_));
    if (c_.out_proj_bias) {
      RETURN_IF_ERROR(vec("out_proj.bias", {d}, &out_bias_));
    }
    return absl::OkStatus();
  }

  std::string kind() const override { return "mamba2"; }

  int64_t StateBytesPerSlot() const override {
    return (ConvFloats() + SsmFloats()) * static_cast<int64_t>(sizeof(float));
  }

  int64_t ScratchFloatsPerRow() const override {
    // Then the 16-bit copy of out_proj's input (HalfInputAt).
    return d_model_ + c_.in_proj_rows() + c_.conv_channels() + c_.d_inner() +
           HalfInputFloatsPerRow(c_.d_inner());
  }

  void BindState(void* base, int64_t slot_stride) override {
    state_ = static_cast<float*>(base);
    slot_floats_ = slot_stride / static_cast<int64_t>(sizeof(float));
  }

  absl::Status Forward(const StepContext& ctx, float* residual) override {
    if (!norm_eps_.has_value()) {
      return absl::FailedPreconditionError(
          "mamba2 built without its pre-norm runs only through Mix");
    }
    // The pre-norm folded into in_proj (GemmNorm): the CPU runs the two
    // ops, CUDA's decode GEMV normalises as it loads (the same bits). The
    // first n * d floats of scratch receive the normed rows.
    GemmNorm norm;
    norm.kind = NormKind::kRms;
    norm.w = norm_w_;
    norm.eps = *norm_eps_;
    norm.out = ctx.scratch;
    norm.ldo = d_model_;
    return MixNormed(ctx, residual, norm, residual);
  }

  absl::Status Mix(const StepContext& ctx, const float* u,
                   float* residual) override {
    return MixNormed(ctx, u, GemmNorm(), residual);
  }

  absl::Status MixNormed(const StepContext& ctx, const float* u,
                         const GemmNorm& norm, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n(), d = d_model_, e = static_cast<int>(c_.d_inner()),
              cc = static_cast<int>(c_.conv_channels()),
              w = static_cast<int>(c_.in_proj_rows()),
              gn = static_cast<int>(c_.n_groups * c_.d_state);
    // The first n * d floats of scratch hold Forward's normed rows.
    float* zxbcdt = ctx.scratch + static_cast<int64_t>(n) * d;
    float* xbc = zxbcdt + static_cast<int64_t>(n) * w;
    float* y = xbc + static_cast<int64_t>(n) * cc;
    // Where out_proj reads 16-bit input (the CUDA backend's cuBLAS path), the
    // op ending the mixer writes it beside y.
    const HalfRows y16 =
        HalfInputAt(be, out_proj_, n, y + static_cast<int64_t>(n) * e);

    GemmParams in_proj = Projection(u, n, in_proj_, in_bias_, zxbcdt);
    in_proj.norm = norm;
    be.Gemm(in_proj);
    // A slot is [conv window | ssm state], one contiguous region (cheap reset
    // and snapshot). The conv and its SiLU are Mamba-1's, over all of xBC.
    MambaConvParams conv;
    conv.segs = ctx.segs();
    conv.nsegs = ctx.nsegs();
    conv.x = zxbcdt + e;
    conv.ldx = w;
    conv.state = state_;
    conv.state_stride = slot_floats_;
    conv.w = conv_w_;
    conv.bias = conv_b_;
    conv.e = cc;
    conv.k = static_cast<int>(c_.d_conv);
    conv.out = xbc;
    Mamba2ScanParams scan;
    scan.segs = ctx.segs();
    scan.nsegs = ctx.nsegs();
    scan.x = xbc;
    scan.b = xbc + e;
    scan.c = xbc + e + gn;
    scan.ldxbc = cc;
    scan.dt = zxbcdt + e + cc;
    scan.lddt = w;
    scan.dt_bias = dt_bias_;
    scan.a = a_;
    scan.d = d_;
    scan.dt_min = static_cast<float>(c_.dt_min);
    scan.dt_max = c_.dt_max.has_value()
                      ? static_cast<float>(*c_.dt_max)
                      : std::numeric_limits<float>::infinity();
    scan.state = state_ + ConvFloats();
    scan.state_stride = slot_floats_;
    scan.heads = static_cast<int>(c_.n_heads);
    scan.head_dim = static_cast<int>(c_.head_dim);
    scan.n_state = static_cast<int>(c_.d_state);
    scan.groups = static_cast<int>(c_.n_groups);
    scan.out = y;
    scan.ldo = e;
    if (c_.gate == Mamba2Config::Gate::kNormAfterGate) {
      // The released models' gate: conv, scan and norm as one op, which the
      // CUDA backend fuses for decode steps.
      GatedRmsNormParams norm = GatedNorm(n, zxbcdt, y);
      norm.out16 = y16;
      be.Mamba2Step(Mamba2StepParams{conv, scan, norm});
    } else {
      be.MambaConv(conv);
      be.Mamba2Scan(scan);
      Gate(be, n, zxbcdt, y, y16);
    }
    GemmParams out_proj = Projection(y, n, out_proj_, out_bias_, residual);
    out_proj.x16 = y16;
    out_.Add(be, out_proj);
    return absl::OkStatus();
  }

 private:
  // norm_after_gate's norm of y in place with the gate z.
  GatedRmsNormParams GatedNorm(int n, const float* z, float* y) const {
    const int e = static_cast<int>(c_.d_inner());
    GatedRmsNormParams norm;
    norm.y = y;
    norm.ldy = e;
    norm.z = z;
    norm.ldz = static_cast<int>(c_.in_proj_rows());
    norm.w = gated_w_;
    norm.n = n;
    norm.d = e;
    norm.groups = static_cast<int>(c_.n_groups);
    norm.eps = static_cast<float>(c_.gated_norm_eps);
    norm.out = y;
    norm.ldo = e;
    return norm;
  }

  // y[n, E] ← y met with the gate z as c_.gate says, for the gates other
  // than norm_after_gate (Mamba2Step's); y16: y in 16 bits too.
  void Gate(Backend& be, int n, const float* z, float* y,
            const HalfRows& y16) const {
    const int e = static_cast<int>(c_.d_inner()),
              w = static_cast<int>(c_.in_proj_rows());
    if (c_.gate == Mamba2Config::Gate::kNormBeforeGate) {
      // Each group's E/G channels are one RmsNorm row with that group's
      // slice of the weight; G is small (1 or 2 in the released models).
      const int g = static_cast<int>(c_.n_groups), dg = e / g;
      for (int j = 0; j < g; ++j) {
        NormParams norm;
        norm.x = y + j * dg;
        norm.ldx = e;
        norm.n = n;
        norm.d = dg;
        norm.w = gated_w_ + j * dg;
        norm.eps = static_cast<float>(c_.gated_norm_eps);
        norm.out = y + j * dg;
        norm.ldo = e;
        be.RmsNorm(norm);
      }
    }
    ActivateMulParams gated;
    gated.a = z;
    gated.lda = w;
    gated.b = y;
    gated.ldb = e;
    gated.n = n;
    gated.f = e;
    gated.act = Activation::kSilu;
    gated.out = y;
    gated.ldo = e;
    gated.out16 = y16;
    be.ActivateMul(gated);
  }

  int64_t ConvFloats() const { return c_.conv_channels() * (c_.d_conv - 1); }
  int64_t SsmFloats() const { return c_.d_inner() * c_.d_state; }
  int64_t SlotFloats() const { return ConvFloats() + SsmFloats(); }

  const Mamba2Config c_;
  const int d_model_;
  const std::optional<float> norm_eps_;
  ResidualOut out_;
  const float* norm_w_ = nullptr;
  Matrix in_proj_, out_proj_;
  const float *in_bias_ = nullptr, *conv_w_ = nullptr, *conv_b_ = nullptr,
              *dt_bias_ = nullptr, *a_ = nullptr, *d_ = nullptr,
              *gated_w_ = nullptr, *out_bias_ = nullptr;
  float* state_ = nullptr;
  int64_t slot_floats_ = 0;  // floats between slots
};

// A finite number >= 0 (0 is dt_min's default, and a valid floor).
absl::Status NonNegativeNumber(ObjectReader& r, const char* key, double* out) {
  const nlohmann::json* v = r.Get(key);
  if (v == nullptr) return r.Missing(key, "a finite number >= 0");
  if (!v->is_number() || !std::isfinite(v->get<double>()) ||
      v->get<double>() < 0) {
    return r.Invalid(key, "a finite number >= 0", *v);
  }
  *out = v->get<double>();
  return absl::OkStatus();
}

absl::Status ParseMamba2(ObjectReader& r,
                         std::vector<std::string>* /*warnings*/,
                         std::any* params) {
  Mamba2Config c;
  for (auto [key, field] :
       {std::pair{"n_heads", &c.n_heads}, std::pair{"head_dim", &c.head_dim},
        std::pair{"d_state", &c.d_state}, std::pair{"n_groups", &c.n_groups},
        std::pair{"d_conv", &c.d_conv}}) {
    RETURN_IF_ERROR(r.PositiveInt(key, field));
  }
  if (c.n_heads % c.n_groups != 0) {
    return r.Error("n_groups", absl::StrCat("must divide n_heads ", c.n_heads,
                                            ", got ", c.n_groups));
  }
  // Sizes fit int (the kernels index channels and conv columns with it), and
  // checking the products one at a time keeps each inside int64.
  if (c.n_heads * c.head_dim > kMaxJsonSize / 4) {
    return r.Error("head_dim",
                   absl::StrCat("times n_heads is ", c.n_heads * c.head_dim,
                                ", above ", kMaxJsonSize / 4));
  }
  if (c.n_groups * c.d_state > kMaxJsonSize / 4) {
    return r.Error("d_state",
                   absl::StrCat("times n_groups is ", c.n_groups * c.d_state,
                                ", above ", kMaxJsonSize / 4));
  }
  for (auto [key, field] : {std::pair{"in_proj_bias", &c.in_proj_bias},
                            std::pair{"out_proj_bias", &c.out_proj_bias},
                            std::pair{"conv_bias", &c.conv_bias}}) {
    RETURN_IF_ERROR(r.Bool(key, field));
  }
  RETURN_IF_ERROR(NonNegativeNumber(r, "dt_min", &c.dt_min));
  const nlohmann::json* hi = r.Get("dt_max");
  if (hi == nullptr) return r.Missing("dt_max", "a number or null");
  if (!hi->is_null()) {
    if (!hi->is_number() || !std::isfinite(hi->get<double>()) ||
        hi->get<double>() < c.dt_min) {
      return r.Invalid("dt_max",
                       absl::StrCat("null (unbounded) or a finite number >= "
                                    "dt_min ",
                                    c.dt_min),
                       *hi);
    }
    c.dt_max = hi->get<double>();
  }
  RETURN_IF_ERROR(r.PositiveNumber("gated_norm_eps", &c.gated_norm_eps));
  if (r.Get("gate") != nullptr) {
    int gate = 0;
    RETURN_IF_ERROR(ParseChoice(
        r, "gate", {"norm_after_gate", "norm_before_gate", "silu"}, &gate));
    c.gate = static_cast<Mamba2Config::Gate>(gate);
  }
  *params = c;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Layer>> BuildMamba2(const BlockConfig& block,
                                                   const BlockSite& site) {
  return MakeMamba2(*block.As<Mamba2Config>(), block.norm, site);
}

}  // namespace

const BlockKind kMamba2Block = {"mamba2", ParseMamba2, BuildMamba2,
                                /*residual_scale=*/true};

absl::StatusOr<std::unique_ptr<Layer>> MakeMamba2(
    const Mamba2Config& config, const std::optional<NormConfig>& norm,
    const BlockSite& site) {
  ASSIGN_OR_RETURN(const float eps, AffineRmsNormEps(norm, site));
  auto layer =
      std::make_unique<Mamba2>(config, site.d_model, eps, site.residual_scale);
  RETURN_IF_ERROR(layer->Bind(site.prefix, *site.weights, *site.backend));
  return layer;
}

absl::StatusOr<std::unique_ptr<Mixer>> MakeMamba2Mixer(
    const Mamba2Config& config, const BlockSite& site) {
  auto layer =
      std::make_unique<Mamba2>(config, site.d_model, std::nullopt, 1.0f);
  RETURN_IF_ERROR(layer->Bind(site.prefix, *site.weights, *site.backend));
  return layer;
}

}  // namespace seqboat
