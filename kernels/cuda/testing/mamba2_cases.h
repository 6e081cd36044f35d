// Mamba-2 scan + gated norm cases that the GPU parity test
// (kernels/cuda/mamba2_ops_gpu_test.cc) and the emulation test
// (kernels/cuda/emu/mamba2_kernels_emu_test.cc) both run: a layer's
// parameters and state arena, a step's inputs, the two ops called with the
// layer's strides on any backend, and the comparison over a run of calls.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_MAMBA2_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_MAMBA2_CASES_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity::mamba2 {

// Output rows no segment writes keep this value on both backends.
inline constexpr float kUnwritten = 7.0f;

struct Dims {
  int heads;
  int head_dim;
  int n;       // n_state
  int groups;  // B/C groups and the norm's groups
  int pad;     // floats after each slot's ssm region
  bool clamp;  // Δ clamped to [0.4, 0.8] rather than unbounded
};

inline int64_t DInner(const Dims& d) {
  return static_cast<int64_t>(d.heads) * d.head_dim;
}
// Columns of xBC and of in_proj's output [z ; xBC ; δ], as in
// engine/layers/mamba2.cc.
inline int64_t XbcCols(const Dims& d) {
  return DInner(d) + 2 * static_cast<int64_t>(d.groups) * d.n;
}
inline int64_t ProjCols(const Dims& d) {
  return DInner(d) + XbcCols(d) + d.heads;
}

// A layer's op parameters and its ssm arena: slot s's [heads, head_dim, n]
// state at s * Stride().
struct HostLayer {
  Dims dims;
  int slots = 0;
  std::vector<float> dt_bias, a, d, norm_w, arena;

  int64_t Stride() const { return DInner(dims) * dims.n + dims.pad; }
};

inline HostLayer MakeLayer(const Dims& dims, int slots, uint32_t seed) {
  HostLayer l;
  l.dims = dims;
  l.slots = slots;
  l.dt_bias = Random(dims.heads, seed, -1.0f, 0.5f);
  // mamba_ssm's A = -uniform(1, 16).
  l.a = Random(dims.heads, seed + 1, -16.0f, -1.0f);
  l.d = Random(dims.heads, seed + 2, 0.5f, 1.5f);
  l.norm_w = Random(DInner(dims), seed + 3, 0.5f, 1.5f);
  // Non-zero: the state of earlier steps.
  l.arena = Random(static_cast<size_t>(slots * l.Stride()), seed + 4);
  return l;
}

// One call: its segments and the rows of the packed batch.
struct HostStep {
  std::vector<Segment> segs;
  int rows = 0;
  std::vector<float> xbc;   // [rows, XbcCols]: post-conv x, B, C
  std::vector<float> proj;  // [rows, ProjCols]: the gate z at 0, δ at the end
};

inline HostStep MakeStep(const Dims& dims, std::vector<Segment> segs,
                         uint32_t seed) {
  HostStep s;
  s.segs = std::move(segs);
  s.rows = RowsOf(s.segs);
  const size_t rows = s.rows;
  s.xbc = Random(rows * XbcCols(dims), seed, -1.0f, 1.0f);
  s.proj = Random(rows * ProjCols(dims), seed + 1, -2.0f, 2.0f);
  return s;
}

inline std::vector<HostStep> MakeSteps(
    const Dims& dims, const std::vector<std::vector<Segment>>& calls,
    uint32_t seed) {
  std::vector<HostStep> steps;
  for (const std::vector<Segment>& segs : calls) {
    steps.push_back(MakeStep(dims, segs, seed += 10));
  }
  return steps;
}

struct DeviceLayer {
  DeviceLayer(Backend& be, const HostLayer& l)
      : host(l),
        dt_bias(be, l.dt_bias),
        a(be, l.a),
        d(be, l.d),
        norm_w(be, l.norm_w),
        arena(be, l.arena) {}
  const HostLayer& host;
  Array dt_bias, a, d, norm_w, arena;
};

struct DeviceStep {
  DeviceStep(Backend& be, const Dims& dims, int rows)
      : xbc(be, static_cast<size_t>(rows) * XbcCols(dims)),
        proj(be, static_cast<size_t>(rows) * ProjCols(dims)),
        y(be, std::vector<float>(static_cast<size_t>(rows) * DInner(dims),
                                 kUnwritten)) {}
  void Load(Backend& be, const HostStep& s) {
    be.CopyToDevice(xbc.get(), s.xbc.data(), s.xbc.size() * sizeof(float));
    be.CopyToDevice(proj.get(), s.proj.data(), s.proj.size() * sizeof(float));
  }
  Array xbc, proj;
  Array y;  // the scan's output, then normed in place
};

inline Mamba2ScanParams ScanParams(DeviceLayer& l, DeviceStep& s,
                                   const std::vector<Segment>& segs) {
  const Dims& dims = l.host.dims;
  const int e = static_cast<int>(DInner(dims));
  const int gn = dims.groups * dims.n;
  Mamba2ScanParams p;
  p.segs = segs.data();
  p.nsegs = static_cast<int>(segs.size());
  p.x = s.xbc.get();
  p.b = s.xbc.get() + e;
  p.c = s.xbc.get() + e + gn;
  p.ldxbc = static_cast<int>(XbcCols(dims));
  p.dt = s.proj.get() + e + XbcCols(dims);
  p.lddt = static_cast<int>(ProjCols(dims));
  p.dt_bias = l.dt_bias.get();
  p.a = l.a.get();
  p.d = l.d.get();
  p.dt_min = dims.clamp ? 0.4f : 0.0f;
  p.dt_max = dims.clamp ? 0.8f : std::numeric_limits<float>::infinity();
  p.state = l.arena.get();
  p.state_stride = l.host.Stride();
  p.heads = dims.heads;
  p.head_dim = dims.head_dim;
  p.n_state = dims.n;
  p.groups = dims.groups;
  p.out = s.y.get();
  p.ldo = e;
  return p;
}

// The scan's output normed in place with the gate z, as the layer does.
inline GatedRmsNormParams NormParams(DeviceLayer& l, DeviceStep& s, int rows) {
  const Dims& dims = l.host.dims;
  const int e = static_cast<int>(DInner(dims));
  GatedRmsNormParams p;
  p.y = s.y.get();
  p.ldy = e;
  p.z = s.proj.get();
  p.ldz = static_cast<int>(ProjCols(dims));
  p.w = l.norm_w.get();
  p.n = rows;
  p.d = e;
  p.groups = dims.groups;
  p.eps = 1e-5f;
  p.out = s.y.get();
  p.ldo = e;
  return p;
}

// What one backend produced: per call, the scan's output, the normed output
// and the arena afterwards.
struct Trace {
  std::vector<std::vector<float>> y, o, arena;
};

inline Trace RunSteps(Backend& be, const HostLayer& layer,
                      const std::vector<HostStep>& steps) {
  DeviceLayer l(be, layer);
  Trace t;
  for (const HostStep& step : steps) {
    DeviceStep s(be, layer.dims, step.rows);
    s.Load(be, step);
    be.Mamba2Scan(ScanParams(l, s, step.segs));
    t.y.push_back(s.y.Read());
    be.GatedRmsNorm(NormParams(l, s, step.rows));
    const absl::Status status = be.TakeError();
    EXPECT_TRUE(status.ok()) << status;
    t.o.push_back(s.y.Read());
    t.arena.push_back(l.arena.Read());
  }
  return t;
}

// The case both tests run: `calls` one after another on a layer of `dims`
// over 5 slots, on the reference `ref` and on `dut`, the backend under test.
// After every call the scan's output, the normed output and the whole arena
// are within `bound` of the reference's; the calls moved the state and left
// slot 4, which none of them uses, as it was.
inline void ExpectMatchOverCalls(Backend& ref, Backend& dut, const Dims& dims,
                                 const std::vector<std::vector<Segment>>& calls,
                                 const Bound& bound) {
  SCOPED_TRACE(testing::Message()
               << "heads=" << dims.heads << " head_dim=" << dims.head_dim
               << " n=" << dims.n << " groups=" << dims.groups);
  const HostLayer layer = MakeLayer(dims, 5, 100 + dims.heads + dims.n);
  const std::vector<HostStep> steps = MakeSteps(dims, calls, 200);
  const Trace want = RunSteps(ref, layer, steps);
  const Trace got = RunSteps(dut, layer, steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_TRUE(Within(want.y[i], got.y[i], bound)) << "scan, call " << i;
    EXPECT_TRUE(Within(want.o[i], got.o[i], bound)) << "norm, call " << i;
    EXPECT_TRUE(Within(want.arena[i], got.arena[i], bound))
        << "state, call " << i;
  }
  ExpectStateMovedAndUnusedSlotKept(layer.arena, want.arena.back(),
                                    got.arena.back(), layer.Stride());
}

}  // namespace seqboat::parity::mamba2

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_MAMBA2_CASES_H_
