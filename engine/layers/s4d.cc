#include "engine/layers/s4d.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/layers/pre_norm.h"
#include "engine/layers/weight_fetch.h"

namespace seqboat {
namespace {

class S4d final : public Layer {
 public:
  S4d(const S4dConfig& c, int d_model) : c_(c), h_(d_model) {}

  absl::Status Bind(const std::optional<NormConfig>& norm, const std::string& p,
                    WeightStore& ws, Backend& be) {
    const int64_t h = h_, m = c_.modes, ch = c_.channels;
    RETURN_IF_ERROR(norm_.Bind(norm, p, h_, ws, be));
    RETURN_IF_ERROR(FetchVector(ws, be, p + "s4d.dA", {h, m, 2}, &da_));
    RETURN_IF_ERROR(FetchVector(ws, be, p + "s4d.C", {ch, h, m, 2}, &c_dev_));
    RETURN_IF_ERROR(FetchVector(ws, be, p + "s4d.D", {ch, h}, &d_));
    if (c_.gelu_glu) {
      RETURN_IF_ERROR(
          FetchMatrix(ws, be, p + "s4d.out.weight", 2 * h, ch * h, &out_));
      RETURN_IF_ERROR(
          FetchVector(ws, be, p + "s4d.out.bias", {2 * h}, &out_b_));
    }
    return absl::OkStatus();
  }

  std::string kind() const override { return "s4d"; }
  int64_t StateBytesPerSlot() const override {
    return StateFloats() * static_cast<int64_t>(sizeof(float));
  }
  int64_t ScratchFloatsPerRow() const override {
    return h_ + c_.channels * h_ + 2 * static_cast<int64_t>(h_);
  }
  void BindState(void* base, int64_t slot_stride) override {
    state_ = static_cast<float*>(base);
    slot_floats_ = slot_stride / static_cast<int64_t>(sizeof(float));
  }
  absl::Status Forward(const StepContext& ctx, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n(), h = h_, m = static_cast<int>(c_.modes),
              ch = static_cast<int>(c_.channels);
    float* u = ctx.scratch;
    float* y = u + static_cast<int64_t>(n) * h;
    float* z = y + static_cast<int64_t>(n) * ch * h;
    norm_.Apply(be, residual, n, u);
    S4dScanParams scan;
    scan.segs = ctx.segs();
    scan.nsegs = ctx.nsegs();
    scan.u = u;
    scan.ldu = h;
    scan.da = da_;
    scan.c = c_dev_;
    scan.d = d_;
    scan.state = state_;
    scan.state_stride = slot_floats_;
    scan.h = h;
    scan.m = m;
    scan.ch = ch;
    scan.scale = c_.conj_half ? 2.0f : 1.0f;
    // Without an output stage (channels == 1) the scan adds to the residual;
    // with one it applies the GELU before the projection.
    scan.out = c_.gelu_glu ? y : residual;
    scan.act = c_.gelu_glu ? Activation::kGelu : Activation::kIdentity;
    scan.accumulate = !c_.gelu_glu;
    be.S4dScan(scan);
    if (!c_.gelu_glu) return absl::OkStatus();
    be.Gemm(Projection(y, n, out_, out_b_, z));
    // nn.GLU(dim=-2): the first half times σ(the second half).
    ActivateMulParams glu;
    glu.a = z + h;
    glu.lda = 2 * h;
    glu.b = z;
    glu.ldb = 2 * h;
    glu.n = n;
    glu.f = h;
    glu.act = Activation::kSigmoid;
    glu.out = residual;
    glu.ldo = h;
    glu.accumulate = true;
    be.ActivateMul(glu);
    return absl::OkStatus();
  }

 private:
  int64_t StateFloats() const {
    return static_cast<int64_t>(h_) * c_.modes * 2;
  }

  S4dConfig c_;
  int h_;
  PreNorm norm_;
  const float *da_ = nullptr, *c_dev_ = nullptr, *d_ = nullptr,
              *out_b_ = nullptr;
  Matrix out_;
  float* state_ = nullptr;
  int64_t slot_floats_ = 0;  // floats between slots
};

absl::Status ParseS4d(ObjectReader& r, std::vector<std::string>* /*warnings*/,
                      std::any* params) {
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
  RETURN_IF_ERROR(ParseChoice(r, "state_layout", {"conj_half", "full"}, &i));
  c.conj_half = i == 0;
  RETURN_IF_ERROR(ParseChoice(r, "output", {"none", "gelu_glu"}, &i));
  c.gelu_glu = i == 1;
  *params = c;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Layer>> BuildS4d(const BlockConfig& block,
                                                const BlockSite& site) {
  return MakeS4d(*block.As<S4dConfig>(), block.norm, site.d_model, site.prefix,
                 *site.weights, *site.backend);
}

}  // namespace

const BlockKind kS4dBlock = {"s4d", ParseS4d, BuildS4d};

absl::StatusOr<std::unique_ptr<Layer>> MakeS4d(
    const S4dConfig& config, const std::optional<NormConfig>& norm, int d_model,
    const std::string& prefix, WeightStore& weights, Backend& backend) {
  if (config.channels != 1) {
    // The output is added to a d_model-wide residual.
    return absl::InvalidArgumentError(
        absl::StrCat("s4d: channels must be 1, got ", config.channels));
  }
  auto layer = std::make_unique<S4d>(config, d_model);
  RETURN_IF_ERROR(layer->Bind(norm, prefix, weights, backend));
  return layer;
}

}  // namespace seqboat
