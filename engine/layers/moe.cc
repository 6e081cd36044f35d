#include "engine/layers/moe.h"

#include <vector>

#include "base/status_macros.h"
#include "engine/layers/pre_norm.h"
#include "engine/layers/weight_fetch.h"

namespace seqboat {
namespace {

class Moe final : public MoeLayer {
 public:
  Moe(const MoeConfig& c, int d_model) : c_(c), d_(d_model) {}

  absl::Status Bind(const std::optional<NormConfig>& norm, const std::string& p,
                    WeightStore& ws, Backend& be) {
    const int64_t d = d_, f = c_.d_ff, x = c_.n_experts, hid = c_.router_hidden;
    RETURN_IF_ERROR(norm_.Bind(norm, p, d_, ws, be));
    const bool relu = Relu();
    if (relu) {
      RETURN_IF_ERROR(FetchMatrixFp32(ws, be, p + "moe.router_in.weight", hid,
                                      d, &router_in_));
      if (c_.router_bias) {
        RETURN_IF_ERROR(FetchVector(ws, be, p + "moe.router_in.bias", {hid},
                                    &router_in_b_));
      }
    }
    // Routers stay fp32 on 16-bit backends (canonical.ROUTER_SUFFIXES).
    RETURN_IF_ERROR(FetchMatrixFp32(ws, be, p + "moe.router.weight", x,
                                    relu ? hid : d, &router_));
    if (c_.router_bias) {
      RETURN_IF_ERROR(
          FetchVector(ws, be, p + "moe.router.bias", {x}, &router_b_));
    }
    RETURN_IF_ERROR(
        FetchMatrixStack(ws, be, p + "moe.up.weight", x, f, d, &up_));
    if (c_.gated) {
      RETURN_IF_ERROR(
          FetchMatrixStack(ws, be, p + "moe.gate.weight", x, f, d, &gate_));
    }
    RETURN_IF_ERROR(
        FetchMatrixStack(ws, be, p + "moe.down.weight", x, d, f, &down_));
    if (c_.expert_bias) {
      RETURN_IF_ERROR(FetchVector(ws, be, p + "moe.up.bias", {x, f}, &up_b_));
      if (c_.gated) {
        RETURN_IF_ERROR(
            FetchVector(ws, be, p + "moe.gate.bias", {x, f}, &gate_b_));
      }
      RETURN_IF_ERROR(FetchVector(ws, be, p + "moe.down.bias", {d}, &down_b_));
    }
    rows_.resize(x);
    scales_.resize(x);
    return absl::OkStatus();
  }

  std::string kind() const override { return "moe"; }
  int64_t StateBytesPerSlot() const override { return 0; }
  int64_t ScratchFloatsPerRow() const override {
    // u, router hidden, logits, (expert, gate) slots, gathered x, up, gate,
    // expert output.
    return 3 * static_cast<int64_t>(d_) + c_.router_hidden + c_.n_experts +
           2 * Slots() + 2 * c_.d_ff;
  }
  void BindState(void*) override {}
  void ResetSlot(Backend&, int) override {}
  const StepStats& last_step() const override { return stats_; }

  absl::Status Forward(const StepContext& ctx, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n(), d = d_, f = static_cast<int>(c_.d_ff),
              x = static_cast<int>(c_.n_experts),
              hid = static_cast<int>(c_.router_hidden), slots = Slots();
    float* u = ctx.scratch;
    float* hr = u + static_cast<int64_t>(n) * d;
    float* logits = hr + static_cast<int64_t>(n) * hid;
    // The scratch has no declared type; the route op's ids live in it too.
    auto* experts =
        reinterpret_cast<int32_t*>(logits + static_cast<int64_t>(n) * x);
    float* gates =
        reinterpret_cast<float*>(experts) + static_cast<int64_t>(n) * slots;
    float* xg = gates + static_cast<int64_t>(n) * slots;
    float* hg = xg + static_cast<int64_t>(n) * d;
    float* gg = hg + static_cast<int64_t>(n) * f;
    float* yg = gg + static_cast<int64_t>(n) * f;

    norm_.Apply(be, residual, n, u);
    if (Relu()) {
      GemmParams router_in;
      router_in.x = u;
      router_in.ldx = d;
      router_in.n = n;
      router_in.w = router_in_;
      router_in.bias = router_in_b_;
      router_in.y = hr;
      router_in.ldy = hid;
      be.Gemm(router_in);
      ActivateMulParams silu;
      silu.a = hr;
      silu.lda = hid;
      silu.n = n;
      silu.f = hid;
      silu.act = Activation::kSilu;
      silu.out = hr;
      silu.ldo = hid;
      be.ActivateMul(silu);
      GemmParams router;
      router.x = hr;
      router.ldx = hid;
      router.n = n;
      router.w = router_;
      router.bias = router_b_;
      router.y = logits;
      router.ldy = x;
      be.Gemm(router);
    } else {
      GemmParams router;
      router.x = u;
      router.ldx = d;
      router.n = n;
      router.w = router_;
      router.bias = router_b_;
      router.y = logits;
      router.ldy = x;
      be.Gemm(router);
    }
    MoeRouteParams route;
    route.logits = logits;
    route.n = n;
    route.x = x;
    route.routing =
        Relu() ? MoeRouting::kReluDynamic : MoeRouting::kSoftmaxTopK;
    route.top_k = static_cast<int>(c_.top_k);
    route.renormalize = c_.renormalize;
    route.experts = experts;
    route.gates = gates;
    be.MoeRoute(route);

    // Group rows by expert on the host (rows in step order within a group).
    const size_t pairs = static_cast<size_t>(n) * slots;
    host_experts_.resize(pairs);
    host_gates_.resize(pairs);
    be.CopyToHost(host_experts_.data(), experts, pairs * sizeof(int32_t));
    be.CopyToHost(host_gates_.data(), gates, pairs * sizeof(float));
    for (int e = 0; e < x; ++e) {
      rows_[e].clear();
      scales_[e].clear();
    }
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < slots; ++j) {
        const int32_t e = host_experts_[static_cast<size_t>(i) * slots + j];
        if (e < 0 || e >= x) continue;
        rows_[e].push_back(i);
        scales_[e].push_back(host_gates_[static_cast<size_t>(i) * slots + j]);
      }
    }

    stats_ = StepStats();
    const Activation act = c_.act;
    for (int e = 0; e < x; ++e) {
      const int m = static_cast<int>(rows_[e].size());
      if (m == 0) continue;
      ++stats_.experts_hit;
      stats_.routed_rows += m;
      GatherRowsParams gather;
      gather.x = u;
      gather.d = d;
      gather.rows = rows_[e].data();
      gather.m = m;
      gather.out = xg;
      be.GatherRows(gather);
      GemmParams up;
      up.x = xg;
      up.ldx = d;
      up.n = m;
      up.w = up_[e];
      up.bias = ExpertBias(up_b_, e);
      up.y = hg;
      up.ldy = f;
      be.Gemm(up);
      ++stats_.expert_gemms;
      if (c_.gated) {
        GemmParams gate;
        gate.x = xg;
        gate.ldx = d;
        gate.n = m;
        gate.w = gate_[e];
        gate.bias = ExpertBias(gate_b_, e);
        gate.y = gg;
        gate.ldy = f;
        be.Gemm(gate);
        ++stats_.expert_gemms;
        ActivateMulParams gated;
        gated.a = gg;
        gated.lda = f;
        gated.b = hg;
        gated.ldb = f;
        gated.n = m;
        gated.f = f;
        gated.act = act;
        gated.out = hg;
        gated.ldo = f;
        be.ActivateMul(gated);
      } else {
        ActivateMulParams activate;
        activate.a = hg;
        activate.lda = f;
        activate.n = m;
        activate.f = f;
        activate.act = act;
        activate.out = hg;
        activate.ldo = f;
        be.ActivateMul(activate);
      }
      GemmParams down;
      down.x = hg;
      down.ldx = f;
      down.n = m;
      down.w = down_[e];
      down.y = yg;
      down.ldy = d;
      be.Gemm(down);
      ++stats_.expert_gemms;
      ScatterAddParams scatter;
      scatter.src = yg;
      scatter.d = d;
      scatter.rows = rows_[e].data();
      scatter.scales = scales_[e].data();
      scatter.m = m;
      scatter.dst = residual;
      scatter.lddst = d;
      be.ScatterAddScaled(scatter);
    }
    // The second layer's bias is shared and unmodulated: added once per row,
    // whether or not any expert ran (§5.3).
    if (down_b_ != nullptr) {
      AddBiasParams bias;
      bias.y = residual;
      bias.ldy = d;
      bias.n = n;
      bias.d = d;
      bias.v = down_b_;
      be.AddBias(bias);
    }
    return absl::OkStatus();
  }

 private:
  bool Relu() const { return c_.routing == MoeRouting::kReluDynamic; }
  int Slots() const {
    return Relu() ? static_cast<int>(c_.n_experts) : static_cast<int>(c_.top_k);
  }
  const float* ExpertBias(const float* b, int e) const {
    return b == nullptr ? nullptr : b + static_cast<int64_t>(e) * c_.d_ff;
  }

  MoeConfig c_;
  int d_;
  PreNorm norm_;
  Matrix router_in_, router_;
  const float *router_in_b_ = nullptr, *router_b_ = nullptr;
  std::vector<Matrix> up_, gate_, down_;
  const float *up_b_ = nullptr, *gate_b_ = nullptr, *down_b_ = nullptr;
  // Host-side routing of the current step; kept to reuse their capacity.
  std::vector<int32_t> host_experts_;
  std::vector<float> host_gates_;
  std::vector<std::vector<int32_t>> rows_;
  std::vector<std::vector<float>> scales_;
  StepStats stats_;
};

absl::Status ParseMoe(ObjectReader& r, std::vector<std::string>* /*warnings*/,
                      std::any* params) {
  MoeConfig c;
  int routing = 0;
  RETURN_IF_ERROR(
      ParseChoice(r, "routing", {"top1_softmax", "relu_dynamic"}, &routing));
  c.routing =
      routing == 0 ? MoeRouting::kSoftmaxTopK : MoeRouting::kReluDynamic;
  RETURN_IF_ERROR(r.PositiveInt("n_experts", &c.n_experts));
  RETURN_IF_ERROR(r.PositiveInt("d_ff", &c.d_ff));
  RETURN_IF_ERROR(ParseActivation(r, &c.act));
  RETURN_IF_ERROR(r.Bool("gated", &c.gated));
  RETURN_IF_ERROR(r.Bool("router_bias", &c.router_bias));
  RETURN_IF_ERROR(r.Bool("expert_bias", &c.expert_bias));
  // Capacity is a training-time device; running dropless under a config that
  // names a capacity would silently change results on long prefills.
  if (const nlohmann::json* cap = r.Get("capacity");
      cap != nullptr && !cap->is_null()) {
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

absl::StatusOr<std::unique_ptr<Layer>> BuildMoe(const BlockConfig& block,
                                                const BlockSite& site) {
  ASSIGN_OR_RETURN(std::unique_ptr<MoeLayer> layer,
                   MakeMoe(*block.As<MoeConfig>(), block.norm, site.d_model,
                           site.prefix, *site.weights, *site.backend));
  return std::unique_ptr<Layer>(std::move(layer));
}

}  // namespace

// The router groups rows by expert on the host, mid-step.
const BlockKind kMoeBlock = {"moe", ParseMoe, BuildMoe,
                             /*host_round_trip=*/true};

absl::StatusOr<std::unique_ptr<MoeLayer>> MakeMoe(
    const MoeConfig& config, const std::optional<NormConfig>& norm, int d_model,
    const std::string& prefix, WeightStore& weights, Backend& backend) {
  if (config.routing == MoeRouting::kSoftmaxTopK &&
      (config.top_k < 1 || config.top_k > config.n_experts)) {
    return absl::InvalidArgumentError("moe: top_k must be in [1, n_experts]");
  }
  auto layer = std::make_unique<Moe>(config, d_model);
  RETURN_IF_ERROR(layer->Bind(norm, prefix, weights, backend));
  return layer;
}

}  // namespace seqboat
