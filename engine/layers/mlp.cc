#include "engine/layers/mlp.h"

#include "base/status_macros.h"
#include "engine/layers/pre_norm.h"
#include "engine/layers/residual_out.h"
#include "engine/layers/weight_fetch.h"

namespace seqboat {
namespace {

class Mlp final : public Layer {
 public:
  Mlp(const MlpConfig& c, int d_model, float residual_scale)
      : c_(c), d_(d_model), out_(residual_scale) {}

  absl::Status Bind(const std::optional<NormConfig>& norm, const std::string& p,
                    WeightStore& ws, Backend& be) {
    const int64_t d = d_, f = c_.d_ff;
    RETURN_IF_ERROR(norm_.Bind(norm, p, d_, ws, be));
    RETURN_IF_ERROR(FetchMatrix(ws, be, p + "mlp.up.weight", f, d, &up_));
    if (c_.gated) {
      RETURN_IF_ERROR(FetchMatrix(ws, be, p + "mlp.gate.weight", f, d, &gate_));
    }
    RETURN_IF_ERROR(FetchMatrix(ws, be, p + "mlp.down.weight", d, f, &down_));
    if (c_.bias) {
      RETURN_IF_ERROR(FetchVector(ws, be, p + "mlp.up.bias", {f}, &up_b_));
      if (c_.gated) {
        RETURN_IF_ERROR(
            FetchVector(ws, be, p + "mlp.gate.bias", {f}, &gate_b_));
      }
      RETURN_IF_ERROR(FetchVector(ws, be, p + "mlp.down.bias", {d}, &down_b_));
    }
    return absl::OkStatus();
  }

  std::string kind() const override { return "mlp"; }
  int64_t StateBytesPerSlot() const override { return 0; }
  // Then the 16-bit copy of down's input (HalfInputAt).
  int64_t ScratchFloatsPerRow() const override {
    return d_ + 2 * c_.d_ff + HalfInputFloatsPerRow(c_.d_ff);
  }
  void BindState(void*, int64_t) override {}
  absl::Status Forward(const StepContext& ctx, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n(), d = d_, f = static_cast<int>(c_.d_ff);
    float* u = ctx.scratch;
    float* h = u + static_cast<int64_t>(n) * d;
    float* g = h + static_cast<int64_t>(n) * f;
    // Where down reads 16-bit input (the CUDA backend's cuBLAS path), the
    // activation writes it beside h.
    const HalfRows h16 =
        HalfInputAt(be, down_, n, g + static_cast<int64_t>(n) * f);
    const Activation act = c_.act;
    // The pre-norm folds into the up GEMM, which leaves the normed rows in
    // u for the gate GEMM.
    GemmParams up = Projection(u, n, up_, up_b_, h);
    norm_.Fold(be, residual, n, u, &up);
    be.Gemm(up);
    if (c_.gated) {
      // The activation goes on the gate branch (HF Llama: act(gate) * up).
      be.Gemm(Projection(u, n, gate_, gate_b_, g));
      ActivateMulParams gated;
      gated.a = g;
      gated.lda = f;
      gated.b = h;
      gated.ldb = f;
      gated.n = n;
      gated.f = f;
      gated.act = act;
      gated.out = h;
      gated.ldo = f;
      gated.out16 = h16;
      be.ActivateMul(gated);
    } else {
      ActivateMulParams activate;
      activate.a = h;
      activate.lda = f;
      activate.n = n;
      activate.f = f;
      activate.act = act;
      activate.out = h;
      activate.ldo = f;
      activate.out16 = h16;
      be.ActivateMul(activate);
    }
    GemmParams down = Projection(h, n, down_, down_b_, residual);
    down.x16 = h16;
    out_.Add(be, down);
    return absl::OkStatus();
  }

 private:
  MlpConfig c_;
  int d_;
  PreNorm norm_;
  ResidualOut out_;
  Matrix up_, gate_, down_;
  const float *up_b_ = nullptr, *gate_b_ = nullptr, *down_b_ = nullptr;
};

absl::Status ParseMlp(ObjectReader& r, std::vector<std::string>* /*warnings*/,
                      std::any* params) {
  MlpConfig c;
  RETURN_IF_ERROR(r.PositiveInt("d_ff", &c.d_ff));
  RETURN_IF_ERROR(ParseActivation(r, &c.act));
  RETURN_IF_ERROR(r.Bool("gated", &c.gated));
  RETURN_IF_ERROR(r.Bool("bias", &c.bias));
  *params = c;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Layer>> BuildMlp(const BlockConfig& block,
                                                const BlockSite& site) {
  return MakeMlp(*block.As<MlpConfig>(), block.norm, site.d_model, site.prefix,
                 *site.weights, *site.backend, site.residual_scale);
}

}  // namespace

const BlockKind kMlpBlock = {"mlp", ParseMlp, BuildMlp,
                             /*host_round_trip=*/false,
                             /*residual_scale=*/true};

absl::StatusOr<std::unique_ptr<Layer>> MakeMlp(
    const MlpConfig& config, const std::optional<NormConfig>& norm, int d_model,
    const std::string& prefix, WeightStore& weights, Backend& backend,
    float residual_scale) {
  auto layer = std::make_unique<Mlp>(config, d_model, residual_scale);
  RETURN_IF_ERROR(layer->Bind(norm, prefix, weights, backend));
  return layer;
}

}  // namespace seqboat
