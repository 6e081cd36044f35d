// The SeqBoat block on the CPU backend against direct float64 computations of
// MODELS.md §2.2: the configurator's extremes (nothing active: no GAU work and
// SiLU(S + G); everything active with w >= length: full causal GAU attention),
// the FIFO's eviction order and original positions across chunks and
// segments, and errors for bad configurations.
#include "engine/layers/seqboat.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/seqboat_math.h"
#include "engine/backend/testing/forwarding_backend.h"
#include "engine/testing/layer_harness.h"
#include "engine/testing/matrix_upload_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "weights/safetensors_writer.h"

namespace seqboat {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kD = 8, kNe = 2, kZ = 4, kV = 6;

using Tensor = F32Tensor;
using Tensors = LayerHarness::Tensors;

// Random weights of one block (prefix "b."), no norm, simple or rope.
Tensors RandomWeights(uint32_t seed, float bias_skip, float bias_act,
                      bool simple_bias, int rel_pos_max) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](std::vector<int64_t> shape, float scale, float offset) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    Tensor t{shape, std::vector<float>(n)};
    for (float& x : t.data) x = offset + scale * u(rng);
    return t;
  };
  Tensors t;
  t["b.ema.in_coef"] = fill({kD, kNe}, 0.4f, 0.5f);
  t["b.ema.decay"] = fill({kD, kNe}, 0.3f, 0.6f);
  t["b.ema.out_coef"] = fill({kD, kNe}, 0.7f, 0.0f);
  t["b.ema.skip"] = fill({kD}, 0.5f, 0.0f);
  t["b.router.weight"] = fill({2, kD}, 0.3f, 0.0f);
  t["b.router.bias"] = Tensor{{2}, {bias_skip, bias_act}};
  t["b.router.temperature"] = Tensor{{1}, {0.8f}};
  t["b.hx.weight"] = fill({kD, kD}, 0.35f, 0.0f);
  t["b.hx.bias"] = fill({kD}, 0.2f, 0.0f);
  t["b.gau.in_proj.weight"] = fill({kZ + 2 * kV, kD}, 0.6f, 0.0f);
  t["b.gau.in_proj.bias"] = fill({kZ + 2 * kV}, 0.3f, 0.0f);
  t["b.gau.qk_gamma"] = fill({2, kZ}, 0.5f, 1.0f);
  t["b.gau.qk_beta"] = fill({2, kZ}, 0.3f, 0.0f);
  t["b.gau.out_proj.weight"] = fill({kD, kV}, 0.4f, 0.0f);
  t["b.gau.out_proj.bias"] = fill({kD}, 0.2f, 0.0f);
  if (simple_bias)
    t["b.gau.rel_pos_bias"] = fill({2 * rel_pos_max - 1}, 1.0f, 0.0f);
  return t;
}

SeqBoatConfig Dims(int w, bool simple_bias = false, int rel_pos_max = 0) {
  SeqBoatConfig c;
  c.ema_dim = kNe;
  c.z_dim = kZ;
  c.v_dim = kV;
  c.window = w;
  c.pos = simple_bias ? SeqBoatPos::kSimpleBias : SeqBoatPos::kRopeInterleaved;
  if (rel_pos_max != 0) c.rel_pos_max = rel_pos_max;
  return c;
}

SeqBoatShape ShapeOf(const SeqBoatConfig& c) { return SeqBoatShapeOf(c, kD); }

// One SeqBoat block with its own arena of `slots` slots.
struct Harness : LayerHarness {
  absl::Status Init(const SeqBoatConfig& config, Tensors w, int slots = 2) {
    return LayerHarness::Init(
        [&](const BlockSite& site) {
          return MakeSeqBoat(config, /*norm=*/std::nullopt, site);
        },
        "blocks[0] (seqboat)", kD, std::move(w), slots);
  }

  // Runs rows x [n, d] split into `segs`; returns the new residual.
  std::vector<float> Step(std::vector<float> x,
                          const std::vector<Segment>& segs) const {
    return LayerHarness::Step(std::move(x), segs, kD);
  }

  int64_t Stat(const char* name, bool settled = false) const {
    std::vector<LayerStat> stats;
    layer->AppendStats(&stats, settled);
    for (const LayerStat& s : stats) {
      if (s.name == name) return s.value;
    }
    ADD_FAILURE() << "no stat " << name;
    return -1;
  }

  op_math::SeqBoatSlot Slot(int s, const SeqBoatShape& shape) const {
    return op_math::SeqBoatSlotAt(const_cast<char*>(SlotBytes(s)), shape);
  }

  const std::vector<float>& W(const char* name) const {
    return weights.at(absl::StrCat("b.", name)).data;
  }
};

std::vector<float> RandomInput(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(n * kD);
  for (float& v : x) v = g(rng);
  return x;
}

double Silu(double x) { return x / (1.0 + std::exp(-x)); }

// y = W x + b for a row-major [out, in] W.
std::vector<double> Linear(const std::vector<float>& w, const float* b,
                           const std::vector<double>& x, int out) {
  const int in = static_cast<int>(x.size());
  std::vector<double> y(out);
  for (int o = 0; o < out; ++o) {
    double acc = b != nullptr ? b[o] : 0.0;
    for (int i = 0; i < in; ++i) acc += double{w[o * in + i]} * x[i];
    y[o] = acc;
  }
  return y;
}

// H = SiLU(EMA(x)) for every row, by the recurrence in float64.
std::vector<std::vector<double>> EmaSilu(const Harness& h,
                                         const std::vector<float>& x) {
  const int n = static_cast<int>(x.size()) / kD;
  std::vector<double> s(kD * kNe, 0.0);
  std::vector<std::vector<double>> out(n, std::vector<double>(kD));
  for (int t = 0; t < n; ++t) {
    for (int d = 0; d < kD; ++d) {
      double acc = h.W("ema.skip")[d] * double{x[t * kD + d]};
      for (int k = 0; k < kNe; ++k) {
        const int i = d * kNe + k;
        s[i] =
            h.W("ema.decay")[i] * s[i] + h.W("ema.in_coef")[i] * x[t * kD + d];
        acc += h.W("ema.out_coef")[i] * s[i];
      }
      out[t][d] = Silu(acc);
    }
  }
  return out;
}

// Absolute interleaved RoPE of a z-vector at position p.
std::vector<double> Rope(std::vector<double> v, int64_t p) {
  for (int i = 0; i < kZ / 2; ++i) {
    const double a = p * std::pow(10000.0, -2.0 * i / kZ);
    const double x0 = v[2 * i], x1 = v[2 * i + 1];
    v[2 * i] = x0 * std::cos(a) - x1 * std::sin(a);
    v[2 * i + 1] = x0 * std::sin(a) + x1 * std::cos(a);
  }
  return v;
}

TEST(SeqBoatTest, NothingActiveSkipsTheGauAndGivesSiluOfSPlusG) {
  Harness h;
  ASSERT_TRUE(
      h.Init(Dims(4), RandomWeights(1, 100.0f, -100.0f, false, 0)).ok());
  const std::vector<float> x = RandomInput(12, 2);
  // A prefill chunk of 5, then decode steps.
  std::vector<float> got = h.Step({x.begin(), x.begin() + 5 * kD}, {{1, 0, 5}});
  for (int t = 5; t < 12; ++t) {
    std::vector<float> y =
        h.Step({x.begin() + t * kD, x.begin() + (t + 1) * kD}, {{1, 0, 1}});
    got.insert(got.end(), y.begin(), y.end());
  }
  EXPECT_EQ(h.Stat(kSeqBoatActivatedStat), 0);
  EXPECT_EQ(h.Stat(kSeqBoatTokensStat), 12);
  const auto hs = EmaSilu(h, x);
  for (int t = 0; t < 12; ++t) {
    const auto g = Linear(h.W("hx.weight"), h.W("hx.bias").data(), hs[t], kD);
    for (int d = 0; d < kD; ++d) {
      EXPECT_NEAR(got[t * kD + d], Silu(x[t * kD + d] + g[d]), 1e-5)
          << "t=" << t << " d=" << d;
    }
  }
  const auto slot = h.Slot(1, ShapeOf(Dims(4)));
  EXPECT_EQ(slot.meta[op_math::kFifoLen], 0);
  EXPECT_EQ(slot.meta[op_math::kNextPos], 12);
}

TEST(SeqBoatTest, EverythingActiveWithWideWindowIsFullCausalGau) {
  const int n = 10;
  Harness h;
  ASSERT_TRUE(
      h.Init(Dims(/*w=*/n), RandomWeights(3, -100.0f, 100.0f, false, 0)).ok());
  const std::vector<float> x = RandomInput(n, 4);
  std::vector<float> got = h.Step({x.begin(), x.begin() + 3 * kD}, {{0, 0, 3}});
  std::vector<float> rest = h.Step({x.begin() + 3 * kD, x.end()}, {{0, 0, 7}});
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(h.Stat(kSeqBoatActivatedStat), n);

  const auto hs = EmaSilu(h, x);
  std::vector<std::vector<double>> q(n), k(n), val(n), gate(n);
  for (int t = 0; t < n; ++t) {
    auto zrv = Linear(h.W("gau.in_proj.weight"), h.W("gau.in_proj.bias").data(),
                      hs[t], kZ + 2 * kV);
    for (double& e : zrv) e = Silu(e);
    std::vector<double> qt(kZ), kt(kZ);
    for (int i = 0; i < kZ; ++i) {
      qt[i] = h.W("gau.qk_gamma")[i] * zrv[i] + h.W("gau.qk_beta")[i];
      kt[i] = h.W("gau.qk_gamma")[kZ + i] * zrv[i] + h.W("gau.qk_beta")[kZ + i];
    }
    q[t] = Rope(qt, t);
    k[t] = Rope(kt, t);
    gate[t].assign(zrv.begin() + kZ, zrv.begin() + kZ + kV);
    val[t].assign(zrv.begin() + kZ + kV, zrv.end());
  }
  for (int t = 0; t < n; ++t) {
    std::vector<double> sc(t + 1);
    double mx = -1e300, sum = 0;
    for (int j = 0; j <= t; ++j) {
      double dot = 0;
      for (int i = 0; i < kZ; ++i) dot += q[t][i] * k[j][i];
      sc[j] = dot / std::sqrt(double{kZ});
      mx = std::max(mx, sc[j]);
    }
    for (double& s : sc) sum += (s = std::exp(s - mx));
    std::vector<double> o(kV, 0.0);
    for (int j = 0; j <= t; ++j) {
      for (int i = 0; i < kV; ++i) o[i] += sc[j] / sum * val[j][i];
    }
    for (int i = 0; i < kV; ++i) o[i] *= gate[t][i];
    const auto y = Linear(h.W("gau.out_proj.weight"),
                          h.W("gau.out_proj.bias").data(), o, kD);
    const auto u =
        Linear(h.W("router.weight"), h.W("router.bias").data(), hs[t], 2);
    const double c = 1.0 / (1.0 + std::exp(-(u[1] - u[0]) / 0.8));
    const auto g = Linear(h.W("hx.weight"), h.W("hx.bias").data(), hs[t], kD);
    for (int d = 0; d < kD; ++d) {
      EXPECT_NEAR(got[t * kD + d], Silu(x[t * kD + d] + g[d] + c * y[d]), 1e-5)
          << "t=" << t << " d=" << d;
    }
  }
}

// Router: u1 - u0 = H[0] - 0.5 with the EMA reduced to H = SiLU(x), so a
// token is active exactly when its x[0] is large.
Tensors PassThroughWeights() {
  Tensors t = RandomWeights(5, 0.5f, 0.0f, true, 3);
  for (float& v : t["b.ema.in_coef"].data) v = 0.0f;
  for (float& v : t["b.ema.skip"].data) v = 1.0f;
  for (float& v : t["b.router.weight"].data) v = 0.0f;
  t["b.router.weight"].data[kD] = 1.0f;  // row 1, column 0
  return t;
}

TEST(SeqBoatTest, FifoEvictsInOrderAndKeepsOriginalPositions) {
  const int w = 3;
  Harness h;
  ASSERT_TRUE(h.Init(Dims(w, true, 3), PassThroughWeights()).ok());
  // Slot 0: active at 0, 2, 3, 6, 7, 9 (of 10); slot 1: active at 1, 4.
  const std::vector<int> act0 = {1, 0, 1, 1, 0, 0, 1, 1, 0, 1};
  const std::vector<int> act1 = {0, 1, 0, 0, 1, 0};
  auto rows = [](const std::vector<int>& act, int from, int to) {
    std::vector<float> x(static_cast<size_t>(to - from) * kD, 0.1f);
    for (int t = from; t < to; ++t) x[(t - from) * kD] = act[t] ? 3.0f : -3.0f;
    return x;
  };
  // Step 1: both sequences in one packed step (slot 0: 4 rows, slot 1: 6).
  std::vector<float> x = rows(act0, 0, 4);
  std::vector<float> x1 = rows(act1, 0, 6);
  x.insert(x.end(), x1.begin(), x1.end());
  h.Step(x, {{0, 0, 4}, {1, 4, 6}});
  const SeqBoatShape shape = ShapeOf(Dims(w, true, 3));
  auto fifo = [&](int s) {
    const auto slot = h.Slot(s, shape);
    std::vector<int64_t> pos;
    for (int j = 0; j < slot.meta[op_math::kFifoLen]; ++j) {
      pos.push_back(
          slot.pos[op_math::FifoIndex(slot.meta[op_math::kFifoHead], j, w)]);
    }
    return pos;
  };
  EXPECT_EQ(fifo(0), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(fifo(1), (std::vector<int64_t>{1, 4}));
  // Then slot 0 alone: a chunk of 3 and three decode steps.
  h.Step(rows(act0, 4, 7), {{0, 0, 3}});
  EXPECT_EQ(fifo(0), (std::vector<int64_t>{2, 3, 6}));
  for (int t = 7; t < 10; ++t) h.Step(rows(act0, t, t + 1), {{0, 0, 1}});
  EXPECT_EQ(fifo(0), (std::vector<int64_t>{6, 7, 9}));
  EXPECT_EQ(h.Slot(0, shape).meta[op_math::kNextPos], 10);
  EXPECT_EQ(h.Slot(1, shape).meta[op_math::kNextPos], 6);
  EXPECT_EQ(h.Stat(kSeqBoatActivatedStat), 8);
  EXPECT_EQ(h.Stat(kSeqBoatTokensStat), 16);
}

TEST(SeqBoatTest, BadDimsNameTheField) {
  Harness h;
  auto err = [&](SeqBoatConfig c) {
    return std::string(h.Init(c, RandomWeights(1, 0, 0, true, 3)).message());
  };
  SeqBoatConfig d = Dims(4);
  d.window = 0;
  EXPECT_THAT(err(d),
              AllOf(HasSubstr("blocks[0] (seqboat)"), HasSubstr("\"window\"")));
  d = Dims(4);
  d.z_dim = 3;
  EXPECT_THAT(err(d), HasSubstr("\"z_dim\" must be even"));
  d = Dims(4, true, 0);
  EXPECT_THAT(err(d), HasSubstr("\"rel_pos_max\""));
  // A weight with the wrong shape is named.
  Tensors t = RandomWeights(1, 0, 0, false, 0);
  t["b.gau.qk_gamma"].shape = {kZ, 2};
  EXPECT_THAT(std::string(h.Init(Dims(4), t).message()),
              HasSubstr("gau.qk_gamma"));
}

// The CPU backend, refusing working memories wider than `max_window`, as a
// GPU does beyond its shared memory.
class NarrowBackend final : public ForwardingBackend {
 public:
  explicit NarrowBackend(int max_window)
      : ForwardingBackend(MakeCpuBackend(1)), max_window_(max_window) {}
  absl::Status CheckSeqBoat(const SeqBoatShape& shape) const override {
    if (shape.w <= max_window_) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("window ", shape.w, " is wider than ", max_window_));
  }

 private:
  int max_window_;
};

TEST(SeqBoatTest, ShapeTheBackendRefusesFailsTheLoadNamingTheBlock) {
  Harness h;
  h.backend = std::make_unique<NarrowBackend>(8);
  ASSERT_TRUE(h.Init(Dims(8), RandomWeights(1, 0, 0, false, 0)).ok());
  Harness wide;
  wide.backend = std::make_unique<NarrowBackend>(8);
  const absl::Status s = wide.Init(Dims(9), RandomWeights(1, 0, 0, false, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("blocks[0] (seqboat)"),
                    HasSubstr("window 9 is wider than 8")));
}

// The CPU backend with host copies that land only at Land(), counting
// synchronous ones: a device whose copies run off the op stream.
class LateCopies final : public ForwardingBackend {
 public:
  LateCopies() : ForwardingBackend(MakeCpuBackend(1)) {}
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    ++sync_copies;
    ForwardingBackend::CopyToHost(dst, src, bytes);
  }
  // The source as it is now: every op enqueued before has run.
  CopyTicket CopyToHostAsync(void* dst, const void* src,
                             size_t bytes) override {
    const char* from = static_cast<const char*>(src);
    pending_.push_back({dst, std::vector<char>(from, from + bytes)});
    return static_cast<CopyTicket>(++issued_);
  }
  bool CopyDone(CopyTicket ticket) override { return ticket <= landed_; }
  void WaitCopy(CopyTicket /*ticket*/) override { Land(); }

  void Land() {
    for (const auto& [dst, bytes] : pending_) {
      std::memcpy(dst, bytes.data(), bytes.size());
    }
    pending_.clear();
    landed_ = issued_;
  }

  int sync_copies = 0;

 private:
  std::vector<std::pair<void*, std::vector<char>>> pending_;
  int64_t issued_ = 0, landed_ = 0;
};

// Publishing never waits for the device: with copies off the op stream, the
// activated count is that of the last copy landed, and a new copy starts
// only once the one before has landed.
TEST(SeqBoatTest, StatsReadTheActivatedCountWithoutWaiting) {
  Harness h;
  auto owned = std::make_unique<LateCopies>();
  LateCopies* late = owned.get();
  h.backend = std::move(owned);
  ASSERT_TRUE(
      h.Init(Dims(/*w=*/4), RandomWeights(3, -100.0f, 100.0f, false, 0)).ok());
  const std::vector<float> x = RandomInput(5, 4);
  // The stats of `name`, and how many synchronous copies reading them took.
  auto stat = [&](const char* name, bool settled = false) {
    const int before = late->sync_copies;
    const int64_t v = h.Stat(name, settled);
    return std::pair<int64_t, int>{v, late->sync_copies - before};
  };
  using Read = std::pair<int64_t, int>;
  // Prefill steps read their active rows back; publishing does not wait.
  h.Step({x.begin(), x.begin() + 3 * kD}, {{0, 0, 3}});
  EXPECT_EQ(stat(kSeqBoatActivatedStat), Read(0, 0));  // a copy of 3 in flight
  EXPECT_EQ(stat(kSeqBoatTokensStat), Read(3, 0));
  h.Step({x.begin() + 3 * kD, x.end()}, {{0, 0, 2}});
  EXPECT_EQ(stat(kSeqBoatActivatedStat), Read(0, 0));
  late->Land();
  EXPECT_EQ(stat(kSeqBoatActivatedStat), Read(3, 0));  // and a copy of 5
  late->Land();
  EXPECT_EQ(stat(kSeqBoatActivatedStat), Read(5, 0));
  // Settled (no step in flight), the count itself is read, copies in flight
  // waited for: an idle engine publishes the final count.
  h.Step({x.begin(), x.begin() + kD}, {{1, 0, 1}});
  EXPECT_EQ(stat(kSeqBoatActivatedStat), Read(5, 0));  // a copy of 6 in flight
  EXPECT_EQ(stat(kSeqBoatActivatedStat, /*settled=*/true), Read(6, 1));
}

TEST(SeqBoatTest, OnlyTheRouterIsKeptInFp32) {
  MatrixUploadLog::Shapes fp32, other;
  Harness h;
  h.backend =
      std::make_unique<MatrixUploadLog>(MakeCpuBackend(1), &fp32, &other);
  ASSERT_TRUE(h.Init(Dims(4), RandomWeights(1, 0, 0, false, 0)).ok());
  EXPECT_EQ(fp32, (MatrixUploadLog::Shapes{{2, kD}}));
  // hx, the GAU's in and out projections.
  EXPECT_EQ(other,
            (MatrixUploadLog::Shapes{{kD, kD}, {kZ + 2 * kV, kD}, {kD, kV}}));
}

// A decode call (every segment one row or none) takes the device path; the
// same rows beside one two-row segment take the host path. The shared rows'
// outputs and their slots' state must agree bit for bit (the CPU GEMM is
// batch invariant), for every activity, attn_fn and pos kind, with padding.
// The CPU backend as a device (memory not the host's): decode calls take
// the device path, which the CPU backend itself does not.
class DeviceLikeCpu final : public ForwardingBackend {
 public:
  DeviceLikeCpu() : ForwardingBackend(MakeCpuBackend(1)) {}
  bool MemoryIsHost() const override { return false; }
};

TEST(SeqBoatTest, DecodeCallOnTheDeviceEqualsTheHostPathBitForBit) {
  struct Activity {
    const char* name;
    float skip, act;
  };
  const Activity activities[] = {
      {"all", -100.0f, 100.0f}, {"none", 100.0f, -100.0f}, {"mixed", 0, 0}};
  for (const SeqBoatAttnFn fn :
       {SeqBoatAttnFn::kSoftmax, SeqBoatAttnFn::kRelu2}) {
    for (const bool simple : {false, true}) {
      for (const Activity& act : activities) {
        SCOPED_TRACE(absl::StrCat("attn_fn=", static_cast<int>(fn),
                                  " simple_bias=", simple,
                                  " active=", act.name));
        SeqBoatConfig c = Dims(/*w=*/3, simple, simple ? 3 : 0);
        c.attn_fn = fn;
        const Tensors w = RandomWeights(11, act.skip, act.act, simple, 3);
        Harness device, host;
        device.backend = std::make_unique<DeviceLikeCpu>();
        ASSERT_TRUE(device.Init(c, w, /*slots=*/5).ok());
        ASSERT_TRUE(host.Init(c, w, /*slots=*/5).ok());
        // The same prefill in both, so the FIFOs hold entries.
        const std::vector<Segment> prefill = {
            {0, 0, 3}, {1, 3, 2}, {2, 5, 4}, {3, 9, 1}};
        const std::vector<float> x0 = RandomInput(10, 12);
        device.Step(x0, prefill);
        host.Step(x0, prefill);
        const int64_t bytes = device.layer->StateBytesPerSlot();
        for (int step = 0; step < 6; ++step) {
          // Rows 1 and 4 pad (one of them a zero-length segment on slot 1).
          std::vector<float> x = RandomInput(6, 100 + step);
          for (const int pad : {1, 4}) {
            std::fill(x.begin() + pad * kD, x.begin() + (pad + 1) * kD, 0.0f);
          }
          const std::vector<Segment> decode = {
              {0, 0, 1}, {1, 1, 0}, {1, 2, 1}, {2, 3, 1}, {3, 5, 1}};
          std::vector<Segment> mixed = decode;
          mixed.push_back({4, 6, 2});
          std::vector<float> xm = x;
          const std::vector<float> extra = RandomInput(2, 200 + step);
          xm.insert(xm.end(), extra.begin(), extra.end());
          const std::vector<float> got = device.Step(x, decode);
          const std::vector<float> want = host.Step(xm, mixed);
          for (const int row : {0, 2, 3, 5}) {
            EXPECT_EQ(0,
                      std::memcmp(got.data() + row * kD, want.data() + row * kD,
                                  sizeof(float) * kD))
                << "step " << step << " row " << row;
          }
          for (int s = 0; s < 4; ++s) {
            EXPECT_EQ(
                0, std::memcmp(device.SlotBytes(s), host.SlotBytes(s), bytes))
                << "step " << step << " slot " << s;
          }
        }
        const int64_t activated = device.Stat(kSeqBoatActivatedStat);
        const int64_t tokens = device.Stat(kSeqBoatTokensStat);
        if (act.skip < 0) {
          EXPECT_EQ(activated, tokens);
        } else if (act.skip > 0) {
          EXPECT_EQ(activated, 0);
        } else {
          EXPECT_GT(activated, 0);
          EXPECT_LT(activated, tokens);
        }
      }
    }
  }
}

// The activated counter adds up on the device across decode calls and
// prefill chunks; publishing it is the only read.
TEST(SeqBoatTest, ActivatedCounterCountsDecodeAndPrefillTokens) {
  Harness h;
  ASSERT_TRUE(h.Init(Dims(3, true, 3), PassThroughWeights(), 2).ok());
  // Token t (of 2 per step) is active exactly when x[0] is large.
  const bool on[] = {true, false, true, true, false, false, true, false};
  int64_t want = 0;
  for (int step = 0; step < 4; ++step) {
    std::vector<float> x(2 * kD, 0.1f);
    for (int r = 0; r < 2; ++r) {
      x[r * kD] = on[2 * step + r] ? 4.0f : -4.0f;
      want += on[2 * step + r] ? 1 : 0;
    }
    // Two decode calls, then two prefill chunks of two tokens on one slot.
    if (step < 2) {
      h.Step(x, {{0, 0, 1}, {1, 1, 1}});
    } else {
      h.Step(x, {{0, 0, 2}});
    }
    EXPECT_EQ(h.Stat(kSeqBoatActivatedStat), want) << "step " << step;
  }
  EXPECT_EQ(h.Stat(kSeqBoatTokensStat), 8);
}

}  // namespace
}  // namespace seqboat
