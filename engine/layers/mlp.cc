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
    // Gated: up and gate read the same rows, so they are one matrix [up;
    // gate] and one GEMM a step.
    std::vector<StackPart> up = {{p + "mlp.up.weight", f}};
    if (c_.gated) up.push_back({p + "mlp.gate.weight", f});
    RETURN_IF_ERROR(FetchStackedMatrix(ws, be, up, d, &up_));
    RETURN_IF_ERROR(FetchMatrix(ws, be, p + "mlp.down.weight", d, f, &down_));
    if (c_.bias) {
      std::vector<StackPart> up_b = {{p + "mlp.up.bias", f}};
      if (c_.gated) up_b.push_back({p + "mlp.gate.bias", f});
      RETURN_IF_ERROR(FetchStackedVector(ws, be, up_b, &up_b_));
      RETURN_IF_ERROR(FetchVector(ws, be, p + "mlp.down.bias", {d}, &down_b_));
    }
    return absl::OkStatus();
  }

  std::string kind() const override { return "mlp"; }
  int64_t StateBytesPerSlot() const override { return 0; }
  // u, then up's output (beside gate's when gated), then the 16-bit copy
  // of down's input (HalfInputAt).
  int64_t ScratchFloatsPerRow() const override {
    return d_ + UpRows() + HalfInputFloatsPerRow(c_.d_ff);
  }
  void BindState(void*, int64_t) override {}
  absl::Status Forward(const StepContext& ctx, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n(), d = d_, f = static_cast<int>(c_.d_ff), ld = UpRows();
    float* u = ctx.scratch;
    // [n, ld]: up's f columns, then gate's when gated. The activation goes
    // into up's columns, which down reads.
    float* h = u + static_cast<int64_t>(n) * d;
    // Where down reads 16-bit input (the CUDA backend's cuBLAS path), the
    // activation writes it beside h.
    const HalfRows h16 =
        HalfInputAt(be, down_, n, h + static_cast<int64_t>(n) * ld);
    // The pre-norm folds into the GEMM (its normed rows in u are not read
    // again).
    GemmParams up = Projection(u, n, up_, up_b_, h);
    norm_.Fold(be, residual, n, u, &up);
    be.Gemm(up);
    // The activation goes on the gate branch (HF Llama: act(gate) * up).
    ActivateMulParams activate =
        StackedActivation(h, n, f, ld, c_.act, c_.gated);
    activate.out16 = h16;
    be.ActivateMul(activate);
    GemmParams down = Projection(h, n, down_, down_b_, residual);
    down.ldx = ld;
    down.x16 = h16;
    out_.Add(be, down);
    return absl::OkStatus();
  }

 private:
  int UpRows() const {
    return static_cast<int>(c_.gated ? 2 * c_.d_ff : c_.d_ff);
  }

  MlpConfig c_;
  int d_;
  PreNorm norm_;
  ResidualOut out_;
  Matrix up_, down_;  // up_: [up; gate] when gated
  const float *up_b_ = nullptr, *down_b_ = nullptr;
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
