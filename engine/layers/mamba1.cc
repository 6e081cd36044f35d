#include "engine/layers/mamba1.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/layers/weight_fetch.h"

namespace seqboat {
namespace {

class Mamba1 final : public Layer {
 public:
  explicit Mamba1(const Mamba1Dims& dims) : dims_(dims) {}

  absl::Status Bind(const std::string& p, WeightStore& ws, Backend& be) {
    const int64_t d = dims_.d_model, e = dims_.d_inner, n = dims_.d_state,
                  k = dims_.d_conv, r = dims_.dt_rank;
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
    if (dims_.in_proj_bias) {
      RETURN_IF_ERROR(vec(p + "in_proj.bias", {2 * e}, &in_bias_));
    }
    // The conv taps and A feed the shared op math directly: plain fp32 arrays.
    RETURN_IF_ERROR(vec(p + "conv.weight", {e, k}, &conv_w_));
    if (dims_.conv_bias) {
      RETURN_IF_ERROR(vec(p + "conv.bias", {e}, &conv_b_));
    }
    RETURN_IF_ERROR(mat("x_proj.weight", r + 2 * n, e, &x_proj_));
    if (dims_.dt_bc_norm && dims_.dt_bc_norm_affine) {
      RETURN_IF_ERROR(vec(p + "dt_norm.weight", {r}, &dt_norm_w_));
      RETURN_IF_ERROR(vec(p + "b_norm.weight", {n}, &b_norm_w_));
      RETURN_IF_ERROR(vec(p + "c_norm.weight", {n}, &c_norm_w_));
    }
    RETURN_IF_ERROR(mat("dt_proj.weight", e, r, &dt_proj_));
    RETURN_IF_ERROR(vec(p + "dt_proj.bias", {e}, &dt_bias_));
    RETURN_IF_ERROR(vec(p + "A", {e, n}, &a_));
    RETURN_IF_ERROR(vec(p + "D", {e}, &d_));
    RETURN_IF_ERROR(mat("out_proj.weight", d, e, &out_proj_));
    if (dims_.out_proj_bias) {
      RETURN_IF_ERROR(vec(p + "out_proj.bias", {d}, &out_bias_));
    }
    return absl::OkStatus();
  }

  std::string kind() const override { return "mamba1"; }

  int64_t StateBytesPerSlot() const override {
    return (ConvFloats() + SsmFloats()) * static_cast<int64_t>(sizeof(float));
  }

  int64_t ScratchFloatsPerRow() const override {
    const int64_t e = dims_.d_inner;
    return dims_.d_model + 2 * e + e + XdblCols() + e + e;
  }

  void BindState(void* base) override { state_ = static_cast<float*>(base); }

  void ResetSlot(Backend& backend, int slot) override {
    backend.Zero(SlotState(slot), StateBytesPerSlot());
  }

  absl::Status Forward(const StepContext& ctx, float* residual) override {
    Backend& be = *ctx.backend;
    const int n = ctx.n, d = dims_.d_model, e = dims_.d_inner,
              ns = dims_.d_state, r = dims_.dt_rank, xc = XdblCols();
    float* u = ctx.scratch;
    float* xz = u + static_cast<int64_t>(n) * d;
    float* x = xz + static_cast<int64_t>(n) * 2 * e;
    float* xdbl = x + static_cast<int64_t>(n) * e;
    float* dt = xdbl + static_cast<int64_t>(n) * xc;
    float* y = dt + static_cast<int64_t>(n) * e;

    be.RmsNorm(residual, n, d, norm_w_, dims_.norm_eps, u);
    be.Gemm(u, d, n, in_proj_, in_bias_, xz, 2 * e, /*accumulate=*/false);
    // Conv and scan states are interleaved per slot: [conv | ssm] so one slot
    // is one contiguous region (cheap reset and snapshot).
    const int64_t stride = ConvFloats() + SsmFloats();
    MambaConvParams conv;
    conv.segs = ctx.segs;
    conv.nsegs = ctx.nsegs;
    conv.x = xz;
    conv.ldx = 2 * e;
    conv.state = state_;
    conv.state_stride = stride;
    conv.w = conv_w_;
    conv.bias = conv_b_;
    conv.e = e;
    conv.k = dims_.d_conv;
    conv.out = x;
    be.MambaConv(conv);
    be.Gemm(x, e, n, x_proj_, nullptr, xdbl, xc, false);
    if (dims_.dt_bc_norm) {
      // In place: dt_proj and the scan read these same columns next.
      be.RmsNormStrided(xdbl, xc, n, r, dt_norm_w_, dims_.dt_bc_norm_eps, xdbl,
                        xc);
      be.RmsNormStrided(xdbl + r, xc, n, ns, b_norm_w_, dims_.dt_bc_norm_eps,
                        xdbl + r, xc);
      be.RmsNormStrided(xdbl + r + ns, xc, n, ns, c_norm_w_,
                        dims_.dt_bc_norm_eps, xdbl + r + ns, xc);
    }
    be.Gemm(xdbl, xc, n, dt_proj_, nullptr, dt, e, false);
    MambaScanParams scan;
    scan.segs = ctx.segs;
    scan.nsegs = ctx.nsegs;
    scan.x = x;
    scan.dt = dt;
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
    be.MambaScan(scan);
    be.Gemm(y, e, n, out_proj_, out_bias_, residual, d, /*accumulate=*/true);
    return absl::OkStatus();
  }

 private:
  int64_t ConvFloats() const {
    return static_cast<int64_t>(dims_.d_inner) * (dims_.d_conv - 1);
  }
  int64_t SsmFloats() const {
    return static_cast<int64_t>(dims_.d_inner) * dims_.d_state;
  }
  int XdblCols() const { return dims_.dt_rank + 2 * dims_.d_state; }
  float* SlotState(int slot) const {
    return state_ + static_cast<int64_t>(slot) * (ConvFloats() + SsmFloats());
  }

  Mamba1Dims dims_;
  const float* norm_w_ = nullptr;
  Matrix in_proj_, x_proj_, dt_proj_, out_proj_;
  const float *in_bias_ = nullptr, *conv_w_ = nullptr, *conv_b_ = nullptr,
              *dt_bias_ = nullptr, *a_ = nullptr, *d_ = nullptr,
              *out_bias_ = nullptr;
  // Null without dt_bc_norm or when it is not affine.
  const float *dt_norm_w_ = nullptr, *b_norm_w_ = nullptr, *c_norm_w_ = nullptr;
  float* state_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Layer>> MakeMamba1(const Mamba1Dims& dims,
                                                  const std::string& prefix,
                                                  WeightStore& weights,
                                                  Backend& backend) {
  auto layer = std::make_unique<Mamba1>(dims);
  absl::Status s = layer->Bind(prefix, weights, backend);
  if (!s.ok()) return s;
  return layer;
}

}  // namespace seqboat
