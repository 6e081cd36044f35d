// Mamba-1 conv + scan cases that the GPU parity test
// (kernels/cuda/mamba_ops_gpu_test.cc) and the emulation test
// (kernels/cuda/emu/mamba_kernels_emu_test.cc) both run: a layer's parameters
// and state arena, a step's inputs, the two ops called with the layer's
// strides on any backend, and the comparison over a run of calls.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_MAMBA_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_MAMBA_CASES_H_

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity::mamba {

// Columns of x_proj's output before B (dt's low-rank input), so B and C start
// at an unaligned column as in the layer.
inline constexpr int kDtRank = 3;
// Output rows no segment writes keep this value on both backends.
inline constexpr float kUnwritten = 7.0f;

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

inline HostLayer MakeLayer(const Dims& dims, int slots, uint32_t seed) {
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

inline HostStep MakeStep(const Dims& dims, std::vector<Segment> segs,
                         uint32_t seed) {
  HostStep s;
  s.segs = std::move(segs);
  s.rows = RowsOf(s.segs);
  const size_t rows = s.rows;
  s.xz = Random(rows * 2 * dims.e, seed, -1.0f, 1.0f);
  s.dt = Random(rows * dims.e, seed + 1, -1.0f, 1.0f);
  s.xdbl = Random(rows * (kDtRank + 2 * dims.n), seed + 2, -1.0f, 1.0f);
  return s;
}

// A step per call, the i-th (from 0) with inputs from seed + 10 * (i + 1).
inline std::vector<HostStep> MakeSteps(
    const Dims& dims, const std::vector<std::vector<Segment>>& calls,
    uint32_t seed) {
  std::vector<HostStep> steps;
  for (const std::vector<Segment>& segs : calls) {
    steps.push_back(MakeStep(dims, segs, seed += 10));
  }
  return steps;
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
inline void RunOps(Backend& be, DeviceLayer& l, DeviceStep& s,
                   const std::vector<Segment>& segs) {
  const int e = l.host.dims.e, n = l.host.dims.n;
  const int nsegs = static_cast<int>(segs.size());
  MambaConvParams conv;
  conv.segs = segs.data();
  conv.nsegs = nsegs;
  conv.x = s.xz.get();
  conv.ldx = 2 * e;
  conv.state = l.arena.get();
  conv.state_stride = l.host.Stride();
  conv.w = l.conv_w.get();
  conv.bias = l.conv_b.get();
  conv.e = e;
  conv.k = l.host.dims.k;
  conv.out = s.x.get();
  be.MambaConv(conv);
  MambaScanParams scan;
  scan.segs = segs.data();
  scan.nsegs = nsegs;
  scan.x = s.x.get();
  scan.dt = s.dt.get();
  scan.bc = s.xdbl.get() + kDtRank;
  scan.ldbc = kDtRank + 2 * n;
  scan.z = s.xz.get() + e;
  scan.ldz = 2 * e;
  scan.a = l.a.get();
  scan.d = l.d.get();
  scan.dt_bias = l.dt_bias.get();
  scan.state = l.arena.get() + l.host.ConvFloats();
  scan.state_stride = l.host.Stride();
  scan.e = e;
  scan.n_state = n;
  scan.out = s.y.get();
  be.MambaScan(scan);
}

// What one backend produced: per call, the conv and scan outputs and the
// arena afterwards.
struct Trace {
  std::vector<std::vector<float>> x, y, arena;
};

// The steps run one after another on `be`, each with buffers of its own size,
// from the layer's initial arena; an op error fails the test.
inline Trace RunSteps(Backend& be, const HostLayer& layer,
                      const std::vector<HostStep>& steps) {
  DeviceLayer l(be, layer);
  Trace t;
  for (const HostStep& step : steps) {
    DeviceStep s(be, layer.dims, step.rows);
    s.Load(be, step);
    RunOps(be, l, s, step.segs);
    const absl::Status status = be.TakeError();
    EXPECT_TRUE(status.ok()) << status;
    t.x.push_back(s.x.Read());
    t.y.push_back(s.y.Read());
    t.arena.push_back(l.arena.Read());
  }
  return t;
}

// The case both tests run: `calls` one after another on a layer of `dims`
// over 5 slots, on the reference `ref` and on `dut`, the backend under test.
// After every call the conv and scan outputs and the whole arena are within
// `bound` of the reference's; the calls moved the state and left slot 4,
// which none of them uses, as it was.
inline void ExpectMatchOverCalls(Backend& ref, Backend& dut, const Dims& dims,
                                 const std::vector<std::vector<Segment>>& calls,
                                 const Bound& bound) {
  SCOPED_TRACE(testing::Message() << "e=" << dims.e << " n=" << dims.n
                                  << " k=" << dims.k << " pad=" << dims.pad);
  const HostLayer layer = MakeLayer(dims, 5, 100 + dims.e + dims.n);
  const std::vector<HostStep> steps = MakeSteps(dims, calls, 200);
  const Trace want = RunSteps(ref, layer, steps);
  const Trace got = RunSteps(dut, layer, steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_TRUE(Within(want.x[i], got.x[i], bound)) << "conv, call " << i;
    EXPECT_TRUE(Within(want.y[i], got.y[i], bound)) << "scan, call " << i;
    EXPECT_TRUE(Within(want.arena[i], got.arena[i], bound))
        << "state, call " << i;
  }
  ExpectStateMovedAndUnusedSlotKept(layer.arena, want.arena.back(),
                                    got.arena.back(), layer.Stride());
}

}  // namespace seqboat::parity::mamba

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_MAMBA_CASES_H_
