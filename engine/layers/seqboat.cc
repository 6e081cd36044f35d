#include "engine/layers/seqboat.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/backend/seqboat_math.h"
#include "engine/layers/weight_fetch.h"

namespace seqboat {
namespace {

absl::Status CheckShape(const SeqBoatShape& s, const std::string& where) {
  auto bad = [&](const char* field, int64_t value) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": field \"", field,
                     "\" must be a positive integer, got ", value));
  };
  if (s.d <= 0) return bad("d_model", s.d);
  if (s.ne <= 0) return bad("ema_dim", s.ne);
  if (s.z <= 0) return bad("z_dim", s.z);
  if (s.v <= 0) return bad("v_dim", s.v);
  if (s.w <= 0) return bad("window", s.w);
  if (s.pos == SeqBoatPos::kRopeInterleaved && s.z % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": field \"z_dim\" must be even for pos ",
                     "\"rope_interleaved\", got ", s.z));
  }
  if (s.pos == SeqBoatPos::kRopeInterleaved && !(s.rope_theta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": field \"rope_theta\" must be positive"));
  }
  if (s.pos == SeqBoatPos::kSimpleBias && s.rel_pos_max <= 0) {
    return bad("rel_pos_max", s.rel_pos_max);
  }
  return absl::OkStatus();
}

class SeqBoat final : public Layer {
 public:
  SeqBoat(const SeqBoatShape& shape, bool prenorm,
          const std::optional<NormConfig>& norm)
      : s_(shape), prenorm_(prenorm), norm_(norm) {}
  // A copy in flight writes activated_host_.
  ~SeqBoat() override {
    if (copy_pending_) backend_->WaitCopy(copy_);
  }

  absl::Status Bind(const std::string& p, WeightStore& ws, Backend& be) {
    const int64_t d = s_.d, ne = s_.ne, z = s_.z, v = s_.v;
    auto vec = [&](const std::string& name, std::vector<int64_t> shape,
                   const float** out) {
      return FetchVector(ws, be, p + name, shape, out);
    };
    auto mat = [&](const std::string& name, int64_t rows, int64_t cols,
                   Matrix* out) {
      return FetchMatrix(ws, be, p + name, rows, cols, out);
    };
    RETURN_IF_ERROR(BindNorm(p, ws, be, vec));
    // The EMA coefficients feed the shared op math directly: fp32 arrays.
    RETURN_IF_ERROR(vec("ema.in_coef", {d, ne}, &in_coef_));
    RETURN_IF_ERROR(vec("ema.decay", {d, ne}, &decay_));
    RETURN_IF_ERROR(vec("ema.out_coef", {d, ne}, &out_coef_));
    RETURN_IF_ERROR(vec("ema.skip", {d}, &skip_));
    // The skip/activate decision is a sign: keep its weights fp32.
    RETURN_IF_ERROR(
        FetchMatrixFp32(ws, be, p + "router.weight", 2, d, &router_));
    RETURN_IF_ERROR(vec("router.bias", {2}, &router_b_));
    auto tau = ws.F32(p + "router.temperature", {1});
    if (!tau.ok()) return tau.status();
    if (!((*tau)[0] > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", p, "router.temperature\" must be > 0 (it ",
                       "is τ = exp(temp)), got ", (*tau)[0]));
    }
    RETURN_IF_ERROR(vec("router.temperature", {1}, &temperature_));
    RETURN_IF_ERROR(mat("hx.weight", d, d, &hx_));
    RETURN_IF_ERROR(vec("hx.bias", {d}, &hx_b_));
    RETURN_IF_ERROR(mat("gau.in_proj.weight", z + 2 * v, d, &in_proj_));
    RETURN_IF_ERROR(vec("gau.in_proj.bias", {z + 2 * v}, &in_b_));
    RETURN_IF_ERROR(vec("gau.qk_gamma", {2, z}, &qk_gamma_));
    RETURN_IF_ERROR(vec("gau.qk_beta", {2, z}, &qk_beta_));
    RETURN_IF_ERROR(mat("gau.out_proj.weight", d, v, &out_proj_));
    RETURN_IF_ERROR(vec("gau.out_proj.bias", {d}, &out_b_));
    // The counter and the copy of it that publishing reads off the op
    // stream (AppendStats).
    auto counter = be.Alloc(2 * sizeof(int64_t));
    if (!counter.ok()) return counter.status();
    activated_buf_ = *std::move(counter);
    activated_dev_ = static_cast<int64_t*>(activated_buf_.get());
    be.Zero(activated_dev_, 2 * sizeof(int64_t));
    auto seen = be.AllocHost(sizeof(int64_t));
    if (!seen.ok()) return seen.status();
    activated_host_ = *std::move(seen);
    backend_ = &be;
    if (s_.pos == SeqBoatPos::kSimpleBias) {
      RETURN_IF_ERROR(vec("gau.rel_pos_bias", {2 * int64_t{s_.rel_pos_max} - 1},
                          &rel_bias_));
    }
    return absl::OkStatus();
  }

  std::string kind() const override { return "seqboat"; }

  int64_t StateBytesPerSlot() const override {
    return op_math::SeqBoatStateBytes(s_);
  }

  int64_t ScratchFloatsPerRow() const override {
    // xn, h, g, gathered h, y: d each; u: 2; conf, compact: 1 each; the
    // active list: 1 + n <= 2n; zrv: z + 2v; attention output: v.
    return 5 * int64_t{s_.d} + 2 + 2 + 2 + s_.z + 3 * int64_t{s_.v};
  }

  void BindState(void* base, int64_t slot_stride) override {
    state_ = base;
    slot_stride_ = slot_stride;
  }

  absl::Status Forward(const StepContext& ctx, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n(), d = s_.d, z = s_.z, v = s_.v;
    const int64_t rows = n;
    float* xn = ctx.scratch;
    float* h = xn + rows * d;
    float* g = h + rows * d;
    float* hg = g + rows * d;
    float* y = hg + rows * d;
    float* u = y + rows * d;
    float* conf = u + rows * 2;
    auto* compact = reinterpret_cast<int32_t*>(conf + rows);
    auto* active = compact + rows;  // 1 + n entries
    float* zrv = reinterpret_cast<float*>(active + 2 * rows);
    float* att = zrv + rows * (z + 2 * v);
    const int64_t stride = slot_stride_;

    const float* x = residual;
    if (prenorm_ && norm_.has_value()) {
      ApplyNorm(be, residual, n, xn);
      x = xn;
    }
    SeqBoatEmaParams ema;
    ema.segs = ctx.segs();
    ema.nsegs = ctx.nsegs();
    ema.x = x;
    ema.state = state_;
    ema.state_stride = stride;
    ema.shape = s_;
    ema.in_coef = in_coef_;
    ema.decay = decay_;
    ema.out_coef = out_coef_;
    ema.skip = skip_;
    ema.h = h;
    be.SeqBoatEma(ema);
    be.Gemm(Projection(h, n, router_, router_b_, u));
    be.Gemm(Projection(h, n, hx_, hx_b_, g));
    SeqBoatRouteParams route;
    route.u = u;
    route.ldu = 2;
    route.n = n;
    route.temperature = temperature_;
    route.conf = conf;
    route.compact = compact;
    route.active = active;
    route.activated = activated_dev_;
    be.SeqBoatRoute(route);

    SeqBoatAttendParams gau;
    gau.segs = ctx.segs();
    gau.nsegs = ctx.nsegs();
    gau.ldzrv = z + 2 * v;
    gau.zrv = zrv;
    gau.state = state_;
    gau.state_stride = stride;
    gau.shape = s_;
    gau.qk_gamma = qk_gamma_;
    gau.qk_beta = qk_beta_;
    gau.rel_bias = rel_bias_;
    gau.out = att;
    if (IsDecodeCall(ctx) && !be.MemoryIsHost()) {
      // Nothing read back: the GEMMs cover every row (at decode they cost
      // what m rows do, being weight-bound), the attention takes each row's
      // activity from `compact`, and Mix reads only y rows below m. Where
      // memory is the host's, reading the count back costs nothing and
      // skipped rows' GEMMs would (a CPU decode at ~0 % activation ran
      // 3.5x slower), so decode takes the sparse path there.
      be.Gemm(Projection(h, n, in_proj_, in_b_, zrv));
      gau.compact = compact;
      be.SeqBoatAttend(gau);
      be.Gemm(Projection(att, n, out_proj_, out_b_, y));
    } else {
      RETURN_IF_ERROR(AttendActiveRows(ctx, active, h, hg, zrv, att, y, gau));
    }
    const bool post = !prenorm_ && norm_.has_value();
    SeqBoatMixParams mix;
    mix.s = residual;
    mix.g = g;
    mix.ldg = d;
    mix.y = y;
    mix.conf = conf;
    mix.compact = compact;
    mix.n = n;
    mix.d = d;
    mix.out = post ? xn : residual;
    be.SeqBoatMix(mix);
    if (post) ApplyNorm(be, xn, n, residual);
    tokens_ += n;
    return absl::OkStatus();
  }

  // The activated count lives in backend memory (the route op adds to it),
  // so steps never read it back. Under load, publishing copies it aside in
  // op order and reads that copy off the op stream, so it never waits for a
  // step: it reports the count of the last copy that has landed (on a
  // backend whose copies are synchronous, this one's). Settled, it reads the
  // count itself, so an idle engine shows the final one.
  void AppendStats(std::vector<LayerStat>* out, bool settled) const override {
    if (activated_dev_ != nullptr && settled) {
      if (copy_pending_) backend_->WaitCopy(copy_);
      copy_pending_ = false;
      backend_->CopyToHost(&activated_seen_, activated_dev_, sizeof(int64_t));
    } else if (activated_dev_ != nullptr) {
      PollActivated();
    }
    out->push_back({kSeqBoatTokensStat, tokens_});
    out->push_back({kSeqBoatActivatedStat, activated_seen_});
  }

 private:
  // A decode call: every segment one row (or none, a bucket's padding).
  static bool IsDecodeCall(const StepContext& ctx) {
    for (int i = 0; i < ctx.nsegs(); ++i) {
      if (ctx.segs()[i].len > 1) return false;
    }
    return true;
  }

  // Takes the copy in flight if it has landed; else leaves it. Starts the
  // next one when none is in flight: the counter copied in op order into
  // activated_dev_[1], which no op writes, and that read to the host.
  void PollActivated() const {
    Backend& be = *backend_;
    auto take_if_landed = [&] {
      if (!be.CopyDone(copy_)) return;
      activated_seen_ = *static_cast<const int64_t*>(activated_host_.get());
      copy_pending_ = false;
    };
    if (copy_pending_) {
      take_if_landed();
      if (copy_pending_) return;
    }
    be.CopyOnDevice(activated_dev_ + 1, activated_dev_, sizeof(int64_t));
    copy_ = be.CopyToHostAsync(activated_host_.get(), activated_dev_ + 1,
                               sizeof(int64_t));
    copy_pending_ = true;
    take_if_landed();
  }

  // Prefill and mixed calls: the one device→host copy of the call sizes the
  // GAU's GEMMs to the m active rows and gives each segment its range of
  // them, so skipped tokens cost no projection.
  absl::Status AttendActiveRows(const StepContext& ctx, const int32_t* active,
                                const float* h, float* hg, float* zrv,
                                const float* att, float* y,
                                SeqBoatAttendParams& gau) {
    Backend& be = *ctx.backend;
    const int n = ctx.n();
    host_active_.resize(n + 1);
    be.CopyToHost(host_active_.data(), active, sizeof(int32_t) * (n + 1));
    const int m = host_active_[0];
    if (m < 0 || m > n) {
      return absl::InternalError(
          absl::StrCat("seqboat: router produced ", m, " active of ", n));
    }
    const int32_t* rows_begin = host_active_.data() + 1;
    ranges_.resize(ctx.nsegs());
    for (int i = 0; i < ctx.nsegs(); ++i) {
      const Segment& seg = ctx.segs()[i];
      const int32_t* lo =
          std::lower_bound(rows_begin, rows_begin + m, seg.start);
      const int32_t* hi =
          std::lower_bound(rows_begin, rows_begin + m, seg.start + seg.len);
      ranges_[i] = {static_cast<int32_t>(lo - rows_begin),
                    static_cast<int32_t>(hi - lo)};
    }
    if (m > 0) {
      GatherRowsParams gather;
      gather.x = h;
      gather.d = s_.d;
      gather.rows = rows_begin;
      gather.m = m;
      gather.out = hg;
      be.GatherRows(gather);
      be.Gemm(Projection(hg, m, in_proj_, in_b_, zrv));
    }
    // Runs even when m == 0: it also advances every segment's position.
    gau.ranges = ranges_.data();
    gau.active_rows = active + 1;
    be.SeqBoatAttend(gau);
    if (m > 0) be.Gemm(Projection(att, m, out_proj_, out_b_, y));
    return absl::OkStatus();
  }

  template <typename VecFn>
  absl::Status BindNorm(const std::string& p, WeightStore& ws, Backend& be,
                        VecFn& vec) {
    if (!norm_.has_value() || !norm_->affine) {
      return absl::OkStatus();
    }
    const int64_t d = s_.d;
    switch (norm_->type) {
      case NormType::kLayerNorm: {
        absl::Status s = vec("norm.weight", {d}, &norm_w_);
        return s.ok() ? vec("norm.bias", {d}, &norm_b_) : s;
      }
      case NormType::kRmsNorm:
      case NormType::kRmsNormT5:
        return vec("norm.weight", {d}, &norm_w_);
      case NormType::kScaleNorm: {
        // ScaleNorm is an RMSNorm whose weight is one learned scalar:
        // broadcast it so the backend's RmsNorm runs it.
        auto scalar = ws.F32(p + "norm.scalar", {1});
        if (!scalar.ok()) return scalar.status();
        const std::vector<float> w(d, (*scalar)[0]);
        auto dev = be.UploadVector(w.data(), d);
        if (!dev.ok()) return dev.status();
        norm_w_ = *dev;
        return absl::OkStatus();
      }
    }
    return absl::OkStatus();
  }

  void ApplyNorm(Backend& be, const float* x, int n, float* out) const {
    const float eps = static_cast<float>(norm_->eps);
    NormParams norm;
    norm.x = x;
    norm.ldx = s_.d;
    norm.n = n;
    norm.d = s_.d;
    norm.w = norm_w_;
    norm.b = norm_b_;
    norm.eps = eps;
    norm.out = out;
    norm.ldo = s_.d;
    if (norm_->type == NormType::kLayerNorm) {
      be.LayerNorm(norm);
    } else {
      be.RmsNorm(norm);
    }
  }

  const SeqBoatShape s_;
  const bool prenorm_;
  const std::optional<NormConfig> norm_;
  const float *norm_w_ = nullptr, *norm_b_ = nullptr;
  const float *in_coef_ = nullptr, *decay_ = nullptr, *out_coef_ = nullptr,
              *skip_ = nullptr;
  Matrix router_, hx_, in_proj_, out_proj_;
  const float *router_b_ = nullptr, *temperature_ = nullptr, *hx_b_ = nullptr,
              *in_b_ = nullptr, *qk_gamma_ = nullptr, *qk_beta_ = nullptr,
              *out_b_ = nullptr, *rel_bias_ = nullptr;
  void* state_ = nullptr;
  int64_t slot_stride_ = 0;  // bytes between slots
  // Host copies per step, kept to avoid reallocating every step.
  std::vector<int32_t> host_active_;
  std::vector<SeqBoatActiveRange> ranges_;
  int64_t tokens_ = 0;
  Backend* backend_ = nullptr;
  DeviceBuffer activated_buf_;
  int64_t* activated_dev_ = nullptr;  // [counter, its copy] in activated_buf_
  HostBuffer activated_host_;         // where the copy lands
  // Publishing's state (AppendStats is const to its callers).
  mutable CopyTicket copy_ = 0;
  mutable bool copy_pending_ = false;
  mutable int64_t activated_seen_ = 0;
};

// null / absent, or a positive integer.
absl::Status OptionalSize(ObjectReader& r, const char* key,
                          std::optional<int64_t>* out) {
  out->reset();
  const nlohmann::json* v = r.Get(key);
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  int64_t value = 0;
  if (absl::Status s = r.PositiveInt(key, &value); !s.ok()) {
    return r.Invalid(key, "null or a positive integer", *v);
  }
  *out = value;
  return absl::OkStatus();
}

absl::Status ParseSeqBoat(ObjectReader& r, std::vector<std::string>* warnings,
                          std::any* params) {
  SeqBoatConfig c;
  RETURN_IF_ERROR(r.OptionalBool("prenorm", true, &c.prenorm));
  for (auto [key, field] :
       {std::pair{"ema_dim", &c.ema_dim}, std::pair{"z_dim", &c.z_dim},
        std::pair{"v_dim", &c.v_dim}, std::pair{"window", &c.window}}) {
    RETURN_IF_ERROR(r.PositiveInt(key, field));
  }
  std::string attn_fn, pos;
  RETURN_IF_ERROR(r.String("attn_fn", &attn_fn));
  if (attn_fn == "softmax") {
    c.attn_fn = SeqBoatAttnFn::kSoftmax;
  } else if (attn_fn == "relu2") {
    c.attn_fn = SeqBoatAttnFn::kRelu2;
  } else if (attn_fn == "laplace") {
    return r.Error("attn_fn", "\"laplace\" is not supported by this build");
  } else {
    return r.Invalid("attn_fn", "one of \"softmax\", \"relu2\"",
                     *r.Get("attn_fn"));
  }
  RETURN_IF_ERROR(r.String("pos", &pos));
  if (pos == "rope_interleaved") {
    c.pos = SeqBoatPos::kRopeInterleaved;
  } else if (pos == "simple_bias") {
    c.pos = SeqBoatPos::kSimpleBias;
  } else {
    return r.Invalid("pos", "one of \"rope_interleaved\", \"simple_bias\"",
                     *r.Get("pos"));
  }
  RETURN_IF_ERROR(
      r.OptionalPositiveNumber("rope_theta", 10000.0, &c.rope_theta));
  RETURN_IF_ERROR(OptionalSize(r, "rel_pos_max", &c.rel_pos_max));
  RETURN_IF_ERROR(OptionalSize(r, "ema_truncation", &c.ema_truncation));
  if (c.pos == SeqBoatPos::kRopeInterleaved && c.z_dim % 2 != 0) {
    return r.Error("z_dim",
                   absl::StrCat("must be even for pos ",
                                "\"rope_interleaved\", got ", c.z_dim));
  }
  if (c.pos == SeqBoatPos::kSimpleBias && !c.rel_pos_max) {
    return r.Error("rel_pos_max",
                   "must be a positive integer for pos \"simple_bias\"");
  }
  if (c.ema_truncation.has_value()) {
    // Exact O(1) decoding of a truncated kernel needs a ring of the last T
    // inputs per channel, not a constant-size state (MODELS.md 2.1).
    // Worded without the block so that a stack of such blocks says it once.
    const int64_t t = *c.ema_truncation;
    warnings->push_back(absl::StrCat(
        "seqboat ema_truncation ", t, ": trained with EMA kernels cut to ", t,
        " taps; they run uncut here, so a stream past ", t,
        " tokens is no longer exactly the trained model"));
  }
  *params = c;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Layer>> BuildSeqBoat(const BlockConfig& block,
                                                    const BlockSite& site) {
  return MakeSeqBoat(*block.As<SeqBoatConfig>(), block.norm, site);
}

}  // namespace

// A decode call through SeqBoat stays on the device (its GAU covers every
// row); prefill and mixed calls read the active count back to size the GAU.
const BlockKind kSeqBoatBlock = {"seqboat", ParseSeqBoat, BuildSeqBoat};

SeqBoatShape SeqBoatShapeOf(const SeqBoatConfig& config, int d_model) {
  SeqBoatShape sh;
  sh.d = d_model;
  sh.ne = static_cast<int>(config.ema_dim);
  sh.z = static_cast<int>(config.z_dim);
  sh.v = static_cast<int>(config.v_dim);
  sh.w = static_cast<int>(config.window);
  sh.attn_fn = config.attn_fn;
  sh.pos = config.pos;
  sh.rope_theta = config.rope_theta;
  sh.rel_pos_max = static_cast<int>(config.rel_pos_max.value_or(0));
  return sh;
}

absl::StatusOr<std::unique_ptr<Layer>> MakeSeqBoat(
    const SeqBoatConfig& config, const std::optional<NormConfig>& norm,
    const BlockSite& site) {
  const SeqBoatShape shape = SeqBoatShapeOf(config, site.d_model);
  RETURN_IF_ERROR(CheckShape(shape, site.where));
  if (absl::Status s = site.backend->CheckSeqBoat(shape); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(site.where, ": ", s.message()));
  }
  auto layer = std::make_unique<SeqBoat>(shape, config.prenorm, norm);
  RETURN_IF_ERROR(layer->Bind(site.prefix, *site.weights, *site.backend));
  return layer;
}

}  // namespace seqboat
