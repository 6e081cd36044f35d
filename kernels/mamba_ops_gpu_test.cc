// Mamba-1's conv and scan on CUDA equal the CPU backend's: the outputs and the
// whole state arena after each of several calls that mix decode, prefill and
// zero-length padding segments (on a slot a real segment also uses), for the
// register-resident sizes and the global-memory fallbacks; and a recorded
// step replayed with new inputs and segments equals running it eagerly.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/gpu_test_util.h"

namespace seqboat::gpu_test {
namespace {

constexpr float kTol = 1e-5f;
// Columns of x_proj's output before B (dt's low-rank input), so B and C start
// at an unaligned column as in the layer.
constexpr int kDtRank = 3;
// Output rows no segment writes keep this value on both backends.
constexpr float kUnwritten = 7.0f;

struct Dims {
  int e;
  int n;    // n_state
  int k;    // conv taps
  int pad;  // floats after each slot's [conv | ssm] region
};

// A Mamba layer's op parameters and state arena, laid out as
// engine/layers/mamba1.cc does: a slot is [conv windows e*(k-1) | ssm e*n].
struct HostLayer {
  Dims dims;
  int slots = 0;
  std::vector<float> conv_w, conv_b, a, d, dt_bias, arena;

  int64_t ConvFloats() const {
    return static_cast<int64_t>(dims.e) * (dims.k - 1);
  }
  int64_t Stride() const {
    return ConvFloats() + static_cast<int64_t>(dims.e) * dims.n + dims.pad;
  }
};

HostLayer MakeLayer(const Dims& dims, int slots, uint32_t seed) {
  HostLayer l;
  l.dims = dims;
  l.slots = slots;
  const int e = dims.e, n = dims.n;
  l.conv_w = Random(static_cast<size_t>(e) * dims.k, seed, -0.5f, 0.5f);
  l.conv_b = Random(e, seed + 1, -0.5f, 0.5f);
  // Mamba's S4D-real initialisation A = -(1..n), jittered per channel.
  const std::vector<float> jitter =
      Random(static_cast<size_t>(e) * n, seed + 2, 0.5f, 1.5f);
  l.a.resize(jitter.size());
  for (int c = 0; c < e; ++c) {
    for (int i = 0; i < n; ++i) {
      l.a[c * n + i] = -static_cast<float>(i + 1) * jitter[c * n + i];
    }
  }
  l.d = Random(e, seed + 3, 0.5f, 1.5f);
  // Softplus⁻¹ of Mamba's dt range [0.001, 0.1].
  l.dt_bias = Random(e, seed + 4, 0.001f, 0.1f);
  for (float& b : l.dt_bias) b = std::log(std::expm1(b));
  // Non-zero: the state of earlier steps.
  l.arena = Random(static_cast<size_t>(slots * l.Stride()), seed + 5);
  return l;
}

// One call: its segments and the rows of the packed batch.
struct HostStep {
  std::vector<Segment> segs;
  int rows = 0;
  std::vector<float> xz;    // [rows, 2e]: pre-conv x, then the gate z
  std::vector<float> dt;    // [rows, e]: W_dt δ̃
  std::vector<float> xdbl;  // [rows, kDtRank + 2n]: B, C after kDtRank
};

HostStep MakeStep(const Dims& dims, std::vector<Segment> segs, uint32_t seed) {
  HostStep s;
  s.segs = std::move(segs);
  for (const Segment& g : s.segs) {
    s.rows = std::max(s.rows, g.start + std::max(g.len, 1));
  }
  const size_t rows = s.rows;
  s.xz = Random(rows * 2 * dims.e, seed, -1.0f, 1.0f);
  s.dt = Random(rows * dims.e, seed + 1, -1.0f, 1.0f);
  s.xdbl = Random(rows * (kDtRank + 2 * dims.n), seed + 2, -1.0f, 1.0f);
  return s;
}

// A layer's parameters and arena on one backend.
struct DeviceLayer {
  DeviceLayer(Backend& be, const HostLayer& l)
      : host(l),
        conv_w(be, l.conv_w),
        conv_b(be, l.conv_b),
        a(be, l.a),
        d(be, l.d),
        dt_bias(be, l.dt_bias),
        arena(be, l.arena) {}
  const HostLayer& host;
  Array conv_w, conv_b, a, d, dt_bias, arena;
};

// A step's inputs and outputs on one backend, sized for `rows`.
struct DeviceStep {
  DeviceStep(Backend& be, const Dims& dims, int rows)
      : xz(be, static_cast<size_t>(rows) * 2 * dims.e),
        dt(be, static_cast<size_t>(rows) * dims.e),
        xdbl(be, static_cast<size_t>(rows) * (kDtRank + 2 * dims.n)),
        x(be,
          std::vector<float>(static_cast<size_t>(rows) * dims.e, kUnwritten)),
        y(be,
          std::vector<float>(static_cast<size_t>(rows) * dims.e, kUnwritten)) {}
  void Load(Backend& be, const HostStep& s) {
    be.CopyToDevice(xz.get(), s.xz.data(), s.xz.size() * sizeof(float));
    be.CopyToDevice(dt.get(), s.dt.data(), s.dt.size() * sizeof(float));
    be.CopyToDevice(xdbl.get(), s.xdbl.data(), s.xdbl.size() * sizeof(float));
  }
  Array xz, dt, xdbl;
  Array x, y;  // conv and scan outputs
};

// The layer's conv then scan, with its strides (mamba1.cc Forward).
void RunOps(Backend& be, DeviceLayer& l, DeviceStep& s,
            const std::vector<Segment>& segs) {
  const int e = l.host.dims.e, n = l.host.dims.n;
  const int nsegs = static_cast<int>(segs.size());
  be.MambaConv(segs.data(), nsegs, s.xz.get(), 2 * e, l.arena.get(),
               l.host.Stride(), l.conv_w.get(), l.conv_b.get(), e,
               l.host.dims.k, s.x.get());
  be.MambaScan(segs.data(), nsegs, s.x.get(), s.dt.get(),
               s.xdbl.get() + kDtRank, kDtRank + 2 * n, s.xz.get() + e, 2 * e,
               l.a.get(), l.d.get(), l.dt_bias.get(),
               l.arena.get() + l.host.ConvFloats(), l.host.Stride(), e, n,
               s.y.get());
}

// What one backend produced: per call, the conv and scan outputs and the
// arena afterwards.
struct Trace {
  std::vector<std::vector<float>> x, y, arena;
};

// Decode (len 1), prefill chunks (len > 1) and zero-length padding on slot 0
// while slot 0 also runs a real segment, before or after it; slot 4 is never
// used and must keep its state.
std::vector<std::vector<Segment>> MixedCalls() {
  return {
      {{1, 0, 1}, {0, 1, 6}, {3, 7, 1}, {0, 8, 0}, {0, 9, 0}},
      {{0, 0, 0}, {0, 1, 1}, {2, 2, 1}, {1, 3, 1}, {0, 4, 0}},
      {{3, 0, 9}, {0, 9, 1}, {2, 10, 0}, {1, 10, 2}},
      {{2, 0, 1}, {0, 1, 0}, {0, 2, 0}, {0, 3, 0}},
  };
}

TEST(MambaOpsGpuTest, MatchesCpuOverMixedSegments) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  // Realistic; odd sizes (scalar state rows, unaligned slots); every register
  // specialisation; and the global-memory fallbacks (k = 6, n = 3, n = 64).
  for (const Dims& dims :
       {Dims{1536, 16, 4, 0}, Dims{37, 5, 4, 0}, Dims{37, 5, 3, 1},
        Dims{40, 32, 2, 0}, Dims{72, 8, 4, 3}, Dims{64, 4, 4, 0},
        Dims{33, 3, 6, 0}, Dims{96, 64, 4, 0}}) {
    SCOPED_TRACE(testing::Message() << "e=" << dims.e << " n=" << dims.n
                                    << " k=" << dims.k << " pad=" << dims.pad);
    const HostLayer layer = MakeLayer(dims, 5, 100 + dims.e + dims.n);
    std::vector<HostStep> steps;
    uint32_t seed = 200;
    for (const std::vector<Segment>& segs : MixedCalls()) {
      steps.push_back(MakeStep(dims, segs, seed += 10));
    }
    Trace got[2];
    int which = 0;
    for (Backend* be : {p.cpu.get(), p.cuda.get()}) {
      DeviceLayer l(*be, layer);
      for (const HostStep& step : steps) {
        DeviceStep s(*be, dims, step.rows);
        s.Load(*be, step);
        RunOps(*be, l, s, step.segs);
        got[which].x.push_back(s.x.Read());
        got[which].y.push_back(s.y.Read());
        got[which].arena.push_back(l.arena.Read());
        ASSERT_TRUE(be->TakeError().ok());
      }
      ++which;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      EXPECT_LT(MaxAbsDiff(got[0].x[i], got[1].x[i]), kTol)
          << "conv, call " << i;
      EXPECT_LT(MaxAbsDiff(got[0].y[i], got[1].y[i]), kTol)
          << "scan, call " << i;
      EXPECT_LT(MaxAbsDiff(got[0].arena[i], got[1].arena[i]), kTol)
          << "state, call " << i;
    }
    // The calls did move the state (the comparison is not vacuous).
    EXPECT_GT(MaxAbsDiff(layer.arena, got[0].arena.back()), 0.0f);
  }
}

// A decode step padded to a bucket, recorded once and replayed with new
// inputs and a new slot assignment, equals the same step run eagerly (and the
// CPU's); the state carries across the steps.
TEST(MambaOpsGpuTest, ReplayedStepMatchesEager) {
  auto cpu = MakeCpuBackend(1);
  auto eager = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  auto rec = MakeCuda(CudaWeights::kF32, /*graphs=*/true);
  ASSERT_NE(eager, nullptr);
  ASSERT_NE(rec, nullptr);
  for (const Dims& dims : {Dims{1536, 16, 4, 0}, Dims{37, 5, 4, 0}}) {
    SCOPED_TRACE(testing::Message() << "e=" << dims.e << " n=" << dims.n);
    const HostLayer layer = MakeLayer(dims, 4, 300 + dims.e);
    // Three sequences padded to a bucket of 4; slot 0 is real every step.
    const std::vector<std::vector<Segment>> calls = {
        {{2, 0, 1}, {0, 1, 1}, {3, 2, 1}, {0, 3, 0}},
        {{0, 0, 1}, {3, 1, 1}, {1, 2, 1}, {0, 3, 0}},
        {{1, 0, 1}, {2, 1, 1}, {0, 2, 1}, {0, 3, 0}},
    };
    std::vector<HostStep> steps;
    for (size_t i = 0; i < calls.size(); ++i) {
      steps.push_back(
          MakeStep(dims, calls[i], 400 + 10 * static_cast<uint32_t>(i)));
    }
    Trace got[3];
    int which = 0;
    for (Backend* be : {cpu.get(), eager.get(), rec.get()}) {
      DeviceLayer l(*be, layer);
      // One set of buffers: a replay reuses the recorded addresses.
      DeviceStep s(*be, dims, 4);
      for (const HostStep& step : steps) {
        s.Load(*be, step);
        ASSERT_TRUE(be->RunCaptured(4, [&] {
                        RunOps(*be, l, s, step.segs);
                        return absl::OkStatus();
                      }).ok());
        got[which].x.push_back(s.x.Read());
        got[which].y.push_back(s.y.Read());
        got[which].arena.push_back(l.arena.Read());
        ASSERT_TRUE(be->TakeError().ok());
      }
      ++which;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      // The same kernels on the same inputs: bit for bit.
      EXPECT_EQ(MaxAbsDiff(got[1].y[i], got[2].y[i]), 0.0f) << "step " << i;
      EXPECT_EQ(MaxAbsDiff(got[1].x[i], got[2].x[i]), 0.0f) << "step " << i;
      EXPECT_EQ(MaxAbsDiff(got[1].arena[i], got[2].arena[i]), 0.0f)
          << "step " << i;
      EXPECT_LT(MaxAbsDiff(got[0].y[i], got[2].y[i]), kTol) << "step " << i;
      EXPECT_LT(MaxAbsDiff(got[0].arena[i], got[2].arena[i]), kTol)
          << "step " << i;
    }
    EXPECT_GT(MaxAbsDiff(got[1].y[0], got[1].y[1]), 0.0f);  // inputs changed
  }
}

}  // namespace
}  // namespace seqboat::gpu_test
