// S4D's diagonal recurrence on CUDA equals the CPU backend's: the outputs and
// the whole state arena after each of several calls that mix decode, prefill
// and zero-length padding segments (on a slot a real segment also uses), for
// the register-resident mode counts and the global-memory fallback; and a
// recorded step replayed with new inputs and segments equals running it
// eagerly.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/gpu_test_util.h"

namespace seqboat::gpu_test {
namespace {

constexpr float kTol = 2e-5f;
// Output rows no segment writes keep this value on both backends.
constexpr float kUnwritten = 7.0f;

struct Dims {
  int h;
  int m;   // complex modes
  int ch;  // output copies
  float scale;
  int pad;  // floats after each slot's zeta
};

// An S4D layer's parameters and state arena.
struct HostLayer {
  Dims dims;
  int slots = 0;
  std::vector<float> da, c, d, arena;

  int64_t Stride() const {
    return static_cast<int64_t>(dims.h) * dims.m * 2 + dims.pad;
  }
  int Ldu() const { return dims.h + 5; }  // u is a column slice
};

HostLayer MakeLayer(const Dims& dims, int slots, uint32_t seed) {
  HostLayer l;
  l.dims = dims;
  l.slots = slots;
  const size_t modes = static_cast<size_t>(dims.h) * dims.m;
  // Stable modes, |dA| in [0.3, 0.95], and small C keep zeta and the outputs
  // O(1) (states reach about 4.5, 4.8e-7 an ulp). nvcc contracts the complex
  // recurrence into FMAs the CPU rounds separately: up to 4.2e-6 apart when
  // the kernel ran on the CPU with FMAs. 2e-5 leaves room for that; a wrong
  // index or mode is off by O(1).
  const std::vector<float> mag = Random(modes, seed, 0.3f, 0.95f);
  const std::vector<float> phase = Random(modes, seed + 1, -3.14159f, 3.14159f);
  l.da.resize(2 * modes);
  for (size_t i = 0; i < modes; ++i) {
    l.da[2 * i] = mag[i] * std::cos(phase[i]);
    l.da[2 * i + 1] = mag[i] * std::sin(phase[i]);
  }
  l.c = Random(2 * modes * dims.ch, seed + 2, -0.1f, 0.1f);
  l.d = Random(static_cast<size_t>(dims.ch) * dims.h, seed + 3);
  // Non-zero: the state of earlier steps.
  l.arena = Random(static_cast<size_t>(slots * l.Stride()), seed + 4);
  return l;
}

// One call: its segments and the rows of the packed batch.
struct HostStep {
  std::vector<Segment> segs;
  int rows = 0;
  std::vector<float> u;  // [rows, ldu]
};

HostStep MakeStep(const HostLayer& l, std::vector<Segment> segs,
                  uint32_t seed) {
  HostStep s;
  s.segs = std::move(segs);
  for (const Segment& g : s.segs) {
    s.rows = std::max(s.rows, g.start + std::max(g.len, 1));
  }
  s.u = Random(static_cast<size_t>(s.rows) * l.Ldu(), seed);
  return s;
}

// A layer's parameters and arena on one backend.
struct DeviceLayer {
  DeviceLayer(Backend& be, const HostLayer& l)
      : host(l), da(be, l.da), c(be, l.c), d(be, l.d), arena(be, l.arena) {}
  const HostLayer& host;
  Array da, c, d, arena;
};

// A step's input and output on one backend, sized for `rows`.
struct DeviceStep {
  DeviceStep(Backend& be, const HostLayer& l, int rows)
      : u(be, static_cast<size_t>(rows) * l.Ldu()),
        y(be,
          std::vector<float>(static_cast<size_t>(rows) * l.dims.ch * l.dims.h,
                             kUnwritten)) {}
  void Load(Backend& be, const HostStep& s) {
    be.CopyToDevice(u.get(), s.u.data(), s.u.size() * sizeof(float));
  }
  Array u, y;
};

void RunOp(Backend& be, DeviceLayer& l, DeviceStep& s,
           const std::vector<Segment>& segs) {
  const Dims& dims = l.host.dims;
  be.S4dScan(segs.data(), static_cast<int>(segs.size()), s.u.get(),
             l.host.Ldu(), l.da.get(), l.c.get(), l.d.get(), l.arena.get(),
             l.host.Stride(), dims.h, dims.m, dims.ch, dims.scale, s.y.get());
}

// What one backend produced: per call, the output and the arena afterwards.
struct Trace {
  std::vector<std::vector<float>> y, arena;
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

TEST(S4dOpsGpuTest, MatchesCpuOverMixedSegments) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  // Realistic (d_model 1024, d_state 64 as 32 conjugate-half modes); odd
  // sizes; every register specialisation, with aligned and unaligned slots;
  // several output copies; the global-memory fallback (m = 5, m = 64).
  for (const Dims& dims : {Dims{1024, 32, 1, 2.0f, 0}, Dims{37, 5, 2, 1.0f, 0},
                           Dims{48, 16, 2, 2.0f, 3}, Dims{70, 8, 3, 2.0f, 0},
                           Dims{64, 4, 1, 1.0f, 1}, Dims{40, 64, 1, 1.0f, 0}}) {
    SCOPED_TRACE(testing::Message()
                 << "h=" << dims.h << " m=" << dims.m << " ch=" << dims.ch
                 << " pad=" << dims.pad);
    const HostLayer layer = MakeLayer(dims, 5, 100 + dims.h + dims.m);
    std::vector<HostStep> steps;
    uint32_t seed = 200;
    for (const std::vector<Segment>& segs : MixedCalls()) {
      steps.push_back(MakeStep(layer, segs, seed += 10));
    }
    Trace got[2];
    int which = 0;
    for (Backend* be : {p.cpu.get(), p.cuda.get()}) {
      DeviceLayer l(*be, layer);
      for (const HostStep& step : steps) {
        DeviceStep s(*be, layer, step.rows);
        s.Load(*be, step);
        RunOp(*be, l, s, step.segs);
        got[which].y.push_back(s.y.Read());
        got[which].arena.push_back(l.arena.Read());
        ASSERT_TRUE(be->TakeError().ok());
      }
      ++which;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      EXPECT_LT(MaxAbsDiff(got[0].y[i], got[1].y[i]), kTol) << "call " << i;
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
TEST(S4dOpsGpuTest, ReplayedStepMatchesEager) {
  auto cpu = MakeCpuBackend(1);
  auto eager = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  auto rec = MakeCuda(CudaWeights::kF32, /*graphs=*/true);
  ASSERT_NE(eager, nullptr);
  ASSERT_NE(rec, nullptr);
  for (const Dims& dims :
       {Dims{1024, 32, 1, 2.0f, 0}, Dims{37, 5, 2, 1.0f, 0}}) {
    SCOPED_TRACE(testing::Message() << "h=" << dims.h << " m=" << dims.m);
    const HostLayer layer = MakeLayer(dims, 4, 300 + dims.h);
    // Three sequences padded to a bucket of 4; slot 0 is real every step.
    const std::vector<std::vector<Segment>> calls = {
        {{2, 0, 1}, {0, 1, 1}, {3, 2, 1}, {0, 3, 0}},
        {{0, 0, 1}, {3, 1, 1}, {1, 2, 1}, {0, 3, 0}},
        {{1, 0, 1}, {2, 1, 1}, {0, 2, 1}, {0, 3, 0}},
    };
    std::vector<HostStep> steps;
    for (size_t i = 0; i < calls.size(); ++i) {
      steps.push_back(
          MakeStep(layer, calls[i], 400 + 10 * static_cast<uint32_t>(i)));
    }
    Trace got[3];
    int which = 0;
    for (Backend* be : {cpu.get(), eager.get(), rec.get()}) {
      DeviceLayer l(*be, layer);
      // One set of buffers: a replay reuses the recorded addresses.
      DeviceStep s(*be, layer, 4);
      for (const HostStep& step : steps) {
        s.Load(*be, step);
        ASSERT_TRUE(be->RunCaptured(4, [&] {
                        RunOp(*be, l, s, step.segs);
                        return absl::OkStatus();
                      }).ok());
        got[which].y.push_back(s.y.Read());
        got[which].arena.push_back(l.arena.Read());
        ASSERT_TRUE(be->TakeError().ok());
      }
      ++which;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      // The same kernel on the same inputs: bit for bit.
      EXPECT_EQ(MaxAbsDiff(got[1].y[i], got[2].y[i]), 0.0f) << "step " << i;
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
