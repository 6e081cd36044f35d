// S4D recurrence cases that the GPU parity test
// (kernels/cuda/s4d_ops_gpu_test.cc) and the emulation test
// (kernels/cuda/emu/s4d_kernels_emu_test.cc) both run: a layer's parameters
// and state arena, a step's input, the op called with the layer's strides on
// any backend, and the comparison over a run of calls.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_S4D_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_S4D_CASES_H_

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity::s4d {

// Output rows no segment writes keep this value on both backends.
inline constexpr float kUnwritten = 7.0f;

struct Dims {
  int h;
  int m;   // complex modes
  int ch;  // output copies
  float scale;
  int pad;  // floats after each slot's zeta
  // The folded elementwise step (S4dScanParams).
  Activation act = Activation::kIdentity;
  bool accumulate = false;
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

inline HostLayer MakeLayer(const Dims& dims, int slots, uint32_t seed) {
  HostLayer l;
  l.dims = dims;
  l.slots = slots;
  const size_t modes = static_cast<size_t>(dims.h) * dims.m;
  // Stable modes, |dA| in [0.3, 0.95], and small C keep zeta and the outputs
  // O(1) (states reach about 4.5, 4.8e-7 an ulp), so the tests' absolute
  // tolerances stay meaningful; a wrong index or mode is off by O(1).
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

inline HostStep MakeStep(const HostLayer& l, std::vector<Segment> segs,
                         uint32_t seed) {
  HostStep s;
  s.segs = std::move(segs);
  s.rows = RowsOf(s.segs);
  s.u = Random(static_cast<size_t>(s.rows) * l.Ldu(), seed);
  return s;
}

// A step per call, the i-th (from 0) with its input from seed + 10 * (i + 1).
inline std::vector<HostStep> MakeSteps(
    const HostLayer& l, const std::vector<std::vector<Segment>>& calls,
    uint32_t seed) {
  std::vector<HostStep> steps;
  for (const std::vector<Segment>& segs : calls) {
    steps.push_back(MakeStep(l, segs, seed += 10));
  }
  return steps;
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

inline void RunOp(Backend& be, DeviceLayer& l, DeviceStep& s,
                  const std::vector<Segment>& segs) {
  const Dims& dims = l.host.dims;
  S4dScanParams p;
  p.segs = segs.data();
  p.nsegs = static_cast<int>(segs.size());
  p.u = s.u.get();
  p.ldu = l.host.Ldu();
  p.da = l.da.get();
  p.c = l.c.get();
  p.d = l.d.get();
  p.state = l.arena.get();
  p.state_stride = l.host.Stride();
  p.h = dims.h;
  p.m = dims.m;
  p.ch = dims.ch;
  p.scale = dims.scale;
  p.out = s.y.get();
  p.act = dims.act;
  p.accumulate = dims.accumulate;
  be.S4dScan(p);
}

// What one backend produced: per call, the output and the arena afterwards.
struct Trace {
  std::vector<std::vector<float>> y, arena;
};

// The steps run one after another on `be`, each with buffers of its own size,
// from the layer's initial arena; an op error fails the test.
inline Trace RunSteps(Backend& be, const HostLayer& layer,
                      const std::vector<HostStep>& steps) {
  DeviceLayer l(be, layer);
  Trace t;
  for (const HostStep& step : steps) {
    DeviceStep s(be, layer, step.rows);
    s.Load(be, step);
    RunOp(be, l, s, step.segs);
    const absl::Status status = be.TakeError();
    EXPECT_TRUE(status.ok()) << status;
    t.y.push_back(s.y.Read());
    t.arena.push_back(l.arena.Read());
  }
  return t;
}

// The case both tests run: `calls` one after another on a layer of `dims`
// over 5 slots, on the reference `ref` and on `dut`, the backend under test.
// After every call the output and the whole arena are within `bound` of the
// reference's; the calls moved the state and left slot 4, which none of them
// uses, as it was.
inline void ExpectMatchOverCalls(Backend& ref, Backend& dut, const Dims& dims,
                                 const std::vector<std::vector<Segment>>& calls,
                                 const Bound& bound) {
  SCOPED_TRACE(testing::Message()
               << "h=" << dims.h << " m=" << dims.m << " ch=" << dims.ch
               << " pad=" << dims.pad << " act=" << static_cast<int>(dims.act)
               << " accumulate=" << dims.accumulate);
  const HostLayer layer = MakeLayer(dims, 5, 100 + dims.h + dims.m);
  const std::vector<HostStep> steps = MakeSteps(layer, calls, 200);
  const Trace want = RunSteps(ref, layer, steps);
  const Trace got = RunSteps(dut, layer, steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_TRUE(Within(want.y[i], got.y[i], bound)) << "call " << i;
    EXPECT_TRUE(Within(want.arena[i], got.arena[i], bound))
        << "state, call " << i;
  }
  ExpectStateMovedAndUnusedSlotKept(layer.arena, want.arena.back(),
                                    got.arena.back(), layer.Stride());
}

}  // namespace seqboat::parity::s4d

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_S4D_CASES_H_
