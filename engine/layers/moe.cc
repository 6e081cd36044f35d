#include "engine/layers/moe.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/status_macros.h"
#include "engine/backend/moe_params.h"
#include "engine/layers/pre_norm.h"
#include "engine/layers/residual_out.h"
#include "engine/layers/weight_fetch.h"

namespace seqboat {
namespace {

class Moe final : public MoeLayer {
 public:
  Moe(const MoeConfig& c, int d_model, float residual_scale)
      : c_(c),
        d_(d_model),
        d_in_(c.latent > 0 ? static_cast<int>(c.latent) : d_model),
        residual_scale_(residual_scale),
        shared_out_(residual_scale) {}

  absl::Status Bind(const std::optional<NormConfig>& norm, const std::string& p,
                    WeightStore& ws, Backend& be) {
    const int64_t d = d_, f = c_.d_ff, x = c_.n_experts, hid = c_.router_hidden,
                  di = d_in_;
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
    if (c_.routing == MoeRouting::kSigmoidGroupTopK) {
      RETURN_IF_ERROR(
          FetchVector(ws, be, p + "moe.router.score_bias", {x}, &score_bias_));
    }
    if (c_.latent > 0) {
      RETURN_IF_ERROR(
          FetchMatrix(ws, be, p + "moe.latent_in.weight", di, d, &latent_in_));
      RETURN_IF_ERROR(FetchMatrix(ws, be, p + "moe.latent_out.weight", d, di,
                                  &latent_out_));
    }
    // Gated: each expert's up and gate read the same rows, so they are one
    // matrix [up; gate] and one GEMM (UpRows() rows).
    std::vector<std::string> up = {p + "moe.up.weight"};
    if (c_.gated) up.push_back(p + "moe.gate.weight");
    RETURN_IF_ERROR(FetchMatrixStacks(ws, be, up, x, f, di, &up_));
    RETURN_IF_ERROR(
        FetchMatrixStack(ws, be, p + "moe.down.weight", x, di, f, &down_));
    if (c_.expert_bias) {
      RETURN_IF_ERROR(FetchUpBiases(ws, be, p, x, f));
      RETURN_IF_ERROR(FetchVector(ws, be, p + "moe.down.bias", {d}, &down_b_));
    }
    if (c_.shared_d_ff > 0) {
      const int64_t fs = c_.shared_d_ff;
      std::vector<StackPart> shared = {{p + "moe.shared.up.weight", fs}};
      if (c_.gated) shared.push_back({p + "moe.shared.gate.weight", fs});
      RETURN_IF_ERROR(FetchStackedMatrix(ws, be, shared, d, &shared_up_));
      RETURN_IF_ERROR(FetchMatrix(ws, be, p + "moe.shared.down.weight", d, fs,
                                  &shared_down_));
      if (c_.shared_gate) {
        RETURN_IF_ERROR(FetchMatrixFp32(ws, be, p + "moe.shared_gate.weight", 1,
                                        d, &shared_gate_w_));
      }
    }
    ASSIGN_OR_RETURN(up_dev_, UploadHandles(be, up_));
    ASSIGN_OR_RETURN(down_dev_, UploadHandles(be, down_));
    rows_.resize(x);
    scales_.resize(x);
    return absl::OkStatus();
  }

  std::string kind() const override { return "moe"; }
  int64_t StateBytesPerSlot() const override { return 0; }
  int64_t ScratchFloatsPerRow() const override {
    // u, router hidden, logits, (expert, gate) slots, gathered x, up, gate,
    // expert (or shared) output, the latent input and sum, the shared
    // expert's up, gate and gate logit.
    const int64_t wide = std::max(d_, d_in_);
    return static_cast<int64_t>(d_) + c_.router_hidden + c_.n_experts +
           2 * Slots() + 2 * wide + 2 * c_.d_ff + 2 * (c_.latent) +
           2 * c_.shared_d_ff + 1 + DeviceFloatsPerRow();
  }
  void BindState(void*, int64_t) override {}
  const StepStats& last_step() const override { return stats_; }

  absl::Status Forward(const StepContext& ctx, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n();
    const Scratch s = Carve(ctx.scratch, n);
    Route(be, s, n, residual);
    stats_ = StepStats();
    // A decode call groups its pairs on the device: no read-back, and the
    // same launches whatever the routing (a recorded step replays it).
    // Longer calls group on the host, one GEMM per expert hit.
    const bool on_device = AllDecodeRows(ctx.segs(), ctx.nsegs());
    stats_.grouped_on_device = on_device;
    if (!on_device) GroupByExpert(be, s, n);
    // Without a latent space the experts add into the residual; with one,
    // into the latent sum, which latent_out then adds (its gates already
    // carry the residual scale, and the projection has no bias).
    const float* in = s.u;
    float* sum = residual;
    int ld_sum = d_;
    if (c_.latent > 0) {
      be.Gemm(Projection(s.u, n, latent_in_, nullptr, s.xl));
      be.Zero(s.yl, sizeof(float) * static_cast<size_t>(n) * d_in_);
      in = s.xl;
      sum = s.yl;
      ld_sum = d_in_;
    }
    if (on_device) {
      RunExpertsOnDevice(be, s, n, in, sum, ld_sum);
    } else {
      for (int e = 0; e < static_cast<int>(c_.n_experts); ++e) {
        if (!rows_[e].empty()) RunExpert(be, s, e, in, sum, ld_sum);
      }
    }
    if (c_.latent > 0) {
      GemmParams out = Projection(s.yl, n, latent_out_, nullptr, residual);
      out.accumulate = true;
      be.Gemm(out);
    }
    if (c_.shared_d_ff > 0) RunShared(be, s, n, on_device, residual);
    // The second layer's bias is shared and unmodulated: added once per row,
    // whether or not any expert ran (§5.3).
    if (down_b_ != nullptr) {
      AddBiasParams bias;
      bias.y = residual;
      bias.ldy = d_;
      bias.n = n;
      bias.d = d_;
      bias.v = down_b_;
      be.AddBias(bias);
    }
    return absl::OkStatus();
  }

 private:
  // A step's scratch, carved from the step's buffer.
  struct Scratch {
    float* u;             // [n, d] normed input
    float* hr;            // [n, router_hidden]
    float* logits;        // [n, n_experts]
    int32_t* experts;     // [n, slots]
    float* gates;         // [n, slots]
    float *xg, *hg, *yg;  // one expert's rows: input, [up | gate], output
    float *xl, *yl;       // [n, latent]: the experts' input and sum
    float *hs, *ls;       // the shared expert's [up | gate], gate logit
    // Device grouping (MoeGroupParams): [n * slots] each, then the tiles.
    int32_t *pair_row, *pair_of, *tiles;
    float *pair_gate, *hp, *yp;  // per pair: [up | gate], output
  };

  Scratch Carve(float* base, int n) const {
    const int64_t rows = n;
    Scratch s;
    s.u = base;
    s.hr = s.u + rows * d_;
    s.logits = s.hr + rows * c_.router_hidden;
    // The scratch has no declared type; the route op's ids live in it too.
    s.experts = reinterpret_cast<int32_t*>(s.logits + rows * c_.n_experts);
    s.gates = reinterpret_cast<float*>(s.experts) + rows * Slots();
    const int64_t wide = std::max(d_, d_in_);
    s.xg = s.gates + rows * Slots();
    s.hg = s.xg + rows * wide;
    s.yg = s.hg + rows * 2 * c_.d_ff;
    s.xl = s.yg + rows * wide;
    s.yl = s.xl + rows * c_.latent;
    s.hs = s.yl + rows * c_.latent;
    s.ls = s.hs + rows * 2 * c_.shared_d_ff;
    const int64_t pairs = rows * Slots();
    s.pair_gate = s.ls + rows;
    s.hp = s.pair_gate + pairs;
    s.yp = s.hp + pairs * 2 * c_.d_ff;
    s.pair_row = reinterpret_cast<int32_t*>(s.yp + pairs * d_in_);
    s.pair_of = s.pair_row + pairs;
    s.tiles = s.pair_of + pairs;  // 3 * MoeTileBound(n, slots, x)
    return s;
  }

  // Router logits (through the ReLU router's hidden layer when it has one),
  // then each row's (expert, gate) slots. The pre-norm of the residual folds
  // into the router's first GEMM, which leaves the normed rows in s.u for
  // the experts.
  void Route(Backend& be, const Scratch& s, int n, const float* residual) {
    const int d = d_, x = static_cast<int>(c_.n_experts),
              hid = static_cast<int>(c_.router_hidden);
    GemmParams router;
    router.x = s.u;
    router.ldx = d;
    router.n = n;
    router.w = router_;
    router.bias = router_b_;
    router.y = s.logits;
    router.ldy = x;
    if (Relu()) {
      GemmParams hidden = Projection(s.u, n, router_in_, router_in_b_, s.hr);
      norm_.Fold(be, residual, n, s.u, &hidden);
      be.Gemm(hidden);
      ActivateMulParams silu;
      silu.a = s.hr;
      silu.lda = hid;
      silu.n = n;
      silu.f = hid;
      silu.act = Activation::kSilu;
      silu.out = s.hr;
      silu.ldo = hid;
      be.ActivateMul(silu);
      router.x = s.hr;
      router.ldx = hid;
    } else {
      norm_.Fold(be, residual, n, s.u, &router);
    }
    be.Gemm(router);
    MoeRouteParams route;
    route.logits = s.logits;
    route.n = n;
    route.x = x;
    route.routing = c_.routing;
    route.top_k = static_cast<int>(c_.top_k);
    route.renormalize = c_.renormalize;
    route.scale = static_cast<float>(c_.routed_scale) * residual_scale_;
    route.group.score_bias = score_bias_;
    route.group.n_group = static_cast<int>(c_.n_group);
    route.group.topk_group = static_cast<int>(c_.topk_group);
    route.experts = s.experts;
    route.gates = s.gates;
    be.MoeRoute(route);
  }

  // The step's rows grouped by expert on the host, in step order within a
  // group, with their gates.
  void GroupByExpert(Backend& be, const Scratch& s, int n) {
    const int x = static_cast<int>(c_.n_experts), slots = Slots();
    const size_t pairs = static_cast<size_t>(n) * slots;
    host_experts_.resize(pairs);
    host_gates_.resize(pairs);
    be.CopyToHost(host_experts_.data(), s.experts, pairs * sizeof(int32_t));
    be.CopyToHost(host_gates_.data(), s.gates, pairs * sizeof(float));
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
  }

  // Expert e over its rows of `in` [n, d_in]: gather, up (and gate),
  // activation, down, then each row's output scaled by its gate and added to
  // its row of `sum` (stride ld_sum).
  void RunExpert(Backend& be, const Scratch& s, int e, const float* in,
                 float* sum, int ld_sum) {
    const int d = d_in_, f = static_cast<int>(c_.d_ff);
    const int m = static_cast<int>(rows_[e].size());
    ++stats_.experts_hit;
    stats_.routed_rows += m;
    GatherRowsParams gather;
    gather.x = in;
    gather.d = d;
    gather.rows = rows_[e].data();
    gather.m = m;
    gather.out = s.xg;
    be.GatherRows(gather);
    be.Gemm(Projection(s.xg, m, up_[e], ExpertBias(e), s.hg));
    Activate(be, s.hg, m, f, UpRows());
    GemmParams down = Projection(s.hg, m, down_[e], nullptr, s.yg);
    down.ldx = UpRows();
    be.Gemm(down);
    stats_.expert_gemms += 2;
    ScatterAddParams scatter;
    scatter.src = s.yg;
    scatter.d = d;
    scatter.rows = rows_[e].data();
    scatter.scales = scales_[e].data();
    scatter.m = m;
    scatter.dst = sum;
    scatter.lddst = ld_sum;
    be.ScatterAddScaled(scatter);
  }

  // Every expert over its pairs of `in` [n, d_in], grouped on the device:
  // the ops and their shapes depend on n alone. The rows of hp / yp that
  // no pair uses hold stale values; the activation runs over them too, and
  // nothing reads its results there.
  void RunExpertsOnDevice(Backend& be, const Scratch& s, int n, const float* in,
                          float* sum, int ld_sum) {
    const int slots = Slots(), x = static_cast<int>(c_.n_experts),
              f = static_cast<int>(c_.d_ff);
    MoeGroupParams group;
    group.experts = s.experts;
    group.gates = s.gates;
    group.n = n;
    group.slots = slots;
    group.x = x;
    group.pair_row = s.pair_row;
    group.pair_gate = s.pair_gate;
    group.pair_of = s.pair_of;
    group.tiles = s.tiles;
    be.MoeGroup(group);
    MoeGemmParams up;
    up.x = in;
    up.ldx = d_in_;
    up.x_rows = s.pair_row;
    up.experts = static_cast<const Matrix*>(up_dev_.get());
    up.shape = up_[0];
    up.bias = up_b_;
    up.tiles = s.tiles;
    up.ntiles = MoeTileBound(n, slots, x);
    up.y = s.hp;
    up.ldy = UpRows();
    be.MoeGemm(up);
    Activate(be, s.hp, n * slots, f, UpRows());
    MoeGemmParams down = up;
    down.x = s.hp;
    down.ldx = UpRows();
    down.x_rows = nullptr;
    down.experts = static_cast<const Matrix*>(down_dev_.get());
    down.shape = down_[0];
    down.bias = nullptr;
    down.y = s.yp;
    down.ldy = d_in_;
    be.MoeGemm(down);
    MoeCombineParams combine;
    combine.src = s.yp;
    combine.ldsrc = d_in_;
    combine.pair_of = s.pair_of;
    combine.pair_gate = s.pair_gate;
    combine.slots = slots;
    combine.n = n;
    combine.d = d_in_;
    combine.dst = sum;
    combine.lddst = ld_sum;
    be.MoeCombine(combine);
  }

  // The scratch floats per row of the device grouping: per pair its gate,
  // its [up | gate] and output rows and two ints (row, pair), then the
  // tiles' 3 ints per MoeTileBound's share of a row, rounded up.
  int64_t DeviceFloatsPerRow() const {
    const int64_t slots = Slots();
    return slots * (1 + 2 * c_.d_ff + d_in_ + 2) +
           3 * (std::min<int64_t>(slots, c_.n_experts) + slots / 16 + 1);
  }

  // up_b_ [x, UpRows()]: expert e's up bias, then its gate bias.
  absl::Status FetchUpBiases(WeightStore& ws, Backend& be, const std::string& p,
                             int64_t x, int64_t f) {
    auto up = ws.F32(p + "moe.up.bias", {x, f});
    if (!up.ok()) return up.status();
    const float* gate = nullptr;
    if (c_.gated) {
      auto g = ws.F32(p + "moe.gate.bias", {x, f});
      if (!g.ok()) return g.status();
      gate = *g;
    }
    std::vector<float> stacked;
    stacked.reserve(static_cast<size_t>(x * UpRows()));
    for (int64_t e = 0; e < x; ++e) {
      stacked.insert(stacked.end(), *up + e * f, *up + (e + 1) * f);
      if (gate != nullptr) {
        stacked.insert(stacked.end(), gate + e * f, gate + (e + 1) * f);
      }
    }
    auto dev = be.UploadVector(stacked.data(), x * UpRows());
    if (!dev.ok()) return dev.status();
    up_b_ = *dev;
    return absl::OkStatus();
  }

  // The experts' matrix handles in the backend's memory, for MoeGemm.
  static absl::StatusOr<DeviceBuffer> UploadHandles(
      Backend& be, const std::vector<Matrix>& m) {
    auto buf = be.Alloc(m.size() * sizeof(Matrix));
    if (!buf.ok()) return buf.status();
    be.CopyToDevice(buf->get(), m.data(), m.size() * sizeof(Matrix));
    return buf;
  }

  void Activate(Backend& be, float* h, int rows, int f, int ld) const {
    be.ActivateMul(StackedActivation(h, rows, f, ld, c_.act, c_.gated));
  }

  // The shared expert over every row. Its sigmoid gate is a per-row scale,
  // applied like a routed expert's (the step already reads routing back to
  // the host): the rows' outputs scattered with their gates.
  void RunShared(Backend& be, const Scratch& s, int n, bool on_device,
                 float* residual) {
    const int d = d_, f = static_cast<int>(c_.shared_d_ff);
    const int ld = c_.gated ? 2 * f : f;
    be.Gemm(Projection(s.u, n, shared_up_, nullptr, s.hs));
    Activate(be, s.hs, n, f, ld);
    GemmParams down = Projection(s.hs, n, shared_down_, nullptr, residual);
    down.ldx = ld;
    if (!c_.shared_gate) {
      shared_out_.Add(be, down);
      return;
    }
    down.y = s.yg;
    be.Gemm(down);
    be.Gemm(Projection(s.u, n, shared_gate_w_, nullptr, s.ls));
    if (on_device) {
      MoeCombineParams gated;
      gated.src = s.yg;
      gated.ldsrc = d;
      gated.gate_logits = s.ls;
      gated.scale = residual_scale_;
      gated.n = n;
      gated.d = d;
      gated.dst = residual;
      gated.lddst = d;
      be.MoeCombine(gated);
      return;
    }
    shared_rows_.resize(n);
    shared_scales_.resize(n);
    be.CopyToHost(shared_scales_.data(), s.ls, sizeof(float) * n);
    for (int i = 0; i < n; ++i) {
      shared_rows_[i] = i;
      shared_scales_[i] = SharedExpertGate(residual_scale_, shared_scales_[i]);
    }
    ScatterAddParams scatter;
    scatter.src = s.yg;
    scatter.d = d;
    scatter.rows = shared_rows_.data();
    scatter.scales = shared_scales_.data();
    scatter.m = n;
    scatter.dst = residual;
    scatter.lddst = d;
    be.ScatterAddScaled(scatter);
  }

  bool Relu() const { return c_.routing == MoeRouting::kReluDynamic; }
  int Slots() const {
    return Relu() ? static_cast<int>(c_.n_experts) : static_cast<int>(c_.top_k);
  }
  // Rows of an expert's stacked [up; gate] matrix.
  int UpRows() const {
    return static_cast<int>(c_.gated ? 2 * c_.d_ff : c_.d_ff);
  }
  const float* ExpertBias(int e) const {
    return up_b_ == nullptr ? nullptr
                            : up_b_ + static_cast<int64_t>(e) * UpRows();
  }

  MoeConfig c_;
  int d_;
  int d_in_;  // the experts' input width: latent, or d_
  float residual_scale_;
  ResidualOut shared_out_;
  PreNorm norm_;
  Matrix router_in_, router_, latent_in_, latent_out_;
  const float *router_in_b_ = nullptr, *router_b_ = nullptr,
              *score_bias_ = nullptr;
  std::vector<Matrix> up_, down_;   // up_[e]: [up; gate] when gated
  DeviceBuffer up_dev_, down_dev_;  // their handles (MoeGemm)
  const float *up_b_ = nullptr, *down_b_ = nullptr;  // up_b_: [x, UpRows()]
  Matrix shared_up_, shared_down_, shared_gate_w_;   // shared_up_: [up; gate]
  std::vector<int32_t> shared_rows_;
  std::vector<float> shared_scales_;
  // Host-side routing of the current step; kept to reuse their capacity.
  std::vector<int32_t> host_experts_;
  std::vector<float> host_gates_;
  std::vector<std::vector<int32_t>> rows_;
  std::vector<std::vector<float>> scales_;
  StepStats stats_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MoeLayer>> MakeMoe(
    const MoeConfig& config, const std::optional<NormConfig>& norm, int d_model,
    const std::string& prefix, WeightStore& weights, Backend& backend,
    float residual_scale) {
  if (config.routing != MoeRouting::kReluDynamic &&
      (config.top_k < 1 || config.top_k > config.n_experts)) {
    return absl::InvalidArgumentError("moe: top_k must be in [1, n_experts]");
  }
  RETURN_IF_ERROR(CheckMoeRouting(config));
  if (config.expert_bias && residual_scale != 1.0f) {
    return absl::InvalidArgumentError(
        "moe: expert_bias (a shared down.bias) with residual_scale != 1 is "
        "not supported");
  }
  auto layer = std::make_unique<Moe>(config, d_model, residual_scale);
  RETURN_IF_ERROR(layer->Bind(norm, prefix, weights, backend));
  return layer;
}

}  // namespace seqboat
